//! The sync: caches -> claim -> [`plan`](crate::plan) -> execute its writes -> status (upstream
//! `pkg/controller/deployment/sync.go`).
//!
//! Mirrors `syncDeployment` and `getReplicaSetsForDeployment` of upstream
//! `deployment_controller.go`, and the I/O halves of `sync.go`, `rolling.go`, `recreate.go`,
//! `rollback.go` and `progress.go`. Every decision (the path, the revision bookkeeping, the
//! new ReplicaSet, the rolling or Recreate step, scaling, rollback, cleanup, status and the
//! deadline re-check) is a pure function of `plan`; this file reads the caches, performs the
//! writes those functions describe, and feeds what the API returns into the next decision.
//!
//! One sync works on a private copy of the Deployment (`d`) that the steps replace as upstream
//! mutates its deep copy: the revision annotation, conditions and `collisionCount` set by an
//! early step are seen by the later ones and travel with every status write. Every object
//! written carries the resourceVersion it was read with. Unlike upstream, the sync keeps
//! the objects the API returns (the Deployment's new resourceVersion after a status write,
//! ReplicaSets after an update), so its own writes do not make its later writes conflict.

use rkcm_runtime::error::StatusError;
use rkcm_runtime::tracked::Size;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::{INDEX_CONTROLLER_UID, Store};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::error::{error_message, is_namespace_terminating};
use rkcm_runtime::events::EventRecorder;
use rkcm_runtime::keys::split_key;
use rkcm_runtime::queue::RetryPolicy;
use rkcm_runtime::queue::WorkQueue;
use rkcm_runtime::queue::pacing::StatusPacer;
use rkcm_runtime::workload::consistency::{GroupResource, StaleGuard};
use rkcm_runtime::workload::controller_ref::ControllerRefManager;
use rkcm_runtime::workload::selector::Selector;

use crate::config::Config;
use crate::error::Error;
use crate::model::{self, Rs};
use crate::plan::{
    self, NewReplicaSet, OldScaleDown, RecreateStep, RevisionStep, RollingStep, Rollout, Route,
    ScaleOp, ScalePlan, Snapshot, StatusStep,
};
use crate::status::{ProgressCheck, Status};

/// Everything the handlers and workers share.
pub(crate) struct Controller {
    pub(crate) client: kube::Client,
    pub(crate) deployments: Store<Deployment>,
    pub(crate) replica_sets: Store<ReplicaSet>,
    pub(crate) pods: Store<Pod>,
    pub(crate) recorder: EventRecorder,
    pub(crate) queue: WorkQueue<String>,
    /// Recreate Deployments with a pod-deletion check scheduled but not yet started: more
    /// deletions meanwhile need no check of their own.
    pub(crate) pending_pod_checks: Mutex<HashSet<String>>,
    /// Spaces out one Deployment's routine status writes ([`rkcm_runtime::queue::pacing`]).
    pub(crate) pacer: StatusPacer,
    pub(crate) clock: SharedClock,
    /// The stale-cache guard over the Deployment and ReplicaSet caches (`cfg.stale_cache_guard`).
    pub(crate) guard: StaleGuard,
    pub(crate) cfg: Config,
}

impl Controller {
    /// The per-object maps, for `rkcm_runtime::tracked`.
    pub(crate) fn tracked_sizes(&self, out: &mut Vec<Size>) {
        let checks = self
            .pending_pod_checks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        out.push(Size::object("pending_pod_checks", checks));
        out.push(Size::object("status_pacing", self.pacer.len()));
        out.push(Size::object("stale_guard", self.guard.store().len()));
    }

    async fn sync_inner(&self, key: &str) -> Result<(), Error> {
        let Some(cached) = self.deployments.get(key) else {
            rkcm_runtime::explain::decisions::note_gone();
            tracing::debug!(
                controller = crate::config::NAME,
                key,
                "deployment has been deleted"
            );
            self.pacer.forget(key);
            self.guard.clear(key, None);
            return Ok(());
        };
        self.guard
            .ensure_caught_up(key, &[&self.deployments, &self.replica_sets])
            .map_err(|source| Error::StaleCache {
                key: key.to_owned(),
                source,
            })?;
        let (namespace, _) = split_key(key);
        let mut sync = SyncPass {
            c: self,
            key,
            namespace: namespace.unwrap_or_default().to_owned(),
            d: (*cached).clone(),
            rss: Vec::new(),
        };
        let result = sync.run().await;
        if rkcm_runtime::explain::decisions::recording() {
            // The last decision's waits, in explain's reason codes, over what this pass saw.
            let e = crate::explain::explain_with(
                &sync.d,
                &sync.rss,
                self.cfg.rollback_on_progress_deadline,
                self.clock.wall(),
            );
            rkcm_runtime::explain::decisions::note_waits(&e.waiting_on);
        }
        result
    }

    /// Pods controlled by each of `rss`, by ReplicaSet UID (`getPodMapForDeployment`).
    pub(crate) fn pods_by_rs(&self, rss: &[Rs]) -> HashMap<String, Vec<Arc<Pod>>> {
        rss.iter()
            .map(|rs| {
                let uid = model::uid(rs);
                let pods = self
                    .pods
                    .by_index(INDEX_CONTROLLER_UID, uid)
                    .into_iter()
                    .filter(|p| p.metadata.namespace == rs.metadata.namespace)
                    .collect();
                (uid.to_owned(), pods)
            })
            .collect()
    }
}

impl Reconcile for Controller {
    type Error = Error;

    /// Upstream's `handleErr`: forget on a terminating namespace; otherwise back off, up to
    /// `MAX_RETRIES` times in a row, then drop the key until its next event.
    fn retry_policy() -> RetryPolicy<Error> {
        RetryPolicy::default()
            .max_retries(crate::consts::MAX_RETRIES)
            .give_up_on(Error::is_namespace_terminating)
            .quiet_on(Error::is_expected_requeue)
    }

    /// One sync of the Deployment `key` (`syncDeployment`).
    async fn sync(&self, key: String) -> Result<(), Error> {
        self.sync_inner(&key).await
    }
}

/// The state of one sync of one Deployment.
struct SyncPass<'a> {
    c: &'a Controller,
    key: &'a str,
    namespace: String,
    /// The working copy (upstream's deep copy), mutated by the steps.
    d: Deployment,
    /// The claimed ReplicaSets, replaced by what the API returns when this sync writes one.
    rss: Vec<Rs>,
}

impl SyncPass<'_> {
    fn now(&self) -> jiff::Timestamp {
        self.c.clock.wall()
    }

    fn rs_api(&self) -> Api<ReplicaSet> {
        Api::namespaced(self.c.client.clone(), &self.namespace)
    }

    fn deployment_api(&self) -> Api<Deployment> {
        Api::namespaced(self.c.client.clone(), &self.namespace)
    }

    fn name(&self) -> &str {
        model::name_of(&self.d.metadata)
    }

    fn event(&self, event: &plan::Event) {
        self.c
            .recorder
            .event_for(&self.d, event.type_, event.reason, &event.message);
    }

    fn status(&self) -> Status {
        Status::of(&self.d)
    }

    fn set_status(&mut self, status: &Status) {
        self.d.status = Some(status.to_api());
    }

    /// The freshest copy of a ReplicaSet this sync knows.
    fn latest(&self, rs: &Rs) -> Rs {
        let uid = model::uid(rs);
        self.rss
            .iter()
            .find(|r| model::uid(r) == uid)
            .cloned()
            .unwrap_or_else(|| rs.clone())
    }

    fn refreshed(&self, rss: &[Rs]) -> Vec<Rs> {
        rss.iter().map(|rs| self.latest(rs)).collect()
    }

    fn remember(&mut self, rs: ReplicaSet) -> Rs {
        let rs = Arc::new(rs);
        match self
            .rss
            .iter_mut()
            .find(|r| model::uid(r) == model::uid(&rs))
        {
            Some(slot) => *slot = rs.clone(),
            None => self.rss.push(rs.clone()),
        }
        rs
    }

    /// `[old…, new]`, freshest copies.
    fn all(&self, new: Option<&Rs>, old: &[Rs]) -> Vec<Rs> {
        let mut all = self.refreshed(old);
        all.extend(new.map(|rs| self.latest(rs)));
        all
    }

    // ---- writes -----------------------------------------------------------------------

    /// `PUT deployments/status` with the working copy; keeps the new resourceVersion.
    async fn write_status(&mut self) -> Result<(), Error> {
        let status = self.status();
        tracing::debug!(
            controller = crate::config::NAME,
            key = self.key,
            replicas = status.replicas,
            updated = status.updated_replicas,
            ready = status.ready_replicas,
            available = status.available_replicas,
            unavailable = status.unavailable_replicas,
            observed_generation = status.observed_generation,
            "updating deployment status"
        );
        // Only the new resourceVersion is read from the answer.
        let written = rkcm_runtime::api::write::replace_status(&self.c.client, &self.d)
            .await
            .map_err(|source| StatusError::new("deployment", self.key.to_owned(), source))?;
        self.d.metadata.resource_version = written.resource_version;
        self.wrote::<Deployment>(self.d.metadata.resource_version.as_deref());
        Ok(())
    }

    /// Records a write of this sync for the stale-cache guard.
    fn wrote<K: kube::Resource<DynamicType = ()>>(&self, rv: Option<&str>) {
        let uid = self.d.metadata.uid.as_deref().unwrap_or_default();
        self.c
            .guard
            .wrote(self.key, uid, GroupResource::of::<K>(), rv);
    }

    /// `PUT deployments` with the working copy (rollback only).
    async fn write_deployment(&mut self) -> Result<(), Error> {
        let name = self.name().to_owned();
        let written = self
            .deployment_api()
            .replace(&name, &PostParams::default(), &self.d)
            .await
            .map_err(|source| Error::UpdateDeployment {
                key: self.key.to_owned(),
                source,
            })?;
        self.d.metadata.resource_version = written.metadata.resource_version;
        self.wrote::<Deployment>(self.d.metadata.resource_version.as_deref());
        Ok(())
    }

    async fn put_rs(&mut self, rs: ReplicaSet) -> Result<Rs, Error> {
        let name = model::rs_name(&rs).to_owned();
        let updated = match self
            .rs_api()
            .replace(&name, &PostParams::default(), &rs)
            .await
        {
            Ok(updated) => updated,
            Err(source) => {
                if self.c.guard.is_enabled() && outcome_unknown_or_stale(&source) {
                    self.learn_rs_version(&name).await;
                }
                return Err(Error::UpdateReplicaSet {
                    key: self.key.to_owned(),
                    replica_set: name,
                    source,
                });
            }
        };
        self.wrote::<ReplicaSet>(updated.metadata.resource_version.as_deref());
        Ok(self.remember(updated))
    }

    /// After a ReplicaSet write that may have landed unseen (a 5xx or a broken connection)
    /// or that met a newer version than the cache's (a conflict), reads the ReplicaSet
    /// live and hands its version to the stale-cache guard: the next syncs wait until the
    /// cache shows it, instead of sizing ReplicaSets on a cache that lacks the controller's
    /// own write (upstream does not: `rkcm-sim --controller deployment-rollback --seed 66`
    /// found a scale-up answered 504 after it landed, and the next sync created a new
    /// ReplicaSet past `replicas + maxSurge` on a cache ten seconds behind). Best effort: a
    /// failed read leaves the guard as it was. Part of the stale-cache guard: not done with
    /// `--rkcm-deployment-stale-cache-guard=false`.
    async fn learn_rs_version(&self, name: &str) {
        match self.rs_api().get_metadata_opt(name).await {
            Ok(Some(live)) => self.wrote::<ReplicaSet>(live.metadata.resource_version.as_deref()),
            Ok(None) => {}
            Err(error) => {
                tracing::debug!(controller = crate::config::NAME, key = self.key, replica_set = name, %error, "reading a replica set after a failed write failed")
            }
        }
    }

    /// Writes the [`plan::scale_write`] for the freshest copy of `rs`; true when the size
    /// changed.
    async fn scale_rs(&mut self, rs: &Rs, to: i32, force: bool) -> Result<bool, Error> {
        let rs = self.latest(rs);
        let Some(write) = plan::scale_write(&self.d, &rs, to, force) else {
            return Ok(false);
        };
        self.put_rs(write.replica_set).await?;
        if let Some(event) = &write.event {
            self.event(event);
        }
        Ok(write.event.is_some())
    }

    async fn scale_op(&mut self, op: &ScaleOp, force: bool) -> Result<bool, Error> {
        let Some(rs) = self.rss.iter().find(|r| model::uid(r) == op.uid).cloned() else {
            return Ok(false);
        };
        self.scale_rs(&rs, op.to, force).await
    }

    // ---- the sync -----------------------------------------------------------------------

    async fn run(&mut self) -> Result<(), Error> {
        let raw_selector = self.d.spec.selector.clone();
        let selector =
            Selector::from_label_selector(&raw_selector).map_err(|e| Error::InvalidSelector {
                key: self.key.to_owned(),
                message: e.to_string(),
            })?;
        let route = plan::route(&self.d, selector.is_empty(), self.now());
        if let Route::SelectingAll { event, status } = route {
            self.event(&event);
            if let Some(status) = status {
                self.set_status(&status);
                if let Err(error) = self.write_status().await {
                    tracing::debug!(controller = crate::config::NAME, key = self.key, %error, "updating observedGeneration failed");
                }
            }
            return Ok(());
        }
        self.rss = self.claim(&selector).await?;
        match route {
            Route::SelectingAll { .. } => Ok(()),
            Route::StatusOnly => {
                let (new, old) = self.new_and_old(false).await?;
                self.sync_status(new.as_ref(), &old, false).await
            }
            Route::Paused { paused_status } => {
                self.record_status(paused_status).await?;
                self.sync_scaling().await
            }
            Route::Rollback { paused_status } => {
                self.record_status(paused_status).await?;
                self.rollback().await
            }
            Route::Rollout { paused_status } => {
                self.record_status(paused_status).await?;
                let (new, old) = self.new_and_old(false).await?;
                if self.rollback_on_deadline(new.as_ref(), &old).await? {
                    return Ok(());
                }
                let rollout = plan::rollout(&self.d, new.as_ref(), &old).map_err(|message| {
                    Error::Strategy {
                        key: self.key.to_owned(),
                        message,
                    }
                })?;
                match rollout {
                    Rollout::Scale => self.sync_scaling().await,
                    Rollout::Recreate => self.rollout_recreate().await,
                    Rollout::Rolling => self.rollout_rolling().await,
                }
            }
        }
    }

    /// `getReplicaSetsForDeployment`: every ReplicaSet of the namespace, claimed with the
    /// Deployment's selector (adopting after a fresh GET, releasing, with UID preconditions).
    async fn claim(&self, selector: &Selector) -> Result<Vec<Rs>, Error> {
        let claim_err = |source| Error::Claim {
            key: self.key.to_owned(),
            source,
        };
        // Orphans of the namespace and the ReplicaSets this Deployment controls: a sync is
        // O(its own ReplicaSets), not O(every ReplicaSet of the namespace).
        let uid = self.d.metadata.uid.as_deref().unwrap_or_default();
        let candidates = self.c.replica_sets.claimable(&self.namespace, uid);
        let mut manager = ControllerRefManager::<Deployment, ReplicaSet>::new(
            &self.d,
            self.deployment_api(),
            self.rs_api(),
        )
        .map_err(claim_err)?;
        manager
            .claim(&candidates, |rs| {
                selector.matches(rs.metadata.labels.as_ref())
            })
            .await
            .into_result()
            .map_err(claim_err)
    }

    async fn record_status(&mut self, status: Option<Status>) -> Result<(), Error> {
        if let Some(status) = status {
            self.set_status(&status);
            self.write_status().await?;
        }
        Ok(())
    }

    fn strategy_error(&self, message: String) -> Error {
        Error::Strategy {
            key: self.key.to_owned(),
            message,
        }
    }

    /// `getAllReplicaSetsAndSyncRevision`: the new ReplicaSet (created when `create` and
    /// missing) and all old ones, after the [`plan::sync_revision`] write.
    async fn new_and_old(&mut self, create: bool) -> Result<(Option<Rs>, Vec<Rs>), Error> {
        let (new, old) = model::split(&self.d, &self.rss);
        let step = plan::sync_revision(&self.d, new.as_ref(), &old, create, self.now())
            .map_err(|message| self.strategy_error(message))?;
        match step {
            RevisionStep::Nothing => Ok((new, old)),
            RevisionStep::UpdateNewRs(rs) => {
                tracing::debug!(
                    controller = crate::config::NAME,
                    key = self.key,
                    replica_set = model::rs_name(&rs),
                    "syncing new replica set annotations"
                );
                let updated = self.put_rs(*rs).await?;
                Ok((Some(updated), old))
            }
            RevisionStep::Record(d) => {
                self.d = *d;
                self.write_status().await?;
                Ok((new, old))
            }
            RevisionStep::Create(plan) => {
                let created = self.create_new_rs(&plan).await?;
                Ok((Some(created), old))
            }
        }
    }

    /// Creates the planned new ReplicaSet; a taken name is this Deployment's current
    /// ReplicaSet (slow cache) or a hash collision.
    async fn create_new_rs(&mut self, plan: &NewReplicaSet) -> Result<Rs, Error> {
        let rs_name = plan.name.clone();
        let (created, fresh) = match self
            .rs_api()
            .create(&PostParams::default(), &plan.replica_set)
            .await
        {
            Ok(created) => {
                self.wrote::<ReplicaSet>(created.metadata.resource_version.as_deref());
                (self.remember(created), true)
            }
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                let existing = self
                    .c
                    .replica_sets
                    .get(&format!("{}/{rs_name}", self.namespace))
                    .ok_or_else(|| Error::NotCached {
                        key: self.key.to_owned(),
                        replica_set: rs_name.clone(),
                    })?;
                if !plan::is_current_replica_set(&self.d, &existing) {
                    return Err(self.hash_collision(rs_name, kube::Error::Api(s)).await);
                }
                (self.remember((*existing).clone()), false)
            }
            Err(source) if is_namespace_terminating(&source) => {
                return Err(Error::CreateReplicaSet {
                    key: self.key.to_owned(),
                    replica_set: rs_name,
                    source,
                });
            }
            Err(source) => {
                let failed =
                    plan::create_failed(&self.d, &rs_name, &error_message(&source), self.now());
                if let Some(status) = failed.status {
                    self.set_status(&status);
                    // The create failure is the error worth reporting.
                    if let Err(error) = self.write_status().await {
                        tracing::debug!(controller = crate::config::NAME, key = self.key, %error, "recording the create failure in status failed");
                    }
                }
                self.event(&failed.event);
                return Err(Error::CreateReplicaSet {
                    key: self.key.to_owned(),
                    replica_set: rs_name,
                    source,
                });
            }
        };
        let after = plan::after_create(&self.d, plan, fresh, self.now());
        if let Some(event) = &after.event {
            self.event(event);
        }
        if let Some(d) = after.record {
            self.d = *d;
            self.write_status().await?;
        }
        Ok(created)
    }

    /// Raise `collisionCount` (best effort) so the next sync hashes to another name, and fail
    /// this one.
    async fn hash_collision(&mut self, replica_set: String, source: kube::Error) -> Error {
        let before = self.status().collision_count.unwrap_or(0);
        let status = plan::collision(&self.d);
        self.set_status(&status);
        match self.write_status().await {
            Ok(()) => tracing::info!(
                controller = crate::config::NAME,
                key = self.key,
                replica_set = %replica_set,
                old_collision_count = before,
                new_collision_count = status.collision_count.unwrap_or(0),
                "found a hash collision for deployment; bumping collisionCount to resolve it"
            ),
            Err(error) => {
                tracing::debug!(controller = crate::config::NAME, key = self.key, %error, "bumping collisionCount failed")
            }
        }
        Error::HashCollision {
            key: self.key.to_owned(),
            replica_set,
            source,
        }
    }

    // ---- paths ------------------------------------------------------------------------

    /// `sync`: paused Deployments and scaling events: proportional scaling, history cleanup
    /// while paused, status without progress evaluation.
    async fn sync_scaling(&mut self) -> Result<(), Error> {
        let (new, old) = self.new_and_old(false).await?;
        match plan::scale(&self.d, new.as_ref(), &old) {
            ScalePlan::Nothing => {}
            ScalePlan::One(op) => {
                self.scale_op(&op, false).await?;
            }
            ScalePlan::Annotations(op) => {
                self.scale_op(&op, true).await?;
            }
            ScalePlan::OldToZero(ops) => {
                for op in &ops {
                    self.scale_op(op, false).await?;
                }
            }
            ScalePlan::Proportional(ops) => {
                for op in &ops {
                    self.scale_op(op, true).await?;
                }
            }
        }
        // Judged on the copies from before the scaling, as upstream's `sync`
        // (`deployment/sync.go`) does: a ReplicaSet scaled to zero just now goes in a later sync.
        let cleanup = plan::paused_cleanup(&self.d, &old);
        self.cleanup(&cleanup).await?;
        self.sync_status(new.as_ref(), &old, false).await
    }

    /// `rolloutRolling`: one [`plan::rolling_step`].
    async fn rollout_rolling(&mut self) -> Result<(), Error> {
        let (new, old) = self.new_and_old(true).await?;
        let Some(new) = new else {
            return Ok(());
        };
        // The stale-cache guard also reads each ReplicaSet's available count from the pods
        // the cache shows ([`plan::reconcile_old_seen`]); off, the statuses alone.
        let guarded = self.c.guard.is_enabled();
        let pods = if guarded {
            self.c.pods_by_rs(&self.rss)
        } else {
            HashMap::new()
        };
        let snap = Snapshot {
            deployment: &self.d,
            new: Some(&new),
            old: &old,
            pods: &pods,
            pods_seen_at: guarded.then(|| self.c.clock.wall()),
        };
        let step =
            plan::rolling_step(&snap, &new).map_err(|message| self.strategy_error(message))?;
        match step {
            RollingStep::ScaleNew(op) => {
                self.scale_op(&op, false).await?;
            }
            RollingStep::ScaleDownOld { step, otherwise } => {
                if !self.scale_down_old(step).await? {
                    self.cleanup(&otherwise).await?;
                }
            }
            RollingStep::Cleanup(cleanup) => self.cleanup(&cleanup).await?,
        }
        self.sync_status(Some(&new), &old, true).await
    }

    /// Runs a [`reconcile_old`](plan::reconcile_old) step. Failures count as "nothing
    /// scaled", as upstream swallows them, except a conflict, which fails the sync.
    ///
    /// A conflict means the cached ReplicaSet is older than the server's (its own controller
    /// wrote status meanwhile), and every sync on that cache meets it again until the cache
    /// catches up. Upstream goes on to the status, whose progress re-check within a second of
    /// the deadline requeues at the queue's base delay after a successful sync: behind a watch
    /// delay of seconds that is a write every 5 ms (the simulator's `WriteRetryStorm`,
    /// `--controller deployment-rollback --seed 151`). Failing the sync backs off instead,
    /// and the ReplicaSet's event brings the next sync as soon as the cache has it. Part of
    /// the stale-cache guard: with `--rkcm-deployment-stale-cache-guard=false` a conflict is
    /// swallowed too, as upstream.
    async fn scale_down_old(&mut self, step: OldScaleDown) -> Result<bool, Error> {
        for op in &step.ops {
            if let Err(error) = self.scale_op(op, false).await {
                if error.is_expected_requeue() {
                    if self.c.guard.is_enabled() {
                        return Err(error);
                    }
                    tracing::debug!(controller = crate::config::NAME, key = self.key, %error, "scaling down old replica sets deferred");
                    return Ok(false);
                }
                tracing::warn!(controller = crate::config::NAME, key = self.key, %error, "scaling down old replica sets failed");
                return Ok(false);
            }
        }
        if let Some(message) = step.invalid {
            // A ReplicaSet whose status reports more available replicas than it specifies
            // (a lagging status during a scale-down): upstream returns "nothing scaled" and
            // moves on without an error (`rolling.go`); the next sync sees a fresh status.
            tracing::debug!(
                controller = crate::config::NAME,
                key = self.key,
                message,
                "scaling down old replica sets stopped"
            );
            return Ok(false);
        }
        Ok(!step.ops.is_empty())
    }

    /// `rolloutRecreate`: [`plan::recreate_step`]s until one leaves the rest to later syncs.
    async fn rollout_recreate(&mut self) -> Result<(), Error> {
        let (mut new, mut old) = self.new_and_old(false).await?;
        // At most: create, then size the new ReplicaSet.
        for _ in 0..2 {
            let pods = self.c.pods_by_rs(&self.rss);
            let snap = Snapshot {
                deployment: &self.d,
                new: new.as_ref(),
                old: &old,
                pods: &pods,
                pods_seen_at: None,
            };
            match plan::recreate_step(&snap) {
                RecreateStep::ScaleDownOld(ops) => {
                    for op in &ops {
                        self.scale_op(op, false).await?;
                    }
                }
                RecreateStep::WaitForOldPods => {}
                RecreateStep::CreateNew => {
                    (new, old) = self.new_and_old(true).await?;
                    continue;
                }
                RecreateStep::ScaleNew { op, cleanup } => {
                    if let Some(op) = op {
                        self.scale_op(&op, false).await?;
                    }
                    self.cleanup(&cleanup).await?;
                }
            }
            break;
        }
        self.sync_status(new.as_ref(), &old, true).await
    }

    /// `rollback`: write the [`plan::rollback`] working copy; the rollout itself happens on
    /// later syncs.
    async fn rollback(&mut self) -> Result<(), Error> {
        let (new, old) = self.new_and_old(true).await?;
        let mut all = old;
        all.extend(new);
        let rollback = plan::rollback(&self.d, &all);
        if !rollback.rolled_back {
            self.event(&rollback.event);
        }
        self.d = *rollback.deployment;
        self.write_deployment().await?;
        if rollback.rolled_back {
            self.event(&rollback.event);
        }
        Ok(())
    }

    /// rkcm's opt-in remedy ([`plan::deadline`]): when the rollout passed its progress
    /// deadline, one `PUT deployments` back to the previous revision, its event, then the
    /// condition's message (best effort). True when it rolled back: the rollout itself
    /// happens on later syncs.
    async fn rollback_on_deadline(&mut self, new: Option<&Rs>, old: &[Rs]) -> Result<bool, Error> {
        let decision = plan::deadline::deadline_rollback(
            &self.d,
            new,
            old,
            self.c.cfg.rollback_on_progress_deadline,
            self.now(),
        );
        let rollback = match decision {
            plan::deadline::DeadlineRollback::Roll(rollback) => rollback,
            plan::deadline::DeadlineRollback::TooEarly { after, .. } => {
                self.c.queue.add_after(self.key.to_owned(), after);
                return Ok(false);
            }
            _ => return Ok(false),
        };
        let name = self.name().to_owned();
        let params = PostParams {
            field_manager: Some(crate::consts::remedy::FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        let written = self
            .deployment_api()
            .replace(&name, &params, &rollback.deployment)
            .await
            .map_err(|source| Error::RollbackOnDeadline {
                key: self.key.to_owned(),
                from: rollback.from,
                to: rollback.to,
                source,
            })?;
        self.wrote::<Deployment>(written.metadata.resource_version.as_deref());
        tracing::info!(
            controller = crate::config::NAME,
            key = self.key,
            from = rollback.from,
            to = rollback.to,
            replica_set = %rollback.target,
            "rolled back a deployment past its progress deadline"
        );
        self.d = written;
        self.event(&rollback.event);
        self.set_status(&rollback.status);
        if let Err(error) = self.write_status().await {
            tracing::debug!(controller = crate::config::NAME, key = self.key, %error, "recording the rollback in the condition failed");
        }
        Ok(true)
    }

    /// [`plan::status_step`] over the freshest copies: write the status, or schedule the
    /// progress-deadline re-check.
    async fn sync_status(
        &mut self,
        new: Option<&Rs>,
        old: &[Rs],
        rollout: bool,
    ) -> Result<(), Error> {
        let all = self.all(new, old);
        let new = new.map(|rs| self.latest(rs));
        let step = plan::status_step(
            &self.d,
            &all,
            new.as_ref(),
            self.c.cfg.terminating_replicas,
            rollout,
            self.now(),
        );
        match step {
            StatusStep::Unchanged | StatusStep::Recheck(ProgressCheck::None) => Ok(()),
            StatusStep::Recheck(ProgressCheck::Now) => {
                tracing::debug!(
                    controller = crate::config::NAME,
                    key = self.key,
                    "queueing deployment for a progress check now"
                );
                self.c.queue.add_rate_limited(self.key.to_owned());
                Ok(())
            }
            StatusStep::Recheck(ProgressCheck::After(after)) => {
                tracing::debug!(
                    controller = crate::config::NAME,
                    key = self.key,
                    after_s = after.as_secs(),
                    "queueing deployment for a progress check"
                );
                self.c.queue.add_after(self.key.to_owned(), after);
                Ok(())
            }
            StatusStep::Write(status) => {
                let now = self.c.clock.now();
                let hold = if Status::of(&self.d).only_terminating_moved(&status) {
                    self.c.pacer.hold_slow(self.key, now)
                } else {
                    self.c.pacer.hold(self.key, now)
                };
                if let Some(wait) = hold {
                    // Written moments ago: the next write counts whatever else arrives
                    // meanwhile.
                    self.c.queue.add_after(self.key.to_owned(), wait);
                    return Ok(());
                }
                self.set_status(&status);
                self.write_status().await?;
                self.c.pacer.wrote(self.key, self.c.clock.now());
                Ok(())
            }
        }
    }

    /// `cleanupDeployment`: delete the [`plan::cleanup`] candidates. UID and resourceVersion
    /// preconditions (upstream sends none) make sure only the version judged empty is
    /// deleted: never one re-created under the same name, nor one scaled up since the cache
    /// saw it.
    async fn cleanup(&mut self, candidates: &[Rs]) -> Result<(), Error> {
        for rs in candidates {
            let name = model::rs_name(rs).to_owned();
            tracing::debug!(controller = crate::config::NAME, key = self.key, replica_set = %name, "deleting old replica set");
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: rs.metadata.uid.clone(),
                    resource_version: rs.metadata.resource_version.clone(),
                }),
                ..DeleteParams::default()
            };
            match self.rs_api().delete(&name, &params).await {
                Ok(_) => {
                    let uid = model::uid(rs).to_owned();
                    self.rss.retain(|r| model::uid(r) != uid);
                }
                // Gone already, or changed since it was judged: the next sync looks again.
                Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {}
                Err(source) => {
                    return Err(Error::DeleteReplicaSet {
                        key: self.key.to_owned(),
                        replica_set: name,
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

/// Whether a failed write may have landed (a server error, a broken connection: the
/// answer is lost, not the write) or found the object newer than the copy it was made from
/// (a conflict).
fn outcome_unknown_or_stale(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(s) => s.code == 409 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}
