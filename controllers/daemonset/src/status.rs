//! The DaemonSet status counters and when to write them. Pure.
//!
//! Mirrors `updateDaemonSetStatus` and `storeDaemonSetStatus` of upstream
//! `pkg/controller/daemon/daemon_controller.go`: per node, "the pod" is the first of its pods
//! in [`compare_pods`] order (bound first, then oldest); terminal pods being deleted do not
//! count. `conditions` and `collisionCount` are never touched here.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use rkcm_runtime::cache::cached::Pod;

use crate::eligibility::Placement;
use crate::snapshot::{PodsByNode, Snapshot, compare_pods};
use crate::template::{is_pod_updated, min_ready_seconds, template_generation_label};
use rkcm_runtime::workload::pod::{is_pod_available, is_pod_ready};

/// The seven counters upstream writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub desired_number_scheduled: i32,
    pub current_number_scheduled: i32,
    pub number_misscheduled: i32,
    pub number_ready: i32,
    pub updated_number_scheduled: i32,
    pub number_available: i32,
    pub number_unavailable: i32,
}

impl Counts {
    /// The counters a stored status holds (unset ones are 0).
    pub fn of(status: Option<&DaemonSetStatus>) -> Self {
        let Some(s) = status else {
            return Self::default();
        };
        Self {
            desired_number_scheduled: s.desired_number_scheduled,
            current_number_scheduled: s.current_number_scheduled,
            number_misscheduled: s.number_misscheduled,
            number_ready: s.number_ready,
            updated_number_scheduled: s.updated_number_scheduled.unwrap_or(0),
            number_available: s.number_available.unwrap_or(0),
            number_unavailable: s.number_unavailable.unwrap_or(0),
        }
    }

    /// Writes the counters into `status`, keeping everything else.
    pub fn apply(&self, status: &mut DaemonSetStatus) {
        status.desired_number_scheduled = self.desired_number_scheduled;
        status.current_number_scheduled = self.current_number_scheduled;
        status.number_misscheduled = self.number_misscheduled;
        status.number_ready = self.number_ready;
        status.updated_number_scheduled = Some(self.updated_number_scheduled);
        status.number_available = Some(self.number_available);
        status.number_unavailable = Some(self.number_unavailable);
    }
}

fn first_pod(pods: &[Arc<Pod>]) -> Option<&Arc<Pod>> {
    pods.iter().min_by(|a, b| compare_pods(a, b))
}

/// The counters for `snap`, given its pods by node and each node's placement (same order as
/// `snap.nodes`).
pub fn calculate_status(
    snap: &Snapshot<'_>,
    by_node: &PodsByNode<'_>,
    placements: &[Placement],
    now: Timestamp,
) -> Counts {
    let generation = template_generation_label(snap.ds);
    let generation = generation.as_deref();
    let min_ready = min_ready_seconds(snap.ds);
    let mut c = Counts::default();
    for (node, placement) in snap.nodes.iter().zip(placements) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let pod = by_node.get(name).and_then(|p| first_pod(p));
        if !placement.should_run {
            if pod.is_some() {
                c.number_misscheduled += 1;
            }
            continue;
        }
        c.desired_number_scheduled += 1;
        let Some(pod) = pod else { continue };
        c.current_number_scheduled += 1;
        if is_pod_ready(pod) {
            c.number_ready += 1;
            if is_pod_available(pod, min_ready, now) {
                c.number_available += 1;
            }
        }
        if is_pod_updated(pod, snap.hash, generation) {
            c.updated_number_scheduled += 1;
        }
    }
    c.number_unavailable = c.desired_number_scheduled - c.number_available;
    c
}

/// `storeDaemonSetStatus`' skip: nothing to write when the counters are unchanged and the
/// stored `observedGeneration` is not behind the object's generation.
pub fn needs_write(ds: &DaemonSet, counts: &Counts) -> bool {
    let status = ds.status.as_ref();
    let observed = status.and_then(|s| s.observed_generation).unwrap_or(0);
    let generation = ds.metadata.generation.unwrap_or(0);
    Counts::of(status) != *counts || observed < generation
}

/// A write that only moves counts: the stored `observedGeneration` already equals the
/// generation, or this sync may not record a newer one (`update_observed_generation` false,
/// the rollout's pods not yet created). Such writes go through the status pacer; recording a
/// new generation goes out at once, as `kubectl rollout status` waits for it.
pub fn is_routine(ds: &DaemonSet, update_observed_generation: bool) -> bool {
    let observed = ds.status.as_ref().and_then(|s| s.observed_generation);
    let generation = ds.metadata.generation;
    !update_observed_generation || observed.unwrap_or(0) >= generation.unwrap_or(0)
}

/// The status to write: the stored one with the new counters and, when allowed, the object's
/// generation as `observedGeneration`.
pub fn desired_status(
    ds: &DaemonSet,
    counts: &Counts,
    update_observed_generation: bool,
) -> DaemonSetStatus {
    let mut status = ds.status.clone().unwrap_or_default();
    counts.apply(&mut status);
    if update_observed_generation {
        status.observed_generation = ds.metadata.generation;
    }
    status
}

#[cfg(test)]
mod tests;
