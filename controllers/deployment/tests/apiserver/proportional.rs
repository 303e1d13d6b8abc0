//! Proportional scaling in the middle of a rollout: scenarios 9 and 10.

use anyhow::{Context, Result};

use crate::harness::*;

/// Scenario 3's steady state: D=10, old (V1) 8 ready pods, new (V2) 5 never-ready pods.
/// Returns (Deployment UID, old RS name, new RS name).
async fn mid_rollout(env: &Env) -> Result<(String, String, String)> {
    let (d, old) = settled_v1(env, deployment("web", 10)).await?;
    let (d_uid, old_name) = (uid_of(&d), name_of(&old));
    let rss = first_step(env, &d_uid).await?;
    let new_name = name_of(with_image(&rss, V2).context("no V2 RS")?);
    env.wait_deployment("web", "status of old 8 / new 5", |d| {
        observed(d) && counts(d) == [13, 5, 8, 8, 5]
    })
    .await?;
    env.wait_scaling_events("web", &first_steps(&old_name, &new_name))
        .await?;
    Ok((d_uid, old_name, new_name))
}

rkcm_testkit::scenario! {
    /// Scenario 9: 10 → 20 mid-rollout adds 12 = 7 (old) + 5 (new).
    s09_proportional_scale_up_mid_rollout, "dep-propup", scale_up; all_threads
}

async fn scale_up(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (d_uid, old_name, new_name) = mid_rollout(env).await?;
    env.scale("web", 20).await?;
    let annotated = |rss: &[k8s_openapi::api::apps::v1::ReplicaSet]| {
        rss.iter()
            .all(|rs| ann(rs, DESIRED) == Some("20") && ann(rs, MAX) == Some("25"))
    };
    env.wait_rss(&d_uid, "old 15 / new 10, both desired 20 max 25", |rss| {
        rss.len() == 2
            && size_of(rss, V1) == Some(15)
            && size_of(rss, V2) == Some(10)
            && annotated(rss)
    })
    .await?;
    env.wait_scaling_events(
        "web",
        &[
            first_steps(&old_name, &new_name),
            vec![
                format!("Scaled up replica set {old_name} from 8 to 15"),
                format!("Scaled up replica set {new_name} from 5 to 10"),
            ],
        ]
        .concat(),
    )
    .await?;
    // The rollout has no room left (Σ 25 = 20 + 5; 10 new pods unavailable): it stays.
    env.rss_hold(&d_uid, "stays at old 15 / new 10", HOLDS, |rss| {
        rss.len() == 2 && size_of(rss, V1) == Some(15) && size_of(rss, V2) == Some(10)
    })
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 10: 10 → 5 mid-rollout: old 8 → 4, new 5 → 3.
    s10_proportional_scale_down_mid_rollout, "dep-propdown", scale_down; all_threads
}

async fn scale_down(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (d_uid, old_name, new_name) = mid_rollout(env).await?;
    env.scale("web", 5).await?;
    let annotated = |rss: &[k8s_openapi::api::apps::v1::ReplicaSet]| {
        rss.iter()
            .all(|rs| ann(rs, DESIRED) == Some("5") && ann(rs, MAX) == Some("7"))
    };
    env.wait_rss(
        &d_uid,
        "old 4 / new 3 with their pods, desired 5 max 7",
        |rss| rss.len() == 2 && settled(rss, V1, 4) && settled(rss, V2, 3) && annotated(rss),
    )
    .await?;
    env.wait_scaling_events(
        "web",
        &[
            first_steps(&old_name, &new_name),
            vec![
                format!("Scaled down replica set {old_name} from 8 to 4"),
                format!("Scaled down replica set {new_name} from 5 to 3"),
            ],
        ]
        .concat(),
    )
    .await?;
    env.rss_hold(&d_uid, "stays at old 4 / new 3", HOLDS, |rss| {
        rss.len() == 2 && size_of(rss, V1) == Some(4) && size_of(rss, V2) == Some(3)
    })
    .await?;
    ctrl.stop().await
}
