//! When Jobs are created: first run on the real clock (1), catch-up (5), >100 missed (6),
//! startingDeadlineSeconds (7), suspend (11), time zones (16), validation (17), never-firing
//! schedules (18), schedule changes (19), name collisions (20).

use std::time::Duration;

use anyhow::{Result, ensure};
use jiff::Timestamp;
use kube::api::PostParams;
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    s01_first_run_on_the_real_clock, "cj-first", first_run_on_the_real_clock
}

/// Scenario 1 on the real clock: a `*/1` schedule runs at the next minute boundary after
/// creation, never at creation time, with upstream's name, owner, annotation and status.
async fn first_run_on_the_real_clock(base: &Base) -> Result<()> {
    let env = Env::new(base);
    env.clock.set(Timestamp::now());
    let run = env.start();
    let created = env
        .create_object(&env.cronjob("every", "*/1 * * * *", json!({})))
        .await?;
    let created_at = created
        .metadata
        .creation_timestamp
        .clone()
        .expect("created")
        .0;
    let uid = created.metadata.uid.clone().expect("uid");
    let job = wait_for("the first Job", Duration::from_secs(70), || async {
        Ok(env.list::<Job>().await?.into_iter().next())
    })
    .await?;
    let first = minute_of(created_at) + secs(60);
    let name = job.metadata.name.clone().expect("name");
    ensure!(
        name == job_name("every", first),
        "job {name}, expected the minute after {created_at}"
    );
    let r = &job.metadata.owner_references.clone().expect("owner")[0];
    ensure!(
        r.kind == "CronJob" && r.api_version == "batch/v1" && r.name == "every" && r.uid == uid
    );
    ensure!(r.controller == Some(true) && r.block_owner_deletion == Some(true));
    let ann = job.metadata.annotations.clone().unwrap_or_default();
    ensure!(
        ann.get(SCHEDULED_ANNOTATION).map(String::as_str)
            == Some(first.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().as_str()),
        "annotation {ann:?}"
    );
    ensure!(ann.get("note").map(String::as_str) == Some("copied"));
    ensure!(
        job.metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get("app")
            .map(String::as_str)
            == Some("cj-test")
    );
    let cj = wait_for("status.active and lastScheduleTime", WITHIN, || async {
        let cj = env.get::<CronJob>("every").await?;
        Ok((last_schedule(&cj) == Some(first)).then_some(cj))
    })
    .await?;
    let active = status_of(&cj).active.unwrap_or_default();
    ensure!(active.len() == 1, "active {active:?}");
    ensure!(
        active[0].kind.as_deref() == Some("Job")
            && active[0].name.as_deref() == Some(name.as_str())
    );
    env.wait_event("every", "SuccessfulCreate", &format!("Created job {name}"))
        .await?;
    let metrics = rkcm_runtime::metrics::render();
    ensure!(
        metrics.lines().any(|l| l
            .starts_with("cronjob_controller_job_creation_skew_duration_seconds_count")
            && !l.ends_with(" 0")),
        "skew metric not observed"
    );
    run.stop().await
}

rkcm_testkit::scenario! {
    s05_catch_up_runs_only_the_latest, "cj-catchup", catch_up_runs_only_the_latest
}

/// Scenario 5: an hourly CronJob unsuspended 5 h after its last run creates exactly one Job,
/// for the most recent full hour.
async fn catch_up_runs_only_the_latest(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let hour = Timestamp::from_second(Timestamp::now().as_second() / 3600 * 3600)? + secs(3 * 3600);
    env.clock.set(hour + secs(600));
    let run = env.start();
    env.create_with_last(
        &env.cronjob("hourly", "0 * * * *", json!({})),
        hour - secs(5 * 3600),
        false,
    )
    .await?;
    env.wait_job(&job_name("hourly", hour), WITHIN).await?;
    let cj = wait_for("lastScheduleTime", WITHIN, || async {
        let cj = env.get::<CronJob>("hourly").await?;
        Ok((last_schedule(&cj) == Some(hour)).then_some(cj))
    })
    .await?;
    ensure!(active_names(&cj) == [job_name("hourly", hour)]);
    holds_for("exactly one Job", HOLDS, || async {
        Ok(env.job_names().await?.len() == 1)
    })
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s06_too_many_missed_warns_and_runs_the_latest, "cj-many", too_many_missed_warns_and_runs_the_latest
}

/// Scenario 6 (and checklist CJ-17, as the current controller does it): 200 missed minutes
/// give a TooManyMissedTimes warning and still one Job, for the most recent minute.
async fn too_many_missed_warns_and_runs_the_latest(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let m = minute_of(Timestamp::now()) + secs(120);
    env.clock.set(m + secs(5));
    let run = env.start();
    env.create_with_last(
        &env.cronjob("often", "* * * * *", json!({})),
        m - secs(200 * 60),
        false,
    )
    .await?;
    env.wait_job(&job_name("often", m), WITHIN).await?;
    env.wait_event("often", "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew").await?;
    holds_for("exactly one Job", HOLDS, || async {
        Ok(env.job_names().await?.len() == 1)
    })
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s07_starting_deadline_bounds_catch_up, "cj-deadline", starting_deadline_bounds_catch_up
}

/// Scenario 7 (CJ-10, CJ-18): with startingDeadlineSeconds 60, five missed hours and `now` ten
/// minutes past the hour, nothing runs and no MissSchedule is emitted; the next hour runs.
async fn starting_deadline_bounds_catch_up(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let hour = Timestamp::from_second(Timestamp::now().as_second() / 3600 * 3600)? + secs(3 * 3600);
    env.clock.set(hour + secs(600));
    let run = env.start();
    let cj = env.cronjob(
        "hourly",
        "0 * * * *",
        json!({"startingDeadlineSeconds": 60}),
    );
    env.create_with_last(&cj, hour - secs(5 * 3600), false)
        .await?;
    holds_for("no Job", HOLDS, || async {
        Ok(env.list::<Job>().await?.is_empty())
    })
    .await?;
    ensure!(env.events_with("hourly", "MissSchedule").await?.is_empty());
    let next = hour + secs(3600);
    env.clock.set(next + secs(5));
    env.poke("hourly").await?;
    env.wait_job(&job_name("hourly", next), WITHIN).await?;
    ensure!(env.job_names().await?.len() == 1);
    run.stop().await
}

rkcm_testkit::scenario! {
    s11_suspended_creates_nothing, "cj-suspend", suspended_creates_nothing
}

/// Scenario 11 (CJ-14): a suspended CronJob creates nothing across several minutes and its
/// status stays as it was.
async fn suspended_creates_nothing(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let m = minute_of(Timestamp::now()) + secs(120);
    env.clock.set(m + secs(5));
    let run = env.start();
    let last = m - secs(60);
    env.create_with_last(&env.cronjob("sleepy", "* * * * *", json!({})), last, true)
        .await?;
    for k in 0..4 {
        env.clock.set(m + secs(60 * k + 5));
        env.poke("sleepy").await?;
        holds_for("no Job while suspended", Duration::from_secs(1), || async {
            Ok(env.list::<Job>().await?.is_empty())
        })
        .await?;
    }
    let cj = env.get::<CronJob>("sleepy").await?;
    ensure!(
        last_schedule(&cj) == Some(last) && active_names(&cj).is_empty(),
        "status changed: {:?}",
        cj.status
    );
    // Resuming runs the latest missed minute at once.
    env.patch_spec("sleepy", json!({"suspend": false})).await?;
    env.wait_job(&job_name("sleepy", m + secs(180)), WITHIN)
        .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s16_time_zone, "cj-tz", time_zone
}

/// Scenario 16 (CJ-06): `timeZone: Asia/Tokyo` with a schedule naming a Tokyo wall time runs
/// at that instant; the annotation is in Tokyo time.
async fn time_zone(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let b = minute_of(Timestamp::now()) + secs(180);
    let tokyo = jiff::tz::TimeZone::get("Asia/Tokyo")?;
    let wall = b.to_zoned(tokyo);
    let schedule = format!("{} {} * * *", wall.minute(), wall.hour());
    env.clock.set(b + secs(5));
    let run = env.start();
    env.create_object(&env.cronjob("tokyo", &schedule, json!({"timeZone": "Asia/Tokyo"})))
        .await?;
    let job = env.wait_job(&job_name("tokyo", b), WITHIN).await?;
    let ann = job.metadata.annotations.unwrap_or_default();
    let want = wall.strftime("%Y-%m-%dT%H:%M:%S+09:00").to_string();
    ensure!(
        ann.get(SCHEDULED_ANNOTATION) == Some(&want),
        "annotation {ann:?}, want {want}"
    );
    // The same schedule read as UTC would not have run.
    env.create_object(&env.cronjob("utc", &schedule, json!({})))
        .await?;
    holds_for("no Job for the UTC reading", HOLDS, || async {
        Ok(env
            .job_names()
            .await?
            .iter()
            .all(|n| !n.starts_with("utc-")))
    })
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s17_validation, "cj-valid", validation
}

/// Scenario 17 (CJ-05, CJ-08, CJ-01): what the API server refuses.
async fn validation(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let refused = |cj, needle: &'static str| {
        let api = env.api::<CronJob>();
        async move {
            match api.create(&PostParams::default(), &cj).await {
                Ok(_) => anyhow::bail!("accepted, expected {needle:?}"),
                Err(e) => {
                    let msg = e.to_string();
                    ensure!(msg.contains(needle), "{msg} does not contain {needle:?}");
                    Ok(())
                }
            }
        }
    };
    refused(
        env.cronjob("tz", "CRON_TZ=UTC * * * * *", json!({})),
        "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
    )
    .await?;
    refused(
        env.cronjob("local", "* * * * *", json!({"timeZone": "Local"})),
        "timeZone",
    )
    .await?;
    refused(
        env.cronjob("paris", "* * * * *", json!({"timeZone": "Europe/Pariss"})),
        "Europe/Pariss",
    )
    .await?;
    refused(
        env.cronjob(&"x".repeat(53), "* * * * *", json!({})),
        "must be no more than 52 characters",
    )
    .await?;
    refused(
        env.cronjob("minute", "61 * * * *", json!({})),
        "end of range (61) above maximum (59): 61",
    )
    .await?;
    env.create_object(&env.cronjob(&"y".repeat(52), "* * * * *", json!({"suspend": true})))
        .await?;
    Ok(())
}

rkcm_testkit::scenario! {
    s18_never_firing_schedule, "cj-never", never_firing_schedule
}

/// Scenario 18: a schedule that never fires is accepted, warned about once, creates nothing
/// and is not retried in a loop.
async fn never_firing_schedule(base: &Base) -> Result<()> {
    let env = Env::new(base);
    env.clock.set(Timestamp::now());
    let run = env.start();
    env.create_object(&env.cronjob("feb30", "0 0 30 2 *", json!({})))
        .await?;
    env.wait_event("feb30", "InvalidSchedule", "invalid schedule: 0 0 30 2 * : time difference between two schedules is less than 1 second").await?;
    holds_for("one InvalidSchedule, no Job", HOLDS, || async {
        let ev = env.events_with("feb30", "InvalidSchedule").await?;
        Ok(ev.len() == 1 && ev[0].1 == 1 && env.list::<Job>().await?.is_empty())
    })
    .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s19_schedule_change_requeues, "cj-change", schedule_change_requeues
}

/// Scenario 19: changing `@yearly` to `* * * * *` runs at the next minute boundary, without
/// waiting for the old schedule.
async fn schedule_change_requeues(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let b = minute_of(Timestamp::now()) + secs(180);
    env.clock.set(b - secs(6));
    let run = env.start();
    let cj = env
        .create_object(&env.cronjob("yearly", "@yearly", json!({})))
        .await?;
    // Proof that the controller synced it under the old schedule: an unlisted child it
    // reports.
    env.create_child(
        "marker",
        "CronJob",
        "yearly",
        cj.metadata.uid.as_deref().unwrap_or_default(),
    )
    .await?;
    env.wait_event("yearly", "UnexpectedJob", "marker").await?;
    env.patch_spec("yearly", json!({"schedule": "* * * * *"}))
        .await?;
    // Only the requeue computed at the change can make this happen within 15 s: nothing else
    // wakes the controller.
    env.wait_job(&job_name("yearly", b), Duration::from_secs(15))
        .await?;
    run.stop().await
}

rkcm_testkit::scenario! {
    s20_name_collision, "cj-collide", name_collision
}

/// Scenario 20: a Job with the next run's name that the CronJob does not control is neither
/// adopted nor reported as a failed create.
async fn name_collision(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let m = minute_of(Timestamp::now()) + secs(120);
    env.clock.set(m - secs(3));
    let run = env.start();
    let taken = job_name("clash", m);
    let job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
        "metadata": {"name": taken},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}
    }))?;
    env.api::<Job>()
        .create(&PostParams::default(), &job)
        .await?;
    env.create_with_last(
        &env.cronjob("clash", "* * * * *", json!({})),
        m - secs(60),
        false,
    )
    .await?;
    wait_for("the clock to pass the minute", WITHIN, || async {
        Ok((env.clock.now() > m + secs(2)).then_some(()))
    })
    .await?;
    holds_for("nothing adopted, nothing failed", HOLDS, || async {
        let cj = env.get::<CronJob>("clash").await?;
        Ok(active_names(&cj).is_empty()
            && last_schedule(&cj) == Some(m - secs(60))
            && env.events_with("clash", "FailedCreate").await?.is_empty()
            && env.job_names().await? == [taken.clone()])
    })
    .await?;
    let j = env.api::<Job>().get(&taken).await?;
    ensure!(
        j.metadata.owner_references.is_none(),
        "adopted: {:?}",
        j.metadata.owner_references
    );
    run.stop().await
}
