#!/usr/bin/env bash
# Builds the pinned upstream binaries (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubelet, kubectl, kwok, helm) from Go modules into a cache under $HOME.
# Prints the binary directory on the last line of stdout. Re-runs are cheap: a finished
# build is detected by version checks, and the Go build cache makes rebuilds fast.
# K8S_VERSION=v1.35.4 (or v1.35) builds that version instead of the pin (e2e/versions.env);
# each version has its own cache directory.
#
#   e2e/build.sh          build (or find) every binary
#   e2e/build.sh module   only prepare the Go module that builds Kubernetes K8S_VERSION and
#                         print its directory (e2e/gen-gates.sh runs code in it)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

CACHE=${RKCM_E2E_CACHE:-$HOME/.cache/rkcm-e2e}
OUT=${RKCM_E2E_BIN:-$CACHE/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-helm-$HELM_VERSION}
SRC=$CACHE/src
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'build: error: %s\n' "$*" >&2; exit 1; }
command -v go >/dev/null || die "go is not on PATH; the control plane is built from Go modules"
command -v python3 >/dev/null || die "python3 is needed to read module metadata"
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

have() { # have BIN EXPECTED-SUBSTRING: the binary exists and reports the pinned version
  local v
  [ -x "$OUT/$1" ] || return 1
  v=$("$OUT/$1" "${@:3}" 2>/dev/null) || return 1
  [[ $v == *"$2"* ]]
}

mkdir -p "$SRC"
start=$(date +%s)

# ---------- Kubernetes: wrapper module requiring k8s.io/kubernetes, every staging repo replaced ----------
K8S_TOOLS="kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet"
W=$SRC/k8s-$K8S_VERSION
k8s_module_ready=0
# k8s_module: the wrapper module in $W (its go.mod lists every command as a tool) and the
# version flags in $vf; done once per run, only when something has to be compiled.
k8s_module() {
  [ "$k8s_module_ready" = 1 ] && return 0
  local minor staging dl err kk_gomod commit build_date kk go_line godebugs mods p c
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  staging=v0.${K8S_VERSION#v1.}
  mkdir -p "$W"
  log "kubernetes $K8S_VERSION: resolving modules (first time: downloads ~1-2 GB)"
  dl=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION") || true
  err=$(echo "$dl" | json 'd.get("Error","")')
  [ -z "$err" ] || die "cannot download k8s.io/kubernetes@$K8S_VERSION: $err (change K8S_VERSION in e2e/versions.env)"
  kk_gomod=$(echo "$dl" | json 'd["GoMod"]')
  commit=$(echo "$dl" | json 'd.get("Origin",{}).get("Hash","")')
  build_date=$(go list -m -json "k8s.io/kubernetes@$K8S_VERSION" | json 'd["Time"]')
  kk=$(go mod edit -json "$kk_gomod")
  go_line=$(echo "$kk" | json 'd["Go"]')
  godebugs=$(echo "$kk" | json '" ".join(g["Key"]+"="+g["Value"] for g in (d.get("Godebug") or []))')
  mods=$(echo "$kk" | json '" ".join(r["Path"] for r in d["Require"] if r["Path"].startswith("k8s.io/") and r["Version"]=="v0.0.0")')
  ( cd "$W"
    rm -f go.mod go.sum
    go mod init rkcm.local/k8sbins >/dev/null 2>&1
    go mod edit -go="$go_line"
    for g in $godebugs; do go mod edit -godebug="$g"; done
    go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
    for m in $mods; do go mod edit -replace="$m=$m@$staging"; done
    for c in $K8S_TOOLS; do go mod edit -tool="k8s.io/kubernetes/cmd/$c"; done
    go mod tidy ) || die "preparing the Kubernetes wrapper module in $W failed"
  vf=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    vf+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    vf+=" -X $p.gitTreeState=clean -X $p.buildDate=$build_date"
    [ -n "$commit" ] && vf+=" -X $p.gitCommit=$commit"
  done
  k8s_module_ready=1
}

k8s_build() { # k8s_build COMMAND
  k8s_module
  log "kubernetes $K8S_VERSION: compiling $1 (cold: several minutes)"
  local t0; t0=$(date +%s)
  ( cd "$W" && go build -trimpath -tags=selinux,notest -ldflags="-s -w$vf" -o "$OUT/$1.new" "k8s.io/kubernetes/cmd/$1" ) ||
    die "compiling $1 failed"
  # Moved in place: a running plane may be using the old binary.
  mv -f "$OUT/$1.new" "$OUT/$1"
  log "kubernetes $K8S_VERSION: $1 done in $(( $(date +%s) - t0 ))s"
}

if [ "${1:-}" = module ]; then
  # A module prepared before (perhaps by a build still running) is used as it is.
  grep -q "k8s.io/kubernetes $K8S_VERSION" "$W/go.mod" 2>/dev/null && [ -s "$W/go.sum" ] || k8s_module
  echo "$W"
  exit 0
fi

mkdir -p "$OUT"
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
  if have "$c" "Kubernetes $K8S_VERSION" --version; then log "$c $K8S_VERSION: cached"; else k8s_build "$c"; fi
done
if have kubectl "$K8S_VERSION" version --client; then log "kubectl $K8S_VERSION: cached"; else k8s_build kubectl; fi

# ---------- etcd: own wrapper module (its server module has replace directives) ----------
if have etcd "etcd Version: ${ETCD_VERSION#v}" --version; then
  log "etcd $ETCD_VERSION: cached"
else
  E=$SRC/etcd-$ETCD_VERSION; mkdir -p "$E"
  log "etcd $ETCD_VERSION: building"
  ( cd "$E"
    rm -f go.mod go.sum
    go mod init rkcm.local/etcdbin >/dev/null 2>&1
    go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION" -tool=go.etcd.io/etcd/server/v3
    go mod tidy
    sha=$(go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | json 'd.get("Origin",{}).get("Hash","")')
    go build -trimpath -ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${sha:-module}" \
      -o "$OUT/etcd" go.etcd.io/etcd/server/v3 )
fi

# ---------- kwok, built from its module with one change ----------
# kwok deletes a pod that shows a deletionTimestamp by name only. Its delete can come late
# (queued behind other stages), and then removes a pod re-created under the same name in the
# meantime (a StatefulSet's pod, a test's pod): the simulator replaced pods no manager asked to
# replace. A kubelet deletes with the pod's UID as precondition; the built kwok does the same
# (a late delete then fails with a conflict, which kwok does not retry). The marker file records
# that the binary in $OUT has the change.
KWOK_MARK=$OUT/kwok.uid-precondition
if have kwok "${KWOK_VERSION#v}" --version && [ -f "$KWOK_MARK" ]; then
  log "kwok $KWOK_VERSION: cached"
else
  log "kwok $KWOK_VERSION: building (pod deletes with a UID precondition)"
  kmod=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | json 'd["Dir"]')
  K=$SRC/kwok-$KWOK_VERSION
  rm -rf "$K"; cp -r "$kmod" "$K"; chmod -R u+w "$K"
  python3 - "$K/pkg/kwok/controllers/pod_controller.go" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
call = "Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)"
if text.count(call) != 1:
    sys.exit(f"kwok: expected one pod delete call in {path}, found {text.count(call)}")
text = text.replace(call, "Pods(pod.Namespace).Delete(ctx, pod.Name, withUID(deleteOpt, pod.UID))")
text += """
// withUID: the delete options with the pod's UID as precondition (added by rkcm's e2e build).
func withUID(opt metav1.DeleteOptions, uid types.UID) metav1.DeleteOptions {
	opt.Preconditions = metav1.NewUIDPreconditions(string(uid))
	return opt
}
"""
if '"k8s.io/apimachinery/pkg/types"' not in text:
    text = text.replace("import (\n", 'import (\n\t"k8s.io/apimachinery/pkg/types"\n', 1)
open(path, "w").write(text)
PY
  # Built beside and moved in place: a plane may be running the old binary.
  ( cd "$K" && go build -trimpath -ldflags="-s -w" -o "$OUT/kwok.new" ./cmd/kwok )
  mv -f "$OUT/kwok.new" "$OUT/kwok"
  touch "$KWOK_MARK"
fi

# ---------- helm ----------
if have helm "$HELM_VERSION" version; then
  log "helm $HELM_VERSION: cached"
else
  log "helm $HELM_VERSION: building"
  GOBIN="$OUT" go install -trimpath \
    -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
fi

# ---------- kwok stages: the simulated kubelet's behaviour, taken from the pinned kwok module ----------
# node-initialize + heartbeat-with-lease: annotated nodes become Ready and keep a Lease.
# pod-ready / pod-complete / pod-delete (the "fast" set): pods Running and Ready at once,
# Job-owned pods Succeeded, pods with a deletionTimestamp removed as a kubelet would.
# pod-container-running-failed (chaos): pods labelled
# pod-container-running-failed.stage.kwok.x-k8s.io=true fail with the exit code in the
# annotation pod-container-running-failed.stage.kwok.x-k8s.io/exit-code.
if [ ! -s "$OUT/kwok-stages.yaml" ]; then
  kdir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | json 'd["Dir"]')
  st=$kdir/kustomize/stage
  { for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml \
             pod/chaos/pod-container-running-failed.yaml; do
      [ -f "$st/$f" ] || die "kwok stage $f not found in $st"
      echo "---"; cat "$st/$f"
    done; } > "$OUT/kwok-stages.yaml.tmp"
  mv "$OUT/kwok-stages.yaml.tmp" "$OUT/kwok-stages.yaml"
fi

for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kwok helm; do
  [ -x "$OUT/$b" ] || die "$b missing in $OUT after build"
done
log "all binaries ready in $(( $(date +%s) - start ))s"
echo "$OUT"
