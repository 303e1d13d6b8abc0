//! What both Job scenarios share: the run's namespace and its Job watch, the probe Job that shows
//! the manager works, Job manifests on the kwok nodes, and the manager's requests per step.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::seen::JobWatch;
use crate::audit::{self, Counts};
use crate::harness::{Env, Probe};
use crate::k8s;
use crate::manager::Manager;
use crate::results::Metric;
use crate::scenarios::replicaset::kwok_pod_capacity;

/// The Job controller's pod finalizer.
pub const TRACKING: &str = "batch.kubernetes.io/job-tracking";

/// The Job each run starts with, to know the manager works.
pub const PROBE: &str = "probe";

/// A Job whose pods run on the kwok nodes (completed by kwok as soon as they run).
pub fn job_manifest(name: &str, spec: Value) -> Value {
    let mut s = json!({
        "backoffLimit": 6,
        "template": {
            "metadata": {"labels": {"app": "rkcm-bench-job"}},
            "spec": k8s::pod_spec(k8s::PAUSE, json!({"restartPolicy": "Never", "nodeSelector": {"type": "kwok"}}))
        }
    });
    if let (Some(base), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": s})
}

pub(super) async fn create_job(client: &Client, ns: &str, body: Value) -> anyhow::Result<Job> {
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    let job: Job = serde_json::from_value(body)?;
    let name = job.name_any();
    let pp = PostParams::default();
    k8s::retry(|| api.create(&pp, &job))
        .await
        .with_context(|| format!("creating Job {ns}/{name}"))
}

/// The manager's requests in the audit log between two offsets (only the manager under test
/// runs, so both users are read and added up).
pub(super) fn manager_requests(
    log: &std::path::Path,
    from: u64,
    to: u64,
) -> anyhow::Result<Counts> {
    let mut total = Counts::default();
    for m in [Manager::Upstream, Manager::Rkcm] {
        let (c, _) = audit::count(log, m.user(), from, Some(to))?;
        total.total += c.total;
        total.errors += c.errors;
        total.throttled += c.throttled;
        for (k, v) in c.by_verb {
            *total.by_verb.entry(k).or_default() += v;
        }
        for (k, v) in c.by_request {
            *total.by_request.entry(k).or_default() += v;
        }
    }
    Ok(total)
}

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The measures of a timed step that ran `pods` pods: time, pods/s, requests and writes per
/// pod, and the main kinds of write per pod.
pub fn step_metrics(seconds: f64, pods: usize, c: &Counts) -> Vec<Metric> {
    let n = pods.max(1) as f64;
    let writes: u64 = WRITE_VERBS
        .iter()
        .map(|v| c.by_verb.get(*v).copied().unwrap_or(0))
        .sum();
    let per = |key: &str| c.by_request.get(key).copied().unwrap_or(0) as f64 / n;
    let m = |name: &str, value: f64, unit: &str| Metric {
        name: name.to_string(),
        value: (value * 100.0).round() / 100.0,
        unit: unit.to_string(),
    };
    vec![
        m("step time", seconds, "s"),
        m("pods per second", pods as f64 / seconds.max(0.001), ""),
        m("API requests per pod", c.total as f64 / n, ""),
        m("writes per pod", writes as f64 / n, ""),
        m("pod creates per pod", per("create pods"), ""),
        m("pod patches per pod", per("patch pods"), ""),
        m("Job status writes per pod", per("update jobs/status"), ""),
        m(
            "events written per pod",
            per("create events") + per("patch events"),
            "",
        ),
        m("request errors", c.errors as f64, ""),
    ]
}

/// Per-run data.
pub struct State {
    pub(super) ns: String,
    pub(super) jobs: JobWatch,
    /// Audit offsets of the timed step: its first request, convergence.
    pub(super) step: Option<(u64, u64, f64)>,
    pub(super) metrics: Vec<Metric>,
}

/// Deletes every Job and pod of `ns` (finalizers of an unfinished run's pods first; no
/// garbage collector runs on the bench plane).
pub(super) async fn remove(env: &Env, ns: &str) -> anyhow::Result<()> {
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), ns);
    // Background: the default for batch/v1 Jobs is to orphan, which leaves a finalizer only
    // a garbage collector would remove, and none runs on the bench plane.
    let (dp, all) = (DeleteParams::background(), ListParams::default());
    match k8s::retry(|| jobs.delete_collection(&dp, &all)).await {
        Ok(_) => {}
        Err(e) if k8s::is_status(&e, 404) => {}
        Err(e) => return Err(e).with_context(|| format!("deleting the Jobs of {ns}")),
    }
    // Jobs the TTL controller deleted in the foreground keep `foregroundDeletion`.
    let held_jobs: Vec<String> = k8s::retry(|| jobs.list_metadata(&all))
        .await?
        .items
        .into_iter()
        .filter(|j| !j.finalizers().is_empty())
        .map(|j| j.name_any())
        .collect();
    let unblock = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    k8s::bounded(
        "Job finalizers removed",
        held_jobs.len(),
        env.concurrency,
        1000,
        held_jobs.iter().map(|name| {
            let (jobs, unblock) = (jobs.clone(), &unblock);
            async move {
                let pp = PatchParams::default();
                match k8s::retry(|| jobs.patch(name, &pp, unblock)).await {
                    Ok(_) => Ok(()),
                    Err(e) if k8s::is_status(&e, 404) => Ok(()),
                    Err(e) => Err(anyhow::Error::new(e).context(format!("unblocking Job {name}"))),
                }
            }
        }),
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let held: Vec<String> = k8s::list_pod_meta(&env.client, Some(ns))
        .await?
        .into_iter()
        .filter(|p| !p.finalizers().is_empty())
        .map(|p| p.name_any())
        .collect();
    if !held.is_empty() {
        say!("removing finalizers of {} pods left by the run", held.len());
    }
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    k8s::bounded(
        "finalizers removed",
        held.len(),
        env.concurrency,
        1000,
        held.iter().map(|name| {
            let (pods, patch) = (pods.clone(), &patch);
            async move {
                let pp = PatchParams::default();
                match k8s::retry(|| pods.patch(name, &pp, patch)).await {
                    Ok(_) => Ok(()),
                    Err(e) if k8s::is_status(&e, 404) => Ok(()),
                    Err(e) => Err(anyhow::Error::new(e).context(format!("unblocking pod {name}"))),
                }
            }
        }),
    )
    .await?;
    k8s::delete_all_pods(&env.client, ns, Duration::from_secs(600)).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let one = ListParams::default().limit(1);
        let left = k8s::retry(|| jobs.list_metadata(&one)).await?;
        if left.items.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "Jobs of {ns} still present 120 s after their deletion"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates the namespace (emptied), checks the kwok nodes hold `running` pods at once, and
/// starts the Job watch.
pub(super) async fn prepare(env: &Env, ns: &str, running: usize) -> anyhow::Result<State> {
    let client = &env.client;
    k8s::ensure_namespace(client, ns).await?;
    remove(env, ns).await?;
    let capacity = kwok_pod_capacity(client).await?;
    anyhow::ensure!(
        capacity >= running,
        "the kwok nodes hold {capacity} pods, fewer than {running} running at once (raise \
         BENCH_NODES: 110 pods per node)"
    );
    let mut jobs = JobWatch::start(client, ns);
    tokio::time::timeout(Duration::from_secs(120), jobs.rx.wait_for(|s| s.synced))
        .await
        .context("the Job watch did not sync within 120 s")?
        .context("job watch ended")?;
    anyhow::ensure!(jobs.current().live.is_empty(), "{ns} still has Jobs");
    Ok(State {
        ns: ns.to_string(),
        jobs,
        step: None,
        metrics: Vec::new(),
    })
}

/// The probe: one pod, run to completion (and deleted, with TTL) before the timed step.
pub(super) async fn run_probe(
    env: &Env,
    state: &mut State,
    probe: &Probe,
    ttl: bool,
) -> anyhow::Result<()> {
    let mut spec = json!({"completions": 1, "parallelism": 1});
    if ttl {
        spec["ttlSecondsAfterFinished"] = json!(0);
    }
    create_job(&env.client, &state.ns, job_manifest(PROBE, spec)).await?;
    state
        .jobs
        .wait(
            probe,
            |s| {
                if ttl {
                    s.deleted_or_deleting(PROBE).is_some()
                } else {
                    s.live.get(PROBE).is_some_and(|j| j.has("Complete"))
                }
            },
            |s| format!("waiting for the probe Job: {:?}", s.live.get(PROBE)),
        )
        .await?;
    probe.mark("synced");
    Ok(())
}

/// Pods of `ns` by controller UID, and the names of those still holding the finalizer.
pub(super) async fn pods_by_owner(
    client: &Client,
    ns: &str,
) -> anyhow::Result<(BTreeMap<String, Vec<BTreeMap<String, String>>>, Vec<String>)> {
    let mut by_owner: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    let mut tracked = Vec::new();
    for p in k8s::list_pod_meta(client, Some(ns)).await? {
        if p.finalizers().iter().any(|f| f == TRACKING) {
            tracked.push(p.name_any());
        }
        let owner = p
            .owner_references()
            .iter()
            .find(|r| r.controller == Some(true))
            .map(|r| r.uid.clone())
            .unwrap_or_default();
        by_owner.entry(owner).or_default().push(p.labels().clone());
    }
    Ok((by_owner, tracked))
}
