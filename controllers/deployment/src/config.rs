//! The controller's name, its upstream defaults and its configuration.

/// Canonical name of the Deployment controller (`--controllers`; alias `deployment`).
pub const NAME: &str = "deployment-controller";

/// Upstream default of `--concurrent-deployment-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// Configuration. `Default` equals upstream. The flags (`--concurrent-deployment-syncs`,
/// `--feature-gates`) are defined once in the binary's command line, which builds this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Worker tasks (`--concurrent-deployment-syncs`).
    pub workers: usize,
    /// Gate `DeploymentReplicaSetTerminatingReplicas` (beta, on): report
    /// `status.terminatingReplicas`.
    pub terminating_replicas: bool,
    /// Not upstream (`--rkcm-deployment-stale-cache-guard`, on): a sync waits until the
    /// Deployment and ReplicaSet caches show this controller's own last writes for that
    /// Deployment, the guard upstream gives the ReplicaSet, StatefulSet, DaemonSet and Job
    /// controllers (`StaleControllerConsistency*`) and not the Deployment controller. Without
    /// it, a sync on a cache that lags behind a ReplicaSet the controller just created can
    /// scale the ReplicaSets beyond `replicas + maxSurge`. With it, a rolling step also reads
    /// each ReplicaSet's available count from its pods in the cache, and scales down by
    /// whichever of that and the status scales down less.
    pub stale_cache_guard: bool,
    /// Not upstream (`--rkcm-deployment-rollback-on-progress-deadline`, off): every
    /// Deployment whose rollout passes its progress deadline is rolled back to its previous
    /// revision, once (`crate::plan::deadline`). A Deployment's annotation
    /// `rkcm.io/deployment-rollback-on-progress-deadline` (`"true"`/`"false"`) overrides it.
    pub rollback_on_progress_deadline: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            terminating_replicas: true,
            stale_cache_guard: true,
            rollback_on_progress_deadline: false,
        }
    }
}
