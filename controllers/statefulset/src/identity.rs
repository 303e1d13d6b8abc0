//! Pod identity and storage of a StatefulSet member, and the pod predicates the ordering
//! rules use. Pure.
//!
//! Mirrors the identity half of upstream `pkg/controller/statefulset/stateful_set_utils.go`:
//! `getParentNameAndOrdinal`, `getPodName`, `getPersistentVolumeClaimName`, `isMemberOf`,
//! `identityMatches`, `storageMatches`, `getPersistentVolumeClaims`, `updateStorage`,
//! `initIdentity`/`updateIdentity`, `newStatefulSetPod`, `newVersionedStatefulSetPod`,
//! `getStartOrdinal`/`getEndOrdinal`/`podInOrdinalRange` and the `is*` predicates.

use std::collections::BTreeMap;

use k8s_openapi::Metadata;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    self as core, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rkcm_runtime::cache::cached::{self, Pod};
use rkcm_runtime::workload::controller_ref::controller_owner_ref;
use rkcm_runtime::workload::podcontrol::{PodOptions, pod_from_template};

use crate::consts::{labels, phase, policy, retention, strategy};
use rkcm_runtime::workload::pod::{is_pod_available, is_pod_ready};

/// The parent name and ordinal encoded in a pod name `<parent>-<digits>` (upstream's regex
/// `(.*)-([0-9]+)$`). The ordinal is `None` when the digits do not fit an int32; the parent is
/// `None` when the name has no such suffix.
pub fn parent_and_ordinal(name: &str) -> (Option<&str>, Option<i32>) {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits >= name.len() {
        return (None, None);
    }
    let split = name.len() - digits;
    if name.as_bytes()[split - 1] != b'-' {
        return (None, None);
    }
    let parent = &name[..split - 1];
    (Some(parent), name[split..].parse::<i32>().ok())
}

fn name_of(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// The pod's ordinal, or `None` (upstream -1).
pub fn ordinal(pod: &Pod) -> Option<i32> {
    meta_ordinal(&pod.metadata)
}

/// [`ordinal`] of a pod's metadata.
fn meta_ordinal(meta: &ObjectMeta) -> Option<i32> {
    parent_and_ordinal(meta.name.as_deref().unwrap_or_default()).1
}

/// `<set>-<ordinal>`.
pub fn pod_name(set_name: &str, ordinal: i32) -> String {
    format!("{set_name}-{ordinal}")
}

/// `<template>-<set>-<ordinal>`.
pub fn claim_name(template_name: &str, set_name: &str, ordinal: i32) -> String {
    format!("{template_name}-{set_name}-{ordinal}")
}

pub fn set_name(set: &StatefulSet) -> &str {
    set.metadata.name.as_deref().unwrap_or_default()
}

pub fn set_namespace(set: &StatefulSet) -> &str {
    set.metadata.namespace.as_deref().unwrap_or_default()
}

/// `spec.replicas`, 1 when unset (the apiserver default).
pub fn replicas(set: &StatefulSet) -> i32 {
    Some(&set.spec).and_then(|s| s.replicas).unwrap_or(1)
}

/// `spec.ordinals.start`, 0 when unset.
pub fn start_ordinal(set: &StatefulSet) -> i32 {
    Some(&set.spec)
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

/// The last ordinal in range (`start + replicas - 1`).
pub fn end_ordinal(set: &StatefulSet) -> i32 {
    start_ordinal(set)
        .saturating_add(replicas(set))
        .saturating_sub(1)
}

/// The pod's ordinal lies in `[start, end]`.
pub fn in_ordinal_range(set: &StatefulSet, pod: &Pod) -> bool {
    ordinal(pod).is_some_and(|o| o >= start_ordinal(set) && o <= end_ordinal(set))
}

/// The pod's name says it belongs to `set` (parent name equal).
pub fn is_member_of(set: &StatefulSet, pod: &Pod) -> bool {
    parent_and_ordinal(name_of(pod)).0 == Some(set_name(set))
}

/// `OrderedReady` (default): one pod at a time. `Parallel` is burst.
pub fn is_monotonic(set: &StatefulSet) -> bool {
    Some(&set.spec).and_then(|s| s.pod_management_policy.as_deref()) != Some(policy::PARALLEL)
}

/// `spec.updateStrategy.type`, `RollingUpdate` when unset.
pub fn strategy_type(set: &StatefulSet) -> &str {
    Some(&set.spec)
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        .unwrap_or(strategy::ROLLING_UPDATE)
}

/// `rollingUpdate.partition` when `rollingUpdate` is set (0 when its partition is unset).
pub fn partition(set: &StatefulSet) -> Option<i32> {
    Some(&set.spec)?
        .update_strategy
        .as_ref()?
        .rolling_update
        .as_ref()
        .map(|r| r.partition.unwrap_or(0))
}

pub fn min_ready_seconds(set: &StatefulSet) -> i32 {
    Some(&set.spec)
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

pub fn service_name(set: &StatefulSet) -> Option<String> {
    Some(&set.spec).and_then(|s| s.service_name.clone())
}

pub fn claim_templates(set: &StatefulSet) -> &[PersistentVolumeClaim] {
    Some(&set.spec)
        .and_then(|s| s.volume_claim_templates.as_deref())
        .unwrap_or_default()
}

/// Whether a retention field says `Delete` (anything else, including unset, is `Retain`).
fn is_delete(v: Option<&String>) -> bool {
    v.map(String::as_str) == Some(retention::DELETE)
}

/// `(whenDeleted == Delete, whenScaled == Delete)`.
pub fn retention_policy(set: &StatefulSet) -> (bool, bool) {
    let p = Some(&set.spec).and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    (
        is_delete(p.and_then(|p| p.when_deleted.as_ref())),
        is_delete(p.and_then(|p| p.when_scaled.as_ref())),
    )
}

/// `controller-revision-hash` of a pod ("" when absent).
pub fn pod_revision(pod: &Pod) -> &str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::REVISION))
        .map_or("", String::as_str)
}

pub fn set_pod_revision(pod: &mut impl Metadata<Ty = ObjectMeta>, revision: &str) {
    pod.metadata_mut()
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::REVISION.to_string(), revision.to_string());
}

/// `identityMatches`: name, namespace and the pod-name label agree with the ordinal.
pub fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let name = name_of(pod);
    let (parent, ord) = parent_and_ordinal(name);
    let Some(ord) = ord else { return false };
    ord >= 0
        && parent == Some(set_name(set))
        && name == pod_name(set_name(set), ord)
        && pod.metadata.namespace.as_deref().unwrap_or_default() == set_namespace(set)
        && pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::POD_NAME))
            .is_some_and(|v| v == name)
}

/// `storageMatches`: every claim template has a volume of that name using the right claim.
pub fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let Some(ord) = ordinal(pod).filter(|o| *o >= 0) else {
        return false;
    };
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    claim_templates(set).iter().all(|t| {
        let tname = t.metadata.name.as_deref().unwrap_or_default();
        volumes.iter().any(|v| {
            v.name == tname
                && v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.claim_name == claim_name(tname, set_name(set), ord))
        })
    })
}

/// `getPersistentVolumeClaims`: the claims of ordinal `ord`, in template order, each paired
/// with its template name. Labels are the template's with the selector's `matchLabels`
/// written over them; everything else comes from the template.
pub fn claims_for(set: &StatefulSet, ord: i32) -> Vec<(String, PersistentVolumeClaim)> {
    let match_labels = Some(&set.spec)
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    claim_templates(set)
        .iter()
        .map(|t| {
            let tname = t.metadata.name.clone().unwrap_or_default();
            let mut claim = t.clone();
            claim.metadata.name = Some(claim_name(&tname, set_name(set), ord));
            claim.metadata.namespace = Some(set_namespace(set).to_string());
            let mut l = claim.metadata.labels.take().unwrap_or_default();
            l.extend(match_labels.clone());
            claim.metadata.labels = (!l.is_empty()).then_some(l);
            (tname, claim)
        })
        .collect()
}

/// A pod volume as [`update_storage`] rewrites it: the cached one or the whole one.
pub trait ClaimVolume: Sized {
    fn name(&self) -> &str;
    /// A volume `name` using claim `claim_name`.
    fn for_claim(name: String, claim_name: String) -> Self;
}

impl ClaimVolume for core::Volume {
    fn name(&self) -> &str {
        &self.name
    }
    fn for_claim(name: String, claim_name: String) -> Self {
        core::Volume {
            name,
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name,
                read_only: None,
            }),
            ..core::Volume::default()
        }
    }
}

impl ClaimVolume for cached::Volume {
    fn name(&self) -> &str {
        &self.name
    }
    fn for_claim(name: String, claim_name: String) -> Self {
        cached::Volume {
            name,
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name,
                read_only: None,
            }),
        }
    }
}

/// `updateStorage`: template volumes point at their claims (replacing same-named volumes);
/// other volumes are kept after them. `None` when the set has no claim templates (nothing
/// changes).
pub fn storage_volumes<V: ClaimVolume>(
    set: &StatefulSet,
    ord: i32,
    current: Option<Vec<V>>,
) -> Option<Vec<V>> {
    let claims = claims_for(set, ord);
    if claims.is_empty() {
        return current;
    }
    let mut volumes: Vec<V> = claims
        .iter()
        .map(|(tname, claim)| {
            V::for_claim(
                tname.clone(),
                claim.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    volumes.extend(
        current
            .unwrap_or_default()
            .into_iter()
            .filter(|v| !claims.iter().any(|(t, _)| t == v.name())),
    );
    Some(volumes)
}

/// [`storage_volumes`] on a cached pod.
pub fn update_storage(set: &StatefulSet, pod: &mut Pod) {
    let Some(ord) = ordinal(pod) else { return };
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.volumes = storage_volumes(set, ord, spec.volumes.take());
}

/// `updateIdentity`: name, namespace, pod-name and pod-index labels.
pub fn update_identity(set: &StatefulSet, pod: &mut impl Metadata<Ty = ObjectMeta>) {
    let Some(ord) = meta_ordinal(pod.metadata()) else {
        return;
    };
    let name = pod_name(set_name(set), ord);
    let meta = pod.metadata_mut();
    meta.name = Some(name.clone());
    meta.namespace = Some(set_namespace(set).to_string());
    let l = meta.labels.get_or_insert_with(BTreeMap::new);
    l.insert(labels::POD_NAME.to_string(), name);
    l.insert(labels::POD_INDEX.to_string(), ord.to_string());
}

/// `initIdentity`: [`update_identity`] plus the immutable hostname and subdomain.
pub fn init_identity(set: &StatefulSet, pod: &mut core::Pod) {
    update_identity(set, pod);
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = pod.metadata.name.clone();
    spec.subdomain = service_name(set);
}

/// `newStatefulSetPod`: the pod of ordinal `ord` from `set`'s template.
pub fn new_pod(set: &StatefulSet, ord: i32) -> core::Pod {
    let template = Some(&set.spec)
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let mut pod = pod_from_template(
        &template,
        set_name(set),
        controller_owner_ref(set),
        &PodOptions::default(),
    );
    pod.metadata.name = Some(pod_name(set_name(set), ord));
    init_identity(set, &mut pod);
    if let Some(spec) = pod.spec.as_mut() {
        spec.volumes = storage_volumes(set, ord, spec.volumes.take());
    }
    pod
}

/// `newVersionedStatefulSetPod`: ordinals below the partition (or, without `rollingUpdate`,
/// below `start + status.currentReplicas`) come from the current revision, all others from
/// the update revision. Upstream's condition groups as `(RollingUpdate && nil && below
/// current) || (set && below partition)`; reproduced as written.
pub fn new_versioned_pod(
    current_set: &StatefulSet,
    update_set: &StatefulSet,
    current_revision: &str,
    update_revision: &str,
    ord: i32,
) -> core::Pod {
    let start = start_ordinal(current_set);
    let current_replicas = current_set
        .status
        .as_ref()
        .and_then(|s| s.current_replicas)
        .unwrap_or(0);
    let use_current = match partition(current_set) {
        None => {
            strategy_type(current_set) == strategy::ROLLING_UPDATE
                && ord < start.saturating_add(current_replicas)
        }
        Some(p) => ord < start.saturating_add(p),
    };
    let (set, rev) = if use_current {
        (current_set, current_revision)
    } else {
        (update_set, update_revision)
    };
    let mut pod = new_pod(set, ord);
    set_pod_revision(&mut pod, rev);
    pod
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The pod exists (a placeholder has no phase).
pub fn is_created(pod: &Pod) -> bool {
    !phase(pod).is_empty()
}

pub fn is_failed(pod: &Pod) -> bool {
    phase(pod) == phase::FAILED
}

pub fn is_succeeded(pod: &Pod) -> bool {
    phase(pod) == phase::SUCCEEDED
}

pub fn is_pending(pod: &Pod) -> bool {
    phase(pod) == phase::PENDING
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

pub fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == phase::RUNNING && is_pod_ready(pod)
}

pub fn is_running_and_available(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    phase(pod) == phase::RUNNING && is_pod_available(pod, min_ready_seconds, now)
}

pub fn is_healthy(pod: &Pod) -> bool {
    is_running_and_ready(pod) && !is_terminating(pod)
}

/// `isUnavailable`: not available, or terminating.
pub fn is_unavailable(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    !is_pod_available(pod, min_ready_seconds, now) || is_terminating(pod)
}

#[cfg(test)]
#[path = "identity/tests.rs"]
mod tests;
