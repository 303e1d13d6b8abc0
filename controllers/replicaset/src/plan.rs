//! PURE: what one sync should do to the pods, from a snapshot and a clock.
//!
//! Mirrors `manageReplicas` / `getPodsToDelete` / `getPodsRankedByRelatedPodsOnSameNode` of
//! upstream `pkg/controller/replicaset/replica_set.go` and `ActivePodsWithRanks` of
//! `pkg/controller/controller_utils.go`; the pod predicates are [`rkcm_runtime::workload::pod`]'s.
//!
//! - Scale up by `min(missing, 500)`; scale down by `min(surplus, 500)`.
//! - Victims are the first `n` claimed pods under the upstream ranking ("least valuable
//!   first"): unscheduled, Pending < Unknown < Running, not ready, lower deletion cost, more
//!   related pods on the same node, more recently ready (log₂ buckets, UID tie-break), more
//!   restarts, newer (log₂ buckets, UID tie-break). When every claimed pod goes, no sorting.
//! - Nothing is planned while expectations are unsatisfied (the cache may not show this
//!   controller's earlier creates and deletes yet) or the owner is being deleted. These guards
//!   are the plan's own: the sync passes the real values. (Adoption, which happens before
//!   the plan, is refused for an owner being deleted by the controller-ref manager.)

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rkcm_runtime::cache::cached::Pod;

use rkcm_runtime::workload::pod::{
    PHASE_RUNNING, PHASE_UNKNOWN, is_pod_active, is_pod_available, is_pod_ready, phase, ready_since,
};

use crate::consts::{self, pod as podc};

/// `controller.kubernetes.io/pod-deletion-cost`; missing or unparsable (not an int32) = 0.
pub fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(consts::POD_DELETION_COST_ANNOTATION))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(0)
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

fn phase_ordinal(pod: &Pod) -> u8 {
    match phase(pod) {
        PHASE_UNKNOWN => 1,
        PHASE_RUNNING => 2,
        // Pending, and anything else (Go's map default).
        _ => 0,
    }
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

fn created(pod: &Pod) -> Option<jiff::Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Max restart count of regular containers, then of restartable init (sidecar) containers.
fn max_restarts(pod: &Pod) -> (i32, i32) {
    let Some(status) = &pod.status else {
        return (0, 0);
    };
    let regular = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
        .max(0);
    let sidecars: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some(podc::RESTART_POLICY_ALWAYS))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| sidecars.contains(&c.name.as_str()))
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
        .max(0);
    (regular, sidecar)
}

/// `floor(log2(now - t))` over nanoseconds, -1 when `t` is not in the past.
fn log_bucket(t: jiff::Timestamp, now: jiff::Timestamp) -> i64 {
    let nanos = now.duration_since(t).as_nanos();
    if nanos <= 0 {
        return -1;
    }
    // Upstream converts to float64 before Log2; do the same so bucket edges agree.
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let bucket = (nanos as f64).log2() as i64;
    bucket
}

/// The time comparison of steps 6 and 8: zero (unknown) first; otherwise the more recent
/// log₂ bucket first. `None` when both are unknown or share a bucket: the later steps decide,
/// and the UID settles what is still tied at the very end.
///
/// Deliberate difference from upstream: upstream lets *exactly* equal times fall through to
/// the later steps but settles unequal times within one bucket by UID at once. That pairwise
/// rule is not transitive (A = B exactly and B, C one bucket: the UID orders B, C while the
/// restart counts order A, C the other way), which Go's sort tolerates and Rust's sort
/// rejects with a panic: a 1000 → 500 scale-down never made progress. Treating a bucket as
/// "equal age" keeps upstream's exact-tie behaviour and its UID tie-break, and is a total
/// order; it differs from upstream only when same-bucket pods differ in a later step.
fn compare_times(
    ti: Option<jiff::Timestamp>,
    tj: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
) -> Option<Ordering> {
    match (ti, tj) {
        (None, None) => None,
        (None, _) => Some(Ordering::Less),
        (_, None) => Some(Ordering::Greater),
        (Some(ti), Some(tj)) => match (log_bucket(ti, now) - log_bucket(tj, now)).cmp(&0) {
            Ordering::Equal => None,
            other => Some(other),
        },
    }
}

/// `ActivePodsWithRanks.Less` as an ordering: `Less` means "delete `i` before `j`".
/// `rank_*` = active related pods on the pod's node; `cost_enabled` = gate `PodDeletionCost`.
pub fn compare_for_deletion(
    (pi, rank_i): (&Pod, usize),
    (pj, rank_j): (&Pod, usize),
    now: jiff::Timestamp,
    cost_enabled: bool,
) -> Ordering {
    // 1. Unassigned < assigned.
    let (ni, nj) = (node_name(pi), node_name(pj));
    if ni != nj && (ni.is_empty() || nj.is_empty()) {
        return if ni.is_empty() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    // 2. Pending < Unknown < Running.
    let ord = phase_ordinal(pi).cmp(&phase_ordinal(pj));
    if ord != Ordering::Equal {
        return ord;
    }
    // 3. Not ready < ready.
    let (ri, rj) = (is_pod_ready(pi), is_pod_ready(pj));
    if ri != rj {
        return ri.cmp(&rj);
    }
    // 4. Lower deletion cost first.
    if cost_enabled {
        let ord = deletion_cost(pi).cmp(&deletion_cost(pj));
        if ord != Ordering::Equal {
            return ord;
        }
    }
    // 5. Doubled up (higher rank) first.
    if rank_i != rank_j {
        return rank_j.cmp(&rank_i);
    }
    // 6. More recently ready first.
    if ri
        && rj
        && let Some(ord) = compare_times(ready_since(pi), ready_since(pj), now)
    {
        return ord;
    }
    // 7. More restarts first (regular containers, then sidecars).
    let ((regi, sidei), (regj, sidej)) = (max_restarts(pi), max_restarts(pj));
    if regi != regj {
        return regj.cmp(&regi);
    }
    if sidei != sidej {
        return sidej.cmp(&sidei);
    }
    // 8. Newer first.
    compare_times(created(pi), created(pj), now).unwrap_or_else(|| uid(pi).cmp(uid(pj)))
}

/// `getPodsRankedByRelatedPodsOnSameNode`: for each pod, how many active related pods share
/// its node (unscheduled pods share the "" node).
pub fn ranks(pods: &[Arc<Pod>], related: &[Arc<Pod>]) -> Vec<usize> {
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for pod in related.iter().filter(|p| is_pod_active(p)) {
        *on_node.entry(node_name(pod)).or_default() += 1;
    }
    pods.iter()
        .map(|p| on_node.get(node_name(p)).copied().unwrap_or(0))
        .collect()
}

/// `getPodsToDelete`: the `n` pods to delete. Sorted only when not all of them go; the
/// returned flag says whether a ranking sort happened (the age-ratio metric is reported then).
pub fn pods_to_delete(
    claimed: &[Arc<Pod>],
    related: &[Arc<Pod>],
    n: usize,
    now: jiff::Timestamp,
    cost_enabled: bool,
) -> (Vec<Arc<Pod>>, bool) {
    if n >= claimed.len() {
        return (claimed.to_vec(), false);
    }
    let ranks = ranks(claimed, related);
    let mut ranked: Vec<(Arc<Pod>, usize)> = claimed.iter().cloned().zip(ranks).collect();
    // Stable where upstream's sort is unstable: ties keep cache order, deterministically.
    ranked.sort_by(|(pi, ri), (pj, rj)| {
        compare_for_deletion((pi, *ri), (pj, *rj), now, cost_enabled)
    });
    (ranked.into_iter().take(n).map(|(p, _)| p).collect(), true)
}

/// `reportSortingDeletionAgeRatioMetric`: for each ready victim, its age divided by the age of
/// the youngest ready claimed pod (integer milliseconds, truncating, as upstream). A zero
/// divisor (youngest ready pod 0 ms old, or none ready) skips the observation instead of
/// dividing by zero.
pub fn deletion_age_ratios(
    sorted_claimed: &[Arc<Pod>],
    victims: &[Arc<Pod>],
    now: jiff::Timestamp,
) -> Vec<f64> {
    let youngest = sorted_claimed
        .iter()
        .filter(|p| is_pod_ready(p))
        .filter_map(|p| created(p))
        .max();
    let Some(youngest) = youngest else {
        return Vec::new();
    };
    let millis = |t: jiff::Timestamp| now.duration_since(t).as_millis();
    let divisor = millis(youngest);
    if divisor == 0 {
        return Vec::new();
    }
    victims
        .iter()
        .filter(|p| is_pod_ready(p))
        .map(|p| {
            let age = created(p).map_or(0, millis);
            #[allow(clippy::cast_precision_loss)]
            let ratio = (age / divisor) as f64;
            ratio
        })
        .collect()
}

/// What a sync knows when it decides whether to create or delete.
#[derive(Debug)]
pub struct Snapshot<'a> {
    /// `spec.replicas`.
    pub desired: i32,
    /// Active pods the owner controls and whose labels match its selector.
    pub claimed: &'a [Arc<Pod>],
    /// Pods matched by any owner sharing this owner's controller (for the node ranks).
    pub related: &'a [Arc<Pod>],
    /// Expectations are satisfied: the cache reflects this controller's earlier writes.
    pub expectations_satisfied: bool,
    /// The owner has a deletionTimestamp.
    pub owner_deleting: bool,
}

/// Settings the plan depends on.
#[derive(Debug, Clone, Copy)]
pub struct PlanConfig {
    /// Most creates/deletes per sync (upstream `BurstReplicas` = 500).
    pub burst: usize,
    /// Gate `PodDeletionCost`.
    pub pod_deletion_cost: bool,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            burst: consts::BURST_REPLICAS,
            pod_deletion_cost: true,
        }
    }
}

/// The pod writes of one sync.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Nothing to do, or not allowed to act now.
    Nothing,
    /// Create this many pods (slow start).
    Create(usize),
    /// Delete these pods; `sorted` says they were chosen by ranking.
    Delete {
        victims: Vec<Arc<Pod>>,
        sorted: bool,
    },
}

/// `manageReplicas`' decision.
pub fn plan(snap: &Snapshot<'_>, cfg: &PlanConfig, now: jiff::Timestamp) -> Plan {
    if !snap.expectations_satisfied || snap.owner_deleting {
        return Plan::Nothing;
    }
    let have = i64::try_from(snap.claimed.len()).unwrap_or(i64::MAX);
    let diff = have - i64::from(snap.desired.max(0));
    let burst = i64::try_from(cfg.burst).unwrap_or(i64::MAX);
    match diff.cmp(&0) {
        Ordering::Equal => Plan::Nothing,
        Ordering::Less => Plan::Create(usize::try_from((-diff).min(burst)).unwrap_or(0)),
        Ordering::Greater => {
            let n = usize::try_from(diff.min(burst)).unwrap_or(0);
            let (victims, sorted) =
                pods_to_delete(snap.claimed, snap.related, n, now, cfg.pod_deletion_cost);
            Plan::Delete { victims, sorted }
        }
    }
}

/// When to look again so that a ready pod is counted available: the time until the earliest
/// ready-but-not-yet-available claimed pod passes `min_ready_seconds` (zero if overdue), or
/// `min_ready_seconds` if no such pod has a known ready time. `None` without minReadySeconds.
pub fn availability_requeue(
    claimed: &[Arc<Pod>],
    min_ready_seconds: i32,
    now: jiff::Timestamp,
) -> Option<Duration> {
    if min_ready_seconds <= 0 {
        return None;
    }
    let min_ready = jiff::SignedDuration::from_secs(i64::from(min_ready_seconds));
    let earliest = claimed
        .iter()
        .filter(|p| is_pod_ready(p) && !is_pod_available(p, min_ready_seconds, now))
        .filter_map(|p| ready_since(p))
        .filter_map(|t| t.saturating_add(min_ready).ok())
        .min();
    Some(match earliest {
        Some(due) => Duration::try_from(due.duration_since(now)).unwrap_or(Duration::ZERO),
        None => Duration::from_secs(u64::try_from(min_ready_seconds).unwrap_or(0)),
    })
}

#[cfg(test)]
pub(crate) mod tests;
