//! Takeover without churn: upstream kube-controller-manager's ReplicaSet controller scales a
//! ReplicaSet, stops, and rkcm's controller takes over without creating or deleting a pod.
//!
//! Upstream's controller-manager cannot be limited to a namespace, and the plane is shared
//! with other tests. So it talks to the API server through the testkit's scoping proxy, which
//! turns its cluster-wide LIST/WATCH into the test namespace's and refuses writes elsewhere:
//! it never sees, and so never touches, another test's objects.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use rkcm_testkit::ScopedProxy;
use rkcm_testkit::holds_for;

use crate::harness::*;

fn kcm_binary() -> Result<PathBuf> {
    let dir = std::env::var_os("RKCM_E2E_BIN")
        .context("RKCM_E2E_BIN is not set: run `eval \"$(bash e2e/cluster.sh env)\"`")?;
    Ok(PathBuf::from(dir).join("kube-controller-manager"))
}

/// Upstream kube-controller-manager running only the ReplicaSet controller, scoped to
/// `namespace` by the proxy. Killed when dropped.
struct UpstreamKcm {
    child: tokio::process::Child,
    proxy: ScopedProxy,
    log: PathBuf,
}

impl UpstreamKcm {
    async fn start(env: &Env) -> Result<Self> {
        let proxy = ScopedProxy::start(&env.cluster, env.name()).await?;
        let log = std::env::temp_dir().join(format!("rkcm-takeover-{}.log", env.name()));
        let out = std::fs::File::create(&log)?;
        let child = tokio::process::Command::new(kcm_binary()?)
            .arg(format!("--kubeconfig={}", proxy.kubeconfig().display()))
            .args([
                "--controllers=replicaset-controller",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=2",
            ])
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .context("starting upstream kube-controller-manager")?;
        Ok(Self { child, proxy, log })
    }

    async fn stop(mut self) -> Result<()> {
        self.child
            .kill()
            .await
            .context("stopping kube-controller-manager")?;
        self.proxy.stop();
        let refused = self.proxy.refused();
        anyhow::ensure!(
            refused.is_empty(),
            "upstream tried to write outside the test namespace: {refused:?}"
        );
        // Kept only on failure.
        let _ = std::fs::remove_file(&self.log);
        Ok(())
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

fn uids(pods: &[k8s_openapi::api::core::v1::Pod]) -> Vec<String> {
    let mut v: Vec<String> = pods.iter().map(uid_of).collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn takes_over_from_upstream_without_churn() -> Result<()> {
    let env = Env::new("rs-takeover").await?;
    let result = takeover(&env).await;
    env.finish(result).await
}

async fn takeover(env: &Env) -> Result<()> {
    let mut body = replicaset("web", 4, &[("app", "web")], &[("app", "web")]);
    body["spec"]["minReadySeconds"] = serde_json::json!(2);
    let rs = env.create_rs(body).await?;
    let uid = uid_of(&rs);
    let kcm = UpstreamKcm::start(env).await?;
    let pods = match env.wait_active(&uid, 4).await {
        Ok(p) => p,
        Err(e) => return Err(e.context(format!("upstream KCM log tail:\n{}", kcm.log_tail()))),
    };
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
    for name in names_of(&pods).iter().take(2) {
        env.set_ready(name, since).await?;
    }
    env.wait_rs(
        "web",
        "upstream wrote replicas=4 ready=2 available=2",
        |rs| rs_status(rs) == (4, 4, 2, 2) && observed(rs),
    )
    .await?;
    kcm.stop().await?;
    let before = uids(&env.owned(&uid).await?);

    let ctrl = env.start();
    holds_for(
        "pods unchanged after rkcm takes over",
        Duration::from_secs(8),
        || async { Ok(uids(&env.owned(&uid).await?) == before) },
    )
    .await?;
    let rs = env.replicasets().get("web").await?;
    ensure(
        rs_status(&rs) == (4, 4, 2, 2) && observed(&rs),
        format!("status after takeover: {:?}", rs.status),
    )?;
    // rkcm is really in charge: a scale-up is carried out by it.
    env.scale("web", 5).await?;
    let after = env.wait_active(&uid, 5).await?;
    ensure(
        before.iter().all(|u| uids(&after).contains(u)),
        "old pods kept",
    )?;
    ctrl.stop().await
}
