//! Takeover without churn: upstream kube-controller-manager's DaemonSet controller creates a
//! DaemonSet's revision and pods, stops, and rkcm's controller takes over without a new
//! revision and without replacing a pod: it recognises upstream's `data.raw` byte for byte.
//!
//! Upstream's manager cannot be limited to a namespace: it talks to the API server through
//! the testkit's scoping proxy (namespaced lists narrowed to the test namespace, writes
//! elsewhere refused). Nodes are cluster-wide; the DaemonSet selects only this test's nodes.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use rkcm_testkit::{ScopedProxy, holds_for};
use serde_json::json;

use crate::harness::Env;

fn kcm_binary() -> Result<PathBuf> {
    let dir = std::env::var_os("RKCM_E2E_BIN")
        .context("RKCM_E2E_BIN is not set: run `eval \"$(bash e2e/cluster.sh env)\"`")?;
    Ok(PathBuf::from(dir).join("kube-controller-manager"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn takes_over_from_upstream_without_churn() -> Result<()> {
    let env = Env::new("ds-takeover").await?;
    let (a, b) = (
        env.node("a", &[], &[]).await?,
        env.node("b", &[], &[]).await?,
    );
    let nodes = [a.name(), b.name()];
    let proxy = ScopedProxy::start(&env.cluster, env.name()).await?;
    let log = std::env::temp_dir().join(format!("rkcm-ds-takeover-{}.log", env.name()));
    let out = std::fs::File::create(&log)?;
    let mut kcm = tokio::process::Command::new(kcm_binary()?)
        .arg(format!("--kubeconfig={}", proxy.kubeconfig().display()))
        .args([
            "--controllers=daemonset-controller",
            "--leader-elect=false",
            "--secure-port=0",
            "--v=2",
        ])
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .context("starting upstream kube-controller-manager")?;
    // An annotation with characters Go escapes in JSON (`<`, `>`, `&`) in the template.
    env.create(&env.daemonset(
        "ds",
        "registry.k8s.io/pause:3.10",
        json!({"spec": {"template": {"metadata": {"annotations": {"note": "a<b>&c"}}}}}),
    ))
    .await?;
    let upstream_pods = env
        .wait_one_per_node("ds", &nodes, None)
        .await
        .with_context(|| format!("upstream KCM log: {}", log.display()))?;
    env.wait_status("ds", "upstream observed the DaemonSet", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.number_ready == 2 && s.observed_generation == d.metadata.generation)
    })
    .await?;
    kcm.kill()
        .await
        .context("stopping kube-controller-manager")?;
    proxy.stop();
    anyhow::ensure!(
        proxy.refused().is_empty(),
        "upstream wrote outside the namespace: {:?}",
        proxy.refused()
    );
    let revisions = |rs: Vec<k8s_openapi::api::apps::v1::ControllerRevision>| {
        let mut v: Vec<(String, Option<i64>)> = rs
            .into_iter()
            .map(|r| (r.metadata.name.unwrap_or_default(), r.revision))
            .collect();
        v.sort();
        v
    };
    let before_revs = revisions(env.owned_revisions("ds").await?);
    assert_eq!(before_revs.len(), 1, "{before_revs:?}");
    let uids = |pods: Vec<k8s_openapi::api::core::v1::Pod>| {
        let mut v: Vec<String> = pods.into_iter().filter_map(|p| p.metadata.uid).collect();
        v.sort();
        v
    };
    let before_pods = uids(upstream_pods.into_values().collect());

    let ctrl = env.start();
    holds_for(
        "same revision and pods after rkcm takes over",
        Duration::from_secs(8),
        || async {
            Ok(revisions(env.owned_revisions("ds").await?) == before_revs
                && uids(env.all_pods("ds").await?) == before_pods)
        },
    )
    .await?;
    env.wait_status("ds", "rkcm reports every pod updated", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.updated_number_scheduled == Some(2) && s.number_ready == 2)
    })
    .await?;
    // rkcm is in charge: an image change rolls out under it.
    env.set_image("ds", "registry.k8s.io/pause:3.9").await?;
    env.wait_status("ds", "rolled out by rkcm", |d| {
        d.status.as_ref().is_some_and(|s| {
            s.updated_number_scheduled == Some(2)
                && s.number_ready == 2
                && s.observed_generation == d.metadata.generation
        })
    })
    .await?;
    assert_eq!(env.owned_revisions("ds").await?.len(), 2);
    ctrl.stop().await?;
    let _ = std::fs::remove_file(&log);
    Ok(())
}
