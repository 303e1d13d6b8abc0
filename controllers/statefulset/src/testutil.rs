//! Builders for the table tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, RollingUpdateStatefulSetStrategy, StatefulSet,
    StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec, StatefulSetStatus,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};

use rkcm_runtime::cache::cached::Pod as CachedPod;

use crate::identity::{new_pod, set_pod_revision};

pub const NS: &str = "ns";
pub const SET_UID: &str = "set-uid";

pub fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_700_000_000).unwrap_or_default()
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

pub fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", "web")])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "nginx".into(),
                image: Some(image.into()),
                resources: Some(ResourceRequirements::default()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

/// StatefulSet `ns/web`: OrderedReady, RollingUpdate partition 0, selector app=web.
pub fn set(replicas: i32) -> StatefulSet {
    StatefulSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some(NS.into()),
            uid: Some(SET_UID.into()),
            generation: Some(1),
            ..ObjectMeta::default()
        },
        spec: StatefulSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..LabelSelector::default()
            },
            service_name: Some("web".into()),
            template: template("nginx"),
            pod_management_policy: Some("OrderedReady".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateStatefulSetStrategy {
                    partition: Some(0),
                    max_unavailable: None,
                }),
            }),
            revision_history_limit: Some(10),
            ..StatefulSetSpec::default()
        },
        status: Some(StatefulSetStatus::default()),
    }
}

pub fn parallel(mut s: StatefulSet) -> StatefulSet {
    s.spec.pod_management_policy = Some("Parallel".into());
    s
}

pub fn with_claim_template(mut s: StatefulSet, name: &str) -> StatefulSet {
    s.spec
        .volume_claim_templates
        .get_or_insert_with(Vec::new)
        .push(PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels(&[("tier", "db"), ("app", "other")])),
                ..ObjectMeta::default()
            },
            ..PersistentVolumeClaim::default()
        });
    s
}

pub fn with_policy(mut s: StatefulSet, when_deleted: &str, when_scaled: &str) -> StatefulSet {
    s.spec.persistent_volume_claim_retention_policy =
        Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
            when_deleted: Some(when_deleted.into()),
            when_scaled: Some(when_scaled.into()),
        });
    s
}

/// How a test pod looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Pending,
    /// Running and Ready since this many seconds before [`now`].
    Ready(i64),
    Unready,
    Failed,
    Succeeded,
}

/// An existing pod of `set` at ordinal `ord` and revision `rev`, as the pod cache holds it.
pub fn pod(set: &StatefulSet, ord: i32, rev: &str, state: State) -> CachedPod {
    CachedPod::from(whole_pod(set, ord, rev, state))
}

/// [`pod`] as the API server has it.
pub fn whole_pod(set: &StatefulSet, ord: i32, rev: &str, state: State) -> Pod {
    let mut p = new_pod(set, ord);
    set_pod_revision(&mut p, rev);
    p.metadata.uid = Some(format!("pod-uid-{ord}"));
    p.metadata.resource_version = Some("1".into());
    let (phase, ready, since) = match state {
        State::Pending => ("Pending", false, 0),
        State::Ready(s) => ("Running", true, s),
        State::Unready => ("Running", false, 0),
        State::Failed => ("Failed", false, 0),
        State::Succeeded => ("Succeeded", false, 0),
    };
    let at = now()
        .checked_sub(jiff::SignedDuration::from_secs(since))
        .unwrap_or_default();
    p.status = Some(PodStatus {
        phase: Some(phase.into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            last_transition_time: Some(Time(at)),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    });
    p
}

pub fn terminating(mut p: CachedPod) -> CachedPod {
    p.metadata.deletion_timestamp = Some(Time(now()));
    p
}

/// Pods as the controller's projected pod cache holds them.
pub fn arcs(pods: Vec<CachedPod>) -> Vec<Arc<CachedPod>> {
    pods.into_iter()
        .map(|p| {
            Arc::new(
                rkcm_runtime::cache::projection::projected(&p, crate::POD_FIELDS)
                    .expect("a fixture reads as the cache reads it"),
            )
        })
        .collect()
}

/// A cached claim with the given owner references.
pub fn claim(name: &str, refs: Vec<OwnerReference>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            owner_references: (!refs.is_empty()).then_some(refs),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        ..PersistentVolumeClaim::default()
    }
}

pub fn owner(
    api_version: &str,
    kind: &str,
    name: &str,
    uid: &str,
    controller: bool,
) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(controller),
        block_owner_deletion: Some(true),
    }
}

pub fn revision(name: &str, number: i64, set: &StatefulSet) -> ControllerRevision {
    let mut r = crate::revision::new_revision(set, number, 0).unwrap_or_default();
    r.metadata.name = Some(name.into());
    r
}
