//! A DaemonSet across real and simulated nodes: one pod per eligible node (the real nodes
//! run its container, kwok plays the others), a rolling update replaces the real
//! containers, and `kubectl rollout undo` brings the earlier template back.

use std::collections::BTreeMap;

use anyhow::ensure;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;
use rkcm_testkit::harness::{kwok_or_real_affinity, pod_image, running_container};
use rkcm_testkit::wait_for;
use serde_json::json;

use super::{BUSYBOX, BUSYBOX_NEXT, START, Tier, shell};
use crate::rollout::Kubectl;

fn daemonset() -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "affinity": kwok_or_real_affinity(),
                    "tolerations": [{"key": rkcm_testkit::harness::REAL_NODE_TAINT, "operator": "Exists"}],
                    "terminationGracePeriodSeconds": 10,
                    "containers": [shell("main", BUSYBOX, "trap 'exit 0' TERM; while :; do sleep 1; done")],
                },
            },
        },
    })
}

/// The nodes the DaemonSet must cover: the plane's simulated and real nodes.
async fn eligible(t: &Tier<impl Sized>) -> anyhow::Result<Vec<String>> {
    let nodes = Api::<Node>::all(t.env.cluster.client());
    let mut names = Vec::new();
    for selector in ["type=kwok", "type=real"] {
        for n in nodes
            .list(&ListParams::default().labels(selector))
            .await?
            .items
        {
            names.extend(n.metadata.name);
        }
    }
    names.sort();
    Ok(names)
}

/// Waits until every eligible node has exactly one live pod with `image`, Ready, and the
/// real nodes' pods run a container; returns node → (pod name, container id if real).
async fn wait_covered(
    t: &Tier<impl Sized>,
    nodes: &[String],
    image: &str,
) -> anyhow::Result<BTreeMap<String, (String, Option<String>)>> {
    let env = &t.env;
    let real = t.nodes.names().to_vec();
    let by_node = wait_for(
        &format!("one Ready {image} pod on each of {nodes:?}"),
        START,
        || async {
            let pods: Vec<Pod> = env.list().await?;
            let mut by_node: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
            for p in pods
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
            {
                let node = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default();
                by_node.entry(node).or_default().push(p);
            }
            let done = by_node.len() == nodes.len()
                && nodes.iter().all(|n| {
                    by_node.get(n).is_some_and(|ps| {
                        ps.len() == 1
                            && pod_image(&ps[0]) == image
                            && rkcm_testkit::harness::is_ready(&ps[0])
                            && (!real.contains(n) || running_container(&ps[0]).is_some())
                    })
                });
            Ok(done.then_some(by_node))
        },
    )
    .await?;
    let mut out = BTreeMap::new();
    for (node, pods) in by_node {
        let p = &pods[0];
        let id = running_container(p)
            .map(|(_, id)| id)
            .filter(|_| real.contains(&node));
        if let Some(id) = &id {
            ensure!(
                t.nodes.container_running(&node, id).await?,
                "pod {:?} reports container {id} on {node}, but it does not run there",
                p.metadata.name
            );
        }
        out.insert(node, (p.metadata.name.clone().unwrap_or_default(), id));
    }
    Ok(out)
}

async fn scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    let k = Kubectl::new(&env.cluster, env.name())?;
    let nodes = eligible(t).await?;
    ensure!(
        t.nodes.names().iter().all(|n| nodes.contains(n)) && nodes.len() > t.nodes.names().len(),
        "want real and simulated nodes, have {nodes:?}"
    );
    env.create::<DaemonSet>(daemonset()).await?;
    let v1 = wait_covered(t, &nodes, BUSYBOX).await?;
    let ds: DaemonSet = env.get("agent").await?;
    let s = ds.status.unwrap_or_default();
    let n = i32::try_from(nodes.len())?;
    ensure!(
        s.desired_number_scheduled == n && s.current_number_scheduled == n,
        "status after the first rollout: {s:?} (want {n} nodes)"
    );

    env.strategic::<DaemonSet>(
        "agent",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": BUSYBOX_NEXT}]}}}}),
    )
    .await?;
    let out = k
        .ok(&["rollout", "status", "daemonset/agent", "--timeout=120s"])
        .await?;
    ensure!(
        out.stdout.lines().last() == Some("daemon set \"agent\" successfully rolled out"),
        "rollout status: {:?}",
        out.stdout
    );
    let v2 = wait_covered(t, &nodes, BUSYBOX_NEXT).await?;
    for real in t.nodes.names() {
        let (old, new) = (&v1[real], &v2[real]);
        ensure!(
            old.0 != new.0 && old.1 != new.1 && new.1.is_some(),
            "{real}: the update did not replace the real container: before {old:?}, after {new:?}"
        );
        let old_id = old.1.clone().unwrap_or_default();
        ensure!(
            !t.nodes.container_running(real, &old_id).await?,
            "{real}: the old container {old_id} still runs after the update"
        );
    }

    k.ok(&["rollout", "undo", "daemonset/agent"]).await?;
    let out = k
        .ok(&["rollout", "status", "daemonset/agent", "--timeout=120s"])
        .await?;
    ensure!(
        out.stdout.lines().last() == Some("daemon set \"agent\" successfully rolled out"),
        "rollout status after undo: {:?}",
        out.stdout
    );
    let v3 = wait_covered(t, &nodes, BUSYBOX).await?;
    for real in t.nodes.names() {
        ensure!(
            v3[real].1.is_some() && v3[real].1 != v2[real].1,
            "{real}: undo did not bring a new container of the first template: {:?}",
            v3[real]
        );
    }
    Ok(())
}

real_node_test!(
    real_nodes_daemonset_covers_real_and_simulated_nodes_and_rolls_back,
    "rn-ds",
    "daemonset-controller",
    scenario
);
