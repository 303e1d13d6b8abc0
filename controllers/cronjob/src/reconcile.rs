//! The executor of one sync of one CronJob: upstream `sync`, `cleanupFinishedJobs` and
//! `syncCronJob` (`pkg/controller/cronjob/cronjob_controllerv2.go`), with every decision
//! taken by [`plan`](crate::plan) (and status edits by [`status`](crate::status)) and every
//! write done here, in upstream's order, each API answer fed into the next decision. The API is behind [`CronJobApi`] so the same
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
use crate::plan::{self, Action, ChildStep, Existing, PlannedEvent, Start};
use crate::status;

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
    /// [`crate::Config::adopt_forgotten_runs`]: a forgotten run of this controller's joins
    /// `status.active` ([`plan::forgotten_start`]); off, it only gets the Warning, as upstream.
    pub adopt_forgotten_runs: bool,
}

/// A sync step's answer: the requeue delay that ends the sync, if any.
type Step = Result<Option<SignedDuration>, Error>;

/// One sync's working copy of the CronJob (upstream's `cronJobCopy`) and whether its status
/// changed and must be written (upstream's `updateStatus`).
struct Pass {
    cj: CronJob,
    dirty: bool,
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
        let mut pass = Pass {
            cj: cj.clone(),
            dirty: false,
        };
        self.cleanup_finished_jobs(&mut pass, children).await;
        let result = self.sync_cronjob(&mut pass, children, now).await;
        if let Err(e) = &result {
            tracing::debug!(cronjob = %key, error = %e, "error reconciling cronjob");
        }
        Outcome {
            status: pass.dirty.then_some(pass.cj),
            result,
        }
    }

    async fn cleanup_finished_jobs(&self, pass: &mut Pass, children: &[Arc<Job>]) {
        let refs: Vec<&Job> = children.iter().map(|j| j.as_ref()).collect();
        for job in plan::history_deletions(&pass.cj, &refs) {
            if self.delete_job(&mut pass.cj, job).await {
                pass.dirty = true;
            }
        }
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
            status::delete_from_active_list(cj, uid);
        }
        self.emit(
            cj,
            &PlannedEvent::normal(reasons::SUCCESSFUL_DELETE, format!("Deleted job {name}")),
        );
        true
    }

    /// Upstream `syncCronJob`: children, then the scheduling decision and its writes.
    async fn sync_cronjob(&self, pass: &mut Pass, children: &[Arc<Job>], now: Timestamp) -> Step {
        let child_uids = self.observe_children(pass, children, now).await?;
        self.confirm_unlisted_active(pass, &child_uids).await?;
        let decision = plan::plan_schedule(&pass.cj, now, &self.local);
        for e in &decision.events {
            self.emit(&pass.cj, e);
        }
        let start = match decision.action {
            Action::Stop => return Ok(None),
            Action::Requeue(d) => return Ok(Some(d)),
            Action::Start(s) => s,
        };
        self.replace_active(pass, &start).await?;
        let Some(created) = self.create_job(pass, &start).await? else {
            return Ok(None);
        };
        status::record_start(&mut pass.cj, &created, start.scheduled);
        pass.dirty = true;
        Ok(Some(plan::next_schedule_time_duration(
            &pass.cj,
            now,
            &start.schedule,
            &self.local,
        )))
    }

    /// Performs [`plan::child_step`] for each cached child; returns the children's UIDs.
    async fn observe_children(
        &self,
        pass: &mut Pass,
        children: &[Arc<Job>],
        now: Timestamp,
    ) -> Result<HashSet<String>, Error> {
        let mut child_uids = HashSet::new();
        for job in children {
            let uid = job.metadata.uid.clone().unwrap_or_default();
            child_uids.insert(uid.clone());
            match plan::child_step(&pass.cj, job) {
                ChildStep::Keep => {}
                ChildStep::Confirm => {
                    let ns = pass.cj.metadata.namespace.clone().unwrap_or_default();
                    let name = pass.cj.metadata.name.clone().unwrap_or_default();
                    let fresh = self.api.get_cronjob(&ns, &name).await.map_err(|source| {
                        Error::GetCronJob {
                            key: key_of(&pass.cj),
                            source,
                        }
                    })?;
                    if plan::in_active_list(&fresh, &uid) {
                        // Our cache was behind our own status write: continue from the fresh
                        // copy.
                        pass.cj = fresh;
                        continue;
                    }
                    self.emit(&pass.cj, &plan::unexpected_job_event(job));
                    if self.adopt_forgotten_runs
                        && let Some(scheduled) = plan::forgotten_start(&fresh, job, now)
                    {
                        status::record_start(&mut pass.cj, job, scheduled);
                        pass.dirty = true;
                    }
                }
                ChildStep::Finished {
                    leave_active,
                    succeeded,
                } => {
                    if let Some(event) = leave_active {
                        status::delete_from_active_list(&mut pass.cj, &uid);
                        self.emit(&pass.cj, &event);
                        pass.dirty = true;
                    }
                    if succeeded && status::record_success(&mut pass.cj, job) {
                        pass.dirty = true;
                    }
                }
            }
        }
        Ok(child_uids)
    }

    /// Active entries whose Job the cache does not have ([`plan::unlisted_active`]): a live
    /// `GET` each; gone ones leave `status.active`.
    async fn confirm_unlisted_active(
        &self,
        pass: &mut Pass,
        child_uids: &HashSet<String>,
    ) -> Result<(), Error> {
        for r in plan::unlisted_active(&pass.cj, child_uids) {
            let uid = r.uid.clone().unwrap_or_default();
            let rns = r.namespace.clone().unwrap_or_default();
            let rname = r.name.clone().unwrap_or_default();
            match self.api.get_job(&rns, &rname).await {
                Err(e) if is_not_found(&e) => {
                    self.emit(&pass.cj, &plan::missing_job_event(&rname));
                    status::delete_from_active_list(&mut pass.cj, &uid);
                    pass.dirty = true;
                }
                Err(source) => {
                    return Err(Error::GetJob {
                        key: key_of(&pass.cj),
                        job: rname,
                        source,
                    });
                }
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// The `Replace` policy: delete each active Job before the new one is created.
    async fn replace_active(&self, pass: &mut Pass, start: &Start) -> Result<(), Error> {
        for r in &start.replace {
            let rns = r.namespace.clone().unwrap_or_default();
            let rname = r.name.clone().unwrap_or_default();
            let job = match self.api.get_job(&rns, &rname).await {
                Ok(j) => j,
                Err(source) => {
                    self.emit(
                        &pass.cj,
                        &PlannedEvent::warning(
                            reasons::FAILED_GET,
                            format!("Get job: {}", error_message(&source)),
                        ),
                    );
                    return Err(Error::GetJob {
                        key: key_of(&pass.cj),
                        job: rname,
                        source,
                    });
                }
            };
            if !self.delete_job(&mut pass.cj, &job).await {
                return Err(Error::Replace {
                    key: key_of(&pass.cj),
                    job: format!("{rns}/{rname}"),
                });
            }
            pass.dirty = true;
        }
        Ok(())
    }

    /// Creates the planned Job; the Job to record as started, or `None` when there is none
    /// and the sync ends without a requeue ([`plan::existing_job`]).
    async fn create_job(&self, pass: &mut Pass, start: &Start) -> Result<Option<Job>, Error> {
        let key = key_of(&pass.cj);
        let ns = pass.cj.metadata.namespace.clone().unwrap_or_default();
        let job_name = start.job.metadata.name.clone().unwrap_or_default();
        match self.api.create_job(&ns, &start.job).await {
            Ok(created) => {
                if let (Some(h), Some(ct)) = (
                    crate::metrics::job_creation_skew(),
                    created.metadata.creation_timestamp.as_ref(),
                ) {
                    h.observe(ct.0.duration_since(start.scheduled).as_secs_f64());
                }
                tracing::debug!(cronjob = %key, job = %job_name, "created job");
                self.emit(
                    &pass.cj,
                    &PlannedEvent::normal(
                        reasons::SUCCESSFUL_CREATE,
                        format!("Created job {job_name}"),
                    ),
                );
                Ok(Some(created))
            }
            Err(source) if is_namespace_terminating(&source) => Err(Error::CreateJob {
                key,
                job: job_name,
                source,
            }),
            Err(e) if is_already_exists(&e) => {
                let existing =
                    self.api
                        .get_job(&ns, &job_name)
                        .await
                        .map_err(|source| Error::GetJob {
                            key: key.clone(),
                            job: job_name.clone(),
                            source,
                        })?;
                match plan::existing_job(&pass.cj, &existing) {
                    Existing::NotOurs | Existing::AlreadyActive => Ok(None),
                    Existing::Adopt => {
                        tracing::info!(cronjob = %key, job = %job_name, "job already exists");
                        Ok(Some(existing))
                    }
                }
            }
            Err(source) => {
                self.emit(
                    &pass.cj,
                    &PlannedEvent::warning(
                        reasons::FAILED_CREATE,
                        format!("Error creating job: {}", error_message(&source)),
                    ),
                );
                Err(Error::CreateJob {
                    key,
                    job: job_name,
                    source,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
