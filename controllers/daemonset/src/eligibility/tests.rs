//! Cases after upstream `TestNodeShouldRunDaemonPod`, `TestNodeAffinityDaemonLaunchesPods`,
//! `TestTaintedNodeDaemonDoesNotLaunchIntolerantPods`, `TestNodeDaemonLaunchesToleratePod`
//! and the tolerations tests of `daemon_controller_test.go`.

use serde_json::{Value, json};

use super::*;
use crate::testutil::{ds_with, node_from};

fn place(node: Value, template_spec: Value) -> Placement {
    place_gated(node, template_spec, false)
}

/// [`place`] with gate `TaintTolerationComparisonOperators` as given.
fn place_gated(node: Value, template_spec: Value, comparison_operators: bool) -> Placement {
    let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
    crate::testutil::merge(&mut spec, &template_spec);
    let ds = ds_with(json!({"spec": {"template": {"spec": spec}}}));
    node_should_run_daemon_pod(&node_from(node), &ds, comparison_operators)
}

fn n(labels: Value, taints: Value) -> Value {
    json!({"metadata": {"name": "node-a", "labels": labels}, "spec": {"taints": taints}})
}

const RUN: Placement = Placement::RUN;
const NONE: Placement = Placement::NONE;
const KEEP: Placement = Placement {
    should_run: false,
    should_continue_running: true,
};

#[test]
fn placement_table() {
    let req = |terms: Value| json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}});
    let cases: Vec<(&str, Value, Value, Placement)> = vec![
        ("plain node", n(json!({}), json!([])), json!({}), RUN),
        (
            "not ready and unschedulable do not matter",
            json!({"metadata": {"name": "node-a"}, "spec": {"unschedulable": true}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            json!({}),
            RUN,
        ),
        (
            "nodeSelector matches",
            n(json!({"role": "edge"}), json!([])),
            json!({"nodeSelector": {"role": "edge"}}),
            RUN,
        ),
        (
            "nodeSelector misses",
            n(json!({"role": "core"}), json!([])),
            json!({"nodeSelector": {"role": "edge"}}),
            NONE,
        ),
        (
            "nodeSelector needs every key",
            n(json!({"role": "edge"}), json!([])),
            json!({"nodeSelector": {"role": "edge", "zone": "z1"}}),
            NONE,
        ),
        (
            "fixed node name matches",
            n(json!({}), json!([])),
            json!({"nodeName": "node-a"}),
            RUN,
        ),
        (
            "fixed node name elsewhere",
            n(json!({}), json!([])),
            json!({"nodeName": "node-b"}),
            NONE,
        ),
        (
            "affinity In",
            n(json!({"zone": "z1"}), json!([])),
            req(
                json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1", "z3"]}]}]),
            ),
            RUN,
        ),
        (
            "affinity In misses",
            n(json!({"zone": "z2"}), json!([])),
            req(
                json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]),
            ),
            NONE,
        ),
        (
            "affinity terms are ORed",
            n(json!({"zone": "z2"}), json!([])),
            req(
                json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}, {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}]),
            ),
            RUN,
        ),
        (
            "requirements in a term are ANDed",
            n(json!({"zone": "z1"}), json!([])),
            req(
                json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}, {"key": "gpu", "operator": "Exists"}]}]),
            ),
            NONE,
        ),
        (
            "NotIn matches an absent label",
            n(json!({}), json!([])),
            req(
                json!([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]}]),
            ),
            RUN,
        ),
        (
            "DoesNotExist",
            n(json!({"gpu": "x"}), json!([])),
            req(json!([{"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}])),
            NONE,
        ),
        (
            "Gt",
            n(json!({"cores": "8"}), json!([])),
            req(
                json!([{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}]),
            ),
            RUN,
        ),
        (
            "Lt on a non-integer label",
            n(json!({"cores": "many"}), json!([])),
            req(
                json!([{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["4"]}]}]),
            ),
            NONE,
        ),
        (
            "Gt with two values does not parse",
            n(json!({"cores": "8"}), json!([])),
            req(
                json!([{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4", "5"]}]}]),
            ),
            NONE,
        ),
        (
            "In without values does not parse",
            n(json!({"zone": "z1"}), json!([])),
            req(json!([{"matchExpressions": [{"key": "zone", "operator": "In"}]}])),
            NONE,
        ),
        (
            "an empty term selects nothing",
            n(json!({}), json!([])),
            req(json!([{}])),
            NONE,
        ),
        (
            "matchFields metadata.name",
            n(json!({}), json!([])),
            req(
                json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]),
            ),
            RUN,
        ),
        (
            "matchFields another node",
            n(json!({}), json!([])),
            req(
                json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]),
            ),
            NONE,
        ),
        (
            "matchFields NotIn",
            n(json!({}), json!([])),
            req(
                json!([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-b"]}]}]),
            ),
            RUN,
        ),
        (
            "matchFields with two values does not parse",
            n(json!({}), json!([])),
            req(
                json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a", "node-b"]}]}]),
            ),
            NONE,
        ),
        (
            "matchFields and matchExpressions together",
            n(json!({"zone": "z1"}), json!([])),
            req(
                json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}], "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]),
            ),
            NONE,
        ),
        (
            "preferred terms are ignored",
            n(json!({}), json!([])),
            json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]}}]}}}),
            RUN,
        ),
        (
            "untolerated NoSchedule keeps running pods",
            n(
                json!({}),
                json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
            ),
            json!({}),
            KEEP,
        ),
        (
            "untolerated NoExecute evicts",
            n(
                json!({}),
                json!([{"key": "dedicated", "value": "x", "effect": "NoExecute"}]),
            ),
            json!({}),
            NONE,
        ),
        (
            "NoExecute wins over NoSchedule",
            n(
                json!({}),
                json!([{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}]),
            ),
            json!({}),
            NONE,
        ),
        (
            "PreferNoSchedule is ignored",
            n(
                json!({}),
                json!([{"key": "dedicated", "effect": "PreferNoSchedule"}]),
            ),
            json!({}),
            RUN,
        ),
        (
            "tolerated by Equal",
            n(
                json!({}),
                json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
            ),
            json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]}),
            RUN,
        ),
        (
            "Equal with another value",
            n(
                json!({}),
                json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
            ),
            json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "y", "effect": "NoSchedule"}]}),
            KEEP,
        ),
        (
            "Exists without effect tolerates both",
            n(
                json!({}),
                json!([{"key": "dedicated", "value": "x", "effect": "NoExecute"}]),
            ),
            json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
            RUN,
        ),
        (
            "empty key Exists tolerates everything",
            n(
                json!({}),
                json!([{"key": "a", "effect": "NoExecute"}, {"key": "b", "effect": "NoSchedule"}]),
            ),
            json!({"tolerations": [{"operator": "Exists"}]}),
            RUN,
        ),
        (
            "effect must match",
            n(
                json!({}),
                json!([{"key": "dedicated", "effect": "NoExecute"}]),
            ),
            json!({"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]}),
            NONE,
        ),
        (
            "Gt tolerations need an alpha gate",
            n(
                json!({}),
                json!([{"key": "prio", "value": "5", "effect": "NoSchedule"}]),
            ),
            json!({"tolerations": [{"key": "prio", "operator": "Gt", "value": "1", "effect": "NoSchedule"}]}),
            KEEP,
        ),
        (
            "default not-ready and unschedulable tolerations",
            n(
                json!({}),
                json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}, {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
            ),
            json!({}),
            RUN,
        ),
        (
            "default pressure tolerations",
            n(
                json!({}),
                json!([{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/pid-pressure", "effect": "NoSchedule"}]),
            ),
            json!({}),
            RUN,
        ),
        (
            "network-unavailable blocks non-host-network pods",
            n(
                json!({}),
                json!([{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]),
            ),
            json!({}),
            KEEP,
        ),
        (
            "network-unavailable is tolerated with hostNetwork",
            n(
                json!({}),
                json!([{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]),
            ),
            json!({"hostNetwork": true}),
            RUN,
        ),
        (
            "default tolerations only cover their effect",
            n(
                json!({}),
                json!([{"key": "node.kubernetes.io/disk-pressure", "effect": "NoExecute"}]),
            ),
            json!({}),
            NONE,
        ),
    ];
    for (name, node, spec, want) in cases {
        assert_eq!(place(node, spec), want, "{name}");
    }
}

#[test]
fn tolerates_taint_follows_upstream() {
    let taint = |k: &str, v: Option<&str>, e: &str| Taint {
        key: k.into(),
        value: v.map(Into::into),
        effect: e.into(),
        time_added: None,
    };
    let tol = |k: Option<&str>, op: Option<&str>, v: Option<&str>, e: Option<&str>| Toleration {
        key: k.map(Into::into),
        operator: op.map(Into::into),
        value: v.map(Into::into),
        effect: e.map(Into::into),
        toleration_seconds: None,
    };
    let t = taint("k", Some("v"), "NoSchedule");
    assert!(
        tolerates_taint(&tol(Some("k"), None, Some("v"), None), &t, false),
        "empty operator is Equal"
    );
    assert!(!tolerates_taint(
        &tol(Some("k"), None, None, None),
        &t,
        false
    ));
    assert!(tolerates_taint(
        &tol(Some("k"), Some("Exists"), None, Some("NoSchedule")),
        &t,
        false
    ));
    assert!(!tolerates_taint(
        &tol(Some("other"), Some("Exists"), None, None),
        &t,
        false
    ));
    assert!(!tolerates_taint(
        &tol(Some("k"), Some("Bogus"), Some("v"), None),
        &t,
        false
    ));
    let bare = taint("k", None, "NoExecute");
    assert!(
        tolerates_taint(&tol(Some("k"), Some("Equal"), Some(""), None), &bare, false),
        "empty equals absent value"
    );
}

/// Gate `TaintTolerationComparisonOperators`: `Gt`/`Lt` compare the toleration's value with
/// the taint's as integers when on (upstream `compareNumericValues`: canonical decimal
/// integers only), and tolerate nothing when off (the v1.37 default).
#[test]
fn comparison_operators_follow_the_gate() {
    let taint = |v: &str| Taint {
        key: "k".into(),
        value: Some(v.into()),
        effect: "NoSchedule".into(),
        time_added: None,
    };
    let tol = |op: &str, v: &str| Toleration {
        key: Some("k".into()),
        operator: Some(op.into()),
        value: Some(v.into()),
        effect: None,
        toleration_seconds: None,
    };
    // (operator, toleration value, taint value, tolerated with the gate on)
    let cases = [
        ("Gt", "5", "6", true),
        ("Gt", "5", "5", false),
        ("Gt", "5", "4", false),
        ("Lt", "5", "4", true),
        ("Lt", "5", "5", false),
        ("Lt", "-3", "-4", true),
        ("Gt", "0", "1", true),
        // Not canonical decimal integers: never tolerated.
        ("Gt", "05", "6", false),
        ("Gt", "5", "+6", false),
        ("Lt", "5", "-0", false),
        ("Gt", "5", "x", false),
        ("Gt", "", "6", false),
        ("Lt", "9223372036854775808", "1", false),
    ];
    for (op, tv, nv, want) in cases {
        assert_eq!(
            tolerates_taint(&tol(op, tv), &taint(nv), true),
            want,
            "{op} {tv} vs taint {nv}, gate on"
        );
        assert!(
            !tolerates_taint(&tol(op, tv), &taint(nv), false),
            "{op} {tv} vs taint {nv}, gate off"
        );
    }
    // Placement and NoExecute eviction follow: a NoSchedule taint tolerated by Gt places the
    // pod only with the gate on; a NoExecute one evicts a running pod only with it off.
    let node = |effect: &str| {
        n(
            json!({}),
            json!([{"key": "node.example/generation", "value": "7", "effect": effect}]),
        )
    };
    let spec = json!({"tolerations": [
        {"key": "node.example/generation", "operator": "Gt", "value": "5"}]});
    assert_eq!(
        place_gated(node("NoSchedule"), spec.clone(), true),
        Placement::RUN
    );
    assert_eq!(
        place_gated(node("NoSchedule"), spec.clone(), false),
        Placement {
            should_run: false,
            should_continue_running: true
        }
    );
    assert_eq!(
        place_gated(node("NoExecute"), spec.clone(), true),
        Placement::RUN
    );
    assert_eq!(place_gated(node("NoExecute"), spec, false), Placement::NONE);
}
