//! Loads the threshold plane directly through the API, as fast as the plane takes it
//! (`concurrency` requests in flight): nodes, then per namespace the workloads of the load
//! test's mix with every child and status a converged cluster has (`objects.rs`). A pod is
//! two requests: its create and its status.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::objects::{self as obj, RUN_LABEL};
use super::shared::{self, Plan, RUN, ns_of, static_node};
use crate::k8s;
use crate::scenarios::envelope::mix::{Kind, Workload};

/// What the loader made: seconds and objects.
#[derive(Debug, Default, Clone)]
pub struct Loaded {
    pub seconds: f64,
    pub pods: usize,
    pub objects: usize,
}

/// Runs `tasks` with at most `concurrency` in flight; stops at the first error.
async fn bounded<Fut>(concurrency: usize, tasks: impl Iterator<Item = Fut>) -> anyhow::Result<()>
where
    Fut: Future<Output = anyhow::Result<()>>,
{
    use futures::StreamExt;
    let mut s = futures::stream::iter(tasks).buffer_unordered(concurrency.max(1));
    while let Some(r) = s.next().await {
        r?;
    }
    Ok(())
}

/// The marker ConfigMap saying the plane holds this size.
const MARKER: &str = "bench-threshold-loaded";

/// The size the plane was loaded for, if it was.
pub async fn loaded_size(client: &Client) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns_of(0));
    match api.get_opt(MARKER).await {
        Ok(cm) => Ok(cm.and_then(|c| c.data)),
        Err(e) => Err(e).context("reading the load marker"),
    }
}

async fn mark_loaded(client: &Client, size: &BTreeMap<String, String>) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns_of(0));
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": MARKER, "labels": {RUN_LABEL: RUN}}, "data": size
    }))?;
    api.create(&PostParams::default(), &cm)
        .await
        .context("writing the load marker")?;
    Ok(())
}

async fn create<K>(api: &Api<K>, body: &Value, what: &str) -> anyhow::Result<K>
where
    K: k8s::Namespaced + serde::Serialize,
{
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let obj: K =
        serde_json::from_value(body.clone()).with_context(|| format!("building {what} {name}"))?;
    let pp = PostParams::default();
    k8s::retry(|| api.create(&pp, &obj))
        .await
        .with_context(|| format!("creating {what} {name}"))
}

async fn set_status<K>(api: &Api<K>, name: &str, status: &Value, what: &str) -> anyhow::Result<K>
where
    K: k8s::Namespaced,
{
    let (pp, patch) = (PatchParams::default(), Patch::Merge(status));
    k8s::retry(|| api.patch_status(name, &pp, &patch))
        .await
        .with_context(|| format!("setting the status of {what} {name}"))
}

/// A pod (and its claim, if it has one) created and given its status.
async fn pod(
    api: &Api<Pod>,
    claims: &Api<PersistentVolumeClaim>,
    (claim, body): (Option<Value>, Value),
    running: bool,
) -> anyhow::Result<()> {
    if let Some(claim) = claim {
        create::<PersistentVolumeClaim>(claims, &claim, "claim").await?;
    }
    let now = jiff::Timestamp::now().to_string();
    let status = if running {
        obj::running_status(&body, &now)
    } else {
        obj::succeeded_status(&body, &now)
    };
    let p = create::<Pod>(api, &body, "pod").await?;
    set_status(api, &p.name_any(), &status, "pod").await?;
    Ok(())
}

/// One of the run's kwok nodes (110 pods each).
fn kwok_node(name: &str) -> Value {
    crate::nodes::kwok_node_with_room(name, RUN_LABEL, RUN, 110)
}

/// The run's kwok nodes and static nodes, created and Ready.
pub async fn nodes(env: &crate::harness::Env, plan: &Plan) -> anyhow::Result<()> {
    let names: Vec<String> = (0..plan.nodes).map(shared::node_name).collect();
    crate::nodes::create_nodes(env, &names, kwok_node).await?;
    for i in 0..plan.static_nodes {
        let name = static_node(i);
        k8s::ensure_static_node(&env.client, &name).await?;
        let api: Api<Node> = Api::all(env.client.clone());
        let patch = json!({"metadata": {"labels": {RUN_LABEL: RUN}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("labelling node {name}"))?;
    }
    crate::nodes::wait_nodes_ready(env, RUN_LABEL, RUN, plan.nodes + plan.static_nodes).await
}

/// Creates again the kwok nodes a reaction phase deleted and waits until every node of the
/// run is Ready: the pods still bound to them are no longer orphans, so the next manager's run
/// starts from the cluster this one found instead of PodGC work left by this one.
pub async fn restore_nodes(
    env: &crate::harness::Env,
    plan: &Plan,
    names: &[String],
) -> anyhow::Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    crate::nodes::create_nodes(env, names, kwok_node).await?;
    crate::nodes::wait_nodes_ready(env, RUN_LABEL, RUN, plan.nodes + plan.static_nodes).await
}

/// What loading one workload needs.
struct Ctx<'a> {
    client: &'a Client,
    plan: &'a Plan,
    ns: String,
    pods: Api<Pod>,
    claims: Api<PersistentVolumeClaim>,
    now: String,
    node_of: &'a (dyn Fn(usize) -> String + Sync),
    next: &'a AtomicUsize,
    limit: &'a tokio::sync::Semaphore,
}

impl Ctx<'_> {
    /// The next kwok node in turn.
    fn node(&self) -> String {
        (self.node_of)(self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// Creates the pods (and claims) of `tasks` within the loader's budget; how many.
    async fn run(
        &self,
        label: String,
        tasks: Vec<(Option<Value>, Value)>,
        running: bool,
    ) -> anyhow::Result<usize> {
        let n = tasks.len();
        bounded(
            self.plan.concurrency,
            tasks.into_iter().map(|b| async move {
                let _permit = self
                    .limit
                    .acquire()
                    .await
                    .context("the loader's request budget")?;
                pod(&self.pods, &self.claims, b, running).await
            }),
        )
        .await
        .with_context(|| label.clone())?;
        Ok(n)
    }
}

/// One workload with its children and statuses; the pods it made.
async fn workload(
    client: &Client,
    plan: &Plan,
    w: &Workload,
    node_of: &(dyn Fn(usize) -> String + Sync),
    next: &AtomicUsize,
    limit: &tokio::sync::Semaphore,
) -> anyhow::Result<usize> {
    let ns = ns_of(w.ns);
    let body = shared::workload_object(w);
    let cx = Ctx {
        client,
        plan,
        pods: Api::namespaced(client.clone(), &ns),
        claims: Api::namespaced(client.clone(), &ns),
        ns,
        now: jiff::Timestamp::now().to_string(),
        node_of,
        next,
        limit,
    };
    match w.kind {
        Kind::Deployment => deployment(&cx, w, &body).await,
        Kind::StatefulSet => stateful_set(&cx, w, &body).await,
        Kind::DaemonSet => daemon_set(&cx, &body).await,
        Kind::Job => job(&cx, w, &body).await,
        Kind::CronJob => cron_job(&cx, &body).await,
    }
}

async fn deployment(cx: &Ctx<'_>, w: &Workload, body: &Value) -> anyhow::Result<usize> {
    let api: Api<Deployment> = Api::namespaced(cx.client.clone(), &cx.ns);
    let d = create::<Deployment>(&api, body, "deployment").await?;
    let (hash, rs_body) = obj::replica_set(&d)?;
    let rs_api: Api<ReplicaSet> = Api::namespaced(cx.client.clone(), &cx.ns);
    let rs = create::<ReplicaSet>(&rs_api, &rs_body, "replicaset").await?;
    let rs_name = rs.name_any();
    let template = &rs_body["spec"]["template"];
    let owner = obj::owner_ref(&rs)?;
    let bodies = (0..w.pods)
        .map(|i| {
            let node = cx.node();
            obj::pod_of(
                template,
                &format!("{rs_name}-{}", obj::suffix(i)),
                &owner,
                &node,
                &[("pod-template-hash", &hash)],
            )
            .map(|p| (None, p))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let n = cx
        .run(format!("pods of {}/{rs_name}", cx.ns), bodies, true)
        .await?;
    set_status(
        &rs_api,
        &rs_name,
        &obj::replica_set_status(&rs),
        "replicaset",
    )
    .await?;
    set_status(
        &api,
        &d.name_any(),
        &obj::deployment_status(&d, &rs_name, &cx.now),
        "deployment",
    )
    .await?;
    Ok(n)
}

async fn stateful_set(cx: &Ctx<'_>, w: &Workload, body: &Value) -> anyhow::Result<usize> {
    let api: Api<StatefulSet> = Api::namespaced(cx.client.clone(), &cx.ns);
    let s = create::<StatefulSet>(&api, body, "statefulset").await?;
    let rev = obj::stateful_set_revision(&s)?;
    let rev_name = rev.name_any();
    shared::create_revision(cx.client, &cx.ns, &rev).await?;
    let mut bodies = Vec::new();
    for i in 0..w.pods {
        let node = cx.node();
        let p = obj::stateful_set_pod(&s, &rev_name, i, &node)?;
        let pod_name = p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        bodies.push((Some(obj::stateful_set_claim(&s, &pod_name)?), p));
    }
    let n = cx
        .run(format!("pods of {}/{}", cx.ns, s.name_any()), bodies, true)
        .await?;
    set_status(
        &api,
        &s.name_any(),
        &obj::stateful_set_status(&s, &rev_name),
        "statefulset",
    )
    .await?;
    Ok(n)
}

async fn daemon_set(cx: &Ctx<'_>, body: &Value) -> anyhow::Result<usize> {
    let api: Api<DaemonSet> = Api::namespaced(cx.client.clone(), &cx.ns);
    let ds = create::<DaemonSet>(&api, body, "daemonset").await?;
    let (hash, rev) = obj::daemon_set_revision(&ds)?;
    shared::create_revision(cx.client, &cx.ns, &rev).await?;
    let bodies = (0..cx.plan.nodes)
        .map(|i| {
            obj::daemon_pod(
                &ds,
                &hash,
                &format!("{}-{}", ds.name_any(), obj::suffix(i)),
                &shared::node_name(i),
            )
            .map(|p| (None, p))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let n = cx
        .run(
            format!("daemon pods of {}/{}", cx.ns, ds.name_any()),
            bodies,
            true,
        )
        .await?;
    set_status(
        &api,
        &ds.name_any(),
        &obj::daemon_set_status(&ds, cx.plan.nodes),
        "daemonset",
    )
    .await?;
    Ok(n)
}

async fn job(cx: &Ctx<'_>, w: &Workload, body: &Value) -> anyhow::Result<usize> {
    let api: Api<Job> = Api::namespaced(cx.client.clone(), &cx.ns);
    let job = create::<Job>(&api, body, "job").await?;
    let running = shared::job_runs(w);
    let bodies = (0..w.pods)
        .map(|i| {
            let node = if running {
                static_node(i % cx.plan.static_nodes.max(1))
            } else {
                cx.node()
            };
            obj::job_pod(&job, i, &node, running).map(|p| (None, p))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let n = cx
        .run(
            format!("pods of {}/{}", cx.ns, job.name_any()),
            bodies,
            running,
        )
        .await?;
    set_status(
        &api,
        &job.name_any(),
        &obj::job_status(&job, running, &cx.now),
        "job",
    )
    .await?;
    Ok(n)
}

async fn cron_job(cx: &Ctx<'_>, body: &Value) -> anyhow::Result<usize> {
    let api: Api<CronJob> = Api::namespaced(cx.client.clone(), &cx.ns);
    create::<CronJob>(&api, body, "cronjob").await?;
    Ok(0)
}

/// Loads every namespace of `plan` (nodes first), writing the marker at the end.
pub async fn load(env: &crate::harness::Env, plan: &Plan) -> anyhow::Result<Loaded> {
    let t = Instant::now();
    nodes(env, plan).await?;
    say!(
        "{} nodes Ready in {:.1} s",
        plan.nodes,
        t.elapsed().as_secs_f64()
    );
    for i in 0..plan.namespaces {
        k8s::ensure_namespace(&env.client, &ns_of(i)).await?;
    }
    // Pods of the same node spread: node i takes pods i, i + nodes, ...
    let nodes = plan.nodes.max(1);
    let node_of = move |i: usize| shared::node_name(i % nodes);
    let next = AtomicUsize::new(0);
    let made = AtomicUsize::new(0);
    let client = env.client.clone();
    // Many workloads at once, their pods sharing one budget of requests in flight.
    let limit = tokio::sync::Semaphore::new(plan.concurrency.max(1));
    let parallel = 32;
    let total = plan.workloads.len();
    let done = AtomicUsize::new(0);
    bounded(
        parallel,
        plan.workloads.iter().map(|w| {
            let (client, node_of, next, made, done, limit) =
                (&client, &node_of, &next, &made, &done, &limit);
            async move {
                let n = workload(client, plan, w, node_of, next, limit).await?;
                made.fetch_add(n, Ordering::Relaxed);
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if d.is_multiple_of((total / 20).max(1)) || d == total {
                    let pods = made.load(Ordering::Relaxed);
                    let s = t.elapsed().as_secs_f64();
                    say!(
                        "loaded {d}/{total} workloads, {pods} pods ({:.0} pods/s, {s:.0} s)",
                        pods as f64 / s.max(0.001)
                    );
                }
                Ok(())
            }
        }),
    )
    .await?;
    let loaded = Loaded {
        seconds: t.elapsed().as_secs_f64(),
        pods: made.load(Ordering::Relaxed),
        objects: plan.workloads.len(),
    };
    mark_loaded(&env.client, &plan.size()).await?;
    Ok(loaded)
}

/// Waits (at most `timeout`) until nothing but the loader wrote for a while: kwok has
/// nothing left to do with the loaded pods (checked by the pods' phase, which it would change).
pub async fn wait_settled(client: &Client, plan: &Plan, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut pending = 0usize;
        for i in 0..plan.namespaces {
            let pods: Vec<Pod> = k8s::list_all(client, &ns_of(i), "pods").await?;
            pending += pods
                .iter()
                .filter(|p| {
                    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                    !matches!(phase, Some("Running" | "Succeeded"))
                })
                .count();
        }
        if pending == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{pending} loaded pods not Running or Succeeded after {} s",
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
