//! Table tests of the pure checker: for each invariant, a history that breaks it is caught
//! and a legal one (including the near misses that must not count) passes.

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::*;

const GRACE: i64 = 10;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

fn owner(kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}])
}

fn pod(name: &str, uid: &str, owner_: Value, extra: Value) -> Object {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "ownerReferences": owner_},
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "node-a"},
        "status": {"phase": "Running"},
    });
    crate::harness::merge_json(&mut v, &extra);
    Object::Pod(Box::new(serde_json::from_value(v).unwrap()))
}

fn rs(name: &str, uid: &str, replicas: i32, owner_: Value) -> Object {
    Object::ReplicaSet(Box::new(
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "ownerReferences": owner_},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
        }))
        .unwrap(),
    ))
}

fn deploy(replicas: i32, surge: Value) -> Object {
    Object::Deployment(Box::new(
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "uid": "d1"},
            "spec": {"replicas": replicas, "selector": {}, "template": {},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge}}},
        }))
        .unwrap(),
    ))
}

fn job(uid: &str, status: Value, extra: Value) -> Object {
    let mut v = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("job-{uid}"), "namespace": "ns", "uid": uid},
        "spec": {"completions": 3, "template": {}},
        "status": status,
    });
    crate::harness::merge_json(&mut v, &extra);
    Object::Job(Box::new(serde_json::from_value(v).unwrap()))
}

fn node(name: &str) -> Object {
    Object::Node(Box::new(
        serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
        )
        .unwrap(),
    ))
}

fn job_pod(name: &str, uid: &str, job: &str, phase: &str, extra: Value) -> Object {
    let mut e = json!({"status": {"phase": phase}});
    crate::harness::merge_json(&mut e, &extra);
    pod(name, uid, owner("Job", &format!("job-{job}"), job), e)
}

use Observation::{Applied as A, Deleted as D};

/// Runs a history (each step at its second), ticks well past the grace, and returns the
/// invariants that broke.
fn run(steps: Vec<(i64, Observation)>) -> Vec<Invariant> {
    let mut c = Checker::new(Config {
        grace: SignedDuration::from_secs(GRACE),
    });
    c.listed_empty(t(0), |kind| (kind != Kind::Node).then(|| "ns".to_owned()));
    c.observe(t(0), A(node("node-a")));
    let mut last = 0;
    for (s, obs) in steps {
        c.tick(t(s));
        c.observe(t(s), obs);
        last = s;
    }
    c.tick(t(last + 3 * GRACE));
    assert!(!c.pending(), "all suspicions judged");
    let mut out: Vec<_> = c.violations().iter().map(|v| v.invariant).collect();
    out.dedup();
    out
}

fn rs_pod(name: &str, extra: Value) -> Object {
    pod(name, name, owner("ReplicaSet", "r", "r1"), extra)
}

#[test]
fn replicaset_creating_above_replicas_is_caught() {
    let bad = run(vec![
        (1, A(rs("r", "r1", 2, json!(null)))),
        (2, A(rs_pod("p1", json!({})))),
        (2, A(rs_pod("p2", json!({})))),
        (3, A(rs_pod("p3", json!({})))),
    ]);
    assert_eq!(bad, vec![Invariant::ReplicaSetAboveReplicas]);
}

#[test]
fn replicaset_replacing_terminating_pods_and_scale_races_pass() {
    let ok = run(vec![
        (1, A(rs("r", "r1", 2, json!(null)))),
        (2, A(rs_pod("p1", json!({})))),
        (2, A(rs_pod("p2", json!({})))),
        // A terminating pod is not live: its replacement is legal.
        (
            3,
            A(rs_pod(
                "p1",
                json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:23Z", "deletionGracePeriodSeconds": 30}}),
            )),
        ),
        (4, A(rs_pod("p3", json!({})))),
        // A terminal pod is not live either.
        (5, A(rs_pod("p2", json!({"status": {"phase": "Failed"}})))),
        (6, A(rs_pod("p4", json!({})))),
        // Scaled down while the controller was creating: within the grace, not judged.
        (20, A(rs("r", "r1", 3, json!(null)))),
        (30, A(rs("r", "r1", 2, json!(null)))),
        (31, A(rs_pod("p5", json!({})))),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn deployment_above_replicas_plus_surge_is_caught() {
    let d = || owner("Deployment", "d", "d1");
    let bad = run(vec![
        (1, A(deploy(4, json!("25%")))), // surge 1
        (2, A(rs("old", "o", 4, d()))),
        (3, A(rs("new", "n", 1, d()))),
        (30, A(rs("new", "n", 2, d()))), // 6 > 5
    ]);
    assert_eq!(bad, vec![Invariant::DeploymentAboveSurge]);
}

/// The API server restarted: the Deployment's watch was down when it was scaled up and
/// relisted only after the ReplicaSets followed; the bound is the relisted one.
#[test]
fn a_bound_missed_while_its_watch_was_down_is_taken_from_the_relist() {
    let d = || owner("Deployment", "d", "d1");
    let scope = || Some("ns".to_owned());
    let ok = run(vec![
        (1, A(deploy(3, json!("25%")))), // bound 4
        (2, A(rs("old", "o", 3, d()))),
        (3, Observation::WatchLost(Kind::Deployment, scope())),
        // Scaled to 5 (bound 7) while the Deployment watch was down.
        (10, A(rs("new", "n", 2, d()))),
        (40, Observation::ListStart(Kind::Deployment, scope())),
        (40, Observation::Listed(deploy(5, json!("25%")))),
        (40, Observation::ListDone(Kind::Deployment, scope())),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
    // With the watch up, the same sum is a violation.
    let bad = run(vec![
        (1, A(deploy(3, json!("25%")))),
        (2, A(rs("old", "o", 3, d()))),
        (10, A(rs("new", "n", 2, d()))),
        (40, A(deploy(5, json!("25%")))),
    ]);
    assert_eq!(bad, vec![Invariant::DeploymentAboveSurge]);
}

/// The API server went away right after a scale-down: the manager's view stayed as old as
/// the outage until it relisted, so right after the outage a create following the old
/// replicas is not judged against the new ones; later it is.
#[test]
fn a_create_on_the_view_from_before_an_outage_passes_right_after_it() {
    let scope = || Some("ns".to_owned());
    let steps = |create_at: i64| {
        vec![
            (1, A(rs("r", "r1", 7, json!(null)))),
            (2, A(rs_pod("a", json!({})))),
            (30, A(rs("r", "r1", 1, json!(null)))),
            (31, Observation::WatchLost(Kind::Pod, scope())),
            (31, Observation::WatchLost(Kind::ReplicaSet, scope())),
            (60, Observation::ListStart(Kind::ReplicaSet, scope())),
            (60, Observation::Listed(rs("r", "r1", 1, json!(null)))),
            (60, Observation::ListDone(Kind::ReplicaSet, scope())),
            (60, Observation::ListStart(Kind::Pod, scope())),
            (60, Observation::Listed(rs_pod("a", json!({})))),
            (60, Observation::ListDone(Kind::Pod, scope())),
            (create_at, A(rs_pod("b", json!({})))),
        ]
    };
    let ok = run(steps(70));
    assert!(ok.is_empty(), "{ok:?}");
    let bad = run(steps(200));
    assert_eq!(bad, vec![Invariant::ReplicaSetAboveReplicas]);
}

/// The checker's ReplicaSet watch was down while the ReplicaSet was scaled up and down again
/// (the manager's watches were back sooner and created for the larger size): nothing the
/// checker saw tells the bound at the create, so the create is not judged.
#[test]
fn a_create_while_the_checkers_replicaset_watch_was_down_is_not_judged() {
    let scope = || Some("ns".to_owned());
    let steps = |create_at: i64| {
        vec![
            (1, A(rs("r", "r1", 1, json!(null)))),
            (2, A(rs_pod("a", json!({})))),
            (30, Observation::WatchLost(Kind::ReplicaSet, scope())),
            // Scaled to 2 and back to 1 unseen; the manager created "b" meanwhile.
            (create_at, A(rs_pod("b", json!({})))),
            (120, Observation::ListStart(Kind::ReplicaSet, scope())),
            (120, Observation::Listed(rs("r", "r1", 1, json!(null)))),
            (120, Observation::ListDone(Kind::ReplicaSet, scope())),
        ]
    };
    let ok = run(steps(90));
    assert!(ok.is_empty(), "{ok:?}");
    // Well before the outage, the same create is judged.
    let bad = run(steps(10));
    assert_eq!(bad, vec![Invariant::ReplicaSetAboveReplicas]);
}

/// A watch that breaks and goes on from its last resourceVersion (no relist) ends its outage
/// when it delivers again: later suspicions are judged on the bounds of their own moment, not
/// on a window stretched back to the old outage.
#[test]
fn a_watch_resumed_without_a_relist_ends_its_outage() {
    let scope = || Some("ns".to_owned());
    let bad = run(vec![
        (1, A(rs("r", "r1", 5, json!(null)))),
        (2, A(rs_pod("a", json!({})))),
        (3, Observation::WatchLost(Kind::Pod, scope())),
        (4, A(rs_pod("b", json!({})))),
        (40, A(rs("r", "r1", 1, json!(null)))),
        (200, A(rs_pod("c", json!({})))),
    ]);
    assert_eq!(bad, vec![Invariant::ReplicaSetAboveReplicas]);
}

#[test]
fn deployment_rollout_within_surge_and_scale_down_race_pass() {
    let d = || owner("Deployment", "d", "d1");
    let ok = run(vec![
        (1, A(deploy(4, json!(1)))),
        (2, A(rs("old", "o", 4, d()))),
        (3, A(rs("new", "n", 1, d()))),
        (4, A(rs("old", "o", 3, d()))),
        (5, A(rs("new", "n", 2, d()))),
        // The RS scale-up arrives before the Deployment scale-up it follows.
        (40, A(rs("new", "n", 5, d()))),
        (41, A(deploy(8, json!(1)))),
        // Scaled down; the ReplicaSets follow much later (a failover), scaling down only.
        (60, A(deploy(2, json!(1)))),
        (91, A(rs("new", "n", 2, d()))),
        (92, A(rs("old", "o", 0, d()))),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
}

fn sts_pod(name: &str, uid: &str, extra: Value) -> Object {
    pod(name, uid, owner("StatefulSet", "web", "s1"), extra)
}

#[test]
fn two_pods_with_one_statefulset_identity_are_caught() {
    let bad = run(vec![
        (1, A(sts_pod("web-1", "a", json!({})))),
        // The same name with a new UID before the old object was seen deleted.
        (2, A(sts_pod("web-1", "b", json!({})))),
    ]);
    assert_eq!(bad, vec![Invariant::StatefulSetIdentityShared]);
}

#[test]
fn statefulset_replacement_after_deletion_passes() {
    let ok = run(vec![
        (1, A(sts_pod("web-1", "a", json!({})))),
        (
            2,
            A(sts_pod(
                "web-1",
                "a",
                json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:23Z", "deletionGracePeriodSeconds": 30}}),
            )),
        ),
        (
            3,
            D(sts_pod(
                "web-1",
                "a",
                json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:23Z", "deletionGracePeriodSeconds": 30}}),
            )),
        ),
        (4, A(sts_pod("web-1", "b", json!({})))),
        (4, A(sts_pod("web-2", "c", json!({})))),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn statefulset_identity_after_a_relist_is_judged_on_the_list() {
    let mut c = Checker::new(Config::default());
    let ns = Some("ns".to_owned());
    c.observe(t(0), Observation::ListStart(Kind::Pod, ns.clone()));
    c.observe(t(0), Observation::Listed(sts_pod("web-1", "a", json!({}))));
    c.observe(t(0), Observation::ListDone(Kind::Pod, ns.clone()));
    // Relist after a gap: the old pod went away unseen, the new one is listed.
    c.observe(t(5), Observation::ListStart(Kind::Pod, ns.clone()));
    c.observe(t(5), Observation::Listed(sts_pod("web-1", "b", json!({}))));
    c.observe(t(5), Observation::ListDone(Kind::Pod, ns));
    c.tick(t(100));
    assert!(c.violations().is_empty(), "{:?}", c.violations());
    assert_eq!(c.gaps().len(), 1);
}

#[test]
fn job_count_decreasing_is_caught() {
    let bad = run(vec![
        (1, A(job("j", json!({"succeeded": 0}), json!({})))),
        (2, A(job_pod("p1", "p1", "j", "Succeeded", json!({})))),
        (3, A(job("j", json!({"succeeded": 1}), json!({})))),
        (4, A(job("j", json!({"succeeded": 0}), json!({})))),
    ]);
    assert_eq!(bad, vec![Invariant::JobCountDecreased]);
}

#[test]
fn job_counting_more_than_distinct_pods_is_caught() {
    let bad = run(vec![
        (1, A(job("j", json!({}), json!({})))),
        (2, A(job_pod("p1", "p1", "j", "Succeeded", json!({})))),
        // The same pod seen twice is one pod.
        (
            3,
            A(job_pod(
                "p1",
                "p1",
                "j",
                "Succeeded",
                json!({"metadata": {"labels": {"x": "y"}}}),
            )),
        ),
        (4, A(job("j", json!({"succeeded": 2}), json!({})))),
    ]);
    assert_eq!(bad, vec![Invariant::JobCountAboveTerminatedPods]);
    let bad = run(vec![
        (1, A(job("j", json!({}), json!({})))),
        (2, A(job("j", json!({"failed": 1}), json!({})))),
    ]);
    assert_eq!(bad, vec![Invariant::JobCountAboveTerminatedPods]);
}

#[test]
fn job_counts_backed_by_pods_even_when_pods_arrive_late_pass() {
    let ok = run(vec![
        (1, A(job("j", json!({}), json!({})))),
        // The Job's watch is ahead of the pod watch by a few seconds.
        (
            2,
            A(job("j", json!({"succeeded": 1, "failed": 2}), json!({}))),
        ),
        (5, A(job_pod("p1", "p1", "j", "Succeeded", json!({})))),
        (6, A(job_pod("p2", "p2", "j", "Failed", json!({})))),
        // A pod deleted while running counts as failed.
        (7, A(job_pod("p3", "p3", "j", "Running", json!({})))),
        (
            8,
            A(job_pod(
                "p3",
                "p3",
                "j",
                "Running",
                json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:23Z", "deletionGracePeriodSeconds": 30}}),
            )),
        ),
        (
            9,
            D(job_pod(
                "p3",
                "p3",
                "j",
                "Running",
                json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:23Z", "deletionGracePeriodSeconds": 30}}),
            )),
        ),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
    // A Job that existed before the watch: its early pods are unknown, counts not compared.
    let mut c = Checker::new(Config::default());
    c.observe(
        t(0),
        Observation::Listed(job("old", json!({"succeeded": 5}), json!({}))),
    );
    c.tick(t(100));
    assert!(c.violations().is_empty());
}

fn indexed(status: Value) -> Object {
    job("ix", status, json!({"spec": {"completionMode": "Indexed"}}))
}

fn ix_pod(n: i64) -> Object {
    job_pod(
        &format!("ix-{n}"),
        &format!("ix-{n}"),
        "ix",
        "Succeeded",
        json!({"metadata": {"annotations": {COMPLETION_INDEX_ANNOTATION: n.to_string()}}}),
    )
}

#[test]
fn wrong_completed_indexes_are_caught() {
    let cases = [
        // Index without a succeeded pod.
        vec![
            (1, A(indexed(json!({})))),
            (2, A(ix_pod(0))),
            (
                3,
                A(indexed(json!({"succeeded": 2, "completedIndexes": "0,2"}))),
            ),
        ],
        // Out of range (completions 3).
        vec![(
            1,
            A(indexed(json!({"succeeded": 1, "completedIndexes": "3"}))),
        )],
        // Disagrees with succeeded.
        vec![
            (1, A(ix_pod(0))),
            (
                2,
                A(indexed(json!({"succeeded": 2, "completedIndexes": "0"}))),
            ),
        ],
        // Malformed.
        vec![(
            1,
            A(indexed(json!({"succeeded": 1, "completedIndexes": "x"}))),
        )],
        // Shrank.
        vec![
            (1, A(ix_pod(0))),
            (1, A(ix_pod(1))),
            (
                2,
                A(indexed(json!({"succeeded": 2, "completedIndexes": "0-1"}))),
            ),
            (
                3,
                A(indexed(json!({"succeeded": 2, "completedIndexes": "0,2"}))),
            ),
        ],
    ];
    for (i, steps) in cases.into_iter().enumerate() {
        let bad = run(steps);
        assert!(
            bad.contains(&Invariant::JobCompletedIndexesWrong),
            "case {i}: {bad:?}"
        );
    }
}

#[test]
fn right_completed_indexes_pass() {
    let ok = run(vec![
        (1, A(indexed(json!({})))),
        (
            2,
            A(indexed(json!({"succeeded": 2, "completedIndexes": "0-1"}))),
        ),
        (3, A(ix_pod(1))),
        (4, A(ix_pod(0))),
        (5, A(ix_pod(2))),
        (
            6,
            A(indexed(json!({"succeeded": 3, "completedIndexes": "0-2"}))),
        ),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
}

fn done_job(uid: &str) -> Object {
    job(
        uid,
        json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}),
        json!({}),
    )
}

#[test]
fn tracking_finalizer_left_on_a_finished_job_is_caught() {
    let fin = json!({"metadata": {"finalizers": [JOB_TRACKING_FINALIZER]}});
    let bad = run(vec![
        (1, A(job("j", json!({}), json!({})))),
        (2, A(job_pod("p1", "p1", "j", "Succeeded", fin.clone()))),
        (3, A(done_job("j"))),
    ]);
    assert_eq!(bad, vec![Invariant::TrackingFinalizerLeft]);
    // Removed, even if the pod watch reports it a few seconds after the Job finished.
    let ok = run(vec![
        (1, A(job("j", json!({}), json!({})))),
        (2, A(job_pod("p1", "p1", "j", "Succeeded", fin))),
        (3, A(done_job("j"))),
        (6, A(job_pod("p1", "p1", "j", "Succeeded", json!({})))),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
}

fn cron_job(uid: &str, name: &str, scheduled: &str) -> Object {
    job(
        uid,
        json!({}),
        json!({"metadata": {"name": name,
            "annotations": {CRONJOB_SCHEDULED_ANNOTATION: scheduled},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "cj", "uid": "c1", "controller": true}]}}),
    )
}

#[test]
fn two_jobs_for_one_cronjob_slot_are_caught() {
    let bad = run(vec![
        (1, A(cron_job("a", "cj-100", "2026-01-01T00:00:00Z"))),
        (2, D(cron_job("a", "cj-100", "2026-01-01T00:00:00Z"))),
        (3, A(cron_job("b", "cj-100", "2026-01-01T00:00:00Z"))),
    ]);
    assert_eq!(bad, vec![Invariant::CronJobSlotTwice]);
    let ok = run(vec![
        (1, A(cron_job("a", "cj-100", "2026-01-01T00:00:00Z"))),
        (2, A(cron_job("a", "cj-100", "2026-01-01T00:00:00Z"))),
        (3, A(cron_job("b", "cj-101", "2026-01-01T00:01:00Z"))),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn force_delete_of_a_running_pod_on_an_existing_node_is_caught() {
    let bad = run(vec![
        (1, A(rs_pod("p1", json!({})))),
        (4, D(rs_pod("p1", json!({})))),
    ]);
    assert_eq!(bad, vec![Invariant::ForceDeleteOnLiveNode]);
    // The API server may show the pod terminating with grace 0 just before it goes.
    let forced = json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:23Z",
                                     "deletionGracePeriodSeconds": 0}});
    let bad = run(vec![
        (1, A(rs_pod("p1", json!({})))),
        (5, A(rs_pod("p1", forced.clone()))),
        (5, D(rs_pod("p1", forced))),
    ]);
    assert_eq!(bad, vec![Invariant::ForceDeleteOnLiveNode]);
}

#[test]
fn graceful_terminal_unscheduled_and_orphan_deletes_pass() {
    let terminating = json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:23Z",
                                          "deletionGracePeriodSeconds": 30}});
    let finishing = json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:23Z",
                                        "deletionGracePeriodSeconds": 0}});
    let ok = run(vec![
        // Graceful: terminating first, then gone (the kubelet's final grace-0 delete).
        (1, A(rs_pod("p1", json!({})))),
        (2, A(rs_pod("p1", terminating))),
        (3, A(rs_pod("p1", finishing.clone()))),
        (3, D(rs_pod("p1", finishing))),
        // Terminal pods go at once.
        (
            4,
            A(rs_pod("p2", json!({"status": {"phase": "Succeeded"}}))),
        ),
        (
            5,
            D(rs_pod("p2", json!({"status": {"phase": "Succeeded"}}))),
        ),
        // Unscheduled pods go at once.
        (6, A(rs_pod("p3", json!({"spec": {"nodeName": null}})))),
        (7, D(rs_pod("p3", json!({"spec": {"nodeName": null}})))),
        // A delete that read the pod just before the scheduler bound it.
        (8, A(rs_pod("p5", json!({"spec": {"nodeName": null}})))),
        (9, A(rs_pod("p5", json!({})))),
        (9, D(rs_pod("p5", json!({})))),
        // PodGC's orphans: the node is gone (its deletion may reach us a little later).
        (10, A(rs_pod("p4", json!({})))),
        (14, D(rs_pod("p4", json!({})))),
        (16, D(node("node-a"))),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn max_surge_resolves_like_upstream() {
    let surge = |replicas: i32, s: Value| match deploy(replicas, s) {
        Object::Deployment(d) => max_surge(&d),
        _ => unreachable!(),
    };
    assert_eq!(surge(10, json!("25%")), 3);
    assert_eq!(surge(4, json!("25%")), 1);
    assert_eq!(surge(1, json!("10%")), 1);
    assert_eq!(surge(5, json!(2)), 2);
    assert_eq!(surge(0, json!("25%")), 0);
}

#[test]
fn parses_interval_strings() {
    assert_eq!(parse_indexes("0-2,5"), Some(BTreeSet::from([0, 1, 2, 5])));
    assert_eq!(parse_indexes(""), Some(BTreeSet::new()));
    assert_eq!(parse_indexes("2-1"), None);
    assert_eq!(parse_indexes("a"), None);
}

#[test]
fn a_deployment_is_settled_only_when_every_replica_of_its_generation_is_available() {
    let d = |generation: i64, status: Value| -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "d", "generation": generation},
            "spec": {"replicas": 3, "selector": {}, "template": {}},
            "status": status,
        }))
        .unwrap_or_default()
    };
    let done = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
                      "availableReplicas": 3});
    assert_eq!(deployment_unsettled(&d(2, done.clone())), None);
    assert!(
        deployment_unsettled(&d(3, done)).is_some(),
        "generation not observed"
    );
    let rolling = json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3,
                         "availableReplicas": 3});
    assert!(
        deployment_unsettled(&d(2, rolling)).is_some(),
        "surge pod left"
    );
    let unavailable = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
                             "availableReplicas": 2});
    assert!(
        deployment_unsettled(&d(2, unavailable)).is_some(),
        "one unavailable"
    );
}
