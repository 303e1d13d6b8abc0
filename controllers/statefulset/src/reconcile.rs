//! The sync: stale-cache guard -> [`plan::begin`] -> adopt revisions and pods -> choose and
//! write the update revision -> [`plan::plan`] -> execute it ([`crate::executor`]) ->
//! [`plan::status_step`] -> history truncation -> [`plan::outcome`]. It decides nothing
//! itself.
//!
//! Mirrors `sync`, `adoptOrphanRevisions` and `getPodsForStatefulSet` of upstream
//! `stateful_set.go`; `UpdateStatefulSet`, `performUpdate`, `getStatefulSetRevisions`,
//! `updateStatefulSetStatus` and `truncateHistory` of `stateful_set_control.go`.

use rkcm_runtime::error::StatusError;
use rkcm_runtime::tracked::Size;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Resource;
use kube::api::Api;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::cache::{INDEX_CONTROLLER_UID, INDEX_ORPHANS_BY_NAMESPACE, Informer};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::events::{EventRecorder, EventType, object_reference};
use rkcm_runtime::queue::RetryPolicy;
use rkcm_runtime::queue::WorkQueue;
use rkcm_runtime::queue::pacing::StatusPacer;
use rkcm_runtime::workload::controller_ref::{ControllerRefManager, controller_of};
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::history::{
    History, owned_or_orphan_revisions, sort_controller_revisions,
};

use crate::claims::Claims;
use crate::config::Config;
use crate::consts::reasons;
use crate::error::Error;
use crate::identity::{is_member_of, set_name};
use crate::plan::{self, Begin, Plan, Snapshot, StatusStep, StatusWrite, Waiting};
use crate::recovery::{self, Recovery};
use crate::revision::{self, UpdateChoice};
use rkcm_runtime::workload::consistency::StaleGuard;
use rkcm_runtime::workload::selector::Selector;

/// Conflict retries of pod and status updates (client-go `retry.DefaultRetry`: 5 steps).
pub(crate) const CONFLICT_STEPS: u32 = 5;

/// Everything the handlers and workers share.
pub(crate) struct Controller {
    pub(crate) client: kube::Client,
    pub(crate) sets: Informer<StatefulSet>,
    pub(crate) pods: Informer<Pod>,
    pub(crate) claims: Informer<PersistentVolumeClaim>,
    pub(crate) revisions: Informer<ControllerRevision>,
    /// Read by the stuck-rollout recovery only (a pod on an unreachable node is left alone).
    pub(crate) nodes: Informer<Node>,
    pub(crate) history: History,
    pub(crate) recorder: EventRecorder,
    pub(crate) queue: WorkQueue<String>,
    pub(crate) expectations: UidTrackingExpectations,
    pub(crate) consistency: StaleGuard,
    pub(crate) clock: SharedClock,
    pub(crate) cfg: Config,
    /// Spaces out one set's status writes that only move counts ([`rkcm_runtime::queue::pacing`]).
    pub(crate) pacer: StatusPacer,
}

/// One sync's context for the writes.
pub(crate) struct Ctx<'a> {
    pub(crate) key: &'a str,
    pub(crate) set: &'a StatefulSet,
    pub(crate) claims: &'a Claims,
    /// The update revision's name (empty before it is chosen).
    pub(crate) update_revision: &'a str,
}

pub(crate) fn name_of<K: Resource>(o: &K) -> String {
    o.meta().name.clone().unwrap_or_default()
}

impl Controller {
    /// The per-object maps, for `rkcm_runtime::tracked`.
    pub(crate) fn tracked_sizes(&self, out: &mut Vec<Size>) {
        out.push(Size::object("expectations", self.expectations.len()));
        out.push(Size::object("stale_guard", self.consistency.store().len()));
        out.push(Size::object("status_pacing", self.pacer.len()));
    }

    async fn sync_inner(&self, key: &str) -> Result<(), Error> {
        self.consistency
            .ensure_caught_up(key, &[&self.pods, &self.claims, &self.sets])
            .map_err(|source| Error::StaleCache {
                key: key.to_string(),
                source,
            })?;
        let cached = self.sets.store().get(key);
        let satisfied = cached.is_none() || self.expectations.satisfied_expectations(key);
        match plan::begin(cached.as_deref(), satisfied) {
            Begin::Forget => {
                rkcm_runtime::explain::decisions::note_gone();
                tracing::debug!(
                    controller = crate::config::NAME,
                    key,
                    "statefulset has been deleted"
                );
                self.expectations.delete_expectations(key);
                self.consistency.clear(key, None);
                self.pacer.forget(key);
                Ok(())
            }
            Begin::Wait {
                reason,
                requeue_after,
            } => {
                match &reason {
                    Waiting::InvalidSelector(error) => {
                        tracing::warn!(controller = crate::config::NAME, key, %error, "statefulset has an invalid label selector");
                    }
                    reason => {
                        tracing::debug!(
                            controller = crate::config::NAME,
                            key,
                            ?reason,
                            "statefulset sync waits"
                        );
                    }
                }
                if let Some(delay) = requeue_after {
                    self.queue.add_after(key.to_string(), delay);
                }
                Ok(())
            }
            Begin::Sync(set, selector) => self.sync_set(key, set, &selector).await,
        }
    }

    /// Adopt, choose revisions, plan, execute, write status, truncate history.
    async fn sync_set(
        &self,
        key: &str,
        set: &StatefulSet,
        selector: &Selector,
    ) -> Result<(), Error> {
        let mut revisions = self.adopt_orphan_revisions(key, set, selector).await?;
        let (pods, claims) = self.claim_pods(key, set, selector).await?;

        sort_controller_revisions(&mut revisions);
        let mut collision_count = set
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let choice = revision::choose_update(
            set,
            &revisions,
            collision_count,
            self.cfg.semantic_revision_comparison,
        )
        .map_err(|message| Error::RevisionData {
            key: key.to_string(),
            message,
        })?;
        let update_revision = self
            .write_update_revision(key, set, choice, &mut collision_count)
            .await?;
        let current_revision = revision::current_revision(set, &revisions, &update_revision);
        let data_err = |message| Error::RevisionData {
            key: key.to_string(),
            message,
        };
        let current_set = revision::apply_revision(set, &current_revision).map_err(data_err)?;
        let update_set = revision::apply_revision(set, &update_revision).map_err(data_err)?;
        let current_name = name_of(&*current_revision);
        let update_name = name_of(&*update_revision);
        let ctx = Ctx {
            key,
            set,
            claims: &claims,
            update_revision: &update_name,
        };
        let history =
            || self.truncate_history(key, set, &revisions, &pods, &current_name, &update_name);
        let now = self.clock.wall();
        let nodes = self.nodes_of(&pods);
        let plan = plan::plan(&Snapshot {
            set,
            current_set: &current_set,
            update_set: &update_set,
            current_revision: &current_name,
            update_revision: &update_name,
            collision_count,
            pods: &pods,
            claims: &claims,
            now,
            max_unavailable_gate: self.cfg.max_unavailable,
            recovery: Recovery {
                default_on: self.cfg.recover_stuck_rollout,
                after: self.cfg.recover_stuck_after,
                nodes: &nodes,
            },
        });
        if let Some(message) = plan.unknown_strategy {
            // Upstream `updateStatefulSet` with gate `StatefulSetRecreateStrategy` off: an
            // event and an error before anything is written; history is still truncated.
            self.recorder.event(
                &object_reference(set),
                EventType::Warning,
                reasons::UNKNOWN_STRATEGY,
                &message,
            );
            if let Err(e) = history().await {
                tracing::debug!(controller = crate::NAME, key, error = %e, "truncating history failed");
            }
            return Err(Error::Spec {
                key: key.to_string(),
                message,
            });
        }
        if !plan.waiting.is_empty() {
            tracing::debug!(controller = crate::config::NAME, key, waiting = ?plan.waiting, "statefulset plan waits");
        }
        for wait in plan
            .waiting
            .iter()
            .filter(|_| rkcm_runtime::explain::decisions::recording())
        {
            // The variant names the wait, its fields the ordinals and numbers behind it.
            let text = format!("{wait:?}");
            let code = text.split([' ', '(']).next().unwrap_or_default();
            rkcm_runtime::explain::decisions::note_wait(code, &text);
        }
        let (result, update_deletions) = self.execute(&ctx, &update_set, &plan).await;

        let step = plan::status_step(set, &plan, update_deletions, &pods, now);
        let status_result = self.apply_status_step(&ctx, &step).await;
        if step.gauges {
            self.set_gauges(set, &plan);
        }
        // History, even after a failed sync.
        let history_result = history().await;
        self.requeue(key, step.requeue_after, &plan);
        let (result, status_error) = plan::outcome(result, status_result, history_result);
        if let Some(status_error) = status_error {
            tracing::debug!(controller = crate::config::NAME, key, %status_error, "status update failed after a failed sync");
        }
        result
    }

    /// Syncs `key` again when a ready pod becomes available (`requeue_after`) and when the
    /// stuck-rollout recovery is to judge a pod again: a stuck pod sends no event when its
    /// time is up, nor does a node that comes back.
    fn requeue(&self, key: &str, requeue_after: Option<Duration>, plan: &Plan) {
        if let Some(delay) = requeue_after {
            self.queue.add_after(key.to_string(), delay);
        }
        for wait in &plan.waiting {
            if let Waiting::RecoveryDue { after, .. }
            | Waiting::RecoveryNodeNotReady { recheck: after, .. } = wait
            {
                self.queue.add_after(key.to_string(), *after);
            }
        }
    }

    /// `adoptOrphanRevisions`: the set's and orphaned revisions its selector matches, as
    /// cached before the orphans are adopted.
    async fn adopt_orphan_revisions(
        &self,
        key: &str,
        set: &StatefulSet,
        selector: &Selector,
    ) -> Result<Vec<Arc<ControllerRevision>>, Error> {
        let namespace = set.metadata.namespace.clone().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let revisions = owned_or_orphan_revisions(
            &self.revisions.store().list_namespace(&namespace),
            &uid,
            |r| selector.matches(r.metadata.labels.as_ref()),
        );
        let orphans: Vec<_> = revisions
            .iter()
            .filter(|r| controller_of(&r.metadata).is_none())
            .cloned()
            .collect();
        if orphans.is_empty() {
            return Ok(revisions);
        }
        let claim_err = |source| Error::Claim {
            key: key.to_string(),
            what: "controller revisions",
            source,
        };
        let mut manager = ControllerRefManager::new(
            set,
            Api::<StatefulSet>::namespaced(self.client.clone(), &namespace),
            Api::<ControllerRevision>::namespaced(self.client.clone(), &namespace),
        )
        .map_err(claim_err)?;
        let outcome = manager.claim(&orphans, |_| true).await;
        if let Some(source) = outcome.errors.into_iter().next() {
            return Err(claim_err(source));
        }
        Ok(revisions)
    }

    /// `getPodsForStatefulSet`: adopt and release pods; the claimed pods and the cached
    /// claims of the namespace.
    async fn claim_pods(
        &self,
        key: &str,
        set: &StatefulSet,
        selector: &Selector,
    ) -> Result<(Vec<Arc<Pod>>, Claims), Error> {
        let namespace = set.metadata.namespace.clone().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let mut candidates = self.pods.store().by_index(INDEX_CONTROLLER_UID, &uid);
        candidates.extend(
            self.pods
                .store()
                .by_index(INDEX_ORPHANS_BY_NAMESPACE, &namespace),
        );
        let claim_err = |source| Error::Claim {
            key: key.to_string(),
            what: "pods",
            source,
        };
        let mut manager = ControllerRefManager::new(
            set,
            Api::<StatefulSet>::namespaced(self.client.clone(), &namespace),
            Api::<Pod>::namespaced(self.client.clone(), &namespace),
        )
        .map_err(claim_err)?;
        let outcome = manager
            .claim(&candidates, |p| {
                selector.matches(p.metadata.labels.as_ref()) && is_member_of(set, p)
            })
            .await;
        let claims = self.claims_of(&namespace);
        let ctx = Ctx {
            key,
            set,
            claims: &claims,
            update_revision: "",
        };
        // Children already owned come back as the cached objects themselves; only adopted
        // ones are new objects (written by the adoption patch).
        let cached: std::collections::HashSet<usize> =
            candidates.iter().map(|c| Arc::as_ptr(c).addr()).collect();
        for p in &outcome.claimed {
            if !cached.contains(&Arc::as_ptr(p).addr())
                && controller_of(&p.metadata).is_some_and(|r| r.uid == uid)
            {
                self.wrote(&ctx, &**p);
            }
        }
        let pods = outcome.into_result().map_err(claim_err)?;
        Ok((pods, claims))
    }

    /// The update revision [`revision::choose_update`] chose, written if it must be.
    async fn write_update_revision(
        &self,
        key: &str,
        set: &StatefulSet,
        choice: UpdateChoice,
        collision_count: &mut i32,
    ) -> Result<Arc<ControllerRevision>, Error> {
        Ok(match choice {
            UpdateChoice::Latest(r) => r,
            UpdateChoice::Rollback(r, number) => Arc::new(
                self.history
                    .update_controller_revision(&r, number)
                    .await
                    .map_err(|source| Error::Revision {
                        key: key.to_string(),
                        step: "updating",
                        source,
                    })?,
            ),
            UpdateChoice::Create(proposed) => Arc::new(
                self.history
                    .create_controller_revision(set, &proposed, collision_count)
                    .await
                    .map_err(|source| Error::Revision {
                        key: key.to_string(),
                        step: "creating",
                        source,
                    })?,
            ),
        })
    }

    /// Performs the [`StatusStep`]'s write.
    async fn apply_status_step(&self, ctx: &Ctx<'_>, step: &StatusStep) -> Result<(), Error> {
        match &step.write {
            StatusWrite::Fail(message) => Err(Error::Spec {
                key: ctx.key.to_string(),
                message: message.clone(),
            }),
            StatusWrite::Skip => Ok(()),
            StatusWrite::Paced | StatusWrite::Now => {
                if step.write == StatusWrite::Paced
                    && let Some(wait) = self.pacer.hold(ctx.key, self.clock.now())
                {
                    // Counts written moments ago: the next write counts whatever else
                    // arrives meanwhile.
                    self.queue.add_after(ctx.key.to_string(), wait);
                    return Ok(());
                }
                let written = self.write_status(ctx, step.status.clone()).await;
                if written.is_ok() {
                    self.pacer.wrote(ctx.key, self.clock.now());
                }
                written
            }
        }
    }

    /// `UpdateStatefulSetStatus`: PUT the whole status with the cached resourceVersion,
    /// retrying conflicts on a fresh cache copy.
    async fn write_status(&self, ctx: &Ctx<'_>, status: StatefulSetStatus) -> Result<(), Error> {
        let mut current = ctx.set.clone();
        // retry.DefaultBackoff, as the pod updates above: 10 ms, five times longer each try.
        let mut delay = Duration::from_millis(10);
        for attempt in 1..=CONFLICT_STEPS {
            current.status = Some(status.clone());
            // Only the new resourceVersion is read from the answer.
            match rkcm_runtime::api::write::replace_status(&self.client, &current).await {
                Ok(updated) => {
                    self.wrote_version::<StatefulSet>(ctx, updated.resource_version.as_deref());
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.is_conflict() && attempt < CONFLICT_STEPS => {
                    tracing::debug!(
                        controller = crate::config::NAME,
                        key = ctx.key,
                        "status update conflict, retrying on a fresh copy"
                    );
                    tokio::time::sleep(delay).await;
                    delay *= 5;
                    if let Some(fresh) = self.sets.store().get(ctx.key) {
                        current = (*fresh).clone();
                    }
                }
                Err(e) => {
                    return Err(Error::UpdateStatus(StatusError::new(
                        "statefulset",
                        ctx.key.to_string(),
                        e,
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether each node the pods are bound to is reachable ([`recovery::node_reachable`]).
    fn nodes_of(&self, pods: &[Arc<Pod>]) -> recovery::Nodes {
        pods.iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .filter(|n| !n.is_empty())
            .map(|n| {
                let reachable = self
                    .nodes
                    .store()
                    .get(&n)
                    .is_some_and(|node| recovery::node_reachable(&node));
                (n, reachable)
            })
            .collect()
    }

    fn claims_of(&self, namespace: &str) -> Claims {
        self.claims
            .store()
            .list_namespace(namespace)
            .into_iter()
            .map(|c| (name_of(&*c), c))
            .collect()
    }

    fn set_gauges(&self, set: &StatefulSet, plan: &Plan) {
        let Some(max) = plan.max_unavailable else {
            return;
        };
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        let policy = Some(&set.spec)
            .and_then(|s| s.pod_management_policy.as_deref())
            .unwrap_or(crate::consts::policy::ORDERED_READY);
        crate::metrics::set_max_unavailable(namespace, set_name(set), policy, max);
        if let Some(u) = plan.unavailable {
            crate::metrics::set_unavailable_replicas(namespace, set_name(set), policy, u);
        }
    }
}

impl Reconcile for Controller {
    type Error = Error;

    /// Upstream requeues failures for ever with backoff; a terminating namespace is dropped.
    fn retry_policy() -> RetryPolicy<Error> {
        RetryPolicy::default()
            .give_up_on(Error::is_namespace_terminating)
            .quiet_on(Error::is_expected_requeue)
    }

    /// One sync of the StatefulSet `key`.
    async fn sync(&self, key: String) -> Result<(), Error> {
        self.sync_inner(&key).await
    }
}
