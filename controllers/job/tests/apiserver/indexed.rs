//! Indexed Jobs driven by the test: scenarios 12, 13, 18, plus managedBy (23) and orphan
//! finalizer cleanup (24).

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    backoff_limit_per_index_fails_only_that_index, "job-perindex", per_index; start = start
}

async fn per_index(env: &Env) -> Result<()> {
    let job = env
        .create_job(job(
            "pi",
            json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 1}),
            true,
        ))
        .await?;
    let uid = uid_of(&job);
    wait_job(env, "pi", "failedIndexes present", WITHIN, |j| {
        status(j).failed_indexes.as_deref() == Some("")
    })
    .await?;
    let p0 = env.wait_index(&uid, 0).await?;
    ensure(
        p0.metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get("batch.kubernetes.io/job-index-failure-count")
            .map(String::as_str)
            == Some("0"),
        "first attempt has failure count 0",
    )?;
    env.terminate(&name_of(&p0), 1).await?;
    // Scenario 12: the replacement keeps index 0 and carries the failure count.
    let again = rkcm_testkit::wait_for("replacement of index 0", WITHIN, || async {
        Ok(env
            .active(&uid)
            .await?
            .into_iter()
            .find(|p| index_of(p) == Some(0) && name_of(p) != name_of(&p0)))
    })
    .await?;
    ensure(
        again
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get("batch.kubernetes.io/job-index-failure-count")
            .map(String::as_str)
            == Some("1"),
        "replacement has failure count 1",
    )?;
    env.terminate(&name_of(&again), 1).await?;
    for ix in [1, 2] {
        env.end_index(&uid, ix, 0).await?;
    }
    let j = wait_condition(env, "pi", "Failed").await?;
    let s = status(&j);
    ensure(
        s.failed_indexes.as_deref() == Some("0")
            && s.completed_indexes.as_deref() == Some("1,2")
            && s.succeeded == Some(2)
            && s.failed == Some(2),
        format!("{s:?}"),
    )?;
    ensure_conditions(&j, &["FailureTarget=FailedIndexes", "Failed=FailedIndexes"])?;
    Ok(())
}

rkcm_testkit::scenario! {
    success_policy_completes_early, "job-successpolicy", success_policy; start = start
}

async fn success_policy(env: &Env) -> Result<()> {
    let uid = env
        .start_indexed(
            "sp",
            3,
            json!({"successPolicy": {"rules": [{"succeededIndexes": "0"}]}}),
        )
        .await?;
    env.end_index(&uid, 0, 0).await?;
    let j = wait_condition(env, "sp", "Complete").await?;
    ensure_conditions(
        &j,
        &["SuccessCriteriaMet=SuccessPolicy", "Complete=SuccessPolicy"],
    )?;
    let s = status(&j);
    ensure(
        s.completed_indexes.as_deref() == Some("0") && s.failed.unwrap_or(0) == 0,
        format!("{s:?}"),
    )?;
    env.wait_none_active(&uid, "other pods removed").await?;
    Ok(())
}

rkcm_testkit::scenario! {
    external_manager_and_orphan_finalizers, "job-managedby", external_and_orphans; start = start
}

async fn external_and_orphans(env: &Env) -> Result<()> {
    // Scenario 24: a bare pod holding the tracking finalizer loses it.
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "finalizers": [TRACKING]},
        "spec": {"schedulerName": NO_SCHEDULER, "containers": [{"name": "c", "image": "busybox"}]}
    }))?;
    env.pods().create(&PostParams::default(), &orphan).await?;
    rkcm_testkit::wait_for("orphan finalizer removed", WITHIN, || async {
        let p = env.pods().get("orphan").await?;
        Ok((!has_tracking(&p)).then_some(()))
    })
    .await?;
    // Scenario 23: a Job managed elsewhere is left alone.
    let job = env
        .create_job(job("ext", json!({"managedBy": "example.com/other"}), true))
        .await?;
    let uid = uid_of(&job);
    rkcm_testkit::holds_for("no pods, no status", HOLDS, || async {
        let j = env.jobs().get("ext").await?;
        Ok(env.owned(&uid).await?.is_empty()
            && j.status.as_ref().is_none_or(|s| s.start_time.is_none()))
    })
    .await?;
    Ok(())
}
