//! PURE: the status a sync writes, and whether it must be written.
//!
//! Mirrors `calculateStatus` and the no-op check of `updateReplicaSetStatus` in upstream
//! `pkg/controller/replicaset/replica_set_utils.go`.

use std::collections::BTreeMap;
use std::sync::Arc;

use rkcm_runtime::cache::cached::Pod;

use crate::consts;
use crate::owner::{Condition, ReplicaStatus};
use rkcm_runtime::workload::pod::{is_pod_available, is_pod_ready};

/// What `calculateStatus` reads from the owner besides its current status.
#[derive(Debug, Clone, Copy)]
pub struct StatusInputs<'a> {
    pub desired: i32,
    pub min_ready_seconds: i32,
    pub template_labels: Option<&'a BTreeMap<String, String>>,
    /// `status.terminatingReplicas` is reported (gate on and the kind has the field).
    pub track_terminating: bool,
}

/// The new status from the claimed active pods, the terminating pods and the outcome of
/// `manageReplicas` (`manage_error` = its error text). `observed_generation` is left as it is:
/// [`needs_write`] and the writer set it.
pub fn calculate_status(
    current: &ReplicaStatus,
    inputs: &StatusInputs<'_>,
    claimed: &[Arc<Pod>],
    terminating: &[Arc<Pod>],
    manage_error: Option<&str>,
    now: jiff::Timestamp,
) -> ReplicaStatus {
    let mut status = current.clone();
    let template = inputs.template_labels;
    let fully_labeled = claimed
        .iter()
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            template
                .into_iter()
                .flatten()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .count();
    let ready = claimed.iter().filter(|p| is_pod_ready(p)).count();
    let available = claimed
        .iter()
        .filter(|p| is_pod_available(p, inputs.min_ready_seconds, now))
        .count();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);

    let has_failure = status
        .conditions
        .iter()
        .any(|c| c.type_ == consts::CONDITION_REPLICA_FAILURE);
    match manage_error {
        Some(message) if !has_failure => {
            let have = i64::try_from(claimed.len()).unwrap_or(i64::MAX);
            let diff = have - i64::from(inputs.desired);
            // Upstream leaves the reason empty when the counts agree (cannot normally happen).
            let reason = match diff.cmp(&0) {
                std::cmp::Ordering::Less => Some(consts::REASON_FAILED_CREATE.to_owned()),
                std::cmp::Ordering::Greater => Some(consts::REASON_FAILED_DELETE.to_owned()),
                std::cmp::Ordering::Equal => None,
            };
            status.conditions.push(Condition {
                type_: consts::CONDITION_REPLICA_FAILURE.to_owned(),
                status: consts::CONDITION_TRUE.to_owned(),
                reason,
                message: Some(message.to_owned()),
                last_transition_time: Some(now),
            });
        }
        None if has_failure => status
            .conditions
            .retain(|c| c.type_ != consts::CONDITION_REPLICA_FAILURE),
        // An existing failure condition is kept exactly as it is, even if the kind of failure
        // changed: upstream does not refresh it.
        _ => {}
    }

    status.replicas = count(claimed.len());
    status.fully_labeled_replicas = count(fully_labeled);
    status.ready_replicas = count(ready);
    status.available_replicas = count(available);
    status.terminating_replicas = inputs.track_terminating.then(|| count(terminating.len()));
    status
}

/// False when nothing changed and `observedGeneration` is current (no write).
pub fn needs_write(current: &ReplicaStatus, new: &ReplicaStatus, generation: i64) -> bool {
    !(current.replicas == new.replicas
        && current.fully_labeled_replicas == new.fully_labeled_replicas
        && current.ready_replicas == new.ready_replicas
        && current.available_replicas == new.available_replicas
        && current.terminating_replicas == new.terminating_replicas
        && current.conditions == new.conditions
        && generation == current.observed_generation)
}

/// Whether the write [`needs_write`] asks for changes nothing but the count of terminating
/// pods: such a write is paced more coarsely
/// ([`rkcm_runtime::queue::pacing::StatusPacer::hold_slow`]).
pub fn only_terminating_moved(
    current: &ReplicaStatus,
    new: &ReplicaStatus,
    generation: i64,
) -> bool {
    current.terminating_replicas != new.terminating_replicas
        && !needs_write(
            current,
            &ReplicaStatus {
                terminating_replicas: current.terminating_replicas,
                ..new.clone()
            },
            generation,
        )
}

#[cfg(test)]
mod tests;
