//! The sync: cache -> claim -> [`plan`](crate::plan) -> ReplicaSet writes ->
//! [`status`](crate::status) -> status write (upstream `pkg/controller/deployment/sync.go`).
//!
//! Mirrors `syncDeployment` and `getReplicaSetsForDeployment` of upstream
//! `deployment_controller.go`, and the I/O halves of `sync.go`, `rolling.go`, `recreate.go`,
//! `rollback.go` and `progress.go`.
//!
//! One sync works on a private copy of the Deployment (`d`) that the steps mutate as upstream
//! mutates its deep copy: the revision annotation, conditions and `collisionCount` set by an
//! early step are seen by the later ones and travel with every status write. Every object
//! written carries the resourceVersion it was read with. Unlike upstream, the sync keeps
//! the objects the API returns (the Deployment's new resourceVersion after a status write,
//! ReplicaSets after an update), so its own writes do not make its later writes conflict.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller_ref::{ControllerRefManager, controller_of};
use rkcm_runtime::events::{EventRecorder, EventType};
use rkcm_runtime::history::compute_hash;
use rkcm_runtime::informer::{INDEX_CONTROLLER_UID, Store};
use rkcm_runtime::keys::split_key;
use rkcm_runtime::podcontrol::{error_message, is_namespace_terminating};
use rkcm_runtime::selector::Selector;
use rkcm_runtime::workqueue::WorkQueue;

use crate::Config;
use crate::consts::{
    MAX_REV_HISTORY_LENGTH_IN_CHARS, annotations, conditions as ct, events, messages, reasons,
    strategy,
};
use crate::error::Error;
use crate::model::{self, Rs};
use crate::plan::{self, OldScaleDown, ScaleOp, ScalePlan};
use crate::status::{self, ProgressCheck, Status, new_condition};
use crate::{replicas, revision};

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
    pub(crate) clock: SharedClock,
    pub(crate) cfg: Config,
}

impl Controller {
    /// One sync of the Deployment `key` (`syncDeployment`).
    pub(crate) async fn sync(&self, key: String) -> Result<(), Error> {
        let started = tokio::time::Instant::now();
        let result = self.sync_inner(&key).await;
        tracing::debug!(
            controller = crate::NAME,
            key = %key,
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "finished syncing deployment"
        );
        result
    }

    async fn sync_inner(&self, key: &str) -> Result<(), Error> {
        let Some(cached) = self.deployments.get(key) else {
            tracing::debug!(controller = crate::NAME, key, "deployment has been deleted");
            return Ok(());
        };
        let (namespace, _) = split_key(key);
        let mut sync = SyncPass {
            c: self,
            key,
            namespace: namespace.unwrap_or_default().to_owned(),
            d: (*cached).clone(),
            rss: Vec::new(),
        };
        sync.run().await
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

    fn event(&self, type_: EventType, reason: &str, message: &str) {
        self.c.recorder.event_for(&self.d, type_, reason, message);
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
        let name = self.name().to_owned();
        let status = self.status();
        tracing::debug!(
            controller = crate::NAME,
            key = self.key,
            replicas = status.replicas,
            updated = status.updated_replicas,
            ready = status.ready_replicas,
            available = status.available_replicas,
            unavailable = status.unavailable_replicas,
            observed_generation = status.observed_generation,
            "updating deployment status"
        );
        let written = self
            .deployment_api()
            .replace_status(&name, &PostParams::default(), &self.d)
            .await
            .map_err(|source| Error::UpdateStatus {
                key: self.key.to_owned(),
                source,
            })?;
        self.d.metadata.resource_version = written.metadata.resource_version;
        Ok(())
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
        Ok(())
    }

    async fn put_rs(&mut self, rs: ReplicaSet) -> Result<Rs, Error> {
        let name = model::rs_name(&rs).to_owned();
        let updated = self
            .rs_api()
            .replace(&name, &PostParams::default(), &rs)
            .await
            .map_err(|source| Error::UpdateReplicaSet {
                key: self.key.to_owned(),
                replica_set: name,
                source,
            })?;
        Ok(self.remember(updated))
    }

    /// `scaleReplicaSet` (`force`) or `scaleReplicaSetAndRecordEvent` (not `force`: nothing
    /// when the size is already right). Writes the new size and the replica annotations;
    /// records `ScalingReplicaSet` when the size changed. Returns whether it did.
    async fn scale_rs(&mut self, rs: &Rs, to: i32, force: bool) -> Result<(bool, Rs), Error> {
        let rs = self.latest(rs);
        let from = model::replicas(&rs);
        if !force && from == to {
            return Ok((false, rs));
        }
        let desired = model::desired(&self.d);
        let max = desired + replicas::max_surge(&self.d);
        let size_changed = from != to;
        if !size_changed && !replicas::replicas_annotations_need_update(&rs, desired, max) {
            return Ok((false, rs));
        }
        let mut copy = (*rs).clone();
        copy.spec.replicas = Some(to);
        replicas::set_replicas_annotations(&mut copy.metadata, desired, max);
        let updated = self.put_rs(copy).await?;
        if size_changed {
            self.event(
                EventType::Normal,
                events::SCALING_REPLICA_SET,
                &messages::scaled(model::rs_name(&updated), from, to),
            );
        }
        Ok((size_changed, updated))
    }

    async fn scale_op(&mut self, op: &ScaleOp, force: bool) -> Result<bool, Error> {
        let Some(rs) = self.rss.iter().find(|r| model::uid(r) == op.uid).cloned() else {
            return Ok(false);
        };
        self.scale_rs(&rs, op.to, force)
            .await
            .map(|(scaled, _)| scaled)
    }

    // ---- syncDeployment ---------------------------------------------------------------

    async fn run(&mut self) -> Result<(), Error> {
        let raw_selector = self.d.spec.selector.clone();
        let selector =
            Selector::from_label_selector(&raw_selector).map_err(|e| Error::InvalidSelector {
                key: self.key.to_owned(),
                message: e.to_string(),
            })?;
        if selector.is_empty() {
            return self.selecting_all().await;
        }
        self.rss = self.claim(&selector).await?;

        if self.d.metadata.deletion_timestamp.is_some() {
            return self.sync_status_only().await;
        }
        // Pausing and resuming leave an Unknown condition, so that a Deployment resumed after
        // longer than its deadline does not time out at once.
        self.check_paused_conditions().await?;
        if model::is_paused(&self.d) {
            return self.sync_scaling().await;
        }
        // Rollback is not re-entrant: nothing else happens until the request is cleared.
        if revision::rollback_to(&self.d).is_some() {
            return self.rollback().await;
        }
        let (new, old) = self.new_and_old(false).await?;
        if plan::is_scaling_event(&self.d, new.as_ref(), &old) {
            return self.sync_scaling().await;
        }
        match model::strategy_type(&self.d) {
            strategy::RECREATE => self.rollout_recreate().await,
            strategy::ROLLING_UPDATE => self.rollout_rolling().await,
            other => Err(Error::Strategy {
                key: self.key.to_owned(),
                message: format!("unexpected deployment strategy type: {other}"),
            }),
        }
    }

    /// A Deployment selecting everything (only legacy API versions allow it) is left alone.
    async fn selecting_all(&mut self) -> Result<(), Error> {
        self.event(
            EventType::Warning,
            events::SELECTING_ALL,
            messages::SELECTING_ALL,
        );
        let mut status = self.status();
        let generation = self.d.metadata.generation.unwrap_or(0);
        if status.observed_generation < generation {
            status.observed_generation = generation;
            self.set_status(&status);
            if let Err(error) = self.write_status().await {
                tracing::debug!(controller = crate::NAME, key = self.key, %error, "updating observedGeneration failed");
            }
        }
        Ok(())
    }

    /// `getReplicaSetsForDeployment`: every ReplicaSet of the namespace, claimed with the
    /// Deployment's selector (adopting after a fresh GET, releasing, with UID preconditions).
    async fn claim(&self, selector: &Selector) -> Result<Vec<Rs>, Error> {
        let claim_err = |source| Error::Claim {
            key: self.key.to_owned(),
            source,
        };
        let candidates = self.c.replica_sets.list_namespace(&self.namespace);
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

    async fn check_paused_conditions(&mut self) -> Result<(), Error> {
        if let Some(status) = status::paused_conditions(&self.d, self.now()) {
            self.set_status(&status);
            self.write_status().await?;
        }
        Ok(())
    }

    // ---- new/old split and revisions ----------------------------------------------------

    /// `getAllReplicaSetsAndSyncRevision`: the new ReplicaSet (created when `create` and
    /// missing) and all old ones, with the new one's annotations and the Deployment's
    /// revision brought up to date.
    async fn new_and_old(&mut self, create: bool) -> Result<(Option<Rs>, Vec<Rs>), Error> {
        let (new, old) = model::split(&self.d, &self.rss);
        let new_revision = revision::max_revision(&old) + 1;
        if let Some(existing) = new {
            let mut copy = (*existing).clone();
            let annotations_changed = revision::set_new_rs_annotations(
                &self.d,
                &mut copy.metadata,
                new_revision,
                true,
                MAX_REV_HISTORY_LENGTH_IN_CHARS,
            );
            let min_ready = model::min_ready_seconds(&self.d);
            let spec = &mut copy.spec;
            if annotations_changed || spec.min_ready_seconds.unwrap_or(0) != min_ready {
                spec.min_ready_seconds = Some(min_ready);
                tracing::debug!(
                    controller = crate::NAME,
                    key = self.key,
                    replica_set = model::rs_name(&copy),
                    "syncing new replica set annotations"
                );
                // The Deployment's own revision follows on a later sync.
                let updated = self.put_rs(copy).await?;
                return Ok((Some(updated), old));
            }
            let rs_revision = model::annotation(&copy.metadata, annotations::REVISION)
                .unwrap_or_default()
                .to_owned();
            let mut needs_update = revision::set_deployment_revision(&mut self.d, &rs_revision);
            let mut status = self.status();
            if model::progress_deadline(&self.d).is_some()
                && status.condition(ct::PROGRESSING).is_none()
            {
                // Progress is measured from when the new ReplicaSet was first noticed.
                status.set_condition(new_condition(
                    ct::PROGRESSING,
                    ct::TRUE,
                    reasons::FOUND_NEW_RS,
                    &messages::found_new_rs(model::rs_name(&existing)),
                    self.now(),
                ));
                self.set_status(&status);
                needs_update = true;
            }
            if needs_update {
                self.write_status().await?;
            }
            return Ok((Some(existing), old));
        }
        if !create {
            return Ok((None, old));
        }
        let created = self.create_new_rs(&old, new_revision).await?;
        Ok((Some(created), old))
    }

    /// The create branch of `getNewReplicaSet`, with hash-collision handling.
    async fn create_new_rs(&mut self, old: &[Rs], new_revision: i64) -> Result<Rs, Error> {
        let collision_count = self.status().collision_count;
        let template = model::template(&self.d).cloned().unwrap_or_default();
        let hash = compute_hash(&template, collision_count);
        let rs = plan::new_replica_set(&self.d, &hash, old, new_revision).map_err(|message| {
            Error::Strategy {
                key: self.key.to_owned(),
                message,
            }
        })?;
        let rs_name = model::rs_name(&rs).to_owned();
        let size = model::replicas(&rs);
        let deadline = model::progress_deadline(&self.d).is_some();
        let (created, already_existed) = match self
            .rs_api()
            .create(&PostParams::default(), &rs)
            .await
        {
            Ok(created) => (self.remember(created), false),
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                let existing = self
                    .c
                    .replica_sets
                    .get(&format!("{}/{rs_name}", self.namespace))
                    .ok_or_else(|| Error::NotCached {
                        key: self.key.to_owned(),
                        replica_set: rs_name.clone(),
                    })?;
                let ours = controller_of(&existing.metadata)
                    .is_some_and(|r| Some(r.uid.as_str()) == self.d.metadata.uid.as_deref());
                if ours && model::matches_template(&self.d, &existing) {
                    // A slow cache: this is the new ReplicaSet already.
                    (self.remember((*existing).clone()), true)
                } else {
                    return Err(self.hash_collision(rs_name, kube::Error::Api(s)).await);
                }
            }
            Err(source) if is_namespace_terminating(&source) => {
                return Err(Error::CreateReplicaSet {
                    key: self.key.to_owned(),
                    replica_set: rs_name,
                    source,
                });
            }
            Err(source) => {
                let message = messages::failed_rs_create(&rs_name, &error_message(&source));
                if deadline {
                    let mut status = self.status();
                    status.set_condition(new_condition(
                        ct::PROGRESSING,
                        ct::FALSE,
                        reasons::FAILED_RS_CREATE,
                        &message,
                        self.now(),
                    ));
                    self.set_status(&status);
                    // The create failure is the error worth reporting.
                    if let Err(error) = self.write_status().await {
                        tracing::debug!(controller = crate::NAME, key = self.key, %error, "recording the create failure in status failed");
                    }
                }
                self.event(EventType::Warning, events::FAILED_RS_CREATE, &message);
                return Err(Error::CreateReplicaSet {
                    key: self.key.to_owned(),
                    replica_set: rs_name,
                    source,
                });
            }
        };
        if !already_existed && size > 0 {
            self.event(
                EventType::Normal,
                events::SCALING_REPLICA_SET,
                &messages::scaled(&rs_name, 0, size),
            );
        }
        let mut needs_update =
            revision::set_deployment_revision(&mut self.d, &new_revision.to_string());
        if !already_existed && deadline {
            let mut status = self.status();
            status.set_condition(new_condition(
                ct::PROGRESSING,
                ct::TRUE,
                reasons::NEW_RS_CREATED,
                &messages::created_new_rs(&rs_name),
                self.now(),
            ));
            self.set_status(&status);
            needs_update = true;
        }
        if needs_update {
            self.write_status().await?;
        }
        Ok(created)
    }

    /// The name is taken by a ReplicaSet that is not this Deployment's current one: bump
    /// `collisionCount` so the next sync hashes to another name, and fail this one.
    async fn hash_collision(&mut self, replica_set: String, source: kube::Error) -> Error {
        let mut status = self.status();
        let before = status.collision_count;
        status.collision_count = Some(before.unwrap_or(0).saturating_add(1));
        self.set_status(&status);
        match self.write_status().await {
            Ok(()) => tracing::info!(
                controller = crate::NAME,
                key = self.key,
                replica_set = %replica_set,
                old_collision_count = before.unwrap_or(0),
                new_collision_count = status.collision_count.unwrap_or(0),
                "found a hash collision for deployment; bumping collisionCount to resolve it"
            ),
            Err(error) => {
                tracing::debug!(controller = crate::NAME, key = self.key, %error, "bumping collisionCount failed")
            }
        }
        Error::HashCollision {
            key: self.key.to_owned(),
            replica_set,
            source,
        }
    }

    // ---- paths ------------------------------------------------------------------------

    /// `syncStatusOnly`: a Deployment being deleted only reports status.
    async fn sync_status_only(&mut self) -> Result<(), Error> {
        let (new, old) = self.new_and_old(false).await?;
        self.sync_deployment_status(new.as_ref(), &old).await
    }

    /// `sync`: paused Deployments and scaling events: proportional scaling, history cleanup
    /// while paused, status without progress evaluation.
    async fn sync_scaling(&mut self) -> Result<(), Error> {
        let (new, old) = self.new_and_old(false).await?;
        self.scale(new.as_ref(), &old).await?;
        if model::is_paused(&self.d) && revision::rollback_to(&self.d).is_none() {
            // Judged on the sizes just written (upstream looks at the pre-scaling copies).
            let old = self.refreshed(&old);
            self.cleanup(&old).await?;
        }
        self.sync_deployment_status(new.as_ref(), &old).await
    }

    /// `scale`: see [`plan::scale`].
    async fn scale(&mut self, new: Option<&Rs>, old: &[Rs]) -> Result<(), Error> {
        match plan::scale(&self.d, new, old) {
            ScalePlan::Nothing => {}
            ScalePlan::One(op) => {
                self.scale_op(&op, false).await?;
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
        Ok(())
    }

    /// `syncDeploymentStatus`.
    async fn sync_deployment_status(&mut self, new: Option<&Rs>, old: &[Rs]) -> Result<(), Error> {
        let all = self.all(new, old);
        let new = new.map(|rs| self.latest(rs));
        let status = status::calculate_status(
            &self.d,
            &all,
            new.as_ref(),
            self.c.cfg.terminating_replicas,
            self.now(),
        );
        if status == self.status() {
            return Ok(());
        }
        self.set_status(&status);
        self.write_status().await
    }

    /// `syncRolloutStatus`: status with progress evaluation; when nothing changed, a delayed
    /// re-check so that the deadline fires without any event.
    async fn sync_rollout_status(&mut self, new: Option<&Rs>, old: &[Rs]) -> Result<(), Error> {
        let all = self.all(new, old);
        let new = new.map(|rs| self.latest(rs));
        let now = self.now();
        let status = status::rollout_status(
            &self.d,
            &all,
            new.as_ref(),
            self.c.cfg.terminating_replicas,
            now,
        );
        if status == self.status() {
            match status::progress_check(&self.d, &status, now) {
                ProgressCheck::None => {}
                ProgressCheck::Now => {
                    tracing::debug!(
                        controller = crate::NAME,
                        key = self.key,
                        "queueing deployment for a progress check now"
                    );
                    self.c.queue.add_rate_limited(self.key.to_owned());
                }
                ProgressCheck::After(after) => {
                    tracing::debug!(
                        controller = crate::NAME,
                        key = self.key,
                        after_s = after.as_secs(),
                        "queueing deployment for a progress check"
                    );
                    self.c.queue.add_after(self.key.to_owned(), after);
                }
            }
            return Ok(());
        }
        self.set_status(&status);
        self.write_status().await
    }

    /// `rolloutRolling`: one step — grow the new ReplicaSet, or else shrink old ones.
    async fn rollout_rolling(&mut self) -> Result<(), Error> {
        let (new, old) = self.new_and_old(true).await?;
        let Some(new) = new else {
            return Ok(());
        };
        let mut all = old.clone();
        all.push(new.clone());
        let target =
            plan::reconcile_new(&self.d, &all, &new).map_err(|message| Error::Strategy {
                key: self.key.to_owned(),
                message,
            })?;
        if let Some(to) = target {
            let (scaled, _) = self.scale_rs(&new, to, false).await?;
            if scaled {
                return self.sync_rollout_status(Some(&new), &old).await;
            }
        }
        let step = plan::reconcile_old(&self.d, &all, &model::active(&old), &new);
        if self.scale_down_old(step).await {
            return self.sync_rollout_status(Some(&new), &old).await;
        }
        // Judged on the stored status: cleanup waits one sync after completion is reported.
        if status::deployment_complete(&self.d, &self.status()) {
            self.cleanup(&old).await?;
        }
        self.sync_rollout_status(Some(&new), &old).await
    }

    /// Runs a [`reconcile_old`](plan::reconcile_old) step. Failures are logged and count as
    /// "nothing scaled", as upstream swallows them.
    async fn scale_down_old(&mut self, step: OldScaleDown) -> bool {
        for op in &step.ops {
            if let Err(error) = self.scale_op(op, false).await {
                tracing::warn!(controller = crate::NAME, key = self.key, %error, "scaling down old replica sets failed");
                return false;
            }
        }
        if let Some(message) = step.invalid {
            tracing::warn!(
                controller = crate::NAME,
                key = self.key,
                message,
                "scaling down old replica sets stopped"
            );
            return false;
        }
        !step.ops.is_empty()
    }

    /// `rolloutRecreate`: all old ReplicaSets to 0; once no old pod runs, the new
    /// ReplicaSet at full size.
    async fn rollout_recreate(&mut self) -> Result<(), Error> {
        let (mut new, mut old) = self.new_and_old(false).await?;
        let mut scaled_down = false;
        for rs in model::active(&old) {
            let (scaled, _) = self.scale_rs(&rs, 0, false).await?;
            scaled_down |= scaled;
        }
        if scaled_down {
            return self.sync_rollout_status(new.as_ref(), &old).await;
        }
        let pods = self.c.pods_by_rs(&self.rss);
        if plan::old_pods_running(new.as_ref(), &old, &pods) {
            return self.sync_rollout_status(new.as_ref(), &old).await;
        }
        if new.is_none() {
            (new, old) = self.new_and_old(true).await?;
        }
        let Some(new_rs) = new.clone() else {
            return Ok(());
        };
        self.scale_rs(&new_rs, model::desired(&self.d), false)
            .await?;
        if status::deployment_complete(&self.d, &self.status()) {
            self.cleanup(&old).await?;
        }
        self.sync_rollout_status(new.as_ref(), &old).await
    }

    /// `rollback`: copy the requested revision's template into the Deployment (the rollout
    /// itself happens on later syncs) and clear the request in every case.
    async fn rollback(&mut self) -> Result<(), Error> {
        let (new, old) = self.new_and_old(true).await?;
        let mut all = old;
        all.extend(new);
        let mut target = revision::rollback_to(&self.d).unwrap_or(0);
        if target == 0 {
            target = revision::last_revision(&all);
            if target == 0 {
                self.event(
                    EventType::Warning,
                    events::ROLLBACK_REVISION_NOT_FOUND,
                    messages::LAST_REVISION_NOT_FOUND,
                );
                return self.clear_rollback().await;
            }
        }
        let Some(rs) = all
            .iter()
            .find(|rs| revision::revision(rs).is_ok_and(|v| v == target))
            .cloned()
        else {
            self.event(
                EventType::Warning,
                events::ROLLBACK_REVISION_NOT_FOUND,
                messages::REVISION_NOT_FOUND,
            );
            return self.clear_rollback().await;
        };
        if model::matches_template(&self.d, &rs) {
            let message = messages::rollback_template_unchanged(self.name());
            self.event(
                EventType::Warning,
                events::ROLLBACK_TEMPLATE_UNCHANGED,
                &message,
            );
            return self.clear_rollback().await;
        }
        let template = rs
            .spec
            .template
            .as_ref()
            .map(model::template_without_hash)
            .unwrap_or_default();
        self.d.spec.template = template;
        // The annotations (e.g. change-cause) of the revision come back with it; otherwise
        // the current ones would be copied onto the reused ReplicaSet.
        revision::set_deployment_annotations_to(&mut self.d, &rs);
        self.clear_rollback().await?;
        let message = messages::rolled_back(self.name(), target);
        self.event(EventType::Normal, events::ROLLBACK_DONE, &message);
        Ok(())
    }

    async fn clear_rollback(&mut self) -> Result<(), Error> {
        revision::clear_rollback_to(&mut self.d);
        self.write_deployment().await
    }

    /// `cleanupDeployment`: delete old ReplicaSets beyond `revisionHistoryLimit`. UID and
    /// resourceVersion preconditions (upstream sends none) make sure only the version judged
    /// empty is deleted: never one re-created under the same name, nor one scaled up since
    /// the cache saw it.
    async fn cleanup(&mut self, old: &[Rs]) -> Result<(), Error> {
        for rs in plan::cleanup(&self.d, old) {
            let name = model::rs_name(&rs).to_owned();
            tracing::debug!(controller = crate::NAME, key = self.key, replica_set = %name, "deleting old replica set");
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: rs.metadata.uid.clone(),
                    resource_version: rs.metadata.resource_version.clone(),
                }),
                ..DeleteParams::default()
            };
            match self.rs_api().delete(&name, &params).await {
                Ok(_) => {
                    let uid = model::uid(&rs).to_owned();
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
