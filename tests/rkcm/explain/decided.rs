//! Every controller's last decision records its waits, not only the Job's and StatefulSet's:
//! an rkcm manager runs the ReplicaSet, Job and TTL-after-finished controllers. A ReplicaSet
//! whose pods an admission policy refuses: its last decision waits on `AdmissionDenied` with
//! the policy's message (a failed sync's refused write is a wait for every controller) and on
//! `PodsUnavailable`. A finished Job with a TTL of an hour: the TTL controller's last decision
//! waits on `TtlNotExpired`, and `rkcm explain ttl/NS/NAME` says so too. PodGC, which sweeps
//! on a timer rather than syncing keys: a pod bound to a node that goes waits on the
//! quarantine (`NodeQuarantine`) in its last decision, and then the decision is the
//! force-delete with its writes (a finalizer keeps the pod, so it can still be asked about).

use anyhow::ensure;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use rkcm_testkit::harness::{DenyPolicy, Env, kwok_template};
use rkcm_testkit::wait_for;
use serde_json::{Value, json};

use crate::rollout::wait_default_service_account;
use crate::serve::Rkcm;

use super::{Nodes, REACT, explain, reasons, test_toleration};

const REFUSAL: &str = "rkcm test: pods labelled refuse are not admitted";

/// The last decision's waits, as `explain --manager -o json` shows them.
fn waits(e: &Value) -> Vec<String> {
    e["lastDecision"]["waiting"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|w| w.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn scenario(env: &Env, port: u16) -> anyhow::Result<()> {
    let manager = format!("--manager=https://127.0.0.1:{port}");
    let with_manager = [manager.as_str(), "--manager-insecure-skip-tls-verify"];
    // The API server applies the policy a moment later: probe with a dry run until refused.
    let probe: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "labels": {"refuse": "yes"}},
        "spec": {"containers": [{"name": "main", "image": "registry.example/probe:v1"}]},
    }))?;
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    wait_for("the admission policy to refuse pods", REACT, || async {
        let refused = env.api::<Pod>().create(&dry_run, &probe).await.is_err();
        Ok(refused.then_some(()))
    })
    .await?;
    let mut refused = kwok_template("refused", "registry.example/web:v1");
    refused["metadata"]["labels"]["refuse"] = json!("yes");
    env.create::<ReplicaSet>(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "refused"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "refused"}},
                 "template": refused},
    }))
    .await?;
    let rs = super::target(env, "replicaset", "refused");
    let e = wait_for(
        "the ReplicaSet's last decision to wait on the refusal",
        REACT,
        || async {
            let e = explain(&env.cluster, &rs, &with_manager).await?;
            let w = waits(&e);
            let denied = w
                .iter()
                .any(|w| w.starts_with("AdmissionDenied: ") && w.contains(REFUSAL));
            let unavailable = w
                .iter()
                .any(|w| w.starts_with("PodsUnavailable: 0 of 1 pods available"));
            Ok((denied && unavailable).then_some(e))
        },
    )
    .await?;
    ensure!(e["state"] == "stalled", "{e:#}");

    let mut template = kwok_template("done", "registry.example/task:v1");
    template["spec"]["restartPolicy"] = json!("Never");
    env.create::<Job>(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "done"},
        "spec": {"ttlSecondsAfterFinished": 3600, "template": template},
    }))
    .await?;
    let ttl = super::target(env, "ttl", "done");
    let e = wait_for(
        "the TTL controller's last decision to wait",
        REACT,
        || async {
            let e = explain(&env.cluster, &ttl, &with_manager).await?;
            let counting = waits(&e)
                .iter()
                .any(|w| w.starts_with("TtlNotExpired: deleted at "));
            Ok(counting.then_some(e))
        },
    )
    .await?;
    ensure!(
        e["state"] == "waiting"
            && reasons(&e) == ["TtlNotExpired"]
            && e["controller"] == "ttl-after-finished-controller"
            && e["lastDecision"]["controller"] == "ttl-after-finished-controller",
        "{e:#}"
    );
    Ok(())
}

/// PodGC's last decisions for a pod whose node goes: the quarantine, then the force-delete.
async fn podgc(env: &Env, with_manager: &[&str]) -> anyhow::Result<()> {
    let mut nodes = Nodes::new(env);
    let result = async {
        let node = nodes.create(env, "gone", &[], &[]).await?;
        env.create::<Pod>(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "orphan", "finalizers": [HOLD]},
            "spec": {"nodeName": node, "tolerations": [test_toleration()],
                     "containers": [{"name": "main", "image": "registry.example/web:v1"}]},
        }))
        .await?;
        nodes.delete(&node).await?;
        let pod = super::target(env, "pod", "orphan");
        let quarantine = format!("NodeQuarantine: node {node} is not in the cluster");
        wait_for(
            "PodGC's last decision to wait on the quarantine",
            REACT,
            || async {
                let e = explain(&env.cluster, &pod, with_manager).await?;
                let waiting = waits(&e).iter().any(|w| w.starts_with(&quarantine));
                Ok((waiting
                    && e["lastDecision"]["controller"] == "pod-garbage-collector-controller")
                    .then_some(()))
            },
        )
        .await?;
        // The quarantine (40 s) and a sweep (20 s) later, the force-delete.
        let delete = format!("DELETE /api/v1/namespaces/{}/pods/orphan: 200", env.name());
        let e = wait_for(
            "PodGC's last decision to force-delete",
            2 * REACT,
            || async {
                let e = explain(&env.cluster, &pod, with_manager).await?;
                let actions = e["lastDecision"]["actions"].clone();
                let acted = actions[0] == "force-delete the pod (grace period 0): orphaned"
                    && actions
                        .as_array()
                        .is_some_and(|a| a.iter().any(|a| a == delete.as_str()));
                Ok(acted.then_some(e))
            },
        )
        .await?;
        ensure!(e["lastDecision"]["outcome"]["result"] == "synced", "{e:#}");
        anyhow::Ok(())
    }
    .await;
    let released = env
        .api::<Pod>()
        .patch(
            "orphan",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    let released = match released {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other.map(drop).map_err(anyhow::Error::from),
    };
    let deleted = nodes.delete_all().await;
    result.and(released).and(deleted)
}

/// The finalizer that keeps the orphaned pod after PodGC's force-delete.
const HOLD: &str = "rkcm.test/hold";

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn every_controllers_last_decision_records_its_waits() -> anyhow::Result<()> {
    let env = Env::new("rkcm-explain-decided").await?;
    let result = async {
        wait_default_service_account(&env.ns).await?;
        let policy = DenyPolicy::install(
            &env,
            "rkcm-explain-decided",
            json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["pods"]}),
            "!has(object.metadata.labels) || !('refuse' in object.metadata.labels)",
            REFUSAL,
        )
        .await?;
        let kubeconfig = env.cluster.kubeconfig_path().display().to_string();
        let run = async {
            let rkcm = Rkcm::spawn_scoped(
                "explain-decided",
                &env.cluster,
                env.name(),
                &[
                    "--leader-elect=false".to_owned(),
                    "--controllers=replicaset-controller,job-controller,ttl-after-finished-controller,pod-garbage-collector-controller".to_owned(),
                    format!("--authentication-kubeconfig={kubeconfig}"),
                    format!("--authorization-kubeconfig={kubeconfig}"),
                ],
            )
            .await?;
            rkcm.wait_serving().await?;
            scenario(&env, rkcm.port).await?;
            let manager = format!("--manager=https://127.0.0.1:{}", rkcm.port);
            podgc(&env, &[manager.as_str(), "--manager-insecure-skip-tls-verify"]).await
        }
        .await;
        let removed = policy.remove().await;
        run.and(removed)
    }
    .await;
    env.finish(result).await
}
