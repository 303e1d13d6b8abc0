//! `rkcm explain` on the local plane: a Deployment settles, gets stuck on new pods that cannot
//! be scheduled, passes its progress deadline, is rolled back by the remedy explain names, and
//! is paused mid-rollout. The same session runs once under rkcm and once under upstream
//! kube-controller-manager: explain reads only, and runs rkcm's plan over the live state, so
//! its reasons must be the same whichever manager drives the Deployment.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use rkcm_testkit::{TestCluster, wait_for};

use crate::rollout::{
    Kind, Kubectl, Manager, deployment_manifest, start_manager, wait_default_service_account,
    wait_settled,
};
use crate::serve::rkcm_bin;

/// One sync of either manager after the change, with margin for a busy plane.
const REACT: Duration = Duration::from_secs(60);

/// `rkcm explain deployment/NS/NAME -o json`, parsed.
async fn explain(cluster: &TestCluster, ns: &str, name: &str) -> anyhow::Result<serde_json::Value> {
    let out = tokio::process::Command::new(rkcm_bin())
        .args(["explain", &format!("deployment/{ns}/{name}"), "-o", "json"])
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .context("running rkcm explain")?;
    if !out.status.success() {
        bail!(
            "rkcm explain failed ({:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("parsing rkcm explain -o json")
}

fn reasons(e: &serde_json::Value) -> Vec<String> {
    e["waitingOn"]
        .as_array()
        .map(|ws| {
            ws.iter()
                .filter_map(|w| w["reason"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until explain reports `state` with exactly `want` as its reason codes.
async fn wait_explained(
    cluster: &TestCluster,
    ns: &str,
    state: &str,
    want: &[&str],
) -> anyhow::Result<serde_json::Value> {
    wait_for(&format!("explain: {state} {want:?}"), REACT, || async {
        let e = explain(cluster, ns, "web").await?;
        if e["state"] == state && reasons(&e) == want {
            Ok(Some(e))
        } else {
            Err(anyhow::anyhow!(
                "explain says {} {:?}",
                e["state"],
                reasons(&e)
            ))
        }
    })
    .await
}

async fn session(kind: Kind) -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-explain").await?;
    wait_default_service_account(&ns).await?;
    let mut manager = start_manager(kind, &cluster, ns.name()).await?;
    let k = Kubectl::new(&cluster, ns.name())?;
    let n = ns.name();
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
        let e = wait_explained(&cluster, n, "settled", &[]).await?;
        if e["actions"] != serde_json::json!([]) || e["controller"] != "deployment-controller" {
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
        let e = wait_explained(&cluster, n, "waiting", &["NewPodsUnavailable"]).await?;
        let message = e["waitingOn"][0]["message"].as_str().unwrap_or_default();
        if !message.starts_with("0 of 2 new pods available; 5 pods exist, at most 5 allowed") {
            bail!("budget message: {message}");
        }
        // 15 s without progress: the deadline is reported first, and the remedy is the undo.
        let e = wait_explained(
            &cluster,
            n,
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
        wait_explained(&cluster, n, "settled", &[]).await?;

        // Paused in the middle of a rollout: stalled until resumed.
        k.ok(&["rollout", "pause", "deployment/web"]).await?;
        k.ok(&[
            "set",
            "image",
            "deployment/web",
            "app=registry.example/web:v3",
        ])
        .await?;
        let e = wait_explained(&cluster, n, "stalled", &["Paused"]).await?;
        if e["remedies"] != serde_json::json!(["kubectl rollout resume deployment/web"]) {
            bail!("paused remedy: {e}");
        }
        k.ok(&["rollout", "resume", "deployment/web"]).await?;
        wait_settled(&ns, "web").await?;
        wait_explained(&cluster, n, "settled", &[]).await?;
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

#[tokio::test]
async fn explain_refuses_a_bad_target_with_usage() -> anyhow::Result<()> {
    let out = tokio::process::Command::new(rkcm_bin())
        .args(["explain", "widget/ns/x"])
        .output()
        .await?;
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(2) || !err.contains("usage: rkcm explain") {
        bail!("exit {:?}: {err}", out.status.code());
    }
    Ok(())
}
