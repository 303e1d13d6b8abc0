//! The executor: performs a [`Plan`]'s actions (pod creates and deletes in slow-start
//! batches, finalizer removals) and the status writes [`status`](crate::status) computes;
//! it takes no decision of its own. Mirrors the I/O of `manageJob`, `deleteActivePods`,
//! `deleteJobPods`, `trackJobStatusAndRemoveFinalizers`, `flushUncountedAndRemoveFinalizers`
//! and `removeTrackingFinalizerFromPods` of upstream `pkg/controller/job/job_controller.go`.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::error::PodStep;
use rkcm_runtime::error::is_namespace_terminating;
use rkcm_runtime::events::{EventType, object_reference};
use rkcm_runtime::keys::key_of;
use rkcm_runtime::workload::podcontrol::{PodOptions, slow_start_batch};

use crate::consts::metrics as m;
use crate::error::Error;
use crate::metrics;
use crate::plan::{self, Action, NewPod, Plan, completion_mode_label};
use crate::pods::remove_finalizer_patch;
use crate::pods::{has_tracking_finalizer, is_ready, uid};
use crate::status::{self, Executed, JobEvent, Tracked};

use crate::reconcile::Controller;

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

impl Controller {
    pub(crate) fn emit(&self, job: &Job, e: &JobEvent) {
        let type_ = if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.recorder
            .event(&object_reference(job), type_, &e.reason, &e.message);
    }

    /// Runs the plan's pod action. Returns what it achieved and the first error.
    pub(crate) async fn execute(
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
    pub(crate) async fn delete_active(
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
    pub(crate) async fn remove_pods(
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

    pub(crate) async fn create_pods(
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
        let template = plan::pod_template(job);
        let job_name = job.metadata.name.clone().unwrap_or_default();
        let template = &template;
        let job_name = &job_name;
        let failed_creates = std::sync::atomic::AtomicUsize::new(0);
        let failed_creates = &failed_creates;
        let (successes, error) = slow_start_batch(n, 1, |i| {
            let job = job.clone();
            let (t, generate_name) = plan::new_pod(template, job_name, new.get(i));
            async move {
                let opts = PodOptions {
                    generate_name,
                    ..PodOptions::default()
                };
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
    pub(crate) async fn track_and_remove_finalizers(
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
                metrics::inc(
                    |x| &x.finished,
                    &[
                        completion_mode_label(job),
                        status::finished_result(f),
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
    pub(crate) async fn remove_tracking_finalizers(
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
    pub(crate) async fn write_status(
        &self,
        job: Job,
        key: &str,
        step: &'static str,
    ) -> Result<Job, Error> {
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
    pub(crate) fn record_pods_finished(
        &self,
        job: &Job,
        old: &k8s_openapi::api::batch::v1::JobStatus,
    ) {
        let Some(new) = job.status.as_ref() else {
            return;
        };
        let counts = status::finished_counts(job, old, new);
        if let Some((label, succeeded, failed)) = counts.indexes {
            metrics::inc(|x| &x.finished_indexes, &[m::SUCCEEDED, label], succeeded);
            metrics::inc(|x| &x.finished_indexes, &[m::FAILED, label], failed);
        }
        metrics::inc(
            |x| &x.pods_finished,
            &[counts.mode, m::SUCCEEDED],
            counts.succeeded_pods,
        );
        metrics::inc(
            |x| &x.pods_finished,
            &[counts.mode, m::FAILED],
            counts.failed_pods,
        );
    }
}
