//! What the threshold scenario's phases share: the run's names, the plan of its size, the
//! workload objects and revisions, the scenario's state, metric helpers and the plane's
//! removal.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::objects::{CLAIM, RUN_LABEL};
use crate::harness::Env;
use crate::results::Metric;
use crate::scenarios::envelope::mix::{self, Kind, Workload};
use crate::{k8s, nodes};

/// The run's name: namespaces `<i>-bench-threshold`, nodes `bench-threshold-n<i>`.
pub const RUN: &str = "bench-threshold";
/// The Lease the failover replicas elect over (kube-system).
pub(super) const LEASE: &str = "rkcm-bench-threshold";
/// The Lease the measured manager (one process) elects over (kube-system).
pub(super) const MEASURED_LEASE: &str = "rkcm-bench-threshold-measured";

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
    pub(super) fn of(args: &Args) -> Self {
        let namespaces = args.namespaces.unwrap_or(args.nodes / 100).max(1);
        // The mix puts 95% of a namespace's pods in workloads; the DaemonSet adds one a node.
        let workload_pods = args.pods.saturating_sub(args.nodes);
        let mut per_ns = workload_pods * 20 / 19 / namespaces;
        // The mix rounds each group down to whole workloads (2 % short at 100 000 pods):
        // grow the namespaces' share until the plan holds at least the pods asked for.
        let mut workloads = mix::plan(namespaces, per_ns, args.nodes);
        while mix::steady_pods(&workloads) < args.pods {
            let short = args.pods - mix::steady_pods(&workloads);
            per_ns += (short / namespaces).max(1);
            workloads = mix::plan(namespaces, per_ns, args.nodes);
        }
        Self {
            nodes: args.nodes,
            static_nodes: args.static_nodes.max(1),
            namespaces,
            concurrency: args.load_concurrency,
            workloads,
        }
    }

    pub fn pods(&self) -> usize {
        mix::steady_pods(&self.workloads)
    }

    pub(super) fn size(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("pods".into(), self.pods().to_string()),
            ("nodes".into(), self.nodes.to_string()),
            ("namespaces".into(), self.namespaces.to_string()),
            ("workloads".into(), self.workloads.len().to_string()),
        ])
    }
}

/// The index first, so that a sharded ring spreads the namespaces (see the envelope's
/// `ns_of`).
pub fn ns_of(i: usize) -> String {
    format!("{i}-{RUN}")
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
    pub(super) args: Args,
    pub(super) plan: Plan,
    /// Runs cleaned up so far: the last one removes the plane.
    pub(super) runs_done: AtomicUsize,
    /// Where the probes continue (they pick their targets in turn across runs).
    pub(super) cursor: Mutex<usize>,
    /// The load, measured by the run that made it.
    pub(super) loaded: Mutex<Option<Vec<Metric>>>,
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

    pub(super) fn next_cursor(&self) -> usize {
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

pub(super) fn metric(name: impl Into<String>, value: f64, unit: &str) -> Metric {
    Metric {
        name: name.into(),
        value: (value * 1000.0).round() / 1000.0,
        unit: unit.to_string(),
    }
}

pub(super) fn mib(b: u64) -> f64 {
    b as f64 / 1_048_576.0
}

/// Clears the finalizers of every `K` of `ns` that has some (claims' protection, running Job
/// pods' tracking): no controller of the plane would remove them.
pub(super) async fn strip_finalizers<K: k8s::Namespaced>(
    client: &Client,
    ns: &str,
) -> anyhow::Result<()> {
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

/// The Deployment a failover scales: the first medium or small one.
pub(super) fn failover_target(plan: &Plan) -> anyhow::Result<&Workload> {
    plan.workloads
        .iter()
        .find(|w| w.kind == Kind::Deployment && w.pods <= mix::MEDIUM)
        .context("no Deployment to scale")
}

/// Removes everything of the run: every namespace's objects, then the nodes.
pub(super) async fn remove(env: &Env, plan: &Plan) -> anyhow::Result<()> {
    let c = &env.client;
    for i in 0..plan.namespaces {
        let ns = ns_of(i);
        k8s::delete_workload_objects(c, &ns).await?;
        strip_finalizers::<PersistentVolumeClaim>(c, &ns).await?;
        k8s::delete_every::<PersistentVolumeClaim>(c, &ns, "claims").await?;
        strip_finalizers::<Pod>(c, &ns).await?;
        k8s::delete_every::<ConfigMap>(c, &ns, "configmaps").await?;
        k8s::delete_all_pods(c, &ns, Duration::from_secs(1800)).await?;
    }
    nodes::delete_labelled_nodes(env, RUN_LABEL, RUN).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    /// The plan holds at least the pods asked for (the mix rounds down to whole workloads),
    /// and not many more.
    #[test]
    fn the_plan_holds_at_least_the_pods_asked_for() {
        for (pods, nodes) in [
            (3_000, 100),
            (10_000, 333),
            (100_000, 3_334),
            (150_000, 5_000),
        ] {
            let cli = Cli::parse_from([
                "t".to_owned(),
                format!("--pods={pods}"),
                format!("--nodes={nodes}"),
            ]);
            let plan = Plan::of(&cli.args);
            let got = plan.pods();
            assert!(
                got >= pods && got <= pods + pods * 3 / 100,
                "{pods} pods on {nodes} nodes asked, the plan holds {got}"
            );
        }
    }
}
