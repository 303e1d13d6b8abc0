//! What flows from the Deployment to its new RS and back: scenarios 27, 28 and 29.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::harness::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

rkcm_testkit::scenario! {
    /// Scenario 27: annotations are copied to the new RS only (never last-applied), and an
    /// annotation change is no rollout.
    s27_annotations_propagate_to_the_new_replicaset, "dep-annotate", annotation_propagation; all_threads
}

async fn annotation_propagation(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let mut body = deployment("web", 2);
    body["metadata"]["annotations"] =
        json!({"team": "a", LAST_APPLIED: "{\"kind\":\"Deployment\"}"});
    let d = env.create_deployment(body).await?;
    let d_uid = uid_of(&d);
    env.wait_complete_at("web", "1").await?;
    let v1 = env.rss_of(&d_uid).await?[0].clone();
    ensure_eq(
        annotations(&v1),
        map(&[("team", "a"), (REVISION, "1"), (DESIRED, "2"), (MAX, "3")]),
        "v1 RS annotations",
    )?;

    env.set_image("web", V2).await?;
    let rss = rolled_to_v2(env, &d_uid).await?;
    let v2 = with_image(&rss, V2).context("no V2 RS")?;
    ensure_eq(
        annotations(v2),
        map(&[("team", "a"), (REVISION, "2"), (DESIRED, "2"), (MAX, "3")]),
        "v2 RS annotations",
    )?;
    let (v1_name, v2_name) = (name_of(&v1), name_of(v2));

    let before = env.deployment("web").await?.metadata.generation;
    let after = env
        .annotate("web", "team", Some("b"))
        .await?
        .metadata
        .generation;
    ensure_eq(
        after,
        before.map(|g| g + 1),
        "generation after an annotation change",
    )?;
    env.wait_rs(&v2_name, "team: b", |rs| ann(rs, "team") == Some("b"))
        .await?;
    env.wait_deployment("web", "observedGeneration caught up", |d| {
        d.status.as_ref().and_then(|s| s.observed_generation) == after
    })
    .await?;
    env.rss_hold(
        &d_uid,
        "no rollout; the old RS keeps team: a",
        HOLDS,
        |rss: &[ReplicaSet]| {
            sorted_names(rss) == sorted(&[&v1_name, &v2_name])
                && with_image(rss, V1).is_some_and(|rs| ann(rs, "team") == Some("a"))
                && with_image(rss, V2).is_some_and(|rs| ann(rs, "team") == Some("b"))
                && !rss.iter().any(|rs| ann(rs, LAST_APPLIED).is_some())
                && size_of(rss, V2) == Some(2)
        },
    )
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 28: `minReadySeconds` changes the RS in place.
    s28_min_ready_seconds_propagates_without_rollout, "dep-minready", min_ready; all_threads
}

async fn min_ready(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let d = env.create_deployment(deployment("web", 2)).await?;
    let d_uid = uid_of(&d);
    let rss = env
        .wait_rss(&d_uid, "one RS of 2", |rss| {
            rss.len() == 1 && settled(rss, V1, 2)
        })
        .await?;
    let name = name_of(&rss[0]);
    let changed = env
        .patch_deployment("web", json!({"spec": {"minReadySeconds": 5}}))
        .await?;
    let rss = env
        .wait_rss(&d_uid, "the same RS with minReadySeconds 5", |rss| {
            rss.len() == 1 && rss[0].spec.min_ready_seconds == Some(5)
        })
        .await?;
    ensure_eq(name_of(&rss[0]), name.clone(), "RS name")?;
    env.wait_deployment("web", "observed", |d| {
        d.status.as_ref().and_then(|s| s.observed_generation) == changed.metadata.generation
    })
    .await?;
    env.rss_hold(&d_uid, "no rollout", Duration::from_secs(3), |rss| {
        names_of(rss) == [name.clone()] && spec_replicas(&rss[0]) == 2
    })
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 29: the RS's ReplicaFailure is copied to the Deployment and cleared with it.
    s29_replica_failure_propagates, "dep-quota", replica_failure; all_threads
}

async fn replica_failure(env: &Env) -> Result<()> {
    let quotas = env.ns.api::<ResourceQuota>();
    let q: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "pods"},
        "spec": {"hard": {"pods": "1"}},
    }))?;
    quotas.create(&PostParams::default(), &q).await?;
    // Quota admission needs the quota controller to have computed usage first.
    rkcm_testkit::wait_for("quota status computed", WITHIN, || async {
        let q = quotas.get("pods").await?;
        Ok(q.status.and_then(|s| s.hard).is_some().then_some(()))
    })
    .await?;

    let ctrl = env.start();
    let d = env.create_deployment(deployment("web", 2)).await?;
    let d_uid = uid_of(&d);
    let rss = env.wait_rss(&d_uid, "one RS", |rss| rss.len() == 1).await?;
    let rs_name = name_of(&rss[0]);
    let (d, rs_cond) = rkcm_testkit::wait_for(
        "Deployment ReplicaFailure copied from the RS",
        WITHIN,
        || async {
            let rs = env.replicasets().get(&rs_name).await?;
            let d = env.deployment("web").await?;
            let rs_cond = rs
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.type_.as_deref() == Some("ReplicaFailure"))
                })
                .cloned();
            let Some(rs_cond) = rs_cond else {
                return Ok(None);
            };
            let copied = cond_triple(&d, "ReplicaFailure")
                == Some((
                    rs_cond.status.clone().unwrap_or_default(),
                    rs_cond.reason.clone().unwrap_or_default(),
                    rs_cond.message.clone().unwrap_or_default(),
                ));
            Ok(copied.then_some((d, rs_cond)))
        },
    )
    .await?;
    let cond = condition(&d, "ReplicaFailure").context("no ReplicaFailure")?;
    ensure_eq(
        (cond.status.as_deref(), cond.reason.as_deref()),
        (Some("True"), Some("FailedCreate")),
        "ReplicaFailure status and reason",
    )?;
    ensure(
        cond.message
            .as_deref()
            .is_some_and(|m| m.contains("exceeded quota")),
        format!("ReplicaFailure message: {:?}", cond.message),
    )?;
    ensure_eq(
        cond.last_update_time.map(|t| t.0),
        rs_cond.last_transition_time.map(|t| t.0),
        "lastUpdateTime = the RS condition's lastTransitionTime",
    )?;

    quotas.delete("pods", &DeleteParams::default()).await?;
    env.wait_rss(&d_uid, "the RS has its 2 pods", |rss| settled(rss, V1, 2))
        .await?;
    env.wait_deployment("web", "ReplicaFailure cleared", |d| {
        condition(d, "ReplicaFailure").is_none() && counts(d)[0] == 2
    })
    .await?;
    ctrl.stop().await
}
