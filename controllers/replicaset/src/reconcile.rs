//! The sync and the event handlers: caches -> claim -> [`plan`](crate::plan) -> pod writes ->
//! [`status`](crate::status) -> status write.
//!
//! Mirrors `syncReplicaSet`, `manageReplicas`, the informer handlers (`addPod`, `updatePod`,
//! `deletePod`, `addRS`, `updateRS`, `deleteRS`) of upstream
//! `pkg/controller/replicaset/replica_set.go`, and `updateReplicaSetStatus` of
//! `replica_set_utils.go`.
//!
//! Safety against stale caches:
//! - Every create is counted in the expectations *before* it is issued, and un-counted when
//!   it fails or is skipped; every delete is tracked by pod key before it is issued. While
//!   expectations are unsatisfied no pod is created or deleted, so a lagging watch never
//!   causes a second replacement or an over-deletion.
//! - Deletes are graceful with a UID precondition; adoption re-reads the owner first and
//!   patches with the pod's UID as precondition (runtime `ControllerRefManager`).
//! - With the stale-cache guard on (ReplicaSets, gate `StaleControllerConsistencyReplicaSet`)
//!   a sync waits until the pod and owner caches reflect the pods this controller created or
//!   adopted and the status it wrote for that owner ([`rkcm_runtime::workload::consistency`]).
//! - Status is written through the status subresource with a resourceVersion; a conflict
//!   re-reads once and retries. The object the controller's own last status write returned is
//!   remembered per owner and used instead of the cached one while the cache is older, so the
//!   sync right after a status write neither conflicts on a stale resourceVersion nor rewrites
//!   a status it already wrote.

use rkcm_runtime::error::StatusError;
use rkcm_runtime::tracked::Size;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::Api;
use rkcm_runtime::api::write;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::{INDEX_CONTROLLER_UID, Store, compare_resource_versions};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::error::PodStep;
use rkcm_runtime::error::is_namespace_terminating;
use rkcm_runtime::keys::{controller_uid, key_of, split_key};
use rkcm_runtime::queue::RetryPolicy;
use rkcm_runtime::queue::WorkQueue;
use rkcm_runtime::queue::pacing::StatusPacer;
use rkcm_runtime::workload::consistency::{GroupResource, Stale, StaleGuard};
use rkcm_runtime::workload::controller_ref::ControllerRefManager;
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::pod::{is_pod_active, is_terminal};
use rkcm_runtime::workload::podcontrol::{
    PodControl, PodOptions, SLOW_START_INITIAL_BATCH_SIZE, slow_start_batch,
};
use rkcm_runtime::workload::selector::Selector;

use crate::config::Config;
use crate::error::Error;
use crate::metrics;
use crate::owner::{ReplicaOwner, ReplicaStatus};
use crate::plan::{self, Plan, PlanConfig, Snapshot};
use crate::status::{StatusInputs, calculate_status, needs_write, only_terminating_moved};

/// Everything one controller (RS or RC) shares between its handlers and workers.
pub(crate) struct Controller<O: ReplicaOwner> {
    pub(crate) client: kube::Client,
    pub(crate) owners: Store<O>,
    pub(crate) pods: Store<Pod>,
    pub(crate) expectations: UidTrackingExpectations,
    pub(crate) pod_control: PodControl,
    pub(crate) queue: WorkQueue<String>,
    pub(crate) clock: SharedClock,
    pub(crate) cfg: Config,
    /// The stale-cache guard; `None` when the guard is off.
    pub(crate) consistency: StaleGuard,
    /// Per owner key, the object the controller's last successful status write returned.
    pub(crate) written: Mutex<HashMap<String, Arc<O>>>,
    /// Spaces out one owner's status writes ([`rkcm_runtime::queue::pacing`]).
    pub(crate) pacer: StatusPacer,
}

/// The owner a sync works on: the cached one, or the object the controller's own last status
/// write returned when that is a newer version of the same object (the cache has not caught
/// up yet). The flag says whether the remembered object is still worth keeping.
pub(crate) fn freshest<O: kube::Resource>(
    cached: Arc<O>,
    written: Option<&Arc<O>>,
) -> (Arc<O>, bool) {
    let Some(written) = written else {
        return (cached, false);
    };
    let (c, w) = (cached.meta(), written.meta());
    if c.uid != w.uid {
        return (cached, false);
    }
    let newer = match (c.resource_version.as_deref(), w.resource_version.as_deref()) {
        (Some(c), Some(w)) => compare_resource_versions(c, w) == Some(std::cmp::Ordering::Less),
        _ => false,
    };
    if newer {
        (written.clone(), true)
    } else {
        (cached, false)
    }
}

pub(crate) fn labels_of(pod: &Pod) -> Option<&std::collections::BTreeMap<String, String>> {
    pod.metadata.labels.as_ref()
}

/// Terminating (not terminal) pods of `candidates` that the owner controls and selects, for
/// `status.terminatingReplicas`.
fn terminating_pods(
    candidates: &[Arc<Pod>],
    owner_uid: &str,
    selector: &Selector,
) -> Vec<Arc<Pod>> {
    candidates
        .iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_some()
                && !is_terminal(p)
                && controller_uid(&***p) == Some(owner_uid)
                && selector.matches(labels_of(p))
        })
        .cloned()
        .collect()
}

impl<O: ReplicaOwner> Controller<O> {
    /// The per-object maps, for `rkcm_runtime::tracked`.
    pub(crate) fn tracked_sizes(&self, out: &mut Vec<Size>) {
        out.push(Size::object("expectations", self.expectations.len()));
        out.push(Size::object("status_written", self.written_map().len()));
        out.push(Size::object("status_pacing", self.pacer.len()));
        if self.consistency.is_enabled() {
            out.push(Size::object("stale_guard", self.consistency.store().len()));
        }
    }

    // ---- remembered writes ---------------------------------------------------------------

    fn written_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<O>>> {
        // Single inserts and removes: a panic elsewhere cannot leave the map torn.
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops the remembered status write of `key` (only `uid`'s, when given).
    pub(crate) fn forget_written(&self, key: &str, uid: Option<&str>) {
        let mut written = self.written_map();
        if written
            .get(key)
            .is_some_and(|w| uid.is_none_or(|uid| w.meta().uid.as_deref() == Some(uid)))
        {
            written.remove(key);
        }
    }

    /// Drops the remembered status write of `cached`'s key once the cache holds that version
    /// or a newer one (or another object of that name): from then on the cache serves it, and
    /// a mass rollout must not keep a second copy of every ReplicaSet it touched until each
    /// one's next sync.
    pub(crate) fn forget_caught_up_write(&self, cached: &Arc<O>) {
        let key = key_of(&**cached);
        let mut written = self.written_map();
        if written
            .get(&key)
            .is_some_and(|w| !freshest(cached.clone(), Some(w)).1)
        {
            written.remove(&key);
        }
    }

    /// The cached owner, or the newer object of the controller's own last status write.
    fn owner_for_sync(&self, key: &str, cached: Arc<O>) -> Arc<O> {
        let mut written = self.written_map();
        let (owner, keep) = freshest(cached, written.get(key));
        if !keep {
            written.remove(key);
        }
        owner
    }

    /// Records a write for the stale-cache guard.
    fn wrote(&self, key: &str, owner: &O, resource: GroupResource, rv: Option<&str>) {
        let uid = owner.meta().uid.as_deref().unwrap_or_default();
        self.consistency.wrote(key, uid, resource, rv);
    }

    /// The guard's check (`EnsureReady`): an error while a cache lags behind this owner's
    /// recorded writes. Counted in `replicaset_controller_stale_sync_skips_total`.
    fn ensure_caches_caught_up(&self, key: &str) -> Result<(), Stale> {
        self.consistency
            .ensure_caught_up(key, &[&self.pods, &self.owners])
    }

    /// Whether `key`'s expectations let the sync create and delete. When they hold it, the
    /// key is looked at again once they expire: the create or delete they wait for may never
    /// be observed (a relist after the pod came and went, as a sharded replica's every
    /// handover makes), and no other event need come.
    fn expectations_satisfied(&self, key: &str) -> bool {
        let satisfied = self.expectations.satisfied_expectations(key);
        if !satisfied && let Some(wait) = self.expectations.expires_in(key) {
            self.queue
                .add_after(key.to_owned(), wait + std::time::Duration::from_secs(1));
        }
        satisfied
    }

    // ---- sync ---------------------------------------------------------------------------

    async fn sync_inner(&self, key: &str) -> Result<(), Error> {
        let (namespace, _) = split_key(key);
        let namespace = namespace.unwrap_or_default().to_owned();
        self.ensure_caches_caught_up(key)
            .map_err(|source| Error::StaleCache {
                key: key.to_owned(),
                source,
            })?;
        let Some(cached) = self.owners.get(key) else {
            rkcm_runtime::explain::decisions::note_gone();
            tracing::debug!(
                controller = O::CONTROLLER_NAME,
                key,
                "owner has been deleted"
            );
            self.consistency.clear(key, None);
            self.forget_written(key, None);
            self.pacer.forget(key);
            self.expectations.delete_expectations(key);
            return Ok(());
        };
        let owner = self.owner_for_sync(key, cached);
        // Read before anything else: an observation arriving during this sync must not be
        // mistaken for one this sync already accounted for.
        let satisfied = self.expectations_satisfied(key);
        let selector = match owner.selector() {
            Ok(s) => s,
            Err(error) => {
                // Retrying cannot help until the spec changes, which enqueues the key anyway.
                tracing::warn!(controller = O::CONTROLLER_NAME, key, %error, "invalid pod selector; skipping");
                return Ok(());
            }
        };
        let owner_uid = owner.meta().uid.clone().unwrap_or_default();
        let candidates = self.pods.claimable(&namespace, &owner_uid);
        let active: Vec<Arc<Pod>> = candidates
            .iter()
            .filter(|p| is_pod_active(p))
            .cloned()
            .collect();
        let claimed = self
            .claim(&owner, key, &namespace, &active, &selector)
            .await?;

        let track_terminating = O::HAS_TERMINATING_REPLICAS && self.cfg.terminating_replicas;
        let terminating: Vec<Arc<Pod>> = if track_terminating {
            terminating_pods(&candidates, &owner_uid, &selector)
        } else {
            Vec::new()
        };

        let manage_result = self
            .manage(&owner, key, &namespace, &claimed, satisfied)
            .await;

        let now = self.clock.wall();
        let current = owner.replica_status();
        let manage_message = manage_result.as_ref().err().map(Error::condition_message);
        let inputs = StatusInputs {
            desired: owner.desired_replicas(),
            min_ready_seconds: owner.min_ready_seconds(),
            template_labels: owner.template_labels(),
            track_terminating,
        };
        let mut status = calculate_status(
            &current,
            &inputs,
            &claimed,
            &terminating,
            manage_message.as_deref(),
            now,
        );
        let generation = owner.meta().generation.unwrap_or(0);
        let written = if !needs_write(&current, &status, generation) {
            current
        } else if let Some(wait) = if only_terminating_moved(&current, &status, generation) {
            self.pacer.hold_slow(key, self.clock.now())
        } else {
            self.pacer.hold(key, self.clock.now())
        } {
            // Written moments ago: the next write counts whatever else arrives meanwhile.
            self.queue.add_after(key.to_owned(), wait);
            current
        } else {
            status.observed_generation = generation;
            // Remembered like a cached object: without managedFields.
            let updated = self.write_status(&owner, key, &namespace, &status).await?;
            self.wrote(
                key,
                &updated,
                GroupResource::of::<O>(),
                updated.meta().resource_version.as_deref(),
            );
            self.written_map().insert(key.to_owned(), Arc::new(updated));
            self.pacer.wrote(key, self.clock.now());
            status
        };

        let min_ready = owner.min_ready_seconds();
        note_unavailable(&written, owner.desired_replicas(), min_ready);
        if min_ready > 0 && written.ready_replicas != written.available_replicas {
            // No pod event will announce that a pod became available: look again then.
            if let Some(delay) = plan::availability_requeue(&claimed, min_ready, self.clock.wall())
            {
                self.queue.add_after(key.to_owned(), delay);
            }
        }
        manage_result
    }

    /// Adopts matching orphans and releases owned pods that stopped matching; returns the
    /// active pods the owner now controls.
    async fn claim(
        &self,
        owner: &Arc<O>,
        key: &str,
        namespace: &str,
        active: &[Arc<Pod>],
        selector: &Selector,
    ) -> Result<Vec<Arc<Pod>>, Error> {
        let claim_err = |source| Error::from(PodStep::Claim.failed(key, source));
        let mut manager = ControllerRefManager::<O, Pod>::new(
            &**owner,
            Api::namespaced(self.client.clone(), namespace),
            Api::namespaced(self.client.clone(), namespace),
        )
        .map_err(claim_err)?;
        let outcome = manager
            .claim(active, |p| selector.matches(labels_of(p)))
            .await;
        if self.consistency.is_enabled() {
            // Adopted pods come back as the patch returned them: a version the cache has not
            // seen yet. (Releases return nothing to record; repeating one is harmless.)
            let cached: HashMap<&str, Option<&str>> = active
                .iter()
                .filter_map(|p| {
                    let uid = p.metadata.uid.as_deref()?;
                    Some((uid, p.metadata.resource_version.as_deref()))
                })
                .collect();
            for pod in &outcome.claimed {
                let rv = pod.metadata.resource_version.as_deref();
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                if cached.get(uid).copied().flatten() != rv {
                    self.wrote(key, &**owner, GroupResource::of::<Pod>(), rv);
                }
            }
        }
        outcome.into_result().map_err(claim_err)
    }

    /// Pods matched by every owner that shares this owner's controller (none without one).
    fn related_pods(&self, owner: &O) -> Vec<Arc<Pod>> {
        let Some(controller) = controller_uid(owner) else {
            return Vec::new();
        };
        let mut seen = std::collections::HashSet::new();
        let mut related = Vec::new();
        for other in self.owners.by_index(INDEX_CONTROLLER_UID, controller) {
            let Ok(selector) = other.selector() else {
                // An invalid selector matches nothing.
                continue;
            };
            let namespace = other.meta().namespace.as_deref().unwrap_or_default();
            for pod in self.pods.list_namespace(namespace) {
                if selector.matches(labels_of(&pod))
                    && seen.insert(pod.metadata.uid.clone().unwrap_or_default())
                {
                    related.push(pod);
                }
            }
        }
        related
    }

    /// `manageReplicas`: executes the [`plan`](plan::plan) for this snapshot; the plan's
    /// guards decide whether unmet expectations or the owner's deletion hold it back.
    async fn manage(
        &self,
        owner: &Arc<O>,
        key: &str,
        namespace: &str,
        claimed: &[Arc<Pod>],
        expectations_satisfied: bool,
    ) -> Result<(), Error> {
        let desired = owner.desired_replicas();
        // Only a delete ranks victims by related pods (upstream lists them in its delete
        // branch only); with nothing to delete the namespace scans are skipped.
        let related = if claimed.len() > usize::try_from(desired.max(0)).unwrap_or(0) {
            self.related_pods(owner)
        } else {
            Vec::new()
        };
        let now = self.clock.wall();
        let snapshot = Snapshot {
            desired,
            claimed,
            related: &related,
            expectations_satisfied,
            owner_deleting: owner.meta().deletion_timestamp.is_some(),
        };
        let cfg = PlanConfig {
            burst: self.cfg.burst_replicas,
            pod_deletion_cost: self.cfg.pod_deletion_cost,
        };
        match plan::plan(&snapshot, &cfg, now) {
            Plan::Nothing => Ok(()),
            Plan::Create(n) => self.create_pods(owner, key, namespace, n).await,
            Plan::Delete { victims, sorted } => {
                if sorted && let Some(h) = metrics::sorting_deletion_age_ratio() {
                    for ratio in plan::deletion_age_ratios(claimed, &victims, now) {
                        h.observe(ratio);
                    }
                }
                self.delete_pods(owner, key, namespace, &victims).await
            }
        }
    }

    async fn create_pods(
        &self,
        owner: &Arc<O>,
        key: &str,
        namespace: &str,
        n: usize,
    ) -> Result<(), Error> {
        tracing::debug!(
            controller = O::CONTROLLER_NAME,
            key,
            count = n,
            "too few replicas, creating"
        );
        // Counted before the first request: a watch event for a new pod may arrive before
        // the create call returns.
        self.expectations
            .expect_creations(key, i64::try_from(n).unwrap_or(i64::MAX));
        let template = owner.template().cloned().unwrap_or_default();
        let template = &template;
        let (successes, error) = slow_start_batch(n, SLOW_START_INITIAL_BATCH_SIZE, |_| {
            let owner = owner.clone();
            async move {
                match self
                    .pod_control
                    .create_pod(namespace, template, &*owner, &PodOptions::default())
                    .await
                {
                    Ok(pod) => {
                        self.wrote(
                            key,
                            &*owner,
                            GroupResource::of::<Pod>(),
                            pod.resource_version.as_deref(),
                        );
                        Ok(())
                    }
                    // Every create fails in a terminating namespace; upstream counts it as
                    // done (and so waits for the expectations to expire).
                    Err(rkcm_runtime::Error::ForOwner { ref source, .. })
                        if is_namespace_terminating(source) =>
                    {
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
        })
        .await;
        // The informer will never report the pods that were not created.
        for _ in successes..n {
            self.expectations.creation_observed(key);
        }
        match error {
            None => Ok(()),
            Some(source) => Err(Error::from(PodStep::Create.failed(key, source))),
        }
    }

    async fn delete_pods(
        &self,
        owner: &Arc<O>,
        key: &str,
        namespace: &str,
        victims: &[Arc<Pod>],
    ) -> Result<(), Error> {
        tracing::debug!(
            controller = O::CONTROLLER_NAME,
            key,
            count = victims.len(),
            "too many replicas, deleting"
        );
        self.expectations
            .expect_deletions(key, victims.iter().map(|p| key_of(&**p)).collect());
        let deletes = victims.iter().map(|pod| {
            let owner = owner.clone();
            async move {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let result = self
                    .pod_control
                    .delete_pod(namespace, name, pod.metadata.uid.as_deref(), &*owner)
                    .await;
                match result {
                    Ok(()) => None,
                    Err(e) => {
                        // This deletion will never be observed through the informer (or the
                        // pod is already gone): stop waiting for it.
                        self.expectations.deletion_observed(key, &key_of(&**pod));
                        (!e.is_not_found()).then_some(e)
                    }
                }
            }
        });
        let errors = futures::future::join_all(deletes).await;
        match errors.into_iter().flatten().next() {
            None => Ok(()),
            Some(source) => Err(Error::from(PodStep::Delete.failed(key, source))),
        }
    }

    /// `PUT …/status` with the sync's object (its resourceVersion guards against stale
    /// writes); on failure re-read once and overwrite the fresh object's status. Returns the
    /// object as written.
    async fn write_status(
        &self,
        owner: &O,
        key: &str,
        namespace: &str,
        status: &ReplicaStatus,
    ) -> Result<O, Error> {
        let api: Api<O> = Api::namespaced(self.client.clone(), namespace);
        let name = owner.meta().name.clone().unwrap_or_default();
        let err = |source| Error::from(StatusError::new(O::KIND, key, source));
        tracing::debug!(
            controller = O::CONTROLLER_NAME,
            key,
            replicas = status.replicas,
            fully_labeled = status.fully_labeled_replicas,
            ready = status.ready_replicas,
            available = status.available_replicas,
            terminating = ?status.terminating_replicas,
            observed_generation = status.observed_generation,
            "updating status"
        );
        match write::replace_status_object(&self.client, owner.with_status(status)).await {
            Ok(updated) => Ok(updated),
            Err(first) => {
                tracing::debug!(controller = O::CONTROLLER_NAME, key, error = %first, "status update failed; retrying on a fresh copy");
                let fresh = api.get(&name).await.map_err(err)?;
                write::replace_status_object(&self.client, fresh.with_status(status))
                    .await
                    .map_err(err)
            }
        }
    }
}

impl<O: ReplicaOwner> Reconcile for Controller<O> {
    type Error = Error;

    /// Upstream's `handleErr`: retry with backoff; a stale cache or a conflict is expected.
    fn retry_policy() -> RetryPolicy<Error> {
        RetryPolicy::default().quiet_on(Error::is_expected_requeue)
    }

    /// One sync of the owner `key` (`syncReplicaSet`).
    async fn sync(&self, key: String) -> Result<(), Error> {
        self.sync_inner(&key).await
    }
}

#[cfg(test)]
mod tests;

/// The last decision's wait while pods are missing or not available (explain's
/// `PodsUnavailable`).
fn note_unavailable(written: &ReplicaStatus, desired: i32, min_ready: i32) {
    let available = written.available_replicas;
    if available < desired {
        rkcm_runtime::explain::decisions::note_wait(
            "PodsUnavailable",
            format_args!("{available} of {desired} pods available (minReadySeconds {min_ready})"),
        );
    }
}
