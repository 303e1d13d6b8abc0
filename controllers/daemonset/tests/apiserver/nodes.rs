//! Node changes: labels, new nodes, taints, deleted nodes, and the node name pin
//! (scenarios 4, 5, 6, 7, 8, 9, 12, 13).

use anyhow::Result;
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use crate::harness::{Env, HOLDS, WITHIN, target_node};

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn node_selector_follows_label_changes_and_new_nodes() -> Result<()> {
    let env = Env::new("ds-labels").await?;
    let a = env.node("a", &[("role", "edge")], &[]).await?;
    let b = env.node("b", &[], &[]).await?;
    let ctrl = env.start();
    env.create(&env.daemonset(
        "edge",
        "registry.k8s.io/pause:3.10",
        json!({"spec": {"template": {"spec": {"nodeSelector": {"role": "edge"}}}}}),
    ))
    .await?;
    env.wait_one_per_node("edge", &[a.name()], None).await?;
    env.wait_status("edge", "desired 1", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.desired_number_scheduled == 1)
    })
    .await?;
    // Labelling node-b adds a pod (through the node-update queue, no DaemonSet edit).
    env.patch_node(b.name(), json!({"metadata": {"labels": {"role": "edge"}}}))
        .await?;
    env.wait_one_per_node("edge", &[a.name(), b.name()], None)
        .await?;
    // Unlabelling node-a deletes its pod.
    env.patch_node(a.name(), json!({"metadata": {"labels": {"role": null}}}))
        .await?;
    env.wait_one_per_node("edge", &[b.name()], None).await?;
    // A new matching node gets a pod (scenario 12).
    let d = env.node("d", &[("role", "edge")], &[]).await?;
    env.wait_one_per_node("edge", &[b.name(), d.name()], None)
        .await?;
    env.wait_status("edge", "desired 2, all ready", |d| {
        d.status.as_ref().is_some_and(|s| {
            s.desired_number_scheduled == 2 && s.number_ready == 2 && s.number_misscheduled == 0
        })
    })
    .await?;
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn affinity_and_fixed_node_name_select_nodes() -> Result<()> {
    // Scenarios 5 and 6.
    let env = Env::new("ds-affinity").await?;
    let z1 = env.node("z1", &[("zone", "z1")], &[]).await?;
    let z2 = env.node("z2", &[("zone", "z2")], &[]).await?;
    let ctrl = env.start();
    env.create(&env.daemonset(
        "zonal",
        "registry.k8s.io/pause:3.10",
        json!({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}}}}}),
    ))
    .await?;
    env.create(&env.daemonset(
        "pinned",
        "registry.k8s.io/pause:3.10",
        json!({"spec": {"template": {"spec": {"nodeName": z2.name()}}}}),
    ))
    .await?;
    let zonal = env.wait_one_per_node("zonal", &[z1.name()], None).await?;
    // The user's affinity decided eligibility; the pod carries only the node-name term.
    let pod = zonal.values().next().cloned().unwrap_or_default();
    let terms = serde_json::to_value(
        pod.spec
            .and_then(|s| s.affinity)
            .and_then(|a| a.node_affinity),
    )?;
    assert_eq!(
        terms["requiredDuringSchedulingIgnoredDuringExecution"],
        json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [z1.name()]}]}]})
    );
    env.wait_status("pinned", "pinned: desired 1", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.desired_number_scheduled == 1 && s.current_number_scheduled == 1)
    })
    .await?;
    let pinned = env.all_pods("pinned").await?;
    assert_eq!(
        pinned.iter().filter_map(target_node).collect::<Vec<_>>(),
        vec![z2.name().to_owned()]
    );
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn taints_block_keep_or_evict() -> Result<()> {
    // Scenarios 7, 8, 9.
    let env = Env::new("ds-taints").await?;
    let a = env.node("a", &[], &[]).await?;
    let b = env.node("b", &[], &[]).await?;
    let c = env
        .node("c", &[], &[("dedicated", "x", "NoSchedule")])
        .await?;
    let ctrl = env.start();
    env.create(&env.daemonset("ds", "registry.k8s.io/pause:3.10", json!({})))
        .await?;
    env.wait_one_per_node("ds", &[a.name(), b.name()], None)
        .await?;
    env.wait_status("ds", "desired 2 (tainted node-c excluded)", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.desired_number_scheduled == 2 && s.number_ready == 2)
    })
    .await?;
    // NoSchedule after the pod exists: kept, counted misscheduled.
    env.taint_node(a.name(), "dedicated", "x", "NoSchedule")
        .await?;
    env.wait_status("ds", "desired 1, misscheduled 1", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.desired_number_scheduled == 1 && s.number_misscheduled == 1)
    })
    .await?;
    holds_for(
        "the pod on the NoSchedule-tainted node stays",
        HOLDS,
        || async {
            let pods = env.live_pods("ds").await?;
            Ok(pods.iter().filter_map(target_node).any(|n| n == a.name()))
        },
    )
    .await?;
    // NoExecute: the pod goes and none comes back.
    env.taint_node(b.name(), "dedicated", "x", "NoExecute")
        .await?;
    wait_for(
        "the pod on the NoExecute-tainted node is gone",
        WITHIN,
        || async {
            let pods = env.all_pods("ds").await?;
            Ok((!pods.iter().filter_map(target_node).any(|n| n == b.name())).then_some(()))
        },
    )
    .await?;
    holds_for(
        "no pod returns to the NoExecute node, none goes to node-c",
        HOLDS,
        || async {
            let pods = env.all_pods("ds").await?;
            Ok(!pods
                .iter()
                .filter_map(target_node)
                .any(|n| n == b.name() || n == c.name()))
        },
    )
    .await?;
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn unbound_pod_of_a_deleted_node_is_deleted() -> Result<()> {
    // Scenario 13. The node is not served by kwok and has no capacity, so the scheduler
    // never binds the pod; deleting the node leaves an unbound pod aimed at nothing.
    let env = Env::new("ds-gone").await?;
    let name = format!("{}-ghost", env.group);
    let node = env
        .cluster
        .create_node(
            rkcm_testkit::NodeBuilder::new(&name).label(crate::harness::NODE_LABEL, &env.group),
        )
        .await?;
    let ctrl = env.start();
    env.create(&env.daemonset("ds", "registry.k8s.io/pause:3.10", json!({})))
        .await?;
    wait_for("a pod aimed at the node", WITHIN, || async {
        let pods = env.live_pods("ds").await?;
        Ok(
            (pods.len() == 1 && target_node(&pods[0]).as_deref() == Some(name.as_str()))
                .then_some(()),
        )
    })
    .await?;
    node.delete().await?;
    // Node deletion has no handler: a DaemonSet update triggers the sync.
    env.patch_ds("ds", json!({"metadata": {"annotations": {"poke": "1"}}}))
        .await?;
    wait_for("the orphaned unbound pod is deleted", WITHIN, || async {
        Ok(env.all_pods("ds").await?.is_empty().then_some(()))
    })
    .await?;
    env.wait_status("ds", "desired 0", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.desired_number_scheduled == 0 && s.current_number_scheduled == 0)
    })
    .await?;
    ctrl.stop().await?;
    Ok(())
}
