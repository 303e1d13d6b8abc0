//! The run's own kwok nodes: created labelled `<label>=<namespace>`, waited for until kwok
//! reports them Ready, and deleted again.

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::harness::Env;
use crate::k8s;

/// A kwok node named `name`, labelled `label=ns` (plus its hostname, OS and architecture),
/// without a status: kwok writes one.
pub fn kwok_node(name: &str, label: &str, ns: &str) -> Value {
    json!({
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {label: ns, "kubernetes.io/hostname": name,
                       "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        },
    })
}

/// [`kwok_node`] with a status of 32 CPUs, 256 GiB and room for `pods` pods.
pub fn kwok_node_with_room(name: &str, label: &str, ns: &str, pods: usize) -> Value {
    let mut node = kwok_node(name, label, ns);
    let pods = pods.to_string();
    node["status"] = json!({
        "allocatable": {"cpu": "32", "memory": "256Gi", "pods": pods},
        "capacity": {"cpu": "32", "memory": "256Gi", "pods": pods},
        "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                     "kubeletVersion": "fake", "kubeProxyVersion": "fake"}
    });
    node
}

/// Creates the nodes `node(name)` for every name of `names`; one that exists already is fine.
pub async fn create_nodes(
    env: &Env,
    names: &[String],
    node: impl Fn(&str) -> Value,
) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(env.client.clone());
    k8s::bounded(
        "nodes created",
        names.len(),
        env.concurrency,
        names.len().div_ceil(4).max(1),
        names.iter().map(|name| {
            let api = api.clone();
            let node: Result<Node, _> = serde_json::from_value(node(name));
            async move {
                let node = node?;
                let pp = PostParams::default();
                match k8s::retry(|| api.create(&pp, &node)).await {
                    Ok(_) => Ok(()),
                    Err(e) if k8s::is_status(&e, 409) => Ok(()),
                    Err(e) => Err(e).with_context(|| format!("creating node {}", node.name_any())),
                }
            }
        }),
    )
    .await?;
    Ok(())
}

/// Waits until `want` nodes labelled `label=ns` report Ready.
pub async fn wait_nodes_ready(env: &Env, label: &str, ns: &str, want: usize) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(env.client.clone());
    let lp = ListParams::default().labels(&format!("{label}={ns}"));
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let list = k8s::retry(|| api.list(&lp))
            .await
            .context("listing nodes")?;
        let ready = list
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready >= want {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {ready} of {want} nodes Ready after 300 s (is kwok running?)"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes every node labelled `label=ns` (also those an interrupted earlier run left).
pub async fn delete_labelled_nodes(env: &Env, label: &str, ns: &str) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(env.client.clone());
    let lp = ListParams::default().labels(&format!("{label}={ns}"));
    let dp = DeleteParams::default();
    k8s::retry(|| api.delete_collection(&dp, &lp))
        .await
        .with_context(|| format!("deleting the nodes of {ns}"))?;
    Ok(())
}
