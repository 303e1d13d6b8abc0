use super::*;
use crate::testutil::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rkcm_runtime::workload::history::{CONTROLLER_REVISION_HASH_LABEL, hash_controller_revision};

/// What upstream v1.37.1 `getPatch` returns for set `web` whose template is {labels
/// app=web; one container nginx, image nginx} as the apiserver returns it (the Go struct
/// `resources` is always encoded), and the revision name upstream's
/// `HashControllerRevision(data, collisionCount=0)` gives it.
const UPSTREAM_PATCH: &str = r#"{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"image":"nginx","name":"nginx","resources":{}}]}}}}"#;
const UPSTREAM_NAME: &str = "web-867477dd4f";

#[test]
fn patch_bytes_and_name_are_upstreams() {
    let s = set(3);
    let bytes = patch_bytes(&s).unwrap_or_default();
    assert_eq!(String::from_utf8_lossy(&bytes), UPSTREAM_PATCH);
    let r = new_revision(&s, 1, 0).unwrap_or_default();
    assert_eq!(r.metadata.name.as_deref(), Some(UPSTREAM_NAME));
    let l = r.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        l.get(CONTROLLER_REVISION_HASH_LABEL).map(String::as_str),
        Some("867477dd4f")
    );
    assert_eq!(l.get("app").map(String::as_str), Some("web"));
    assert_eq!(r.revision, Some(1));
    assert_eq!(r.metadata.namespace.as_deref(), Some("ns"));
    let refs = r.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(
        (refs.len(), refs[0].kind.as_str(), refs[0].controller),
        (1, "StatefulSet", Some(true))
    );
    // A collision count renames.
    let r1 = new_revision(&s, 1, 1).unwrap_or_default();
    assert_eq!(
        r1.metadata.name,
        Some(format!(
            "web-{}",
            hash_controller_revision(UPSTREAM_PATCH.as_bytes(), Some(1))
        ))
    );
}

#[test]
fn patch_bytes_use_go_escaping_and_sorted_keys() {
    let mut s = set(1);
    if let Some(m) = s.spec.template.metadata.as_mut() {
        m.annotations = Some(labels(&[("z", "a<b>&c"), ("a", "x")]));
    }
    let text = String::from_utf8_lossy(&patch_bytes(&s).unwrap_or_default()).into_owned();
    assert!(
        text.contains(r#""annotations":{"a":"x","z":"a\u003cb\u003e\u0026c"}"#),
        "{text}"
    );
    assert!(
        text.starts_with(r#"{"spec":{"template":{"$patch":"replace","metadata":{"annotations""#),
        "{text}"
    );
}

#[test]
fn revisions_carry_the_sets_annotations() {
    let mut s = set(1);
    s.metadata.annotations = Some(labels(&[("note", "n")]));
    let r = new_revision(&s, 2, 0).unwrap_or_default();
    assert_eq!(r.metadata.annotations, Some(labels(&[("note", "n")])));
}

#[test]
fn apply_revision_replaces_the_template() {
    let old = set(1);
    let r = new_revision(&old, 1, 0).unwrap_or_default();
    let mut newer = set(1);
    newer.spec.template = template("nginx:2");
    let applied = apply_revision(&newer, &r).unwrap_or_default();
    assert_eq!(applied.spec.template, old.spec.template);
    assert_eq!(applied.metadata, newer.metadata);
}

fn arc(r: ControllerRevision) -> Arc<ControllerRevision> {
    Arc::new(r)
}

#[test]
fn update_revision_is_reused_rolled_back_or_created() {
    let a = set(1);
    let mut b = set(1);
    b.spec.template = template("nginx:2");
    let ra = arc(new_revision(&a, 1, 0).unwrap_or_default());
    let rb = arc(new_revision(&b, 2, 0).unwrap_or_default());
    // No history: create revision 1.
    match choose_update(&a, &[], 0, true) {
        Ok(UpdateChoice::Create(r)) => {
            assert_eq!(r.revision, Some(1));
            assert_eq!(r.metadata.name.as_deref(), Some(UPSTREAM_NAME));
        }
        other => panic!("{other:?}"),
    }
    // Latest equals: reuse.
    assert_eq!(
        choose_update(&b, &[ra.clone(), rb.clone()], 0, true),
        Ok(UpdateChoice::Latest(rb.clone()))
    );
    // An older one equals: roll back to it with revision 3.
    assert_eq!(
        choose_update(&a, &[ra.clone(), rb.clone()], 0, true),
        Ok(UpdateChoice::Rollback(ra.clone(), 3))
    );
    // New template: create revision 3.
    let mut c = set(1);
    c.spec.template = template("nginx:3");
    match choose_update(&c, &[ra.clone(), rb.clone()], 0, true) {
        Ok(UpdateChoice::Create(r)) => assert_eq!(r.revision, Some(3)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn current_revision_is_found_by_name_or_defaults_to_update() {
    let a = set(1);
    let ra = arc(revision("web-a", 1, &a));
    let rb = arc(revision("web-b", 2, &a));
    let mut s = set(1);
    assert_eq!(current_revision(&s, &[ra.clone(), rb.clone()], &rb), rb);
    if let Some(st) = s.status.as_mut() {
        st.current_revision = Some("web-a".into());
    }
    assert_eq!(current_revision(&s, &[ra.clone(), rb.clone()], &rb), ra);
    if let Some(st) = s.status.as_mut() {
        st.current_revision = Some("gone".into());
    }
    assert_eq!(current_revision(&s, &[ra.clone(), rb.clone()], &rb), rb);
}

#[test]
fn history_keeps_live_revisions_and_the_newest_historic_ones() {
    let a = set(1);
    let revs: Vec<_> = (1..=5)
        .map(|i| {
            let mut r = revision(&format!("web-{i}"), i, &a);
            r.metadata.creation_timestamp = jiff::Timestamp::from_second(i).ok().map(Time);
            arc(r)
        })
        .collect();
    let names = |v: Vec<Arc<ControllerRevision>>| -> Vec<String> {
        v.iter()
            .map(|r| r.metadata.name.clone().unwrap_or_default())
            .collect()
    };
    let mut s = set(1);
    s.spec.revision_history_limit = Some(1);
    // Live: current web-4, update web-5, a pod at web-2. Historic: 1, 3 -> keep 3.
    let pods = arcs(vec![pod(&s, 0, "web-2", State::Ready(1))]);
    assert_eq!(
        names(revisions_to_delete(
            &s,
            &revs,
            &pods,
            Some("web-4"),
            Some("web-5")
        )),
        vec!["web-1"]
    );
    s.spec.revision_history_limit = Some(0);
    assert_eq!(
        names(revisions_to_delete(
            &s,
            &revs,
            &pods,
            Some("web-4"),
            Some("web-5")
        )),
        vec!["web-1", "web-3"]
    );
    s.spec.revision_history_limit = Some(10);
    assert!(revisions_to_delete(&s, &revs, &pods, Some("web-4"), Some("web-5")).is_empty());
    s.spec.revision_history_limit = Some(-1);
    assert!(revisions_to_delete(&s, &revs, &[], None, None).is_empty());
}

/// A revision stored by an earlier release (or re-serialized by another writer): the set's
/// template without defaults the v1.37 API server adds since (a `fileKeyRef`'s `optional`, a
/// gRPC probe's `service`), with `"creationTimestamp": null` in its metadata as older Go
/// encoders wrote it.
fn stored_before_upgrade(set: &StatefulSet, revision: i64) -> ControllerRevision {
    let mut r = new_revision(set, revision, 0).unwrap_or_default();
    let t = &mut r.data.0["spec"]["template"];
    t["metadata"]["creationTimestamp"] = serde_json::Value::Null;
    let c = &mut t["spec"]["containers"][0];
    if let Some(o) = c["env"][0]["valueFrom"]["fileKeyRef"].as_object_mut() {
        o.remove("optional");
    }
    if let Some(o) = c["readinessProbe"]["grpc"].as_object_mut() {
        o.remove("service");
    }
    r
}

/// The set as a v1.37 API server serves it: its template fully defaulted.
fn defaulted_set() -> StatefulSet {
    let mut s = set(3);
    s.spec.template = serde_json::from_value(serde_json::json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{
            "name": "nginx", "image": "nginx:1.27",
            "env": [{"name": "F", "valueFrom": {"fileKeyRef":
                {"volumeName": "v", "path": "p", "key": "k"}}}],
            "readinessProbe": {"grpc": {"port": 9000}}
        }]}
    }))
    .unwrap_or_default();
    crate::defaults::default_pod_template(&mut s.spec.template);
    s
}

/// Gate `StatefulSetSemanticRevisionComparison`: on (the default), a newest revision that
/// differs from the set only by defaults and encoding stays the update revision (no new
/// revision, no rollout); off, a new revision is created and every pod would roll.
#[test]
fn a_revision_re_serialized_with_added_defaults_starts_no_rollout() {
    let s = defaulted_set();
    let stored = arc(stored_before_upgrade(&s, 1));
    let proposed = new_revision(&s, 2, 0).unwrap_or_default();
    assert!(
        !equal_revision(&proposed, &stored),
        "the stored data differs from the set's: without the semantic comparison it is a new template"
    );
    assert_eq!(
        choose_update(&s, std::slice::from_ref(&stored), 0, true),
        Ok(UpdateChoice::Latest(stored.clone()))
    );
    match choose_update(&s, std::slice::from_ref(&stored), 0, false) {
        Ok(UpdateChoice::Create(r)) => assert_eq!(r.revision, Some(2)),
        other => panic!("gate off: {other:?}"),
    }
    // A real change is still a new revision.
    let mut changed = s.clone();
    if let Some(c) = changed
        .spec
        .template
        .spec
        .as_mut()
        .and_then(|p| p.containers.first_mut())
    {
        c.image = Some("nginx:1.28".into());
    }
    match choose_update(&changed, std::slice::from_ref(&stored), 0, true) {
        Ok(UpdateChoice::Create(r)) => assert_eq!(r.revision, Some(2)),
        other => panic!("changed image: {other:?}"),
    }
    // Only the newest revision is compared semantically: an older one lacking defaults is
    // not a rollback target (upstream `setMatchesLatestExistingRevision`).
    let newest = arc(new_revision(&changed, 2, 0).unwrap_or_default());
    match choose_update(&s, &[stored.clone(), newest], 0, true) {
        Ok(UpdateChoice::Create(r)) => assert_eq!(r.revision, Some(3)),
        other => panic!("older revision: {other:?}"),
    }
}
