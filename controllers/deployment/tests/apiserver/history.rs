//! Revision history and rollback: scenarios 19, 20, 21, 22 and 23.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use rkcm_deployment::consts::{events, messages};
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    /// Scenario 19: `revisionHistoryLimit` 1 keeps one old RS, 0 keeps none.
    s19_revision_history_limit, "dep-histlimit", history_limit; all_threads
}

async fn history_limit(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let mut uids = BTreeMap::new();
    for (name, limit) in [("keep1", 1), ("keep0", 0)] {
        let mut body = deployment(name, 1);
        body["spec"]["revisionHistoryLimit"] = json!(limit);
        uids.insert(name, uid_of(&env.create_deployment(body).await?));
    }
    for name in uids.keys() {
        env.wait_complete_at(name, "1").await?;
    }
    for (image, revision) in [(V2, "2"), (V3, "3")] {
        for name in uids.keys() {
            env.set_image(name, image).await?;
        }
        for name in uids.keys() {
            env.wait_complete_at(name, revision).await?;
        }
    }
    let revisions = |rss: &[ReplicaSet]| -> Vec<(String, Option<String>)> {
        let mut r: Vec<_> = rss
            .iter()
            .map(|rs| {
                (
                    image_of(rs).to_owned(),
                    ann(rs, REVISION).map(str::to_owned),
                )
            })
            .collect();
        r.sort_by(|a, b| a.1.cmp(&b.1));
        r
    };
    let keep1 = vec![
        (V2.to_owned(), Some("2".to_owned())),
        (V3.to_owned(), Some("3".to_owned())),
    ];
    let keep0 = vec![(V3.to_owned(), Some("3".to_owned()))];
    env.wait_rss(&uids["keep1"], "v2 (old) and v3 (new) remain", |rss| {
        revisions(rss) == keep1
    })
    .await?;
    env.wait_rss(&uids["keep0"], "only v3 remains", |rss| {
        revisions(rss) == keep0
    })
    .await?;
    rkcm_testkit::holds_for(
        "nothing more is deleted",
        Duration::from_secs(3),
        || async {
            Ok(revisions(&env.rss_of(&uids["keep1"]).await?) == keep1
                && revisions(&env.rss_of(&uids["keep0"]).await?) == keep0)
        },
    )
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 20: cleanup never deletes an RS that still has replicas; it deletes it once
    /// scaled to 0 after completion.
    s20_cleanup_skips_replicasets_with_replicas, "dep-cleanup", cleanup_skips; all_threads
}

async fn cleanup_skips(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready_v1 = Readier::image(env, V1).await?;
    let mut body = deployment("web", 10);
    body["spec"]["revisionHistoryLimit"] = json!(0);
    let d = env.create_deployment(body).await?;
    let d_uid = uid_of(&d);
    env.wait_complete("web").await?;
    let sets = History::<ReplicaSet>::start(env.replicasets()).await?;
    let deployments = History::<Deployment>::start(env.deployments()).await?;
    let v1 = name_of(&env.rss_of(&d_uid).await?[0]);

    env.set_image("web", V2).await?;
    env.wait_rss(&d_uid, "old 8 / new 5", |rss| {
        rss.len() == 2 && settled(rss, V1, 8) && settled(rss, V2, 5)
    })
    .await?;
    env.set_paused("web", true).await?;
    env.wait_deployment("web", "paused and observed", |d| {
        observed(d) && has_condition(d, "Progressing", "Unknown", "DeploymentPaused")
    })
    .await?;
    env.rss_hold(
        &d_uid,
        "the v1 RS (8 replicas) is not deleted while paused",
        Duration::from_secs(15),
        |rss| {
            rss.len() == 2
                && with_image(rss, V1).is_some_and(|rs| {
                    spec_replicas(rs) == 8 && rs.metadata.deletion_timestamp.is_none()
                })
        },
    )
    .await?;

    let _ready_v2 = Readier::image(env, V2).await?;
    env.set_paused("web", false).await?;
    let rss = env
        .wait_rss(&d_uid, "only the v2 RS remains", |rss| {
            rss.len() == 1 && settled(rss, V2, 10)
        })
        .await?;
    ensure_eq(ann(&rss[0], REVISION), Some("2"), "v2 revision")?;
    env.wait_complete_at("web", "2").await?;
    let v1_versions = sets.versions(&v1)?;
    let deleted = v1_versions
        .iter()
        .position(|s| matches!(s, Seen::Deleted(_)))
        .context("the v1 RS deletion was not seen")?;
    ensure(
        v1_versions[..deleted]
            .iter()
            .rev()
            .find(|s| matches!(s, Seen::Applied(_)))
            .is_some_and(|s| spec_replicas(s.object()) == 0),
        "the v1 RS was scaled to 0 before it was deleted",
    )?;
    // Cleanup runs on a sync that reads a stored status reporting completion: such a status
    // was written before the deletion.
    let deleted_at = rv(v1_versions[deleted].object())?;
    let mut reported = None;
    for s in deployments.seen()? {
        let d = s.object();
        if rv(d)? < deleted_at && counts(d)[..4] == [10, 10, 10, 10] && desired(d) == 10 {
            reported = Some(rv(d)?);
        }
    }
    ensure(
        reported.is_some(),
        format!(
            "no status reporting completion was written before the v1 RS's deletion (rv {deleted_at})"
        ),
    )?;
    ctrl.stop().await
}

/// Sets up v1 (revision 1) then v2 (revision 2) of Deployment `web` with 2 replicas, all
/// pods ready; returns (Deployment UID, v1 RS name, v2 RS name).
async fn v1_then_v2(
    env: &Env,
    body: serde_json::Value,
    v2_patch: serde_json::Value,
) -> Result<(String, String, String)> {
    let d = env.create_deployment(body).await?;
    let d_uid = uid_of(&d);
    env.wait_complete_at("web", "1").await?;
    let v1 = name_of(&env.rss_of(&d_uid).await?[0]);
    env.patch_strategic("web", v2_patch).await?;
    let rss = rolled_to_v2(env, &d_uid).await?;
    let v2 = name_of(with_image(&rss, V2).context("no V2 RS")?);
    Ok((d_uid, v1, v2))
}

/// A strategic merge patch setting the template's image.
fn image_patch(image: &str) -> serde_json::Value {
    json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}})
}

/// Waits for the state a rollback to v1 ends in: the v1 RS is the new one again at
/// revision 3 with history "1", the v2 RS is empty, nothing else was created.
async fn rolled_back_to_v1(env: &Env, d_uid: &str, v1: &str, v2: &str) -> Result<()> {
    let rss = env
        .wait_rss(d_uid, "v1 RS back at 2 as revision 3, v2 at 0", |rss| {
            rss.len() == 2
                && settled(rss, V1, 2)
                && settled(rss, V2, 0)
                && with_image(rss, V1).is_some_and(|rs| {
                    ann(rs, REVISION) == Some("3") && ann(rs, REVISION_HISTORY) == Some("1")
                })
        })
        .await?;
    ensure_eq(
        sorted_names(&rss),
        sorted(&[v1, v2]),
        "the same two ReplicaSets",
    )?;
    env.wait_complete_at("web", "3").await?;
    Ok(())
}

rkcm_testkit::scenario! {
    /// Scenario 21: reverting the template reuses the old RS with a new revision.
    s21_rollback_by_template_revert, "dep-revert", template_revert; all_threads
}

async fn template_revert(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let (d_uid, v1, v2) = v1_then_v2(env, deployment("web", 2), image_patch(V2)).await?;
    let sets = History::<ReplicaSet>::start(env.replicasets()).await?;
    env.set_image("web", V1).await?;
    rolled_back_to_v1(env, &d_uid, &v1, &v2).await?;
    let mut want = vec![v1, v2];
    want.sort();
    ensure_eq(sets.names()?, want, "ReplicaSets ever seen (no new one)")?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 22: the rollback annotation.
    s22_rollback_annotation, "dep-rollback", rollback_annotation; all_threads
}

async fn rollback_annotation(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let mut body = deployment("web", 2);
    body["metadata"]["annotations"] = json!({"team": "a", LAST_APPLIED: "{}"});
    let mut v2_patch = image_patch(V2);
    v2_patch["metadata"] = json!({"annotations": {"team": "b", "only-v2": "y"}});
    let (d_uid, v1, v2) = v1_then_v2(env, body, v2_patch).await?;
    let stored_v1_template = template_without_hash(&env.replicasets().get(&v1).await?)?;
    let sets = History::<ReplicaSet>::start(env.replicasets()).await?;

    env.annotate("web", ROLLBACK_TO, Some("1")).await?;
    let d = env
        .wait_deployment("web", "rolled back: annotation gone, template of v1", |d| {
            ann(d, ROLLBACK_TO).is_none() && template_of(d).is_ok_and(|t| t == stored_v1_template)
        })
        .await?;
    ensure_eq(
        template_of(&d)?["spec"]["containers"][0]["image"].clone(),
        json!(V1),
        "template image",
    )?;
    ensure(
        template_of(&d)?["metadata"]["labels"].get(HASH).is_none(),
        "no pod-template-hash label in the Deployment's template",
    )?;
    let mut got = annotations(&d);
    let revision = got.remove(REVISION);
    ensure(
        matches!(revision.as_deref(), Some("2" | "3")),
        format!("Deployment revision annotation kept: {revision:?}"),
    )?;
    ensure_eq(
        got,
        [("team", "a"), (LAST_APPLIED, "{}")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        "Deployment annotations after rollback (v1 RS's, skipped keys kept)",
    )?;
    env.wait_event(
        "web",
        "Normal",
        "DeploymentRollback",
        "Rolled back deployment \"web\" to revision 1",
    )
    .await?;
    rolled_back_to_v1(env, &d_uid, &v1, &v2).await?;
    let mut want = vec![v1, v2];
    want.sort();
    ensure_eq(sets.names()?, want, "ReplicaSets ever seen (no new one)")?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 23: rollbacks that cannot happen are reported and dropped.
    s23_rollback_edge_cases, "dep-rollback-edge", rollback_edges; all_threads
}

async fn rollback_edges(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let d = env.create_deployment(deployment("web", 1)).await?;
    let d_uid = uid_of(&d);
    let d = env.wait_complete_at("web", "1").await?;
    let template = template_of(&d)?;
    let rs = name_of(&env.rss_of(&d_uid).await?[0]);
    // The strings are upstream's (pinned by the crate's unit tests).
    let unchanged = messages::rollback_template_unchanged("web");
    for (value, reason, message) in [
        (
            "0",
            events::ROLLBACK_REVISION_NOT_FOUND,
            messages::LAST_REVISION_NOT_FOUND,
        ),
        (
            "9",
            events::ROLLBACK_REVISION_NOT_FOUND,
            messages::REVISION_NOT_FOUND,
        ),
        ("1", events::ROLLBACK_TEMPLATE_UNCHANGED, unchanged.as_str()),
    ] {
        env.annotate("web", ROLLBACK_TO, Some(value)).await?;
        env.wait_event("web", "Warning", reason, message).await?;
        let d = env
            .wait_deployment("web", &format!("rollback to {value:?} dropped"), |d| {
                ann(d, ROLLBACK_TO).is_none()
            })
            .await?;
        ensure_eq(template_of(&d)?, template.clone(), "template unchanged")?;
        let rss = env.rss_of(&d_uid).await?;
        ensure_eq(names_of(&rss), vec![rs.clone()], "ReplicaSets")?;
    }
    ctrl.stop().await
}
