use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::testutil::{ds, ds_with, pod};

/// `getPatch` bytes upstream v1.37 writes for the test DaemonSet (its template: labels
/// app=ds, one container `c` with image `img:1`, as the apiserver returns it).
const UPSTREAM_PATCH: &str = r#"{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"ds"}},"spec":{"containers":[{"image":"img:1","name":"c","resources":{}}]}}}}"#;

#[test]
fn patch_bytes_are_upstreams() {
    assert_eq!(String::from_utf8_lossy(&patch_bytes(&ds())), UPSTREAM_PATCH);
}

#[test]
fn patch_adds_fields_go_always_writes_and_escapes_like_go() {
    // A template as a client might hold it: no container resources, no metadata.
    let d = ds_with(json!({"spec": {"template": {"metadata": null, "spec": {
        "containers": [{"name": "c", "image": "img:1", "resources": null, "args": ["a<b>&c"]}],
        "initContainers": [{"name": "i", "image": "busybox"}]
    }}}}));
    assert_eq!(
        String::from_utf8_lossy(&patch_bytes(&d)),
        r#"{"spec":{"template":{"$patch":"replace","metadata":{},"spec":{"containers":[{"args":["a\u003cb\u003e\u0026c"],"image":"img:1","name":"c","resources":{}}],"initContainers":[{"image":"busybox","name":"i","resources":{}}]}}}}"#
    );
}

fn rev(
    name: &str,
    number: i64,
    data: serde_json::Value,
    hash: Option<&str>,
) -> Arc<ControllerRevision> {
    let mut labels = serde_json::Map::new();
    if let Some(h) = hash {
        labels.insert("controller-revision-hash".into(), json!(h));
    }
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "data": data, "revision": number
        }))
        .unwrap_or_else(|e| panic!("{e}")),
    )
}

#[test]
fn an_upstream_revision_is_current_so_takeover_creates_none() {
    let upstream: serde_json::Value = serde_json::from_str(UPSTREAM_PATCH).unwrap_or_default();
    let revs = vec![
        rev(
            "ds-old",
            1,
            json!({"spec": {"template": {"$patch": "replace", "metadata": {}, "spec": {"containers": [{"name": "c", "image": "img:0", "resources": {}}]}}}}),
            Some("old"),
        ),
        rev("ds-upstream", 2, upstream, Some("5d9f")),
    ];
    let h = split_history(&ds(), &revs);
    assert_eq!(h.current.len(), 1);
    assert_eq!(h.current[0].metadata.name.as_deref(), Some("ds-upstream"));
    assert_eq!(
        revision_hash(&h.current[0]),
        "5d9f",
        "pods get the label's hash"
    );
    assert_eq!(h.old.len(), 1);
    // A template change makes no revision current.
    let changed = ds_with(
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "img:2", "resources": {}}]}}}}),
    );
    assert!(split_history(&changed, &revs).current.is_empty());
}

#[test]
fn new_revision_shape() {
    let d = ds_with(
        json!({"metadata": {"annotations": {"note": "x"}}, "status": {"collisionCount": 2}}),
    );
    let Some(r) = new_revision(&d, 4) else {
        panic!("no revision")
    };
    let (hash, name) = hash_and_name(&d);
    assert_eq!(r.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(name, format!("ds-{hash}"));
    assert_ne!(
        hash,
        hash_and_name(&ds()).0,
        "the collision count changes the hash"
    );
    let l = r.metadata.labels.clone().unwrap_or_default();
    assert_eq!(l.get("controller-revision-hash"), Some(&hash));
    assert_eq!(l.get("app").map(String::as_str), Some("ds"));
    assert_eq!(
        r.metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get("note")
            .map(String::as_str),
        Some("x")
    );
    let owner = r.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!(
        (
            owner[0].kind.as_str(),
            owner[0].uid.as_str(),
            owner[0].controller,
            owner[0].block_owner_deletion
        ),
        ("DaemonSet", "ds-uid", Some(true), Some(true))
    );
    assert_eq!(r.revision, Some(4));
    assert!(matches(&patch_bytes(&d), &r));
    // The request body carries the data bytes exactly.
    let body = String::from_utf8_lossy(&create_body(&r)).into_owned();
    assert!(
        body.contains(&format!(
            "\"data\":{}",
            String::from_utf8_lossy(&patch_bytes(&d))
        )),
        "{body}"
    );
    assert!(
        body.contains(r#""apiVersion":"apps/v1""#)
            && body.contains(r#""kind":"ControllerRevision""#)
    );
}

#[test]
fn long_names_are_not_truncated() {
    let long = "d".repeat(250);
    let d = ds_with(json!({"metadata": {"name": long}}));
    let (hash, name) = hash_and_name(&d);
    assert_eq!(name.len(), 250 + 1 + hash.len());
}

#[test]
fn keeper_is_the_highest_revision() {
    let d = json!({});
    let revs = vec![
        rev("a", 3, d.clone(), None),
        rev("b", 5, d.clone(), None),
        rev("c", 5, d.clone(), None),
        rev("d", 1, d, None),
    ];
    assert_eq!(
        keeper(&revs)
            .and_then(|r| r.metadata.name.clone())
            .as_deref(),
        Some("c")
    );
    assert_eq!(max_revision(&revs), 5);
    assert_eq!(max_revision::<Arc<ControllerRevision>>(&[]), 0);
}

#[test]
fn history_cleanup_keeps_the_limit_and_live_hashes() {
    let d = json!({});
    let old = vec![
        rev("r3", 3, d.clone(), Some("h3")),
        rev("r1", 1, d.clone(), Some("h1")),
        rev("r2", 2, d.clone(), Some("h2")),
        rev("r4", 4, d.clone(), Some("h4")),
    ];
    let live = vec![
        pod("p", "n", "h1", 0).build(),
        pod("q", "n", "h4", 0).deleting().phase("Failed").build(),
    ];
    let names = |v: Vec<Arc<ControllerRevision>>| {
        v.iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(history_to_delete(&old, &live, 1)),
        vec!["r2", "r3"],
        "r1 and r4 are in use; oldest unused first"
    );
    assert_eq!(names(history_to_delete(&old, &live, 3)), vec!["r2"]);
    assert!(history_to_delete(&old, &live, 4).is_empty());
    assert_eq!(
        names(history_to_delete(&old, &[], 0)),
        vec!["r1", "r2", "r3", "r4"]
    );
    assert_eq!(
        names(history_to_delete(&old, &live, 0)),
        vec!["r2", "r3"],
        "never one a pod still uses"
    );
}
