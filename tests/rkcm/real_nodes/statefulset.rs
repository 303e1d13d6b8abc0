//! At most one pod per StatefulSet identity with a real node cut off. The node's kubelet is
//! frozen (SIGSTOP): its container keeps running and nobody can confirm it stopped.
//!
//! - Out of service: `db-0` is deleted gracefully (as taint eviction would) and stays
//!   terminating; no replacement appears while the old container runs. Only when an operator
//!   taints the node `node.kubernetes.io/out-of-service` does PodGC force-delete the pod
//!   (Failed, `DisruptionTarget`), and the StatefulSet recreates `db-0` on the other node.
//! - Node deleted: the pod is orphaned; PodGC waits out its quarantine, then force-deletes
//!   it, and `db-0` comes back on the other node.
//!
//! In both, the kubelet, thawed, stops the old container of the pod that no longer exists.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use rkcm_testkit::harness::{History, OUT_OF_SERVICE, RealNodes};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use super::{BUSYBOX, Tier, real_template, sleeper, wait_running};

const CONTROLLERS: &str = "statefulset-controller,pod-garbage-collector-controller";
/// PodGC runs every 20 s; an orphaned pod waits 40 s of quarantine first.
const PODGC: Duration = Duration::from_secs(120);

fn statefulset() -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 1,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": real_template(json!({"app": "db"}), json!([sleeper(BUSYBOX)]), json!({})),
        },
    })
}

async fn exclusive(
    prefix: &str,
) -> anyhow::Result<Tier<tokio::sync::RwLockWriteGuard<'static, ()>>> {
    let hold = RealNodes::exclusive().await;
    Tier::start(prefix, 2, CONTROLLERS, &[], hold).await
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

/// The last version of the old pod the watch saw had been failed by PodGC: phase Failed,
/// and for an orphan (`orphan`) the `DisruptionTarget` condition PodGC adds.
fn failed_by_podgc(hist: &History<Pod>, old_uid: &str, orphan: bool) -> anyhow::Result<()> {
    let last = hist
        .seen()?
        .into_iter()
        .filter(|s| uid(s.object()) == old_uid)
        .map(|s| s.object().clone())
        .next_back()
        .context("the watch never saw the old db-0")?;
    let status = last.status.unwrap_or_default();
    let disruption = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget");
    let marked = disruption.as_ref().is_some_and(|c| {
        c.status == "True"
            && c.reason.as_deref() == Some("DeletionByPodGC")
            && c.message.as_deref() == Some("PodGC: node no longer exists")
    });
    ensure!(
        status.phase.as_deref() == Some("Failed") && marked == orphan,
        "the old db-0 was removed with phase {:?} and DisruptionTarget {disruption:?} \
         (want Failed, with PodGC's condition only for an orphan: {orphan})",
        status.phase
    );
    Ok(())
}

/// Waits for a new `db-0` on another real node and for the thawed kubelet to stop the old
/// container.
async fn recreated_elsewhere(
    t: &Tier<impl Sized>,
    old_uid: &str,
    node: &str,
) -> anyhow::Result<String> {
    let env = &t.env;
    wait_for("a new db-0", PODGC, || async {
        let p: Option<Pod> = env.get_opt("db-0").await?;
        Ok(p.filter(|p| uid(p) != old_uid).map(|_| ()))
    })
    .await?;
    let (_, new_node, _) = wait_running(env, &t.nodes, "db-0", true).await?;
    ensure!(
        new_node != node,
        "the new db-0 runs on the cut-off node {node}"
    );
    Ok(new_node)
}

async fn out_of_service(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    env.create::<StatefulSet>(statefulset()).await?;
    let (old, node, id) = wait_running(env, &t.nodes, "db-0", true).await?;
    let old_uid = uid(&old);
    let hist = History::start(env.pods()).await?;

    let frozen = t.nodes.freeze_kubelet(&node)?;
    t.nodes.mark_unreachable(&node).await?;
    env.pods()
        .delete("db-0", &DeleteParams::default())
        .await
        .context("deleting db-0")?;
    // Longer than one PodGC period (20 s): a sweep sees the pod terminating on a node that
    // is not Ready but not out of service, and must leave it.
    holds_for(
        "db-0 stays the old, terminating pod while its container runs on the cut-off node",
        Duration::from_secs(25),
        || async {
            let p: Option<Pod> = env.get_opt("db-0").await?;
            let same =
                p.is_some_and(|p| uid(&p) == old_uid && p.metadata.deletion_timestamp.is_some());
            Ok(same && t.nodes.container_running(&node, &id).await?)
        },
    )
    .await?;

    t.nodes.taint(&node, OUT_OF_SERVICE, "nodeshutdown").await?;
    let result = async {
        let new_node = recreated_elsewhere(t, &old_uid, &node).await?;
        failed_by_podgc(&hist, &old_uid, false)?;
        hist.assert_one_per_name()?;
        frozen.thaw()?;
        wait_for(
            "the thawed kubelet stops the old container",
            Duration::from_secs(60),
            || async { Ok((!t.nodes.container_running(&node, &id).await?).then_some(())) },
        )
        .await?;
        anyhow::Ok(new_node)
    }
    .await;
    t.nodes.untaint(&node, OUT_OF_SERVICE).await?;
    t.nodes.wait_ready(&node, Duration::from_secs(60)).await?;
    result.map(drop)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs real nodes: make test"]
async fn real_nodes_statefulset_replaces_a_cut_off_pod_only_when_out_of_service()
-> anyhow::Result<()> {
    let t = exclusive("rn-sts-oos").await?;
    let result = out_of_service(&t).await;
    t.finish(result).await
}

async fn node_deleted(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    env.create::<StatefulSet>(statefulset()).await?;
    let (old, node, id) = wait_running(env, &t.nodes, "db-0", true).await?;
    let old_uid = uid(&old);
    let hist = History::start(env.pods()).await?;
    let nodes = Api::<Node>::all(env.cluster.client());
    let saved = nodes
        .get(&node)
        .await
        .with_context(|| format!("reading node {node}"))?;

    let frozen = t.nodes.freeze_kubelet(&node)?;
    nodes
        .delete(&node, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting node {node}"))?;
    let result = async {
        // Quarantine: PodGC deletes the pod of a node that is gone no earlier than 40 s
        // after a sweep first saw the node missing, which is after the node was deleted.
        holds_for(
            "the orphaned db-0 stays through its quarantine",
            Duration::from_secs(38),
            || async {
                let p: Option<Pod> = env.get_opt("db-0").await?;
                Ok(p.is_some_and(|p| uid(&p) == old_uid))
            },
        )
        .await?;
        recreated_elsewhere(t, &old_uid, &node).await?;
        failed_by_podgc(&hist, &old_uid, true)?;
        hist.assert_one_per_name()
    }
    .await;

    // The node comes back as it was registered, and its kubelet reports again.
    let mut again = Node::default();
    again.metadata.name = saved.metadata.name.clone();
    again.metadata.labels = saved.metadata.labels.clone();
    again.metadata.annotations = saved.metadata.annotations.clone();
    again.spec = saved.spec.clone();
    nodes
        .create(&PostParams::default(), &again)
        .await
        .with_context(|| format!("creating node {node} again"))?;
    frozen.thaw()?;
    t.nodes.wait_ready(&node, Duration::from_secs(60)).await?;
    result?;
    wait_for(
        "the thawed kubelet stops the old container",
        Duration::from_secs(60),
        || async { Ok((!t.nodes.container_running(&node, &id).await?).then_some(())) },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs real nodes: make test"]
async fn real_nodes_statefulset_replaces_the_pod_of_a_deleted_node_after_quarantine()
-> anyhow::Result<()> {
    let t = exclusive("rn-sts-gone").await?;
    let result = node_deleted(&t).await;
    t.finish(result).await
}
