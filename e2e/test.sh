#!/usr/bin/env bash
# `make test`: lint, then every test of the workspace, including those that need an API server.
#
# With RKCM_TEST_KUBECONFIG already set, the tests run against that cluster (kind, k3d, ...)
# and no local control plane is started. Otherwise the local control plane is started if it
# does not run yet (with REAL_NODES real nodes, 2 unless set; a running plane with fewer
# gets the missing ones), and stopped afterwards if this script started it.
#
# The real-node tier (tests named real_nodes_*) needs real nodes and fails without them.
# RKCM_SKIP_REAL_NODES=1 leaves it out explicitly (said at the start and in the summary);
# CI never sets it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rkcm/target}

step() { printf '\n==> %s\n' "$*" >&2; }

step "lint: cargo fmt --check, cargo clippy -D warnings, no import circle"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
python3 "$here/import-circles.py" --self-test
python3 "$here/import-circles.py"

# The real-node tier's image holds the dev-profile binary built here (e2e/image.sh).
export RKCM_IMAGE_PROFILE=${RKCM_IMAGE_PROFILE:-dev}

step "build tests and the rkcm binary (black-box tests run it)"
cargo test --workspace --no-run
cargo build -p rkcm

skip_args=()
if [ "${RKCM_SKIP_REAL_NODES:-0}" = 1 ]; then
  step "RKCM_SKIP_REAL_NODES=1: the real-node tier (real_nodes_*) is LEFT OUT of this run"
  skip_args=(--skip real_nodes)
  export REAL_NODES=0
else
  export REAL_NODES=${REAL_NODES:-2}
fi

started=0
if [ -z "${RKCM_TEST_KUBECONFIG:-}" ]; then
  if ! bash "$here/cluster.sh" env >/dev/null 2>&1 || ! (eval "$(bash "$here/cluster.sh" env)"; kubectl get --raw /readyz >/dev/null 2>&1); then
    step "start the local control plane"
    bash "$here/cluster.sh" up
    started=1
  else
    step "using the running local control plane"
    [ "$REAL_NODES" = 0 ] || bash "$here/cluster.sh" up
  fi
  trap '[ "$started" = 1 ] && { step "stop the local control plane"; bash "$here/cluster.sh" down; }' EXIT
  eval "$(bash "$here/cluster.sh" env)"
else
  step "using the cluster in RKCM_TEST_KUBECONFIG=$RKCM_TEST_KUBECONFIG"
fi

if [ "${RKCM_SKIP_REAL_NODES:-0}" != 1 ]; then
  step "the rkcm image for the real-node tier (e2e/image.sh, $RKCM_IMAGE_PROFILE profile)"
  bash "$here/image.sh" rkcm:upgrade-test >/dev/null
fi

step "tests (unit and apiserver; RKCM_TEST_JOBS=${RKCM_TEST_JOBS:-1} test binaries at a time)"
python3 "$here/run-tests.py" "${skip_args[@]}"
[ "${RKCM_SKIP_REAL_NODES:-0}" != 1 ] || step "note: the real-node tier was left out (RKCM_SKIP_REAL_NODES=1)"
