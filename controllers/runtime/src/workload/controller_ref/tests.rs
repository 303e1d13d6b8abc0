use super::*;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use rkcm_testkit::fake_api::{FakeApi, Reply};

fn owner() -> OwnerInfo {
    OwnerInfo {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web".into(),
        namespace: Some("ns".into()),
        uid: "owner-uid".into(),
        deleting: false,
    }
}

fn oref(uid: &str, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "x".into(),
        uid: uid.into(),
        controller: Some(controller),
        block_owner_deletion: Some(true),
    }
}

fn pod(name: &str, app: &str, refs: Vec<OwnerReference>) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("{name}-uid")),
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            owner_references: if refs.is_empty() { None } else { Some(refs) },
            ..ObjectMeta::default()
        },
        ..Pod::default()
    })
}

fn is_web(p: &Pod) -> bool {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app"))
        .is_some_and(|v| v == "web")
}

fn deleting(p: Arc<Pod>) -> Arc<Pod> {
    let mut p = (*p).clone();
    p.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    Arc::new(p)
}

fn names(v: &[Arc<Pod>]) -> Vec<String> {
    v.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn classify_covers_upstream_claim_rules() {
    let o = owner();
    let ours = pod("a", "web", vec![oref("owner-uid", true)]);
    let theirs = pod("b", "web", vec![oref("other", true)]);
    let orphan = pod("c", "web", vec![]);
    let non_controller_ref = pod("d", "web", vec![oref("owner-uid", false)]);
    assert_eq!(classify(&o, &ours.metadata, true), Claim::Owned);
    assert_eq!(classify(&o, &ours.metadata, false), Claim::Release);
    assert_eq!(classify(&o, &theirs.metadata, true), Claim::Ignore);
    assert_eq!(classify(&o, &orphan.metadata, true), Claim::Adopt);
    assert_eq!(classify(&o, &orphan.metadata, false), Claim::Ignore);
    // A plain (non-controller) ownerReference still leaves the child an orphan.
    assert_eq!(
        classify(&o, &non_controller_ref.metadata, true),
        Claim::Adopt
    );
    assert_eq!(
        classify(&o, &deleting(orphan.clone()).metadata, true),
        Claim::Ignore
    );
    let mut elsewhere = (*orphan).clone();
    elsewhere.metadata.namespace = Some("other".into());
    assert_eq!(classify(&o, &elsewhere.metadata, true), Claim::Ignore);
}

#[test]
fn deleting_owner_keeps_what_it_owns_and_touches_nothing() {
    let o = OwnerInfo {
        deleting: true,
        ..owner()
    };
    let ours = pod("a", "web", vec![oref("owner-uid", true)]);
    let orphan = pod("c", "web", vec![]);
    assert_eq!(classify(&o, &ours.metadata, true), Claim::Owned);
    assert_eq!(classify(&o, &ours.metadata, false), Claim::Ignore);
    assert_eq!(classify(&o, &orphan.metadata, true), Claim::Ignore);
}

#[test]
fn cluster_scoped_owner_adopts_across_namespaces() {
    let o = OwnerInfo {
        namespace: None,
        ..owner()
    };
    let orphan = pod("c", "web", vec![]);
    assert_eq!(classify(&o, &orphan.metadata, true), Claim::Adopt);
}

#[test]
fn plan_sorts_candidates() {
    let o = owner();
    let cands = vec![
        pod("owned", "web", vec![oref("owner-uid", true)]),
        pod("stale", "db", vec![oref("owner-uid", true)]),
        pod("orphan", "web", vec![]),
        pod("other", "web", vec![oref("x", true)]),
        deleting(pod("dying-orphan", "web", vec![])),
    ];
    let plan = plan_claims(&o, &cands, is_web);
    assert_eq!(names(&plan.owned), vec!["owned"]);
    assert_eq!(names(&plan.release), vec!["stale"]);
    assert_eq!(names(&plan.adopt), vec!["orphan"]);
    assert!(!plan.is_noop());
}

#[test]
fn patches_match_upstream() {
    let adopt = adopt_patch(&owner(), "child-uid", &[]);
    assert_eq!(
        adopt,
        serde_json::json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "owner-uid", "controller": true, "blockOwnerDeletion": true}], "uid": "child-uid"}})
    );
    let with_fin = adopt_patch(&owner(), "c", &["batch.kubernetes.io/job-tracking".into()]);
    assert_eq!(
        with_fin["metadata"]["finalizers"],
        serde_json::json!(["batch.kubernetes.io/job-tracking"])
    );
    let release = release_patch("owner-uid", "child-uid", &[]);
    assert_eq!(
        release,
        serde_json::json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "owner-uid"}], "uid": "child-uid"}})
    );
    let rel_fin = release_patch("o", "c", &["f".into()]);
    assert_eq!(
        rel_fin["metadata"]["$deleteFromPrimitiveList/finalizers"],
        serde_json::json!(["f"])
    );
}

#[test]
fn controller_owner_ref_blocks_owner_deletion() {
    let rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            uid: Some("u".into()),
            ..ObjectMeta::default()
        },
        ..ReplicaSet::default()
    };
    let r = controller_owner_ref(&rs);
    assert_eq!(
        r.as_ref().map(|r| (r.controller, r.block_owner_deletion)),
        Some((Some(true), Some(true)))
    );
    assert_eq!(r.map(|r| r.api_version).as_deref(), Some("apps/v1"));
    assert!(controller_owner_ref(&ReplicaSet::default()).is_none());
}

fn rs_owner(uid: &str, deleting: bool) -> serde_json::Value {
    let mut v = serde_json::json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "ns", "uid": uid}});
    if deleting {
        v["metadata"]["deletionTimestamp"] = serde_json::json!("2024-01-01T00:00:00Z");
    }
    v
}

fn owner_rs() -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("owner-uid".into()),
            ..ObjectMeta::default()
        },
        ..ReplicaSet::default()
    }
}

/// Answers GET of the owner with `owner`, 404 for pod `gone`, and echoes patched pods.
fn server(owner: serde_json::Value) -> FakeApi {
    let api = FakeApi::new();
    api.on("GET", "**", Reply::ok(owner))
        .on("*", "**/pods/gone", Reply::not_found("pods", "gone"))
        .on_fn("PATCH", "**", |req| {
            let name = req.path.rsplit('/').next().unwrap_or_default();
            Reply::ok(
                serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "ownerReferences": req.body["metadata"]["ownerReferences"]}}),
            )
        });
    api
}

#[tokio::test]
async fn claim_adopts_after_one_fresh_get_and_releases() {
    let api = server(rs_owner("owner-uid", false));
    let client = api.client();
    let m = ControllerRefManager::new(
        &owner_rs(),
        Api::<ReplicaSet>::namespaced(client.clone(), "ns"),
        Api::<Pod>::namespaced(client, "ns"),
    );
    let Ok(mut m) = m else { panic!("manager") };
    let cands = vec![
        pod("owned", "web", vec![oref("owner-uid", true)]),
        pod("stale", "db", vec![oref("owner-uid", true)]),
        pod("orphan1", "web", vec![]),
        pod("orphan2", "web", vec![]),
        pod("gone", "web", vec![]),
    ];
    let out = m.claim(&cands, is_web).await;
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(names(&out.claimed), vec!["owned", "orphan1", "orphan2"]);
    let reqs = api.requests();
    let gets = reqs.iter().filter(|r| r.method == "GET").count();
    assert_eq!(gets, 1, "the owner is re-read once per pass");
    assert_eq!(reqs[1].method, "GET");
    assert_eq!(reqs[1].path, "/apis/apps/v1/namespaces/ns/replicasets/web");
    let release = &reqs[0];
    assert_eq!(release.path, "/api/v1/namespaces/ns/pods/stale");
    assert_eq!(
        release.content_type,
        "application/strategic-merge-patch+json"
    );
    assert_eq!(release.body, release_patch("owner-uid", "stale-uid", &[]));
    let adopt = reqs
        .iter()
        .find(|r| r.path.ends_with("/orphan1"))
        .map(|r| r.body.clone());
    assert_eq!(
        adopt,
        Some(adopt_patch(&m.owner().clone(), "orphan1-uid", &[]))
    );
}

/// The Job controller's tracking finalizer goes on with the adoption and comes off with the
/// release, in the same patch (upstream `AdoptPod` / `ReleasePod` with the manager's
/// finalizers), so a released pod does not keep it until the orphan worker's later pass.
#[tokio::test]
async fn manager_finalizers_are_added_on_adoption_and_removed_on_release() {
    let api = server(rs_owner("owner-uid", false));
    let client = api.client();
    let m = ControllerRefManager::new(
        &owner_rs(),
        Api::<ReplicaSet>::namespaced(client.clone(), "ns"),
        Api::<Pod>::namespaced(client, "ns"),
    );
    let Ok(m) = m else { panic!("manager") };
    let fin = vec!["batch.kubernetes.io/job-tracking".to_owned()];
    let mut m = m.with_finalizers(fin.clone());
    let cands = vec![
        pod("stale", "db", vec![oref("owner-uid", true)]),
        pod("orphan1", "web", vec![]),
    ];
    let out = m.claim(&cands, is_web).await;
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let body = |name: &str| {
        api.requests()
            .iter()
            .find(|r| r.method == "PATCH" && r.path.ends_with(name))
            .map(|r| r.body.clone())
    };
    let release = body("/stale").expect("release patch");
    assert_eq!(release, release_patch("owner-uid", "stale-uid", &fin));
    assert_eq!(
        release["metadata"]["$deleteFromPrimitiveList/finalizers"],
        serde_json::json!(fin)
    );
    let adopt = body("/orphan1").expect("adoption patch");
    assert_eq!(adopt["metadata"]["finalizers"], serde_json::json!(fin));
}

#[tokio::test]
async fn claim_refuses_adoption_into_recreated_or_deleting_owner() {
    for (uid, dying, want) in [
        (
            "new-uid",
            false,
            "is gone: got uid new-uid, wanted owner-uid",
        ),
        ("owner-uid", true, "has just been deleted at"),
    ] {
        let api = server(rs_owner(uid, dying));
        let client = api.client();
        let m = ControllerRefManager::new(
            &owner_rs(),
            Api::<ReplicaSet>::namespaced(client.clone(), "ns"),
            Api::<Pod>::namespaced(client, "ns"),
        );
        let Ok(mut m) = m else { panic!("manager") };
        let cands = vec![pod("orphan1", "web", vec![]), pod("orphan2", "web", vec![])];
        let out = m.claim(&cands, is_web).await;
        assert!(out.claimed.is_empty());
        assert_eq!(out.errors.len(), 2);
        let msg = out.errors[0].to_string();
        assert!(
            msg.starts_with("can't adopt Pod ns/orphan1 (orphan1-uid): "),
            "{msg}"
        );
        assert!(msg.contains(want), "{msg}");
        assert!(
            api.requests().iter().all(|r| r.method == "GET"),
            "no patch may be sent"
        );
        assert_eq!(api.count(), 1);
    }
}

#[tokio::test]
async fn release_ignores_not_found_and_invalid() {
    let api = FakeApi::new();
    api.on("*", "**/pods/a", Reply::not_found("pods", "a"))
        .on(
            "*",
            "**/pods/b",
            Reply::invalid("Pod", "b", &[("metadata.ownerReferences", "invalid")]),
        )
        .on("*", "**", Reply::internal("boom"));
    let client = api.client();
    let m = ControllerRefManager::new(
        &owner_rs(),
        Api::<ReplicaSet>::namespaced(client.clone(), "ns"),
        Api::<Pod>::namespaced(client, "ns"),
    );
    let Ok(mut m) = m else { panic!("manager") };
    let cands = vec![
        pod("a", "db", vec![oref("owner-uid", true)]),
        pod("b", "db", vec![oref("owner-uid", true)]),
        pod("c", "db", vec![oref("owner-uid", true)]),
    ];
    let out = m.claim(&cands, is_web).await;
    assert_eq!(out.errors.len(), 1);
    assert!(out.into_result().is_err());
}

#[test]
fn resolve_controller_ref_checks_kind_and_uid() {
    use crate::cache::Informer;
    use kube::runtime::watcher;
    let rs = |name: &str, uid: &str| -> ReplicaSet {
        let mut rs = ReplicaSet::default();
        rs.metadata.name = Some(name.into());
        rs.metadata.namespace = Some("ns".into());
        rs.metadata.uid = Some(uid.into());
        rs.metadata.resource_version = Some("1".into());
        rs
    };
    let informer = Informer::<ReplicaSet>::detached();
    informer.feed(watcher::Event::Apply(rs("web", "u1")));
    let store = informer.store();
    let reference = |kind: &str, name: &str, uid: &str| OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        ..OwnerReference::default()
    };
    let found = resolve_controller_ref(&store, "ns", &reference("ReplicaSet", "web", "u1"));
    assert_eq!(
        found.and_then(|o| o.metadata.uid.clone()).as_deref(),
        Some("u1")
    );
    for (kind, name, uid, ns, why) in [
        ("ReplicaSet", "web", "u2", "ns", "re-created owner"),
        ("Deployment", "web", "u1", "ns", "other kind"),
        ("ReplicaSet", "db", "u1", "ns", "not cached"),
        ("ReplicaSet", "web", "u1", "other", "other namespace"),
    ] {
        assert!(
            resolve_controller_ref(&store, ns, &reference(kind, name, uid)).is_none(),
            "{why}"
        );
    }
    let mut seen = String::new();
    let none = resolve_controller_ref_with::<ReplicaSet>(
        |key| {
            seen = key.to_owned();
            None
        },
        "ns",
        &reference("ReplicaSet", "web", "u1"),
    );
    assert!(none.is_none());
    assert_eq!(seen, "ns/web");
}
