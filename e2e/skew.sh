#!/usr/bin/env bash
# `make skew`: the real-plane suites against each supported Kubernetes version, one version
# after the other, each on a plane of its own (e2e/cluster.sh with K8S_VERSION, in its own
# state directory; the default plane is never touched), with a summary table. A failure
# names the version and the suite.
#
# Settings (environment):
#   SKEW_VERSIONS="v1.34.4 v1.35.4 v1.36.3 v1.37.1"   the versions, in this order
#   SKEW_SUITES="gates runtime podgc ... rkcm"   the suites: `gates` (the minor's gate table
#                          against that version's kube-controller-manager), a controller
#                          crate's name (its tests/apiserver, package rkcm-<name>) or `rkcm`
#                          (the binary's black-box tier, without real_nodes_* and solo_*
#                          tests); default all
#   SKEW_FILTER=...        a test name filter passed to every suite (default none)
#   SKEW_REPORT=...        the summary file (default $TMPDIR/rkcm-skew-$UID/summary.md)
#   SKEW_KEEP_PLANES=1     leave each version's plane running (default: stopped after its run)
#   SKEW_BENCH=0           leave out the benchmark per version (default: run it)
#   SKEW_BENCH_SCENARIOS=idle-empty,idle,deployment   its scenarios (e2e/bench.sh names)
#
# Per version the table gives the time of the plane's build (nothing when cached), of its
# start, and of each suite with its test counts. Then, per version, the benchmark beside that
# version's own kube-controller-manager (e2e/bench.sh on a benchmark plane of that version,
# small sizes, upstream first): each manager's API requests per minute while idle and over the
# whole run of each scenario; the run fails when rkcm's idle requests per minute exceed
# upstream's (a write loop on a field the server drops shows there first).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rkcm/target}

VERSIONS=${SKEW_VERSIONS:-v1.34.4 v1.35.4 v1.36.3 v1.37.1}
SUITES=${SKEW_SUITES:-gates runtime podgc replicaset deployment statefulset daemonset job cronjob ttlafterfinished rkcm}
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
    # The gate table of the version's minor against that version's kube-controller-manager
    # (its --help and /metrics; RKCM_E2E_BIN is the version's binaries).
    gates) echo cargo test -p rkcm --bin rkcm -- --ignored gates::upstream ;;
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

# bench_rows V DIR: the benchmark table's rows of version V from the scenario results in DIR;
# exit 1 when rkcm's idle requests per minute exceed upstream's in a scenario.
bench_rows() {
  python3 - "$1" "$2" <<'PY'
import glob, json, sys
version, results = sys.argv[1], sys.argv[2]
worse = []
for path in sorted(glob.glob(f"{results}/*.json")):
    d = json.load(open(path))
    runs = {r["manager"]: r for r in d.get("runs", []) if r.get("status") == "ok"}
    if set(runs) != {"upstream", "rkcm"}:
        print(f"| {version} | {d.get('scenario')} | not both managers ok: "
              f"{[(r['manager'], r.get('status'), r.get('message', '')[:80]) for r in d.get('runs', [])]} | | | |")
        worse.append(d.get("scenario"))
        continue
    def idle(r):
        ph = [p for p in r.get("phases", []) if p["name"].startswith("idle")]
        secs = sum(p["seconds"] for p in ph)
        reqs = sum(p["requests"]["total"] for p in ph)
        return (reqs / secs * 60) if secs else None
    def whole(r):
        return r["requests"]["total"] / r["run_seconds"] * 60
    iu, ir = idle(runs["upstream"]), idle(runs["rkcm"])
    cell = lambda v: "—" if v is None else f"{v:.1f}"
    print(f"| {version} | {d['scenario']} | {runs['upstream']['version']} | "
          f"{cell(iu)} / {cell(ir)} | {whole(runs['upstream']):.1f} / {whole(runs['rkcm']):.1f} | "
          f"{runs['upstream']['requests']['total']} / {runs['rkcm']['requests']['total']} |")
    if iu is not None and ir is not None and ir > iu:
        worse.append(d["scenario"])
sys.exit(1 if worse else 0)
PY
}

bench_header="| Version | scenario | upstream manager | idle requests/min (upstream / rkcm) | requests/min over the run | requests (upstream / rkcm) |"
bench_sep="| --- | --- | --- | --- | --- | --- |"
bench=()
if [ "${SKEW_BENCH:-1}" != 0 ]; then
  for v in $VERSIONS; do
    case " ${failed[*]:-} " in *" $v build"*|*" $v plane"*) continue ;; esac
    out=$WORK/bench-$v
    rm -rf "$out"
    step "$v: benchmark beside kube-controller-manager $v (log $WORK/bench-$v.log)"
    t0=$SECONDS
    if ! K8S_VERSION=$v RKCM_BENCH_CLUSTER_DIR=$WORK/bench-plane-$v BENCH_WORK=$WORK/bench-work-$v \
        BENCH_REPORT=$out/report.md BENCH_SCENARIOS=${SKEW_BENCH_SCENARIOS:-idle-empty,idle,deployment} \
        IDLE_NODES=${IDLE_NODES:-100} IDLE_PODS=${IDLE_PODS:-1000} IDLE_SECONDS=${IDLE_SECONDS:-120} \
        DEPLOY_COUNT=${DEPLOY_COUNT:-20} DEPLOY_REPLICAS=${DEPLOY_REPLICAS:-5} \
        bash "$here/bench.sh" >"$WORK/bench-$v.log" 2>&1; then
      tail -20 "$WORK/bench-$v.log" >&2
      failed+=("$v bench ($WORK/bench-$v.log)")
      bench+=("| $v | bench failed ($WORK/bench-$v.log) | | | | |")
      continue
    fi
    if rows_v=$(bench_rows "$v" "$out/report"); then :; else
      failed+=("$v bench: rkcm's idle requests per minute above upstream's")
    fi
    while IFS= read -r line; do bench+=("$line"); done <<<"$rows_v"
    step "$v: benchmark done in $((SECONDS - t0))s"
  done
fi

{
  echo "# make skew: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)"
  echo
  echo "$header"
  echo "$sep"
  printf '%s\n' "${rows[@]}"
  if [ ${#bench[@]} -gt 0 ]; then
    echo
    echo "Benchmark beside each version's kube-controller-manager (e2e/bench.sh, upstream first):"
    echo
    echo "$bench_header"
    echo "$bench_sep"
    printf '%s\n' "${bench[@]}"
  fi
} >"$REPORT"
cat "$REPORT"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'skew: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
step "every suite passed on every version (summary: $REPORT)"
