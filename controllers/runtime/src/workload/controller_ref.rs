//! ControllerRef manager: adopt matching orphans, release owned children that stopped
//! matching (mirrors upstream `pkg/controller/controller_ref_manager.go`), and
//! [`resolve_controller_ref`], the `resolveControllerRef` every workload controller of
//! upstream (`pkg/controller/<name>/*_controller.go`) keeps a copy of.
//!
//! Guarantees:
//! - The decision is pure: [`plan_claims`] classifies candidates into owned / adopt / release
//!   from the owner, the children and a match function, with no I/O.
//! - Nothing is adopted or released while the owner is being deleted; children being deleted,
//!   children in another namespace and children controlled by someone else are never adopted.
//! - Before the first adoption of a claim pass the owner is re-read with a fresh, uncached GET
//!   and adoption is refused if it is gone, was re-created (different UID) or is being deleted.
//!   That check runs at most once per [`ControllerRefManager`] (create one per sync).
//! - Adoption and release are strategic-merge patches that carry the child's UID in
//!   `metadata.uid`, which the apiserver treats as a precondition: a child deleted and
//!   re-created under the same name is never adopted or released by mistake.
//! - NotFound on adopt or release, and Invalid on release (the ref is already gone or the
//!   child was re-created), are not errors, as upstream.
//!
//! Works for any namespaced child type with a strategic-merge schema: Pods, ReplicaSets,
//! ControllerRevisions.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::de::DeserializeOwned;

use crate::cache::{Informable, Store};
use crate::error::Error;

/// The controllerRef upstream's `metav1.NewControllerRef` builds for `owner`:
/// `{apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true}`. `None` when the
/// owner has no name or UID (not yet created).
pub fn controller_owner_ref<O: Resource<DynamicType = ()>>(owner: &O) -> Option<OwnerReference> {
    let mut r = owner.controller_owner_ref(&())?;
    r.block_owner_deletion = Some(true);
    Some(r)
}

/// The controller ownerReference of an object, if any (`metav1.GetControllerOf`).
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// `resolveControllerRef`: the cached owner that the controller reference `r` of a child in
/// `namespace` names, only if the reference's kind is `O`'s and the cached object has the
/// reference's UID (a re-created owner of the same name is a different owner). The API group
/// is not compared, as upstream: the UID already identifies the object.
pub fn resolve_controller_ref<O: Informable>(
    owners: &Store<O>,
    namespace: &str,
    r: &OwnerReference,
) -> Option<Arc<O>> {
    resolve_controller_ref_with(|key| owners.get(key), namespace, r)
}

/// [`resolve_controller_ref`] over any lookup by cache key (`namespace/name`).
pub fn resolve_controller_ref_with<O: Resource<DynamicType = ()>>(
    lookup: impl FnOnce(&str) -> Option<Arc<O>>,
    namespace: &str,
    r: &OwnerReference,
) -> Option<Arc<O>> {
    if r.kind != O::kind(&()) {
        return None;
    }
    let owner = lookup(&crate::keys::key(Some(namespace), &r.name))?;
    (owner.meta().uid.as_deref() == Some(r.uid.as_str())).then_some(owner)
}

/// What the manager needs to know about the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerInfo {
    /// `group/version` of the owner (`apps/v1`, `batch/v1`, `v1`).
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// `None` or empty for cluster-scoped owners.
    pub namespace: Option<String>,
    pub uid: String,
    /// The owner has a deletionTimestamp in the cache.
    pub deleting: bool,
}

impl OwnerInfo {
    /// From a typed owner; `None` if it has no name or UID.
    pub fn of<O: Resource<DynamicType = ()>>(owner: &O) -> Option<Self> {
        let meta = owner.meta();
        Some(Self {
            api_version: O::api_version(&()).into_owned(),
            kind: O::kind(&()).into_owned(),
            name: meta.name.clone()?,
            namespace: meta.namespace.clone().filter(|n| !n.is_empty()),
            uid: meta.uid.clone()?,
            deleting: meta.deletion_timestamp.is_some(),
        })
    }

    fn key(&self) -> String {
        crate::keys::key(self.namespace.as_deref(), &self.name)
    }
}

/// How one candidate child relates to the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Controlled by the owner and matching: ours, no action.
    Owned,
    /// Orphan that matches: adopt it.
    Adopt,
    /// Controlled by the owner but no longer matching: release it.
    Release,
    /// Not ours and not to be taken (other controller, no match, deleting, other namespace),
    /// or owned-but-unmatched while the owner is being deleted.
    Ignore,
}

/// Upstream `claimObject` as a pure decision. `matches` is the owner's selector (plus any
/// controller-specific filter) applied to the child.
pub fn classify(owner: &OwnerInfo, child: &ObjectMeta, matches: bool) -> Claim {
    if let Some(r) = controller_of(child) {
        if r.uid != owner.uid {
            return Claim::Ignore;
        }
        if matches {
            // Claiming what we already own needs no action, so it is allowed even while the
            // owner is being deleted.
            return Claim::Owned;
        }
        if owner.deleting {
            return Claim::Ignore;
        }
        return Claim::Release;
    }
    if owner.deleting || !matches || child.deletion_timestamp.is_some() {
        return Claim::Ignore;
    }
    if let Some(ns) = owner.namespace.as_deref()
        && child.namespace.as_deref().unwrap_or_default() != ns
    {
        return Claim::Ignore;
    }
    Claim::Adopt
}

/// The children of one claim pass by decision. Order within each list follows the input.
#[derive(Debug)]
pub struct ClaimPlan<K> {
    pub owned: Vec<Arc<K>>,
    pub adopt: Vec<Arc<K>>,
    pub release: Vec<Arc<K>>,
}

impl<K> Default for ClaimPlan<K> {
    fn default() -> Self {
        Self {
            owned: Vec::new(),
            adopt: Vec::new(),
            release: Vec::new(),
        }
    }
}

impl<K> ClaimPlan<K> {
    /// True when the pass needs no API call.
    pub fn is_noop(&self) -> bool {
        self.adopt.is_empty() && self.release.is_empty()
    }
}

/// Classifies every candidate. Pure.
pub fn plan_claims<K: Resource>(
    owner: &OwnerInfo,
    candidates: &[Arc<K>],
    matches: impl Fn(&K) -> bool,
) -> ClaimPlan<K> {
    let mut plan = ClaimPlan::default();
    for child in candidates {
        match classify(owner, child.meta(), matches(child)) {
            Claim::Owned => plan.owned.push(child.clone()),
            Claim::Adopt => plan.adopt.push(child.clone()),
            Claim::Release => plan.release.push(child.clone()),
            Claim::Ignore => {}
        }
    }
    plan
}

/// The adoption patch upstream sends (`ownerRefControllerPatch`): the controllerRef, the
/// child's UID as precondition, and optional finalizers to add.
pub fn adopt_patch(owner: &OwnerInfo, child_uid: &str, finalizers: &[String]) -> serde_json::Value {
    let mut meta = serde_json::json!({
        "ownerReferences": [{
            "apiVersion": owner.api_version,
            "kind": owner.kind,
            "name": owner.name,
            "uid": owner.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }],
        "uid": child_uid,
    });
    if !finalizers.is_empty() {
        meta["finalizers"] = serde_json::json!(finalizers);
    }
    serde_json::json!({ "metadata": meta })
}

/// The release patch upstream sends (`GenerateDeleteOwnerRefStrategicMergeBytes`): delete our
/// ownerReference by UID, with the child's UID as precondition, optionally removing
/// finalizers.
pub fn release_patch(
    owner_uid: &str,
    child_uid: &str,
    remove_finalizers: &[String],
) -> serde_json::Value {
    let mut meta = serde_json::json!({
        "uid": child_uid,
        "ownerReferences": [{ "$patch": "delete", "uid": owner_uid }],
    });
    if !remove_finalizers.is_empty() {
        meta["$deleteFromPrimitiveList/finalizers"] = serde_json::json!(remove_finalizers);
    }
    serde_json::json!({ "metadata": meta })
}

/// The result of a claim pass: the children the owner now controls (owned + adopted), and
/// every error met (upstream aggregates them and callers requeue).
#[derive(Debug)]
pub struct ClaimOutcome<K> {
    pub claimed: Vec<Arc<K>>,
    pub errors: Vec<Error>,
}

impl<K> ClaimOutcome<K> {
    /// The claimed children, or the error(s) if any occurred (several are joined upstream-style
    /// as `[e1, e2]`).
    pub fn into_result(mut self) -> Result<Vec<Arc<K>>, Error> {
        match self.errors.len() {
            0 => Ok(self.claimed),
            1 => Err(self.errors.remove(0)),
            _ => {
                let joined: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
                Err(Error::Other(format!("[{}]", joined.join(", "))))
            }
        }
    }
}

/// Upstream error texts of the adoption re-check.
pub mod messages {
    /// `can't recheck DeletionTimestamp: <err>`
    pub const CANT_RECHECK: &str = "can't recheck DeletionTimestamp: ";
}

/// One claim pass for one owner over children of type `K`. Create a new manager per sync: the
/// fresh owner check is remembered for the manager's lifetime.
pub struct ControllerRefManager<O, K>
where
    O: Resource,
    K: Resource,
{
    owner: OwnerInfo,
    owner_api: Api<O>,
    children: Api<K>,
    finalizers: Vec<String>,
    can_adopt: Option<Result<(), String>>,
}

impl<O, K> ControllerRefManager<O, K>
where
    O: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    /// `owner_api` is used for the fresh GET of the owner before adopting; `children` for the
    /// patches (an `Api` in the owner's namespace).
    pub fn new(owner: &O, owner_api: Api<O>, children: Api<K>) -> Result<Self, Error> {
        let info = OwnerInfo::of(owner).ok_or_else(|| {
            Error::Other(format!(
                "owner {} has no name or uid",
                crate::keys::key_of(owner)
            ))
        })?;
        Ok(Self {
            owner: info,
            owner_api,
            children,
            finalizers: Vec::new(),
            can_adopt: None,
        })
    }

    /// Finalizers added to every adopted child in the adoption patch and removed from every
    /// released child in the release patch (the Job controller's tracking finalizer; upstream
    /// `NewPodControllerRefManager`'s `finalizers`, used by `AdoptPod` and `ReleasePod`).
    pub fn with_finalizers(mut self, finalizers: Vec<String>) -> Self {
        self.finalizers = finalizers;
        self
    }

    pub fn owner(&self) -> &OwnerInfo {
        &self.owner
    }

    /// Adopts matching orphans and releases owned children that no longer match. Returns the
    /// owned and adopted children and the errors met.
    pub async fn claim(
        &mut self,
        candidates: &[Arc<K>],
        matches: impl Fn(&K) -> bool,
    ) -> ClaimOutcome<K> {
        let plan = plan_claims(&self.owner, candidates, matches);
        let mut outcome = ClaimOutcome {
            claimed: plan.owned,
            errors: Vec::new(),
        };
        for child in &plan.release {
            if let Err(e) = self.release(child).await {
                outcome.errors.push(e);
            }
        }
        for child in &plan.adopt {
            match self.adopt(child).await {
                Ok(Some(adopted)) => outcome.claimed.push(Arc::new(adopted)),
                Ok(None) => {}
                Err(e) => outcome.errors.push(e),
            }
        }
        outcome
    }

    /// Upstream `RecheckDeletionTimestamp` over a fresh GET, evaluated at most once.
    async fn can_adopt(&mut self) -> Result<(), String> {
        if let Some(r) = &self.can_adopt {
            return r.clone();
        }
        let r = match self.owner_api.get(&self.owner.name).await {
            Err(e) => Err(format!(
                "{}{}",
                messages::CANT_RECHECK,
                crate::error::error_message(&e)
            )),
            Ok(fresh) => {
                let meta = fresh.meta();
                let uid = meta.uid.as_deref().unwrap_or_default();
                if uid != self.owner.uid {
                    Err(format!(
                        "{}original {} {} is gone: got uid {}, wanted {}",
                        messages::CANT_RECHECK,
                        self.owner.kind,
                        self.owner.key(),
                        uid,
                        self.owner.uid
                    ))
                } else if let Some(ts) = &meta.deletion_timestamp {
                    Err(format!(
                        "{} has just been deleted at {}",
                        self.owner.key(),
                        ts.0
                    ))
                } else {
                    Ok(())
                }
            }
        };
        self.can_adopt = Some(r.clone());
        r
    }

    /// Adopts one orphan. `Ok(None)` when it vanished meanwhile.
    async fn adopt(&mut self, child: &K) -> Result<Option<K>, Error> {
        let meta = child.meta();
        let name = meta.name.clone().unwrap_or_default();
        let uid = meta.uid.clone().unwrap_or_default();
        let child_key = crate::keys::key(meta.namespace.as_deref(), &name);
        let kind = K::kind(&()).into_owned();
        if let Err(reason) = self.can_adopt().await {
            return Err(Error::Other(format!(
                "can't adopt {kind} {child_key} ({uid}): {reason}"
            )));
        }
        let patch = adopt_patch(&self.owner, &uid, &self.finalizers);
        tracing::debug!(owner = %self.owner.key(), child = %child_key, kind = %kind, "adopting child");
        match self
            .children
            .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(adopted) => Ok(Some(adopted)),
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(None),
            Err(e) => Err(Error::ForOwner {
                verb: "adopt",
                kind: "child",
                owner: self.owner.key(),
                source: e,
            }),
        }
    }

    /// Releases one owned child.
    async fn release(&self, child: &K) -> Result<(), Error> {
        let meta = child.meta();
        let name = meta.name.clone().unwrap_or_default();
        let uid = meta.uid.clone().unwrap_or_default();
        tracing::debug!(
            owner = %self.owner.key(),
            child = %crate::keys::key(meta.namespace.as_deref(), &name),
            "patching child to remove its controllerRef"
        );
        let patch = release_patch(&self.owner.uid, &uid, &self.finalizers);
        match self
            .children
            .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => Ok(()),
            // Gone, or no longer ours / re-created with a new UID: nothing to release.
            Err(kube::Error::Api(s)) if s.is_not_found() || s.is_invalid() => Ok(()),
            Err(e) => Err(Error::ForOwner {
                verb: "release",
                kind: "child",
                owner: self.owner.key(),
                source: e,
            }),
        }
    }
}

impl<K> Default for ClaimOutcome<K> {
    fn default() -> Self {
        Self {
            claimed: Vec::new(),
            errors: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
