//! PURE: Deployment status and conditions (upstream
//! `pkg/controller/deployment/sync.go`, `progress.go` and `util/deployment_util.go`).
//!
//! Mirrors `calculateStatus` and `checkPausedConditions` of `sync.go`, `syncRolloutStatus`,
//! `getReplicaFailures` and `requeueStuckDeployment` of `progress.go`, and the condition
//! helpers and `DeploymentComplete` / `DeploymentProgressing` / `DeploymentTimedOut` of
//! `deployment_util.go`.
//!
//! [`Status`] is the status with Go's zero values for absent fields, so that "nothing
//! changed" is a plain equality, as upstream's `reflect.DeepEqual` of the two statuses.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::consts::{conditions as ct, messages, reasons};
use crate::model::{self, Rs};
use crate::replicas;

/// One Deployment condition; empty strings stand for absent fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Condition {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_update_time: Option<jiff::Timestamp>,
    pub last_transition_time: Option<jiff::Timestamp>,
}

impl Condition {
    /// A condition as the API gives it (Go zero values for absent fields).
    fn of(c: &DeploymentCondition) -> Self {
        let text = |s: &Option<String>| s.clone().unwrap_or_default();
        Self {
            type_: text(&c.type_),
            status: text(&c.status),
            reason: text(&c.reason),
            message: text(&c.message),
            last_update_time: c.last_update_time.as_ref().map(|t| t.0),
            last_transition_time: c.last_transition_time.as_ref().map(|t| t.0),
        }
    }
}

/// A Deployment status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub observed_generation: i64,
    pub replicas: i32,
    pub updated_replicas: i32,
    pub ready_replicas: i32,
    pub available_replicas: i32,
    pub unavailable_replicas: i32,
    pub terminating_replicas: Option<i32>,
    pub collision_count: Option<i32>,
    pub conditions: Vec<Condition>,
}

/// Object timestamps have whole seconds on the wire; conditions are made with the same
/// precision so that a status read back compares equal to the one written.
pub fn to_seconds(t: jiff::Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::from_second(t.as_second()).unwrap_or(t)
}

impl Status {
    /// Whether replacing `self` by `new` changes nothing but the count of terminating pods:
    /// such a write is paced more coarsely
    /// ([`rkcm_runtime::queue::pacing::StatusPacer::hold_slow`]).
    pub fn only_terminating_moved(&self, new: &Status) -> bool {
        self.terminating_replicas != new.terminating_replicas
            && *self
                == (Status {
                    terminating_replicas: self.terminating_replicas,
                    ..new.clone()
                })
    }

    /// The status of `d` (Go zero values for absent fields).
    pub fn of(d: &Deployment) -> Self {
        let Some(s) = &d.status else {
            return Self::default();
        };
        Self {
            observed_generation: s.observed_generation.unwrap_or(0),
            replicas: s.replicas.unwrap_or(0),
            updated_replicas: s.updated_replicas.unwrap_or(0),
            ready_replicas: s.ready_replicas.unwrap_or(0),
            available_replicas: s.available_replicas.unwrap_or(0),
            unavailable_replicas: s.unavailable_replicas.unwrap_or(0),
            terminating_replicas: s.terminating_replicas,
            collision_count: s.collision_count,
            conditions: s.conditions.iter().flatten().map(Condition::of).collect(),
        }
    }

    /// The API form.
    pub fn to_api(&self) -> DeploymentStatus {
        let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        DeploymentStatus {
            observed_generation: Some(self.observed_generation),
            replicas: Some(self.replicas),
            updated_replicas: Some(self.updated_replicas),
            ready_replicas: Some(self.ready_replicas),
            available_replicas: Some(self.available_replicas),
            unavailable_replicas: Some(self.unavailable_replicas),
            terminating_replicas: self.terminating_replicas,
            collision_count: self.collision_count,
            conditions: (!self.conditions.is_empty()).then(|| {
                self.conditions
                    .iter()
                    .map(|c| DeploymentCondition {
                        type_: text(&c.type_),
                        status: text(&c.status),
                        reason: text(&c.reason),
                        message: text(&c.message),
                        last_update_time: c.last_update_time.map(Time),
                        last_transition_time: c.last_transition_time.map(Time),
                    })
                    .collect()
            }),
        }
    }

    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// `SetDeploymentCondition`: same status and reason is a no-op (timestamps kept); same
    /// status with another reason keeps `lastTransitionTime`; the condition moves to the end.
    pub fn set_condition(&mut self, mut cond: Condition) {
        if let Some(current) = self.condition(&cond.type_) {
            if current.status == cond.status && current.reason == cond.reason {
                return;
            }
            if current.status == cond.status {
                cond.last_transition_time = current.last_transition_time;
            }
        }
        self.remove_condition(&cond.type_.clone());
        self.conditions.push(cond);
    }

    pub fn remove_condition(&mut self, type_: &str) {
        self.conditions.retain(|c| c.type_ != type_);
    }
}

/// `NewDeploymentCondition`: both times now. Messages are mostly formatted for the call, so
/// an owned one is moved in.
pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    now: jiff::Timestamp,
) -> Condition {
    let now = to_seconds(now);
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        last_update_time: Some(now),
        last_transition_time: Some(now),
    }
}

/// `calculateStatus`: counts over all ReplicaSets (new one included), the carried-over
/// conditions and `collisionCount`, and the `Available` condition.
pub fn calculate_status(
    d: &Deployment,
    all: &[Rs],
    new: Option<&Rs>,
    terminating_gate: bool,
    now: jiff::Timestamp,
) -> Status {
    let current = Status::of(d);
    let available = model::sum_available(all);
    let total_spec = model::sum_spec(all);
    let mut status = Status {
        observed_generation: d.metadata.generation.unwrap_or(0),
        replicas: model::sum_status(all),
        updated_replicas: new.map_or(0, |rs| model::status_replicas(rs)),
        ready_replicas: model::sum_ready(all),
        available_replicas: available,
        // Negative while scaling down with more available than wanted.
        unavailable_replicas: (total_spec - available).max(0),
        terminating_replicas: if terminating_gate {
            model::sum_terminating(all)
        } else {
            None
        },
        collision_count: current.collision_count,
        conditions: current.conditions,
    };
    if available >= model::desired(d) - replicas::max_unavailable(d) {
        status.set_condition(new_condition(
            ct::AVAILABLE,
            ct::TRUE,
            reasons::MINIMUM_REPLICAS_AVAILABLE,
            messages::MINIMUM_AVAILABLE,
            now,
        ));
    } else {
        status.set_condition(new_condition(
            ct::AVAILABLE,
            ct::FALSE,
            reasons::MINIMUM_REPLICAS_UNAVAILABLE,
            messages::MINIMUM_UNAVAILABLE,
            now,
        ));
    }
    status
}

/// `DeploymentComplete`: every replica updated and available, and the spec observed.
pub fn deployment_complete(d: &Deployment, s: &Status) -> bool {
    let desired = model::desired(d);
    s.updated_replicas == desired
        && s.replicas == desired
        && s.available_replicas == desired
        && s.observed_generation >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: compared with the stored status, more updated, fewer old, more
/// ready or more available replicas.
pub fn deployment_progressing(old: &Status, new: &Status) -> bool {
    let old_old = old.replicas - old.updated_replicas;
    let new_old = new.replicas - new.updated_replicas;
    new.updated_replicas > old.updated_replicas
        || new_old < old_old
        || new.ready_replicas > old.ready_replicas
        || new.available_replicas > old.available_replicas
}

fn deadline_passed(from: jiff::Timestamp, seconds: i32, now: jiff::Timestamp) -> bool {
    from.checked_add(jiff::SignedDuration::from_secs(i64::from(seconds)))
        .is_ok_and(|due| due < now)
}

/// `DeploymentTimedOut`: the `Progressing` condition of `s` is not complete and either
/// already timed out or not updated for `progressDeadlineSeconds`.
pub fn deployment_timed_out(d: &Deployment, s: &Status, now: jiff::Timestamp) -> bool {
    let Some(deadline) = model::progress_deadline(d) else {
        return false;
    };
    let Some(cond) = s.condition(ct::PROGRESSING) else {
        return false;
    };
    if cond.reason == reasons::NEW_RS_AVAILABLE {
        return false;
    }
    if cond.reason == reasons::TIMED_OUT {
        return true;
    }
    // Go's zero time is long past.
    let from = cond.last_update_time.unwrap_or(jiff::Timestamp::MIN);
    deadline_passed(from, deadline, now)
}

/// `getReplicaFailures`: the new ReplicaSet's `ReplicaFailure` conditions, else those of all.
fn replica_failures(all: &[Rs], new: Option<&Rs>) -> Vec<Condition> {
    let of = |rs: &Rs| -> Vec<Condition> {
        rs.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.type_.as_deref() == Some(ct::REPLICA_FAILURE))
            .map(|c| {
                let t = c.last_transition_time.as_ref().map(|t| t.0);
                Condition {
                    type_: c.type_.clone().unwrap_or_default(),
                    status: c.status.clone().unwrap_or_default(),
                    reason: c.reason.clone().unwrap_or_default(),
                    message: c.message.clone().unwrap_or_default(),
                    last_update_time: t,
                    last_transition_time: t,
                }
            })
            .collect()
    };
    let from_new = new.map(of).unwrap_or_default();
    if !from_new.is_empty() {
        return from_new;
    }
    all.iter().flat_map(of).collect()
}

/// `syncRolloutStatus` minus the write: the status with progress evaluated and
/// `ReplicaFailure` mirrored.
pub fn rollout_status(
    d: &Deployment,
    all: &[Rs],
    new: Option<&Rs>,
    terminating_gate: bool,
    now: jiff::Timestamp,
) -> Status {
    let current = Status::of(d);
    let mut status = calculate_status(d, all, new, terminating_gate, now);
    let deadline = model::progress_deadline(d).is_some();
    if !deadline {
        status.remove_condition(ct::PROGRESSING);
    }
    let current_cond = current.condition(ct::PROGRESSING);
    let complete = status.replicas == status.updated_replicas
        && current_cond.is_some_and(|c| c.reason == reasons::NEW_RS_AVAILABLE);
    let new_name = new.map(|rs| model::rs_name(rs));
    let d_name = model::name_of(&d.metadata);
    if deadline && !complete {
        if deployment_complete(d, &status) {
            status.set_condition(new_condition(
                ct::PROGRESSING,
                ct::TRUE,
                reasons::NEW_RS_AVAILABLE,
                messages::progressed(new_name, d_name),
                now,
            ));
        } else if deployment_progressing(&current, &status) {
            // Replaced rather than set, so that lastUpdateTime moves even with an unchanged
            // reason: progress restarts the deadline clock.
            let mut cond = new_condition(
                ct::PROGRESSING,
                ct::TRUE,
                reasons::REPLICA_SET_UPDATED,
                messages::progressing(new_name, d_name),
                now,
            );
            if let Some(c) = current_cond {
                if c.status == ct::TRUE {
                    cond.last_transition_time = c.last_transition_time;
                }
                status.remove_condition(ct::PROGRESSING);
            }
            status.set_condition(cond);
        } else if deployment_timed_out(d, &status, now) {
            status.set_condition(new_condition(
                ct::PROGRESSING,
                ct::FALSE,
                reasons::TIMED_OUT,
                messages::timed_out(new_name, d_name),
                now,
            ));
        }
    }
    match replica_failures(all, new).into_iter().next() {
        Some(failure) => status.set_condition(failure),
        None => status.remove_condition(ct::REPLICA_FAILURE),
    }
    status
}

/// What to do so that an unchanged, still-progressing rollout is re-checked when its
/// deadline passes (`requeueStuckDeployment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressCheck {
    /// No deadline, no condition yet, complete, or already timed out.
    None,
    /// The deadline is (almost) due: requeue with the rate limiter.
    Now,
    /// Requeue after this long (the remaining time plus a second of slack).
    After(Duration),
}

/// `requeueStuckDeployment` for the stored status of `d` and the (equal) new status.
pub fn progress_check(d: &Deployment, new: &Status, now: jiff::Timestamp) -> ProgressCheck {
    let current = Status::of(d);
    let (Some(deadline), Some(cond)) = (
        model::progress_deadline(d),
        current.condition(ct::PROGRESSING),
    ) else {
        return ProgressCheck::None;
    };
    if deployment_complete(d, new) || cond.reason == reasons::TIMED_OUT {
        return ProgressCheck::None;
    }
    let from = cond.last_update_time.unwrap_or(jiff::Timestamp::MIN);
    let due = from
        .checked_add(jiff::SignedDuration::from_secs(i64::from(deadline)))
        .unwrap_or(jiff::Timestamp::MAX);
    let after = due.duration_since(now);
    if after < jiff::SignedDuration::from_secs(1) {
        return ProgressCheck::Now;
    }
    let after = Duration::try_from(after).unwrap_or(Duration::MAX);
    ProgressCheck::After(after.saturating_add(crate::consts::PROGRESS_CHECK_PAD))
}

/// `checkPausedConditions`: the status with `Progressing=Unknown/DeploymentPaused` (or
/// `DeploymentResumed`) when the pause state changed; `None` when nothing is to be written.
/// A timed-out condition is never overwritten.
pub fn paused_conditions(d: &Deployment, now: jiff::Timestamp) -> Option<Status> {
    model::progress_deadline(d)?;
    let mut status = Status::of(d);
    let cond = status.condition(ct::PROGRESSING);
    if cond.is_some_and(|c| c.reason == reasons::TIMED_OUT) {
        return None;
    }
    let paused_cond = cond.is_some_and(|c| c.reason == reasons::PAUSED);
    let paused = model::is_paused(d);
    if paused && !paused_cond {
        status.set_condition(new_condition(
            ct::PROGRESSING,
            ct::UNKNOWN,
            reasons::PAUSED,
            messages::PAUSED,
            now,
        ));
        Some(status)
    } else if !paused && paused_cond {
        status.set_condition(new_condition(
            ct::PROGRESSING,
            ct::UNKNOWN,
            reasons::RESUMED,
            messages::RESUMED,
            now,
        ));
        Some(status)
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
