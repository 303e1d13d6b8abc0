//! Table tests of the status steps and of whole syncs chained without I/O (every write and
//! patch succeeding unless a test says otherwise), after upstream `job_controller_test.go`
//! (`TestTrackJobStatusAndRemoveFinalizers`, `TestFinalizersRemovedExpectations`,
//! `TestSyncJobWithJobPodFailurePolicy`, `TestSuspendJob`).
#![allow(clippy::type_complexity, clippy::cast_possible_truncation)]

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobStatus};
use rkcm_runtime::cache::cached::Pod;
use serde_json::json;

use super::*;
use crate::backoff::BackoffRecord;
use crate::plan::{Snapshot, plan};
use crate::testutil::{job, now, pod};

/// One sync without I/O failures: returns the status after write 1 and the final status, and
/// the UIDs whose finalizer was removed.
fn sync(
    job: &Job,
    pods: &[Arc<Pod>],
    expected_rm: &HashSet<String>,
) -> (JobStatus, JobStatus, Vec<String>, Tracked) {
    sync_gated(job, pods, expected_rm, true)
}

/// [`sync`] with gate `MutableSchedulingDirectivesForSuspendedJobs` as given.
fn sync_gated(
    job: &Job,
    pods: &[Arc<Pod>],
    expected_rm: &HashSet<String>,
    clear_start_time_on_suspend: bool,
) -> (JobStatus, JobStatus, Vec<String>, Tracked) {
    let p = plan(
        &Snapshot {
            job,
            pods,
            expected_rm_finalizers: expected_rm,
            expectations_satisfied: true,
            backoff: BackoffRecord::default(),
        },
        now(),
    );
    let exec = match &p.action {
        Action::Create(v) => Executed {
            created: v.len() as i32,
            ..Default::default()
        },
        Action::Remove(v) | Action::DeleteActive(v) => Executed {
            removed: v.len() as i32,
            removed_ready: v.iter().filter(|p| crate::pods::is_ready(p)).count() as i32,
            created: 0,
        },
        Action::None => Executed::default(),
    };
    let managed = after_action(job, &p, true, exec, clear_start_time_on_suspend, now());
    let tracked = track(job, pods, expected_rm, &p, managed, now());
    let first = tracked.status.clone();
    let mut status = first.clone();
    let mut with = tracked.with_finalizer.clone();
    let removed: Vec<String> = tracked
        .remove_finalizer
        .iter()
        .map(|p| uid(p).to_owned())
        .collect();
    for u in &removed {
        with.remove(u);
    }
    clean_uncounted(&mut status, &with);
    if !tracked.reached_max_uncounted
        && let Some(f) = &tracked.finished
    {
        enact_finished(&mut status, f, now());
    }
    (first, status, removed, tracked)
}

fn types(s: &JobStatus) -> Vec<String> {
    s.conditions
        .iter()
        .flatten()
        .map(|c| format!("{}={}", c.type_, c.reason.clone().unwrap_or_default()))
        .collect()
}

fn uncounted(s: &JobStatus) -> (Vec<String>, Vec<String>) {
    let u = s.uncounted_terminated_pods.clone().unwrap_or_default();
    (
        u.succeeded.unwrap_or_default(),
        u.failed.unwrap_or_default(),
    )
}

#[test]
fn single_pod_success_two_phase() {
    let j = job(
        json!({}),
        json!({"startTime": "2026-01-01T00:00:00Z", "active": 1, "ready": 0, "terminating": 0}),
    );
    let pods = vec![pod("a", "Succeeded").build()];
    let (first, last, removed, tracked) = sync(&j, &pods, &HashSet::new());
    // Write 1 records the UID and the interim condition before the finalizer goes.
    assert_eq!(uncounted(&first).0, vec!["a"]);
    assert_eq!(first.succeeded.unwrap_or(0), 0);
    assert_eq!(types(&first), vec!["SuccessCriteriaMet=CompletionsReached"]);
    assert!(tracked.needs_flush);
    assert_eq!(removed, vec!["a"]);
    // After removal it is counted once and the Job completes.
    assert_eq!(last.succeeded, Some(1));
    assert_eq!(uncounted(&last), (vec![], vec![]));
    assert_eq!(
        types(&last),
        vec![
            "SuccessCriteriaMet=CompletionsReached",
            "Complete=CompletionsReached"
        ]
    );
    let complete = last
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Complete")
        .unwrap();
    assert_eq!(last.completion_time, complete.last_transition_time);
    assert_eq!(
        complete.message.as_deref(),
        Some("Reached expected number of succeeded pods")
    );
    assert_eq!(
        (last.active, last.ready, last.terminating),
        (Some(0), Some(0), Some(0))
    );
}

#[test]
fn crash_after_write_one_counts_exactly_once() {
    // Write 1 happened (UID recorded) but the finalizer patch did not: the next sync sees the
    // UID in uncounted and the pod still holding the finalizer.
    let j = job(
        json!({"completions": 2, "parallelism": 2}),
        json!({
            "startTime": "2026-01-01T00:00:00Z", "active": 1, "ready": 0, "terminating": 0,
            "uncountedTerminatedPods": {"succeeded": ["a"]}
        }),
    );
    let pods = vec![pod("a", "Succeeded").build(), pod("b", "Running").build()];
    let (first, last, removed, _) = sync(&j, &pods, &HashSet::new());
    assert_eq!(uncounted(&first).0, vec!["a"], "not appended twice");
    assert_eq!(removed, vec!["a"]);
    assert_eq!(last.succeeded, Some(1));
    // The finalizer went but status write 2 was lost: the UID is in uncounted and the pod
    // has no finalizer -> counted once now.
    let pods = vec![
        pod("a", "Succeeded").no_finalizer().build(),
        pod("b", "Running").build(),
    ];
    let (first, last, removed, _) = sync(&j, &pods, &HashSet::new());
    assert_eq!(first.succeeded, Some(1));
    assert!(removed.is_empty());
    assert_eq!(last.succeeded, Some(1));
    // Already counted and the stale cache still shows the finalizer, removal pending: not
    // counted again.
    let counted = job(
        json!({"completions": 2, "parallelism": 2}),
        json!({
            "startTime": "2026-01-01T00:00:00Z", "succeeded": 1, "active": 1, "ready": 0, "terminating": 0
        }),
    );
    let pods = vec![pod("a", "Succeeded").build(), pod("b", "Running").build()];
    let rm: HashSet<String> = ["a".to_owned()].into_iter().collect();
    let (first, last, removed, tracked) = sync(&counted, &pods, &rm);
    assert_eq!((first.succeeded, last.succeeded), (Some(1), Some(1)));
    assert!(removed.is_empty() && !tracked.needs_flush);
}

#[test]
fn vanished_uncounted_pods_are_counted() {
    let j = job(
        json!({"completions": 5, "parallelism": 1}),
        json!({
            "startTime": "2026-01-01T00:00:00Z", "succeeded": 1, "failed": 2, "active": 0, "ready": 0, "terminating": 0,
            "uncountedTerminatedPods": {"succeeded": ["gone1", "gone2"], "failed": ["gone3"]}
        }),
    );
    let (first, _, _, tracked) = sync(&j, &[], &HashSet::new());
    assert_eq!((first.succeeded, first.failed), (Some(3), Some(3)));
    assert_eq!(uncounted(&first), (vec![], vec![]));
    assert!(tracked.needs_flush);
}

#[test]
fn failing_job_counts_running_pods_as_failed_and_waits_for_terminating() {
    let j = job(
        json!({"backoffLimit": 0, "completions": 3, "parallelism": 2}),
        json!({"startTime": "2026-01-01T00:00:00Z", "active": 2}),
    );
    let pods = vec![
        pod("f", "Failed").build(),
        pod("r", "Running").node("n").build(),
    ];
    let (first, last, removed, _) = sync(&j, &pods, &HashSet::new());
    assert_eq!(types(&first), vec!["FailureTarget=BackoffLimitExceeded"]);
    let mut failed = uncounted(&first).1;
    failed.sort();
    assert_eq!(failed, vec!["f", "r"]);
    assert_eq!(removed.len(), 2);
    assert_eq!(last.failed, Some(2));
    // The running pod was deleted this sync and is terminating: no Failed yet.
    assert_eq!(last.terminating, Some(1));
    assert_eq!(types(&last), vec!["FailureTarget=BackoffLimitExceeded"]);
    // Next sync: the FailureTarget is recorded, nothing terminates any more.
    let j2 = job(
        json!({"backoffLimit": 0, "completions": 3, "parallelism": 2}),
        serde_json::to_value(&last).unwrap(),
    );
    let (_, last2, _, _) = sync(&j2, &[], &HashSet::new());
    assert_eq!(
        types(&last2),
        vec![
            "FailureTarget=BackoffLimitExceeded",
            "Failed=BackoffLimitExceeded"
        ]
    );
    assert_eq!(last2.completion_time, None);
    assert_eq!(last2.failed, Some(2));
}

#[test]
fn ignored_failures_lose_their_finalizer_without_counting() {
    let j = job(
        json!({"completions": 2, "parallelism": 1, "podReplacementPolicy": "Failed",
        "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}),
        json!({"startTime": "2026-01-01T00:00:00Z"}),
    );
    let pods = vec![pod("d", "Failed").condition("DisruptionTarget").build()];
    let (first, last, removed, tracked) = sync(&j, &pods, &HashSet::new());
    assert_eq!(uncounted(&first), (vec![], vec![]));
    assert_eq!(removed, vec!["d"]);
    assert_eq!(last.failed.unwrap_or(0), 0);
    assert_eq!(tracked.policy_actions.get("Ignore"), Some(&1));
}

#[test]
fn uncounted_is_capped_at_500() {
    let j = job(
        json!({"completions": 600, "parallelism": 600}),
        json!({"startTime": "2026-01-01T00:00:00Z", "active": 600}),
    );
    let pods: Vec<Arc<Pod>> = (0..600)
        .map(|i| pod(&format!("p{i:03}"), "Succeeded").build())
        .collect();
    let (first, last, removed, tracked) = sync(&j, &pods, &HashSet::new());
    assert_eq!(uncounted(&first).0.len(), 500);
    assert_eq!(removed.len(), 500);
    assert!(tracked.reached_max_uncounted);
    assert_eq!(last.succeeded, Some(500));
    assert!(types(&last).iter().all(|t| !t.starts_with("Complete")));
}

#[test]
fn indexed_counts_indexes() {
    let j = job(
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3}),
        json!({"startTime": "2026-01-01T00:00:00Z", "completedIndexes": "0"}),
    );
    let pods = vec![
        pod("s1", "Succeeded").index(1).build(),
        pod("s1b", "Succeeded").index(1).build(),
        pod("r2", "Running").index(2).build(),
    ];
    let (first, last, removed, _) = sync(&j, &pods, &HashSet::new());
    assert_eq!(first.completed_indexes.as_deref(), Some("0,1"));
    assert_eq!(first.succeeded, Some(2));
    assert_eq!(uncounted(&first), (vec![], vec![]), "indexes are enough");
    assert_eq!(removed.len(), 2);
    assert_eq!(last.succeeded, Some(2));
    assert_eq!(last.failed_indexes, None);
}

#[test]
fn backoff_limit_per_index_writes_failed_indexes() {
    let j = job(
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 1}),
        json!({}),
    );
    let pods: Vec<Arc<Pod>> = (0..3)
        .map(|i| pod(&format!("r{i}"), "Running").index(i).build())
        .collect();
    let (first, _, _, _) = sync(&j, &pods, &HashSet::new());
    assert_eq!(first.failed_indexes.as_deref(), Some(""));
}

#[test]
fn suspend_and_resume_conditions() {
    let j = job(
        json!({"suspend": true, "completions": 2, "parallelism": 2}),
        json!({"startTime": "2026-01-01T00:00:00Z", "active": 2, "ready": 0, "terminating": 0}),
    );
    let pods = vec![pod("a", "Running").build(), pod("b", "Running").build()];
    let (first, _, removed, tracked) = sync(&j, &pods, &HashSet::new());
    assert_eq!(types(&first), vec!["Suspended=JobSuspended"]);
    assert_eq!(first.start_time, None);
    assert_eq!((first.active, first.terminating), (Some(0), Some(2)));
    assert!(
        removed.is_empty(),
        "suspended pods lose their finalizer before deletion, uncounted"
    );
    assert_eq!(uncounted(&first), (vec![], vec![]));
    assert!(tracked.needs_flush);
    // Resume.
    let resumed = job(
        json!({"suspend": false, "completions": 2, "parallelism": 2}),
        serde_json::to_value(&first).unwrap(),
    );
    let (first, _, _, _) = sync(&resumed, &[], &HashSet::new());
    assert_eq!(types(&first), vec!["Suspended=JobResumed"]);
    assert_eq!(first.start_time.map(|t| t.0), Some(now()));
    assert_eq!(first.active, Some(2));
    // Created suspended: no pods, no start time.
    let fresh = job(json!({"suspend": true}), json!({}));
    let (first, _, _, _) = sync(&fresh, &[], &HashSet::new());
    assert_eq!(types(&first), vec!["Suspended=JobSuspended"]);
    assert_eq!(first.start_time, None);
    // A never-suspended Job gets no Suspended=False.
    let (first, _, _, _) = sync(&job(json!({}), json!({})), &[], &HashSet::new());
    assert!(types(&first).is_empty());
}

/// Gate `MutableSchedulingDirectivesForSuspendedJobs` off: suspending keeps `startTime`
/// (upstream `syncJob` clears it only with the gate on); resuming still restarts it.
#[test]
fn suspending_keeps_start_time_with_the_scheduling_directives_gate_off() {
    let start = "2026-01-01T00:00:00Z";
    let j = job(
        json!({"suspend": true, "completions": 2, "parallelism": 2}),
        json!({"startTime": start, "active": 2, "ready": 0, "terminating": 0}),
    );
    let pods = vec![pod("a", "Running").build(), pod("b", "Running").build()];
    let (first, _, _, _) = sync_gated(&j, &pods, &HashSet::new(), false);
    assert_eq!(types(&first), vec!["Suspended=JobSuspended"]);
    assert_eq!(
        first.start_time.as_ref().map(|t| t.0.to_string()),
        Some(start.to_owned())
    );
    let (on, _, _, _) = sync_gated(&j, &pods, &HashSet::new(), true);
    assert_eq!(on.start_time, None, "gate on: cleared");
    let resumed = job(
        json!({"suspend": false, "completions": 2, "parallelism": 2}),
        serde_json::to_value(&first).unwrap(),
    );
    let (first, _, _, _) = sync_gated(&resumed, &[], &HashSet::new(), false);
    assert_eq!(first.start_time.map(|t| t.0), Some(now()));
}

#[test]
fn success_policy_completes_after_termination() {
    let spec = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "successPolicy": {"rules": [{"succeededIndexes": "0"}]}});
    let j = job(
        spec.clone(),
        json!({"startTime": "2026-01-01T00:00:00Z", "active": 2}),
    );
    let pods = vec![
        pod("s0", "Succeeded").index(0).build(),
        pod("r1", "Running").index(1).node("n").build(),
    ];
    let (first, last, _, _) = sync(&j, &pods, &HashSet::new());
    assert_eq!(types(&first), vec!["SuccessCriteriaMet=SuccessPolicy"]);
    assert_eq!(
        uncounted(&first).1,
        Vec::<String>::new(),
        "removed pods are not failures"
    );
    assert_eq!(last.terminating, Some(1));
    assert_eq!(types(&last), vec!["SuccessCriteriaMet=SuccessPolicy"]);
    let j2 = job(spec, serde_json::to_value(&last).unwrap());
    let (_, last2, _, _) = sync(&j2, &[], &HashSet::new());
    assert_eq!(
        types(&last2),
        vec!["SuccessCriteriaMet=SuccessPolicy", "Complete=SuccessPolicy"]
    );
    assert_eq!(last2.failed.unwrap_or(0), 0);
}

#[test]
fn finished_events_table() {
    let j = job(json!({"completions": 1}), json!({}));
    let complete = crate::plan::new_condition("Complete", "True", "CompletionsReached", "m", now());
    let status: JobStatus = serde_json::from_value(json!({"succeeded": 2})).unwrap();
    let ev = finished_events(&j, &status, &complete);
    assert_eq!(
        ev.iter()
            .map(|e| (e.warning, e.reason.as_str()))
            .collect::<Vec<_>>(),
        vec![(true, "TooManySucceededPods"), (false, "Completed")]
    );
    let failed = crate::plan::new_condition(
        "Failed",
        "True",
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
        now(),
    );
    let ev = finished_events(&j, &JobStatus::default(), &failed);
    assert_eq!(
        ev,
        vec![JobEvent {
            warning: true,
            reason: "BackoffLimitExceeded".into(),
            message: "Job has reached the specified backoff limit".into()
        }]
    );
}

#[test]
fn finished_counts_table() {
    let status = |v: serde_json::Value| -> JobStatus { serde_json::from_value(v).unwrap() };
    let indexed = json!({"completionMode": "Indexed", "completions": 5, "parallelism": 5});
    let per_index = json!({"completionMode": "Indexed", "completions": 5, "parallelism": 5, "backoffLimitPerIndex": 1});
    // (case, spec, old status, new status, counts)
    let cases = [
        (
            "non-indexed",
            json!({}),
            json!({"succeeded": 1}),
            json!({"succeeded": 3, "failed": 2}),
            FinishedCounts {
                mode: "NonIndexed",
                succeeded_pods: 2,
                failed_pods: 2,
                indexes: None,
            },
        ),
        (
            "a decrease counts nothing",
            json!({}),
            json!({"succeeded": 3, "failed": 2}),
            json!({"succeeded": 1, "failed": 2}),
            FinishedCounts {
                mode: "NonIndexed",
                succeeded_pods: 0,
                failed_pods: 0,
                indexes: None,
            },
        ),
        (
            "indexed: succeeded pods are new indexes",
            indexed.clone(),
            json!({"completedIndexes": "0", "succeeded": 1}),
            json!({"completedIndexes": "0-2,4", "succeeded": 7, "failed": 1}),
            FinishedCounts {
                mode: "Indexed",
                succeeded_pods: 3,
                failed_pods: 1,
                indexes: Some(("global", 3, 0)),
            },
        ),
        (
            "indexed: failed indexes only with backoffLimitPerIndex",
            indexed,
            json!({}),
            json!({"failedIndexes": "3"}),
            FinishedCounts {
                mode: "Indexed",
                succeeded_pods: 0,
                failed_pods: 0,
                indexes: Some(("global", 0, 0)),
            },
        ),
        (
            "per index",
            per_index,
            json!({"completedIndexes": "1", "failedIndexes": "0"}),
            json!({"completedIndexes": "1-2", "failedIndexes": "0,3-4", "failed": 2}),
            FinishedCounts {
                mode: "Indexed",
                succeeded_pods: 1,
                failed_pods: 2,
                indexes: Some(("perIndex", 1, 2)),
            },
        ),
    ];
    for (name, spec, old, new, want) in cases {
        let j = job(spec, json!({}));
        assert_eq!(
            finished_counts(&j, &status(old), &status(new)),
            want,
            "{name}"
        );
    }
}

#[test]
fn finished_result_label() {
    let cond = |type_: &str| new_condition(type_, "True", "r", "m", now());
    assert_eq!(finished_result(&cond("Complete")), "succeeded");
    assert_eq!(finished_result(&cond("Failed")), "failed");
}
