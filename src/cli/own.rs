//! rkcm's own flags: behaviour upstream kube-controller-manager does not have. Every name
//! starts with `--rkcm-`; each one's default is upstream's behaviour except
//! `--rkcm-retry-ignores-early-failures`, `--rkcm-deployment-stale-cache-guard` and
//! `--rkcm-cronjob-adopt-forgotten-runs` (all on by default), differences the README's
//! "Differences from upstream" measures. `--rkcm-cronjob-defer-status-writes`,
//! `--rkcm-daemonset-rollout-skip-not-ready-nodes` and
//! `--rkcm-statefulset-recover-stuck-rollout` and `--rkcm-deployment-rollback-on-progress-deadline`
//! are off unless asked for.

use clap::{ArgAction, Args};

use super::duration::{GoDuration, parse_duration};
use super::generic::parse_go_bool;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "rkcm's own flags (not upstream's)")]
pub struct RkcmFlags {
    /// Not upstream: DaemonSet rolling updates leave nodes whose Ready condition is not True
    /// out (they neither use the maxUnavailable/maxSurge budget nor get updated). Risk: a
    /// revision that itself makes nodes NotReady is then not stopped by the budget and rolls
    /// across the whole cluster. A DaemonSet's annotation
    /// rkcm.io/daemonset-rollout-skip-not-ready-nodes ("true"/"false") overrides this.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub rkcm_daemonset_rollout_skip_not_ready_nodes: bool,

    /// Not upstream, off by default (for large CronJob fleets): a CronJob sync's status write
    /// waits until no other sync runs (at most 5 s) so that Jobs due at the same instant are
    /// all created first. The cost: a CronJob's lastScheduleTime and active show up seconds
    /// after its Job, a write to the CronJob inside the wait makes the held write conflict (and
    /// its retry warn UnexpectedJob), and a leader lost inside the wait leaves the next leader
    /// to recover (see the README). False (the default) writes each status at the end of its
    /// sync, as upstream.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub rkcm_cronjob_defer_status_writes: bool,

    /// Not upstream, on by default: an unfinished Job the CronJob controller created for a
    /// scheduled time (its name is the controller's for that time, and the time is not in the
    /// future) that the CronJob's status forgot (the manager stopped between the create and the
    /// status write) joins status.active and its time becomes lastScheduleTime. Upstream only
    /// warns UnexpectedJob, so that time runs again once the Job is gone. A Job made by hand
    /// that carries the scheduled-timestamp annotation is left alone either way. False only
    /// warns, as upstream (strict parity runs).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "true", value_parser = parse_go_bool,
          value_name = "bool")]
    pub rkcm_cronjob_adopt_forgotten_runs: bool,

    /// Not upstream, on by default: a sync that fails before its key's retry is due (an event
    /// started it early) does not lengthen the key's backoff. Upstream counts every failure, so
    /// during an outage with many events the backoff reaches its 1000 s cap within minutes
    /// (kubernetes/kubernetes#132805) and a ReplicaSet may wait that long after the outage.
    /// False counts every failure, as upstream.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "true", value_parser = parse_go_bool,
          value_name = "bool")]
    pub rkcm_retry_ignores_early_failures: bool,

    /// Not upstream, on by default: a Deployment sync waits until the Deployment and
    /// ReplicaSet caches show the controller's own last writes for that Deployment (the guard
    /// upstream gives the ReplicaSet, StatefulSet, DaemonSet and Job controllers). Upstream
    /// has none for Deployments: a sync on a cache that lags behind a ReplicaSet it just
    /// created can size the ReplicaSets beyond replicas + maxSurge. A rolling step also reads
    /// each ReplicaSet's available replicas from its pods in the cache as well as from its
    /// status, and scales down by whichever count scales down less (a status not rewritten
    /// since its pods changed still counts the old ones). False syncs on whatever the caches
    /// hold and trusts the statuses, as upstream.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "true", value_parser = parse_go_bool,
          value_name = "bool")]
    pub rkcm_deployment_stale_cache_guard: bool,

    /// Not upstream, off by default: StatefulSet stuck-rollout recovery for every set (a
    /// set's annotation rkcm.io/statefulset-recover-stuck-rollout "true"/"false" overrides
    /// this). Under OrderedReady + RollingUpdate, a pod that is not Ready, not of the update
    /// revision and blocks the ordered rolling update is deleted so that it comes back at
    /// the update revision: at once when its revision is neither the current nor the update
    /// revision (a rolled-back or superseded rollout), else after it has been unschedulable,
    /// crash-looping or failing readiness for --rkcm-statefulset-recover-stuck-after. Never
    /// a Ready pod, never two at once, never on a node that is not Ready. False waits for
    /// the pod for ever, as upstream (kubernetes/kubernetes#67250).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub rkcm_statefulset_recover_stuck_rollout: bool,

    /// How often rkcm reads the API server's /version again after start (one GET): when an
    /// upgrade brings another minor, rkcm drains and exits 1, and its restart takes that
    /// minor's feature-gate defaults. 0 reads it at start only, as upstream's manager.
    #[arg(long, value_parser = parse_duration, default_value = "5m0s", value_name = "duration")]
    pub rkcm_apiserver_version_recheck_period: GoDuration,

    /// Not upstream, 0 (no bound, as before) by default: requests one API client (one per
    /// controller, the informers', the event writer's, ...) has in flight at most, watches
    /// not counted. kube's HTTP/1.1 client holds a connection per request in flight, with its
    /// buffers and TLS session, and keeps it 90 s after use, so a burst of writes without a
    /// bound leaves as many connections as it had requests at once (client-go multiplexes a
    /// client's requests over one HTTP/2 connection). Requests over the bound wait for a free
    /// one. A memory lever under evaluation: 16 saved 1 MiB of 46 at 600 pods.
    #[arg(long, default_value = "0", value_name = "int")]
    pub rkcm_kube_api_concurrency: usize,

    /// How long a StatefulSet pod of the current revision must be unschedulable,
    /// crash-looping or failing readiness before the stuck-rollout recovery replaces it.
    #[arg(long, value_parser = parse_duration, default_value = "5m0s", value_name = "duration")]
    pub rkcm_statefulset_recover_stuck_after: GoDuration,

    /// Not upstream, off by default: a Deployment whose rollout passes its progress deadline
    /// (Progressing=False, ProgressDeadlineExceeded) is rolled back as kubectl rollout undo
    /// does, to the newest old revision with available pods (Recreate: the revision the
    /// rollout started from), once per bad revision and never when paused (see the README's
    /// "Opt-in remedies"). A Deployment's annotation
    /// rkcm.io/deployment-rollback-on-progress-deadline ("true"/"false") overrides this. False
    /// leaves a stalled Deployment where it is, as upstream.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub rkcm_deployment_rollback_on_progress_deadline: bool,

    /// Not upstream, 0 (one active replica) by default: sharded mode. Every replica is active
    /// and they split a ring of this many namespace-hash ranges (the API server's 64-bit
    /// FNV-1a of the namespace, 1 to 1024; choose many more ranges than replicas), each range
    /// a Lease <leader-elect-resource-namespace>/rkcm-shard-<i> held with the
    /// --leader-elect-* timings: a replica acts on an object only while it holds its range,
    /// and caches only its ranges' namespaces (with the API server's shard selector when the
    /// server has gate ShardedListAndWatch, else filtered on the client). The leader Lease is
    /// not used; PodGC's cluster-wide terminated-pod threshold runs in the one replica holding
    /// Lease rkcm-shard-global. Every replica of one ring needs the same value.
    #[arg(long, default_value = "0", value_parser = parse_shards, value_name = "int")]
    pub rkcm_shards: u32,

    /// Not upstream, true by default: in sharded mode (--rkcm-shards), the informers send the
    /// API server the held ranges as a shard selector (gate ShardedListAndWatch), so that it
    /// sends only their namespaces' objects. False: they list and watch every namespace and
    /// keep only the held ranges' objects, dropping the rest as it arrives (for a server
    /// without the gate, which ignores the selector, or to compare the two; the same objects
    /// are cached either way, at the cost of the others' traffic and decoding).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "true", value_parser = parse_go_bool,
          value_name = "bool")]
    pub rkcm_shard_selector: bool,
}

/// `--rkcm-shards`: 0 (off) or a ring size.
fn parse_shards(s: &str) -> Result<u32, String> {
    let n: u32 = s.parse().map_err(|e| format!("invalid value {s:?}: {e}"))?;
    if n == 0 {
        return Ok(0);
    }
    rkcm_runtime::shard::Ring::new(n)
        .map(|_| n)
        .map_err(|e| e.to_string())
}
