//! The controller's name, its upstream defaults and its configuration.

/// Canonical name (`--controllers`; alias `statefulset`).
pub const NAME: &str = "statefulset-controller";

/// Upstream default of `--concurrent-statefulset-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// Configuration; `Default` equals upstream v1.37.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `--concurrent-statefulset-syncs`.
    pub workers: usize,
    /// Gate `MaxUnavailableStatefulSet` (beta, on in v1.37).
    pub max_unavailable: bool,
    /// Gate `StaleControllerConsistencyStatefulSet` (beta, on).
    pub stale_cache_guard: bool,
    /// Gate `StatefulSetSemanticRevisionComparison` (beta, on).
    pub semantic_revision_comparison: bool,
    /// rkcm's own opt-in (`--rkcm-statefulset-recover-stuck-rollout`, off): stuck-rollout
    /// recovery for every set without the annotation ([`crate::recovery`]).
    pub recover_stuck_rollout: bool,
    /// `--rkcm-statefulset-recover-stuck-after` (5 minutes): how long a pod of the current
    /// revision must be broken before recovery replaces it.
    pub recover_stuck_after: std::time::Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            max_unavailable: true,
            stale_cache_guard: true,
            semantic_revision_comparison: true,
            recover_stuck_rollout: false,
            recover_stuck_after: crate::recovery::DEFAULT_AFTER,
        }
    }
}
