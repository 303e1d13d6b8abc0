//! DaemonSet: on three kwok nodes of the test's own, one runs the daemon pod, one carries a
//! taint the pod does not tolerate (`TaintNotTolerated`) and one does not match the
//! template's nodeSelector (`NodeSelectorMismatch`); these say why, they are not waits, so
//! the DaemonSet is settled. Labelling the third node to match gives it a pod and takes it
//! off the list. Under rkcm and under upstream kube-controller-manager.

use anyhow::bail;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use rkcm_testkit::harness::Env;
use serde_json::{Value, json};

use super::{Nodes, REACT, objects, reasons, target, test_toleration, wait_until};

const CONTROLLERS: &str = "daemonset-controller";
/// The label that puts a node in this test's DaemonSet (value: the namespace).
const GROUP: &str = "rkcm.test/explain-ds";
/// The taint the daemon pod does not tolerate.
const BLOCKED: &str = "rkcm.test/explain-blocked";

/// Settled, with a pod on every node of `with_pod` and nothing else but the two reasons.
fn settled_with(e: &Value, with_pod: &[&str], mismatch: Option<&str>, tainted: &str) -> bool {
    let node = |n: &str| format!("Node/{n}");
    let selector = objects(e, "NodeSelectorMismatch");
    e["state"] == "settled"
        && e["actions"] == json!([])
        && reasons(e) == ["NodeSelectorMismatch", "TaintNotTolerated"]
        && objects(e, "TaintNotTolerated") == [node(tainted)]
        && mismatch.is_none_or(|m| selector.contains(&node(m)))
        && with_pod.iter().all(|n| !selector.contains(&node(n)))
}

async fn scenario(env: &Env) -> anyhow::Result<()> {
    let mut nodes = Nodes::new(env);
    let result = async {
        let group = [(GROUP, env.name())];
        let runs = nodes.create(env, "runs", &group, &[]).await?;
        let tainted = nodes
            .create(env, "tainted", &group, &[(BLOCKED, "true", "NoSchedule")])
            .await?;
        let other = nodes
            .create(env, "other", &[(GROUP, "elsewhere")], &[])
            .await?;
        env.create::<DaemonSet>(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {
                        "nodeSelector": {GROUP: env.name()},
                        "tolerations": [test_toleration()],
                        "containers": [{"name": "app", "image": "registry.example/agent:v1"}],
                    },
                },
            },
        }))
        .await?;
        let ds = target(env, "daemonset", "agent");
        let e = wait_until(
            &env.cluster,
            &ds,
            &[],
            "settled, the tainted and the other node named",
            REACT,
            |e| settled_with(e, &[&runs], Some(&other), &tainted),
        )
        .await?;
        let taint = format!("1 nodes carry the taint {BLOCKED}=true:NoSchedule");
        if !super::message(&e, "TaintNotTolerated").starts_with(&taint) {
            bail!("TaintNotTolerated message: {e:#}");
        }

        // The other node joins the group: it gets a pod and leaves the mismatch list.
        Api::<Node>::all(env.cluster.client())
            .patch(
                &other,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {GROUP: env.name()}}})),
            )
            .await?;
        wait_until(
            &env.cluster,
            &ds,
            &[],
            "settled, with a pod on the relabelled node",
            REACT,
            |e| settled_with(e, &[&runs, &other], None, &tainted),
        )
        .await?;
        anyhow::Ok(())
    }
    .await;
    // The nodes go whatever happened; the test's pods are removed with the namespace.
    let deleted = nodes.delete_all().await;
    result.and(deleted)
}

under_both!(
    explain_daemonset_nodes_without_a_pod_under_rkcm,
    explain_daemonset_nodes_without_a_pod_under_upstream,
    "rkcm-explain-ds",
    CONTROLLERS,
    scenario
);
