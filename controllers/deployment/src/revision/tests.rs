//! Mirrors upstream `TestMaxRevision`, `TestLastRevision`, `TestAnnotationUtils`
//! (`SetNewReplicaSetAnnotations`, revision-history), `TestReplicaSetsByRevision`-style
//! cases and the rollback annotation helpers.

use std::collections::BTreeMap;

use super::*;
use crate::model::tests::{R, dep25};

fn with_revision(name: &'static str, revision: &'static str) -> Rs {
    let annotations: &'static [(&'static str, &'static str)] = match revision {
        "" => &[],
        "1" => &[("deployment.kubernetes.io/revision", "1")],
        "2" => &[("deployment.kubernetes.io/revision", "2")],
        "3" => &[("deployment.kubernetes.io/revision", "3")],
        "10" => &[("deployment.kubernetes.io/revision", "10")],
        _ => &[("deployment.kubernetes.io/revision", "bogus")],
    };
    R {
        name,
        annotations,
        ..R::default()
    }
    .build()
}

fn ann(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref()?.get(key).cloned()
}

#[test]
fn revisions_are_numeric() {
    assert_eq!(revision(&with_revision("a", "")), Ok(0));
    assert_eq!(revision(&with_revision("a", "10")), Ok(10));
    assert!(revision(&with_revision("a", "x")).is_err());
    // "10" > "9" numerically, not lexically; unparsable ones are skipped.
    let rss = [
        with_revision("a", "2"),
        with_revision("b", "10"),
        with_revision("c", "x"),
        with_revision("d", "3"),
    ];
    assert_eq!(max_revision(&rss), 10);
    assert_eq!(last_revision(&rss), 3);
    assert_eq!(max_revision(&[]), 0);
    assert_eq!(last_revision(&[with_revision("a", "1")]), 0);
    assert_eq!(
        last_revision(&[with_revision("a", "1"), with_revision("b", "1")]),
        1,
        "ties count twice"
    );
}

#[test]
fn history_is_capped() {
    assert_eq!(append_history("", "1", 2000).as_deref(), Some("1"));
    assert_eq!(append_history("1,2", "3", 2000).as_deref(), Some("1,2,3"));
    // Oldest entries go first to make room.
    assert_eq!(
        append_history("11,22,33", "44", 8).as_deref(),
        Some("22,33,44")
    );
    assert_eq!(
        append_history("11,22,33", "44", 6).as_deref(),
        Some("33,44")
    );
    // Even the new entry alone does not fit: nothing is appended.
    assert_eq!(append_history("1,2", "123456", 5), None);
    // A long history stays within 2000 characters.
    let long: Vec<String> = (1..=600).map(|i| i.to_string()).collect();
    let history = long.join(",");
    assert!(history.len() > 2000);
    let capped = append_history(&history, "601", 2000).expect("fits");
    assert!(capped.len() <= 2000);
    assert!(capped.ends_with(",600,601"));
}

#[test]
fn new_rs_annotations_on_create() {
    let mut d = dep25(10);
    d.metadata.annotations = Some(BTreeMap::from([
        ("kubernetes.io/change-cause".to_owned(), "v2".to_owned()),
        ("team".to_owned(), "a".to_owned()),
        (annotations::LAST_APPLIED_CONFIG.to_owned(), "{}".to_owned()),
        (annotations::REVISION.to_owned(), "7".to_owned()),
        (annotations::ROLLBACK_TO.to_owned(), "1".to_owned()),
    ]));
    let mut meta = ObjectMeta::default();
    assert!(set_new_rs_annotations(&d, &mut meta, 3, false, 2000));
    let got = meta.annotations.clone().unwrap_or_default();
    let want = BTreeMap::from([
        ("kubernetes.io/change-cause".to_owned(), "v2".to_owned()),
        ("team".to_owned(), "a".to_owned()),
        (annotations::REVISION.to_owned(), "3".to_owned()),
        (annotations::DESIRED_REPLICAS.to_owned(), "10".to_owned()),
        (annotations::MAX_REPLICAS.to_owned(), "13".to_owned()),
    ]);
    assert_eq!(got, want);
}

#[test]
fn new_rs_annotations_on_existing() {
    let d = dep25(10);
    // Up to date: nothing changes, replica annotations are left alone.
    let mut meta = with_revision("a", "3").metadata.clone();
    assert!(!set_new_rs_annotations(&d, &mut meta, 3, true, 2000));
    assert_eq!(ann(&meta, annotations::DESIRED_REPLICAS), None);
    // A higher revision is never lowered.
    let mut meta = with_revision("a", "10").metadata.clone();
    assert!(!set_new_rs_annotations(&d, &mut meta, 3, true, 2000));
    assert_eq!(ann(&meta, annotations::REVISION).as_deref(), Some("10"));
    // Reused after a rollback: revision raised, the previous one recorded.
    let mut meta = with_revision("a", "1").metadata.clone();
    assert!(set_new_rs_annotations(&d, &mut meta, 3, true, 2000));
    assert_eq!(ann(&meta, annotations::REVISION).as_deref(), Some("3"));
    assert_eq!(
        ann(&meta, annotations::REVISION_HISTORY).as_deref(),
        Some("1")
    );
    assert!(set_new_rs_annotations(&d, &mut meta, 5, true, 2000));
    assert_eq!(
        ann(&meta, annotations::REVISION_HISTORY).as_deref(),
        Some("1,3")
    );
    // No revision yet (adopted RS): set, with no history.
    let mut meta = with_revision("a", "").metadata.clone();
    assert!(set_new_rs_annotations(&d, &mut meta, 1, true, 2000));
    assert_eq!(ann(&meta, annotations::REVISION).as_deref(), Some("1"));
    assert_eq!(ann(&meta, annotations::REVISION_HISTORY), None);
    // An unparsable revision stops the update.
    let mut meta = with_revision("a", "x").metadata.clone();
    assert!(!set_new_rs_annotations(&d, &mut meta, 3, true, 2000));
    assert_eq!(ann(&meta, annotations::REVISION).as_deref(), Some("bogus"));
}

#[test]
fn annotation_copy_never_removes() {
    let mut d = dep25(1);
    d.metadata.annotations = Some(BTreeMap::from([("team".to_owned(), "b".to_owned())]));
    let mut meta = ObjectMeta {
        annotations: Some(BTreeMap::from([
            ("team".to_owned(), "a".to_owned()),
            ("other".to_owned(), "x".to_owned()),
            (annotations::REVISION.to_owned(), "1".to_owned()),
        ])),
        ..ObjectMeta::default()
    };
    assert!(set_new_rs_annotations(&d, &mut meta, 1, true, 2000));
    assert_eq!(ann(&meta, "team").as_deref(), Some("b"));
    assert_eq!(ann(&meta, "other").as_deref(), Some("x"));
}

#[test]
fn deployment_revision() {
    let mut d = dep25(1);
    assert!(!set_deployment_revision(&mut d, ""), "missing equals empty");
    assert!(set_deployment_revision(&mut d, "1"));
    assert!(!set_deployment_revision(&mut d, "1"));
    assert!(set_deployment_revision(&mut d, "2"));
    assert_eq!(
        ann(&d.metadata, annotations::REVISION).as_deref(),
        Some("2")
    );
}

#[test]
fn rollback_annotation() {
    let mut d = dep25(1);
    assert_eq!(rollback_to(&d), None);
    for (value, want) in [("0", Some(0)), ("3", Some(3)), ("", None), ("x", None)] {
        d.metadata.annotations = Some(BTreeMap::from([(
            annotations::ROLLBACK_TO.to_owned(),
            value.to_owned(),
        )]));
        assert_eq!(rollback_to(&d), want, "{value:?}");
    }
    clear_rollback_to(&mut d);
    assert_eq!(ann(&d.metadata, annotations::ROLLBACK_TO), None);
}

#[test]
fn rollback_copies_revision_annotations_back() {
    let mut d = dep25(1);
    d.metadata.annotations = Some(BTreeMap::from([
        ("kubernetes.io/change-cause".to_owned(), "edit".to_owned()),
        ("only-on-deployment".to_owned(), "x".to_owned()),
        (annotations::REVISION.to_owned(), "2".to_owned()),
        (annotations::LAST_APPLIED_CONFIG.to_owned(), "{}".to_owned()),
    ]));
    let rs = R {
        name: "v1",
        annotations: &[
            ("kubernetes.io/change-cause", "create"),
            ("deployment.kubernetes.io/revision", "1"),
            ("deployment.kubernetes.io/desired-replicas", "1"),
        ],
        ..R::default()
    }
    .rs();
    set_deployment_annotations_to(&mut d, &rs);
    let want = BTreeMap::from([
        ("kubernetes.io/change-cause".to_owned(), "create".to_owned()),
        (annotations::REVISION.to_owned(), "2".to_owned()),
        (annotations::LAST_APPLIED_CONFIG.to_owned(), "{}".to_owned()),
    ]);
    assert_eq!(d.metadata.annotations, Some(want));
    assert!(skip_copy(annotations::MAX_REPLICAS) && !skip_copy("team"));
}
