//! The terminated sweep: scenarios 1–6 and 23.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::builders::pod;
use rkcm_testkit::{NodeBuilder, TestNode, unique_name};
use serde_json::json;

use crate::harness::*;

async fn ready_node(env: &Env) -> Result<TestNode> {
    env.cluster
        .create_node(NodeBuilder::new(&unique_name("pgc-node")).ready(true))
        .await
}

/// Creates a pod bound to `node` and makes it `Succeeded` (or `Failed` with `exit_code`).
async fn finished_pod(env: &Env, name: &str, node: &str, exit_code: i32) -> Result<Pod> {
    env.create_pod(pod(env.name(), name).node(node).build())
        .await?;
    env.cluster.terminate_pod(env.name(), name, exit_code).await
}

rkcm_testkit::scenario! {
    threshold_trims_oldest_terminated_pods, "pgc-trim", trims_oldest
}

async fn trims_oldest(env: &Env) -> Result<()> {
    let node = ready_node(env).await?;
    let names = ["p0", "p1", "p2", "p3", "p4"];
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            next_second().await;
        }
        finished_pod(env, name, node.name(), 0).await?;
    }
    let gc = start_podgc(&env.cluster, &[env.name()], fast(3));
    env.wait_gone("p0", WITHIN).await?;
    env.wait_gone("p1", WITHIN).await?;
    for name in &names[2..] {
        env.pod_holds(name, "newest three remain", Duration::from_secs(2), exists)
            .await?;
    }
    gc.stop().await
}

rkcm_testkit::scenario! {
    evicted_pods_go_first, "pgc-evicted", evicted_first
}

async fn evicted_first(env: &Env) -> Result<()> {
    let node = ready_node(env).await?;
    finished_pod(env, "a", node.name(), 0).await?;
    next_second().await;
    finished_pod(env, "b", node.name(), 0).await?;
    next_second().await;
    env.create_pod(pod(env.name(), "c").node(node.name()).build())
        .await?;
    env.cluster
        .patch_pod_status(
            env.name(),
            "c",
            json!({"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}),
        )
        .await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(2));
    env.wait_gone("c", WITHIN).await?;
    env.pod_holds(
        "a",
        "older normal pods survive",
        Duration::from_secs(2),
        exists,
    )
    .await?;
    env.pod_holds(
        "b",
        "older normal pods survive",
        Duration::from_secs(1),
        exists,
    )
    .await?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    same_second_ties_break_by_name, "pgc-tie", tie_break
}

async fn tie_break(env: &Env) -> Result<()> {
    let node = ready_node(env).await?;
    // Creation timestamps have 1 s resolution: retry until a pair shares one. Pairs that
    // miss stay Pending and never count as terminated.
    let mut pair = None;
    for attempt in 0..10 {
        let (a, b) = (format!("pod-a-{attempt}"), format!("pod-b-{attempt}"));
        // Created b first: the name, not creation order, must decide.
        let pb = env
            .create_pod(pod(env.name(), &b).node(node.name()).build())
            .await?;
        let pa = env
            .create_pod(pod(env.name(), &a).node(node.name()).build())
            .await?;
        if pa.metadata.creation_timestamp == pb.metadata.creation_timestamp {
            pair = Some((a, b));
            break;
        }
    }
    let Some((a, b)) = pair else {
        anyhow::bail!("could not create two pods within the same second in 10 attempts");
    };
    env.cluster.terminate_pod(env.name(), &b, 0).await?;
    env.cluster.terminate_pod(env.name(), &a, 0).await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(1));
    env.wait_gone(&a, WITHIN).await?;
    env.pod_holds(
        &b,
        "the larger name survives",
        Duration::from_secs(2),
        exists,
    )
    .await?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    non_terminal_pods_never_count, "pgc-nonterminal", non_terminal
}

async fn non_terminal(env: &Env) -> Result<()> {
    let node = ready_node(env).await?;
    for name in ["r0", "r1", "r2"] {
        env.create_pod(pod(env.name(), name).node(node.name()).build())
            .await?;
        env.set_phase(name, "Running").await?;
    }
    finished_pod(env, "s", node.name(), 0).await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(1));
    for name in ["r0", "r1", "r2", "s"] {
        env.pod_holds(
            name,
            "untouched",
            if name == "r0" {
                HOLDS
            } else {
                Duration::from_millis(200)
            },
            |p| p.is_some_and(|p| !is_deleting(p)),
        )
        .await?;
    }
    gc.stop().await
}

rkcm_testkit::scenario! {
    threshold_zero_disables_only_the_terminated_sweep, "pgc-zero", threshold_zero
}

async fn threshold_zero(env: &Env) -> Result<()> {
    let node = ready_node(env).await?;
    for i in 0..50 {
        finished_pod(env, &format!("done-{i:02}"), node.name(), 0).await?;
    }
    let ghost = unique_name("pgc-ghost");
    env.create_pod(pod(env.name(), "orphan").node(&ghost).build())
        .await?;
    env.set_phase("orphan", "Running").await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(0));
    env.wait_gone("orphan", WITHIN).await?;
    let pods = env.pods();
    rkcm_testkit::holds_for("all 50 terminated pods survive", HOLDS, || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&Default::default()).await?;
            Ok(list.items.iter().filter(|p| !is_deleting(p)).count() == 50)
        }
    })
    .await?;
    gc.stop().await
}

rkcm_testkit::scenario! {
    terminated_sweep_deletes_without_writing_status, "pgc-nopatch", no_patch
}

async fn no_patch(env: &Env) -> Result<()> {
    let node = ready_node(env).await?;
    env.create_pod(
        pod(env.name(), "older")
            .node(node.name())
            .finalizer(HOLD)
            .build(),
    )
    .await?;
    let before = env.cluster.terminate_pod(env.name(), "older", 1).await?;
    next_second().await;
    finished_pod(env, "newer", node.name(), 1).await?;
    let gc = start_podgc(&env.cluster, &[env.name()], fast(1));
    let seen = env
        .wait_pod("older", "force-deleted", WITHIN, |p| {
            p.is_some_and(force_deleted)
        })
        .await?
        .ok_or_else(|| anyhow::anyhow!("held pod vanished"))?;
    ensure(
        serde_json::to_value(&seen.status)? == serde_json::to_value(&before.status)?,
        format!(
            "status changed:\nbefore {:?}\nafter  {:?}",
            before.status, seen.status
        ),
    )?;
    ensure(
        phase(&seen) == "Failed" && disruption_target(&seen).is_none(),
        "no condition, phase still Failed",
    )?;
    ensure(
        !status_managers(&seen).iter().any(|m| m == "PodGC"),
        "PodGC wrote no status",
    )?;
    env.pod_holds("newer", "untouched", Duration::from_secs(2), |p| {
        p.is_some_and(|p| !is_deleting(p))
    })
    .await?;
    gc.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn threshold_is_global_across_namespaces() -> Result<()> {
    let a = Env::new("pgc-global-a").await?;
    let b = Env::new("pgc-global-b").await?;
    let result = global_threshold(&a, &b).await;
    let result_b = b.finish(Ok(())).await;
    a.finish(result).await?;
    result_b
}

async fn global_threshold(a: &Env, b: &Env) -> Result<()> {
    let node = ready_node(a).await?;
    finished_pod(a, "a0", node.name(), 0).await?;
    finished_pod(a, "a1", node.name(), 1).await?;
    next_second().await;
    finished_pod(b, "b0", node.name(), 0).await?;
    finished_pod(b, "b1", node.name(), 1).await?;
    let gc = start_podgc(&a.cluster, &[a.name(), b.name()], fast(2));
    a.wait_gone("a0", WITHIN).await?;
    a.wait_gone("a1", WITHIN).await?;
    b.pod_holds(
        "b0",
        "newer namespace survives",
        Duration::from_secs(2),
        exists,
    )
    .await?;
    b.pod_holds(
        "b1",
        "newer namespace survives",
        Duration::from_millis(200),
        exists,
    )
    .await?;
    gc.stop().await
}
