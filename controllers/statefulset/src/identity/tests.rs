use super::*;
use crate::testutil::*;
use k8s_openapi::api::core::v1::EmptyDirVolumeSource;

#[test]
fn parent_and_ordinal_follow_upstreams_pattern() {
    let cases: &[(&str, Option<&str>, Option<i32>)] = &[
        ("web-0", Some("web"), Some(0)),
        ("web-12", Some("web"), Some(12)),
        ("my-web-3", Some("my-web"), Some(3)),
        ("-3", Some(""), Some(3)),
        ("web", None, None),
        ("web-", None, None),
        ("web-x1", None, None),
        ("web-0a", None, None),
        ("3", None, None),
        // Digits beyond int32: a parent but no ordinal (upstream -1).
        ("web-99999999999", Some("web"), None),
    ];
    for (name, parent, ord) in cases {
        assert_eq!(parent_and_ordinal(name), (*parent, *ord), "{name}");
    }
}

#[test]
fn names_of_pods_and_claims() {
    assert_eq!(pod_name("web", 3), "web-3");
    assert_eq!(claim_name("data", "web", 0), "data-web-0");
}

#[test]
fn new_pod_has_identity_storage_and_owner() {
    let mut s = with_claim_template(set(3), "data");
    s.spec.ordinals = Some(k8s_openapi::api::apps::v1::StatefulSetOrdinals { start: Some(5) });
    // A template volume named like the claim template is replaced; others are kept.
    if let Some(spec) = s.spec.template.spec.as_mut() {
        spec.volumes = Some(vec![
            core::Volume {
                name: "data".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..core::Volume::default()
            },
            core::Volume {
                name: "scratch".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..core::Volume::default()
            },
        ]);
    }
    let p = new_pod(&s, 6);
    assert_eq!(p.metadata.name.as_deref(), Some("web-6"));
    assert_eq!(p.metadata.generate_name.as_deref(), Some("web-"));
    assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
    let l = p.metadata.labels.clone().unwrap_or_default();
    assert_eq!(l.get(labels::POD_NAME).map(String::as_str), Some("web-6"));
    assert_eq!(l.get(labels::POD_INDEX).map(String::as_str), Some("6"));
    assert_eq!(l.get("app").map(String::as_str), Some("web"));
    let spec = p.spec.clone().unwrap_or_default();
    assert_eq!(spec.hostname.as_deref(), Some("web-6"));
    assert_eq!(spec.subdomain.as_deref(), Some("web"));
    let vols = spec.volumes.unwrap_or_default();
    assert_eq!(vols.len(), 2);
    let data = vols.iter().find(|v| v.name == "data");
    assert_eq!(
        data.and_then(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.as_str()),
        Some("data-web-6")
    );
    assert!(data.is_some_and(|v| v.empty_dir.is_none()));
    assert!(
        vols.iter()
            .any(|v| v.name == "scratch" && v.empty_dir.is_some())
    );
    let refs = p.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (
            refs[0].kind.as_str(),
            refs[0].uid.as_str(),
            refs[0].controller,
            refs[0].block_owner_deletion
        ),
        ("StatefulSet", SET_UID, Some(true), Some(true))
    );
    let cached = Pod::from(&p);
    assert!(identity_matches(&s, &cached));
    assert!(storage_matches(&s, &cached));
    assert!(in_ordinal_range(&s, &cached));
    assert_eq!((start_ordinal(&s), end_ordinal(&s)), (5, 7));
}

#[test]
fn claim_labels_are_the_templates_with_the_selector_on_top() {
    let s = with_claim_template(set(1), "data");
    let claims = claims_for(&s, 0);
    assert_eq!(claims.len(), 1);
    let (t, c) = &claims[0];
    assert_eq!(t, "data");
    assert_eq!(c.metadata.name.as_deref(), Some("data-web-0"));
    assert_eq!(c.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(
        c.metadata.labels.clone().unwrap_or_default(),
        crate::testutil::labels(&[("app", "web"), ("tier", "db")])
    );
}

#[test]
fn identity_and_storage_mismatches_are_detected_and_repaired() {
    let s = with_claim_template(set(3), "data");
    let good = pod(&s, 1, "r1", State::Ready(60));
    assert!(identity_matches(&s, &good) && storage_matches(&s, &good));

    let mut no_label = good.clone();
    if let Some(l) = no_label.metadata.labels.as_mut() {
        l.remove(labels::POD_NAME);
        l.remove(labels::POD_INDEX);
    }
    assert!(!identity_matches(&s, &no_label));
    update_identity(&s, &mut no_label);
    assert!(identity_matches(&s, &no_label));
    assert_eq!(
        no_label
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::POD_INDEX))
            .map(String::as_str),
        Some("1")
    );

    let mut other_ns = good.clone();
    other_ns.metadata.namespace = Some("elsewhere".into());
    assert!(!identity_matches(&s, &other_ns));

    let mut foreign = good.clone();
    foreign.metadata.name = Some("db-1".into());
    assert!(!identity_matches(&s, &foreign));

    let mut no_volume = good.clone();
    if let Some(spec) = no_volume.spec.as_mut() {
        spec.volumes = None;
    }
    assert!(!storage_matches(&s, &no_volume));
    update_storage(&s, &mut no_volume);
    assert!(storage_matches(&s, &no_volume));
}

#[test]
fn versioned_pods_below_the_partition_use_the_current_revision() {
    let mut current = set(4);
    current.spec.template = crate::testutil::template("old");
    let mut update = set(4);
    update.spec.template = crate::testutil::template("new");
    let image = |p: &core::Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
    };
    for (partition, ord, want_rev, want_image) in [
        (0, 0, "web-new", "new"),
        (2, 1, "web-old", "old"),
        (2, 2, "web-new", "new"),
        (4, 3, "web-old", "old"),
    ] {
        let mut c = current.clone();
        let mut u = update.clone();
        for s in [&mut c, &mut u] {
            if let Some(r) = s
                .spec
                .update_strategy
                .as_mut()
                .and_then(|u| u.rolling_update.as_mut())
            {
                r.partition = Some(partition);
            }
        }
        let p = new_versioned_pod(&c, &u, "web-old", "web-new", ord);
        assert_eq!(
            pod_revision(&Pod::from(&p)),
            want_rev,
            "partition {partition} ordinal {ord}"
        );
        assert_eq!(image(&p).as_deref(), Some(want_image));
    }
    // OnDelete: the update revision.
    let mut c = current.clone();
    c.spec.update_strategy = Some(k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy {
        type_: Some("OnDelete".into()),
        rolling_update: None,
    });
    if let Some(st) = c.status.as_mut() {
        st.current_replicas = Some(3);
    }
    assert_eq!(
        pod_revision(&Pod::from(new_versioned_pod(
            &c, &update, "web-old", "web-new", 0
        ))),
        "web-new"
    );
}

#[test]
fn predicates() {
    let s = set(1);
    let now = now();
    let ready = pod(&s, 0, "r", State::Ready(5));
    assert!(is_created(&ready) && is_running_and_ready(&ready) && is_healthy(&ready));
    assert!(is_running_and_available(&ready, 0, now));
    assert!(is_running_and_available(&ready, 4, now));
    assert!(
        !is_running_and_available(&ready, 5, now),
        "strictly after minReadySeconds"
    );
    assert!(is_unavailable(&ready, 10, now));
    assert!(!is_unavailable(&ready, 0, now));
    let t = terminating(ready.clone());
    assert!(!is_healthy(&t) && is_unavailable(&t, 0, now));
    assert!(is_failed(&pod(&s, 0, "r", State::Failed)));
    assert!(is_succeeded(&pod(&s, 0, "r", State::Succeeded)));
    assert!(is_pending(&pod(&s, 0, "r", State::Pending)));
    assert!(!is_running_and_ready(&pod(&s, 0, "r", State::Unready)));
    assert!(!is_created(&Pod::from(new_pod(&s, 0))));
}

#[test]
fn policies_and_defaults() {
    let mut s = set(2);
    assert!(is_monotonic(&s));
    assert!(!is_monotonic(&parallel(s.clone())));
    assert_eq!(strategy_type(&s), "RollingUpdate");
    assert_eq!(partition(&s), Some(0));
    assert_eq!(retention_policy(&s), (false, false));
    assert_eq!(
        retention_policy(&with_policy(s.clone(), "Delete", "Retain")),
        (true, false)
    );
    s.spec.replicas = None;
    assert_eq!(replicas(&s), 1);
    s.spec.update_strategy = None;
    assert_eq!(partition(&s), None);
}

#[test]
fn a_stateful_pod_is_written_whole_in_protobuf() {
    // The pod of ordinal 1 with its identity (name, hostname, subdomain, labels) and a claim
    // volume from a claim template. The pod encoder must know every field of it, or the create
    // falls back to JSON.
    let mut s = set(3);
    s.spec.volume_claim_templates = Some(vec![
        serde_json::from_value(serde_json::json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}))
        .expect("claim template"),
    ]);
    if let Some(spec) = s.spec.template.spec.as_mut() {
        spec.containers[0].volume_mounts = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "data", "mountPath": "/data"}))
                .expect("mount"),
        ]);
    }
    let pod = new_pod(&s, 1);
    let value = serde_json::to_value(&pod).expect("pod JSON");
    assert!(value.to_string().contains("data-web-1"), "{value}");
    assert_eq!(rkcm_testkit::written_whole_in_protobuf(&pod), Ok(()));
}
