//! Adoption, release and hash collisions: scenarios 24, 25 and 26.

use anyhow::{Context, Result};
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    /// Scenario 24: a matching orphan RS is adopted and becomes the new RS.
    s24_adopts_matching_orphan_replicaset, "dep-adopt", adopt; all_threads
}

async fn adopt(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let pre = env
        .create_rs(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "pre", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": template(&[("app", "web")], V1),
            },
        }))
        .await?;
    let pre_uid = uid_of(&pre);
    let mut pods = names_of(&env.wait_active(&pre_uid, 2).await?);
    pods.sort();

    let d = env.create_deployment(deployment("web", 2)).await?;
    let d_uid = uid_of(&d);
    let rs = env
        .wait_rs("pre", "adopted by web at revision 1", |rs| {
            controller_uid(rs) == Some(d_uid.as_str()) && ann(rs, REVISION) == Some("1")
        })
        .await?;
    ensure_controlled_by_web(&rs, &d_uid)?;
    ensure_eq(
        serde_json::to_value(&rs.metadata.labels)?,
        json!({"app": "web"}),
        "adopted RS labels (no hash added)",
    )?;
    ensure_eq(
        serde_json::to_value(&rs.spec.selector)?,
        json!({"matchLabels": {"app": "web"}}),
        "adopted RS selector (no hash added)",
    )?;
    env.wait_deployment("web", "revision 1, observed", |d| {
        observed(d) && ann(d, REVISION) == Some("1")
    })
    .await?;
    rkcm_testkit::holds_for(
        "no other RS; the adopted RS keeps its pods",
        HOLDS,
        || async {
            let all = names_of(&env.all_rss().await?);
            let mut now = names_of(&env.active(&pre_uid).await?);
            now.sort();
            Ok(all == ["pre"] && now == pods)
        },
    )
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 25: an RS whose labels stop matching is released; the replacement's name
    /// collides with it, so `collisionCount` goes to 1 and another name is used.
    s25_released_replicaset_causes_collision, "dep-release", release_collision; all_threads
}

async fn release_collision(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let d = env.create_deployment(deployment("web", 3)).await?;
    let d_uid = uid_of(&d);
    env.wait_complete("web").await?;
    let old = env.rss_of(&d_uid).await?[0].clone();
    let (old_name, old_uid) = (name_of(&old), uid_of(&old));
    let old_hash = label(&old, HASH).context("no hash label")?.to_owned();
    let mut pods = names_of(&env.active(&old_uid).await?);
    pods.sort();

    env.patch_rs(
        &old_name,
        json!({"metadata": {"labels": {"app": "released"}}}),
    )
    .await?;
    env.wait_rs(&old_name, "released (no controller reference)", |rs| {
        controller_uid(rs).is_none()
    })
    .await?;
    let d = env
        .wait_deployment("web", "collisionCount 1", |d| {
            d.status.as_ref().and_then(|s| s.collision_count) == Some(1)
        })
        .await?;
    let rss = env
        .wait_rss(&d_uid, "a new RS of 3 under another name", |rss| {
            rss.len() == 1 && spec_replicas(&rss[0]) == 3
        })
        .await?;
    let new = &rss[0];
    let new_hash = label(new, HASH).context("new RS has no hash label")?;
    ensure(
        new_hash != old_hash && name_of(new) == format!("web-{new_hash}"),
        format!("new RS {} must differ from {old_name}", name_of(new)),
    )?;
    ensure_eq(
        template_without_hash(new)?,
        template_of(&d)?,
        "new RS template",
    )?;
    ensure_eq(ann(new, REVISION), Some("1"), "new RS revision")?;
    env.wait_complete("web").await?;
    rkcm_testkit::holds_for(
        "the released RS keeps its 3 pods and stays released",
        HOLDS,
        || async {
            let rs = env.replicasets().get(&old_name).await?;
            let mut now = names_of(&env.active(&old_uid).await?);
            now.sort();
            Ok(controller_uid(&rs).is_none() && spec_replicas(&rs) == 3 && now == pods)
        },
    )
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 26: editing the new RS's template makes it an old RS; the replacement's name
    /// collides with it.
    s26_edited_replicaset_template_causes_collision, "dep-collide", template_collision; all_threads
}

async fn template_collision(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let d = env.create_deployment(deployment("web", 3)).await?;
    let d_uid = uid_of(&d);
    env.wait_complete("web").await?;
    let edited = name_of(&env.rss_of(&d_uid).await?[0]);

    env.patch_rs(
        &edited,
        json!({"spec": {"template": {"metadata": {"annotations": {"edited": "yes"}}}}}),
    )
    .await?;
    let d = env
        .wait_deployment("web", "collisionCount 1", |d| {
            d.status.as_ref().and_then(|s| s.collision_count) == Some(1)
        })
        .await?;
    let rss = env
        .wait_rss(&d_uid, "the edited RS at 0, a new one at 3", |rss| {
            rss.len() == 2
                && rss
                    .iter()
                    .any(|rs| name_of(rs) == edited && spec_replicas(rs) == 0)
                && rss
                    .iter()
                    .any(|rs| name_of(rs) != edited && settled(std::slice::from_ref(rs), V1, 3))
        })
        .await?;
    let new = rss
        .iter()
        .find(|rs| name_of(*rs) != edited)
        .context("no new RS")?;
    ensure_eq(
        template_without_hash(new)?,
        template_of(&d)?,
        "new RS template is the Deployment's",
    )?;
    ensure_eq(ann(new, REVISION), Some("2"), "new RS revision")?;
    let d = env.wait_complete_at("web", "2").await?;
    ensure_eq(
        d.status.as_ref().and_then(|s| s.collision_count),
        Some(1),
        "collisionCount",
    )?;
    ctrl.stop().await
}
