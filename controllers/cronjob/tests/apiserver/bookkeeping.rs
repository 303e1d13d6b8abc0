//! Status and history bookkeeping: no double creation after a lost status write (2),
//! completion (3) and failure (4), history limits (12, 13; CJ-15), missing (14) and
//! unexpected (15) children, cascade on delete (21), foreign owners of the same name (22).

use std::time::Duration;

use anyhow::{Result, ensure};
use jiff::Timestamp;
use kube::api::{DeleteParams, PropagationPolicy};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use crate::harness::*;

/// A per-minute CronJob whose Job for minute `m` has just been created and listed.
async fn one_run(env: &Env<'_>, extra: serde_json::Value) -> Result<(Timestamp, String)> {
    let m = minute_of(Timestamp::now()) + secs(120);
    env.clock.set(m + secs(5));
    env.create_with_last(&env.cronjob("cj", "* * * * *", extra), m - secs(60), false)
        .await?;
    let name = job_name("cj", m);
    env.wait_job(&name, WITHIN).await?;
    wait_for("the Job in status.active", WITHIN, || async {
        let cj = env.get::<CronJob>("cj").await?;
        Ok((active_names(&cj) == [name.clone()] && last_schedule(&cj) == Some(m)).then_some(()))
    })
    .await?;
    Ok((m, name))
}

rkcm_testkit::scenario! {
    s02_no_double_creation, "cj-twice", no_double_creation
}

/// Scenario 2 (the crash between "Job created" and "status written"): with the status put back
/// to its value before the run, the controller creates no second Job and lists the existing
/// one again (through AlreadyExists).
async fn no_double_creation(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let run = env.start();
    let (m, name) = one_run(&env, json!({})).await?;
    let uid = env
        .api::<Job>()
        .get(&name)
        .await?
        .metadata
        .uid
        .expect("uid");
    env.patch_status(
        "cj",
        json!({"active": null, "lastScheduleTime": (m - secs(60)).to_string()}),
    )
    .await?;
    env.poke("cj").await?;
    wait_for("the existing Job listed again", WITHIN, || async {
        let cj = env.get::<CronJob>("cj").await?;
        let active = status_of(&cj).active.unwrap_or_default();
        Ok((active.len() == 1
            && active[0].uid.as_deref() == Some(uid.as_str())
            && last_schedule(&cj) == Some(m))
        .then_some(()))
    })
    .await?;
    holds_for("one Job, one SuccessfulCreate", HOLDS, || async {
        Ok(env.job_names().await? == [name.clone()]
            && env
                .events_with("cj", "SuccessfulCreate")
                .await?
                .iter()
                .map(|e| e.1)
                .sum::<i32>()
                == 1
            && env.events_with("cj", "FailedCreate").await?.is_empty())
    })
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s03_completion, "cj-done", completion
}

/// Scenario 3: a completed child leaves `active`, with SawCompletedJob and
/// `lastSuccessfulTime` = its completion time.
async fn completion(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let run = env.start();
    let (m, name) = one_run(&env, json!({})).await?;
    let done = m + secs(30);
    env.complete_job(&name, m + secs(6), done).await?;
    env.wait_event(
        "cj",
        "SawCompletedJob",
        &format!("Saw completed job: {name}, condition: Complete"),
    )
    .await?;
    wait_for("active empty, lastSuccessfulTime set", WITHIN, || async {
        let cj = env.get::<CronJob>("cj").await?;
        Ok((active_names(&cj).is_empty()
            && status_of(&cj).last_successful_time.map(|t| t.0) == Some(done))
        .then_some(()))
    })
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s04_failure, "cj-fail", failure
}

/// Scenario 4: a failed child leaves `active`; `lastSuccessfulTime` stays unset.
async fn failure(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let run = env.start();
    let (m, name) = one_run(&env, json!({})).await?;
    env.fail_job(&name, m + secs(6), m + secs(30)).await?;
    env.wait_event(
        "cj",
        "SawCompletedJob",
        &format!("Saw completed job: {name}, condition: Failed"),
    )
    .await?;
    wait_for("active empty", WITHIN, || async {
        Ok(active_names(&env.get::<CronJob>("cj").await?)
            .is_empty()
            .then_some(()))
    })
    .await?;
    ensure!(
        status_of(&env.get::<CronJob>("cj").await?)
            .last_successful_time
            .is_none()
    );
    run.stop().await
}

rkcm_testkit::scenario! {
    s12_successful_history_limit, "cj-hist", successful_history_limit
}

/// Scenario 12: successfulJobsHistoryLimit 1 with 3 completed children deletes the 2 oldest by
/// startTime (Background), with SuccessfulDelete events.
async fn successful_history_limit(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let cj = env
        .create_object(&env.cronjob(
            "cj",
            "* * * * *",
            json!({"suspend": true, "successfulJobsHistoryLimit": 1}),
        ))
        .await?;
    let uid = cj.metadata.uid.clone().expect("uid");
    let t0 = Timestamp::now() - secs(3600);
    // Names sort the other way round from start times: the order must come from startTime.
    for (name, start) in [("c-old", 0), ("b-mid", 60), ("a-new", 120)] {
        env.create_child(name, "CronJob", "cj", &uid).await?;
        env.complete_job(name, t0 + secs(start), t0 + secs(start + 30))
            .await?;
    }
    env.clock.set(Timestamp::now());
    let run = env.start();
    wait_for("the two oldest deleted", WITHIN, || async {
        Ok((env.job_names().await? == ["a-new"]).then_some(()))
    })
    .await?;
    env.wait_event("cj", "SuccessfulDelete", "Deleted job c-old")
        .await?;
    env.wait_event("cj", "SuccessfulDelete", "Deleted job b-mid")
        .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s13_failed_history_limit_zero, "cj-hist0", failed_history_limit_zero
}

/// Scenario 13: failedJobsHistoryLimit 0 deletes a child as soon as it fails.
async fn failed_history_limit_zero(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let cj = env
        .create_object(&env.cronjob(
            "cj",
            "* * * * *",
            json!({"suspend": true, "failedJobsHistoryLimit": 0}),
        ))
        .await?;
    let uid = cj.metadata.uid.clone().expect("uid");
    env.clock.set(Timestamp::now());
    let run = env.start();
    env.create_child("doomed", "CronJob", "cj", &uid).await?;
    env.wait_event("cj", "UnexpectedJob", "doomed").await?;
    ensure!(env.job_names().await? == ["doomed"]);
    let now = Timestamp::now();
    env.fail_job("doomed", now - secs(10), now).await?;
    wait_for("the failed Job deleted", WITHIN, || async {
        Ok(env.job_names().await?.is_empty().then_some(()))
    })
    .await?;
    env.wait_event("cj", "SuccessfulDelete", "Deleted job doomed")
        .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s14_missing_active_job, "cj-missing", missing_active_job
}

/// Scenario 14: an active entry for a Job that does not exist is dropped, with MissingJob.
async fn missing_active_job(base: &Base) -> Result<()> {
    let env = Env::new(base);
    env.create_object(&env.cronjob("cj", "* * * * *", json!({"suspend": true})))
        .await?;
    env.patch_status(
        "cj",
        json!({"active": [{
            "apiVersion": "batch/v1", "kind": "Job", "namespace": env.name(),
            "name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"
        }]}),
    )
    .await?;
    env.clock.set(Timestamp::now());
    let run = env.start();
    env.wait_event("cj", "MissingJob", "Active job went missing: ghost")
        .await?;
    wait_for("the entry dropped", WITHIN, || async {
        Ok(active_names(&env.get::<CronJob>("cj").await?)
            .is_empty()
            .then_some(()))
    })
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s15_unexpected_child, "cj-stray", unexpected_child
}

/// Scenario 15: an unfinished child the controller did not list is reported, not adopted.
async fn unexpected_child(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let cj = env
        .create_object(&env.cronjob("cj", "* * * * *", json!({"suspend": true})))
        .await?;
    env.clock.set(Timestamp::now());
    let run = env.start();
    env.create_child(
        "stray",
        "CronJob",
        "cj",
        cj.metadata.uid.as_deref().unwrap_or_default(),
    )
    .await?;
    env.wait_event(
        "cj",
        "UnexpectedJob",
        "Saw a job that the controller did not create or forgot: stray",
    )
    .await?;
    holds_for("active unchanged", HOLDS, || async {
        Ok(active_names(&env.get::<CronJob>("cj").await?).is_empty())
    })
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s21_cascade_on_delete, "cj-cascade", cascade_on_delete
}

/// Scenario 21: deleting the CronJob (Background) lets the garbage collector remove its Jobs.
async fn cascade_on_delete(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let run = env.start();
    let (_, name) = one_run(&env, json!({})).await?;
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    env.api::<CronJob>().delete("cj", &dp).await?;
    wait_for(
        &format!("job {name} collected"),
        Duration::from_secs(60),
        || async {
            Ok(env
                .api::<Job>()
                .get_opt(&name)
                .await?
                .is_none()
                .then_some(()))
        },
    )
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s22_foreign_owner_with_the_same_name, "cj-foreign", foreign_owner_with_the_same_name
}

/// Scenario 22: a Job whose controller reference names the CronJob but another kind (a real
/// ConfigMap of the same name), or another UID, is not a child: no UnexpectedJob, never
/// listed, never deleted by history cleanup even when finished. (The Job with a made-up owner
/// UID is only checked for events: the garbage collector removes it, its owner not existing.)
async fn foreign_owner_with_the_same_name(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let cj = env
        .create_object(&env.cronjob(
            "cj",
            "* * * * *",
            json!({"suspend": true, "successfulJobsHistoryLimit": 0}),
        ))
        .await?;
    let uid = cj.metadata.uid.clone().expect("uid");
    let cm_uid = env.config_map("cj").await?;
    env.clock.set(Timestamp::now());
    let run = env.start();
    env.create_child("other-kind", "ConfigMap", "cj", &cm_uid)
        .await?;
    env.create_child(
        "other-uid",
        "CronJob",
        "cj",
        "00000000-0000-0000-0000-000000000002",
    )
    .await?;
    // A real unlisted child, as a marker that the controller has synced after both.
    env.create_child("real", "CronJob", "cj", &uid).await?;
    env.wait_event("cj", "UnexpectedJob", "real").await?;
    let warned: Vec<String> = env
        .events_with("cj", "UnexpectedJob")
        .await?
        .into_iter()
        .map(|e| e.0)
        .collect();
    ensure!(warned.iter().all(|m| m.ends_with(": real")), "{warned:?}");
    let now = Timestamp::now();
    for name in ["other-kind", "real"] {
        env.complete_job(name, now - secs(20), now - secs(10))
            .await?;
    }
    let kept = || async {
        let names = env.job_names().await?;
        Ok::<_, anyhow::Error>(
            names.iter().all(|n| n != "real") && names.iter().any(|n| n == "other-kind"),
        )
    };
    // The real child goes (history limit 0); the foreign one stays.
    wait_for("the real child deleted", WITHIN, || async {
        Ok(kept().await?.then_some(()))
    })
    .await?;
    holds_for("the foreign Job kept and never listed", HOLDS, || async {
        Ok(kept().await? && active_names(&env.get::<CronJob>("cj").await?).is_empty())
    })
    .await?;
    ensure!(
        env.events_with("cj", "SuccessfulDelete")
            .await?
            .iter()
            .all(|e| e.0 == "Deleted job real")
    );
    run.stop().await
}
