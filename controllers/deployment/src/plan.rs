//! PURE: every decision of one Deployment sync, from the working copy of the Deployment, its
//! claimed ReplicaSets, (Recreate only) their pods, and the clock. The sync in `reconcile.rs`
//! only reads the caches, performs the writes these functions describe and feeds what the API
//! returns into the next one.
//!
//! - [`route`]: `syncDeployment`'s path (empty selector, deletion, paused conditions, paused,
//!   rollback, rollout); [`rollout`]: scaling event or strategy.
//! - [`sync_revision`]: the one write of `getAllReplicaSetsAndSyncRevision` (new ReplicaSet's
//!   annotations, the Deployment's revision and `FoundNewReplicaSet`, or the new ReplicaSet to
//!   create: [`new_rs_to_create`], with [`after_create`], [`create_failed`], [`collision`] and
//!   [`is_current_replica_set`] for the outcomes).
//! - [`rolling_step`] (`rolling.go`: [`reconcile_new`], [`reconcile_old`]), [`recreate_step`]
//!   (`recreate.go`: [`old_pods_running`]), [`scale`] (proportional scaling, `sync.go`) and
//!   [`scale_write`] for each resize. As upstream, one sync takes one step.
//! - [`cleanup`] / [`paused_cleanup`] (`cleanupDeployment`), [`rollback`] (`rollback.go`),
//!   [`status_step`] (`syncDeploymentStatus`, `syncRolloutStatus`, `requeueStuckDeployment` of
//!   `progress.go`).
//! - [`deadline`]: rkcm's own opt-in rollback of a rollout past its progress deadline (not
//!   upstream).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::events::EventType;
use rkcm_runtime::workload::controller_ref::{controller_of, controller_owner_ref};
use rkcm_runtime::workload::history::compute_hash;

use crate::consts::{
    MAX_REV_HISTORY_LENGTH_IN_CHARS, POD_TEMPLATE_HASH_LABEL, annotations, conditions as ct,
    events, messages, reasons, strategy,
};
use crate::model::{self, Rs};
use crate::status::{self, ProgressCheck, Status, new_condition};
use crate::{replicas, revision};

pub mod deadline;
mod scaling;

pub use scaling::{
    OldScaleDown, ScaleOp, ScalePlan, available_pods, is_scaling_event, old_pods_running,
    reconcile_new, reconcile_old, reconcile_old_seen, scale,
};

/// `cleanupDeployment`: the old ReplicaSets to delete beyond `revisionHistoryLimit`, lowest
/// revisions first. Candidates that still have replicas, an unobserved generation or a
/// deletion timestamp are skipped, and still use up the budget.
pub fn cleanup(d: &Deployment, old: &[Rs]) -> Vec<Rs> {
    let Some(limit) = model::revision_history_limit(d) else {
        return Vec::new();
    };
    let mut candidates: Vec<Rs> = old
        .iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect();
    let diff = i64::try_from(candidates.len()).unwrap_or(i64::MAX) - i64::from(limit);
    if diff <= 0 {
        return Vec::new();
    }
    candidates.sort_by(
        |a, b| match (crate::revision::revision(a), crate::revision::revision(b)) {
            (Ok(x), Ok(y)) if x != y => x.cmp(&y),
            _ => model::by_creation(a, b),
        },
    );
    candidates
        .into_iter()
        .take(usize::try_from(diff).unwrap_or(usize::MAX))
        .filter(|rs| {
            model::status_replicas(rs) == 0
                && model::replicas(rs) == 0
                && rs.metadata.generation.unwrap_or(0) <= model::observed_generation(rs)
                && rs.metadata.deletion_timestamp.is_none()
        })
        .collect()
}

/// The new ReplicaSet for the Deployment's current template (`getNewReplicaSet`'s create
/// branch): name `<deployment>-<hash>`, the template and selector with
/// `pod-template-hash=<hash>`, the controllerRef, the copied annotations, revision
/// `new_revision` and replica annotations, sized by `NewRSNewReplicas` (at full size for
/// Recreate, within `maxSurge` for RollingUpdate).
pub fn new_replica_set(
    d: &Deployment,
    hash: &str,
    old: &[Rs],
    new_revision: i64,
) -> Result<ReplicaSet, String> {
    let owner =
        controller_owner_ref(d).ok_or_else(|| "deployment has no name or uid".to_owned())?;
    let mut template = model::template(d).cloned().unwrap_or_default();
    let labels = model::labels_with_hash(
        rkcm_runtime::workload::pod::template_labels(&template),
        hash,
    );
    template
        .metadata
        .get_or_insert_with(Default::default)
        .labels = Some(labels.clone());
    let mut selector = d.spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH_LABEL.to_owned(), hash.to_owned());
    let mut rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", model::name_of(&d.metadata))),
            namespace: d.metadata.namespace.clone(),
            owner_references: Some(vec![owner]),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: Some(model::min_ready_seconds(d)),
            selector,
            template: Some(template),
        },
        status: None,
    };
    let mut all = old.to_vec();
    all.push(Arc::new(rs.clone()));
    let size = replicas::new_rs_new_replicas(d, &all, 0)?;
    rs.spec.replicas = Some(size);
    revision::set_new_rs_annotations(
        d,
        &mut rs.metadata,
        new_revision,
        false,
        MAX_REV_HISTORY_LENGTH_IN_CHARS,
    );
    Ok(rs)
}

// ---- the sync, step by step ----------------------------------------------------------------

/// An event the executor records for the Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
}

impl Event {
    fn normal(reason: &'static str, message: String) -> Self {
        Self {
            type_: EventType::Normal,
            reason,
            message,
        }
    }

    fn warning(reason: &'static str, message: String) -> Self {
        Self {
            type_: EventType::Warning,
            reason,
            message,
        }
    }
}

/// Which of `syncDeployment`'s paths one sync takes, decided from the working copy alone.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// The selector selects everything (only legacy API versions allow it): a Warning event
    /// and, when behind, `observedGeneration` brought up (the status to write). Nothing else.
    SelectingAll {
        event: Event,
        status: Option<Status>,
    },
    /// Being deleted: revision bookkeeping and status only (`syncStatusOnly`).
    StatusOnly,
    /// Paused: proportional scaling, history cleanup, status without progress (`sync`).
    Paused { paused_status: Option<Status> },
    /// `deprecated.deployment.rollback.to` is set: nothing else until it is cleared.
    Rollback { paused_status: Option<Status> },
    /// A scaling event or a rollout step (see [`rollout`]).
    Rollout { paused_status: Option<Status> },
}

/// `syncDeployment`'s order: empty selector, deletion, then (after writing `paused_status`,
/// the `checkPausedConditions` result) paused, rollback, rollout.
pub fn route(d: &Deployment, selects_all: bool, now: jiff::Timestamp) -> Route {
    if selects_all {
        let mut status = Status::of(d);
        let generation = d.metadata.generation.unwrap_or(0);
        let behind = status.observed_generation < generation;
        status.observed_generation = generation;
        return Route::SelectingAll {
            event: Event::warning(events::SELECTING_ALL, messages::SELECTING_ALL.to_owned()),
            status: behind.then_some(status),
        };
    }
    if d.metadata.deletion_timestamp.is_some() {
        return Route::StatusOnly;
    }
    // Pausing and resuming leave an Unknown condition, so that a Deployment resumed after
    // longer than its deadline does not time out at once.
    let paused_status = status::paused_conditions(d, now);
    if model::is_paused(d) {
        Route::Paused { paused_status }
    } else if revision::rollback_to(d).is_some() {
        Route::Rollback { paused_status }
    } else {
        Route::Rollout { paused_status }
    }
}

/// What an unpaused Deployment without a rollback request does once its revision is synced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rollout {
    /// `spec.replicas` changed under an active ReplicaSet: proportional scaling ([`scale`]).
    Scale,
    Recreate,
    Rolling,
}

/// `isScalingEvent`, then the strategy; an unknown strategy type is an error.
pub fn rollout(d: &Deployment, new: Option<&Rs>, old: &[Rs]) -> Result<Rollout, String> {
    if is_scaling_event(d, new, old) {
        return Ok(Rollout::Scale);
    }
    match model::strategy_type(d) {
        strategy::RECREATE => Ok(Rollout::Recreate),
        strategy::ROLLING_UPDATE => Ok(Rollout::Rolling),
        other => Err(format!("unexpected deployment strategy type: {other}")),
    }
}

/// The one write `getAllReplicaSetsAndSyncRevision` makes per call.
#[derive(Debug, Clone, PartialEq)]
pub enum RevisionStep {
    Nothing,
    /// Bring the new ReplicaSet's annotations (revision, copied annotations) and
    /// `minReadySeconds` up to date. The Deployment's own revision follows on the next call.
    UpdateNewRs(Box<ReplicaSet>),
    /// Write the working copy (status subresource): the new ReplicaSet's revision, and
    /// `Progressing=True/FoundNewReplicaSet` when a deadline is set and no such condition
    /// exists yet (progress is measured from when the new ReplicaSet was first noticed).
    Record(Box<Deployment>),
    /// Create the new ReplicaSet (only when asked to and there is none).
    Create(Box<NewReplicaSet>),
}

/// `getAllReplicaSetsAndSyncRevision` for the new/old split of the claimed ReplicaSets.
pub fn sync_revision(
    d: &Deployment,
    new: Option<&Rs>,
    old: &[Rs],
    create: bool,
    now: jiff::Timestamp,
) -> Result<RevisionStep, String> {
    let new_revision = revision::max_revision(old) + 1;
    let Some(existing) = new else {
        if !create {
            return Ok(RevisionStep::Nothing);
        }
        return new_rs_to_create(d, old, new_revision)
            .map(|plan| RevisionStep::Create(Box::new(plan)));
    };
    let mut copy = (**existing).clone();
    let annotations_changed = revision::set_new_rs_annotations(
        d,
        &mut copy.metadata,
        new_revision,
        true,
        MAX_REV_HISTORY_LENGTH_IN_CHARS,
    );
    let min_ready = model::min_ready_seconds(d);
    if annotations_changed || copy.spec.min_ready_seconds.unwrap_or(0) != min_ready {
        copy.spec.min_ready_seconds = Some(min_ready);
        return Ok(RevisionStep::UpdateNewRs(Box::new(copy)));
    }
    let rs_revision = model::annotation(&copy.metadata, annotations::REVISION).unwrap_or_default();
    let mut working = d.clone();
    let mut needs_update = revision::set_deployment_revision(&mut working, rs_revision);
    let mut status = Status::of(&working);
    if model::progress_deadline(d).is_some() && progress_unknown(&status, existing, d) {
        status.set_condition(new_condition(
            ct::PROGRESSING,
            ct::TRUE,
            reasons::FOUND_NEW_RS,
            messages::found_new_rs(model::rs_name(existing)),
            now,
        ));
        working.status = Some(status.to_api());
        needs_update = true;
    }
    Ok(if needs_update {
        RevisionStep::Record(Box::new(working))
    } else {
        RevisionStep::Nothing
    })
}

/// Whether the `Progressing` condition says nothing about the rollout of `new`: there is none
/// (upstream's case), or it is `NewReplicaSetAvailable` about another ReplicaSet (rkcm's).
///
/// Upstream sets `NewReplicaSetCreated` in the same status write that records the revision of
/// a ReplicaSet it just created; when that write is lost (a conflict, a crash), the next sync
/// finds the ReplicaSet, sees a `Progressing` condition and keeps it. That condition is the
/// previous rollout's `NewReplicaSetAvailable`, which `DeploymentTimedOut` never times out,
/// and a new ReplicaSet that never gets Ready shows no progress either: the rollout would stay
/// "successfully progressed" forever and its deadline would never pass (the simulator found
/// it: `rkcm-sim --controller deployment-rollback --seed 117`). The same holds when a template
/// returns to an older ReplicaSet. rkcm then records `FoundNewReplicaSet`, as for a Deployment
/// without the condition, so the deadline counts from now.
fn progress_unknown(status: &Status, new: &Rs, d: &Deployment) -> bool {
    // Mutant (sim only): upstream's rule, only a missing condition counts.
    let upstream = rkcm_runtime::mutants::on("deployment-keeps-previous-rollout-condition");
    match status.condition(ct::PROGRESSING) {
        None => true,
        Some(_) if upstream => false,
        Some(cond) => {
            cond.reason == reasons::NEW_RS_AVAILABLE
                && cond.message
                    != messages::progressed(Some(model::rs_name(new)), model::name_of(&d.metadata))
        }
    }
}

/// The new ReplicaSet a sync creates, and what is needed to report the outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct NewReplicaSet {
    /// `<deployment>-<hash>`, with `pod-template-hash=<hash>` in labels, selector and
    /// template, the controllerRef, the copied annotations, the revision and replica
    /// annotations, sized by `NewRSNewReplicas`.
    pub replica_set: ReplicaSet,
    pub name: String,
    pub hash: String,
    pub revision: i64,
}

/// The create branch of `getNewReplicaSet`: the hash of the template with the stored
/// `collisionCount`, and the object.
pub fn new_rs_to_create(
    d: &Deployment,
    old: &[Rs],
    new_revision: i64,
) -> Result<NewReplicaSet, String> {
    let template = model::template(d).cloned().unwrap_or_default();
    let hash = compute_hash(&template, Status::of(d).collision_count);
    let replica_set = new_replica_set(d, &hash, old, new_revision)?;
    Ok(NewReplicaSet {
        name: model::rs_name(&replica_set).to_owned(),
        replica_set,
        hash,
        revision: new_revision,
    })
}

/// `true` when a ReplicaSet holding the new ReplicaSet's name is this Deployment's current
/// one already (a slow cache): it is used instead of created. Otherwise the name collides.
pub fn is_current_replica_set(d: &Deployment, existing: &ReplicaSet) -> bool {
    let ours = controller_of(&existing.metadata)
        .is_some_and(|r| Some(r.uid.as_str()) == d.metadata.uid.as_deref());
    ours && model::matches_template(d, existing)
}

/// What follows a create (`created`) or finding the ReplicaSet already there (`!created`).
#[derive(Debug, Clone, PartialEq)]
pub struct AfterCreate {
    /// `ScalingReplicaSet` "from 0" when this sync created it with replicas.
    pub event: Option<Event>,
    /// The working copy to write: the new revision and, when created and a deadline is set,
    /// `Progressing=True/NewReplicaSetCreated`. `None` when nothing changed.
    pub record: Option<Box<Deployment>>,
}

pub fn after_create(
    d: &Deployment,
    plan: &NewReplicaSet,
    created: bool,
    now: jiff::Timestamp,
) -> AfterCreate {
    let size = model::replicas(&plan.replica_set);
    let event = (created && size > 0).then(|| {
        Event::normal(
            events::SCALING_REPLICA_SET,
            messages::scaled(&plan.name, 0, size),
        )
    });
    let mut working = d.clone();
    let mut needs_update =
        revision::set_deployment_revision(&mut working, &plan.revision.to_string());
    if created && model::progress_deadline(d).is_some() {
        let mut status = Status::of(&working);
        status.set_condition(new_condition(
            ct::PROGRESSING,
            ct::TRUE,
            reasons::NEW_RS_CREATED,
            messages::created_new_rs(&plan.name),
            now,
        ));
        working.status = Some(status.to_api());
        needs_update = true;
    }
    AfterCreate {
        event,
        record: needs_update.then(|| Box::new(working)),
    }
}

/// A create the API refused (other than a name collision or a terminating namespace).
#[derive(Debug, Clone, PartialEq)]
pub struct CreateFailed {
    /// `ReplicaSetCreateError` Warning.
    pub event: Event,
    /// With a deadline: the status with `Progressing=False/ReplicaSetCreateError`, written
    /// best effort (the create failure is the error worth reporting).
    pub status: Option<Status>,
}

pub fn create_failed(
    d: &Deployment,
    name: &str,
    error: &str,
    now: jiff::Timestamp,
) -> CreateFailed {
    let message = messages::failed_rs_create(name, error);
    let status = model::progress_deadline(d).is_some().then(|| {
        let mut status = Status::of(d);
        status.set_condition(new_condition(
            ct::PROGRESSING,
            ct::FALSE,
            reasons::FAILED_RS_CREATE,
            &message,
            now,
        ));
        status
    });
    CreateFailed {
        event: Event::warning(events::FAILED_RS_CREATE, message),
        status,
    }
}

/// The new ReplicaSet's name is taken by another template: the status with `collisionCount`
/// raised, so that the next sync hashes to another name.
pub fn collision(d: &Deployment) -> Status {
    let mut status = Status::of(d);
    status.collision_count = Some(status.collision_count.unwrap_or(0).saturating_add(1));
    status
}

/// A ReplicaSet write that resizes and/or brings the replica annotations up to date.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleWrite {
    pub replica_set: ReplicaSet,
    /// `ScalingReplicaSet`, when the size changes.
    pub event: Option<Event>,
}

/// `scaleReplicaSet` (`force`: also at an unchanged size, for the annotations) or
/// `scaleReplicaSetAndRecordEvent` (not `force`: nothing when the size is right). `None`
/// when nothing is to be written.
pub fn scale_write(d: &Deployment, rs: &ReplicaSet, to: i32, force: bool) -> Option<ScaleWrite> {
    let from = model::replicas(rs);
    if !force && from == to {
        return None;
    }
    let desired = model::desired(d);
    let max = desired + replicas::max_surge(d);
    let size_changed = from != to;
    if !size_changed && !replicas::replicas_annotations_need_update(rs, desired, max) {
        return None;
    }
    let mut copy = rs.clone();
    copy.spec.replicas = Some(to);
    replicas::set_replicas_annotations(&mut copy.metadata, desired, max);
    Some(ScaleWrite {
        event: size_changed.then(|| {
            Event::normal(
                events::SCALING_REPLICA_SET,
                messages::scaled(model::rs_name(rs), from, to),
            )
        }),
        replica_set: copy,
    })
}

/// The history cleanup of the paused path (`sync`): only while paused and without a
/// rollback request, over the old ReplicaSets as just scaled.
pub fn paused_cleanup(d: &Deployment, old: &[Rs]) -> Vec<Rs> {
    if model::is_paused(d) && revision::rollback_to(d).is_none() {
        cleanup(d, old)
    } else {
        Vec::new()
    }
}

/// Cleanup waits one sync after completion is reported: judged on the stored status.
fn cleanup_when_complete(d: &Deployment, old: &[Rs]) -> Vec<Rs> {
    if status::deployment_complete(d, &Status::of(d)) {
        cleanup(d, old)
    } else {
        Vec::new()
    }
}

/// What one sync of a rollout reads besides the Deployment: the new ReplicaSet (if any), the
/// old ones, and the pods of every claimed ReplicaSet, by ReplicaSet UID (Recreate, and
/// RollingUpdate when `pods_seen_at` is set).
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    pub deployment: &'a Deployment,
    pub new: Option<&'a Rs>,
    pub old: &'a [Rs],
    pub pods: &'a HashMap<String, Vec<Arc<Pod>>>,
    /// Set (to the sync's clock) by the stale-cache guard: a rolling step also reads each
    /// ReplicaSet's available replicas from its pods in `pods` available at that time
    /// ([`reconcile_old_seen`]). `None`: the statuses alone, as upstream.
    pub pods_seen_at: Option<jiff::Timestamp>,
}

/// One RollingUpdate step (`rolloutRolling`).
#[derive(Debug, Clone, PartialEq)]
pub enum RollingStep {
    /// Resize the new ReplicaSet (up within `maxSurge`, or down to `spec.replicas`).
    ScaleNew(ScaleOp),
    /// Scale old ReplicaSets down; when that scales nothing (a failure, an invalid request),
    /// the sync goes on to clean up `otherwise`.
    ScaleDownOld {
        step: OldScaleDown,
        otherwise: Vec<Rs>,
    },
    /// Nothing to scale: delete old ReplicaSets beyond the history limit (empty until the
    /// stored status reports the rollout complete).
    Cleanup(Vec<Rs>),
}

/// `rolloutRolling`: grow the new ReplicaSet, or else shrink old ones, or else clean up.
pub fn rolling_step(snap: &Snapshot<'_>, new: &Rs) -> Result<RollingStep, String> {
    let d = snap.deployment;
    let mut all = snap.old.to_vec();
    all.push(new.clone());
    if let Some(to) = reconcile_new(d, &all, new)? {
        return Ok(RollingStep::ScaleNew(ScaleOp::new(new, to)));
    }
    let seen = snap
        .pods_seen_at
        .map(|now| available_pods(&all, snap.pods, now));
    let step = reconcile_old_seen(d, &all, &model::active(snap.old), new, seen.as_ref());
    let otherwise = cleanup_when_complete(d, snap.old);
    if step.ops.is_empty() && step.invalid.is_none() {
        return Ok(RollingStep::Cleanup(otherwise));
    }
    Ok(RollingStep::ScaleDownOld { step, otherwise })
}

/// One Recreate step (`rolloutRecreate`).
#[derive(Debug, Clone, PartialEq)]
pub enum RecreateStep {
    /// Every active old ReplicaSet to 0.
    ScaleDownOld(Vec<ScaleOp>),
    /// Old pods still run (or are terminating): nothing until they are gone.
    WaitForOldPods,
    /// No old pod runs and there is no new ReplicaSet: create it, then take the next step.
    CreateNew,
    /// The new ReplicaSet to full size (`None`: it is), then the history cleanup.
    ScaleNew {
        op: Option<ScaleOp>,
        cleanup: Vec<Rs>,
    },
}

pub fn recreate_step(snap: &Snapshot<'_>) -> RecreateStep {
    let d = snap.deployment;
    let active = model::active(snap.old);
    if !active.is_empty() {
        return RecreateStep::ScaleDownOld(active.iter().map(|rs| ScaleOp::new(rs, 0)).collect());
    }
    if old_pods_running(snap.new, snap.old, snap.pods) {
        return RecreateStep::WaitForOldPods;
    }
    let Some(new) = snap.new else {
        return RecreateStep::CreateNew;
    };
    let desired = model::desired(d);
    RecreateStep::ScaleNew {
        op: (model::replicas(new) != desired).then(|| ScaleOp::new(new, desired)),
        cleanup: cleanup_when_complete(d, snap.old),
    }
}

/// `rollback`: the working copy to write (the request always cleared; on success the
/// revision's template, without the hash label, and its annotations restored) and the event.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollback {
    pub deployment: Box<Deployment>,
    pub event: Event,
    /// The revision was found and differs: the event follows a successful write. Otherwise
    /// it is recorded before the write.
    pub rolled_back: bool,
}

pub fn rollback(d: &Deployment, all: &[Rs]) -> Rollback {
    let mut working = d.clone();
    revision::clear_rollback_to(&mut working);
    let refused = |working: Deployment, reason, message: String| Rollback {
        deployment: Box::new(working),
        event: Event::warning(reason, message),
        rolled_back: false,
    };
    let mut target = revision::rollback_to(d).unwrap_or(0);
    if target == 0 {
        target = revision::last_revision(all);
        if target == 0 {
            return refused(
                working,
                events::ROLLBACK_REVISION_NOT_FOUND,
                messages::LAST_REVISION_NOT_FOUND.to_owned(),
            );
        }
    }
    let Some(rs) = all
        .iter()
        .find(|rs| revision::revision(rs).is_ok_and(|v| v == target))
    else {
        return refused(
            working,
            events::ROLLBACK_REVISION_NOT_FOUND,
            messages::REVISION_NOT_FOUND.to_owned(),
        );
    };
    let name = model::name_of(&d.metadata);
    if model::matches_template(d, rs) {
        return refused(
            working,
            events::ROLLBACK_TEMPLATE_UNCHANGED,
            messages::rollback_template_unchanged(name),
        );
    }
    working.spec.template = rs
        .spec
        .template
        .as_ref()
        .map(model::template_without_hash)
        .unwrap_or_default();
    // The annotations (e.g. change-cause) of the revision come back with it; otherwise the
    // current ones would be copied onto the reused ReplicaSet.
    revision::set_deployment_annotations_to(&mut working, rs);
    revision::clear_rollback_to(&mut working);
    Rollback {
        deployment: Box::new(working),
        event: Event::normal(events::ROLLBACK_DONE, messages::rolled_back(name, target)),
        rolled_back: true,
    }
}

/// The status part of a sync.
#[derive(Debug, Clone, PartialEq)]
pub enum StatusStep {
    Unchanged,
    Write(Status),
    /// Unchanged, but a deadline is pending: look again then, without any event.
    Recheck(ProgressCheck),
}

/// `syncDeploymentStatus` (`rollout == false`: counts and `Available`) or `syncRolloutStatus`
/// (`Progressing` evaluated, `ReplicaFailure` mirrored, and `requeueStuckDeployment` when
/// nothing changed). `all` includes `new`.
pub fn status_step(
    d: &Deployment,
    all: &[Rs],
    new: Option<&Rs>,
    terminating_gate: bool,
    rollout: bool,
    now: jiff::Timestamp,
) -> StatusStep {
    let status = if rollout {
        status::rollout_status(d, all, new, terminating_gate, now)
    } else {
        status::calculate_status(d, all, new, terminating_gate, now)
    };
    if status != Status::of(d) {
        return StatusStep::Write(status);
    }
    if !rollout {
        return StatusStep::Unchanged;
    }
    match status::progress_check(d, &status, now) {
        ProgressCheck::None => StatusStep::Unchanged,
        check => StatusStep::Recheck(check),
    }
}

#[cfg(test)]
mod step_tests;
#[cfg(test)]
mod tests;
