//! At most one pod per StatefulSet identity with the rkcm binary, under crashes and a lagging
//! cache: pod `web-1` is held terminating by a finalizer while rkcm is SIGKILLed and
//! restarted twice and its pod watch is delayed (the scoping proxy holds every pod event
//! back for [`LAG`]).
//!
//! Checked on a watch of the namespace's pods from before the deletion (the testkit's
//! `History`): at no instant do two pods named `web-1` with different UIDs exist, and the
//! replacement appears only after the old pod's finalizer was removed and the object was
//! gone. Checked on rkcm's own writes through its proxy: while `web-1` is terminating it
//! creates no pod (an attempt would be a replacement for a name still taken: the API server
//! refuses it, but a controller that tries has already decided to break the identity) and
//! never deletes `web-1` again (no forced deletion). Each restarted process proves it
//! synced the set (it reports a new generation) before the next step.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use rkcm_testkit::harness::{Env, HOLD, History, Manager, ManagerKind, Seen};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use crate::rollout::wait_default_service_account;
use crate::statefulset_takeover::{
    IMAGE_V1, STS_CONTROLLERS, STS_WITHIN, sts_manifest, wait_sts, wait_sts_settled,
};

/// How late rkcm sees pod events.
const LAG: Duration = Duration::from_secs(2);
/// How long the old pod is watched to stay itself after each restart.
const HOLDS: Duration = Duration::from_secs(2);

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

/// Bumps the set's generation (a `minReadySeconds` edit) and waits until rkcm reports it:
/// the running process has synced the set with `web-1` terminating.
async fn prove_synced(env: &Env, what: &str) -> anyhow::Result<()> {
    let s: StatefulSet = env.get("web").await?;
    let mrs = s.spec.min_ready_seconds.unwrap_or(0);
    env.merge::<StatefulSet>("web", json!({"spec": {"minReadySeconds": 1 - mrs.min(1)}}))
        .await?;
    wait_sts(env, "web", what, |_, _| true).await.map(drop)
}

/// rkcm's pod writes through its proxy from index `from` of its journal on.
fn pod_writes(m: &Manager, from: usize) -> Vec<String> {
    m.writes()
        .into_iter()
        .skip(from)
        .filter(|w| w.path.contains("/pods"))
        .map(|w| format!("{} {} -> {}", w.method, w.path, w.status))
        .collect()
}

async fn scenario(env: &Env, rkcm: &mut Manager) -> anyhow::Result<()> {
    env.create::<StatefulSet>(sts_manifest("web", 3, IMAGE_V1, json!({})))
        .await?;
    wait_sts_settled(env, "web", 3).await?;
    env.merge::<Pod>("web-1", json!({"metadata": {"finalizers": [HOLD]}}))
        .await?;
    let old: Pod = env.get("web-1").await?;
    let hist = History::start(env.api::<Pod>()).await?;
    rkcm.proxy().delay_watches("pods", LAG);
    let from = rkcm.writes().len();

    env.api::<Pod>()
        .delete("web-1", &DeleteParams::default())
        .await?;
    wait_for("web-1 terminating", STS_WITHIN, || async {
        let p: Pod = env.get("web-1").await?;
        Ok(p.metadata.deletion_timestamp.is_some().then_some(()))
    })
    .await?;
    prove_synced(env, "rkcm synced with web-1 terminating").await?;
    for round in 1..=2 {
        rkcm.kill_and_restart().await?;
        prove_synced(env, &format!("rkcm synced after restart {round}")).await?;
        holds_for(
            &format!("web-1 stays the old, terminating pod after restart {round}"),
            HOLDS,
            || async {
                let p: Option<Pod> = env.get_opt("web-1").await?;
                Ok(p.is_some_and(|p| uid(&p) == uid(&old)))
            },
        )
        .await?;
        rkcm.check_running()?;
    }
    let while_held = pod_writes(rkcm, from);
    ensure!(
        while_held.is_empty(),
        "rkcm wrote pods while web-1 was terminating: {while_held:?}"
    );

    // Everything the watch saw before the release happened before it.
    let before_release = hist.seen()?.len();
    env.release::<Pod>("web-1").await?;
    let new = wait_for("a new web-1, running and ready", STS_WITHIN, || async {
        let p: Option<Pod> = env.get_opt("web-1").await?;
        Ok(p.filter(|p| uid(p) != uid(&old) && rkcm_testkit::harness::is_ready(p)))
    })
    .await?;
    wait_sts_settled(env, "web", 3).await?;

    hist.assert_one_per_name()?;
    let seen = hist.seen()?;
    let is_old = |s: &Seen<Pod>| uid(s.object()) == uid(&old);
    let gone = seen
        .iter()
        .position(|s| is_old(s) && s.is_deleted())
        .context("the watch never saw the old web-1 deleted")?;
    let born = seen
        .iter()
        .position(|s| uid(s.object()) == uid(&new))
        .context("the watch never saw the new web-1")?;
    ensure!(
        before_release <= gone && gone < born,
        "order of events: {before_release} seen before the release, old web-1 gone at \
         {gone}, new web-1 at {born}"
    );
    let writes = pod_writes(rkcm, from);
    ensure!(
        writes.len() == 1 && writes[0].starts_with("POST ") && writes[0].ends_with("-> 201"),
        "rkcm's pod writes from the deletion on: {writes:?}, want one create"
    );
    rkcm.check_running()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn statefulset_identity_survives_crashes_and_a_lagging_cache() -> anyhow::Result<()> {
    let env = Env::new("sts-identity").await?;
    let result = async {
        wait_default_service_account(&env.ns).await?;
        let mut rkcm =
            Manager::start(ManagerKind::Rkcm, &env.cluster, env.name(), STS_CONTROLLERS).await?;
        let r = scenario(&env, &mut rkcm).await;
        let r = Manager::with_logs(r, &mut [&mut rkcm]);
        r?;
        rkcm.stop_scoped().await
    }
    .await;
    env.finish(result).await
}
