//! One case per reason code, and a pod PodGC takes now.

use std::sync::Arc;

use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::explain::State;

use super::explain;
use crate::plan::tests::{deleting, node, on, pod};

fn arc<T>(t: T) -> Arc<T> {
    Arc::new(t)
}

fn run(
    target: &Arc<Pod>,
    pods: &[Arc<Pod>],
    nodes: &[Arc<Node>],
    threshold: i32,
) -> rkcm_runtime::explain::Explanation {
    explain(target, pods, nodes, threshold, 40)
}

#[test]
fn a_pod_of_a_missing_node_waits_for_the_quarantine() {
    let p = arc(on(pod("ns", "a", 0, "Running"), "gone"));
    let e = run(
        &p,
        std::slice::from_ref(&p),
        &[arc(node("n1", Some("True"), &[]))],
        10,
    );
    assert_eq!(e.state, State::Waiting);
    assert_eq!(e.waiting_on[0].reason, "NodeQuarantine");
    assert_eq!(e.waiting_on[0].objects, ["Node/gone"]);
    assert!(
        e.waiting_on[0].message.contains("missing for 40 s"),
        "{e:?}"
    );
}

#[test]
fn a_terminated_pod_below_the_threshold_stays() {
    let nodes = [arc(node("n1", Some("True"), &[]))];
    let old = arc(on(pod("ns", "old", 0, "Succeeded"), "n1"));
    let new = arc(on(pod("ns", "new", 10, "Failed"), "n1"));
    let pods = [old.clone(), new.clone()];
    let e = run(&old, &pods, &nodes, 2);
    assert_eq!(e.waiting_on[0].reason, "BelowTerminatedThreshold");
    assert!(
        e.waiting_on[0].message.contains("holds 2 terminated pods"),
        "{e:?}"
    );
    // Above it, the oldest goes now; the newest stays.
    let e = run(&old, &pods, &nodes, 1);
    assert_eq!(e.state, State::Acting, "{e:?}");
    assert!(e.actions[0].contains("terminated"), "{e:?}");
    let e = run(&new, &pods, &nodes, 1);
    assert_eq!(e.waiting_on[0].reason, "BelowTerminatedThreshold");
}

#[test]
fn a_terminating_pod_on_a_present_node_is_the_kubelets() {
    let p = arc(deleting(on(pod("ns", "a", 0, "Running"), "n1")));
    let down = [arc(node("n1", Some("False"), &[]))];
    let e = run(&p, std::slice::from_ref(&p), &down, 10);
    assert_eq!(e.state, State::Waiting);
    assert_eq!(e.waiting_on[0].reason, "NodePresent");
    assert!(
        e.remedies[0].contains("node.kubernetes.io/out-of-service"),
        "{e:?}"
    );
    // With the out-of-service taint on the NotReady node, PodGC takes it now.
    let tainted = [arc(node(
        "n1",
        Some("False"),
        &[(
            "node.kubernetes.io/out-of-service",
            "nodeshutdown",
            "NoExecute",
        )],
    ))];
    let e = run(&p, std::slice::from_ref(&p), &tainted, 10);
    assert_eq!(e.state, State::Acting, "{e:?}");
}

#[test]
fn a_running_pod_is_not_garbage() {
    let p = arc(on(pod("ns", "a", 0, "Running"), "n1"));
    let e = run(
        &p,
        std::slice::from_ref(&p),
        &[arc(node("n1", Some("True"), &[]))],
        10,
    );
    assert_eq!(e.state, State::Settled);
    assert_eq!(e.waiting_on[0].reason, "NotGarbage");
}

/// `sweep_waits`: the waits a sweep records, one row per pod: (pod, its node, the nodes of
/// the cluster, the names confirmed gone this sweep) -> the reason recorded, or none.
#[test]
fn a_sweep_records_the_waits_explain_names() {
    use std::collections::BTreeSet;

    use super::sweep_waits;
    use crate::plan::plan;

    let ready = || arc(node("ready", Some("True"), &[]));
    let down = || arc(node("down", Some("False"), &[]));
    let tainted = || {
        arc(node(
            "tainted",
            Some("False"),
            &[(
                "node.kubernetes.io/out-of-service",
                "nodeshutdown",
                "NoExecute",
            )],
        ))
    };
    let cases: [(&str, Pod, Vec<&str>, Option<&str>); 8] = [
        (
            "running on a Ready node",
            on(pod("ns", "a", 0, "Running"), "ready"),
            vec![],
            None,
        ),
        (
            "terminating on a Ready node",
            deleting(on(pod("ns", "a", 0, "Running"), "ready")),
            vec![],
            None,
        ),
        (
            "terminating on a NotReady node",
            deleting(on(pod("ns", "a", 0, "Running"), "down")),
            vec![],
            Some("NodePresent"),
        ),
        (
            "running on a NotReady node",
            on(pod("ns", "a", 0, "Running"), "down"),
            vec![],
            None,
        ),
        (
            "terminating on an out-of-service node",
            deleting(on(pod("ns", "a", 0, "Running"), "tainted")),
            vec![],
            None,
        ),
        (
            "on a missing node",
            on(pod("ns", "a", 0, "Running"), "ghost"),
            vec![],
            Some("NodeQuarantine"),
        ),
        (
            "on a node confirmed gone",
            on(pod("ns", "a", 0, "Running"), "ghost"),
            vec!["ghost"],
            None,
        ),
        (
            "terminated, unbound",
            pod("ns", "a", 0, "Succeeded"),
            vec![],
            None,
        ),
    ];
    let nodes = [ready(), down(), tainted()];
    for (case, p, gone, want) in cases {
        let pods = [arc(p)];
        let sweep = plan(&pods, &nodes, 12_500);
        let gone: BTreeSet<String> = gone.into_iter().map(str::to_owned).collect();
        let got = sweep_waits(&pods, &nodes, &sweep, &gone, 40);
        let reasons: Vec<&str> = got.iter().map(|(_, w)| w.reason).collect();
        assert_eq!(reasons, want.into_iter().collect::<Vec<_>>(), "{case}");
        // The recorded wait is explain's own.
        if let Some((key, w)) = got.first() {
            assert_eq!(key, "ns/a", "{case}");
            let e = run(&pods[0], &pods, &nodes, 12_500);
            assert_eq!(e.waiting_on.first(), Some(w), "{case}");
        }
    }
}
