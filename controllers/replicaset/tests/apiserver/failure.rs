//! Create failures: scenario 20 (quota, slow start, ReplicaFailure and its removal, at most
//! one rejected create per sync).

use anyhow::Result;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::harness::*;

async fn quota(env: &Env, pods: i32) -> Result<()> {
    let q: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "pods"},
        "spec": {"hard": {"pods": pods.to_string()}},
    }))?;
    env.ns
        .api::<ResourceQuota>()
        .create(&PostParams::default(), &q)
        .await?;
    // Quota admission needs the quota controller to have computed usage first.
    rkcm_testkit::wait_for("quota status computed", WITHIN, || async {
        let q = env.ns.api::<ResourceQuota>().get("pods").await?;
        Ok(q.status.and_then(|s| s.hard).is_some().then_some(()))
    })
    .await
}

pub async fn raise_quota(env: &Env, pods: i32) -> Result<()> {
    env.ns
        .api::<ResourceQuota>()
        .patch(
            "pods",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hard": {"pods": pods.to_string()}}})),
        )
        .await?;
    Ok(())
}

pub async fn with_quota(env: &Env, pods: i32) -> Result<()> {
    quota(env, pods).await
}

rkcm_testkit::scenario! {
    quota_rejection_sets_replica_failure_until_lifted, "rs-quota", quota_failure
}

async fn quota_failure(env: &Env) -> Result<()> {
    quota(env, 2).await?;
    let recorder = rkcm_testkit::recorder::Recorder::new();
    let ctrl = start_recorded(
        env,
        env.config(),
        std::time::Duration::ZERO,
        Some(&recorder),
    );
    let rs = env
        .create_rs(replicaset("web", 5, &[("app", "web")], &[("app", "web")]))
        .await?;
    let uid = uid_of(&rs);
    let rs = env
        .wait_rs("web", "ReplicaFailure/FailedCreate", |rs| {
            failure_condition(rs).is_some_and(|c| {
                c.status.as_deref() == Some("True") && c.reason.as_deref() == Some("FailedCreate")
            })
        })
        .await?;
    let cond = failure_condition(&rs).unwrap_or_default();
    let message = cond.message.unwrap_or_default();
    ensure(
        message.contains("exceeded quota"),
        format!("condition message: {message}"),
    )?;
    rkcm_testkit::wait_for("FailedCreate warning event", WITHIN, || async {
        let events = env.events_for("web").await?;
        Ok(events
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("FailedCreate")
                    && e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref().is_some_and(|m| {
                        m.starts_with("Error creating: ") && m.contains("exceeded quota")
                    })
            })
            .then_some(()))
    })
    .await?;
    let pods = env.active(&uid).await?;
    ensure(
        pods.len() == 2,
        format!("exactly 2 pods under quota, got {}", pods.len()),
    )?;
    rkcm_testkit::holds_for("never more than the quota", HOLDS, || async {
        Ok(env.owned(&uid).await?.len() <= 2)
    })
    .await?;
    // What the audit log would show: once creates fail, a sync makes one attempt (the slow
    // start stops at the batch with the failure), so rejected creates never overlap.
    let rejected = recorder.matching(|c| c.is_pod_create(env.name()) && c.code == 403);
    ensure(
        rejected.len() >= 2,
        format!(
            "rejected creates retried with backoff, got {}",
            rejected.len()
        ),
    )?;
    for pair in rejected.windows(2) {
        ensure(
            pair[1].sent >= pair[0].answered,
            "a rejected create was sent while another was still in flight",
        )?;
    }

    raise_quota(env, 5).await?;
    env.wait_active(&uid, 5).await?;
    env.wait_rs("web", "condition removed, replicas=5", |rs| {
        failure_condition(rs).is_none() && rs_status(rs).0 == 5
    })
    .await?;
    ctrl.stop().await
}
