//! Success paths run by kwok: scenarios 1, 2 and 11, and the finalizer removal after counting.

use anyhow::Result;
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    non_indexed_job_completes_with_exact_counts, "job-basic", non_indexed; start = start
}

async fn non_indexed(env: &Env) -> Result<()> {
    let job = env
        .create_job(job(
            "work",
            json!({"completions": 3, "parallelism": 2}),
            false,
        ))
        .await?;
    let uid = uid_of(&job);
    // Scenario 2: never more than parallelism non-terminal pods, never more than the
    // remaining completions, while it runs.
    let done = rkcm_testkit::wait_for("Job complete", WITHIN * 2, || async {
        let active = env.active(&uid).await?;
        let j = env.jobs().get("work").await?;
        let succeeded = status(&j).succeeded.unwrap_or(0);
        ensure(active.len() <= 2, format!("{} active pods", active.len()))?;
        ensure(
            active.len() as i32 <= 3 - succeeded.min(3),
            format!("{} active with {succeeded} succeeded", active.len()),
        )?;
        Ok(has_condition(&j, "Complete").then_some(j))
    })
    .await?;
    let s = status(&done);
    ensure(
        s.succeeded == Some(3),
        format!("succeeded {:?}", s.succeeded),
    )?;
    ensure(s.failed.unwrap_or(0) == 0, format!("failed {:?}", s.failed))?;
    ensure(
        (
            s.active.unwrap_or(0),
            s.ready.unwrap_or(0),
            s.terminating.unwrap_or(0),
        ) == (0, 0, 0),
        format!("{:?}", (s.active, s.ready, s.terminating)),
    )?;
    let u = s.uncounted_terminated_pods.clone().unwrap_or_default();
    ensure(
        u.succeeded.unwrap_or_default().is_empty() && u.failed.unwrap_or_default().is_empty(),
        "uncountedTerminatedPods empty",
    )?;
    ensure(
        conditions(&done)
            == vec![
                "SuccessCriteriaMet=CompletionsReached".to_owned(),
                "Complete=CompletionsReached".to_owned(),
            ],
        format!("conditions {:?}", conditions(&done)),
    )?;
    let complete = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Complete")
        .cloned()
        .unwrap_or_default();
    ensure(
        complete.message.as_deref() == Some("Reached expected number of succeeded pods"),
        format!("{complete:?}"),
    )?;
    ensure(
        s.completion_time == complete.last_transition_time && s.start_time.is_some(),
        "completionTime is the Complete transition time",
    )?;
    // Scenario 1: pod contract; the finalizer is gone once counted.
    let pods = env.owned(&uid).await?;
    ensure(pods.len() == 3, format!("{} pods", pods.len()))?;
    for p in &pods {
        let r = &p.metadata.owner_references.clone().unwrap_or_default()[0];
        ensure(
            r.controller == Some(true) && r.block_owner_deletion == Some(true) && r.kind == "Job",
            format!("{r:?}"),
        )?;
        ensure(
            p.metadata.generate_name.as_deref() == Some("work-"),
            format!("{:?}", p.metadata.generate_name),
        )?;
        let labels = p.metadata.labels.clone().unwrap_or_default();
        ensure(
            labels
                .get("batch.kubernetes.io/job-name")
                .map(String::as_str)
                == Some("work")
                && labels.get("batch.kubernetes.io/controller-uid") == Some(&uid),
            format!("{labels:?}"),
        )?;
        ensure(
            !has_tracking(p),
            "tracking finalizer removed after counting",
        )?;
    }
    env.wait_event("work", "Completed").await?;
    env.wait_event("work", "SuccessfulCreate").await?;
    Ok(())
}

rkcm_testkit::scenario! {
    indexed_job_fills_completed_indexes, "job-indexed", indexed; start = start
}

async fn indexed(env: &Env) -> Result<()> {
    let job = env
        .create_job(job(
            "idx",
            json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3}),
            false,
        ))
        .await?;
    let uid = uid_of(&job);
    let done = wait_job(env, "idx", "Complete", WITHIN * 2, |j| {
        has_condition(j, "Complete")
    })
    .await?;
    let s = status(&done);
    ensure(
        s.completed_indexes.as_deref() == Some("0-2") && s.succeeded == Some(3),
        format!("{:?} {:?}", s.completed_indexes, s.succeeded),
    )?;
    ensure(
        s.failed_indexes.is_none(),
        "failedIndexes only with backoffLimitPerIndex",
    )?;
    let mut seen = Vec::new();
    for p in env.owned(&uid).await? {
        let ann = p.metadata.annotations.clone().unwrap_or_default();
        let labels = p.metadata.labels.clone().unwrap_or_default();
        let ix = ann
            .get("batch.kubernetes.io/job-completion-index")
            .cloned()
            .unwrap_or_default();
        ensure(
            labels.get("batch.kubernetes.io/job-completion-index") == Some(&ix),
            "index label",
        )?;
        let spec = p.spec.clone().unwrap_or_default();
        ensure(
            spec.hostname.as_deref() == Some(&format!("idx-{ix}")),
            format!("hostname {:?}", spec.hostname),
        )?;
        ensure(
            p.metadata.generate_name.as_deref() == Some(&format!("idx-{ix}-")),
            format!("{:?}", p.metadata.generate_name),
        )?;
        let env_var = spec.containers[0]
            .env
            .clone()
            .unwrap_or_default()
            .into_iter()
            .find(|e| e.name == "JOB_COMPLETION_INDEX");
        let path = env_var
            .and_then(|e| e.value_from)
            .and_then(|v| v.field_ref)
            .map(|f| f.field_path);
        ensure(
            path.as_deref() == Some("metadata.labels['batch.kubernetes.io/job-completion-index']"),
            format!("env {path:?}"),
        )?;
        ensure(!has_tracking(&p), "finalizer removed")?;
        seen.push(ix);
    }
    seen.sort();
    ensure(seen == ["0", "1", "2"], format!("indexes {seen:?}"))?;
    Ok(())
}

rkcm_testkit::scenario! {
    work_queue_job_completes_after_all_pods_finish, "job-workqueue", work_queue; start = start
}

async fn work_queue(env: &Env) -> Result<()> {
    // Scenario 3: completions unset, parallelism 3.
    let uid = env
        .start_job("wq", json!({"completions": null, "parallelism": 3}), false)
        .await?;
    let done = wait_job(env, "wq", "Complete", WITHIN * 2, |j| {
        has_condition(j, "Complete")
    })
    .await?;
    let pods = env.owned(&uid).await?;
    ensure(
        pods.len() == 3,
        format!("{} pods, no more after a success", pods.len()),
    )?;
    ensure(
        status(&done).succeeded == Some(3),
        format!("succeeded {:?}", status(&done).succeeded),
    )?;
    Ok(())
}
