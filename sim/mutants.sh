#!/usr/bin/env bash
# The simulator's mutation check (`make sim-mutants`; `make test` runs it too): builds
# rkcm-sim once, with every deliberate bug of `rkcm_runtime::mutants` compiled in, then for
# each mutant runs the scenario it is caught in (`--mutant NAME`) over seeds 0.. until the
# first seed where the invariant named for it breaks (`--expect`), up to the mutant's stated
# seed budget, and writes a table of mutant, seeds to the catch, the invariant and the replay
# command to REPORT.
#
# Exits non-zero if a mutant survives its budget: the simulator no longer catches that bug
# with the check that is meant to.
#
# SIM_MUTANT_SEEDS=N replaces every stated budget with N; SIM_MUTANT_REPORT=path writes the
# report elsewhere (`make test` writes it to a temporary file); SIM_BIN=path uses a simulator
# binary already built (built with the sim crate's features, e.g. by `cargo test --no-run`).
set -euo pipefail

cd "$(dirname "$0")/.."
REPORT=${SIM_MUTANT_REPORT:-bench/reports/sim-mutants.md}
CARGO=${CARGO:-cargo}

# mutant scenario budget invariant what-it-breaks
MUTANTS=(
  "no-expectations replicaset 20 ReplicaSetAboveReplicas expectations off: a sync creates or deletes pods while its own earlier creates and deletes are not yet in the cache"
  "no-stale-guard deployment 60 DeploymentAboveSurge the stale-cache guard off: a sync acts on caches older than the controller's own last writes"
  "deployment-ignore-min-available deployment 20 DeploymentScaleDownBelowMinAvailable the Deployment controller scales old ReplicaSets down without regard to replicas - maxUnavailable"
  "deployment-rollback-ignores-opt-in deployment-rollback 20 DeploymentRollbackNotAsked the rollback on progress deadline takes every Deployment for opted in: a Deployment not asking for it is rolled back"
  "deployment-rollback-loop deployment-rollback 40 DeploymentRollbackLoop the rollback on progress deadline forgets its record (the revision rolled back from, and that its own result is not rolled back): a rollback whose target stalls too is rolled back again, and again"
  "deployment-rollback-to-unavailable deployment-rollback 20 NotConvergedAfterFaults the rollback on progress deadline returns to the newest old revision, worked or not (kubectl rollout undo's choice): a revision a person left before it worked is rolled back to and stays"
  "deployment-keeps-previous-rollout-condition deployment-rollback 40 DeploymentProgressAboutAnotherReplicaSet the Deployment controller keeps the previous rollout's NewReplicaSetAvailable when the status write of a new ReplicaSet's NewReplicaSetCreated was lost (upstream's rule): that rollout never passes its deadline, and a broken one is never rolled back"
  "daemonset-replace-terminating daemonset 20 DaemonSetTwoLivePodsOnNode the DaemonSet controller counts a terminating pod as gone and starts its replacement (maxSurge 0) while its containers still run"
  "sts-early-replacement statefulset 20 ForceDeleteOnLiveNode StatefulSet pod deletes without a grace period: the replacement of an identity is created while the old pod's containers may still run"
  "sts-force-delete-cut-off statefulset 40 StatefulSetIdentityRunningTwice the StatefulSet controller deletes a pod that is not ready (its node may be cut off) without a grace period and starts the replacement while the old containers run there"
  "sts-recover-ready-pod statefulset 40 StatefulSetRecoveryUnsafe the StatefulSet stuck-rollout recovery takes a Ready pod (one waiting out minReadySeconds) for stuck and deletes it"
  "job-count-before-finalizer job 100 JobCountAboveTerminatedPods the Job controller counts a finished pod before its tracking finalizer is removed"
  "cronjob-job-name-from-clock cronjob 20 CronJobSlotTwice the CronJob controller names a Job for the moment of the sync, not its scheduled time"
  "podgc-no-uid-precondition podgc 20 ForceDeleteOutsidePodGcRules PodGC's status write and force delete without the pod's UID: a pod re-created under the same name can be failed and deleted"
  "podgc-orphans-from-cache podgc 40 FailedOutsidePodGcRules PodGC takes a node missing from its cache for deleted, without the quarantine and the live GET, and fails and deletes its pods"
  "podgc-out-of-service-without-taint podgc 40 FailedOutsidePodGcRules PodGC's out-of-service rule without the taint: terminating pods of any not-ready node are failed and force-deleted while their containers may run"
  "ttl-no-version-precondition ttlafterfinished 80 JobDeletedBeforeTtl the TTL controller deletes a Job with its UID alone as precondition: a Job whose TTL was just raised goes on its cached copy's TTL"
  "shard-range-without-lease sharded-2 20 ShardWriteOutsideLeaseTerm a sharded replica acts on a range as long as the range is in its held set, its window closed or not (workers and write fence alike): a replica whose lease renewals stall keeps writing after its lease ran out and another replica took the range"
  "shard-take-without-fence sharded-3 150 ShardLeaseTermsOverlap a sharded replica takes a range of a member session that ran a lease duration without change without fencing that session's member Lease first: a renewal of the session that was only late lands just before the take, and the session's holder keeps the range while the taker holds it too"
)

if [[ -z "${SIM_BIN:-}" ]]; then
  echo "== build rkcm-sim (every mutant compiled in)"
  $CARGO build -q -p rkcm-sim
  SIM_BIN="${CARGO_TARGET_DIR:-target}/debug/rkcm-sim"
fi

rows=()
descriptions=()
survivors=0
started_all=$(date +%s)
for m in "${MUTANTS[@]}"; do
  read -r name ctl budget invariant what <<<"$m"
  budget=${SIM_MUTANT_SEEDS:-$budget}
  descriptions+=("- \`$name\` ($ctl): $what.")
  echo "== $name ($ctl, up to $budget seeds, expecting $invariant)"
  started=$(date +%s)
  out=$(RUST_BACKTRACE=0 "$SIM_BIN" --controller "$ctl" --mutant "$name" --expect "$invariant" \
    --seeds "$budget" --fail-fast 2>&1 || true)
  took=$(($(date +%s) - started))
  fail=$(grep -m1 '^FAIL controller' <<<"$out" || true)
  if [[ -z "$fail" ]]; then
    echo "   SURVIVED $budget seeds"
    rows+=("| \`$name\` | $ctl | $budget | survived | $invariant | — | ${took} s |")
    survivors=$((survivors + 1))
    continue
  fi
  seed=$(sed -E 's/.* seed ([0-9]+):.*/\1/' <<<"$fail")
  others=$(grep -c "^note controller $ctl seed " <<<"$out" || true)
  echo "   caught at seed $seed by $invariant (${took} s; $others finding(s) of other invariants on earlier seeds)"
  rows+=("| \`$name\` | $ctl | $budget | $((seed + 1)) (seed $seed) | $invariant | \`rkcm-sim --controller $ctl --mutant $name --seed $seed --trace\` | ${took} s |")
done
took_all=$(($(date +%s) - started_all))

{
  echo "# Simulator mutation check"
  echo
  echo "Written by \`make sim-mutants\` (sim/mutants.sh) on $(date -u +%Y-%m-%dT%H:%MZ), commit"
  echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown), debug build, ${took_all} s in all."
  echo "Each mutant is one deliberate bug in a controller crate (\`rkcm_runtime::mutants\`), all"
  echo "compiled into one simulator build and switched on at run time (\`--mutant NAME\`); a"
  echo "build without the sim crate (\`cargo build -p rkcm\`) compiles none in. A mutant counts"
  echo "as caught only when the invariant named for it breaks within its seed budget"
  echo "(\`--expect\`); findings of other invariants are notes."
  echo
  printf '%s\n' "${descriptions[@]}"
  echo
  echo "| mutant | scenario | budget | seeds to the catch | caught by | replay | time |"
  echo "| --- | --- | ---: | ---: | --- | --- | ---: |"
  printf '%s\n' "${rows[@]}"
  cat <<'NOTES'

Replay with `cargo run -p rkcm-sim --release -- ARGS` (ARGS as in the table).

Notes:
- `no-expectations` runs with the ReplicaSet stale-cache guard's gate off
  (`StaleControllerConsistencyReplicaSet=false`, a supported setting): with the gate on, the
  guard also holds a sync until the controller's own pod creates are cached, so expectations
  are a second line and the mutant survives.
- `podgc-no-uid-precondition`: in its own scenario PodGC sweeps every second (upstream: every
  20 s, after which a 10 s cache lag has nearly always caught up), and the workload re-creates
  each pod of a pool of reused names (bare-run-0..3) as soon as it is gone. A sweep whose
  cache still shows the old, terminated pod deletes it again: with the UID precondition the
  server refuses, without it the new pod goes (ForceDeleteOutsidePodGcRules, judged on the pod
  the server deleted).
- `podgc-orphans-from-cache`, `podgc-out-of-service-without-taint`: PodGC marks a pod
  `Failed` before it force-deletes it, so the pod the server deletes is terminal by then;
  the checker judges the `Failed` write on the pod as it was just before it
  (FailedOutsidePodGcRules). In the PodGC scenario a node joins every 30 s with a pod created
  on it (`spec.nodeName`), whose event can reach PodGC before the node's.
- `sts-force-delete-cut-off` also breaks ForceDeleteOutsidePodGcRules at the delete; the
  identity check is the one that sees the second set of containers start
  (StatefulSetIdentityRunningTwice), which `--expect` requires.
- Each check sees what it is named for. With the checks as they were before
  DeploymentScaleDownBelowMinAvailable, JobDeletedBeforeTtl and the DaemonSet check's count of
  terminating pods whose containers run (commit 44b6690's `sim/src/checks.rs`, final code
  otherwise), `deployment-ignore-min-available`, `ttl-no-version-precondition` and
  `daemonset-replace-terminating` survive their budgets (20, 80, 20 seeds) with no finding
  at all. `podgc-orphans-from-cache` survived 30 seeds of the PodGC, DaemonSet and ReplicaSet
  scenarios until the PodGC scenario pinned a pod to each joining node.
- `shard-range-without-lease` (sharded-2: two replicas of a sharded manager): a replica
  whose Lease requests stall (held back 12-40 s, then landing) keeps syncing and writing
  its ranges past its renew deadline; the other replica takes them once the lease ran out,
  and the stalled one's next write lands in the other's term
  (ShardWriteOutsideLeaseTerm, judged on the Lease records as the server stored them).
- `shard-take-without-fence` (sharded-3): a replica takes the ranges of a member session
  it saw unchanged for a lease duration without fencing the session's member Lease; a
  renewal of that session that was only held back lands just before the take, so the
  session runs on while the taker holds its ranges (ShardLeaseTermsOverlap). Caught at seeds
  39, 91 and 180 of 200 since the ring balances by cached objects (100, 134 and 139 before;
  none of sharded-2's 200): the fence matters only when a late renewal and a take meet
  within one round.
- Without any mutant, with the final checks and fault model: deployment seeds 0..350,
  statefulset, daemonset, job, ttlafterfinished and podgc seeds 0..120 and 200..350, and
  cronjob seeds 0..120 pass, as do the seeds of `sim/tests/sim.rs` (every controller 0..40,
  the regression seeds).
NOTES
} >"$REPORT"
echo "report: $REPORT (${took_all} s)"
if ((survivors > 0)); then
  echo "$survivors mutant(s) survived: the simulator no longer catches them" >&2
  exit 1
fi
