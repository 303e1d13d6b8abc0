//! The sweep: snapshot of the caches -> [`plan`](crate::plan) -> mark failed and force-delete.
//!
//! One sweep runs the four sweeps in upstream order (terminated, out-of-service, orphaned,
//! unscheduled) over one shared snapshot. Every pod is handled on its own: an error is logged
//! with the pod, counted, and never stops the sweep; the pod is retried on a later sweep if it
//! still qualifies. Terminated and out-of-service deletions run concurrently, bounded by
//! [`Config::delete_concurrency`]; orphan and unscheduled deletions run one after another, as
//! upstream does.
//!
//! API writes go through [`PodGcApi`], so the sweep can be tested without a cluster.

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::explain::decisions::{self, Decisions, Note, Outcome};
use rkcm_runtime::queue::{RateLimiter, WorkQueue};
use rkcm_runtime::shard::Shards;

use crate::config::{Config, NAME};
use crate::consts;
use crate::error::Error;
use crate::metrics::{self, Metrics};
use crate::plan::{self, Reason};
use crate::status;

/// The three API calls PodGC makes.
pub(crate) trait PodGcApi: Send + Sync {
    /// Server-side apply of a pod status (field manager `PodGC`, forced).
    fn apply_status(
        &self,
        body: &core::Pod,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;
    /// `DELETE` with grace period 0 and, when known, a UID precondition.
    fn force_delete(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;
    /// Live `GET` of a node: `Ok(false)` only on 404.
    fn node_exists(&self, name: &str) -> impl Future<Output = Result<bool, kube::Error>> + Send;
}

/// [`PodGcApi`] on a real client.
#[derive(Clone)]
pub(crate) struct KubeApi {
    client: kube::Client,
}

impl KubeApi {
    pub(crate) fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl PodGcApi for KubeApi {
    async fn apply_status(&self, body: &core::Pod) -> Result<(), kube::Error> {
        let namespace = body.metadata.namespace.as_deref().unwrap_or_default();
        let name = body.metadata.name.as_deref().unwrap_or_default();
        // Forced: PodGC must win the phase even when the kubelet (or a test) owns it; the
        // pod is about to be deleted anyway.
        let params = PatchParams::apply(consts::FIELD_MANAGER).force();
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .patch_status(name, &params, &Patch::Apply(body))
            .await
            .map(drop)
    }

    async fn force_delete(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error> {
        // Grace period 0 is PodGC's privilege alone (SAFE-01/SAFE-05). The UID precondition
        // keeps a pod re-created under the same name out of reach.
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: uid
                // Mutant (sim only): delete by name alone.
                .filter(|_| !rkcm_runtime::mutants::on("podgc-no-uid-precondition"))
                .map(|uid| Preconditions {
                    uid: Some(uid.to_owned()),
                    resource_version: None,
                }),
            ..DeleteParams::default()
        };
        rkcm_runtime::api::write::delete::<Pod>(&self.client, Some(namespace), name, &params).await
    }

    async fn node_exists(&self, name: &str) -> Result<bool, kube::Error> {
        Api::<Node>::all(self.client.clone())
            .get_opt(name)
            .await
            .map(|n| n.is_some())
    }
}

fn pod_key(pod: &Pod) -> String {
    rkcm_runtime::keys::key_of(pod)
}

/// Marks `pod` failed if it is not terminal (with the `DisruptionTarget` condition for
/// orphans), then force-deletes it. Nothing is deleted if the status write fails.
pub(crate) async fn mark_failed_and_delete<A: PodGcApi>(
    api: &A,
    pod: &Pod,
    reason: Reason,
    now: jiff::Timestamp,
) -> Result<(), Error> {
    let key = pod_key(pod);
    tracing::info!(pod = %key, reason = reason.label(), "PodGC is force deleting Pod");
    if let Some(body) = status::failed_status_apply(pod, reason, now) {
        api.apply_status(&body)
            .await
            .map_err(|source| Error::MarkFailed {
                pod: key.clone(),
                source,
            })?;
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    api.force_delete(namespace, name, pod.metadata.uid.as_deref())
        .await
        .map_err(|source| Error::ForceDelete { pod: key, source })
}

/// What one sweep attempted, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct SweepReport {
    /// `(reason, pod key)` of every attempt.
    pub attempted: Vec<(Reason, String)>,
    /// `(reason, pod key)` of every failed attempt.
    pub failed: Vec<(Reason, String)>,
    /// Quarantined nodes confirmed gone by a live `GET`.
    pub deleted_nodes: BTreeSet<String>,
    /// The sweep's last decision for each pod it acted on or waits on.
    pub decided: Vec<Decision>,
}

/// PodGC's last decision for one pod (`namespace/name`), as the queue-driven controllers
/// record theirs after each sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub key: String,
    pub outcome: Outcome,
    pub note: Note,
}

/// One pod's attempt: what the report and the pod's last decision say of it.
struct Attempt {
    reason: Reason,
    key: String,
    ok: bool,
    decision: Decision,
}

/// The sweeper and the state it keeps between sweeps: only the quarantine.
///
/// The quarantine is upstream's delaying queue of node names, `orphaned_pods_nodes` (its
/// `workqueue_*` metrics carry that name): a name is added with the quarantine delay on every
/// sweep that sees it unknown; adding a name already waiting keeps the earliest deadline, so
/// repeated sightings never extend the wait; a name comes out when its wait ends, even if the
/// node showed up meanwhile (it is then simply not checked); a name taken out and still
/// unknown later is added again with a full wait. A restart loses the queue, which can only
/// delay orphan deletion, never hasten it.
pub(crate) struct Sweeper<A> {
    api: A,
    cfg: Config,
    clock: SharedClock,
    node_queue: WorkQueue<String>,
    metrics: &'static Metrics,
    /// Where the sweeps' last decisions go (the process's store, served to `rkcm explain`).
    decisions: &'static Decisions,
    /// The pods the previous sweep recorded: a pod no longer acted on nor waited on is
    /// forgotten, so the store holds what the latest sweep decided and nothing older.
    recorded: HashSet<String>,
    /// Sharded mode: a pod is written for only while its range (for the threshold: the
    /// global Lease) is held ([`crate::sharded`]).
    shards: Option<Arc<Shards>>,
}

impl<A> Drop for Sweeper<A> {
    fn drop(&mut self) {
        // Upstream shuts the node queue down when the controller stops; this also ends the
        // queue's background task.
        self.node_queue.shut_down();
    }
}

impl<A: PodGcApi> Sweeper<A> {
    pub(crate) fn new(api: A, cfg: Config, clock: SharedClock) -> Self {
        Self {
            api,
            cfg,
            clock,
            // Only `add_after` is used: the rate limiter never applies.
            node_queue: WorkQueue::new(consts::NODE_QUEUE_NAME, RateLimiter::default()),
            metrics: metrics::get(),
            decisions: decisions::global(),
            recorded: HashSet::new(),
            shards: None,
        }
    }

    /// Sharded mode: writes only while the pod's range (the threshold: the global Lease) is
    /// held; the threshold sweep runs over the pods [`Sweeper::sweep_with`] is given.
    pub(crate) fn with_shards(mut self, shards: Arc<Shards>) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Records into `store` instead of the process's store (tests).
    #[cfg(test)]
    pub(crate) fn with_decisions(mut self, store: &'static Decisions) -> Self {
        self.decisions = store;
        self
    }

    /// Replaces the previous sweep's last decisions with this sweep's.
    fn record(&mut self, decided: &[Decision]) {
        let at = self.clock.wall().to_string();
        let now: HashSet<String> = decided.iter().map(|d| d.key.clone()).collect();
        for stale in self.recorded.difference(&now) {
            let gone = Note {
                gone: true,
                ..Note::default()
            };
            self.decisions
                .record(NAME, stale, Outcome::Synced, gone, at.clone());
        }
        for d in decided {
            self.decisions
                .record(NAME, &d.key, d.outcome.clone(), d.note.clone(), at.clone());
        }
        self.recorded = now;
    }

    /// One sweep over a snapshot of the pod and node caches.
    #[cfg(test)]
    pub(crate) async fn sweep(&mut self, pods: &[Arc<Pod>], nodes: &[Arc<Node>]) -> SweepReport {
        self.sweep_with(pods, nodes, None).await
    }

    /// One sweep; in sharded mode the threshold counts `terminated` (the cluster's terminated
    /// pods, while this replica holds the global Lease) and is skipped without it.
    pub(crate) async fn sweep_with(
        &mut self,
        pods: &[Arc<Pod>],
        nodes: &[Arc<Node>],
        terminated: Option<&[Arc<Pod>]>,
    ) -> SweepReport {
        let threshold = self.cfg.terminated_pod_gc_threshold;
        let mut plan = plan::plan(
            pods,
            nodes,
            if self.shards.is_some() { 0 } else { threshold },
        );
        if self.shards.is_some() {
            plan.terminated = terminated
                .map(|all| plan::terminated_above(all, threshold))
                .unwrap_or_default();
        }
        let mut report = SweepReport::default();

        if !plan.terminated.is_empty() {
            tracing::info!(
                pods = plan.terminated.len(),
                "garbage collecting terminated pods"
            );
        }
        self.delete_concurrently(&plan.terminated, Reason::Terminated, &mut report)
            .await;
        self.delete_concurrently(&plan.out_of_service, Reason::OutOfService, &mut report)
            .await;

        // Orphans: quarantine first, then a live GET, so that a node merely missing from a
        // lagging cache (or slow to register) never costs its pods.
        for node in &plan.unknown_nodes {
            // Mutant (sim only): a node missing from the cache counts as deleted at once,
            // without the quarantine and the live GET.
            if rkcm_runtime::mutants::on("podgc-orphans-from-cache") {
                report.deleted_nodes.insert(node.clone());
                continue;
            }
            self.node_queue.add_after(node.clone(), self.cfg.quarantine);
        }
        // Only names whose wait has ended are queued (`len` counts ready names only); this
        // sweep is their only consumer, so `get` never blocks here.
        while !self.node_queue.is_empty() {
            let Some(node) = self.node_queue.get().await else {
                // Shutting down: end the sweep as upstream does.
                return report;
            };
            if plan.still_unknown(&node) {
                match self.api.node_exists(&node).await {
                    Ok(false) => {
                        report.deleted_nodes.insert(node.clone());
                    }
                    Ok(true) => {
                        tracing::debug!(node = %node, "quarantined node exists; its pods are kept")
                    }
                    // Never delete on doubt; the next sweep quarantines the name again while
                    // pods still point at it.
                    Err(source) => {
                        let error = Error::GetNode {
                            node: node.clone(),
                            source,
                        };
                        tracing::warn!(node = %node, %error, "checking quarantined node failed");
                    }
                }
            }
            self.node_queue.done(&node);
        }
        for pod in plan::orphaned_pods(pods, &report.deleted_nodes) {
            tracing::debug!(
                pod = %pod_key(&pod),
                node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default(),
                "found orphaned pod assigned to a deleted node"
            );
            self.delete_one(&pod, Reason::Orphaned, &mut report).await;
        }

        for pod in &plan.unscheduled {
            self.delete_one(pod, Reason::Unscheduled, &mut report).await;
        }
        let waits = crate::explain::sweep_waits(
            pods,
            nodes,
            &plan,
            &report.deleted_nodes,
            self.cfg.quarantine.as_secs(),
        );
        add_waits(&mut report.decided, waits);
        self.record(&report.decided);
        report
    }

    async fn delete_concurrently(
        &self,
        pods: &[Arc<Pod>],
        reason: Reason,
        report: &mut SweepReport,
    ) {
        if pods.is_empty() {
            return;
        }
        let limit = self.cfg.delete_concurrency.max(1);
        // The futures are built up front (they are lazy): a stream mapped through a closure
        // over `&Arc<Pod>` would make the sweep future not provably `Send`.
        let attempts: Vec<_> = pods.iter().map(|pod| self.attempt(pod, reason)).collect();
        let results: Vec<Option<Attempt>> = futures::stream::iter(attempts)
            .buffer_unordered(limit)
            .collect()
            .await;
        for attempt in results.into_iter().flatten() {
            report.add(attempt);
        }
    }

    async fn delete_one(&self, pod: &Pod, reason: Reason, report: &mut SweepReport) {
        if let Some(attempt) = self.attempt(pod, reason).await {
            report.add(attempt);
        }
    }

    /// One pod, in sharded mode only while its range (the threshold: the global Lease) is
    /// held, the write counted in flight.
    async fn attempt(&self, pod: &Pod, reason: Reason) -> Option<Attempt> {
        let _in_flight = match &self.shards {
            None => None,
            Some(shards) => match crate::sharded::Sharded::begin(shards, pod, reason) {
                Some(token) => Some(token),
                None => {
                    tracing::debug!(pod = %pod_key(pod), reason = reason.label(), "shard range not held: pod left to its holder");
                    return None;
                }
            },
        };
        Some(self.act(pod, reason).await)
    }

    /// One pod: act, log, count, and note the writes for its last decision.
    async fn act(&self, pod: &Pod, reason: Reason) -> Attempt {
        let key = pod_key(pod);
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        // Upstream counts out-of-service attempts before acting and the others after; keep
        // it, so counters read the same mid-sweep.
        if reason == Reason::OutOfService {
            self.metrics.attempt(namespace, reason);
        }
        let act = mark_failed_and_delete(&self.api, pod, reason, self.clock.wall());
        let (result, mut note) = decisions::noting(act).await;
        note.actions.insert(
            0,
            format!("force-delete the pod (grace period 0): {}", reason.label()),
        );
        let outcome = match &result {
            Ok(()) => Outcome::Synced,
            Err(error) => {
                let error = error.to_string();
                rkcm_runtime::explain::refused::note_refusal(&mut note, &error);
                Outcome::Failed { error }
            }
        };
        let ok = match result {
            Ok(()) => {
                if matches!(reason, Reason::Orphaned | Reason::Unscheduled) {
                    tracing::info!(pod = %key, reason = reason.label(), "forced deletion of pod succeeded");
                }
                true
            }
            Err(error) => {
                // A 404 means someone else finished the job; upstream still counts it.
                if error.is_not_found() {
                    tracing::debug!(pod = %key, reason = reason.label(), step = error.category(), %error, "pod already gone");
                } else {
                    tracing::warn!(pod = %key, reason = reason.label(), step = error.category(), %error, "force deleting pod failed");
                }
                self.metrics.error(namespace, reason);
                false
            }
        };
        if reason != Reason::OutOfService {
            self.metrics.attempt(namespace, reason);
        }
        Attempt {
            reason,
            decision: Decision {
                key: key.clone(),
                outcome,
                note,
            },
            key,
            ok,
        }
    }
}

impl SweepReport {
    fn add(&mut self, attempt: Attempt) {
        if !attempt.ok {
            self.failed.push((attempt.reason, attempt.key.clone()));
        }
        self.attempted.push((attempt.reason, attempt.key));
        // A pod selected by two sweeps has two; the store keeps the later.
        self.decided.push(attempt.decision);
    }
}

/// Adds the sweep's waits (one per pod) to its decisions; a pod the sweep acted on keeps the
/// attempt as its decision.
fn add_waits(decided: &mut Vec<Decision>, waits: Vec<(String, rkcm_runtime::explain::Waiting)>) {
    let acted: HashSet<String> = decided.iter().map(|d| d.key.clone()).collect();
    for (key, wait) in waits.into_iter().filter(|(k, _)| !acted.contains(k)) {
        decided.push(Decision {
            key,
            outcome: Outcome::Synced,
            note: Note {
                waiting: vec![format!("{}: {}", wait.reason, wait.message)],
                ..Note::default()
            },
        });
    }
}

/// What one sweep looks at.
pub(crate) struct Snapshot {
    pub(crate) pods: Vec<Arc<Pod>>,
    pub(crate) nodes: Vec<Arc<Node>>,
    /// Sharded mode: the cluster's terminated pods, while the global Lease is held.
    pub(crate) terminated: Option<Vec<Arc<Pod>>>,
}

impl From<(Vec<Arc<Pod>>, Vec<Arc<Node>>)> for Snapshot {
    fn from((pods, nodes): (Vec<Arc<Pod>>, Vec<Arc<Node>>)) -> Self {
        Self {
            pods,
            nodes,
            terminated: None,
        }
    }
}

/// Runs a sweep at once, then again `period` after each sweep ends (a sliding period, like
/// upstream's `wait.Until`), until `shutdown` completes. A sweep in flight is abandoned on
/// shutdown: every write is idempotent and a half-done pod (failed, not yet deleted) still
/// qualifies on the next leader's first sweep.
pub(crate) async fn run_sweeps<A, S>(
    mut sweeper: Sweeper<A>,
    snapshot: S,
    period: std::time::Duration,
    shutdown: impl Future<Output = ()>,
) where
    A: PodGcApi,
    S: FnMut() -> Snapshot,
{
    let mut snapshot = snapshot;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let Snapshot {
            pods,
            nodes,
            terminated,
        } = snapshot();
        tokio::select! {
            biased;
            () = &mut shutdown => return,
            report = sweeper.sweep_with(&pods, &nodes, terminated.as_deref()) => {
                tracing::debug!(
                    pods = pods.len(),
                    nodes = nodes.len(),
                    attempted = report.attempted.len(),
                    failed = report.failed.len(),
                    "sweep finished"
                );
            }
        }
        tokio::select! {
            biased;
            () = &mut shutdown => return,
            () = tokio::time::sleep(period) => {}
        }
    }
}

#[cfg(test)]
mod tests;
