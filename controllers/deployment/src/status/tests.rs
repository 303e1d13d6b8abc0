//! Mirrors upstream `TestSyncDeploymentStatus`-style counts, `TestGetCondition`,
//! `TestSetCondition`, `TestRemoveCondition`, `TestDeploymentComplete`,
//! `TestDeploymentProgressing`, `TestDeploymentTimedOut` (`deployment_util_test.go`),
//! `TestRequeueStuckDeployment` and `TestSyncRolloutStatus` (`progress_test.go`).

use k8s_openapi::api::apps::v1::ReplicaSetCondition;

use super::*;
use crate::model::tests::{R, ago, dep, dep25, healthy, int, now, recreate};

fn cond(type_: &str, status: &str, reason: &str, updated: i64, transitioned: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: "m".into(),
        last_update_time: Some(ago(updated)),
        last_transition_time: Some(ago(transitioned)),
    }
}

fn with_status(mut d: Deployment, status: &Status) -> Deployment {
    d.status = Some(status.to_api());
    d
}

fn deadline(mut d: Deployment, seconds: Option<i32>) -> Deployment {
    d.spec.progress_deadline_seconds = seconds;
    d
}

#[test]
fn api_round_trip() {
    let status = Status {
        observed_generation: 3,
        replicas: 13,
        updated_replicas: 5,
        ready_replicas: 8,
        available_replicas: 8,
        unavailable_replicas: 5,
        terminating_replicas: Some(2),
        collision_count: Some(1),
        conditions: vec![cond("Available", "True", "MinimumReplicasAvailable", 5, 10)],
    };
    let d = with_status(dep25(10), &status);
    assert_eq!(Status::of(&d), status);
    // Absent fields are Go zero values.
    let mut d = dep25(1);
    d.status = Some(DeploymentStatus::default());
    assert_eq!(Status::of(&d), Status::default());
    assert_eq!(Status::of(&dep25(1)), Status::default());
}

#[test]
fn condition_setter_semantics() {
    let mut s = Status::default();
    s.set_condition(cond("Progressing", "True", "ReplicaSetUpdated", 50, 100));
    s.set_condition(cond(
        "Available",
        "True",
        "MinimumReplicasAvailable",
        50,
        100,
    ));
    // Same status and reason: no-op, timestamps untouched, order kept.
    s.set_condition(cond("Progressing", "True", "ReplicaSetUpdated", 0, 0));
    assert_eq!(s.conditions[0].last_update_time, Some(ago(50)));
    // Same status, another reason: replaced (moved last), transition time kept.
    s.set_condition(cond("Progressing", "True", "NewReplicaSetAvailable", 0, 0));
    let p = s.condition("Progressing").expect("set");
    assert_eq!(
        (p.last_update_time, p.last_transition_time),
        (Some(ago(0)), Some(ago(100)))
    );
    assert_eq!(s.conditions[1].type_, "Progressing");
    // Another status: both times new.
    s.set_condition(cond(
        "Progressing",
        "False",
        "ProgressDeadlineExceeded",
        0,
        0,
    ));
    assert_eq!(
        s.condition("Progressing")
            .and_then(|c| c.last_transition_time),
        Some(ago(0))
    );
    s.remove_condition("Progressing");
    assert!(s.condition("Progressing").is_none());
    assert_eq!(s.conditions.len(), 1);
}

#[test]
fn new_conditions_have_whole_seconds() {
    let t: jiff::Timestamp = "2026-06-01T12:00:00.75Z".parse().expect("valid");
    let c = new_condition("Available", "True", "r", "m", t);
    assert_eq!(c.last_update_time, Some(now()));
}

#[test]
fn counts_and_availability() {
    // spec §9 scenario 3: old 8 (8 available), new 5 (none available), D = 10.
    let old = healthy("old", 8, "v1", 200);
    let new = R {
        name: "new",
        replicas: 5,
        status_replicas: 5,
        image: "v2",
        ..R::default()
    }
    .build();
    let mut d = dep25(10);
    d.metadata.generation = Some(2);
    let s = calculate_status(&d, &[old, new.clone()], Some(&new), true, now());
    assert_eq!(
        (
            s.observed_generation,
            s.replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.available_replicas,
            s.unavailable_replicas
        ),
        (2, 13, 5, 8, 8, 5)
    );
    let a = s.condition("Available").expect("Available");
    assert_eq!(
        (a.status.as_str(), a.reason.as_str(), a.message.as_str()),
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability."
        )
    );
    assert_eq!(
        s.terminating_replicas, None,
        "synced RSs without the field: unknown"
    );
    // Gate off: no terminatingReplicas.
    let s = calculate_status(&d, &[], None, false, now());
    assert_eq!(s.terminating_replicas, None);
}

#[test]
fn available_thresholds() {
    let rs = |available| {
        R {
            name: "rs",
            replicas: 5,
            status_replicas: 5,
            available,
            ..R::default()
        }
        .build()
    };
    // (deployment, available, want Available=True)
    let cases = [
        // spec §9 scenario 7: 5 at 30%/30% needs 4.
        (
            dep(
                5,
                crate::model::tests::pct("30%"),
                crate::model::tests::pct("30%"),
            ),
            3,
            false,
        ),
        (
            dep(
                5,
                crate::model::tests::pct("30%"),
                crate::model::tests::pct("30%"),
            ),
            4,
            true,
        ),
        // spec §9 scenario 14: Recreate needs all.
        (recreate(3), 2, false),
        (recreate(3), 3, true),
        // spec §9 scenario 8: 1 replica, effective maxUnavailable 1: 0 is enough.
        (dep(1, int(0), crate::model::tests::pct("25%")), 0, true),
        // spec §9 scenario 32: zero replicas.
        (dep25(0), 0, true),
    ];
    for (d, available, want) in cases {
        let s = calculate_status(&d, &[rs(available)], None, true, now());
        let a = s.condition("Available").expect("Available");
        assert_eq!(
            a.status == "True",
            want,
            "{available} of {}",
            model::desired(&d)
        );
        let (reason, message) = if want {
            (
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            )
        } else {
            (
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        };
        assert_eq!((a.reason.as_str(), a.message.as_str()), (reason, message));
    }
}

#[test]
fn unavailable_counts_surge_and_never_goes_negative() {
    let scaling_down = R {
        name: "rs",
        replicas: 3,
        status_replicas: 5,
        available: 5,
        ..R::default()
    }
    .build();
    let s = calculate_status(&dep25(3), &[scaling_down], None, true, now());
    assert_eq!((s.replicas, s.unavailable_replicas), (5, 0));
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn complete_progressing_timed_out() {
    let d = dep25(3);
    let done = Status {
        observed_generation: 1,
        replicas: 3,
        updated_replicas: 3,
        available_replicas: 3,
        ..Status::default()
    };
    assert!(deployment_complete(&d, &done));
    assert!(
        !deployment_complete(
            &d,
            &Status {
                observed_generation: 0,
                ..done.clone()
            }
        ),
        "generation not observed"
    );
    assert!(
        !deployment_complete(
            &d,
            &Status {
                replicas: 4,
                ..done.clone()
            }
        ),
        "surge pod still there"
    );

    let old = Status {
        replicas: 4,
        updated_replicas: 1,
        ready_replicas: 2,
        available_replicas: 2,
        ..Status::default()
    };
    assert!(!deployment_progressing(&old, &old));
    assert!(deployment_progressing(
        &old,
        &Status {
            updated_replicas: 2,
            replicas: 5,
            ..old.clone()
        }
    ));
    assert!(
        deployment_progressing(
            &old,
            &Status {
                replicas: 3,
                ..old.clone()
            }
        ),
        "fewer old replicas"
    );
    assert!(deployment_progressing(
        &old,
        &Status {
            ready_replicas: 3,
            ..old.clone()
        }
    ));
    assert!(deployment_progressing(
        &old,
        &Status {
            available_replicas: 3,
            ..old.clone()
        }
    ));
    assert!(!deployment_progressing(
        &old,
        &Status {
            available_replicas: 1,
            ..old.clone()
        }
    ));

    let d = deadline(dep25(3), Some(10));
    let with = |reason: &str, updated: i64| Status {
        conditions: vec![cond("Progressing", "True", reason, updated, updated)],
        ..Status::default()
    };
    assert!(!deployment_timed_out(
        &d,
        &with("ReplicaSetUpdated", 9),
        now()
    ));
    assert!(
        !deployment_timed_out(&d, &with("ReplicaSetUpdated", 10), now()),
        "exactly at the deadline"
    );
    assert!(deployment_timed_out(
        &d,
        &with("ReplicaSetUpdated", 11),
        now()
    ));
    assert!(deployment_timed_out(
        &d,
        &with("ProgressDeadlineExceeded", 0),
        now()
    ));
    assert!(!deployment_timed_out(
        &d,
        &with("NewReplicaSetAvailable", 100),
        now()
    ));
    assert!(
        !deployment_timed_out(&d, &Status::default(), now()),
        "no condition"
    );
    assert!(!deployment_timed_out(
        &deadline(dep25(3), None),
        &with("ReplicaSetUpdated", 100),
        now()
    ));
}

fn progressing_of(s: &Status) -> (String, String, String) {
    let c = s.condition("Progressing").expect("Progressing");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[test]
fn rollout_status_completes() {
    let new = healthy("web-abc", 3, "v2", 10);
    let d = with_status(
        dep25(3),
        &Status {
            conditions: vec![cond("Progressing", "True", "ReplicaSetUpdated", 5, 50)],
            ..Status::default()
        },
    );
    let s = rollout_status(&d, std::slice::from_ref(&new), Some(&new), true, now());
    assert_eq!(
        progressing_of(&s),
        (
            "True".into(),
            "NewReplicaSetAvailable".into(),
            "ReplicaSet \"web-abc\" has successfully progressed.".into()
        )
    );
    let c = s.condition("Progressing").expect("set");
    assert_eq!(
        c.last_transition_time,
        Some(ago(50)),
        "same status keeps the transition time"
    );
    // Once complete, nothing is re-evaluated.
    let done = with_status(dep25(3), &s);
    assert_eq!(
        rollout_status(&done, std::slice::from_ref(&new), Some(&new), true, now()),
        s
    );
}

#[test]
fn rollout_status_progress_refreshes_the_update_time() {
    // spec §9 scenario 16: progress moves lastUpdateTime, not lastTransitionTime.
    let old = healthy("old", 3, "v1", 200);
    let new = R {
        name: "web-abc",
        replicas: 2,
        status_replicas: 2,
        available: 1,
        ready: 1,
        image: "v2",
        ..R::default()
    }
    .build();
    let d = with_status(
        dep25(4),
        &Status {
            replicas: 5,
            updated_replicas: 2,
            available_replicas: 3,
            ready_replicas: 3,
            conditions: vec![cond("Progressing", "True", "ReplicaSetUpdated", 15, 60)],
            ..Status::default()
        },
    );
    let s = rollout_status(&d, &[old, new.clone()], Some(&new), true, now());
    let c = s.condition("Progressing").expect("set");
    assert_eq!(
        (c.last_update_time, c.last_transition_time),
        (Some(now()), Some(ago(60)))
    );
    assert_eq!(c.message, "ReplicaSet \"web-abc\" is progressing.");
}

#[test]
fn rollout_status_times_out_and_recovers() {
    // spec §9 scenario 15: 1 replica, deadline 10 s, the pod never ready.
    let new = R {
        name: "web-abc",
        replicas: 1,
        status_replicas: 1,
        image: "v2",
        ..R::default()
    }
    .build();
    let stalled = Status {
        observed_generation: 1,
        replicas: 1,
        updated_replicas: 1,
        conditions: vec![cond("Progressing", "True", "NewReplicaSetCreated", 11, 11)],
        ..Status::default()
    };
    let d = with_status(deadline(dep25(1), Some(10)), &stalled);
    let s = rollout_status(&d, std::slice::from_ref(&new), Some(&new), true, now());
    assert_eq!(
        progressing_of(&s),
        (
            "False".into(),
            "ProgressDeadlineExceeded".into(),
            "ReplicaSet \"web-abc\" has timed out progressing.".into()
        )
    );
    // Within the deadline: unchanged.
    let young = Status {
        conditions: vec![cond("Progressing", "True", "NewReplicaSetCreated", 5, 5)],
        ..stalled.clone()
    };
    let d = with_status(deadline(dep25(1), Some(10)), &young);
    let s = rollout_status(&d, std::slice::from_ref(&new), Some(&new), true, now());
    assert_eq!(progressing_of(&s).1, "NewReplicaSetCreated");
    // The pod turns available: complete.
    let ready = healthy("web-abc", 1, "v2", 10);
    let timed_out = Status {
        conditions: vec![cond(
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            1,
            1,
        )],
        ..stalled
    };
    let d = with_status(deadline(dep25(1), Some(10)), &timed_out);
    let s = rollout_status(&d, std::slice::from_ref(&ready), Some(&ready), true, now());
    assert_eq!(progressing_of(&s).1, "NewReplicaSetAvailable");
}

#[test]
fn rollout_status_without_deadline_drops_progressing() {
    let new = healthy("web-abc", 1, "v2", 10);
    let d = with_status(
        deadline(dep25(1), None),
        &Status {
            conditions: vec![cond("Progressing", "True", "ReplicaSetUpdated", 5, 5)],
            ..Status::default()
        },
    );
    let s = rollout_status(&d, std::slice::from_ref(&new), Some(&new), true, now());
    assert!(s.condition("Progressing").is_none());
    // Without a new RS the messages name the Deployment.
    assert_eq!(
        messages::progressed(None, "web"),
        "Deployment \"web\" has successfully progressed."
    );
}

fn failing(name: &'static str, reason: &str, message: &str) -> Rs {
    let mut rs = R {
        name,
        replicas: 2,
        ..R::default()
    }
    .rs();
    rs.status.get_or_insert_with(Default::default).conditions = Some(vec![ReplicaSetCondition {
        type_: Some("ReplicaFailure".into()),
        status: Some("True".into()),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(Time(ago(30))),
    }]);
    std::sync::Arc::new(rs)
}

#[test]
fn replica_failure_is_mirrored() {
    // spec §9 scenario 29.
    let new = failing("new", "FailedCreate", "quota");
    let old = failing("old", "FailedDelete", "nope");
    let d = deadline(dep25(2), None);
    let s = rollout_status(&d, &[old.clone(), new.clone()], Some(&new), true, now());
    let f = s.condition("ReplicaFailure").expect("mirrored");
    assert_eq!(
        (f.status.as_str(), f.reason.as_str(), f.message.as_str()),
        ("True", "FailedCreate", "quota")
    );
    assert_eq!(
        (f.last_update_time, f.last_transition_time),
        (Some(ago(30)), Some(ago(30)))
    );
    // Only old RSs fail: theirs.
    let fine = healthy("new", 2, "v2", 10);
    let s = rollout_status(&d, &[old, fine.clone()], Some(&fine), true, now());
    assert_eq!(
        s.condition("ReplicaFailure").map(|c| c.reason.as_str()),
        Some("FailedDelete")
    );
    // Cleared once no RS reports one.
    let d = with_status(d, &s);
    let s = rollout_status(&d, std::slice::from_ref(&fine), Some(&fine), true, now());
    assert!(s.condition("ReplicaFailure").is_none());
}

#[test]
fn progress_checks() {
    let new = R {
        name: "web-abc",
        replicas: 1,
        status_replicas: 1,
        image: "v2",
        ..R::default()
    }
    .build();
    let with = |reason: &str, updated: i64| {
        with_status(
            deadline(dep25(1), Some(10)),
            &Status {
                observed_generation: 1,
                replicas: 1,
                updated_replicas: 1,
                conditions: vec![cond("Progressing", "True", reason, updated, updated)],
                ..Status::default()
            },
        )
    };
    let check = |d: &Deployment| {
        let s = rollout_status(d, std::slice::from_ref(&new), Some(&new), true, now());
        progress_check(d, &s, now())
    };
    // 3 s into a 10 s deadline: look again in 7 s + 1 s.
    assert_eq!(
        check(&with("NewReplicaSetCreated", 3)),
        ProgressCheck::After(Duration::from_secs(8))
    );
    // Less than a second left: now (rate limited).
    assert_eq!(check(&with("NewReplicaSetCreated", 10)), ProgressCheck::Now);
    assert_eq!(
        check(&with("ProgressDeadlineExceeded", 30)),
        ProgressCheck::None
    );
    // No condition yet, or no deadline.
    let bare = deadline(dep25(1), Some(10));
    let s = Status::default();
    assert_eq!(progress_check(&bare, &s, now()), ProgressCheck::None);
    let none = deadline(dep25(1), None);
    assert_eq!(progress_check(&none, &s, now()), ProgressCheck::None);
    // Complete: nothing to wait for.
    let ready = healthy("web-abc", 1, "v2", 10);
    let d = with("NewReplicaSetAvailable", 3);
    let s = rollout_status(&d, std::slice::from_ref(&ready), Some(&ready), true, now());
    assert_eq!(progress_check(&d, &s, now()), ProgressCheck::None);
}

#[test]
fn pause_and_resume_conditions() {
    let paused = |mut d: Deployment, p: bool| {
        d.spec.paused = Some(p);
        d
    };
    // spec §9 scenario 17.
    let s = paused_conditions(&paused(dep25(1), true), now()).expect("paused");
    assert_eq!(
        progressing_of(&s),
        (
            "Unknown".into(),
            "DeploymentPaused".into(),
            "Deployment is paused".into()
        )
    );
    let d = with_status(paused(dep25(1), true), &s);
    assert_eq!(paused_conditions(&d, now()), None, "already recorded");
    let d = with_status(paused(dep25(1), false), &s);
    let s = paused_conditions(&d, now()).expect("resumed");
    assert_eq!(
        progressing_of(&s),
        (
            "Unknown".into(),
            "DeploymentResumed".into(),
            "Deployment is resumed".into()
        )
    );
    assert_eq!(
        paused_conditions(&dep25(1), now()),
        None,
        "neither paused nor was"
    );
    // spec §9 scenario 18: a timeout is never hidden.
    let timed_out = Status {
        conditions: vec![cond(
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            1,
            1,
        )],
        ..Status::default()
    };
    assert_eq!(
        paused_conditions(&with_status(paused(dep25(1), true), &timed_out), now()),
        None
    );
    // Without a deadline nothing is recorded.
    assert_eq!(
        paused_conditions(&deadline(paused(dep25(1), true), None), now()),
        None
    );
}

#[test]
fn only_a_moved_terminating_count_is_a_slow_write() {
    let current = Status {
        observed_generation: 2,
        replicas: 3,
        updated_replicas: 3,
        ready_replicas: 3,
        available_replicas: 3,
        terminating_replicas: Some(4),
        conditions: vec![cond("Available", "True", "MinimumReplicasAvailable", 5, 5)],
        ..Status::default()
    };
    let with = |f: &dyn Fn(&mut Status)| {
        let mut s = current.clone();
        f(&mut s);
        s
    };
    // (new status, slow?)
    let cases = [
        (with(&|s| s.terminating_replicas = Some(3)), true),
        (with(&|s| s.terminating_replicas = None), true),
        (current.clone(), false),
        (
            with(&|s| {
                s.terminating_replicas = Some(3);
                s.observed_generation = 3;
            }),
            false,
        ),
        (
            with(&|s| {
                s.terminating_replicas = Some(3);
                s.available_replicas = 2;
            }),
            false,
        ),
        (
            with(&|s| {
                s.terminating_replicas = Some(3);
                s.conditions[0].last_update_time = Some(ago(1));
            }),
            false,
        ),
        (with(&|s| s.unavailable_replicas = 1), false),
    ];
    for (i, (new, want)) in cases.iter().enumerate() {
        assert_eq!(
            current.only_terminating_moved(new),
            *want,
            "case {i}: {new:?}"
        );
    }
}
