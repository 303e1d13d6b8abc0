//! StatefulSet status from a snapshot. Pure.
//!
//! Mirrors `computeReplicaStatus`/`updateStatus`, `completeRollingUpdate` and
//! `inconsistentStatus` of upstream `pkg/controller/statefulset/stateful_set_control.go` and
//! `stateful_set_utils.go`, and the `minReadySeconds` requeue of `syncStatefulSet` in
//! `stateful_set.go`.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use rkcm_runtime::cache::cached::Pod;

use crate::consts::strategy;
use crate::identity::{
    is_created, is_running_and_available, is_running_and_ready, is_terminating, min_ready_seconds,
    pod_revision, replicas, strategy_type,
};

/// The pod counts of a status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub replicas: i32,
    pub ready: i32,
    pub available: i32,
    pub current: i32,
    pub updated: i32,
}

/// `computeReplicaStatus`: over existing pods (placeholders have no phase and count for
/// nothing); current/updated only for pods not being deleted.
pub fn count<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    min_ready_seconds: i32,
    current_revision: &str,
    update_revision: &str,
    now: jiff::Timestamp,
) -> Counts {
    let mut c = Counts::default();
    for pod in pods {
        if is_created(pod) {
            c.replicas += 1;
        }
        if is_running_and_ready(pod) {
            c.ready += 1;
            if is_running_and_available(pod, min_ready_seconds, now) {
                c.available += 1;
            }
        }
        if is_created(pod) && !is_terminating(pod) {
            let rev = pod_revision(pod);
            if rev == current_revision {
                c.current += 1;
            }
            if rev == update_revision {
                c.updated += 1;
            }
        }
    }
    c
}

/// The status a sync computes before any write: generation, revisions, collision count and
/// the counts.
pub fn new_status(
    set: &StatefulSet,
    current_revision: &str,
    update_revision: &str,
    collision_count: i32,
    counts: Counts,
) -> StatefulSetStatus {
    StatefulSetStatus {
        observed_generation: set.metadata.generation,
        current_revision: Some(current_revision.to_string()),
        update_revision: Some(update_revision.to_string()),
        collision_count: Some(collision_count),
        replicas: counts.replicas,
        ready_replicas: Some(counts.ready),
        available_replicas: Some(counts.available),
        current_replicas: Some(counts.current),
        updated_replicas: Some(counts.updated),
        conditions: None,
    }
}

/// `completeRollingUpdate`: once every wanted replica exists, is ready and runs the update
/// revision, the update revision becomes current. Applies to RollingUpdate and, as of
/// v1.37, to OnDelete.
pub fn complete_rollout(set: &StatefulSet, status: &mut StatefulSetStatus) {
    let t = strategy_type(set);
    if t != strategy::ROLLING_UPDATE && t != strategy::ON_DELETE {
        return;
    }
    let want = replicas(set);
    let updated = status.updated_replicas.unwrap_or(0);
    if updated == want && status.ready_replicas.unwrap_or(0) == want && status.replicas == want {
        status.current_replicas = Some(updated);
        status.current_revision = status.update_revision.clone();
    }
}

/// `inconsistentStatus`: a newer generation or any count or revision differs. A change of
/// `collisionCount` alone is not written.
pub fn needs_write(set: &StatefulSet, status: &StatefulSetStatus) -> bool {
    let Some(old) = set.status.as_ref() else {
        return true;
    };
    let newer = match (status.observed_generation, old.observed_generation) {
        (Some(n), Some(o)) => n > o,
        (Some(_), None) => true,
        _ => false,
    };
    let z = |v: Option<i32>| v.unwrap_or(0);
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    newer
        || status.replicas != old.replicas
        || z(status.current_replicas) != z(old.current_replicas)
        || z(status.ready_replicas) != z(old.ready_replicas)
        || z(status.updated_replicas) != z(old.updated_replicas)
        || z(status.available_replicas) != z(old.available_replicas)
        || s(&status.current_revision) != s(&old.current_revision)
        || s(&status.update_revision) != s(&old.update_revision)
}

/// Whether writing `status` over the set's cached status only moves counts (the kind of
/// write [`rkcm_runtime::queue::pacing`] may hold back for a moment): the same observed generation,
/// revisions and collision count. A write that records a new generation, a revision or a
/// collision count goes out at once: the next sync reads the current revision back from the
/// status, and `kubectl rollout status` waits for the generation.
pub fn is_routine(set: &StatefulSet, status: &StatefulSetStatus) -> bool {
    let Some(old) = set.status.as_ref() else {
        return false;
    };
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    old.observed_generation == status.observed_generation
        && s(&old.current_revision) == s(&status.current_revision)
        && s(&old.update_revision) == s(&status.update_revision)
        && old.collision_count.unwrap_or(0) == status.collision_count.unwrap_or(0)
}

/// With `minReadySeconds > 0` and some ready pod not yet available: when to sync again (the
/// earliest moment a ready pod becomes available, at least one second away; the full
/// `minReadySeconds` when the moment is unknown).
pub fn requeue_after<'a>(
    set: &StatefulSet,
    pods: impl IntoIterator<Item = &'a Pod>,
    status: &StatefulSetStatus,
    now: jiff::Timestamp,
) -> Option<Duration> {
    let mrs = min_ready_seconds(set);
    if mrs <= 0 || status.ready_replicas == status.available_replicas {
        return None;
    }
    let fallback = Duration::from_secs(u64::try_from(mrs).unwrap_or(0));
    let earliest = pods
        .into_iter()
        .filter(|p| is_running_and_ready(p) && !is_running_and_available(p, mrs, now))
        .filter_map(rkcm_runtime::workload::pod::ready_since)
        .filter_map(|since| {
            since
                .checked_add(jiff::SignedDuration::from_secs(i64::from(mrs)))
                .ok()
        })
        .min();
    let Some(at) = earliest else {
        return Some(fallback);
    };
    let wait = now.duration_until(at);
    let wait = Duration::try_from(wait).unwrap_or_default();
    Some(
        wait.max(Duration::from_secs(1))
            .min(fallback.max(Duration::from_secs(1))),
    )
}

#[cfg(test)]
#[path = "status/tests.rs"]
mod tests;
