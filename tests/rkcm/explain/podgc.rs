//! PodGC: a terminated pod while the cluster holds fewer terminated pods than the threshold
//! (`BelowTerminatedThreshold`, settled, with the threshold explain was given); a running
//! pod on a node that exists (`NotGarbage`, settled); the same pod once its node is deleted
//! (`NodeQuarantine`, waiting on the node), which the manager then collects after the
//! quarantine. Under rkcm and under upstream kube-controller-manager.

use std::time::Duration;

use anyhow::bail;
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::harness::{Env, NO_SCHEDULER, PAUSE, phase};
use rkcm_testkit::wait_for;
use serde_json::{Value, json};

use super::{Nodes, REACT, has_remedy, message, objects, reasons, target, wait_until};

const CONTROLLERS: &str = "pod-garbage-collector-controller";
/// PodGC's quarantine of a missing node (40 s), a live GET, and margin.
const COLLECTED: Duration = Duration::from_secs(90);

/// Settled with `reason` only.
fn settled_because(e: &Value, reason: &str) -> bool {
    e["state"] == "settled" && e["actions"] == json!([]) && reasons(e) == [reason]
}

async fn scenario(env: &Env) -> anyhow::Result<()> {
    let mut nodes = Nodes::new(env);
    let result = async {
        // A pod that ran to completion (never bound: its status is set as a kubelet would).
        env.create::<Pod>(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "done"},
            "spec": {"schedulerName": NO_SCHEDULER, "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": PAUSE}]},
        }))
        .await?;
        env.set_phase("done", "Succeeded").await?;
        let done = target(env, "pod", "done");
        for (extra, threshold) in [
            (&[][..], "12500"),
            (&["--terminated-pod-gc-threshold", "5000"][..], "5000"),
        ] {
            let e = wait_until(
                &env.cluster,
                &done,
                extra,
                "settled [\"BelowTerminatedThreshold\"]",
                REACT,
                |e| settled_because(e, "BelowTerminatedThreshold"),
            )
            .await?;
            let m = message(&e, "BelowTerminatedThreshold");
            if !m.contains(&format!("PodGC deletes the oldest only above {threshold} "))
                || !has_remedy(&e, &format!("kubectl -n {} delete pod done", env.name()))
            {
                bail!("BelowTerminatedThreshold (threshold {threshold}): {e:#}");
            }
        }

        // A pod bound to a node of the test's own, running there.
        let node = nodes.create(env, "gone", &[], &[]).await?;
        env.create::<Pod>(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "orphan"},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": PAUSE}],
                     "tolerations": [super::test_toleration()]},
        }))
        .await?;
        wait_for("pod orphan running", REACT, || async {
            let p: Pod = env.get("orphan").await?;
            Ok((phase(&p) == "Running").then_some(()))
        })
        .await?;
        let orphan = target(env, "pod", "orphan");
        wait_until(
            &env.cluster,
            &orphan,
            &[],
            "settled [\"NotGarbage\"]",
            REACT,
            |e| settled_because(e, "NotGarbage"),
        )
        .await?;

        // The node goes: the pod waits out the quarantine, then the manager collects it.
        nodes.delete(&node).await?;
        let e = wait_until(
            &env.cluster,
            &orphan,
            &[],
            "waiting [\"NodeQuarantine\"]",
            REACT,
            |e| e["state"] == "waiting" && reasons(e) == ["NodeQuarantine"],
        )
        .await?;
        if objects(&e, "NodeQuarantine") != [format!("Node/{node}")]
            || !message(&e, "NodeQuarantine")
                .starts_with(&format!("node {node} is not in the cluster"))
        {
            bail!("NodeQuarantine: {e:#}");
        }
        wait_for("pod orphan collected by PodGC", COLLECTED, || async {
            Ok(env.get_opt::<Pod>("orphan").await?.is_none().then_some(()))
        })
        .await?;
        anyhow::Ok(())
    }
    .await;
    let deleted = nodes.delete_all().await;
    result.and(deleted)
}

under_both!(
    explain_podgc_threshold_and_missing_node_under_rkcm,
    explain_podgc_threshold_and_missing_node_under_upstream,
    "rkcm-explain-gc",
    CONTROLLERS,
    scenario
);
