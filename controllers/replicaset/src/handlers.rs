//! Event handlers: owner and pod changes mapped to the owner keys to sync (upstream
//! `addRS`/`updateRS`/`deleteRS` and `addPod`/`updatePod`/`deletePod`), with the
//! expectations they lower. No decisions beyond which key to queue, and when.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use rkcm_runtime::cache::Change;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::keys::key_of;
use rkcm_runtime::workload::children::{ChildHandler, on_child_change};
use rkcm_runtime::workload::controller_ref::resolve_controller_ref;
use rkcm_runtime::workload::pod::is_pod_ready;

use crate::owner::ReplicaOwner;
use crate::reconcile::{Controller, labels_of};

/// Upstream pads the minReadySeconds re-check after a pod turns ready by one second against
/// clock skew between the kubelet and the controller.
const MIN_READY_PAD: Duration = Duration::from_secs(1);

impl<O: ReplicaOwner> ChildHandler<Pod> for Controller<O> {
    type Owner = O;

    /// `resolveControllerRef`: the cached owner the ref names, if kind and UID agree.
    fn resolve(&self, namespace: &str, r: &OwnerReference) -> Option<Arc<O>> {
        resolve_controller_ref(&self.owners, namespace, r)
    }

    /// `getPodReplicaSets`: owners in the pod's namespace whose (non-empty, valid) selector
    /// matches it.
    fn matching(&self, pod: &Pod) -> Vec<Arc<O>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        self.owners
            .list_namespace(namespace)
            .into_iter()
            .filter(|o| {
                o.selector()
                    .is_ok_and(|s| !s.is_empty() && s.matches(labels_of(pod)))
            })
            .collect()
    }

    fn enqueue(&self, owner: &O) {
        self.queue.add(key_of(owner));
    }

    fn created(&self, owner: &O) {
        let key = key_of(owner);
        self.expectations.creation_observed(&key);
        self.queue.add(key);
    }

    /// Orphans have no expectations to lower; their deletion concerns no one.
    fn deleted(&self, namespace: &str, pod: &Pod, _final_state: bool) {
        let Some(owner) = self.owner_of(namespace, pod) else {
            return;
        };
        let key = key_of(&*owner);
        self.expectations.deletion_observed(&key, &key_of(pod));
        self.queue.add(key);
    }

    /// Graceful deletion has begun: the pod no longer counts, so the deletion is observed now
    /// rather than when the object finally goes (for the old labels' owner too).
    fn terminating_updated(&self, namespace: &str, old: &Pod, new: &Pod) -> bool {
        if new.metadata.deletion_timestamp.is_none() {
            return false;
        }
        self.deleted(namespace, new, false);
        if old.metadata.labels != new.metadata.labels {
            self.deleted(namespace, old, false);
        }
        true
    }

    fn controlled_updated(&self, owner: &Arc<O>, old: &Pod, new: &Pod) {
        self.enqueue(owner);
        let min_ready = owner.min_ready_seconds();
        if min_ready > 0 && !is_pod_ready(old) && is_pod_ready(new) {
            let delay = Duration::from_secs(u64::try_from(min_ready).unwrap_or(0)) + MIN_READY_PAD;
            self.queue.add_after(key_of(&**owner), delay);
        }
    }
}

impl<O: ReplicaOwner> Controller<O> {
    // ---- owner handlers -----------------------------------------------------------------

    pub(crate) fn on_owner_change(&self, change: Change<O>) {
        match change {
            Change::Added(owner) => {
                self.forget_caught_up_write(&owner);
                self.enqueue(&owner);
            }
            Change::Updated { old, new } => {
                // A delete and re-create under the same name seen as one update: the old
                // object's expectations must not gate the new one.
                if old.meta().uid != new.meta().uid {
                    self.on_owner_deleted(&old);
                }
                self.forget_caught_up_write(&new);
                self.enqueue(&new);
            }
            Change::Deleted { obj, .. } => self.on_owner_deleted(&obj),
        }
    }

    fn on_owner_deleted(&self, owner: &O) {
        let key = key_of(owner);
        tracing::debug!(controller = O::CONTROLLER_NAME, key = %key, "deleting owner");
        self.consistency.clear(&key, owner.meta().uid.as_deref());
        self.forget_written(&key, owner.meta().uid.as_deref());
        self.pacer.forget(&key);
        self.expectations.delete_expectations(&key);
        self.queue.add(key);
    }

    // ---- pod handlers -------------------------------------------------------------------

    /// `addPod`, `updatePod`, `deletePod`.
    pub(crate) fn on_pod_change(&self, change: Change<Pod>) {
        on_child_change(self, change);
    }
}
