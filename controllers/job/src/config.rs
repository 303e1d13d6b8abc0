//! The controller's name, its upstream defaults and its configuration.

use crate::consts;

/// Canonical name (`--controllers`; alias `job`).
pub const NAME: &str = consts::CONTROLLER_NAME;

/// Upstream default of `--concurrent-job-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// Configuration. `Default` equals upstream's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Job sync workers (`--concurrent-job-syncs`; upstream runs one orphan-pod worker
    /// besides).
    pub workers: usize,
    /// Gate `StaleControllerConsistencyJob` (beta, on).
    pub stale_cache_guard: bool,
    /// Gate `MutableSchedulingDirectivesForSuspendedJobs` (beta, on): suspending a Job clears
    /// `status.startTime`.
    pub clear_start_time_on_suspend: bool,
    /// A Job synced without a backoff record starts it from the finished pods its status
    /// accounts for ([`crate::backoff::BackoffRecord::of_counted_pods`]) instead of empty, as
    /// upstream does. Off by default; always on in sharded mode (`--rkcm-shards`), where a
    /// range moving to another replica is routine and would cut backoffs short.
    pub backoff_from_counted_pods: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            stale_cache_guard: true,
            clear_start_time_on_suspend: true,
            backoff_from_counted_pods: false,
        }
    }
}
