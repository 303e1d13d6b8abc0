//! The DaemonSet controller: one pod of each DaemonSet on every eligible node, rolled to new
//! template revisions with RollingUpdate (`maxUnavailable` or `maxSurge`) or OnDelete.
//!
//! Mirrors upstream (Kubernetes v1.37) `pkg/controller/daemon/daemon_controller.go`,
//! `update.go` and `util/daemonset_util.go`.
//!
//! # Guarantees
//! - Eligibility is upstream's ([`eligibility`]): template `nodeName`, `nodeSelector`,
//!   required node affinity (`matchExpressions` and `matchFields`), and `NoSchedule`/
//!   `NoExecute` taints against the template's tolerations plus the default DaemonSet
//!   tolerations. An untolerated `NoSchedule` taint keeps a running pod (counted
//!   misscheduled); an untolerated `NoExecute` taint deletes it.
//! - Pods are created unbound, pinned by the required node affinity term
//!   `matchFields metadata.name In [<node>]`, labelled `controller-revision-hash` and
//!   `pod-template-generation`, with the default tolerations; the scheduler binds them.
//! - At most one pod per node without surge (the oldest is kept; a terminating pod is
//!   replaced only once it is gone); with `maxSurge`, one old and one new pod per node until
//!   the new one is available. Failed pods are deleted with a per-node exponential back-off
//!   (1 s to 15 min) and a `FailedDaemonPod` event; succeeded pods are deleted. Unbound pods
//!   aimed at nodes that no longer exist are deleted.
//! - At most 250 creates and 250 deletes per sync, creates in slow-start batches; counted in
//!   expectations before they are issued, so a stale cache never doubles a pod. Deletes are
//!   graceful with a UID precondition, never with a grace period of 0.
//! - ControllerRevisions: `data.raw` byte-identical to upstream's, so a DaemonSet taken over
//!   from upstream keeps its revision and pods; rollback reuses the matching revision (new
//!   `.revision`); old revisions beyond `revisionHistoryLimit` and not used by any pod are
//!   deleted; name collisions raise `status.collisionCount`.
//! - Status counters as upstream, written through the status subresource with the
//!   resourceVersion, only when changed; `observedGeneration` only once expectations are met.
//! - Stale-cache guard (gate `StaleControllerConsistencyDaemonSet`, beta, on): a sync waits
//!   for the caches to show the pods the controller created, adopted or relabelled and the
//!   status it wrote; skips are counted in `daemonset_controller_stale_sync_skips_total`.
//!
//! # Watches and writes
//! Watches DaemonSets, Pods, Nodes and ControllerRevisions through the shared informers (queues
//! `daemonset` and `daemonset-node-updates`). Writes: pods (create, delete, patch to adopt,
//! release or relabel), ControllerRevisions (create, update, patch, delete),
//! `daemonsets/status` (update), events. Never writes a DaemonSet's spec or metadata, a Node,
//! or a pod's `spec.nodeName`.
//!
//! # Differences from upstream
//! - Opt-in only (rkcm's own, [`Config::rollout_skips_not_ready_nodes`] or the annotation
//!   [`consts::SKIP_NOT_READY_NODES_ANNOTATION`]): the rolling update leaves NotReady nodes out
//!   ([`plan::skips_not_ready_nodes`] says what that risks). By default a NotReady node's
//!   unavailable pod uses the budget, as upstream.
//! - The node-update worker also enqueues a DaemonSet that has a pod bound to a node where it
//!   should no longer run (upstream: only where it must not continue, or when it already
//!   counts misscheduled pods), so a new `NoSchedule` taint updates `desiredNumberScheduled`
//!   and `numberMisscheduled` at once instead of at the next sync.
//! - Nodes are visited in cache order by the rolling update (upstream: map order, unspecified).
//! - Gate `TaintTolerationComparisonOperators` (alpha, off) is honoured both ways
//!   ([`Config::taint_comparison_operators`]).
//!
//! # Not implemented
//! - The revision hash in names and labels is rkcm's (see [`revision`]); upstream's value is a
//!   Go-specific dump no other program reproduces. Matching goes by data, as upstream's does.
//! - Metric `daemonset_controller_expectations_waiting_total` (post-1.37 upstream).

pub mod backoff;
mod config;
pub mod consts;
pub mod eligibility;
mod error;
pub mod explain;
mod handlers;
mod metrics;
pub mod nodes;
pub mod plan;
mod reconcile;
pub mod revision;
mod snapshot;
pub mod status;
pub mod template;

#[cfg(test)]
mod testutil;

use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use rkcm_runtime::ControllerContext;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::cache::projection;
use rkcm_runtime::cache::{INDEX_NODE_NAME, InformerFactory, pods_by_node};
use rkcm_runtime::controller::{Run, SyncProbe, probes};
use rkcm_runtime::events::EventRecorder;
use rkcm_runtime::queue::{RateLimiter, RetryPolicy, WorkQueue};
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::history::History;
use rkcm_runtime::workload::podcontrol::PodControl;

pub use config::{Config, NAME};
pub use error::Error;

/// What this controller reads of a cached pod beyond the base fields (see
/// `rkcm_runtime::cache::projection`): the node a daemon pod targets may be in its node affinity.
pub const POD_FIELDS: projection::Fields = projection::pod::AFFINITY;

/// The informers the controller reads (requested from `factory`).
pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe> {
    factory.informer::<Pod>().keep(POD_FIELDS);
    probes::<(Pod, Node, ControllerRevision, DaemonSet)>(factory)
}

/// Runs the controller until `ctx.shutdown` is cancelled: subscribes the handlers, waits for
/// the caches, then runs `cfg.workers` workers on each of its two queues, plus the failed-pod
/// back-off garbage collection every minute. Sync errors are retried with backoff and never
/// end it.
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    let daemonsets = ctx.informers.informer::<DaemonSet>();
    let pods = ctx.informers.informer::<Pod>();
    let nodes = ctx.informers.informer::<Node>();
    let revisions = ctx.informers.informer::<ControllerRevision>();
    pods.add_index(INDEX_NODE_NAME, pods_by_node);
    let queue = WorkQueue::new(consts::QUEUE_NAME, RateLimiter::Default);
    let node_queue = WorkQueue::new(consts::NODE_QUEUE_NAME, RateLimiter::Default);
    let recorder = EventRecorder::with_options(
        ctx.client.clone(),
        consts::EVENT_COMPONENT,
        None,
        ctx.clock.clone(),
    );
    let workers = cfg.workers;
    let controller = Arc::new(reconcile::Controller {
        client: ctx.client.clone(),
        daemonsets: daemonsets.store(),
        pods: pods.store(),
        nodes: nodes.store(),
        revisions: revisions.store(),
        expectations: UidTrackingExpectations::new(ctx.clock.clone()),
        pod_control: PodControl::new(ctx.client.clone(), recorder.clone()),
        recorder,
        history: History::new(ctx.client.clone()),
        queue: queue.clone(),
        node_queue: node_queue.clone(),
        clock: ctx.clock.clone(),
        consistency: metrics::stale_guard().enabled(cfg.stale_cache_guard),
        backoff: Mutex::new(backoff::Backoff::default()),
        pacer: rkcm_runtime::queue::pacing::StatusPacer::default().with_budget(ctx.budget.clone()),
        spacer: rkcm_runtime::queue::pacing::SyncSpacer::default(),
        cfg,
    });
    rkcm_runtime::tracked::track(NAME, &controller, reconcile::Controller::tracked_sizes);
    daemonsets.subscribe_with(&controller, reconcile::Controller::on_daemonset_change);
    revisions.subscribe_with(&controller, reconcile::Controller::on_revision_change);
    pods.subscribe_with(&controller, reconcile::Controller::on_pod_change);
    nodes.subscribe_with(&controller, reconcile::Controller::on_node_change);

    let c = controller.clone();
    let shutdown = ctx.shutdown.clone();
    let gc = tokio::spawn(async move {
        let mut tick = tokio::time::interval(consts::BACKOFF_GC_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                _ = tick.tick() => c.gc_backoff(),
            }
        }
    });

    // Upstream runs the DaemonSet workers and the node-update workers on one start.
    let done = Run::main(NAME, informers(&ctx.informers), &controller, queue, workers)
        .queue(
            node_queue,
            workers,
            RetryPolicy::default(),
            |c, name| async move { c.sync_node(name).await },
        )
        .run(&ctx)
        .await;
    gc.abort();
    done
}
