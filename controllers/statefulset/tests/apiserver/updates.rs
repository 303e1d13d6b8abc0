//! Rolling updates, partition, OnDelete, maxUnavailable, rollback and history (§9 16, 17,
//! 18, 19, 21, 22).

use anyhow::{Context, Result, ensure};
use kube::api::DeleteParams;
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use k8s_openapi::api::apps::v1::ControllerRevision;

use crate::harness::*;

/// Index of the first observation of pod `name` ready at revision `rev`.
fn ready_at(h: &History<Pod>, name: &str, rev: &str) -> Result<Option<usize>> {
    h.position(|s| {
        s.object().metadata.name.as_deref() == Some(name)
            && !s.is_deleted()
            && s.object().metadata.deletion_timestamp.is_none()
            && revision_of(s.object()) == rev
            && is_ready(s.object())
    })
}

rkcm_testkit::scenario! {
    rolling_update_goes_down_one_at_a_time, "sts-roll", rolling_update_goes_down_one_at_a_time_in
}

/// §9 16: web-2 first, each lower pod only after the new higher one is ready.
async fn rolling_update_goes_down_one_at_a_time_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(sts("web", 3)).await?;
        let before = env.wait_settled("web", 3).await?;
        let hist = env.pod_history().await?;
        env.set_image("web", V2).await?;
        let after = wait_for("rollout to a new revision", WITHIN, || async {
            let st = env.status("web").await?;
            let s = env.set("web").await?;
            Ok((st.update_revision != before.update_revision
                && st.current_revision == st.update_revision
                && st.current_replicas == Some(3)
                && st.ready_replicas == Some(3)
                && st.observed_generation == s.metadata.generation)
                .then_some(st))
        })
        .await?;
        let new = after.update_revision.clone().unwrap_or_default();
        ensure!(env.revision_list().await?.len() == 2, "two revisions");
        let t2 = hist
            .terminating_at("web-2")?
            .context("web-2 never deleted")?;
        let t1 = hist
            .terminating_at("web-1")?
            .context("web-1 never deleted")?;
        let t0 = hist
            .terminating_at("web-0")?
            .context("web-0 never deleted")?;
        let r2 = ready_at(&hist, "web-2", &new)?.context("new web-2 never ready")?;
        let r1 = ready_at(&hist, "web-1", &new)?.context("new web-1 never ready")?;
        ensure!(t2 < t1 && t1 < t0, "order {t2} {t1} {t0}");
        ensure!(r2 < t1, "web-1 deleted before the new web-2 was ready");
        ensure!(r1 < t0, "web-0 deleted before the new web-1 was ready");
        for p in env.wait_ready_pods(&["web-0", "web-1", "web-2"]).await? {
            ensure!(
                revision_of(&p) == new,
                "{:?} at {}",
                p.metadata.name,
                revision_of(&p)
            );
        }
        hist.assert_one_per_name()
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    partition_holds_lower_ordinals, "sts-part", partition_holds_lower_ordinals_in
}

/// §9 17: partition 2 replaces web-2 only; partition 0 completes the rollout.
async fn partition_holds_lower_ordinals_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(merge(
            sts("web", 3),
            json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}}),
        ))
        .await?;
        let before = env.wait_settled("web", 3).await?;
        env.set_image("web", V2).await?;
        let st = env
            .wait_status("web", "web-2 updated, the others not", |s, st| {
                st.observed_generation == s.metadata.generation
                    && st.updated_replicas == Some(1)
                    && st.current_replicas == Some(2)
                    && st.ready_replicas == Some(3)
            })
            .await?;
        ensure!(st.current_revision == before.current_revision, "{st:?}");
        holds_for("web-0 and web-1 stay at the old revision", HOLDS, || async {
            for n in ["web-0", "web-1"] {
                let p = env.pod(n).await?.context(n)?;
                if revision_of(&p) != before.update_revision.clone().unwrap_or_default() || p.metadata.deletion_timestamp.is_some() {
                    return Ok(false);
                }
            }
            Ok(true)
        })
        .await?;
        env.patch_set("web", json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}))
            .await?;
        let done = env.wait_settled("web", 3).await?;
        ensure!(done.current_revision != before.current_revision, "{done:?}");
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    on_delete_replaces_only_deleted_pods, "sts-ondel", on_delete_replaces_only_deleted_pods_in
}

/// §9 18: OnDelete replaces only pods someone deleted; once all are, the revision is current.
async fn on_delete_replaces_only_deleted_pods_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(merge(
            sts("web", 3),
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
        ))
        .await?;
        let before = env.wait_settled("web", 3).await?;
        let uids: Vec<_> = env
            .wait_ready_pods(&["web-0", "web-1", "web-2"])
            .await?
            .into_iter()
            .map(|p| p.metadata.uid)
            .collect();
        env.set_image("web", V2).await?;
        let st = env
            .wait_status("web", "new update revision", |s, st| {
                st.observed_generation == s.metadata.generation
                    && st.update_revision != before.update_revision
            })
            .await?;
        ensure!(st.updated_replicas.unwrap_or(0) == 0, "{st:?}");
        holds_for("no pod is replaced", HOLDS, || async {
            let now = env.pod_uids().await?;
            Ok(uids.iter().all(|u| now.contains(u)))
        })
        .await?;
        let new = st.update_revision.clone().unwrap_or_default();
        env.pods().delete("web-1", &DeleteParams::default()).await?;
        wait_for("web-1 back at the new revision", WITHIN, || async {
            Ok(env
                .pod("web-1")
                .await?
                .filter(|p| revision_of(p) == new && is_ready(p))
                .map(|_| ()))
        })
        .await?;
        env.wait_status("web", "one updated", |_, st| st.updated_replicas == Some(1))
            .await?;
        for n in ["web-0", "web-2"] {
            env.pods().delete(n, &DeleteParams::default()).await?;
        }
        let done = env.wait_settled("web", 3).await?;
        ensure!(
            done.current_revision.as_deref() == Some(new.as_str()),
            "{done:?}"
        );
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    max_unavailable_updates_two_at_a_time, "sts-maxu", max_unavailable_updates_two_at_a_time_in
}

/// §9 19: maxUnavailable 2 under Parallel deletes web-3 and web-2 together; web-1 and web-0
/// wait until those are available. An API server whose `MaxUnavailableStatefulSet` is off
/// (v1.34 to v1.36 by default) drops the field: there the pods go one at a time, as upstream
/// of that minor.
async fn max_unavailable_updates_two_at_a_time_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        let created = env.create_set(merge(
            sts("web", 4),
            json!({"spec": {"podManagementPolicy": "Parallel",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}}}),
        ))
        .await?;
        let kept = created
            .spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.rolling_update.as_ref()?.max_unavailable.as_ref())
            .is_some();
        env.wait_settled("web", 4).await?;
        let hist = env.pod_history().await?;
        env.set_image("web", V2).await?;
        let done = env.wait_settled("web", 4).await?;
        let new = done.update_revision.clone().unwrap_or_default();
        let t = |n| hist.terminating_at(n);
        let (t3, t2, t1, t0) = (t("web-3")?, t("web-2")?, t("web-1")?, t("web-0")?);
        ensure!(t3.is_some() && t2.is_some() && t1.is_some() && t0.is_some(), "{t3:?} {t2:?} {t1:?} {t0:?}");
        let r3 = ready_at(&hist, "web-3", &new)?.context("new web-3 never ready")?;
        let r2 = ready_at(&hist, "web-2", &new)?.context("new web-2 never ready")?;
        let first_ready = Some(r3.min(r2));
        if !kept {
            // One at a time: web-2 goes only after the new web-3 is ready.
            ensure!(t2 > Some(r3), "maxUnavailable dropped by the server, yet web-2 went before web-3 was back: {t2:?} {r3:?}");
            return hist.assert_one_per_name();
        }
        // Both went before either replacement was ready, the lower two only after one was.
        ensure!(t3.max(t2) < first_ready, "web-3/web-2 not deleted together: {t3:?} {t2:?} {first_ready:?}");
        ensure!(t1.min(t0) > first_ready, "web-1/web-0 deleted before a replacement was available");
        hist.assert_one_per_name()
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    rollback_reuses_the_revision, "sts-back", rollback_reuses_the_revision_in
}

/// §9 21: A -> B -> A reuses A's revision with `.revision` 3.
async fn rollback_reuses_the_revision_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(sts("web", 1)).await?;
        let a = env.wait_settled("web", 1).await?;
        env.set_image("web", V2).await?;
        env.wait_status("web", "B rolled out", |_, st| {
            st.update_revision != a.update_revision
                && st.current_revision == st.update_revision
                && st.ready_replicas == Some(1)
        })
        .await?;
        env.set_image("web", V1).await?;
        let back = env
            .wait_status("web", "back at A", |_, st| {
                st.update_revision == a.update_revision
                    && st.current_revision == st.update_revision
                    && st.ready_replicas == Some(1)
            })
            .await?;
        let revs = env.revision_list().await?;
        ensure!(revs.len() == 2, "{} revisions", revs.len());
        let ra = revs
            .iter()
            .find(|r| r.metadata.name == back.update_revision)
            .context("A")?;
        ensure!(ra.revision == Some(3), "A has revision {:?}", ra.revision);
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    history_is_truncated_to_the_limit, "sts-hist", history_is_truncated_to_the_limit_in
}

/// §9 22: revisionHistoryLimit 1 over four templates keeps at most one historic revision,
/// deleting the oldest first.
async fn history_is_truncated_to_the_limit_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(merge(
            sts("web", 1),
            json!({"spec": {"revisionHistoryLimit": 1}}),
        ))
        .await?;
        env.wait_settled("web", 1).await?;
        for image in [V2, V3, "registry.k8s.io/pause:3.7"] {
            let before = env.status("web").await?;
            env.set_image("web", image).await?;
            env.wait_status("web", &format!("rolled to {image}"), |_, st| {
                st.update_revision != before.update_revision
                    && st.current_revision == st.update_revision
                    && st.ready_replicas == Some(1)
            })
            .await?;
        }
        let st = env.status("web").await?;
        let revs = wait_for("history at most 2", WITHIN, || async {
            let r = env.revision_list().await?;
            Ok((r.len() <= 2).then_some(r))
        })
        .await?;
        ensure!(
            revs.iter().any(|r| r.metadata.name == st.update_revision),
            "update revision kept"
        );
        let numbers: Vec<_> = revs.iter().map(|r| r.revision.unwrap_or(0)).collect();
        ensure!(numbers == [3, 4], "kept {numbers:?}");
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    a_revision_re_serialized_with_added_defaults_starts_no_rollout, "sts-semantic",
    re_serialized_revision_with_semantic_comparison_in
}

rkcm_testkit::scenario! {
    without_the_semantic_comparison_a_re_serialized_revision_rolls_the_set, "sts-bytes",
    re_serialized_revision_without_semantic_comparison_in
}

async fn re_serialized_revision_with_semantic_comparison_in(base: &Base) -> Result<()> {
    re_serialized_revision(base, true).await
}

async fn re_serialized_revision_without_semantic_comparison_in(base: &Base) -> Result<()> {
    re_serialized_revision(base, false).await
}

/// A control-plane upgrade that changes what the API server defaults or how revisions are
/// encoded: the set settles on its revision, the controller stops, and the revision is
/// replaced (same name, labels, owner and number) by what an earlier release stored — the
/// template without defaults added since and with `"creationTimestamp": null` in its metadata.
/// The controller starts again, with gate `StatefulSetSemanticRevisionComparison` as given.
/// On (the default), the set keeps its revision: no new revision, no pod deleted. Off, a new
/// revision is created and the rolling update starts (upstream's regression the gate exists
/// to prevent).
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn re_serialized_revision(base: &Base, semantic: bool) -> Result<()> {
    let mut env = Env::new(base);
    let r = async {
        // A gRPC readiness probe without `service` and an env var from a file key without
        // `optional`: the v1.37 API server fills both in. File keys need `EnvFiles` (on from
        // v1.35): a v1.34 server gets the probe alone.
        let file_keys = base.cluster.server_minor() >= 35;
        let mut container = json!({
            "name": "c", "image": V1,
            "readinessProbe": {"grpc": {"port": 9000}},
        });
        if file_keys {
            container["env"] = json!([{"name": "F", "valueFrom": {"fileKeyRef":
                {"volumeName": "v", "path": "p", "key": "k"}}}]);
        }
        env.create_set(merge(
            sts("web", 2),
            json!({"spec": {"template": {"spec": {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "containers": [container]}}}}),
        ))
        .await?;
        let settled = env.wait_settled("web", 2).await?;
        let name = settled.update_revision.clone().context("update revision")?;
        env.stop_controller().await?;

        let revisions = env.ns.api::<ControllerRevision>();
        let stored = revisions.get(&name).await?;
        let mut old = stored.clone();
        old.metadata = kube::api::ObjectMeta {
            name: stored.metadata.name.clone(),
            labels: stored.metadata.labels.clone(),
            annotations: stored.metadata.annotations.clone(),
            owner_references: stored.metadata.owner_references.clone(),
            ..Default::default()
        };
        let t = &mut old.data.0["spec"]["template"];
        t["metadata"]["creationTimestamp"] = serde_json::Value::Null;
        let c = &mut t["spec"]["containers"][0];
        let had = c["readinessProbe"]["grpc"]
            .as_object_mut()
            .and_then(|o| o.remove("service"))
            .is_some()
            && (!file_keys
                || c["env"][0]["valueFrom"]["fileKeyRef"]
                    .as_object_mut()
                    .and_then(|o| o.remove("optional"))
                    .is_some());
        ensure!(
            had,
            "the API server did not default the fields: {}",
            stored.data.0
        );
        revisions.delete(&name, &DeleteParams::default()).await?;
        wait_for("the revision gone", WITHIN, || async {
            Ok(revisions.get_opt(&name).await?.is_none().then_some(()))
        })
        .await?;
        revisions
            .create(&kube::api::PostParams::default(), &old)
            .await?;

        // The status the controller will rewrite shows when it has synced the set.
        env.sets()
            .patch_status(
                "web",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(
                    json!({"status": {"readyReplicas": 0, "availableReplicas": 0}}),
                ),
            )
            .await?;
        let hist = env.pod_history().await?;
        env.start_controller_with(rkcm_statefulset::Config {
            semantic_revision_comparison: semantic,
            ..rkcm_statefulset::Config::default()
        });
        if semantic {
            let st = env
                .wait_status("web", "status rewritten", |_, st| {
                    st.ready_replicas == Some(2)
                })
                .await?;
            ensure!(
                st.update_revision.as_deref() == Some(name.as_str())
                    && st.current_revision.as_deref() == Some(name.as_str()),
                "the set moved off its revision {name}: {st:?}"
            );
            // Another pass (a spec change that is no template change) holds it too.
            env.patch_set("web", json!({"spec": {"minReadySeconds": 1}}))
                .await?;
            env.wait_status("web", "the new generation observed", |s, st| {
                st.observed_generation == s.metadata.generation
            })
            .await?;
            let revs = env.revision_list().await?;
            ensure!(
                revs.len() == 1 && revs[0].metadata.name.as_deref() == Some(name.as_str()),
                "a new revision: {:?}",
                revs.iter().map(|r| &r.metadata.name).collect::<Vec<_>>()
            );
            holds_for("no pod deleted", HOLDS, || async {
                Ok(hist
                    .seen()?
                    .iter()
                    .all(|s| !s.is_deleted() && s.object().metadata.deletion_timestamp.is_none()))
            })
            .await?;
        } else {
            let st = env
                .wait_status("web", "a new update revision", |_, st| {
                    st.update_revision.as_deref().is_some_and(|u| u != name)
                })
                .await?;
            let new = st.update_revision.unwrap_or_default();
            wait_for("web-1 replaced at the new revision", WITHIN, || async {
                Ok(env
                    .pod("web-1")
                    .await?
                    .is_some_and(|p| revision_of(&p) == new)
                    .then_some(()))
            })
            .await?;
        }
        Ok(())
    }
    .await;
    env.finish(r).await
}
