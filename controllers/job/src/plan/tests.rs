//! Table tests of `plan`, after the cases of upstream `job_controller_test.go`
//! (`TestControllerSyncJob`, `TestSyncJobPastDeadline`, `TestJobBackoff`,
//! `TestSyncJobWithJobPodFailurePolicy`, `TestSyncJobWithJobBackoffLimitPerIndex`,
//! `TestSyncJobWithJobSuccessPolicy`).
#![allow(clippy::type_complexity, clippy::cloned_ref_to_slice_refs)]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::cache::cached::Pod;
use serde_json::json;

use super::*;
use crate::testutil::{job, now, pod, ts};

fn run(job: &Job, pods: &[Arc<Pod>]) -> Plan {
    run_with(job, pods, true, BackoffRecord::default(), &HashSet::new())
}

fn run_with(
    job: &Job,
    pods: &[Arc<Pod>],
    satisfied: bool,
    backoff: BackoffRecord,
    expected_rm: &HashSet<String>,
) -> Plan {
    plan(
        &Snapshot {
            job,
            pods,
            expected_rm_finalizers: expected_rm,
            expectations_satisfied: satisfied,
            backoff,
        },
        now(),
    )
}

fn creates(p: &Plan) -> Vec<Option<i32>> {
    match &p.action {
        Action::Create(v) => v.iter().map(|n| n.index).collect(),
        other => panic!("expected Create, got {other:?}"),
    }
}

fn removed(p: &Plan) -> Vec<String> {
    match &p.action {
        Action::Remove(v) | Action::DeleteActive(v) => {
            v.iter().map(|p| p.metadata.name.clone().unwrap()).collect()
        }
        other => panic!("expected a removal, got {other:?}"),
    }
}

fn finished(p: &Plan) -> Option<(String, String, String)> {
    p.finished.as_ref().map(|c| {
        (
            c.type_.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        )
    })
}

#[test]
fn non_indexed_creation_table() {
    // (name, spec, status, pods, expected creates, expected removals)
    let running = |n: &str| pod(n, "Running").build();
    let succeeded = |n: &str| pod(n, "Succeeded").build();
    let cases: Vec<(
        &str,
        serde_json::Value,
        serde_json::Value,
        Vec<Arc<Pod>>,
        usize,
        usize,
    )> = vec![
        (
            "new job",
            json!({"completions": 5, "parallelism": 2}),
            json!({}),
            vec![],
            2,
            0,
        ),
        (
            "at parallelism",
            json!({"completions": 5, "parallelism": 2}),
            json!({}),
            vec![running("a"), running("b")],
            0,
            0,
        ),
        (
            "one replaced",
            json!({"completions": 5, "parallelism": 2}),
            json!({"succeeded": 1}),
            vec![running("a")],
            1,
            0,
        ),
        (
            "never beyond remaining",
            json!({"completions": 5, "parallelism": 3}),
            json!({"succeeded": 3}),
            vec![running("a")],
            1,
            0,
        ),
        (
            "counts new successes",
            json!({"completions": 2, "parallelism": 2}),
            json!({}),
            vec![succeeded("s"), running("a")],
            0,
            0,
        ),
        (
            "too many",
            json!({"completions": 5, "parallelism": 1}),
            json!({}),
            vec![running("a"), running("b")],
            0,
            1,
        ),
        (
            "parallelism zero",
            json!({"completions": 5, "parallelism": 0}),
            json!({}),
            vec![running("a")],
            0,
            1,
        ),
        (
            "work queue, no success",
            json!({"completions": null, "parallelism": 3}),
            json!({}),
            vec![running("a")],
            2,
            0,
        ),
        (
            "work queue, after success",
            json!({"completions": null, "parallelism": 3}),
            json!({}),
            vec![succeeded("s"), running("a")],
            0,
            0,
        ),
    ];
    for (name, spec, status, pods, want_create, want_remove) in cases {
        let j = job(spec, status);
        let p = run(&j, &pods);
        assert!(p.finished.is_none(), "{name}: {:?}", p.finished);
        assert!(p.manage_called, "{name}");
        match &p.action {
            Action::Create(v) => assert_eq!((v.len(), 0), (want_create, want_remove), "{name}"),
            Action::Remove(v) => assert_eq!((0, v.len()), (want_create, want_remove), "{name}"),
            Action::None => assert_eq!((0, 0), (want_create, want_remove), "{name}"),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn first_sync_sets_start_time_unless_suspended() {
    let p = run(&job(json!({}), json!({})), &[]);
    assert_eq!(p.start_time, Some(now()));
    assert_eq!(p.sync_action, "pods_created");
    let p = run(&job(json!({"suspend": true}), json!({})), &[]);
    assert_eq!(p.start_time, None);
    let p = run(
        &job(json!({}), json!({"startTime": "2026-01-01T00:00:00Z"})),
        &[],
    );
    assert_eq!(p.start_time, Some(ts("2026-01-01T00:00:00Z")));
}

#[test]
fn unsatisfied_expectations_or_deleting_job_manage_nothing() {
    let j = job(json!({"completions": 3, "parallelism": 3}), json!({}));
    let p = run_with(&j, &[], false, BackoffRecord::default(), &HashSet::new());
    assert!(matches!(p.action, Action::None) && !p.manage_called);
    assert_eq!(p.sync_action, "reconciling");
    let mut deleting = j.clone();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let p = run(&deleting, &[]);
    assert!(matches!(p.action, Action::None) && !p.manage_called);
}

#[test]
fn removal_prefers_least_advanced() {
    let j = job(json!({"completions": 5, "parallelism": 1}), json!({}));
    let pods = vec![
        pod("ready", "Running").node("n").ready().build(),
        pod("pending", "Pending").build(),
        pod("running", "Running").node("n").build(),
    ];
    let p = run(&j, &pods);
    assert_eq!(removed(&p), vec!["pending", "running"]);
    assert_eq!(p.sync_action, "pods_deleted");
}

#[test]
fn suspended_job_removes_every_active_pod() {
    let j = job(
        json!({"suspend": true, "completions": 5, "parallelism": 2}),
        json!({"startTime": "2026-01-01T00:00:00Z"}),
    );
    let pods = vec![
        pod("a", "Running").build(),
        pod("b", "Running").build(),
        pod("done", "Succeeded").build(),
    ];
    let p = run(&j, &pods);
    let mut r = removed(&p);
    r.sort();
    assert_eq!(r, vec!["a", "b"]);
    assert!(p.finished.is_none());
}

#[test]
#[allow(clippy::too_many_lines, reason = "a table test: one case per row")]
fn failure_conditions_table() {
    let failed = |n: &str| pod(n, "Failed").build();
    let running = |n: &str| pod(n, "Running").build();
    // (name, spec, status, pods, expected (type, reason))
    let cases: Vec<(
        &str,
        serde_json::Value,
        serde_json::Value,
        Vec<Arc<Pod>>,
        Option<(&str, &str)>,
    )> = vec![
        (
            "below backoff limit",
            json!({"backoffLimit": 2, "completions": 3}),
            json!({"failed": 1}),
            vec![failed("f")],
            None,
        ),
        (
            "backoff limit exceeded",
            json!({"backoffLimit": 2, "completions": 3}),
            json!({"failed": 2}),
            vec![failed("f"), running("r")],
            Some(("FailureTarget", "BackoffLimitExceeded")),
        ),
        (
            "uncounted failures count",
            json!({"backoffLimit": 1, "completions": 3}),
            json!({"failed": 1, "uncountedTerminatedPods": {"failed": ["x"]}}),
            vec![],
            Some(("FailureTarget", "BackoffLimitExceeded")),
        ),
        (
            "backoff limit zero",
            json!({"backoffLimit": 0}),
            json!({}),
            vec![failed("f")],
            Some(("FailureTarget", "BackoffLimitExceeded")),
        ),
        (
            "deleted pod counts as failed",
            json!({"backoffLimit": 0}),
            json!({}),
            vec![pod("d", "Running").deleting().build()],
            Some(("FailureTarget", "BackoffLimitExceeded")),
        ),
        (
            "on-failure restarts",
            json!({"backoffLimit": 2, "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "job-uid"}}, "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "main"}]}}}),
            json!({}),
            vec![pod("r", "Running").restarts(2).build()],
            Some(("FailureTarget", "BackoffLimitExceeded")),
        ),
        (
            "on-failure below",
            json!({"backoffLimit": 3, "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "job-uid"}}, "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "main"}]}}}),
            json!({}),
            vec![pod("r", "Running").restarts(2).build()],
            None,
        ),
        (
            "deadline passed",
            json!({"activeDeadlineSeconds": 10}),
            json!({"startTime": "2026-01-01T00:59:50Z"}),
            vec![running("r")],
            Some(("FailureTarget", "DeadlineExceeded")),
        ),
        (
            "deadline not while suspended",
            json!({"activeDeadlineSeconds": 10, "suspend": true}),
            json!({"startTime": "2026-01-01T00:00:00Z"}),
            vec![],
            None,
        ),
        (
            "failure target recorded",
            json!({}),
            json!({"conditions": [{"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded", "message": "m"}]}),
            vec![running("r")],
            Some(("Failed", "DeadlineExceeded")),
        ),
        (
            "success criteria recorded",
            json!({"backoffLimit": 0}),
            json!({"failed": 3, "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "m"}]}),
            vec![],
            Some(("SuccessCriteriaMet", "CompletionsReached")),
        ),
    ];
    for (name, spec, status, pods, want) in cases {
        let p = run(&job(spec, status), &pods);
        let got = finished(&p);
        assert_eq!(
            got.as_ref().map(|(t, r, _)| (t.as_str(), r.as_str())),
            want,
            "{name}"
        );
        if want.is_some() {
            assert!(
                matches!(p.action, Action::DeleteActive(_)),
                "{name}: {:?}",
                p.action
            );
            assert!(!p.manage_called, "{name}");
        }
    }
}

#[test]
fn deadline_requeues_at_the_deadline() {
    let j = job(
        json!({"activeDeadlineSeconds": 100}),
        json!({"startTime": "2026-01-01T00:59:00Z"}),
    );
    let p = run(&j, &[pod("r", "Running").build()]);
    assert_eq!(
        p.waiting,
        [Waiting::ActiveDeadline {
            remaining: Duration::from_secs(40)
        }]
    );
    let p = run(&job(json!({"activeDeadlineSeconds": 100}), json!({})), &[]);
    assert_eq!(
        p.waiting,
        [Waiting::ActiveDeadline {
            remaining: Duration::from_secs(100)
        }],
        "starts now"
    );
    let p = run(&job(json!({}), json!({})), &[]);
    assert_eq!(p.waiting, [], "no deadline, nothing to wait for");
}

#[test]
fn waiting_with_deadline_and_backoff_lists_both() {
    let j = job(
        json!({"completions": 3, "parallelism": 1, "activeDeadlineSeconds": 100}),
        json!({"failed": 1, "startTime": "2026-01-01T00:59:00Z"}),
    );
    let record = BackoffRecord {
        failures_after_last_success: 1,
        last_failure_time: Some(ts("2026-01-01T00:59:56Z")),
    };
    let p = run_with(&j, &[], true, record, &HashSet::new());
    assert_eq!(
        p.waiting,
        [
            Waiting::ActiveDeadline {
                remaining: Duration::from_secs(40)
            },
            Waiting::PodBackoff {
                remaining: Duration::from_secs(6)
            },
        ]
    );
}

#[test]
fn requeue_after_table() {
    let ms = Duration::from_millis;
    // (wait, requeue after): a deadline is exact, a backoff is floored at the batch period.
    let cases = [
        (Waiting::ActiveDeadline { remaining: ms(300) }, ms(300)),
        (
            Waiting::ActiveDeadline {
                remaining: ms(40_000),
            },
            ms(40_000),
        ),
        (Waiting::PodBackoff { remaining: ms(300) }, ms(1_000)),
        (
            Waiting::PodBackoff {
                remaining: ms(6_000),
            },
            ms(6_000),
        ),
        (Waiting::IndexBackoff { remaining: ms(1) }, ms(1_000)),
        (
            Waiting::IndexBackoff {
                remaining: ms(5_000),
            },
            ms(5_000),
        ),
    ];
    for (wait, after) in cases {
        assert_eq!(wait.requeue_after(), after, "{wait:?}");
    }
    assert_eq!(
        [
            Waiting::ActiveDeadline { remaining: ms(1) }.code(),
            Waiting::PodBackoff { remaining: ms(1) }.code(),
            Waiting::IndexBackoff { remaining: ms(1) }.code(),
        ],
        ["ActiveDeadline", "PodBackoff", "IndexBackoff"]
    );
}

#[test]
fn recreation_waits_for_backoff() {
    let j = job(
        json!({"completions": 3, "parallelism": 1}),
        json!({"failed": 1}),
    );
    let record = BackoffRecord {
        failures_after_last_success: 1,
        last_failure_time: Some(ts("2026-01-01T00:59:56Z")),
    };
    let p = run_with(&j, &[], true, record, &HashSet::new());
    assert!(matches!(p.action, Action::None));
    assert_eq!(
        p.waiting,
        [Waiting::PodBackoff {
            remaining: Duration::from_secs(6)
        }]
    );
    assert_eq!(p.sync_action, "pods_created");
    // A new failure in this sync extends the record: 2 failures => 20 s from its finish.
    let f = pod("f", "Failed")
        .exit("main", 1, "2026-01-01T00:59:58Z")
        .build();
    let p = run_with(&j, &[f], true, record, &HashSet::new());
    assert_eq!(p.new_backoff.failures_after_last_success, 2);
    assert_eq!(
        p.waiting,
        [Waiting::PodBackoff {
            remaining: Duration::from_secs(18)
        }]
    );
    // Expired: create.
    let old = BackoffRecord {
        failures_after_last_success: 1,
        last_failure_time: Some(ts("2026-01-01T00:00:00Z")),
    };
    let p = run_with(&j, &[], true, old, &HashSet::new());
    assert_eq!(creates(&p), vec![None]);
}

#[test]
fn pod_failure_policy_table() {
    let spec = |rules: serde_json::Value| json!({"backoffLimit": 1, "completions": 2, "parallelism": 2, "podReplacementPolicy": "Failed", "podFailurePolicy": {"rules": rules}});
    let exit42 = pod("p42", "Failed")
        .exit("main", 42, "2026-01-01T00:59:00Z")
        .build();
    let disrupted = pod("pd", "Failed").condition("DisruptionTarget").build();
    // (name, rules, pods, failed total, finished reason)
    let cases: Vec<(&str, serde_json::Value, Vec<Arc<Pod>>, i32, Option<&str>)> = vec![
        (
            "fail job",
            json!([{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]),
            vec![exit42.clone()],
            1,
            Some("PodFailurePolicy"),
        ),
        (
            "ignore",
            json!([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]),
            vec![disrupted.clone(), disrupted.clone()],
            0,
            None,
        ),
        (
            "count",
            json!([{"action": "Count", "onExitCodes": {"operator": "In", "values": [42]}}]),
            vec![exit42.clone()],
            1,
            None,
        ),
        (
            "no match counts",
            json!([{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}]),
            vec![exit42.clone()],
            1,
            None,
        ),
    ];
    for (name, rules, pods, failed, reason) in cases {
        let p = run(&job(spec(rules), json!({})), &pods);
        assert_eq!(p.failed, failed, "{name}");
        assert_eq!(finished(&p).map(|(_, r, _)| r).as_deref(), reason, "{name}");
    }
    let p = run(
        &job(
            spec(
                json!([{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]),
            ),
            json!({}),
        ),
        &[exit42],
    );
    assert_eq!(
        finished(&p).unwrap().2,
        "Container main for pod ns/p42 failed with exit code 42 matching FailJob rule at index 0"
    );
    // With a pod failure policy a terminating pod is not failed, and blocks a replacement.
    let j = job(spec(json!([])), json!({}));
    let p = run(&j, &[pod("t", "Running").deleting().build()]);
    assert_eq!((p.failed, p.terminating), (0, 1));
    assert_eq!(creates(&p), vec![None]);
}

#[test]
fn replacement_policy_table() {
    let terminating = pod("t", "Running").deleting().build();
    // (policy, expected creates, failed)
    for (policy, want, failed) in [("TerminatingOrFailed", 2, 1), ("Failed", 1, 0)] {
        let j = job(
            json!({"completions": 5, "parallelism": 2, "podReplacementPolicy": policy}),
            json!({}),
        );
        let p = run(&j, std::slice::from_ref(&terminating));
        assert_eq!(creates(&p).len(), want, "{policy}");
        assert_eq!(p.failed, failed, "{policy}");
        assert_eq!(p.terminating, 1, "{policy}");
    }
}

#[test]
fn indexed_creation_and_indexes() {
    let spec = json!({"completionMode": "Indexed", "completions": 4, "parallelism": 4});
    let pods = vec![
        pod("s1", "Succeeded").index(1).build(),
        pod("r3", "Running").index(3).build(),
    ];
    let p = run(&job(spec.clone(), json!({"completedIndexes": "2"})), &pods);
    assert_eq!(p.succeeded_indexes.to_string(), "1,2");
    assert_eq!(p.succeeded, 2);
    assert_eq!(creates(&p), vec![Some(0)]);
    // Invalid and duplicated indexes are removed first.
    let pods = vec![
        pod("a", "Running").index(0).build(),
        pod("b", "Running").index(0).node("n").build(),
        pod("c", "Running").build(),
        pod("d", "Running").index(7).build(),
    ];
    let p = run(&job(spec, json!({})), &pods);
    let mut r = removed(&p);
    r.sort();
    assert_eq!(r, vec!["a", "c", "d"]);
}

#[test]
fn backoff_limit_per_index_table() {
    let spec = |extra: serde_json::Value| {
        let mut s = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 1});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    };
    let first_failure = pod("f0", "Failed")
        .index(0)
        .annotation("batch.kubernetes.io/job-index-failure-count", "0")
        .exit("main", 1, "2026-01-01T00:00:00Z")
        .build();
    let second_failure = pod("f0b", "Failed")
        .index(0)
        .annotation("batch.kubernetes.io/job-index-failure-count", "1")
        .exit("main", 1, "2026-01-01T00:00:00Z")
        .build();
    let running = |ix: i32| pod(&format!("r{ix}"), "Running").index(ix).build();

    // A first failure keeps the pod (delayed deletion) and recreates index 0 with count 1.
    let p = run(
        &job(spec(json!({})), json!({})),
        &[first_failure.clone(), running(1), running(2)],
    );
    assert_eq!(
        p.failed_indexes.as_ref().map(ToString::to_string),
        Some(String::new())
    );
    assert!(p.delayed_deletion.contains_key(&0));
    match &p.action {
        Action::Create(v) => assert_eq!(
            v,
            &vec![NewPod {
                index: Some(0),
                failure_counts: Some((1, 0))
            }]
        ),
        other => panic!("{other:?}"),
    }
    // The second failure fails the index; with 1 and 2 succeeded the Job fails.
    let p = run(
        &job(spec(json!({})), json!({"completedIndexes": "1,2"})),
        &[second_failure.clone()],
    );
    assert_eq!(
        p.failed_indexes
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("0")
    );
    assert_eq!(
        finished(&p).map(|f| (f.1, f.2)),
        Some(("FailedIndexes".into(), "Job has failed indexes".into()))
    );
    // maxFailedIndexes exceeded.
    let p = run(
        &job(
            spec(json!({"backoffLimitPerIndex": 0, "maxFailedIndexes": 0})),
            json!({}),
        ),
        &[first_failure, running(1)],
    );
    assert_eq!(
        finished(&p).map(|f| f.1).as_deref(),
        Some("MaxFailedIndexesExceeded")
    );
    // FailIndex fails the index at once; no replacement for it.
    let exit7 = pod("e7", "Failed")
        .index(2)
        .annotation("batch.kubernetes.io/job-index-failure-count", "0")
        .exit("main", 7, "2026-01-01T00:00:00Z")
        .build();
    let p = run(
        &job(
            spec(
                json!({"backoffLimitPerIndex": 3, "podReplacementPolicy": "Failed", "podFailurePolicy": {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [7]}}]}}),
            ),
            json!({}),
        ),
        &[exit7, running(0), running(1)],
    );
    assert_eq!(
        p.failed_indexes
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("2")
    );
    assert!(p.finished.is_none());
    assert!(
        matches!(&p.action, Action::Create(v) if v.is_empty()) || matches!(p.action, Action::None)
    );
}

#[test]
fn per_index_backoff_delays_only_that_index() {
    let spec = json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimitPerIndex": 3});
    let recent = pod("f0", "Failed")
        .index(0)
        .annotation("batch.kubernetes.io/job-index-failure-count", "0")
        .exit("main", 1, "2026-01-01T00:59:55Z")
        .build();
    let p = run(&job(spec.clone(), json!({})), &[recent.clone()]);
    assert_eq!(creates(&p), vec![Some(1)]);
    let p = run(
        &job(spec, json!({})),
        &[recent, pod("r1", "Running").index(1).build()],
    );
    assert!(matches!(p.action, Action::None));
    assert_eq!(
        p.waiting,
        [Waiting::IndexBackoff {
            remaining: Duration::from_secs(5)
        }]
    );
}

#[test]
fn success_policy_meets_criteria() {
    let spec = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "successPolicy": {"rules": [{"succeededIndexes": "0"}]}});
    let pods = vec![
        pod("s0", "Succeeded").index(0).build(),
        pod("r1", "Running").index(1).build(),
    ];
    let p = run(&job(spec, json!({})), &pods);
    assert_eq!(
        finished(&p),
        Some((
            "SuccessCriteriaMet".into(),
            "SuccessPolicy".into(),
            "Matched rules at index 0".into()
        ))
    );
    assert_eq!(removed(&p), vec!["r1"]);
}

#[test]
fn counted_pods_are_not_new() {
    let j = job(
        json!({"completions": 3, "parallelism": 1}),
        json!({"succeeded": 1, "uncountedTerminatedPods": {"succeeded": ["s1"]}}),
    );
    let pods = vec![
        pod("s0", "Succeeded").no_finalizer().build(),
        pod("s1", "Succeeded").build(),
        pod("s2", "Succeeded").build(),
    ];
    // s0 is counted (no finalizer), s1 is uncounted (listed), s2 is new; s2 is also
    // excluded when its finalizer removal is pending.
    let p = run(&j, &pods);
    assert_eq!(p.succeeded, 3);
    let rm: HashSet<String> = ["s2".to_owned()].into_iter().collect();
    let p = run_with(&j, &pods, true, BackoffRecord::default(), &rm);
    assert_eq!(p.succeeded, 2);
}

#[test]
fn creation_reason_label() {
    let p = run(&job(json!({}), json!({})), &[]);
    assert_eq!(creation_reason(&job(json!({}), json!({})), &p), "new");
    let j = job(
        json!({"podReplacementPolicy": "Failed"}),
        json!({"failed": 1}),
    );
    let p = run(&j, &[]);
    assert_eq!(creation_reason(&j, &p), "recreate_failed");
    let j = job(json!({}), json!({"failed": 1}));
    let p = run(&j, &[]);
    assert_eq!(creation_reason(&j, &p), "recreate_terminating_or_failed");
}

#[test]
fn skip_table() {
    let finished = json!({"conditions": [{"type": "Complete", "status": "True"}]});
    let not_yet = json!({"conditions": [{"type": "Complete", "status": "False"}]});
    let kueue = json!({"managedBy": "kueue.x-k8s.io/multikueue"});
    let ours = json!({"managedBy": "kubernetes.io/job-controller"});
    let unknown = json!({"completionMode": "Sliced"});
    let cases: [(&str, Job, Option<Skip<'_>>); 7] = [
        ("plain", job(json!({}), json!({})), None),
        ("ours by name", job(ours, json!({})), None),
        ("condition not true", job(json!({}), not_yet), None),
        (
            "managed elsewhere",
            job(kueue.clone(), json!({})),
            Some(Skip::ManagedBy("kueue.x-k8s.io/multikueue")),
        ),
        (
            "managed elsewhere wins over finished",
            job(kueue, finished.clone()),
            Some(Skip::ManagedBy("kueue.x-k8s.io/multikueue")),
        ),
        (
            "finished wins over unknown mode",
            job(unknown.clone(), finished),
            Some(Skip::Finished),
        ),
        (
            "unknown mode",
            job(unknown, json!({})),
            Some(Skip::UnknownCompletionMode),
        ),
    ];
    for (name, j, want) in &cases {
        assert_eq!(skip(j), *want, "{name}");
    }
}

#[test]
fn release_orphan_table() {
    let owned_by = |refs: serde_json::Value| {
        let mut b = pod("o", "Succeeded");
        b.0["metadata"]["ownerReferences"] = refs;
        b
    };
    let job_ref = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "job-uid", "controller": true}]);
    let rs_ref = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "pi", "uid": "rs-uid", "controller": true}]);
    let old_job_ref = json!([{"apiVersion": "batch/v2", "kind": "Job", "name": "pi", "uid": "job-uid", "controller": true}]);
    let not_controller =
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "pi", "uid": "rs-uid"}]);
    let running = job(json!({}), json!({}));
    let done = job(
        json!({}),
        json!({"conditions": [{"type": "Failed", "status": "True"}]}),
    );
    let done_elsewhere = job(
        json!({"managedBy": "kueue.x-k8s.io/multikueue"}),
        json!({"conditions": [{"type": "Complete", "status": "True"}]}),
    );
    let cases = [
        ("no controller", owned_by(json!([])).build(), None, true),
        (
            "no controller, no finalizer",
            owned_by(json!([])).no_finalizer().build(),
            None,
            false,
        ),
        (
            "owner not a controller",
            owned_by(not_controller).build(),
            None,
            true,
        ),
        (
            "controlled by a ReplicaSet",
            owned_by(rs_ref).build(),
            None,
            false,
        ),
        (
            "another Job API",
            owned_by(old_job_ref).build(),
            None,
            false,
        ),
        (
            "its Job is gone",
            owned_by(job_ref.clone()).build(),
            None,
            true,
        ),
        (
            "its Job runs",
            owned_by(job_ref.clone()).build(),
            Some(&running),
            false,
        ),
        (
            "its Job finished",
            owned_by(job_ref.clone()).build(),
            Some(&done),
            true,
        ),
        (
            "its Job finished, no finalizer",
            owned_by(job_ref.clone()).no_finalizer().build(),
            Some(&done),
            false,
        ),
        (
            "its Job is managed elsewhere",
            owned_by(job_ref).build(),
            Some(&done_elsewhere),
            false,
        ),
    ];
    for (name, p, owner, want) in &cases {
        assert_eq!(release_orphan(p, *owner), *want, "{name}");
    }
}

fn env_names(t: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Vec<String> {
    t.spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.env.iter().flatten())
        .map(|e| e.name.clone())
        .collect()
}

fn finalizers_of(t: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Vec<String> {
    t.metadata
        .as_ref()
        .and_then(|m| m.finalizers.clone())
        .unwrap_or_default()
}

#[test]
fn pod_template_table() {
    let template_with = |finalizers: serde_json::Value| {
        json!({"template": {
            "metadata": {"finalizers": finalizers},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
        }})
    };
    let tracking = "batch.kubernetes.io/job-tracking";
    // (case, spec, finalizers, env names)
    let cases = [
        ("non-indexed", json!({}), vec![tracking], vec![]),
        (
            "indexed",
            json!({"completionMode": "Indexed", "completions": 3}),
            vec![tracking],
            vec!["JOB_COMPLETION_INDEX"],
        ),
        (
            "finalizer already in the template",
            template_with(json!(["example.com/keep", tracking])),
            vec!["example.com/keep", tracking],
            vec![],
        ),
        (
            "other finalizers kept",
            template_with(json!(["example.com/keep"])),
            vec!["example.com/keep", tracking],
            vec![],
        ),
    ];
    for (name, spec, finalizers, env) in cases {
        let t = pod_template(&job(spec, json!({})));
        assert_eq!(finalizers_of(&t), finalizers, "{name}");
        assert_eq!(env_names(&t), env, "{name}");
    }
}

#[test]
fn new_pod_table() {
    let template = pod_template(&job(
        json!({"completionMode": "Indexed", "completions": 5}),
        json!({}),
    ));
    let plain = NewPod {
        index: None,
        failure_counts: None,
    };
    for (name, new) in [("no pod", None), ("no index", Some(&plain))] {
        let (pod, generate_name) = new_pod(&template, "pi", new);
        assert_eq!(pod, template, "{name}");
        assert_eq!(generate_name, None, "{name}");
    }
    // (index, failure counts, annotations beyond the index)
    let cases = [
        (3, None, vec![]),
        (
            4,
            Some((2, 0)),
            vec![("batch.kubernetes.io/job-index-failure-count", "2")],
        ),
        (
            0,
            Some((2, 1)),
            vec![
                ("batch.kubernetes.io/job-index-failure-count", "2"),
                ("batch.kubernetes.io/job-index-ignored-failure-count", "1"),
            ],
        ),
    ];
    for (ix, failure_counts, extra) in cases {
        let new = NewPod {
            index: Some(ix),
            failure_counts,
        };
        let (pod, generate_name) = new_pod(&template, "pi", Some(&new));
        assert_eq!(generate_name.as_deref(), Some(format!("pi-{ix}-").as_str()));
        let meta = pod.metadata.clone().unwrap_or_default();
        let mut want: Vec<(String, String)> = vec![(
            "batch.kubernetes.io/job-completion-index".into(),
            ix.to_string(),
        )];
        want.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        want.sort();
        let got: Vec<(String, String)> = meta.annotations.unwrap_or_default().into_iter().collect();
        assert_eq!(got, want, "index {ix}");
        assert_eq!(
            meta.labels
                .unwrap_or_default()
                .get("batch.kubernetes.io/job-completion-index"),
            Some(&ix.to_string()),
            "index {ix}"
        );
        assert_eq!(
            pod.spec.and_then(|s| s.hostname),
            Some(format!("pi-{ix}")),
            "index {ix}"
        );
        assert_eq!(
            finalizers_of(&template),
            ["batch.kubernetes.io/job-tracking"]
        );
    }
}

#[test]
fn deadline_changed_table() {
    let started = json!({"startTime": "2026-01-01T00:59:00Z"});
    let with = |ads: Option<i64>, status: &serde_json::Value| {
        job(
            ads.map_or(json!({}), |s| json!({"activeDeadlineSeconds": s})),
            status.clone(),
        )
    };
    let at = |remaining: u64| {
        Some(Waiting::ActiveDeadline {
            remaining: Duration::from_secs(remaining),
        })
    };
    // (case, old deadline, new deadline, new status, wait); started 60 s ago.
    let cases = [
        ("not started", Some(100), Some(50), json!({}), None),
        ("deadline removed", Some(100), None, started.clone(), None),
        ("unchanged", Some(100), Some(100), started.clone(), None),
        ("set", None, Some(100), started.clone(), at(40)),
        ("extended", Some(100), Some(200), started.clone(), at(140)),
        ("already passed", Some(100), Some(30), started, at(0)),
    ];
    for (name, old, new, status, want) in cases {
        let got = deadline_changed(&with(old, &status), &with(new, &status), now());
        assert_eq!(got, want, "{name}");
    }
}
