//! Informer handlers: map changes to Deployment keys (the event handlers of upstream
//! `pkg/controller/deployment/deployment_controller.go`).
//!
//! Mirrors `addDeployment`/`updateDeployment`/`deleteDeployment`, `addReplicaSet`/
//! `updateReplicaSet`/`deleteReplicaSet`, `deletePod`, `getDeploymentForPod`,
//! `getDeploymentsForReplicaSet` and `resolveControllerRef` of upstream
//! `deployment_controller.go`. Handlers only read caches and enqueue; the one API call
//! upstream makes in a handler (the Recreate pod-delete check lists ReplicaSets live) runs in
//! a task of its own.

use std::sync::{Arc, PoisonError};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ListParams};
use rkcm_runtime::cache::Change;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::keys::{controller_uid, key_of};
use rkcm_runtime::workload::children::{ChildHandler, on_child_change};
use rkcm_runtime::workload::controller_ref::{controller_of, resolve_controller_ref};
use rkcm_runtime::workload::selector::Selector;

use crate::consts::strategy;
use crate::model;
use crate::reconcile::Controller;

impl ChildHandler<ReplicaSet> for Controller {
    type Owner = Deployment;

    fn resolve(&self, namespace: &str, r: &OwnerReference) -> Option<Arc<Deployment>> {
        resolve_controller_ref(&self.deployments, namespace, r)
    }

    fn matching(&self, rs: &ReplicaSet) -> Vec<Arc<Deployment>> {
        self.deployments_matching(rs)
    }

    fn enqueue(&self, d: &Deployment) {
        self.queue.add(key_of(d));
    }

    fn deleted(&self, namespace: &str, rs: &ReplicaSet, _final_state: bool) {
        if let Some(d) = self.owner_of(namespace, rs) {
            self.enqueue(&d);
        }
    }
}

impl Controller {
    pub(crate) fn on_deployment(&self, change: Change<Deployment>) {
        let d = change.object();
        tracing::debug!(controller = crate::config::NAME, key = %key_of(&**d), "deployment changed");
        // A deleted Deployment is synced too: the sync finds it gone and stops.
        self.enqueue(d);
    }

    /// `getDeploymentsForReplicaSet`: Deployments of the namespace whose non-empty selector
    /// matches the orphan's labels (none for an unlabelled ReplicaSet).
    fn deployments_matching(&self, rs: &ReplicaSet) -> Vec<Arc<Deployment>> {
        let labels = rs.metadata.labels.as_ref();
        if labels.is_none_or(|l| l.is_empty()) {
            return Vec::new();
        }
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        self.deployments
            .list_namespace(namespace)
            .into_iter()
            .filter(|d| {
                Selector::from_label_selector(&d.spec.selector)
                    .is_ok_and(|s| !s.is_empty() && s.matches(labels))
            })
            .collect()
    }

    /// `addReplicaSet`, `updateReplicaSet`, `deleteReplicaSet`.
    pub(crate) fn on_replica_set(&self, change: Change<ReplicaSet>) {
        on_child_change(self, change);
    }

    /// `getDeploymentForPod`: pod -> its ReplicaSet (cache, UID checked) -> that ReplicaSet's
    /// Deployment.
    fn deployment_for_pod(&self, pod: &Pod) -> Option<Arc<Deployment>> {
        let r = controller_of(&pod.metadata)?;
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let rs = resolve_controller_ref(&self.replica_sets, namespace, r)?;
        resolve_controller_ref(&self.deployments, namespace, controller_of(&rs.metadata)?)
    }

    /// Pods matter only when they are gone: a Recreate rollout waits for the last old pod.
    pub(crate) fn on_pod(self: &Arc<Self>, change: Change<Pod>) {
        let Change::Deleted { obj: pod, .. } = change else {
            return;
        };
        let Some(d) = self.deployment_for_pod(&pod) else {
            return;
        };
        if model::strategy_type(&d) != strategy::RECREATE {
            return;
        }
        let key = key_of(&*d);
        let newly_pending = self
            .pending_pod_checks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone());
        if !newly_pending {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            // Cleared before the list: a deletion from here on schedules another check.
            this.pending_pod_checks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            this.enqueue_if_no_pods(&d).await;
        });
    }

    /// Enqueues a Recreate Deployment once none of its ReplicaSets (listed live) controls a
    /// cached pod.
    async fn enqueue_if_no_pods(&self, d: &Deployment) {
        let Ok(selector) = Selector::from_label_selector(&d.spec.selector) else {
            return;
        };
        let namespace = d.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), namespace);
        let list = match api
            .list(&ListParams::default().labels(&selector.to_query()))
            .await
        {
            Ok(list) => list,
            Err(error) => {
                tracing::debug!(controller = crate::config::NAME, key = %key_of(d), %error, "listing replica sets after a pod deletion failed");
                return;
            }
        };
        let uid = d.metadata.uid.as_deref().unwrap_or_default();
        let owned: Vec<model::Rs> = list
            .items
            .into_iter()
            .filter(|rs| controller_uid(rs) == Some(uid))
            .map(Arc::new)
            .collect();
        let pods: usize = self.pods_by_rs(&owned).values().map(Vec::len).sum();
        if pods == 0 {
            self.enqueue(d);
        }
    }
}
