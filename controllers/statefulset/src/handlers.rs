//! Informer handlers: map changes to StatefulSet keys, and observe the controller's own
//! creates and deletes for the expectations.
//!
//! Mirrors `addPod`/`updatePod`/`deletePod`, `getStatefulSetsForPod`, `resolveControllerRef`
//! and the set handlers of upstream `pkg/controller/statefulset/stateful_set.go`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use rkcm_runtime::cache::Change;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::keys::key_of;
use rkcm_runtime::workload::children::{ChildHandler, on_child_change};
use rkcm_runtime::workload::controller_ref::resolve_controller_ref;

use crate::identity::min_ready_seconds;
use crate::reconcile::Controller;
use rkcm_runtime::workload::pod::is_pod_ready;
use rkcm_runtime::workload::selector::Selector;

impl Controller {
    pub(crate) fn on_set(&self, change: Change<StatefulSet>) {
        let set = change.object();
        if let Change::Deleted { obj, .. } = &change {
            let k = key_of(&**obj);
            self.expectations.delete_expectations(&k);
            self.consistency.clear(&k, obj.metadata.uid.as_deref());
            self.pacer.forget(&k);
        }
        self.queue.add(key_of(&**set));
    }

    /// `getStatefulSetsForPod`: sets of the namespace whose selector matches the orphan.
    fn sets_matching(&self, pod: &Pod) -> Vec<Arc<StatefulSet>> {
        let labels = pod.metadata.labels.as_ref();
        if labels.is_none_or(|l| l.is_empty()) {
            return Vec::new();
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let sets: Vec<_> = self
            .sets
            .store()
            .list_namespace(namespace)
            .into_iter()
            .filter(|s| {
                Some(&s.spec).is_some_and(|spec| {
                    Selector::from_label_selector(&spec.selector)
                        .is_ok_and(|sel| !sel.is_empty() && sel.matches(labels))
                })
            })
            .collect();
        if sets.len() > 1 {
            tracing::warn!(controller = crate::config::NAME, pod = %key_of(pod), sets = sets.len(), "user error: more than one StatefulSet selects this pod");
        }
        sets
    }

    /// `addPod`, `updatePod`, `deletePod`.
    pub(crate) fn on_pod(&self, change: Change<Pod>) {
        on_child_change(self, change);
    }
}

impl ChildHandler<Pod> for Controller {
    type Owner = StatefulSet;

    /// `resolveControllerRef`.
    fn resolve(&self, namespace: &str, r: &OwnerReference) -> Option<Arc<StatefulSet>> {
        resolve_controller_ref(&self.sets.store(), namespace, r)
    }

    fn matching(&self, pod: &Pod) -> Vec<Arc<StatefulSet>> {
        self.sets_matching(pod)
    }

    fn enqueue(&self, set: &StatefulSet) {
        self.queue.add(key_of(set));
    }

    fn created(&self, set: &StatefulSet) {
        let k = key_of(set);
        self.expectations.creation_observed(&k);
        self.queue.add(k);
    }

    fn deleted(&self, namespace: &str, pod: &Pod, _final_state: bool) {
        let Some(set) = self.owner_of(namespace, pod) else {
            return;
        };
        let k = key_of(&*set);
        self.expectations.deletion_observed(&k, &key_of(pod));
        self.queue.add(k);
    }

    /// The deletion is observed when the pod starts terminating; the update is handled on.
    fn terminating_updated(&self, namespace: &str, old: &Pod, new: &Pod) -> bool {
        if new.metadata.deletion_timestamp.is_some()
            && old.metadata.deletion_timestamp.is_none()
            && let Some(set) = self.owner_of(namespace, new)
        {
            self.expectations
                .deletion_observed(&key_of(&*set), &key_of(new));
        }
        false
    }

    fn controlled_updated(&self, set: &Arc<StatefulSet>, old: &Pod, new: &Pod) {
        let k = key_of(&**set);
        self.queue.add(k.clone());
        let mrs = min_ready_seconds(set);
        if mrs > 0 && !is_pod_ready(old) && is_pod_ready(new) {
            let delay = Duration::from_secs(u64::try_from(mrs).unwrap_or(0) + 1);
            self.queue.add_after(k, delay);
        }
    }
}
