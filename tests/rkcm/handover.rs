//! Two managers running one controller (README, "Two managers running one controller"): rkcm
//! notices upstream kube-controller-manager's writes to objects of a controller it runs, and
//! records a Warning event `OtherControllerManager` on the object; a clean handover records
//! none (checked at the end of the takeover tests, [`other_manager_events`]).

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use rkcm_testkit::harness::kwok_template;
use rkcm_testkit::{TestCluster, TestNamespace, wait_for};

use crate::rollout::{Kind, Manager};

/// The event's reason (`rkcm_runtime::handover::REASON`).
pub(crate) const REASON: &str = "OtherControllerManager";

/// The `OtherControllerManager` events of `ns`.
pub(crate) async fn other_manager_events(ns: &TestNamespace) -> anyhow::Result<Vec<Event>> {
    let events = ns
        .api::<Event>()
        .list(&ListParams::default().fields(&format!("reason={REASON}")))
        .await
        .context("listing OtherControllerManager events")?;
    Ok(events.items)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn a_second_manager_running_the_same_controller_is_reported() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("two-managers").await?;
    let mut rkcm = Manager::start(Kind::Rkcm, &cluster, ns.name(), "replicaset-controller").await?;
    let rs_api = ns.api::<ReplicaSet>();
    let rs: ReplicaSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "shared"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "shared"}},
            "template": kwok_template("shared", "registry.example/shared:v1"),
        },
    }))?;
    rs_api.create(&PostParams::default(), &rs).await?;
    let alone = async {
        // rkcm alone: it takes the ReplicaSet over and writes its status; no event.
        wait_for(
            "rkcm to write the ReplicaSet's status",
            Duration::from_secs(60),
            || async {
                let rs = rs_api.get("shared").await?;
                Ok(rs
                    .status
                    .filter(|s| s.observed_generation == Some(1) && s.replicas == 1)
                    .map(|_| ()))
            },
        )
        .await?;
        let events = other_manager_events(&ns).await?;
        anyhow::ensure!(events.is_empty(), "events with rkcm alone: {events:#?}");
        Ok(())
    }
    .await;
    Manager::with_logs(alone, &mut [&mut rkcm])?;

    let mut upstream =
        Manager::start(Kind::Upstream, &cluster, ns.name(), "replicaset-controller").await?;
    let noticed = async {
        // Each scale gives both managers a status to write; upstream's lands at some point.
        let mut replicas = 1;
        wait_for(
            "rkcm's OtherControllerManager event",
            Duration::from_secs(90),
            || {
                replicas = if replicas == 3 { 1 } else { replicas + 1 };
                let (rs_api, ns) = (rs_api.clone(), &ns);
                async move {
                    let events = other_manager_events(ns).await?;
                    if let Some(e) = events.into_iter().next() {
                        return Ok(Some(e));
                    }
                    let patch = serde_json::json!({"spec": {"replicas": replicas}});
                    rs_api
                        .patch("shared", &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .context("scaling the ReplicaSet")?;
                    Ok(None)
                }
            },
        )
        .await
    }
    .await;
    let event = Manager::with_logs(noticed, &mut [&mut rkcm, &mut upstream])?;
    let object = &event.involved_object;
    anyhow::ensure!(
        object.kind.as_deref() == Some("ReplicaSet")
            && object.name.as_deref() == Some("shared")
            && event.type_.as_deref() == Some("Warning"),
        "the event is not a Warning on the ReplicaSet: {event:#?}"
    );
    let message = event.message.unwrap_or_default();
    anyhow::ensure!(
        message.starts_with("kube-controller-manager wrote the status of this ReplicaSet at ")
            && message.contains("while rkcm runs the replicaset-controller"),
        "message: {message}"
    );
    upstream.stop().await?;
    rkcm.stop().await
}
