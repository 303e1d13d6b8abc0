//! PURE: what the ReplicaSet (or ReplicationController) controller would do with one owner now
//! and what it waits on (`rkcm explain replicaset/NS/NAME`, `replicationcontroller/NS/NAME`),
//! from the owner and the active pods it controls, through the controller's own plan
//! ([`crate::plan::plan`]).
//!
//! Reason codes:
//! - `PodCreateFailed`: the `ReplicaFailure` condition holds the API server's refusal of the
//!   last pod create (a quota, an admission policy or webhook, a bad template), with the
//!   server's message and since when.
//! - `PodsUnavailable`: pods that are not available yet (not Ready, or Ready for less than
//!   `minReadySeconds`).
//! - `Deleting`: the owner is being deleted; the controller creates and deletes nothing.

use std::sync::Arc;

use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::explain::{Explanation, ObjectRef, State, Waiting};
use rkcm_runtime::workload::pod::is_pod_available;

use crate::consts;
use crate::owner::ReplicaOwner;
use crate::plan::{Plan, PlanConfig, Snapshot, plan};

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// The explanation for `owner` with the active pods it controls (`claimed`), at `now`, with
/// upstream's defaults.
pub fn explain<O: ReplicaOwner>(
    owner: &O,
    kind: &str,
    claimed: &[Arc<Pod>],
    now: jiff::Timestamp,
) -> Explanation {
    explain_with(owner, kind, claimed, &PlanConfig::default(), now)
}

/// [`explain`] with the manager's plan settings (its gate `PodDeletionCost` picks which pods
/// a scale-down deletes).
pub fn explain_with<O: ReplicaOwner>(
    owner: &O,
    kind: &str,
    claimed: &[Arc<Pod>],
    cfg: &PlanConfig,
    now: jiff::Timestamp,
) -> Explanation {
    let meta = owner.meta();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let mut e = Explanation {
        object: ObjectRef {
            kind: kind.to_owned(),
            namespace: namespace.clone(),
            name: name.clone(),
        },
        controller: O::CONTROLLER_NAME,
        state: State::Settled,
        actions: Vec::new(),
        waiting_on: Vec::new(),
        remedies: Vec::new(),
    };
    let deleting = meta.deletion_timestamp.is_some();
    let snap = Snapshot {
        desired: owner.desired_replicas(),
        claimed,
        related: claimed,
        expectations_satisfied: true,
        owner_deleting: deleting,
    };
    match plan(&snap, cfg, now) {
        Plan::Nothing => {}
        Plan::Create(n) => e.actions.push(format!(
            "create {n} pods ({} of {} exist)",
            claimed.len(),
            owner.desired_replicas()
        )),
        Plan::Delete { victims, .. } => e.actions.push(format!(
            "delete {} pods: {}",
            victims.len(),
            victims
                .iter()
                .map(|p| pod_name(p))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
    if !e.actions.is_empty() {
        e.state = State::Acting;
    }
    if deleting {
        e.state = State::Waiting;
        e.waiting_on.push(Waiting {
            reason: "Deleting",
            message: format!(
                "the {kind} is being deleted; its pods are left to the garbage collector"
            ),
            objects: Vec::new(),
            since: meta.deletion_timestamp.as_ref().map(|t| t.0.to_string()),
        });
    }
    let failure = owner
        .replica_status()
        .conditions
        .into_iter()
        .find(|c| c.type_ == consts::CONDITION_REPLICA_FAILURE && c.status == "True");
    if let Some(c) = failure {
        e.state = State::Stalled;
        e.waiting_on.push(Waiting {
            reason: "PodCreateFailed",
            message: format!(
                "the API server refused the last pod create ({}): {}",
                c.reason.as_deref().unwrap_or(consts::REASON_FAILED_CREATE),
                c.message.as_deref().unwrap_or_default()
            ),
            objects: Vec::new(),
            since: c.last_transition_time.map(|t| t.to_string()),
        });
        e.remedies.push(format!(
            "fix what the server refuses (a ResourceQuota, an admission policy or webhook, the pod template); the FailedCreate events say more: kubectl -n {namespace} describe {kind} {name}"
        ));
    }
    let min_ready = owner.min_ready_seconds();
    let unavailable: Vec<&Arc<Pod>> = claimed
        .iter()
        .filter(|p| !is_pod_available(p, min_ready, now))
        .collect();
    if !unavailable.is_empty() {
        if e.state == State::Settled {
            e.state = State::Waiting;
        }
        e.waiting_on.push(Waiting {
            reason: "PodsUnavailable",
            message: format!(
                "{} of {} pods are not available yet (minReadySeconds {min_ready})",
                unavailable.len(),
                claimed.len()
            ),
            objects: unavailable
                .iter()
                .map(|p| format!("Pod/{}", pod_name(p)))
                .collect(),
            since: None,
        });
    }
    e
}

#[cfg(test)]
mod tests;
