//! The ReplicaSet and ReplicationController controllers: keep exactly `spec.replicas` active
//! pods that match the owner's selector and are controlled by it.
//!
//! Mirrors upstream (Kubernetes v1.37) `pkg/controller/replicaset/replica_set.go`,
//! `replica_set_utils.go`, `pkg/controller/replication/` and the shared parts of
//! `pkg/controller/controller_utils.go` (`ActivePodsWithRanks`, expectations, slow start).
//!
//! # Guarantees
//! - Scale-up creates at most 500 pods per sync in slow-start batches (1, 2, 4, …), stopping
//!   after the first batch with a failure; scale-down deletes at most 500, chosen by the full
//!   upstream ranking ([`plan::compare_for_deletion`]).
//! - A stale cache never causes duplicate pods or over-deletion: creates and deletes are
//!   counted in expectations before they are issued and no pod is created or deleted while
//!   they are unmet (5-minute safety expiry).
//! - Deletes are graceful (the pod's own grace period) with a UID precondition; never grace
//!   period 0. Terminal pods are never deleted; terminating pods are not counted.
//! - Matching orphans are adopted (after a fresh GET of the owner, with UID preconditions),
//!   owned pods that stop matching are released; nothing is adopted, released, created or
//!   deleted while the owner is being deleted. Pods controlled by others are never touched.
//! - Status (`replicas`, `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`,
//!   `terminatingReplicas` for ReplicaSets when the gate is on, `observedGeneration`, the
//!   `ReplicaFailure` condition) is written through the status subresource only when it
//!   changed, carrying the resourceVersion of the newest version known: the cached one, or
//!   the one the controller's own previous status write returned while the cache lags.
//! - Stale-cache guard (ReplicaSets, gate `StaleControllerConsistencyReplicaSet`, beta and on
//!   since v1.36): a sync is skipped, counted in `replicaset_controller_stale_sync_skips_total`
//!   and retried with backoff until the pod and ReplicaSet caches reflect the pods the
//!   controller created or adopted and the status it wrote for that ReplicaSet.
//! - Events with upstream reasons (`SuccessfulCreate`, `FailedCreate`, `SuccessfulDelete`,
//!   `FailedDelete`) from `replicaset-controller` / `replication-controller`.
//!
//! # Watches and writes
//! Watches ReplicaSets (or ReplicationControllers) and Pods through the shared informers.
//! Writes: `create`/`delete`/`patch` pods, `update` `replicasets/status`
//! (`replicationcontrollers/status`), `get` the owner before adopting, `create` events.
//!
//! # Not implemented
//! - The stale-cache guard does not record release patches (the runtime's
//!   `ControllerRefManager` does not return the released pod); a release repeated on a lagging
//!   cache is a harmless no-op patch. Upstream records them.
//! - The informers' last-synced resourceVersion is the newest object version the cache
//!   applied; kube's watcher keeps list resourceVersions and bookmarks to itself. It is never
//!   ahead of client-go's, so the guard never lets a stale sync through; it can hold a sync
//!   a little longer (until the next pod or ReplicaSet event anywhere) after a relist.

mod config;
pub mod consts;
mod error;
pub mod explain;
mod handlers;
mod metrics;
pub mod owner;
pub mod plan;
mod reconcile;
pub mod status;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::ReplicationController;
use rkcm_runtime::ControllerContext;
use rkcm_runtime::cache::InformerFactory;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::projection;
use rkcm_runtime::controller::{Run, SyncProbe, probes};
use rkcm_runtime::events::EventRecorder;
use rkcm_runtime::queue::{RateLimiter, WorkQueue};
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::podcontrol::PodControl;

pub use config::{Config, DEFAULT_WORKERS, NAME, RC_NAME};
pub use error::Error;
pub use owner::{ReplicaOwner, ReplicaStatus};

/// Runs the ReplicaSet controller until `ctx.shutdown` is cancelled.
pub async fn start_replicaset(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    start::<ReplicaSet>(ctx, cfg).await
}

/// Runs the ReplicationController controller until `ctx.shutdown` is cancelled.
pub async fn start_replication_controller(
    ctx: ControllerContext,
    cfg: Config,
) -> Result<(), Error> {
    start::<ReplicationController>(ctx, cfg).await
}

/// What this controller reads of a cached pod beyond the base fields (see
/// `rkcm_runtime::cache::projection`): ranking for scale-down reads restart counts.
pub const POD_FIELDS: projection::Fields = projection::pod::CONTAINER_STATUSES;

/// The informers the controller for owner kind `O` reads (its owners and pods), requested
/// from `factory`. The process requests them before starting its informers; [`start`] waits
/// for the same list.
pub fn informers<O: ReplicaOwner>(factory: &InformerFactory) -> Vec<SyncProbe> {
    factory.informer::<Pod>().keep(POD_FIELDS);
    probes::<(O, Pod)>(factory)
}

/// Runs the controller for owner kind `O`: subscribes to the owner and pod informers, waits
/// for both caches, then runs `cfg.workers` workers on the queue until shutdown. Returns
/// `Ok(())` on shutdown (also when shut down before the caches synced); sync errors are
/// retried with backoff and never end it.
pub async fn start<O: ReplicaOwner>(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    metrics::sorting_deletion_age_ratio();
    let owners = ctx.informers.informer::<O>();
    let pods = ctx.informers.informer::<Pod>();
    let queue = WorkQueue::new(O::QUEUE_NAME, RateLimiter::Default);
    let recorder = EventRecorder::with_options(
        ctx.client.clone(),
        O::EVENT_COMPONENT,
        None,
        ctx.clock.clone(),
    );
    let workers = cfg.workers;
    let controller = Arc::new(reconcile::Controller::<O> {
        client: ctx.client.clone(),
        owners: owners.store(),
        pods: pods.store(),
        expectations: UidTrackingExpectations::new(ctx.clock.clone()),
        pod_control: PodControl::new(ctx.client.clone(), recorder),
        queue: queue.clone(),
        clock: ctx.clock.clone(),
        consistency: metrics::stale_guard(O::CONTROLLER_NAME)
            .enabled(O::HAS_STALE_CACHE_GUARD && cfg.stale_cache_guard),
        written: std::sync::Mutex::new(std::collections::HashMap::new()),
        pacer: rkcm_runtime::queue::pacing::StatusPacer::default().with_budget(ctx.budget.clone()),
        cfg,
    });
    rkcm_runtime::tracked::track(
        O::CONTROLLER_NAME,
        &controller,
        reconcile::Controller::tracked_sizes,
    );
    owners.subscribe_with(&controller, reconcile::Controller::on_owner_change);
    pods.subscribe_with(&controller, reconcile::Controller::on_pod_change);
    let wait_for = informers::<O>(&ctx.informers);
    Run::main(O::CONTROLLER_NAME, wait_for, &controller, queue, workers)
        .run(&ctx)
        .await
}
