//! Scenario 29: the stale-cache guard (gate `StaleControllerConsistencyReplicaSet`).
//!
//! The controllers' pod watch lags 3 s while the test keeps touching the ReplicaSet (each
//! update is a sync). With the guard every sync waits until the pod cache shows the
//! controller's own last writes: an adopted orphan is patched exactly once, the skips are
//! counted in `replicaset_controller_stale_sync_skips_total`, and scaling 1→5 never makes more
//! than 5 pods. The same steps with the gate off adopt the orphan again and again (each sync
//! still sees it as an orphan) — the churn the guard removes — while expectations alone still
//! keep the pod count at 5.

use std::time::Duration;

use anyhow::Result;

use crate::harness::*;
use rkcm_testkit::recorder::Recorder;

const LAG: Duration = Duration::from_secs(3);

rkcm_testkit::scenario! {
    stale_cache_guard_waits_for_own_writes, "rs-stale", guarded
}

fn skips(resource: &str) -> u64 {
    let text = rkcm_runtime::metrics::render();
    let group = if resource == "pods" { "" } else { "apps" };
    let series = format!(
        "replicaset_controller_stale_sync_skips_total{{group=\"{group}\",resource=\"{resource}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Adoption of an orphan and a scale-up under the lagging pod watch, touching the ReplicaSet
/// every poll; returns how many adoption patches the orphan got.
async fn adopt_and_scale_under_lag(env: &Env, guard: bool, name: &str) -> Result<usize> {
    let recorder = Recorder::new();
    let cfg = rkcm_replicaset::Config {
        stale_cache_guard: guard,
        ..env.config()
    };
    let app = format!("{name}-app");
    let orphan = format!("{name}-orphan");
    // In the controllers' initial list, so only their own adoption is late.
    env.create_pod(bare_pod(&orphan, &[("app", &app)])).await?;
    let ctrl = start_recorded(env, cfg, LAG, Some(&recorder));
    let rs = env
        .create_rs(replicaset(name, 1, &[("app", &app)], &[("app", &app)]))
        .await?;
    let uid = uid_of(&rs);
    let uid = uid.as_str();
    holds_while_poking(
        env,
        (name, uid),
        "at most 1 pod while the orphan's adoption is unseen",
        LAG + Duration::from_secs(2),
        |pods| pods.len() <= 1,
    )
    .await?;
    env.wait_active(uid, 1).await?;

    env.scale(name, 5).await?;
    holds_while_poking(
        env,
        (name, uid),
        "never more than 5 pods while the watch lags",
        LAG + Duration::from_secs(2),
        |pods| pods.len() <= 5,
    )
    .await?;
    env.wait_active(uid, 5).await?;
    env.wait_rs(name, "replicas=5", |rs| rs_status(rs).0 == 5)
        .await?;
    ctrl.stop().await?;
    let ns = env.name().to_owned();
    Ok(recorder.matching(|c| c.is_pod_patch(&ns, &orphan)).len())
}

async fn guarded(env: &Env) -> Result<()> {
    let before = skips("pods");
    let patches = adopt_and_scale_under_lag(env, true, "guarded").await?;
    ensure(
        patches == 1,
        format!("guard on: the orphan is adopted exactly once, got {patches} patches"),
    )?;
    ensure(
        skips("pods") > before,
        "guard on: stale syncs are counted in replicaset_controller_stale_sync_skips_total",
    )?;

    // The control: without the guard each sync on the lagging cache adopts again.
    let patches = adopt_and_scale_under_lag(env, false, "unguarded").await?;
    ensure(
        patches > 1,
        format!("guard off: repeated adoption patches expected, got {patches}"),
    )
}
