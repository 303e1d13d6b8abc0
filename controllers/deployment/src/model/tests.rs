//! Shared fixtures for the pure modules' table tests, and the tests of `model`: orders,
//! template equality (upstream `TestEqualIgnoreHash`, `TestFindNewReplicaSet`,
//! `TestFindOldReplicaSets`) and counts (`TestGetReplicaCountForReplicaSets`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
    RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

pub(crate) fn now() -> jiff::Timestamp {
    "2026-06-01T12:00:00Z".parse().expect("valid timestamp")
}

/// `now` minus `secs` seconds.
pub(crate) fn ago(secs: i64) -> jiff::Timestamp {
    now()
        .checked_sub(jiff::SignedDuration::from_secs(secs))
        .expect("in range")
}

pub(crate) fn pct(s: &str) -> IntOrString {
    IntOrString::String(s.to_owned())
}

pub(crate) fn int(i: i32) -> IntOrString {
    IntOrString::Int(i)
}

pub(crate) fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some(image.into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

/// A Deployment `ns/web` (uid `d-uid`), RollingUpdate with the given fenceposts.
pub(crate) fn dep(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("d-uid".into()),
            generation: Some(1),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                ..LabelSelector::default()
            },
            template: template("v2"),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(surge),
                    max_unavailable: Some(unavailable),
                }),
            }),
            progress_deadline_seconds: Some(600),
            revision_history_limit: Some(10),
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

/// The default 25%/25% Deployment.
pub(crate) fn dep25(replicas: i32) -> Deployment {
    dep(replicas, pct("25%"), pct("25%"))
}

pub(crate) fn recreate(replicas: i32) -> Deployment {
    let mut d = dep25(replicas);
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
    d
}

pub(crate) fn with_status_replicas(mut d: Deployment, replicas: i32) -> Deployment {
    let mut status = d.status.unwrap_or_default();
    status.replicas = Some(replicas);
    d.status = Some(status);
    d
}

/// A ReplicaSet builder.
#[derive(Clone)]
pub(crate) struct R {
    pub name: &'static str,
    pub replicas: i32,
    pub status_replicas: i32,
    pub available: i32,
    pub ready: i32,
    /// Creation time, seconds before `now()`.
    pub age: i64,
    pub image: &'static str,
    pub annotations: &'static [(&'static str, &'static str)],
}

impl Default for R {
    fn default() -> Self {
        Self {
            name: "rs",
            replicas: 0,
            status_replicas: 0,
            available: 0,
            ready: 0,
            age: 100,
            image: "v1",
            annotations: &[],
        }
    }
}

impl R {
    pub(crate) fn rs(&self) -> ReplicaSet {
        let mut t = template(self.image);
        if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            labels.insert("pod-template-hash".into(), format!("h-{}", self.name));
        }
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(self.name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("{}-uid", self.name)),
                creation_timestamp: Some(Time(ago(self.age))),
                annotations: (!self.annotations.is_empty()).then(|| {
                    self.annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect()
                }),
                generation: Some(1),
                ..ObjectMeta::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(self.replicas),
                template: Some(t),
                ..ReplicaSetSpec::default()
            },
            status: Some(ReplicaSetStatus {
                replicas: self.status_replicas,
                available_replicas: Some(self.available),
                ready_replicas: Some(self.ready),
                observed_generation: Some(1),
                ..ReplicaSetStatus::default()
            }),
        }
    }

    pub(crate) fn build(&self) -> Rs {
        Arc::new(self.rs())
    }
}

/// `(name, replicas, available)` of an RS at full health, running image `image`.
pub(crate) fn healthy(name: &'static str, n: i32, image: &'static str, age: i64) -> Rs {
    R {
        name,
        replicas: n,
        status_replicas: n,
        available: n,
        ready: n,
        age,
        image,
        ..R::default()
    }
    .build()
}

/// RS `old` of `n` replicas (image `v1`).
pub(crate) fn rs_old(n: i32) -> Rs {
    R {
        name: "old",
        replicas: n,
        ..R::default()
    }
    .build()
}

/// RS `new` of `n` replicas, image `v2`.
pub(crate) fn rs_new(n: i32) -> Rs {
    R {
        name: "new",
        replicas: n,
        image: "v2",
        ..R::default()
    }
    .build()
}

/// RS `name` of `replicas` replicas carrying `annotations`.
pub(crate) fn annotated(
    name: &'static str,
    replicas: i32,
    annotations: &'static [(&'static str, &'static str)],
) -> Rs {
    R {
        name,
        replicas,
        annotations,
        ..R::default()
    }
    .build()
}

/// The Progressing condition `NewReplicaSetCreated` for RS `web-abc`, last changed `at`.
pub(crate) fn new_rs_created(at: jiff::Timestamp) -> crate::status::Condition {
    crate::status::Condition {
        type_: "Progressing".into(),
        status: "True".into(),
        reason: "NewReplicaSetCreated".into(),
        message: "Created new replica set \"web-abc\"".into(),
        last_update_time: Some(at),
        last_transition_time: Some(at),
    }
}

/// `r` owned by the `web` Deployment (uid `d-uid`).
pub(crate) fn owned(r: R) -> ReplicaSet {
    let mut rs = r.rs();
    rs.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "web".into(),
        uid: "d-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    rs
}

pub(crate) fn names(rss: &[Rs]) -> Vec<&str> {
    rss.iter().map(|rs| rs_name(rs)).collect()
}

#[test]
fn accessors_use_api_defaults() {
    let d = Deployment::default();
    assert_eq!(desired(&d), 1);
    assert_eq!(strategy_type(&d), "RollingUpdate");
    assert!(!is_paused(&d));
    assert_eq!(progress_deadline(&d), None);
    let mut d = dep25(3);
    d.spec.progress_deadline_seconds = Some(i32::MAX);
    d.spec.revision_history_limit = Some(i32::MAX);
    assert_eq!(progress_deadline(&d), None, "MaxInt32 means no deadline");
    assert_eq!(revision_history_limit(&d), None);
    assert_eq!(replicas(&ReplicaSet::default()), 1);
}

#[test]
fn creation_order_breaks_ties_by_name() {
    let mut rss = vec![
        R {
            name: "b",
            age: 10,
            ..R::default()
        }
        .build(),
        R {
            name: "a",
            age: 10,
            ..R::default()
        }
        .build(),
        R {
            name: "c",
            age: 50,
            ..R::default()
        }
        .build(),
    ];
    sort_by_creation(&mut rss);
    assert_eq!(names(&rss), ["c", "a", "b"]);
}

#[test]
fn size_orders() {
    let rss = vec![
        R {
            name: "small",
            replicas: 1,
            age: 10,
            ..R::default()
        }
        .build(),
        R {
            name: "old",
            replicas: 5,
            age: 50,
            ..R::default()
        }
        .build(),
        R {
            name: "new",
            replicas: 5,
            age: 10,
            ..R::default()
        }
        .build(),
    ];
    let mut newer = rss.clone();
    newer.sort_by(|a, b| by_size_newer(a, b));
    assert_eq!(names(&newer), ["new", "old", "small"]);
    let mut older = rss;
    older.sort_by(|a, b| by_size_older(a, b));
    assert_eq!(names(&older), ["old", "new", "small"]);
}

#[test]
fn equal_ignore_hash_cases() {
    let with_hash = |t: &PodTemplateSpec, h: &str| {
        let mut t = t.clone();
        if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            l.insert("pod-template-hash".into(), h.into());
        }
        t
    };
    let base = template("v1");
    // Same spec, only the hash differs (or is missing on one side).
    assert!(equal_ignore_hash(
        &with_hash(&base, "a"),
        &with_hash(&base, "b")
    ));
    assert!(equal_ignore_hash(&base, &with_hash(&base, "b")));
    // Different image.
    assert!(!equal_ignore_hash(&base, &template("v2")));
    // Other labels differ.
    let mut other = base.clone();
    if let Some(l) = other.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        l.insert("tier".into(), "fe".into());
    }
    assert!(!equal_ignore_hash(&base, &other));
    // Empty vs absent maps and lists are equal, as in Semantic.DeepEqual.
    let mut empty = base.clone();
    if let Some(m) = empty.metadata.as_mut() {
        m.annotations = Some(BTreeMap::new());
    }
    if let Some(s) = empty.spec.as_mut() {
        s.volumes = Some(Vec::new());
        s.containers[0].args = Some(Vec::new());
    }
    assert!(equal_ignore_hash(&base, &empty));
    // A template annotation makes a difference.
    let mut annotated = base.clone();
    if let Some(m) = annotated.metadata.as_mut() {
        m.annotations = Some(BTreeMap::from([("a".to_owned(), "b".to_owned())]));
    }
    assert!(!equal_ignore_hash(&base, &annotated));
}

#[test]
fn new_is_the_oldest_matching_and_old_is_everything_else() {
    let d = dep25(3);
    let older_match = R {
        name: "m1",
        image: "v2",
        age: 50,
        ..R::default()
    }
    .build();
    let newer_match = R {
        name: "m2",
        image: "v2",
        age: 10,
        ..R::default()
    }
    .build();
    let other = R {
        name: "o",
        image: "v1",
        age: 80,
        ..R::default()
    }
    .build();
    let rss = vec![newer_match, other, older_match];
    let (new, old) = split(&d, &rss);
    assert_eq!(new.as_deref().map(rs_name), Some("m1"));
    assert_eq!(names(&old), ["o", "m2"], "oldest first");
    let (new, old) = split(&d, &rss[1..2]);
    assert!(new.is_none());
    assert_eq!(names(&old), ["o"]);
}

#[test]
fn counts() {
    let rss = vec![
        R {
            name: "a",
            replicas: 3,
            status_replicas: 2,
            available: 1,
            ready: 2,
            ..R::default()
        }
        .build(),
        R {
            name: "b",
            replicas: 1,
            status_replicas: 1,
            available: 1,
            ready: 1,
            ..R::default()
        }
        .build(),
    ];
    assert_eq!(sum_spec(&rss), 4);
    assert_eq!(sum_status(&rss), 3);
    assert_eq!(sum_ready(&rss), 3);
    assert_eq!(sum_available(&rss), 2);
    assert_eq!(names(&active(&rss)), ["a", "b"]);
}

#[test]
fn terminating_counts_skip_unsynced_and_poison_on_unknown() {
    let with = |name: &'static str, observed: i64, terminating: Option<i32>| {
        let mut rs = R {
            name,
            ..R::default()
        }
        .rs();
        if let Some(s) = rs.status.as_mut() {
            s.observed_generation = Some(observed);
            s.terminating_replicas = terminating;
        }
        Arc::new(rs)
    };
    let synced = [with("a", 1, Some(2)), with("b", 3, Some(1))];
    assert_eq!(sum_terminating(&synced), Some(3));
    let unsynced = [with("a", 1, Some(2)), with("new", 0, None)];
    assert_eq!(sum_terminating(&unsynced), Some(2));
    let unknown = [with("a", 1, Some(2)), with("old", 2, None)];
    assert_eq!(sum_terminating(&unknown), None);
    assert_eq!(sum_terminating(&[]), Some(0));
}

#[test]
fn rollback_template_drops_the_hash() {
    let t = R {
        name: "x",
        ..R::default()
    }
    .rs();
    let back = template_without_hash(t.spec.template.as_ref().expect("template"));
    assert_eq!(back, template("v1"));
}
