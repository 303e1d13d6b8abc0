//! Tables from upstream `pkg/controller/cronjob/utils_test.go` (`TestMostRecentScheduleTime`,
//! `TestNextScheduleTimeDuration`, `TestByJobStartTime`, `TestGetJobFromTemplate2`) and
//! scheduling decisions of `TestControllerV2SyncCronJob`.

use super::*;
use k8s_openapi::api::batch::v1::{
    CronJobSpec, CronJobStatus, JobCondition, JobStatus, JobTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub(crate) fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

pub(crate) fn top_of_the_hour() -> Timestamp {
    ts("2016-05-19T10:00:00Z")
}

pub(crate) fn after_top(secs: i64) -> Timestamp {
    top_of_the_hour() + SignedDuration::from_secs(secs)
}

const MIN: i64 = 60;
const HOUR: i64 = 3600;

pub(crate) fn cronjob(schedule: &str) -> CronJob {
    CronJob {
        metadata: ObjectMeta {
            name: Some("mycronjob".into()),
            namespace: Some("snazzycats".into()),
            uid: Some("1a2b3c".into()),
            creation_timestamp: Some(Time(ts("2016-05-19T09:59:00Z"))),
            ..Default::default()
        },
        spec: CronJobSpec {
            schedule: schedule.into(),
            concurrency_policy: Some("Allow".into()),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some([("a".to_string(), "b".to_string())].into()),
                    annotations: Some([("x".to_string(), "y".to_string())].into()),
                    ..Default::default()
                }),
                spec: Some(Default::default()),
            },
            ..Default::default()
        },
        status: None,
    }
}

fn with(created: Timestamp, last: Option<Timestamp>, sds: Option<i64>, schedule: &str) -> CronJob {
    let mut cj = cronjob(schedule);
    cj.metadata.creation_timestamp = Some(Time(created));
    cj.spec.starting_deadline_seconds = sds;
    cj.status = last.map(|t| CronJobStatus {
        last_schedule_time: Some(Time(t)),
        ..Default::default()
    });
    cj
}

#[test]
#[allow(clippy::type_complexity)]
#[allow(clippy::too_many_lines, reason = "a table test: one case per row")]
fn most_recent_schedule_time_table() {
    let half = after_top(30 * MIN);
    let minute_after = after_top(MIN);
    // (name, cronjob, include deadline, now, earliest, most recent, missed, error)
    let cases: Vec<(
        &str,
        CronJob,
        bool,
        Timestamp,
        Timestamp,
        Option<Timestamp>,
        Missed,
        bool,
    )> = vec![
        (
            "now before next schedule",
            with(top_of_the_hour(), None, None, "0 * * * *"),
            false,
            after_top(30),
            top_of_the_hour(),
            None,
            Missed::None,
            false,
        ),
        (
            "now just after next schedule",
            with(top_of_the_hour(), None, None, "0 * * * *"),
            false,
            after_top(61 * MIN),
            top_of_the_hour(),
            Some(after_top(60 * MIN)),
            Missed::None,
            false,
        ),
        (
            "missed 5 schedules",
            with(after_top(10), None, None, "0 * * * *"),
            false,
            after_top(301 * MIN),
            after_top(10),
            Some(after_top(300 * MIN)),
            Missed::Few,
            false,
        ),
        (
            "complex schedule",
            with(top_of_the_hour(), Some(half), None, "30 6-16/4 * * 1-5"),
            false,
            after_top(24 * HOUR + 31 * MIN),
            half,
            Some(after_top(24 * HOUR + 30 * MIN)),
            Missed::Few,
            false,
        ),
        (
            "another complex schedule",
            with(top_of_the_hour(), Some(half), None, "30 10,11,12 * * 1-5"),
            false,
            after_top(30 * HOUR + 30 * MIN),
            half,
            None,
            Missed::Few,
            false,
        ),
        (
            "complex schedule with longer diff between executions",
            with(top_of_the_hour(), Some(half), None, "30 6-16/4 * * 1-5"),
            false,
            after_top(96 * HOUR + 31 * MIN),
            half,
            Some(after_top(96 * HOUR + 30 * MIN)),
            Missed::Few,
            false,
        ),
        (
            "complex schedule with shorter diff between executions",
            with(top_of_the_hour(), None, None, "30 6-16/4 * * 1-5"),
            false,
            after_top(24 * HOUR + 31 * MIN),
            top_of_the_hour(),
            Some(after_top(24 * HOUR + 30 * MIN)),
            Missed::Few,
            false,
        ),
        (
            "@every schedule",
            with(
                after_top(-59 * MIN),
                Some(minute_after),
                Some(10),
                "@every 1h",
            ),
            false,
            after_top(7 * 24 * HOUR),
            minute_after,
            Some(after_top(6 * 24 * HOUR + 23 * HOUR + MIN)),
            Missed::Many,
            false,
        ),
        (
            "rogue cronjob",
            with(after_top(10), None, None, "59 23 31 2 *"),
            false,
            after_top(HOUR),
            after_top(10),
            None,
            Missed::None,
            true,
        ),
        (
            "earliestTime being CreationTimestamp and LastScheduleTime",
            with(
                top_of_the_hour(),
                Some(top_of_the_hour()),
                None,
                "0 * * * *",
            ),
            false,
            after_top(30),
            top_of_the_hour(),
            None,
            Missed::None,
            false,
        ),
        (
            "earliestTime being LastScheduleTime",
            with(top_of_the_hour(), Some(half), None, "*/5 * * * *"),
            false,
            after_top(31 * MIN),
            half,
            None,
            Missed::None,
            false,
        ),
        (
            "earliestTime being LastScheduleTime (within StartingDeadlineSeconds)",
            with(top_of_the_hour(), Some(half), Some(60), "*/5 * * * *"),
            false,
            after_top(31 * MIN),
            half,
            None,
            Missed::None,
            false,
        ),
        (
            "earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)",
            with(top_of_the_hour(), Some(half), Some(60), "*/5 * * * *"),
            true,
            after_top(32 * MIN),
            after_top(31 * MIN),
            None,
            Missed::None,
            false,
        ),
        // Not upstream's: 200 minutes of a per-minute schedule, and 100 exactly.
        (
            "200 missed minutes",
            with(
                top_of_the_hour(),
                Some(top_of_the_hour()),
                None,
                "* * * * *",
            ),
            true,
            after_top(200 * MIN + 30),
            top_of_the_hour(),
            Some(after_top(200 * MIN)),
            Missed::Many,
            false,
        ),
        (
            "100 missed minutes",
            with(
                top_of_the_hour(),
                Some(top_of_the_hour()),
                None,
                "* * * * *",
            ),
            true,
            after_top(100 * MIN + 30),
            top_of_the_hour(),
            Some(after_top(100 * MIN)),
            Missed::Few,
            false,
        ),
        (
            "101 missed minutes",
            with(
                top_of_the_hour(),
                Some(top_of_the_hour()),
                None,
                "* * * * *",
            ),
            true,
            after_top(101 * MIN + 30),
            top_of_the_hour(),
            Some(after_top(101 * MIN)),
            Missed::Many,
            false,
        ),
    ];
    for (name, cj, sds, now, earliest, recent, missed, want_err) in cases {
        let sched = schedule::parse_standard(&cj.spec.schedule).expect(name);
        let got = most_recent_schedule_time(&cj, now, &sched, &TimeZone::UTC, sds);
        if want_err {
            assert!(got.is_err(), "{name}: {got:?}");
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.earliest, earliest, "{name}: earliest");
        assert_eq!(got.most_recent, recent, "{name}: most recent");
        assert_eq!(got.missed, missed, "{name}: missed");
    }
}

#[test]
fn next_schedule_time_duration_table() {
    let half = after_top(30 * MIN);
    let two_hours = after_top(2 * HOUR);
    let delta = consts::NEXT_SCHEDULE_DELTA;
    let cases = vec![
        (
            "complex schedule skipping weekend",
            with(top_of_the_hour(), Some(half), None, "30 6-16/4 * * 1-5"),
            after_top(24 * HOUR + 31 * MIN),
            SignedDuration::from_secs(3 * HOUR + 59 * MIN) + delta,
        ),
        (
            "another complex schedule skipping weekend",
            with(top_of_the_hour(), Some(half), None, "30 10,11,12 * * 1-5"),
            after_top(30 * HOUR + 30 * MIN),
            SignedDuration::from_secs(66 * HOUR) + delta,
        ),
        (
            "once a week cronjob, missed two runs",
            with(top_of_the_hour(), Some(two_hours), None, "0 12 * * 4"),
            after_top(19 * 24 * HOUR + HOUR + 30 * MIN),
            SignedDuration::from_secs(48 * HOUR + 30 * MIN) + delta,
        ),
        (
            "no previous run of a cronjob",
            with(top_of_the_hour(), None, None, "0 12 * * 5"),
            after_top(6 * HOUR),
            SignedDuration::from_secs(20 * HOUR) + delta,
        ),
        (
            // A sync woken 3 ms early (the wall clock slewed against the queue's timer)
            // finds nothing due and waits for the rest, 3 ms plus the 5 ms pad.
            "woken just before the instant",
            with(
                top_of_the_hour(),
                Some(top_of_the_hour()),
                None,
                "* * * * *",
            ),
            after_top(MIN) - SignedDuration::from_millis(3),
            SignedDuration::from_millis(8),
        ),
    ];
    for (name, cj, now, want) in cases {
        let sched = schedule::parse_standard(&cj.spec.schedule).expect(name);
        assert_eq!(
            next_schedule_time_duration(&cj, now, &sched, &TimeZone::UTC),
            want,
            "{name}"
        );
    }
}

pub(crate) fn job(name: &str, start: Option<Timestamp>, condition: Option<&str>) -> Job {
    Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("snazzycats".into()),
            uid: Some(format!("uid-{name}")),
            owner_references: Some(vec![owner_reference(&cronjob("* * * * *"))]),
            ..Default::default()
        },
        spec: None,
        status: Some(JobStatus {
            start_time: start.map(Time),
            conditions: condition.map(|c| {
                vec![JobCondition {
                    type_: c.into(),
                    status: "True".into(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
    }
}

#[test]
fn history_deletes_oldest_beyond_limits() {
    let mut cj = cronjob("* * * * *");
    cj.spec.successful_jobs_history_limit = Some(1);
    cj.spec.failed_jobs_history_limit = Some(0);
    let t = |m| Some(after_top(m * MIN));
    let jobs = [
        job("s3", t(3), Some("Complete")),
        job("s1", t(1), Some("Complete")),
        job("s-none", None, Some("Complete")),
        job("s2", t(2), Some("Complete")),
        job("s2b", t(2), Some("Complete")),
        job("running", t(0), None),
        job("f1", t(1), Some("Failed")),
    ];
    let refs: Vec<&Job> = jobs.iter().collect();
    let names: Vec<_> = history_deletions(&cj, &refs)
        .iter()
        .map(|j| j.metadata.name.clone().unwrap_or_default())
        .collect();
    // Oldest first, ties by name, never-started last; failed ones after the successful ones.
    assert_eq!(names, ["s1", "s2", "s2b", "s3", "f1"]);
    cj.spec.successful_jobs_history_limit = None;
    cj.spec.failed_jobs_history_limit = None;
    assert!(history_deletions(&cj, &refs).is_empty());
    cj.spec.successful_jobs_history_limit = Some(3);
    let names: Vec<_> = history_deletions(&cj, &refs)
        .iter()
        .map(|j| j.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["s1", "s2"], "3 kept, failed limit unset");
}

#[test]
fn children_resolve_by_kind_name_and_uid() {
    let cj = cronjob("* * * * *");
    let mut j = job("a", None, None);
    assert!(is_child(&j, &cj));
    j.metadata.owner_references.as_mut().expect("refs")[0].uid = "other".into();
    assert!(!is_child(&j, &cj), "another UID");
    let mut j = job("a", None, None);
    j.metadata.owner_references.as_mut().expect("refs")[0].kind = "ConfigMap".into();
    assert!(!is_child(&j, &cj), "another kind");
    let mut j = job("a", None, None);
    j.metadata.owner_references.as_mut().expect("refs")[0].controller = Some(false);
    assert!(!is_child(&j, &cj), "not the controller");
}

#[test]
fn job_from_template_as_upstream() {
    let cj = cronjob("* * * * *");
    let scheduled = ts("2016-05-19T10:01:00Z");
    let job = job_from_template(&cj, scheduled, &TimeZone::UTC).expect("job");
    assert_eq!(job.metadata.name.as_deref(), Some("mycronjob-24394201"));
    assert_eq!(job.metadata.namespace.as_deref(), Some("snazzycats"));
    assert_eq!(
        job.metadata.labels,
        Some([("a".to_string(), "b".to_string())].into())
    );
    let ann = job.metadata.annotations.clone().expect("annotations");
    assert_eq!(ann.get("x").map(String::as_str), Some("y"));
    assert_eq!(
        ann.get(consts::SCHEDULED_TIMESTAMP_ANNOTATION)
            .map(String::as_str),
        Some("2016-05-19T10:01:00Z")
    );
    let r = &job.metadata.owner_references.expect("owner")[0];
    assert_eq!(
        (
            r.api_version.as_str(),
            r.kind.as_str(),
            r.name.as_str(),
            r.uid.as_str()
        ),
        ("batch/v1", "CronJob", "mycronjob", "1a2b3c")
    );
    assert_eq!(
        (r.controller, r.block_owner_deletion),
        (Some(true), Some(true))
    );
    // In the CronJob's zone when set; in UTC otherwise, whatever the local zone.
    let mut tokyo = cj.clone();
    tokyo.spec.time_zone = Some("Asia/Tokyo".into());
    let job = job_from_template(&tokyo, scheduled, &TimeZone::UTC).expect("job");
    assert_eq!(
        job.metadata
            .annotations
            .expect("a")
            .get(consts::SCHEDULED_TIMESTAMP_ANNOTATION)
            .map(String::as_str),
        Some("2016-05-19T19:01:00+09:00")
    );
    let ny = jiff::tz::db().get("America/New_York").expect("ny");
    let job = job_from_template(&cj, scheduled, &ny).expect("job");
    assert_eq!(
        job.metadata
            .annotations
            .expect("a")
            .get(consts::SCHEDULED_TIMESTAMP_ANNOTATION)
            .map(String::as_str),
        Some("2016-05-19T10:01:00Z")
    );
    let mut bad = cj.clone();
    bad.spec.time_zone = Some("bad timezone".into());
    assert!(job_from_template(&bad, scheduled, &TimeZone::UTC).is_err());
}

#[test]
fn rfc_formats() {
    assert_eq!(
        rfc1123z_utc(ts("2006-01-02T15:04:05Z")),
        "Mon, 02 Jan 2006 15:04:05 +0000"
    );
    let ny = jiff::tz::db().get("America/New_York").expect("ny");
    assert_eq!(
        rfc3339_in(ts("2016-05-19T10:01:00Z"), &ny),
        "2016-05-19T06:01:00-04:00"
    );
}

fn decide(cj: &CronJob, now: Timestamp) -> SchedulePlan {
    plan_schedule(cj, now, &TimeZone::UTC)
}

fn reasons_of(p: &SchedulePlan) -> Vec<&'static str> {
    p.events.iter().map(|e| e.reason).collect()
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn schedule_decisions() {
    let just_before = ts("2016-05-19T09:59:00Z");
    let just_after = ts("2016-05-19T10:01:00Z");
    let delta = consts::NEXT_SCHEDULE_DELTA;

    // Not time yet: requeue for the hour.
    let cj = with(just_before, None, None, "0 * * * ?");
    let p = decide(&cj, just_before);
    assert!(matches!(p.action, Action::Requeue(d) if d == SignedDuration::from_secs(60) + delta));
    assert!(p.events.is_empty());

    // Time: start the Job for 10:00.
    let p = decide(&cj, just_after);
    let Action::Start(s) = p.action else {
        panic!("{p:?}")
    };
    assert_eq!(s.scheduled, top_of_the_hour());
    assert_eq!(s.job.metadata.name.as_deref(), Some("mycronjob-24394200"));
    assert!(s.replace.is_empty());

    // Suspended, deleted: nothing, no requeue.
    let mut suspended = cj.clone();
    suspended.spec.suspend = Some(true);
    assert!(matches!(
        decide(&suspended, just_after).action,
        Action::Stop
    ));
    let mut deleting = cj.clone();
    deleting.metadata.deletion_timestamp = Some(Time(just_after));
    assert!(matches!(decide(&deleting, just_after).action, Action::Stop));

    // Bad schedule, bad zone, never-firing schedule: one warning, no requeue.
    let bad = with(just_before, None, None, "obvious error schedule");
    let p = decide(&bad, just_after);
    assert!(matches!(p.action, Action::Stop));
    assert_eq!(reasons_of(&p), ["UnparseableSchedule"]);
    assert_eq!(
        p.events[0].message,
        "unparseable schedule: \"obvious error schedule\" : expected exactly 5 fields, found 3: [obvious error schedule]"
    );
    let mut bad_zone = cj.clone();
    bad_zone.spec.time_zone = Some("bad timezone".into());
    let p = decide(&bad_zone, just_after);
    assert!(matches!(p.action, Action::Stop));
    assert_eq!(reasons_of(&p), ["UnknownTimeZone"]);
    assert_eq!(
        p.events[0].message,
        "invalid timeZone: \"bad timezone\": unknown time zone bad timezone"
    );
    let never = with(just_before, None, None, "0 0 30 2 *");
    let p = decide(&never, just_after);
    assert!(matches!(p.action, Action::Stop));
    assert_eq!(reasons_of(&p), ["InvalidSchedule"]);
    assert_eq!(
        p.events[0].message,
        "invalid schedule: 0 0 30 2 * : time difference between two schedules is less than 1 second"
    );

    // TZ in the schedule: warned about, still used.
    let mut tz = with(just_before, None, None, "TZ=UTC 0 * * * ?");
    tz.spec.time_zone = Some("America/New_York".into());
    let p = decide(&tz, just_after);
    assert_eq!(reasons_of(&p), ["UnsupportedSchedule"]);
    assert!(matches!(p.action, Action::Start(_)));

    // Past the starting deadline: MissSchedule and a requeue for the next hour.
    let late = with(just_before, None, Some(10), "0 * * * ?");
    let now = just_after + SignedDuration::from_secs(11 * 60);
    let p = decide(&late, now);
    assert!(
        matches!(p.action, Action::Requeue(d) if d == SignedDuration::from_secs(HOUR - MIN - 11 * MIN) + delta),
        "{p:?}"
    );
    assert!(
        p.events.is_empty(),
        "deadline already excludes the instant: {p:?}"
    );
    // The deadline also bounds the search, so a late instant is never found: no
    // MissSchedule (upstream emits it only if both disagree, which they cannot).
    let late = with(just_before, None, Some(30), "0 * * * ?");
    let p = decide(&late, ts("2016-05-19T10:00:45Z"));
    assert!(p.events.is_empty(), "{p:?}");
    assert!(matches!(p.action, Action::Requeue(_)));

    // Forbid with an active Job: JobAlreadyActive, requeue.
    let mut forbid = with(
        just_before,
        Some(ts("2016-05-19T09:01:00Z")),
        None,
        "0 * * * ?",
    );
    forbid.spec.concurrency_policy = Some("Forbid".into());
    let active_job = job("mycronjob-24406561", None, None);
    crate::status::record_start(&mut forbid, &active_job, ts("2016-05-19T09:01:00Z"));
    let p = decide(&forbid, just_after);
    assert_eq!(reasons_of(&p), ["JobAlreadyActive"]);
    assert!(matches!(p.action, Action::Requeue(_)));
    // Replace: start, deleting the active one.
    let mut replace = forbid.clone();
    replace.spec.concurrency_policy = Some("Replace".into());
    let Action::Start(s) = decide(&replace, just_after).action else {
        panic!()
    };
    assert_eq!(s.replace.len(), 1);
    // Allow: start, keep it.
    let mut allow = forbid.clone();
    allow.spec.concurrency_policy = Some("Allow".into());
    let Action::Start(s) = decide(&allow, just_after).action else {
        panic!()
    };
    assert!(s.replace.is_empty());

    // Already started for this instant (by lastScheduleTime or by name): requeue only.
    let done = with(just_before, Some(top_of_the_hour()), None, "0 * * * ?");
    assert!(matches!(
        decide(&done, just_after).action,
        Action::Requeue(_)
    ));

    // 200 missed minutes: warning, and one Job for the latest minute.
    let many = with(just_before, Some(top_of_the_hour()), None, "* * * * *");
    let p = decide(&many, after_top(200 * MIN + 30));
    assert_eq!(reasons_of(&p), ["TooManyMissedTimes"]);
    let Action::Start(s) = p.action else { panic!() };
    assert_eq!(s.scheduled, after_top(200 * MIN));
}

#[test]
fn catch_up_worked_example() {
    // A per-minute schedule, last run 08:29, the controller down until 10:21:30.
    let last = ts("2016-05-19T08:29:00Z");
    let now = ts("2016-05-19T10:21:30Z");
    let cj = with(last, Some(last), None, "* * * * *");
    let p = decide(&cj, now);
    assert_eq!(reasons_of(&p), ["TooManyMissedTimes"], "112 missed");
    let Action::Start(s) = p.action else { panic!() };
    assert_eq!(s.scheduled, ts("2016-05-19T10:21:00Z"));
    let cj = with(last, Some(last), Some(200), "* * * * *");
    let p = decide(&cj, now);
    assert!(p.events.is_empty(), "3 missed in the window");
    let Action::Start(s) = p.action else { panic!() };
    assert_eq!(s.scheduled, ts("2016-05-19T10:21:00Z"));
}

#[test]
fn each_child_asks_for_its_step() {
    let mut cj = cronjob("* * * * *");
    let listed_running = job("listed-running", None, None);
    let listed_done = job("listed-done", None, Some("Complete"));
    let listed_failed = job("listed-failed", None, Some("Failed"));
    for j in [&listed_running, &listed_done, &listed_failed] {
        crate::status::record_start(&mut cj, j, top_of_the_hour());
    }
    let saw = |name: &str, condition: &str| {
        Some(PlannedEvent::normal(
            reasons::SAW_COMPLETED_JOB,
            format!("Saw completed job: {name}, condition: {condition}"),
        ))
    };
    let cases = vec![
        ("listed and running", listed_running, ChildStep::Keep),
        (
            "unlisted and running",
            job("stray", None, None),
            ChildStep::Confirm,
        ),
        (
            "listed and complete",
            listed_done,
            ChildStep::Finished {
                leave_active: saw("listed-done", "Complete"),
                succeeded: true,
            },
        ),
        (
            "listed and failed",
            listed_failed,
            ChildStep::Finished {
                leave_active: saw("listed-failed", "Failed"),
                succeeded: false,
            },
        ),
        (
            "unlisted and complete",
            job("old", None, Some("Complete")),
            ChildStep::Finished {
                leave_active: None,
                succeeded: true,
            },
        ),
    ];
    for (name, j, want) in cases {
        assert_eq!(child_step(&cj, &j), want, "{name}");
    }
    assert_eq!(
        unexpected_job_event(&job("stray", None, None)).message,
        "Saw a job that the controller did not create or forgot: stray"
    );
}

/// A running child the status forgot (crash between its create and the status write): its
/// scheduled time counts as started when later than `lastScheduleTime`, its name is the one
/// the controller gives that time and the time is not in the future; a finished one, an
/// older one, a hand-made one carrying the annotation, a future one, or one without (or with
/// an unreadable) annotation does not.
#[test]
fn a_forgotten_running_child_counts_as_started() {
    let annotated = |name: &str, at: &str, condition: Option<&str>| {
        let mut j = job(name, None, condition);
        j.metadata.annotations = Some(
            [(
                consts::SCHEDULED_TIMESTAMP_ANNOTATION.to_string(),
                at.to_string(),
            )]
            .into(),
        );
        j
    };
    let last = ts("2016-05-19T10:00:00Z");
    let cj = with(ts("2016-05-19T09:00:00Z"), Some(last), None, "*/2 * * * *");
    let never_ran = with(ts("2016-05-19T09:00:00Z"), None, None, "*/2 * * * *");
    let now = ts("2016-05-19T10:05:00Z");
    // The names the controller gives 10:02 and 10:04 UTC (Unix minutes).
    let (at_1002, at_1004) = ("mycronjob-24394202", "mycronjob-24394204");
    let cases = vec![
        (
            "newer and running",
            &cj,
            annotated(at_1002, "2016-05-19T10:02:00Z", None),
            Some(ts("2016-05-19T10:02:00Z")),
        ),
        (
            "offset of the CronJob's zone",
            &cj,
            annotated(at_1004, "2016-05-19T12:04:00+02:00", None),
            Some(ts("2016-05-19T10:04:00Z")),
        ),
        (
            "no lastScheduleTime yet",
            &never_ran,
            annotated(at_1002, "2016-05-19T10:02:00Z", None),
            Some(ts("2016-05-19T10:02:00Z")),
        ),
        (
            "the recorded slot",
            &cj,
            annotated("mycronjob-24394200", "2016-05-19T10:00:00Z", None),
            None,
        ),
        (
            "finished",
            &cj,
            annotated(at_1002, "2016-05-19T10:02:00Z", Some("Complete")),
            None,
        ),
        (
            "made by hand, carrying the annotation",
            &cj,
            annotated("my-manual-run", "2016-05-19T10:02:00Z", None),
            None,
        ),
        (
            "named for another time than its annotation",
            &cj,
            annotated(at_1004, "2016-05-19T10:02:00Z", None),
            None,
        ),
        (
            "a time yet to come, with its name",
            &cj,
            annotated("mycronjob-24394210", "2016-05-19T10:10:00Z", None),
            None,
        ),
        ("unreadable", &cj, annotated("f", "yesterday", None), None),
        ("no annotation", &cj, job(at_1002, None, None), None),
    ];
    for (name, cj, j, want) in cases {
        assert_eq!(forgotten_start(cj, &j, now), want, "{name}");
    }
}

#[test]
fn active_entries_the_cache_lacks_are_confirmed() {
    let mut cj = cronjob("* * * * *");
    for name in ["a", "b", "c"] {
        crate::status::record_start(&mut cj, &job(name, None, None), top_of_the_hour());
    }
    let cached: HashSet<String> = ["uid-b".to_string()].into();
    let names: Vec<_> = unlisted_active(&cj, &cached)
        .into_iter()
        .filter_map(|r| r.name)
        .collect();
    assert_eq!(names, vec!["a", "c"]);
    assert!(unlisted_active(&cronjob("* * * * *"), &cached).is_empty());
    assert_eq!(missing_job_event("a").message, "Active job went missing: a");
}

#[test]
fn a_job_found_under_the_planned_name() {
    let mut cj = cronjob("* * * * *");
    let ours = job("mycronjob-1", None, None);
    let mut foreign = ours.clone();
    if let Some(r) = foreign
        .metadata
        .owner_references
        .as_mut()
        .and_then(|o| o.first_mut())
    {
        r.uid = "older-cronjob".into();
    }
    let mut orphan = ours.clone();
    orphan.metadata.owner_references = None;
    assert_eq!(existing_job(&cj, &foreign), Existing::NotOurs);
    assert_eq!(existing_job(&cj, &orphan), Existing::NotOurs);
    assert_eq!(existing_job(&cj, &ours), Existing::Adopt);
    crate::status::record_start(&mut cj, &ours, top_of_the_hour());
    assert_eq!(existing_job(&cj, &ours), Existing::AlreadyActive);
}
