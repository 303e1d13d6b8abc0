//! PodGC of terminated pods that real containers finished: with
//! `--terminated-pod-gc-threshold=2` and four terminated pods (three exited 0, one exited 1),
//! the two oldest are collected and the two newest stay; a running pod older than all of
//! them is never counted.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::harness::{Env, Manager, RealNodes, on_real_nodes, phase};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use super::{BUSYBOX, START, Tier, shell, sleeper, subject, wait_running};

fn pod(name: &str, script: &str) -> serde_json::Value {
    let mut spec =
        json!({"restartPolicy": "Never", "containers": [shell("main", BUSYBOX, script)]});
    on_real_nodes(&mut spec);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn created(p: &Pod) -> Option<jiff::Timestamp> {
    p.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Creates `name` once the clock has passed the creation second of `after`, so that
/// creation timestamps (whole seconds) order the pods, and waits until it has finished.
async fn terminated_pod(
    env: &Env,
    name: &str,
    script: &str,
    want: &str,
    after: Option<jiff::Timestamp>,
) -> anyhow::Result<Pod> {
    if let Some(after) = after {
        wait_for("the next second", Duration::from_secs(3), || async {
            Ok((jiff::Timestamp::now().as_second() > after.as_second()).then_some(()))
        })
        .await?;
    }
    env.create::<Pod>(pod(name, script)).await?;
    wait_for(&format!("pod {name} {want}"), START, || async {
        let p: Pod = env.get(name).await?;
        Ok((phase(&p) == want).then_some(p))
    })
    .await
}

async fn scenario(env: &Env, nodes: &RealNodes) -> anyhow::Result<()> {
    env.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "runner"},
        "spec": {"containers": [sleeper(BUSYBOX)], "nodeSelector": {"type": "real"},
                 "tolerations": [{"key": rkcm_testkit::harness::REAL_NODE_TAINT, "operator": "Exists"}]},
    }))
    .await?;
    let (runner, ..) = wait_running(env, nodes, "runner", false).await?;
    let mut last = created(&runner);
    for (name, script, want) in [
        ("done-1", "exit 0", "Succeeded"),
        ("failed-2", "exit 1", "Failed"),
        ("done-3", "exit 0", "Succeeded"),
        ("done-4", "exit 0", "Succeeded"),
    ] {
        let p = terminated_pod(env, name, script, want, last).await?;
        ensure!(
            created(&p).map(|t| t.as_second()) > last.map(|t| t.as_second()),
            "pod {name} was not created in a later second than the pod before it"
        );
        last = created(&p);
    }
    Ok(())
}

async fn collected(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    wait_for(
        "the two oldest terminated pods collected",
        Duration::from_secs(90),
        || async {
            let left: Vec<Pod> = env.list().await?;
            let mut names: Vec<String> = left
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            names.sort();
            Ok((names == ["done-3", "done-4", "runner"]).then_some(()))
        },
    )
    .await?;
    holds_for("no more pods collected", Duration::from_secs(3), || async {
        Ok(env.list::<Pod>().await?.len() == 3)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs real nodes: make test"]
async fn real_nodes_podgc_collects_the_oldest_terminated_pods() -> anyhow::Result<()> {
    // The pods finish first, then the manager starts: one PodGC pass sees all four.
    let hold = RealNodes::shared().await;
    let env = Env::new("rn-podgc").await?;
    let result = async {
        let nodes = RealNodes::get(&env.cluster, 1).await?;
        crate::rollout::wait_default_service_account(&env.ns).await?;
        scenario(&env, &nodes).await?;
        let manager = Manager::start_with(
            subject(),
            &env.cluster,
            env.name(),
            "pod-garbage-collector-controller",
            &["--terminated-pod-gc-threshold=2"],
        )
        .await
        .context("starting the manager")?;
        anyhow::Ok((nodes, manager))
    }
    .await;
    let (nodes, manager) = match result {
        Ok(v) => v,
        Err(e) => return env.finish(Err(e)).await,
    };
    let t = Tier::adopt(env, nodes, manager, hold);
    let result = collected(&t).await;
    t.finish(result).await
}
