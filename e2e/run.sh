#!/usr/bin/env bash
# `make run`: build rkcm, bring up the local control plane (upstream kube-controller-manager
# there runs everything except rkcm's controllers), and run rkcm against it in the foreground.
# Extra rkcm flags: make run ARGS="--controllers=podgc -v=2"
# Real nodes (kubelets running real containers; root only): make run REAL_NODES=1
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rkcm/target}

printf '==> build rkcm (release)\n' >&2
cargo build --release -p rkcm
bash "$here/cluster.sh" up
eval "$(bash "$here/cluster.sh" env)"

port=${RKCM_PORT:-10257}
printf '%s\n' "" \
  "==> rkcm runs in the foreground (Ctrl-C stops it and releases its lease). In another terminal:" \
  "  eval \"\$(make -s cluster-env)\"" \
  "  kubectl get lease -n kube-system rkcm -o yaml     # who leads" \
  "  kubectl get pods -A -w                            # watch the controllers work" \
  "  curl -sk https://127.0.0.1:$port/healthz" \
  "  curl -sk --cert $RKCM_CLUSTER_DIR/pki/admin.crt --key $RKCM_CLUSTER_DIR/pki/admin.key \\" \
  "    https://127.0.0.1:$port/metrics | grep -E '^(workqueue|pod_gc|leader)'" \
  "  make cluster-down                                 # when done" "" >&2
if [ "${REAL_NODES:-0}" -gt 0 ]; then
  printf '%s\n' \
    "==> real nodes: $(kubectl get nodes -l type=real -o name | tr '\n' ' ')" \
    "  kubectl apply -f e2e/examples/real-web.yaml        # two httpd pods on the real nodes" \
    "  kubectl rollout status deployment/real-web" \
    "  kubectl get pods -l app=real-web -o wide" \
    "  kubectl logs deployment/real-web                   # the container's output, from its kubelet" \
    "  kubectl exec -it deployment/real-web -- sh          # a shell in the container (busybox nc, httpd, ...)" \
    "  kubectl set image deployment/real-web web=httpd:latest   # a rolling update rkcm drives" \
    "" >&2
fi
# shellcheck disable=SC2086
# /metrics needs an authorized identity, as upstream: the plane's admin certificate (group
# system:masters) is accepted through --client-ca-file; tokens are reviewed through the
# plane's kubeconfig.
exec "$CARGO_TARGET_DIR/release/rkcm" --kubeconfig "$KUBECONFIG" \
  --authentication-kubeconfig "$KUBECONFIG" --authorization-kubeconfig "$KUBECONFIG" \
  --client-ca-file "$RKCM_CLUSTER_DIR/pki/ca.crt" \
  --bind-address=127.0.0.1 --secure-port="$port" ${ARGS:-}
