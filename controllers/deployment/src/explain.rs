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

/// The explanation for `d` with the ReplicaSets it owns (`rss`), at `now`.
pub fn explain(d: &Deployment, rss: &[Rs], now: jiff::Timestamp) -> Explanation {
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
    let desired = model::desired(d);
    let complete = new.is_some()
        && deployment_complete(d, &status)
        && old.iter().all(|rs| model::replicas(rs) == 0);

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
    if model::is_paused(d) {
        if !complete {
            e.state = State::Stalled;
            e.waiting_on.push(Waiting {
                reason: "Paused",
                message: format!(
                    "the Deployment is paused with {} of {desired} replicas updated",
                    status.updated_replicas
                ),
                objects: Vec::new(),
                since: status
                    .condition(ct::PROGRESSING)
                    .filter(|c| c.reason == reasons::PAUSED)
                    .and_then(|c| rfc3339(c.last_transition_time)),
            });
            e.remedies
                .push(format!("kubectl rollout resume deployment/{name}"));
        }
        return e;
    }
    if complete && e.waiting_on.is_empty() {
        return e;
    }

    let none = HashMap::new();
    let snap = Snapshot {
        deployment: d,
        new: new.as_ref(),
        old: &old,
        pods: &none,
    };
    match &new {
        None => {
            e.state = State::Acting;
            e.actions
                .push("create the ReplicaSet of the current template".into());
        }
        Some(new_rs) if model::is_rolling(d) => match plan::rolling_step(&snap, new_rs) {
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
            Ok(RollingStep::ScaleNew(op)) => {
                e.state = State::Acting;
                e.actions.push(format!(
                    "scale ReplicaSet/{} from {} to {}",
                    op.name, op.from, op.to
                ));
            }
            Ok(RollingStep::ScaleDownOld { step, .. }) => {
                e.state = State::Acting;
                for op in &step.ops {
                    e.actions.push(format!(
                        "scale ReplicaSet/{} from {} to {}",
                        op.name, op.from, op.to
                    ));
                }
            }
            Ok(RollingStep::Cleanup(_)) => {
                if !complete {
                    e.state = State::Waiting;
                    e.waiting_on
                        .push(new_pods_unavailable(d, &status, rss, new_rs, now));
                }
            }
        },
        Some(_) => match plan::recreate_step(&snap) {
            RecreateStep::ScaleDownOld(ops) => {
                e.state = State::Acting;
                for op in &ops {
                    e.actions.push(format!(
                        "scale ReplicaSet/{} from {} to {}",
                        op.name, op.from, op.to
                    ));
                }
            }
            RecreateStep::ScaleNew { op: Some(op), .. } => {
                e.state = State::Acting;
                e.actions.push(format!(
                    "scale ReplicaSet/{} from {} to {}",
                    op.name, op.from, op.to
                ));
            }
            RecreateStep::WaitForOldPods | RecreateStep::CreateNew => {
                let running: Vec<String> = old
                    .iter()
                    .filter(|rs| model::status_replicas(rs) > 0)
                    .map(rs_ref)
                    .collect();
                if !running.is_empty() {
                    e.state = State::Waiting;
                    e.waiting_on.push(Waiting {
                        reason: "OldPodsRunning",
                        message: "a Recreate rollout starts new pods once every old pod is gone"
                            .into(),
                        objects: running,
                        since: None,
                    });
                }
            }
            RecreateStep::ScaleNew { op: None, .. } => {
                if !complete && let Some(new_rs) = &new {
                    e.state = State::Waiting;
                    e.waiting_on
                        .push(new_pods_unavailable(d, &status, rss, new_rs, now));
                }
            }
        },
    }

    if let Some(c) = status.condition(ct::PROGRESSING)
        && c.reason == reasons::TIMED_OUT
    {
        e.state = State::Stalled;
        e.waiting_on.insert(
            0,
            Waiting {
                reason: "ProgressDeadlineExceeded",
                message: format!(
                    "no progress for {}s (progressDeadlineSeconds): {}",
                    model::progress_deadline(d).unwrap_or(0),
                    c.message
                ),
                objects: new.iter().map(rs_ref).collect(),
                since: rfc3339(c.last_transition_time),
            },
        );
    }
    if e.waiting_on
        .iter()
        .any(|w| matches!(w.reason, "NewPodsUnavailable" | "ProgressDeadlineExceeded"))
    {
        if let Some(new_rs) = &new {
            e.remedies.push(format!(
                "see why the new pods are not available: kubectl describe pods -l pod-template-hash={}",
                new_rs
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(crate::consts::POD_TEMPLATE_HASH_LABEL))
                    .map_or("", String::as_str)
            ));
        }
        e.remedies
            .push(format!("roll back: kubectl rollout undo deployment/{name}"));
    }
    e
}

/// The rolling budget as it stands, with the new ReplicaSet's availability and the time left
/// before the progress deadline.
fn new_pods_unavailable(
    d: &Deployment,
    status: &Status,
    all: &[Rs],
    new: &Rs,
    now: jiff::Timestamp,
) -> Waiting {
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
        since: progressing.and_then(|c| rfc3339(c.last_update_time)),
    }
}

#[cfg(test)]
mod tests;
