#!/usr/bin/env bash
# `make test`: lint, then every test of the workspace, including those that need an API server.
#
# With RKCM_TEST_KUBECONFIG already set, the tests run against that cluster (kind, k3d, ...)
# and no local control plane is started. Otherwise the local control plane is started if it
# does not run yet, and stopped afterwards if this script started it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rkcm/target}

step() { printf '\n==> %s\n' "$*" >&2; }

step "lint: cargo fmt --check, cargo clippy -D warnings"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings

step "build tests and the rkcm binary (black-box tests run it)"
cargo test --workspace --no-run
cargo build -p rkcm

started=0
if [ -z "${RKCM_TEST_KUBECONFIG:-}" ]; then
  if ! bash "$here/cluster.sh" env >/dev/null 2>&1 || ! (eval "$(bash "$here/cluster.sh" env)"; kubectl get --raw /readyz >/dev/null 2>&1); then
    step "start the local control plane"
    bash "$here/cluster.sh" up
    started=1
  else
    step "using the running local control plane"
  fi
  trap '[ "$started" = 1 ] && { step "stop the local control plane"; bash "$here/cluster.sh" down; }' EXIT
  eval "$(bash "$here/cluster.sh" env)"
else
  step "using the cluster in RKCM_TEST_KUBECONFIG=$RKCM_TEST_KUBECONFIG"
fi

step "tests (unit and apiserver; RKCM_TEST_JOBS=${RKCM_TEST_JOBS:-1} test binaries at a time)"
python3 "$here/run-tests.py"
