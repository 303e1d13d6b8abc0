//! Refused writes, as a new user meets them: a Job and a StatefulSet in a namespace whose
//! ResourceQuota allows no pods. Every pod create is refused (403 "exceeded quota") and the
//! controllers say so in `FailedCreate` events; explain must not say "acting: create" with
//! nothing waited on, but stalled on `QuotaExceeded` with the server's message and the
//! quota remedy, while the create stays what the controller would do next. Under rkcm and
//! under upstream kube-controller-manager (explain reads the events either writes).

use anyhow::bail;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ResourceQuota;
use rkcm_testkit::harness::{Env, kwok_template};
use rkcm_testkit::wait_for;
use serde_json::{Value, json};

use super::{REACT, has_remedy, message, target, wait_until};

const CONTROLLERS: &str = "job-controller,statefulset-controller";

/// Waits until the explanation is stalled on `QuotaExceeded` with the server's message, the
/// quota remedy, and the create still planned.
async fn wait_quota_stall(env: &Env, target: &str) -> anyhow::Result<Value> {
    let e = wait_until(
        &env.cluster,
        target,
        &[],
        "stalled on QuotaExceeded",
        REACT,
        |e| e["state"] == "stalled" && super::reasons(e).contains(&"QuotaExceeded".to_owned()),
    )
    .await?;
    let m = message(&e, "QuotaExceeded");
    let creates = e["actions"].as_array().is_some_and(|a| {
        a.iter()
            .any(|x| x.as_str().is_some_and(|s| s.contains("create")))
    });
    if !(m.starts_with("the API server refused ")
        && m.contains("exceeded quota")
        && has_remedy(&e, "raise the namespace's ResourceQuota")
        && has_remedy(
            &e,
            &format!("kubectl -n {} describe resourcequota", env.name()),
        )
        && creates)
    {
        bail!("QuotaExceeded: {e:#}");
    }
    Ok(e)
}

async fn scenario(env: &Env) -> anyhow::Result<()> {
    env.create::<ResourceQuota>(json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "none"},
        "spec": {"hard": {"pods": "0"}},
    }))
    .await?;
    // The quota counts once the quota controller has seen it; before, admission refuses
    // with "status unknown", also a quota refusal, but the test wants the common message.
    let quotas = env.api::<ResourceQuota>();
    wait_for("the quota to be counted", REACT, || async {
        let q = quotas.get("none").await?;
        Ok(q.status
            .and_then(|s| s.hard)
            .is_some_and(|h| h.contains_key("pods"))
            .then_some(()))
    })
    .await?;

    let mut template = kwok_template("pi", "registry.example/task:v1");
    template["spec"]["restartPolicy"] = json!("Never");
    env.create::<Job>(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pi"},
        "spec": {"template": template},
    }))
    .await?;
    env.create::<StatefulSet>(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 1, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": kwok_template("db", "registry.example/db:v1"),
        },
    }))
    .await?;
    wait_quota_stall(env, &target(env, "job", "pi")).await?;
    wait_quota_stall(env, &target(env, "statefulset", "db")).await?;
    Ok(())
}

under_both!(
    explain_quota_refusal_of_job_and_statefulset_under_rkcm,
    explain_quota_refusal_of_job_and_statefulset_under_upstream,
    "rkcm-explain-quota",
    CONTROLLERS,
    scenario
);
