//! StatefulSet: `OrderedReady` waiting on a first pod that no node accepts (`PodNotReady`),
//! then the stuck rollout once the template is fixed (kubernetes/kubernetes#67250): the
//! old-revision pod never becomes Ready and blocks the update that would replace it
//! (`OldRevisionPodNotReady`, stalled, with the delete-the-pod remedy). Following the remedy
//! lets the set settle. Under rkcm and under upstream kube-controller-manager.

use anyhow::bail;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use rkcm_testkit::harness::{Env, ManagerKind, kwok_template};
use serde_json::json;

use super::{has_remedy, message, objects, session, target, wait_explained, wait_settled};

const CONTROLLERS: &str = "statefulset-controller";
/// A node label no node has.
const NOWHERE: &str = "rkcm.test/no-such-node";

async fn scenario(env: &Env) -> anyhow::Result<()> {
    let mut template = kwok_template("db", "registry.example/db:v1");
    template["spec"]["nodeSelector"][NOWHERE] = json!("x");
    env.create::<StatefulSet>(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": template,
        },
    }))
    .await?;
    let sts = target(env, "statefulset", "db");

    // db-0 stays Pending: db-1 waits for it.
    let e = wait_explained(&env.cluster, &sts, "waiting", &["PodNotReady"]).await?;
    let m = message(&e, "PodNotReady");
    if objects(&e, "PodNotReady") != ["Pod/db-0"]
        || !m.starts_with("OrderedReady: pod db-0 (revision db-")
        || !m.ends_with("is Pending; 1 higher ordinal(s) wait for it")
    {
        bail!("PodNotReady: {e:#}");
    }

    // The template is fixed, but db-0 is of the old revision and never becomes Ready: the
    // rolling update never reaches it.
    env.merge::<StatefulSet>(
        "db",
        json!({"spec": {"template": {"spec": {"nodeSelector": {NOWHERE: null}}}}}),
    )
    .await?;
    let e = wait_explained(&env.cluster, &sts, "stalled", &["OldRevisionPodNotReady"]).await?;
    let delete = format!("kubectl delete pod -n {} db-0", env.name());
    if objects(&e, "OldRevisionPodNotReady") != ["Pod/db-0"]
        || !message(&e, "OldRevisionPodNotReady").contains("kubernetes/kubernetes#67250")
        || !has_remedy(&e, &delete)
    {
        bail!("OldRevisionPodNotReady: {e:#}");
    }

    // The remedy: delete the pod; it comes back at the new revision, and db-1 follows.
    env.api::<Pod>()
        .delete("db-0", &DeleteParams::default())
        .await?;
    wait_settled(&env.cluster, &sts).await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn explain_statefulset_ordered_wait_and_stuck_rollout_under_rkcm() -> anyhow::Result<()> {
    session(ManagerKind::Rkcm, "rkcm-explain-sts", CONTROLLERS, scenario).await
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn explain_statefulset_ordered_wait_and_stuck_rollout_under_upstream() -> anyhow::Result<()> {
    session(
        ManagerKind::Upstream,
        "rkcm-explain-sts",
        CONTROLLERS,
        scenario,
    )
    .await
}
