use super::*;
use crate::plan::tests::{cronjob, job, ts};
use k8s_openapi::api::batch::v1::CronJobStatus;

fn completed_at(name: &str, at: Option<&str>) -> Job {
    let mut j = job(name, None, Some("Complete"));
    if let Some(s) = j.status.as_mut() {
        s.completion_time = at.map(|t| Time(ts(t)));
    }
    j
}

/// (name, lastSuccessfulTime before, the Job's completion, changed, after)
type SuccessCase = (
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    bool,
    Option<&'static str>,
);

#[test]
fn last_successful_time_is_the_newest_completion() {
    let cases: Vec<SuccessCase> = vec![
        (
            "first success",
            None,
            Some("2016-05-19T10:00:00Z"),
            true,
            Some("2016-05-19T10:00:00Z"),
        ),
        (
            "newer success",
            Some("2016-05-19T09:00:00Z"),
            Some("2016-05-19T10:00:00Z"),
            true,
            Some("2016-05-19T10:00:00Z"),
        ),
        (
            "older success",
            Some("2016-05-19T11:00:00Z"),
            Some("2016-05-19T10:00:00Z"),
            false,
            Some("2016-05-19T11:00:00Z"),
        ),
        (
            "same success",
            Some("2016-05-19T10:00:00Z"),
            Some("2016-05-19T10:00:00Z"),
            false,
            Some("2016-05-19T10:00:00Z"),
        ),
        // Upstream marks the status changed even when the Job has no completion time yet.
        ("no completion time", None, None, true, None),
        (
            "no completion time, earlier success",
            Some("2016-05-19T09:00:00Z"),
            None,
            false,
            Some("2016-05-19T09:00:00Z"),
        ),
    ];
    for (name, before, completion, changed, after) in cases {
        let mut cj = cronjob("* * * * *");
        cj.status = Some(CronJobStatus {
            last_successful_time: before.map(|t| Time(ts(t))),
            ..Default::default()
        });
        let got = record_success(&mut cj, &completed_at("j", completion));
        assert_eq!(got, changed, "{name}");
        assert_eq!(
            cj.status.and_then(|s| s.last_successful_time).map(|t| t.0),
            after.map(ts),
            "{name}"
        );
    }
}

#[test]
fn starts_enter_and_deletions_leave_the_active_list() {
    let mut cj = cronjob("* * * * *");
    let a = job("a", None, None);
    let b = job("b", None, None);
    record_start(&mut cj, &a, ts("2016-05-19T10:00:00Z"));
    record_start(&mut cj, &b, ts("2016-05-19T10:01:00Z"));
    let names = |cj: &CronJob| -> Vec<String> {
        cj.status
            .as_ref()
            .and_then(|s| s.active.as_ref())
            .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
            .unwrap_or_default()
    };
    assert_eq!(names(&cj), vec!["a", "b"]);
    assert_eq!(
        cj.status
            .as_ref()
            .and_then(|s| s.last_schedule_time.as_ref())
            .map(|t| t.0),
        Some(ts("2016-05-19T10:01:00Z"))
    );
    delete_from_active_list(&mut cj, "uid-a");
    assert_eq!(names(&cj), vec!["b"]);
    delete_from_active_list(&mut cj, "uid-unknown");
    assert_eq!(names(&cj), vec!["b"]);
}
