use serde_json::json;

use super::*;
use crate::testutil::{job, now, pod};

fn reasons_of(e: &Explanation) -> Vec<&'static str> {
    e.waiting_on.iter().map(|w| w.reason).collect()
}

fn failed_with(reason: &str, message: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut status = json!({
        "conditions": [{
            "type": "Failed", "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": "2026-01-01T00:58:20Z"
        }]
    });
    if let (Some(s), Some(x)) = (status.as_object_mut(), extra.as_object()) {
        s.extend(x.clone());
    }
    status
}

#[test]
fn a_complete_job_with_its_pods_counted_is_settled() {
    let j = job(
        json!({}),
        json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}),
    );
    let done = pod("pi-a", "Succeeded").no_finalizer().build();
    let e = explain(&j, &[done], now());
    assert_eq!(e.state, State::Settled, "{e:?}");
    assert!(e.actions.is_empty() && e.waiting_on.is_empty() && e.remedies.is_empty());
    assert_eq!(
        (e.controller, e.object.kind.as_str()),
        ("job-controller", "Job")
    );
}

#[test]
fn a_new_job_creates_its_pods() {
    let j = job(json!({"parallelism": 2, "completions": 4}), json!({}));
    let e = explain(&j, &[], now());
    assert_eq!(e.state, State::Acting);
    assert_eq!(e.actions, ["create 2 pod(s)"]);
}

#[test]
fn a_suspended_job_is_stalled_since_its_condition_and_says_how_to_resume() {
    let j = job(
        json!({"suspend": true}),
        json!({"conditions": [{"type": "Suspended", "status": "True", "lastTransitionTime": "2026-01-01T00:30:00Z"}]}),
    );
    let e = explain(&j, &[], now());
    assert_eq!(e.state, State::Stalled);
    assert_eq!(reasons_of(&e), ["Suspended"]);
    assert_eq!(
        e.waiting_on[0].message,
        "spec.suspend is true: no pod runs (0 of 1 completions succeeded)"
    );
    assert_eq!(
        e.waiting_on[0].since.as_deref(),
        Some("2026-01-01T00:30:00Z")
    );
    assert_eq!(
        e.remedies,
        [r#"resume: kubectl patch job pi -n ns --type=merge -p '{"spec":{"suspend":false}}'"#]
    );
    // Its running pod is removed.
    let e = explain(&j, &[pod("pi-a", "Running").build()], now());
    assert_eq!(e.actions, ["delete 1 active pod(s): pi-a"]);
    assert_eq!(reasons_of(&e), ["Suspended"]);
}

#[test]
fn a_failure_backs_off_with_the_time_left_counted_once() {
    // One failure, 5 s ago: 10 s of backoff, 5 s left; the same whether the failure is
    // already counted (no finalizer) or not yet (the plan counts it).
    let failed = || pod("pi-a", "Failed").exit("main", 1, "2026-01-01T00:59:55Z");
    for (status, p) in [
        (json!({"failed": 1}), failed().no_finalizer().build()),
        (json!({}), failed().build()),
    ] {
        let j = job(json!({}), status);
        let e = explain(&j, &[p], now());
        assert_eq!(e.state, State::Waiting, "{e:?}");
        assert_eq!(reasons_of(&e), ["PodFailureBackoff"]);
        let w = &e.waiting_on[0];
        assert_eq!(
            w.message,
            "1 pod failure(s) since the last success (1 failed of backoffLimit 6): the next pod \
             is created in 5s"
        );
        assert_eq!(w.since.as_deref(), Some("2026-01-01T00:59:55Z"));
        assert_eq!(w.objects, ["Pod/pi-a"]);
        assert_eq!(
            e.remedies,
            ["see why the last pod failed: kubectl logs -n ns pi-a"]
        );
    }
    // Backoff passed: the replacement is created.
    let j = job(json!({}), json!({"failed": 1}));
    let old = pod("pi-a", "Failed")
        .exit("main", 1, "2026-01-01T00:50:00Z")
        .no_finalizer()
        .build();
    assert_eq!(explain(&j, &[old], now()).actions, ["create 1 pod(s)"]);
}

#[test]
fn running_pods_are_reported_with_the_deadline_left() {
    let j = job(
        json!({"activeDeadlineSeconds": 600}),
        json!({"startTime": "2026-01-01T00:59:00Z", "active": 1}),
    );
    let e = explain(&j, &[pod("pi-a", "Running").ready().build()], now());
    assert_eq!(e.state, State::Waiting);
    assert_eq!(reasons_of(&e), ["PodsActive"]);
    assert_eq!(
        e.waiting_on[0].message,
        "1 pod(s) active (1 ready), 0 of 1 completions succeeded, parallelism 1; active \
         deadline in 540s"
    );
    assert_eq!(
        e.waiting_on[0].since.as_deref(),
        Some("2026-01-01T00:59:00Z")
    );
}

#[test]
fn a_pod_failure_policy_failure_names_the_rule_and_the_pod() {
    let message =
        "Container main for pod ns/pi-x failed with exit code 42 matching FailJob rule at index 1";
    let j = job(
        json!({}),
        failed_with("PodFailurePolicy", message, json!({})),
    );
    let e = explain(&j, &[], now());
    assert_eq!(e.state, State::Stalled);
    assert_eq!(reasons_of(&e), ["PodFailurePolicy"]);
    let w = &e.waiting_on[0];
    assert_eq!(
        w.message,
        format!("rule 1 of spec.podFailurePolicy failed the Job: {message}")
    );
    assert_eq!(w.objects, ["Pod/pi-x"]);
    assert_eq!(w.since.as_deref(), Some("2026-01-01T00:58:20Z"));
    assert_eq!(
        e.remedies[0],
        "see the pod's output: kubectl logs -n ns pi-x"
    );

    // Not yet written: the plan's finish candidate says the same, and the Job acts.
    let j = job(
        json!({"podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}
        ]}}),
        json!({}),
    );
    let p42 = pod("pi-x", "Failed")
        .exit("main", 42, "2026-01-01T00:59:00Z")
        .build();
    let e = explain(&j, &[p42], now());
    assert_eq!(e.state, State::Acting);
    assert_eq!(
        e.actions,
        ["record the FailureTarget condition (PodFailurePolicy)"]
    );
    assert_eq!(reasons_of(&e), ["PodFailurePolicy", "TrackingFinalizers"]);
    assert_eq!(
        e.waiting_on[0].message,
        format!("rule 1 of spec.podFailurePolicy failed the Job: {message}")
    );
}

#[test]
fn the_policy_message_forms_parse() {
    assert_eq!(
        PolicyMessage::parse(
            "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0"
        ),
        PolicyMessage {
            pod: Some("p".into()),
            rule: Some(0)
        }
    );
    assert_eq!(
        PolicyMessage::parse("something else"),
        PolicyMessage::default()
    );
}

#[test]
fn the_other_failures_carry_their_numbers() {
    let j = job(
        json!({}),
        failed_with(
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            json!({"failed": 7}),
        ),
    );
    let e = explain(&j, &[], now());
    assert_eq!(
        (e.state, reasons_of(&e)),
        (State::Stalled, vec!["BackoffLimitExceeded"])
    );
    assert_eq!(
        e.waiting_on[0].message,
        "7 pod(s) failed, backoffLimit 6: Job has reached the specified backoff limit"
    );

    let j = job(
        json!({"activeDeadlineSeconds": 600}),
        failed_with(
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
            json!({"startTime": "2026-01-01T00:48:20Z"}),
        ),
    );
    let e = explain(&j, &[], now());
    assert_eq!(reasons_of(&e), ["DeadlineExceeded"]);
    assert_eq!(
        e.waiting_on[0].message,
        "ran 600s, activeDeadlineSeconds 600: Job was active longer than specified deadline"
    );

    let j = job(
        json!({"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1}),
        failed_with(
            "FailedIndexes",
            "Job has failed indexes",
            json!({"failedIndexes": "0,2"}),
        ),
    );
    let e = explain(&j, &[], now());
    assert_eq!(reasons_of(&e), ["FailedIndexes"]);
    assert!(
        e.waiting_on[0]
            .message
            .starts_with("failed indexes \"0,2\"")
    );
}

#[test]
fn a_finished_job_waits_for_its_tracking_finalizers() {
    let j = job(
        json!({}),
        json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}),
    );
    let e = explain(&j, &[pod("pi-a", "Succeeded").build()], now());
    assert_eq!(e.state, State::Waiting);
    assert_eq!(reasons_of(&e), ["TrackingFinalizers"]);
    assert_eq!(e.waiting_on[0].objects, ["Pod/pi-a"]);
    assert!(e.remedies[0].contains("kubectl patch pod -n ns pi-a --type=json"));
}

#[test]
fn a_job_managed_elsewhere_is_left_alone() {
    let j = job(json!({"managedBy": "example.com/queue"}), json!({}));
    let e = explain(&j, &[], now());
    assert_eq!(reasons_of(&e), ["ManagedElsewhere"]);
    assert!(e.actions.is_empty());
}
