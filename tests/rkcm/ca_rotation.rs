//! `ClientsAllowCARotation` (client-go `transport/ca_rotation.go`): the rkcm binary keeps
//! working, without a restart, when the API server's serving certificate moves to a new CA and
//! the kubeconfig's `certificate-authority` file is rewritten with the new bundle.
//!
//! The shared plane's CA is not touched: rkcm talks to a [`TlsFront`] with a CA this test
//! makes, in front of the namespace-scoping proxy. The front then serves a certificate from a
//! second CA and closes every open connection, as a restarted API server would; the CA file
//! gets the new CA only.

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use rkcm_testkit::harness::kwok_template;
use rkcm_testkit::{ScopedProxy, TestCa, TestCluster, TestNamespace, TlsFront, wait_for};
use serde_json::json;

use crate::rollout::wait_default_service_account;
use crate::serve::{Rkcm, TempDir};

/// kube re-reads the CA file at most once a minute; a watch reconnects within seconds after.
const AFTER_ROTATION: Duration = Duration::from_secs(150);

/// Creates a one-replica ReplicaSet `name` and waits until its pod exists.
async fn replicaset_gets_its_pod(
    ns: &TestNamespace,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": kwok_template(name, "registry.example/web:v1"),
        },
    }))?;
    ns.api::<ReplicaSet>()
        .create(&PostParams::default(), &rs)
        .await?;
    let pods = ns.api::<Pod>();
    let selector = ListParams::default().labels(&format!("app={name}"));
    wait_for(&format!("a pod of ReplicaSet {name}"), timeout, || async {
        Ok((!pods.list(&selector).await?.items.is_empty()).then_some(()))
    })
    .await
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn a_rotated_ca_is_trusted_without_a_restart() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-ca-rotation").await?;
    wait_default_service_account(&ns).await?;
    let proxy = ScopedProxy::start(&cluster, ns.name()).await?;
    let old_ca = TestCa::new("rkcm-test-ca-old")?;
    let front = TlsFront::start(proxy.url(), &old_ca).await?;
    let dir = TempDir::new("rkcm-ca-rotation")?;
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, old_ca.pem())?;
    let kubeconfig = dir.path().join("kubeconfig");
    front.write_kubeconfig(&kubeconfig, &ca_file, ns.name())?;
    let mut p = Rkcm::spawn_with(
        "ca-rotation",
        &kubeconfig,
        &[
            "--leader-elect=false".to_owned(),
            "--controllers=replicaset-controller".to_owned(),
        ],
        Some(proxy),
    )?;
    replicaset_gets_its_pod(&ns, "before", Duration::from_secs(60))
        .await
        .map_err(|e| e.context(p.log()))?;

    let new_ca = TestCa::new("rkcm-test-ca-new")?;
    std::fs::write(&ca_file, new_ca.pem())?;
    front.rotate(&new_ca)?;
    replicaset_gets_its_pod(&ns, "after", AFTER_ROTATION)
        .await
        .map_err(|e| e.context(p.log()))?;
    assert!(
        p.wait_exit(Duration::ZERO).await.is_err(),
        "rkcm is still the same process"
    );
    Ok(())
}
