//! The StatefulSet controller: pods with stable identities (`<set>-<ordinal>`, hostname,
//! subdomain, one claim per template per ordinal), created and deleted in order or in
//! parallel, rolled to new template revisions, with revision history and claim retention.
//!
//! Mirrors upstream (Kubernetes v1.37) `pkg/controller/statefulset/`: `stateful_set.go`
//! (handlers, worker, `sync`, adoption), `stateful_set_control.go` (revisions, the ordering
//! rules, status, history), `stateful_set_utils.go` (identity, storage, claim retention,
//! revisions), `stateful_pod_control.go` (pod and claim writes and their events) and
//! `stateful_set_status_updater.go`, plus `pkg/controller/history/controller_history.go`
//! through the runtime's [`rkcm_runtime::workload::history`].
//!
//! # Guarantees
//! - At most one pod per identity: a pod for ordinal *k* is created only when the claimed
//!   pods hold no object named `<set>-k` (a terminating pod keeps its slot), and only when
//!   the set's expectations are satisfied (the cache has seen this controller's own creates
//!   and deletes). Failed and Succeeded pods are deleted and replaced in a later sync, after
//!   the object is gone. Deletes are graceful with a UID precondition: never a grace period
//!   of 0, never a finalizer removed.
//! - Claims are created before their pod and never deleted or recreated while they exist; a
//!   claim being deleted blocks its pod (`FailedCreate`). Owner references on claims follow
//!   `persistentVolumeClaimRetentionPolicy` exactly as upstream, condemned pods' claims are
//!   fixed before the pod is deleted, and claims still referring to an earlier pod
//!   (`whenScaled: Delete`) block the ordinal until the collector removes them.
//! - `OrderedReady`: one create or delete per sync, each waiting for its predecessors to be
//!   Running, Ready and available (`minReadySeconds`); scale-down from the highest ordinal,
//!   blocked while a lower pod is unhealthy. `Parallel`: slow-start batches, no waiting.
//! - RollingUpdate from the highest ordinal down to `partition`, one pod at a time, or up to
//!   `maxUnavailable` (gate `MaxUnavailableStatefulSet`); OnDelete only replaces pods
//!   someone deleted. The current revision is promoted once every replica is updated and
//!   ready.
//! - Revisions: `data.raw` and names byte-identical to upstream's (so a takeover creates no
//!   revision), rollback reuses the equal revision with a new `.revision`, history beyond
//!   `revisionHistoryLimit` is deleted oldest first, never a live revision.
//! - Status (`replicas`, `readyReplicas`, `availableReplicas`, `currentReplicas`,
//!   `updatedReplicas`, revisions, `collisionCount`, `observedGeneration`) is written with
//!   the cached resourceVersion, retrying conflicts on a fresh cache copy, only when it
//!   changed, and also after failed pod operations. A set being deleted only gets status.
//! - Stale-cache guard (gate `StaleControllerConsistencyStatefulSet`): a sync waits until the
//!   pod, claim and set caches show the controller's own writes for that set.
//!
//! # Watches and writes
//! Informers: StatefulSets, Pods, PersistentVolumeClaims, ControllerRevisions (the last two
//! without handlers, as upstream), and Nodes (no handler, not waited for; read by the
//! stuck-rollout recovery only). Writes: pods create/update/patch (adopt, release)/delete,
//! persistentvolumeclaims create/update, controllerrevisions create/update/patch/delete,
//! statefulsets/status update, statefulsets get (before adopting), events.
//!
//! # Differences from upstream
//! - Creates and deletes also go through expectations (upstream relies on pod names and the
//!   stale-cache guard alone); this only ever delays a step until the cache catches up.
//! - After creating a pod, the claim owner references are fixed on the claims just created
//!   as well, not only on those already cached.
//! - An update deletion never targets an ordinal whose pod does not exist (upstream could,
//!   only without `rollingUpdate`, which the apiserver always defaults).
//! - Revisions are compared by their decoded data: the informers read JSON, which does not
//!   show the stored bytes upstream compares. With gate `StatefulSetSemanticRevisionComparison`
//!   (on) the newest revision is also restored onto the set and defaulted as the API server
//!   would ([`defaults`]) before it is judged changed, as upstream; the positive answer is
//!   not cached. rkcm writes revisions with Go's exact bytes
//!   ([`rkcm_runtime::workload::history::revision_request_body`]), so upstream also recognises
//!   older revisions rkcm created, e.g. on a rollback after a handover.
//! - `updateStrategy.type: Recreate` (gate `StatefulSetRecreateStrategy`, which rkcm refuses
//!   to enable) gets upstream's gate-off answer: an `UnknownStrategy` Warning event and an
//!   error, no pod or status written. An unparsable `rollingUpdate.maxUnavailable` fails the
//!   sync without a status write, as upstream.
//!
//! - Opt-in, off by default ([`recovery`]): the stuck-rollout recovery
//!   (annotation `rkcm.io/statefulset-recover-stuck-rollout`,
//!   `--rkcm-statefulset-recover-stuck-rollout`) deletes the not-Ready, old-revision pod the
//!   `OrderedReady` wait stops at when a rule holds, with a `RecoveredStuckPod` Warning.
//!
//! No `RecreatingFailedPod`/`RecreatingTerminatedPod` events: upstream removed them in
//! v1.31; a failed pod is reported by its `SuccessfulDelete` event only.

pub mod claims;
mod config;
pub mod consts;
pub mod defaults;
mod error;
mod executor;
pub mod explain;
mod handlers;
pub mod identity;
mod metrics;
pub mod plan;
mod reconcile;
pub mod recovery;
pub mod retention;
pub mod revision;
pub mod status;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use rkcm_runtime::ControllerContext;
use rkcm_runtime::cache::InformerFactory;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::cache::projection;
use rkcm_runtime::controller::{Run, SyncProbe, probes};
use rkcm_runtime::events::EventRecorder;
use rkcm_runtime::queue::{RateLimiter, WorkQueue};
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::history::History;

pub use config::{Config, DEFAULT_WORKERS, NAME};
pub use error::Error;

/// What this controller reads of a cached pod beyond the base fields (see
/// `rkcm_runtime::cache::projection`): storage checks read the pods' claim volumes, the
/// stuck-rollout recovery their containers' restart counts.
pub const POD_FIELDS: projection::Fields =
    projection::pod::VOLUME_CLAIMS.union(projection::pod::CONTAINER_STATUSES);

/// The informers the controller reads (StatefulSets, pods, claims, revisions), requested
/// from `factory`; [`start`] waits for the same list. Nodes are requested too, for the
/// stuck-rollout recovery, but not waited for: a node the cache does not show counts as
/// unreachable, so recovery leaves its pods alone (also where RBAC forbids listing nodes).
pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe> {
    factory.informer::<Pod>().keep(POD_FIELDS);
    factory.informer::<Node>();
    probes::<(StatefulSet, Pod, PersistentVolumeClaim, ControllerRevision)>(factory)
}

/// Runs the controller until `ctx.shutdown`: subscribes to StatefulSets and pods (claims and
/// revisions are read from their caches only, as upstream), waits for the four caches, then
/// runs `cfg.workers` workers. Returns `Ok(())` on shutdown; sync errors are retried with
/// backoff and never end it.
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    let sets = ctx.informers.informer::<StatefulSet>();
    let pods = ctx.informers.informer::<Pod>();
    let claims = ctx.informers.informer::<PersistentVolumeClaim>();
    let revisions = ctx.informers.informer::<ControllerRevision>();
    let nodes = ctx.informers.informer::<Node>();
    let queue = WorkQueue::new(consts::QUEUE_NAME, RateLimiter::Default);
    let workers = cfg.workers;
    let controller = Arc::new(reconcile::Controller {
        client: ctx.client.clone(),
        sets: sets.clone(),
        pods: pods.clone(),
        claims,
        revisions,
        nodes,
        history: History::new(ctx.client.clone()),
        recorder: EventRecorder::with_options(
            ctx.client.clone(),
            consts::EVENT_COMPONENT,
            None,
            ctx.clock.clone(),
        ),
        queue: queue.clone(),
        expectations: UidTrackingExpectations::new(ctx.clock.clone()),
        consistency: metrics::stale_guard().enabled(cfg.stale_cache_guard),
        clock: ctx.clock.clone(),
        cfg,
        pacer: rkcm_runtime::queue::pacing::StatusPacer::default().with_budget(ctx.budget.clone()),
    });
    rkcm_runtime::tracked::track(NAME, &controller, reconcile::Controller::tracked_sizes);
    sets.subscribe_with(&controller, reconcile::Controller::on_set);
    pods.subscribe_with(&controller, reconcile::Controller::on_pod);
    Run::main(NAME, informers(&ctx.informers), &controller, queue, workers)
        .run(&ctx)
        .await
}

#[cfg(test)]
mod testutil;
