#!/usr/bin/env bash
# `make chaos`: the long fault suite, for upstream kube-controller-manager and for rkcm
# running the same controllers (ReplicaSet, Deployment; every workload controller in the
# -all variants), on a dedicated plane.
#
# Brings up its own plane (audit log on, upstream kube-controller-manager running every
# controller except rkcm's, so the garbage collector and ServiceAccounts work), builds rkcm
# and rkcm-chaos, runs each scenario for upstream then rkcm with the invariant watcher
# (rkcm_testkit::invariants) on the scenario's namespace, writes bench/reports/chaos.md and
# the raw outcomes beside it (chaos.json), and tears the plane down if it started it.
#
# Scenarios (CHAOS_SCENARIOS, comma separated):
#   kill-churn   SIGKILL + restart every 30-90 s for CHAOS_DURATION under churn:
#                Deployments scaled and rolled, ReplicaSets scaled, pods deleted ~10/s
#   watch-gap    the manager's pod watch delivers every event CHAOS_WATCH_DELAY late for
#                the second half of CHAOS_DURATION, under the same churn
#   apiserver-restart  kube-apiserver stopped for CHAOS_APISERVER_DOWN and started again on
#                the same etcd, in the middle of the churn and with the last change
#   watch-410    first half: etcd compacted every 15 s and the manager's watches ended and
#                answered 410 Gone from older revisions (informers relist); second half: the
#                pod watch CHAOS_LONG_WATCH_DELAY late (longer than the 5-minute expectations
#                timeout)
#   reject-creates  a ValidatingAdmissionPolicy rejects pod creates for CHAOS_REJECT_FOR,
#                once under churn, once measured (gap to the manager's first create after)
#   partition    two leader-elected replicas behind their own proxies; the leader's proxy cut
#                (CHAOS_CUTS) under churn: when it stepped down, failover gap, its writes
#                after the Lease moved or after its renew deadline, convergence after healing
#   <scenario>-all   kill-churn-all, watch-gap-all, watch-410-all, apiserver-restart-all,
#                reject-creates-all: the same faults with every workload controller on and a
#                StatefulSet, a DaemonSet, an Indexed Job and a CronJob in the churn as well
#   soak         no fault: CHAOS_SOAK_DURATION of steady churn (the same, plus a short-lived
#                Deployment and ReplicaSet created and the previous one deleted every 10 s),
#                the manager's VmRSS sampled every CHAOS_RSS_EVERY; growth and slope after
#                CHAOS_SOAK_WARMUP (rkcm fails when the slope adds more than 5% per hour)
#   leader       two leader-elected replicas (plane users rkcm and kcm, so the audit log
#                tells their writes apart), default timings (lease 15 s, renew 10 s, retry
#                2 s), under churn: the leader SIGKILLed (then restarted as a standby), the
#                next leader SIGTERMed; gap to the new leader's first write, the old
#                leader's writes after the fault and after the new leader's first write
#   rebalance    rkcm only (upstream has no sharded mode: its row says so): rkcm replicas with
#                --rkcm-shards=CHAOS_SHARDS, each as its own plane user (rkcm-r0, rkcm-r1, ...),
#                Leases in namespace rkcm-chaos-shards (audit-logged with their body); one
#                replica, then three, then in turn one SIGKILLed, one started, one SIGTERMed,
#                one started, each change waited for until the ring is balanced, under churn in
#                CHAOS_SHARD_NAMESPACES namespaces spread over the ring, until
#                CHAOS_REBALANCES range handovers; from the audit log: every identity's lease
#                terms (none may overlap) and every replica write inside its term of the
#                namespace's range
# Convergence: a baseline change (every Deployment rolled, every ReplicaSet scaled) without
# faults, and the same change made with the last fault (a kill right after it; the watch
# delay lifted right after it): time to settled, and their ratio.
#
# Settings (environment):
#   CHAOS_DURATION=600        seconds of churn and faults per run
#   CHAOS_WATCH_DELAY=30      seconds of pod watch delay in watch-gap
#   CHAOS_DELETE_RATE=10      pod deletions per second
#   CHAOS_APISERVER_DOWN=30   seconds the API server is down in apiserver-restart
#   CHAOS_LONG_WATCH_DELAY=360  seconds of pod watch delay in watch-410
#   CHAOS_CUTS=blackhole:60,refuse:300   partition's cuts (MODE:SECONDS, blackhole|refuse)
#   CHAOS_REJECT_FOR=60       seconds pod creates are rejected in reject-creates
#   CHAOS_SOAK_DURATION=3600  seconds of churn in soak
#   CHAOS_SOAK_WARMUP=600     seconds of soak before RSS growth is judged
#   CHAOS_RSS_EVERY=60        seconds between two RSS samples in soak
#   CHAOS_SHARDS=64           rebalance: ranges of the ring
#   CHAOS_REBALANCES=1000     rebalance: range handovers to reach
#   CHAOS_SHARD_TIMINGS=4,3,1 rebalance: lease duration, renew deadline, retry period (s)
#   CHAOS_SHARD_NAMESPACES=6  rebalance: churned namespaces (CHAOS_DELETE_RATE is shared)
#   CHAOS_REBALANCE_TIMEOUT=1800  rebalance: seconds the replica cycle may take at most
#   CHAOS_REBALANCE_USERS=64  rebalance: plane users for replicas (one per replica started;
#                             made when chaos.sh brings the plane up)
#   CHAOS_MERGE=1             keep the other scenarios' rows of an existing report's JSON
#   CHAOS_MANAGERS=upstream,rkcm
#   CHAOS_SCENARIOS=kill-churn,watch-gap,leader,apiserver-restart,partition,watch-410,reject-creates,kill-churn-all,soak
#   CHAOS_NODES=5             kwok nodes of the plane
#   CHAOS_RELEASE=0           1: release binaries (needs release dependencies built)
#   CHAOS_RKCM_FEATURES=      cargo features of the rkcm binary, e.g. system-alloc for a heap
#                             profiler attached to the soak (heaptrack -p)
#   CHAOS_REPORT=bench/reports/chaos.md   (raw numbers: same name, .json)
#   RKCM_BENCH_CLUSTER_DIR=...   plane state (default $TMPDIR/rkcm-chaos-$UID)
#   CHAOS_KEEP_PLANE=1        leave the plane running afterwards
#   CHAOS_LOCK=/tmp/rkcm-bench.lock   the machine-wide bench lock, held while the scenarios
#                             run (timings of two benches at once mean nothing); the plane's
#                             processes do not inherit it. CHAOS_LOCK= runs without it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rkcm/target}
step() { printf '\n==> [chaos %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'chaos: error: %s\n' "$*" >&2; exit 1; }
case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) die "unknown argument $1 (try --help)" ;;
esac

DURATION=${CHAOS_DURATION:-600}
WATCH_DELAY=${CHAOS_WATCH_DELAY:-30}
DELETE_RATE=${CHAOS_DELETE_RATE:-10}
MANAGERS=${CHAOS_MANAGERS:-upstream,rkcm}
SCENARIOS=${CHAOS_SCENARIOS:-kill-churn,watch-gap,leader,apiserver-restart,partition,watch-410,reject-creates,kill-churn-all,soak}
NODES=${CHAOS_NODES:-5}
REPORT=${CHAOS_REPORT:-bench/reports/chaos.md}
DIR=${RKCM_BENCH_CLUSTER_DIR:-${TMPDIR:-/tmp}/rkcm-chaos-$(id -u)}
profile=debug; cargo_profile=()
if [ "${CHAOS_RELEASE:-0}" = 1 ]; then profile=release; cargo_profile=(--release); fi

t0=$(date +%s)
step "build rkcm and rkcm-chaos ($profile)"
features=()
[ -z "${CHAOS_RKCM_FEATURES:-}" ] || features=(--features "rkcm/$CHAOS_RKCM_FEATURES")
cargo build "${cargo_profile[@]}" "${features[@]}" -p rkcm -p rkcm-testkit --bins || die "build failed"
# Run copies: a build in the same target directory while the suite runs (hours) must not
# swap the binary that the next restart of a scenario starts.
bindir=$(mktemp -d "${TMPDIR:-/tmp}/rkcm-chaos-bin.XXXXXX")
cp "$CARGO_TARGET_DIR/$profile/rkcm" "$CARGO_TARGET_DIR/$profile/rkcm-chaos" "$bindir/" \
  || die "copying the binaries to $bindir failed"
export RKCM_TEST_BIN=$bindir/rkcm
CHAOS=$bindir/rkcm-chaos

LOCK=${CHAOS_LOCK-/tmp/rkcm-bench.lock}
if [ -n "$LOCK" ]; then
  step "waiting for the bench lock $LOCK"
  exec 9>"$LOCK"
  flock 9
fi

step "chaos plane in $DIR (AUDIT=1, NODES=$NODES)"
# The plane's processes must not inherit the lock's descriptor (they outlive this script
# when the plane is kept).
# The rebalance scenario's users and its Lease namespace, whose writes are logged with body.
users=$(for ((i = 0; i < ${CHAOS_REBALANCE_USERS:-64}; i++)); do printf 'rkcm-r%d ' "$i"; done)
plane() {
  RKCM_CLUSTER_DIR=$DIR AUDIT=1 NODES=$NODES EXTRA_USERS=$users \
    AUDIT_LEASE_NAMESPACES=rkcm-chaos-shards bash "$here/cluster.sh" "$@" 9>&-
}
started=0
if plane env >/dev/null 2>&1 && (. "$DIR/env.sh"; kubectl get --raw /readyz >/dev/null 2>&1); then
  echo "chaos: reusing the plane already running in $DIR (left running afterwards)" >&2
else
  started=1
fi
cleanup() {
  local rc=$?
  rm -rf "$bindir"
  if [ "$started" = 1 ] && [ "${CHAOS_KEEP_PLANE:-0}" != 1 ]; then
    step "tear down the chaos plane"
    plane down || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ "$started" = 0 ] || plane up
# shellcheck disable=SC1091
. "$DIR/env.sh"

load=$(cut -d' ' -f1-3 /proc/loadavg)
preamble="Command: \`make chaos\` (CHAOS_DURATION=$DURATION, CHAOS_WATCH_DELAY=$WATCH_DELAY, CHAOS_DELETE_RATE=$DELETE_RATE, CHAOS_APISERVER_DOWN=${CHAOS_APISERVER_DOWN:-30}, CHAOS_LONG_WATCH_DELAY=${CHAOS_LONG_WATCH_DELAY:-360}, CHAOS_CUTS=${CHAOS_CUTS:-blackhole:60,refuse:300}, CHAOS_REJECT_FOR=${CHAOS_REJECT_FOR:-60}, CHAOS_SOAK_DURATION=${CHAOS_SOAK_DURATION:-3600}, CHAOS_SHARDS=${CHAOS_SHARDS:-64}, CHAOS_REBALANCES=${CHAOS_REBALANCES:-1000}, CHAOS_SHARD_TIMINGS=${CHAOS_SHARD_TIMINGS:-4,3,1}, CHAOS_SHARD_NAMESPACES=${CHAOS_SHARD_NAMESPACES:-6}, $profile binaries), commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ); plane: e2e/cluster.sh with audit log and $NODES kwok nodes; host load average at start: $load."
mkdir -p "$(dirname "$REPORT")"
merge=()
if [ "${CHAOS_MERGE:-0}" = 1 ] && [ -f "${REPORT%.md}.json" ]; then
  cp "${REPORT%.md}.json" "${REPORT%.md}.prev.json"
  merge=(--merge "${REPORT%.md}.prev.json")
fi
rc=0
# 9>&-: rkcm-chaos restarts the API server (apiserver-restart); a process it starts must not
# inherit the bench lock, or the lock outlives this script.
"$CHAOS" --managers "$MANAGERS" --scenarios "$SCENARIOS" --duration "$DURATION" \
  --watch-delay "$WATCH_DELAY" --delete-rate "$DELETE_RATE" \
  --apiserver-down "${CHAOS_APISERVER_DOWN:-30}" --cluster-script "$here/cluster.sh" \
  --long-watch-delay "${CHAOS_LONG_WATCH_DELAY:-360}" --cuts "${CHAOS_CUTS:-blackhole:60,refuse:300}" \
  --reject-for "${CHAOS_REJECT_FOR:-60}" --soak-duration "${CHAOS_SOAK_DURATION:-3600}" \
  --soak-warmup "${CHAOS_SOAK_WARMUP:-600}" --rss-every "${CHAOS_RSS_EVERY:-60}" \
  --shards "${CHAOS_SHARDS:-64}" --rebalances "${CHAOS_REBALANCES:-1000}" \
  --shard-timings "${CHAOS_SHARD_TIMINGS:-4,3,1}" --shard-namespaces "${CHAOS_SHARD_NAMESPACES:-6}" \
  --rebalance-timeout "${CHAOS_REBALANCE_TIMEOUT:-1800}" "${merge[@]}" \
  --md "$REPORT" --json "${REPORT%.md}.json" --preamble "$preamble" 9>&- || rc=$?
rm -f "${REPORT%.md}.prev.json"
step "done in $(( $(date +%s) - t0 )) s: $REPORT (raw: ${REPORT%.md}.json); exit $rc"
exit "$rc"
