//! Scenarios 7-9: the TTL edited after the Job finished.

use anyhow::{Result, ensure};
use jiff::Timestamp;
use rkcm_testkit::holds_for;

use crate::harness::{DELETIONS, Env, HOLDS, History, WITHIN, now_second, secs, uid, until};

/// Scenario 7: TTL 5, raised to 60 one second before it expires. The timer armed for
/// finish+5 fires, the fresh re-check sees 60 and the Job stays (checked on the watch history
/// up to finish+20 s); it is deleted at finish+60 s, not before.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn ttl_raised_just_before_expiry_postpones_deletion() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-extend").await?;
    let history = History::start(&env, "extend").await?;
    let _controller = env.controller();
    let job_uid = uid(&env.create_job("extend", Some(5)).await?)?;

    let finished = now_second();
    env.complete("extend", finished).await?;
    until(finished + secs(4)).await;
    history.assert_never_deleted(&job_uid, "before raising the TTL")?;
    env.set_ttl("extend", Some(60)).await?;

    until(finished + secs(20)).await;
    history.assert_never_deleted(&job_uid, "20 s after finishing with TTL raised to 60")?;
    history
        .assert_deleted_on_time(&job_uid, finished + secs(60))
        .await?;
    Ok(())
}

/// Scenario 8: TTL 3600 shortened to 1 after the Job finished: deleted within seconds.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn ttl_shortened_after_finish_deletes_soon() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-shorten").await?;
    let history = History::start(&env, "shorten").await?;
    let _controller = env.controller();
    let job_uid = uid(&env.create_job("shorten", Some(3600)).await?)?;

    let finished = now_second();
    env.complete("shorten", finished).await?;
    holds_for("the job with TTL 3600 to stay", HOLDS, || async {
        Ok(history.assert_never_deleted(&job_uid, "TTL 3600").is_ok())
    })
    .await?;
    history.assert_never_deleted(&job_uid, "TTL 3600")?;
    let edited = Timestamp::now();
    env.set_ttl("shorten", Some(1)).await?;
    // finish+1 s is long past: due at once.
    let deleting = history.wait_deleting(&job_uid, WITHIN).await?;
    ensure!(
        deleting.at <= edited + secs(5),
        "deleted only at {} after the TTL was shortened at {edited}",
        deleting.at
    );
    history.wait_gone(&job_uid, WITHIN).await?;
    Ok(())
}

/// Scenario 9: a TTL of 0 added to a Job that finished without one: deleted promptly.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn ttl_added_after_finish_deletes_promptly() -> Result<()> {
    let _shared = DELETIONS.read().await;
    let env = Env::new("ttl-add").await?;
    let history = History::start(&env, "add").await?;
    let _controller = env.controller();
    let job_uid = uid(&env.create_job("add", None).await?)?;
    env.complete("add", now_second() - secs(30)).await?;
    holds_for("the job without TTL to stay", HOLDS, || async {
        Ok(history.assert_never_deleted(&job_uid, "no TTL yet").is_ok())
    })
    .await?;
    history.assert_never_deleted(&job_uid, "no TTL yet")?;

    let edited = Timestamp::now();
    env.set_ttl("add", Some(0)).await?;
    let deleting = history.wait_deleting(&job_uid, WITHIN).await?;
    ensure!(
        deleting.at <= edited + secs(5),
        "deleted only at {} after the TTL was added at {edited}",
        deleting.at
    );
    history.wait_gone(&job_uid, WITHIN).await?;
    Ok(())
}
