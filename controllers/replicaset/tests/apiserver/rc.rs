//! ReplicationController: scenarios 26–28.

use anyhow::Result;
use k8s_openapi::api::core::v1::ReplicationController;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::failure::{raise_quota, with_quota};
use crate::harness::*;

fn rc(name: &str, replicas: i32, app: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"app": app}, "template": template(&[("app", app)])},
    })
}

fn rc_replicas(rc: &ReplicationController) -> i32 {
    rc.status.as_ref().map_or(0, |s| s.replicas)
}

fn rc_failure(
    rc: &ReplicationController,
) -> Option<k8s_openapi::api::core::v1::ReplicationControllerCondition> {
    rc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "ReplicaFailure")
        .cloned()
}

rkcm_testkit::scenario! {
    replication_controller_creates_owned_pods_and_reports_status, "rc-basic", basics
}

async fn basics(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let rc = env.create_rc(rc("rc1", 2, "rc")).await?;
    let uid = uid_of(&rc);
    let pods = env.wait_active(&uid, 2).await?;
    for p in &pods {
        let r = &p.metadata.owner_references.clone().unwrap_or_default()[0];
        ensure(
            r.api_version == "v1"
                && r.kind == "ReplicationController"
                && r.name == "rc1"
                && r.controller == Some(true)
                && r.block_owner_deletion == Some(true),
            format!("controllerRef {r:?}"),
        )?;
    }
    let rc = env
        .wait::<ReplicationController>("rc1", "replicas=2 observed", |rc| {
            rc_replicas(rc) == 2
                && rc.status.as_ref().and_then(|s| s.observed_generation) == rc.metadata.generation
        })
        .await?;
    let raw: Value = serde_json::to_value(&rc)?;
    ensure(
        raw["status"].get("terminatingReplicas").is_none(),
        "RC status has no terminatingReplicas",
    )?;
    rkcm_testkit::wait_for(
        "SuccessfulCreate events from replication-controller",
        WITHIN,
        || async {
            let events = env.events_for("rc1").await?;
            let n = events
                .iter()
                .filter(|e| {
                    e.reason.as_deref() == Some("SuccessfulCreate")
                        && e.source.as_ref().and_then(|s| s.component.as_deref())
                            == Some("replication-controller")
                })
                .count();
            Ok((n == 2).then_some(()))
        },
    )
    .await?;
    // A deleted pod is replaced exactly once.
    env.pods()
        .delete(&names_of(&pods)[0], &Default::default())
        .await?;
    let after = env.wait_active(&uid, 2).await?;
    env.active_names_hold(&uid, &names_of(&after), HOLDS)
        .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    replication_controller_selector_change_releases_and_recreates, "rc-selector", selector_change
}

async fn selector_change(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let rc = env.create_rc(rc("rc1", 2, "rc")).await?;
    let uid = uid_of(&rc);
    let old = names_of(&env.wait_active(&uid, 2).await?);
    env.rcs()
        .patch(
            "rc1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"selector": {"app": "rc2"}, "template": {"metadata": {"labels": {"app": "rc2"}}}}})),
        )
        .await?;
    // The old pods stay active and owned until released, so wait for the new set.
    let new = rkcm_testkit::wait_for("2 new pods replace the released ones", WITHIN, || async {
        let pods = env.active(&uid).await?;
        let fresh = names_of(&pods).iter().all(|n| !old.contains(n));
        Ok((pods.len() == 2 && fresh).then_some(pods))
    })
    .await?;
    env.active_names_hold(&uid, &names_of(&new), HOLDS).await?;
    for p in &new {
        ensure(
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .map(String::as_str)
                == Some("rc2"),
            "new pods carry app=rc2",
        )?;
    }
    for name in &old {
        let p = env.pods().get(name).await?;
        ensure(controller_uid(&p).is_none(), format!("{name} released"))?;
    }
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    replication_controller_quota_failure_condition, "rc-quota", rc_quota
}

async fn rc_quota(env: &Env) -> Result<()> {
    with_quota(env, 1).await?;
    let ctrl = env.start();
    let rc = env.create_rc(rc("rc1", 3, "rc")).await?;
    let uid = uid_of(&rc);
    env.wait::<ReplicationController>("rc1", "ReplicaFailure/True/FailedCreate", |rc| {
        rc_failure(rc)
            .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some("FailedCreate"))
    })
    .await?;
    ensure(env.active(&uid).await?.len() == 1, "one pod under quota")?;
    raise_quota(env, 3).await?;
    env.wait_active(&uid, 3).await?;
    env.wait::<ReplicationController>("rc1", "condition removed", |rc| {
        rc_failure(rc).is_none() && rc_replicas(rc) == 3
    })
    .await?;
    ctrl.stop().await
}
