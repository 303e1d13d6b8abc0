//! The Deployment controller: drives a Deployment's ReplicaSets so that its pod template runs
//! at `spec.replicas`, rolling from old templates to the current one.
//!
//! Mirrors upstream (Kubernetes v1.37) `pkg/controller/deployment/`: `deployment_controller.go`
//! (handlers, worker, `syncDeployment`), `sync.go` (new/old ReplicaSets, revisions, creation,
//! proportional scaling, cleanup, status), `rolling.go`, `recreate.go`, `rollback.go`,
//! `progress.go` and `util/deployment_util.go`, plus the shared parts of
//! `pkg/controller/controller_utils.go` and `controller_ref_manager.go`.
//!
//! # Guarantees
//! - The new ReplicaSet is the oldest one whose template equals the Deployment's, ignoring
//!   the `pod-template-hash` label (semantic equality: absent and empty maps/lists are
//!   equal); all others are old. It is created as `<deployment>-<hash>` with the hash label
//!   in its labels, selector and template, the controllerRef, revision `max(old) + 1`, the
//!   Deployment's annotations (except the skip list) and `desired-replicas`/`max-replicas`.
//! - RollingUpdate never has more than `D + maxSurge` replicas specified across ReplicaSets
//!   nor, by its own scale-downs, fewer than `D − maxUnavailable` available (unhealthy old
//!   replicas are removed first); one step per sync. Recreate scales every old ReplicaSet to
//!   0 and creates the new one only once no old pod runs (terminal pods do not count).
//! - A change of `spec.replicas` mid-rollout is spread proportionally over the active
//!   ReplicaSets (the leftover to the largest); paused Deployments only scale.
//! - Revisions are numeric and monotonic; a reused ReplicaSet records the revisions it
//!   served in `revision-history` (at most 2000 characters). `deprecated.deployment.rollback.to`
//!   is honoured and always cleared. Old ReplicaSets beyond `revisionHistoryLimit` are deleted
//!   only when they have no replicas and their status is current.
//! - Status (`observedGeneration`, the replica counts, `terminatingReplicas` when the gate is
//!   on, `collisionCount`, the `Available`/`Progressing`/`ReplicaFailure` conditions with
//!   upstream reasons and messages) is written through `deployments/status` with the cached
//!   resourceVersion, together with the Deployment's revision annotation, and only when it
//!   changed. A stalled rollout is re-checked when its progress deadline passes, without any
//!   event, so `ProgressDeadlineExceeded` appears on time.
//! - ReplicaSets are adopted only after a fresh GET of the Deployment and with UID
//!   preconditions; a Deployment being deleted only gets its status updated. Pods are never
//!   written.
//! - Events with upstream reasons (`ScalingReplicaSet`, `ReplicaSetCreateError`,
//!   `SelectingAll`, `DeploymentRollback*`) from `deployment-controller`.
//! - A failing key is retried with the default controller backoff at most 15 times in a
//!   row, then dropped until its next event; `NamespaceTerminating` refusals are not retried.
//!
//! # Watches and writes
//! Watches Deployments, ReplicaSets (controller-ref resolution and orphan matching) and Pods
//! (deletions only, for Recreate) through the shared informers. Writes: `create`/`update`/
//! `patch` (adopt, release)/`delete` replicasets, `update` deployments/status, `update`
//! deployments (the deprecated rollback request, and the opt-in rollback on progress
//! deadline), `get` deployments (before adopting), `list` replicasets (after
//! a pod of a Recreate Deployment is deleted), `create` events.
//!
//! # Differences from upstream
//! - `pod-template-hash` is [`rkcm_runtime::workload::history::compute_hash`]: upstream's FNV over a
//!   go-spew dump of the Go struct cannot be reproduced from the API object (it changes with
//!   Go field layout and Quantity internals). Nothing depends on the value: the new
//!   ReplicaSet is found by template equality, so a Deployment moves between upstream and
//!   rkcm without a new rollout; collisions are resolved through `collisionCount` as upstream.
//! - One sync keeps the objects its own writes return (new resourceVersions), so a step no
//!   longer conflicts with an earlier step of the same sync; upstream fails such syncs and
//!   retries them.
//! - Revision-history cleanup deletes with UID and resourceVersion preconditions (a
//!   ReplicaSet changed since the cache saw it is left for the next sync). On the paused path
//!   it judges the copies from before the scaling step, as upstream.
//! - A stale-cache guard (`--rkcm-deployment-stale-cache-guard`, on): a sync waits until the
//!   Deployment and ReplicaSet caches show the controller's own last writes for that
//!   Deployment, as upstream's ReplicaSet, StatefulSet, DaemonSet and Job controllers do
//!   (`StaleControllerConsistency*`; there is no Deployment gate upstream). Upstream, a sync on
//!   a ReplicaSet cache that lags behind the new ReplicaSet it just created treats it as
//!   missing and can scale the others up past `replicas + maxSurge` (the simulator found it:
//!   `rkcm-sim --controller deployment --seed 19`). Skips are counted in
//!   `deployment_controller_stale_sync_skips_total`. Part of it too: a rolling step reads
//!   each ReplicaSet's available count from its status and from its pods in the cache, and
//!   scales down by whichever count scales down less ([`plan::reconcile_old_seen`]): a
//!   status not rewritten since its pods changed still counts the old ones.
//! - Opt-in, off by default (`--rkcm-deployment-rollback-on-progress-deadline`, or the
//!   annotation `rkcm.io/deployment-rollback-on-progress-deadline`): a rollout past its
//!   progress deadline is rolled back as `kubectl rollout undo` does, to the newest old
//!   revision with available pods (with `Recreate`: the revision the rollout started from),
//!   once per bad revision, never when paused, with a `RolledBackOnProgressDeadline` Warning
//!   and the record `rkcm.io/rolled-back-from-revision` ([`plan::deadline`]). Upstream leaves
//!   such a Deployment on its broken ReplicaSet.
//! - A `NewReplicaSetAvailable` condition naming another ReplicaSet than the new one is
//!   replaced by `FoundNewReplicaSet` (upstream keeps it when the write of
//!   `NewReplicaSetCreated` was lost, and such a rollout never passes its deadline; see
//!   `plan::sync_revision`).

mod config;
pub mod consts;
mod error;
pub mod explain;
mod handlers;
pub mod model;
pub mod plan;
mod reconcile;
pub mod replicas;
pub mod revision;
pub mod status;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use rkcm_runtime::ControllerContext;
use rkcm_runtime::cache::InformerFactory;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::projection;
use rkcm_runtime::controller::{Run, SyncProbe, probes};
use rkcm_runtime::events::EventRecorder;
use rkcm_runtime::queue::{RateLimiter, WorkQueue};
use rkcm_runtime::workload::consistency::StaleGuard;

pub use config::{Config, DEFAULT_WORKERS, NAME};
pub use error::Error;

/// What this controller reads of a cached pod beyond the base fields (see
/// `rkcm_runtime::cache::projection`): nothing; owners and phase (Recreate waits for old pods to
/// stop) are base fields.
pub const POD_FIELDS: projection::Fields = projection::Fields::BASE;

/// The informers the Deployment controller reads (Deployments, ReplicaSets, pods), requested
/// from `factory`. The process requests them before starting its informers; [`start`] waits
/// for the same list.
pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe> {
    factory.informer::<Pod>().keep(POD_FIELDS);
    probes::<(Deployment, ReplicaSet, Pod)>(factory)
}

/// Runs the Deployment controller until `ctx.shutdown` is cancelled: subscribes to the
/// Deployment, ReplicaSet and Pod informers, waits for all three caches, then runs
/// `cfg.workers` workers. Returns `Ok(())` on shutdown (also before the caches synced); sync
/// errors are retried and never end it.
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    let deployments = ctx.informers.informer::<Deployment>();
    let replica_sets = ctx.informers.informer::<ReplicaSet>();
    let pods = ctx.informers.informer::<Pod>();
    let queue = WorkQueue::new(consts::QUEUE_NAME, RateLimiter::Default);
    let workers = cfg.workers;
    let controller = Arc::new(reconcile::Controller {
        client: ctx.client.clone(),
        deployments: deployments.store(),
        replica_sets: replica_sets.store(),
        pods: pods.store(),
        recorder: EventRecorder::with_options(
            ctx.client.clone(),
            consts::EVENT_COMPONENT,
            None,
            ctx.clock.clone(),
        ),
        queue: queue.clone(),
        pending_pod_checks: std::sync::Mutex::default(),
        pacer: rkcm_runtime::queue::pacing::StatusPacer::default().with_budget(ctx.budget.clone()),
        clock: ctx.clock.clone(),
        guard: StaleGuard::new(
            NAME,
            consts::metrics::SUBSYSTEM,
            consts::metrics::STALE_SYNC_SKIPS_HELP,
        )
        .enabled(cfg.stale_cache_guard),
        cfg,
    });
    rkcm_runtime::tracked::track(NAME, &controller, reconcile::Controller::tracked_sizes);
    deployments.subscribe_with(&controller, reconcile::Controller::on_deployment);
    replica_sets.subscribe_with(&controller, reconcile::Controller::on_replica_set);
    let c = controller.clone();
    pods.subscribe(move |change| c.on_pod(change));
    Run::main(NAME, informers(&ctx.informers), &controller, queue, workers)
        .run(&ctx)
        .await
}
