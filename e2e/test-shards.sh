#!/usr/bin/env bash
# `make test-shards`: every controller's real-plane suite with each controller running as
# three sharded replicas (RKCM_TEST_SHARD_REPLICAS, rkcm_testkit::harness::Controllers): the
# replicas split a ring of RKCM_TEST_SHARD_RANGES ranges (8) over real Leases in each test's
# namespace, so every test passes only if the replicas take, hold and hand over its
# namespace correctly. Uses the running local plane (e2e/cluster.sh up) or brings one up.
# Not part of `make test` (about 15 more minutes).
#
#   RKCM_TEST_SHARD_REPLICAS=3 RKCM_TEST_SHARD_RANGES=8 RKCM_TEST_JOBS=1
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rkcm/target}
export RKCM_TEST_SHARD_REPLICAS=${RKCM_TEST_SHARD_REPLICAS:-3}
export RKCM_TEST_SHARD_RANGES=${RKCM_TEST_SHARD_RANGES:-8}
export REAL_NODES=${REAL_NODES:-0}

cargo test --workspace --no-run
started=0
if ! bash "$here/cluster.sh" env >/dev/null 2>&1 || ! (eval "$(bash "$here/cluster.sh" env)"; kubectl get --raw /readyz >/dev/null 2>&1); then
  bash "$here/cluster.sh" up
  started=1
fi
trap '[ "$started" = 1 ] && bash "$here/cluster.sh" down' EXIT
eval "$(bash "$here/cluster.sh" env)"
echo "test-shards: $RKCM_TEST_SHARD_REPLICAS sharded replicas of every controller, ring of $RKCM_TEST_SHARD_RANGES ranges" >&2
# The real-node tier starts rkcm as a process of its own, not sharded: left out here.
RKCM_TEST_TARGETS=apiserver python3 "$here/run-tests.py" --skip real_nodes
