//! Cases after upstream `daemon_controller_test.go` (`TestSimpleDaemonSetLaunchesPods`,
//! `TestDealsWithExistingPods`, `TestSelectorDaemonDeletesUnselectedPods`,
//! `TestDaemonKillFailedPods`, `TestDaemonKillFailedPodsBackoff`, `TestSurgeDealsWithExistingPods`,
//! `TestSurgePreservesReadyOldPods`, `TestSurgeDeletesUnreadyOldPods`, `TestDeleteUnscheduledPodForNotExistingNode`,
//! `TestTaintPressureNodeDaemonLaunchesPod`, ...) and `update_test.go`
//! (`TestDaemonSetUpdatesPods`, `TestDaemonSetUpdatesPodsWithMaxSurge`,
//! `TestDaemonSetUpdatesNoTemplateChanged`, `TestGetUnavailableNumbers`, ...).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use rkcm_runtime::cache::cached::{Node, Pod};
use serde_json::json;

use super::*;
use crate::backoff::Backoff;
use crate::testutil::{ds, ds_with, names, node_from, nodes, pod, ts};

struct Case {
    ds: DaemonSet,
    nodes: Vec<Arc<Node>>,
    pods: Vec<Arc<Pod>>,
    backoff: Backoff,
    satisfied: bool,
    burst: usize,
    /// The manager's opt-in into rkcm's rollout past NotReady nodes.
    skip_not_ready: bool,
}

fn case(ds: DaemonSet, nodes: Vec<Arc<Node>>, pods: Vec<Arc<Pod>>) -> Case {
    Case {
        ds,
        nodes,
        pods,
        backoff: Backoff::default(),
        satisfied: true,
        burst: 250,
        skip_not_ready: false,
    }
}

impl Case {
    /// The manager opts every DaemonSet into rkcm's rollout past NotReady nodes.
    fn skipping(mut self) -> Self {
        self.skip_not_ready = true;
        self
    }

    fn plan_at(&self, now: i64) -> Plan {
        let snap = Snapshot {
            ds: &self.ds,
            nodes: &self.nodes,
            pods: &self.pods,
            hash: "new",
            expectations_satisfied: self.satisfied,
            backoff: &self.backoff,
            burst: self.burst,
            comparison_operators: false,
            skip_not_ready_nodes: self.skip_not_ready,
        };
        plan(&snap, ts(now))
    }
    fn plan(&self) -> Plan {
        self.plan_at(1000)
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn creates_one_pod_per_eligible_node() {
    let p = case(ds(), nodes(&["a", "b", "c"]), vec![]).plan();
    assert_eq!(p.step, Step::Manage);
    assert_eq!(p.creates, vec!["a", "b", "c"]);
    assert!(p.deletes.is_empty());
    assert_eq!(p.status.desired_number_scheduled, 3);
    assert!(p.update_observed_generation);
}

#[test]
fn waits_for_expectations_and_only_counts() {
    let mut c = case(ds(), nodes(&["a", "b"]), vec![]);
    c.satisfied = false;
    let p = c.plan();
    assert_eq!(p.step, Step::WaitForExpectations);
    assert!(p.is_idle());
    assert!(!p.update_observed_generation);
    assert_eq!(p.status.desired_number_scheduled, 2);
}

#[test]
fn burst_caps_creates_and_deletes() {
    let names: Vec<String> = (0..300).map(|i| format!("n{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut c = case(ds(), nodes(&refs), vec![]);
    assert_eq!(c.plan().creates.len(), 250);
    c.burst = 2;
    assert_eq!(c.plan().creates, vec!["n0", "n1"]);
}

#[test]
fn keeps_the_oldest_of_extra_pods_bound_first() {
    let pods = vec![
        pod("young", "a", "new", 30).bound("a").build(),
        pod("oldest-unbound", "a", "new", 10).build(),
        pod("old", "a", "new", 20).bound("a").build(),
        pod("b1", "b", "new", 10).build(),
        pod("b0", "b", "new", 10).build(),
    ];
    let p = case(ds(), nodes(&["a", "b"]), pods).plan();
    assert!(p.creates.is_empty());
    assert_eq!(
        sorted(names(&p.deletes)),
        vec!["b1", "oldest-unbound", "young"],
        "ties by name"
    );
}

#[test]
fn deletes_pods_from_nodes_that_no_longer_match() {
    let d = ds_with(json!({"spec": {"template": {"spec": {"nodeSelector": {"role": "edge"}}}}}));
    let n = vec![
        Arc::new(node_from(
            json!({"metadata": {"name": "edge", "labels": {"role": "edge"}}}),
        )),
        Arc::new(node_from(json!({"metadata": {"name": "core"}}))),
    ];
    let pods = vec![
        pod("on-core", "core", "new", 0).bound("core").build(),
        pod("gone", "core", "new", 0).deleting().build(),
    ];
    let p = case(d, n, pods).plan();
    assert_eq!(p.creates, vec!["edge"]);
    assert_eq!(
        names(&p.deletes),
        vec!["on-core"],
        "terminating pods are not deleted again"
    );
    assert_eq!(p.status.number_misscheduled, 1);
}

#[test]
fn taints_keep_or_evict() {
    let n = vec![
        Arc::new(node_from(
            json!({"metadata": {"name": "nosched"}, "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}}),
        )),
        Arc::new(node_from(
            json!({"metadata": {"name": "noexec"}, "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoExecute"}]}}),
        )),
        Arc::new(node_from(
            json!({"metadata": {"name": "fresh"}, "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}}),
        )),
    ];
    let pods = vec![
        pod("kept", "nosched", "new", 0)
            .bound("nosched")
            .ready(0)
            .build(),
        pod("evicted", "noexec", "new", 0).bound("noexec").build(),
    ];
    let p = case(ds(), n, pods).plan();
    assert!(
        p.creates.is_empty(),
        "no new pod behind an untolerated NoSchedule taint"
    );
    assert_eq!(names(&p.deletes), vec!["evicted"]);
    assert_eq!(
        (
            p.status.desired_number_scheduled,
            p.status.number_misscheduled
        ),
        (0, 2)
    );
}

#[test]
fn failed_pods_are_deleted_with_backoff_and_an_event() {
    let pods = vec![
        pod("failed", "a", "new", 0)
            .bound("a")
            .phase("Failed")
            .build(),
    ];
    let mut c = case(ds(), nodes(&["a"]), pods);
    let p = c.plan_at(100);
    assert_eq!(names(&p.deletes), vec!["failed"]);
    assert!(
        p.creates.is_empty(),
        "the replacement comes after the failed pod is gone"
    );
    assert_eq!(p.backoff_next, vec!["ds-uid/0/a"]);
    assert_eq!(
        p.events,
        vec![PodEvent {
            warning: true,
            reason: "FailedDaemonPod",
            message: "Found failed daemon pod ns/failed on node a, will try to kill it".into()
        }]
    );
    // The controller advances its back-off; the replacement fails at once.
    c.backoff.next("ds-uid/0/a", ts(100));
    c.pods = vec![
        pod("failed-again", "a", "new", 100)
            .bound("a")
            .phase("Failed")
            .build(),
    ];
    let p = c.plan_at(100);
    assert!(p.deletes.is_empty(), "inside the 1 s window");
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(1)));
    assert!(p.events.is_empty());
    let p = c.plan_at(101);
    assert_eq!(names(&p.deletes), vec!["failed-again"]);
    c.backoff.next("ds-uid/0/a", ts(101));
    assert_eq!(
        c.plan_at(102).requeue_after,
        Some(std::time::Duration::from_secs(2)),
        "windows grow"
    );
    assert_eq!(names(&c.plan_at(103).deletes), vec!["failed-again"]);
}

#[test]
fn two_failed_pods_on_one_node_share_one_window() {
    let pods = vec![
        pod("f1", "a", "new", 0).bound("a").phase("Failed").build(),
        pod("f2", "a", "new", 1).bound("a").phase("Failed").build(),
    ];
    let p = case(ds(), nodes(&["a"]), pods).plan();
    assert_eq!(names(&p.deletes), vec!["f1"]);
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(1)));
}

#[test]
fn succeeded_pods_are_deleted_without_backoff() {
    let pods = vec![
        pod("done", "a", "new", 0)
            .bound("a")
            .phase("Succeeded")
            .build(),
    ];
    let p = case(ds(), nodes(&["a"]), pods).plan();
    assert_eq!(names(&p.deletes), vec!["done"]);
    assert!(p.backoff_next.is_empty());
    assert_eq!(
        p.events,
        vec![PodEvent {
            warning: false,
            reason: "SucceededDaemonPod",
            message: "Found succeeded daemon pod ns/done on node a, will try to delete it".into()
        }]
    );
}

#[test]
fn a_terminating_pod_blocks_its_replacement_without_surge() {
    let pods = vec![pod("going", "a", "new", 0).bound("a").deleting().build()];
    let p = case(ds(), nodes(&["a"]), pods).plan();
    assert!(p.is_idle());
    assert_eq!(
        p.status.current_number_scheduled, 1,
        "terminating non-terminal pods still count"
    );
}

#[test]
fn unscheduled_pods_of_missing_nodes_are_deleted() {
    let pods = vec![
        pod("unbound", "gone", "new", 0).build(),
        pod("bound", "gone", "new", 0).bound("gone").build(),
    ];
    let p = case(ds(), nodes(&["a"]), pods).plan();
    assert_eq!(p.creates, vec!["a"]);
    assert_eq!(
        names(&p.deletes),
        vec!["unbound"],
        "bound ones are pod GC's"
    );
}

#[test]
fn pods_of_missing_nodes_are_deleted_in_node_name_order() {
    // The plan is a function of the snapshot: the same pods give the same deletes in the same
    // order, whatever order the pods are grouped in.
    let gone = ["gone-d", "gone-b", "gone-e", "gone-a", "gone-c"];
    let pods = gone
        .iter()
        .map(|n| pod(&format!("p-{n}"), n, "new", 0).build())
        .collect();
    let p = case(ds(), nodes(&["a"]), pods).plan();
    assert_eq!(
        names(&p.deletes),
        vec!["p-gone-a", "p-gone-b", "p-gone-c", "p-gone-d", "p-gone-e"]
    );
}

fn surge_ds(max_surge: serde_json::Value, max_unavailable: serde_json::Value) -> DaemonSet {
    ds_with(
        json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable}}}}),
    )
}

#[test]
fn surge_manage_creates_beside_terminating_and_prunes_pairs() {
    let d = surge_ds(json!(1), json!(0));
    let pods = vec![
        pod("going", "a", "old", 0).bound("a").deleting().build(),
        // b: two new, two old: the oldest of each stay.
        pod("b-new-1", "b", "new", 1).bound("b").build(),
        pod("b-new-2", "b", "new", 2).bound("b").build(),
        pod("b-old-1", "b", "old", 1).bound("b").ready(0).build(),
        pod("b-old-2", "b", "old", 2).bound("b").build(),
        // c: old not ready next to a new one: the old goes.
        pod("c-old", "c", "old", 0).bound("c").build(),
        pod("c-new", "c", "new", 5).bound("c").build(),
        // d: old ready, new available: the old goes.
        pod("d-old", "d", "old", 0).bound("d").ready(0).build(),
        pod("d-new", "d", "new", 5).bound("d").ready(10).build(),
        // e: old ready, new not yet available: both stay.
        pod("e-old", "e", "old", 0).bound("e").ready(0).build(),
        pod("e-new", "e", "new", 5).bound("e").build(),
    ];
    let p = case(d, nodes(&["a", "b", "c", "d", "e"]), pods).plan();
    assert_eq!(p.creates, vec!["a"]);
    assert_eq!(
        sorted(names(&p.deletes)),
        vec!["b-new-2", "b-old-2", "c-old", "d-old"]
    );
}

fn ready_old(nodes: &[&str]) -> Vec<Arc<Pod>> {
    nodes
        .iter()
        .map(|n| {
            pod(&format!("old-{n}"), n, "old", 0)
                .bound(n)
                .ready(0)
                .build()
        })
        .collect()
}

#[test]
fn rolling_update_max_unavailable_one() {
    let p = case(ds(), nodes(&["a", "b", "c"]), ready_old(&["a", "b", "c"])).plan();
    assert_eq!(p.step, Step::RollingUpdate);
    assert_eq!(names(&p.deletes), vec!["old-a"]);
    assert_eq!(p.status.updated_number_scheduled, 0);
    // a's old pod is terminating: the node counts as unavailable, nothing more goes.
    let mut pods = ready_old(&["b", "c"]);
    pods.push(
        pod("old-a", "a", "old", 0)
            .bound("a")
            .ready(0)
            .deleting()
            .build(),
    );
    let p = case(ds(), nodes(&["a", "b", "c"]), pods).plan();
    assert!(p.is_idle());
    // a's new pod exists but is not ready yet.
    let mut pods = ready_old(&["b", "c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").build());
    assert!(case(ds(), nodes(&["a", "b", "c"]), pods).plan().is_idle());
    // Ready: the next old pod goes.
    let mut pods = ready_old(&["b", "c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").ready(20).build());
    let p = case(ds(), nodes(&["a", "b", "c"]), pods).plan();
    assert_eq!(names(&p.deletes), vec!["old-b"]);
}

#[test]
fn rolling_update_percent_rounds_up() {
    let d = surge_ds(json!(0), json!("50%"));
    let p = case(
        d.clone(),
        nodes(&["a", "b", "c", "d"]),
        ready_old(&["a", "b", "c", "d"]),
    )
    .plan();
    assert_eq!(names(&p.deletes).len(), 2);
    let p = case(d, nodes(&["a", "b", "c"]), ready_old(&["a", "b", "c"])).plan();
    assert_eq!(names(&p.deletes).len(), 2, "50% of 3 rounds up to 2");
}

#[test]
fn rolling_update_deletes_unavailable_old_pods_regardless() {
    let pods = vec![
        pod("old-a", "a", "old", 0).bound("a").build(),
        pod("old-b", "b", "old", 0).bound("b").build(),
        pod("old-c", "c", "old", 0).bound("c").ready(0).build(),
    ];
    let p = case(ds(), nodes(&["a", "b", "c"]), pods).plan();
    assert_eq!(
        names(&p.deletes),
        vec!["old-a", "old-b"],
        "no budget left for the ready one"
    );
}

#[test]
fn rolling_update_counts_nodes_without_pods_against_the_budget() {
    // c has no pod yet: manage creates it first; with c pending, nothing old goes.
    let mut pods = ready_old(&["a", "b"]);
    pods.push(pod("new-c", "c", "new", 0).build());
    assert!(case(ds(), nodes(&["a", "b", "c"]), pods).plan().is_idle());
}

#[test]
fn template_generation_marks_pods_new() {
    let pods: Vec<_> = ["a", "b"]
        .iter()
        .map(|n| {
            pod(n, n, "other", 0)
                .bound(n)
                .ready(0)
                .label("pod-template-generation", "1")
                .build()
        })
        .collect();
    let p = case(ds(), nodes(&["a", "b"]), pods).plan();
    assert!(p.is_idle());
    assert_eq!(p.status.updated_number_scheduled, 2);
}

#[test]
fn on_delete_never_deletes_old_pods() {
    let d =
        ds_with(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}));
    let p = case(d, nodes(&["a", "b"]), ready_old(&["a", "b"])).plan();
    assert_eq!(p.step, Step::Manage);
    assert!(p.is_idle());
    assert_eq!(p.status.updated_number_scheduled, 0);
}

#[test]
fn surge_rolling_update_creates_within_max_surge_and_deletes_after_availability() {
    let d = surge_ds(json!(1), json!(0));
    let p = case(
        d.clone(),
        nodes(&["a", "b", "c"]),
        ready_old(&["a", "b", "c"]),
    )
    .plan();
    assert_eq!(p.step, Step::RollingUpdate);
    assert_eq!(p.creates, vec!["a"]);
    assert!(p.deletes.is_empty());
    // A new pod surged onto a, not yet available: no other node gets one.
    let mut pods = ready_old(&["a", "b", "c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").build());
    assert!(
        case(d.clone(), nodes(&["a", "b", "c"]), pods.clone())
            .plan()
            .is_idle()
    );
    // Available: the old pod on a goes (manage does it for a pair) ...
    let mut pods = ready_old(&["a", "b", "c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").ready(20).build());
    let p = case(d.clone(), nodes(&["a", "b", "c"]), pods).plan();
    assert_eq!(p.step, Step::Manage);
    assert_eq!(names(&p.deletes), vec!["old-a"]);
    // ... and with a done, b is next.
    let mut pods = ready_old(&["b", "c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").ready(20).build());
    let p = case(d, nodes(&["a", "b", "c"]), pods).plan();
    assert_eq!(p.creates, vec!["b"]);
}

#[test]
fn surge_replaces_unavailable_old_pods_at_once_and_respects_min_ready() {
    let d = ds_with(
        json!({"spec": {"minReadySeconds": 30, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}),
    );
    let pods = vec![
        pod("old-a", "a", "old", 0).bound("a").build(),
        pod("old-b", "b", "old", 0).bound("b").build(),
        pod("old-c", "c", "old", 0).bound("c").ready(0).build(),
    ];
    let p = case(d.clone(), nodes(&["a", "b", "c"]), pods).plan_at(1000);
    assert_eq!(
        p.creates,
        vec!["a", "b", "c"],
        "unavailable old pods do not use the surge budget"
    );
    let mut pods = ready_old(&["a"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").ready(100).build());
    assert!(
        case(d.clone(), nodes(&["a"]), pods.clone())
            .plan_at(120)
            .is_idle(),
        "ready 20 s < 30 s"
    );
    assert_eq!(
        names(&case(d, nodes(&["a"]), pods).plan_at(131).deletes),
        vec!["old-a"]
    );
}

#[test]
fn surge_moves_between_nodes_only_while_availability_allows() {
    let d = ds_with(
        json!({"spec": {"template": {"spec": {"nodeSelector": {"role": "edge"}}}, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}),
    );
    let n = vec![
        // Still edge, but tainted: its pod may stay, no new pod may start there.
        Arc::new(node_from(
            json!({"metadata": {"name": "was-edge", "labels": {"role": "edge"}}, "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}),
        )),
        Arc::new(node_from(
            json!({"metadata": {"name": "edge", "labels": {"role": "edge"}}}),
        )),
    ];
    // The old pod stays on the node that left the selector until the new node's pod is available.
    let d_new = d.clone();
    let pods = vec![
        pod("old", "was-edge", "old", 0)
            .bound("was-edge")
            .ready(0)
            .build(),
        pod("new", "edge", "new", 10).bound("edge").build(),
    ];
    let p = case(d_new, n.clone(), pods).plan();
    assert!(p.is_idle(), "{:?}", names(&p.deletes));
    let pods = vec![
        pod("old", "was-edge", "old", 0)
            .bound("was-edge")
            .ready(0)
            .build(),
        pod("new", "edge", "new", 10)
            .bound("edge")
            .ready(20)
            .build(),
    ];
    let p = case(d, n, pods).plan();
    assert_eq!(names(&p.deletes), vec!["old"]);
}

#[test]
fn both_zero_means_one_unavailable() {
    let d = surge_ds(json!(0), json!(0));
    let p = case(d, nodes(&["a", "b"]), ready_old(&["a", "b"])).plan();
    assert_eq!(names(&p.deletes), vec!["old-a"]);
}

#[test]
fn invalid_max_unavailable_is_an_error_but_status_is_still_computed() {
    let d = surge_ds(json!(0), json!("lots"));
    let p = case(d, nodes(&["a"]), ready_old(&["a"])).plan();
    assert!(matches!(p.error, Some(PlanError::MaxUnavailable(_))));
    assert!(p.is_idle());
    assert_eq!(p.status.desired_number_scheduled, 1);
}

#[test]
fn a_ready_pod_waiting_for_min_ready_seconds_brings_a_requeue() {
    let d = ds_with(json!({"spec": {"minReadySeconds": 10}}));
    let pods = vec![pod("p", "a", "new", 0).bound("a").ready(100).build()];
    let c = case(d.clone(), nodes(&["a"]), pods.clone());
    assert_eq!(
        c.plan_at(104).requeue_after,
        Some(std::time::Duration::from_secs(7))
    );
    assert_eq!(c.plan_at(112).requeue_after, None, "already available");
    assert_eq!(
        case(ds(), nodes(&["a"]), pods).plan_at(104).requeue_after,
        None,
        "no minReadySeconds"
    );
}

/// Nodes with a Ready condition: `(name, ready)`.
fn nodes_ready(list: &[(&str, bool)]) -> Vec<Arc<Node>> {
    list.iter()
        .map(|(n, r)| {
            Arc::new(node_from(json!({
                "metadata": {"name": n},
                "status": {"conditions": [{"type": "Ready", "status": if *r { "True" } else { "False" }}]}
            })))
        })
        .collect()
}

#[test]
fn node_readiness_is_read_from_the_ready_condition_only() {
    let n = nodes_ready(&[("a", true), ("b", false)]);
    assert!(!node_is_not_ready(&n[0]));
    assert!(node_is_not_ready(&n[1]));
    let unknown = node_from(
        json!({"metadata": {"name": "u"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
    );
    assert!(node_is_not_ready(&unknown));
    assert!(
        !node_is_not_ready(&node_from(json!({"metadata": {"name": "x"}}))),
        "no condition reported yet"
    );
}

#[test]
fn a_node_not_ready_with_an_unavailable_new_pod_uses_the_budget_unless_opted_in() {
    // a's new pod will never be ready (the node is NotReady: the new revision broke it, or it
    // died). Upstream counts it against maxUnavailable: the rollout stops there.
    let n = nodes_ready(&[("a", false), ("b", true), ("c", true)]);
    let mut pods = ready_old(&["b", "c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").build());
    let p = case(ds(), n.clone(), pods.clone()).plan();
    assert_eq!(p.step, Step::RollingUpdate);
    assert!(p.is_idle(), "upstream: the budget of one is used by a");
    // Opted in (kubernetes/kubernetes#117204's ask): b and c still get updated, one at a time.
    let p = case(ds(), n.clone(), pods).skipping().plan();
    assert_eq!(names(&p.deletes), vec!["old-b"]);
    // The DaemonSet's annotation opts in alone, and opts out of the manager's opt-in.
    let annotated = |v: &str| {
        ds_with(json!({"metadata": {"annotations": {
            crate::consts::SKIP_NOT_READY_NODES_ANNOTATION: v}}}))
    };
    let mut pods = ready_old(&["b", "c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").build());
    let p = case(annotated("true"), n.clone(), pods.clone()).plan();
    assert_eq!(names(&p.deletes), vec!["old-b"]);
    assert!(
        case(annotated("false"), n.clone(), pods.clone())
            .skipping()
            .plan()
            .is_idle()
    );
    assert!(
        case(annotated("yes"), n.clone(), pods).plan().is_idle(),
        "only \"true\" opts in"
    );
    // b's replacement not ready yet: that uses the budget, nothing more goes.
    let mut pods = ready_old(&["c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").build());
    pods.push(pod("new-b", "b", "new", 20).bound("b").build());
    assert!(case(ds(), n.clone(), pods).skipping().plan().is_idle());
    // Ready: c is next.
    let mut pods = ready_old(&["c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").build());
    pods.push(pod("new-b", "b", "new", 20).bound("b").ready(30).build());
    assert_eq!(
        names(&case(ds(), n, pods).skipping().plan().deletes),
        vec!["old-c"]
    );
}

#[test]
fn a_node_dying_with_a_terminating_old_pod_stalls_the_rollout_unless_opted_in() {
    // The rollout deleted a's old pod, then a died: the pod never finishes terminating.
    // Upstream counts the node (old pod deleting, no new pod) as unavailable.
    let n = nodes_ready(&[("a", false), ("b", true), ("c", true)]);
    let mut pods = ready_old(&["b", "c"]);
    pods.push(
        pod("old-a", "a", "old", 0)
            .bound("a")
            .ready(0)
            .deleting()
            .build(),
    );
    assert!(case(ds(), n.clone(), pods.clone()).plan().is_idle());
    assert_eq!(
        names(&case(ds(), n, pods).skipping().plan().deletes),
        vec!["old-b"]
    );
}

#[test]
fn old_pods_on_not_ready_nodes_are_replaced_unless_opted_in() {
    // a is NotReady and its old pod with it. Upstream replaces an unavailable old pod at once
    // (it uses the budget).
    let n = nodes_ready(&[("a", false), ("b", true), ("c", true)]);
    let mut pods = vec![pod("old-a", "a", "old", 0).bound("a").build()];
    pods.extend(ready_old(&["b", "c"]));
    let p = case(ds(), n.clone(), pods.clone()).plan();
    assert_eq!(names(&p.deletes), vec!["old-a"]);
    // Opted in, replacing it would only leave a pod terminating on a node nobody runs: the
    // budget goes to a Ready node.
    let p = case(ds(), n.clone(), pods).skipping().plan();
    assert_eq!(names(&p.deletes), vec!["old-b"]);
    // Ready again with its pod not ready yet: now it is replaced at once and uses budget.
    let n = nodes_ready(&[("a", true), ("b", true), ("c", true)]);
    let mut pods = vec![pod("old-a", "a", "old", 0).bound("a").build()];
    pods.extend(ready_old(&["b", "c"]));
    assert_eq!(
        names(&case(ds(), n, pods).skipping().plan().deletes),
        vec!["old-a"]
    );
}

#[test]
fn unavailable_old_pods_on_ready_nodes_use_the_budget() {
    // kubernetes/kubernetes#123232: with maxUnavailable 2 and a's old pod unavailable, one
    // ready old pod may go, not two.
    let d = surge_ds(json!(0), json!(2));
    let n = nodes_ready(&[("a", true), ("b", true), ("c", true), ("d", true)]);
    let mut pods = vec![pod("old-a", "a", "old", 0).bound("a").build()];
    pods.extend(ready_old(&["b", "c", "d"]));
    let p = case(d, n, pods).plan();
    assert_eq!(names(&p.deletes), vec!["old-a", "old-b"]);
}

#[test]
fn a_not_ready_node_gives_no_extra_budget() {
    // Opted in, a sits the rollout out; b's new pod is not ready: the budget of one is used,
    // c waits (as upstream, where a and b both count).
    let n = nodes_ready(&[("a", false), ("b", true), ("c", true)]);
    let pods = vec![
        pod("new-a", "a", "new", 10).bound("a").build(),
        pod("new-b", "b", "new", 10).bound("b").build(),
        pod("old-c", "c", "old", 0).bound("c").ready(0).build(),
    ];
    assert!(
        case(ds(), n.clone(), pods.clone())
            .skipping()
            .plan()
            .is_idle()
    );
    assert!(case(ds(), n, pods).plan().is_idle());
}

#[test]
fn surge_rollout_waits_on_a_not_ready_node_unless_opted_in() {
    // maxSurge 1: a went NotReady while its surge pod was starting. Upstream waits on it.
    let d = surge_ds(json!(1), json!(0));
    let n = nodes_ready(&[("a", false), ("b", true), ("c", true)]);
    let mut pods = ready_old(&["a", "b", "c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").build());
    let p = case(d.clone(), n.clone(), pods.clone()).plan();
    assert_eq!(p.step, Step::RollingUpdate);
    assert!(p.is_idle(), "upstream: a's surge pod uses the surge budget");
    let p = case(d.clone(), n.clone(), pods).skipping().plan();
    assert_eq!(p.creates, vec!["b"]);
    // With b's surge pod starting, c waits.
    let mut pods = ready_old(&["a", "b", "c"]);
    pods.push(pod("new-a", "a", "new", 10).bound("a").build());
    pods.push(pod("new-b", "b", "new", 10).bound("b").build());
    assert!(case(d, n, pods).skipping().plan().is_idle());
}
