#!/usr/bin/env bash
# Writes src/cli/gates/table/v1_<minor>.rs, kube-controller-manager's feature-gate registry of
# each supported Kubernetes version, from that version's source (e2e/gengates, run in the
# Go module e2e/build.sh prepares for the version; no Kubernetes binary is built).
#
#   e2e/gen-gates.sh                   every supported version (below)
#   e2e/gen-gates.sh v1.35.4 ...       these versions
#
# The tests in src/cli/gates/upstream.rs check a table against that version's
# kube-controller-manager binary (--help and /metrics).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
SUPPORTED="v1.34.4 v1.35.4 v1.36.3 v1.37.1"
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0

log() { printf '[gen-gates %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'gen-gates: error: %s\n' "$*" >&2; exit 1; }

[ $# -gt 0 ] || set -- $SUPPORTED
for v in "$@"; do
  minor=${v#v1.}; minor=${minor%%.*}
  [[ $minor =~ ^[0-9]+$ ]] || die "not a Kubernetes version: $v"
  W=$(K8S_VERSION=$v bash "$here/build.sh" module | tail -1)
  [ -f "$W/go.mod" ] || die "no Go module for $v in $W"
  rm -rf "$W/gengates"; mkdir -p "$W/gengates"
  cp "$here/gengates/main.go" "$W/gengates/main.go"
  out=$root/src/cli/gates/table/v1_$minor.rs
  # The defaults kube-controller-manager's options override (NAME=BOOL@VERSION).
  kk=$(cd "$W" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  overrides=$(python3 - "$kk/cmd/kube-controller-manager/app/options/options.go" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
pat = re.compile(r'version\.MustParse\("([0-9.]+)"\)\s*if err := utilfeature\.DefaultMutableFeatureGate\.'
                 r'OverrideDefaultAtVersion\(featuregate\.Feature\(\w+\.(\w+)\), (true|false), ver\)')
found = pat.findall(text)
if len(found) != text.count("OverrideDefault"):
    sys.exit(f"{sys.argv[1]}: an OverrideDefault call the generator does not understand")
print(" ".join(f"{name}={value}@{ver}" for ver, name, value in found))
PY
) || die "reading kube-controller-manager's default overrides of $v"
  log "$v: reading the registry (kube-controller-manager's overrides: ${overrides:-none})"
  # shellcheck disable=SC2086
  ( cd "$W" && go run -trimpath ./gengates "$v" $overrides ) >"$out.tmp" || die "running the generator for $v failed"
  rm -rf "$W/gengates"
  mv "$out.tmp" "$out"
  log "$v: $(grep -c '^    gate(' "$out") gates, $(grep -c '^    ("' "$out") dependencies -> ${out#"$root"/}"
done
