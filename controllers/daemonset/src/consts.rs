//! Exact upstream strings and numbers (`pkg/controller/daemon/daemon_controller.go`,
//! `util/daemonset_util.go`, `k8s.io/api/apps/v1` and `core/v1` constants).

/// Canonical controller name (`--controllers`); alias [`ALIAS`].
pub const CONTROLLER_NAME: &str = "daemonset-controller";
/// Alias accepted by `--controllers`.
pub const ALIAS: &str = "daemonset";
/// Event source component.
pub const EVENT_COMPONENT: &str = "daemonset-controller";
/// Work queue of DaemonSet keys.
pub const QUEUE_NAME: &str = "daemonset";
/// Work queue of node names (node add/update handling).
pub const NODE_QUEUE_NAME: &str = "daemonset-node-updates";

/// Most creates and most deletes per sync (`BurstReplicas`).
pub const BURST_REPLICAS: usize = 250;
/// Status write retries after the first attempt (`StatusUpdateRetries`).
pub const STATUS_UPDATE_RETRIES: usize = 1;
/// Failed-pod back-off: first delay.
pub const FAILED_POD_BACKOFF_INITIAL: std::time::Duration = std::time::Duration::from_secs(1);
/// Failed-pod back-off: longest delay.
pub const FAILED_POD_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// How often stale back-off entries are dropped (`BackoffGCInterval`).
pub const BACKOFF_GC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);
/// Upstream default of `--concurrent-daemonset-syncs`.
pub const DEFAULT_WORKERS: usize = 2;

/// Labels and annotations.
pub mod labels {
    /// Pod and revision label holding the revision hash (`apps.DefaultDaemonSetUniqueLabelKey`).
    pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
    /// Pod label holding the template generation (`extensions.DaemonSetTemplateGenerationKey`).
    pub const POD_TEMPLATE_GENERATION: &str = "pod-template-generation";
    /// DaemonSet annotation the apiserver maintains with the template generation.
    pub const DEPRECATED_TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";
}

/// Event reasons on the DaemonSet.
pub mod reasons {
    pub const SELECTING_ALL: &str = "SelectingAll";
    /// Defined upstream but no longer emitted.
    pub const FAILED_PLACEMENT: &str = "FailedPlacement";
    pub const FAILED_DAEMON_POD: &str = "FailedDaemonPod";
    pub const SUCCEEDED_DAEMON_POD: &str = "SucceededDaemonPod";
}

/// Event messages.
pub mod messages {
    pub const SELECTING_ALL: &str =
        "This daemon set is selecting all pods. A non-empty selector is required.";
}

/// Update strategy types.
pub mod strategy {
    pub const ROLLING_UPDATE: &str = "RollingUpdate";
    pub const ON_DELETE: &str = "OnDelete";
}

/// Taint keys and effects (`k8s.io/api/core/v1` well-known taints).
pub mod taints {
    pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
    pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
    pub const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
    pub const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
    pub const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
    pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
    pub const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

    pub const NO_SCHEDULE: &str = "NoSchedule";
    pub const NO_EXECUTE: &str = "NoExecute";
    pub const PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
}

/// Node selector and toleration operators.
pub mod ops {
    pub const IN: &str = "In";
    pub const NOT_IN: &str = "NotIn";
    pub const EXISTS: &str = "Exists";
    pub const DOES_NOT_EXIST: &str = "DoesNotExist";
    pub const GT: &str = "Gt";
    pub const LT: &str = "Lt";
    pub const EQUAL: &str = "Equal";
}

/// rkcm's own annotation (not upstream's): `"true"` makes this DaemonSet's rolling update
/// leave NotReady nodes out, `"false"` keeps upstream's arithmetic even when the manager opted
/// every DaemonSet in (see `plan::skips_not_ready_nodes` for what it risks).
pub const SKIP_NOT_READY_NODES_ANNOTATION: &str = "rkcm.io/daemonset-rollout-skip-not-ready-nodes";

/// The only field `matchFields` supports (`metav1.ObjectNameField`).
pub const OBJECT_NAME_FIELD: &str = "metadata.name";

/// Metric names (`pkg/controller/daemon/metrics`).
pub mod metrics {
    pub const SUBSYSTEM: &str = "daemonset_controller";
    pub const STALE_SYNC_SKIPS_HELP: &str =
        "Number of times a DaemonSet sync was skipped because the informer cache was stale.";
}
