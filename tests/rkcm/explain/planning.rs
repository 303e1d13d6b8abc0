//! explain plans with the manager's configuration: an rkcm manager runs the StatefulSet
//! controller with `--feature-gates=MaxUnavailableStatefulSet=false` (on by default). A
//! `Parallel` set of 3 with `maxUnavailable: 2` is updated to a template whose pods never
//! start: without the gate the manager replaces one pod (db-2) and waits for it, for good.
//! `rkcm explain --manager URL` reads the manager's configuration and agrees: waiting, no
//! write; so does explain given the same `--feature-gates`. With built-in defaults (gate on)
//! explain would have the controller delete another pod, which this manager never does. The
//! configuration endpoint refuses an identity without a grant, as `/metrics` does.

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use rkcm_testkit::harness::kwok_template;
use rkcm_testkit::{TestCluster, wait_for};
use serde_json::{Value, json};

use crate::secure_serving::{As, get_as, service_account_token};
use crate::serve::Rkcm;
use crate::skew::server_minor;

use super::{REACT, explain};

const GATE: &str = "--feature-gates=MaxUnavailableStatefulSet=false";

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn explain_plans_with_the_running_managers_feature_gates() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-explain-planning").await?;
    let client = cluster.client();
    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    let rkcm = Rkcm::spawn_scoped(
        "explain-planning",
        &cluster,
        ns.name(),
        &[
            "--leader-elect=false".to_owned(),
            "--controllers=statefulset-controller".to_owned(),
            GATE.to_owned(),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
        ],
    )
    .await?;
    rkcm.wait_serving().await?;
    let result = async {
        let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns.name());
        let set: StatefulSet = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 3, "serviceName": "db", "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "db"}},
                "updateStrategy": {"type": "RollingUpdate",
                                   "rollingUpdate": {"maxUnavailable": 2}},
                "template": kwok_template("db", "registry.example/db:v1"),
            },
        }))?;
        sets.create(&PostParams::default(), &set)
            .await
            .context("creating StatefulSet db")?;
        wait_for("3 ready pods", REACT, || async {
            let s = sets.get("db").await?;
            Ok((s.status.and_then(|s| s.ready_replicas) == Some(3)).then_some(()))
        })
        .await?;
        // The new revision's pods never start: no node has this label.
        let patch = json!({"spec": {"template": {"spec": {"nodeSelector": {"rkcm.test/no-such-node": "x"}}}}});
        sets.patch("db", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("updating the template")?;
        // The manager (gate off) replaces db-2 only, then waits on it.
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
        wait_for("db-2 at the new revision, Pending", REACT, || async {
            let p = pods.get_opt("db-2").await?;
            let pending = p.as_ref().is_some_and(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.spec.as_ref().and_then(|s| s.node_selector.as_ref()).is_some_and(|n| n.contains_key("rkcm.test/no-such-node"))
            });
            Ok(pending.then_some(()))
        })
        .await?;

        let target = format!("statefulset/{}/db", ns.name());
        let manager = format!("--manager=https://127.0.0.1:{}", rkcm.port);
        let with_manager = [manager.as_str(), "--manager-insecure-skip-tls-verify"];
        let e = wait_for("explain --manager to say waiting", REACT, || async {
            let e = explain(&cluster, &target, &with_manager).await?;
            Ok((e["state"] == "waiting").then_some(e))
        })
        .await?;
        ensure!(
            e["actions"] == json!([])
                && e["plannedWith"]["source"] == "manager"
                && flags(&e).contains(&GATE.to_owned()),
            "with the manager's configuration: {e:#}"
        );
        // The same flag on the command line plans the same.
        let given = explain(&cluster, &target, &[GATE]).await?;
        ensure!(
            given["state"] == "waiting" && given["plannedWith"]["source"] == "flags",
            "with {GATE}: {given:#}"
        );
        // Built-in defaults are the server's minor's: from v1.37 the gate is on and would
        // delete another pod, not what this manager does; before, it is off by default, and
        // the defaults plan as this manager does.
        let minor = server_minor(&cluster).await?;
        let defaults = explain(&cluster, &target, &[]).await?;
        let want = if minor >= 37 { "acting" } else { "waiting" };
        ensure!(
            defaults["state"] == want && defaults["plannedWith"]["source"] == "defaults",
            "with the defaults of v1.{minor} ({want} expected): {defaults:#}"
        );
        // The configuration is authorized like /metrics: an identity without a grant is
        // refused.
        let stranger = service_account_token(&client, ns.name(), "stranger").await?;
        let refused = get_as(rkcm.port, "/debug/rkcm/config", &As::Token(stranger)).await?;
        ensure!(refused.status == 403, "a stranger read the configuration: {}", refused.body);
        // The manager indeed stays put: db-1 is still the old revision's pod.
        let db1 = pods.get("db-1").await.context("reading db-1")?;
        ensure!(
            db1.metadata.deletion_timestamp.is_none()
                && db1.spec.and_then(|s| s.node_selector).is_some_and(|n| !n.contains_key("rkcm.test/no-such-node")),
            "db-1 was replaced"
        );
        anyhow::Ok(())
    }
    .await;
    ns.force_delete_pods().await;
    result
}

fn flags(e: &Value) -> Vec<String> {
    e["plannedWith"]["flags"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
