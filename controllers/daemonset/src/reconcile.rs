//! The sync: caches -> history -> claim -> [`plan`](crate::plan) -> pod writes -> history
//! cleanup -> status write.
//!
//! Mirrors `syncDaemonSet`, `getDaemonPods`, `syncNodes`, `storeDaemonSetStatus` of upstream
//! `pkg/controller/daemon/daemon_controller.go` and `constructHistory`, `snapshot`,
//! `dedupCurHistories`, `controlledHistories`, `cleanupHistory` of `update.go`.
//!
//! Safety against stale caches:
//! - Creates and deletes are counted in the expectations before they are issued; while they
//!   are unmet only status is written.
//! - With the stale-cache guard on (gate `StaleControllerConsistencyDaemonSet`) a sync waits
//!   until the pod and DaemonSet caches show the pods this controller created or adopted and
//!   the status it wrote for that DaemonSet.
//! - Deletes are graceful (no grace period is ever sent) with a UID precondition; adoption
//!   re-reads the DaemonSet first; status writes carry the resourceVersion.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use kube::api::{Api, Patch, PatchParams, PostParams};
use rkcm_runtime::api::write;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::cache::{INDEX_CONTROLLER_UID, INDEX_ORPHANS_BY_NAMESPACE, Store};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::error::is_namespace_terminating;
use rkcm_runtime::events::{EventRecorder, EventType};
use rkcm_runtime::fasthash::HashMap;
use rkcm_runtime::keys::key_of;
use rkcm_runtime::keys::split_key;
use rkcm_runtime::queue::pacing::{StatusPacer, SyncSpacer};
use rkcm_runtime::queue::{RetryPolicy, WorkQueue};
use rkcm_runtime::tracked::Size;
use rkcm_runtime::workload::consistency::{GroupResource, Stale, StaleGuard};
use rkcm_runtime::workload::controller_ref::ControllerRefManager;
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::history::History;
use rkcm_runtime::workload::podcontrol::{
    PodControl, PodOptions, SLOW_START_INITIAL_BATCH_SIZE, slow_start_batch,
};
use rkcm_runtime::workload::selector::Selector;

use crate::backoff::Backoff;
use crate::config::Config;
use crate::consts::{labels, messages, reasons};
use crate::error::Error;
use crate::plan::{Plan, Snapshot, plan};
use crate::revision;
use crate::status::{desired_status, is_routine, needs_write};
use crate::template::{
    create_pod_template, min_ready_seconds, replace_node_name_affinity, template_generation,
};

/// Everything the handlers and workers share.
pub(crate) struct Controller {
    pub(crate) client: kube::Client,
    pub(crate) daemonsets: Store<DaemonSet>,
    pub(crate) pods: Store<Pod>,
    pub(crate) nodes: Store<Node>,
    pub(crate) revisions: Store<ControllerRevision>,
    pub(crate) expectations: UidTrackingExpectations,
    pub(crate) pod_control: PodControl,
    pub(crate) recorder: EventRecorder,
    pub(crate) history: History,
    pub(crate) queue: WorkQueue<String>,
    pub(crate) node_queue: WorkQueue<String>,
    pub(crate) clock: SharedClock,
    pub(crate) cfg: Config,
    pub(crate) consistency: StaleGuard,
    pub(crate) backoff: Mutex<Backoff>,
    /// Spaces out one DaemonSet's status writes that only move counts
    /// ([`rkcm_runtime::queue::pacing`]).
    pub(crate) pacer: StatusPacer,
    /// Spaces out the syncs that pod changes ask for ([`rkcm_runtime::queue::pacing::SyncSpacer`]).
    pub(crate) spacer: SyncSpacer,
}

fn labels_of<K: kube::Resource>(obj: &K) -> Option<&std::collections::BTreeMap<String, String>> {
    obj.meta().labels.as_ref()
}

impl Controller {
    /// The per-object maps, for `rkcm_runtime::tracked`. The failed-pod backoff is swept by
    /// age (every `BACKOFF_GC_INTERVAL`), not by object.
    pub(crate) fn tracked_sizes(&self, out: &mut Vec<Size>) {
        out.push(Size::object("expectations", self.expectations.len()));
        out.push(Size::object("status_pacing", self.pacer.len()));
        out.push(Size::object("sync_spacing", self.spacer.len()));
        if self.consistency.is_enabled() {
            out.push(Size::object("stale_guard", self.consistency.store().len()));
        }
        out.push(Size::time("failed_pod_backoff", self.backoff().len()));
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        // Every mutation is a single map operation: a panic elsewhere cannot tear it.
        self.backoff
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops expired failed-pod back-off entries (`failedPodsBackoff.GC`).
    pub(crate) fn gc_backoff(&self) {
        let now = self.clock.wall();
        self.backoff().gc(now);
    }

    /// Records a write for the stale-cache guard.
    fn wrote(&self, key: &str, ds: &DaemonSet, resource: GroupResource, rv: Option<&str>) {
        let uid = ds.metadata.uid.as_deref().unwrap_or_default();
        self.consistency.wrote(key, uid, resource, rv);
    }

    /// The guard's check (`EnsureReady`), counted in
    /// `daemonset_controller_stale_sync_skips_total`.
    fn ensure_caches_caught_up(&self, key: &str) -> Result<(), Stale> {
        self.consistency
            .ensure_caught_up(key, &[&self.pods, &self.daemonsets])
    }

    async fn sync_inner(&self, key: &str) -> Result<(), Error> {
        self.ensure_caches_caught_up(key)
            .map_err(|source| Error::StaleCache {
                key: key.to_owned(),
                source,
            })?;
        let Some(ds) = self.daemonsets.get(key) else {
            rkcm_runtime::explain::decisions::note_gone();
            tracing::debug!(daemonset = key, "daemon set has been deleted");
            self.expectations.delete_expectations(key);
            self.consistency.clear(key, None);
            self.pacer.forget(key);
            self.spacer.forget(key);
            return Ok(());
        };
        let nodes = self.nodes.list();
        let selector = match Selector::from_label_selector(&ds.spec.selector) {
            Ok(s) => s,
            Err(error) => {
                // Retrying cannot help until the spec changes, which enqueues the key anyway.
                tracing::warn!(daemonset = key, %error, "invalid pod selector; skipping");
                return Ok(());
            }
        };
        if selector.is_empty() {
            self.recorder.event_for(
                &*ds,
                EventType::Warning,
                reasons::SELECTING_ALL,
                messages::SELECTING_ALL,
            );
            return Ok(());
        }
        // History objects may already be gone: neither pods nor status are touched.
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let (namespace, _) = split_key(key);
        let namespace = namespace.unwrap_or_default().to_owned();

        let (hash, old_revisions) = self
            .construct_history(&ds, key, &namespace, &selector)
            .await?;
        let satisfied = self.expectations.satisfied_expectations(key);
        let pods = self.claim_pods(&ds, key, &namespace, &selector).await?;

        let now = self.clock.wall();
        let backoff = self.backoff().clone();
        let snapshot = Snapshot {
            ds: &ds,
            nodes: &nodes,
            pods: &pods,
            hash: &hash,
            expectations_satisfied: satisfied,
            backoff: &backoff,
            burst: self.cfg.burst_replicas,
            comparison_operators: self.cfg.taint_comparison_operators,
            skip_not_ready_nodes: self.cfg.rollout_skips_not_ready_nodes,
        };
        let started = std::time::Instant::now();
        let plan = plan(&snapshot, now);
        if rkcm_runtime::explain::decisions::recording() {
            // The last decision's waits, in explain's reason codes.
            let e = crate::explain::explain_sync(&snapshot, &plan, &self.cfg, now);
            rkcm_runtime::explain::decisions::note_waits(&e.waiting_on);
        }
        let cost = self.clock.work_time(started);
        if let Some(delay) = plan.requeue_after {
            self.queue.add_after(key.to_owned(), delay);
        }

        let mut pod_result = Ok(());
        if satisfied {
            pod_result = self.apply(&ds, key, &namespace, &hash, &plan).await;
            if pod_result.is_ok()
                && let Some(source) = plan.error.clone()
            {
                pod_result = Err(Error::Plan {
                    key: key.to_owned(),
                    source,
                });
            }
            if pod_result.is_ok() {
                pod_result = self.cleanup_history(&ds, key, &old_revisions, &pods).await;
            }
        }
        let status_result = self.update_status(&ds, key, &namespace, &plan).await;
        self.spacer.synced(key, self.clock.now(), cost);
        match (pod_result, status_result) {
            (Err(e), Err(status)) => {
                tracing::debug!(daemonset = key, error = %status, "failed to update status");
                Err(e)
            }
            (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
            (Ok(()), Ok(())) => Ok(()),
        }
    }

    // ---- history ------------------------------------------------------------------------

    /// `constructHistory`: claims the revisions, backfills hash labels, finds or creates the
    /// current revision (de-duplicating, bumping its number on rollback). Returns the current
    /// hash and the old revisions.
    async fn construct_history(
        &self,
        ds: &Arc<DaemonSet>,
        key: &str,
        namespace: &str,
        selector: &Selector,
    ) -> Result<(String, Vec<Arc<ControllerRevision>>), Error> {
        let herr = |message: String| Error::History {
            key: key.to_owned(),
            message,
        };
        let candidates = self.revisions.list_namespace(namespace);
        let mut manager = ControllerRefManager::<DaemonSet, ControllerRevision>::new(
            &**ds,
            Api::namespaced(self.client.clone(), namespace),
            Api::namespaced(self.client.clone(), namespace),
        )
        .map_err(|e| herr(e.to_string()))?;
        let claimed = manager
            .claim(&candidates, |r| selector.matches(labels_of(r)))
            .await
            .into_result()
            .map_err(|e| herr(e.to_string()))?;
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), namespace);
        let mut revisions = Vec::with_capacity(claimed.len());
        for r in claimed {
            if labels_of(&*r).is_some_and(|l| l.contains_key(labels::CONTROLLER_REVISION_HASH)) {
                revisions.push(r);
                continue;
            }
            // Revisions of old controllers lack the label: their name stands in for the hash.
            let mut update = (*r).clone();
            let name = update.metadata.name.clone().unwrap_or_default();
            update
                .metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(labels::CONTROLLER_REVISION_HASH.to_owned(), name.clone());
            let updated = api
                .replace(&name, &PostParams::default(), &update)
                .await
                .map_err(|e| herr(format!("labelling revision {name}: {e}")))?;
            revisions.push(Arc::new(updated));
        }
        let split = revision::split_history(ds, &revisions);
        let next = revision::max_revision(&split.old) + 1;
        let current = if split.current.is_empty() {
            self.snapshot(ds, key, namespace, next).await?
        } else {
            let keep = self
                .dedup(ds, key, namespace, &split.current, selector)
                .await?;
            if revision::number(&keep) < next {
                self.history
                    .update_controller_revision(&keep, next)
                    .await
                    .map_err(|e| herr(e.to_string()))?;
            }
            keep
        };
        Ok((revision::revision_hash(&current).to_owned(), split.old))
    }

    /// `snapshot`: creates the current revision; on a name taken by other data, raises
    /// `status.collisionCount` and fails so that the next sync uses a new name.
    async fn snapshot(
        &self,
        ds: &DaemonSet,
        key: &str,
        namespace: &str,
        number: i64,
    ) -> Result<Arc<ControllerRevision>, Error> {
        let herr = |message: String| Error::History {
            key: key.to_owned(),
            message,
        };
        let proposed = revision::new_revision(ds, number)
            .ok_or_else(|| herr("the DaemonSet has no name or uid".into()))?;
        let name = proposed.metadata.name.clone().unwrap_or_default();
        let body = revision::create_body(&proposed);
        let request = http::Request::post(format!(
            "/apis/apps/v1/namespaces/{namespace}/controllerrevisions"
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .map_err(|e| herr(format!("building the create request: {e}")))?;
        let outer = match self.client.request::<ControllerRevision>(request).await {
            Ok(created) => return Ok(Arc::new(created)),
            Err(kube::Error::Api(s)) if s.is_already_exists() => kube::Error::Api(s),
            Err(e) => return Err(herr(format!("creating revision {name}: {e}"))),
        };
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), namespace);
        let existing = api
            .get(&name)
            .await
            .map_err(|e| herr(format!("reading revision {name}: {e}")))?;
        if revision::matches(&revision::patch_bytes(ds), &existing) {
            return Ok(Arc::new(existing));
        }
        let ds_api: Api<DaemonSet> = Api::namespaced(self.client.clone(), namespace);
        let ds_name = ds.metadata.name.clone().unwrap_or_default();
        let mut fresh = ds_api
            .get(&ds_name)
            .await
            .map_err(|e| herr(format!("reading the DaemonSet: {e}")))?;
        let used = ds.status.as_ref().and_then(|s| s.collision_count);
        let stored = fresh.status.as_ref().and_then(|s| s.collision_count);
        if used != stored {
            return Err(Error::Collision {
                key: key.to_owned(),
                message: format!(
                    "found a stale collision count ({used:?}, expected {stored:?}) of DaemonSet {ds_name:?} while processing; will retry until it is updated"
                ),
            });
        }
        let status = fresh.status.get_or_insert_with(Default::default);
        let count = status.collision_count.unwrap_or(0).saturating_add(1);
        status.collision_count = Some(count);
        let updated = ds_api
            .replace_status(&ds_name, &PostParams::default(), &fresh)
            .await
            .map_err(|e| herr(format!("raising collisionCount: {e}")))?;
        self.wrote(
            key,
            ds,
            GroupResource::of::<DaemonSet>(),
            updated.metadata.resource_version.as_deref(),
        );
        tracing::info!(
            daemonset = key,
            collision_count = count,
            "found a hash collision for DaemonSet - bumping collisionCount to resolve it"
        );
        Err(Error::Collision {
            key: key.to_owned(),
            message: outer.to_string(),
        })
    }

    /// `dedupCurHistories`: keeps the highest-numbered current revision, relabels pods that
    /// carry another hash, deletes the other duplicates.
    async fn dedup(
        &self,
        ds: &Arc<DaemonSet>,
        key: &str,
        namespace: &str,
        current: &[Arc<ControllerRevision>],
        selector: &Selector,
    ) -> Result<Arc<ControllerRevision>, Error> {
        let herr = |message: String| Error::History {
            key: key.to_owned(),
            message,
        };
        let Some(keep) = revision::keeper(current) else {
            return Err(herr("no current revision".into()));
        };
        if current.len() == 1 {
            return Ok(keep);
        }
        let keep_hash = revision::revision_hash(&keep).to_owned();
        let pods = self.claim_pods(ds, key, namespace, selector).await?;
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        for pod in pods {
            if crate::template::pod_hash(&pod) == keep_hash {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            let patch = serde_json::json!({"metadata": {"labels": {labels::CONTROLLER_REVISION_HASH: keep_hash}}});
            let patched = pod_api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| herr(format!("relabelling pod {name}: {e}")))?;
            self.wrote(
                key,
                ds,
                GroupResource::of::<Pod>(),
                patched.metadata.resource_version.as_deref(),
            );
        }
        for dup in current {
            if dup.metadata.name == keep.metadata.name {
                continue;
            }
            self.history
                .delete_controller_revision(dup)
                .await
                .map_err(|e| herr(e.to_string()))?;
        }
        Ok(keep)
    }

    /// `cleanupHistory`.
    async fn cleanup_history(
        &self,
        ds: &DaemonSet,
        key: &str,
        old: &[Arc<ControllerRevision>],
        pods: &[Arc<Pod>],
    ) -> Result<(), Error> {
        let limit = ds.spec.revision_history_limit.unwrap_or(10);
        for r in revision::history_to_delete(old, pods, limit) {
            match self.history.delete_controller_revision(&r).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(source) => {
                    return Err(Error::CleanupHistory {
                        key: key.to_owned(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    // ---- pods ---------------------------------------------------------------------------

    /// `getDaemonPods`: the namespace's orphans and this DaemonSet's pods, claimed by the
    /// selector (orphans adopted after a fresh read of the DaemonSet, non-matching pods
    /// released).
    async fn claim_pods(
        &self,
        ds: &Arc<DaemonSet>,
        key: &str,
        namespace: &str,
        selector: &Selector,
    ) -> Result<Vec<Arc<Pod>>, Error> {
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let mut candidates = self.pods.by_index(INDEX_ORPHANS_BY_NAMESPACE, namespace);
        candidates.extend(
            self.pods
                .by_index(INDEX_CONTROLLER_UID, &uid)
                .into_iter()
                .filter(|p| p.metadata.namespace.as_deref() == Some(namespace)),
        );
        let claim_err = |source| Error::Claim {
            key: key.to_owned(),
            source,
        };
        let mut manager = ControllerRefManager::<DaemonSet, Pod>::new(
            &**ds,
            Api::namespaced(self.client.clone(), namespace),
            Api::namespaced(self.client.clone(), namespace),
        )
        .map_err(claim_err)?;
        let outcome = manager
            .claim(&candidates, |p| selector.matches(labels_of(p)))
            .await;
        if self.consistency.is_enabled() {
            let cached: HashMap<&str, Option<&str>> = candidates
                .iter()
                .filter_map(|p| {
                    Some((
                        p.metadata.uid.as_deref()?,
                        p.metadata.resource_version.as_deref(),
                    ))
                })
                .collect();
            for pod in &outcome.claimed {
                let rv = pod.metadata.resource_version.as_deref();
                let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
                if cached.get(pod_uid).copied().flatten() != rv {
                    self.wrote(key, ds, GroupResource::of::<Pod>(), rv);
                }
            }
        }
        outcome.into_result().map_err(claim_err)
    }

    /// Records the plan's events and back-off, then `syncNodes`.
    async fn apply(
        &self,
        ds: &Arc<DaemonSet>,
        key: &str,
        namespace: &str,
        hash: &str,
        plan: &Plan,
    ) -> Result<(), Error> {
        for e in &plan.events {
            let type_ = if e.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            self.recorder.event_for(&**ds, type_, e.reason, &e.message);
        }
        if !plan.backoff_next.is_empty() {
            let now = self.clock.wall();
            let mut backoff = self.backoff();
            for k in &plan.backoff_next {
                backoff.next(k, now);
            }
        }
        self.sync_nodes(ds, key, namespace, hash, &plan.creates, &plan.deletes)
            .await
    }

    /// `syncNodes`: expectations first, then creates in slow-start batches and deletes.
    async fn sync_nodes(
        &self,
        ds: &Arc<DaemonSet>,
        key: &str,
        namespace: &str,
        hash: &str,
        creates: &[String],
        deletes: &[Arc<Pod>],
    ) -> Result<(), Error> {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        // Deletions are tracked by pod: a pod observed twice (its deletion timestamp, then its
        // removal) counts once, so a batch is never taken as done while some of its pods still
        // look alive in the cache (upstream counts both and may delete such a pod again).
        self.expectations.set_expectations(
            key,
            count(creates.len()),
            deletes.iter().map(|p| key_of(&**p)).collect(),
        );
        let mut first_error: Option<rkcm_runtime::Error> = None;
        if !creates.is_empty() {
            tracing::debug!(
                daemonset = key,
                count = creates.len(),
                "nodes needing daemon pods, creating"
            );
            let template = create_pod_template(&ds.spec.template, template_generation(ds), hash);
            let attempted = AtomicUsize::new(0);
            let (_, error) = slow_start_batch(creates.len(), SLOW_START_INITIAL_BATCH_SIZE, |i| {
                attempted.fetch_add(1, Ordering::Relaxed);
                let mut pod_template = template.clone();
                let node = creates.get(i).cloned().unwrap_or_default();
                let ds = ds.clone();
                async move {
                    if let Some(spec) = pod_template.spec.as_mut() {
                        spec.affinity = Some(replace_node_name_affinity(spec.affinity.take(), &node));
                    }
                    match self
                        .pod_control
                        .create_pod(namespace, &pod_template, &*ds, &PodOptions::default())
                        .await
                    {
                        Ok(pod) => {
                            self.wrote(key, &ds, GroupResource::of::<Pod>(), pod.resource_version.as_deref());
                            Ok(())
                        }
                        // The namespace is going away: every later create fails the same way.
                        Err(rkcm_runtime::Error::ForOwner { ref source, .. })
                            if is_namespace_terminating(source) =>
                        {
                            Ok(())
                        }
                        Err(e) => {
                            tracing::debug!(daemonset = key, node, error = %e, "failed creation, decrementing expectations");
                            self.expectations.creation_observed(key);
                            Err(e)
                        }
                    }
                }
            })
            .await;
            let skipped = creates
                .len()
                .saturating_sub(attempted.load(Ordering::Relaxed));
            if skipped > 0 {
                tracing::debug!(
                    daemonset = key,
                    skipped,
                    "slow-start failure, skipping creation of pods"
                );
                self.expectations.lower_expectations(key, count(skipped), 0);
            }
            first_error = error;
        }
        if !deletes.is_empty() {
            let errors = self.delete_pods(ds, key, namespace, deletes).await;
            for e in errors {
                if first_error.is_none() {
                    first_error = Some(e);
                } else {
                    tracing::debug!(daemonset = key, error = %e, "another pod write failed");
                }
            }
        }
        match first_error {
            None => Ok(()),
            Some(source) => Err(Error::Pods {
                key: key.to_owned(),
                source,
            }),
        }
    }

    /// The deletes of `syncNodes`, all at once; the errors (NotFound is none).
    async fn delete_pods(
        &self,
        ds: &Arc<DaemonSet>,
        key: &str,
        namespace: &str,
        deletes: &[Arc<Pod>],
    ) -> Vec<rkcm_runtime::Error> {
        tracing::debug!(
            daemonset = key,
            count = deletes.len(),
            "pods to delete for daemon set, deleting"
        );
        let calls = deletes.iter().map(|pod| {
            let ds = ds.clone();
            async move {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                match self
                    .pod_control
                    .delete_pod(namespace, name, pod.metadata.uid.as_deref(), &*ds)
                    .await
                {
                    Ok(()) => None,
                    Err(e) => {
                        self.expectations.deletion_observed(key, &key_of(&**pod));
                        (!e.is_not_found()).then_some(e)
                    }
                }
            }
        });
        futures::future::join_all(calls)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    // ---- status -------------------------------------------------------------------------

    /// `storeDaemonSetStatus`: PUT the status subresource with the cached object's
    /// resourceVersion; on failure re-read once and retry.
    async fn update_status(
        &self,
        ds: &Arc<DaemonSet>,
        key: &str,
        namespace: &str,
        plan: &Plan,
    ) -> Result<(), Error> {
        if !needs_write(ds, &plan.status) {
            self.requeue_for_availability(ds, key, plan);
            return Ok(());
        }
        if is_routine(ds, plan.update_observed_generation)
            && let Some(wait) = self.pacer.hold(key, self.clock.now())
        {
            // Counts written moments ago: the sync at the end of the interval writes whatever
            // the caches count by then.
            self.queue.add_after(key.to_owned(), wait);
            return Ok(());
        }
        let err = |source| Error::UpdateStatus {
            key: key.to_owned(),
            source,
        };
        let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), namespace);
        let name = ds.metadata.name.clone().unwrap_or_default();
        let generation = ds.metadata.generation;
        let build = |base: &DaemonSet| {
            let mut obj = base.clone();
            let mut status = desired_status(base, &plan.status, false);
            if plan.update_observed_generation {
                status.observed_generation = generation;
            }
            obj.status = Some(status);
            obj
        };
        tracing::debug!(daemonset = key, status = ?plan.status, update_observed_generation = plan.update_observed_generation, "updating daemon set status");
        let updated = match write::replace_status(&self.client, &build(ds)).await {
            Ok(u) => u,
            Err(first) => {
                tracing::debug!(daemonset = key, error = %first, "status update failed; retrying on a fresh copy");
                let fresh = api.get(&name).await.map_err(err)?;
                write::replace_status(&self.client, &build(&fresh))
                    .await
                    .map_err(err)?
            }
        };
        self.wrote(
            key,
            ds,
            GroupResource::of::<DaemonSet>(),
            updated.resource_version.as_deref(),
        );
        self.pacer.wrote(key, self.clock.now());
        self.requeue_for_availability(ds, key, plan);
        Ok(())
    }

    /// A guard against clock skew: with `minReadySeconds`, look again once pods that are ready
    /// may have become available.
    fn requeue_for_availability(&self, ds: &DaemonSet, key: &str, plan: &Plan) {
        let min_ready = min_ready_seconds(ds);
        if min_ready > 0 && plan.status.number_ready != plan.status.number_available {
            self.queue.add_after(
                key.to_owned(),
                std::time::Duration::from_secs(u64::try_from(min_ready).unwrap_or(0)),
            );
        }
    }
}

impl Reconcile for Controller {
    type Error = Error;

    /// Upstream retries every failure for ever with backoff; the routine ones quietly.
    fn retry_policy() -> RetryPolicy<Error> {
        RetryPolicy::default().quiet_on(Error::is_expected_requeue)
    }

    /// One sync of the DaemonSet `key` (`syncDaemonSet`).
    async fn sync(&self, key: String) -> Result<(), Error> {
        self.sync_inner(&key).await
    }
}
