//! Owner references of volume claims under `persistentVolumeClaimRetentionPolicy`. Pure.
//!
//! Mirrors `isClaimOwnerUpToDate`, `updateClaimOwnerRefForSetAndPod`, `hasOwnerRef`,
//! `hasStaleOwnerRef`, `matchesRef`, `addControllerRef`, `hasUnexpectedController` and
//! `hasNonControllerOwner` of upstream `pkg/controller/statefulset/stateful_set_utils.go`.
//!
//! | whenDeleted | whenScaled | pod in range | pod condemned |
//! |---|---|---|---|
//! | Retain | Retain | no ref | no ref |
//! | Delete | Retain | set | set |
//! | Retain | Delete | none | pod |
//! | Delete | Delete | set | pod |

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use rkcm_runtime::cache::cached::Pod;

use crate::identity::{in_ordinal_range, retention_policy};

const SET_API_VERSION: &str = "apps/v1";
const SET_KIND: &str = "StatefulSet";
const POD_API_VERSION: &str = "v1";
const POD_KIND: &str = "Pod";

/// Name and UID of one of the two possible owners (the set, or the pod).
#[derive(Debug, Clone, Copy)]
struct Owner<'a> {
    api_version: &'static str,
    kind: &'static str,
    name: &'a str,
    uid: &'a str,
}

fn set_owner(set: &StatefulSet) -> Owner<'_> {
    Owner {
        api_version: SET_API_VERSION,
        kind: SET_KIND,
        name: set.metadata.name.as_deref().unwrap_or_default(),
        uid: set.metadata.uid.as_deref().unwrap_or_default(),
    }
}

fn pod_owner(pod: &Pod) -> Owner<'_> {
    Owner {
        api_version: POD_API_VERSION,
        kind: POD_KIND,
        name: pod.metadata.name.as_deref().unwrap_or_default(),
        uid: pod.metadata.uid.as_deref().unwrap_or_default(),
    }
}

fn refs(claim: &PersistentVolumeClaim) -> &[OwnerReference] {
    claim
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
}

/// `matchesRef`: same apiVersion, kind and name (UID not compared).
fn matches_ref(r: &OwnerReference, owner: Owner<'_>) -> bool {
    r.api_version == owner.api_version && r.kind == owner.kind && r.name == owner.name
}

/// `hasOwnerRef`: some reference carries the owner's UID.
fn has_owner_ref(claim: &PersistentVolumeClaim, owner: Owner<'_>) -> bool {
    refs(claim).iter().any(|r| r.uid == owner.uid)
}

/// `hasStaleOwnerRef`: the first reference naming the owner has another UID.
fn has_stale_owner_ref(claim: &PersistentVolumeClaim, owner: Owner<'_>) -> bool {
    refs(claim)
        .iter()
        .find(|r| matches_ref(r, owner))
        .is_some_and(|r| r.uid != owner.uid)
}

/// The claim refers to a pod of this name with another UID (for a pod not yet created, any
/// reference to its name): it belongs to an earlier pod and waits for the garbage collector.
pub fn claim_is_stale_for_pod(claim: &PersistentVolumeClaim, pod: &Pod) -> bool {
    has_stale_owner_ref(claim, pod_owner(pod))
}

/// `hasUnexpectedController`: with a non-Retain/Retain policy, some other object controls
/// the claim (or a reference to our set or pod carries a foreign UID).
pub fn has_unexpected_controller(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    let (when_deleted, when_scaled) = retention_policy(set);
    if !when_deleted && !when_scaled {
        return false;
    }
    let (s, p) = (set_owner(set), pod_owner(pod));
    for r in refs(claim) {
        if matches_ref(r, s) {
            if r.uid != s.uid {
                return true;
            }
            continue;
        }
        if matches_ref(r, p) {
            if r.uid != p.uid {
                return true;
            }
            continue;
        }
        if r.controller == Some(true) {
            return true;
        }
    }
    false
}

/// `hasNonControllerOwner`: our set or pod is an owner without being the controller.
fn has_non_controller_owner(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> bool {
    let (s, p) = (set_owner(set), pod_owner(pod));
    refs(claim)
        .iter()
        .any(|r| (r.uid == s.uid || r.uid == p.uid) && r.controller != Some(true))
}

/// `isClaimOwnerUpToDate`: the claim's references agree with the policy (claims in an
/// unknown state, with stale references or a foreign controller and none of ours, count as
/// up to date so they are left alone).
pub fn is_claim_owner_up_to_date(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    let (s, p) = (set_owner(set), pod_owner(pod));
    if has_stale_owner_ref(claim, s) || has_stale_owner_ref(claim, p) {
        return true;
    }
    if has_unexpected_controller(claim, set, pod) {
        return !(has_owner_ref(claim, s) || has_owner_ref(claim, p));
    }
    if has_non_controller_owner(claim, set, pod) {
        return false;
    }
    let (when_deleted, when_scaled) = retention_policy(set);
    let scaled_down = !in_ordinal_range(set, pod);
    let (has_set, has_pod) = (has_owner_ref(claim, s), has_owner_ref(claim, p));
    match (when_deleted, when_scaled) {
        (false, false) => !has_set && !has_pod,
        (true, false) => has_set && !has_pod,
        (false, true) => !has_set && scaled_down == has_pod,
        (true, true) => scaled_down != has_set && scaled_down == has_pod,
    }
}

fn controller_ref(owner: Owner<'_>) -> OwnerReference {
    OwnerReference {
        api_version: owner.api_version.to_string(),
        kind: owner.kind.to_string(),
        name: owner.name.to_string(),
        uid: owner.uid.to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// `addControllerRef`: appends a controller reference unless one with the UID exists.
fn add_controller_ref(refs: &mut Vec<OwnerReference>, owner: Owner<'_>) {
    if !refs.iter().any(|r| r.uid == owner.uid) {
        refs.push(controller_ref(owner));
    }
}

/// `updateClaimOwnerRefForSetAndPod`: drops every reference to our set or pod (by
/// apiVersion/kind/name), then, unless a foreign controller is present, adds the controller
/// references the policy wants.
pub fn update_claim_owner_refs(claim: &mut PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) {
    let unexpected = has_unexpected_controller(claim, set, pod);
    let (s, p) = (set_owner(set), pod_owner(pod));
    let mut new_refs: Vec<OwnerReference> = refs(claim)
        .iter()
        .filter(|r| !matches_ref(r, s) && !matches_ref(r, p))
        .cloned()
        .collect();
    if !unexpected {
        let (when_deleted, when_scaled) = retention_policy(set);
        let scaled_down = !in_ordinal_range(set, pod);
        match (when_deleted, when_scaled) {
            (false, false) => {}
            (true, false) => add_controller_ref(&mut new_refs, s),
            (false, true) => {
                if scaled_down {
                    add_controller_ref(&mut new_refs, p);
                }
            }
            (true, true) => {
                if scaled_down {
                    add_controller_ref(&mut new_refs, p);
                } else {
                    add_controller_ref(&mut new_refs, s);
                }
            }
        }
    }
    claim.metadata.owner_references = (!new_refs.is_empty()).then_some(new_refs);
}

#[cfg(test)]
#[path = "retention/tests.rs"]
mod tests;
