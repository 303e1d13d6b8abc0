use jiff::SignedDuration;
use k8s_openapi::api::batch::v1::CronJobStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::plan::tests::{after_top, cronjob, job, top_of_the_hour, ts};

const MIN: i64 = 60;

fn reasons_of(e: &Explanation) -> Vec<&'static str> {
    e.waiting_on.iter().map(|w| w.reason).collect()
}

/// `mycronjob` on `schedule`, last scheduled at `last`.
fn at(schedule: &str, last: Option<Timestamp>) -> CronJob {
    let mut cj = cronjob(schedule);
    cj.status = last.map(|t| CronJobStatus {
        last_schedule_time: Some(Time(t)),
        ..CronJobStatus::default()
    });
    cj
}

fn run(cj: &CronJob, jobs: Vec<Job>, now: Timestamp) -> Explanation {
    let jobs: Vec<Arc<Job>> = jobs.into_iter().map(Arc::new).collect();
    explain(cj, &jobs, &TimeZone::UTC, now)
}

#[test]
fn between_runs_it_is_settled_and_says_when_the_next_run_is() {
    let cj = at("0 * * * ?", Some(top_of_the_hour()));
    let e = run(&cj, vec![], after_top(30 * MIN));
    assert_eq!(e.state, State::Settled, "{e:?}");
    assert!(e.actions.is_empty());
    assert_eq!(reasons_of(&e), ["NextScheduledRun"]);
    assert_eq!(
        e.waiting_on[0].message,
        "next run at 2016-05-19T11:00:00Z (in 1800s), schedule \"0 * * * ?\"; 0 Job(s) active"
    );
    assert_eq!(
        e.waiting_on[0].since.as_deref(),
        Some("2016-05-19T10:00:00Z")
    );
    assert_eq!(e.controller, "cronjob-controller");
}

#[test]
fn a_due_run_is_started() {
    let cj = at("0 * * * ?", None);
    let e = run(&cj, vec![], after_top(30));
    assert_eq!(e.state, State::Acting);
    assert_eq!(
        e.actions,
        [format!(
            "create Job/{} for the run scheduled at 2016-05-19T10:00:00Z",
            plan::job_name(&cj, top_of_the_hour())
        )]
    );
}

#[test]
fn a_suspended_cronjob_is_stalled_until_resumed() {
    let mut cj = at("0 * * * ?", Some(ts("2016-05-19T09:00:00Z")));
    cj.spec.suspend = Some(true);
    let e = run(&cj, vec![], after_top(30));
    assert_eq!(e.state, State::Stalled);
    assert_eq!(reasons_of(&e), ["Suspended"]);
    assert_eq!(
        e.waiting_on[0].message,
        "spec.suspend is true: no Job starts (last scheduled: 2016-05-19T09:00:00Z; 0 Job(s) \
         active)"
    );
    assert_eq!(
        e.remedies,
        [
            r#"resume: kubectl patch cronjob mycronjob -n snazzycats --type=merge -p '{"spec":{"suspend":false}}'"#
        ]
    );
}

#[test]
fn forbid_names_the_active_job_that_skips_the_run() {
    let mut cj = at("0 * * * ?", Some(ts("2016-05-19T09:00:00Z")));
    cj.spec.concurrency_policy = Some("Forbid".into());
    let running = job("mycronjob-prev", None, None);
    status::record_start(&mut cj, &running, ts("2016-05-19T09:00:00Z"));
    let e = run(&cj, vec![running], after_top(30));
    assert_eq!(e.state, State::Waiting, "{e:?}");
    assert_eq!(reasons_of(&e), ["ConcurrencyForbid", "NextScheduledRun"]);
    let w = &e.waiting_on[0];
    assert_eq!(
        w.message,
        "the run scheduled at 2016-05-19T10:00:00Z is skipped: Job/mycronjob-prev is still \
         active and concurrencyPolicy is Forbid"
    );
    assert_eq!(w.objects, ["Job/mycronjob-prev"]);
    assert_eq!(w.since.as_deref(), Some("2016-05-19T10:00:00Z"));
    assert_eq!(
        e.remedies[0],
        "wait for Job/mycronjob-prev to finish, or delete it: kubectl delete job -n snazzycats \
         mycronjob-prev"
    );
    // Once it finished, the sync drops it from status.active and starts the run.
    let done = job("mycronjob-prev", None, Some("Complete"));
    let e = run(&cj, vec![done], after_top(30));
    assert_eq!(e.state, State::Acting);
    assert_eq!(
        e.actions[0],
        "drop finished Job/mycronjob-prev from status.active"
    );
    assert!(e.actions[1].starts_with("create Job/mycronjob-"), "{e:?}");
    // An active entry whose Job is gone is dropped too.
    let e = run(&cj, vec![], after_top(30));
    assert_eq!(
        e.actions[0],
        "drop missing Job/mycronjob-prev from status.active"
    );
}

#[test]
fn a_run_later_than_its_starting_deadline_is_reported_missed() {
    let mut cj = at("0 * * * ?", None);
    cj.spec.starting_deadline_seconds = Some(10);
    let e = run(&cj, vec![], after_top(11 * MIN));
    assert_eq!(e.state, State::Waiting, "{e:?}");
    assert_eq!(
        reasons_of(&e),
        ["MissedStartingDeadline", "NextScheduledRun"]
    );
    assert_eq!(
        e.waiting_on[0].message,
        "the run scheduled at 2016-05-19T10:00:00Z is more than startingDeadlineSeconds (10s) \
         late and is skipped"
    );
    assert_eq!(
        e.waiting_on[0].since.as_deref(),
        Some("2016-05-19T10:00:00Z")
    );
    // Within the deadline it starts.
    let e = run(&cj, vec![], after_top(5));
    assert_eq!(e.state, State::Acting);
    assert!(reasons_of(&e).is_empty());
}

#[test]
fn too_many_missed_start_times_warn_while_the_latest_starts() {
    let cj = at("* * * * *", Some(top_of_the_hour()));
    let e = run(
        &cj,
        vec![],
        top_of_the_hour() + SignedDuration::from_secs(200 * MIN + 30),
    );
    assert_eq!(e.state, State::Acting);
    assert_eq!(reasons_of(&e), ["TooManyMissedStartTimes"]);
    assert!(
        e.waiting_on[0].message.starts_with(
            "more than 100 scheduled start times were missed: too many missed start times."
        ),
        "{}",
        e.waiting_on[0].message
    );
    assert_eq!(
        e.waiting_on[0].since.as_deref(),
        Some("2016-05-19T10:00:00Z")
    );
}

#[test]
fn a_bad_schedule_or_zone_stalls_it() {
    let e = run(&at("0 0 30 2 *", None), vec![], after_top(30));
    assert_eq!(
        (e.state, reasons_of(&e)),
        (State::Stalled, vec!["InvalidSchedule"])
    );
    let e = run(&at("not a schedule", None), vec![], after_top(30));
    assert_eq!(reasons_of(&e), ["InvalidSchedule"]);
    let mut zone = at("0 * * * ?", None);
    zone.spec.time_zone = Some("Mars/Olympus".into());
    let e = run(&zone, vec![], after_top(30));
    assert_eq!(
        (e.state, reasons_of(&e)),
        (State::Stalled, vec!["UnknownTimeZone"])
    );
    assert_eq!(e.remedies, ["correct spec.timeZone"]);
}
