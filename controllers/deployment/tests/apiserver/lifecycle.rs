//! A Deployment being deleted, and terminating replicas: scenarios 30 and 31.

use std::time::Duration;

use anyhow::Result;
use kube::api::DeleteParams;
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    /// Scenario 30: a Deployment being deleted only gets status updates.
    ///
    /// The plane's garbage collector is on: a Foreground delete would make it delete the RS.
    /// So the Deployment is deleted in the background (the GC leaves dependents alone while
    /// their owner still exists) and kept in deletion by a finalizer of the test's.
    s30_deleting_deployment_is_frozen, "dep-deleting", deleting_frozen; all_threads
}

async fn deleting_frozen(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let mut body = deployment("web", 3);
    body["metadata"]["finalizers"] = json!([HOLD]);
    let d = env.create_deployment(body).await?;
    let d_uid = uid_of(&d);
    env.wait_complete("web").await?;
    let rs = name_of(&env.rss_of(&d_uid).await?[0]);

    env.deployments()
        .delete("web", &DeleteParams::background())
        .await?;
    env.wait_deployment("web", "being deleted", |d| {
        d.metadata.deletion_timestamp.is_some()
    })
    .await?;
    let changed = env.scale("web", 5).await?;
    env.wait_deployment("web", "observedGeneration advances", |d| {
        d.status.as_ref().and_then(|s| s.observed_generation) == changed.metadata.generation
    })
    .await?;
    env.rss_hold(
        &d_uid,
        "the RS keeps 3 replicas and no RS is added",
        Duration::from_secs(15),
        |rss| {
            names_of(rss) == [rs.clone()]
                && spec_replicas(&rss[0]) == 3
                && ann(&rss[0], DESIRED) == Some("3")
        },
    )
    .await?;
    ctrl.stop().await
}

/// Scenario 31: terminating replicas are reported (gate on, where the server keeps the field).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn s31_terminating_replicas_reported() -> Result<()> {
    let env = Env::new("dep-terminating").await?;
    // A v1.34 server drops the field: there the scenario runs as rkcm does at that minor,
    // with the gate off.
    let gate = env.cluster.keeps_terminating_replicas();
    let result = terminating(&env, gate).await;
    env.finish(result).await
}

/// Scenario 31, gate off in both controllers: the field is absent.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn s31_terminating_replicas_gate_off_leaves_field_absent() -> Result<()> {
    let env = Env::new("dep-terminating-off").await?;
    let result = terminating(&env, false).await;
    env.finish(result).await
}

async fn terminating(env: &Env, gate: bool) -> Result<()> {
    let ctrl = env.start_gated(gate);
    let _ready = Readier::all(env).await?;
    let mut body = deployment("web", 3);
    body["spec"]["template"]["metadata"]["finalizers"] = json!([HOLD]);
    let d = env.create_deployment(body).await?;
    let d_uid = uid_of(&d);
    env.wait_complete("web").await?;
    let rs = env.rss_of(&d_uid).await?[0].clone();

    let scaled = env.scale("web", 1).await?;
    let want = gate.then_some(2);
    env.wait_rs(
        &name_of(&rs),
        &format!("1 replica, terminatingReplicas {want:?}"),
        |rs| {
            rs_observed(rs)
                && spec_replicas(rs) == 1
                && rs_counts(rs).0 == 1
                && rs.status.as_ref().and_then(|s| s.terminating_replicas) == want
        },
    )
    .await?;
    let terminating = env
        .owned(&uid_of(&rs))
        .await?
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .count();
    ensure_eq(terminating, 2, "pods terminating")?;
    env.wait_deployment(
        "web",
        &format!("replicas 1, terminatingReplicas {want:?}"),
        |d| {
            d.status.as_ref().and_then(|s| s.observed_generation) == scaled.metadata.generation
                && counts(d)[0] == 1
                && d.status.as_ref().and_then(|s| s.terminating_replicas) == want
        },
    )
    .await?;
    ctrl.stop().await
}
