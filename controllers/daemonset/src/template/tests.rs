//! Cases after upstream `util/daemonset_util_test.go` (`TestCreatePodTemplate`,
//! `TestReplaceDaemonSetPodNodeNameNodeAffinity`, `TestGetTargetNodeName`,
//! `TestIsPodUpdated`) and `TestSurgeCount`/`TestUnavailableCount`.

use rkcm_testkit::harness::DAEMON_TOLERATIONS;
use serde_json::json;

use super::*;
use crate::testutil::{ds_with, pod};

fn tol(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Toleration::default()
    }
}

#[test]
fn default_tolerations_are_upstreams_six_plus_network_for_host_network() {
    let keys = |v: Vec<Toleration>| -> Vec<(String, String)> {
        v.into_iter()
            .map(|t| (t.key.unwrap_or_default(), t.effect.unwrap_or_default()))
            .collect()
    };
    let want: Vec<(String, String)> = DAEMON_TOLERATIONS
        .iter()
        .map(|(k, e)| (k.to_string(), e.to_string()))
        .collect();
    assert_eq!(keys(default_tolerations(false)), want);
    let mut seven = want.clone();
    seven.push((
        "node.kubernetes.io/network-unavailable".into(),
        "NoSchedule".into(),
    ));
    assert_eq!(keys(default_tolerations(true)), seven);
    assert!(
        default_tolerations(true)
            .iter()
            .all(|t| t.operator.as_deref() == Some("Exists")
                && t.toleration_seconds.is_none()
                && t.value.is_none())
    );
}

#[test]
fn add_or_update_keeps_user_tolerations_replaces_matching_ones_and_never_duplicates() {
    let mut spec = PodSpec {
        tolerations: Some(vec![
            Toleration {
                toleration_seconds: Some(300),
                ..tol("node.kubernetes.io/not-ready", "NoExecute")
            },
            tol("dedicated", "NoSchedule"),
            tol("node.kubernetes.io/unreachable", "NoExecute"),
        ]),
        ..PodSpec::default()
    };
    add_or_update_daemon_pod_tolerations(&mut spec);
    let got = spec.tolerations.clone().unwrap_or_default();
    assert_eq!(
        got.len(),
        2 + 5,
        "user toleration kept, identical unreachable not duplicated"
    );
    assert_eq!(
        got[0],
        tol("node.kubernetes.io/not-ready", "NoExecute"),
        "replaced in place, no tolerationSeconds"
    );
    assert_eq!(got[1], tol("dedicated", "NoSchedule"));
    assert_eq!(got[2], tol("node.kubernetes.io/unreachable", "NoExecute"));
    // Idempotent.
    add_or_update_daemon_pod_tolerations(&mut spec);
    assert_eq!(spec.tolerations.clone().unwrap_or_default(), got);
}

#[test]
fn create_pod_template_adds_labels_and_tolerations() {
    let ds = ds_with(json!({}));
    let t = create_pod_template(&ds.spec.template, Some(3), "abc");
    let l = t
        .metadata
        .clone()
        .unwrap_or_default()
        .labels
        .unwrap_or_default();
    assert_eq!(l.get("app").map(String::as_str), Some("ds"));
    assert_eq!(
        l.get("pod-template-generation").map(String::as_str),
        Some("3")
    );
    assert_eq!(
        l.get("controller-revision-hash").map(String::as_str),
        Some("abc")
    );
    assert_eq!(
        t.spec
            .clone()
            .unwrap_or_default()
            .tolerations
            .unwrap_or_default()
            .len(),
        6
    );
    let t = create_pod_template(&ds.spec.template, None, "");
    let l = t.metadata.unwrap_or_default().labels.unwrap_or_default();
    assert!(
        !l.contains_key("pod-template-generation") && !l.contains_key("controller-revision-hash")
    );
}

#[test]
fn template_generation_reads_the_annotation_and_ignores_garbage() {
    assert_eq!(template_generation(&ds_with(json!({}))), Some(1));
    assert_eq!(
        template_generation(&ds_with(
            json!({"metadata": {"annotations": {"deprecated.daemonset.template.generation": "x"}}})
        )),
        None
    );
    assert_eq!(
        template_generation(&ds_with(json!({"metadata": {"annotations": null}}))),
        None
    );
}

fn name_term(node: &str) -> serde_json::Value {
    json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]})
}

#[test]
fn replace_node_affinity_table() {
    let cases: Vec<(&str, serde_json::Value, serde_json::Value)> = vec![
        (
            "no affinity",
            json!(null),
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [name_term("n1")]}}}),
        ),
        (
            "pod affinity only",
            json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}),
            json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [name_term("n1")]}}}),
        ),
        (
            "preferred kept",
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}}),
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}], "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [name_term("n1")]}}}),
        ),
        (
            "required replaced, expressions and other terms dropped",
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}),
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [name_term("n1")]}}}),
        ),
    ];
    for (name, input, want) in cases {
        let input: Option<Affinity> = serde_json::from_value(input).unwrap_or_default();
        let got = serde_json::to_value(replace_node_name_affinity(input, "n1")).unwrap_or_default();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn target_node_name_table() {
    let from_json = |spec: serde_json::Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap_or_default()
    };
    let affinity = |terms: serde_json::Value| json!({"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}});
    let cases: Vec<(&str, serde_json::Value, Option<&str>)> = vec![
        (
            "bound",
            json!({"containers": [], "nodeName": "n1"}),
            Some("n1"),
        ),
        (
            "bound wins over affinity",
            {
                let mut v = affinity(json!([name_term("n2")]));
                v["nodeName"] = json!("n1");
                v
            },
            Some("n1"),
        ),
        ("affinity", affinity(json!([name_term("n2")])), Some("n2")),
        (
            "second term",
            affinity(
                json!([{"matchExpressions": [{"key": "a", "operator": "Exists"}]}, name_term("n3")]),
            ),
            Some("n3"),
        ),
        (
            "two values",
            affinity(
                json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]),
            ),
            None,
        ),
        (
            "NotIn is no target",
            affinity(
                json!([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]}]),
            ),
            None,
        ),
        ("no terms", affinity(json!([])), None),
        ("nothing", json!({"containers": []}), None),
    ];
    for (name, spec, want) in cases {
        assert_eq!(target_node_name(&from_json(spec)), want, "{name}");
    }
}

#[test]
fn is_pod_updated_table() {
    let p = |hash: &str, gen_label: Option<&str>| {
        let mut b = pod("p", "n", hash, 0);
        if let Some(g) = gen_label {
            b = b.label("pod-template-generation", g);
        }
        b.build()
    };
    let cases = [
        ("hash matches", p("h1", None), "h1", None, true),
        ("hash differs", p("h0", None), "h1", None, false),
        (
            "generation matches despite hash",
            p("h0", Some("3")),
            "h1",
            Some("3"),
            true,
        ),
        (
            "generation differs",
            p("h0", Some("2")),
            "h1",
            Some("3"),
            false,
        ),
        ("empty hash never matches", p("", None), "", None, false),
    ];
    for (name, pod, hash, generation, want) in cases {
        assert_eq!(is_pod_updated(&pod, hash, generation), want, "{name}");
    }
}

#[test]
fn surge_and_unavailable_counts_round_up() {
    let ds = |mu: serde_json::Value, ms: serde_json::Value| {
        ds_with(
            json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": mu, "maxSurge": ms}}}}),
        )
    };
    assert_eq!(unavailable_count(&ds(json!(1), json!(0)), 5), Ok(1));
    assert_eq!(
        unavailable_count(&ds(json!("50%"), json!(0)), 3),
        Ok(2),
        "1.5 rounds up"
    );
    assert_eq!(unavailable_count(&ds(json!("50%"), json!(0)), 4), Ok(2));
    assert_eq!(unavailable_count(&ds(json!("1%"), json!(0)), 1), Ok(1));
    assert_eq!(unavailable_count(&ds(json!("0%"), json!(0)), 10), Ok(0));
    assert_eq!(surge_count(&ds(json!(0), json!("10%")), 3), Ok(1));
    assert_eq!(surge_count(&ds(json!(0), json!(2)), 3), Ok(2));
    assert!(unavailable_count(&ds(json!("5x"), json!(0)), 3).is_err());
    assert!(
        unavailable_count(&ds(json!(null), json!(0)), 3).is_err(),
        "unset maxUnavailable is an error"
    );
    assert_eq!(
        surge_count(&ds(json!(1), json!(null)), 3),
        Ok(0),
        "unset maxSurge is 0"
    );
    let on_delete =
        ds_with(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}));
    assert_eq!(
        (unavailable_count(&on_delete, 3), surge_count(&on_delete, 3)),
        (Ok(0), Ok(0))
    );
    assert!(!allows_surge(&on_delete));
    assert!(
        allows_surge(&ds(json!(0), json!("10%"))),
        "10% of one node rounds up to 1"
    );
    assert!(!allows_surge(&ds(json!(1), json!(0))));
}

#[test]
fn a_daemon_pod_is_written_whole_in_protobuf() {
    // The pod the controller creates for a node: the template with the default tolerations,
    // the generation and hash labels, and the node-name affinity. The pod encoder must know
    // every field of it, or the create falls back to JSON.
    let ds = ds_with(json!({"spec": {"template": {"spec": {"hostNetwork": true,
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]}]}}]}}}}}}));
    let mut t = create_pod_template(&ds.spec.template, Some(3), "5d4f8b7c9");
    if let Some(spec) = t.spec.as_mut() {
        spec.affinity = Some(replace_node_name_affinity(spec.affinity.take(), "node-1"));
    }
    let pod = rkcm_runtime::workload::podcontrol::pod_from_template(
        &t,
        "ds",
        None,
        &rkcm_runtime::workload::podcontrol::PodOptions::default(),
    );
    assert_eq!(rkcm_testkit::written_whole_in_protobuf(&pod), Ok(()));
}
