use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::model::tests::{R, ago, dep25, now};

fn old(replicas: i32, available: i32) -> Rs {
    R {
        name: "web-old",
        replicas,
        status_replicas: replicas,
        available,
        ready: available,
        ..R::default()
    }
    .build()
}

fn new(replicas: i32, available: i32) -> Rs {
    R {
        name: "web-new",
        replicas,
        status_replicas: replicas,
        available,
        ready: available,
        image: "v2",
        ..R::default()
    }
    .build()
}

fn progressing(reason: &str, status: &str, since_secs: i64) -> DeploymentCondition {
    DeploymentCondition {
        type_: Some("Progressing".into()),
        status: Some(status.into()),
        reason: Some(reason.into()),
        message: Some(format!("{reason} message")),
        last_update_time: Some(Time(ago(since_secs))),
        last_transition_time: Some(Time(ago(since_secs))),
    }
}

fn with_status(mut d: Deployment, s: DeploymentStatus) -> Deployment {
    d.status = Some(s);
    d
}

fn reasons_of(e: &Explanation) -> Vec<&'static str> {
    e.waiting_on.iter().map(|w| w.reason).collect()
}

#[test]
fn a_finished_rollout_is_settled_with_nothing_to_do() {
    let d = with_status(
        dep25(4),
        DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(4),
            updated_replicas: Some(4),
            available_replicas: Some(4),
            ready_replicas: Some(4),
            ..DeploymentStatus::default()
        },
    );
    let e = explain(&d, &[old(0, 0), new(4, 4)], now());
    assert_eq!(e.state, State::Settled);
    assert!(e.actions.is_empty() && e.waiting_on.is_empty() && e.remedies.is_empty());
    assert_eq!(e.controller, "deployment-controller");
    assert_eq!(e.object.name, "web");
}

#[test]
fn a_rollout_with_its_budget_used_waits_on_new_pods_with_the_numbers() {
    // 4 replicas, 25%/25%: maxSurge 1, maxUnavailable 1. 3 old available + 2 new unavailable:
    // 5 pods (the ceiling) and 3 available (the floor), so neither side may move.
    let d = with_status(
        dep25(4),
        DeploymentStatus {
            conditions: Some(vec![progressing("ReplicaSetUpdated", "True", 30)]),
            ..DeploymentStatus::default()
        },
    );
    let e = explain(&d, &[old(3, 3), new(2, 0)], now());
    assert_eq!(e.state, State::Waiting);
    assert!(e.actions.is_empty());
    assert_eq!(reasons_of(&e), ["NewPodsUnavailable"]);
    let w = &e.waiting_on[0];
    assert_eq!(
        w.message,
        "0 of 2 new pods available; 5 pods exist, at most 5 allowed (maxSurge 1); 3 available, \
         at least 3 needed (maxUnavailable 1); progress deadline in 570s"
    );
    assert_eq!(w.objects, ["ReplicaSet/web-new"]);
    assert_eq!(w.since.as_deref(), Some("2026-06-01T11:59:30Z"));
    assert_eq!(
        e.remedies.last().map(String::as_str),
        Some("roll back: kubectl rollout undo deployment/web")
    );
}

#[test]
fn a_rollout_past_its_deadline_is_stalled_and_says_so_first() {
    let d = with_status(
        dep25(4),
        DeploymentStatus {
            conditions: Some(vec![progressing("ProgressDeadlineExceeded", "False", 5)]),
            ..DeploymentStatus::default()
        },
    );
    let e = explain(&d, &[old(3, 3), new(2, 0)], now());
    assert_eq!(e.state, State::Stalled);
    assert_eq!(
        reasons_of(&e),
        ["ProgressDeadlineExceeded", "NewPodsUnavailable"]
    );
    assert!(e.waiting_on[0].message.starts_with("no progress for 600s"));
    assert_eq!(
        e.waiting_on[1].since, None,
        "the timeout is not when progress stopped"
    );
    assert!(
        !e.waiting_on[1].message.contains("progress deadline in"),
        "{}",
        e.waiting_on[1].message
    );
}

#[test]
fn a_paused_unfinished_rollout_is_stalled_until_resumed() {
    let mut d = dep25(4);
    d.spec.paused = Some(true);
    let e = explain(&d, &[old(3, 3), new(2, 0)], now());
    assert_eq!(e.state, State::Stalled);
    assert_eq!(reasons_of(&e), ["Paused"]);
    assert_eq!(e.remedies, ["kubectl rollout resume deployment/web"]);
}

#[test]
fn a_rollout_with_room_says_what_it_scales() {
    let e = explain(&dep25(4), &[old(4, 4), new(0, 0)], now());
    assert_eq!(e.state, State::Acting);
    assert_eq!(e.actions, ["scale ReplicaSet/web-new from 0 to 1"]);
    assert!(e.waiting_on.is_empty());
    let e = explain(&dep25(4), &[old(4, 4)], now());
    assert_eq!(e.state, State::Acting);
    assert_eq!(e.actions, ["create the ReplicaSet of the current template"]);
}

#[test]
fn a_rollout_past_its_deadline_says_what_the_rollback_remedy_does() {
    let rev = |rs: Rs, r: &str| {
        let mut rs = (*rs).clone();
        // Older than the deadline (600 s).
        rs.metadata.creation_timestamp = Some(Time(ago(1000)));
        rs.metadata.annotations = Some(std::collections::BTreeMap::from([(
            "deployment.kubernetes.io/revision".to_owned(),
            r.to_owned(),
        )]));
        Rs::new(rs)
    };
    let timed_out = |annotations: &[(&str, &str)]| {
        let mut d = with_status(
            dep25(4),
            DeploymentStatus {
                observed_generation: Some(1),
                conditions: Some(vec![DeploymentCondition {
                    message: Some("ReplicaSet \"web-new\" has timed out progressing.".into()),
                    ..progressing("ProgressDeadlineExceeded", "False", 5)
                }]),
                ..DeploymentStatus::default()
            },
        );
        d.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        d
    };
    let opt_in = ("rkcm.io/deployment-rollback-on-progress-deadline", "true");

    // Not asked: stalled, as upstream.
    let rss = [rev(old(3, 3), "1"), rev(new(2, 0), "2")];
    let e = explain(&timed_out(&[]), &rss, now());
    assert_eq!(e.state, State::Stalled);
    assert!(
        e.waiting_on[0].message.ends_with(
            "rollback on progress deadline: off (upstream's behaviour: nothing happens)"
        ),
        "{}",
        e.waiting_on[0].message
    );

    // Asked by annotation, or by the manager's flag: the rollback is the next action.
    for (d, flag) in [(timed_out(&[opt_in]), false), (timed_out(&[]), true)] {
        let e = explain_with(&d, &rss, flag, now());
        assert_eq!(e.state, State::Acting);
        assert_eq!(
            e.actions[0],
            "roll back from revision 2 to revision 1 (ReplicaSet/web-old): rkcm's rollback on progress deadline"
        );
        assert!(
            e.waiting_on[0]
                .message
                .ends_with("rolling back to revision 1"),
            "{}",
            e.waiting_on[0].message
        );
    }

    // The rollback's own revision (revision 1's ReplicaSet reused) stalls too: said, not
    // repeated.
    let d = timed_out(&[opt_in, ("rkcm.io/rolled-back-from-revision", "2")]);
    let reused = {
        let mut rs = (*rev(new(2, 0), "3")).clone();
        if let Some(a) = rs.metadata.annotations.as_mut() {
            a.insert(
                "deployment.kubernetes.io/revision-history".to_owned(),
                "1".to_owned(),
            );
        }
        Rs::new(rs)
    };
    let rss = [rev(old(3, 0), "2"), reused];
    let e = explain(&d, &rss, now());
    assert_eq!(e.state, State::Stalled);
    assert!(
        e.waiting_on[0].message.ends_with(
            "revision 3 is rkcm's rollback from revision 2 and is not rolled back again"
        ),
        "{}",
        e.waiting_on[0].message
    );
}
