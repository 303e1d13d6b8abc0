//! The orphan sweep: scenarios 7–11 and 22, with one test on the real 40 s quarantine.

use std::time::Duration;

use anyhow::{Context, Result};
use rkcm_testkit::builders::pod;
use rkcm_testkit::{NodeBuilder, unique_name};
use tokio::time::Instant;

use crate::harness::*;

rkcm_testkit::scenario! {
    orphaned_running_pod_is_failed_with_condition_then_force_deleted, "pgc-orphan", orphaned_running
}

async fn orphaned_running(env: &Env) -> Result<()> {
    let ghost = unique_name("pgc-ghost");
    let created = env
        .create_pod(pod(env.name(), "p").node(&ghost).finalizer(HOLD).build())
        .await?;
    env.set_phase("p", "Running").await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(0));
    let seen = env
        .wait_pod("p", "failed, conditioned and force-deleted", WITHIN, |p| {
            p.is_some_and(|p| force_deleted(p) && phase(p) == "Failed")
        })
        .await?
        .context("held pod vanished")?;
    let cond = disruption_target(&seen).context("DisruptionTarget condition missing")?;
    ensure(
        cond.status == "True",
        format!("condition status {:?}", cond.status),
    )?;
    ensure(
        cond.reason.as_deref() == Some("DeletionByPodGC"),
        format!("reason {:?}", cond.reason),
    )?;
    ensure(
        cond.message.as_deref() == Some("PodGC: node no longer exists"),
        format!("message {:?}", cond.message),
    )?;
    ensure(
        cond.last_transition_time.is_some(),
        "lastTransitionTime set",
    )?;
    // PodGC stamps the generation it acted on; its delete then bumps `metadata.generation`
    // (setting deletionTimestamp counts as a spec change since pod generation tracking).
    let observed = seen.status.as_ref().and_then(|s| s.observed_generation);
    ensure(
        observed.is_some() && observed == created.metadata.generation,
        format!(
            "status.observedGeneration {observed:?} != generation {:?} PodGC saw",
            created.metadata.generation
        ),
    )?;
    ensure(
        cond.observed_generation == created.metadata.generation,
        format!(
            "condition observedGeneration {:?}",
            cond.observed_generation
        ),
    )?;
    ensure(seen.metadata.uid == created.metadata.uid, "same pod")?;
    ensure(
        status_managers(&seen).iter().any(|m| m == "PodGC"),
        format!(
            "status written by field manager PodGC: {:?}",
            status_managers(&seen)
        ),
    )?;
    env.release::<Pod>("p").await?;
    env.wait_gone("p", WITHIN).await?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    quarantine_saves_pods_of_a_node_that_shows_up, "pgc-late-node", late_node
}

async fn late_node(env: &Env) -> Result<()> {
    let late = unique_name("pgc-late");
    let cfg = rkcm_podgc::Config {
        quarantine: Duration::from_secs(6),
        ..fast(0)
    };
    let gc = start_podgc(&env.cluster, &[env.name()], cfg);
    env.create_pod(pod(env.name(), "p").node(&late).build())
        .await?;
    env.set_phase("p", "Running").await?;
    // Upstream: the node registers 15 s into a 40 s quarantine.
    tokio::time::sleep(Duration::from_millis(2250)).await;
    let _node = env
        .cluster
        .create_node(NodeBuilder::new(&late).ready(true))
        .await?;
    env.pod_holds("p", "kept, phase unchanged", Duration::from_secs(12), |p| {
        p.is_some_and(|p| !is_deleting(p) && phase(p) == "Running")
    })
    .await?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    /// Scenarios 9 and 10 with the real quarantine: a node deleted while its pods run; nothing
    /// happens for 40 s, then the pods are failed (with the condition) and force-deleted.
    real_quarantine_lower_bound_after_node_deletion, "pgc-real-quarantine", real_quarantine
}

async fn real_quarantine(env: &Env) -> Result<()> {
    let node = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("pgc-doomed")).ready(true))
        .await?;
    held_and_free(env, node.name()).await?;
    let cfg = rkcm_podgc::Config {
        gc_check_period: Duration::from_secs(1),
        quarantine: rkcm_podgc::DEFAULT_QUARANTINE,
        ..fast(0)
    };
    let gc = start_podgc(&env.cluster, &[env.name()], cfg);
    // Let PodGC sync and sweep the healthy pods first.
    tokio::time::sleep(Duration::from_secs(2)).await;

    node.delete().await?;
    let vanished = Instant::now();
    let untouched = |p: Option<&k8s_openapi::api::core::v1::Pod>| {
        p.is_some_and(|p| !is_deleting(p) && phase(p) == "Running")
    };
    // Both pods are polled in turn for 39 s.
    let env_ref = &env;
    let pods = env_ref.pods();
    rkcm_testkit::holds_for(
        "both pods untouched for 39 s after the node vanished",
        Duration::from_secs(39),
        || {
            let pods = pods.clone();
            async move {
                let held = pods.get_opt("held").await?;
                let free = pods.get_opt("free").await?;
                Ok(untouched(held.as_ref()) && untouched(free.as_ref()))
            }
        },
    )
    .await?;
    ensure(
        vanished.elapsed() >= Duration::from_secs(39),
        "watched for 39 s",
    )?;

    // Gone within quarantine + period + slack.
    let deadline = Duration::from_secs(40 + 1 + 7).saturating_sub(vanished.elapsed());
    env.wait_gone("free", deadline).await?;
    let seen = env
        .wait_pod(
            "held",
            "failed and force-deleted",
            Duration::from_secs(3),
            |p| p.is_some_and(|p| force_deleted(p) && phase(p) == "Failed"),
        )
        .await?
        .context("held pod vanished")?;
    ensure(
        disruption_target(&seen).is_some_and(|c| c.reason.as_deref() == Some("DeletionByPodGC")),
        "DisruptionTarget/DeletionByPodGC present",
    )?;
    let took = vanished.elapsed();
    ensure(
        took >= Duration::from_secs(39),
        format!("deleted after {took:?}, before the quarantine"),
    )?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    terminal_orphan_gets_no_condition, "pgc-terminal-orphan", terminal_orphan
}

async fn terminal_orphan(env: &Env) -> Result<()> {
    let ghost = unique_name("pgc-ghost");
    env.create_pod(pod(env.name(), "done").node(&ghost).finalizer(HOLD).build())
        .await?;
    let before = env.cluster.terminate_pod(env.name(), "done", 0).await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(0));
    let seen = env
        .wait_pod("done", "force-deleted", WITHIN, |p| {
            p.is_some_and(force_deleted)
        })
        .await?
        .context("held pod vanished")?;
    ensure(
        phase(&seen) == "Succeeded",
        format!("phase {}", phase(&seen)),
    )?;
    ensure(
        disruption_target(&seen).is_none(),
        "no DisruptionTarget on a terminal pod",
    )?;
    ensure(
        serde_json::to_value(&seen.status)? == serde_json::to_value(&before.status)?,
        "status unchanged",
    )?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 22: a restart forgets the quarantine, so deletion waits a full quarantine after
    /// the restart, however long the pod was orphaned before.
    restart_resets_only_the_quarantine, "pgc-restart", restart
}

async fn restart(env: &Env) -> Result<()> {
    let quarantine = Duration::from_secs(6);
    let cfg = rkcm_podgc::Config {
        quarantine,
        ..fast(0)
    };
    let ghost = unique_name("pgc-ghost");
    env.create_pod(pod(env.name(), "p").node(&ghost).build())
        .await?;
    env.set_phase("p", "Running").await?;

    let first = start_podgc(&env.cluster, &[env.name()], cfg.clone());
    let running = |p: Option<&k8s_openapi::api::core::v1::Pod>| {
        p.is_some_and(|p| !is_deleting(p) && phase(p) == "Running")
    };
    // Orphaned for 3/4 of the quarantine under the first instance.
    env.pod_holds(
        "p",
        "kept before the restart",
        Duration::from_millis(4500),
        running,
    )
    .await?;
    first.stop().await?;

    let restarted = Instant::now();
    let second = start_podgc(&env.cluster, &[env.name()], cfg);
    env.pod_holds(
        "p",
        "kept for a full quarantine after the restart",
        quarantine - Duration::from_millis(300),
        running,
    )
    .await?;
    env.wait_gone("p", Duration::from_secs(10)).await?;
    let took = restarted.elapsed();
    ensure(
        took >= quarantine,
        format!("deleted {took:?} after the restart, before a full quarantine"),
    )?;
    second.stop().await
}
