#!/usr/bin/env bash
# `make skew`: the real-plane suites against each supported Kubernetes version, one version
# after the other, each on a plane of its own (e2e/cluster.sh with K8S_VERSION, in its own
# state directory; the default plane is never touched), with a summary table. A failure
# names the version and the suite.
#
# Settings (environment):
#   SKEW_VERSIONS="v1.34.4 v1.35.4 v1.36.3 v1.37.1"   the versions, in this order
#   SKEW_SUITES="runtime podgc ... rkcm"   the suites: a controller crate's name (its
#                          tests/apiserver, package rkcm-<name>) or `rkcm` (the binary's
#                          black-box tier, without real_nodes_* and solo_* tests); default all
#   SKEW_FILTER=...        a test name filter passed to every suite (default none)
#   SKEW_REPORT=...        the summary file (default $TMPDIR/rkcm-skew-$UID/summary.md)
#   SKEW_KEEP_PLANES=1     leave each version's plane running (default: stopped after its run)
#
# Per version the table gives the time of the plane's build (nothing when cached), of its
# start, and of each suite with its test counts. Not here yet: the side-by-side idle and busy
# benchmark per version (issue 52, item 3).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rkcm/target}

VERSIONS=${SKEW_VERSIONS:-v1.34.4 v1.35.4 v1.36.3 v1.37.1}
SUITES=${SKEW_SUITES:-runtime podgc replicaset deployment statefulset daemonset job cronjob ttlafterfinished rkcm}
WORK=${TMPDIR:-/tmp}/rkcm-skew-$(id -u)
REPORT=${SKEW_REPORT:-$WORK/summary.md}
mkdir -p "$WORK"

step() { printf '\n==> [skew %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'skew: error: %s\n' "$*" >&2; exit 1; }

# suite_cmd SUITE: the cargo command of a suite (its tests need the plane: --ignored).
suite_cmd() {
  local filter=()
  [ -z "${SKEW_FILTER:-}" ] || filter=("$SKEW_FILTER")
  case "$1" in
    rkcm) echo cargo test -p rkcm --test rkcm -- --ignored --skip real_nodes --skip solo_ "${filter[@]}" ;;
    *) [ -d "controllers/$1/tests/apiserver" ] || die "no suite $1 (controllers/$1/tests/apiserver)"
       echo cargo test -p "rkcm-$1" --test apiserver -- --ignored "${filter[@]}" ;;
  esac
}

# counts LOG: "P passed, F failed" summed over the log's result lines.
counts() {
  python3 - "$1" <<'PY'
import re, sys
p = f = 0
for m in re.finditer(r"test result: \w+\. (\d+) passed; (\d+) failed;", open(sys.argv[1], errors="replace").read()):
    p += int(m.group(1)); f += int(m.group(2))
print(f"{p} passed, {f} failed")
PY
}

step "build the tests once (cargo test --no-run)"
for s in $SUITES; do
  # shellcheck disable=SC2046
  $(suite_cmd "$s" | sed 's/ -- .*//') --no-run 2>&1 | tail -1 >&2
done

header="| Version | build | plane up |"
sep="| --- | --- | --- |"
for s in $SUITES; do header+=" $s |"; sep+=" --- |"; done
rows=()
failed=()
for v in $VERSIONS; do
  dir=$WORK/plane-$v
  row="| $v |"
  step "$v: build the plane's binaries (cached after the first time)"
  t0=$SECONDS
  if ! K8S_VERSION=$v bash "$here/build.sh" >"$WORK/build-$v.log" 2>&1; then
    tail -20 "$WORK/build-$v.log" >&2
    failed+=("$v build")
    rows+=("$row failed ($WORK/build-$v.log) | | $(for _ in $SUITES; do printf ' |'; done)")
    continue
  fi
  row+=" $((SECONDS - t0))s |"
  step "$v: start its plane in $dir"
  t0=$SECONDS
  if ! K8S_VERSION=$v RKCM_CLUSTER_DIR=$dir REAL_NODES=0 bash "$here/cluster.sh" up >"$WORK/plane-$v.log" 2>&1; then
    tail -20 "$WORK/plane-$v.log" >&2
    failed+=("$v plane")
    rows+=("$row failed ($WORK/plane-$v.log) |$(for _ in $SUITES; do printf ' |'; done)")
    K8S_VERSION=$v RKCM_CLUSTER_DIR=$dir bash "$here/cluster.sh" down >/dev/null 2>&1 || true
    continue
  fi
  row+=" $((SECONDS - t0))s |"
  for s in $SUITES; do
    log=$WORK/$v-$s.log
    step "$v: suite $s (log $log)"
    t0=$SECONDS
    # shellcheck disable=SC2046
    if (eval "$(K8S_VERSION=$v RKCM_CLUSTER_DIR=$dir bash "$here/cluster.sh" env)"; $(suite_cmd "$s")) >"$log" 2>&1; then
      row+=" ok: $(counts "$log") in $((SECONDS - t0))s |"
    else
      row+=" **FAILED**: $(counts "$log") in $((SECONDS - t0))s |"
      failed+=("$v $s ($log)")
      grep -E '^test .* FAILED$|^---- ' "$log" | head -10 >&2 || true
    fi
  done
  rows+=("$row")
  if [ "${SKEW_KEEP_PLANES:-0}" != 1 ]; then
    K8S_VERSION=$v RKCM_CLUSTER_DIR=$dir bash "$here/cluster.sh" down >/dev/null 2>&1 || true
  fi
done

{
  echo "# make skew: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)"
  echo
  echo "$header"
  echo "$sep"
  printf '%s\n' "${rows[@]}"
} >"$REPORT"
cat "$REPORT"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'skew: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
step "every suite passed on every version (summary: $REPORT)"
