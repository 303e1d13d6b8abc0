//! The Recreate strategy: scenarios 12, 13 and 14.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use rkcm_testkit::{NodeBuilder, TestNode, unique_name};

use crate::harness::*;

fn recreate_deployment(name: &str, replicas: i32) -> serde_json::Value {
    let mut d = deployment(name, replicas);
    recreate(&mut d);
    d
}

rkcm_testkit::scenario! {
    /// Scenario 12: Recreate with unbound pods.
    s12_recreate_scales_down_before_creating, "dep-recreate", recreate_unbound; all_threads
}

async fn recreate_unbound(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let d = env.create_deployment(recreate_deployment("web", 2)).await?;
    let d_uid = uid_of(&d);
    let rss = env.wait_rss(&d_uid, "one RS", |rss| rss.len() == 1).await?;
    let old_name = name_of(&rss[0]);
    env.make_ready(&uid_of(&rss[0]), 2).await?;
    env.wait_complete("web").await?;
    let pods = History::<Pod>::start(env.pods()).await?;
    let sets = History::<ReplicaSet>::start(env.replicasets()).await?;

    env.set_image("web", V2).await?;
    let rss = env
        .wait_rss(&d_uid, "old 0 / new 2 with their pods", |rss| {
            rss.len() == 2 && settled(rss, V1, 0) && settled(rss, V2, 2)
        })
        .await?;
    let new_name = name_of(with_image(&rss, V2).context("no V2 RS")?);
    env.wait_scaling_events(
        "web",
        &[
            format!("Scaled up replica set {old_name} from 0 to 2"),
            format!("Scaled down replica set {old_name} from 2 to 0"),
            format!("Scaled up replica set {new_name} from 0 to 2"),
        ],
    )
    .await?;

    // Never more than 2 pods, at any point of the watch.
    ensure(
        pods.max_existing()? <= 2,
        format!("{} pods existed at once", pods.max_existing()?),
    )?;
    // The old RS reached 0 before the new one existed; the new one was created at 2.
    let old_at_0 = sets.position(
        |s| matches!(s, Seen::Applied(rs) if name_of(rs) == old_name && spec_replicas(rs) == 0),
    )?;
    let new_seen = sets.position(|s| name_of(s.object()) == new_name)?;
    ensure(
        matches!((old_at_0, new_seen), (Some(o), Some(n)) if o < n),
        format!("old RS at 0 (change #{old_at_0:?}) before the new RS (#{new_seen:?})"),
    )?;
    ensure_eq(sets.sizes(&new_name)?, vec![2], "new RS sizes")?;
    // Only after the old pods were gone: in the pod watch, the last old pod's deletion
    // comes before the first new pod; and the new RS's creation (a resourceVersion of the
    // same etcd) comes after that deletion.
    let seen = pods.seen()?;
    let last_old_gone = seen
        .iter()
        .rposition(|s| matches!(s, Seen::Deleted(p) if pod_image(p) == V1))
        .context("the old pods were never deleted")?;
    let first_new = seen
        .iter()
        .position(|s| pod_image(s.object()) == V2)
        .context("no new pod seen")?;
    ensure(
        last_old_gone < first_new,
        format!(
            "a new pod (#{first_new}) appeared before the old pods were gone (#{last_old_gone})"
        ),
    )?;
    let gone_rv = rv(seen[last_old_gone].object())?;
    let created = sets.versions(&new_name)?;
    let created_rv = rv(created.first().context("new RS never seen")?.object())?;
    ensure(
        created_rv > gone_rv,
        format!("new RS created at rv {created_rv}, old pods gone at rv {gone_rv}"),
    )?;
    ctrl.stop().await
}

/// Scenario 13: Recreate waits for terminating pods; the variants: they turn Succeeded
/// (`web`), or are force-deleted (`api`).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn s13_recreate_waits_for_terminating_pods() -> Result<()> {
    let env = Env::new("dep-recreate-term").await?;
    let node = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("dep-n1")).ready(true))
        .await?;
    let result = waits_for_terminating(&env, &node).await;
    env.finish(result).await
}

async fn waits_for_terminating(env: &Env, node: &TestNode) -> Result<()> {
    let ctrl = env.start();
    let mut uids = Vec::new();
    for name in ["web", "api"] {
        let d = env.create_deployment(recreate_deployment(name, 2)).await?;
        let d_uid = uid_of(&d);
        let rss = env.wait_rss(&d_uid, "one RS", |rss| rss.len() == 1).await?;
        let now = jiff::Timestamp::now();
        for p in env.wait_active(&uid_of(&rss[0]), 2).await? {
            env.bind(&name_of(&p), node.name()).await?;
            env.set_ready(&name_of(&p), now).await?;
        }
        env.wait_complete(name).await?;
        uids.push((name, d_uid, uid_of(&rss[0])));
    }
    for (name, _, _) in &uids {
        env.set_image(name, V2).await?;
    }
    let mut old_pods = Vec::new();
    for (name, d_uid, rs_uid) in &uids {
        env.wait_rss(d_uid, "the old RS at 0 with 2 terminating", |rss| {
            rss.len() == 1
                && spec_replicas(&rss[0]) == 0
                && rs_counts(&rss[0]).0 == 0
                && rss[0].status.as_ref().and_then(|s| s.terminating_replicas)
                    == env.cluster.keeps_terminating_replicas().then_some(2)
        })
        .await?;
        let pods = env.owned(rs_uid).await?;
        ensure(
            pods.len() == 2 && pods.iter().all(|p| p.metadata.deletion_timestamp.is_some()),
            format!("{name}: both old pods terminating"),
        )?;
        old_pods.push(names_of(&pods));
    }
    rkcm_testkit::holds_for(
        "no new RS while the old pods terminate",
        Duration::from_secs(20),
        || async {
            for (_, d_uid, _) in &uids {
                if env.rss_of(d_uid).await?.len() != 1 {
                    return Ok(false);
                }
            }
            Ok(true)
        },
    )
    .await?;

    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    // web: the kubelet reports them Succeeded.
    for pod in &old_pods[0] {
        env.cluster.terminate_pod(env.name(), pod, 0).await?;
    }
    if !env.cluster.keeps_terminating_replicas() {
        // Without terminatingReplicas (a v1.34 server, the gate off) no ReplicaSet change
        // announces pods that finished terminating: as upstream v1.34, the rollout goes on
        // when they are gone, after the kubelet's final delete, made here.
        for pod in &old_pods[0] {
            env.pods().delete(pod, &now).await?;
        }
    }
    // api: force-deleted.
    for pod in &old_pods[1] {
        env.pods().delete(pod, &now).await?;
    }
    for (name, d_uid, _) in &uids {
        let rss = env
            .wait_rss_for(
                d_uid,
                &format!("{name}: new RS of 2 within 10 s"),
                Duration::from_secs(10),
                |rss: &[ReplicaSet]| rss.len() == 2 && size_of(rss, V2) == Some(2),
            )
            .await?;
        ensure_eq(
            ann(with_image(&rss, V2).context("no V2 RS")?, REVISION),
            Some("2"),
            "new RS revision",
        )?;
    }
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 14: Recreate needs every replica available.
    s14_recreate_available_needs_all_replicas, "dep-recreate-avail", recreate_available; all_threads
}

async fn recreate_available(env: &Env) -> Result<()> {
    let ctrl = env.start();
    // `web` is the scenario's case; `wide` (4 replicas) is one where the RollingUpdate default
    // (25% unavailable = 1) would already say True with one missing.
    for (name, n) in [("web", 3), ("wide", 4)] {
        let d = env.create_deployment(recreate_deployment(name, n)).await?;
        let rss = env
            .wait_rss(&uid_of(&d), "one RS", |rss| rss.len() == 1)
            .await?;
        let pods = env
            .wait_active(&uid_of(&rss[0]), usize::try_from(n)?)
            .await?;
        let now = jiff::Timestamp::now();
        for p in &pods[1..] {
            env.set_ready(&name_of(p), now).await?;
        }
        let d = env
            .wait_deployment(name, &format!("{} of {n} available", n - 1), |d| {
                observed(d) && counts(d)[3] == n - 1
            })
            .await?;
        ensure_eq(
            cond_triple(&d, "Available"),
            available_false(),
            &format!("{name}: Available with {} of {n}", n - 1),
        )?;
        env.set_ready(&name_of(&pods[0]), now).await?;
        env.wait_deployment(name, "all available, Available=True", |d| {
            counts(d)[3] == n && has_condition(d, "Available", "True", "MinimumReplicasAvailable")
        })
        .await?;
    }
    ctrl.stop().await
}
