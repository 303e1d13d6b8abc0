//! The Deployment controller (skeleton: being built; see spec/deployment.md).

use rkcm_runtime::ControllerContext;

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
    /// Restricts the controller to Deployments, ReplicaSets and pods of these namespaces;
    /// `None` (default, upstream's behaviour) means all. Not a flag: tests sharing a cluster
    /// set it so their controller never touches other tests' objects.
    pub namespaces: Option<Vec<String>>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            terminating_replicas: true,
            namespaces: None,
        }
    }
}

/// Errors of the Deployment controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {}

/// Runs the Deployment controller until `ctx.shutdown` is cancelled.
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    let _ = cfg;
    ctx.shutdown.cancelled().await;
    Ok(())
}
