//! Takeover without churn: upstream kube-controller-manager's DaemonSet controller creates a
//! DaemonSet's revision and pods, stops, and rkcm's controller takes over without a new
//! revision and without replacing a pod: it recognises upstream's `data.raw` byte for byte.
//!
//! Upstream's manager cannot be limited to a namespace: it runs as the testkit's [`Manager`],
//! behind the scoping proxy (namespaced lists narrowed to the test namespace, writes
//! elsewhere refused). Nodes are cluster-wide; the DaemonSet selects only this test's nodes.

use std::time::Duration;

use anyhow::Result;
use rkcm_testkit::harness::{Manager, ManagerKind};
use rkcm_testkit::holds_for;
use serde_json::json;

use crate::harness::Env;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn takes_over_from_upstream_without_churn() -> Result<()> {
    let env = Env::new("ds-takeover").await?;
    let (a, b) = (
        env.node("a", &[], &[]).await?,
        env.node("b", &[], &[]).await?,
    );
    let nodes = [a.name(), b.name()];
    let mut kcm = Manager::start(
        ManagerKind::Upstream,
        &env.cluster,
        env.name(),
        "daemonset-controller",
    )
    .await?;
    // An annotation with characters Go escapes in JSON (`<`, `>`, `&`) in the template.
    env.create(&env.daemonset(
        "ds",
        "registry.k8s.io/pause:3.10",
        json!({"spec": {"template": {"metadata": {"annotations": {"note": "a<b>&c"}}}}}),
    ))
    .await?;
    let upstream_pods = Manager::with_logs(
        env.wait_one_per_node("ds", &nodes, None).await,
        &mut [&mut kcm],
    )?;
    env.wait_status("ds", "upstream observed the DaemonSet", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.number_ready == 2 && s.observed_generation == d.metadata.generation)
    })
    .await?;
    // Stopped, and checked never to have written outside the namespace.
    kcm.stop_scoped().await?;
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
    ctrl.stop().await
}
