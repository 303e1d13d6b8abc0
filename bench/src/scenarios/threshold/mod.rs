//! Upstream's threshold on one machine: a plane loaded with as many objects as it holds
//! (the load test's mix at ~30 pods a node, every child owned and every status set as the
//! controllers would have them, so a manager finds a converged cluster), and per manager:
//! - **cold start**: from process start until every informer synced ("Caches are synced"
//!   lines, then none for 5 s) and the first pass over every object done (every work queue
//!   empty and nothing added over a second, from `/metrics`); peak RSS, CPU, requests and the
//!   writes it made (a converged cluster asks for none), the plane's CPU and peak RSS;
//! - **settled**: RSS and CPU over an idle window, RSS per cached pod;
//! - **reaction**: single changes on a quiet manager (idle), then a burst of them (a
//!   Deployment scaled, a StatefulSet's pod deleted, a running Job's pod finished, a node
//!   deleted), each until the queues are quiet again; percentiles of the work-queue
//!   histograms differenced over each window (both managers export upstream's names), and of
//!   the audit log's reaction latency as in the envelope;
//! - **failover**: the measured manager paused, two replicas with leader election started
//!   (the second once the first leads and has synced), the leader SIGKILLed, a Deployment
//!   scaled right after; time from the kill to the standby's first write for it.
//!
//! The plane is loaded once (a marker ConfigMap records the size) and shared by every run;
//! the last run removes it unless `--keep-loaded`.

mod failover;
mod load;
mod objects;
mod phases;
mod queues;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use self::objects::{CLAIM, RUN_LABEL};
use crate::harness::{Env, Probe, Scenario};
use crate::results::{Correctness, Metric};
use crate::scenarios::envelope::mix::{self, Kind, Workload};
use crate::scenarios::idle::ALL_CONTROLLERS;
use crate::scenarios::podgc::group;
use crate::{k8s, nodes};

/// The run's name: namespaces `bench-threshold-<i>`, nodes `bench-threshold-n<i>`.
pub const RUN: &str = "bench-threshold";
/// The Lease the failover replicas elect over (kube-system).
const LEASE: &str = "rkcm-bench-threshold";

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Pods of the plane (Deployments', StatefulSets', Jobs' and the DaemonSet's).
    #[arg(long, default_value_t = 150_000)]
    pub pods: usize,
    /// Kwok nodes (the load test: 30 pods a node).
    #[arg(long, default_value_t = 5_000)]
    pub nodes: usize,
    /// Namespaces [default: one per 100 nodes].
    #[arg(long)]
    pub namespaces: Option<usize>,
    /// Static nodes (no kubelet, no kwok) holding the running Jobs' pods, which kwok would
    /// otherwise complete at once.
    #[arg(long, default_value_t = 10)]
    pub static_nodes: usize,
    /// Pod requests the loader keeps in flight (over every workload loading at once).
    #[arg(long, default_value_t = 64)]
    pub load_concurrency: usize,
    /// Seconds of the settled window.
    #[arg(long, default_value_t = 600)]
    pub settled_seconds: u64,
    /// Rounds of single changes on a quiet manager.
    #[arg(long, default_value_t = 8)]
    pub probes: usize,
    /// Changes of each kind in the burst.
    #[arg(long, default_value_t = 10)]
    pub burst_changes: usize,
    /// Port both managers serve `/metrics` on (HTTPS, 127.0.0.1).
    #[arg(long, default_value_t = 10461)]
    pub metrics_port: u16,
    /// Skip the failover phase.
    #[arg(long)]
    pub no_failover: bool,
    /// Leave the loaded plane after the last run (the next bench reuses it).
    #[arg(long)]
    pub keep_loaded: bool,
}

/// The sizes and objects of the run.
pub struct Plan {
    pub nodes: usize,
    pub static_nodes: usize,
    pub namespaces: usize,
    pub concurrency: usize,
    pub workloads: Vec<Workload>,
}

impl Plan {
    fn of(args: &Args) -> Self {
        let namespaces = args.namespaces.unwrap_or(args.nodes / 100).max(1);
        // The mix puts 95% of a namespace's pods in workloads; the DaemonSet adds one a node.
        let workload_pods = args.pods.saturating_sub(args.nodes);
        let per_ns = workload_pods * 20 / 19 / namespaces;
        Self {
            nodes: args.nodes,
            static_nodes: args.static_nodes.max(1),
            namespaces,
            concurrency: args.load_concurrency,
            workloads: mix::plan(namespaces, per_ns, args.nodes),
        }
    }

    pub fn pods(&self) -> usize {
        mix::steady_pods(&self.workloads)
    }

    fn size(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("pods".into(), self.pods().to_string()),
            ("nodes".into(), self.nodes.to_string()),
            ("namespaces".into(), self.namespaces.to_string()),
            ("workloads".into(), self.workloads.len().to_string()),
        ])
    }
}

pub fn ns_of(i: usize) -> String {
    format!("{RUN}-{i}")
}

pub fn node_name(i: usize) -> String {
    format!("{RUN}-n{i:05}")
}

pub fn static_node(i: usize) -> String {
    format!("{RUN}-s{i:02}")
}

/// Every other Job runs (its pods on the static nodes); the rest have finished.
pub fn job_runs(w: &Workload) -> bool {
    w.kind == Kind::Job && w.name.ends_with(['1', '3', '5', '7', '9'])
}

/// The workload's object as the bench creates it (its children come from `objects.rs`).
pub fn workload_object(w: &Workload) -> Value {
    let meta = json!({"name": w.name, "labels": {RUN_LABEL: RUN, "app": w.name}});
    let selector = json!({"matchLabels": {"app": w.name}});
    let mut extra = json!({"nodeSelector": {RUN_LABEL: RUN}});
    if matches!(w.kind, Kind::Job | Kind::CronJob) {
        extra["restartPolicy"] = json!("Never");
    }
    let template = json!({
        "metadata": {"labels": {"app": w.name, RUN_LABEL: RUN}},
        "spec": k8s::pod_spec(k8s::PAUSE, extra)
    });
    match w.kind {
        Kind::Deployment => json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": w.name, "labels": meta["labels"],
                         "annotations": {"deployment.kubernetes.io/revision": "1"}},
            "spec": {"replicas": w.pods, "selector": selector, "template": template}
        }),
        Kind::StatefulSet => json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
            "spec": {
                "replicas": w.pods, "selector": selector, "template": template,
                "serviceName": w.name, "podManagementPolicy": "Parallel",
                "volumeClaimTemplates": [{"metadata": {"name": CLAIM}, "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}]
            }
        }),
        Kind::DaemonSet => json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
            "spec": {"selector": selector, "template": template}
        }),
        Kind::Job => json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"completions": w.pods, "parallelism": w.pods, "template": template}
        }),
        // Scheduled once a year: present (and listed, watched and synced) but idle.
        Kind::CronJob => json!({
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
            "spec": {
                "schedule": "0 0 1 1 *", "concurrencyPolicy": "Forbid",
                "jobTemplate": {"spec": {"completions": 1, "parallelism": 1, "template": template}}
            }
        }),
    }
}

/// Creates a ControllerRevision with its data encoded as Go encodes it (the API server keeps
/// the bytes it receives, and upstream compares them).
pub async fn create_revision(
    client: &Client,
    ns: &str,
    rev: &ControllerRevision,
) -> anyhow::Result<()> {
    let name = rev.metadata.name.clone().unwrap_or_default();
    let body = rkcm_runtime::workload::history::revision_request_body(rev);
    let req = http::Request::post(format!("/apis/apps/v1/namespaces/{ns}/controllerrevisions"))
        .header("content-type", "application/json")
        .body(body)
        .with_context(|| format!("building the request for revision {ns}/{name}"))?;
    client
        .request::<ControllerRevision>(req)
        .await
        .with_context(|| format!("creating revision {ns}/{name}"))?;
    Ok(())
}

pub struct Threshold {
    args: Args,
    plan: Plan,
    /// Runs cleaned up so far: the last one removes the plane.
    runs_done: AtomicUsize,
    /// Where the probes continue (they pick their targets in turn across runs).
    cursor: Mutex<usize>,
    /// The load, measured by the run that made it.
    loaded: Mutex<Option<Vec<Metric>>>,
}

impl Threshold {
    pub fn new(args: Args) -> Self {
        let plan = Plan::of(&args);
        Self {
            args,
            plan,
            runs_done: AtomicUsize::new(0),
            cursor: Mutex::new(0),
            loaded: Mutex::new(None),
        }
    }

    fn next_cursor(&self) -> usize {
        let mut c = self
            .cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *c += 1;
        *c
    }
}

pub struct State {
    pub metrics: Vec<Metric>,
    pub problems: Vec<String>,
    pub cold_writes: u64,
}

fn metric(name: impl Into<String>, value: f64, unit: &str) -> Metric {
    Metric {
        name: name.into(),
        value: (value * 1000.0).round() / 1000.0,
        unit: unit.to_string(),
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / 1_048_576.0
}

/// Clears the finalizers of every `K` of `ns` that has some (claims' protection, running Job
/// pods' tracking): no controller of the plane would remove them.
async fn strip_finalizers<K: k8s::Namespaced>(client: &Client, ns: &str) -> anyhow::Result<()> {
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default();
    let list = k8s::retry(|| api.list_metadata(&lp))
        .await
        .with_context(|| format!("listing the objects of {ns} with finalizers"))?;
    let patch = json!({"metadata": {"finalizers": null}});
    let (pp, patch) = (PatchParams::default(), Patch::Merge(&patch));
    for o in list.items {
        if o.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty())
        {
            let name = o.metadata.name.clone().unwrap_or_default();
            k8s::retry(|| api.patch(&name, &pp, &patch))
                .await
                .with_context(|| format!("clearing the finalizers of {ns}/{name}"))?;
        }
    }
    Ok(())
}

/// Removes everything of the run: every namespace's objects, then the nodes.
async fn remove(env: &Env, plan: &Plan) -> anyhow::Result<()> {
    let c = &env.client;
    for i in 0..plan.namespaces {
        let ns = ns_of(i);
        k8s::delete_every::<CronJob>(c, &ns, "cronjobs").await?;
        k8s::delete_every::<Job>(c, &ns, "jobs").await?;
        k8s::delete_every::<Deployment>(c, &ns, "deployments").await?;
        k8s::delete_every::<StatefulSet>(c, &ns, "statefulsets").await?;
        k8s::delete_every::<DaemonSet>(c, &ns, "daemonsets").await?;
        k8s::delete_every::<ReplicaSet>(c, &ns, "replicasets").await?;
        k8s::delete_every::<ControllerRevision>(c, &ns, "controllerrevisions").await?;
        strip_finalizers::<PersistentVolumeClaim>(c, &ns).await?;
        k8s::delete_every::<PersistentVolumeClaim>(c, &ns, "claims").await?;
        strip_finalizers::<Pod>(c, &ns).await?;
        k8s::delete_every::<ConfigMap>(c, &ns, "configmaps").await?;
        k8s::delete_all_pods(c, &ns, Duration::from_secs(1800)).await?;
    }
    nodes::delete_labelled_nodes(env, RUN_LABEL, RUN).await
}

impl Scenario for Threshold {
    type State = State;

    fn id(&self) -> &'static str {
        "threshold"
    }

    fn title(&self) -> String {
        format!(
            "Threshold: {} pods on {} kwok nodes, loaded converged: cold start, settled, reaction, failover",
            group(self.plan.pods()),
            group(self.plan.nodes)
        )
    }

    fn description(&self) -> String {
        let count = |k: Kind| self.plan.workloads.iter().filter(|w| w.kind == k).count();
        format!(
            "The plane loaded directly by the bench (as fast as it takes it) with the load \
             test's mix in {ns} namespaces: {d} Deployments with their ReplicaSets, {s} \
             StatefulSets with their revisions and claims, {j} Jobs (half finished, half \
             running on {st} static nodes kwok does not run), {c} CronJobs (scheduled once a \
             year) and one DaemonSet on each of {nodes} kwok nodes, {pods} pods, every child \
             owned and every status set as the controllers would have them. Per manager, \
             every controller running: **cold start** (from the process's start until every \
             informer synced and then every work queue empty with nothing added over a second: \
             the time a new leader needs before it is useful; the writes it made), **settled** \
             ({settled} s idle), **reaction** ({probes} single changes on a quiet manager, \
             then a burst of {burst} of each kind: a Deployment scaled by one, a StatefulSet's \
             pod deleted, a running Job's pod finished, a node deleted; percentiles of the \
             work-queue histograms over each window and of the audit log's reaction latency) \
             and **failover** (the manager paused, two replicas with leader election, the \
             leader SIGKILLed once both synced, a Deployment scaled right after: time to the \
             standby's first write for it).",
            ns = self.plan.namespaces,
            d = group(count(Kind::Deployment)),
            s = group(count(Kind::StatefulSet)),
            j = group(count(Kind::Job)),
            st = self.plan.static_nodes,
            c = group(count(Kind::CronJob)),
            nodes = group(self.plan.nodes),
            pods = group(self.plan.pods()),
            settled = self.args.settled_seconds,
            probes = self.args.probes,
            burst = self.args.burst_changes,
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        let mut p = self.plan.size();
        p.insert(
            "settled_seconds".into(),
            self.args.settled_seconds.to_string(),
        );
        p.insert("probes".into(), self.args.probes.to_string());
        p.insert("burst".into(), self.args.burst_changes.to_string());
        p.insert("static_nodes".into(), self.plan.static_nodes.to_string());
        p
    }

    fn controllers(&self) -> Vec<&'static str> {
        ALL_CONTROLLERS.to_vec()
    }

    fn manager_flags(&self) -> Vec<String> {
        let certs = std::env::temp_dir().join(format!(
            "rkcm-bench-threshold-certs-{}",
            self.args.metrics_port
        ));
        vec![
            format!("--secure-port={}", self.args.metrics_port),
            "--bind-address=127.0.0.1".into(),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".into(),
            format!("--cert-dir={}", certs.display()),
        ]
    }

    fn rss_curve(&self) -> Option<Duration> {
        Some(Duration::from_secs(5))
    }

    async fn setup(&self, env: &Env, _ns: &str) -> anyhow::Result<State> {
        let want = self.plan.size();
        let have = load::loaded_size(&env.client).await?;
        let mut metrics = Vec::new();
        if have.as_ref() == Some(&want) {
            say!(
                "the plane holds the run's objects already ({} pods)",
                self.plan.pods()
            );
        } else {
            if have.is_some() {
                say!("the plane holds another size ({have:?}): removing it");
            }
            remove(env, &self.plan).await?;
            let loaded = load::load(env, &self.plan).await?;
            say!(
                "loaded {} pods and {} workloads in {:.1} s",
                loaded.pods,
                loaded.objects,
                loaded.seconds
            );
            metrics.push(metric("load time", loaded.seconds, "s"));
            metrics.push(metric(
                "load rate",
                loaded.pods as f64 / loaded.seconds.max(0.001),
                "pods/s",
            ));
            load::wait_settled(&env.client, &self.plan, Duration::from_secs(600)).await?;
            for (name, b) in crate::scenarios::envelope::plane_rss(&env.cluster_dir) {
                metrics.push(metric(
                    format!("{name} RSS loaded (no manager)"),
                    mib(b),
                    "MiB",
                ));
            }
            *self
                .loaded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(metrics.clone());
        }
        Ok(State {
            metrics,
            problems: Vec::new(),
            cold_writes: 0,
        })
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        phases::cold_start(self, env, state, probe).await?;
        phases::settled(self, state, probe).await?;
        phases::reaction(self, env, state, probe).await?;
        if !self.args.no_failover {
            let secs = failover::run(self, env, probe).await?;
            state.metrics.push(metric("failover", secs, "s"));
        }
        Ok(())
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let mut wrong = state.problems.clone();
        for i in 0..self.plan.namespaces {
            let ns = ns_of(i);
            let ds: Vec<Deployment> = k8s::list_all(&env.client, &ns, "deployments").await?;
            for d in &ds {
                let want = d.spec.replicas.unwrap_or(1);
                let st = d.status.clone().unwrap_or_default();
                if st.updated_replicas != Some(want)
                    || st.observed_generation != d.metadata.generation
                {
                    wrong.push(format!(
                        "deployment {ns}/{}: {:?} updated of {want}",
                        d.metadata.name.as_deref().unwrap_or_default(),
                        st.updated_replicas
                    ));
                }
            }
            let ss: Vec<StatefulSet> = k8s::list_all(&env.client, &ns, "statefulsets").await?;
            for s in &ss {
                let want = s.spec.replicas.unwrap_or(1);
                let st = s.status.clone().unwrap_or_default();
                if st.replicas != want {
                    wrong.push(format!(
                        "statefulset {ns}/{}: {} of {want} replicas",
                        s.metadata.name.as_deref().unwrap_or_default(),
                        st.replicas
                    ));
                }
            }
        }
        wrong.truncate(10);
        Ok(Correctness::unless(wrong, || {
            format!(
                "every Deployment and StatefulSet at its replicas after the run; {} writes during cold start",
                state.cold_writes
            )
        }))
    }

    fn metrics(&self, state: &State) -> Vec<Metric> {
        let mut out = state.metrics.clone();
        if !out.iter().any(|m| m.name == "load time")
            && let Some(l) = self
                .loaded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_ref()
        {
            out.extend(l.iter().cloned());
        }
        out
    }

    async fn cleanup(&self, env: &Env, _ns: &str) -> anyhow::Result<()> {
        let runs = env.managers.len()
            * if env.both_orders && env.managers.len() > 1 {
                2
            } else {
                1
            };
        let done = self.runs_done.fetch_add(1, Ordering::SeqCst) + 1;
        if done >= runs && !self.args.keep_loaded {
            say!("removing the loaded plane");
            remove(env, &self.plan).await?;
        }
        Ok(())
    }
}

/// `etcd_mvcc_db_total_size_in_bytes` of the plane's etcd (`RKCM_TEST_ETCD_ENDPOINT`).
async fn etcd_db_bytes() -> Option<f64> {
    let endpoint = std::env::var("RKCM_TEST_ETCD_ENDPOINT").ok()?;
    let out = tokio::process::Command::new("curl")
        .args(["-s", "--max-time", "10"])
        .arg(format!("{endpoint}/metrics"))
        .output()
        .await
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("etcd_mvcc_db_total_size_in_bytes "))
        .and_then(|v| v.trim().parse().ok())
}

/// Loads the plane at the size of `args` with no manager (removing another size first) and
/// measures what the plane holds: load time and rate, the plane's processes' RSS, etcd's
/// database size.
pub async fn load_only(env: &Env, args: &Args) -> anyhow::Result<Vec<Metric>> {
    let plan = Plan::of(args);
    remove(env, &plan).await?;
    let loaded = load::load(env, &plan).await?;
    load::wait_settled(&env.client, &plan, Duration::from_secs(1800)).await?;
    let mut out = vec![
        metric("pods", loaded.pods as f64, ""),
        metric("nodes", plan.nodes as f64, ""),
        metric("workloads", loaded.objects as f64, ""),
        metric("load time", loaded.seconds, "s"),
        metric(
            "load rate",
            loaded.pods as f64 / loaded.seconds.max(0.001),
            "pods/s",
        ),
    ];
    for (name, b) in crate::scenarios::envelope::plane_rss(&env.cluster_dir) {
        out.push(metric(format!("{name} RSS loaded"), mib(b), "MiB"));
    }
    if let Some(b) = etcd_db_bytes().await {
        out.push(metric("etcd database", b / 1_048_576.0, "MiB"));
    }
    for m in &out {
        say!("  {}: {} {}", m.name, m.value, m.unit);
    }
    if !args.keep_loaded {
        remove(env, &plan).await?;
    }
    Ok(out)
}
