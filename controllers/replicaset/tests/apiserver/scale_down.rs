//! Victim choice on scale-down: scenarios 6–12 (10 with and without a shared controller owner)
//! and 30.

use std::time::Duration;

use anyhow::Result;
use kube::api::{Patch, PatchParams};
use rkcm_testkit::{NodeBuilder, TestNode, unique_name, wait_for};
use serde_json::json;

use crate::harness::*;

/// Starts the controllers, creates RS `name` with `n` pods and returns (uid, pod names).
async fn rs_with_pods(env: &Env, name: &str, n: i32) -> Result<(String, Vec<String>)> {
    let rs = env
        .create_rs(replicaset(name, n, &[("app", name)], &[("app", name)]))
        .await?;
    let uid = uid_of(&rs);
    let pods = env.wait_active(&uid, usize::try_from(n)?).await?;
    Ok((uid, names_of(&pods)))
}

async fn annotate(env: &Env, pod: &str, key: &str, value: &str) -> Result<()> {
    env.pods()
        .patch(
            pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
        )
        .await?;
    Ok(())
}

const COST: &str = "controller.kubernetes.io/pod-deletion-cost";

fn ago(secs: i64) -> jiff::Timestamp {
    jiff::Timestamp::now() - jiff::SignedDuration::from_secs(secs)
}

/// Scales `name` to `to` and checks that exactly `victims` go and the rest stay.
async fn scale_and_expect(
    env: &Env,
    uid: &str,
    name: &str,
    to: i32,
    all: &[String],
    victims: &[&str],
) -> Result<()> {
    env.scale(name, to).await?;
    let left = env.wait_active(uid, usize::try_from(to)?).await?;
    let left = names_of(&left);
    for v in victims {
        ensure(
            !left.contains(&(*v).to_owned()),
            format!("{v} should have been deleted; left {left:?}"),
        )?;
    }
    let expected: Vec<String> = all
        .iter()
        .filter(|n| !victims.contains(&n.as_str()))
        .cloned()
        .collect();
    env.active_names_hold(uid, &expected, Duration::from_secs(2))
        .await
}

rkcm_testkit::scenario! {
    scale_down_prefers_not_ready, "rs-notready", not_ready_first
}

async fn not_ready_first(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (uid, names) = rs_with_pods(env, "web", 3).await?;
    env.set_ready(&names[1], ago(60)).await?;
    env.wait_rs("web", "ready=1", |rs| rs_status(rs).2 == 1)
        .await?;
    let victims = [names[0].as_str(), names[2].as_str()];
    scale_and_expect(env, &uid, "web", 1, &names, &victims).await?;
    wait_for("2 SuccessfulDelete events", WITHIN, || async {
        let n = env
            .events_for("web")
            .await?
            .iter()
            .filter(|e| e.reason.as_deref() == Some("SuccessfulDelete"))
            .count();
        Ok((n == 2).then_some(()))
    })
    .await?;
    ctrl.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn scale_down_prefers_unscheduled_then_pending() -> Result<()> {
    let env = Env::new("rs-unsched").await?;
    let node = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("rs-node")).ready(true))
        .await?;
    let result = unscheduled_first(&env, &node).await;
    env.finish(result).await
}

async fn unscheduled_first(env: &Env, node: &TestNode) -> Result<()> {
    let ctrl = env.start();
    let (uid, names) = rs_with_pods(env, "web", 3).await?;
    let (a, b, c) = (&names[0], &names[1], &names[2]);
    env.bind(a, node.name()).await?;
    env.set_ready(a, ago(60)).await?;
    env.bind(b, node.name()).await?;
    env.cluster
        .patch_pod_status(env.name(), b, json!({"phase": "Pending"}))
        .await?;
    env.wait_rs("web", "ready=1", |rs| rs_status(rs).2 == 1)
        .await?;
    env.scale("web", 2).await?;
    // C is unbound: its graceful delete removes it at once.
    wait_for("unscheduled pod gone", WITHIN, || async {
        Ok(env.pods().get_opt(c).await?.is_none().then_some(()))
    })
    .await?;
    env.active_names_hold(&uid, &[a.clone(), b.clone()], Duration::from_secs(2))
        .await?;
    env.scale("web", 1).await?;
    // B is bound: it lingers terminating (no kubelet).
    wait_for("pending pod terminating", WITHIN, || async {
        let p = env.pods().get_opt(b).await?;
        Ok(p.is_some_and(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(()))
    })
    .await?;
    env.active_names_hold(&uid, std::slice::from_ref(a), Duration::from_secs(2))
        .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    scale_down_follows_pod_deletion_cost, "rs-cost", cost_order
}

async fn cost_order(env: &Env) -> Result<()> {
    let (uid, names) = {
        // Annotate before the controller runs so that nothing races the annotations.
        let ctrl = env.start();
        let r = rs_with_pods(env, "web", 3).await?;
        ctrl.stop().await?;
        r
    };
    annotate(env, &names[0], COST, "100").await?;
    annotate(env, &names[1], COST, "-50").await?;
    let ctrl = env.start();
    scale_and_expect(env, &uid, "web", 2, &names, &[&names[1]]).await?;
    let rest = [names[0].clone(), names[2].clone()];
    scale_and_expect(env, &uid, "web", 1, &rest, &[&names[2]]).await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    deletion_cost_does_not_override_readiness, "rs-cost-ready", cost_vs_ready
}

async fn cost_vs_ready(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (uid, names) = rs_with_pods(env, "web", 2).await?;
    annotate(env, &names[0], COST, "-1000").await?;
    annotate(env, &names[1], COST, "1000").await?;
    env.set_ready(&names[0], ago(60)).await?;
    env.wait_rs("web", "ready=1", |rs| rs_status(rs).2 == 1)
        .await?;
    scale_and_expect(env, &uid, "web", 1, &names, &[&names[1]]).await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    scale_down_prefers_recently_ready_and_reports_age_ratio, "rs-recent", recently_ready
}

fn age_ratio_count() -> u64 {
    rkcm_runtime::metrics::render()
        .lines()
        .find_map(|l| l.strip_prefix("replicaset_controller_sorting_deletion_age_ratio_count "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn recently_ready(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (uid, names) = rs_with_pods(env, "web", 4).await?;
    // 10 s vs 1 h ago: the more recently ready goes first.
    env.set_ready(&names[0], ago(10)).await?;
    env.set_ready(&names[1], ago(3600)).await?;
    // 80 s vs 95 s ago share a log2 bucket (2^36 ns ≈ 69 s .. 137 s): the smaller UID goes first.
    env.set_ready(&names[2], ago(80)).await?;
    env.set_ready(&names[3], ago(95)).await?;
    env.wait_rs("web", "ready=4", |rs| rs_status(rs).2 == 4)
        .await?;
    let before = age_ratio_count();
    scale_and_expect(env, &uid, "web", 3, &names, &[&names[0]]).await?;
    ensure(
        age_ratio_count() > before,
        "age-ratio histogram observed the ready victim",
    )?;
    let pods = env.active(&uid).await?;
    let uid_of_pod = |n: &str| {
        pods.iter()
            .find(|p| p.metadata.name.as_deref() == Some(n))
            .map(uid_of)
            .unwrap_or_default()
    };
    let (u2, u3) = (uid_of_pod(&names[2]), uid_of_pod(&names[3]));
    // Now 1 h vs ~100 s vs ~120 s: the two same-bucket pods go before the old one, the
    // smaller UID first.
    let first = if u2 < u3 { &names[2] } else { &names[3] };
    let rest: Vec<String> = names[1..].to_vec();
    scale_and_expect(env, &uid, "web", 2, &rest, &[first]).await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    scale_down_prefers_restarting_pods, "rs-restarts", restarts
}

async fn restarts(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (uid, names) = rs_with_pods(env, "web", 2).await?;
    let since = ago(600);
    env.set_ready(&names[0], since).await?;
    env.set_ready(&names[1], since).await?;
    env.cluster
        .patch_pod_status(
            env.name(),
            &names[1],
            json!({"containerStatuses": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": true, "restartCount": 5, "state": {"running": {"startedAt": since.to_string()}}}]}),
        )
        .await?;
    env.wait_rs("web", "ready=2", |rs| rs_status(rs).2 == 2)
        .await?;
    scale_and_expect(env, &uid, "web", 1, &names, &[&names[1]]).await?;
    ctrl.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn scale_down_prefers_doubled_up_pods_of_related_replicasets() -> Result<()> {
    let env = Env::new("rs-doubled").await?;
    let n1 = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("rs-node")).ready(true))
        .await?;
    let n2 = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("rs-node")).ready(true))
        .await?;
    let result = doubled_up(&env, &n1, &n2, true).await;
    env.finish(result).await
}

/// Scenario 10, second half: ReplicaSets without a controller owner have no related pods, so
/// every rank is 0 and the choice falls to the later criteria (here the UID tie-break).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn scale_down_without_controller_owner_ignores_node_ranks() -> Result<()> {
    let env = Env::new("rs-unranked").await?;
    let n1 = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("rs-node")).ready(true))
        .await?;
    let n2 = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("rs-node")).ready(true))
        .await?;
    let result = doubled_up(&env, &n1, &n2, false).await;
    env.finish(result).await
}

/// Two ReplicaSets `a` and `b` (sharing a controller owner when `shared_owner`), `a` with a pod
/// on n1 and one on n2, `b` with both pods on n1; `a` scaled to 1. With the shared owner the
/// `a` pod on the crowded n1 goes (rank 3 vs 1); without one, ranks are all 0 and the `a` pod
/// with the smaller UID goes, which the test puts on n2.
async fn doubled_up(env: &Env, n1: &TestNode, n2: &TestNode, shared_owner: bool) -> Result<()> {
    let ctrl = env.start();
    let mut a = replicaset("a", 2, &[("app", "a")], &[("app", "a")]);
    let mut b = replicaset("b", 2, &[("app", "b")], &[("app", "b")]);
    if shared_owner {
        let cm = env.config_map("owner").await?;
        let owner_ref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": cm, "controller": true}]);
        a["metadata"]["ownerReferences"] = owner_ref.clone();
        b["metadata"]["ownerReferences"] = owner_ref;
    }
    let a = env.create_rs(a).await?;
    let b = env.create_rs(b).await?;
    let mut a_pods = env.wait_active(&uid_of(&a), 2).await?;
    // Without node ranks the UID tie-break (same ready-time bucket) would pick the smaller
    // UID; put the larger one on the crowded node so only the rank can choose it.
    a_pods.sort_by_key(|p| std::cmp::Reverse(uid_of(p)));
    let a_pods = names_of(&a_pods);
    let b_pods = names_of(&env.wait_active(&uid_of(&b), 2).await?);
    // a: one pod on n1, one on n2; b: both on n1. Ready times in one log2 bucket.
    for (pod, node, since) in [
        (&a_pods[0], n1, ago(600)),
        (&a_pods[1], n2, ago(610)),
        (&b_pods[0], n1, ago(600)),
        (&b_pods[1], n1, ago(600)),
    ] {
        env.bind(pod, node.name()).await?;
        env.set_ready(pod, since).await?;
    }
    env.wait_rs("a", "ready=2", |rs| rs_status(rs).2 == 2)
        .await?;
    env.wait_rs("b", "ready=2", |rs| rs_status(rs).2 == 2)
        .await?;
    env.scale("a", 1).await?;
    let (victim, survivor) = if shared_owner {
        // The a pod on n1 shares its node with 2 pods of b (rank 3 vs 1): it goes.
        (&a_pods[0], &a_pods[1])
    } else {
        // No ranks: the smaller UID (on n2) goes.
        (&a_pods[1], &a_pods[0])
    };
    env.wait_deleted(victim).await?;
    env.active_names_hold(
        &uid_of(&a),
        std::slice::from_ref(survivor),
        Duration::from_secs(2),
    )
    .await?;
    ctrl.stop().await
}
