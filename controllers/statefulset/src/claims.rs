//! The claim work of one pod, pure: which of its claims to create, which block it because
//! they are being deleted, which need their owner references brought in line with the
//! retention policy, and what `UpdateStatefulPod` changes on a pod.
//!
//! Mirrors the claim halves of upstream `stateful_pod_control.go`
//! (`createPersistentVolumeClaims`, `ClaimsMatchRetentionPolicy`,
//! `UpdatePodClaimForRetentionPolicy`, `PodClaimIsStale`, `UpdateStatefulPod`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use rkcm_runtime::cache::cached::Pod;

use crate::identity::{
    claims_for, identity_matches, ordinal, retention_policy, storage_matches, storage_volumes,
    update_identity, update_storage,
};
use crate::retention::{
    claim_is_stale_for_pod, has_unexpected_controller, is_claim_owner_up_to_date,
    update_claim_owner_refs,
};

/// Cached claims of the set's namespace, by name.
pub type Claims = BTreeMap<String, Arc<PersistentVolumeClaim>>;

/// Claims a pod needs created, and those blocking it because they are being deleted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimWork {
    pub create: Vec<PersistentVolumeClaim>,
    pub terminating: Vec<String>,
}

impl ClaimWork {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.terminating.is_empty()
    }
}

/// Claim owner-reference changes for one pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnerWork {
    /// Claims to PUT with corrected ownerReferences.
    pub updates: Vec<PersistentVolumeClaim>,
    /// Claims with a foreign controller (a `ConflictingController` event each).
    pub conflicting: Vec<String>,
}

impl OwnerWork {
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty() && self.conflicting.is_empty()
    }
}

/// One write (or group of writes) on behalf of one ordinal.
/// Claims of `pod`'s ordinal that are missing from the cache (to create) or being deleted.
pub fn claim_work(set: &StatefulSet, pod: &Pod, claims: &Claims) -> ClaimWork {
    let mut work = ClaimWork::default();
    let Some(ord) = ordinal(pod) else { return work };
    for (_, claim) in claims_for(set, ord) {
        let name = claim.metadata.name.clone().unwrap_or_default();
        match claims.get(&name) {
            None => work.create.push(claim),
            Some(c) if c.metadata.deletion_timestamp.is_some() => work.terminating.push(name),
            Some(_) => {}
        }
    }
    work
}

/// `UpdatePodClaimForRetentionPolicy` as data: owner-reference fixes of `pod`'s claims.
pub fn owner_work(set: &StatefulSet, pod: &Pod, claims: &Claims) -> OwnerWork {
    let mut work = OwnerWork::default();
    let Some(ord) = ordinal(pod) else { return work };
    for (_, want) in claims_for(set, ord) {
        let name = want.metadata.name.clone().unwrap_or_default();
        let Some(claim) = claims.get(&name) else {
            continue;
        };
        if has_unexpected_controller(claim, set, pod) {
            work.conflicting.push(name.clone());
        }
        if !is_claim_owner_up_to_date(claim, set, pod) {
            let mut updated = (**claim).clone();
            update_claim_owner_refs(&mut updated, set, pod);
            work.updates.push(updated);
        }
    }
    work
}

/// `ClaimsMatchRetentionPolicy`.
pub fn claims_match_policy(set: &StatefulSet, pod: &Pod, claims: &Claims) -> bool {
    let Some(ord) = ordinal(pod) else { return true };
    claims_for(set, ord).iter().all(|(_, want)| {
        let name = want.metadata.name.as_deref().unwrap_or_default();
        claims
            .get(name)
            .is_none_or(|c| is_claim_owner_up_to_date(c, set, pod))
    })
}

/// `PodClaimIsStale`: with `whenScaled: Delete`, some claim of the ordinal still refers to an
/// earlier pod of the same name.
pub fn pod_claim_is_stale(set: &StatefulSet, pod: &Pod, claims: &Claims) -> bool {
    let (_, when_scaled) = retention_policy(set);
    if !when_scaled {
        return false;
    }
    let Some(ord) = ordinal(pod) else {
        return false;
    };
    claims_for(set, ord).iter().any(|(_, want)| {
        claims
            .get(want.metadata.name.as_deref().unwrap_or_default())
            .is_some_and(|c| claim_is_stale_for_pod(c, pod))
    })
}

/// What `UpdateStatefulPod` does to one copy of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Repair {
    /// The pod with identity and storage corrected.
    pub pod: Pod,
    /// The pod must be written (something changed, or claim references were fixed).
    pub dirty: bool,
    /// Claims to create because the storage was rewritten.
    pub claims: ClaimWork,
    pub owners: OwnerWork,
}

/// `UpdateStatefulPod` as data, for one attempt on `pod` (the freshest copy).
pub fn repair(set: &StatefulSet, pod: &Pod, claims: &Claims) -> Repair {
    let mut out = pod.clone();
    let mut dirty = false;
    if !identity_matches(set, &out) {
        update_identity(set, &mut out);
        dirty = true;
    }
    let mut claim_work_ = ClaimWork::default();
    if !storage_matches(set, &out) {
        update_storage(set, &mut out);
        dirty = true;
        claim_work_ = claim_work(set, &out, claims);
    }
    let owners = if claims_match_policy(set, &out, claims) {
        OwnerWork::default()
    } else {
        dirty = true;
        owner_work(set, &out, claims)
    };
    Repair {
        pod: out,
        dirty,
        claims: claim_work_,
        owners,
    }
}

/// [`repair`] of the whole pod as the server has it, for the update the executor writes: the
/// decision is taken on the pod's cached view, and the identity and storage changes are made
/// on the whole pod, so fields the cache does not hold (volume sources, containers) survive.
pub fn repair_whole(
    set: &StatefulSet,
    mut whole: k8s_openapi::api::core::v1::Pod,
    claims: &Claims,
) -> (k8s_openapi::api::core::v1::Pod, Repair) {
    let view = Pod::from(&whole);
    if !identity_matches(set, &view) {
        update_identity(set, &mut whole);
    }
    if !storage_matches(set, &view)
        && let Some(ord) = ordinal(&view)
    {
        let spec = whole.spec.get_or_insert_with(Default::default);
        spec.volumes = storage_volumes(set, ord, spec.volumes.take());
    }
    let repair = repair(set, &view, claims);
    (whole, repair)
}
