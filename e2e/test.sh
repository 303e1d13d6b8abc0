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

# Each step says how long the run has taken so far (the phases of a fresh machine's run).
step() { printf '\n==> [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

# The plane's Go binaries build beside the Rust build: each leaves a core idle for long
# stretches (a crate or a binary linking alone), so together they take far less than one
# after the other on a fresh machine.
plane_build=""
if [ -z "${RKCM_TEST_KUBECONFIG:-}" ]; then
  plane_log=$(mktemp "${TMPDIR:-/tmp}/rkcm-plane-build.XXXXXX")
  step "build the plane's binaries in the background (e2e/build.sh, log $plane_log)"
  bash "$here/build.sh" >"$plane_log" 2>&1 &
  plane_build=$!
  # A failing lint or build ends the run; the background build goes with it.
  trap 'kill "$plane_build" 2>/dev/null || true' EXIT
fi

step "lint: cargo fmt --check, cargo clippy -D warnings, no import circle, the test runner's self-test"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
python3 "$here/import-circles.py" --self-test
python3 "$here/run-tests.py" --self-test
python3 "$here/import-circles.py"

# The real-node tier's image holds the dev-profile binary built here (e2e/image.sh).
export RKCM_IMAGE_PROFILE=${RKCM_IMAGE_PROFILE:-dev}

step "build tests and the rkcm binary (black-box tests run it)"
cargo test --workspace --no-run
cargo build -p rkcm

# The simulator binary the sim tests use has every mutant compiled in (sim/mutants.sh).
step "simulator mutation check: every mutant caught by its invariant within its seed budget"
SIM_BIN="$CARGO_TARGET_DIR/debug/rkcm-sim" SIM_MUTANT_REPORT="$(mktemp "${TMPDIR:-/tmp}/rkcm-sim-mutants.XXXXXX.md")" \
  bash sim/mutants.sh

skip_args=()
if [ "${RKCM_SKIP_REAL_NODES:-0}" = 1 ]; then
  step "RKCM_SKIP_REAL_NODES=1: the real-node tier (real_nodes_*) is LEFT OUT of this run"
  skip_args=(--skip real_nodes)
  export REAL_NODES=0
else
  export REAL_NODES=${REAL_NODES:-2}
fi

if [ -n "$plane_build" ]; then
  step "wait for the plane's binaries"
  if ! wait "$plane_build"; then
    tail -30 "$plane_log" >&2
    printf 'test: building the plane failed; log: %s\n' "$plane_log" >&2
    exit 1
  fi
  rm -f "$plane_log"
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
step "done"
