//! Exact strings PodGC shares with upstream and with the rest of the cluster. Changing any of
//! them breaks compatibility with dashboards, Job pod-failure policies or admin runbooks.

/// The taint an admin puts on a node known to be shut down (non-graceful node shutdown,
/// KEP-2268). Matched by key only: any value, any effect.
pub const TAINT_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// The node condition that decides readiness; anything but status `True` is "not ready".
pub const NODE_CONDITION_READY: &str = "Ready";

/// `status.reason` the kubelet writes on evicted pods; with phase `Failed` it marks a pod as
/// evicted (upstream `eviction.PodIsEvicted`).
pub const POD_REASON_EVICTED: &str = "Evicted";

/// The condition added to orphaned pods before they are deleted. Job `podFailurePolicy`
/// rules match on `DisruptionTarget` and on the reason (KEP-3329).
pub const CONDITION_DISRUPTION_TARGET: &str = "DisruptionTarget";
pub const REASON_DELETION_BY_POD_GC: &str = "DeletionByPodGC";
pub const MESSAGE_NODE_NO_LONGER_EXISTS: &str = "PodGC: node no longer exists";

/// Field manager of the status apply, so `managedFields` name PodGC as the writer of the
/// phase and condition.
pub const FIELD_MANAGER: &str = "PodGC";

/// Name of the quarantine queue of node names (upstream's delaying queue; also the
/// `name` label of workqueue metrics).
pub const NODE_QUEUE_NAME: &str = "orphaned_pods_nodes";

/// Metric names and the values of their `reason` label (upstream
/// `pkg/controller/podgc/metrics`).
pub mod metrics {
    pub const SUBSYSTEM: &str = "pod_gc_collector";
    pub const FORCE_DELETE_PODS_TOTAL: &str = "force_delete_pods_total";
    pub const FORCE_DELETE_POD_ERRORS_TOTAL: &str = "force_delete_pod_errors_total";
    pub const FORCE_DELETE_PODS_TOTAL_HELP: &str = "[ALPHA] Number of pods that are being forcefully deleted since the Pod GC Controller started.";
    pub const FORCE_DELETE_POD_ERRORS_TOTAL_HELP: &str = "[ALPHA] Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.";
    pub const LABEL_NAMESPACE: &str = "namespace";
    pub const LABEL_REASON: &str = "reason";

    pub const REASON_TERMINATED: &str = "terminated";
    pub const REASON_OUT_OF_SERVICE: &str = "out-of-service";
    pub const REASON_ORPHANED: &str = "orphaned";
    pub const REASON_UNSCHEDULED: &str = "unscheduled";
}
