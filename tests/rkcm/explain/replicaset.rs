//! ReplicaSet: pod creates refused by a ResourceQuota of `pods: 0` (`PodCreateFailed`, with
//! the server's message), then settled once the quota is gone; under rkcm and under upstream
//! kube-controller-manager.

use anyhow::bail;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::DeleteParams;
use rkcm_testkit::harness::{Env, kwok_template};
use rkcm_testkit::wait_for;
use serde_json::json;

use super::{REACT, entry, has_remedy, message, target, wait_explained, wait_settled};

async fn scenario(env: &Env) -> anyhow::Result<()> {
    env.create::<ResourceQuota>(json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}},
    }))
    .await?;
    // The quota controller fills in the status; until then admission refuses with "status
    // unknown", a different message.
    wait_for("the quota's status", REACT, || async {
        let q: ResourceQuota = env.get("no-pods").await?;
        Ok(q.status
            .and_then(|s| s.hard)
            .is_some_and(|h| h.contains_key("pods"))
            .then_some(()))
    })
    .await?;
    env.create::<k8s_openapi::api::apps::v1::ReplicaSet>(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": kwok_template("web", "registry.example/web:v1"),
        },
    }))
    .await?;
    let rs = target(env, "replicaset", "web");
    let e = wait_explained(&env.cluster, &rs, "stalled", &["PodCreateFailed"]).await?;
    let m = message(&e, "PodCreateFailed");
    if !(m.starts_with("the API server refused the last pod create (FailedCreate): ")
        && m.contains("exceeded quota: no-pods"))
    {
        bail!("PodCreateFailed without the server's message: {e:#}");
    }
    if entry(&e, "PodCreateFailed")["since"].as_str().is_none()
        || !has_remedy(&e, "describe ReplicaSet web")
    {
        bail!("PodCreateFailed without since or remedy: {e:#}");
    }

    // The remedy: the quota goes, the pods are created and become Ready.
    env.api::<ResourceQuota>()
        .delete("no-pods", &DeleteParams::default())
        .await?;
    wait_settled(&env.cluster, &rs).await?;
    Ok(())
}

under_both!(
    explain_replicaset_pod_create_refused_under_rkcm,
    explain_replicaset_pod_create_refused_under_upstream,
    "rkcm-explain-rs",
    "replicaset-controller",
    scenario
);
