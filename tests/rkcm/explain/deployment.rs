//! Deployment: a Deployment settles, gets stuck on new pods that cannot be scheduled, passes
//! its progress deadline, is rolled back by the remedy explain names, and is paused
//! mid-rollout; under rkcm and under upstream kube-controller-manager.

use anyhow::bail;
use rkcm_testkit::TestCluster;

use super::{wait_explained, wait_settled as wait_explained_settled};
use crate::rollout::{
    Kind, Kubectl, Manager, deployment_manifest, start_manager, wait_default_service_account,
    wait_settled,
};

async fn session(kind: Kind) -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-explain").await?;
    wait_default_service_account(&ns).await?;
    let mut manager = start_manager(kind, &cluster, ns.name()).await?;
    let k = Kubectl::new(&cluster, ns.name())?;
    let web = format!("deployment/{}/web", ns.name());
    let web = web.as_str();
    let result = async {
        let manifest = deployment_manifest(
            "web",
            4,
            "registry.example/web:v1",
            serde_json::json!({"progressDeadlineSeconds": 15}),
        );
        k.run(&["create", "-f", "-"], Some(&manifest.to_string()))
            .await?;
        wait_settled(&ns, "web").await?;
        let e = wait_explained_settled(&cluster, web).await?;
        if e["controller"] != "deployment-controller" {
            bail!("a settled Deployment: {e}");
        }

        // New pods nobody can schedule: the rollout uses its budget (maxSurge 1,
        // maxUnavailable 1 of 4) and waits on them.
        k.ok(&[
            "patch",
            "deployment/web",
            "--type=merge",
            "-p",
            r#"{"spec":{"template":{"spec":{"nodeSelector":{"rkcm.test/no-such-node":"x"}}}}}"#,
        ])
        .await?;
        let e = wait_explained(&cluster, web, "waiting", &["NewPodsUnavailable"]).await?;
        let message = e["waitingOn"][0]["message"].as_str().unwrap_or_default();
        if !message.starts_with("0 of 2 new pods available; 5 pods exist, at most 5 allowed") {
            bail!("budget message: {message}");
        }
        // 15 s without progress: the deadline is reported first, and the remedy is the undo.
        let e = wait_explained(
            &cluster,
            web,
            "stalled",
            &["ProgressDeadlineExceeded", "NewPodsUnavailable"],
        )
        .await?;
        let undo = "roll back: kubectl rollout undo deployment/web";
        if !e["remedies"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == undo))
        {
            bail!("no undo remedy: {e}");
        }
        k.ok(&["rollout", "undo", "deployment/web"]).await?;
        wait_settled(&ns, "web").await?;
        wait_explained_settled(&cluster, web).await?;

        // Paused in the middle of a rollout: stalled until resumed.
        k.ok(&["rollout", "pause", "deployment/web"]).await?;
        k.ok(&[
            "set",
            "image",
            "deployment/web",
            "app=registry.example/web:v3",
        ])
        .await?;
        let e = wait_explained(&cluster, web, "stalled", &["Paused"]).await?;
        if e["remedies"] != serde_json::json!(["kubectl rollout resume deployment/web"]) {
            bail!("paused remedy: {e}");
        }
        k.ok(&["rollout", "resume", "deployment/web"]).await?;
        wait_settled(&ns, "web").await?;
        wait_explained_settled(&cluster, web).await?;
        Ok(())
    }
    .await;
    Manager::with_logs(result, &mut [&mut manager])
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn explain_follows_a_stuck_rollout_under_rkcm() -> anyhow::Result<()> {
    session(Kind::Rkcm).await
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn explain_gives_the_same_reasons_under_upstream() -> anyhow::Result<()> {
    session(Kind::Upstream).await
}
