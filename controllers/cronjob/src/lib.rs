//! CronJob controller: creates a Job for each scheduled instant of a `batch/v1` CronJob, keeps
//! `status.active`, `lastScheduleTime` and `lastSuccessfulTime` current, and deletes finished
//! Jobs beyond the history limits.
//!
//! Mirrors upstream `pkg/controller/cronjob/cronjob_controllerv2.go` and `utils.go`
//! (Kubernetes v1.37, with the v1.37 fixes: children matched by kind, name and UID; the
//! `AlreadyExists` path reads the Job from the CronJob's namespace). Schedules are parsed and
//! evaluated exactly as `github.com/robfig/cron/v3` v3.0.1 does ([`schedule`]).
//!
//! # Guarantees
//! - At most one Job per scheduled instant: Job names are `<cronjob>-<Unix minutes>`, so a
//!   second create for the same instant answers `AlreadyExists`; after a crash between create
//!   and status write, the existing Job (if this CronJob controls it) is put back into
//!   `status.active` instead of being created again.
//! - Only the most recent unmet instant runs: after downtime, or while `Forbid` holds a run
//!   back, one Job is created for the latest missed instant (within
//!   `startingDeadlineSeconds`), never one per missed instant. The missed count is estimated,
//!   never walked, so a CronJob off by years costs a few schedule evaluations.
//! - A bad `timeZone` or schedule gets a Warning event and no requeue (no retry storm); a
//!   schedule that never fires gets `InvalidSchedule`.
//! - Jobs are deleted only for history cleanup and the `Replace` policy, always with
//!   Background propagation and a UID precondition; Jobs controlled by anything else (another
//!   kind, or an older CronJob of the same name) are never touched.
//!
//! # Watches and writes
//! Reads the shared CronJob and Job informers. Writes Jobs (create, delete), `cronjobs/status`
//! (full `PUT` with the cached resourceVersion, at most once per sync) and Events (source
//! `cronjob-controller`); live `GET`s of a CronJob or Job only where upstream does them.
//! With `--rkcm-cronjob-defer-status-writes` (off by default, unlike upstream when on), a sync's
//! status write is sent once no other sync is running (at most a few seconds later, see [`deferred`]), so
//! when many CronJobs fire at the same instant every Job is created before the status writes
//! take their share of the client's rate limit; a CronJob is not synced again until its status
//! write is done and in the cache. With the flag off (the default), each sync ends with its own
//! status write, as upstream's.
//! Metric: `cronjob_controller_job_creation_skew_duration_seconds`; queue `cronjob`.
//!
//! # Layout
//! This file is wiring only. `config` (upstream defaults), `handlers` (informer changes to
//! keys), `controller` (cache reads and the entry of a sync), [`plan`] and [`status`] (pure
//! decisions and status edits), [`reconcile`] (the executor: the API calls a sync makes,
//! in upstream's order), `deferred` (status writes after the Job creates), [`schedule`].

mod config;
pub mod consts;
mod controller;
mod deferred;
mod error;
pub mod explain;
mod handlers;
mod metrics;
pub mod plan;
pub mod reconcile;
pub mod schedule;
pub mod status;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use rkcm_runtime::ControllerContext;
use rkcm_runtime::cache::InformerFactory;
use rkcm_runtime::controller::{Run, SyncProbe, probes};
use rkcm_runtime::events::EventRecorder;
use rkcm_runtime::queue::{RateLimiter, WorkQueue};
use rkcm_runtime::tracked::Size;

pub use config::{Config, DEFAULT_WORKERS};
pub use error::Error;

use crate::controller::Controller;

pub use consts::NAME;

/// The informers the controller reads (the process requests them before starting the
/// factory, and waits for them before running workers).
pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe> {
    // Jobs are read for owners, the scheduled-time annotation and status: not the template.
    factory
        .informer::<Job>()
        .keep(rkcm_runtime::cache::projection::Fields::BASE);
    probes::<(CronJob, Job)>(factory)
}

/// Runs the CronJob controller until `ctx.shutdown` is cancelled: subscribes to the CronJob
/// and Job informers, waits for both caches, then runs `cfg.workers` workers. Returns `Ok(())`
/// on shutdown (also before the caches synced); sync errors are retried with backoff and never
/// end it.
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    metrics::job_creation_skew();
    let cronjobs = ctx.informers.informer::<CronJob>();
    let jobs = ctx.informers.informer::<Job>();
    let queue = WorkQueue::new(consts::QUEUE_NAME, RateLimiter::Default);
    let controller = Arc::new(Controller {
        cronjobs: cronjobs.store(),
        jobs: jobs.store(),
        queue: queue.clone(),
        syncer: reconcile::Syncer {
            api: reconcile::KubeApi::new(ctx.client.clone()),
            recorder: EventRecorder::with_options(
                ctx.client.clone(),
                consts::EVENT_COMPONENT,
                None,
                ctx.clock.clone(),
            ),
            local: cfg.local_time_zone.clone(),
            adopt_forgotten_runs: cfg.adopt_forgotten_runs,
        },
        clock: ctx.clock.clone(),
        deferred: Arc::new(deferred::Deferred::default()),
        defer: cfg.defer_status_writes,
    });
    rkcm_runtime::tracked::track(NAME, &controller, |c, out| {
        out.push(Size::object("status_writes", c.deferred.len()));
    });
    let api = Arc::new(reconcile::KubeApi::new(ctx.client.clone()));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..cfg.workers.max(1) {
        writers.spawn(controller.deferred.clone().run_writer(
            api.clone(),
            queue.clone(),
            ctx.shutdown.clone(),
        ));
    }
    jobs.subscribe_with(&controller, Controller::on_job);
    cronjobs.subscribe_with(&controller, Controller::on_cronjob);
    // Upstream retries every failed sync with backoff, for ever.
    Run::main(
        NAME,
        informers(&ctx.informers),
        &controller,
        queue,
        cfg.workers,
    )
    .run(&ctx)
    .await?;
    // The workers are done; the writers send what the last syncs left queued.
    while writers.join_next().await.is_some() {}
    Ok(())
}
