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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            max_unavailable: true,
            stale_cache_guard: true,
            semantic_revision_comparison: true,
        }
    }
}
