//! Failure paths: scenarios 4, 8, 15 and 16.

use std::time::Duration;

use anyhow::Result;
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    backoff_limit_fails_the_job, "job-backoff", backoff_limit; start = start
}

async fn backoff_limit(env: &Env) -> Result<()> {
    let uid = env
        .start_job(
            "failing",
            json!({"backoffLimit": 1, "template": {"metadata": {
                "labels": {KWOK_FAIL: "true"},
                "annotations": {KWOK_EXIT_CODE: "3"}
            }}}),
            false,
        )
        .await?;
    let failed_job = wait_job(env, "failing", "Failed", WITHIN * 2, |j| {
        has_condition(j, "Failed")
    })
    .await?;
    let s = status(&failed_job);
    ensure(s.failed == Some(2), format!("failed {:?}", s.failed))?;
    ensure(
        conditions(&failed_job)
            == vec![
                "FailureTarget=BackoffLimitExceeded".to_owned(),
                "Failed=BackoffLimitExceeded".to_owned(),
            ],
        format!("{:?}", conditions(&failed_job)),
    )?;
    ensure(s.completion_time.is_none(), "no completionTime when failed")?;
    let ev = env.wait_event("failing", "BackoffLimitExceeded").await?;
    ensure(
        ev.type_.as_deref() == Some("Warning")
            && ev.message.as_deref() == Some("Job has reached the specified backoff limit"),
        format!("{ev:?}"),
    )?;
    // The replacement waited for the 10 s recreation backoff.
    let mut pods = env.owned(&uid).await?;
    ensure(pods.len() == 2, format!("{} pods, want 2", pods.len()))?;
    pods.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
    let first_finished = pods[0]
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c[0].state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.finished_at.clone())
        .map(|t| t.0);
    let second_created = pods[1].metadata.creation_timestamp.clone().map(|t| t.0);
    if let (Some(f), Some(c)) = (first_finished, second_created) {
        // Timestamps have second precision.
        ensure(
            c.duration_since(f) >= jiff::SignedDuration::from_secs(9),
            format!(
                "replacement created {} after the failure",
                c.duration_since(f)
            ),
        )?;
    }
    for p in &pods {
        ensure(!has_tracking(p), "finalizers removed")?;
    }
    Ok(())
}

rkcm_testkit::scenario! {
    fail_job_rule_matches_exit_code, "job-failjob", fail_job_rule; start = start
}

async fn fail_job_rule(env: &Env) -> Result<()> {
    env.create_job(job(
        "pfp",
        json!({
            "completions": 3, "parallelism": 1, "backoffLimit": 6,
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}
            ]},
            "template": {"metadata": {
                "labels": {KWOK_FAIL: "true"},
                "annotations": {KWOK_EXIT_CODE: "42"}
            }}
        }),
        false,
    ))
    .await?;
    let j = wait_condition(env, "pfp", "Failed").await?;
    ensure_conditions(
        &j,
        &["FailureTarget=PodFailurePolicy", "Failed=PodFailurePolicy"],
    )?;
    let msg = status(&j)
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .and_then(|c| c.message)
        .unwrap_or_default();
    let ns = env.name();
    ensure(
        msg.starts_with(&format!("Container main for pod {ns}/pfp-"))
            && msg.ends_with("failed with exit code 42 matching FailJob rule at index 0"),
        format!("message {msg:?}"),
    )?;
    ensure(
        status(&j).failed == Some(1),
        format!("failed {:?}", status(&j).failed),
    )?;
    Ok(())
}

rkcm_testkit::scenario! {
    ignore_rule_does_not_count_and_replaces_after_backoff, "job-ignore", ignore_rule; start = start
}

async fn ignore_rule(env: &Env) -> Result<()> {
    let uid = env
        .start_job(
            "ign",
            json!({
                "backoffLimit": 0,
                "podFailurePolicy": {"rules": [
                    {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [5]}}
                ]}
            }),
            true,
        )
        .await?;
    let first = env.wait_active_within(&uid, 1, WITHIN).await?;
    let first_name = first[0].metadata.name.clone().unwrap_or_default();
    env.terminate(&first_name, 5).await?;
    let failed_at = std::time::Instant::now();
    let second = wait_replacement_after_backoff(env, &uid, &first_name, failed_at).await?;
    let j = env.jobs().get("ign").await?;
    ensure(
        status(&j).failed.unwrap_or(0) == 0,
        "ignored failure not counted",
    )?;
    ensure(
        !has_condition(&j, "FailureTarget"),
        "backoffLimit 0 not reached",
    )?;
    let name = second[0].metadata.name.clone().unwrap_or_default();
    env.terminate(&name, 0).await?;
    let j = wait_condition(env, "ign", "Complete").await?;
    ensure(
        status(&j).failed.unwrap_or(0) == 0 && status(&j).succeeded == Some(1),
        format!("{:?}", status(&j)),
    )?;
    for p in env.owned(&uid).await? {
        ensure(
            !has_tracking(&p),
            "finalizer removed from the ignored pod too",
        )?;
    }
    Ok(())
}

rkcm_testkit::scenario! {
    active_deadline_fails_the_job_on_time, "job-deadline", deadline; start = start
}

async fn deadline(env: &Env) -> Result<()> {
    let uid = env
        .start_job(
            "late",
            json!({"activeDeadlineSeconds": 4, "backoffLimit": 6}),
            true,
        )
        .await?;
    env.wait_active_within(&uid, 1, WITHIN).await?;
    let started = std::time::Instant::now();
    let j = wait_condition(env, "late", "Failed").await?;
    ensure(
        started.elapsed() <= Duration::from_secs(12),
        format!("deadline enforced after {:?}", started.elapsed()),
    )?;
    ensure_conditions(
        &j,
        &["FailureTarget=DeadlineExceeded", "Failed=DeadlineExceeded"],
    )?;
    let s = status(&j);
    ensure(
        s.failed == Some(1) && s.active.unwrap_or(0) == 0 && s.terminating.unwrap_or(0) == 0,
        format!("{s:?}"),
    )?;
    // The unbound pod was deleted and, its finalizer gone, disappeared.
    rkcm_testkit::wait_for("pod gone", WITHIN, || async {
        Ok(env.owned(&uid).await?.is_empty().then_some(()))
    })
    .await?;
    Ok(())
}

rkcm_testkit::scenario! {
    fail_index_rule_fails_indexes_without_retries, "job-failindex", fail_index; start = start
}

async fn fail_index(env: &Env) -> Result<()> {
    // Scenario 17, every index exiting 7.
    let uid = env
        .start_job(
            "fi",
            json!({
                "completionMode": "Indexed", "completions": 3, "parallelism": 3,
                "backoffLimitPerIndex": 3,
                "podFailurePolicy": {"rules": [
                    {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [7]}}
                ]},
                "template": {"metadata": {
                    "labels": {KWOK_FAIL: "true"},
                    "annotations": {KWOK_EXIT_CODE: "7"}
                }}
            }),
            false,
        )
        .await?;
    let j = wait_condition(env, "fi", "Failed").await?;
    let s = status(&j);
    ensure(
        s.failed_indexes.as_deref() == Some("0-2") && s.failed == Some(3),
        format!("{s:?}"),
    )?;
    ensure_conditions(&j, &["FailureTarget=FailedIndexes", "Failed=FailedIndexes"])?;
    let pods = env.owned(&uid).await?;
    ensure(
        pods.len() == 3,
        format!("{} pods: no retry of a failed index", pods.len()),
    )?;
    Ok(())
}
