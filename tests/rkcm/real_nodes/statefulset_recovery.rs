//! The StatefulSet stuck rollout (kubernetes/kubernetes#67250) on real kubelets, and rkcm's
//! opt-in recovery (README, "Opt-in remedies").
//!
//! - A set rolled to a container that really crashes (`sh -c "exit 1"`, CrashLoopBackOff)
//!   stops at its highest pod; rolled back, it stays stuck on that pod unless opted in
//!   (annotation `rkcm.io/statefulset-recover-stuck-rollout: "true"`), when rkcm deletes it at
//!   once (rule `AbandonedRevision`) and it comes back Ready at the old revision. The lower pod
//!   is never touched.
//! - A set whose readiness probe really fails from the start (`exec: false`), fixed forward:
//!   the pod of the current revision is replaced after `--rkcm-statefulset-recover-stuck-after`
//!   (rule `ReadinessFailing`).
//!
//! The opted-in scenarios are rkcm's alone; under `RKCM_REAL_NODES_MANAGER=upstream` they
//! are skipped, and the not-opted-in one shows upstream's behaviour with either manager.

use std::time::Duration;

use anyhow::ensure;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use rkcm_testkit::harness::{ManagerKind, is_ready};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::{Value, json};

use super::{BUSYBOX, START, Tier, real_template, shell, sleeper, subject, wait_running};

const CONTROLLERS: &str = "statefulset-controller";
const ANNOTATION: &str = "rkcm.io/statefulset-recover-stuck-rollout";

fn template(container: Value) -> Value {
    real_template(json!({"app": "db"}), json!([container]), json!({}))
}

/// A container that exits 1 at once, with a readiness probe (as a real workload has): it
/// never passes as Ready between crashes (without a probe a container counts as Ready the
/// moment it starts, and the rollout could go on past it).
fn crashing() -> Value {
    let mut c = shell("main", BUSYBOX, "exit 1");
    c["readinessProbe"] = json!({"exec": {"command": ["true"]}, "periodSeconds": 1,
        "failureThreshold": 1, "successThreshold": 1});
    c
}

/// A sleeper whose readiness probe runs `probe` (`true` or `false`).
fn probed(probe: &str) -> Value {
    let mut c = sleeper(BUSYBOX);
    c["readinessProbe"] = json!({"exec": {"command": [probe]}, "periodSeconds": 1,
        "failureThreshold": 1, "successThreshold": 1});
    c
}

fn statefulset(replicas: i32, opted_in: bool, container: Value) -> Value {
    let annotations = if opted_in {
        json!({ANNOTATION: "true"})
    } else {
        json!({})
    };
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate"},
            "template": template(container),
        },
    })
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

fn revision(p: &Pod) -> String {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("controller-revision-hash"))
        .cloned()
        .unwrap_or_default()
}

fn restarts(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum())
}

async fn set_template(t: &Tier<impl Sized>, container: Value) -> anyhow::Result<()> {
    t.env
        .merge::<StatefulSet>("db", json!({"spec": {"template": template(container)}}))
        .await?;
    Ok(())
}

/// The `RecoveredStuckPod` events of the namespace.
async fn recovery_events(t: &Tier<impl Sized>) -> anyhow::Result<Vec<String>> {
    let events: Vec<Event> = t.env.list().await?;
    Ok(events
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RecoveredStuckPod"))
        .map(|e| e.message.unwrap_or_default())
        .collect())
}

/// Two Ready pods at revision A, then a rollout to a crashing container: `db-1` is replaced
/// and really crash-loops. Returns A, `db-0`'s UID and the crashing `db-1`'s UID.
async fn roll_to_crash(
    t: &Tier<impl Sized>,
    opted_in: bool,
) -> anyhow::Result<(String, String, String)> {
    let env = &t.env;
    env.create::<StatefulSet>(statefulset(2, opted_in, sleeper(BUSYBOX)))
        .await?;
    let (db0, _, _) = wait_running(env, &t.nodes, "db-0", true).await?;
    let (db1, _, _) = wait_running(env, &t.nodes, "db-1", true).await?;
    let good = revision(&db1);
    set_template(t, crashing()).await?;
    let broken = wait_for("db-1 replaced by a crash-looping pod", START, || async {
        let p: Option<Pod> = env.get_opt("db-1").await?;
        Ok(p.filter(|p| uid(p) != uid(&db1) && restarts(p) >= 1 && !is_ready(p)))
    })
    .await?;
    ensure!(
        revision(&broken) != good,
        "the crashing db-1 is of the old revision"
    );
    // Forward stuck: the crashing pod is of the update revision, which recovery never
    // touches (recreating it would not help).
    holds_for(
        "the crash-looping db-1 of the update revision stays",
        Duration::from_secs(10),
        || async {
            let p: Option<Pod> = env.get_opt("db-1").await?;
            Ok(p.is_some_and(|p| {
                uid(&p) == uid(&broken) && p.metadata.deletion_timestamp.is_none()
            }))
        },
    )
    .await?;
    Ok((good, uid(&db0), uid(&broken)))
}

async fn rollback_opted_in(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    let (good, db0, broken) = roll_to_crash(t, true).await?;
    set_template(t, sleeper(BUSYBOX)).await?;
    let (db1, _, _) = wait_running(env, &t.nodes, "db-1", true).await?;
    ensure!(uid(&db1) != broken, "db-1 is still the crashing pod");
    ensure!(
        revision(&db1) == good,
        "db-1 came back at {}, not the rolled-back revision {good}",
        revision(&db1)
    );
    let db0_now: Pod = env.get("db-0").await?;
    ensure!(
        uid(&db0_now) == db0,
        "db-0 was replaced: recovery touched a Ready pod"
    );
    let events = wait_for(
        "a RecoveredStuckPod event",
        Duration::from_secs(30),
        || async {
            let events = recovery_events(t).await?;
            Ok((!events.is_empty()).then_some(events))
        },
    )
    .await?;
    ensure!(
        events.len() == 1
            && events[0].contains("db-1")
            && events[0].contains("rule AbandonedRevision"),
        "recovery events: {events:?}"
    );
    Ok(())
}

async fn rollback_not_opted_in(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    let (_, db0, broken) = roll_to_crash(t, false).await?;
    set_template(t, sleeper(BUSYBOX)).await?;
    // Upstream's trap: the crashing pod, now of an old revision, blocks the rollback.
    holds_for(
        "the rolled-back set stays stuck on the crashing db-1",
        Duration::from_secs(30),
        || async {
            let p: Option<Pod> = env.get_opt("db-1").await?;
            let q: Option<Pod> = env.get_opt("db-0").await?;
            Ok(
                p.is_some_and(|p| uid(&p) == broken && p.metadata.deletion_timestamp.is_none())
                    && q.is_some_and(|q| uid(&q) == db0),
            )
        },
    )
    .await?;
    ensure!(
        recovery_events(t).await?.is_empty(),
        "a recovery event without the opt-in"
    );
    Ok(())
}

async fn readiness_fixed_forward(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    env.create::<StatefulSet>(statefulset(1, true, probed("false")))
        .await?;
    let (stuck, _, _) = wait_running(env, &t.nodes, "db-0", false).await?;
    let old = revision(&stuck);
    set_template(t, probed("true")).await?;
    let (db0, _, _) = wait_running(env, &t.nodes, "db-0", true).await?;
    ensure!(
        uid(&db0) != uid(&stuck),
        "db-0 became Ready without being replaced"
    );
    ensure!(
        revision(&db0) != old,
        "db-0 came back at the old revision {old}"
    );
    let events = recovery_events(t).await?;
    ensure!(
        events.iter().any(|e| e.contains("rule ReadinessFailing")),
        "recovery events: {events:?}"
    );
    Ok(())
}

fn upstream() -> bool {
    subject() == ManagerKind::Upstream
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs real nodes: make test"]
async fn real_nodes_statefulset_rolled_back_from_a_crash_recovers_when_opted_in()
-> anyhow::Result<()> {
    if upstream() {
        return Ok(());
    }
    let t = Tier::shared("rn-sts-recover", 1, CONTROLLERS, &[]).await?;
    let result = rollback_opted_in(&t).await;
    t.finish(result).await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs real nodes: make test"]
async fn real_nodes_statefulset_rolled_back_from_a_crash_stays_stuck_without_the_opt_in()
-> anyhow::Result<()> {
    let t = Tier::shared("rn-sts-stuck", 1, CONTROLLERS, &[]).await?;
    let result = rollback_not_opted_in(&t).await;
    t.finish(result).await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs real nodes: make test"]
async fn real_nodes_statefulset_failing_readiness_fixed_forward_recovers_after_the_stated_time()
-> anyhow::Result<()> {
    if upstream() {
        return Ok(());
    }
    let flags = ["--rkcm-statefulset-recover-stuck-after=5s"];
    let t = Tier::shared("rn-sts-ready", 1, CONTROLLERS, &flags).await?;
    let result = readiness_fixed_forward(&t).await;
    t.finish(result).await
}
