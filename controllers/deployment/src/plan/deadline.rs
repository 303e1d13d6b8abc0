//! PURE: rkcm's own remedy, not upstream's: the rollback of a Deployment whose rollout passed
//! its progress deadline. Upstream only sets `Progressing=False/ProgressDeadlineExceeded` and
//! leaves the Deployment on the broken ReplicaSet (kubernetes/kubernetes#23211, left to
//! "higher-level tools"); asked to (the annotation [`OPT_IN`] or the manager's flag), rkcm then
//! does what `kubectl rollout undo` does (`staging/src/k8s.io/kubectl/pkg/polymorphichelpers/
//! rollback.go`, `DeploymentRollbacker`): the previous revision's template, without the
//! `pod-template-hash` label, and its annotations become the Deployment's, and the controller
//! then reuses that ReplicaSet under the next revision number.
//!
//! The rule, checked in this order ([`deadline_rollback`]):
//! 1. Asked: the annotation says `"true"`, or it is absent (or another value) and the manager's
//!    flag is on; `"false"` opts one Deployment out.
//! 2. Not paused (a person paused it: left alone), not being deleted, no
//!    `deprecated.deployment.rollback.to` request (those routes never reach this).
//! 3. The status is about the current spec (`observedGeneration` ≥ `generation`) and its
//!    `Progressing` condition is `False/ProgressDeadlineExceeded` with upstream's message
//!    about the current new ReplicaSet, so a condition left from an earlier revision (a
//!    person rolled on before any progress) does not count.
//!    The new ReplicaSet is at least `progressDeadlineSeconds` old: upstream keeps an
//!    unchanged `NewReplicaSetCreated` condition (same status and reason) with its old time
//!    when the next new ReplicaSet is created, so a rollout that follows a stalled one can
//!    time out at once; rkcm waits until it had its whole deadline.
//! 4. The current revision `R` (the new ReplicaSet's) is not [`ROLLED_BACK_FROM`] (rolled back
//!    once already) and is not the rollback's own result, [`ROLLED_BACK_FROM`] + 1 on the
//!    reused ReplicaSet of the target (it has a `revision-history`): the revision a rollback
//!    itself becomes is never rolled back, so a rollback target that also stalls stays as
//!    upstream leaves it (no rollback loop, even across restarts: the record is on the
//!    Deployment). A person's later rollout has a higher number, or that same number on a
//!    ReplicaSet of its own when the person changed the template before the rollback's
//!    revision was assigned (the simulator found it: `rkcm-sim --controller
//!    deployment-rollback --seed 326`), and may be rolled back once, even to a template that
//!    was rolled back before (a new revision is a new rollout).
//! 5. The target is the last revision that worked: the old ReplicaSet with the highest
//!    revision among those with available pods now (its template ran and passed readiness
//!    and `minReadySeconds`), never the revision rolled back from. A rolling update keeps
//!    the old pods that work until new ones are available, so when no old ReplicaSet has an
//!    available pod, no revision is known to work (the Deployment was scaled to zero, or
//!    every older template is broken too) and rkcm leaves the Deployment as upstream does.
//!    The `Recreate` strategy scales every old ReplicaSet down before the new one starts:
//!    there the target is the old one with the highest revision (`kubectl rollout undo`'s
//!    choice: the revision the rollout started from). "Was it complete?" is recorded
//!    nowhere upstream, and the revision a rollout started from need not have worked: a
//!    person may have rolled on from a broken template before it failed (the simulator found
//!    it: `rkcm-sim --controller deployment-rollback --seed 130` and `--seed 221` rolled back
//!    to such a template, which then stayed, as a rollback's own result is never rolled
//!    back).
//!
//! The one write is a `PUT deployments` of the cached copy (its resourceVersion, so a change
//! since, such as a pause, makes it conflict and the next sync decides again) with
//! [`FIELD_MANAGER`]; the annotations are the target's as `kubectl rollout undo` computes
//! them, plus the Deployment's own `rkcm.io/` annotations with [`ROLLED_BACK_FROM`] set to
//! `R`. Then a Warning event [`EVENT_REASON`], and the condition's message says so.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;

use super::Event;
use crate::consts::remedy::{self, OPT_IN, PREFIX, ROLLED_BACK_FROM};
use crate::consts::{annotations, conditions as ct, messages, reasons};
use crate::model::{self, Rs};
use crate::revision;
use crate::status::{Status, to_seconds};

/// Whether the rollback on progress deadline is on for `d`: its annotation [`OPT_IN`]
/// (`"true"`/`"false"`), else `manager_default` (`--rkcm-deployment-rollback-on-progress-deadline`).
pub fn enabled(d: &Deployment, manager_default: bool) -> bool {
    // Mutant (sim only): every Deployment counts as opted in.
    if rkcm_runtime::mutants::on("deployment-rollback-ignores-opt-in") {
        return true;
    }
    match model::annotation(&d.metadata, OPT_IN) {
        Some("true") => true,
        Some("false") => false,
        _ => manager_default,
    }
}

/// The revision rkcm rolled `d` back from, if it did.
pub fn rolled_back_from(d: &Deployment) -> Option<i64> {
    model::annotation(&d.metadata, ROLLED_BACK_FROM).and_then(|v| v.parse().ok())
}

/// What the remedy decides for one Deployment now.
#[derive(Debug, Clone, PartialEq)]
pub enum DeadlineRollback {
    /// Not asked for (annotation `"false"`, or absent with the flag off).
    Off,
    /// Paused by a person: left alone.
    Paused,
    /// No timed-out rollout of the current revision (or the status is behind the spec).
    NotTimedOut,
    /// Revision `revision` was rolled back from already: never twice.
    AlreadyRolledBack { revision: i64 },
    /// Revision `revision` is the rollback from `from` itself: never rolled back.
    IsRollback { revision: i64, from: i64 },
    /// No older revision to return to that is known to work (a rolling update: none with
    /// available pods).
    NoTarget { revision: i64 },
    /// Timed out before the new ReplicaSet was `progressDeadlineSeconds` old (upstream keeps
    /// an unchanged `NewReplicaSetCreated` condition's old time for the next new ReplicaSet,
    /// which can then time out at once): look again after this long.
    TooEarly {
        revision: i64,
        after: std::time::Duration,
    },
    /// Roll back.
    Roll(Box<Rollback>),
}

/// The rollback to perform.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollback {
    /// The working copy to `PUT`: the target's template (no hash label) and annotations,
    /// the Deployment's `rkcm.io/` annotations, [`ROLLED_BACK_FROM`] = `from`.
    pub deployment: Box<Deployment>,
    pub from: i64,
    pub to: i64,
    /// The target ReplicaSet's name.
    pub target: String,
    /// [`EVENT_REASON`](remedy::EVENT_REASON), a Warning.
    pub event: Event,
    /// The status with the `Progressing` condition's message saying what rkcm did, written
    /// after the rollback.
    pub status: Status,
}

/// The timed-out `Progressing` condition about `new` (about any ReplicaSet when not
/// `about_new`), when the status is about the current spec.
fn timed_out_on(d: &Deployment, new: &Rs, about_new: bool) -> Option<String> {
    let status = Status::of(d);
    if status.observed_generation < d.metadata.generation.unwrap_or(0) {
        return None;
    }
    let cond = status.condition(ct::PROGRESSING)?;
    let message = messages::timed_out(Some(model::rs_name(new)), model::name_of(&d.metadata));
    (cond.status == ct::FALSE
        && cond.reason == reasons::TIMED_OUT
        && (!about_new || cond.message == message))
        .then(|| cond.message.clone())
}

/// How long until `new` is `progressDeadlineSeconds` old, when it is not yet: a rollout is
/// rolled back only after it had its whole deadline. A reused ReplicaSet is older than that.
fn too_early(d: &Deployment, new: &Rs, now: jiff::Timestamp) -> Option<std::time::Duration> {
    let deadline = model::progress_deadline(d)?;
    let created = new.metadata.creation_timestamp.as_ref()?.0;
    let due = created
        .checked_add(jiff::SignedDuration::from_secs(i64::from(deadline)))
        .ok()?;
    let left = due.duration_since(now);
    (left > jiff::SignedDuration::ZERO).then(|| {
        std::time::Duration::try_from(left)
            .unwrap_or_default()
            .saturating_add(crate::consts::PROGRESS_CHECK_PAD)
    })
}

/// Whether `rs` served revision `rev` (its revision, or one in its `revision-history`).
fn served(rs: &Rs, rev: i64) -> bool {
    revision::revision(rs).is_ok_and(|r| r == rev)
        || model::annotation(&rs.metadata, annotations::REVISION_HISTORY).is_some_and(|h| {
            h.split(',')
                .any(|v| v.trim().parse::<i64>().is_ok_and(|r| r == rev))
        })
}

/// Whether `rs` served an earlier revision (it has a `revision-history`): a rollback reuses
/// its target's ReplicaSet, while a person's new template gets a ReplicaSet of its own.
fn reused(rs: &Rs) -> bool {
    model::annotation(&rs.metadata, annotations::REVISION_HISTORY).is_some_and(|h| !h.is_empty())
}

/// The old ReplicaSet to return to, other than the one rolled back from: the highest
/// revision with available pods; with `recreate`, else the highest revision.
fn target(old: &[Rs], bad: Option<i64>, recreate: bool) -> Option<(Rs, i64)> {
    let candidates: Vec<(&Rs, i64)> = old
        .iter()
        .filter(|rs| rs.spec.template.is_some())
        .filter(|rs| bad.is_none_or(|b| !served(rs, b)))
        .filter_map(|rs| revision::revision(rs).ok().map(|r| (rs, r)))
        .filter(|(_, r)| *r > 0)
        .collect();
    let available = |rs: &Rs| {
        rs.status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0)
            > 0
    };
    // Mutant (sim only): `kubectl rollout undo`'s choice, worked or not.
    let undo_only = rkcm_runtime::mutants::on("deployment-rollback-to-unavailable");
    let newest = || candidates.iter().max_by_key(|(_, r)| *r);
    let pick = if undo_only {
        newest()
    } else {
        candidates
            .iter()
            .filter(|(rs, _)| available(rs))
            .max_by_key(|(_, r)| *r)
            .or_else(|| if recreate { newest() } else { None })
    };
    pick.map(|(rs, r)| ((*rs).clone(), *r))
}

/// The decision for `d` with its new and old ReplicaSets, `manager_default` being the flag.
pub fn deadline_rollback(
    d: &Deployment,
    new: Option<&Rs>,
    old: &[Rs],
    manager_default: bool,
    now: jiff::Timestamp,
) -> DeadlineRollback {
    if !enabled(d, manager_default) {
        return DeadlineRollback::Off;
    }
    if model::is_paused(d) {
        return DeadlineRollback::Paused;
    }
    if d.metadata.deletion_timestamp.is_some() || revision::rollback_to(d).is_some() {
        return DeadlineRollback::NotTimedOut;
    }
    let Some(new) = new else {
        return DeadlineRollback::NotTimedOut;
    };
    let Some(revision) = revision::revision(new).ok().filter(|r| *r > 0) else {
        return DeadlineRollback::NotTimedOut;
    };
    // Mutant (sim only): the record of earlier rollbacks is ignored, and so is whether the
    // condition is about this revision.
    let no_memory = rkcm_runtime::mutants::on("deployment-rollback-loop");
    let Some(timed_out) = timed_out_on(d, new, !no_memory) else {
        return DeadlineRollback::NotTimedOut;
    };
    let bad = rolled_back_from(d);
    if !no_memory && let Some(from) = bad {
        if from == revision {
            return DeadlineRollback::AlreadyRolledBack { revision };
        }
        if from.checked_add(1) == Some(revision) && reused(new) {
            return DeadlineRollback::IsRollback { revision, from };
        }
    }
    if let Some(after) = too_early(d, new, now) {
        return DeadlineRollback::TooEarly { revision, after };
    }
    let recreate = !model::is_rolling(d);
    let Some((rs, to)) = target(old, if no_memory { None } else { bad }, recreate) else {
        return DeadlineRollback::NoTarget { revision };
    };
    DeadlineRollback::Roll(Box::new(rollback(d, &rs, revision, to, &timed_out, now)))
}

/// The rollback of `d` (at revision `from`) to `rs` (revision `to`).
fn rollback(
    d: &Deployment,
    rs: &Rs,
    from: i64,
    to: i64,
    timed_out: &str,
    now: jiff::Timestamp,
) -> Rollback {
    let mut working = d.clone();
    working.spec.template = rs
        .spec
        .template
        .as_ref()
        .map(model::template_without_hash)
        .unwrap_or_default();
    // `kubectl rollout undo`'s annotations: the Deployment's skipped ones, the revision's
    // others; then rkcm's own, from the Deployment, so the opt-in and the record stay.
    revision::set_deployment_annotations_to(&mut working, rs);
    let own: BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let annotations = working
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    annotations.retain(|k, _| !k.starts_with(PREFIX));
    annotations.extend(own);
    annotations.insert(ROLLED_BACK_FROM.to_owned(), from.to_string());
    let target = model::rs_name(rs).to_owned();
    let mut status = Status::of(d);
    if let Some(cond) = status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == ct::PROGRESSING)
    {
        cond.message = remedy::condition(timed_out, to, &target);
        cond.last_update_time = Some(to_seconds(now));
    }
    let deadline = model::progress_deadline(d).unwrap_or(0);
    Rollback {
        event: Event::warning(
            remedy::EVENT_REASON,
            remedy::rolled_back(model::name_of(&d.metadata), from, to, &target, deadline),
        ),
        deployment: Box::new(working),
        from,
        to,
        target,
        status,
    }
}

#[cfg(test)]
mod tests;
