//! DaemonSet on N simulated nodes (the issue's "1 000 simulated nodes: create 0→1000 pods,
//! rolling update with maxSurge 10%, 100 node adds and deletes while idle", and the CPU a
//! manager spends on node heartbeats that change nothing for it).
//!
//! Setup: N kwok nodes of the run's own (`kwok.x-k8s.io/node: fake`, label
//! `rkcm-bench/ds=<namespace>`, so no other scenario's pods land there and a run never sees
//! another run's nodes), all Ready before the manager starts; one DaemonSet whose pod
//! template selects a label no node has (so the manager starts with nothing to do), with
//! `updateStrategy: RollingUpdate, maxSurge 10%, maxUnavailable 0`. Only
//! `daemonset-controller` runs. The bench then drives, each a timed phase:
//! 1. milestone "synced": the manager has written the DaemonSet's `observedGeneration`;
//! 2. *create 0 → N*: the template's `nodeSelector` is patched to the nodes' label; done when
//!    the status of that generation says N desired, scheduled, updated, ready and available,
//!    and N pods are owned;
//! 3. *rolling update*: a new image; done when the status of that generation says N updated
//!    and available and no old pod is left (N pods owned);
//! 4. *add nodes*: M more nodes; done when N+M pods are ready and the status says so;
//! 5. *delete nodes*: those M nodes are deleted and, as pod GC would, their pods; done when
//!    the status is back to N;
//! 6. *idle heartbeats*: with nothing to do, the bench sends R rounds of Ready-condition
//!    heartbeats (`lastHeartbeatTime` only, the node status a kubelet writes) to every node
//!    and waits until its own node watch saw them all, plus the kwok lease renewals and node
//!    heartbeats that happen meanwhile; the manager's CPU over the phase per 1 000 node
//!    heartbeats seen is the metric "CPU per 1 000 idle heartbeats". A manager that syncs a
//!    DaemonSet per heartbeat pays here.
//!
//! Correct: the end state has exactly one pod of the new revision on each of the N nodes and
//! none elsewhere, the status agrees, and during the rolling update no more than
//! N + maxSurge pods were owned beyond those already deleted (reported, not judged: a
//! deleted pod stays until kwok removes it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::harness::{Env, Probe, Scenario};
use crate::k8s::{self, NamedWatch, PodCount, PodWatch};
use crate::nodes;
use crate::results::{Correctness, Metric};
use crate::scenarios::podgc::group;

/// The DaemonSet's name in each run's namespace.
pub const NAME: &str = "bench-ds";
/// The label that puts a node in a run (value: the run's namespace).
pub const NODE_LABEL: &str = "rkcm-bench/ds";
const IMAGE_1: &str = "registry.k8s.io/pause:3.9";
const IMAGE_2: &str = "registry.k8s.io/pause:3.10";

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Nodes (and so daemon pods).
    #[arg(long, default_value_t = 1_000)]
    pub nodes: usize,
    /// Nodes added and then deleted while idle.
    #[arg(long, default_value_t = 100)]
    pub churn: usize,
    /// maxSurge of the rolling update.
    #[arg(long, default_value = "10%")]
    pub max_surge: String,
    /// Rounds of heartbeats to every node in the idle phase.
    #[arg(long, default_value_t = 3)]
    pub heartbeat_rounds: usize,
}

pub struct DaemonSetNodes {
    pub args: Args,
}

/// What the bench needs of the DaemonSet, as last seen by its watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DsSeen {
    pub exists: bool,
    pub generation: i64,
    pub observed_generation: i64,
    pub desired: i64,
    pub current: i64,
    pub updated: i64,
    pub ready: i64,
    pub available: i64,
    pub misscheduled: i64,
}

impl DsSeen {
    fn of(ds: &DaemonSet) -> Self {
        let st = ds.status.as_ref();
        Self {
            exists: true,
            generation: ds.metadata.generation.unwrap_or(0),
            observed_generation: st.and_then(|s| s.observed_generation).unwrap_or(0),
            desired: st.map_or(0, |s| i64::from(s.desired_number_scheduled)),
            current: st.map_or(0, |s| i64::from(s.current_number_scheduled)),
            updated: st
                .and_then(|s| s.updated_number_scheduled)
                .map_or(0, i64::from),
            ready: st.map_or(0, |s| i64::from(s.number_ready)),
            available: st.and_then(|s| s.number_available).map_or(0, i64::from),
            misscheduled: st.map_or(0, |s| i64::from(s.number_misscheduled)),
        }
    }

    /// The status of generation `generation` or later says `n` of everything.
    fn all(&self, generation: i64, n: i64) -> bool {
        self.observed_generation >= generation
            && self.desired == n
            && self.current == n
            && self.updated == n
            && self.ready == n
            && self.available == n
            && self.misscheduled == 0
    }
}

/// Counts updates of the run's nodes (metadata watch; every status write is one).
struct NodeUpdates {
    seen: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl NodeUpdates {
    fn start(client: &Client, ns: &str) -> Self {
        let api: Api<PartialObjectMeta<Node>> = Api::all(client.clone());
        let cfg = watcher::Config::default().labels(&format!("{NODE_LABEL}={ns}"));
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        let task = tokio::spawn(async move {
            let stream = watcher(api, cfg).default_backoff();
            futures::pin_mut!(stream);
            loop {
                match stream.try_next().await {
                    Ok(Some(watcher::Event::Apply(_))) => {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => tracing::warn!(error = %e, "node watch error (retrying)"),
                }
            }
        });
        Self { seen, task }
    }

    fn count(&self) -> usize {
        self.seen.load(Ordering::Relaxed)
    }
}

impl Drop for NodeUpdates {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub struct State {
    ns: String,
    ds: NamedWatch<DsSeen>,
    pods: PodWatch,
    /// The nodes that stay, and those added and deleted in the churn phases.
    base: Vec<String>,
    extra: Vec<String>,
    metrics: Vec<Metric>,
}

fn node_name(ns: &str, i: usize) -> String {
    format!("{ns}-n{i:05}")
}

fn describe(ds: &DsSeen, pods: &PodCount) -> String {
    format!(
        "{} pods owned; status (generation {}/{}): desired {} current {} updated {} ready {} \
         available {} misscheduled {}",
        pods.owned.map_or("?".into(), |n| n.to_string()),
        ds.observed_generation,
        ds.generation,
        ds.desired,
        ds.current,
        ds.updated,
        ds.ready,
        ds.available,
        ds.misscheduled
    )
}

impl State {
    async fn wait(
        &mut self,
        probe: &Probe,
        mut done: impl FnMut(&DsSeen, &PodCount) -> bool,
    ) -> anyhow::Result<(DsSeen, PodCount)> {
        loop {
            let ds = self.ds.latest();
            let pods = self.pods.latest();
            probe.progress(describe(&ds, &pods));
            if done(&ds, &pods) {
                return Ok((ds, pods));
            }
            tokio::select! {
                r = self.ds.rx.changed() => r.context("daemonset watch ended")?,
                r = self.pods.changed() => r?,
            }
        }
    }

    async fn patch(&self, env: &Env, patch: serde_json::Value) -> anyhow::Result<i64> {
        let api: Api<DaemonSet> = Api::namespaced(env.client.clone(), &self.ns);
        let (pp, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let ds = k8s::retry(|| api.patch(NAME, &pp, &patch))
            .await
            .with_context(|| format!("patching DaemonSet {}/{NAME}", self.ns))?;
        Ok(ds.metadata.generation.unwrap_or(0))
    }
}

/// Deletes nodes `names` (missing ones are fine).
async fn delete_nodes(env: &Env, names: &[String]) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(env.client.clone());
    k8s::bounded(
        "nodes deleted",
        names.len(),
        env.concurrency,
        names.len().div_ceil(4).max(1),
        names.iter().map(|name| {
            let api = api.clone();
            async move {
                let dp = DeleteParams::default();
                match k8s::retry(|| api.delete(name, &dp)).await {
                    Ok(_) => Ok(()),
                    Err(e) if k8s::is_status(&e, 404) => Ok(()),
                    Err(e) => Err(e).with_context(|| format!("deleting node {name}")),
                }
            }
        }),
    )
    .await?;
    Ok(())
}

/// Force-deletes the pods bound to `nodes`, as pod GC does for pods of deleted nodes.
async fn delete_pods_on(env: &Env, ns: &str, nodes: &[String]) -> anyhow::Result<usize> {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let gone: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
    let lp = ListParams::default();
    let list = k8s::retry(|| api.list(&lp)).await.context("listing pods")?;
    let victims: Vec<String> = list
        .items
        .iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| gone.contains(n))
        })
        .map(|p| p.name_any())
        .collect();
    let n = victims.len();
    k8s::bounded(
        "pods of deleted nodes deleted",
        n,
        env.concurrency,
        n.div_ceil(4).max(1),
        victims.into_iter().map(|name| {
            let api = api.clone();
            async move {
                let dp = DeleteParams {
                    grace_period_seconds: Some(0),
                    ..DeleteParams::default()
                };
                match k8s::retry(|| api.delete(&name, &dp)).await {
                    Ok(_) => Ok(()),
                    Err(e) if k8s::is_status(&e, 404) => Ok(()),
                    Err(e) => Err(e).with_context(|| format!("deleting pod {name}")),
                }
            }
        }),
    )
    .await?;
    Ok(n)
}

/// One heartbeat to each node: the Ready condition's `lastHeartbeatTime` (strategic merge on
/// the condition type, as a kubelet's status update changes nothing else when all is well).
async fn heartbeat(env: &Env, names: &[String]) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(env.client.clone());
    k8s::bounded(
        "heartbeats sent",
        names.len(),
        env.concurrency,
        names.len(),
        names.iter().map(|name| {
            let api = api.clone();
            async move {
                let now = jiff::Timestamp::now().to_string();
                let patch = json!({"status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": now}]}});
                let (pp, patch) = (PatchParams::default(), Patch::Strategic(&patch));
                k8s::retry(|| api.patch_status(name, &pp, &patch))
                    .await
                    .with_context(|| format!("heartbeat of node {name}"))?;
                Ok(())
            }
        }),
    )
    .await?;
    Ok(())
}

impl Scenario for DaemonSetNodes {
    type State = State;

    fn id(&self) -> &'static str {
        "daemonset-nodes"
    }

    fn title(&self) -> String {
        format!(
            "DaemonSet: {} simulated nodes — create, rolling update (maxSurge {}), {} node adds and deletes, idle heartbeats",
            group(self.args.nodes),
            self.args.max_surge,
            group(self.args.churn)
        )
    }

    fn description(&self) -> String {
        let (n, m, r) = (
            group(self.args.nodes),
            group(self.args.churn),
            self.args.heartbeat_rounds,
        );
        format!(
            "{n} kwok nodes of the run's own (label `{NODE_LABEL}`; each runs the pods bound \
             to it Running and Ready, removes deleted ones), all Ready before the manager \
             starts, and one DaemonSet (`RollingUpdate`, maxSurge {surge}, maxUnavailable 0) \
             whose template first selects no node. Only `daemonset-controller` runs. Once the \
             manager has written the DaemonSet's `observedGeneration` (milestone \"synced\"), \
             the bench drives five timed steps, each from its request to its condition: \
             **create** — the template's `nodeSelector` is set to the nodes' label; done when \
             the status of that generation says {n} desired, current, updated, ready and \
             available and {n} pods are owned; **rolling update** — a new image; done when \
             the status says {n} updated and available and {n} pods are owned (no old pod \
             left); **add nodes** — {m} more nodes; done at {n}+{m} everywhere; **delete \
             nodes** — those {m} nodes are deleted and, as pod GC would, their pods; done \
             when the status is back at {n}; **idle heartbeats** — {r} rounds of Ready \
             `lastHeartbeatTime` updates to every node (what a kubelet writes; nothing \
             changes for the DaemonSet), ended once the bench's node watch has seen them; \
             the metric is the manager's CPU in that step per 1 000 node updates seen (kwok's \
             own node heartbeats included). Correct: exactly one pod of the new revision on \
             each of the {n} nodes, none elsewhere, and the status agrees.",
            surge = self.args.max_surge
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("nodes".to_string(), self.args.nodes.to_string()),
            ("churn".to_string(), self.args.churn.to_string()),
            ("max_surge".to_string(), self.args.max_surge.clone()),
            (
                "heartbeat_rounds".to_string(),
                self.args.heartbeat_rounds.to_string(),
            ),
        ])
    }

    fn controllers(&self) -> Vec<&'static str> {
        vec!["daemonset-controller"]
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        let client = &env.client;
        k8s::ensure_namespace(client, ns).await?;
        remove(env, ns).await?;
        let base: Vec<String> = (0..self.args.nodes).map(|i| node_name(ns, i)).collect();
        let extra: Vec<String> = (self.args.nodes..self.args.nodes + self.args.churn)
            .map(|i| node_name(ns, i))
            .collect();
        nodes::create_nodes(env, &base, |name| nodes::kwok_node(name, NODE_LABEL, ns)).await?;
        nodes::wait_nodes_ready(env, NODE_LABEL, ns, base.len()).await?;

        let api: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
        let labels = json!({"app": "rkcm-bench-ds"});
        let ds: DaemonSet = serde_json::from_value(json!({
            "metadata": {"name": NAME, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                    "maxSurge": self.args.max_surge, "maxUnavailable": 0}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": k8s::pod_spec(IMAGE_1, json!({"nodeSelector": {NODE_LABEL: "none"}}))
                }
            }
        }))?;
        let pp = PostParams::default();
        let created = k8s::retry(|| api.create(&pp, &ds))
            .await
            .with_context(|| format!("creating DaemonSet {ns}/{NAME}"))?;
        let uid = created.uid().context("the created DaemonSet has no uid")?;
        let pods = PodWatch::start_owned_empty(client, ns, uid).await?;
        let mut ds = NamedWatch::start(client, ns, NAME, "daemonset", DsSeen::of);
        tokio::time::timeout(Duration::from_secs(120), ds.rx.wait_for(|d| d.exists))
            .await
            .context("the DaemonSet watch did not sync within 120 s")?
            .context("daemonset watch ended")?;
        anyhow::ensure!(
            ds.latest().observed_generation == 0,
            "the DaemonSet already has a status before the manager started (another \
             daemonset controller runs?)"
        );
        Ok(State {
            ns: ns.to_string(),
            ds,
            pods,
            base,
            extra,
            metrics: Vec::new(),
        })
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        let n = self.args.nodes;
        let m = self.args.churn;
        let (ni, mi) = (n as i64, m as i64);
        let ns = state.ns.clone();

        state
            .wait(probe, |ds, _| ds.observed_generation >= 1)
            .await?;
        probe.mark("synced");

        let phase = probe.begin(&format!("create 0 → {}", group(n)));
        let generation = state
            .patch(
                env,
                json!({"spec": {"template": {"spec": {"nodeSelector": {NODE_LABEL: ns}}}}}),
            )
            .await?;
        let (_, pods) = state
            .wait(probe, |ds, p| ds.all(generation, ni) && p.owned == Some(n))
            .await?;
        probe.end(phase, format!("{} pods owned", pods.owned.unwrap_or(0)));

        let phase = probe.begin(&format!(
            "rolling update of {} (maxSurge {})",
            group(n),
            self.args.max_surge
        ));
        let generation = state
            .patch(
                env,
                json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": IMAGE_2}]}}}}),
            )
            .await?;
        let (_, pods) = state
            .wait(probe, |ds, p| ds.all(generation, ni) && p.owned == Some(n))
            .await?;
        probe.end(
            phase,
            format!(
                "{} pods owned at the end, at most {} at once (deleted ones count until kwok \
                 removes them)",
                group(pods.owned.unwrap_or(0)),
                group(pods.max_owned)
            ),
        );

        let phase = probe.begin(&format!("add {} nodes", group(m)));
        nodes::create_nodes(env, &state.extra, |name| {
            nodes::kwok_node(name, NODE_LABEL, &ns)
        })
        .await?;
        let (_, pods) = state
            .wait(probe, |ds, p| ds.all(0, ni + mi) && p.owned == Some(n + m))
            .await?;
        probe.end(
            phase,
            format!("{} pods owned", group(pods.owned.unwrap_or(0))),
        );

        let phase = probe.begin(&format!("delete {} nodes", group(m)));
        delete_nodes(env, &state.extra).await?;
        let removed = delete_pods_on(env, &ns, &state.extra).await?;
        let (_, pods) = state
            .wait(probe, |ds, p| ds.all(0, ni) && p.owned == Some(n))
            .await?;
        probe.end(
            phase,
            format!(
                "{removed} pods of deleted nodes removed by the bench; {} pods owned",
                group(pods.owned.unwrap_or(0))
            ),
        );

        idle_heartbeats(env, state, probe, n, self.args.heartbeat_rounds).await
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let api: Api<Pod> = Api::namespaced(env.client.clone(), &state.ns);
        let lp = ListParams::default();
        let pods = k8s::retry(|| api.list(&lp))
            .await
            .context("listing pods")?
            .items;
        let ds: Api<DaemonSet> = Api::namespaced(env.client.clone(), &state.ns);
        let seen = DsSeen::of(&ds.get(NAME).await.context("reading the DaemonSet")?);
        Ok(judge(&state.base, &pods, &seen))
    }

    fn metrics(&self, state: &State) -> Vec<Metric> {
        state.metrics.clone()
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        remove(env, ns).await
    }
}

/// One live pod of the new image on each of `nodes`, none elsewhere, status agreeing.
fn judge(nodes: &[String], pods: &[Pod], ds: &DsSeen) -> Correctness {
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut old = 0usize;
    for p in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("");
        *per_node.entry(node).or_default() += 1;
        let image = p
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.as_deref());
        if image != Some(IMAGE_2) {
            old += 1;
        }
    }
    let missing = nodes
        .iter()
        .filter(|n| !per_node.contains_key(n.as_str()))
        .count();
    let doubled = per_node.values().filter(|&&c| c > 1).count();
    let elsewhere = per_node
        .keys()
        .filter(|k| !nodes.iter().any(|n| n == *k))
        .count();
    if missing > 0 {
        wrong.push(format!("{} nodes without a pod", group(missing)));
    }
    if doubled > 0 {
        wrong.push(format!("{} nodes with more than one pod", group(doubled)));
    }
    if elsewhere > 0 {
        wrong.push(format!(
            "pods on {} nodes outside the set",
            group(elsewhere)
        ));
    }
    if old > 0 {
        wrong.push(format!("{} pods of the old revision", group(old)));
    }
    let n = nodes.len() as i64;
    if !ds.all(0, n) {
        wrong.push(format!(
            "status: desired {} current {} updated {} ready {} available {} misscheduled {}",
            ds.desired, ds.current, ds.updated, ds.ready, ds.available, ds.misscheduled
        ));
    }
    Correctness::unless(wrong, || {
        format!(
            "one pod of the new revision on each of {} nodes, status agrees",
            group(nodes.len())
        )
    })
}

/// Deletes the DaemonSet, every pod of `ns` and the run's nodes. No garbage collector runs
/// on the plane: pods are deleted directly (the manager has been stopped).
async fn remove(env: &Env, ns: &str) -> anyhow::Result<()> {
    let api: Api<DaemonSet> = Api::namespaced(env.client.clone(), ns);
    let dp = DeleteParams::default();
    match k8s::retry(|| api.delete(NAME, &dp)).await {
        Ok(_) => {}
        Err(e) if k8s::is_status(&e, 404) => {}
        Err(e) => return Err(e).with_context(|| format!("deleting DaemonSet {ns}/{NAME}")),
    }
    // No garbage collector runs on the plane: the DaemonSet's ControllerRevisions stay unless
    // deleted here, and a later run in this namespace (the opposite order of
    // `BENCH_ORDERS=both`) would find its revision names taken by them, an identical template
    // owned by the deleted DaemonSet: each of its syncs then tries the create and reads the
    // old revision back (upstream and rkcm alike).
    let revs: Api<ControllerRevision> = Api::namespaced(env.client.clone(), ns);
    let all = ListParams::default();
    k8s::retry(|| revs.delete_collection(&dp, &all))
        .await
        .with_context(|| format!("deleting the ControllerRevisions of {ns}"))?;
    k8s::delete_all_pods(&env.client, ns, Duration::from_secs(600)).await?;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let lp = ListParams::default().labels(&format!("{NODE_LABEL}={ns}"));
    let names: Vec<String> = k8s::retry(|| nodes.list_metadata(&lp))
        .await
        .context("listing the run's nodes")?
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    if !names.is_empty() {
        delete_nodes(env, &names).await?;
    }
    Ok(())
}

/// The idle step: heartbeats that change nothing for the DaemonSet, and the manager's CPU
/// for them.
async fn idle_heartbeats(
    env: &Env,
    state: &mut State,
    probe: &Probe,
    n: usize,
    rounds: usize,
) -> anyhow::Result<()> {
    let ni = n as i64;
    let ns = state.ns.clone();
    // Idle: heartbeats that change nothing for the DaemonSet.
    let updates = NodeUpdates::start(&env.client, &ns);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let phase = probe.begin(&format!(
        "idle: {rounds} heartbeat rounds to {} nodes",
        group(n)
    ));
    let cpu0 = probe.manager_cpu_seconds();
    let seen0 = updates.count();
    for _ in 0..rounds {
        // The API server keeps heartbeat times to the second: a node's next heartbeat
        // must come at least a second after its last one, or it changes nothing.
        let round = std::time::Instant::now();
        heartbeat(env, &state.base).await?;
        let spent = round.elapsed();
        if spent < Duration::from_millis(1100) {
            tokio::time::sleep(Duration::from_millis(1100) - spent).await;
        }
    }
    let want = seen0 + rounds * n;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while updates.count() < want && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let the manager finish with the last events.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = updates.count().saturating_sub(seen0);
    let cpu = match (cpu0, probe.manager_cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    probe.end(
        phase,
        format!("{} node updates seen by the bench's watch", group(seen)),
    );
    state.metrics.push(Metric {
        name: "node updates in the idle step".to_string(),
        value: seen as f64,
        unit: String::new(),
    });
    if let Some(cpu) = cpu.filter(|_| seen > 0) {
        state.metrics.push(Metric {
            name: "CPU per 1 000 idle heartbeats".to_string(),
            value: cpu * 1000.0 / seen as f64,
            unit: "s".to_string(),
        });
    }
    let ds = state.ds.latest();
    anyhow::ensure!(
        ds.all(0, ni),
        "the status moved during the idle step: {}",
        describe(&ds, &state.pods.current())
    );
    say!(
        "  idle: {seen} node updates, manager cpu {:.3} s",
        cpu.unwrap_or(f64::NAN)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: &str, image: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("p-{node}")},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": image}]}
        }))
        .unwrap()
    }

    fn status(n: i64) -> DsSeen {
        DsSeen {
            exists: true,
            generation: 3,
            observed_generation: 3,
            desired: n,
            current: n,
            updated: n,
            ready: n,
            available: n,
            misscheduled: 0,
        }
    }

    #[test]
    fn judges_end_state() {
        let nodes = vec!["a".to_string(), "b".to_string()];
        let ok = judge(&nodes, &[pod("a", IMAGE_2), pod("b", IMAGE_2)], &status(2));
        assert!(ok.ok, "{}", ok.detail);
        let bad = judge(&nodes, &[pod("a", IMAGE_1), pod("c", IMAGE_2)], &status(2));
        assert!(!bad.ok);
        assert_eq!(
            bad.detail,
            "1 nodes without a pod; pods on 1 nodes outside the set; 1 pods of the old revision"
        );
        let stale = judge(&nodes, &[pod("a", IMAGE_2), pod("b", IMAGE_2)], &status(3));
        assert!(!stale.ok);
    }

    #[test]
    fn all_needs_the_generation_and_every_counter() {
        let s = status(5);
        assert!(s.all(3, 5));
        assert!(!s.all(4, 5));
        let mut t = s;
        t.available = 4;
        assert!(!t.all(3, 5));
    }
}
