//! PURE: what the Deployment controller would do with one Deployment now, and what it waits
//! on (`rkcm explain deployment/NS/NAME`), from the Deployment and its claimed ReplicaSets,
//! through the same plan functions the sync runs ([`crate::plan`]).
//!
//! Reason codes:
//! - `Paused`: `spec.paused` with a rollout not finished; nothing rolls until it is resumed.
//! - `ProgressDeadlineExceeded`: the `Progressing` condition says the rollout made no progress
//!   for `progressDeadlineSeconds`; the controller keeps the budget where it is.
//! - `NewPodsUnavailable`: a rolling update that has used its `maxSurge` and
//!   `maxUnavailable` budget waits for pods of the new ReplicaSet to become available.
//! - `OldPodsRunning`: a `Recreate` rollout waits for the old ReplicaSets' pods to be gone.
//! - `ReplicaSetCreateFailed`: the `ReplicaFailure` condition holds the API server's refusal.
//!
//! rkcm's opt-in rollback on progress deadline ([`crate::plan::deadline`]): a timed-out
//! rollout's `ProgressDeadlineExceeded` message says whether it is on for the Deployment and
//! what it did or will do; the rollback itself is the next action when it will.

use std::collections::HashMap;

use k8s_openapi::api::apps::v1::Deployment;
use rkcm_runtime::explain::{Explanation, ObjectRef, State, Waiting};

use crate::NAME;
use crate::consts::{conditions as ct, reasons};
use crate::model::{self, Rs};
use crate::plan::{self, RecreateStep, RollingStep, Snapshot};
use crate::replicas;
use crate::status::{Status, deployment_complete};

fn rs_ref(rs: &Rs) -> String {
    format!("ReplicaSet/{}", model::rs_name(rs))
}

fn rfc3339(t: Option<jiff::Timestamp>) -> Option<String> {
    t.map(|t| t.to_string())
}

/// What one explanation reads, split once.
struct Seen<'a> {
    d: &'a Deployment,
    all: &'a [Rs],
    new: Option<Rs>,
    old: Vec<Rs>,
    status: Status,
    complete: bool,
    /// `--rkcm-deployment-rollback-on-progress-deadline`.
    rollback_default: bool,
    now: jiff::Timestamp,
}

/// The explanation for `d` with the ReplicaSets it owns (`rss`), at `now`, with the
/// manager's defaults (rkcm's rollback on progress deadline off unless annotated).
pub fn explain(d: &Deployment, rss: &[Rs], now: jiff::Timestamp) -> Explanation {
    explain_with(d, rss, false, now)
}

/// [`explain`] with the manager's `--rkcm-deployment-rollback-on-progress-deadline`.
pub fn explain_with(
    d: &Deployment,
    rss: &[Rs],
    rollback_default: bool,
    now: jiff::Timestamp,
) -> Explanation {
    let name = model::name_of(&d.metadata).to_owned();
    let mut e = Explanation {
        object: ObjectRef {
            kind: "Deployment".into(),
            namespace: d.metadata.namespace.clone().unwrap_or_default(),
            name: name.clone(),
        },
        controller: NAME,
        state: State::Settled,
        actions: Vec::new(),
        waiting_on: Vec::new(),
        remedies: Vec::new(),
    };
    let (new, old) = model::split(d, rss);
    let status = Status::of(d);
    let complete = new.is_some()
        && deployment_complete(d, &status)
        && old.iter().all(|rs| model::replicas(rs) == 0);
    let seen = Seen {
        d,
        all: rss,
        new,
        old,
        status,
        complete,
        rollback_default,
        now,
    };
    replica_failure(&mut e, &seen.status);
    if model::is_paused(d) {
        paused(&mut e, &seen, &name);
        return e;
    }
    if seen.complete && e.waiting_on.is_empty() {
        return e;
    }
    match &seen.new {
        None => {
            e.state = State::Acting;
            e.actions
                .push("create the ReplicaSet of the current template".into());
        }
        Some(new_rs) if model::is_rolling(d) => rolling(&mut e, &seen, new_rs),
        Some(_) => recreate(&mut e, &seen),
    }
    deadline(&mut e, &seen, &name);
    e
}

fn replica_failure(e: &mut Explanation, status: &Status) {
    if let Some(c) = status.condition(ct::REPLICA_FAILURE)
        && c.status == ct::TRUE
    {
        e.waiting_on.push(Waiting {
            reason: "ReplicaSetCreateFailed",
            message: c.message.clone(),
            objects: Vec::new(),
            since: rfc3339(c.last_transition_time),
        });
        e.remedies.push(
            "fix what the API server refused (quota, admission policy), then the controller retries"
                .into(),
        );
    }
}

fn paused(e: &mut Explanation, seen: &Seen<'_>, name: &str) {
    if seen.complete {
        return;
    }
    e.state = State::Stalled;
    e.waiting_on.push(Waiting {
        reason: "Paused",
        message: format!(
            "the Deployment is paused with {} of {} replicas updated",
            seen.status.updated_replicas,
            model::desired(seen.d)
        ),
        objects: Vec::new(),
        since: seen
            .status
            .condition(ct::PROGRESSING)
            .filter(|c| c.reason == reasons::PAUSED)
            .and_then(|c| rfc3339(c.last_transition_time)),
    });
    e.remedies
        .push(format!("kubectl rollout resume deployment/{name}"));
}

fn scale_actions(e: &mut Explanation, ops: &[plan::ScaleOp]) {
    e.state = State::Acting;
    for op in ops {
        e.actions.push(format!(
            "scale ReplicaSet/{} from {} to {}",
            op.name, op.from, op.to
        ));
    }
}

fn rolling(e: &mut Explanation, seen: &Seen<'_>, new_rs: &Rs) {
    let none = HashMap::new();
    let snap = Snapshot {
        deployment: seen.d,
        new: Some(new_rs),
        old: &seen.old,
        pods: &none,
        pods_seen_at: None,
    };
    match plan::rolling_step(&snap, new_rs) {
        Err(message) => {
            e.state = State::Stalled;
            e.waiting_on.push(Waiting {
                reason: "InvalidStrategy",
                message,
                objects: Vec::new(),
                since: None,
            });
            e.remedies
                .push("correct spec.strategy.rollingUpdate".into());
        }
        Ok(RollingStep::ScaleNew(op)) => scale_actions(e, &[op]),
        Ok(RollingStep::ScaleDownOld { step, .. }) => scale_actions(e, &step.ops),
        Ok(RollingStep::Cleanup(_)) => {
            if !seen.complete {
                e.state = State::Waiting;
                e.waiting_on.push(new_pods_unavailable(seen, new_rs));
            }
        }
    }
}

fn recreate(e: &mut Explanation, seen: &Seen<'_>) {
    let none = HashMap::new();
    let snap = Snapshot {
        deployment: seen.d,
        new: seen.new.as_ref(),
        old: &seen.old,
        pods: &none,
        pods_seen_at: None,
    };
    match plan::recreate_step(&snap) {
        RecreateStep::ScaleDownOld(ops) => scale_actions(e, &ops),
        RecreateStep::ScaleNew { op: Some(op), .. } => scale_actions(e, &[op]),
        RecreateStep::WaitForOldPods | RecreateStep::CreateNew => {
            let running: Vec<String> = seen
                .old
                .iter()
                .filter(|rs| model::status_replicas(rs) > 0)
                .map(rs_ref)
                .collect();
            if !running.is_empty() {
                e.state = State::Waiting;
                e.waiting_on.push(Waiting {
                    reason: "OldPodsRunning",
                    message: "a Recreate rollout starts new pods once every old pod is gone".into(),
                    objects: running,
                    since: None,
                });
            }
        }
        RecreateStep::ScaleNew { op: None, .. } => {
            if !seen.complete
                && let Some(new_rs) = &seen.new
            {
                e.state = State::Waiting;
                e.waiting_on.push(new_pods_unavailable(seen, new_rs));
            }
        }
    }
}

/// A passed progress deadline comes first; a wait on new pods gets its remedies.
fn deadline(e: &mut Explanation, seen: &Seen<'_>, name: &str) {
    if let Some(c) = seen.status.condition(ct::PROGRESSING)
        && c.reason == reasons::TIMED_OUT
    {
        let remedy = deadline_remedy(e, seen);
        e.state = if remedy.1 {
            State::Acting
        } else {
            State::Stalled
        };
        let remedy = remedy.0;
        e.waiting_on.insert(
            0,
            Waiting {
                reason: "ProgressDeadlineExceeded",
                message: format!(
                    "no progress for {}s (progressDeadlineSeconds): {}; {remedy}",
                    model::progress_deadline(seen.d).unwrap_or(0),
                    c.message
                ),
                objects: seen.new.iter().map(rs_ref).collect(),
                since: rfc3339(c.last_transition_time),
            },
        );
    }
    let on_new_pods = e
        .waiting_on
        .iter()
        .any(|w| matches!(w.reason, "NewPodsUnavailable" | "ProgressDeadlineExceeded"));
    if !on_new_pods {
        return;
    }
    if let Some(new_rs) = &seen.new {
        let hash = new_rs
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::consts::POD_TEMPLATE_HASH_LABEL))
            .map_or("", String::as_str);
        e.remedies.push(format!(
            "see why the new pods are not available: kubectl describe pods -l pod-template-hash={hash}"
        ));
    }
    e.remedies
        .push(format!("roll back: kubectl rollout undo deployment/{name}"));
}

/// What rkcm's rollback on progress deadline does about a timed-out rollout, in words, and
/// whether it acts; a rollback to make becomes the first action.
fn deadline_remedy(e: &mut Explanation, seen: &Seen<'_>) -> (String, bool) {
    use plan::deadline::DeadlineRollback as D;
    let text = match plan::deadline::deadline_rollback(
        seen.d,
        seen.new.as_ref(),
        &seen.old,
        seen.rollback_default,
        seen.now,
    ) {
        D::Off => {
            "rollback on progress deadline: off (upstream's behaviour: nothing happens)".into()
        }
        D::Paused => {
            "rollback on progress deadline: on, but a paused Deployment is left alone".into()
        }
        D::NotTimedOut => format!(
            "rollback on progress deadline: on; {}",
            match plan::deadline::rolled_back_from(seen.d) {
                Some(from) => format!("rkcm rolled back from revision {from} already"),
                None => "the condition is not about the current revision, so no rollback".into(),
            }
        ),
        D::AlreadyRolledBack { revision } => format!(
            "rollback on progress deadline: on; revision {revision} was rolled back from once, never again"
        ),
        D::IsRollback { revision, from } => format!(
            "rollback on progress deadline: on; revision {revision} is rkcm's rollback from revision {from} and is not rolled back again"
        ),
        D::TooEarly { revision, after } => format!(
            "rollback on progress deadline: on; revision {revision} is rolled back if it still makes no progress in {}s, when its ReplicaSet had its whole deadline",
            after.as_secs()
        ),
        D::NoTarget { revision } => format!(
            "rollback on progress deadline: on; revision {revision} has no older revision known to work to return to (with RollingUpdate, one with available pods)"
        ),
        D::Roll(r) => {
            e.actions.insert(
                0,
                format!(
                    "roll back from revision {} to revision {} (ReplicaSet/{}): rkcm's rollback on progress deadline",
                    r.from, r.to, r.target
                ),
            );
            return (
                format!(
                    "rollback on progress deadline: on; rolling back to revision {}",
                    r.to
                ),
                true,
            );
        }
    };
    (text, false)
}

/// The rolling budget as it stands, with the new ReplicaSet's availability and the time left
/// before the progress deadline.
fn new_pods_unavailable(seen: &Seen<'_>, new: &Rs) -> Waiting {
    let (d, status, all, now) = (seen.d, &seen.status, seen.all, seen.now);
    let desired = model::desired(d);
    let progressing = status.condition(ct::PROGRESSING);
    let deadline = match (model::progress_deadline(d), progressing) {
        (Some(secs), Some(c)) if c.reason != reasons::TIMED_OUT => c
            .last_update_time
            .and_then(|t| {
                t.checked_add(jiff::SignedDuration::from_secs(i64::from(secs)))
                    .ok()
            })
            .map(|due| {
                format!(
                    "; progress deadline in {}s",
                    due.duration_since(now).as_secs().max(0)
                )
            }),
        _ => None,
    }
    .unwrap_or_default();
    let surge = replicas::max_surge(d);
    let unavailable = replicas::max_unavailable(d);
    let active = model::active(all);
    Waiting {
        reason: "NewPodsUnavailable",
        message: format!(
            "{} of {} new pods available; {} pods exist, at most {} allowed (maxSurge {surge}); \
             {} available, at least {} needed (maxUnavailable {unavailable}){deadline}",
            model::available_replicas(new),
            model::replicas(new),
            model::sum_spec(&active),
            desired + surge,
            model::sum_available(all),
            desired - unavailable,
        ),
        objects: vec![rs_ref(new)],
        // The last progress; once timed out, the condition's time is the timeout's instead.
        since: progressing
            .filter(|c| c.reason != reasons::TIMED_OUT)
            .and_then(|c| rfc3339(c.last_update_time)),
    }
}

#[cfg(test)]
mod tests;
