//! The event handlers and the sync: caches -> claim -> [`plan`](crate::plan) -> pod writes ->
//! [`status`](crate::status) -> status writes and finalizer removal.
//!
//! Mirrors `addPod`, `updatePod`, `deletePod`, `addJob`, `updateJob`, `deleteJob`, `syncJob`,
//! `syncOrphanPod`, `deleteActivePods`, `deleteJobPods`, `manageJob` (its I/O),
//! `trackJobStatusAndRemoveFinalizers`, `flushUncountedAndRemoveFinalizers` and
//! `removeTrackingFinalizerFromPods` of upstream `pkg/controller/job/job_controller.go`.
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
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::Api;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::{Change, INDEX_CONTROLLER_UID, INDEX_ORPHANS_BY_NAMESPACE, Store};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::error::PodStep;
use rkcm_runtime::error::is_namespace_terminating;
use rkcm_runtime::events::{EventRecorder, EventType, object_reference};
use rkcm_runtime::keys::{key_of, split_key};
use rkcm_runtime::queue::WorkQueue;
use rkcm_runtime::tracked::Size;
use rkcm_runtime::workload::children::{ChildHandler, on_child_change};
use rkcm_runtime::workload::consistency::{ConsistencyStore, GroupResource};
use rkcm_runtime::workload::controller_ref::{ControllerRefManager, controller_of};
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::podcontrol::{PodControl, PodOptions, slow_start_batch};
use rkcm_runtime::workload::selector::Selector;

use crate::backoff::BackoffStore;
use crate::consts::{
    MANAGED_BY_JOB_CONTROLLER, SYNC_BATCH_PERIOD, TRACKING_FINALIZER, event, metrics as m,
};
use crate::error::Error;
use crate::indexes::{add_completion_index_env, apply_index, generate_name_with_index};
use crate::metrics;
use crate::plan::{self, Action, NewPod, Plan, Snapshot, completion_mode_label, is_finished};
use crate::pods::{has_tracking_finalizer, is_ready, is_terminal, uid};
use crate::status::{self, Executed, JobEvent, Tracked};
use crate::tracking::FinalizerExpectations;

/// Everything the handlers and workers share.
pub(crate) struct Controller {
    pub(crate) client: kube::Client,
    pub(crate) jobs: Store<Job>,
    pub(crate) pods: Store<Pod>,
    pub(crate) expectations: UidTrackingExpectations,
    pub(crate) finalizer_expectations: FinalizerExpectations,
    pub(crate) backoff: BackoffStore,
    pub(crate) consistency: ConsistencyStore,
    pub(crate) pod_control: PodControl,
    pub(crate) recorder: EventRecorder,
    pub(crate) queue: WorkQueue<String>,
    pub(crate) orphan_queue: WorkQueue<String>,
    pub(crate) clock: SharedClock,
    pub(crate) cfg: crate::config::Config,
}

/// The external controller named in `spec.managedBy`, if it is not this controller.
pub fn managed_by_external(job: &Job) -> Option<&str> {
    job.spec
        .as_ref()
        .and_then(|s| s.managed_by.as_deref())
        .filter(|m| *m != MANAGED_BY_JOB_CONTROLLER)
}

fn labels_of(pod: &Pod) -> Option<&std::collections::BTreeMap<String, String>> {
    pod.metadata.labels.as_ref()
}

/// The Job's selector; a missing one selects nothing (`LabelSelectorAsSelector(nil)`).
fn selector_of(job: &Job) -> Result<Selector, String> {
    Selector::from_optional(job.spec.as_ref().and_then(|s| s.selector.as_ref()))
        .map_err(|e| e.to_string())
}

/// `job_controller_terminated_pods_tracking_finalizer_total`: terminal pods gaining or losing
/// the tracking finalizer, as the informer sees them.
fn record_finished_pod_with_tracking_finalizer(old: Option<&Pod>, new: Option<&Pod>) {
    let counted = |p: Option<&Pod>| p.is_some_and(|p| is_terminal(p) && has_tracking_finalizer(p));
    let (was, is) = (counted(old), counted(new));
    if was == is {
        return;
    }
    let label = if is { m::ADD } else { m::DELETE };
    metrics::inc(|x| &x.tracking_finalizer, &[label], 1);
}

impl ChildHandler<Pod> for Controller {
    type Owner = Job;

    /// `resolveControllerRef`: the cached Job the ref names, if kind and UID agree.
    fn resolve(&self, namespace: &str, r: &OwnerReference) -> Option<Arc<Job>> {
        if r.kind != "Job" {
            return None;
        }
        let job = self
            .jobs
            .get(&rkcm_runtime::keys::key(Some(namespace), &r.name))?;
        (job.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(job)
    }

    /// Jobs in the pod's namespace whose selector matches it.
    fn matching(&self, pod: &Pod) -> Vec<Arc<Job>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let labels = labels_of(pod);
        self.jobs
            .list_namespace(namespace)
            .into_iter()
            .filter(|j| selector_of(j).is_ok_and(|s| !s.is_empty() && s.matches(labels)))
            .collect()
    }

    fn enqueue(&self, job: &Job) {
        self.enqueue_batched(job);
    }

    fn created(&self, job: &Job) {
        self.expectations.creation_observed(&key_of(job));
        self.enqueue_batched(job);
    }

    fn deleted(&self, namespace: &str, pod: &Pod, final_delete: bool) {
        let has_finalizer = has_tracking_finalizer(pod);
        if controller_of(&pod.metadata).is_none() {
            if has_finalizer {
                self.enqueue_orphan(pod);
            }
            return;
        }
        let job = self.owner_of(namespace, pod);
        let Some(job) = job.filter(|j| !is_finished(j)) else {
            if has_finalizer {
                self.enqueue_orphan(pod);
            }
            return;
        };
        let key = key_of(&*job);
        // Counted once per pod: a terminating pod is seen again when its status or finalizer
        // changes and when it goes.
        self.expectations.deletion_observed(&key, &key_of(pod));
        if final_delete || !has_finalizer {
            self.finalizer_expectations.observed(&key, uid(pod));
        }
        self.enqueue_batched(&job);
    }

    fn terminating_updated(&self, namespace: &str, _old: &Pod, new: &Pod) -> bool {
        if new.metadata.deletion_timestamp.is_none() {
            return false;
        }
        self.deleted(namespace, new, false);
        true
    }

    /// Checked on the new pod only: during an ownership transfer the finalizer may be added
    /// and removed again within one collapsed update.
    fn released(&self, job: &Job, new: &Pod) {
        if !has_tracking_finalizer(new) {
            self.finalizer_expectations.observed(&key_of(job), uid(new));
        }
        self.enqueue_batched(job);
    }

    fn controlled_updated(&self, job: &Arc<Job>, _old: &Pod, new: &Pod) {
        self.released(job, new);
    }

    fn orphan_seen(&self, pod: &Pod) {
        if has_tracking_finalizer(pod) {
            self.enqueue_orphan(pod);
        }
    }
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
        out.push(Size::object("stale_guard", self.consistency.len()));
    }

    fn enqueue_batched(&self, job: &Job) {
        self.queue.add_after(key_of(job), SYNC_BATCH_PERIOD);
    }

    fn enqueue_orphan(&self, pod: &Pod) {
        self.orphan_queue.add(key_of(pod));
    }

    // ---- Job handlers -------------------------------------------------------------------

    pub(crate) fn on_job_change(&self, change: Change<Job>) {
        match change {
            Change::Added(job) => {
                self.queue.add(key_of(&*job));
                if let Some(name) = managed_by_external(&job) {
                    metrics::inc(|x| &x.by_external, &[name], 1);
                }
            }
            Change::Updated { old, new } => {
                let key = key_of(&*new);
                if old.metadata.uid != new.metadata.uid {
                    self.forget(&key);
                }
                if old.metadata.generation == new.metadata.generation {
                    self.queue.add_after(key.clone(), SYNC_BATCH_PERIOD);
                } else {
                    self.queue.add(key.clone());
                }
                if is_finished(&new) {
                    self.cleanup_pod_finalizers(&new);
                }
                // A changed deadline on a started Job fires at its new time.
                let ads = |j: &Job| j.spec.as_ref().and_then(|s| s.active_deadline_seconds);
                if let (Some(start), Some(cur)) = (
                    new.status.as_ref().and_then(|s| s.start_time.as_ref()),
                    ads(&new),
                ) && ads(&old) != Some(cur)
                {
                    let elapsed = self.clock.wall().duration_since(start.0);
                    let left = jiff::SignedDuration::from_secs(cur).saturating_sub(elapsed);
                    self.queue
                        .add_after(key, Duration::try_from(left).unwrap_or(Duration::ZERO));
                }
            }
            Change::Deleted { obj, .. } => {
                let key = key_of(&*obj);
                // A Job re-created under the same name must not inherit these.
                self.forget(&key);
                self.queue.add(key);
                self.cleanup_pod_finalizers(&obj);
            }
        }
    }

    fn forget(&self, key: &str) {
        self.consistency.clear(key, None);
        self.expectations.delete_expectations(key);
        self.finalizer_expectations.delete(key);
        self.backoff.remove(key);
    }

    /// Queues every pod of `job` that still holds the tracking finalizer for the orphan
    /// worker (the Job is gone or finished, so its sync will not remove them).
    fn cleanup_pod_finalizers(&self, job: &Job) {
        let Ok(selector) = selector_of(job) else {
            return;
        };
        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        let job_uid = job.metadata.uid.as_deref().unwrap_or_default();
        for pod in self.pods.list_namespace(namespace) {
            let controlled = controller_of(&pod.metadata).is_some_and(|r| r.uid == job_uid);
            if controlled && has_tracking_finalizer(&pod) && selector.matches(labels_of(&pod)) {
                self.enqueue_orphan(&pod);
            }
        }
    }

    // ---- Pod handlers -------------------------------------------------------------------

    /// The cached Job the pod's controller reference names, if kind and UID agree.
    fn resolve_pod(&self, namespace: &str, pod: &Pod) -> Option<Arc<Job>> {
        self.owner_of(namespace, pod)
    }

    /// `addPod`, `updatePod`, `deletePod`, each counting finished pods that still hold the
    /// tracking finalizer first.
    pub(crate) fn on_pod_change(&self, change: Change<Pod>) {
        match &change {
            Change::Added(pod) => record_finished_pod_with_tracking_finalizer(None, Some(pod)),
            Change::Updated { old, new } => {
                record_finished_pod_with_tracking_finalizer(Some(old), Some(new));
            }
            Change::Deleted { obj, .. } => {
                record_finished_pod_with_tracking_finalizer(Some(obj), None);
            }
        }
        on_child_change(self, change);
    }

    // ---- stale-cache guard ----------------------------------------------------------------

    /// Records a write made for the Job `key` (identified by `job_uid`).
    fn wrote<K: kube::Resource<DynamicType = ()>>(&self, key: &str, job_uid: &str, obj: &K) {
        self.wrote_version::<K>(key, job_uid, obj.meta().resource_version.as_deref());
    }

    /// [`Self::wrote`] for a write of which only the identity was read back.
    fn wrote_version<K: kube::Resource<DynamicType = ()>>(
        &self,
        key: &str,
        job_uid: &str,
        resource_version: Option<&str>,
    ) {
        if !self.cfg.stale_cache_guard {
            return;
        }
        if let Some(rv) = resource_version {
            self.consistency
                .wrote_at(key, job_uid, GroupResource::of::<K>(), rv);
        }
    }

    /// The guard's check: an error while a cache lags behind this Job's recorded writes.
    #[allow(clippy::result_large_err)]
    fn ensure_caches_caught_up(&self, key: &str) -> Result<(), Error> {
        if !self.cfg.stale_cache_guard {
            return Ok(());
        }
        let pods = GroupResource::of::<Pod>();
        let jobs = GroupResource::of::<Job>();
        let observed = |gr: &GroupResource| {
            if *gr == pods {
                self.pods.last_synced_resource_version()
            } else if *gr == jobs {
                self.jobs.last_synced_resource_version()
            } else {
                None
            }
        };
        self.consistency.ensure_ready(key, observed).map_err(|stale| {
            metrics::inc(
                |x| &x.stale_sync_skips,
                &[&stale.resource.group, &stale.resource.resource],
                1,
            );
            tracing::debug!(key, resource = %stale.resource, written = %stale.written, observed = %stale.observed, "cache older than the controller's own writes; skipping sync");
            Error::StaleCache {
                key: key.to_owned(),
                source: Box::new(stale),
            }
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
        if let Some(r) = controller_of(&pod.metadata) {
            if r.kind != "Job" || r.api_version != "batch/v1" {
                return Ok(());
            }
            if let Some(job) = self.resolve_pod(namespace.unwrap_or_default(), &pod)
                && (managed_by_external(&job).is_some() || !is_finished(&job))
            {
                return Ok(());
            }
        }
        if !has_tracking_finalizer(&pod) {
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
            tracing::debug!(key = %key, "job has been deleted");
            self.forget(&key);
            return Ok(());
        };
        if let Some(by) = managed_by_external(&job) {
            tracing::debug!(key = %key, controller = by, "job is managed by another controller; skipping");
            return Ok(());
        }
        if is_finished(&job) {
            self.backoff.remove(&key);
            return Ok(());
        }
        if plan::has_unknown_completion_mode(&job) {
            self.recorder.event(
                &object_reference(&*job),
                EventType::Warning,
                event::UNKNOWN_COMPLETION_MODE,
                event::UNKNOWN_COMPLETION_MODE_MESSAGE,
            );
            return Ok(());
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
            backoff: self.backoff.get(key),
        };
        let now = self.clock.wall();
        let plan = plan::plan(&snapshot, now);
        *action = plan.sync_action;
        if let Some(d) = plan.deadline_requeue {
            tracing::debug!(key, next_sync_in = ?d, "job has an active deadline; will sync again");
            self.queue.add_after(key.to_owned(), d);
        }
        if let Some(d) = plan.backoff_requeue {
            self.queue
                .add_after(key.to_owned(), d.max(SYNC_BATCH_PERIOD));
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

    fn emit(&self, job: &Job, e: &JobEvent) {
        let type_ = if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.recorder
            .event(&object_reference(job), type_, &e.reason, &e.message);
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

    /// Runs the plan's pod action. Returns what it achieved and the first error.
    async fn execute(
        &self,
        job: &Arc<Job>,
        key: &str,
        namespace: &str,
        plan: &Plan,
    ) -> (Executed, Option<Error>) {
        match &plan.action {
            Action::None => (Executed::default(), None),
            Action::DeleteActive(pods) => self.delete_active(job, key, namespace, pods).await,
            Action::Remove(pods) => self.remove_pods(job, key, namespace, pods).await,
            Action::Create(new) => self.create_pods(job, key, namespace, plan, new).await,
        }
    }

    /// `deleteActivePods`: graceful deletes keeping finalizers (the Job is finishing).
    async fn delete_active(
        &self,
        job: &Arc<Job>,
        key: &str,
        namespace: &str,
        pods: &[Arc<Pod>],
    ) -> (Executed, Option<Error>) {
        let results = futures::future::join_all(pods.iter().map(|pod| async move {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            match self
                .pod_control
                .delete_pod(namespace, name, pod.metadata.uid.as_deref(), &**job)
                .await
            {
                Ok(()) => Ok(is_ready(pod)),
                Err(e) if e.is_not_found() => Ok(is_ready(pod)),
                Err(e) => Err(e),
            }
        }))
        .await;
        tally(key, results, |key, source| {
            Error::from(PodStep::Delete.failed(key, source))
        })
    }

    /// `deleteJobPods`: finalizer off first (never counted), then a graceful delete.
    #[allow(clippy::result_large_err)]
    async fn remove_pods(
        &self,
        job: &Arc<Job>,
        key: &str,
        namespace: &str,
        pods: &[Arc<Pod>],
    ) -> (Executed, Option<Error>) {
        if pods.is_empty() {
            return (Executed::default(), None);
        }
        self.expectations
            .expect_deletions(key, pods.iter().map(|p| key_of(&**p)).collect());
        let results = futures::future::join_all(pods.iter().map(|pod| async move {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let fail = |e: rkcm_runtime::Error| {
                // This deletion will never be observed.
                self.expectations.deletion_observed(key, &key_of(&**pod));
                if e.is_not_found() {
                    Ok(is_ready(pod))
                } else {
                    Err(e)
                }
            };
            if has_tracking_finalizer(pod)
                && let Err(e) = self
                    .pod_control
                    .patch_pod(namespace, name, &remove_finalizer_patch())
                    .await
            {
                return fail(e);
            }
            match self
                .pod_control
                .delete_pod(namespace, name, pod.metadata.uid.as_deref(), &**job)
                .await
            {
                Ok(()) => Ok(is_ready(pod)),
                Err(e) => fail(e),
            }
        }))
        .await;
        tally(key, results, |key, source| {
            Error::from(PodStep::Delete.failed(key, source))
        })
    }

    async fn create_pods(
        &self,
        job: &Arc<Job>,
        key: &str,
        namespace: &str,
        plan: &Plan,
        new: &[NewPod],
    ) -> (Executed, Option<Error>) {
        let n = new.len();
        if n == 0 {
            return (Executed::default(), None);
        }
        tracing::debug!(key, creating = n, "too few pods running");
        self.expectations
            .expect_creations(key, i64::try_from(n).unwrap_or(i64::MAX));
        let spec = plan::spec_of(job);
        let mut template = spec.template.clone();
        let indexed = plan::is_indexed(job);
        if indexed {
            add_completion_index_env(&mut template);
        }
        let meta = template.metadata.get_or_insert_with(Default::default);
        let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
            finalizers.push(TRACKING_FINALIZER.to_owned());
        }
        let job_name = job.metadata.name.clone().unwrap_or_default();
        let template = &template;
        let job_name = &job_name;
        let failed_creates = std::sync::atomic::AtomicUsize::new(0);
        let failed_creates = &failed_creates;
        let (successes, error) = slow_start_batch(n, 1, |i| {
            let job = job.clone();
            let new_pod = new.get(i).cloned();
            async move {
                let mut t = template.clone();
                let mut opts = PodOptions::default();
                if let Some(NewPod {
                    index: Some(ix),
                    failure_counts,
                }) = new_pod
                {
                    apply_index(&mut t, job_name, ix, failure_counts);
                    opts.generate_name = Some(generate_name_with_index(job_name, ix));
                }
                match self
                    .pod_control
                    .create_pod(namespace, &t, &*job, &opts)
                    .await
                {
                    Ok(pod) => {
                        self.wrote_version::<Pod>(
                            key,
                            job.metadata.uid.as_deref().unwrap_or_default(),
                            pod.resource_version.as_deref(),
                        );
                        Ok(())
                    }
                    // A terminating namespace refuses every create: nothing to retry.
                    Err(rkcm_runtime::Error::ForOwner { ref source, .. })
                        if is_namespace_terminating(source) =>
                    {
                        Ok(())
                    }
                    Err(e) => {
                        failed_creates.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        Err(e)
                    }
                }
            }
        })
        .await;
        // Failed and never-attempted creates will not be observed.
        for _ in successes..n {
            self.expectations.creation_observed(key);
        }
        let reason = plan::creation_reason(job, plan);
        metrics::inc(
            |x| &x.pods_creation,
            &[reason, m::SUCCEEDED],
            successes as u64,
        );
        metrics::inc(
            |x| &x.pods_creation,
            &[reason, m::FAILED],
            failed_creates.load(std::sync::atomic::Ordering::Relaxed) as u64,
        );
        let executed = Executed {
            created: i32::try_from(successes).unwrap_or(i32::MAX),
            ..Executed::default()
        };
        (
            executed,
            error.map(|source| Error::from(PodStep::Create.failed(key, source))),
        )
    }

    /// Steps 6–9 of the count: write the recorded status, remove finalizers, move removed
    /// UIDs into the counters, and set the terminal condition when everything is counted.
    async fn track_and_remove_finalizers(
        &self,
        job: &Arc<Job>,
        key: &str,
        plan: &Plan,
        tracked: Tracked,
        now: jiff::Timestamp,
    ) -> Result<(), Error> {
        let Tracked {
            status: new_status,
            mut needs_flush,
            remove_finalizer,
            mut with_finalizer,
            finished,
            reached_max_uncounted,
            policy_actions,
        } = tracked;
        let mut old_status = job.status.clone().unwrap_or_default();
        let mut current: Job = (**job).clone();
        current.status = Some(new_status);
        if needs_flush {
            current = self
                .write_status(current, key, "adding uncounted pods")
                .await?;
            self.backoff.update(key, plan.new_backoff);
            self.record_pods_finished(&current, &old_status);
            old_status = current.status.clone().unwrap_or_default();
            needs_flush = false;
        }
        for (action, n) in policy_actions {
            metrics::inc(|x| &x.policy_actions, &[action], n);
        }
        let mut rm_err = None;
        if !remove_finalizer.is_empty() {
            let (removed, err) = self
                .remove_tracking_finalizers(
                    key,
                    job.metadata.uid.as_deref().unwrap_or_default(),
                    &remove_finalizer,
                )
                .await;
            for u in removed {
                with_finalizer.remove(&u);
            }
            rm_err = err;
        }
        let mut status = current.status.clone().unwrap_or_default();
        if status::clean_uncounted(&mut status, &with_finalizer) {
            needs_flush = true;
        }
        if let Some(source) = rm_err {
            if needs_flush {
                current.status = Some(status);
                let written = self
                    .write_status(current, key, "removing uncounted pods")
                    .await?;
                self.record_pods_finished(&written, &old_status);
            }
            return Err(Error::RemoveFinalizers {
                key: key.to_owned(),
                source,
            });
        }
        let finishing = !reached_max_uncounted
            && finished
                .as_ref()
                .is_some_and(|f| status::enact_finished(&mut status, f, now));
        if finishing {
            needs_flush = true;
        }
        if needs_flush {
            current.status = Some(status);
            let written = self
                .write_status(current, key, "removing uncounted pods")
                .await?;
            if finishing && let Some(f) = finished.as_ref() {
                let written_status = written.status.clone().unwrap_or_default();
                for e in status::finished_events(job, &written_status, f) {
                    self.emit(job, &e);
                }
                let result = if f.type_ == crate::consts::condition::COMPLETE {
                    m::SUCCEEDED
                } else {
                    m::FAILED
                };
                metrics::inc(
                    |x| &x.finished,
                    &[
                        completion_mode_label(job),
                        result,
                        f.reason.as_deref().unwrap_or(""),
                    ],
                    1,
                );
            }
            self.record_pods_finished(&written, &old_status);
        }
        Ok(())
    }

    /// `removeTrackingFinalizerFromPods`: registers the UIDs first, then patches in parallel.
    /// Returns the UIDs whose finalizer is gone (NotFound counts) and the first error.
    async fn remove_tracking_finalizers(
        &self,
        key: &str,
        job_uid: &str,
        pods: &[Arc<Pod>],
    ) -> (Vec<String>, Option<rkcm_runtime::Error>) {
        self.finalizer_expectations
            .expect_removed(key, pods.iter().map(|p| uid(p).to_owned()));
        let results = futures::future::join_all(pods.iter().map(|pod| async move {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            match self
                .pod_control
                .patch_pod(namespace, name, &remove_finalizer_patch())
                .await
            {
                Ok(patched) => {
                    self.wrote_version::<Pod>(key, job_uid, patched.resource_version.as_deref());
                    Ok(uid(pod).to_owned())
                }
                Err(e) => {
                    // No pod update will announce this removal.
                    self.finalizer_expectations.observed(key, uid(pod));
                    if e.is_not_found() {
                        Ok(uid(pod).to_owned())
                    } else {
                        Err(e)
                    }
                }
            }
        }))
        .await;
        let mut removed = Vec::new();
        let mut first = None;
        for r in results {
            match r {
                Ok(u) => removed.push(u),
                Err(e) => {
                    if first.is_none() {
                        first = Some(e);
                    }
                }
            }
        }
        (removed, first)
    }

    /// `PUT …/jobs/{name}/status` carrying the resourceVersion of `job`. A conflict fails the
    /// sync: the status was computed from an outdated Job.
    async fn write_status(&self, job: Job, key: &str, step: &'static str) -> Result<Job, Error> {
        let s = job.status.clone().unwrap_or_default();
        tracing::debug!(
            key,
            step,
            active = s.active,
            ready = s.ready,
            terminating = s.terminating,
            succeeded = s.succeeded,
            failed = s.failed,
            uncounted = ?s.uncounted_terminated_pods,
            "updating job status"
        );
        // The Job as the server now keeps it: only its new resourceVersion is read back.
        let written = rkcm_runtime::api::write::replace_status_object(&self.client, job)
            .await
            .map_err(|source| Error::UpdateStatus {
                key: key.to_owned(),
                step,
                source,
            })?;
        self.wrote(
            key,
            written.metadata.uid.as_deref().unwrap_or_default(),
            &written,
        );
        Ok(written)
    }

    /// `job_pods_finished_total` and `job_finished_indexes_total` from a counter change.
    fn record_pods_finished(&self, job: &Job, old: &k8s_openapi::api::batch::v1::JobStatus) {
        let Some(new) = job.status.as_ref() else {
            return;
        };
        let mode = completion_mode_label(job);
        let succeeded_diff = if plan::is_indexed(job) {
            let (s, f) = status::finished_index_deltas(job, old, new);
            let label = if plan::backoff_limit_per_index(job).is_some() {
                "perIndex"
            } else {
                "global"
            };
            metrics::inc(
                |x| &x.finished_indexes,
                &[m::SUCCEEDED, label],
                u64::try_from(s).unwrap_or(0),
            );
            metrics::inc(
                |x| &x.finished_indexes,
                &[m::FAILED, label],
                u64::try_from(f).unwrap_or(0),
            );
            s
        } else {
            i64::from(new.succeeded.unwrap_or(0)) - i64::from(old.succeeded.unwrap_or(0))
        };
        metrics::inc(
            |x| &x.pods_finished,
            &[mode, m::SUCCEEDED],
            u64::try_from(succeeded_diff).unwrap_or(0),
        );
        let failed_diff = i64::from(new.failed.unwrap_or(0)) - i64::from(old.failed.unwrap_or(0));
        metrics::inc(
            |x| &x.pods_finished,
            &[mode, m::FAILED],
            u64::try_from(failed_diff).unwrap_or(0),
        );
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

/// Counts successes (and ready ones among them) and keeps the first error.
fn tally(
    key: &str,
    results: Vec<Result<bool, rkcm_runtime::Error>>,
    wrap: fn(String, rkcm_runtime::Error) -> Error,
) -> (Executed, Option<Error>) {
    let mut exec = Executed::default();
    let mut first = None;
    for r in results {
        match r {
            Ok(ready) => {
                exec.removed += 1;
                if ready {
                    exec.removed_ready += 1;
                }
            }
            Err(e) => {
                if first.is_none() {
                    first = Some(wrap(key.to_owned(), e));
                }
            }
        }
    }
    (exec, first)
}

/// The strategic-merge patch that removes only the tracking finalizer.
pub fn remove_finalizer_patch() -> serde_json::Value {
    serde_json::json!({
        "metadata": { "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER] }
    })
}

#[cfg(test)]
mod handler_tests {
    use kube::runtime::watcher;
    use rkcm_runtime::cache::Informer;
    use rkcm_runtime::queue::RateLimiter;
    use serde_json::json;

    use super::*;

    fn pod(name: &str, rv: &str, deleting: bool) -> Arc<Pod> {
        let mut p: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "resourceVersion": rv,
                "labels": {"app": "j"},
                "finalizers": ["batch.kubernetes.io/job-tracking"],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                     "uid": "job-uid", "controller": true}],
            },
            "status": {"phase": "Running"},
        }))
        .expect("pod");
        if deleting {
            p.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
            );
        }
        Arc::new(p)
    }

    /// A pod the controller deleted is seen while it terminates (deletion timestamp, its
    /// status, its finalizer removed) and when it goes: one deletion, however often it is seen.
    #[tokio::test]
    async fn a_deleted_pod_counts_once_however_often_it_is_seen() {
        let fake = rkcm_testkit::fake_api::FakeApi::new();
        let client = fake.client();
        let jobs = Informer::<Job>::detached();
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid",
                         "resourceVersion": "1"},
            "spec": {"selector": {"matchLabels": {"app": "j"}},
                     "template": {"metadata": {"labels": {"app": "j"}},
                                  "spec": {"containers": []}}},
        }))
        .expect("job");
        jobs.feed(watcher::Event::Apply(job));
        let pods = Informer::<Pod>::detached();
        let (recorder, _) = EventRecorder::fake("job-controller");
        let clock = rkcm_runtime::clock::system();
        let c = Controller {
            client: client.clone(),
            jobs: jobs.store(),
            pods: pods.store(),
            expectations: UidTrackingExpectations::new(clock.clone()),
            finalizer_expectations: FinalizerExpectations::default(),
            backoff: BackoffStore::default(),
            consistency: ConsistencyStore::new(),
            pod_control: PodControl::new(client, recorder.clone()),
            recorder,
            queue: WorkQueue::new("test-job", RateLimiter::Default),
            orphan_queue: WorkQueue::new("test-job-orphans", RateLimiter::Default),
            clock,
            cfg: crate::config::Config::default(),
        };
        c.expectations
            .expect_deletions("ns/j", vec!["ns/a".into(), "ns/b".into()]);
        let (a1, a2, a3) = (
            pod("a", "1", false),
            pod("a", "2", true),
            pod("a", "3", true),
        );
        c.on_pod_change(Change::Updated {
            old: a1,
            new: a2.clone(),
        });
        c.on_pod_change(Change::Updated {
            old: a2,
            new: a3.clone(),
        });
        c.on_pod_change(Change::Deleted {
            obj: a3,
            final_state_unknown: false,
        });
        assert_eq!(c.expectations.get("ns/j"), Some((0, 1)));
        assert!(
            !c.expectations.satisfied_expectations("ns/j"),
            "b is not seen deleted yet"
        );
        let (b1, b2) = (pod("b", "1", false), pod("b", "2", true));
        c.on_pod_change(Change::Updated { old: b1, new: b2 });
        assert!(c.expectations.satisfied_expectations("ns/j"));
    }
}
