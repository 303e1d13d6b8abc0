//! `rkcm explain KIND/NAMESPACE/NAME`: what the controller would do with one object now and
//! what it waits on, computed by the controller's own pure plan over the live objects. It
//! only reads, so it works on any cluster, whichever manager runs the controller. Installed
//! as `kubectl-rkcm`, it also runs as `kubectl rkcm explain ...`.
//!
//! Kinds: `deployment`, `replicaset`, `replicationcontroller`, `statefulset`, `daemonset`,
//! `job`, `cronjob`, and `pod` for PodGC. Each reads what its controller's sync reads: the
//! Deployment's ReplicaSets; the active pods of a ReplicaSet or ReplicationController; the
//! StatefulSet's pods, controller revisions and the namespace's claims; the nodes and the
//! DaemonSet's pods and revisions; the Job's pods; the namespace's Jobs for a CronJob; every
//! pod and node of the cluster for a pod (PodGC counts terminated pods cluster-wide). Children
//! are picked by the runtime's claim rules, as the controller claims them. Output: text for
//! a person, or `-o json` (the schema of [`rkcm_runtime::explain::Explanation`]).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::{Api, Client, Resource};
use rkcm_runtime::api::client::{ClientOptions, build_config, make_client};
use rkcm_runtime::cache::cached::{Node as CachedNode, Pod as CachedPod};
use rkcm_runtime::explain::Explanation;
use rkcm_runtime::explain::decisions::{Decided, Outcome};
use rkcm_runtime::workload::controller_ref::{Claim, OwnerInfo, classify};
use rkcm_runtime::workload::history::owned_or_orphan_revisions;
use rkcm_runtime::workload::pod::is_pod_active;
use rkcm_runtime::workload::selector::Selector;
use serde::de::DeserializeOwned;

const USAGE: &str = "usage: rkcm explain KIND/NAMESPACE/NAME [--kubeconfig PATH] [-o text|json]
  KIND: deployment (deploy), replicaset (rs), replicationcontroller (rc), statefulset (sts),
        daemonset (ds), job, cronjob (cj), pod (po, for PodGC)
  --terminated-pod-gc-threshold N   PodGC's threshold the manager runs with (pods only;
                                    default 12500)
  --manager URL                     also show the running manager's last decision for the
                                    object, read from URL/debug/rkcm/decisions with the
                                    kubeconfig's credentials (e.g. https://127.0.0.1:10257)
  --manager-insecure-skip-tls-verify
                                    accept the manager's self-signed serving certificate";

/// A parsed `explain` command line.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub kubeconfig: Option<PathBuf>,
    pub json: bool,
    /// PodGC's `--terminated-pod-gc-threshold` (explaining a pod).
    pub terminated_pod_gc_threshold: i32,
    /// The running manager's secure serving address, to read its last decision.
    pub manager: Option<String>,
    pub manager_insecure: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Deployment,
    ReplicaSet,
    ReplicationController,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    Pod,
}

/// Parses the arguments after `explain`.
pub fn parse(args: &[String]) -> Result<Args, String> {
    let mut target = None;
    let mut kubeconfig = None;
    let mut json = false;
    let mut threshold = rkcm_podgc::DEFAULT_TERMINATED_POD_GC_THRESHOLD;
    let (mut manager, mut manager_insecure) = (None, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f, Some(v.to_owned())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("flag {name} needs a value\n{USAGE}"))
        };
        match flag {
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value("--kubeconfig")?)),
            "-o" | "--output" => match value("-o")?.as_str() {
                "json" => json = true,
                "text" => json = false,
                other => return Err(format!("unknown output format {other:?}\n{USAGE}")),
            },
            "--terminated-pod-gc-threshold" => {
                let v = value("--terminated-pod-gc-threshold")?;
                threshold = v.parse().map_err(|_| {
                    format!("--terminated-pod-gc-threshold: {v:?} is not a number\n{USAGE}")
                })?;
            }
            "--manager" => manager = Some(value("--manager")?),
            "--manager-insecure-skip-tls-verify" => manager_insecure = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            f if f.starts_with('-') => return Err(format!("unknown flag {f}\n{USAGE}")),
            _ if target.is_none() => target = Some(a.clone()),
            _ => return Err(format!("unexpected argument {a:?}\n{USAGE}")),
        }
    }
    let target = target.ok_or_else(|| USAGE.to_owned())?;
    let parts: Vec<&str> = target.split('/').collect();
    let [kind, namespace, name] = parts.as_slice() else {
        return Err(format!("{target:?}: expected KIND/NAMESPACE/NAME\n{USAGE}"));
    };
    let kind = match kind.to_ascii_lowercase().as_str() {
        "deployment" | "deployments" | "deploy" => Kind::Deployment,
        "replicaset" | "replicasets" | "rs" => Kind::ReplicaSet,
        "replicationcontroller" | "replicationcontrollers" | "rc" => Kind::ReplicationController,
        "statefulset" | "statefulsets" | "sts" => Kind::StatefulSet,
        "daemonset" | "daemonsets" | "ds" => Kind::DaemonSet,
        "job" | "jobs" => Kind::Job,
        "cronjob" | "cronjobs" | "cj" => Kind::CronJob,
        "pod" | "pods" | "po" => Kind::Pod,
        other => return Err(format!("kind {other:?} is not explained yet\n{USAGE}")),
    };
    if namespace.is_empty() || name.is_empty() {
        return Err(format!("{target:?}: empty namespace or name\n{USAGE}"));
    }
    Ok(Args {
        kind,
        namespace: (*namespace).to_owned(),
        name: (*name).to_owned(),
        kubeconfig,
        json,
        terminated_pod_gc_threshold: threshold,
        manager,
        manager_insecure,
    })
}

/// Runs `rkcm explain` with the arguments after `explain`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return 2;
        }
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("Error: building the async runtime: {err}");
            return 1;
        }
    };
    match runtime.block_on(explain_with_last(&args)) {
        Ok(e) => {
            if args.json {
                match serde_json::to_string_pretty(&e) {
                    Ok(s) => println!("{s}"),
                    Err(err) => {
                        eprintln!("Error: encoding the explanation: {err}");
                        return 1;
                    }
                }
            } else {
                print!("{}", e.render());
            }
            0
        }
        Err(err) => {
            eprintln!("Error: {err:#}");
            1
        }
    }
}

/// What `explain` prints: the explanation, and with `--manager` the running manager's last
/// decision for the object (`lastDecision`: the record, or `null` when it has none).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    #[serde(flatten)]
    explanation: Explanation,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_decision: Option<Option<Decided>>,
}

impl Report {
    fn render(&self) -> String {
        let mut out = self.explanation.render();
        match &self.last_decision {
            None => {}
            Some(None) => out.push_str("Last decision of the running manager: none recorded\n"),
            Some(Some(d)) => {
                let outcome = match &d.outcome {
                    Outcome::Synced => "synced".to_owned(),
                    Outcome::Failed { error } => format!("failed: {error}"),
                };
                out.push_str(&format!(
                    "Last decision of the running manager ({}, at {}): {outcome}\n",
                    d.controller, d.at
                ));
                for a in &d.actions {
                    out.push_str(&format!("  - wrote {a}\n"));
                }
                for w in &d.waiting {
                    out.push_str(&format!("  - waiting: {w}\n"));
                }
                if d.actions.is_empty() && d.waiting.is_empty() {
                    out.push_str("  - no writes\n");
                }
            }
        }
        out
    }
}

async fn explain_with_last(args: &Args) -> anyhow::Result<Report> {
    let opts = ClientOptions {
        kubeconfig: args.kubeconfig.clone(),
        ..ClientOptions::default()
    };
    let config = build_config(&opts)
        .await
        .context("reading the client configuration")?;
    let explanation = explain(args, &opts, config.clone()).await?;
    let last_decision = match &args.manager {
        None => None,
        Some(url) => Some(
            last_decision(url, args.manager_insecure, config, &explanation)
                .await
                .with_context(|| format!("reading the last decision from the manager at {url}"))?,
        ),
    };
    Ok(Report {
        explanation,
        last_decision,
    })
}

/// The manager's `/debug/rkcm/decisions/CONTROLLER/NS/NAME`, asked with the kubeconfig's
/// credentials; `None` when it has no record (404).
async fn last_decision(
    url: &str,
    insecure: bool,
    mut config: kube::Config,
    e: &Explanation,
) -> anyhow::Result<Option<Decided>> {
    config.cluster_url = url.parse().context("parsing the manager's URL")?;
    if insecure {
        config.accept_invalid_certs = true;
        config.root_cert = None;
    }
    config.tls_server_name = None;
    let client = Client::try_from(config).context("building the manager's client")?;
    let path = format!(
        "/debug/rkcm/decisions/{}/{}/{}",
        e.controller, e.object.namespace, e.object.name
    );
    let request = http::Request::get(path)
        .body(Vec::new())
        .context("building the request")?;
    match client.request_text(request).await {
        Ok(body) => Ok(Some(
            serde_json::from_str(&body).context("parsing the manager's answer")?,
        )),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(err) => Err(err).context("asking the manager"),
    }
}

async fn explain(
    args: &Args,
    opts: &ClientOptions,
    config: kube::Config,
) -> anyhow::Result<Explanation> {
    let client = make_client(&config, opts, "rkcm-explain").context("building the client")?;
    let read = Read {
        client,
        namespace: &args.namespace,
        key: format!("{}/{}", args.namespace, args.name),
    };
    let now = jiff::Timestamp::now();
    match args.kind {
        Kind::Deployment => {
            let d: Deployment = read.get(&args.name).await?;
            let selector = Selector::from_label_selector(&d.spec.selector)
                .with_context(|| format!("the selector of Deployment {}", read.key))?;
            let owned = claimed(&d, read.list::<ReplicaSet>().await?, |rs| {
                selector.matches(rs.metadata.labels.as_ref())
            })?;
            Ok(rkcm_deployment::explain::explain(&d, &owned, now))
        }
        Kind::ReplicaSet => {
            let rs: ReplicaSet = read.get(&args.name).await?;
            replicas(&read, &rs, "ReplicaSet", now).await
        }
        Kind::ReplicationController => {
            let rc: ReplicationController = read.get(&args.name).await?;
            replicas(&read, &rc, "ReplicationController", now).await
        }
        Kind::StatefulSet => statefulset(&read, &args.name, now).await,
        Kind::DaemonSet => daemonset(&read, &args.name, now).await,
        Kind::Job => {
            let job: Job = read.get(&args.name).await?;
            let selector = rkcm_job::plan::selector_of(&job)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("the selector of Job {}", read.key))?;
            let pods = claimed(&job, read.list::<Pod>().await?, |p| {
                selector.matches(p.metadata.labels.as_ref())
            })?;
            Ok(rkcm_job::explain::explain(&job, &cached(pods), now))
        }
        Kind::CronJob => {
            let cj: CronJob = read.get(&args.name).await?;
            let jobs: Vec<Arc<Job>> = read
                .list::<Job>()
                .await?
                .into_iter()
                .map(Arc::new)
                .collect();
            let local = rkcm_cronjob::Config::default().local_time_zone;
            Ok(rkcm_cronjob::explain::explain(&cj, &jobs, &local, now))
        }
        Kind::Pod => {
            let pod = Arc::new(CachedPod::from(read.get::<Pod>(&args.name).await?));
            let pods = read.list_all::<Pod>().await?;
            let pods: Vec<Arc<CachedPod>> = cached(pods.into_iter().map(Arc::new).collect());
            let nodes = nodes(&read).await?;
            Ok(rkcm_podgc::explain::explain(
                &pod,
                &pods,
                &nodes,
                args.terminated_pod_gc_threshold,
                rkcm_podgc::DEFAULT_QUARANTINE.as_secs(),
            ))
        }
    }
}

/// Read-only access to one namespace.
struct Read<'a> {
    client: Client,
    namespace: &'a str,
    /// `NAMESPACE/NAME` of the object explained, for errors.
    key: String,
}

impl Read<'_> {
    async fn get<K>(&self, name: &str) -> anyhow::Result<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let kind = K::kind(&());
        Api::<K>::namespaced(self.client.clone(), self.namespace)
            .get_opt(name)
            .await
            .with_context(|| format!("reading {kind} {}", self.key))?
            .with_context(|| format!("{kind} {} not found", self.key))
    }

    async fn list<K>(&self) -> anyhow::Result<Vec<K>>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        Ok(Api::<K>::namespaced(self.client.clone(), self.namespace)
            .list(&ListParams::default())
            .await
            .with_context(|| {
                format!(
                    "listing the {}s in the namespace of {}",
                    K::kind(&()),
                    self.key
                )
            })?
            .items)
    }

    /// Every object of a kind in the cluster (nodes; pods of every namespace for PodGC).
    async fn list_all<K>(&self) -> anyhow::Result<Vec<K>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    {
        Ok(Api::<K>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing the {}s of the cluster", K::kind(&())))?
            .items)
    }
}

async fn nodes(read: &Read<'_>) -> anyhow::Result<Vec<Arc<CachedNode>>> {
    Ok(read
        .list_all::<Node>()
        .await?
        .iter()
        .map(|n| Arc::new(CachedNode::from(n)))
        .collect())
}

/// A ReplicaSet or ReplicationController: the active pods it owns or would adopt.
async fn replicas<O>(
    read: &Read<'_>,
    owner: &O,
    kind: &str,
    now: jiff::Timestamp,
) -> anyhow::Result<Explanation>
where
    O: rkcm_replicaset::owner::ReplicaOwner<DynamicType = ()>,
{
    let selector = owner
        .selector()
        .with_context(|| format!("the selector of {kind} {}", read.key))?;
    let active: Vec<Pod> = read
        .list::<Pod>()
        .await?
        .into_iter()
        .filter(|p| is_pod_active(&CachedPod::from(p)))
        .collect();
    let pods = claimed(owner, active, |p| {
        selector.matches(p.metadata.labels.as_ref())
    })?;
    Ok(rkcm_replicaset::explain::explain(
        owner,
        kind,
        &cached(pods),
        now,
    ))
}

/// The ControllerRevisions the owner's controller works with: its own, and orphans its
/// selector matches.
async fn revisions(
    read: &Read<'_>,
    owner: &ObjectMeta,
    selector: &Selector,
) -> anyhow::Result<Vec<Arc<ControllerRevision>>> {
    let all: Vec<Arc<ControllerRevision>> = read
        .list::<ControllerRevision>()
        .await?
        .into_iter()
        .map(Arc::new)
        .collect();
    let uid = owner.uid.as_deref().unwrap_or_default();
    Ok(owned_or_orphan_revisions(&all, uid, |r| {
        selector.matches(r.metadata.labels.as_ref())
    }))
}

async fn daemonset(
    read: &Read<'_>,
    name: &str,
    now: jiff::Timestamp,
) -> anyhow::Result<Explanation> {
    let ds: DaemonSet = read.get(name).await?;
    let selector = Selector::from_label_selector(&ds.spec.selector)
        .with_context(|| format!("the selector of DaemonSet {}", read.key))?;
    let pods = claimed(&ds, read.list::<Pod>().await?, |p| {
        selector.matches(p.metadata.labels.as_ref())
    })?;
    let revisions = revisions(read, &ds.metadata, &selector).await?;
    let nodes = nodes(read).await?;
    let seen = rkcm_daemonset::explain::Seen {
        ds: &ds,
        nodes: &nodes,
        pods: &cached(pods),
        revisions: &revisions,
    };
    Ok(rkcm_daemonset::explain::explain(
        &seen,
        rkcm_daemonset::Config::default().rollout_skips_not_ready_nodes,
        now,
    ))
}

async fn statefulset(
    read: &Read<'_>,
    name: &str,
    now: jiff::Timestamp,
) -> anyhow::Result<Explanation> {
    let set: StatefulSet = read.get(name).await?;
    let what = || format!("the selector of StatefulSet {}", read.key);
    let selector = Selector::from_label_selector(&set.spec.selector).with_context(what)?;
    let pods = claimed(&set, read.list::<Pod>().await?, |p| {
        selector.matches(p.metadata.labels.as_ref())
            && rkcm_statefulset::identity::is_member_of(&set, &CachedPod::from(p))
    })?;
    let revisions = revisions(read, &set.metadata, &selector).await?;
    let claims: rkcm_statefulset::claims::Claims = read
        .list::<PersistentVolumeClaim>()
        .await?
        .into_iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), Arc::new(c)))
        .collect();
    Ok(rkcm_statefulset::explain::explain(
        &set,
        &revisions,
        &cached(pods),
        &claims,
        &rkcm_statefulset::Config::default(),
        now,
    ))
}

fn cached(pods: Vec<Arc<Pod>>) -> Vec<Arc<CachedPod>> {
    pods.iter()
        .map(|p| Arc::new(CachedPod::from(&**p)))
        .collect()
}

/// The children the owner's controller would work with after its claim: those it owns and
/// those it would adopt, by the runtime's claim rules ([`classify`]); `matches` is the
/// controller's selector (and filter).
fn claimed<O, C>(
    owner: &O,
    children: Vec<C>,
    matches: impl Fn(&C) -> bool,
) -> anyhow::Result<Vec<Arc<C>>>
where
    O: Resource<DynamicType = ()>,
    C: Resource<DynamicType = ()>,
{
    let owner = OwnerInfo::of(owner).context("the owner has no name or UID")?;
    Ok(children
        .into_iter()
        .filter(|child| {
            let meta: &ObjectMeta = child.meta();
            matches!(
                classify(&owner, meta, matches(child)),
                Claim::Owned | Claim::Adopt
            )
        })
        .map(Arc::new)
        .collect())
}

#[cfg(test)]
mod tests;
