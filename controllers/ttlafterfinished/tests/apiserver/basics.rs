//! Scenarios 1-6 and 15: which Jobs are deleted, and when.

use anyhow::{Result, ensure};
use rkcm_testkit::recorder::Recorder;
use rkcm_testkit::{holds_for, wait_for};

use crate::harness::{
    DELETIONS, Env, FOREGROUND, HOLDS, History, WITHIN, deletion_count, now_second, secs, uid,
};

/// Scenario 1: TTL 0 and two pods. The Job is deleted right after it completes, Foreground
/// (deletionTimestamp and `foregroundDeletion` first), its pods are removed by the garbage
/// collector, then the Job is gone.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn ttl_zero_deletes_promptly_with_its_pods_in_foreground() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-zero").await?;
    let history = History::start(&env, "zero").await?;
    let _controller = env.controller();
    let job = env.create_job("zero", Some(0)).await?;
    let job_uid = uid(&job)?;
    env.create_pod(&job, "zero-a", None).await?;
    env.create_pod(&job, "zero-b", None).await?;

    let finished = now_second();
    env.complete("zero", finished).await?;

    let deleting = history.wait_deleting(&job_uid, WITHIN).await?;
    ensure!(
        deleting.finalizers().iter().any(|f| f == FOREGROUND),
        "the first deleting version carries {FOREGROUND}: {:?}",
        deleting.finalizers()
    );
    ensure!(
        deleting.deletion_timestamp() >= Some(finished),
        "deleted at {:?}, before finishing at {finished}",
        deleting.deletion_timestamp()
    );
    wait_for("the job's pods to be removed", WITHIN, || async {
        let names = env.pod_names().await?;
        Ok(names.is_empty().then_some(()))
    })
    .await?;
    let gone = history.wait_gone(&job_uid, WITHIN).await?;
    ensure!(
        gone <= finished + secs(10),
        "job gone only at {gone}, finished at {finished}"
    );
    Ok(())
}

/// A Job whose cached copy is the newest is deleted under that copy's preconditions, without
/// reading it from the API server first (upstream GETs every Job before deleting it).
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn a_current_cache_deletes_without_reading_the_job_first() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-noget").await?;
    let history = History::start(&env, "noget").await?;
    let recorder = Recorder::new();
    let _controller = env.controller_recorded(&recorder);
    let job_uid = uid(&env.create_job("noget", Some(0)).await?)?;
    env.complete("noget", now_second()).await?;
    history.wait_deleting(&job_uid, WITHIN).await?;
    let path = format!("/apis/batch/v1/namespaces/{}/jobs/noget", env.ns.name());
    let calls: Vec<(String, u16)> = recorder
        .matching(|c| c.path == path)
        .into_iter()
        .map(|c| (c.method, c.code))
        .collect();
    ensure!(
        calls == vec![("DELETE".to_string(), 200)],
        "the controller's requests for the Job: {calls:?}"
    );
    Ok(())
}

/// Scenarios 2 and 15: TTL 10 on a Complete Job. Not deleted before finish+10 s (watch
/// history), gone shortly after; the deletion-duration histogram counts exactly this delete.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn ttl_ten_deletes_after_expiry_and_not_before() -> Result<()> {
    // Alone: the histogram is process-wide.
    let _exclusive = DELETIONS.write().await;
    let env = Env::new("ttl-ten").await?;
    let history = History::start(&env, "ten").await?;
    let controller = env.controller();
    let job = env.create_job("ten", Some(10)).await?;
    let job_uid = uid(&job)?;
    let before = deletion_count().unwrap_or(0);

    let finished = now_second();
    env.complete("ten", finished).await?;
    history
        .assert_deleted_on_time(&job_uid, finished + secs(10))
        .await?;
    controller.stop().await?;
    let after = deletion_count()?;
    ensure!(
        after == before + 1,
        "deletion histogram count went from {before} to {after}, want +1"
    );
    Ok(())
}

/// Scenario 3 (with the brief's TTL of 5 s): a Failed Job is deleted after its TTL, not
/// before.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn failed_job_deletes_after_expiry_and_not_before() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-failed").await?;
    let history = History::start(&env, "failed").await?;
    let _controller = env.controller();
    let job = env.create_job("failed", Some(5)).await?;
    let job_uid = uid(&job)?;

    let finished = now_second();
    env.fail("failed", finished).await?;
    history
        .assert_deleted_on_time(&job_uid, finished + secs(5))
        .await?;
    Ok(())
}

/// Scenario 4: a finished Job without a TTL stays (30 s).
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn finished_job_without_ttl_is_kept() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-none").await?;
    let history = History::start(&env, "none").await?;
    let _controller = env.controller();
    let job = env.create_job("none", None).await?;
    let job_uid = uid(&job)?;
    // Finished long ago: any TTL at all would have expired.
    env.complete("none", now_second() - secs(3600)).await?;
    holds_for(
        "the finished job without TTL to stay",
        std::time::Duration::from_secs(30),
        || async { Ok(history.assert_never_deleted(&job_uid, "no TTL").is_ok()) },
    )
    .await?;
    history.assert_never_deleted(&job_uid, "no TTL")
}

/// Scenario 5: a running Job with TTL 0 is not deleted while it runs; once it completes it
/// is (so the controller was watching all along).
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn unfinished_job_is_never_deleted() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-running").await?;
    let history = History::start(&env, "running").await?;
    let _controller = env.controller();
    let job = env.create_job("running", Some(0)).await?;
    let job_uid = uid(&job)?;
    env.run("running", now_second() - secs(600)).await?;
    holds_for("the running job to stay", HOLDS * 2, || async {
        Ok(history.assert_never_deleted(&job_uid, "running").is_ok())
    })
    .await?;
    history.assert_never_deleted(&job_uid, "running")?;

    let finished = now_second();
    env.complete("running", finished).await?;
    history.assert_deleted_on_time(&job_uid, finished).await?;
    Ok(())
}

/// Scenario 6: `FailureTarget` or `SuccessCriteriaMet` alone is not "finished"; the Job is
/// deleted only once `Failed` / `Complete` appears.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn interim_conditions_are_not_finished() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-interim").await?;
    let failing = History::start(&env, "failing").await?;
    let succeeding = History::start(&env, "succeeding").await?;
    let _controller = env.controller();
    let failing_uid = uid(&env.create_job("failing", Some(0)).await?)?;
    let succeeding_uid = uid(&env.create_job("succeeding", Some(0)).await?)?;

    // The interim conditions are 60 s old: with TTL 0 they would be long due if they counted.
    let t = crate::harness::rfc3339(now_second() - secs(60));
    let interim = |type_: &str| {
        serde_json::json!({
            "startTime": t, "active": 0,
            "conditions": [{"type": type_, "status": "True", "lastTransitionTime": t}],
        })
    };
    env.patch_status("failing", interim("FailureTarget"))
        .await?;
    env.patch_status("succeeding", interim("SuccessCriteriaMet"))
        .await?;
    holds_for("jobs with interim conditions to stay", HOLDS, || async {
        Ok(failing
            .assert_never_deleted(&failing_uid, "FailureTarget")
            .is_ok()
            && succeeding
                .assert_never_deleted(&succeeding_uid, "SuccessCriteriaMet")
                .is_ok())
    })
    .await?;
    failing.assert_never_deleted(&failing_uid, "FailureTarget only")?;
    succeeding.assert_never_deleted(&succeeding_uid, "SuccessCriteriaMet only")?;

    let finished = now_second();
    env.fail("failing", finished).await?;
    env.complete("succeeding", finished).await?;
    failing
        .assert_deleted_on_time(&failing_uid, finished)
        .await?;
    succeeding
        .assert_deleted_on_time(&succeeding_uid, finished)
        .await?;
    Ok(())
}
