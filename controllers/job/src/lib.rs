//! The Job controller: runs pods from a Job's template until the Job succeeds or fails, and
//! keeps `status` an exact, crash-safe account of every pod that finished.
//!
//! Mirrors upstream (Kubernetes v1.37) `pkg/controller/job/job_controller.go`,
//! `indexed_job_utils.go`, `pod_failure_policy.go`, `success_policy.go`, `backoff_utils.go`,
//! `tracking_utils.go` and `metrics/metrics.go`.
//!
//! # Guarantees
//! - Every pod the controller creates carries the `batch.kubernetes.io/job-tracking`
//!   finalizer (adopted pods get it in the adoption patch). A finished pod is first recorded
//!   in `status.uncountedTerminatedPods` (or its index in `completedIndexes`) with a status
//!   write, then its finalizer is removed, then it moves into `succeeded`/`failed`: each
//!   terminated pod is counted exactly once, across restarts and stale caches.
//! - Never more active pods than `parallelism` nor than the remaining completions; at most
//!   500 creates or deletes and 500 new uncounted entries per sync; creates in slow-start
//!   batches; creates and deletes counted in expectations before they are issued.
//! - Failure: `backoffLimit` (and the `OnFailure` restart count), `activeDeadlineSeconds`
//!   (requeued to fire on time), pod failure policy (`FailJob`, `FailIndex`, `Ignore`,
//!   `Count`), `backoffLimitPerIndex`/`maxFailedIndexes`. Success: completions reached or a
//!   success policy rule. The interim condition (`FailureTarget`/`SuccessCriteriaMet`) is
//!   written first; `Failed`/`Complete` only once no pod is uncounted or terminating.
//! - Recreation backoff after failures: 10 s doubling to 10 minutes from the last failure.
//! - `suspend` removes active pods (finalizer first, never counted) and clears `startTime`;
//!   resuming sets it again. `podReplacementPolicy: Failed` waits for terminating pods.
//! - `spec.managedBy` other than `kubernetes.io/job-controller`: the Job is not touched.
//! - Pods that keep the finalizer without a live, unfinished Job of ours lose it (orphan queue).
//! - Events from `job-controller` and metrics under `job_controller_*` with upstream names.
//!
//! # Watches and writes
//! Watches Jobs and Pods through the shared informers. Writes: `create`/`delete`/`patch`
//! pods, `update` `jobs/status`, `get` the Job before adopting, `create` events.
//!
//! - Stale-cache guard (gate `StaleControllerConsistencyJob`, beta and on since v1.36; off,
//!   no write is recorded and no sync waits): a sync waits (counted in `job_controller_stale_sync_skips_total`, retried with backoff)
//!   until the Job and Pod caches show the pods this controller created or patched and the
//!   status it wrote for that Job. Status writes also carry the resourceVersion they were
//!   computed from, so a stale Job is never written back.
//!
//! # Not implemented
//! - Gang scheduling (`WorkloadWithJob`, alpha, off by default; rkcm refuses it on).

pub mod backoff;
mod config;
pub mod consts;
mod error;
mod executor;
pub mod explain;
mod handlers;
pub mod indexes;
mod metrics;
pub mod plan;
pub mod pods;
pub mod policy;
mod reconcile;
pub mod status;
#[cfg(test)]
mod testutil;
pub mod tracking;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::ControllerContext;
use rkcm_runtime::cache::InformerFactory;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::projection;
use rkcm_runtime::controller::{Run, SyncProbe, probes};
use rkcm_runtime::events::EventRecorder;
use rkcm_runtime::queue::{RateLimiter, RetryPolicy, WorkQueue};
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::podcontrol::PodControl;

pub use config::{Config, DEFAULT_WORKERS, NAME};
pub use error::Error;
pub use plan::managed_by_external;
pub use pods::remove_finalizer_patch;

/// What this controller reads of a cached pod beyond the base fields (see
/// `rkcm_runtime::cache::projection`): pod failure policy and backoff read container statuses.
pub const POD_FIELDS: projection::Fields = projection::pod::CONTAINER_STATUSES;

/// The informers the controller reads (the process waits for them before starting it).
pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe> {
    factory.informer::<Pod>().keep(POD_FIELDS);
    // Pods are made from the Job's template, and the status is written back whole.
    factory.informer::<Job>().keep(projection::job::TEMPLATE);
    probes::<(Job, Pod)>(factory)
}

fn job_queue(name: &str) -> WorkQueue<String> {
    WorkQueue::new(
        name,
        RateLimiter::ItemExponential {
            base: consts::API_BACKOFF_BASE,
            max: consts::API_BACKOFF_MAX,
        },
    )
}

/// Runs the Job controller until `ctx.shutdown` is cancelled: subscribes to the Job and Pod
/// informers, waits for both caches, then runs `cfg.workers` Job workers and one orphan-pod
/// worker. Sync errors are retried with backoff and never end it.
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    let cfg = Config {
        backoff_from_counted_pods: cfg.backoff_from_counted_pods || ctx.shards.is_some(),
        ..cfg
    };
    let _ = metrics::get();
    let jobs = ctx.informers.informer::<Job>();
    let pods = ctx.informers.informer::<Pod>();
    let queue = job_queue(consts::QUEUE_NAME);
    let orphan_queue = job_queue(consts::ORPHAN_QUEUE_NAME);
    let recorder = EventRecorder::with_options(
        ctx.client.clone(),
        consts::EVENT_COMPONENT,
        None,
        ctx.clock.clone(),
    );
    let workers = cfg.workers;
    let controller = Arc::new(reconcile::Controller {
        client: ctx.client.clone(),
        jobs: jobs.store(),
        pods: pods.store(),
        expectations: UidTrackingExpectations::new(ctx.clock.clone()),
        finalizer_expectations: tracking::FinalizerExpectations::default(),
        backoff: backoff::BackoffStore::default(),
        consistency: metrics::stale_guard().enabled(cfg.stale_cache_guard),
        pod_control: PodControl::new(ctx.client.clone(), recorder.clone()),
        recorder,
        queue: queue.clone(),
        orphan_queue: orphan_queue.clone(),
        clock: ctx.clock.clone(),
        cfg,
    });
    rkcm_runtime::tracked::track(NAME, &controller, reconcile::Controller::tracked_sizes);
    jobs.subscribe_with(&controller, reconcile::Controller::on_job_change);
    pods.subscribe_with(&controller, reconcile::Controller::on_pod_change);
    // Upstream runs one orphan-pod worker beside the Job workers; both retry with backoff.
    Run::main(NAME, informers(&ctx.informers), &controller, queue, workers)
        .queue(
            orphan_queue,
            1,
            RetryPolicy::default(),
            |c, key| async move { c.sync_orphan(key).await },
        )
        .run(&ctx)
        .await
}
