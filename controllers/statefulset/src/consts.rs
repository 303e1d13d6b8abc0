//! Exact upstream strings and numbers (`k8s.io/api/apps/v1/types.go`,
//! `pkg/controller/statefulset/stateful_pod_control.go`, `stateful_set.go`,
//! `metrics/metrics.go`).

/// Work queue name (`workqueue_*{name="statefulset"}`).
pub const QUEUE_NAME: &str = "statefulset";
/// Event source component.
pub const EVENT_COMPONENT: &str = "statefulset-controller";

/// Pod labels the controller maintains.
pub mod labels {
    /// `apps.StatefulSetRevisionLabel`: the full ControllerRevision name.
    pub const REVISION: &str = "controller-revision-hash";
    /// `apps.StatefulSetPodNameLabel`.
    pub const POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
    /// `apps.PodIndexLabel`.
    pub const POD_INDEX: &str = "apps.kubernetes.io/pod-index";
}

/// `spec.podManagementPolicy` values.
pub mod policy {
    pub const ORDERED_READY: &str = "OrderedReady";
    pub const PARALLEL: &str = "Parallel";
}

/// `spec.updateStrategy.type` values.
pub mod strategy {
    pub const ROLLING_UPDATE: &str = "RollingUpdate";
    pub const ON_DELETE: &str = "OnDelete";
    /// Alpha in v1.37 behind gate `StatefulSetRecreateStrategy`, which rkcm does not
    /// implement.
    pub const RECREATE: &str = "Recreate";
}

/// `persistentVolumeClaimRetentionPolicy` values.
pub mod retention {
    pub const DELETE: &str = "Delete";
}

/// Event reasons.
pub mod reasons {
    pub const CONFLICTING_CONTROLLER: &str = "ConflictingController";
    pub const UNKNOWN_STRATEGY: &str = "UnknownStrategy";
}

/// Pod phases.
pub mod phase {
    pub const PENDING: &str = "Pending";
    pub const RUNNING: &str = "Running";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
}

/// `MaxBatchSize` of the burst (Parallel) slow-start batches.
pub const MAX_BATCH_SIZE: usize = 500;

/// Metric names (subsystem `statefulset_controller`).
pub mod metrics {
    pub const SUBSYSTEM: &str = "statefulset_controller";
    pub const STALE_SYNC_SKIPS_HELP: &str =
        "[ALPHA] Total number of StatefulSet syncs skipped due to a stale watch cache.";
    pub const MAX_UNAVAILABLE: &str = "statefulset_max_unavailable";
    pub const MAX_UNAVAILABLE_HELP: &str =
        "[ALPHA] Maximum number of unavailable pods allowed during a StatefulSet rolling update.";
    pub const UNAVAILABLE_REPLICAS: &str = "statefulset_unavailable_replicas";
    pub const UNAVAILABLE_REPLICAS_HELP: &str =
        "[ALPHA] Current number of unavailable pods in a StatefulSet.";
    pub const SET_LABELS: &[&str] = &[
        "statefulset_namespace",
        "statefulset_name",
        "pod_management_policy",
    ];
}
