//! Adoption and release: scenarios 13–17, 23 and 25.

use std::time::Duration;

use anyhow::Result;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    adopts_orphans_and_creates_only_the_rest, "rs-adopt", adopt
}

async fn adopt(env: &Env) -> Result<()> {
    env.create_pod(bare_pod("o1", &[("app", "web")])).await?;
    env.create_pod(bare_pod("o2", &[("app", "web")])).await?;
    let ctrl = env.start();
    let rs = env
        .create_rs(replicaset(
            "web",
            3,
            &[("app", "web")],
            &[("app", "web"), ("tier", "fe")],
        ))
        .await?;
    let uid = uid_of(&rs);
    let pods = env.wait_active(&uid, 3).await?;
    let names = names_of(&pods);
    ensure(
        names.contains(&"o1".to_owned()) && names.contains(&"o2".to_owned()),
        format!("orphans adopted: {names:?}"),
    )?;
    for p in &pods {
        let r = p.metadata.owner_references.clone().unwrap_or_default();
        ensure(
            r.len() == 1 && r[0].block_owner_deletion == Some(true),
            format!("{r:?}"),
        )?;
    }
    env.active_names_hold(&uid, &names, HOLDS).await?;
    // Scenario 25: the adopted orphans lack tier=fe.
    env.wait_rs("web", "replicas=3 fullyLabeled=1", |rs| {
        let (r, f, _, _) = rs_status(rs);
        r == 3 && f == 1
    })
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    adopts_all_then_trims_surplus, "rs-trim", adopt_all
}

async fn adopt_all(env: &Env) -> Result<()> {
    for i in 0..5 {
        env.create_pod(bare_pod(&format!("o{i}"), &[("app", "web")]))
            .await?;
    }
    let ctrl = env.start();
    let rs = env
        .create_rs(replicaset("web", 2, &[("app", "web")], &[("app", "web")]))
        .await?;
    let uid = uid_of(&rs);
    // Adoption happens pod by pod: wait for the end state (2 pods left in all), not for a
    // moment with 2 adopted.
    let left = rkcm_testkit::wait_for("2 pods left, both owned", WITHIN, || async {
        let all = env.pods().list(&Default::default()).await?.items;
        let active = env.active(&uid).await?;
        Ok((all.len() == 2 && active.len() == 2).then_some(active))
    })
    .await?;
    ensure(
        names_of(&left).iter().all(|n| n.starts_with('o')),
        "survivors are adopted orphans",
    )?;
    env.active_names_hold(&uid, &names_of(&left), HOLDS).await?;
    let all = env.pods().list(&Default::default()).await?.items;
    ensure(
        all.len() == 2,
        format!("3 surplus pods deleted, {} remain", all.len()),
    )?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    foreign_terminal_and_terminating_pods_are_ignored, "rs-foreign", foreign
}

async fn foreign(env: &Env) -> Result<()> {
    let someone = env.config_map("someone").await?;
    let mut foreign = bare_pod("foreign", &[("app", "web")]);
    foreign["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "someone", "uid": someone, "controller": true,
    }]);
    env.create_pod(foreign).await?;
    env.create_pod(bare_pod("done", &[("app", "web")])).await?;
    env.cluster
        .patch_pod_status(env.name(), "done", json!({"phase": "Succeeded"}))
        .await?;
    let mut held = bare_pod("leaving", &[("app", "web")]);
    held["metadata"]["finalizers"] = json!([HOLD]);
    env.create_pod(held).await?;
    env.pods()
        .delete("leaving", &DeleteParams::default())
        .await?;
    let ctrl = env.start();
    let (uid, pods) = web_with_pods(env, 3, false).await?;
    ensure(
        names_of(&pods).iter().all(|n| n.starts_with("web-")),
        "RS created its own 3",
    )?;
    rkcm_testkit::holds_for("ignored pods keep their owners", HOLDS, || async {
        let mut ok = true;
        for name in ["foreign", "done", "leaving"] {
            let p = env.pods().get(name).await?;
            ok &= controller_uid(&p) != Some(uid.as_str());
        }
        let foreign = env.pods().get("foreign").await?;
        Ok(ok && foreign.metadata.deletion_timestamp.is_none())
    })
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    relabelled_pod_is_released_and_replaced, "rs-release", release
}

async fn release(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (uid, pods) = web_with_pods(env, 2, false).await?;
    let name = pods[0].metadata.name.clone().unwrap_or_default();
    // A second, non-controller ownerRef must survive the release.
    let extra = env.config_map("extra").await?;
    let mut refs = serde_json::to_value(
        pods[0]
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default(),
    )?;
    if let Some(list) = refs.as_array_mut() {
        list.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "extra", "uid": extra}));
    }
    env.pods()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": refs}})),
        )
        .await?;
    env.pods()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
        )
        .await?;
    rkcm_testkit::wait_for("relabelled pod released", WITHIN, || async {
        let p = env.pods().get(&name).await?;
        let refs = p.metadata.owner_references.clone().unwrap_or_default();
        Ok(
            (controller_uid(&p).is_none() && refs.len() == 1 && refs[0].name == "extra")
                .then_some(()),
        )
    })
    .await?;
    let now = env.wait_active(&uid, 2).await?;
    ensure(!names_of(&now).contains(&name), "a replacement was created")?;
    ensure(
        env.pods().get_opt(&name).await?.is_some(),
        "released pod survives",
    )?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    deleting_replicaset_creates_and_adopts_nothing, "rs-deleting", deleting
}

async fn deleting(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let mut body = replicaset("web", 2, &[("app", "web")], &[("app", "web")]);
    // Keeps the RS in "being deleted" without depending on the garbage collector's pace.
    body["metadata"]["finalizers"] = json!([HOLD]);
    let rs = env.create_rs(body).await?;
    let uid = uid_of(&rs);
    let pods = env.wait_active(&uid, 2).await?;
    env.wait_rs("web", "replicas=2", |rs| rs_status(rs).0 == 2)
        .await?;
    // Background: while the owner still exists (held by our finalizer) the garbage collector
    // leaves its pods alone.
    env.replicasets()
        .delete("web", &DeleteParams::background())
        .await?;
    env.wait_rs("web", "deletionTimestamp set", |rs| {
        rs.metadata.deletion_timestamp.is_some()
    })
    .await?;
    let name = pods[0].metadata.name.clone().unwrap_or_default();
    env.pods().delete(&name, &DeleteParams::default()).await?;
    env.create_pod(bare_pod("orphan", &[("app", "web")]))
        .await?;
    env.wait_rs("web", "replicas dropped to 1", |rs| rs_status(rs).0 == 1)
        .await?;
    rkcm_testkit::holds_for(
        "no replacement, no adoption",
        Duration::from_secs(6),
        || async {
            let active = env.active(&uid).await?;
            let orphan = env.pods().get("orphan").await?;
            Ok(active.len() <= 1 && controller_uid(&orphan).is_none())
        },
    )
    .await?;
    ctrl.stop().await
}
