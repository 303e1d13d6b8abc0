//! Pod lifecycle around the DaemonSet: succeeded pods, excess orphans, minReadySeconds,
//! release, and a DaemonSet being deleted (scenarios 19, 20, 24, 25, 26).

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use crate::harness::{Env, HOLDS, WITHIN, is_ready, target_node};

const IMAGE: &str = "registry.k8s.io/pause:3.10";

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn succeeded_pod_is_replaced_with_an_event() -> Result<()> {
    // Scenario 19.
    terminated_pod_is_replaced(
        "ds-succeeded",
        0,
        "SucceededDaemonPod",
        "will try to delete it",
    )
    .await
}

/// A daemon pod that ends with `exit_code` is reported with `reason` (message ending in
/// `action`) and replaced by a new pod on the same node (scenarios 18 and 19).
pub async fn terminated_pod_is_replaced(
    prefix: &str,
    exit_code: i32,
    reason: &str,
    action: &str,
) -> Result<()> {
    let env = Env::new(prefix).await?;
    let a = env.node("a", &[], &[]).await?;
    let ctrl = env.start();
    env.create(&env.daemonset("ds", IMAGE, json!({}))).await?;
    let pods = env.wait_one_per_node("ds", &[a.name()], None).await?;
    let victim = pods
        .values()
        .next()
        .and_then(|p| p.metadata.name.clone())
        .unwrap_or_default();
    env.cluster
        .terminate_pod(env.name(), &victim, exit_code)
        .await?;
    let state = if exit_code == 0 {
        "succeeded"
    } else {
        "failed"
    };
    env.wait_event(
        "ds",
        reason,
        &format!(
            "Found {state} daemon pod {}/{victim} on node {}, {action}",
            env.name(),
            a.name()
        ),
    )
    .await?;
    // The event is recorded before the delete of the terminated pod is seen, and that pod may
    // still carry its Ready condition: wait for the delete first, or it counts as the node's
    // one ready pod.
    wait_for("the terminated pod to be deleted", WITHIN, || async {
        let live = env.live_pods("ds").await?;
        Ok((!live.iter().any(|p| p.name_any() == victim)).then_some(()))
    })
    .await?;
    let replaced = env.wait_one_per_node("ds", &[a.name()], None).await?;
    assert_ne!(
        replaced
            .values()
            .next()
            .and_then(|p| p.metadata.name.clone()),
        Some(victim)
    );
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn an_excess_orphan_is_adopted_and_the_newer_pod_deleted() -> Result<()> {
    // Scenario 20. The orphan names a scheduler that does not exist, so it stays unbound:
    // bound pods come first, and it is also the newer one.
    let env = Env::new("ds-excess").await?;
    let a = env.node("a", &[], &[]).await?;
    let ctrl = env.start();
    env.create(&env.daemonset("ds", IMAGE, json!({}))).await?;
    let pods = env.wait_one_per_node("ds", &[a.name()], None).await?;
    let original = pods
        .values()
        .next()
        .and_then(|p| p.metadata.name.clone())
        .unwrap_or_default();
    let orphan: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "orphan", "namespace": env.name(), "labels": {"app": "ds"}},
        "spec": {
            "schedulerName": "rkcm-test-no-scheduler",
            "containers": [{"name": "main", "image": IMAGE}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [a.name()]}]}]}}}
        }
    }))?;
    env.pods().create(&PostParams::default(), &orphan).await?;
    wait_for("the orphan is adopted and deleted", WITHIN, || async {
        Ok(env.pods().get_opt("orphan").await?.is_none().then_some(()))
    })
    .await?;
    // Deleted by the controller, so adopted first. The recorder writes its events in the
    // background: the pod can be gone before the event about its deletion is stored.
    env.wait_event("ds", "SuccessfulDelete", "Deleted pod: orphan")
        .await?;
    let live = env.live_pods("ds").await?;
    assert_eq!(
        live.iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect::<Vec<_>>(),
        vec![original]
    );
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn min_ready_seconds_delays_availability() -> Result<()> {
    // Scenario 24.
    let env = Env::new("ds-minready").await?;
    let (a, b) = (
        env.node("a", &[], &[]).await?,
        env.node("b", &[], &[]).await?,
    );
    let ctrl = env.start();
    env.create(&env.daemonset("ds", IMAGE, json!({"spec": {"minReadySeconds": 8}})))
        .await?;
    env.wait_one_per_node("ds", &[a.name(), b.name()], None)
        .await?;
    env.wait_status("ds", "ready 2, available 0", |d| {
        d.status.as_ref().is_some_and(|s| {
            s.number_ready == 2
                && s.number_available.unwrap_or(0) == 0
                && s.number_unavailable == Some(2)
        })
    })
    .await?;
    // Nothing else changes: the controller's own requeue makes them available.
    env.wait_status("ds", "available 2 after minReadySeconds", |d| {
        d.status.as_ref().is_some_and(|s| {
            s.number_available == Some(2) && s.number_unavailable.unwrap_or(0) == 0
        })
    })
    .await?;
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn a_relabelled_pod_is_released_and_replaced() -> Result<()> {
    // Scenario 25.
    let env = Env::new("ds-release").await?;
    let a = env.node("a", &[], &[]).await?;
    let ctrl = env.start();
    env.create(&env.daemonset("ds", IMAGE, json!({}))).await?;
    let pods = env.wait_one_per_node("ds", &[a.name()], None).await?;
    let released = pods
        .values()
        .next()
        .and_then(|p| p.metadata.name.clone())
        .unwrap_or_default();
    env.pods()
        .patch(
            &released,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
        )
        .await?;
    wait_for("its controller reference is removed", WITHIN, || async {
        let p = env.pods().get(&released).await?;
        Ok(p.metadata
            .owner_references
            .as_ref()
            .is_none_or(|r| r.iter().all(|o| o.controller != Some(true)))
            .then_some(()))
    })
    .await?;
    env.wait_one_per_node("ds", &[a.name()], None).await?;
    let kept = env.pods().get(&released).await?;
    assert!(
        kept.metadata.deletion_timestamp.is_none() && is_ready(&kept),
        "the released pod is left running"
    );
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn a_deleting_daemonset_is_frozen() -> Result<()> {
    // Scenario 26.
    let env = Env::new("ds-frozen").await?;
    let a = env.node("a", &[], &[]).await?;
    let ctrl = env.start();
    env.create(&env.daemonset(
        "ds",
        IMAGE,
        json!({"metadata": {"finalizers": ["rkcm.test/hold"]}}),
    ))
    .await?;
    env.wait_one_per_node("ds", &[a.name()], None).await?;
    env.wait_status("ds", "status written", |d| {
        d.status.as_ref().is_some_and(|s| s.number_ready == 1)
    })
    .await?;
    env.daemonsets()
        .delete(
            "ds",
            &DeleteParams {
                propagation_policy: Some(PropagationPolicy::Orphan),
                ..DeleteParams::default()
            },
        )
        .await?;
    let frozen = env
        .wait_status("ds", "deletion timestamp set", |d| {
            d.metadata.deletion_timestamp.is_some()
        })
        .await?;
    let b = env.node("b", &[], &[]).await?;
    holds_for(
        "no pod for the new node, no status write",
        HOLDS,
        || async {
            let pods = env.all_pods("ds").await?;
            let on_b = pods.iter().filter_map(target_node).any(|n| n == b.name());
            let now = env.daemonsets().get("ds").await?;
            // The garbage collector edits the metadata (orphan finalizer); the status stays.
            Ok(!on_b && now.status == frozen.status)
        },
    )
    .await?;
    env.patch_ds("ds", json!({"metadata": {"finalizers": null}}))
        .await?;
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn a_terminating_pod_is_replaced_only_once_gone() -> Result<()> {
    // Scenario 27. A finalizer keeps the deleted pod terminating, as a slow kubelet would.
    let env = Env::new("ds-graceful").await?;
    let a = env.node("a", &[], &[]).await?;
    let ctrl = env.start();
    env.create(&env.daemonset("ds", IMAGE, json!({}))).await?;
    let pods = env.wait_one_per_node("ds", &[a.name()], None).await?;
    let victim = pods
        .values()
        .next()
        .and_then(|p| p.metadata.name.clone())
        .unwrap_or_default();
    env.pods()
        .patch(
            &victim,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["rkcm.test/hold"]}})),
        )
        .await?;
    env.pods().delete(&victim, &DeleteParams::default()).await?;
    // kwok, standing in for the kubelet, finishes the deletion with grace period 0 (held by
    // the finalizer); the controller itself must not delete it again.
    holds_for(
        "no replacement while the pod terminates, no delete by the controller",
        HOLDS,
        || async {
            let pods = env.all_pods("ds").await?;
            let deleted_by_controller =
                env.events("ds", "SuccessfulDelete").await?.iter().any(|e| {
                    e.message.as_deref() == Some(format!("Deleted pod: {victim}").as_str())
                });
            Ok(pods.len() == 1 && !deleted_by_controller)
        },
    )
    .await?;
    env.pods()
        .patch(
            &victim,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    let replaced = env.wait_one_per_node("ds", &[a.name()], None).await?;
    assert_ne!(
        replaced
            .values()
            .next()
            .and_then(|p| p.metadata.name.clone()),
        Some(victim)
    );
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn a_new_daemonset_adopts_orphaned_pods_and_revisions() -> Result<()> {
    // Seed DS-14: after an orphaning delete, a DaemonSet with the same selector and template
    // adopts the pods and the revision and replaces nothing.
    let env = Env::new("ds-adopt").await?;
    let (a, b) = (
        env.node("a", &[], &[]).await?,
        env.node("b", &[], &[]).await?,
    );
    let ctrl = env.start();
    let spec = env.daemonset("ds", IMAGE, json!({}));
    let first = env.create(&spec).await?;
    let pods = env
        .wait_one_per_node("ds", &[a.name(), b.name()], None)
        .await?;
    let mut before: Vec<String> = pods
        .values()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    before.sort();
    env.daemonsets()
        .delete(
            "ds",
            &DeleteParams {
                propagation_policy: Some(PropagationPolicy::Orphan),
                ..DeleteParams::default()
            },
        )
        .await?;
    wait_for(
        "the DaemonSet is gone and its pods orphaned",
        WITHIN,
        || async {
            let gone = env.daemonsets().get_opt("ds").await?.is_none();
            let orphans = env.all_pods("ds").await?.iter().all(|p| {
                p.metadata
                    .owner_references
                    .as_ref()
                    .is_none_or(|r| r.is_empty())
            });
            Ok((gone && orphans).then_some(()))
        },
    )
    .await?;
    let second = env.create(&spec).await?;
    assert_ne!(first.metadata.uid, second.metadata.uid);
    let uid = second.metadata.uid.clone().unwrap_or_default();
    wait_for(
        "pods and revision adopted by the new DaemonSet",
        WITHIN,
        || async {
            let pods = env.all_pods("ds").await?;
            let adopted = pods.iter().all(|p| {
                p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.controller == Some(true) && r.uid == uid)
            });
            let revs = env.owned_revisions("ds").await?;
            let rev_adopted = revs.len() == 1
                && revs[0]
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.uid == uid);
            Ok((adopted && rev_adopted).then_some(()))
        },
    )
    .await?;
    holds_for("no pod replaced", HOLDS, || async {
        let mut now: Vec<String> = env
            .all_pods("ds")
            .await?
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        now.sort();
        Ok(now == before)
    })
    .await?;
    env.wait_status("ds", "all pods count as updated", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.updated_number_scheduled == Some(2) && s.number_ready == 2)
    })
    .await?;
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn a_revision_name_collision_raises_the_collision_count() -> Result<()> {
    // The name the DaemonSet's first revision would get is taken by another object with
    // other data: `status.collisionCount` goes to 1 and the revision gets the next name.
    let env = Env::new("ds-collide").await?;
    let a = env.node("a", &[], &[]).await?;
    let created = env.create(&env.daemonset("ds", IMAGE, json!({}))).await?;
    let (_, taken) = rkcm_daemonset::revision::hash_and_name(&created);
    let squatter: k8s_openapi::api::apps::v1::ControllerRevision = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": taken, "namespace": env.name(), "labels": {"squatter": "yes"}},
        "data": {"something": "else"}, "revision": 1
    }))?;
    env.revisions()
        .create(&PostParams::default(), &squatter)
        .await?;
    let ctrl = env.start();
    let ds = env
        .wait_status("ds", "collisionCount 1", |d| {
            d.status
                .as_ref()
                .is_some_and(|s| s.collision_count == Some(1))
        })
        .await?;
    env.wait_one_per_node("ds", &[a.name()], None).await?;
    let revs = env.owned_revisions("ds").await?;
    assert_eq!(revs.len(), 1);
    let name = revs[0].metadata.name.clone().unwrap_or_default();
    assert_ne!(name, taken);
    assert_eq!(name, rkcm_daemonset::revision::hash_and_name(&ds).1);
    let squatter = env.revisions().get(&taken).await?;
    assert_eq!(
        squatter.data.0,
        json!({"something": "else"}),
        "the other object is left alone"
    );
    ctrl.stop().await?;
    Ok(())
}
