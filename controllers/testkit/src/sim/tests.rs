use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use serde_json::json;

use super::SimApi;

fn base() -> jiff::Timestamp {
    "2030-01-01T00:00:00Z".parse().expect("timestamp")
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}))
    .expect("pod")
}

#[tokio::test(start_paused = true)]
async fn creates_conflicts_and_preconditioned_deletes() {
    let api = SimApi::new(1, base());
    let pods: Api<Pod> = Api::namespaced(api.client(1, "test"), "ns");
    let created = pods
        .create(&PostParams::default(), &pod("a"))
        .await
        .expect("create");
    assert_eq!(created.metadata.namespace.as_deref(), Some("ns"));
    assert!(
        pods.create(&PostParams::default(), &pod("a"))
            .await
            .is_err()
    );
    let mut stale = created.clone();
    stale.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    pods.replace("a", &PostParams::default(), &stale)
        .await
        .expect("update");
    assert!(
        pods.replace("a", &PostParams::default(), &stale)
            .await
            .is_err(),
        "a stale resourceVersion must conflict"
    );
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    assert!(pods.delete("a", &wrong).await.is_err());
    // Unbound: deleted at once.
    pods.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(pods.get_opt("a").await.expect("get").is_none());
}

/// A status update keeps the metadata the real server's status strategy keeps: a
/// Deployment's annotations (not its labels), none of a pod's.
#[tokio::test(start_paused = true)]
async fn status_updates_keep_the_metadata_the_real_server_keeps() {
    use k8s_openapi::api::apps::v1::Deployment;
    let api = SimApi::new(1, base());
    let client = api.client(1, "test");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "ns");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
    .expect("deployment");
    let mut d = deployments
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    d.metadata.annotations = Some([("rev".to_string(), "2".to_string())].into());
    d.metadata.labels = Some([("l".to_string(), "v".to_string())].into());
    deployments
        .replace_status("d", &PostParams::default(), &d)
        .await
        .expect("status update");
    let stored = deployments.get("d").await.expect("get");
    assert_eq!(
        stored
            .metadata
            .annotations
            .unwrap_or_default()
            .get("rev")
            .map(String::as_str),
        Some("2"),
        "a Deployment's annotations land with a status update"
    );
    assert!(
        !stored.metadata.labels.unwrap_or_default().contains_key("l"),
        "a Deployment's labels do not"
    );

    let pods: Api<Pod> = Api::namespaced(client, "ns");
    let mut p = pods
        .create(&PostParams::default(), &pod("p"))
        .await
        .expect("create pod");
    p.metadata.annotations = Some([("x".to_string(), "y".to_string())].into());
    pods.replace_status("p", &PostParams::default(), &p)
        .await
        .expect("pod status update");
    let stored = pods.get("p").await.expect("get pod");
    assert!(
        stored.metadata.annotations.unwrap_or_default().is_empty(),
        "a pod's status update keeps none of its metadata"
    );
}

#[tokio::test(start_paused = true)]
async fn writes_carrying_an_old_uid_fail() {
    let api = SimApi::new(3, base());
    let pods: Api<Pod> = Api::namespaced(api.client(1, "test"), "ns");
    let old = pods
        .create(&PostParams::default(), &pod("a"))
        .await
        .expect("create");
    pods.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    let new = pods
        .create(&PostParams::default(), &pod("a"))
        .await
        .expect("create again");
    let failed = |uid: Option<String>| {
        serde_json::from_value::<Pod>(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "ns", "uid": uid},
            "status": {"phase": "Failed"}}))
        .expect("pod")
    };
    let params = PatchParams::apply("test").force();
    let err = pods
        .patch_status(
            "a",
            &params,
            &Patch::Apply(failed(old.metadata.uid.clone())),
        )
        .await
        .expect_err("a status apply with the old pod's UID must fail");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422),
        "{err:?}"
    );
    let mut stale = new.clone();
    stale.metadata.uid = old.metadata.uid.clone();
    stale.metadata.resource_version = None;
    let err = pods
        .replace("a", &PostParams::default(), &stale)
        .await
        .expect_err("an update with the old pod's UID must fail");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409),
        "{err:?}"
    );
    let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    let now = pods.get("a").await.expect("get");
    assert_eq!(now.metadata.uid, new.metadata.uid);
    assert_ne!(phase(&now).as_deref(), Some("Failed"));
    let done = pods
        .patch_status(
            "a",
            &params,
            &Patch::Apply(failed(new.metadata.uid.clone())),
        )
        .await
        .expect("a status apply with the pod's own UID");
    assert_eq!(phase(&done).as_deref(), Some("Failed"));
}

#[tokio::test(start_paused = true)]
async fn watcher_lists_then_follows_and_relists_after_expiry() {
    let api = SimApi::new(2, base());
    api.world().faults.watch_delay_ms = (10, 100);
    let client = api.client(1, "test");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ns");
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .expect("create");
    let mut events = watcher::watcher(Api::<Pod>::all(client), watcher::Config::default()).boxed();
    let mut names = Vec::new();
    let writer = pods.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        writer
            .create(&PostParams::default(), &pod("b"))
            .await
            .expect("create b");
    });
    while names.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
            Ok(Some(Ok(watcher::Event::InitApply(p) | watcher::Event::Apply(p)))) => {
                names.push(p.metadata.name.unwrap_or_default());
            }
            Ok(Some(_)) => {}
            other => panic!("watch ended: {other:?}"),
        }
    }
    assert_eq!(names, ["a", "b"]);
    api.world().drop_watches(Some("pods"), true);
    let mut relisted = false;
    for _ in 0..10 {
        if let Ok(Some(Ok(watcher::Event::InitDone))) =
            tokio::time::timeout(Duration::from_secs(10), events.next()).await
        {
            relisted = true;
            break;
        }
    }
    assert!(relisted, "an expired watch relists");
}
