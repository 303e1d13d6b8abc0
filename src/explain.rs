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
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolumeClaim, Pod, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Resource};
use rkcm_runtime::api::client::{ClientOptions, make_client};
use rkcm_runtime::cache::cached::{Node as CachedNode, Pod as CachedPod};
use rkcm_runtime::explain::decisions::{Decided, Outcome};
use rkcm_runtime::explain::{Explanation, ObjectRef};
use rkcm_runtime::workload::controller_ref::{Claim, OwnerInfo, classify};
use rkcm_runtime::workload::history::owned_or_orphan_revisions;
use rkcm_runtime::workload::pod::is_pod_active;
use rkcm_runtime::workload::selector::Selector;
use serde::de::DeserializeOwned;

use planning::{Planning, Source};

mod planning;

const USAGE: &str = "usage: rkcm explain KIND/NAME [-n NAMESPACE] [--context NAME] [--kubeconfig PATH] [-o text|json]
       rkcm explain KIND NAME ...   or   rkcm explain KIND/NAMESPACE/NAME ...
  KIND: deployment (deploy), replicaset (rs), replicationcontroller (rc), statefulset (sts),
        daemonset (ds), job, cronjob (cj), ttl (a Job, for TTL-after-finished),
        pod (po, for PodGC)
  As kubectl: the kubeconfig is --kubeconfig, else the files of KUBECONFIG, else
  ~/.kube/config (else the in-cluster config); --context picks a context, and the namespace
  is -n, else the context's, else \"default\".
  --feature-gates, --rkcm-*, --terminated-pod-gc-threshold
                                    the manager's flags: explain plans with them, as the
                                    manager does (default: upstream's defaults); with
                                    --rkcm-shards it names the replica owning the object's
                                    namespace (Leases in --leader-elect-resource-namespace)
  --manager URL                     plan with the running manager's configuration
                                    (URL/debug/rkcm/config; flags given here apply after
                                    it) and show its last decision for the object
                                    (URL/debug/rkcm/decisions), asked with the kubeconfig's
                                    credentials (e.g. https://127.0.0.1:10257)
  --manager-insecure-skip-tls-verify
                                    accept the manager's self-signed serving certificate";

/// A parsed `explain` command line.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    pub kind: Kind,
    /// From `-n` or `KIND/NAMESPACE/NAME`; `None`: the context's namespace, else `default`.
    pub namespace: Option<String>,
    pub name: String,
    pub kubeconfig: Option<PathBuf>,
    /// `--context`: the kubeconfig context; `None`: its current context.
    pub context: Option<String>,
    pub json: bool,
    /// The manager's flags given (`--feature-gates`, `--rkcm-*`,
    /// `--terminated-pod-gc-threshold`), each `--NAME=VALUE` or a bare boolean `--NAME`.
    pub planning_flags: Vec<String>,
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
    /// A Job, as the TTL-after-finished controller sees it.
    TtlAfterFinished,
    Pod,
}

/// Parses the arguments after `explain`.
pub fn parse(args: &[String]) -> Result<Args, String> {
    let mut targets: Vec<String> = Vec::new();
    let (mut kubeconfig, mut context, mut ns_flag) = (None, None, None);
    let mut json = false;
    let mut planning_flags = Vec::new();
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
            "--context" => context = Some(value("--context")?),
            "-n" | "--namespace" => ns_flag = Some(value("--namespace")?),
            "-o" | "--output" => match value("-o")?.as_str() {
                "json" => json = true,
                "text" => json = false,
                other => return Err(format!("unknown output format {other:?}\n{USAGE}")),
            },
            f if f.starts_with("--rkcm-") && inline.is_none() => planning_flags.push(a.clone()),
            f if f.strip_prefix("--").is_some_and(planning::is_planning_flag) => {
                planning_flags.push(format!("{f}={}", value(f)?));
            }
            "--manager" => manager = Some(value("--manager")?),
            "--manager-insecure-skip-tls-verify" => manager_insecure = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            f if f.starts_with('-') => return Err(format!("unknown flag {f}\n{USAGE}")),
            _ if targets.len() < 2 => targets.push(a.clone()),
            _ => return Err(format!("unexpected argument {a:?}\n{USAGE}")),
        }
    }
    let (kind, namespace, name) = target(&targets, ns_flag)?;
    Planning::from_flags(&planning_flags, Source::Flags).map_err(|e| format!("{e}\n{USAGE}"))?;
    Ok(Args {
        kind,
        namespace,
        name,
        kubeconfig,
        context,
        json,
        planning_flags,
        manager,
        manager_insecure,
    })
}

/// The object named by `KIND/NAME`, `KIND NAME` or `KIND/NAMESPACE/NAME`, with `-n`.
fn target(
    targets: &[String],
    ns_flag: Option<String>,
) -> Result<(Kind, Option<String>, String), String> {
    let split: Vec<&str> = match targets {
        [] => return Err(USAGE.to_owned()),
        [one] => one.split('/').collect(),
        [kind, name] if !kind.contains('/') && !name.contains('/') => {
            vec![kind.as_str(), name.as_str()]
        }
        _ => {
            return Err(format!(
                "{targets:?}: expected KIND/NAME, KIND NAME or KIND/NAMESPACE/NAME\n{USAGE}"
            ));
        }
    };
    let (kind, namespace, name) = match split.as_slice() {
        [kind, name] => (*kind, ns_flag, *name),
        [kind, namespace, name] => match &ns_flag {
            Some(n) if n != namespace => {
                return Err(format!(
                    "the namespace {namespace:?} of the target and -n {n:?} disagree\n{USAGE}"
                ));
            }
            _ => (*kind, Some((*namespace).to_owned()), *name),
        },
        _ => {
            return Err(format!(
                "{:?}: expected KIND/NAME or KIND/NAMESPACE/NAME\n{USAGE}",
                targets.join(" ")
            ));
        }
    };
    if name.is_empty() || namespace.as_deref().is_some_and(str::is_empty) {
        return Err(format!("{targets:?}: empty namespace or name\n{USAGE}"));
    }
    Ok((kind_of(kind)?, namespace, name.to_owned()))
}

fn kind_of(kind: &str) -> Result<Kind, String> {
    Ok(match kind.to_ascii_lowercase().as_str() {
        "deployment" | "deployments" | "deploy" => Kind::Deployment,
        "replicaset" | "replicasets" | "rs" => Kind::ReplicaSet,
        "replicationcontroller" | "replicationcontrollers" | "rc" => Kind::ReplicationController,
        "statefulset" | "statefulsets" | "sts" => Kind::StatefulSet,
        "daemonset" | "daemonsets" | "ds" => Kind::DaemonSet,
        "job" | "jobs" => Kind::Job,
        "cronjob" | "cronjobs" | "cj" => Kind::CronJob,
        "ttl" | "ttlafterfinished" | "ttl-after-finished" => Kind::TtlAfterFinished,
        "pod" | "pods" | "po" => Kind::Pod,
        other => return Err(format!("kind {other:?} is not explained yet\n{USAGE}")),
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
    planned_with: PlannedWith,
    /// Sharded mode (`--rkcm-shards`): the replica that owns the object's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<ShardOwner>,
}

/// Who acts on an object in sharded mode: the holder of its namespace's range Lease.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ShardOwner {
    range: u32,
    ranges: u32,
    /// `<namespace>/<name>` of the range's Lease.
    lease: String,
    /// The replica holding it (`None`: the Lease is missing or released).
    holder: Option<String>,
    /// The holder's member session the range Lease names (`None`: a Lease renewed itself,
    /// by a version before member sessions).
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    /// Whether the holder's member Lease still shows that session (`false`: it was fenced,
    /// released or replaced, and the range is free to take).
    #[serde(skip_serializing_if = "Option::is_none")]
    session_running: Option<bool>,
    /// The last renewal of what keeps the range: the member session's, or the range
    /// Lease's own without one.
    renew_time: Option<String>,
    lease_duration_seconds: Option<i32>,
}

impl ShardOwner {
    fn render(&self) -> String {
        let held = match (&self.holder, &self.renew_time) {
            (Some(h), _) if self.session_running == Some(false) => format!(
                "named for replica {h}, whose member session {} ended: free to take",
                self.session.as_deref().unwrap_or_default()
            ),
            (Some(h), Some(t)) if self.session.is_some() => format!(
                "held by replica {h} (its member session renewed {t}, for {}s)",
                self.lease_duration_seconds.unwrap_or(0)
            ),
            (Some(h), Some(t)) => format!(
                "held by replica {h} (renewed {t}, for {}s)",
                self.lease_duration_seconds.unwrap_or(0)
            ),
            (Some(h), None) => format!("held by replica {h}"),
            _ => "held by no replica: nothing acts on it until one takes the range".to_owned(),
        };
        format!(
            "Sharded: the namespace is range {} of {}; Lease {} is {held}\n",
            self.range, self.ranges, self.lease
        )
    }
}

/// The owner of the object's namespace when the manager is sharded (`None` otherwise).
async fn shard_owner(read: &Read<'_>, planning: &Planning) -> anyhow::Result<Option<ShardOwner>> {
    if planning.shards == 0 {
        return Ok(None);
    }
    let ring = rkcm_runtime::shard::Ring::new(planning.shards)
        .map_err(|e| anyhow::anyhow!("--rkcm-shards: {e}"))?;
    let range = ring.range_of(read.namespace);
    let name = format!("{}-{range}", rkcm_runtime::shard::LEASE_PREFIX);
    let api = Api::<Lease>::namespaced(read.client.clone(), &planning.shard_namespace);
    let lease = api
        .get_opt(&name)
        .await
        .with_context(|| format!("reading Lease {}/{name}", planning.shard_namespace))?;
    let session = lease.as_ref().and_then(shard_session);
    let spec = lease.and_then(|l| l.spec).unwrap_or_default();
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let (mut renew_time, mut duration, mut running) = (
        spec.renew_time.map(|t| t.0.to_string()),
        spec.lease_duration_seconds,
        None,
    );
    if let (Some(h), Some(s)) = (&holder, &session) {
        // The range is held while the holder's member session runs: report that.
        let member =
            rkcm_runtime::shard::holder::member_lease_name(rkcm_runtime::shard::LEASE_PREFIX, h);
        let m = api
            .get_opt(&member)
            .await
            .with_context(|| format!("reading Lease {}/{member}", planning.shard_namespace))?;
        let same = m.as_ref().is_some_and(|m| {
            shard_session(m) == Some(s.clone())
                && m.spec.as_ref().and_then(|x| x.holder_identity.as_deref()) == Some(h.as_str())
        });
        running = Some(same);
        let mspec = m.and_then(|m| m.spec).unwrap_or_default();
        renew_time = mspec.renew_time.map(|t| t.0.to_string());
        duration = mspec.lease_duration_seconds;
    }
    Ok(Some(ShardOwner {
        range,
        ranges: ring.len(),
        lease: format!("{}/{name}", planning.shard_namespace),
        holder,
        session,
        session_running: running,
        renew_time,
        lease_duration_seconds: duration,
    }))
}

/// The member session a shard Lease names.
fn shard_session(l: &Lease) -> Option<String> {
    l.metadata
        .annotations
        .as_ref()?
        .get(rkcm_runtime::shard::holder::ANNOTATION_SESSION)
        .cloned()
}

/// The configuration the plan was made with.
#[derive(Debug, serde::Serialize)]
struct PlannedWith {
    source: Source,
    flags: Vec<String>,
}

impl Report {
    fn render(&self) -> String {
        let mut out = self.explanation.render();
        if let Some(shard) = &self.shard {
            out.push_str(&shard.render());
        }
        let p = &self.planned_with;
        let from = match p.source {
            Source::Defaults => None,
            Source::Flags => Some("the flags given"),
            Source::Manager => Some("the running manager's configuration"),
        };
        if let Some(from) = from {
            out.push_str(&format!("Planned with {from}: {}\n", p.flags.join(" ")));
        }
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

/// The client configuration as kubectl finds it: `--kubeconfig`, else the files of
/// `KUBECONFIG` (merged), else `~/.kube/config`, else the in-cluster configuration; the
/// context `--context` or the current one. (The manager reads only its `--kubeconfig`; this
/// command is for people.)
async fn kubectl_config(args: &Args) -> anyhow::Result<kube::Config> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let file = match &args.kubeconfig {
        Some(path) => Some(
            Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?,
        ),
        None => match Kubeconfig::read() {
            Ok(k) => Some(k),
            Err(err) if std::env::var_os("KUBECONFIG").is_some() => {
                return Err(err).context("reading the kubeconfig files of KUBECONFIG");
            }
            Err(_) => None,
        },
    };
    match file {
        Some(k) => kube::Config::from_custom_kubeconfig(k, &options)
            .await
            .context("loading the kubeconfig"),
        None => kube::Config::incluster().context(
            "no kubeconfig: neither --kubeconfig, KUBECONFIG nor ~/.kube/config, and not in a cluster",
        ),
    }
}

async fn explain_with_last(args: &Args) -> anyhow::Result<Report> {
    let config = kubectl_config(args).await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let opts = ClientOptions::default();
    let client = make_client(&config, &opts, "rkcm-explain").context("building the client")?;
    let read = Read {
        client,
        namespace: &namespace,
        key: format!("{namespace}/{}", args.name),
    };
    let manager = match &args.manager {
        Some(url) => Some(
            manager_client(url, args.manager_insecure, config.clone())
                .with_context(|| format!("the manager at {url}"))?,
        ),
        None => None,
    };
    // The manager follows the server's minor; so does the plan. A server whose version
    // cannot be read plans with the newest minor's gates.
    let minor = rkcm_runtime::api::server_version::read(&read.client)
        .await
        .ok()
        .and_then(|v| {
            rkcm_runtime::api::server_version::fit(
                &v,
                crate::cli::OLDEST_MINOR,
                crate::cli::NEWEST_MINOR,
            )
            .minor()
        });
    let planning = planning_of(args, manager.as_ref(), minor).await?;
    let now = jiff::Timestamp::now();
    let mut explanation = explain(args, &read, &planning, now).await?;
    // PodGC and the TTL controller write no events; a pod's or a Job's events are the
    // kubelet's and the Job controller's, not refusals of their writes.
    let events = match args.kind {
        Kind::Pod | Kind::TtlAfterFinished => Vec::new(),
        _ => read.events_of(&explanation.object).await?,
    };
    let mut refused = rkcm_runtime::explain::refused::from_events(&events, now);
    let last_decision = match &manager {
        None => None,
        Some(client) => Some(
            last_decision(client, &explanation)
                .await
                .context("reading the last decision from the manager")?,
        ),
    };
    if let Some(Some(d)) = &last_decision {
        let known: Vec<_> = refused.iter().map(|r| r.refusal).collect();
        refused.extend(
            rkcm_runtime::explain::refused::from_decision(d)
                .into_iter()
                .filter(|r| !known.contains(&r.refusal)),
        );
    }
    rkcm_runtime::explain::refused::apply(&mut explanation, refused);
    let shard = shard_owner(&read, &planning).await?;
    Ok(Report {
        explanation,
        last_decision,
        shard,
        planned_with: PlannedWith {
            source: planning.source,
            flags: planning.flags,
        },
    })
}

/// The planning configuration: the manager's (`--manager`) with the command line's flags
/// after it, or the command line's alone.
async fn planning_of(
    args: &Args,
    manager: Option<&Client>,
    minor: Option<u32>,
) -> anyhow::Result<Planning> {
    let Some(client) = manager else {
        let source = if args.planning_flags.is_empty() {
            Source::Defaults
        } else {
            Source::Flags
        };
        return Planning::from_flags_at(&args.planning_flags, source, minor)
            .map_err(anyhow::Error::msg);
    };
    let body = manager_get(client, crate::serve::effective::PATH)
        .await?
        .context("the manager does not serve its configuration (an rkcm manager does)")?;
    let effective: crate::serve::effective::Effective =
        serde_json::from_str(&body).context("parsing the manager's configuration")?;
    let mut flags = effective.flags;
    flags.extend(args.planning_flags.iter().cloned());
    let planning =
        Planning::from_flags_at(&flags, Source::Manager, minor).map_err(anyhow::Error::msg);
    match effective.local_time_zone {
        Some(zone) => planning.and_then(|p| p.in_time_zone(&zone).map_err(anyhow::Error::msg)),
        None => planning,
    }
    .context("planning with the manager's configuration")
}

/// A client of the manager's secure port with the kubeconfig's credentials.
fn manager_client(url: &str, insecure: bool, mut config: kube::Config) -> anyhow::Result<Client> {
    config.cluster_url = url.parse().context("parsing the manager's URL")?;
    if insecure {
        config.accept_invalid_certs = true;
        config.root_cert = None;
    }
    config.tls_server_name = None;
    Client::try_from(config).context("building the manager's client")
}

/// `GET path` of the manager; `None` when it answers 404.
async fn manager_get(client: &Client, path: &str) -> anyhow::Result<Option<String>> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .context("building the request")?;
    match client.request_text(request).await {
        Ok(body) => Ok(Some(body)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(err) => Err(err).with_context(|| format!("asking the manager for {path}")),
    }
}

/// The manager's `/debug/rkcm/decisions/CONTROLLER/NS/NAME`; `None` when it has no record.
async fn last_decision(client: &Client, e: &Explanation) -> anyhow::Result<Option<Decided>> {
    let path = format!(
        "/debug/rkcm/decisions/{}/{}/{}",
        e.controller, e.object.namespace, e.object.name
    );
    match manager_get(client, &path).await? {
        Some(body) => Ok(Some(
            serde_json::from_str(&body).context("parsing the manager's answer")?,
        )),
        None => Ok(None),
    }
}

/// What the object's controller would do with it now, from its own plan.
async fn explain(
    args: &Args,
    read: &Read<'_>,
    planning: &Planning,
    now: jiff::Timestamp,
) -> anyhow::Result<Explanation> {
    match args.kind {
        Kind::Deployment => {
            let d: Deployment = read.get(&args.name).await?;
            let selector = Selector::from_label_selector(&d.spec.selector)
                .with_context(|| format!("the selector of Deployment {}", read.key))?;
            let owned = claimed(&d, read.list::<ReplicaSet>().await?, |rs| {
                selector.matches(rs.metadata.labels.as_ref())
            })?;
            Ok(rkcm_deployment::explain::explain_with(
                &d,
                &owned,
                planning.deployment.rollback_on_progress_deadline,
                now,
            ))
        }
        Kind::ReplicaSet => {
            let rs: ReplicaSet = read.get(&args.name).await?;
            replicas(read, &rs, "ReplicaSet", &planning.replicas, now).await
        }
        Kind::ReplicationController => {
            let rc: ReplicationController = read.get(&args.name).await?;
            replicas(read, &rc, "ReplicationController", &planning.replicas, now).await
        }
        Kind::StatefulSet => statefulset(read, &args.name, &planning.statefulset, now).await,
        Kind::DaemonSet => daemonset(read, &args.name, &planning.daemonset, now).await,
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
            Ok(rkcm_cronjob::explain::explain(
                &cj,
                &jobs,
                &planning.cronjob_time_zone,
                now,
            ))
        }
        Kind::TtlAfterFinished => {
            let job: Job = read.get(&args.name).await?;
            Ok(rkcm_ttlafterfinished::explain::explain(&job, now))
        }
        Kind::Pod => {
            let pod = Arc::new(CachedPod::from(read.get::<Pod>(&args.name).await?));
            let pods = read.list_all::<Pod>().await?;
            let pods: Vec<Arc<CachedPod>> = cached(pods.into_iter().map(Arc::new).collect());
            let nodes = nodes(read).await?;
            Ok(rkcm_podgc::explain::explain(
                &pod,
                &pods,
                &nodes,
                planning.terminated_pod_gc_threshold,
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

    /// The events about `object` (core/v1, as `kubectl describe` shows them).
    async fn events_of(&self, object: &ObjectRef) -> anyhow::Result<Vec<Event>> {
        let fields = format!(
            "involvedObject.kind={},involvedObject.name={}",
            object.kind, object.name
        );
        Ok(
            Api::<Event>::namespaced(self.client.clone(), self.namespace)
                .list(&ListParams::default().fields(&fields))
                .await
                .with_context(|| format!("listing the events of {} {}", object.kind, self.key))?
                .items,
        )
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
    cfg: &rkcm_replicaset::plan::PlanConfig,
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
    Ok(rkcm_replicaset::explain::explain_with(
        owner,
        kind,
        &cached(pods),
        cfg,
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
    cfg: &rkcm_daemonset::Config,
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
    Ok(rkcm_daemonset::explain::explain(&seen, cfg, now))
}

async fn statefulset(
    read: &Read<'_>,
    name: &str,
    cfg: &rkcm_statefulset::Config,
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
    let nodes = nodes(read).await?;
    Ok(rkcm_statefulset::explain::explain(
        &set,
        &revisions,
        &cached(pods),
        &claims,
        &nodes,
        cfg,
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
