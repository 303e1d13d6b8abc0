//! The controller's name, its upstream defaults and its configuration.

use crate::consts;

/// Canonical name of the ReplicaSet controller (`--controllers`; alias `replicaset`).
pub const NAME: &str = consts::RS_CONTROLLER_NAME;
/// Canonical name of the ReplicationController controller (alias `replicationcontroller`).
pub const RC_NAME: &str = consts::RC_CONTROLLER_NAME;

/// Upstream default of `--concurrent-replicaset-syncs` and `--concurrent-rc-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// Configuration of one controller (RS or RC). `Default` equals upstream. The flags
/// (`--concurrent-replicaset-syncs`, `--concurrent-rc-syncs`, `--feature-gates`) are defined
/// once in the binary's command line, which builds this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Worker tasks (`--concurrent-replicaset-syncs` / `--concurrent-rc-syncs`).
    pub workers: usize,
    /// Gate `DeploymentReplicaSetTerminatingReplicas` (beta, on): report
    /// `status.terminatingReplicas` on ReplicaSets. Never reported for RCs.
    pub terminating_replicas: bool,
    /// Gate `PodDeletionCost` (beta, on): honour the pod-deletion-cost annotation.
    pub pod_deletion_cost: bool,
    /// Gate `StaleControllerConsistencyReplicaSet` (beta, on since v1.36; needs `AtomicFIFO`):
    /// skip a ReplicaSet's sync until the caches show the controller's own writes for it.
    /// Ignored by the RC controller.
    pub stale_cache_guard: bool,
    /// Most creates or deletes per sync (upstream `BurstReplicas`, not a flag).
    pub burst_replicas: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            terminating_replicas: true,
            pod_deletion_cost: true,
            stale_cache_guard: true,
            burst_replicas: consts::BURST_REPLICAS,
        }
    }
}
