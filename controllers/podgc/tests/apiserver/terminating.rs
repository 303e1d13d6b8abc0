//! The out-of-service and unscheduled-terminating sweeps: scenarios 12–17.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::builders::pod;
use rkcm_testkit::{NodeBuilder, unique_name};

use crate::harness::*;

const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

fn terminating_gracefully(p: Option<&Pod>) -> bool {
    p.is_some_and(|p| is_deleting(p) && !force_deleted(p) && phase(p) == "Running")
}

rkcm_testkit::scenario! {
    out_of_service_terminating_pods_are_force_deleted, "pgc-oos", out_of_service
}

async fn out_of_service(env: &Env) -> Result<()> {
    // No Ready condition at all: not ready.
    let node = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("pgc-shutdown")).taint(
            OUT_OF_SERVICE,
            "nodeshutdown",
            "NoExecute",
        ))
        .await?;
    held_and_free(env, node.name()).await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(0));
    // Scenario 16: not terminating, so untouched even on an out-of-service node.
    env.pod_holds(
        "free",
        "running pod untouched",
        Duration::from_secs(3),
        |p| p.is_some_and(|p| !is_deleting(p) && phase(p) == "Running"),
    )
    .await?;

    env.delete_gracefully("held").await?;
    env.delete_gracefully("free").await?;
    env.wait_gone("free", WITHIN).await?;
    let seen = env
        .wait_pod("held", "failed and force-deleted", WITHIN, |p| {
            p.is_some_and(|p| force_deleted(p) && phase(p) == "Failed")
        })
        .await?
        .context("held pod vanished")?;
    ensure(
        disruption_target(&seen).is_none(),
        "no DisruptionTarget for out-of-service",
    )?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    out_of_service_needs_not_ready_taint_and_termination, "pgc-oos-neg", out_of_service_negative
}

async fn out_of_service_negative(env: &Env) -> Result<()> {
    // Scenario 13: tainted but Ready.
    let ready = env
        .cluster
        .create_node(
            NodeBuilder::new(&unique_name("pgc-ready-tainted"))
                .ready(true)
                .taint(OUT_OF_SERVICE, "nodeshutdown", "NoExecute"),
        )
        .await?;
    // Scenario 14: not ready but without the taint.
    let untainted = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("pgc-notready")).ready(false))
        .await?;
    // Scenario 16: out of service, but the pod is never deleted.
    let shutdown = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("pgc-shutdown")).taint(
            OUT_OF_SERVICE,
            "nodeshutdown",
            "NoExecute",
        ))
        .await?;
    for (name, node) in [
        ("on-ready", ready.name()),
        ("on-untainted", untainted.name()),
        ("alive", shutdown.name()),
    ] {
        env.create_pod(pod(env.name(), name).node(node).build())
            .await?;
        env.set_phase(name, "Running").await?;
    }
    env.delete_gracefully("on-ready").await?;
    env.delete_gracefully("on-untainted").await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(0));
    env.pod_holds(
        "on-ready",
        "still terminating gracefully",
        HOLDS,
        terminating_gracefully,
    )
    .await?;
    env.pod_holds(
        "on-untainted",
        "still terminating gracefully",
        Duration::from_millis(200),
        terminating_gracefully,
    )
    .await?;
    env.pod_holds("alive", "untouched", Duration::from_millis(200), |p| {
        p.is_some_and(|p| !is_deleting(p) && phase(p) == "Running")
    })
    .await?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    out_of_service_taint_value_and_effect_do_not_matter, "pgc-oos-any", any_taint
}

async fn any_taint(env: &Env) -> Result<()> {
    let node = env
        .cluster
        .create_node(
            NodeBuilder::new(&unique_name("pgc-shutdown"))
                .ready(false)
                .taint(OUT_OF_SERVICE, "", "NoSchedule"),
        )
        .await?;
    env.create_pod(pod(env.name(), "p").node(node.name()).build())
        .await?;
    env.set_phase("p", "Running").await?;
    env.delete_gracefully("p").await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(0));
    env.wait_gone("p", WITHIN).await?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    unscheduled_terminating_pod_is_failed_and_force_deleted, "pgc-unscheduled", unscheduled
}

async fn unscheduled(env: &Env) -> Result<()> {
    env.create_pod(pod(env.name(), "p").unschedulable().finalizer(HOLD).build())
        .await?;
    env.delete_gracefully("p").await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(0));
    let seen = env
        .wait_pod("p", "failed and force-deleted", WITHIN, |p| {
            p.is_some_and(|p| force_deleted(p) && phase(p) == "Failed")
        })
        .await?
        .context("held pod vanished")?;
    ensure(
        disruption_target(&seen).is_none(),
        "no DisruptionTarget for unscheduled",
    )?;
    env.release::<Pod>("p").await?;
    env.wait_gone("p", WITHIN).await?;
    gc.stop().await
}
