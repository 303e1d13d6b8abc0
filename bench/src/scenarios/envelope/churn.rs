//! Disruptions while the load phases run, as clusterloader2's load test adds churn to its
//! steady work: at a fixed rate, in turn, a running pod of a ReplicaSet, of a StatefulSet and
//! of the DaemonSet is deleted (its controller must replace it) and a one-pod Job is created.
//! These are the changes whose reaction latency is measured under load, besides the phases'
//! own changes.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use tokio::sync::oneshot;

use super::mix::{Rng, Workload};
use super::objects;
use super::writes::create;
use crate::k8s;

/// Running, not deleted pods of `pods` whose controller is a `owner_kind`.
fn running_of(pods: &Store<Pod>, owner_kind: &str) -> Vec<Arc<Pod>> {
    pods.state()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|ph| ph == "Running")
        })
        .filter(|p| p.owner_references().iter().any(|o| o.kind == owner_kind))
        .collect()
}

/// Deletes one running pod of a `owner_kind`, chosen by `rng` (none when there is none).
pub async fn delete_one_pod(
    client: &Client,
    pods: &Store<Pod>,
    owner_kind: &str,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let of = running_of(pods, owner_kind);
    if of.is_empty() {
        return Ok(());
    }
    let p = &of[rng.below(of.len())];
    let (ns, name) = (p.namespace().unwrap_or_default(), p.name_any());
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let dp = DeleteParams::default();
    match k8s::retry(|| api.delete(&name, &dp)).await {
        Ok(_) => Ok(()),
        Err(e) if k8s::is_status(&e, 404) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting pod {ns}/{name}")),
    }
}

/// The running churn; [`Churn::stop`] ends it and hands back the Jobs it created.
pub struct Churn {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<Vec<Workload>>>,
}

impl Churn {
    /// Starts the churn: one disruption every `every`; its Jobs go to namespace `ns`.
    pub fn start(
        client: Client,
        pods: Store<Pod>,
        run: String,
        ns: String,
        every: Duration,
    ) -> Self {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut rng = Rng::new(6);
            let mut jobs = Vec::new();
            for i in 0usize.. {
                tokio::select! {
                    biased;
                    _ = &mut stopped => break,
                    _ = tick.tick() => {}
                }
                match i % 4 {
                    0 => delete_one_pod(&client, &pods, "ReplicaSet", &mut rng).await?,
                    1 => delete_one_pod(&client, &pods, "StatefulSet", &mut rng).await?,
                    2 => delete_one_pod(&client, &pods, "DaemonSet", &mut rng).await?,
                    _ => {
                        let job = Workload::one_pod_job(format!("job-probe-load-{i}"));
                        create(&client, &ns, &job, objects::object(&run, &job)).await?;
                        jobs.push(job);
                    }
                }
            }
            Ok(jobs)
        });
        Self { stop, task }
    }

    /// Ends the churn: the Jobs it created, or its first error.
    pub async fn stop(self) -> anyhow::Result<Vec<Workload>> {
        // The task may have ended on an error already; its result says so.
        let _ = self.stop.send(());
        self.task.await.context("the churn task panicked")?
    }
}
