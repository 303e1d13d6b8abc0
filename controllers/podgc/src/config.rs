//! The controller's name, its upstream defaults and its configuration.

use std::time::Duration;

/// Canonical controller name (`--controllers`); upstream alias `podgc`.
pub const NAME: &str = "pod-garbage-collector-controller";

/// Upstream default of `--terminated-pod-gc-threshold`.
pub const DEFAULT_TERMINATED_POD_GC_THRESHOLD: i32 = 12500;
/// Upstream `gcCheckPeriod`.
pub const DEFAULT_GC_CHECK_PERIOD: Duration = Duration::from_secs(20);
/// Upstream `quarantineTime`.
pub const DEFAULT_QUARANTINE: Duration = Duration::from_secs(40);
/// Upstream starts one goroutine per pod; rkcm bounds the in-flight deletes of one sweep
/// (the client's QPS limit is the real throttle either way).
pub const DEFAULT_DELETE_CONCURRENCY: usize = 50;

/// PodGC's kube-controller-manager flags.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Options {
    /// Number of terminated pods that can exist before the terminated pod garbage collector
    /// starts deleting terminated pods. If <= 0, the terminated pod garbage collector is
    /// disabled.
    #[arg(
        long = "terminated-pod-gc-threshold",
        value_name = "int32",
        default_value_t = DEFAULT_TERMINATED_POD_GC_THRESHOLD,
        allow_negative_numbers = true
    )]
    pub terminated_pod_gc_threshold: i32,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            terminated_pod_gc_threshold: DEFAULT_TERMINATED_POD_GC_THRESHOLD,
        }
    }
}

/// PodGC's configuration. `Default` equals upstream; the period and quarantine are not flags
/// (upstream hard-codes them) but tests may shorten them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Terminated pods allowed cluster-wide before the terminated sweep deletes; ≤ 0
    /// disables that sweep only.
    pub terminated_pod_gc_threshold: i32,
    /// Pause between the end of one sweep and the start of the next.
    pub gc_check_period: Duration,
    /// How long a node name must stay unknown to the cache before a live `GET` may confirm
    /// it is gone.
    pub quarantine: Duration,
    /// Most force deletes in flight at once in the terminated and out-of-service sweeps
    /// (0 counts as 1).
    pub delete_concurrency: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            terminated_pod_gc_threshold: DEFAULT_TERMINATED_POD_GC_THRESHOLD,
            gc_check_period: DEFAULT_GC_CHECK_PERIOD,
            quarantine: DEFAULT_QUARANTINE,
            delete_concurrency: DEFAULT_DELETE_CONCURRENCY,
        }
    }
}

impl From<&Options> for Config {
    fn from(o: &Options) -> Self {
        Self {
            terminated_pod_gc_threshold: o.terminated_pod_gc_threshold,
            ..Self::default()
        }
    }
}
