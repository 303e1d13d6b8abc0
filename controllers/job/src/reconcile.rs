//! The sync: stale-cache guard -> caches -> claim -> [`plan`](crate::plan) -> execute it
//! (`executor.rs`) -> [`status`](crate::status) -> status writes and finalizer removal; and
//! the orphan-pod sync. Event handlers are in `handlers.rs`.
//!
//! Mirrors `syncJob`, `syncOrphanPod` and `getPodsForJob` of upstream
//! `pkg/controller/job/job_controller.go`.
//!
//! Safety against stale caches:
//! - Creates and deletes are counted in expectations before they are issued; no pod is
//!   created or deleted while they are unmet.
//! - Finalizer removals are registered per pod UID before the patches go out; until the pod
//!   cache shows the finalizer gone (or the pod gone) the pod is treated as counted.
//! - Every status write carries the resourceVersion of the Job object it was computed from; a
//!   conflict fails the sync (retried with backoff) instead of overwriting a newer status, so
//!   counts computed from a stale Job are never written.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::{INDEX_CONTROLLER_UID, INDEX_ORPHANS_BY_NAMESPACE, Store};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::error::PodStep;
use rkcm_runtime::events::{EventRecorder, EventType, object_reference};
use rkcm_runtime::keys::split_key;
use rkcm_runtime::queue::WorkQueue;
use rkcm_runtime::tracked::Size;
use rkcm_runtime::workload::consistency::{GroupResource, StaleGuard};
use rkcm_runtime::workload::controller_ref::ControllerRefManager;
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::podcontrol::PodControl;

use crate::backoff::{BackoffRecord, BackoffStore};
use crate::consts::{TRACKING_FINALIZER, event, metrics as m};
use crate::error::Error;
use crate::metrics;
use crate::plan::{self, Skip, Snapshot, completion_mode_label, selector_of};
use crate::pods::{labels_of, remove_finalizer_patch};
use crate::status::{self};
use crate::tracking::FinalizerExpectations;

/// Everything the handlers and workers share.
pub(crate) struct Controller {
    pub(crate) client: kube::Client,
    pub(crate) jobs: Store<Job>,
    pub(crate) pods: Store<Pod>,
    pub(crate) expectations: UidTrackingExpectations,
    pub(crate) finalizer_expectations: FinalizerExpectations,
    pub(crate) backoff: BackoffStore,
    pub(crate) consistency: StaleGuard,
    pub(crate) pod_control: PodControl,
    pub(crate) recorder: EventRecorder,
    pub(crate) queue: WorkQueue<String>,
    pub(crate) orphan_queue: WorkQueue<String>,
    pub(crate) clock: SharedClock,
    pub(crate) cfg: crate::config::Config,
}

impl Controller {
    /// The per-object maps, for `rkcm_runtime::tracked`.
    pub(crate) fn tracked_sizes(&self, out: &mut Vec<Size>) {
        out.push(Size::object("expectations", self.expectations.len()));
        out.push(Size::object(
            "finalizer_expectations",
            self.finalizer_expectations.len(),
        ));
        out.push(Size::object("pod_failure_backoff", self.backoff.len()));
        out.push(Size::object("stale_guard", self.consistency.store().len()));
    }

    // ---- Job handlers -------------------------------------------------------------------

    // ---- Pod handlers -------------------------------------------------------------------

    // ---- stale-cache guard ----------------------------------------------------------------

    /// Records a write made for the Job `key` (identified by `job_uid`).
    pub(crate) fn wrote<K: kube::Resource<DynamicType = ()>>(
        &self,
        key: &str,
        job_uid: &str,
        obj: &K,
    ) {
        self.wrote_version::<K>(key, job_uid, obj.meta().resource_version.as_deref());
    }

    /// [`Self::wrote`] for a write of which only the identity was read back.
    pub(crate) fn wrote_version<K: kube::Resource<DynamicType = ()>>(
        &self,
        key: &str,
        job_uid: &str,
        resource_version: Option<&str>,
    ) {
        self.consistency
            .wrote(key, job_uid, GroupResource::of::<K>(), resource_version);
    }

    /// The guard's check: an error while a cache lags behind this Job's recorded writes
    /// (counted in `job_controller_stale_sync_skips_total`).
    #[allow(clippy::result_large_err)]
    fn ensure_caches_caught_up(&self, key: &str) -> Result<(), Error> {
        self.consistency
            .ensure_caught_up(key, &[&self.pods, &self.jobs])
            .map_err(|stale| Error::StaleCache {
                key: key.to_owned(),
                source: Box::new(stale),
            })
    }

    // ---- orphan pods --------------------------------------------------------------------

    /// `syncOrphanPod`: removes the tracking finalizer from a pod no live, unfinished Job of
    /// ours controls.
    pub(crate) async fn sync_orphan(&self, key: String) -> Result<(), Error> {
        let (namespace, name) = split_key(&key);
        let Some(pod) = self.pods.get(&key) else {
            return Ok(());
        };
        let owner = self.resolve_pod(namespace.unwrap_or_default(), &pod);
        if !plan::release_orphan(&pod, owner.as_deref()) {
            return Ok(());
        }
        match self
            .pod_control
            .patch_pod(
                namespace.unwrap_or_default(),
                name,
                &remove_finalizer_patch(),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(source) => Err(Error::RemoveFinalizers { key, source }),
        }
    }

    // ---- sync ---------------------------------------------------------------------------

    async fn sync_once(&self, key: &str) -> Result<(), Error> {
        let key = key.to_owned();
        let started = tokio::time::Instant::now();
        self.ensure_caches_caught_up(&key)?;
        let Some(job) = self.jobs.get(&key) else {
            rkcm_runtime::explain::decisions::note_gone();
            tracing::debug!(key = %key, "job has been deleted");
            self.forget(&key);
            return Ok(());
        };
        match plan::skip(&job) {
            Some(Skip::ManagedBy(by)) => {
                tracing::debug!(key = %key, controller = by, "job is managed by another controller; skipping");
                return Ok(());
            }
            Some(Skip::Finished) => {
                self.backoff.remove(&key);
                return Ok(());
            }
            Some(Skip::UnknownCompletionMode) => {
                self.recorder.event(
                    &object_reference(&*job),
                    EventType::Warning,
                    event::UNKNOWN_COMPLETION_MODE,
                    event::UNKNOWN_COMPLETION_MODE_MESSAGE,
                );
                return Ok(());
            }
            None => {}
        }
        let mode = completion_mode_label(&job);
        let mut action = m::ACTION_RECONCILING;
        let result = self.sync_job(&key, &job, &mut action).await;
        let outcome = if result.is_ok() { "success" } else { "error" };
        if let Some(x) = metrics::get() {
            x.sync_duration
                .with_label_values(&[mode, outcome, action])
                .observe(started.elapsed().as_secs_f64());
            x.syncs.with_label_values(&[mode, outcome, action]).inc();
        }
        tracing::debug!(
            key = %key,
            action,
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "finished syncing job"
        );
        result
    }

    async fn sync_job(
        &self,
        key: &str,
        job: &Arc<Job>,
        action: &mut &'static str,
    ) -> Result<(), Error> {
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        // Read before listing pods: an observation arriving meanwhile must not be mistaken
        // for one this sync already accounts for.
        let satisfied = self.expectations.satisfied_expectations(key);
        let pods = self.pods_for_job(job, key, &namespace).await?;
        let expected_rm = self.finalizer_expectations.get(key);
        let snapshot = Snapshot {
            job,
            pods: &pods,
            expected_rm_finalizers: &expected_rm,
            expectations_satisfied: satisfied,
            // Upstream's by default: no record, an empty one, and nothing kept for a Job
            // that never failed.
            backoff: if self.cfg.backoff_from_counted_pods {
                self.backoff.get_or_seed(key, || {
                    let refs: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
                    BackoffRecord::of_counted_pods(job, &refs)
                })
            } else {
                self.backoff.get(key)
            },
        };
        let now = self.clock.wall();
        let plan = plan::plan(&snapshot, now);
        *action = plan.sync_action;
        for wait in &plan.waiting {
            let after = wait.requeue_after();
            tracing::debug!(key, reason = wait.code(), next_sync_in = ?after, "job waits; will sync again");
            rkcm_runtime::explain::decisions::note_wait(
                wait.code(),
                format_args!("sync again in {after:?}"),
            );
            self.queue.add_after(key.to_owned(), after);
        }
        let (executed, manage_err) = self.execute(job, key, &namespace, &plan).await;
        let managed = status::after_action(
            job,
            &plan,
            satisfied,
            executed,
            self.cfg.clear_start_time_on_suspend,
            now,
        );
        for e in &managed.events {
            self.emit(job, e);
        }
        let tracked = status::track(job, &pods, &expected_rm, &plan, managed, now);
        self.track_and_remove_finalizers(job, key, &plan, tracked, now)
            .await?;
        manage_err.map_or(Ok(()), Err)
    }

    /// `getPodsForJob`: the Job's pods after adopting matching orphans (they get the
    /// controller ref and the tracking finalizer) and releasing pods that stopped matching.
    async fn pods_for_job(
        &self,
        job: &Arc<Job>,
        key: &str,
        namespace: &str,
    ) -> Result<Vec<Arc<Pod>>, Error> {
        let claim_err = |source| Error::from(PodStep::Claim.failed(key, source));
        let selector = selector_of(job).map_err(|e| {
            claim_err(rkcm_runtime::Error::Other(format!(
                "couldn't convert Job selector: {e}"
            )))
        })?;
        let job_uid = job.metadata.uid.clone().unwrap_or_default();
        let mut candidates: Vec<Arc<Pod>> =
            self.pods.by_index(INDEX_ORPHANS_BY_NAMESPACE, namespace);
        candidates.extend(
            self.pods
                .by_index(INDEX_CONTROLLER_UID, &job_uid)
                .into_iter()
                .filter(|p| p.metadata.namespace.as_deref() == Some(namespace)),
        );
        let mut manager = ControllerRefManager::<Job, Pod>::new(
            &**job,
            Api::namespaced(self.client.clone(), namespace),
            Api::namespaced(self.client.clone(), namespace),
        )
        .map_err(claim_err)?
        .with_finalizers(vec![TRACKING_FINALIZER.to_owned()]);
        let outcome = manager
            .claim(&candidates, |p| selector.matches(labels_of(p)))
            .await;
        outcome.into_result().map_err(claim_err)
    }
}

impl Reconcile for Controller {
    type Error = Error;

    /// One sync of the Job `key` (`syncJob`).
    async fn sync(&self, key: String) -> Result<(), Error> {
        match self.sync_once(&key).await {
            // Normal requeues (a cache behind the controller's own writes, a status conflict
            // from a stale Job) are retried quietly after the base backoff.
            Err(e) if e.is_routine_retry() => {
                tracing::debug!(key = %key, error = %e, "requeuing job");
                self.queue.add_rate_limited(key);
                Ok(())
            }
            other => other,
        }
    }
}
