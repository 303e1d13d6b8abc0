//! The Job controller on real exit codes: a container's exit code picks the
//! `podFailurePolicy` rule (FailJob on 42, Ignore on 3), `restartPolicy: OnFailure` restarts
//! done by the kubelet count toward `backoffLimit`, and each pod of an Indexed Job reads
//! its own index (`JOB_COMPLETION_INDEX`), shown by `kubectl logs`.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::harness::{Env, History, ann};
use rkcm_testkit::wait_for;
use serde_json::json;

use super::{BUSYBOX, START, Tier, of_job, real_template, shell};
use crate::rollout::Kubectl;

fn job(name: &str, script: &str, spec: serde_json::Value, restart: &str) -> serde_json::Value {
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": real_template(
                json!({"job": name}),
                json!([shell("main", BUSYBOX, script)]),
                json!({"restartPolicy": restart}),
            ),
        },
    });
    rkcm_testkit::harness::merge_json(&mut j["spec"], &spec);
    j
}

fn condition(j: &Job, type_: &str) -> Option<(String, String)> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

async fn wait_condition(
    env: &Env,
    name: &str,
    type_: &str,
    within: Duration,
) -> anyhow::Result<(String, String)> {
    wait_for(&format!("Job {name} {type_}"), within, || async {
        let j: Job = env.get(name).await?;
        Ok(condition(&j, type_))
    })
    .await
}

fn exit_code(p: &Pod) -> Option<i32> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

fn restarts(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .map_or(0, |c| c.restart_count)
}

async fn scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    let pods = History::start(env.pods()).await?;
    let policy = json!({"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
    ]});
    env.create::<Job>(job(
        "fail42",
        "exit 42",
        json!({"backoffLimit": 6, "podFailurePolicy": policy}),
        "Never",
    ))
    .await?;
    env.create::<Job>(job(
        "ignore3",
        "exit 3",
        json!({"backoffLimit": 0, "podFailurePolicy": policy}),
        "Never",
    ))
    .await?;
    env.create::<Job>(job(
        "restarts",
        "exit 1",
        json!({"backoffLimit": 2}),
        "OnFailure",
    ))
    .await?;
    env.create::<Job>(job(
        "indexed",
        "echo index=$JOB_COMPLETION_INDEX",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        "Never",
    ))
    .await?;

    // Exit code 42 matches the FailJob rule: the Job fails at once, naming the rule.
    let (reason, message) = wait_condition(env, "fail42", "Failed", START).await?;
    let seen: Vec<Pod> = pods
        .seen()?
        .into_iter()
        .map(|s| s.object().clone())
        .collect();
    let failed42 = of_job(&seen, "fail42")
        .into_iter()
        .find(|p| exit_code(p) == Some(42))
        .context("no pod of fail42 reported exit code 42")?;
    let want = format!(
        "Container main for pod {}/{} failed with exit code 42 matching FailJob rule at index 0",
        env.name(),
        failed42.metadata.name.as_deref().unwrap_or_default()
    );
    ensure!(
        reason == "PodFailurePolicy" && message == want,
        "fail42: Failed {reason:?}: {message:?}, want PodFailurePolicy: {want:?}"
    );
    let j: Job = env.get("fail42").await?;
    ensure!(
        j.status.as_ref().and_then(|s| s.failed) == Some(1),
        "fail42: status.failed {:?}, want 1",
        j.status.as_ref().and_then(|s| s.failed)
    );

    // Exit code 3 is ignored: with backoffLimit 0 the Job still lives and replaces the pod
    // (after the 10 s recreation backoff, which ignored failures feed too).
    let replaced = wait_for(
        "ignore3 replaces its pod that exited 3",
        Duration::from_secs(60),
        || async {
            let seen: Vec<Pod> = pods
                .seen()?
                .into_iter()
                .map(|s| s.object().clone())
                .collect();
            let ps = of_job(&seen, "ignore3");
            let exited3 = ps.iter().any(|p| exit_code(p) == Some(3));
            let mut uids: Vec<&str> = ps
                .iter()
                .filter_map(|p| p.metadata.uid.as_deref())
                .collect();
            uids.sort_unstable();
            uids.dedup();
            Ok((exited3 && uids.len() >= 2).then_some(uids.len()))
        },
    )
    .await?;
    let j: Job = env.get("ignore3").await?;
    ensure!(
        condition(&j, "Failed").is_none()
            && j.status.as_ref().and_then(|s| s.failed).unwrap_or(0) == 0,
        "ignore3 after {replaced} pods: the ignored exit code counted: {:?}",
        j.status
    );

    // OnFailure: the kubelet restarts the container; two restarts reach backoffLimit 2.
    let (reason, message) =
        wait_condition(env, "restarts", "Failed", Duration::from_secs(150)).await?;
    ensure!(
        reason == "BackoffLimitExceeded"
            && message == "Job has reached the specified backoff limit",
        "restarts: Failed {reason:?}: {message:?}"
    );
    let seen: Vec<Pod> = pods
        .seen()?
        .into_iter()
        .map(|s| s.object().clone())
        .collect();
    let most = of_job(&seen, "restarts")
        .iter()
        .map(|p| restarts(p))
        .max()
        .unwrap_or(0);
    ensure!(
        most >= 2,
        "restarts failed with at most {most} container restarts seen, want 2"
    );
    let j: Job = env.get("restarts").await?;
    ensure!(
        j.status.as_ref().and_then(|s| s.failed) == Some(1),
        "restarts: status.failed {:?}, want 1 (the running pod removed and counted)",
        j.status.as_ref().and_then(|s| s.failed)
    );

    // Indexed: every pod prints the index the Job controller gave it.
    wait_condition(env, "indexed", "Complete", START).await?;
    let j: Job = env.get("indexed").await?;
    ensure!(
        j.status
            .as_ref()
            .and_then(|s| s.completed_indexes.as_deref())
            == Some("0-2"),
        "indexed: completedIndexes {:?}",
        j.status.as_ref().and_then(|s| s.completed_indexes.clone())
    );
    let k = Kubectl::new(&t.env.cluster, env.name())?;
    let all: Vec<Pod> = env.list().await?;
    let done = of_job(&all, "indexed");
    ensure!(done.len() == 3, "indexed: {} pods left, want 3", done.len());
    for p in done {
        let name = p.metadata.name.as_deref().unwrap_or_default();
        let index =
            ann(p, "batch.kubernetes.io/job-completion-index").context("pod without index")?;
        let out = k.ok(&["logs", name]).await?;
        ensure!(
            out.stdout.trim() == format!("index={index}"),
            "pod {name} with index {index} printed {:?}",
            out.stdout
        );
    }
    Ok(())
}

real_node_test!(
    real_nodes_job_follows_exit_codes_restarts_and_indexes,
    "rn-job",
    "job-controller",
    scenario
);
