//! One pod per eligible node, its exact shape, the revision and the status
//! (scenarios 1, 2, 3, 21, 28 and 10).

use anyhow::Result;
use rkcm_testkit::harness::DAEMON_TOLERATIONS;
use serde_json::json;

use crate::harness::{Env, NODE_LABEL, WITHIN, label, pod_hash};

#[tokio::test]
#[ignore = "needs apiserver: make test"]
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn one_pod_per_node_with_upstream_shape_revision_and_status() -> Result<()> {
    let env = Env::new("ds-basics").await?;
    // node-c carries the taints the default tolerations cover (scenario 10).
    let a = env.node("a", &[], &[]).await?;
    let b = env.node("b", &[], &[]).await?;
    let c = env
        .node(
            "c",
            &[],
            &[
                ("node.kubernetes.io/unschedulable", "", "NoSchedule"),
                ("node.kubernetes.io/not-ready", "", "NoExecute"),
            ],
        )
        .await?;
    let ctrl = env.start();
    let ds = env
        .create(&env.daemonset("ds", "registry.k8s.io/pause:3.10", json!({})))
        .await?;
    let generation = ds.metadata.generation.unwrap_or(0);
    let names = [a.name(), b.name(), c.name()];
    let pods = env.wait_one_per_node("ds", &names, None).await?;

    // Scenario 21: exactly one revision, its hash on every pod.
    let revs = env.owned_revisions("ds").await?;
    assert_eq!(revs.len(), 1, "{revs:?}");
    let rev = &revs[0];
    let hash = rev
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("controller-revision-hash"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        rev.metadata.name.clone().unwrap_or_default(),
        format!("ds-{hash}")
    );
    assert_eq!(rev.revision, Some(1));
    let owner = rev.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owner.len() == 1
            && owner[0].controller == Some(true)
            && Some(&owner[0].uid) == ds.metadata.uid.as_ref()
    );
    // data.raw is upstream's getPatch of the live DaemonSet.
    let live = env.daemonsets().get("ds").await?;
    assert_eq!(
        rkcm_runtime::workload::history::go_json_bytes(&rev.data.0),
        rkcm_daemonset::revision::patch_bytes(&live)
    );
    assert_eq!(rev.data.0["spec"]["template"]["$patch"], "replace");

    for (node, pod) in &pods {
        // Scenario 1: affinity term, no nodeName from the controller, ownerRef, labels.
        let spec = pod.spec.clone().unwrap_or_default();
        let terms = serde_json::to_value(
            spec.affinity
                .as_ref()
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|n| {
                    n.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
        )?;
        assert_eq!(
            terms,
            json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]})
        );
        assert_eq!(
            spec.node_selector.as_ref().and_then(|s| s.get(NODE_LABEL)),
            Some(&env.group),
            "nodeSelector stays"
        );
        let refs = pod.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(refs.len(), 1);
        assert_eq!(
            (
                refs[0].kind.as_str(),
                refs[0].controller,
                refs[0].block_owner_deletion
            ),
            ("DaemonSet", Some(true), Some(true))
        );
        assert_eq!(pod_hash(pod), hash);
        assert_eq!(label(pod, "pod-template-generation"), Some("1"));
        assert!(pod.metadata.generate_name.as_deref() == Some("ds-"));
        // Scenario 2: the test toleration plus the six defaults, without tolerationSeconds.
        let tolerations = spec.tolerations.clone().unwrap_or_default();
        let keys: Vec<(String, String)> = tolerations
            .iter()
            .map(|t| {
                (
                    t.key.clone().unwrap_or_default(),
                    t.effect.clone().unwrap_or_default(),
                )
            })
            .collect();
        for (k, e) in DAEMON_TOLERATIONS {
            assert!(
                keys.contains(&(k.to_string(), e.to_string())),
                "{k} in {keys:?}"
            );
        }
        assert!(
            !keys
                .iter()
                .any(|(k, _)| k == "node.kubernetes.io/network-unavailable")
        );
        assert!(tolerations.iter().all(|t| t.toleration_seconds.is_none()));
        assert_eq!(tolerations.len(), 7);
    }

    // Scenario 3 (after readiness; kwok makes the pods ready at once).
    env.wait_status("ds", "status of three ready pods", |d| {
        let s = d.status.clone().unwrap_or_default();
        s.desired_number_scheduled == 3
            && s.current_number_scheduled == 3
            && s.number_misscheduled == 0
            && s.number_ready == 3
            && s.number_available == Some(3)
            && s.updated_number_scheduled == Some(3)
            && s.number_unavailable.unwrap_or(0) == 0
            && s.observed_generation == Some(generation)
    })
    .await?;

    // Scenario 28: one SuccessfulCreate per pod, upstream message.
    for pod in pods.values() {
        let name = pod.metadata.name.clone().unwrap_or_default();
        env.wait_event("ds", "SuccessfulCreate", &format!("Created pod: {name}"))
            .await?;
    }
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn host_network_gets_the_network_unavailable_toleration_and_node() -> Result<()> {
    // Scenarios 2 (variant) and 11.
    let env = Env::new("ds-hostnet").await?;
    let plain = env.node("plain", &[], &[]).await?;
    let netless = env
        .node(
            "netless",
            &[],
            &[("node.kubernetes.io/network-unavailable", "", "NoSchedule")],
        )
        .await?;
    let ctrl = env.start();
    env.create(&env.daemonset("plain", "registry.k8s.io/pause:3.10", json!({})))
        .await?;
    env.create(&env.daemonset(
        "hostnet",
        "registry.k8s.io/pause:3.10",
        json!({"spec": {"template": {"spec": {"hostNetwork": true}}}}),
    ))
    .await?;
    env.wait_one_per_node("plain", &[plain.name()], None)
        .await?;
    let pods = env
        .wait_one_per_node("hostnet", &[plain.name(), netless.name()], None)
        .await?;
    for pod in pods.values() {
        let tolerations = pod
            .spec
            .clone()
            .unwrap_or_default()
            .tolerations
            .unwrap_or_default();
        assert!(tolerations.iter().any(|t| t.key.as_deref()
            == Some("node.kubernetes.io/network-unavailable")
            && t.effect.as_deref() == Some("NoSchedule")
            && t.operator.as_deref() == Some("Exists")));
        assert_eq!(tolerations.len(), 8, "test toleration + 7 defaults");
    }
    env.wait_status("plain", "plain: 1 desired", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.desired_number_scheduled == 1 && s.number_ready == 1)
    })
    .await?;
    let _ = WITHIN;
    ctrl.stop().await?;
    Ok(())
}
