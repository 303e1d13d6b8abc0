//! The controller's name, its upstream defaults and its configuration.

use crate::consts;

/// Canonical name (`--controllers`; alias `daemonset`).
pub const NAME: &str = consts::CONTROLLER_NAME;

/// Configuration; `Default` equals upstream. The flags (`--concurrent-daemonset-syncs`,
/// `--feature-gates`) are defined once in the binary's command line, which builds this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Workers per queue (`--concurrent-daemonset-syncs`).
    pub workers: usize,
    /// Gate `StaleControllerConsistencyDaemonSet` (beta, on since v1.36; needs `AtomicFIFO`).
    pub stale_cache_guard: bool,
    /// Most creates and most deletes per sync (upstream `BurstReplicas`, not a flag).
    pub burst_replicas: usize,
    /// Gate `TaintTolerationComparisonOperators` (alpha, off): `Gt`/`Lt` tolerations.
    pub taint_comparison_operators: bool,
    /// rkcm's own opt-in (`--rkcm-daemonset-rollout-skip-not-ready-nodes`, off): rolling
    /// updates leave NotReady nodes out (see [`crate::plan::skips_not_ready_nodes`]).
    pub rollout_skips_not_ready_nodes: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: consts::DEFAULT_WORKERS,
            stale_cache_guard: true,
            burst_replicas: consts::BURST_REPLICAS,
            taint_comparison_operators: false,
            rollout_skips_not_ready_nodes: false,
        }
    }
}
