//! PURE: how many replicas each ReplicaSet gets: the rolling update's scale-up of the new
//! ReplicaSet and scale-down of the old ones (`rolling.go`), whether old pods still run
//! (`recreate.go`), and proportional scaling when the Deployment is resized (`sync.go`).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::workload::pod::{is_pod_active, is_pod_available, is_terminal};

use crate::model::{self, Rs};
use crate::replicas;

/// Resize one ReplicaSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleOp {
    pub uid: String,
    pub name: String,
    pub from: i32,
    pub to: i32,
}

impl ScaleOp {
    pub(super) fn new(rs: &Rs, to: i32) -> Self {
        Self {
            uid: model::uid(rs).to_owned(),
            name: model::rs_name(rs).to_owned(),
            from: model::replicas(rs),
            to,
        }
    }
}

/// `reconcileNewReplicaSet`: the size to give the new ReplicaSet now, if it changes.
pub fn reconcile_new(d: &Deployment, all: &[Rs], new: &Rs) -> Result<Option<i32>, String> {
    let desired = model::desired(d);
    let current = model::replicas(new);
    if current == desired {
        return Ok(None);
    }
    if current > desired {
        return Ok(Some(desired));
    }
    let target = replicas::new_rs_new_replicas(d, all, current)?;
    Ok((target != current).then_some(target))
}

/// The scale-down of old ReplicaSets one rolling step makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OldScaleDown {
    /// In order: unhealthy-replica cleanup first, then availability-bounded scale-down.
    pub ops: Vec<ScaleOp>,
    /// Upstream's "invalid request to scale down" (an RS reporting more available replicas
    /// than it has): the ops before it still run, the step counts as no scale-down.
    pub invalid: Option<String>,
}

/// `reconcileOldReplicaSets` over the active old ReplicaSets `old` (`all` = every old one
/// plus the new one), on the ReplicaSets' statuses alone (upstream's rule).
pub fn reconcile_old(d: &Deployment, all: &[Rs], old: &[Rs], new: &Rs) -> OldScaleDown {
    reconcile_old_seen(d, all, old, new, None)
}

/// [`reconcile_old`], reading each ReplicaSet's available replicas both from its status and
/// from the available pods the cache shows (`pods_available`, by ReplicaSet UID; see
/// [`available_pods`]), and taking whichever count scales down less: the fewer for what the
/// availability-bounded part may scale away, the more for what the unhealthy-replica
/// cleanup takes for unhealthy.
///
/// A ReplicaSet's status trails its pods: written by its controller's last sync, it still
/// counts a pod deleted or failed since, or misses one that became ready since, for as long
/// as no sync of that controller ran (a sharded range that was without a holder, a manager
/// cut off, a failover, a status write lost). On such a status a scale-down can take the
/// Deployment below `replicas - maxUnavailable`, and the cleanup can scale away a
/// ReplicaSet whose pods are all available. Where both counts agree, the step is
/// upstream's.
pub fn reconcile_old_seen(
    d: &Deployment,
    all: &[Rs],
    old: &[Rs],
    new: &Rs,
    pods_available: Option<&HashMap<String, i32>>,
) -> OldScaleDown {
    let seen = |rs: &Rs| pods_available.and_then(|seen| seen.get(model::uid(rs)).copied());
    // What may be scaled away: the fewer of the two counts.
    let available_of = |rs: &Rs| {
        let status = model::available_replicas(rs);
        seen(rs).map_or(status, |pods| status.min(pods))
    };
    // What is unhealthy: only what neither count shows available (pods beyond the
    // ReplicaSet's size make it no healthier than whole).
    let healthy_of = |rs: &Rs| {
        let status = model::available_replicas(rs);
        seen(rs).map_or(status, |pods| status.max(pods.min(model::replicas(rs))))
    };
    let mut out = OldScaleDown::default();
    if model::sum_spec(old) == 0 {
        return out;
    }
    let mut min_available = model::desired(d) - replicas::max_unavailable(d);
    // Mutant (sim only): old ReplicaSets scale down without regard to availability.
    if rkcm_runtime::mutants::on("deployment-ignore-min-available") {
        min_available = 0;
    }
    let new_unavailable = model::replicas(new) - available_of(new);
    let max_scaled_down = model::sum_spec(all) - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return out;
    }

    // Unhealthy replicas first: they would otherwise block the rollout until it times out.
    let mut sorted = old.to_vec();
    model::sort_by_creation(&mut sorted);
    let mut sizes: Vec<i32> = sorted.iter().map(|rs| model::replicas(rs)).collect();
    let mut cleaned = 0;
    for (i, rs) in sorted.iter().enumerate() {
        if cleaned >= max_scaled_down {
            break;
        }
        let (size, available) = (sizes[i], healthy_of(rs));
        if size == 0 || size == available {
            continue;
        }
        let count = (max_scaled_down - cleaned).min(size - available);
        let to = size - count;
        if to > size {
            out.invalid = Some(format!(
                "when cleaning up unhealthy replicas, got invalid request to scale down {}/{} {size} -> {to}",
                rs.metadata.namespace.as_deref().unwrap_or_default(),
                model::rs_name(rs)
            ));
            return out;
        }
        out.ops.push(ScaleOp::new(rs, to));
        sizes[i] = to;
        cleaned += count;
    }

    // Then as far as availability allows. Statuses are those seen before the cleanup.
    let available: i32 = sorted
        .iter()
        .chain(std::iter::once(new))
        .map(available_of)
        .sum();
    if available <= min_available {
        return out;
    }
    let budget = available - min_available;
    let mut scaled = 0;
    for (i, rs) in sorted.iter().enumerate() {
        if scaled >= budget {
            break;
        }
        let size = sizes[i];
        if size == 0 {
            continue;
        }
        let count = size.min(budget - scaled);
        let to = size - count;
        if to > size {
            out.invalid = Some(format!(
                "when scaling down old RS, got invalid request to scale down {}/{} {size} -> {to}",
                rs.metadata.namespace.as_deref().unwrap_or_default(),
                model::rs_name(rs)
            ));
            return out;
        }
        // Keep the op's `from` as the size the executor will find.
        out.ops.push(ScaleOp {
            from: size,
            ..ScaleOp::new(rs, to)
        });
        scaled += count;
    }
    out
}

/// Per ReplicaSet UID of `rss`, how many of its pods in `pods` (by ReplicaSet UID, as
/// `getPodMapForDeployment` gathers them) are active and available at `now` under the
/// ReplicaSet's `minReadySeconds`: what its status's `availableReplicas` would be if its
/// controller synced on this cache now. ReplicaSets missing from `pods` are left out.
pub fn available_pods(
    rss: &[Rs],
    pods: &HashMap<String, Vec<Arc<Pod>>>,
    now: jiff::Timestamp,
) -> HashMap<String, i32> {
    rss.iter()
        .filter_map(|rs| {
            let uid = model::uid(rs);
            let list = pods.get(uid)?;
            let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
            let n = list
                .iter()
                .filter(|p| is_pod_active(p) && is_pod_available(p, min_ready, now))
                .count();
            Some((uid.to_owned(), i32::try_from(n).unwrap_or(i32::MAX)))
        })
        .collect()
}

/// `oldPodsRunning`: old ReplicaSets still report pods, or a pod of an old ReplicaSet is not
/// terminal (terminating and `Unknown` pods count as running).
pub fn old_pods_running(
    new: Option<&Rs>,
    old: &[Rs],
    pods_by_rs: &HashMap<String, Vec<Arc<Pod>>>,
) -> bool {
    if model::sum_status(old) > 0 {
        return true;
    }
    let new_uid = new.map(|rs| model::uid(rs));
    pods_by_rs
        .iter()
        .filter(|(uid, _)| Some(uid.as_str()) != new_uid)
        .flat_map(|(_, pods)| pods)
        .any(|p| !is_terminal(p))
}

/// `isScalingEvent`: an active ReplicaSet was sized for another `spec.replicas`.
pub fn is_scaling_event(d: &Deployment, new: Option<&Rs>, old: &[Rs]) -> bool {
    let desired = model::desired(d);
    old.iter()
        .chain(new)
        .filter(|rs| model::replicas(rs) > 0)
        .filter_map(|rs| replicas::desired_annotation(rs))
        .any(|annotated| annotated != desired)
}

/// What `scale` (proportional scaling) writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScalePlan {
    Nothing,
    /// Resize one ReplicaSet (the only active one, or the latest): skipped when equal.
    One(ScaleOp),
    /// The only active ReplicaSet (or the latest) has the right size but replica annotations
    /// of another `spec.replicas`: rewrite them at the same size. Upstream v1.37 returns
    /// without a write here, so `isScalingEvent` stays true on every sync and a later
    /// template change never rolls out (kubernetes/kubernetes#102551; pull requests #138036
    /// and #138840).
    Annotations(ScaleOp),
    /// The new ReplicaSet is saturated: every active old one goes to 0 (skipped when equal).
    OldToZero(Vec<ScaleOp>),
    /// Proportional sizes. Every ReplicaSet is written even at an unchanged size, so its
    /// replica annotations catch up with the Deployment.
    Proportional(Vec<ScaleOp>),
}

/// `scale`: resize the ReplicaSets of a Deployment whose `spec.replicas` changed.
pub fn scale(d: &Deployment, new: Option<&Rs>, old: &[Rs]) -> ScalePlan {
    let desired = model::desired(d);
    if let Some(rs) = replicas::find_active_or_latest(new, old) {
        if model::replicas(&rs) == desired {
            // Only the annotation `is_scaling_event` reads; a missing one is no scaling event.
            if replicas::desired_annotation(&rs).is_some_and(|a| a != desired) {
                return ScalePlan::Annotations(ScaleOp::new(&rs, desired));
            }
            return ScalePlan::Nothing;
        }
        return ScalePlan::One(ScaleOp::new(&rs, desired));
    }
    if replicas::is_saturated(d, new) {
        return ScalePlan::OldToZero(
            model::active(old)
                .iter()
                .map(|rs| ScaleOp::new(rs, 0))
                .collect(),
        );
    }
    if !model::is_rolling(d) {
        // Recreate scales only after the rollout (the new RS is then the only active one).
        return ScalePlan::Nothing;
    }
    let mut all: Vec<Rs> = old.iter().chain(new).cloned().collect();
    all = model::active(&all);
    let allowed = if desired > 0 {
        desired + replicas::max_surge(d)
    } else {
        0
    };
    let to_add = allowed - model::sum_spec(&all);
    if to_add > 0 {
        all.sort_by(|a, b| model::by_size_newer(a, b));
    } else if to_add < 0 {
        all.sort_by(|a, b| model::by_size_older(a, b));
    }
    let observed = crate::status::Status::of(d).replicas;
    let mut added = 0;
    let mut sizes: Vec<i32> = Vec::with_capacity(all.len());
    for rs in &all {
        let size = model::replicas(rs);
        if to_add == 0 {
            sizes.push(size);
            continue;
        }
        let proportion = replicas::replica_set_proportion(rs, d, observed, to_add, added);
        sizes.push(size + proportion);
        added += proportion;
    }
    // The rounding leftover goes to the largest ReplicaSet (first in the order).
    if to_add != 0
        && let Some(first) = sizes.first_mut()
    {
        *first = (*first + to_add - added).max(0);
    }
    ScalePlan::Proportional(
        all.iter()
            .zip(sizes)
            .map(|(rs, to)| ScaleOp::new(rs, to))
            .collect(),
    )
}
