//! Informer event handlers and the node-update worker.
//!
//! Mirrors `addDaemonset`/`updateDaemonset`/`deleteDaemonset`, `addHistory`/`updateHistory`/
//! `deleteHistory`, `addPod`/`updatePod`/`deletePod` and the node handlers of upstream
//! `pkg/controller/daemon/daemon_controller.go`: pods and revisions are mapped to their
//! controlling DaemonSet by controllerRef (kind, name and UID), orphans to every DaemonSet
//! whose selector matches them; nodes go through their own queue (see [`crate::nodes`]).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::cache::{Change, INDEX_NODE_NAME};
use rkcm_runtime::keys::{controller_uid, key_of};
use rkcm_runtime::workload::children::{ChildHandler, on_child_change};
use rkcm_runtime::workload::controller_ref::{controller_of, resolve_controller_ref};
use rkcm_runtime::workload::pod::is_pod_ready;
use rkcm_runtime::workload::selector::Selector;

use crate::nodes::{daemonset_needs_sync, node_update_matters};
use crate::reconcile::Controller;
use crate::template::min_ready_seconds;

/// Upstream pads the minReadySeconds re-check after a pod turns ready by one second against
/// clock skew.
const MIN_READY_PAD: Duration = Duration::from_secs(1);

impl Controller {
    fn enqueue(&self, ds: &DaemonSet) {
        self.queue.add(key_of(ds));
    }

    // ---- DaemonSets --------------------------------------------------------------------

    pub(crate) fn on_daemonset_change(&self, change: Change<DaemonSet>) {
        match change {
            Change::Added(ds) => {
                tracing::debug!(daemonset = %key_of(&*ds), "adding daemon set");
                self.enqueue(&ds);
            }
            Change::Updated { old, new } => {
                // Deleted and re-created under the same name, seen as one update.
                if old.metadata.uid != new.metadata.uid {
                    self.on_daemonset_deleted(&old);
                }
                tracing::debug!(daemonset = %key_of(&*new), "updating daemon set");
                self.enqueue(&new);
            }
            Change::Deleted { obj, .. } => self.on_daemonset_deleted(&obj),
        }
    }

    fn on_daemonset_deleted(&self, ds: &DaemonSet) {
        let key = key_of(ds);
        tracing::debug!(daemonset = %key, "deleting daemon set");
        self.expectations.delete_expectations(&key);
        if let Some(store) = &self.consistency {
            store.clear(&key, ds.metadata.uid.as_deref());
        }
        self.queue.add(key);
    }

    // ---- shared lookups ----------------------------------------------------------------

    fn resolve(
        &self,
        namespace: &str,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Option<Arc<DaemonSet>> {
        resolve_controller_ref(&self.daemonsets, namespace, controller_of(meta)?)
    }

    /// `GetPodDaemonSets` / `GetHistoryDaemonSets`: DaemonSets of the namespace whose
    /// (valid, non-empty) selector matches the labels.
    fn matching(
        &self,
        namespace: &str,
        labels: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Vec<Arc<DaemonSet>> {
        let sets: Vec<Arc<DaemonSet>> = self
            .daemonsets
            .list_namespace(namespace)
            .into_iter()
            .filter(|ds| {
                Selector::from_label_selector(&ds.spec.selector)
                    .is_ok_and(|s| !s.is_empty() && s.matches(labels))
            })
            .collect();
        if sets.len() > 1 {
            tracing::debug!(
                namespace,
                count = sets.len(),
                "more than one DaemonSet selects these labels"
            );
        }
        sets
    }

    // ---- ControllerRevisions ----------------------------------------------------------

    pub(crate) fn on_revision_change(&self, change: Change<ControllerRevision>) {
        let namespace = change
            .object()
            .metadata
            .namespace
            .clone()
            .unwrap_or_default();
        match change {
            Change::Added(rev) => {
                if rev.metadata.deletion_timestamp.is_some() {
                    self.on_revision_deleted(&namespace, &rev);
                    return;
                }
                if controller_of(&rev.metadata).is_some() {
                    // Owned: nothing to do until it changes.
                    return;
                }
                for ds in self.matching(&namespace, rev.metadata.labels.as_ref()) {
                    self.enqueue(&ds);
                }
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                let (old_ref, new_ref) =
                    (controller_of(&old.metadata), controller_of(&new.metadata));
                let ref_changed = old_ref != new_ref;
                if ref_changed
                    && old_ref.is_some()
                    && let Some(ds) = self.resolve(&namespace, &old.metadata)
                {
                    self.enqueue(&ds);
                }
                if new_ref.is_some() {
                    if let Some(ds) = self.resolve(&namespace, &new.metadata) {
                        self.enqueue(&ds);
                    }
                    return;
                }
                if ref_changed || old.metadata.labels != new.metadata.labels {
                    for ds in self.matching(&namespace, new.metadata.labels.as_ref()) {
                        self.enqueue(&ds);
                    }
                }
            }
            Change::Deleted { obj, .. } => self.on_revision_deleted(&namespace, &obj),
        }
    }

    fn on_revision_deleted(&self, namespace: &str, rev: &ControllerRevision) {
        if let Some(ds) = self.resolve(namespace, &rev.metadata) {
            self.enqueue(&ds);
        }
    }

    // ---- Pods ----------------------------------------------------------------------------

    /// Queues the DaemonSet of a pod that changed: at once, or at the end of the spacing
    /// after its last sync ([`rkcm_runtime::queue::pacing::SyncSpacer`]).
    pub(crate) fn enqueue_for_pod(&self, key: String) {
        match self.spacer.hold(&key, self.clock.now()) {
            Some(wait) => self.queue.add_after(key, wait),
            None => self.queue.add(key),
        }
    }

    /// `addPod`, `updatePod`, `deletePod`.
    pub(crate) fn on_pod_change(&self, change: Change<Pod>) {
        on_child_change(self, change);
    }

    // ---- Nodes ---------------------------------------------------------------------------

    pub(crate) fn on_node_change(&self, change: Change<Node>) {
        match change {
            Change::Added(node) => self.node_queue.add(key_of(&*node)),
            Change::Updated { old, new } => {
                if node_update_matters(&old, &new, self.readiness_matters()) {
                    self.node_queue.add(key_of(&*new));
                }
            }
            // Pods of deleted nodes: pod GC (bound ones) or the next sync (unbound ones).
            Change::Deleted { .. } => {}
        }
    }

    /// Whether a node's readiness can change a sync: only for DaemonSets opted into rkcm's
    /// rollout past NotReady nodes (by the manager flag or their annotation).
    fn readiness_matters(&self) -> bool {
        self.cfg.rollout_skips_not_ready_nodes
            || self
                .daemonsets
                .list()
                .iter()
                .any(|ds| crate::plan::skips_not_ready_nodes(ds, false))
    }

    /// The node-update worker: enqueue every DaemonSet the node makes a difference for.
    pub(crate) async fn sync_node(&self, name: String) -> Result<(), std::convert::Infallible> {
        let Some(node) = self.nodes.get(&name) else {
            return Ok(());
        };
        let bound = self.pods.by_index(INDEX_NODE_NAME, &name);
        for ds in self.daemonsets.list() {
            let uid = ds.meta().uid.as_deref();
            let has_bound_pod = uid.is_some() && bound.iter().any(|p| controller_uid(&**p) == uid);
            if daemonset_needs_sync(
                &node,
                &ds,
                has_bound_pod,
                self.cfg.taint_comparison_operators,
                self.cfg.rollout_skips_not_ready_nodes,
            ) {
                self.enqueue(&ds);
            }
        }
        Ok(())
    }
}

impl ChildHandler<Pod> for Controller {
    type Owner = DaemonSet;

    fn resolve(&self, namespace: &str, r: &OwnerReference) -> Option<Arc<DaemonSet>> {
        resolve_controller_ref(&self.daemonsets, namespace, r)
    }

    fn matching(&self, pod: &Pod) -> Vec<Arc<DaemonSet>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        self.matching(namespace, pod.metadata.labels.as_ref())
    }

    fn enqueue(&self, ds: &DaemonSet) {
        self.queue.add(key_of(ds));
    }

    fn created(&self, ds: &DaemonSet) {
        let key = key_of(ds);
        self.expectations.creation_observed(&key);
        self.enqueue_for_pod(key);
    }

    fn deleted(&self, namespace: &str, pod: &Pod, _final_state: bool) {
        let Some(ds) = self.owner_of(namespace, pod) else {
            return;
        };
        let key = key_of(&*ds);
        self.expectations.deletion_observed(&key, &key_of(pod));
        self.enqueue_for_pod(key);
    }

    /// Graceful deletion began: the deletion is observed now, not when the object goes.
    fn terminating_updated(&self, namespace: &str, _old: &Pod, new: &Pod) -> bool {
        if new.metadata.deletion_timestamp.is_none() {
            return false;
        }
        ChildHandler::deleted(self, namespace, new, false);
        true
    }

    fn controlled_updated(&self, ds: &Arc<DaemonSet>, old: &Pod, new: &Pod) {
        self.enqueue_for_pod(key_of(&**ds));
        let min_ready = min_ready_seconds(ds);
        if min_ready > 0 && !is_pod_ready(old) && is_pod_ready(new) {
            let delay = Duration::from_secs(u64::try_from(min_ready).unwrap_or(0)) + MIN_READY_PAD;
            self.queue.add_after(key_of(&**ds), delay);
        }
    }
}

#[cfg(test)]
mod tests;
