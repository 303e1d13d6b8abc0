//! Suspend/resume (scenarios 9 and 10), exact counts and the recreation backoff across a
//! controller restart.

use anyhow::Result;
use serde_json::json;
use std::time::Duration;

use crate::harness::*;

rkcm_testkit::scenario! {
    suspend_and_resume, "job-suspend", suspend; start = start
}

async fn suspend(env: &Env) -> Result<()> {
    let uid = env
        .start_job(
            "sus",
            json!({"suspend": true, "completions": 4, "parallelism": 2}),
            true,
        )
        .await?;
    let j = wait_condition(env, "sus", "Suspended").await?;
    ensure(
        status(&j).start_time.is_none(),
        "no startTime while suspended",
    )?;
    ensure_conditions(&j, &["Suspended=JobSuspended"])?;
    rkcm_testkit::holds_for("no pods while suspended", HOLDS, || async {
        Ok(env.owned(&uid).await?.is_empty())
    })
    .await?;
    env.wait_event("sus", "Suspended").await?;

    env.patch_job("sus", json!({"spec": {"suspend": false}}))
        .await?;
    let pods = env.wait_active_within(&uid, 2, WITHIN).await?;
    let j = wait_job(env, "sus", "resumed", WITHIN, |j| {
        conditions(j) == vec!["Suspended=JobResumed".to_owned()] && status(j).start_time.is_some()
    })
    .await?;
    let first_start = status(&j).start_time;
    env.wait_event("sus", "Resumed").await?;

    // One pod succeeds; then suspend the running Job: the other pod loses its finalizer and
    // is deleted without counting as failed.
    let done = pods[0].metadata.name.clone().unwrap_or_default();
    env.terminate(&done, 0).await?;
    wait_job(env, "sus", "succeeded=1", WITHIN, |j| {
        status(j).succeeded == Some(1)
    })
    .await?;
    env.patch_job("sus", json!({"spec": {"suspend": true}}))
        .await?;
    let j = wait_job(env, "sus", "suspended again", WITHIN, |j| {
        has_condition(j, "Suspended") && status(j).active.unwrap_or(0) == 0
    })
    .await?;
    ensure(
        status(&j).failed.unwrap_or(0) == 0,
        "removed pods not failed",
    )?;
    ensure(
        status(&j).start_time.is_none(),
        "startTime cleared on suspend",
    )?;
    env.wait_none_active(&uid, "suspended pods gone").await?;
    env.patch_job("sus", json!({"spec": {"suspend": false}}))
        .await?;
    let j = wait_job(env, "sus", "resumed again", WITHIN, |j| {
        !has_condition(j, "Suspended") && status(j).start_time.is_some()
    })
    .await?;
    ensure(
        status(&j).start_time > first_start,
        "the new startTime is later than the first",
    )?;
    let pods = env.wait_active_within(&uid, 2, WITHIN).await?;
    for p in &pods {
        env.terminate(p.metadata.name.as_deref().unwrap_or_default(), 0)
            .await?;
    }
    let pods = env.wait_active_within(&uid, 1, WITHIN).await?;
    env.terminate(pods[0].metadata.name.as_deref().unwrap_or_default(), 0)
        .await?;
    let j = wait_condition(env, "sus", "Complete").await?;
    ensure(
        status(&j).succeeded == Some(4) && status(&j).failed.unwrap_or(0) == 0,
        format!("{:?}", status(&j)),
    )?;
    Ok(())
}

rkcm_testkit::scenario! {
    restart_mid_run_keeps_exact_counts, "job-restart", restart
}

async fn restart(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let uid = env
        .start_job(
            "rst",
            json!({"completions": 9, "parallelism": 3, "backoffLimit": 6}),
            true,
        )
        .await?;
    let mut ctrl = Some(ctrl);
    let mut expected_failed = 0;
    for round in 0..3 {
        let pods = env.wait_active_within(&uid, 3, WITHIN).await?;
        for (i, p) in pods.iter().enumerate() {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            // One failure in the first round; everything else succeeds.
            let code = if round == 0 && i == 0 { 1 } else { 0 };
            if code != 0 {
                expected_failed += 1;
            }
            env.terminate(name, code).await?;
        }
        // Restart the controller right after the pods finished, while it counts them.
        if let Some(c) = ctrl.take() {
            c.stop().await?;
        }
        ctrl = Some(env.start());
        if round == 2 {
            break;
        }
    }
    // The failed pod left one completion open.
    let pods = env.wait_active_within(&uid, 1, WITHIN).await?;
    env.terminate(pods[0].metadata.name.as_deref().unwrap_or_default(), 0)
        .await?;
    let j = wait_job(env, "rst", "Complete", WITHIN * 2, |j| {
        has_condition(j, "Complete")
    })
    .await?;
    let s = status(&j);
    ensure(
        s.succeeded == Some(9) && s.failed == Some(expected_failed),
        format!("succeeded {:?} failed {:?}", s.succeeded, s.failed),
    )?;
    let pods = env.owned(&uid).await?;
    ensure(pods.len() == 10, format!("{} pods", pods.len()))?;
    for p in &pods {
        ensure(!has_tracking(p), "no pod keeps the tracking finalizer")?;
    }
    if let Some(c) = ctrl {
        c.stop().await?;
    }
    Ok(())
}

rkcm_testkit::scenario! {
    a_new_controller_keeps_the_recreation_backoff, "job-backoff-restart", backoff_restart
}

/// A controller that starts after a failure was counted (a restart, a failover, a sharded
/// range taken over) still waits out the 10 s backoff before the replacement, with
/// `backoff_from_counted_pods` (sharded mode turns it on; off, upstream replaces at once).
async fn backoff_restart(env: &Env) -> Result<()> {
    let start = || {
        env.controllers()
            .spawn("job", |ctx| {
                let cfg = rkcm_job::Config {
                    backoff_from_counted_pods: true,
                    ..rkcm_job::Config::default()
                };
                rkcm_job::start(ctx, cfg)
            })
            .run()
    };
    let ctrl = start();
    let uid = env
        .start_job("bk", json!({"backoffLimit": 3}), true)
        .await?;
    let first = env.wait_active_within(&uid, 1, WITHIN).await?;
    let first_name = first[0].metadata.name.clone().unwrap_or_default();
    env.terminate(&first_name, 1).await?;
    let failed_at = std::time::Instant::now();
    wait_job(env, "bk", "the failure counted", WITHIN, |j| {
        status(j).failed == Some(1)
    })
    .await?;
    let counted_after = failed_at.elapsed();
    ensure(
        counted_after < Duration::from_secs(6),
        format!(
            "failure counted after {counted_after:?}; the restart must come before the backoff ends"
        ),
    )?;
    ctrl.stop().await?;
    let ctrl = start();
    wait_replacement_after_backoff(env, &uid, &first_name, failed_at).await?;
    ctrl.stop().await?;
    Ok(())
}
