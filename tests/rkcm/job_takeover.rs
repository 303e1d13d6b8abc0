//! Job takeover both ways mid-run: an Indexed and a NonIndexed Job are run by upstream
//! kube-controller-manager, then by the rkcm binary, then by upstream again (each with only
//! `job-controller`, behind its own namespace-scoping proxy, stopped with SIGKILL), while the
//! test plays the kubelet for their pods (each runs a second, then succeeds). At the end the
//! counts are exact: every completion counted once (`succeeded`, `completedIndexes`), nothing
//! failed, one pod per completion (no index run twice, none lost), no pod keeps the tracking
//! finalizer, and no completion index ever had two live pods at once.
//!
//! The exactly-once count across managers rests on the `batch.kubernetes.io/job-tracking`
//! finalizer and `status.uncountedTerminatedPods` (upstream v1.37,
//! `pkg/controller/job/job_controller.go`): whichever manager runs records a finished pod in
//! the status before it removes the pod's finalizer, so the next one neither misses it nor
//! counts it again.

use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::harness::{
    Env, History, JobPodRunner, Manager, ManagerKind, NO_SCHEDULER, completion_index,
    controller_uid, index_overlaps, uid_of,
};
use rkcm_testkit::wait_for;
use serde_json::{Value, json};

/// What both managers run.
pub const CONTROLLERS: &str = "job-controller";
pub const TRACKING: &str = "batch.kubernetes.io/job-tracking";
/// How long each pod runs before it succeeds.
pub const RUN_FOR: Duration = Duration::from_secs(1);
/// How long one manager may take to reach a mark.
const STEP: Duration = Duration::from_secs(90);

/// A Job whose pods no scheduler binds (the test runs them), finishing `completions` with
/// `parallelism` pods at a time.
pub fn job_manifest(name: &str, indexed: bool, completions: i32, parallelism: i32) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": if indexed { "Indexed" } else { "NonIndexed" },
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": 6,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "schedulerName": NO_SCHEDULER,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]
                }
            }
        }
    })
}

/// `status.succeeded` of Job `name` (0 if unset).
pub async fn succeeded(env: &Env, name: &str) -> anyhow::Result<i32> {
    let j: Job = env.get(name).await?;
    Ok(j.status.and_then(|s| s.succeeded).unwrap_or(0))
}

/// Waits until every `(job, at_least)` has that many succeeded, while `manager` keeps running.
pub async fn wait_succeeded(
    env: &Env,
    manager: &mut Manager,
    marks: &[(&str, i32)],
    timeout: Duration,
) -> anyhow::Result<()> {
    let what = format!("succeeded at least {marks:?}");
    let res = wait_for(&what, timeout, || async {
        for (name, at_least) in marks {
            if succeeded(env, name).await? < *at_least {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .and_then(|()| manager.check_running());
    Manager::with_logs(res, &mut [manager])
}

/// `type=reason` of every condition, in order.
fn conditions(j: &Job) -> Vec<String> {
    j.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| format!("{}={}", c.type_, c.reason.clone().unwrap_or_default()))
        .collect()
}

/// Checks the end state of a completed Job: exact counts, upstream's conditions, none of its
/// pods keeps the tracking finalizer, and with `one_pod_each` one pod per completion (one
/// per index: no completion run twice). Returns its pods.
pub async fn check_completed(
    env: &Env,
    name: &str,
    indexed: bool,
    completions: i32,
    one_pod_each: bool,
) -> anyhow::Result<Vec<Pod>> {
    let j: Job = env.get(name).await?;
    let s = j.status.clone().unwrap_or_default();
    let uncounted = s.uncounted_terminated_pods.clone().unwrap_or_default();
    let want_indexes = format!("0-{}", completions - 1);
    let mut wrong = Vec::new();
    if s.succeeded != Some(completions) {
        wrong.push(format!("succeeded {:?}, want {completions}", s.succeeded));
    }
    if s.failed.unwrap_or(0) != 0 {
        wrong.push(format!("failed {:?}, want 0", s.failed));
    }
    if indexed && s.completed_indexes.as_deref() != Some(want_indexes.as_str()) {
        wrong.push(format!(
            "completedIndexes {:?}, want {want_indexes}",
            s.completed_indexes
        ));
    }
    if !uncounted.succeeded.unwrap_or_default().is_empty()
        || !uncounted.failed.unwrap_or_default().is_empty()
    {
        wrong.push("uncountedTerminatedPods not empty".to_owned());
    }
    let want_conditions = [
        "SuccessCriteriaMet=CompletionsReached",
        "Complete=CompletionsReached",
    ];
    if conditions(&j) != want_conditions {
        wrong.push(format!("conditions {:?}", conditions(&j)));
    }
    let uid = uid_of(&j);
    let pods: Vec<Pod> = env
        .list::<Pod>()
        .await?
        .into_iter()
        .filter(|p| controller_uid(p) == Some(uid.as_str()))
        .collect();
    let tracked = pods
        .iter()
        .filter(|p| {
            p.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == TRACKING)
        })
        .count();
    if tracked > 0 {
        wrong.push(format!("{tracked} pods keep the tracking finalizer"));
    }
    if one_pod_each && pods.len() != usize::try_from(completions).unwrap_or(0) {
        wrong.push(format!(
            "{} pods for {completions} completions (a completion run twice or lost)",
            pods.len()
        ));
    }
    if indexed {
        let mut by_index: std::collections::BTreeMap<i32, Vec<String>> = Default::default();
        for p in &pods {
            let created = p
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default();
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            by_index
                .entry(completion_index(p).unwrap_or(-1))
                .or_default()
                .push(format!("{} created {created} {phase}", uid_of(p)));
        }
        if one_pod_each && by_index.len() != pods.len() {
            let twice: Vec<_> = by_index
                .iter()
                .filter(|(_, v)| v.len() > 1)
                .take(3)
                .collect();
            wrong.push(format!(
                "{} pods for {} distinct indexes, e.g. {twice:?}",
                pods.len(),
                by_index.len()
            ));
        }
    }
    if !wrong.is_empty() {
        bail!("Job {name}: {}", wrong.join("; "));
    }
    Ok(pods)
}

async fn run(env: &Env) -> anyhow::Result<()> {
    let history = History::<Pod>::start(env.pods()).await?;
    let runner = JobPodRunner::start(env, RUN_FOR, |_| Some(0)).await?;
    env.create::<Job>(job_manifest("idx", true, 40, 8)).await?;
    env.create::<Job>(job_manifest("seq", false, 30, 6)).await?;

    let mut up =
        Manager::start(ManagerKind::Upstream, &env.cluster, env.name(), CONTROLLERS).await?;
    wait_succeeded(env, &mut up, &[("idx", 10), ("seq", 8)], STEP)
        .await
        .context("upstream running the Jobs")?;
    up.stop_scoped().await?;

    let mut rkcm = Manager::start(ManagerKind::Rkcm, &env.cluster, env.name(), CONTROLLERS).await?;
    wait_succeeded(env, &mut rkcm, &[("idx", 24), ("seq", 18)], STEP)
        .await
        .context("rkcm taking over mid-run")?;
    let rkcm_writes = rkcm.writes();
    rkcm.stop_scoped().await?;
    if !rkcm_writes
        .iter()
        .any(|w| w.method.as_str() == "POST" && w.path.ends_with("/pods"))
    {
        bail!("rkcm created no pod while it ran the Jobs");
    }

    let mut up =
        Manager::start(ManagerKind::Upstream, &env.cluster, env.name(), CONTROLLERS).await?;
    let done = wait_for("both Jobs complete", STEP, || async {
        let idx: Job = env.get("idx").await?;
        let seq: Job = env.get("seq").await?;
        let complete = |j: &Job| conditions(j).iter().any(|c| c.starts_with("Complete="));
        Ok((complete(&idx) && complete(&seq)).then_some(()))
    })
    .await
    .and_then(|()| up.check_running());
    Manager::with_logs(done, &mut [&mut up]).context("upstream finishing after the handback")?;

    check_completed(env, "idx", true, 40, true).await?;
    check_completed(env, "seq", false, 30, true).await?;
    let overlaps = index_overlaps(&history.seen()?);
    println!(
        "job takeover: {} pods finished by the test, {} index overlaps",
        runner.finished(),
        overlaps.len()
    );
    if !overlaps.is_empty() {
        bail!("completion indexes with two live pods at once: {overlaps:?}");
    }
    up.stop_scoped().await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn job_changes_hands_mid_run_with_exact_counts() -> anyhow::Result<()> {
    let env = Env::new("job-takeover").await?;
    let result = run(&env).await;
    env.finish(result).await
}
