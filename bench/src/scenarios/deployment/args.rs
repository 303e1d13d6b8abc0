//! The scenario's sizes (N Deployments × R replicas) and the bounds upstream's defaults give them.

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Deployments to create (and roll).
    #[arg(long, default_value_t = 100)]
    pub deployments: usize,
    /// Replicas of each Deployment.
    #[arg(long, default_value_t = 20)]
    pub replicas: usize,
}

impl Args {
    /// maxSurge 25% of the replicas, rounded up (as upstream resolves percentages).
    pub(super) fn max_surge(&self) -> usize {
        (self.replicas * 25).div_ceil(100)
    }

    /// maxUnavailable 25% of the replicas, rounded down.
    pub(super) fn max_unavailable(&self) -> usize {
        self.replicas * 25 / 100
    }

    /// The most pods (and summed ReplicaSet replicas) a Deployment may have at once.
    pub(super) fn limit(&self) -> usize {
        self.replicas + self.max_surge()
    }

    pub(super) fn names(&self) -> Vec<String> {
        let width = self.deployments.saturating_sub(1).to_string().len().max(3);
        (0..self.deployments)
            .map(|i| format!("d-{i:0width$}"))
            .collect()
    }
}
