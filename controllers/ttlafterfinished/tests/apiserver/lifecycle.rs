//! Scenarios 10-14: foreground deletion held by a pod, Jobs already being deleted, a name
//! re-used, a controller restart, and a finish time in the future.

use anyhow::{Result, ensure};
use rkcm_testkit::{holds_for, wait_for};

use crate::harness::{
    DELETIONS, Env, FOREGROUND, HOLD, HOLDS, History, LATE, WITHIN, now_second, secs, uid, until,
};

/// Scenario 10: a pod of the Job holds a finalizer of its own. After the TTL-0 delete the Job
/// stays, with a deletionTimestamp and `foregroundDeletion`, as long as that pod exists; once
/// the pod's finalizer goes, the pod and then the Job disappear.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn foreground_deletion_waits_for_a_held_pod() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-foreground").await?;
    let history = History::start(&env, "fg").await?;
    let _controller = env.controller();
    let job = env.create_job("fg", Some(0)).await?;
    let job_uid = uid(&job)?;
    env.create_pod(&job, "fg-held", Some(HOLD)).await?;
    env.create_pod(&job, "fg-free", None).await?;

    env.complete("fg", now_second()).await?;
    history.wait_deleting(&job_uid, WITHIN).await?;
    // The garbage collector deletes both pods; the held one stays terminating.
    wait_for("the held pod to be terminating", WITHIN, || async {
        let pod = env.pods.get_opt("fg-held").await?;
        Ok(pod.and_then(|p| p.metadata.deletion_timestamp).map(|_| ()))
    })
    .await?;
    holds_for("the job to wait for its held pod", HOLDS, || async {
        let job = env.jobs.get_opt("fg").await?;
        Ok(job.is_some_and(|j| {
            j.metadata.deletion_timestamp.is_some()
                && j.metadata
                    .finalizers
                    .unwrap_or_default()
                    .iter()
                    .any(|f| f == FOREGROUND)
        }))
    })
    .await?;
    ensure!(
        history.gone_at(&job_uid).is_none(),
        "job vanished while its pod was held"
    );

    env.clear_pod_finalizers("fg-held").await?;
    wait_for("the held pod to be gone", WITHIN, || async {
        Ok(env.pods.get_opt("fg-held").await?.is_none().then_some(()))
    })
    .await?;
    history.wait_gone(&job_uid, WITHIN).await?;
    Ok(())
}

/// Scenario 11: a finished TTL-0 Job already being deleted (held by a finalizer of the
/// test's, deleted with Background so no `foregroundDeletion`) is left alone: a delete from
/// the controller would add `foregroundDeletion` to it.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn job_already_being_deleted_is_left_alone() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-deleting").await?;
    let history = History::start(&env, "held").await?;
    let _controller = env.controller();
    let job_uid = uid(&env.create_job("held", Some(3600)).await?)?;
    env.jobs
        .patch(
            "held",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": [HOLD]}})),
        )
        .await?;
    env.delete_job("held").await?;
    env.complete("held", now_second() - secs(60)).await?;
    env.set_ttl("held", Some(0)).await?;

    let finalizers_unchanged = || async {
        Ok(history
            .of(&job_uid)
            .iter()
            .filter(|s| s.deletion_timestamp().is_some())
            .all(|s| s.finalizers() == [HOLD.to_string()] && !s.deleted))
    };
    holds_for(
        "the deleting job to keep only the test's finalizer",
        HOLDS,
        finalizers_unchanged,
    )
    .await?;
    ensure!(finalizers_unchanged().await?, "{:?}", history.of(&job_uid));
    env.clear_job_finalizers("held").await?;
    history.wait_gone(&job_uid, WITHIN).await?;
    Ok(())
}

/// Scenario 12 (TTL 10 instead of 30, same shape): Job `again` finishes and is deleted by the
/// test before its TTL; a new, unfinished Job of the same name is not deleted when the old
/// timer fires, and is deleted 10 s after it finishes itself.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn recreated_job_is_judged_on_its_own() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-recreate").await?;
    let history = History::start(&env, "again").await?;
    let _controller = env.controller();
    let old_uid = uid(&env.create_job("again", Some(10)).await?)?;
    let first_finish = now_second();
    env.complete("again", first_finish).await?;
    // The test deletes it; the controller's timer for first_finish+10 stays armed.
    env.delete_job("again").await?;
    history.wait_gone(&old_uid, WITHIN).await?;
    let new_uid = uid(&env.create_job("again", Some(10)).await?)?;
    ensure!(new_uid != old_uid, "a new incarnation");

    // Past the old timer, plus slack: the unfinished new Job is still there.
    until(first_finish + secs(10) + LATE).await;
    history.assert_never_deleted(&new_uid, "old timer fired on the re-created job")?;

    let finished = now_second();
    env.complete("again", finished).await?;
    history
        .assert_deleted_on_time(&new_uid, finished + secs(10))
        .await?;
    Ok(())
}

/// Scenario 13: a TTL-0 Job finishes while the controller is stopped; after a restart the
/// Job is deleted shortly (the initial list re-evaluates every Job).
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn restart_deletes_jobs_that_expired_meanwhile() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-restart").await?;
    let history = History::start(&env, "restart").await?;
    let first = env.controller();
    let job_uid = uid(&env.create_job("restart", Some(0)).await?)?;
    first.stop().await?;

    env.complete("restart", now_second()).await?;
    holds_for(
        "the job to stay while no controller runs",
        HOLDS,
        || async { Ok(history.assert_never_deleted(&job_uid, "stopped").is_ok()) },
    )
    .await?;
    history.assert_never_deleted(&job_uid, "while the controller was stopped")?;

    let started = jiff::Timestamp::now();
    let _second = env.controller();
    let deleting = history.wait_deleting(&job_uid, WITHIN).await?;
    ensure!(
        deleting.at <= started + secs(10),
        "deleted only at {} after the restart at {started}",
        deleting.at
    );
    history.wait_gone(&job_uid, WITHIN).await?;
    Ok(())
}

/// Scenario 14: a Complete condition 20 s in the future (clock skew) with TTL 0: not deleted
/// before that time, deleted shortly after, without any further event.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn finish_time_in_the_future_defers_deletion() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-future").await?;
    let history = History::start(&env, "future").await?;
    let _controller = env.controller();
    let job_uid = uid(&env.create_job("future", Some(0)).await?)?;
    let finishes = now_second() + secs(20);
    env.complete("future", finishes).await?;
    history.assert_deleted_on_time(&job_uid, finishes).await?;
    Ok(())
}
