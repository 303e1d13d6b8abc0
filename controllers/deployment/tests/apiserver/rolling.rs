//! RollingUpdate arithmetic: scenarios 3, 4, 5, 6, 7 and 8.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    /// Scenarios 3 (rolling update arithmetic, new pods never ready) and 4 (it completes once
    /// they are).
    s03_s04_rolling_update_arithmetic_then_completion, "dep-rolling", rolling_update; all_threads
}

async fn rolling_update(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (d, old) = settled_v1(env, deployment("web", 10)).await?;
    let (d_uid, old_name) = (uid_of(&d), name_of(&old));
    let history = History::<ReplicaSet>::start(env.replicasets()).await?;

    env.set_image("web", V2).await?;
    // Scenario 3: converges to new 5 / old 8 (Σ 13 = 10 + ceil(2.5)) and stays there.
    let rss = env
        .wait_rss(&d_uid, "old 8 / new 5 with their pods", |rss| {
            rss.len() == 2 && settled(rss, V1, 8) && settled(rss, V2, 5)
        })
        .await?;
    let new = with_image(&rss, V2).context("no V2 RS")?.clone();
    let new_name = name_of(&new);
    ensure_eq(
        (ann(&new, REVISION), ann(&new, DESIRED), ann(&new, MAX)),
        (Some("2"), Some("10"), Some("13")),
        "new RS revision, desired-replicas, max-replicas",
    )?;
    let d = env
        .wait_deployment("web", "status of old 8 / new 5 at revision 2", |d| {
            observed(d) && counts(d) == [13, 5, 8, 8, 5] && ann(d, REVISION) == Some("2")
        })
        .await?;
    ensure_eq(cond_triple(&d, "Available"), available_true(), "Available")?;
    env.rss_hold(&d_uid, "stays at old 8 / new 5", HOLDS, |rss| {
        rss.len() == 2 && size_of(rss, V1) == Some(8) && size_of(rss, V2) == Some(5)
    })
    .await?;
    env.wait_scaling_events("web", &first_steps(&old_name, &new_name))
        .await?;

    // Scenario 4: new pods become ready as they appear.
    let _ready = Readier::image(env, V2).await?;
    let rss = env
        .wait_rss(&d_uid, "old 0 / new 10", |rss| {
            rss.len() == 2 && settled(rss, V1, 0) && settled(rss, V2, 10)
        })
        .await?;
    ensure_eq(
        sorted_names(&rss),
        sorted(&[&old_name, &new_name]),
        "ReplicaSets",
    )?;
    let d = env.wait_complete("web").await?;
    ensure_eq(counts(&d), [10, 10, 10, 10, 0], "status counts")?;
    ensure_progressed(&d, &new_name)?;
    env.rss_hold(
        &d_uid,
        "the old RS is kept as history",
        Duration::from_secs(3),
        |rss| rss.len() == 2 && size_of(rss, V1) == Some(0),
    )
    .await?;
    ensure(
        history.max_total(&d_uid)? <= 13,
        format!(
            "Σ spec.replicas exceeded 10 + maxSurge 3: {}",
            history.max_total(&d_uid)?
        ),
    )?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 5: unhealthy old pods are scaled away first, even with nothing available.
    s05_unhealthy_old_pods_are_removed_first, "dep-unhealthy", unhealthy_first; all_threads
}

async fn unhealthy_first(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let d = env.create_deployment(deployment("web", 10)).await?;
    let d_uid = uid_of(&d);
    let rss = env
        .wait_rss(&d_uid, "one RS of 10 pods", |rss| {
            rss.len() == 1 && settled(rss, V1, 10)
        })
        .await?;
    let old_name = name_of(&rss[0]);
    let rss = first_step(env, &d_uid).await?;
    let new_name = name_of(with_image(&rss, V2).context("no V2 RS")?);
    let old = with_image(&rss, V1).context("no V1 RS")?;
    ensure_eq(rs_counts(old).2, 0, "old RS available replicas")?;
    // The first step, with the unhealthy cleanup (old 10 → 8 in one write, 0 available).
    env.wait_scaling_events("web", &first_steps(&old_name, &new_name))
        .await?;
    let d = env
        .wait_deployment("web", "status of old 8 / new 5, none available", |d| {
            observed(d) && counts(d) == [13, 5, 0, 0, 13]
        })
        .await?;
    ensure_eq(cond_triple(&d, "Available"), available_false(), "Available")?;
    env.rss_hold(&d_uid, "steady at old 8 / new 5", HOLDS, |rss| {
        rss.len() == 2 && size_of(rss, V1) == Some(8) && size_of(rss, V2) == Some(5)
    })
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 6: maxSurge 0, maxUnavailable 1.
    s06_max_surge_zero_replaces_one_at_a_time, "dep-nosurge", no_surge; all_threads
}

async fn no_surge(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let mut body = deployment("web", 3);
    rolling(&mut body, json!(0), json!(1));
    let (d, old) = settled_v1(env, body).await?;
    let (d_uid, old_name) = (uid_of(&d), name_of(&old));
    let history = History::<ReplicaSet>::start(env.replicasets()).await?;

    env.set_image("web", V2).await?;
    let rss = env
        .wait_rss(&d_uid, "old 2 / new 1", |rss| {
            rss.len() == 2 && settled(rss, V1, 2) && settled(rss, V2, 1)
        })
        .await?;
    let new_name = name_of(with_image(&rss, V2).context("no V2 RS")?);
    let first = history
        .versions(&new_name)?
        .first()
        .map(|s| spec_replicas(s.object()));
    ensure_eq(first, Some(0), "new RS created with replicas")?;
    env.rss_hold(
        &d_uid,
        "old 2 / new 1 until the new pod is ready",
        HOLDS,
        |rss| size_of(rss, V1) == Some(2) && size_of(rss, V2) == Some(1),
    )
    .await?;

    let _ready = Readier::image(env, V2).await?;
    env.wait_rss(&d_uid, "old 0 / new 3", |rss| {
        settled(rss, V1, 0) && settled(rss, V2, 3)
    })
    .await?;
    env.wait_complete("web").await?;
    ensure_eq(history.sizes(&old_name)?, vec![3, 2, 1, 0], "old RS sizes")?;
    ensure_eq(history.sizes(&new_name)?, vec![0, 1, 2, 3], "new RS sizes")?;
    ensure(
        history.max_total(&d_uid)? <= 3,
        format!("Σ spec.replicas exceeded 3: {}", history.max_total(&d_uid)?),
    )?;
    // No event for the creation at 0.
    env.wait_scaling_events(
        "web",
        &[
            format!("Scaled up replica set {old_name} from 0 to 3"),
            format!("Scaled down replica set {old_name} from 3 to 2"),
            format!("Scaled up replica set {new_name} from 0 to 1"),
            format!("Scaled down replica set {old_name} from 2 to 1"),
            format!("Scaled up replica set {new_name} from 1 to 2"),
            format!("Scaled down replica set {old_name} from 1 to 0"),
            format!("Scaled up replica set {new_name} from 2 to 3"),
        ],
    )
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 7: percentages round (surge up, unavailable down).
    s07_percentages_round_surge_up_unavailable_down, "dep-percent", percent_rounding; all_threads
}

async fn percent_rounding(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let history = History::<Deployment>::start(env.deployments()).await?;
    let mut body = deployment("web", 5);
    rolling(&mut body, json!("30%"), json!("30%"));
    let d = env.create_deployment(body).await?;
    let rss = env
        .wait_rss(&uid_of(&d), "one RS of 5", |rss| {
            rss.len() == 1 && settled(rss, V1, 5)
        })
        .await?;
    ensure_eq(
        (ann(&rss[0], DESIRED), ann(&rss[0], MAX)),
        (Some("5"), Some("7")),
        "desired-replicas, max-replicas (5 + ceil(1.5))",
    )?;
    let pods = env.wait_active(&uid_of(&rss[0]), 5).await?;
    let now = jiff::Timestamp::now();
    for (i, p) in pods.iter().enumerate() {
        env.set_ready(&name_of(p), now).await?;
        let n = i32::try_from(i)? + 1;
        // 5 − floor(1.5) = 4 must be available.
        let (status, reason) = if n >= 4 {
            ("True", "MinimumReplicasAvailable")
        } else {
            ("False", "MinimumReplicasUnavailable")
        };
        env.wait_deployment("web", &format!("{n} available, Available={status}"), |d| {
            observed(d) && counts(d)[3] == n && has_condition(d, "Available", status, reason)
        })
        .await?;
    }
    // Every status ever written agrees: Available is True exactly from 4 available on.
    for s in history.seen()? {
        let d = s.object();
        let Some(c) = condition(d, "Available") else {
            continue;
        };
        let available = counts(d)[3];
        ensure(
            (c.status.as_deref() == Some("True")) == (available >= 4),
            format!(
                "Available={} with {available} available: {}",
                c.status.as_deref().unwrap_or_default(),
                describe_deployment(d)
            ),
        )?;
    }
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 8: maxSurge 0 and 25% of 1 (= 0) make maxUnavailable 1.
    s08_both_rounding_to_zero_allows_one_unavailable, "dep-roundzero", round_to_zero; all_threads
}

async fn round_to_zero(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let mut body = deployment("web", 1);
    rolling(&mut body, json!(0), json!("25%"));
    let (d, old) = settled_v1(env, body).await?;
    let (d_uid, old_name) = (uid_of(&d), name_of(&old));
    let rs_history = History::<ReplicaSet>::start(env.replicasets()).await?;
    let d_history = History::<Deployment>::start(env.deployments()).await?;

    env.set_image("web", V2).await?;
    let rss = env
        .wait_rss(&d_uid, "old 0 / new 1", |rss| {
            rss.len() == 2 && settled(rss, V1, 0) && settled(rss, V2, 1)
        })
        .await?;
    let new_name = name_of(with_image(&rss, V2).context("no V2 RS")?);
    let old_at_0 = rs_history.position(
        |s| matches!(s, Seen::Applied(rs) if name_of(rs) == old_name && spec_replicas(rs) == 0),
    )?;
    let new_at_1 = rs_history.position(
        |s| matches!(s, Seen::Applied(rs) if name_of(rs) == new_name && spec_replicas(rs) == 1),
    )?;
    ensure(
        matches!((old_at_0, new_at_1), (Some(o), Some(n)) if o < n),
        format!(
            "the old RS must reach 0 before the new RS gets 1 (change #{old_at_0:?} vs #{new_at_1:?})"
        ),
    )?;
    ensure_eq(rs_history.sizes(&new_name)?, vec![0, 1], "new RS sizes")?;

    let _ready = Readier::image(env, V2).await?;
    env.wait_complete("web").await?;
    for s in d_history.seen()? {
        let d = s.object();
        ensure(
            condition(d, "Available").is_none_or(|c| c.status.as_deref() == Some("True")),
            format!("Available must stay True: {}", describe_deployment(d)),
        )?;
    }
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// The stale-cache guard (rkcm's, on by default): with the ReplicaSet controller stopped,
    /// the old ReplicaSet's status still counts 4 available after one of its pods is deleted.
    /// A rollout of 4 (maxUnavailable 1) must keep 3 available, and the pods show exactly 3:
    /// the rolling step reads them too and scales nothing down.
    guard_a_stale_status_scales_nothing_below_min_available, "dep-stale", stale_status_guarded
}

rkcm_testkit::scenario! {
    /// The same with `--rkcm-deployment-stale-cache-guard=false`, upstream's rule: the step
    /// reads the status alone and scales the old ReplicaSet down to 3 (the scenario does make
    /// the status stale).
    unguarded_a_stale_status_scales_down_as_upstream, "dep-stale-off", stale_status_unguarded
}

async fn stale_status_guarded(env: &Env) -> Result<()> {
    stale_status(env, true).await
}

async fn stale_status_unguarded(env: &Env) -> Result<()> {
    stale_status(env, false).await
}

async fn stale_status(env: &Env, guard: bool) -> Result<()> {
    let both = env.start();
    // 4 replicas at the API's 25%/25%: maxSurge 1, maxUnavailable 1 (3 must stay available).
    let (d, old) = settled_v1(env, deployment("web", 4)).await?;
    let (d_uid, old_uid) = (uid_of(&d), uid_of(&old));
    // From here on nothing writes a ReplicaSet's status.
    both.stop().await?;
    let pods = env.active(&old_uid).await?;
    ensure_eq(pods.len(), 4, "pods of the V1 ReplicaSet")?;
    let gone = name_of(&pods[0]);
    env.delete_gracefully(&gone).await?;
    env.wait_gone(&gone, WITHIN).await?;

    let cfg = rkcm_deployment::Config {
        terminating_replicas: env.cluster.keeps_terminating_replicas(),
        stale_cache_guard: guard,
        ..rkcm_deployment::Config::default()
    };
    let _deployment = env
        .controllers()
        .spawn(rkcm_deployment::NAME, move |ctx| {
            rkcm_deployment::start(ctx, cfg.clone())
        })
        .run();
    env.set_image("web", V2).await?;
    let rss = env
        .wait_rss(&d_uid, "a V2 ReplicaSet beside the V1 one", |rss| {
            rss.len() == 2 && size_of(rss, V2).is_some_and(|n| n > 0)
        })
        .await?;
    let old = with_image(&rss, V1).context("no V1 RS")?;
    ensure_eq(
        rs_counts(old),
        (4, 4, 4),
        "the V1 ReplicaSet's stale status",
    )?;
    if guard {
        env.rss_hold(&d_uid, "the V1 ReplicaSet stays at 4", HOLDS, |rss| {
            rss.len() == 2 && size_of(rss, V1) == Some(4) && size_of(rss, V2) == Some(1)
        })
        .await
    } else {
        env.wait_rss(&d_uid, "the V1 ReplicaSet scaled down to 3", |rss| {
            size_of(rss, V1) == Some(3)
        })
        .await
        .map(drop)
    }
}
