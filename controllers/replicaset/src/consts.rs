//! Exact strings the ReplicaSet and ReplicationController controllers share with upstream
//! (`pkg/controller/replicaset/replica_set.go`, `replica_set_utils.go`,
//! `pkg/controller/controller_utils.go`). Dashboards, `kubectl describe` and alerting select on
//! them; changing one breaks compatibility.

/// Canonical controller names (`--controllers`).
pub const RS_CONTROLLER_NAME: &str = "replicaset-controller";
pub const RC_CONTROLLER_NAME: &str = "replicationcontroller-controller";

/// `source.component` of the events each controller records.
pub const RS_EVENT_COMPONENT: &str = "replicaset-controller";
pub const RC_EVENT_COMPONENT: &str = "replication-controller";

/// Work queue names (the `name` label of `workqueue_*` metrics).
pub const RS_QUEUE_NAME: &str = "replicaset";
pub const RC_QUEUE_NAME: &str = "replicationmanager";

/// The Pod annotation that orders scale-down victims (gate `PodDeletionCost`).
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The status condition set while creates or deletes fail, and its reasons.
pub const CONDITION_REPLICA_FAILURE: &str = "ReplicaFailure";
pub const REASON_FAILED_CREATE: &str = "FailedCreate";
pub const REASON_FAILED_DELETE: &str = "FailedDelete";
pub const CONDITION_TRUE: &str = "True";

/// Pod fields the deletion ranking reads (`core/v1`); phases are [`rkcm_runtime::workload::pod`]'s.
pub mod pod {
    pub const RESTART_POLICY_ALWAYS: &str = "Always";
}

/// Upstream `BurstReplicas`: most creates or deletes one sync issues.
pub const BURST_REPLICAS: usize = 500;

/// Metric names (upstream `pkg/controller/replicaset/metrics`).
pub mod metrics {
    pub const SUBSYSTEM: &str = "replicaset_controller";
    pub const SORTING_DELETION_AGE_RATIO: &str = "sorting_deletion_age_ratio";
    pub const SORTING_DELETION_AGE_RATIO_HELP: &str = "[ALPHA] The ratio of chosen deleted pod's ages to the current youngest pod's age (at the time). Should be <2. The intent of this metric is to measure the rough efficacy of the LogarithmicScaleDown feature gate's effect on the sorting (and deletion) of pods when a replicaset scales down. This only considers Ready pods when calculating and reporting.";
    pub const SORTING_DELETION_AGE_RATIO_BUCKETS: &[f64] = &[0.25, 0.5, 1.0, 2.0, 4.0, 8.0];
    pub const STALE_SYNC_SKIPS_HELP: &str =
        "[ALPHA] Total number of ReplicaSet syncs skipped due to a stale watch cache.";
}
