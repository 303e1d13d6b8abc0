//! Mass rollout (upstream issue kubernetes/kubernetes#117123: a namespace of ~3 000
//! Deployments and ~10 000 pods rolled at once drove kube-controller-manager's memory and CPU
//! up without bound): N Deployments × R replicas in ONE namespace, created and available,
//! then all updated at once.
//!
//! The work and its checks are the Deployment scenario's (`deployment.rs`: Deployments
//! created before the manager starts, phase *create* until every one is available, then
//! every pod template patched at once, phase *rolling update* until every one has rolled out:
//! `observedGeneration`, `updatedReplicas = availableReplicas = replicas`, old ReplicaSets at
//! 0; the same correctness verdict). What this scenario adds:
//! - the size (1 000 × 10 by default: 10 000 pods, up to 13 000 at once with maxSurge 25%);
//! - kwok nodes of its own, enough for that peak plus every old pod still terminating (110
//!   pods each, labelled `type: kwok` like the plane's so the Deployments' pods may use them,
//!   and `rkcm-bench/mass=<namespace>`), created and Ready before the manager starts and
//!   deleted in cleanup, so `BENCH_NODES` needs no raising;
//! - the manager's RSS curve over the run (largest `VmRSS` sample of every 5 s), to show
//!   whether memory stays bounded while the rollout runs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Env, Probe, Scenario};
use crate::nodes;
use crate::results::{Correctness, Metric};
use crate::scenarios::deployment::{self, DeploymentRollout};
use crate::scenarios::podgc::group;

/// Label naming the run a node belongs to (value: the run's namespace).
pub const NODE_LABEL: &str = "rkcm-bench/mass";
/// Pods per kwok node (the plane's nodes and these alike).
const PODS_PER_NODE: usize = 110;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Deployments in the one namespace.
    #[arg(long, default_value_t = 1_000)]
    pub deployments: usize,
    /// Replicas of each Deployment.
    #[arg(long, default_value_t = 10)]
    pub replicas: usize,
    /// Seconds per point of the RSS curve.
    #[arg(long, default_value_t = 5)]
    pub curve_seconds: u64,
}

pub struct MassRollout {
    args: Args,
    inner: DeploymentRollout,
}

impl MassRollout {
    pub fn new(args: Args) -> Self {
        let inner = DeploymentRollout {
            args: deployment::Args {
                deployments: args.deployments,
                replicas: args.replicas,
            },
        };
        Self { args, inner }
    }

    /// The most pods at once: every Deployment at replicas + maxSurge (25%, rounded up).
    fn peak_pods(&self) -> usize {
        self.args.deployments * (self.args.replicas + (self.args.replicas * 25).div_ceil(100))
    }

    /// Pods that may hold a place on a node at once: the surge peak, plus every old pod still
    /// terminating beside it. A deleted pod keeps its place until kwok removes it, and kwok
    /// can fall behind a fast rollout by thousands of pods (with its default four workers it
    /// did); without this room the new pods wait for places, the scheduler retries them on
    /// every removal, and the run measures that crunch more than the manager.
    fn placed_pods(&self) -> usize {
        self.peak_pods() + self.args.deployments * self.args.replicas
    }

    /// Nodes of the run's own: room for [`Self::placed_pods`], plus one.
    fn nodes(&self) -> usize {
        self.placed_pods().div_ceil(PODS_PER_NODE) + 1
    }
}

fn node_name(ns: &str, i: usize) -> String {
    format!("{ns}-n{i:04}")
}

impl Scenario for MassRollout {
    type State = deployment::State;

    fn id(&self) -> &'static str {
        "mass-rollout"
    }

    fn title(&self) -> String {
        format!(
            "Mass rollout: {} Deployments × {} replicas in one namespace, all updated at once",
            group(self.args.deployments),
            group(self.args.replicas)
        )
    }

    fn description(&self) -> String {
        format!(
            "The case of upstream issue kubernetes/kubernetes#117123 (a namespace of ~3 000 \
             Deployments and ~10 000 pods rolled at once drove the controller-manager's memory \
             and CPU up without bound). {nodes} kwok nodes of the run's own (110 pods each, \
             room for the surge peak of {peak} pods plus every old pod still terminating, \
             {placed} in all, so no new pod waits for a place while kwok removes deleted ones) \
             are created and Ready before the manager starts, and deleted afterwards. Then, \
             as in the Deployment scenario: {d} Deployments of {r} replicas in ONE namespace, \
             created before the manager starts; \
             **create** until every one is available; then every pod template is patched at \
             once and **rolling update** runs until every Deployment has rolled out \
             (`observedGeneration` = `generation`, `updatedReplicas` = `availableReplicas` = \
             `replicas` = {r}, Progressing reason `NewReplicaSetAvailable`, every old \
             ReplicaSet at 0, exactly {r} pods of the new template). The same correctness \
             checks as the Deployment scenario (surge bound on `spec.replicas`, no \
             over-creation, one ReplicaSet per template). The manager's `VmRSS` is sampled \
             every 100 ms and kept as a curve (largest sample of every {c} s), to show whether \
             its memory stays bounded through the rollout.",
            nodes = group(self.nodes()),
            peak = group(self.peak_pods()),
            placed = group(self.placed_pods()),
            d = group(self.args.deployments),
            r = group(self.args.replicas),
            c = self.args.curve_seconds,
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        let mut p = self.inner.params();
        p.insert("own_nodes".into(), self.nodes().to_string());
        p.insert("peak_pods".into(), self.peak_pods().to_string());
        p.insert(
            "rss_curve_seconds".into(),
            self.args.curve_seconds.to_string(),
        );
        p
    }

    fn controllers(&self) -> Vec<&'static str> {
        self.inner.controllers()
    }

    fn manager_flags(&self) -> Vec<String> {
        self.inner.manager_flags()
    }

    fn rss_curve(&self) -> Option<Duration> {
        Some(Duration::from_secs(self.args.curve_seconds.max(1)))
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<Self::State> {
        let names: Vec<String> = (0..self.nodes()).map(|i| node_name(ns, i)).collect();
        let t = Instant::now();
        nodes::create_nodes(env, &names, |name| {
            let mut node = nodes::kwok_node_with_room(name, NODE_LABEL, ns, PODS_PER_NODE);
            node["metadata"]["labels"]["type"] = json!("kwok");
            node
        })
        .await?;
        nodes::wait_nodes_ready(env, NODE_LABEL, ns, names.len()).await?;
        say!(
            "{} nodes of {ns} Ready in {:.1} s",
            names.len(),
            t.elapsed().as_secs_f64()
        );
        self.inner.setup(env, ns).await
    }

    async fn converge(
        &self,
        env: &Env,
        state: &mut Self::State,
        probe: &Probe,
    ) -> anyhow::Result<()> {
        self.inner.converge(env, state, probe).await
    }

    async fn verify(&self, env: &Env, state: &mut Self::State) -> anyhow::Result<Correctness> {
        self.inner.verify(env, state).await
    }

    fn metrics(&self, state: &Self::State) -> Vec<Metric> {
        self.inner.metrics(state)
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        // Pods first (the Deployment scenario's cleanup waits until none is left), then the
        // nodes they ran on; the nodes go even when the pods' cleanup failed.
        let pods = self.inner.cleanup(env, ns).await;
        let nodes = nodes::delete_labelled_nodes(env, NODE_LABEL, ns).await;
        pods.and(nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_nodes_hold_the_surge_peak_and_the_terminating_pods() {
        let s = MassRollout::new(Args {
            deployments: 1_000,
            replicas: 10,
            curve_seconds: 5,
        });
        // 10 replicas + maxSurge 3 (25% rounded up) = 13 per Deployment.
        assert_eq!(s.peak_pods(), 13_000);
        // Plus the 10 000 old pods, all of them possibly still terminating.
        assert_eq!(s.placed_pods(), 23_000);
        assert!(s.nodes() * PODS_PER_NODE >= 23_000);
        assert_eq!(s.nodes(), 211);
    }
}
