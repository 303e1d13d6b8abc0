//! Ready accounting (28), OnFailure restart counting (7) and adoption (25).

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    ready_pods_and_restart_counts, "job-ready", ready_and_restarts; start = start
}

async fn ready_and_restarts(env: &Env) -> Result<()> {
    let uid = env
        .start_job(
            "rdy",
            json!({"completions": 2, "parallelism": 2, "backoffLimit": 2,
                   "template": {"spec": {"restartPolicy": "OnFailure"}}}),
            true,
        )
        .await?;
    let pods = env.wait_active_within(&uid, 2, WITHIN).await?;
    env.cluster
        .set_pod_phase(env.name(), &name_of(&pods[0]), "Running", true)
        .await?;
    wait_job(env, "rdy", "ready=1 active=2", WITHIN, |j| {
        status(j).ready == Some(1) && status(j).active == Some(2)
    })
    .await?;
    // Scenario 7: restarts of a running OnFailure pod reach backoffLimit.
    let now = jiff::Timestamp::now().to_string();
    env.cluster
        .patch_pod_status(
            env.name(),
            &name_of(&pods[0]),
            json!({"phase": "Running", "containerStatuses": [{
                "name": "main", "image": "busybox", "imageID": "", "ready": true, "restartCount": 2,
                "state": {"running": {"startedAt": now}}
            }]}),
        )
        .await?;
    let j = wait_condition(env, "rdy", "Failed").await?;
    ensure_conditions(
        &j,
        &[
            "FailureTarget=BackoffLimitExceeded",
            "Failed=BackoffLimitExceeded",
        ],
    )?;
    let s = status(&j);
    ensure(
        s.failed == Some(2) && s.ready.unwrap_or(0) == 0 && s.active.unwrap_or(0) == 0,
        format!("running pods deleted and counted failed: {s:?}"),
    )?;
    Ok(())
}

rkcm_testkit::scenario! {
    adopts_matching_orphans, "job-adopt", adopt; start = start
}

async fn adopt(env: &Env) -> Result<()> {
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stray", "labels": {"app": "x"}},
        "spec": {"schedulerName": NO_SCHEDULER, "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox"}]}
    }))?;
    env.pods().create(&PostParams::default(), &orphan).await?;
    let uid = env
        .start_job(
            "adopt",
            json!({"manualSelector": true, "selector": {"matchLabels": {"app": "x"}},
                   "template": {"metadata": {"labels": {"app": "x"}}}}),
            true,
        )
        .await?;
    let p = rkcm_testkit::wait_for("orphan adopted", WITHIN, || async {
        let p = env.pods().get("stray").await?;
        let owned = p.metadata.owner_references.iter().flatten().any(|r| {
            r.uid == uid && r.controller == Some(true) && r.block_owner_deletion == Some(true)
        });
        Ok((owned && has_tracking(&p)).then_some(p))
    })
    .await?;
    wait_job(env, "adopt", "active=1", WITHIN, |j| {
        status(j).active == Some(1)
    })
    .await?;
    rkcm_testkit::holds_for("no extra pod", HOLDS, || async {
        Ok(env.owned(&uid).await?.len() == 1)
    })
    .await?;
    env.terminate(&name_of(&p), 0).await?;
    let j = wait_condition(env, "adopt", "Complete").await?;
    ensure(status(&j).succeeded == Some(1), format!("{:?}", status(&j)))?;
    Ok(())
}

rkcm_testkit::scenario! {
    releases_pods_that_stop_matching, "job-release", release; start = start
}

async fn release(env: &Env) -> Result<()> {
    let uid = env
        .start_job(
            "rel",
            json!({"manualSelector": true, "selector": {"matchLabels": {"app": "r"}},
                   "template": {"metadata": {"labels": {"app": "r"}}}}),
            true,
        )
        .await?;
    let first = env.wait_active_within(&uid, 1, WITHIN).await?.remove(0);
    let name = name_of(&first);
    let history = History::<Pod>::start(env.pods()).await?;
    env.pods()
        .patch(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
        )
        .await?;
    // Scenario 26: the ownerRef goes and, the pod now an orphan, so does the finalizer.
    rkcm_testkit::wait_for("released without the finalizer", WITHIN, || async {
        let p = env.pods().get(&name).await?;
        let owned = p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.uid == uid);
        Ok((!owned && !has_tracking(&p)).then_some(()))
    })
    .await?;
    // The release patch takes the finalizer off with the ownerRef, as upstream's
    // `ReleasePod` does: no version of the pod is an orphan still holding it.
    let orphaned_with_finalizer: Vec<String> = history
        .versions(&name)?
        .iter()
        .map(Seen::object)
        .filter(|p| {
            let owned = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid);
            !owned && has_tracking(p)
        })
        .map(|p| p.metadata.resource_version.clone().unwrap_or_default())
        .collect();
    ensure(
        orphaned_with_finalizer.is_empty(),
        format!("released pod kept its tracking finalizer at versions {orphaned_with_finalizer:?}"),
    )?;
    let replacement = env.wait_active_within(&uid, 1, WITHIN).await?.remove(0);
    ensure(name_of(&replacement) != name, "a replacement pod")?;
    Ok(())
}
