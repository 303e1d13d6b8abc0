//! Terminating pods: scenarios 20, 21 and 22. Pods are bound to a node nothing simulates, so
//! a graceful delete leaves them terminating until the test finishes them.

use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use rkcm_testkit::{NodeBuilder, TestNode, unique_name};
use serde_json::{Value, json};

use crate::harness::*;

fn on_node(node: &str, extra: Value) -> Value {
    let mut spec = json!({
        "template": {"spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 300,
            "tolerations": [{"key": "rkcm.test/no-schedule", "operator": "Exists", "effect": "NoSchedule"}]
        }}
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        spec[k] = v;
    }
    spec
}

async fn node(env: &Env) -> Result<TestNode> {
    env.cluster
        .create_node(NodeBuilder::new(&unique_name("job-node")).ready(true))
        .await
}

async fn run(env: &Env, pod: &Pod) -> Result<()> {
    env.cluster
        .set_pod_phase(
            env.name(),
            pod.metadata.name.as_deref().unwrap_or_default(),
            "Running",
            true,
        )
        .await?;
    Ok(())
}

async fn delete(env: &Env, pod: &Pod) -> Result<()> {
    env.pods()
        .delete(
            pod.metadata.name.as_deref().unwrap_or_default(),
            &DeleteParams::default(),
        )
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn terminating_pod_counts_as_failed_by_default() -> Result<()> {
    let env = Env::new("job-term-default").await?;
    let n = node(&env).await?;
    let ctrl = env.start();
    let result = default_policy(&env, n.name()).await;
    ctrl.stop().await?;
    let r = env.finish(result).await;
    n.delete().await?;
    r
}

async fn default_policy(env: &Env, node: &str) -> Result<()> {
    let job = env
        .create_job(job("def", on_node(node, json!({})), true))
        .await?;
    let uid = uid_of(&job);
    let first = env.wait_active_within(&uid, 1, WITHIN).await?.remove(0);
    run(env, &first).await?;
    delete(env, &first).await?;
    let deleted = Instant::now();
    // Scenario 21: counted as failed at once (finalizer removed although still terminating).
    wait_job(env, "def", "failed=1 terminating=1", WITHIN, |j| {
        status(j).failed == Some(1) && status(j).terminating == Some(1)
    })
    .await?;
    let p = env.pods().get(&name_of(&first)).await?;
    ensure(
        !has_tracking(&p),
        "finalizer removed from the terminating pod",
    )?;
    ensure(p.metadata.deletion_timestamp.is_some(), "still terminating")?;
    // The replacement comes after the 10 s backoff, while the old pod still terminates.
    let second = env.wait_active_within(&uid, 1, WITHIN).await?.remove(0);
    ensure(
        deleted.elapsed() >= Duration::from_secs(8),
        format!("replacement after {:?}", deleted.elapsed()),
    )?;
    ensure(name_of(&second) != name_of(&first), "a new pod")?;
    wait_job(env, "def", "active=1 terminating=1", WITHIN, |j| {
        status(j).active == Some(1) && status(j).terminating == Some(1)
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn replacement_policy_failed_waits_for_the_terminal_phase() -> Result<()> {
    let env = Env::new("job-term-failed").await?;
    let n = node(&env).await?;
    let ctrl = env.start();
    let result = failed_policy(&env, n.name()).await;
    ctrl.stop().await?;
    let r = env.finish(result).await;
    n.delete().await?;
    r
}

async fn failed_policy(env: &Env, node: &str) -> Result<()> {
    let uid = env
        .start_job(
            "fp",
            on_node(node, json!({"podReplacementPolicy": "Failed"})),
            true,
        )
        .await?;
    let first = env.wait_active_within(&uid, 1, WITHIN).await?.remove(0);
    run(env, &first).await?;
    delete(env, &first).await?;
    // Scenario 20: terminating, not failed, no replacement while it terminates.
    wait_job(env, "fp", "terminating=1", WITHIN, |j| {
        status(j).terminating == Some(1)
    })
    .await?;
    rkcm_testkit::holds_for("no replacement while terminating", HOLDS, || async {
        let j = env.jobs().get("fp").await?;
        Ok(env.active(&uid).await?.is_empty() && status(&j).failed.unwrap_or(0) == 0)
    })
    .await?;
    env.terminate(&name_of(&first), 1).await?;
    let failed_at = Instant::now();
    wait_job(env, "fp", "failed=1", WITHIN, |j| {
        status(j).failed == Some(1)
    })
    .await?;
    env.wait_active_within(&uid, 1, WITHIN).await?;
    ensure(
        failed_at.elapsed() >= Duration::from_secs(8),
        format!("replacement after {:?}", failed_at.elapsed()),
    )?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn failed_condition_waits_for_terminating_pods() -> Result<()> {
    let env = Env::new("job-term-finish").await?;
    let n = node(&env).await?;
    let ctrl = env.start();
    let result = finish_waits(&env, n.name()).await;
    ctrl.stop().await?;
    let r = env.finish(result).await;
    n.delete().await?;
    r
}

async fn finish_waits(env: &Env, node: &str) -> Result<()> {
    let uid = env
        .start_job(
            "fw",
            on_node(
                node,
                json!({"completions": 2, "parallelism": 2, "backoffLimit": 0}),
            ),
            true,
        )
        .await?;
    let pods = env.wait_active_within(&uid, 2, WITHIN).await?;
    run(env, &pods[1]).await?;
    env.terminate(&name_of(&pods[0]), 1).await?;
    // Scenario 22: FailureTarget now; the running pod is deleted and terminates; no Failed.
    wait_job(env, "fw", "FailureTarget, terminating=1", WITHIN, |j| {
        has_condition(j, "FailureTarget") && status(j).terminating == Some(1)
    })
    .await?;
    rkcm_testkit::holds_for("no Failed while a pod terminates", HOLDS, || async {
        Ok(!has_condition(&env.jobs().get("fw").await?, "Failed"))
    })
    .await?;
    env.terminate(&name_of(&pods[1]), 137).await?;
    let j = wait_condition(env, "fw", "Failed").await?;
    let s = status(&j);
    ensure(
        s.terminating.unwrap_or(0) == 0 && s.failed == Some(2),
        format!("{s:?}"),
    )?;
    Ok(())
}
