//! Job: a Job whose pod succeeded is settled; a suspended Job is stalled (`Suspended`, with
//! the resume remedy); resumed, its pod fails (kwok fails it with exit code 1) and the Job
//! waits out the pod-failure backoff (`PodFailureBackoff`, naming the failed pod and the
//! seconds left); a Job whose pod exits 42 is failed by its `podFailurePolicy` rule
//! (`PodFailurePolicy`, stalled, naming the rule and the pod). Under rkcm and under upstream
//! kube-controller-manager.

use anyhow::bail;
use k8s_openapi::api::batch::v1::Job;
use rkcm_testkit::harness::{Env, kwok_template};
use serde_json::{Value, json};

use super::{
    REACT, has_remedy, message, objects, target, wait_explained, wait_settled, wait_until,
};

const CONTROLLERS: &str = "job-controller";
/// kwok fails a Running pod with this label set to "true"...
const KWOK_FAIL: &str = "pod-container-running-failed.stage.kwok.x-k8s.io";
/// ... with the exit code in this annotation.
const KWOK_EXIT_CODE: &str = "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code";

/// A Job of one pod on the kwok nodes that kwok fails with `exit_code`.
fn failing_job(name: &str, exit_code: &str, extra_spec: Value) -> Value {
    let mut template = kwok_template(name, "registry.example/task:v1");
    template["metadata"]["labels"][KWOK_FAIL] = json!("true");
    template["metadata"]["annotations"] = json!({KWOK_EXIT_CODE: exit_code});
    template["spec"]["restartPolicy"] = json!("Never");
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"backoffLimit": 6, "template": template},
    });
    if let (Some(spec), Some(extra)) = (job["spec"].as_object_mut(), extra_spec.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    job
}

async fn scenario(env: &Env) -> anyhow::Result<()> {
    env.create::<Job>(failing_job("retry", "1", json!({"suspend": true})))
        .await?;
    env.create::<Job>(failing_job(
        "policy",
        "42",
        json!({"podFailurePolicy": {"rules": [
            {"action": "FailJob",
             "onExitCodes": {"containerName": "app", "operator": "In", "values": [42]}}
        ]}}),
    ))
    .await?;
    let mut template = kwok_template("ok", "registry.example/task:v1");
    template["spec"]["restartPolicy"] = json!("Never");
    env.create::<Job>(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "ok"},
        "spec": {"template": template},
    }))
    .await?;
    let retry = target(env, "job", "retry");
    let policy = target(env, "job", "policy");
    let ns = env.name();

    let e = wait_explained(&env.cluster, &retry, "stalled", &["Suspended"]).await?;
    let resume = format!("resume: kubectl patch job retry -n {ns}");
    if !message(&e, "Suspended").starts_with("spec.suspend is true: no pod runs")
        || !has_remedy(&e, &resume)
    {
        bail!("Suspended: {e:#}");
    }

    // The rule fails the Job at the first pod's exit 42.
    let e = wait_explained(&env.cluster, &policy, "stalled", &["PodFailurePolicy"]).await?;
    let failed = objects(&e, "PodFailurePolicy");
    let m = message(&e, "PodFailurePolicy");
    if !(failed.len() == 1
        && failed.iter().all(|p| p.starts_with("Pod/policy-"))
        && m.starts_with("rule 0 of spec.podFailurePolicy failed the Job: ")
        && m.contains("failed with exit code 42")
        && has_remedy(&e, "see the pod's output: kubectl logs"))
    {
        bail!("PodFailurePolicy: {e:#}");
    }

    // A Job whose pod succeeded (kwok completes it) is settled.
    wait_settled(&env.cluster, &target(env, "job", "ok")).await?;

    // Resumed, the pod fails with exit 1; the next one waits for the 10 s backoff.
    env.merge::<Job>("retry", json!({"spec": {"suspend": false}}))
        .await?;
    let e = wait_until(
        &env.cluster,
        &retry,
        &[],
        "waiting [\"PodFailureBackoff\"]",
        REACT,
        |e| e["state"] == "waiting" && super::reasons(e) == ["PodFailureBackoff"],
    )
    .await?;
    let m = message(&e, "PodFailureBackoff");
    let left = m
        .rsplit_once("the next pod is created in ")
        .and_then(|(_, s)| s.strip_suffix('s'))
        .and_then(|s| s.parse::<u64>().ok());
    // The backoff is 10 s after the first failure and doubles with each one after it.
    let failures = m
        .split_once(" pod failure(s) since the last success")
        .and_then(|(n, _)| n.parse::<u32>().ok())
        .unwrap_or(0);
    let most = 10u64 << failures.clamp(1, 6).saturating_sub(1);
    let failed = objects(&e, "PodFailureBackoff");
    if failures == 0
        || !left.is_some_and(|s| (1..=most).contains(&s))
        || failed.len() != 1
        || !failed.iter().all(|p| p.starts_with("Pod/retry-"))
        || !has_remedy(&e, "see why the last pod failed: kubectl logs")
    {
        bail!("PodFailureBackoff: {e:#}");
    }
    Ok(())
}

under_both!(
    explain_job_suspended_backoff_and_failure_policy_under_rkcm,
    explain_job_suspended_backoff_and_failure_policy_under_upstream,
    "rkcm-explain-job",
    CONTROLLERS,
    scenario
);
