//! Graceful termination on a real kubelet: a `preStop` hook and a TERM trap run before the
//! container stops, `terminationGracePeriodSeconds` bounds a container that ignores TERM,
//! the ReplicaSet and the Deployment count the pod in `status.terminatingReplicas` for as
//! long as it really runs, and a Job with `podReplacementPolicy: Failed` creates the
//! replacement only after the container has stopped (with `TerminatingOrFailed`, at once).

use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use rkcm_testkit::harness::{Env, running_container};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use super::{BUSYBOX, START, Tier, of_job, real_template, shell, wait_running};

/// A container that takes `term_secs` to stop after TERM (it keeps running meanwhile),
/// after a preStop hook of `prestop_secs`.
fn slow_stopper(prestop_secs: u32, term_secs: u32) -> serde_json::Value {
    let mut c = shell(
        "main",
        BUSYBOX,
        &format!("trap 'sleep {term_secs}; exit 0' TERM; while :; do sleep 1; done"),
    );
    c["lifecycle"] = json!({"preStop": {"exec": {"command": ["sleep", prestop_secs.to_string()]}}});
    c
}

async fn live_pods(env: &Env) -> anyhow::Result<Vec<Pod>> {
    env.list::<Pod>().await
}

/// Waits until pod `name` is gone, checking on the way that while it exists its container
/// still runs or has just stopped; returns how long that took from `since`.
async fn wait_pod_gone(
    env: &Env,
    name: &str,
    since: Instant,
    within: Duration,
) -> anyhow::Result<Duration> {
    wait_for(&format!("pod {name} gone"), within, || async {
        Ok(env
            .get_opt::<Pod>(name)
            .await?
            .is_none()
            .then(|| since.elapsed()))
    })
    .await
}

async fn replicaset_scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    env.create::<ReplicaSet>(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "slow"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "slow"}},
            "template": real_template(json!({"app": "slow"}), json!([slow_stopper(3, 3)]), json!({})),
        },
    }))
    .await?;
    let pod = wait_for("the ReplicaSet's pod", START, || async {
        Ok(live_pods(env).await?.into_iter().next())
    })
    .await?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let (_, node, id) = wait_running(env, &t.nodes, &name, false).await?;

    let started = Instant::now();
    env.set_replicas::<ReplicaSet>("slow", 0).await?;
    wait_for(
        "the ReplicaSet counts its pod terminating",
        START,
        || async {
            let rs: ReplicaSet = env.get("slow").await?;
            let s = rs.status.unwrap_or_default();
            Ok((s.terminating_replicas == Some(1) && s.replicas == 0).then_some(()))
        },
    )
    .await?;
    ensure!(
        t.nodes.container_running(&node, &id).await?,
        "the container stopped before the preStop hook and the TERM trap had run (after {:?})",
        started.elapsed()
    );
    // The hook (3 s) and the trap (3 s) run before the pod goes; the 30 s grace period
    // is far away.
    let took = wait_pod_gone(env, &name, started, Duration::from_secs(40)).await?;
    ensure!(
        took >= Duration::from_secs(6) && took < Duration::from_secs(25),
        "the pod was gone {took:?} after the scale-down; preStop 3 s plus TERM trap 3 s want 6 s to 25 s"
    );
    ensure!(
        !t.nodes.container_running(&node, &id).await?,
        "the pod is gone but its container {id} still runs on {node}"
    );
    wait_for("terminatingReplicas back to 0", START, || async {
        let rs: ReplicaSet = env.get("slow").await?;
        let s = rs.status.unwrap_or_default();
        Ok((s.terminating_replicas == Some(0)).then_some(()))
    })
    .await?;
    ensure!(
        live_pods(env).await?.is_empty(),
        "a replacement appeared after scaling to 0"
    );
    Ok(())
}

async fn deployment_scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    // TERM is ignored: the kubelet kills the container when the 5 s grace period ends.
    let stubborn = shell("main", BUSYBOX, "trap '' TERM; while :; do sleep 1; done");
    env.create::<Deployment>(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "stubborn"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "stubborn"}},
            "template": real_template(json!({"app": "stubborn"}), json!([stubborn]),
                json!({"terminationGracePeriodSeconds": 5})),
        },
    }))
    .await?;
    let pods = wait_for("two pods running", START, || async {
        let ps = live_pods(env).await?;
        Ok((ps.len() == 2 && ps.iter().all(|p| running_container(p).is_some())).then_some(ps))
    })
    .await?;
    let started = Instant::now();
    env.set_replicas::<Deployment>("stubborn", 1).await?;
    let victim = wait_for("one pod terminating", START, || async {
        let ps = live_pods(env).await?;
        Ok(ps
            .into_iter()
            .find(|p| p.metadata.deletion_timestamp.is_some()))
    })
    .await?;
    let victim_name = victim.metadata.name.clone().unwrap_or_default();
    ensure!(
        pods.iter()
            .any(|p| p.metadata.name.as_deref() == Some(victim_name.as_str())),
        "the terminating pod {victim_name} is not one of the two"
    );
    wait_for(
        "the Deployment counts one terminating replica",
        START,
        || async {
            let d: Deployment = env.get("stubborn").await?;
            let s = d.status.unwrap_or_default();
            Ok((s.terminating_replicas == Some(1) && s.replicas == Some(1)).then_some(()))
        },
    )
    .await?;
    let took = wait_pod_gone(env, &victim_name, started, Duration::from_secs(40)).await?;
    ensure!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(20),
        "the pod ignoring TERM was gone {took:?} after the scale-down; its grace period is 5 s"
    );
    wait_for(
        "the Deployment's terminatingReplicas back to 0",
        START,
        || async {
            let d: Deployment = env.get("stubborn").await?;
            let s = d.status.unwrap_or_default();
            Ok((s.terminating_replicas == Some(0)).then_some(()))
        },
    )
    .await
}

async fn terminating_scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    replicaset_scenario(t).await.context("ReplicaSet")?;
    deployment_scenario(t).await.context("Deployment")
}

real_node_test!(
    real_nodes_replicaset_and_deployment_count_pods_until_their_containers_stop,
    "rn-terminating",
    "replicaset-controller,deployment-controller",
    terminating_scenario
);

/// A Job of one pod whose container takes 15 s to stop after TERM: longer than the 10 s
/// recreation backoff of a first failure, so a replacement that does not wait for the
/// container comes while it still runs.
fn job(name: &str, policy: &str) -> serde_json::Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": 1, "completions": 1, "backoffLimit": 3,
            "podReplacementPolicy": policy,
            "template": real_template(
                json!({"job": name}),
                json!([shell("main", BUSYBOX, "trap 'sleep 15; exit 1' TERM; while :; do sleep 1; done")]),
                json!({"restartPolicy": "Never"}),
            ),
        },
    })
}

fn job_pods(pods: &[Pod], job: &str) -> Vec<Pod> {
    of_job(pods, job).into_iter().cloned().collect()
}

/// Waits for the Job's pod to run a container, deletes the pod gracefully and returns it
/// with its node and container id.
async fn delete_running(
    t: &Tier<impl Sized>,
    job_name: &str,
) -> anyhow::Result<(Pod, String, String)> {
    let env = &t.env;
    let first = wait_for(&format!("{job_name}'s pod"), START, || async {
        Ok(job_pods(&live_pods(env).await?, job_name)
            .into_iter()
            .next())
    })
    .await?;
    let first_name = first.metadata.name.clone().unwrap_or_default();
    let running = wait_running(env, &t.nodes, &first_name, false).await?;
    env.pods()
        .delete(&first_name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting {first_name}"))?;
    Ok(running)
}

/// Waits for a pod of the Job other than `old`.
async fn replacement(env: &Env, job_name: &str, old: &Pod) -> anyhow::Result<Pod> {
    let uid = old.metadata.uid.clone();
    wait_for(
        &format!("a replacement pod for {job_name}"),
        START,
        || async {
            let ps = job_pods(&live_pods(env).await?, job_name);
            Ok(ps.into_iter().find(|p| p.metadata.uid != uid))
        },
    )
    .await
}

async fn job_scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    env.create::<Job>(job("failed", "Failed")).await?;
    env.create::<Job>(job("eager", "TerminatingOrFailed"))
        .await?;

    // TerminatingOrFailed: the replacement comes while the old container still runs.
    let (old, node, id) = delete_running(t, "eager").await?;
    replacement(env, "eager", &old).await?;
    ensure!(
        t.nodes.container_running(&node, &id).await?,
        "with TerminatingOrFailed the replacement should come while the old container still stops"
    );

    // Failed: while the old container stops, the Job counts it terminating and waits.
    let (first, node, id) = delete_running(t, "failed").await?;
    wait_for("the Job counts the pod terminating", START, || async {
        let j: Job = env.get("failed").await?;
        Ok((j.status.and_then(|s| s.terminating) == Some(1)).then_some(()))
    })
    .await?;
    let uid = first.metadata.uid.clone();
    // Past the 10 s backoff, where TerminatingOrFailed replaced its pod.
    holds_for(
        "no replacement while the old container still runs",
        Duration::from_secs(12),
        || async {
            let ps = job_pods(&live_pods(env).await?, "failed");
            Ok(ps.iter().all(|p| p.metadata.uid == uid)
                && t.nodes.container_running(&node, &id).await?)
        },
    )
    .await?;
    let replacement = replacement(env, "failed", &first).await?;
    ensure!(
        !t.nodes.container_running(&node, &id).await?,
        "the replacement {:?} came while the old container {id} still ran on {node}",
        replacement.metadata.name
    );
    let j: Job = env.get("failed").await?;
    let s = j.status.unwrap_or_default();
    ensure!(
        s.failed == Some(1) && s.terminating.unwrap_or(0) == 0,
        "after the replacement: failed {:?}, terminating {:?} (want 1 and 0)",
        s.failed,
        s.terminating
    );
    Ok(())
}

real_node_test!(
    real_nodes_job_replaces_a_pod_only_after_its_container_stops,
    "rn-job-replace",
    "job-controller",
    job_scenario
);
