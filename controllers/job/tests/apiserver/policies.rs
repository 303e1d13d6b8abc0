//! The recreation backoff doubling (6), `maxFailedIndexes` (14) and a success policy by count
//! (19), on pods the test drives.

use anyhow::Result;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::harness::*;

fn created(p: &Pod) -> Result<Timestamp> {
    p.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .ok_or_else(|| anyhow::anyhow!("pod {} has no creationTimestamp", name_of(p)))
}

/// The only active pod of the Job, once it is not `previous`.
async fn next_pod(env: &Env, uid: &str, previous: &str) -> Result<Pod> {
    rkcm_testkit::wait_for("a replacement pod", WITHIN, || async {
        Ok(env
            .active(uid)
            .await?
            .into_iter()
            .find(|p| name_of(p) != previous))
    })
    .await
}

rkcm_testkit::scenario! {
    recreation_delay_doubles_per_failure, "job-recreate-delay", recreation_delay; start = start
}

/// The delay runs from each failed pod's finish time (10 s, then 20 s). The finish times are
/// set in the past so that the test takes seconds: a replacement must still wait out the rest
/// of each delay, and a delay that did not double would let the second replacement come at
/// once.
async fn recreation_delay(env: &Env) -> Result<()> {
    let job = env
        .create_job(job("bo", json!({"backoffLimit": 6}), true))
        .await?;
    let uid = uid_of(&job);
    let first = env.wait_active_within(&uid, 1, WITHIN).await?.remove(0);

    let t1 = Timestamp::now() - SignedDuration::from_secs(5);
    env.terminate_at(&name_of(&first), 1, t1).await?;
    let second = next_pod(env, &uid, &name_of(&first)).await?;
    let after = created(&second)?.duration_since(t1);
    // creationTimestamp has whole seconds: allow one for the truncation.
    ensure(
        after >= SignedDuration::from_secs(9) && after <= SignedDuration::from_secs(15),
        format!("first replacement created {after} after the failure, want 10 s"),
    )?;

    let t2 = Timestamp::now() - SignedDuration::from_secs(12);
    env.terminate_at(&name_of(&second), 1, t2).await?;
    let third = next_pod(env, &uid, &name_of(&second)).await?;
    let after = created(&third)?.duration_since(t2);
    ensure(
        after >= SignedDuration::from_secs(19) && after <= SignedDuration::from_secs(25),
        format!("second replacement created {after} after the failure, want 20 s"),
    )?;
    let j = wait_job(env, "bo", "failed=2", WITHIN, |j| {
        status(j).failed == Some(2)
    })
    .await?;
    ensure_conditions(&j, &[])?;
    Ok(())
}

rkcm_testkit::scenario! {
    max_failed_indexes_fails_the_job, "job-maxfailedidx", max_failed_indexes; start = start
}

async fn max_failed_indexes(env: &Env) -> Result<()> {
    let uid = env
        .start_indexed(
            "mfi",
            3,
            json!({"backoffLimitPerIndex": 0, "maxFailedIndexes": 0}),
        )
        .await?;
    let p1 = env.wait_index(&uid, 1).await?;
    env.terminate(&name_of(&p1), 1).await?;
    let j = wait_condition(env, "mfi", "Failed").await?;
    ensure_conditions(
        &j,
        &[
            "FailureTarget=MaxFailedIndexesExceeded",
            "Failed=MaxFailedIndexesExceeded",
        ],
    )?;
    let message = status(&j)
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .and_then(|c| c.message);
    ensure(
        message.as_deref()
            == Some("Job has exceeded the specified maximal number of failed indexes"),
        format!("message {message:?}"),
    )?;
    // The two running pods were deleted and count as failed with the failed one.
    let s = status(&j);
    ensure(
        s.failed == Some(3)
            && s.failed_indexes.as_deref() == Some("1")
            && s.completed_indexes
                .as_deref()
                .unwrap_or_default()
                .is_empty()
            && s.active.unwrap_or(0) == 0
            && s.terminating.unwrap_or(0) == 0,
        format!("{s:?}"),
    )?;
    // Only the failed pod is left, without the finalizer.
    let left = rkcm_testkit::wait_for("the running pods gone", WITHIN, || async {
        let owned = env.owned(&uid).await?;
        Ok((owned.len() == 1).then_some(owned))
    })
    .await?;
    ensure(
        name_of(&left[0]) == name_of(&p1) && !has_tracking(&left[0]),
        format!("left: {}", describe_pod(&left[0])),
    )?;
    let ev = env.wait_event("mfi", "MaxFailedIndexesExceeded").await?;
    ensure(ev.type_.as_deref() == Some("Warning"), format!("{ev:?}"))?;
    Ok(())
}

rkcm_testkit::scenario! {
    success_policy_by_count_completes_after_enough_indexes, "job-successcount", success_count;
    start = start
}

async fn success_count(env: &Env) -> Result<()> {
    let uid = env
        .start_indexed(
            "sc",
            5,
            json!({"successPolicy": {"rules": [{"succeededCount": 2}]}}),
        )
        .await?;
    env.end_index(&uid, 3, 0).await?;
    let j = wait_job(env, "sc", "index 3 counted", WITHIN, |j| {
        status(j).completed_indexes.as_deref() == Some("3")
    })
    .await?;
    ensure(
        conditions(&j).is_empty() && status(&j).active == Some(4),
        format!("one index is not enough: {:?}", status(&j)),
    )?;
    env.end_index(&uid, 1, 0).await?;
    let j = wait_condition(env, "sc", "Complete").await?;
    ensure_conditions(
        &j,
        &["SuccessCriteriaMet=SuccessPolicy", "Complete=SuccessPolicy"],
    )?;
    let complete = status(&j)
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Complete")
        .unwrap_or_default();
    ensure(
        complete.message.as_deref() == Some("Matched rules at index 0"),
        format!("{complete:?}"),
    )?;
    let s = status(&j);
    ensure(
        s.succeeded == Some(2)
            && s.completed_indexes.as_deref() == Some("1,3")
            && s.failed.unwrap_or(0) == 0
            && s.active.unwrap_or(0) == 0
            && s.completion_time == complete.last_transition_time,
        format!("{s:?}"),
    )?;
    // The three pods still running were removed and not counted.
    env.wait_none_active(&uid, "other pods removed").await?;
    Ok(())
}
