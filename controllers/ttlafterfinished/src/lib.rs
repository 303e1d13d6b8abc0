//! The TTL-after-finished controller: deletes a finished Job once its
//! `spec.ttlSecondsAfterFinished` has passed, together with its pods.
//!
//! Mirrors upstream (Kubernetes v1.37) `pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`
//! and `metrics/metrics.go`, with `IsJobFinished` of `pkg/controller/job/util/utils.go`.
//!
//! # Guarantees
//! - Only Jobs with a TTL and a `Complete` or `Failed` condition that is `True` are ever
//!   deleted; interim conditions (`FailureTarget`, `SuccessCriteriaMet`) do not count. The clock
//!   starts at that condition's `lastTransitionTime` (the first such condition in list order);
//!   TTL 0 means "right after finishing", no TTL means never.
//! - A Job whose TTL has not expired is looked at again when the remaining time has passed,
//!   without any event; a restart recomputes every timer from the Jobs themselves.
//! - A Job is deleted only on the newest copy the API server has: the delete carries the
//!   judged copy's UID and resourceVersion as preconditions. The cached copy is tried first;
//!   when the server refuses it (the cache is behind), the Job is read from the API server
//!   and judged again on that copy. A Job whose TTL was just raised, or that was re-created
//!   under the same name, is not deleted on behalf of the old state.
//! - The delete uses `propagationPolicy: Foreground`: the Job stays (with a deletionTimestamp
//!   and the `foregroundDeletion` finalizer) until the garbage collector has removed its pods.
//! - Jobs already being deleted are left alone. A finish time in the future (clock skew) only
//!   defers deletion, with a logged warning.
//! - `ttl_after_finished_controller_job_deletion_duration_seconds` observes, for each delete,
//!   how long after expiry it happened.
//!
//! # Watches and writes
//! Watches Jobs (adds and updates) through the shared informer. Writes: `delete` jobs, and
//! `get` jobs when a delete of the cached copy met a conflict. No events, no status, no pods.
//!
//! # Differences from upstream
//! - The delete's preconditions include the judged copy's resourceVersion besides its UID: a
//!   TTL edited between the check and the delete makes the delete fail with a conflict and
//!   the Job is judged again instead of being deleted on a stale TTL.
//! - Upstream reads every Job with a GET before deleting it; rkcm deletes its cached copy
//!   under those preconditions and reads the Job only when the server refuses, one request
//!   (a quorum read) fewer per Job whenever the cache is current, with the same outcome.

mod config;
pub mod consts;
mod error;
pub mod explain;
mod handlers;
mod metrics;
pub mod plan;
mod reconcile;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::ControllerContext;
use rkcm_runtime::cache::InformerFactory;
use rkcm_runtime::controller::{Run, SyncProbe};
use rkcm_runtime::queue::{RateLimiter, WorkQueue};

pub use config::{Config, DEFAULT_WORKERS, NAME};
pub use error::Error;

/// The informers the controller reads (Jobs), requested from `factory`. The process requests
/// them before starting its informers; [`start`] waits for the same list.
pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe> {
    // The TTL and finish time, not the template.
    let jobs = factory.informer::<Job>();
    jobs.keep(rkcm_runtime::cache::projection::Fields::BASE);
    vec![SyncProbe::of(jobs)]
}

/// Runs the controller until `ctx.shutdown` is cancelled: subscribes to the Job informer,
/// waits for its cache, then runs `cfg.workers` workers on the queue `ttl_jobs_to_delete`.
/// Returns `Ok(())` on shutdown (also before the cache synced); sync errors are retried with
/// backoff and never end it.
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    let wait_for = informers(&ctx.informers);
    let jobs = ctx.informers.informer::<Job>();
    let queue = WorkQueue::new(consts::QUEUE_NAME, RateLimiter::Default);
    metrics::register();
    let controller = Arc::new(reconcile::Controller {
        client: ctx.client.clone(),
        jobs: jobs.store(),
        queue: queue.clone(),
        clock: ctx.clock.clone(),
    });
    jobs.subscribe_with(&controller, reconcile::Controller::on_job);
    // Upstream's `handleErr`: every failure is retried with the controller backoff.
    Run::main(NAME, wait_for, &controller, queue, cfg.workers)
        .run(&ctx)
        .await
}
