//! PURE: whether a sync acts at all: the Jobs `syncJob` leaves alone before planning, and the
//! orphan pods `syncOrphanPod` takes the tracking finalizer off.

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::workload::controller_ref::controller_of;

use super::spec::{has_unknown_completion_mode, is_finished, managed_by_external};
use crate::pods::has_tracking_finalizer;

/// Why a sync leaves a Job alone (`syncJob`'s early returns, in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip<'a> {
    /// `spec.managedBy` names another controller, which owns the Job's pods and status.
    ManagedBy(&'a str),
    /// `Complete` or `Failed` is True; the Job's recreation backoff record is dropped.
    Finished,
    /// A completion mode this controller does not know (version skew): a Warning event.
    UnknownCompletionMode,
}

/// Why the sync of `job` ends before planning, or `None` when it plans.
pub fn skip(job: &Job) -> Option<Skip<'_>> {
    if let Some(by) = managed_by_external(job) {
        Some(Skip::ManagedBy(by))
    } else if is_finished(job) {
        Some(Skip::Finished)
    } else if has_unknown_completion_mode(job) {
        Some(Skip::UnknownCompletionMode)
    } else {
        None
    }
}

/// `syncOrphanPod`: whether `pod`'s tracking finalizer comes off. `owner` is the Job its
/// controller reference resolves to in the cache, if any. A pod controlled by something other
/// than a `batch/v1` Job is not ours; a pod of a Job that exists, is ours and is unfinished
/// is left to that Job's sync.
pub fn release_orphan(pod: &Pod, owner: Option<&Job>) -> bool {
    if let Some(r) = controller_of(&pod.metadata) {
        if r.kind != "Job" || r.api_version != "batch/v1" {
            return false;
        }
        if let Some(job) = owner
            && (managed_by_external(job).is_some() || !is_finished(job))
        {
            return false;
        }
    }
    has_tracking_finalizer(pod)
}
