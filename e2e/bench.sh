#!/usr/bin/env bash
# `make bench`: upstream kube-controller-manager vs rkcm on the same local control plane.
#
# Builds rkcm and rkcm-bench (release), brings up a dedicated benchmark plane (audit log on,
# no upstream manager of its own), runs every scenario for both managers — upstream first,
# then rkcm, same --kube-api-qps/--kube-api-burst — and writes the Markdown report plus the
# raw numbers (JSON) and its charts (SVG, bench/reports/plots/; for another report
# <name>-plots/) beside it. Stops by itself; tears down the plane if it started it.
#
#   bash e2e/bench.sh            full size (the numbers in bench/reports/latest.md)
#   bash e2e/bench.sh --quick    small sizes, report in bench/reports/quick.md
#   BENCH_SCENARIOS=replicaset make bench    re-run one scenario only
#
# Each scenario's newest result is kept on its own (bench/reports/<scenario>.json; for
# --quick in bench/reports/quick/), stamped with its time, command, commit and plane, and
# the report is rendered from all of them: re-running one scenario replaces only its section.
#
# Settings (environment):
#   BENCH_QPS=100 BENCH_BURST=200  client limits of both managers
#   BENCH_MANAGERS=upstream,rkcm   which managers run, in this order (rkcm,upstream runs rkcm first);
#                                  also rkcm-shards (sharded mode: BENCH_SHARD_REPLICAS=3 rkcm
#                                  processes with --leader-elect=true --rkcm-shards=BENCH_SHARDS=64,
#                                  each with the same QPS/burst and user) and rkcm-shards-client
#                                  (the same with --rkcm-shard-selector=false). With a sharded
#                                  manager, results are kept as <scenario>-shards (report
#                                  section "sharded rkcm / one rkcm"; the scenario's upstream vs
#                                  rkcm result stays). Sharding needs namespaces:
#                                  ENVELOPE_NAMESPACES / THRESHOLD_NAMESPACES
#   BENCH_ORDERS=one               both: every scenario runs once more with the managers in the
#                                  opposite order, and the report adds the means of both orders
#                                  (the plane's CPU drifts through a bench, charging whoever
#                                  runs second; doubles the time)
#   BENCH_SCENARIOS=podgc,replicaset,deployment,...   scenarios to run (comma separated; all
#                                  of ALL_SCENARIOS below by default)
#   PODGC_PODS=20000 PODGC_THRESHOLD=5000   podgc size
#   RS_REPLICAS=1000               replicaset: scale 0 -> RS_REPLICAS -> 0 on the kwok nodes
#   DEPLOY_COUNT=100 DEPLOY_REPLICAS=20   deployment: DEPLOY_COUNT Deployments of
#                                  DEPLOY_REPLICAS created, then a rolling update of all
#   CRONJOB_COUNT=500 CRONJOB_MINUTES=5   cronjob: CRONJOB_COUNT CronJobs on */1, Job
#                                  creation measured over CRONJOB_MINUTES scheduled minutes
#                                  (concurrencyPolicy Allow: only cronjob-controller runs)
#   DS_NODES=1000 DS_CHURN=100     daemonset: DS_NODES kwok nodes of its own (created by the
#                                  scenario, not BENCH_NODES) with one daemon pod each, a
#                                  rolling update (maxSurge 10%), DS_CHURN nodes added and
#                                  deleted, DS_HEARTBEAT_ROUNDS=3 rounds of idle heartbeats
#   STS_PARALLEL=300 STS_ORDERED=100   statefulset: a Parallel set scaled 0 -> STS_PARALLEL,
#                                  an OrderedReady set 0 -> STS_ORDERED, then a rolling
#                                  update of the Parallel one (maxUnavailable 1)
#   JOB_COMPLETIONS=1000 JOB_PARALLELISM=100   job-1k: one Indexed Job run to completion on
#                                  the kwok nodes (kwok completes Job pods at once)
#   JOB_LARGE_COMPLETIONS=10000 JOB_LARGE_PARALLELISM=500   job-10k: the same, larger
#   JOB_TTL_JOBS=500               job-ttl: one-pod Jobs with ttlSecondsAfterFinished 0,
#                                  run and deleted (job + ttl-after-finished controllers)
#   MASS_DEPLOYMENTS=1000 MASS_REPLICAS=10   mass-rollout (upstream issue #117123): that
#                                  many Deployments in ONE namespace created and available,
#                                  then all updated at once, on kwok nodes of its own (not
#                                  BENCH_NODES); the RSS curve of both managers is reported;
#                                  its timeout is at least MASS_TIMEOUT=1800
#   IDLE_NODES=1000 IDLE_PODS=10000 IDLE_SECONDS=60   idle: every controller rkcm implements,
#                                  on IDLE_NODES kwok nodes of its own with IDLE_PODS running
#                                  bare pods, until synced plus IDLE_SECONDS idle; idle-empty
#                                  is the same on an empty plane (run first: bytes per cached
#                                  pod = settled RSS difference / IDLE_PODS)
#   ENVELOPE_NAMESPACES=1 ENVELOPE_PODS_PER_NAMESPACE=3000 ENVELOPE_NODES_PER_NAMESPACE=100
#   ENVELOPE_THROUGHPUT=20 ENVELOPE_PROBES=20 ENVELOPE_CHURN=1   envelope: clusterloader2's load test mix
#                                  (Deployments, StatefulSets, Jobs, CronJobs, a DaemonSet) in
#                                  that many namespaces on kwok nodes of its own, created,
#                                  scaled, rolled, probed idle and deleted at that many pods a
#                                  second, with every controller, ENVELOPE_CHURN disruptions a
#                                  second while it loads; reaction latency per
#                                  controller. The plane logs pod creates in its namespaces
#                                  with their body (to tell a generateName pod's owner) and
#                                  runs the scheduler at BENCH_SCHEDULER_QPS=500 /
#                                  BENCH_SCHEDULER_BURST=1000; timeout at least
#                                  ENVELOPE_TIMEOUT=3600
#   THRESHOLD_PODS=150000 THRESHOLD_NODES=5000 THRESHOLD_SETTLED_SECONDS=600
#   THRESHOLD_NAMESPACES=(nodes/100)
#   THRESHOLD_PROBES=8 THRESHOLD_BURST=10 THRESHOLD_LOAD_CONCURRENCY=64   threshold: the plane
#                                  loaded directly by the bench (no manager) with the load
#                                  test's mix at ~30 pods a node, converged (every child owned,
#                                  every status set); per manager cold start (synced, then the
#                                  first pass: work queues drained), settled RSS/CPU over
#                                  THRESHOLD_SETTLED_SECONDS, reaction (THRESHOLD_PROBES single
#                                  changes, then a burst of THRESHOLD_BURST of each kind; the
#                                  work-queue histograms and the audit log) and failover (two
#                                  replicas, the leader SIGKILLed). Loaded once for every run
#                                  (THRESHOLD_KEEP=1 leaves it loaded; so does the last
#                                  scenario of a plane torn down afterwards); timeout at least
#                                  THRESHOLD_TIMEOUT=7200. The managers serve /metrics on
#                                  127.0.0.1:THRESHOLD_METRICS_PORT=10461
#   BENCH_TIMEOUT=900              seconds one manager may take to converge (cronjob: at
#                                  least its minutes plus 3, the schedule sets the pace)
#   BENCH_CONCURRENCY=32           requests in flight while the bench creates/deletes objects
#   BENCH_KWOK_POD_WORKERS=32      pod stages kwok plays at once (kwok's default is 4, which
#                                  made every simulated kubelet wait on four workers: the mass
#                                  rollout's deleted pods stayed terminating by thousands)
#   BENCH_KWOK_NODE_LEASE_SECONDS=40   the kwok nodes' Lease duration (renewed every quarter
#                                  of it): the threshold's thousands of nodes renew 100 Leases
#                                  a second per 1 000 nodes at 40 s, which two shared cores pay
#                                  for in every measurement; nothing on the plane reads them
#   BENCH_NODES=30                 simulated (kwok) nodes of the plane, 110 pods each
#                                  (replicaset needs RS_REPLICAS/110 of them, deployment
#                                  DEPLOY_COUNT * (DEPLOY_REPLICAS + maxSurge 25%) / 110,
#                                  job-10k JOB_LARGE_PARALLELISM/110, job-ttl JOB_TTL_JOBS/110)
#   BENCH_REPORT=bench/reports/latest.md    report path (JSON: same name, .json)
#   BENCH_RESULTS=bench/reports    newest result of each scenario, <scenario>.json
#                                  (default for other reports: the report path without .md)
#   RKCM_BENCH_CLUSTER_DIR=...     plane state (default $TMPDIR/rkcm-bench-$UID), apart from
#                                  the default plane so tests running there are not disturbed
#   BENCH_KEEP_PLANE=1             leave the plane running afterwards
#   BENCH_RESULT_TAG=size-10k      keep this run's result beside the scenario's own
#                                  (<scenario>-size-10k.json): the threshold at several sizes
#                                  for the per-pod line
#   BENCH_RKCM_BIN=path            run this rkcm binary instead of building the tree's (a
#                                  before/after comparison of two commits on one plane)
#   BENCH_COMMIT=...               the commit results are stamped with (default: the tree's);
#                                  with BENCH_RKCM_BIN, name the one the binary was built from
#   BENCH_LOCK=/tmp/rkcm-bench.lock   the machine-wide bench lock (`make chaos` takes it too),
#                                  held from the plane's start to the report: timings of two
#                                  benches at once mean nothing. BENCH_LOCK= runs without it.
# Manager logs and per-scenario results: $BENCH_WORK (default $TMPDIR/rkcm-bench-work-$UID).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rkcm/target}
# shellcheck source=versions.env
. "$here/versions.env"
step() { printf '\n==> [bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
warn() { printf 'bench: warning: %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

quick=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench: unknown argument $a (try --help)" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then
  : "${PODGC_PODS:=2000}" "${PODGC_THRESHOLD:=500}" "${RS_REPLICAS:=100}" "${BENCH_TIMEOUT:=300}"
  : "${DEPLOY_COUNT:=10}" "${DEPLOY_REPLICAS:=5}"
  : "${CRONJOB_COUNT:=20}" "${CRONJOB_MINUTES:=2}"
  : "${DS_NODES:=100}" "${DS_CHURN:=10}"
  : "${STS_PARALLEL:=30}" "${STS_ORDERED:=10}"
  : "${JOB_COMPLETIONS:=100}" "${JOB_PARALLELISM:=10}" "${JOB_LARGE_COMPLETIONS:=500}"
  : "${JOB_LARGE_PARALLELISM:=50}" "${JOB_TTL_JOBS:=50}"
  : "${MASS_DEPLOYMENTS:=50}" "${MASS_REPLICAS:=4}" "${MASS_TIMEOUT:=300}"
  : "${IDLE_NODES:=50}" "${IDLE_PODS:=500}" "${IDLE_SECONDS:=15}"
  : "${ENVELOPE_PODS_PER_NAMESPACE:=600}" "${ENVELOPE_NODES_PER_NAMESPACE:=20}" "${ENVELOPE_PROBES:=5}"
  : "${THRESHOLD_PODS:=3000}" "${THRESHOLD_NODES:=100}" "${THRESHOLD_SETTLED_SECONDS:=30}"
  : "${THRESHOLD_PROBES:=4}" "${THRESHOLD_BURST:=3}"
  : "${BENCH_REPORT:=bench/reports/quick.md}"
fi
# Every scenario, in report order.
ALL_SCENARIOS=podgc,replicaset,deployment,cronjob,daemonset,statefulset,job-1k,job-10k,job-ttl,mass-rollout,idle-empty,idle,envelope,threshold
QPS=${BENCH_QPS:-100}
BURST=${BENCH_BURST:-200}
MANAGERS=${BENCH_MANAGERS:-upstream,rkcm}
SHARD_REPLICAS=${BENCH_SHARD_REPLICAS:-3}
SHARDS=${BENCH_SHARDS:-64}
# A sharded comparison is kept beside the scenario's own result, not in its place.
suffix=""
[[ ",$MANAGERS," != *,rkcm-shards* ]] || suffix=-shards
# A run at another size kept beside the scenario's own result (threshold-size-10k.json).
if [ -n "${BENCH_RESULT_TAG:-}" ]; then
  [[ "$BENCH_RESULT_TAG" =~ ^size-[0-9]+k$ ]] || die "BENCH_RESULT_TAG must look like size-10k, not $BENCH_RESULT_TAG"
  suffix+=-$BENCH_RESULT_TAG
fi
case "${BENCH_ORDERS:-one}" in
  one) orders=() ;;
  both) orders=(--both-orders) ;;
  *) die "BENCH_ORDERS must be one or both, not ${BENCH_ORDERS}" ;;
esac
SCENARIOS=${BENCH_SCENARIOS:-$ALL_SCENARIOS}
PODGC_PODS=${PODGC_PODS:-20000}
PODGC_THRESHOLD=${PODGC_THRESHOLD:-5000}
RS_REPLICAS=${RS_REPLICAS:-1000}
DEPLOY_COUNT=${DEPLOY_COUNT:-100}
DEPLOY_REPLICAS=${DEPLOY_REPLICAS:-20}
CRONJOB_COUNT=${CRONJOB_COUNT:-500}
CRONJOB_MINUTES=${CRONJOB_MINUTES:-5}
DS_NODES=${DS_NODES:-1000}
DS_CHURN=${DS_CHURN:-100}
DS_HEARTBEAT_ROUNDS=${DS_HEARTBEAT_ROUNDS:-3}
STS_PARALLEL=${STS_PARALLEL:-300}
STS_ORDERED=${STS_ORDERED:-100}
JOB_COMPLETIONS=${JOB_COMPLETIONS:-1000}
JOB_PARALLELISM=${JOB_PARALLELISM:-100}
JOB_LARGE_COMPLETIONS=${JOB_LARGE_COMPLETIONS:-10000}
JOB_LARGE_PARALLELISM=${JOB_LARGE_PARALLELISM:-500}
JOB_TTL_JOBS=${JOB_TTL_JOBS:-500}
MASS_DEPLOYMENTS=${MASS_DEPLOYMENTS:-1000}
MASS_REPLICAS=${MASS_REPLICAS:-10}
MASS_TIMEOUT=${MASS_TIMEOUT:-1800}
IDLE_NODES=${IDLE_NODES:-1000}
IDLE_PODS=${IDLE_PODS:-10000}
IDLE_SECONDS=${IDLE_SECONDS:-60}
ENVELOPE_NAMESPACES=${ENVELOPE_NAMESPACES:-1}
ENVELOPE_PODS_PER_NAMESPACE=${ENVELOPE_PODS_PER_NAMESPACE:-3000}
ENVELOPE_NODES_PER_NAMESPACE=${ENVELOPE_NODES_PER_NAMESPACE:-100}
ENVELOPE_THROUGHPUT=${ENVELOPE_THROUGHPUT:-20}
ENVELOPE_PROBES=${ENVELOPE_PROBES:-20}
ENVELOPE_CHURN=${ENVELOPE_CHURN:-1}
ENVELOPE_TIMEOUT=${ENVELOPE_TIMEOUT:-3600}
THRESHOLD_PODS=${THRESHOLD_PODS:-150000}
THRESHOLD_NODES=${THRESHOLD_NODES:-5000}
THRESHOLD_SETTLED_SECONDS=${THRESHOLD_SETTLED_SECONDS:-600}
THRESHOLD_PROBES=${THRESHOLD_PROBES:-8}
THRESHOLD_BURST=${THRESHOLD_BURST:-10}
THRESHOLD_LOAD_CONCURRENCY=${THRESHOLD_LOAD_CONCURRENCY:-64}
THRESHOLD_TIMEOUT=${THRESHOLD_TIMEOUT:-7200}
THRESHOLD_METRICS_PORT=${THRESHOLD_METRICS_PORT:-10461}
SCHEDULER_QPS=${BENCH_SCHEDULER_QPS:-500}
SCHEDULER_BURST=${BENCH_SCHEDULER_BURST:-1000}
TIMEOUT=${BENCH_TIMEOUT:-900}
CONCURRENCY=${BENCH_CONCURRENCY:-32}
NODES=${BENCH_NODES:-30}
KWOK_POD_WORKERS=${BENCH_KWOK_POD_WORKERS:-32}
KWOK_NODE_LEASE_SECONDS=${BENCH_KWOK_NODE_LEASE_SECONDS:-40}
REPORT=${BENCH_REPORT:-bench/reports/latest.md}
REPORT_JSON=${REPORT%.md}.json
if [ "$REPORT" = bench/reports/latest.md ]; then RESULTS=${BENCH_RESULTS:-bench/reports}
else RESULTS=${BENCH_RESULTS:-${REPORT%.md}}; fi
for s in ${SCENARIOS//,/ }; do
  case ",$ALL_SCENARIOS," in
    *",$s,"*) ;;
    *) die "unknown scenario $s (known: $ALL_SCENARIOS)" ;;
  esac
done
if [[ ",$SCENARIOS," == *,replicaset,* ]] && [ $(( NODES * 110 )) -lt "$RS_REPLICAS" ]; then
  die "replicaset: $RS_REPLICAS pods need $(( (RS_REPLICAS + 109) / 110 )) kwok nodes (110 pods each); BENCH_NODES=$NODES"
fi
# Every Deployment may have replicas + maxSurge (25%, rounded up) pods at once.
DEPLOY_PEAK=$(( DEPLOY_COUNT * (DEPLOY_REPLICAS + (DEPLOY_REPLICAS * 25 + 99) / 100) ))
if [[ ",$SCENARIOS," == *,deployment,* ]] && [ $(( NODES * 110 )) -lt "$DEPLOY_PEAK" ]; then
  die "deployment: up to $DEPLOY_PEAK pods at once need $(( (DEPLOY_PEAK + 109) / 110 )) kwok nodes (110 pods each); BENCH_NODES=$NODES"
fi
# Pods of a Job scenario that may run at once (each plus its probe Job's pod).
for pair in "job-1k:$JOB_PARALLELISM" "job-10k:$JOB_LARGE_PARALLELISM" "job-ttl:$JOB_TTL_JOBS"; do
  s=${pair%%:*}; n=$(( ${pair#*:} + 1 ))
  if [[ ",$SCENARIOS," == *,$s,* ]] && [ $(( NODES * 110 )) -lt "$n" ]; then
    die "$s: up to $n pods at once need $(( (n + 109) / 110 )) kwok nodes (110 pods each); BENCH_NODES=$NODES"
  fi
done
DIR=${RKCM_BENCH_CLUSTER_DIR:-${TMPDIR:-/tmp}/rkcm-bench-$(id -u)}
WORK=${BENCH_WORK:-${TMPDIR:-/tmp}/rkcm-bench-work-$(id -u)}

t0=$(date +%s)

# Results are stamped with the commit the binaries are built from, taken now: the tree may
# move on during a run of an hour (a stamp taken when each result is written named a later
# commit than the one measured).
if [ -z "${BENCH_COMMIT:-}" ] && BENCH_COMMIT=$(git -C "$here/.." rev-parse --short=12 HEAD 2>/dev/null); then
  # The bench's own reports do not count: a series of runs rewrites them between runs.
  [ -z "$(git -C "$here/.." status --porcelain --untracked-files=no -- . ':!bench/reports' 2>/dev/null)" ] ||
    BENCH_COMMIT+=" (with uncommitted changes)"
  export BENCH_COMMIT
fi

step "build rkcm-bench (release)"
cargo build --release -p rkcm-bench || die "rkcm-bench does not build"
BENCH=$CARGO_TARGET_DIR/release/rkcm-bench

rkcm_flags=()
if [ -n "${BENCH_RKCM_BIN:-}" ]; then
  # A given binary (e.g. an older commit's, for a before/after comparison); not rebuilt.
  [ -x "$BENCH_RKCM_BIN" ] || die "BENCH_RKCM_BIN=$BENCH_RKCM_BIN is not an executable"
  step "rkcm: $BENCH_RKCM_BIN (BENCH_RKCM_BIN, not built)"
  rkcm_flags=(--rkcm-bin "$BENCH_RKCM_BIN")
elif step "build rkcm (release)" && ! cargo build --release -p rkcm; then
  # Benchmark upstream anyway; the report says rkcm was not built (an older binary on disk
  # is not measured).
  warn "rkcm does not build; its rows are reported as not built"
  rkcm_flags=(--rkcm-not-built "cargo build --release -p rkcm failed at this commit")
fi

LOCK=${BENCH_LOCK-/tmp/rkcm-bench.lock}
if [ -n "$LOCK" ]; then
  step "waiting for the bench lock $LOCK"
  exec 9>"$LOCK"
  flock 9
fi

step "benchmark plane in $DIR (AUDIT=1, KCM=0, NODES=$NODES, KWOK_POD_WORKERS=$KWOK_POD_WORKERS)"
# 9>&-: the plane's processes (they outlive this script with BENCH_KEEP_PLANE=1) and the
# managers the bench starts must not inherit the lock's descriptor.
# The envelope's namespaces (<i>-bench-envelope-<manager>), whose pod creates the audit log
# keeps with their body.
envelope_namespaces=""
for m in upstream rkcm rkcm-shards rkcm-shards-client; do
  for ((i = 0; i < 64; i++)); do envelope_namespaces+="$i-bench-envelope-$m,"; done
done
plane() {
  RKCM_CLUSTER_DIR=$DIR AUDIT=1 KCM=0 NODES=$NODES KWOK_POD_WORKERS=$KWOK_POD_WORKERS \
    KWOK_NODE_LEASE_SECONDS=$KWOK_NODE_LEASE_SECONDS \
    AUDIT_POD_CREATE_NAMESPACES=${envelope_namespaces%,} SCHEDULER_QPS=$SCHEDULER_QPS \
    SCHEDULER_BURST=$SCHEDULER_BURST bash "$here/cluster.sh" "$@" 9>&-
}
started=0
if plane env >/dev/null 2>&1 && (. "$DIR/env.sh"; kubectl get --raw /readyz >/dev/null 2>&1); then
  [ -f "$DIR/logs/audit.log" ] || die "a plane without audit log runs in $DIR; stop it: RKCM_CLUSTER_DIR=$DIR bash e2e/cluster.sh down"
  warn "reusing the benchmark plane already running in $DIR (left running afterwards)"
  # The report names the workers the running kwok has, not the ones asked for now.
  KWOK_POD_WORKERS=$(sed -n 's/^ *podPlayStageParallelism: *//p' "$DIR/kwok-config.yaml" 2>/dev/null || true)
  KWOK_POD_WORKERS=${KWOK_POD_WORKERS:-4}
  KWOK_NODE_LEASE_SECONDS=$(tr '\0' '\n' <"$DIR/cmd/kwok" 2>/dev/null | sed -n 's/^--node-lease-duration-seconds=//p' || true)
  KWOK_NODE_LEASE_SECONDS=${KWOK_NODE_LEASE_SECONDS:-unknown}
  # The plane runs no namespace controller: a namespace deleted there stays Terminating with
  # all its objects, and every manager under test would list and cache them.
  stuck=$(. "$DIR/env.sh"; kubectl get namespaces -o jsonpath='{range .items[?(@.status.phase=="Terminating")]}{.metadata.name}{" "}{end}') \
    || die "cannot list the namespaces of the benchmark plane in $DIR"
  [ -z "$stuck" ] || die "namespaces stuck terminating on the benchmark plane (it runs no namespace controller, so their objects stay and every manager would cache them): ${stuck% }; stop the plane: RKCM_CLUSTER_DIR=$DIR bash e2e/cluster.sh down"
else
  started=1
fi
cleanup() {
  local rc=$?
  if [ "$started" = 1 ] && [ "${BENCH_KEEP_PLANE:-0}" != 1 ]; then
    step "tear down the benchmark plane"
    plane down || true
  elif [ "$started" = 1 ]; then
    step "benchmark plane left running (BENCH_KEEP_PLANE=1): RKCM_CLUSTER_DIR=$DIR bash e2e/cluster.sh down"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ "$started" = 0 ] || plane up
# shellcheck disable=SC1091
. "$DIR/env.sh"

mkdir -p "$WORK" "$RESULTS"
rm -f "$WORK"/*.json
what="make bench"
[ "$quick" = 0 ] || what="bash e2e/bench.sh --quick"
[ -z "${BENCH_SCENARIOS:-}" ] || what="BENCH_SCENARIOS=$SCENARIOS $what"
[ "${BENCH_ORDERS:-one}" = one ] || what="BENCH_ORDERS=$BENCH_ORDERS $what"
[[ "$suffix" != -shards* ]] || what="BENCH_MANAGERS=$MANAGERS BENCH_SHARD_REPLICAS=$SHARD_REPLICAS BENCH_SHARDS=$SHARDS $what"
[ -z "${BENCH_RESULT_TAG:-}" ] || what="BENCH_RESULT_TAG=$BENCH_RESULT_TAG $what"
[ -z "${BENCH_RKCM_BIN:-}" ] || what="BENCH_RKCM_BIN=.../$(basename "$BENCH_RKCM_BIN") $what"
plane_line="local plane from e2e/cluster.sh: etcd $ETCD_VERSION, kube-apiserver $K8S_VERSION with audit log (Metadata level, blocking; pod creates in the envelope's namespaces at Request level), kube-scheduler (client QPS $SCHEDULER_QPS, burst $SCHEDULER_BURST), kwok $KWOK_VERSION with $NODES simulated nodes, $KWOK_POD_WORKERS pod workers and node Leases of $KWOK_NODE_LEASE_SECONDS s (renewed every quarter of it); no upstream manager besides the one under test"
common=(--cluster-dir "$DIR" --managers "$MANAGERS" --qps "$QPS" --burst "$BURST"
  --concurrency "$CONCURRENCY" --logs-dir "$WORK/logs" "${rkcm_flags[@]}" "${orders[@]}"
  --shard-replicas "$SHARD_REPLICAS" --shards "$SHARDS"
  --command "$what" --plane "$plane_line")
failed=0
for s in ${SCENARIOS//,/ }; do
  timeout=$TIMEOUT
  case "$s" in
    podgc)
      step "scenario podgc: $PODGC_PODS terminated pods, threshold $PODGC_THRESHOLD (managers: $MANAGERS; qps $QPS, burst $BURST)"
      args=(podgc --pods "$PODGC_PODS" --threshold "$PODGC_THRESHOLD") ;;
    replicaset)
      step "scenario replicaset: scale 0 -> $RS_REPLICAS -> 0 on $NODES kwok nodes (managers: $MANAGERS; qps $QPS, burst $BURST)"
      args=(replicaset --replicas "$RS_REPLICAS") ;;
    deployment)
      step "scenario deployment: $DEPLOY_COUNT Deployments x $DEPLOY_REPLICAS replicas created, then a rolling update of all, on $NODES kwok nodes (managers: $MANAGERS; qps $QPS, burst $BURST)"
      args=(deployment --deployments "$DEPLOY_COUNT" --replicas "$DEPLOY_REPLICAS") ;;
    cronjob)
      step "scenario cronjob: $CRONJOB_COUNT CronJobs on */1, $CRONJOB_MINUTES scheduled minutes measured (managers: $MANAGERS; qps $QPS, burst $BURST)"
      # Up to a minute of startup before the first measured minute, then one per minute.
      min=$(( (CRONJOB_MINUTES + 3) * 60 ))
      [ "$timeout" -ge "$min" ] || timeout=$min
      args=(cronjob --cronjobs "$CRONJOB_COUNT" --minutes "$CRONJOB_MINUTES") ;;
    daemonset)
      step "scenario daemonset: $DS_NODES kwok nodes of its own, create, rolling update (maxSurge 10%), $DS_CHURN node adds and deletes, $DS_HEARTBEAT_ROUNDS idle heartbeat rounds (managers: $MANAGERS; qps $QPS, burst $BURST)"
      args=(daemonset --nodes "$DS_NODES" --churn "$DS_CHURN" --heartbeat-rounds "$DS_HEARTBEAT_ROUNDS") ;;
    statefulset)
      step "scenario statefulset: Parallel 0 -> $STS_PARALLEL, OrderedReady 0 -> $STS_ORDERED, rolling update of the $STS_PARALLEL, on $NODES kwok nodes (managers: $MANAGERS; qps $QPS, burst $BURST)"
      args=(statefulset --parallel "$STS_PARALLEL" --ordered "$STS_ORDERED") ;;
    job-1k)
      step "scenario job-1k: Indexed Job, $JOB_COMPLETIONS completions, parallelism $JOB_PARALLELISM (managers: $MANAGERS; qps $QPS, burst $BURST)"
      args=(job --id job-1k --completions "$JOB_COMPLETIONS" --parallelism "$JOB_PARALLELISM") ;;
    job-10k)
      step "scenario job-10k: Indexed Job, $JOB_LARGE_COMPLETIONS completions, parallelism $JOB_LARGE_PARALLELISM (managers: $MANAGERS; qps $QPS, burst $BURST)"
      args=(job --id job-10k --completions "$JOB_LARGE_COMPLETIONS" --parallelism "$JOB_LARGE_PARALLELISM") ;;
    job-ttl)
      step "scenario job-ttl: $JOB_TTL_JOBS one-pod Jobs with ttlSecondsAfterFinished 0 (managers: $MANAGERS; qps $QPS, burst $BURST)"
      args=(job-ttl --jobs "$JOB_TTL_JOBS") ;;
    mass-rollout)
      step "scenario mass-rollout: $MASS_DEPLOYMENTS Deployments x $MASS_REPLICAS replicas in one namespace, created, then all updated at once, on kwok nodes of its own (managers: $MANAGERS; qps $QPS, burst $BURST)"
      [ "$timeout" -ge "$MASS_TIMEOUT" ] || timeout=$MASS_TIMEOUT
      args=(mass-rollout --deployments "$MASS_DEPLOYMENTS" --replicas "$MASS_REPLICAS") ;;
    envelope)
      [ "$ENVELOPE_NAMESPACES" -le 64 ] || die "envelope: at most 64 namespaces (the audit policy names 64)"
      step "scenario envelope: $ENVELOPE_NAMESPACES namespaces x $ENVELOPE_PODS_PER_NAMESPACE pods on $(( ENVELOPE_NAMESPACES * ENVELOPE_NODES_PER_NAMESPACE )) kwok nodes of its own, $ENVELOPE_THROUGHPUT pods/s (managers: $MANAGERS; qps $QPS, burst $BURST)"
      grep -q -- "- 0-bench-envelope-rkcm-shards-client$" "$DIR/audit-policy.yaml" 2>/dev/null ||
        warn "envelope: the running plane does not log pod creates with their body; pods made from generateName go unattributed in the reaction latency (restart the plane)"
      [ "$timeout" -ge "$ENVELOPE_TIMEOUT" ] || timeout=$ENVELOPE_TIMEOUT
      args=(envelope --namespaces "$ENVELOPE_NAMESPACES" --pods-per-namespace "$ENVELOPE_PODS_PER_NAMESPACE"
        --nodes-per-namespace "$ENVELOPE_NODES_PER_NAMESPACE" --throughput "$ENVELOPE_THROUGHPUT"
        --probes "$ENVELOPE_PROBES" --churn "$ENVELOPE_CHURN") ;;
    idle-empty)
      step "scenario idle-empty: every implemented controller on an empty plane, synced + $IDLE_SECONDS s idle (managers: $MANAGERS; qps $QPS, burst $BURST)"
      args=(idle --id idle-empty --nodes 0 --pods 0 --idle-seconds "$IDLE_SECONDS") ;;
    idle)
      step "scenario idle: every implemented controller, $IDLE_NODES nodes and $IDLE_PODS running pods, synced + $IDLE_SECONDS s idle (managers: $MANAGERS; qps $QPS, burst $BURST)"
      [ -f "$RESULTS/idle-empty.json" ] || warn "idle: no idle-empty result in $RESULTS, so no bytes per cached pod (run idle-empty first)"
      args=(idle --nodes "$IDLE_NODES" --pods "$IDLE_PODS" --idle-seconds "$IDLE_SECONDS"
        --baseline "$RESULTS/idle-empty.json") ;;
    threshold)
      step "scenario threshold: $THRESHOLD_PODS pods on $THRESHOLD_NODES kwok nodes loaded converged; cold start, $THRESHOLD_SETTLED_SECONDS s settled, reaction, failover (managers: $MANAGERS; qps $QPS, burst $BURST)"
      [ "$timeout" -ge "$THRESHOLD_TIMEOUT" ] || timeout=$THRESHOLD_TIMEOUT
      keep=()
      [ "${THRESHOLD_KEEP:-0}" = 0 ] || keep=(--keep-loaded)
      # The last scenario on a plane torn down afterwards: deleting 100 000 pods one by one
      # (the plane runs no namespace controller) would take longer than the load.
      if [ "$s" = "${SCENARIOS##*,}" ] && [ "$started" = 1 ] && [ "${BENCH_KEEP_PLANE:-0}" != 1 ]; then
        keep=(--keep-loaded)
      fi
      [ -z "${THRESHOLD_NAMESPACES:-}" ] || keep+=(--namespaces "$THRESHOLD_NAMESPACES")
      args=(threshold --pods "$THRESHOLD_PODS" --nodes "$THRESHOLD_NODES"
        --settled-seconds "$THRESHOLD_SETTLED_SECONDS" --probes "$THRESHOLD_PROBES"
        --burst-changes "$THRESHOLD_BURST" --load-concurrency "$THRESHOLD_LOAD_CONCURRENCY"
        --metrics-port "$THRESHOLD_METRICS_PORT" "${keep[@]}") ;;
  esac
  rc=0
  id=()
  [ -z "$suffix" ] || id=(--result-id "$s$suffix")
  "$BENCH" "${args[@]}" --timeout "$timeout" --out "$WORK/$s$suffix.json" "${common[@]}" "${id[@]}" 9>&- || rc=$?
  case "$rc" in
    0) ;;
    3) failed=1; warn "scenario $s: some runs failed (see the report)" ;;
    *) failed=1; warn "scenario $s: the bench failed (exit $rc)" ;;
  esac
  # The newest result replaces the scenario's previous one, failed runs included; a bench
  # that wrote nothing leaves the previous result in place.
  if [ -s "$WORK/$s$suffix.json" ]; then
    cp "$WORK/$s$suffix.json" "$RESULTS/$s$suffix.json"
  else
    warn "scenario $s wrote no result; the report keeps its previous one (if any)"
  fi
done

step "report"
results=()
for s in ${ALL_SCENARIOS//,/ }; do
  [ ! -f "$RESULTS/$s.json" ] || results+=("$RESULTS/$s.json")
  [ ! -f "$RESULTS/$s-shards.json" ] || results+=("$RESULTS/$s-shards.json")
  for f in "$RESULTS/$s"-size-*.json; do [ ! -f "$f" ] || results+=("$f"); done
done
[ "${#results[@]}" -gt 0 ] || die "no scenario results in $RESULTS"
rc=0
"$BENCH" report "${results[@]}" --md "$REPORT" --json "$REPORT_JSON" --command "$what" \
  --plane "$plane_line" ||
  rc=$?
[ "$rc" = 0 ] || [ "$rc" = 3 ] || die "writing the report failed"
[ "$rc" = 0 ] || failed=1

step "done in $(( $(date +%s) - t0 )) s: $REPORT (raw: $REPORT_JSON; charts beside it; manager logs: $WORK/logs)"
[ "$failed" = 0 ] || { warn "some runs failed; see $REPORT"; exit 1; }
