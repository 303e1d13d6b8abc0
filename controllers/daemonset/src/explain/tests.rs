//! One table row per reason code: the state, the reasons and the objects named.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use rkcm_runtime::cache::cached::Node;
use rkcm_runtime::explain::State;
use serde_json::json;

use super::{Seen, explain};
use crate::revision;
use crate::testutil::{ds_with, node_from, nodes, pod, ts};

/// The hash the controller gives the template's revision (input data, as a pod label).
fn hash(ds: &DaemonSet) -> String {
    revision::hash_and_name(ds).0
}

fn reasons(e: &rkcm_runtime::explain::Explanation) -> Vec<&'static str> {
    e.waiting_on.iter().map(|w| w.reason).collect()
}

fn run(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &[Arc<rkcm_runtime::cache::cached::Pod>],
) -> rkcm_runtime::explain::Explanation {
    let seen = Seen {
        ds,
        nodes,
        pods,
        revisions: &[],
    };
    let cfg = crate::Config::default();
    let e = explain(&seen, &cfg, ts(1000));
    // The sync records the explanation of the plan it made (expectations satisfied, no
    // failed pod in back-off): the same as `rkcm explain`'s for every row.
    let h = hash(ds);
    let backoff = crate::backoff::Backoff::default();
    let snap = crate::plan::Snapshot {
        ds,
        nodes,
        pods,
        hash: &h,
        expectations_satisfied: true,
        backoff: &backoff,
        burst: cfg.burst_replicas,
        comparison_operators: cfg.taint_comparison_operators,
        skip_not_ready_nodes: cfg.rollout_skips_not_ready_nodes,
    };
    let from_plan = super::explain_sync(&snap, &crate::plan::plan(&snap, ts(1000)), &cfg, ts(1000));
    assert_eq!(
        from_plan, e,
        "the sync's explanation differs from explain's"
    );
    e
}

#[test]
fn every_node_runs_a_ready_current_pod_settled() {
    let ds = ds_with(json!({}));
    let h = hash(&ds);
    let pods = vec![
        pod("a", "n1", &h, 0).bound("n1").ready(0).build(),
        pod("b", "n2", &h, 0).bound("n2").ready(0).build(),
    ];
    let e = run(&ds, &nodes(&["n1", "n2"]), &pods);
    assert_eq!(e.state, State::Settled, "{e:?}");
    assert!(e.waiting_on.is_empty() && e.actions.is_empty(), "{e:?}");
}

#[test]
fn a_missing_pod_is_created() {
    let ds = ds_with(json!({}));
    let h = hash(&ds);
    let pods = vec![pod("a", "n1", &h, 0).bound("n1").ready(0).build()];
    let e = run(&ds, &nodes(&["n1", "n2"]), &pods);
    assert_eq!(e.state, State::Acting);
    assert_eq!(e.actions, ["create a pod on node n2"]);
}

#[test]
fn nodes_without_a_pod_say_why() {
    let ds = ds_with(json!({"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}}));
    let h = hash(&ds);
    let node = |v| Arc::new(node_from(v));
    let all = vec![
        node(json!({"metadata": {"name": "ssd", "labels": {"disk": "ssd"}}})),
        node(json!({"metadata": {"name": "hdd", "labels": {"disk": "hdd"}}})),
        node(
            json!({"metadata": {"name": "gpu-1", "labels": {"disk": "ssd"}},
            "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}}),
        ),
        node(
            json!({"metadata": {"name": "gpu-2", "labels": {"disk": "ssd"}},
            "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]}}),
        ),
        // Cordoned: daemon pods tolerate the unschedulable taint, so it is eligible.
        node(
            json!({"metadata": {"name": "cordoned", "labels": {"disk": "ssd"}},
            "spec": {"unschedulable": true, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}}),
        ),
    ];
    let pods = vec![pod("a", "ssd", &h, 0).bound("ssd").ready(0).build()];
    let e = run(&ds, &all, &pods);
    assert_eq!(e.actions, ["create a pod on node cordoned"]);
    assert_eq!(
        reasons(&e),
        [
            "NodeSelectorMismatch",
            "TaintNotTolerated",
            "TaintNotTolerated"
        ]
    );
    assert_eq!(e.waiting_on[0].objects, ["Node/hdd"]);
    assert_eq!(e.waiting_on[1].objects, ["Node/gpu-2"]);
    assert!(
        e.waiting_on[1].message.contains("dedicated=gpu:NoExecute"),
        "{e:?}"
    );
    assert_eq!(e.waiting_on[2].objects, ["Node/gpu-1"]);
    assert!(
        e.waiting_on[2].message.contains("dedicated=gpu:NoSchedule"),
        "{e:?}"
    );
}

#[test]
fn a_rollout_waits_on_its_unavailable_budget() {
    let ds = ds_with(json!({}));
    let h = hash(&ds);
    let pods = vec![
        pod("new", "n1", &h, 0).bound("n1").phase("Running").build(),
        pod("old-2", "n2", "old", 0).bound("n2").ready(0).build(),
        pod("old-3", "n3", "old", 0).bound("n3").ready(0).build(),
    ];
    let e = run(&ds, &nodes(&["n1", "n2", "n3"]), &pods);
    assert_eq!(e.state, State::Waiting, "{e:?}");
    assert!(e.actions.is_empty(), "{e:?}");
    assert_eq!(reasons(&e), ["RolloutBudget", "PodsUnavailable"]);
    assert_eq!(e.waiting_on[0].objects, ["Pod/new"]);
    assert!(
        e.waiting_on[0].message.contains("2 pods an old one")
            && e.waiting_on[0].message.contains("maxUnavailable 1"),
        "{e:?}"
    );
}

#[test]
fn on_delete_old_pods_need_a_person() {
    let ds =
        ds_with(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}));
    let pods = vec![pod("old-1", "n1", "old", 0).bound("n1").ready(0).build()];
    let e = run(&ds, &nodes(&["n1"]), &pods);
    assert_eq!(e.state, State::Stalled, "{e:?}");
    assert_eq!(reasons(&e), ["OnDelete"]);
    assert_eq!(
        e.remedies[0],
        "delete the old pods to roll them: kubectl -n ns delete pod old-1"
    );
}

#[test]
fn an_unusable_budget_is_stalled() {
    let ds =
        ds_with(json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "ten"}}}}));
    let pods = vec![pod("old-1", "n1", "old", 0).bound("n1").ready(0).build()];
    let e = run(&ds, &nodes(&["n1"]), &pods);
    assert_eq!(e.state, State::Stalled, "{e:?}");
    assert_eq!(reasons(&e)[0], "InvalidStrategy");
}

#[test]
fn plans_with_the_managers_comparison_operators_gate() {
    let ds = ds_with(json!({"spec": {"template": {"spec": {"tolerations": [
        {"key": "tier", "operator": "Gt", "value": "3", "effect": "NoSchedule"}
    ]}}}}));
    let node = Arc::new(node_from(json!({"metadata": {"name": "n5"},
        "spec": {"taints": [{"key": "tier", "value": "5", "effect": "NoSchedule"}]}})));
    let nodes = [node];
    let seen = Seen {
        ds: &ds,
        nodes: &nodes,
        pods: &[],
        revisions: &[],
    };
    // Gate off (upstream's default): a `Gt` toleration tolerates nothing.
    let off = explain(&seen, &crate::Config::default(), ts(1000));
    assert_eq!(reasons(&off), ["TaintNotTolerated"]);
    // The manager runs with the gate on: 5 > 3 is tolerated, the pod is created.
    let on = crate::Config {
        taint_comparison_operators: true,
        ..crate::Config::default()
    };
    let e = explain(&seen, &on, ts(1000));
    assert_eq!(e.actions, ["create a pod on node n5"], "{e:?}");
}
