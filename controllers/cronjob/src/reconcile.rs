//! One sync of one CronJob: upstream `sync`, `cleanupFinishedJobs` and `syncCronJob`
//! (`pkg/controller/cronjob/cronjob_controllerv2.go`), with every decision taken by `plan` and
//! every write done here, in upstream's order. The API is behind [`CronJobApi`] so the same
//! sync runs against the cluster and against a fake in table tests.

use rkcm_runtime::api::write;
use rkcm_runtime::error::StatusError;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, DeleteParams, PropagationPolicy};
use rkcm_runtime::error::{api_status, error_message, is_namespace_terminating};
use rkcm_runtime::events::EventRecorder;
use rkcm_runtime::keys::key_of;

use crate::consts::reasons;
use crate::error::Error;
use crate::plan::{self, Action, PlannedEvent};

/// The API calls a sync makes.
pub trait CronJobApi: Send + Sync + 'static {
    /// Live `GET` of a CronJob.
    fn get_cronjob(
        &self,
        ns: &str,
        name: &str,
    ) -> impl Future<Output = Result<CronJob, kube::Error>> + Send;
    /// Live `GET` of a Job.
    fn get_job(
        &self,
        ns: &str,
        name: &str,
    ) -> impl Future<Output = Result<Job, kube::Error>> + Send;
    /// `POST` of a Job; the answer carries the created Job's identity and creation time
    /// (the real API decodes nothing else of it).
    fn create_job(
        &self,
        ns: &str,
        job: &Job,
    ) -> impl Future<Output = Result<Job, kube::Error>> + Send;
    /// `DELETE` with Background propagation, guarded by the Job's UID when known.
    fn delete_job(
        &self,
        ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;
    /// `PUT cronjobs/status` (carries the copy's resourceVersion); the answer carries the
    /// CronJob's identity only.
    fn update_status(
        &self,
        cj: &CronJob,
    ) -> impl Future<Output = Result<CronJob, kube::Error>> + Send;
}

/// The real API.
#[derive(Clone)]
pub struct KubeApi {
    client: kube::Client,
}

impl KubeApi {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl CronJobApi for KubeApi {
    async fn get_cronjob(&self, ns: &str, name: &str) -> Result<CronJob, kube::Error> {
        Api::<CronJob>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
    }
    async fn get_job(&self, ns: &str, name: &str) -> Result<Job, kube::Error> {
        Api::<Job>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
    }
    async fn create_job(&self, ns: &str, job: &Job) -> Result<Job, kube::Error> {
        let created = write::create(&self.client, Some(ns), job).await?;
        Ok(Job {
            metadata: created.into_meta(),
            ..Job::default()
        })
    }
    async fn delete_job(&self, ns: &str, name: &str, uid: Option<&str>) -> Result<(), kube::Error> {
        let mut dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        if let Some(uid) = uid {
            dp.preconditions = Some(kube::api::Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            });
        }
        write::delete::<Job>(&self.client, Some(ns), name, &dp).await
    }
    async fn update_status(&self, cj: &CronJob) -> Result<CronJob, kube::Error> {
        let written = write::replace_status(&self.client, cj).await?;
        Ok(CronJob {
            metadata: written.into_meta(),
            ..CronJob::default()
        })
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    api_status(e).is_some_and(|s| s.code == 404)
}

fn is_already_exists(e: &kube::Error) -> bool {
    api_status(e).is_some_and(|s| s.code == 409 && s.reason == "AlreadyExists")
}

/// What a sync decided besides its writes to Jobs.
#[derive(Debug)]
pub struct Outcome {
    /// The CronJob with its new status, when the status changed and must be written.
    pub status: Option<CronJob>,
    /// The requeue delay, if any, or the sync's error.
    pub result: Result<Option<SignedDuration>, Error>,
}

/// Runs syncs: the API, the event recorder and the controller's local time zone.
pub struct Syncer<A> {
    pub api: A,
    pub recorder: EventRecorder,
    /// The zone schedules without `timeZone` are read in (upstream: the process's local zone).
    pub local: TimeZone,
}

impl<A: CronJobApi> Syncer<A> {
    fn emit(&self, cj: &CronJob, e: &PlannedEvent) {
        self.recorder.event_for(cj, e.type_, e.reason, &e.message);
    }

    /// Upstream `sync` after the cache reads: history cleanup, then `syncCronJob`, then one
    /// status write if anything changed. Returns the requeue delay, if any.
    pub async fn sync(
        &self,
        cj: &CronJob,
        children: &[Arc<Job>],
        now: Timestamp,
    ) -> Result<Option<SignedDuration>, Error> {
        let outcome = self.sync_without_status(cj, children, now).await;
        if let Some(status) = &outcome.status
            && let Err(source) = self.api.update_status(status).await
        {
            let key = key_of(cj);
            tracing::debug!(cronjob = %key, error = %source, "unable to update status for cronjob");
            return Err(Error::UpdateStatus(StatusError::new(
                "cronjob", key, source,
            )));
        }
        outcome.result
    }

    /// [`Syncer::sync`] up to the status write, which it returns instead of sending (the
    /// controller sends it through [`crate::deferred`]).
    pub async fn sync_without_status(
        &self,
        cj: &CronJob,
        children: &[Arc<Job>],
        now: Timestamp,
    ) -> Outcome {
        let key = key_of(cj);
        let mut copy = cj.clone();
        let cleaned = self.cleanup_finished_jobs(&mut copy, children).await;
        let (requeue, dirty, sync_err) = self.sync_cronjob(&mut copy, children, now).await;
        if let Some(e) = &sync_err {
            tracing::debug!(cronjob = %key, error = %e, "error reconciling cronjob");
        }
        let result = match (requeue, sync_err) {
            (Some(d), _) => Ok(Some(d)),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(None),
        };
        Outcome {
            status: (cleaned || dirty).then_some(copy),
            result,
        }
    }

    async fn cleanup_finished_jobs(&self, cj: &mut CronJob, children: &[Arc<Job>]) -> bool {
        let refs: Vec<&Job> = children.iter().map(|j| j.as_ref()).collect();
        let mut dirty = false;
        for job in plan::history_deletions(cj, &refs) {
            if self.delete_job(cj, job).await {
                dirty = true;
            }
        }
        dirty
    }

    /// Upstream `deleteJob`: delete, then drop from `active` and record the outcome.
    async fn delete_job(&self, cj: &mut CronJob, job: &Job) -> bool {
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let uid = job.metadata.uid.clone();
        if let Err(e) = self.api.delete_job(&ns, &name, uid.as_deref()).await {
            self.emit(
                cj,
                &PlannedEvent::warning(
                    reasons::FAILED_DELETE,
                    format!("Deleted job: {}", error_message(&e)),
                ),
            );
            tracing::warn!(cronjob = %key_of(cj), job = %name, error = %e, "error deleting job from cronjob");
            return false;
        }
        if let Some(uid) = uid.as_deref() {
            plan::delete_from_active_list(cj, uid);
        }
        self.emit(
            cj,
            &PlannedEvent::normal(reasons::SUCCESSFUL_DELETE, format!("Deleted job {name}")),
        );
        true
    }

    /// Upstream `syncCronJob`: returns (requeue delay, status changed, error).
    async fn sync_cronjob(
        &self,
        cj: &mut CronJob,
        children: &[Arc<Job>],
        now: Timestamp,
    ) -> (Option<SignedDuration>, bool, Option<Error>) {
        let key = key_of(cj);
        let ns = cj.metadata.namespace.clone().unwrap_or_default();
        let cj_name = cj.metadata.name.clone().unwrap_or_default();
        let mut dirty = false;
        let mut child_uids = HashSet::new();
        for job in children {
            let uid = job.metadata.uid.clone().unwrap_or_default();
            let job_name = job.metadata.name.clone().unwrap_or_default();
            child_uids.insert(uid.clone());
            let found = plan::in_active_list(cj, &uid);
            let finished = plan::finished_condition(job);
            if !found && finished.is_none() {
                let fresh = match self.api.get_cronjob(&ns, &cj_name).await {
                    Ok(f) => f,
                    Err(source) => {
                        return (None, dirty, Some(Error::GetCronJob { key, source }));
                    }
                };
                if plan::in_active_list(&fresh, &uid) {
                    // Our cache was behind our own status write: continue from the fresh copy.
                    *cj = fresh;
                    continue;
                }
                self.emit(
                    cj,
                    &PlannedEvent::warning(
                        reasons::UNEXPECTED_JOB,
                        format!(
                            "Saw a job that the controller did not create or forgot: {job_name}"
                        ),
                    ),
                );
            } else if let Some(condition) = finished {
                if found {
                    plan::delete_from_active_list(cj, &uid);
                    self.emit(
                        cj,
                        &PlannedEvent::normal(
                            reasons::SAW_COMPLETED_JOB,
                            format!("Saw completed job: {job_name}, condition: {condition}"),
                        ),
                    );
                    dirty = true;
                }
                if plan::is_succeeded(job) {
                    let completion = job.status.as_ref().and_then(|s| s.completion_time.clone());
                    let status = cj.status.get_or_insert_with(Default::default);
                    if status.last_successful_time.is_none() {
                        status.last_successful_time = completion.clone();
                        dirty = true;
                    }
                    if let (Some(c), Some(last)) = (&completion, &status.last_successful_time)
                        && c.0 > last.0
                    {
                        status.last_successful_time = completion.clone();
                        dirty = true;
                    }
                }
            }
        }
        // Active entries whose Job the cache does not have: confirm with a live GET.
        let listed: Vec<_> = cj
            .status
            .as_ref()
            .and_then(|s| s.active.clone())
            .unwrap_or_default();
        for r in listed {
            let uid = r.uid.clone().unwrap_or_default();
            if child_uids.contains(&uid) {
                continue;
            }
            let rns = r.namespace.clone().unwrap_or_default();
            let rname = r.name.clone().unwrap_or_default();
            match self.api.get_job(&rns, &rname).await {
                Err(e) if is_not_found(&e) => {
                    self.emit(
                        cj,
                        &PlannedEvent::normal(
                            reasons::MISSING_JOB,
                            format!("Active job went missing: {rname}"),
                        ),
                    );
                    plan::delete_from_active_list(cj, &uid);
                    dirty = true;
                }
                Err(source) => {
                    return (
                        None,
                        dirty,
                        Some(Error::GetJob {
                            key,
                            job: rname,
                            source,
                        }),
                    );
                }
                Ok(_) => {}
            }
        }

        let decision = plan::plan_schedule(cj, now, &self.local);
        for e in &decision.events {
            self.emit(cj, e);
        }
        let start = match decision.action {
            Action::Stop => return (None, dirty, None),
            Action::Requeue(d) => return (Some(d), dirty, None),
            Action::Start(s) => s,
        };
        for r in &start.replace {
            let rns = r.namespace.clone().unwrap_or_default();
            let rname = r.name.clone().unwrap_or_default();
            let job = match self.api.get_job(&rns, &rname).await {
                Ok(j) => j,
                Err(source) => {
                    self.emit(
                        cj,
                        &PlannedEvent::warning(
                            reasons::FAILED_GET,
                            format!("Get job: {}", error_message(&source)),
                        ),
                    );
                    return (
                        None,
                        dirty,
                        Some(Error::GetJob {
                            key,
                            job: rname,
                            source,
                        }),
                    );
                }
            };
            if !self.delete_job(cj, &job).await {
                return (
                    None,
                    dirty,
                    Some(Error::Replace {
                        key,
                        job: format!("{rns}/{rname}"),
                    }),
                );
            }
            dirty = true;
        }
        let job_name = start.job.metadata.name.clone().unwrap_or_default();
        let created = match self.api.create_job(&ns, &start.job).await {
            Ok(created) => {
                if let (Some(h), Some(ct)) = (
                    crate::metrics::job_creation_skew(),
                    created.metadata.creation_timestamp.as_ref(),
                ) {
                    h.observe(ct.0.duration_since(start.scheduled).as_secs_f64());
                }
                tracing::debug!(cronjob = %key, job = %job_name, "created job");
                self.emit(
                    cj,
                    &PlannedEvent::normal(
                        reasons::SUCCESSFUL_CREATE,
                        format!("Created job {job_name}"),
                    ),
                );
                created
            }
            Err(source) if is_namespace_terminating(&source) => {
                return (
                    None,
                    dirty,
                    Some(Error::CreateJob {
                        key,
                        job: job_name,
                        source,
                    }),
                );
            }
            Err(e) if is_already_exists(&e) => {
                let existing = match self.api.get_job(&ns, &job_name).await {
                    Ok(j) => j,
                    Err(source) => {
                        return (
                            None,
                            dirty,
                            Some(Error::GetJob {
                                key,
                                job: job_name,
                                source,
                            }),
                        );
                    }
                };
                // Not ours (someone else's Job has the name): leave it alone.
                let ours =
                    rkcm_runtime::workload::controller_ref::controller_of(&existing.metadata)
                        .is_some_and(|r| Some(r.uid.as_str()) == cj.metadata.uid.as_deref());
                if !ours {
                    return (None, dirty, None);
                }
                let uid = existing.metadata.uid.clone().unwrap_or_default();
                if plan::in_active_list(cj, &uid) {
                    return (None, dirty, None);
                }
                tracing::info!(cronjob = %key, job = %job_name, "job already exists");
                existing
            }
            Err(source) => {
                self.emit(
                    cj,
                    &PlannedEvent::warning(
                        reasons::FAILED_CREATE,
                        format!("Error creating job: {}", error_message(&source)),
                    ),
                );
                return (
                    None,
                    dirty,
                    Some(Error::CreateJob {
                        key,
                        job: job_name,
                        source,
                    }),
                );
            }
        };
        plan::record_start(cj, &created, start.scheduled);
        let requeue = plan::next_schedule_time_duration(cj, now, &start.schedule, &self.local);
        (Some(requeue), true, None)
    }
}

#[cfg(test)]
mod tests;
