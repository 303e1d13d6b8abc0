//! One case per reason code, and the plan's actions in words.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    ReplicaSet, ReplicaSetCondition, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::explain::State;

use super::{explain, explain_with};
use crate::plan::PlanConfig;
use crate::plan::tests::{P, ago, now};

fn rs(replicas: i32) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("rs-uid".into()),
            ..ObjectMeta::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            ..ReplicaSetSpec::default()
        },
        status: None,
    }
}

fn ready(name: &'static str) -> Arc<Pod> {
    P {
        name,
        uid: name,
        node: "n1",
        phase: "Running",
        ready: true,
        ready_since: Some(ago(Duration::from_secs(60))),
        created: Some(ago(Duration::from_secs(120))),
        owner_uid: Some("rs-uid"),
        ..P::default()
    }
    .build()
}

fn pending(name: &'static str) -> Arc<Pod> {
    P {
        name,
        uid: name,
        phase: "Pending",
        created: Some(ago(Duration::from_secs(10))),
        owner_uid: Some("rs-uid"),
        ..P::default()
    }
    .build()
}

#[test]
fn at_its_size_with_available_pods_settled() {
    let e = explain(&rs(2), "ReplicaSet", &[ready("a"), ready("b")], now());
    assert_eq!(e.state, State::Settled, "{e:?}");
    assert!(e.actions.is_empty() && e.waiting_on.is_empty(), "{e:?}");
}

#[test]
fn missing_and_surplus_pods_are_the_actions() {
    let e = explain(&rs(3), "ReplicaSet", &[ready("a")], now());
    assert_eq!(e.state, State::Acting);
    assert_eq!(e.actions, ["create 2 pods (1 of 3 exist)"]);
    let e = explain(&rs(1), "ReplicaSet", &[ready("a"), pending("b")], now());
    assert_eq!(
        e.actions,
        ["delete 1 pods: b"],
        "the pending pod goes first"
    );
}

#[test]
fn a_refused_create_carries_the_servers_message() {
    let mut owner = rs(3);
    owner.status = Some(ReplicaSetStatus {
        replicas: 1,
        conditions: Some(vec![ReplicaSetCondition {
            type_: Some("ReplicaFailure".into()),
            status: Some("True".into()),
            reason: Some("FailedCreate".into()),
            message: Some("pods \"web-x\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1".into()),
            last_transition_time: Some(Time(ago(Duration::from_secs(30)))),
        }]),
        ..ReplicaSetStatus::default()
    });
    let e = explain(&owner, "ReplicaSet", &[ready("a")], now());
    assert_eq!(e.state, State::Stalled, "{e:?}");
    let w = &e.waiting_on[0];
    assert_eq!(w.reason, "PodCreateFailed");
    assert!(w.message.contains("exceeded quota: pods"), "{w:?}");
    assert_eq!(w.since.as_deref(), Some("2026-06-01T11:59:30Z"));
    assert!(
        e.remedies[0].contains("kubectl -n ns describe ReplicaSet web"),
        "{e:?}"
    );
}

#[test]
fn pods_not_yet_available_are_waited_on() {
    let e = explain(&rs(2), "ReplicaSet", &[ready("a"), pending("b")], now());
    assert_eq!(e.state, State::Waiting);
    assert_eq!(e.waiting_on[0].reason, "PodsUnavailable");
    assert_eq!(e.waiting_on[0].objects, ["Pod/b"]);
}

#[test]
fn an_owner_being_deleted_acts_no_more() {
    let mut owner = rs(3);
    owner.metadata.deletion_timestamp = Some(Time(now()));
    let e = explain(&owner, "ReplicaSet", &[ready("a")], now());
    assert!(e.actions.is_empty(), "{e:?}");
    assert_eq!(e.waiting_on[0].reason, "Deleting");
}

#[test]
fn plans_with_the_managers_pod_deletion_cost_gate() {
    // b is older, so without the gate the newer a goes first; b costs less to delete.
    let a = P {
        name: "a",
        uid: "a",
        node: "n1",
        phase: "Running",
        ready: true,
        ready_since: Some(ago(Duration::from_secs(60))),
        created: Some(ago(Duration::from_secs(60))),
        cost: Some("100"),
        owner_uid: Some("rs-uid"),
        ..P::default()
    }
    .build();
    let b = P {
        name: "b",
        uid: "b",
        node: "n1",
        phase: "Running",
        ready: true,
        ready_since: Some(ago(Duration::from_secs(60))),
        created: Some(ago(Duration::from_secs(600))),
        cost: Some("-100"),
        owner_uid: Some("rs-uid"),
        ..P::default()
    }
    .build();
    let pods = [a, b];
    let on = explain(&rs(1), "ReplicaSet", &pods, now());
    assert_eq!(on.actions, ["delete 1 pods: b"]);
    let off = PlanConfig {
        pod_deletion_cost: false,
        ..PlanConfig::default()
    };
    let e = explain_with(&rs(1), "ReplicaSet", &pods, &off, now());
    assert_eq!(e.actions, ["delete 1 pods: a"]);
}
