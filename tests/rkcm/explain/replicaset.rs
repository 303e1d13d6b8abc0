//! ReplicaSet: pod creates refused by a ResourceQuota of `pods: 0` (`PodCreateFailed`, with
//! the server's message), then settled once the quota is gone. ReplicationController: pod
//! creates refused by an admission policy (`PodCreateFailed` with the policy's message), then
//! settled once the policy is unbound. Under rkcm and under upstream kube-controller-manager.

use anyhow::bail;
use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::DeleteParams;
use rkcm_testkit::harness::{DenyPolicy, Env, kwok_template};
use rkcm_testkit::wait_for;
use serde_json::json;

use super::{REACT, entry, has_remedy, message, target, wait_explained, wait_settled};

const CONTROLLERS: &str = "replicaset-controller,replicationcontroller-controller";

/// What the admission policy of the ReplicationController case answers.
const REFUSAL: &str = "rkcm test: pods labelled refuse are not admitted";

async fn scenario(env: &Env) -> anyhow::Result<()> {
    quota(env).await?;
    let policy = DenyPolicy::install(
        env,
        "rkcm-explain-rc",
        json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
               "resources": ["pods"]}),
        "!has(object.metadata.labels) || !('refuse' in object.metadata.labels)",
        REFUSAL,
    )
    .await?;
    let result = admission(env, &policy).await;
    let removed = policy.remove().await;
    result.and(removed)
}

async fn quota(env: &Env) -> anyhow::Result<()> {
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

async fn admission(env: &Env, policy: &DenyPolicy) -> anyhow::Result<()> {
    // The API server applies the policy a moment later: probe with a dry run until refused.
    let probe: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "labels": {"refuse": "yes"}},
        "spec": {"containers": [{"name": "main", "image": "registry.example/probe:v1"}]},
    }))?;
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for("the admission policy to refuse pods", REACT, || async {
        Ok(env
            .api::<Pod>()
            .create(&dry_run, &probe)
            .await
            .is_err()
            .then_some(()))
    })
    .await?;
    let mut template = kwok_template("old", "registry.example/old:v1");
    template["metadata"]["labels"]["refuse"] = json!("yes");
    env.create::<ReplicationController>(json!({
        "apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "old"},
        "spec": {"replicas": 1, "selector": {"app": "old"}, "template": template},
    }))
    .await?;
    let rc = target(env, "replicationcontroller", "old");
    let e = wait_explained(&env.cluster, &rc, "stalled", &["PodCreateFailed"]).await?;
    let m = message(&e, "PodCreateFailed");
    if !(m.starts_with("the API server refused the last pod create (FailedCreate): ")
        && m.contains(REFUSAL))
    {
        bail!("PodCreateFailed without the policy's message: {e:#}");
    }
    if e["controller"] != "replicationcontroller-controller"
        || !has_remedy(&e, "describe ReplicationController old")
    {
        bail!("PodCreateFailed of an RC without its controller or remedy: {e:#}");
    }

    // The remedy: the policy is unbound, the pod is created and becomes Ready.
    policy.unbind().await?;
    wait_settled(&env.cluster, &rc).await?;
    Ok(())
}

under_both!(
    explain_replicaset_pod_create_refused_under_rkcm,
    explain_replicaset_pod_create_refused_under_upstream,
    "rkcm-explain-rs",
    CONTROLLERS,
    scenario
);
