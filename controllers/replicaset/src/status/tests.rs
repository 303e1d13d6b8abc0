//! Mirrors upstream `TestCalculateStatus` and `TestCalculateStatusConditions`
//! (`pkg/controller/replicaset/replica_set_utils_test.go`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::plan::tests::{P, ago, now};

fn template() -> BTreeMap<String, String> {
    BTreeMap::from([("app".into(), "web".into()), ("tier".into(), "fe".into())])
}

fn inputs(template: &BTreeMap<String, String>, desired: i32, min_ready: i32) -> StatusInputs<'_> {
    StatusInputs {
        desired,
        min_ready_seconds: min_ready,
        template_labels: Some(template),
        track_terminating: true,
    }
}

const FULL: &[(&str, &str)] = &[("app", "web"), ("tier", "fe")];
const PARTIAL: &[(&str, &str)] = &[("app", "web")];

#[test]
fn counts() {
    let t = template();
    let cases = [
        // (pods, min_ready, expected (replicas, fully labeled, ready, available))
        (
            vec![P {
                labels: FULL,
                ..P::default()
            }],
            0,
            (1, 1, 0, 0),
        ),
        (
            vec![P {
                labels: PARTIAL,
                ..P::default()
            }],
            0,
            (1, 0, 0, 0),
        ),
        (
            vec![
                P {
                    labels: FULL,
                    ready: true,
                    ..P::default()
                },
                P {
                    labels: PARTIAL,
                    ready: true,
                    ..P::default()
                },
            ],
            0,
            (2, 1, 2, 2),
        ),
        (
            vec![P {
                labels: FULL,
                ready: true,
                ready_since: Some(ago(Duration::from_secs(5))),
                ..P::default()
            }],
            10,
            (1, 1, 1, 0),
        ),
        (
            vec![P {
                labels: FULL,
                ready: true,
                ready_since: Some(ago(Duration::from_secs(15))),
                ..P::default()
            }],
            10,
            (1, 1, 1, 1),
        ),
    ];
    for (pods, min_ready, (r, f, rd, a)) in cases {
        let pods: Vec<_> = pods.iter().map(P::build).collect();
        let s = calculate_status(
            &ReplicaStatus::default(),
            &inputs(&t, 1, min_ready),
            &pods,
            &[],
            None,
            now(),
        );
        assert_eq!(
            (
                s.replicas,
                s.fully_labeled_replicas,
                s.ready_replicas,
                s.available_replicas
            ),
            (r, f, rd, a)
        );
        assert_eq!(s.terminating_replicas, Some(0));
        assert!(s.conditions.is_empty());
    }
}

#[test]
fn terminating_only_when_tracked() {
    let t = template();
    let term = vec![
        P {
            deleting: true,
            ..P::default()
        }
        .build(),
        P {
            deleting: true,
            ..P::default()
        }
        .build(),
    ];
    let s = calculate_status(
        &ReplicaStatus::default(),
        &inputs(&t, 1, 0),
        &[],
        &term,
        None,
        now(),
    );
    assert_eq!(s.terminating_replicas, Some(2));
    let off = StatusInputs {
        track_terminating: false,
        ..inputs(&t, 1, 0)
    };
    let s = calculate_status(&ReplicaStatus::default(), &off, &[], &term, None, now());
    assert_eq!(s.terminating_replicas, None);
}

#[test]
fn failure_condition_added_kept_and_removed() {
    let t = template();
    let two: Vec<_> = (0..2).map(|_| P::default().build()).collect();
    // Too few pods: FailedCreate.
    let s = calculate_status(
        &ReplicaStatus::default(),
        &inputs(&t, 3, 0),
        &two,
        &[],
        Some("quota"),
        now(),
    );
    assert_eq!(s.conditions.len(), 1);
    let c = &s.conditions[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str()),
        ("ReplicaFailure", "True")
    );
    assert_eq!(c.reason.as_deref(), Some("FailedCreate"));
    assert_eq!(c.message.as_deref(), Some("quota"));
    assert_eq!(c.last_transition_time, Some(now()));
    // Too many pods: FailedDelete.
    let s2 = calculate_status(
        &ReplicaStatus::default(),
        &inputs(&t, 1, 0),
        &two,
        &[],
        Some("boom"),
        now(),
    );
    assert_eq!(s2.conditions[0].reason.as_deref(), Some("FailedDelete"));
    // An existing condition is not refreshed, even for another kind of failure.
    let later = calculate_status(
        &s,
        &inputs(&t, 1, 0),
        &two,
        &[],
        Some("other"),
        ago(Duration::ZERO),
    );
    assert_eq!(later.conditions, s.conditions);
    // Success removes it; other conditions stay.
    let mut with_other = s.clone();
    with_other.conditions.push(crate::owner::Condition {
        type_: "Other".into(),
        status: "True".into(),
        reason: None,
        message: None,
        last_transition_time: None,
    });
    let ok = calculate_status(&with_other, &inputs(&t, 3, 0), &two, &[], None, now());
    assert_eq!(
        ok.conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect::<Vec<_>>(),
        ["Other"]
    );
}

#[test]
fn write_only_on_change_or_generation_lag() {
    let current = ReplicaStatus {
        replicas: 2,
        observed_generation: 3,
        ..ReplicaStatus::default()
    };
    assert!(!needs_write(&current, &current.clone(), 3));
    assert!(
        needs_write(&current, &current.clone(), 4),
        "observedGeneration lags"
    );
    let changed = ReplicaStatus {
        ready_replicas: 1,
        ..current.clone()
    };
    assert!(needs_write(&current, &changed, 3));
    let term = ReplicaStatus {
        terminating_replicas: Some(0),
        ..current.clone()
    };
    assert!(
        needs_write(&current, &term, 3),
        "nil vs 0 terminating differs"
    );
}

#[test]
fn only_a_moved_terminating_count_is_a_slow_write() {
    let current = ReplicaStatus {
        replicas: 2,
        ready_replicas: 2,
        terminating_replicas: Some(3),
        observed_generation: 3,
        ..ReplicaStatus::default()
    };
    let with = |f: &dyn Fn(&mut ReplicaStatus)| {
        let mut s = current.clone();
        f(&mut s);
        s
    };
    // (new status, generation, slow?)
    let cases = [
        (with(&|s| s.terminating_replicas = Some(2)), 3, true),
        (with(&|s| s.terminating_replicas = None), 3, true),
        (current.clone(), 3, false),
        (with(&|s| s.terminating_replicas = Some(2)), 4, false),
        (
            with(&|s| {
                s.terminating_replicas = Some(2);
                s.replicas = 1;
            }),
            3,
            false,
        ),
        (
            with(&|s| {
                s.terminating_replicas = Some(2);
                s.ready_replicas = 1;
            }),
            3,
            false,
        ),
        (with(&|s| s.available_replicas = 2), 3, false),
    ];
    for (i, (new, generation, want)) in cases.iter().enumerate() {
        assert_eq!(
            only_terminating_moved(&current, new, *generation),
            *want,
            "case {i}: {new:?} at generation {generation}"
        );
    }
}
