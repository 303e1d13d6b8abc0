//! ReplicaSet: scale 0 → N → 0 with pods on kwok-simulated nodes (the issue's "ReplicaSet
//! 0→1000 and 1000→0").
//!
//! Setup: a fresh namespace with one ReplicaSet at `replicas: 0` whose pods select the kwok
//! nodes (`type: kwok`; 110 pods per node, so N needs N/110 nodes). Then the manager starts
//! with only `replicaset-controller`, and the bench drives three steps:
//! 1. wait until the manager has written `status.observedGeneration` of the ReplicaSet (its
//!    informers have synced and it works; a milestone, not a timed phase);
//! 2. *scale up*: patch `spec.replicas` to N; done when `status.readyReplicas == N`,
//!    `status.replicas == N`, the status is of that generation, and exactly N pods are owned
//!    by the ReplicaSet (metadata watch);
//! 3. *scale down*: patch `spec.replicas` to 0; done when no pod is left in the namespace
//!    (kwok removes a pod once it is deleted) and `status.replicas == 0` of that generation.
//!
//! Each step is a timed phase: wall time from the patch to the condition, the manager's CPU
//! and its requests in between. Correct = the ReplicaSet never owned more than N pods (no
//! over-creation, watched throughout), and after the settle time none is left.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::harness::{Env, Probe, Scenario};
use crate::k8s::{self, NamedWatch, PodCount, PodWatch};
use crate::results::Correctness;
use crate::scenarios::podgc::group;

/// The ReplicaSet's name in each run's namespace.
pub const NAME: &str = "bench-rs";

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Replicas to scale up to (and back down from).
    #[arg(long, default_value_t = 1_000)]
    pub replicas: usize,
}

pub struct ReplicaSetScale {
    pub args: Args,
}

pub struct State {
    ns: String,
    rs: NamedWatch<RsSeen>,
    pods: PodWatch,
}

/// What the bench needs of the ReplicaSet, as last seen by its watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RsSeen {
    pub exists: bool,
    pub generation: i64,
    pub observed_generation: i64,
    pub replicas: i64,
    pub ready_replicas: i64,
}

impl RsSeen {
    fn of(rs: &ReplicaSet) -> Self {
        let st = rs.status.as_ref();
        Self {
            exists: true,
            generation: rs.metadata.generation.unwrap_or(0),
            observed_generation: st.and_then(|s| s.observed_generation).unwrap_or(0),
            replicas: st.map_or(0, |s| i64::from(s.replicas)),
            ready_replicas: st.and_then(|s| s.ready_replicas).map_or(0, i64::from),
        }
    }
}

impl State {
    /// Waits until `done(rs, pods)` holds, re-checking on every change either watch sees;
    /// `progress` describes the current state for the timeout message.
    async fn wait(
        &mut self,
        probe: &Probe,
        mut done: impl FnMut(&RsSeen, &PodCount) -> bool,
        progress: impl Fn(&RsSeen, &PodCount) -> String,
    ) -> anyhow::Result<(RsSeen, PodCount)> {
        loop {
            let rs = self.rs.latest();
            let pods = self.pods.latest();
            probe.progress(progress(&rs, &pods));
            if done(&rs, &pods) {
                return Ok((rs, pods));
            }
            tokio::select! {
                r = self.rs.rx.changed() => r.context("replicaset watch ended")?,
                r = self.pods.changed() => r?,
            }
        }
    }

    /// Sets `spec.replicas`; returns the generation the patch produced.
    async fn scale(&self, env: &Env, replicas: usize) -> anyhow::Result<i64> {
        let api: Api<ReplicaSet> = Api::namespaced(env.client.clone(), &self.ns);
        let patch = json!({"spec": {"replicas": replicas}});
        let (pp, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let rs = k8s::retry(|| api.patch(NAME, &pp, &patch))
            .await
            .with_context(|| format!("scaling {}/{NAME} to {replicas}", self.ns))?;
        Ok(rs.metadata.generation.unwrap_or(0))
    }
}

fn describe(rs: &RsSeen, pods: &PodCount) -> String {
    format!(
        "{} pods owned ({} in the namespace), status: replicas {} ready {} (generation {}/{})",
        pods.owned.map_or("?".into(), |n| n.to_string()),
        pods.count.map_or("?".into(), |n| n.to_string()),
        rs.replicas,
        rs.ready_replicas,
        rs.observed_generation,
        rs.generation
    )
}

impl Scenario for ReplicaSetScale {
    type State = State;

    fn id(&self) -> &'static str {
        "replicaset-scale"
    }

    fn title(&self) -> String {
        let n = group(self.args.replicas);
        format!("ReplicaSet: scale 0 → {n} → 0 on simulated nodes")
    }

    fn description(&self) -> String {
        let n = group(self.args.replicas);
        format!(
            "One ReplicaSet at `replicas: 0` in a fresh namespace, its pods selecting the kwok \
             nodes (each Running and Ready as soon as it is bound; removed once deleted). The \
             manager starts with only `replicaset-controller`; once it has written the \
             ReplicaSet's `status.observedGeneration` (milestone \"synced\"), the bench patches \
             `spec.replicas` to {n} — **scale up**, converged when `status.readyReplicas` and \
             `status.replicas` are {n} for that generation and exactly {n} pods are owned by \
             the ReplicaSet — then to 0 — **scale down**, converged when no pod is left and \
             `status.replicas` is 0. Each step is timed from the bench's patch to its \
             condition; its CPU and requests are the manager's in between. The whole run \
             (\"Converge\") is manager start to the end of the scale down. Correct: the \
             ReplicaSet never owned more than {n} pods (metadata watch over the whole run) \
             and none is left after the settle time."
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("replicas".to_string(), self.args.replicas.to_string())])
    }

    fn controllers(&self) -> Vec<&'static str> {
        vec!["replicaset-controller"]
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        let client = &env.client;
        k8s::ensure_namespace(client, ns).await?;
        // A reused plane may still hold an earlier run's objects.
        remove(env, ns).await?;
        let capacity = kwok_pod_capacity(client).await?;
        anyhow::ensure!(
            capacity >= self.args.replicas,
            "the kwok nodes hold {capacity} pods, fewer than {} replicas (raise BENCH_NODES: \
             110 pods per node)",
            self.args.replicas
        );
        let api: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
        let labels = json!({"app": "rkcm-bench-rs"});
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": NAME, "labels": labels},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": k8s::pod_spec(k8s::PAUSE, json!({"nodeSelector": {"type": "kwok"}}))
                }
            }
        }))?;
        let pp = PostParams::default();
        let created = k8s::retry(|| api.create(&pp, &rs))
            .await
            .with_context(|| format!("creating ReplicaSet {ns}/{NAME}"))?;
        let uid = created.uid().context("the created ReplicaSet has no uid")?;

        let pods = PodWatch::start_owned_empty(client, ns, uid).await?;
        let mut rs = NamedWatch::start(client, ns, NAME, "replicaset", RsSeen::of);
        tokio::time::timeout(Duration::from_secs(120), rs.rx.wait_for(|r| r.exists))
            .await
            .context("the ReplicaSet watch did not sync within 120 s")?
            .context("replicaset watch ended")?;
        anyhow::ensure!(
            rs.latest().observed_generation == 0,
            "the ReplicaSet already has a status before the manager started (another \
             replicaset controller runs?)"
        );
        Ok(State {
            ns: ns.to_string(),
            rs,
            pods,
        })
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        let n = self.args.replicas;
        let want = n as i64;

        state
            .wait(
                probe,
                |rs, _| rs.observed_generation >= 1,
                |rs, p| {
                    format!(
                        "waiting for the manager's first status write; {}",
                        describe(rs, p)
                    )
                },
            )
            .await?;
        probe.mark("synced");

        let up = probe.begin(&format!("scale up 0 → {}", group(n)));
        let generation = state.scale(env, n).await?;
        let (rs, pods) = state
            .wait(
                probe,
                |rs, p| {
                    rs.observed_generation >= generation
                        && rs.replicas == want
                        && rs.ready_replicas == want
                        && p.owned == Some(n)
                },
                describe,
            )
            .await?;
        probe.end(
            up,
            format!(
                "{} pods owned, {} ready; most owned so far {}",
                pods.owned.unwrap_or(0),
                rs.ready_replicas,
                pods.max_owned
            ),
        );

        let down = probe.begin(&format!("scale down {} → 0", group(n)));
        let generation = state.scale(env, 0).await?;
        let (_, pods) = state
            .wait(
                probe,
                |rs, p| {
                    rs.observed_generation >= generation && rs.replicas == 0 && p.count == Some(0)
                },
                describe,
            )
            .await?;
        probe.end(
            down,
            format!("no pod left; most owned over the run {}", pods.max_owned),
        );
        Ok(())
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let left = k8s::list_pod_meta(&env.client, Some(&state.ns))
            .await?
            .len();
        let api: Api<ReplicaSet> = Api::namespaced(env.client.clone(), &state.ns);
        let rs = api.get(NAME).await.context("reading the ReplicaSet")?;
        let seen = state.pods.current();
        Ok(judge(
            self.args.replicas,
            seen.max_owned,
            left,
            RsSeen::of(&rs).replicas,
        ))
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        remove(env, ns).await
    }
}

/// Deletes the ReplicaSet and every pod of `ns`. No garbage collector runs on the plane,
/// so the pods are deleted directly (the manager has been stopped: nothing recreates them).
async fn remove(env: &Env, ns: &str) -> anyhow::Result<()> {
    let api: Api<ReplicaSet> = Api::namespaced(env.client.clone(), ns);
    let dp = DeleteParams::default();
    match k8s::retry(|| api.delete(NAME, &dp)).await {
        Ok(_) => {}
        Err(e) if k8s::is_status(&e, 404) => {}
        Err(e) => return Err(e).with_context(|| format!("deleting ReplicaSet {ns}/{NAME}")),
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while k8s::retry(|| api.get_opt(NAME)).await?.is_some() {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "ReplicaSet {ns}/{NAME} still present 60 s after its deletion"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    k8s::delete_all_pods(&env.client, ns, Duration::from_secs(600)).await
}

/// Pods the kwok nodes (`type=kwok`) can hold, by their allocatable `pods`.
pub async fn kwok_pod_capacity(client: &Client) -> anyhow::Result<usize> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let lp = kube::api::ListParams::default().labels("type=kwok");
    let list = k8s::retry(|| nodes.list(&lp))
        .await
        .context("listing the kwok nodes")?;
    Ok(list
        .items
        .iter()
        .filter_map(|n| {
            let pods = n.status.as_ref()?.allocatable.as_ref()?.get("pods")?;
            pods.0.parse::<usize>().ok()
        })
        .sum())
}

/// The end state: never more than `replicas` pods owned, none left, status at 0.
fn judge(replicas: usize, max_owned: usize, left: usize, status_replicas: i64) -> Correctness {
    let mut wrong = Vec::new();
    if max_owned > replicas {
        wrong.push(format!(
            "over-created: {} pods owned at once (limit {})",
            group(max_owned),
            group(replicas)
        ));
    }
    if left > 0 {
        wrong.push(format!("{} pods left after the scale down", group(left)));
    }
    if status_replicas != 0 {
        wrong.push(format!("status.replicas is {status_replicas}, not 0"));
    }
    Correctness::unless(wrong, || {
        format!(
            "at most {} pods owned (limit {}), none left",
            group(max_owned),
            group(replicas)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_end_state() {
        let ok = judge(1000, 1000, 0, 0);
        assert!(ok.ok);
        assert_eq!(
            ok.detail,
            "at most 1 000 pods owned (limit 1 000), none left"
        );
        let over = judge(1000, 1003, 0, 0);
        assert!(!over.ok);
        assert_eq!(
            over.detail,
            "over-created: 1 003 pods owned at once (limit 1 000)"
        );
        let left = judge(100, 100, 2, 1);
        assert!(!left.ok);
        assert_eq!(
            left.detail,
            "2 pods left after the scale down; status.replicas is 1, not 0"
        );
    }

    #[test]
    fn reads_replicaset_status() {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": NAME, "generation": 3},
            "status": {"replicas": 10, "readyReplicas": 7, "observedGeneration": 2}
        }))
        .unwrap();
        assert_eq!(
            RsSeen::of(&rs),
            RsSeen {
                exists: true,
                generation: 3,
                observed_generation: 2,
                replicas: 10,
                ready_replicas: 7
            }
        );
        let fresh: ReplicaSet =
            serde_json::from_value(json!({"metadata": {"name": NAME}})).unwrap();
        assert_eq!(RsSeen::of(&fresh).observed_generation, 0);
    }
}
