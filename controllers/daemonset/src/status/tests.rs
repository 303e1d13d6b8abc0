use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::backoff::Backoff;
use crate::eligibility::node_should_run_daemon_pod;
use crate::snapshot::pods_by_node;
use crate::testutil::{ds, ds_with, node_from, nodes, pod, ts};

fn counts(
    d: &DaemonSet,
    nodes: &[Arc<rkcm_runtime::cache::cached::Node>],
    pods: &[Arc<Pod>],
    now: i64,
) -> Counts {
    let backoff = Backoff::default();
    let snap = Snapshot {
        ds: d,
        nodes,
        pods,
        hash: "h1",
        expectations_satisfied: true,
        backoff: &backoff,
        burst: 250,
        comparison_operators: false,
        skip_not_ready_nodes: false,
    };
    let by_node = pods_by_node(pods, false);
    let placements: Vec<_> = nodes
        .iter()
        .map(|n| node_should_run_daemon_pod(n, d, false))
        .collect();
    calculate_status(&snap, &by_node, &placements, ts(now))
}

#[test]
fn initial_status_before_and_after_readiness() {
    let d = ds();
    let n = nodes(&["a", "b", "c"]);
    let pending: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|x| pod(&format!("p-{x}"), x, "h1", 0).build())
        .collect();
    assert_eq!(
        counts(&d, &n, &pending, 10),
        Counts {
            desired_number_scheduled: 3,
            current_number_scheduled: 3,
            number_misscheduled: 0,
            number_ready: 0,
            updated_number_scheduled: 3,
            number_available: 0,
            number_unavailable: 3,
        }
    );
    let ready: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|x| pod(&format!("p-{x}"), x, "h1", 0).bound(x).ready(5).build())
        .collect();
    let c = counts(&d, &n, &ready, 10);
    assert_eq!(
        (c.number_ready, c.number_available, c.number_unavailable),
        (3, 3, 0)
    );
}

#[test]
fn min_ready_seconds_delays_availability() {
    let d = ds_with(json!({"spec": {"minReadySeconds": 10}}));
    let n = nodes(&["a"]);
    let p = vec![pod("p", "a", "h1", 0).bound("a").ready(100).build()];
    let c = counts(&d, &n, &p, 105);
    assert_eq!(
        (c.number_ready, c.number_available, c.number_unavailable),
        (1, 0, 1)
    );
    let c = counts(&d, &n, &p, 110);
    assert_eq!(
        c.number_available, 0,
        "strictly longer than minReadySeconds"
    );
    assert_eq!(counts(&d, &n, &p, 111).number_available, 1);
}

#[test]
fn misscheduled_missing_old_and_first_pod() {
    let d = ds();
    let n: Vec<_> = vec![
        Arc::new(node_from(json!({"metadata": {"name": "a"}}))),
        Arc::new(node_from(
            json!({"metadata": {"name": "tainted"}, "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}),
        )),
        Arc::new(node_from(json!({"metadata": {"name": "empty"}}))),
        Arc::new(node_from(json!({"metadata": {"name": "two"}}))),
    ];
    let pods = vec![
        pod("on-a", "a", "h0", 0).bound("a").ready(0).build(),
        pod("kept", "tainted", "h1", 0)
            .bound("tainted")
            .ready(0)
            .build(),
        // The bound newer pod counts before the older unbound one.
        pod("old-unbound", "two", "h1", 0).build(),
        pod("new-bound", "two", "h0", 5).bound("two").build(),
        // Gone for good: terminal and deleting.
        pod("dead", "empty", "h1", 0)
            .phase("Failed")
            .deleting()
            .build(),
        // Aimed at a node that does not exist.
        pod("ghost", "nowhere", "h1", 0).build(),
    ];
    assert_eq!(
        counts(&d, &n, &pods, 10),
        Counts {
            desired_number_scheduled: 3,
            current_number_scheduled: 2,
            number_misscheduled: 1,
            number_ready: 1,
            updated_number_scheduled: 0,
            number_available: 1,
            number_unavailable: 2,
        }
    );
}

#[test]
fn template_generation_counts_as_updated() {
    let d = ds_with(
        json!({"metadata": {"annotations": {"deprecated.daemonset.template.generation": "7"}}}),
    );
    let n = nodes(&["a"]);
    let p = vec![
        pod("p", "a", "h0", 0)
            .label("pod-template-generation", "7")
            .build(),
    ];
    assert_eq!(counts(&d, &n, &p, 0).updated_number_scheduled, 1);
}

#[test]
fn write_is_skipped_only_when_counters_and_generation_are_current() {
    let c = Counts {
        desired_number_scheduled: 1,
        current_number_scheduled: 1,
        number_unavailable: 1,
        ..Counts::default()
    };
    let stored = |generation: i64, observed: i64| {
        ds_with(json!({"metadata": {"generation": generation}, "status": {
        "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "numberMisscheduled": 0, "numberReady": 0,
        "numberUnavailable": 1, "observedGeneration": observed}}))
    };
    assert!(!needs_write(&stored(2, 2), &c));
    assert!(!needs_write(&stored(2, 3), &c));
    assert!(needs_write(&stored(3, 2), &c));
    let mut other = c;
    other.number_ready = 1;
    assert!(needs_write(&stored(2, 2), &other));

    let d = ds_with(
        json!({"metadata": {"generation": 5}, "status": {"collisionCount": 2, "observedGeneration": 4,
        "conditions": [{"type": "X", "status": "True"}], "currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}}),
    );
    let s = desired_status(&d, &c, false);
    assert_eq!(
        (
            s.observed_generation,
            s.collision_count,
            s.conditions.as_ref().map(Vec::len)
        ),
        (Some(4), Some(2), Some(1))
    );
    assert_eq!(
        (
            s.desired_number_scheduled,
            s.number_unavailable,
            s.number_available
        ),
        (1, Some(1), Some(0))
    );
    assert_eq!(desired_status(&d, &c, true).observed_generation, Some(5));
}

#[test]
fn only_writes_that_record_no_new_generation_are_routine() {
    let at = |generation: i64, observed: Option<i64>| {
        let status = observed.map_or(json!(null), |o| json!({"observedGeneration": o}));
        ds_with(json!({"metadata": {"generation": generation}, "status": status}))
    };
    // (generation, stored observedGeneration, may this sync record the generation, routine)
    let table = [
        (2, Some(2), true, true),
        (2, Some(3), true, true),
        (3, Some(2), true, false),
        (1, None, true, false),
        (3, Some(2), false, true),
        (1, None, false, true),
    ];
    for (generation, observed, may_record, routine) in table {
        assert_eq!(
            is_routine(&at(generation, observed), may_record),
            routine,
            "generation {generation}, observed {observed:?}, may record {may_record}"
        );
    }
}
