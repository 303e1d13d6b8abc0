//! Creating, replacing and reporting: scenarios 1–5, 18, 24 and scale 0→N→0.

use std::time::Duration;

use anyhow::Result;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    creates_pods_from_template_with_events_and_status, "rs-create", create_from_zero
}

async fn create_from_zero(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let mut body = replicaset(
        "web",
        3,
        &[("app", "web")],
        &[("app", "web"), ("tier", "fe")],
    );
    body["spec"]["template"]["metadata"]["annotations"] = json!({"a": "b"});
    let rs = env.create_rs(body).await?;
    let uid = uid_of(&rs);
    let pods = env.wait_active(&uid, 3).await?;
    for p in &pods {
        ensure(
            p.metadata.generate_name.as_deref() == Some("web-"),
            "generateName web-",
        )?;
        let labels = p.metadata.labels.clone().unwrap_or_default();
        ensure(
            labels.len() == 2 && labels.get("tier").map(String::as_str) == Some("fe"),
            format!("labels {labels:?}"),
        )?;
        let ann = p.metadata.annotations.clone().unwrap_or_default();
        ensure(
            ann.get("a").map(String::as_str) == Some("b"),
            format!("annotations {ann:?}"),
        )?;
        let refs = p.metadata.owner_references.clone().unwrap_or_default();
        ensure(refs.len() == 1, "exactly one ownerRef")?;
        let r = &refs[0];
        ensure(
            r.api_version == "apps/v1"
                && r.kind == "ReplicaSet"
                && r.name == "web"
                && r.uid == uid
                && r.controller == Some(true)
                && r.block_owner_deletion == Some(true),
            format!("controllerRef {r:?}"),
        )?;
    }
    env.wait_rs(
        "web",
        "replicas=3 fullyLabeled=3 ready=0 available=0, observed",
        |rs| rs_status(rs) == (3, 3, 0, 0) && observed(rs),
    )
    .await?;
    let names = names_of(&pods);
    rkcm_testkit::wait_for("3 SuccessfulCreate events", WITHIN, || async {
        let events = env.events_for("web").await?;
        let created: Vec<_> = events
            .iter()
            .filter(|e| {
                e.reason.as_deref() == Some("SuccessfulCreate")
                    && e.type_.as_deref() == Some("Normal")
                    && e.source.as_ref().and_then(|s| s.component.as_deref())
                        == Some("replicaset-controller")
            })
            .filter_map(|e| e.message.clone())
            .collect();
        Ok(names
            .iter()
            .all(|n| created.contains(&format!("Created pod: {n}")))
            .then_some(()))
    })
    .await?;

    // Scenario 2: readiness and availability.
    let now = jiff::Timestamp::now();
    env.set_ready(&names[0], now).await?;
    env.set_ready(&names[1], now).await?;
    env.wait_rs("web", "ready=2 available=2", |rs| {
        rs_status(rs) == (3, 3, 2, 2)
    })
    .await?;

    // Scenario 24: only minReadySeconds changes; observedGeneration catches up.
    env.replicasets()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minReadySeconds": 1}})),
        )
        .await?;
    env.wait_rs("web", "observedGeneration caught up", |rs| {
        rs.metadata.generation == Some(2) && observed(rs)
    })
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    scales_zero_to_n_to_zero, "rs-scale", zero_n_zero
}

async fn zero_n_zero(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let rs = env
        .create_rs(replicaset("web", 0, &[("app", "web")], &[("app", "web")]))
        .await?;
    let uid = uid_of(&rs);
    env.wait_rs("web", "observed with 0 replicas", |rs| {
        observed(rs) && rs_status(rs).0 == 0
    })
    .await?;
    env.scale("web", 7).await?;
    let pods = env.wait_active(&uid, 7).await?;
    env.wait_rs("web", "replicas=7", |rs| rs_status(rs).0 == 7)
        .await?;
    env.active_names_hold(&uid, &names_of(&pods), Duration::from_secs(2))
        .await?;
    env.scale("web", 0).await?;
    env.wait_active(&uid, 0).await?;
    env.wait_rs("web", "replicas=0", |rs| {
        rs_status(rs).0 == 0 && observed(rs)
    })
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    deleted_pod_is_replaced_exactly_once, "rs-replace", replace_once
}

async fn replace_once(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let rs = env
        .create_rs(replicaset("web", 3, &[("app", "web")], &[("app", "web")]))
        .await?;
    let uid = uid_of(&rs);
    let before = names_of(&env.wait_active(&uid, 3).await?);
    env.pods()
        .delete(&before[0], &DeleteParams::default())
        .await?;
    let after = env.wait_active(&uid, 3).await?;
    let after_names = names_of(&after);
    let new: Vec<_> = after_names.iter().filter(|n| !before.contains(n)).collect();
    ensure(new.len() == 1, format!("one replacement, got {new:?}"))?;
    // Never a second replacement: the total number of pods ever owned stays 3.
    env.active_names_hold(&uid, &after_names, HOLDS).await?;
    ensure(env.owned(&uid).await?.len() == 3, "no extra pods")?;
    env.wait_rs("web", "replicas back to 3", |rs| rs_status(rs).0 == 3)
        .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    failed_pod_is_replaced_not_deleted, "rs-failed", failed_replaced
}

async fn failed_replaced(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (uid, pods) = web_with_pods(env, 3, false).await?;
    let failed = pods[0].metadata.name.clone().unwrap_or_default();
    env.cluster
        .patch_pod_status(env.name(), &failed, json!({"phase": "Failed"}))
        .await?;
    let now_active = env.wait_active(&uid, 3).await?;
    ensure(
        !names_of(&now_active).contains(&failed),
        "failed pod no longer active",
    )?;
    rkcm_testkit::holds_for("failed pod still exists and is owned", HOLDS, || async {
        let p = env.pods().get_opt(&failed).await?;
        Ok(p.is_some_and(|p| {
            controller_uid(&p) == Some(uid.as_str()) && p.metadata.deletion_timestamp.is_none()
        }))
    })
    .await?;
    env.wait_rs("web", "replicas=3", |rs| rs_status(rs).0 == 3)
        .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    min_ready_seconds_delays_availability_without_events, "rs-minready", min_ready
}

async fn min_ready(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let mut body = replicaset("web", 1, &[("app", "web")], &[("app", "web")]);
    body["spec"]["minReadySeconds"] = json!(6);
    let rs = env.create_rs(body).await?;
    let pods = env.wait_active(&uid_of(&rs), 1).await?;
    let t = jiff::Timestamp::now();
    env.set_ready(&pods[0].metadata.name.clone().unwrap_or_default(), t)
        .await?;
    env.wait_rs("web", "ready=1 available=0", |rs| {
        rs_status(rs) == (1, 1, 1, 0)
    })
    .await?;
    // Still unavailable a little before minReadySeconds has passed.
    let early = Duration::from_secs(4).saturating_sub(
        Duration::try_from(jiff::Timestamp::now().duration_since(t)).unwrap_or_default(),
    );
    tokio::time::sleep(early).await;
    ensure(
        rs_status(&env.replicasets().get("web").await?).3 == 0,
        "available too early",
    )?;
    // Becomes available with no further pod change (the controller's own requeue).
    env.wait_rs("web", "available=1", |rs| rs_status(rs) == (1, 1, 1, 1))
        .await?;
    let waited = jiff::Timestamp::now().duration_since(t);
    ensure(
        waited < jiff::SignedDuration::from_secs(6 + 5),
        format!("availability came late: {waited}"),
    )?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    terminating_replicas_are_reported_and_not_replaced, "rs-terminating", terminating
}

/// `status.terminatingReplicas` of `n` terminating pods, where the server keeps the field (a
/// v1.34 server drops it, and the controller, as rkcm at that minor, does not write it).
fn reported(env: &Env, n: i32) -> Option<i32> {
    env.cluster.keeps_terminating_replicas().then_some(n)
}

async fn terminating(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (uid, _) = web_with_pods(env, 3, true).await?;
    env.scale("web", 1).await?;
    let survivors = env.wait_active(&uid, 1).await?;
    env.wait_rs("web", "replicas=1 terminating=2", |rs| {
        rs_status(rs).0 == 1
            && rs.status.as_ref().and_then(|s| s.terminating_replicas) == reported(env, 2)
    })
    .await?;
    env.active_names_hold(&uid, &names_of(&survivors), Duration::from_secs(3))
        .await?;
    ensure(
        env.owned(&uid).await?.len() == 3,
        "terminating pods still exist",
    )?;
    for p in env.owned(&uid).await? {
        if p.metadata.deletion_timestamp.is_some() {
            let name = p.metadata.name.unwrap_or_default();
            env.pods()
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await?;
        }
    }
    env.wait_rs("web", "terminating=0", |rs| {
        rs.status.as_ref().and_then(|s| s.terminating_replicas) == reported(env, 0)
    })
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    terminating_replicas_gate_off_leaves_field_absent, "rs-gateoff", gate_off
}

async fn gate_off(env: &Env) -> Result<()> {
    let cfg = rkcm_replicaset::Config {
        terminating_replicas: false,
        ..env.config()
    };
    let ctrl = start_controllers(env, cfg);
    let rs = env
        .create_rs(replicaset("web", 2, &[("app", "web")], &[("app", "web")]))
        .await?;
    env.wait_active(&uid_of(&rs), 2).await?;
    let rs = env
        .wait_rs("web", "replicas=2", |rs| {
            rs_status(rs).0 == 2 && observed(rs)
        })
        .await?;
    ensure(
        rs.status
            .as_ref()
            .and_then(|s| s.terminating_replicas)
            .is_none(),
        "terminatingReplicas absent with the gate off",
    )?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    lagging_pod_watch_never_causes_extra_pods, "rs-lag", lagging_watch
}

/// Expectations under a pod watch that lags 3 s: status writes and owner updates trigger
/// syncs while the cache still misses the controller's own creates and deletes; none of them
/// may create or delete again.
async fn lagging_watch(env: &Env) -> Result<()> {
    let lag = Duration::from_secs(3);
    let ctrl = start_with_watch_lag(env, env.config(), lag);
    let rs = env
        .create_rs(replicaset("web", 5, &[("app", "web")], &[("app", "web")]))
        .await?;
    let uid = uid_of(&rs);
    let uid = uid.as_str();
    // Keep poking the owner (each update is a sync) while the pod watch lags.
    holds_while_poking(
        env,
        ("web", uid),
        "never more than 5 pods while the watch lags",
        Duration::from_secs(8),
        |pods| pods.len() <= 5,
    )
    .await?;
    let pods = env.wait_active(uid, 5).await?;

    // A deleted pod is replaced once, even though the replacement shows up late.
    env.pods()
        .delete(&names_of(&pods)[0], &DeleteParams::default())
        .await?;
    holds_while_poking(
        env,
        ("web", uid),
        "exactly one replacement while the watch lags",
        Duration::from_secs(8),
        |pods| pods.len() <= 5,
    )
    .await?;
    let after = env.wait_active(uid, 5).await?;
    let new: Vec<_> = names_of(&after)
        .into_iter()
        .filter(|n| !names_of(&pods).contains(n))
        .collect();
    ensure(new.len() == 1, format!("one replacement, got {new:?}"))?;

    // Scale down under lag: exactly the surplus goes, never more.
    env.scale("web", 2).await?;
    holds_while_poking(
        env,
        ("web", uid),
        "never fewer than 2 pods while the watch lags",
        Duration::from_secs(8),
        |pods| pods.iter().filter(|p| is_active(p)).count() >= 2,
    )
    .await?;
    env.wait_active(uid, 2).await?;
    env.wait_rs("web", "replicas=2", |rs| rs_status(rs).0 == 2)
        .await?;
    ctrl.stop().await
}
