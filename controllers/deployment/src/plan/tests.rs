//! Table tests of the rollout decisions. Mirrors upstream `TestReconcileNewReplicaSet`,
//! `TestReconcileOldReplicaSets`, `TestCleanupUnhealthyReplicas`,
//! `TestScaleDownOldReplicaSets` (`rolling_test.go`), `TestScale` (`sync_test.go`),
//! `TestDeploymentController_cleanupDeployment`, `TestOldPodsRunning` (`recreate_test.go`),
//! and replays the acceptance rollouts (scenarios below) step by step.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::cached::PodStatus;

use super::*;
use crate::model::tests::{
    R, annotated, dep, dep25, healthy, int, names, now, pct, recreate, rs_new, rs_old,
    with_status_replicas,
};

fn sizes(ops: &[ScaleOp]) -> Vec<(&str, i32)> {
    ops.iter().map(|op| (op.name.as_str(), op.to)).collect()
}

fn resized(rs: &Rs, to: i32) -> Rs {
    let mut copy = (**rs).clone();
    copy.spec.replicas = Some(to);
    Arc::new(copy)
}

#[test]
fn reconcile_new_cases() {
    let new = rs_new;
    let old = rs_old;
    let d = dep25(10);
    let all = |o, n| vec![old(o), new(n)];
    assert_eq!(
        reconcile_new(&d, &all(0, 10), &new(10)),
        Ok(None),
        "at size"
    );
    assert_eq!(
        reconcile_new(&d, &all(0, 12), &new(12)),
        Ok(Some(10)),
        "too big"
    );
    assert_eq!(reconcile_new(&d, &all(10, 0), &new(0)), Ok(Some(3)));
    assert_eq!(
        reconcile_new(&d, &all(10, 3), &new(3)),
        Ok(None),
        "at the surge ceiling"
    );
    assert_eq!(reconcile_new(&d, &all(8, 3), &new(3)), Ok(Some(5)));
}

#[test]
fn unhealthy_old_replicas_go_first() {
    // spec §9 scenario 5: old pods not ready, new RS just created at 3.
    let d = dep25(10);
    let old = R {
        name: "old",
        replicas: 10,
        status_replicas: 10,
        ..R::default()
    }
    .build();
    let new = R {
        name: "new",
        replicas: 3,
        status_replicas: 3,
        image: "v2",
        ..R::default()
    }
    .build();
    let all = vec![old.clone(), new.clone()];
    let step = reconcile_old(&d, &all, &[old], &new);
    assert_eq!(sizes(&step.ops), [("old", 8)]);
    assert!(step.invalid.is_none());
}

#[test]
fn cleanup_is_bounded_and_oldest_first() {
    let d = dep25(10);
    // Two unhealthy old RSs; budget 13 - 8 - 0 = 5... minus nothing for a healthy new one.
    let a = R {
        name: "a",
        replicas: 4,
        available: 1,
        age: 300,
        ..R::default()
    }
    .build();
    let b = R {
        name: "b",
        replicas: 6,
        available: 0,
        age: 200,
        ..R::default()
    }
    .build();
    let new = R {
        name: "new",
        replicas: 3,
        available: 3,
        image: "v2",
        ..R::default()
    }
    .build();
    let all = vec![a.clone(), b.clone(), new.clone()];
    let step = reconcile_old(&d, &all, &[b, a], &new);
    // max scaled down = 13 - 8 - 0 = 5: a loses its 3 unhealthy, b 2 of 6; then available
    // 1 + 0 + 3 = 4 ≤ 8: no availability-bounded scale-down.
    assert_eq!(sizes(&step.ops), [("a", 1), ("b", 4)]);
}

#[test]
fn availability_bounds_the_scale_down() {
    let d = dep25(10);
    let a = healthy("a", 4, "v0", 300);
    let b = healthy("b", 6, "v1", 200);
    let new = R {
        name: "new",
        replicas: 3,
        image: "v2",
        ..R::default()
    }
    .build();
    let all = vec![a.clone(), b.clone(), new.clone()];
    // 13 specified, 8 must stay available, 3 new unavailable: budget 2, taken from the
    // oldest.
    let step = reconcile_old(&d, &all, &[a, b], &new);
    assert_eq!(sizes(&step.ops), [("a", 2)]);
}

#[test]
fn nothing_to_scale_down() {
    let d = dep25(10);
    let new = R {
        name: "new",
        replicas: 5,
        image: "v2",
        ..R::default()
    }
    .build();
    let old = healthy("old", 8, "v1", 200);
    let all = vec![old.clone(), new.clone()];
    assert_eq!(
        reconcile_old(&d, &all, &[old], &new),
        OldScaleDown::default()
    );
    let gone = R {
        name: "gone",
        replicas: 0,
        ..R::default()
    }
    .build();
    assert_eq!(
        reconcile_old(&d, &[gone.clone(), new.clone()], &[gone], &new),
        OldScaleDown::default()
    );
}

#[test]
fn over_available_old_replica_set_is_an_invalid_request() {
    // Status lags a scale-down: more available than specified.
    let d = dep25(10);
    let old = R {
        name: "old",
        replicas: 5,
        available: 7,
        ..R::default()
    }
    .build();
    let new = R {
        name: "new",
        replicas: 5,
        available: 5,
        image: "v2",
        ..R::default()
    }
    .build();
    let all = vec![old.clone(), new.clone()];
    let step = reconcile_old(&d, &all, &[old], &new);
    assert!(step.ops.is_empty());
    assert!(
        step.invalid
            .is_some_and(|m| m.contains("invalid request to scale down ns/old 5 -> 7"))
    );
}

/// A rolling rollout replayed against a fake cluster: the controller's one step per sync,
/// then the ReplicaSets' status as `available(rs)` says. Returns `(new, old)` sizes once
/// nothing changes any more.
fn settle(
    d: &Deployment,
    mut old: Rs,
    available: impl Fn(&str, i32) -> i32,
) -> (i32, i32, Vec<(i32, i32)>) {
    let observe = |rs: &Rs, name: &str| {
        let mut copy = (**rs).clone();
        let n = model::replicas(rs);
        let s = copy.status.get_or_insert_with(Default::default);
        s.replicas = n;
        s.available_replicas = Some(available(name, n));
        Arc::new(copy)
    };
    let mut new: Option<Rs> = None;
    let mut trace = Vec::new();
    for _ in 0..50 {
        let before = (
            new.as_ref().map_or(0, |rs| model::replicas(rs)),
            model::replicas(&old),
        );
        match &new {
            None => {
                let created =
                    new_replica_set(d, "hash", std::slice::from_ref(&old), 2).expect("valid");
                let mut created = created;
                created.metadata.uid = Some("new-uid".into());
                new = Some(Arc::new(created));
            }
            Some(n) => {
                let all = vec![old.clone(), n.clone()];
                if let Some(to) = reconcile_new(d, &all, n).expect("valid") {
                    new = Some(resized(n, to));
                } else {
                    let step =
                        reconcile_old(d, &all, &model::active(std::slice::from_ref(&old)), n);
                    for op in step.ops {
                        old = resized(&old, op.to);
                    }
                }
            }
        }
        old = observe(&old, "old");
        new = new.map(|n| observe(&n, "new"));
        let after = (
            new.as_ref().map_or(0, |rs| model::replicas(rs)),
            model::replicas(&old),
        );
        trace.push(after);
        if after == before && new.is_some() && trace.len() > 1 {
            return (after.0, after.1, trace);
        }
    }
    panic!("no steady state: {trace:?}");
}

#[test]
fn rollout_with_new_pods_never_ready_settles_at_5_and_8() {
    // spec §9 scenario 3: 10 replicas, 25%/25%.
    let d = dep25(10);
    let (new, old, trace) = settle(&d, healthy("old", 10, "v1", 100), |name, n| {
        if name == "old" { n } else { 0 }
    });
    assert_eq!((new, old), (5, 8), "{trace:?}");
    assert!(
        trace.iter().all(|(n, o)| n + o <= 13),
        "never beyond D + maxSurge: {trace:?}"
    );
}

#[test]
fn rollout_with_unhealthy_old_pods_settles_at_5_and_8() {
    // spec §9 scenario 5.
    let d = dep25(10);
    let old = R {
        name: "old",
        replicas: 10,
        status_replicas: 10,
        ..R::default()
    }
    .build();
    let (new, old, trace) = settle(&d, old, |_, _| 0);
    assert_eq!((new, old), (5, 8), "{trace:?}");
    assert_eq!(
        trace[1],
        (3, 8),
        "the old RS drops to 8 by the unhealthy cleanup"
    );
}

#[test]
fn rollout_completes_when_pods_become_ready() {
    // spec §9 scenario 4.
    let d = dep25(10);
    let (new, old, trace) = settle(&d, healthy("old", 10, "v1", 100), |_, n| n);
    assert_eq!((new, old), (10, 0), "{trace:?}");
    assert!(trace.iter().all(|(n, o)| n + o <= 13));
}

#[test]
fn zero_surge_shrinks_old_first() {
    // spec §9 scenario 6: maxSurge 0, maxUnavailable 1, 3 ready.
    let d = dep(3, int(0), int(1));
    let (_, _, trace) = settle(&d, healthy("old", 3, "v1", 100), |name, n| {
        if name == "old" { n } else { 0 }
    });
    assert_eq!(&trace[..3], &[(0, 3), (0, 2), (1, 2)], "{trace:?}");
    assert_eq!(trace.last(), Some(&(1, 2)), "waits for the new pod");
    let (new, old, trace) = settle(&d, healthy("old", 3, "v1", 100), |_, n| n);
    assert_eq!((new, old), (3, 0), "{trace:?}");
    assert!(
        trace.iter().all(|(n, o)| n + o <= 3),
        "never a surge: {trace:?}"
    );
}

#[test]
fn one_replica_with_both_fenceposts_rounding_to_zero() {
    // spec §9 scenario 8: maxSurge 0, maxUnavailable 25% of 1 → 1.
    let d = dep(1, int(0), pct("25%"));
    let (_, _, trace) = settle(&d, healthy("old", 1, "v1", 100), |name, n| {
        if name == "old" { n } else { 0 }
    });
    assert_eq!(&trace[..3], &[(0, 1), (0, 0), (1, 0)], "{trace:?}");
}

fn pod_in(phase: &str, deleting: bool) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            deletion_timestamp: deleting.then(|| Time(now())),
            ..Default::default()
        },
        status: Some(PodStatus {
            phase: Some(phase.into()),
            ..PodStatus::default()
        }),
        ..Pod::default()
    })
}

#[test]
fn old_pods_running_cases() {
    let new = R {
        name: "new",
        image: "v2",
        ..R::default()
    }
    .build();
    let old = R {
        name: "old",
        ..R::default()
    }
    .build();
    let map = |entries: Vec<(&str, Vec<Arc<Pod>>)>| -> HashMap<String, Vec<Arc<Pod>>> {
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect()
    };
    // Status still reports pods.
    let reporting = R {
        name: "old",
        status_replicas: 1,
        ..R::default()
    }
    .build();
    assert!(old_pods_running(Some(&new), &[reporting], &HashMap::new()));
    // Nothing reported, nothing cached.
    assert!(!old_pods_running(
        Some(&new),
        std::slice::from_ref(&old),
        &HashMap::new()
    ));
    // Terminal pods never block; running, pending, unknown and terminating ones do.
    for (phase, deleting, running) in [
        ("Succeeded", false, false),
        ("Failed", true, false),
        ("Running", false, true),
        ("Pending", false, true),
        ("Unknown", false, true),
        ("Running", true, true),
        ("", false, true),
    ] {
        let pods = map(vec![("old-uid", vec![pod_in(phase, deleting)])]);
        assert_eq!(
            old_pods_running(Some(&new), std::slice::from_ref(&old), &pods),
            running,
            "{phase} deleting={deleting}"
        );
    }
    // Pods of the new RS do not count.
    let pods = map(vec![("new-uid", vec![pod_in("Running", false)])]);
    assert!(!old_pods_running(
        Some(&new),
        std::slice::from_ref(&old),
        &pods
    ));
    assert!(old_pods_running(None, std::slice::from_ref(&old), &pods));
}

#[test]
fn scaling_events() {
    let d = dep25(20);
    let sized_for = |name: &'static str, replicas: i32, desired: &'static str| {
        let annotations: &'static [(&'static str, &'static str)] = match desired {
            "10" => &[("deployment.kubernetes.io/desired-replicas", "10")],
            "20" => &[("deployment.kubernetes.io/desired-replicas", "20")],
            _ => &[("deployment.kubernetes.io/desired-replicas", "x")],
        };
        annotated(name, replicas, annotations)
    };
    assert!(is_scaling_event(&d, Some(&sized_for("new", 5, "10")), &[]));
    assert!(!is_scaling_event(&d, Some(&sized_for("new", 5, "20")), &[]));
    // Inactive RSs and unparsable annotations do not count.
    assert!(!is_scaling_event(&d, None, &[sized_for("old", 0, "10")]));
    assert!(!is_scaling_event(&d, None, &[sized_for("old", 3, "x")]));
}

fn mid_rollout(replicas: i32) -> (Deployment, Rs, Rs) {
    // spec §9 scenarios 9 and 10: old 8 / new 5 sized for D = 10 (max 13).
    let annotations: &'static [(&'static str, &'static str)] = &[
        ("deployment.kubernetes.io/desired-replicas", "10"),
        ("deployment.kubernetes.io/max-replicas", "13"),
    ];
    let old = R {
        name: "old",
        replicas: 8,
        status_replicas: 8,
        available: 8,
        age: 200,
        annotations,
        ..R::default()
    }
    .build();
    let new = R {
        name: "new",
        replicas: 5,
        status_replicas: 5,
        age: 100,
        image: "v2",
        annotations,
        ..R::default()
    }
    .build();
    (with_status_replicas(dep25(replicas), 13), old, new)
}

#[test]
fn proportional_scale_up() {
    let (d, old, new) = mid_rollout(20);
    let ScalePlan::Proportional(ops) = scale(&d, Some(&new), &[old]) else {
        panic!("proportional expected");
    };
    assert_eq!(sizes(&ops), [("old", 15), ("new", 10)]);
}

#[test]
fn proportional_scale_down() {
    let (d, old, new) = mid_rollout(5);
    let ScalePlan::Proportional(ops) = scale(&d, Some(&new), &[old]) else {
        panic!("proportional expected");
    };
    assert_eq!(sizes(&ops), [("old", 4), ("new", 3)]);
}

#[test]
fn proportional_leftover_goes_to_the_largest() {
    // Three RSs of 1 sized for D = 1 (max 2)... D → 3 (max 4 at 25%): each fraction
    // round(1 × 4 / 2) - 1 = 1, toAdd 1: the first (largest, newest on ties) takes it.
    let annotations: &'static [(&'static str, &'static str)] = &[
        ("deployment.kubernetes.io/desired-replicas", "1"),
        ("deployment.kubernetes.io/max-replicas", "2"),
    ];
    let a = R {
        name: "a",
        replicas: 1,
        age: 300,
        annotations,
        ..R::default()
    }
    .build();
    let b = R {
        name: "b",
        replicas: 1,
        age: 200,
        annotations,
        ..R::default()
    }
    .build();
    let c = R {
        name: "c",
        replicas: 1,
        age: 100,
        image: "v2",
        annotations,
        ..R::default()
    }
    .build();
    let d = dep25(3);
    let ScalePlan::Proportional(ops) = scale(&d, Some(&c), &[a, b]) else {
        panic!("proportional expected");
    };
    assert_eq!(sizes(&ops), [("c", 2), ("b", 1), ("a", 1)]);
}

#[test]
fn proportional_to_zero_and_unchanged_sizes_are_still_written() {
    let (d, old, new) = mid_rollout(0);
    let ScalePlan::Proportional(ops) = scale(&d, Some(&new), std::slice::from_ref(&old)) else {
        panic!("proportional expected");
    };
    assert_eq!(sizes(&ops), [("old", 0), ("new", 0)]);
    // Already at D + maxSurge (13 for 10): sizes kept, annotations refreshed by the writes.
    let (d, old, new) = mid_rollout(10);
    let ScalePlan::Proportional(ops) = scale(&d, Some(&new), &[old]) else {
        panic!("proportional expected");
    };
    assert_eq!(sizes(&ops), [("old", 8), ("new", 5)]);
}

#[test]
fn scale_single_active_or_saturated() {
    // spec §9 scenario 11: the only RS goes 3 → 7 directly.
    let only = healthy("only", 3, "v2", 100);
    assert_eq!(
        scale(&dep25(7), Some(&only), &[]),
        ScalePlan::One(ScaleOp {
            uid: "only-uid".into(),
            name: "only".into(),
            from: 3,
            to: 7
        })
    );
    assert_eq!(scale(&dep25(3), Some(&only), &[]), ScalePlan::Nothing);
    // Saturated new RS: the active old ones go to 0.
    let new = R {
        name: "new",
        replicas: 3,
        available: 3,
        image: "v2",
        annotations: &[("deployment.kubernetes.io/desired-replicas", "3")],
        ..R::default()
    }
    .build();
    let old = healthy("old", 1, "v1", 200);
    let idle = R {
        name: "idle",
        replicas: 0,
        ..R::default()
    }
    .build();
    assert_eq!(
        scale(&dep25(3), Some(&new), &[old, idle]),
        ScalePlan::OldToZero(vec![ScaleOp {
            uid: "old-uid".into(),
            name: "old".into(),
            from: 1,
            to: 0
        }])
    );
    // Recreate never scales proportionally.
    let a = healthy("a", 2, "v1", 200);
    let b = healthy("b", 2, "v2", 100);
    assert_eq!(scale(&recreate(6), Some(&b), &[a]), ScalePlan::Nothing);
}

/// The only active ReplicaSet has the right size but was annotated for another size (a
/// proportional scale interrupted by a conflict): the annotations are rewritten, or the
/// Deployment stays a scaling event and never rolls out (simulator seed 25; upstream
/// kubernetes/kubernetes#102551). Without the annotation there is no scaling event and
/// nothing to write.
#[test]
fn scale_rewrites_stale_annotations_of_the_only_active_replica_set() {
    let stale = R {
        name: "only",
        replicas: 3,
        available: 3,
        annotations: &[
            ("deployment.kubernetes.io/desired-replicas", "5"),
            ("deployment.kubernetes.io/max-replicas", "7"),
        ],
        ..R::default()
    }
    .build();
    let d = dep25(3);
    assert!(is_scaling_event(&d, None, std::slice::from_ref(&stale)));
    assert_eq!(
        scale(&d, None, std::slice::from_ref(&stale)),
        ScalePlan::Annotations(ScaleOp {
            uid: "only-uid".into(),
            name: "only".into(),
            from: 3,
            to: 3
        })
    );
    let write = scale_write(&d, &stale, 3, true).expect("the annotations are written");
    let annotations = write.replica_set.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations["deployment.kubernetes.io/desired-replicas"],
        "3"
    );
    assert_eq!(annotations["deployment.kubernetes.io/max-replicas"], "4");
    assert!(
        write.event.is_none(),
        "no size change, no ScalingReplicaSet event"
    );
    let unannotated = healthy("plain", 3, "v1", 100);
    assert_eq!(scale(&d, None, &[unannotated]), ScalePlan::Nothing);
}

fn old_rs(name: &'static str, revision: &'static str, replicas: i32, age: i64) -> Rs {
    let annotations: &'static [(&'static str, &'static str)] = match revision {
        "1" => &[("deployment.kubernetes.io/revision", "1")],
        "2" => &[("deployment.kubernetes.io/revision", "2")],
        "3" => &[("deployment.kubernetes.io/revision", "3")],
        "10" => &[("deployment.kubernetes.io/revision", "10")],
        _ => &[("deployment.kubernetes.io/revision", "x")],
    };
    R {
        name,
        replicas,
        status_replicas: replicas,
        age,
        annotations,
        ..R::default()
    }
    .build()
}

fn with_limit(limit: Option<i32>) -> Deployment {
    let mut d = dep25(1);
    d.spec.revision_history_limit = limit;
    d
}

#[test]
fn cleanup_choice() {
    let old = vec![
        old_rs("r10", "10", 0, 50),
        old_rs("r2", "2", 0, 300),
        old_rs("r3", "3", 0, 200),
        old_rs("r1", "1", 0, 100),
    ];
    assert_eq!(
        names(&cleanup(&with_limit(Some(2)), &old)),
        ["r1", "r2"],
        "lowest revisions, numerically"
    );
    assert_eq!(
        names(&cleanup(&with_limit(Some(0)), &old)),
        ["r1", "r2", "r3", "r10"]
    );
    assert!(cleanup(&with_limit(Some(4)), &old).is_empty());
    assert!(cleanup(&with_limit(None), &old).is_empty(), "no limit");
    assert!(
        cleanup(&with_limit(Some(i32::MAX)), &old).is_empty(),
        "MaxInt32 = no limit"
    );
}

#[test]
fn cleanup_skips_busy_replica_sets_without_substitutes() {
    let busy = old_rs("r1", "1", 8, 300);
    let mut unobserved = (*old_rs("r2", "2", 0, 200)).clone();
    unobserved.metadata.generation = Some(5);
    let old = vec![busy, Arc::new(unobserved), old_rs("r3", "3", 0, 100)];
    // Limit 1 → 2 candidates (r1, r2): both skipped, r3 is not taken instead.
    assert!(cleanup(&with_limit(Some(1)), &old).is_empty());
    // A deleting RS is not a candidate at all.
    let mut deleting = (*old_rs("r0", "1", 0, 400)).clone();
    deleting.metadata.deletion_timestamp = Some(Time(now()));
    let old = vec![Arc::new(deleting), old_rs("r3", "3", 0, 100)];
    assert!(cleanup(&with_limit(Some(1)), &old).is_empty());
    // Unparsable revisions sort by creation time.
    let old = vec![old_rs("young", "x", 0, 10), old_rs("aged", "x", 0, 900)];
    assert_eq!(names(&cleanup(&with_limit(Some(1)), &old)), ["aged"]);
}

#[test]
fn new_replica_set_shape() {
    let mut d = dep(5, pct("30%"), pct("30%"));
    d.metadata.annotations = Some(
        [
            ("team".to_owned(), "a".to_owned()),
            (
                "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
                "{}".to_owned(),
            ),
        ]
        .into(),
    );
    d.spec.min_ready_seconds = Some(4);
    let rs = new_replica_set(&d, "5d4b8c9f7", &[], 1).expect("valid");
    assert_eq!(rs.metadata.name.as_deref(), Some("web-5d4b8c9f7"));
    assert_eq!(rs.metadata.namespace.as_deref(), Some("ns"));
    let hash_label = ("pod-template-hash".to_owned(), "5d4b8c9f7".to_owned());
    let labels = rs.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    assert!(labels.get(&hash_label.0) == Some(&hash_label.1));
    assert_eq!(
        rs.spec
            .template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.clone()),
        Some(labels.clone())
    );
    assert_eq!(
        rs.spec
            .selector
            .match_labels
            .as_ref()
            .and_then(|m| m.get("pod-template-hash"))
            .map(String::as_str),
        Some("5d4b8c9f7")
    );
    let owner = &rs.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.api_version.as_str()
        ),
        ("Deployment", "web", "d-uid", "apps/v1")
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert_eq!(rs.spec.replicas, Some(5), "no old RS: all of D");
    assert_eq!(rs.spec.min_ready_seconds, Some(4));
    let annotations = rs.metadata.annotations.clone().unwrap_or_default();
    let get = |k: &str| annotations.get(k).map(String::as_str);
    assert_eq!(get("deployment.kubernetes.io/revision"), Some("1"));
    assert_eq!(get("deployment.kubernetes.io/desired-replicas"), Some("5"));
    assert_eq!(
        get("deployment.kubernetes.io/max-replicas"),
        Some("7"),
        "spec §9: 5 + ceil(1.5)"
    );
    assert_eq!(get("team"), Some("a"));
    assert_eq!(
        get("kubectl.kubernetes.io/last-applied-configuration"),
        None
    );
    // Rolling next to a full old RS: within the surge; Recreate: full size.
    let old = healthy("old", 10, "v1", 100);
    let rs = new_replica_set(&dep25(10), "h", std::slice::from_ref(&old), 2).expect("valid");
    assert_eq!(rs.spec.replicas, Some(3));
    let rs = new_replica_set(
        &dep(3, int(0), int(1)),
        "h",
        &[healthy("old", 3, "v1", 100)],
        2,
    )
    .expect("valid");
    assert_eq!(rs.spec.replicas, Some(0), "maxSurge 0");
    let rs = new_replica_set(&recreate(4), "h", &[], 2).expect("valid");
    assert_eq!(rs.spec.replicas, Some(4));
}

/// A running pod, ready since `ready_for` seconds before `now()` (`None`: not ready),
/// terminating or not.
fn running_pod(ready_for: Option<i64>, deleting: bool) -> Arc<Pod> {
    let mut pod = (*pod_in("Running", deleting)).clone();
    if let (Some(status), Some(secs)) = (pod.status.as_mut(), ready_for) {
        status.conditions = Some(vec![rkcm_runtime::cache::cached::PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(Time(crate::model::tests::ago(secs))),
            reason: None,
            message: None,
        }]);
    }
    Arc::new(pod)
}

#[test]
fn available_pods_counts_active_pods_available_under_min_ready_seconds() {
    let a = healthy("a", 5, "v1", 100);
    let mut slow = (*healthy("slow", 2, "v1", 100)).clone();
    slow.spec.min_ready_seconds = Some(30);
    let slow: Rs = Arc::new(slow);
    let absent = healthy("absent", 1, "v1", 100);
    let pods: HashMap<String, Vec<Arc<Pod>>> = HashMap::from([
        (
            "a-uid".to_owned(),
            vec![
                running_pod(Some(1), false),
                running_pod(Some(1), true),
                running_pod(None, false),
                pod_in("Failed", false),
                running_pod(Some(100), false),
            ],
        ),
        (
            "slow-uid".to_owned(),
            vec![running_pod(Some(10), false), running_pod(Some(31), false)],
        ),
    ]);
    let got = available_pods(&[a, slow, absent], &pods, now());
    let want = HashMap::from([("a-uid".to_owned(), 2), ("slow-uid".to_owned(), 1)]);
    assert_eq!(got, want);
}

/// An old ReplicaSet's status still counts a pod gone since its controller last synced (a
/// range without a holder, a cut-off manager): on the statuses alone the scale-down takes
/// the Deployment below `replicas - maxUnavailable`; held to the pods seen, it waits.
#[test]
fn a_status_counting_pods_gone_does_not_scale_down_below_min_available() {
    let d = dep(3, int(1), int(0));
    let old = healthy("old", 3, "v1", 200);
    let new = healthy("new", 1, "v2", 100);
    let all = vec![old.clone(), new.clone()];
    assert_eq!(
        sizes(&reconcile_old(&d, &all, std::slice::from_ref(&old), &new).ops),
        vec![("old", 2)],
        "upstream's rule, on the statuses"
    );
    let seen = HashMap::from([("old-uid".to_owned(), 2), ("new-uid".to_owned(), 1)]);
    assert_eq!(
        reconcile_old_seen(&d, &all, std::slice::from_ref(&old), &new, Some(&seen)),
        OldScaleDown::default(),
        "3 available seen, none to spare"
    );
    // The new ReplicaSet's pod gone too: one of the new replicas unavailable, nothing to
    // scale down either.
    let seen = HashMap::from([("old-uid".to_owned(), 3), ("new-uid".to_owned(), 0)]);
    assert_eq!(
        reconcile_old_seen(&d, &all, std::slice::from_ref(&old), &new, Some(&seen)),
        OldScaleDown::default()
    );
    // Every pod seen available: the same step as upstream's.
    let seen = HashMap::from([("old-uid".to_owned(), 3), ("new-uid".to_owned(), 1)]);
    assert_eq!(
        reconcile_old_seen(&d, &all, &[old], &new, Some(&seen)),
        reconcile_old(&d, &all, &[healthy("old", 3, "v1", 200)], &new)
    );
}

/// The cleanup of unhealthy replicas takes for unhealthy only what neither count shows
/// available: a status that lags its pods becoming ready (or not rewritten since) does not
/// scale away a ReplicaSet whose pods the cache shows available. Where the cache shows
/// fewer, the status's count stands.
#[test]
fn the_cleanup_takes_for_unhealthy_only_what_neither_count_shows_available() {
    let d = dep(3, int(1), int(0));
    let old = R {
        name: "old",
        replicas: 3,
        status_replicas: 3,
        available: 2,
        ready: 2,
        ..R::default()
    }
    .build();
    let new = healthy("new", 1, "v2", 100);
    let all = vec![old.clone(), new.clone()];
    let upstream = reconcile_old(&d, &all, std::slice::from_ref(&old), &new);
    assert_eq!(sizes(&upstream.ops), vec![("old", 2)], "the cleanup");
    let step = |seen_old: i32| {
        let seen = HashMap::from([("old-uid".to_owned(), seen_old), ("new-uid".to_owned(), 1)]);
        reconcile_old_seen(&d, &all, std::slice::from_ref(&old), &new, Some(&seen))
    };
    for seen_old in [0, 2] {
        assert_eq!(step(seen_old), upstream, "old seen {seen_old}");
    }
    for seen_old in [3, 9] {
        assert_eq!(
            step(seen_old),
            OldScaleDown::default(),
            "old seen {seen_old}"
        );
    }

    // A status that counts none of a ReplicaSet's pods available (written while their node
    // was out) while the cache shows both: upstream scales the only working ReplicaSet
    // away as unhealthy, leaving the broken ones (the simulator's deployment-rollback seed
    // 168). Here a broken old ReplicaSet goes first, then the working one is scaled down
    // only as far as availability allows.
    let d = dep(1, pct("25%"), pct("25%"));
    let working = R {
        name: "working",
        replicas: 2,
        status_replicas: 2,
        available: 0,
        age: 300,
        ..R::default()
    }
    .build();
    let broken = R {
        name: "broken",
        replicas: 1,
        status_replicas: 1,
        age: 200,
        image: "bad",
        ..R::default()
    }
    .build();
    let new = R {
        name: "new",
        replicas: 1,
        status_replicas: 1,
        image: "bad2",
        ..R::default()
    }
    .build();
    let all = vec![working.clone(), broken.clone(), new.clone()];
    let old = [working.clone(), broken.clone()];
    assert_eq!(
        sizes(&reconcile_old(&d, &all, &old, &new).ops),
        vec![("working", 0)],
        "upstream's rule, on the statuses"
    );
    let seen = HashMap::from([
        ("working-uid".to_owned(), 2),
        ("broken-uid".to_owned(), 0),
        ("new-uid".to_owned(), 0),
    ]);
    assert_eq!(
        sizes(&reconcile_old_seen(&d, &all, &old, &new, Some(&seen)).ops),
        vec![("broken", 0)]
    );

    // Two old pods the status counts available are not available in the cache: the
    // statuses see nothing unhealthy to clean up, so nothing is cleaned up, and the
    // availability-bounded part finds nothing to spare.
    let d = dep(3, int(2), int(0));
    let old = healthy("old", 3, "v1", 200);
    let new = healthy("new", 2, "v2", 10);
    let all = vec![old.clone(), new.clone()];
    assert_eq!(
        sizes(&reconcile_old(&d, &all, std::slice::from_ref(&old), &new).ops),
        vec![("old", 1)],
        "upstream's rule, on the statuses"
    );
    let seen = HashMap::from([("old-uid".to_owned(), 1), ("new-uid".to_owned(), 2)]);
    assert_eq!(
        reconcile_old_seen(&d, &all, &[old], &new, Some(&seen)),
        OldScaleDown::default()
    );
}
