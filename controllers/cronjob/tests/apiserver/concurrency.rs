//! Concurrency policies (8 Forbid, 9 Replace, 10 Allow; CJ-12, CJ-19) and the controller being
//! down across scheduled instants (CJ-20's rule: only the latest unmet instant runs).

use anyhow::{Result, ensure};
use jiff::Timestamp;
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use crate::harness::*;

/// Starts a per-minute CronJob with `policy` whose first Job (for minute `m`) exists and is
/// listed as active. Returns `m`.
async fn first_run(env: &Env<'_>, policy: &str, extra: serde_json::Value) -> Result<Timestamp> {
    let m = minute_of(Timestamp::now()) + secs(120);
    env.clock.set(m + secs(5));
    let mut spec = json!({"concurrencyPolicy": policy});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    env.create_with_last(&env.cronjob("cj", "* * * * *", spec), m - secs(60), false)
        .await?;
    env.wait_job(&job_name("cj", m), WITHIN).await?;
    wait_for("the first Job in status.active", WITHIN, || async {
        let cj = env.get::<CronJob>("cj").await?;
        Ok((active_names(&cj) == [job_name("cj", m)]).then_some(()))
    })
    .await?;
    Ok(m)
}

rkcm_testkit::scenario! {
    s08_forbid, "cj-forbid", forbid
}

/// Scenario 8: Forbid skips the next minute while the Job runs (JobAlreadyActive), and starts
/// the late run as soon as the Job completes.
async fn forbid(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let run = env.start();
    let m = first_run(&env, "Forbid", json!({})).await?;
    env.clock.set(m + secs(65));
    env.poke("cj").await?;
    env.wait_event(
        "cj",
        "JobAlreadyActive",
        "Not starting job because prior execution is running and concurrency policy is Forbid",
    )
    .await?;
    holds_for("no second Job", HOLDS, || async {
        Ok(env.job_names().await?.len() == 1)
    })
    .await?;
    env.complete_job(&job_name("cj", m), m + secs(5), m + secs(70))
        .await?;
    // The completion alone wakes the controller; the late run is for the skipped minute.
    env.wait_job(&job_name("cj", m + secs(60)), WITHIN).await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s09_replace, "cj-replace", replace
}

/// Scenario 9: Replace deletes the running Job (Background) and starts the new one.
async fn replace(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let run = env.start();
    let m = first_run(&env, "Replace", json!({})).await?;
    env.clock.set(m + secs(65));
    env.poke("cj").await?;
    let new = job_name("cj", m + secs(60));
    env.wait_job(&new, WITHIN).await?;
    env.wait_event(
        "cj",
        "SuccessfulDelete",
        &format!("Deleted job {}", job_name("cj", m)),
    )
    .await?;
    wait_for(
        "only the new Job active, the old one gone",
        WITHIN,
        || async {
            let cj = env.get::<CronJob>("cj").await?;
            Ok(
                (active_names(&cj) == [new.clone()] && env.job_names().await? == [new.clone()])
                    .then_some(()),
            )
        },
    )
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s10_allow, "cj-allow", allow
}

/// Scenario 10: Allow keeps both unfinished runs active.
async fn allow(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let run = env.start();
    let m = first_run(&env, "Allow", json!({})).await?;
    env.clock.set(m + secs(65));
    env.poke("cj").await?;
    let both = vec![job_name("cj", m), job_name("cj", m + secs(60))];
    wait_for("two active Jobs", WITHIN, || async {
        let cj = env.get::<CronJob>("cj").await?;
        Ok((active_names(&cj) == both).then_some(()))
    })
    .await?;
    run.stop().await
}

/// Downtime: with the controller stopped across ten scheduled minutes, a restart creates one
/// Job, for the latest minute, whatever the policy; a starting deadline shorter than the
/// time since that minute means none.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn downtime_runs_only_the_latest_instant() -> Result<()> {
    for (policy, deadline) in [
        ("Forbid", None),
        ("Replace", None),
        ("Allow", None),
        ("Allow", Some(20)),
    ] {
        let base = Base::new("cj-down").await?;
        let result = downtime(&Env::new(&base), policy, deadline).await;
        base.finish(result).await?;
    }
    Ok(())
}

/// One round of the downtime scenario: `policy`, with `deadline` as startingDeadlineSeconds.
async fn downtime(env: &Env<'_>, policy: &str, deadline: Option<i64>) -> Result<()> {
    let run = env.start();
    let m = first_run(env, policy, json!({"startingDeadlineSeconds": deadline})).await?;
    env.complete_job(&job_name("cj", m), m + secs(5), m + secs(10))
        .await?;
    wait_for("the first Job seen completed", WITHIN, || async {
        Ok(active_names(&env.get::<CronJob>("cj").await?)
            .is_empty()
            .then_some(()))
    })
    .await?;
    run.stop().await?;
    // Ten minutes later, 30 s into the minute.
    let later = m + secs(600);
    env.clock.set(later + secs(30));
    let run = env.start();
    env.poke("cj").await?;
    if deadline.is_some() {
        holds_for("no Job past the deadline", HOLDS, || async {
            Ok(env.job_names().await?.len() == 1)
        })
        .await?;
    } else {
        env.wait_job(&job_name("cj", later), WITHIN).await?;
        holds_for("one Job for the downtime", HOLDS, || async {
            Ok(env.job_names().await?.len() == 2)
        })
        .await?;
        ensure!(
            last_schedule(&env.get::<CronJob>("cj").await?) == Some(later),
            "{policy}"
        );
    }
    run.stop().await
}
