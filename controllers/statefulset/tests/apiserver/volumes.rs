//! Volume claims and their retention policy (§9 11, 12, 13, 14, 15, 28).
//!
//! Claims bind to hostPath PersistentVolumes the test creates (the testkit's
//! [`TestVolumes`]) with a storage class name unique to the test, through the plane's
//! upstream PV binder.

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::{Value, json};

use crate::harness::*;

/// `sts(name, replicas)` with a claim template `data` of class `class`, labels tier=db.
fn with_claims(name: &str, replicas: i32, class: &str) -> Value {
    merge(
        sts(name, replicas),
        json!({"spec": {
            "template": {"spec": {"containers": [{"name": "c", "image": V1,
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{
                "metadata": {"name": "data", "labels": {"tier": "db"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                    "resources": {"requests": {"storage": "1Gi"}}},
            }],
        }}),
    )
}

fn rv(o: &impl kube::Resource) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn refs_of(c: &PersistentVolumeClaim) -> Vec<(String, String)> {
    c.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| (r.kind.clone(), r.name.clone()))
        .collect()
}

rkcm_testkit::scenario! {
    claims_are_created_before_their_pods, "sts-pvc", claims_are_created_before_their_pods_in
}

/// §9 11: the claim exists before its pod, carries template and selector labels, the pod
/// mounts it, and with Retain/Retain it has no owner.
async fn claims_are_created_before_their_pods_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let volumes = TestVolumes::create(&env.cluster, 2, "1Gi").await?;
    let class = volumes.storage_class();
    let r = async {
        let pod_hist = env.pod_history().await?;
        let claim_hist = env.claim_history().await?;
        env.create_set(with_claims("web", 2, class)).await?;
        let pods = env.wait_ready_pods(&["web-0", "web-1"]).await?;
        for p in &pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            let claim_name = format!("data-{name}");
            let c = env.claims().get(&claim_name).await?;
            let claim_rv = claim_hist
                .seen()?
                .into_iter()
                .find(|s| s.object().metadata.name.as_deref() == Some(claim_name.as_str()))
                .map(|s| rv(s.object()));
            let pod_rv = pod_hist
                .seen()?
                .into_iter()
                .find(|s| s.object().metadata.name.as_deref() == Some(name.as_str()))
                .map(|s| rv(s.object()));
            ensure!(
                claim_rv.is_some() && claim_rv < pod_rv,
                "{claim_name} ({claim_rv:?}) not created before {name} ({pod_rv:?})"
            );
            let l = c.metadata.labels.clone().unwrap_or_default();
            ensure!(
                l.get("tier").map(String::as_str) == Some("db")
                    && l.get("app").map(String::as_str) == Some("web"),
                "{l:?}"
            );
            ensure!(
                c.metadata.owner_references.is_none(),
                "{:?}",
                c.metadata.owner_references
            );
            let vol = p
                .spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .find(|v| v.name == "data")
                .and_then(|v| v.persistent_volume_claim.as_ref())
                .map(|c| c.claim_name.clone());
            ensure!(
                vol.as_deref() == Some(claim_name.as_str()),
                "{name} mounts {vol:?}"
            );
            ensure!(
                c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"),
                "{claim_name} not bound"
            );
        }
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    terminating_claim_blocks_its_pod, "sts-pvcdel", terminating_claim_blocks_its_pod_in
}

/// §9 12: a claim being deleted blocks its pod with FailedCreate; once it is gone a new
/// claim and pod are created.
async fn terminating_claim_blocks_its_pod_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let volumes = TestVolumes::create(&env.cluster, 2, "1Gi").await?;
    let class = volumes.storage_class();
    let r = async {
        env.create_set(with_claims("web", 1, class)).await?;
        env.wait_ready_pods(&["web-0"]).await?;
        let old = env.claims().get("data-web-0").await?;
        env.claims()
            .patch(
                "data-web-0",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"finalizers": ["kubernetes.io/pvc-protection", HOLD]}}),
                ),
            )
            .await?;
        env.claims()
            .delete("data-web-0", &DeleteParams::default())
            .await?;
        env.pods().delete("web-0", &DeleteParams::default()).await?;
        env.wait_event("web", "FailedCreate", "pvc data-web-0 is being deleted")
            .await?;
        holds_for("no web-0 while its claim terminates", HOLDS, || async {
            Ok(env.pod("web-0").await?.is_none())
        })
        .await?;
        env.claims()
            .patch(
                "data-web-0",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await?;
        // The set is synced again on its next event; a resync of the set supplies one.
        env.patch_set("web", json!({"metadata": {"annotations": {"poke": "1"}}}))
            .await?;
        env.wait_ready_pods(&["web-0"]).await?;
        let new = env.claims().get("data-web-0").await?;
        ensure!(new.metadata.uid != old.metadata.uid, "claim not recreated");
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    when_deleted_delete_owns_claims_by_the_set, "sts-wdel", when_deleted_delete_owns_claims_by_the_set_in
}

/// §9 13: whenDeleted Delete puts the set's controller reference on every claim; deleting
/// the set lets the garbage collector remove them.
async fn when_deleted_delete_owns_claims_by_the_set_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let volumes = TestVolumes::create(&env.cluster, 2, "1Gi").await?;
    let class = volumes.storage_class();
    let r = async {
        let set = env
            .create_set(merge(
                with_claims("web", 2, class),
                json!({"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"}}}),
            ))
            .await?;
        env.wait_ready_pods(&["web-0", "web-1"]).await?;
        for n in ["data-web-0", "data-web-1"] {
            wait_for(&format!("{n} owned by the set"), WITHIN, || async {
                let c = env.claims().get(n).await?;
                Ok(c.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| Some(&r.uid) == set.metadata.uid.as_ref() && r.controller == Some(true) && r.block_owner_deletion == Some(true))
                    .then_some(()))
            })
            .await?;
        }
        env.sets().delete("web", &DeleteParams::background()).await?;
        wait_for("claims collected", WITHIN, || async {
            Ok(env.claims().list(&Default::default()).await?.items.is_empty().then_some(()))
        })
        .await?;
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    when_scaled_delete_hands_claims_to_condemned_pods, "sts-wscale", when_scaled_delete_hands_claims_to_condemned_pods_in
}

/// §9 14: whenScaled Delete gives the condemned pod's claim a reference to the pod before
/// the pod is deleted; the kept claim gets none.
async fn when_scaled_delete_hands_claims_to_condemned_pods_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let volumes = TestVolumes::create(&env.cluster, 2, "1Gi").await?;
    let class = volumes.storage_class();
    let r = async {
        env.create_set(merge(
            with_claims("web", 2, class),
            json!({"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"}}}),
        ))
        .await?;
        env.wait_ready_pods(&["web-0", "web-1"]).await?;
        env.wait_settled("web", 2).await?;
        let pods = env.pod_history().await?;
        let claims = env.claim_history().await?;
        env.scale("web", 1).await?;
        env.wait_ready_pods(&["web-0"]).await?;
        wait_for("data-web-1 collected", WITHIN, || async {
            Ok(matches!(env.claims().get("data-web-1").await, Err(kube::Error::Api(s)) if s.code == 404).then_some(()))
        })
        .await?;
        let pod_term = pods
            .seen()?
            .into_iter()
            .find(|s| s.object().metadata.name.as_deref() == Some("web-1") && (s.is_deleted() || s.object().metadata.deletion_timestamp.is_some()))
            .context("web-1 never terminated")?;
        let claim_ref = claims
            .seen()?
            .into_iter()
            .find(|s| s.object().metadata.name.as_deref() == Some("data-web-1") && refs_of(s.object()).contains(&("Pod".to_string(), "web-1".to_string())))
            .context("data-web-1 never referred to web-1")?;
        ensure!(rv(claim_ref.object()) < rv(pod_term.object()), "pod deleted before its claim was handed to it");
        let kept = env.claims().get("data-web-0").await?;
        ensure!(refs_of(&kept).is_empty(), "data-web-0 refs {:?}", refs_of(&kept));
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    policy_change_updates_live_claims, "sts-pchg", policy_change_updates_live_claims_in
}

/// §9 15: switching a live set to whenDeleted Delete updates its claims; no pod is
/// recreated.
async fn policy_change_updates_live_claims_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let volumes = TestVolumes::create(&env.cluster, 2, "1Gi").await?;
    let class = volumes.storage_class();
    let r = async {
        env.create_set(with_claims("web", 2, class)).await?;
        let pods = env.wait_ready_pods(&["web-0", "web-1"]).await?;
        env.wait_settled("web", 2).await?;
        let uids: Vec<_> = pods.iter().map(|p| p.metadata.uid.clone()).collect();
        env.patch_set(
            "web",
            json!({"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}}),
        )
        .await?;
        for n in ["data-web-0", "data-web-1"] {
            wait_for(&format!("{n} owned by the set"), WITHIN, || async {
                let c = env.claims().get(n).await?;
                Ok(refs_of(&c)
                    .contains(&("StatefulSet".to_string(), "web".to_string()))
                    .then_some(()))
            })
            .await?;
        }
        let now: Vec<_> = env
            .wait_ready_pods(&["web-0", "web-1"])
            .await?
            .iter()
            .map(|p| p.metadata.uid.clone())
            .collect();
        ensure!(now == uids, "pods were recreated");
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    stale_claim_blocks_the_ordinal, "sts-stale", stale_claim_blocks_the_ordinal_in
}

/// §9 28: a claim still owned by an earlier web-0 (whenScaled Delete) blocks web-0 until it
/// is gone.
async fn stale_claim_blocks_the_ordinal_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let volumes = TestVolumes::create(&env.cluster, 2, "1Gi").await?;
    let class = volumes.storage_class();
    let r = async {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-web-0", "labels": {"app": "web"}, "finalizers": [HOLD],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web-0",
                    "uid": "00000000-0000-0000-0000-000000000000", "controller": true}]},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                "resources": {"requests": {"storage": "1Gi"}}},
        }))?;
        env.claims().create(&PostParams::default(), &claim).await?;
        env.create_set(merge(
            with_claims("web", 1, class),
            json!({"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"}}}),
        ))
        .await?;
        // The collector deletes the claim (its owner does not exist); the finalizer keeps it.
        holds_for("no web-0 while the stale claim exists", HOLDS, || async {
            Ok(env.pod("web-0").await?.is_none())
        })
        .await?;
        env.claims()
            .patch("data-web-0", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
            .await?;
        wait_for("stale claim gone", WITHIN, || async {
            Ok(env.claims().get("data-web-0").await.ok().filter(|c| c.metadata.owner_references.is_some()).is_none().then_some(()))
        })
        .await?;
        env.patch_set("web", json!({"metadata": {"annotations": {"poke": "1"}}})).await?;
        let pods: Vec<Pod> = env.wait_ready_pods(&["web-0"]).await?;
        ensure!(pods.len() == 1);
        Ok(())
    }
    .await;
    env.finish(r).await
}
