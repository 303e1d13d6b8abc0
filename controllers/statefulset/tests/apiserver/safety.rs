//! At most one pod per identity, graceful deletes only, adoption and identity repair
//! (§9 20, 23, 24, 26).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    failed_pod_is_replaced_after_it_is_gone, "sts-fail", failed_pod_is_replaced_after_it_is_gone_in
}

/// §9 20: a Failed web-1 is deleted and a new web-1 (new UID) created; never two at once.
async fn failed_pod_is_replaced_after_it_is_gone_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(sts("web", 3)).await?;
        env.wait_settled("web", 3).await?;
        let old = env.pod("web-1").await?.context("web-1")?;
        let hist = env.pod_history().await?;
        env.cluster.terminate_pod(env.name(), "web-1", 1).await?;
        wait_for("a new ready web-1", WITHIN, || async {
            Ok(env
                .pod("web-1")
                .await?
                .filter(|p| p.metadata.uid != old.metadata.uid && is_ready(p))
                .map(|_| ()))
        })
        .await?;
        env.wait_settled("web", 3).await?;
        env.wait_event(
            "web",
            "SuccessfulDelete",
            "delete Pod web-1 in StatefulSet web successful",
        )
        .await?;
        hist.assert_one_per_name()
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    terminating_pod_keeps_its_identity_across_a_restart, "sts-safe", terminating_pod_keeps_its_identity_across_a_restart_in
}

/// §9 26 and the restart case: web-1, held terminating by a finalizer, keeps its identity
/// through a controller restart: no second web-1 at any instant, no forced deletion, and
/// the replacement appears only after the finalizer is removed.
async fn terminating_pod_keeps_its_identity_across_a_restart_in(base: &Base) -> Result<()> {
    let mut env = Env::new(base);
    let r = async {
        env.create_set(sts("web", 3)).await?;
        env.wait_settled("web", 3).await?;
        env.hold("web-1").await?;
        let old = env.pod("web-1").await?.context("web-1")?;
        let hist = env.pod_history().await?;
        env.pods().delete("web-1", &DeleteParams::default()).await?;
        wait_for("web-1 terminating", WITHIN, || async {
            Ok(env
                .pod("web-1")
                .await?
                .filter(|p| p.metadata.deletion_timestamp.is_some())
                .map(|_| ()))
        })
        .await?;
        env.stop_controller().await?;
        env.start_controller();
        holds_for(
            "web-1 stays the old, terminating pod",
            Duration::from_secs(8),
            || async {
                let p = env.pod("web-1").await?;
                Ok(p.is_some_and(|p| p.metadata.uid == old.metadata.uid))
            },
        )
        .await?;
        env.release::<Pod>("web-1").await?;
        wait_for("a new ready web-1", WITHIN, || async {
            Ok(env
                .pod("web-1")
                .await?
                .filter(|p| p.metadata.uid != old.metadata.uid && is_ready(p))
                .map(|_| ()))
        })
        .await?;
        env.wait_settled("web", 3).await?;
        hist.assert_one_per_name()?;
        let gone =
            hist.position(|s| s.is_deleted() && s.object().metadata.uid == old.metadata.uid)?;
        let new = hist.position(|s| {
            s.object().metadata.name.as_deref() == Some("web-1")
                && s.object().metadata.uid != old.metadata.uid
        })?;
        ensure!(
            gone.is_some() && new > gone,
            "replacement {new:?} before the old pod was gone {gone:?}"
        );
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    terminating_pod_blocks_ordered_progress, "sts-block", terminating_pod_blocks_ordered_progress_in
}

/// §9 26: under OrderedReady, web-2 is not created while web-0 is terminating.
async fn terminating_pod_blocks_ordered_progress_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(sts("web", 2)).await?;
        env.wait_settled("web", 2).await?;
        env.hold("web-0").await?;
        env.pods().delete("web-0", &DeleteParams::default()).await?;
        env.scale("web", 3).await?;
        holds_for("no web-2 while web-0 terminates", HOLDS, || async {
            Ok(env.pod("web-2").await?.is_none())
        })
        .await?;
        env.release::<Pod>("web-0").await?;
        env.wait_ready_pods(&["web-0", "web-1", "web-2"]).await?;
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    orphans_with_the_sets_name_are_adopted, "sts-adopt", orphans_with_the_sets_name_are_adopted_in
}

/// §9 23: an orphan web-0 matching the selector is adopted (same UID); db-0 is not.
async fn orphans_with_the_sets_name_are_adopted_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        for name in ["web-0", "db-0"] {
            let pod: Pod = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": "web"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": V1}]},
            }))?;
            env.pods().create(&PostParams::default(), &pod).await?;
        }
        let orphan = env.pod("web-0").await?.context("web-0")?;
        let hist = env.pod_history().await?;
        let set = env.create_set(sts("web", 1)).await?;
        // Adopted by a patch: the same UID gains the controller reference. Without a
        // revision label it is then rolled to the set's revision, as upstream does.
        wait_for("web-0 adopted", WITHIN, || async {
            Ok(hist
                .position(|s| {
                    s.object().metadata.uid == orphan.metadata.uid
                        && s.object().metadata.owner_references.iter().flatten().any(|r| {
                            Some(&r.uid) == set.metadata.uid.as_ref() && r.controller == Some(true)
                        })
                })?
                .map(|_| ()))
        })
        .await?;
        env.wait_status("web", "one replica", |_, st| st.replicas == 1).await?;
        let db = env.pod("db-0").await?.context("db-0")?;
        ensure!(db.metadata.owner_references.is_none(), "db-0 adopted: {:?}", db.metadata.owner_references);
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    identity_label_is_restored, "sts-repair", identity_label_is_restored_in
}

/// §9 24: removing the pod-name label from web-1 is repaired with an update event.
async fn identity_label_is_restored_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(sts("web", 2)).await?;
        env.wait_settled("web", 2).await?;
        let before = env.pod("web-1").await?.context("web-1")?;
        env.pods()
            .patch(
                "web-1",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"labels": {"statefulset.kubernetes.io/pod-name": null}}}),
                ),
            )
            .await?;
        wait_for("pod-name label restored", WITHIN, || async {
            Ok(env.pod("web-1").await?.filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("statefulset.kubernetes.io/pod-name"))
                    .map(String::as_str)
                    == Some("web-1")
            }))
        })
        .await?;
        env.wait_event(
            "web",
            "SuccessfulUpdate",
            "update Pod web-1 in StatefulSet web successful",
        )
        .await?;
        let after = env.pod("web-1").await?.context("web-1")?;
        ensure!(
            after.metadata.uid == before.metadata.uid,
            "web-1 was replaced"
        );
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    deleting_set_is_frozen, "sts-frozen", deleting_set_is_frozen_in
}

/// §9 25: a set being deleted (foreground, held by a finalizer) gets no new pods while the
/// collector removes its pods, and its status still follows them.
async fn deleting_set_is_frozen_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(merge(
            sts("web", 2),
            json!({"metadata": {"finalizers": [HOLD]}}),
        ))
        .await?;
        env.wait_settled("web", 2).await?;
        env.sets()
            .delete("web", &DeleteParams::foreground())
            .await?;
        wait_for("pods collected", WITHIN, || async {
            Ok(env.pod_names().await?.is_empty().then_some(()))
        })
        .await?;
        env.wait_status("web", "status follows the pods", |_, st| st.replicas == 0)
            .await?;
        holds_for(
            "no pod recreated for a set being deleted",
            HOLDS,
            || async { Ok(env.pod_names().await?.is_empty()) },
        )
        .await?;
        env.release::<StatefulSet>("web").await
    }
    .await;
    env.finish(r).await
}
