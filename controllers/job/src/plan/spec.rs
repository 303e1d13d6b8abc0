//! PURE: what the sync reads from the Job object: its spec with upstream's defaults, its
//! completion mode, its conditions and uncounted pods, who manages it and its selector.

use std::collections::HashSet;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::consts::{COMPLETION_INDEXED, COMPLETION_NON_INDEXED, condition as c};

/// Upstream default of `spec.backoffLimit` (the API server defaults it; a missing value is
/// treated the same way).
pub const DEFAULT_BACKOFF_LIMIT: i32 = 6;

pub fn spec_of(job: &Job) -> std::borrow::Cow<'_, JobSpec> {
    match job.spec.as_ref() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(JobSpec::default()),
    }
}

pub fn is_indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some(COMPLETION_INDEXED)
}

/// `Indexed` or `NonIndexed` (metric label).
pub fn completion_mode_label(job: &Job) -> &'static str {
    if is_indexed(job) {
        COMPLETION_INDEXED
    } else {
        COMPLETION_NON_INDEXED
    }
}

/// A completion mode this controller does not know (version skew).
pub fn has_unknown_completion_mode(job: &Job) -> bool {
    job.spec
        .as_ref()
        .and_then(|s| s.completion_mode.as_deref())
        .is_some_and(|m| m != COMPLETION_INDEXED && m != COMPLETION_NON_INDEXED)
}

pub fn is_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

pub fn completions(job: &Job) -> Option<i32> {
    job.spec.as_ref().and_then(|s| s.completions)
}

pub(super) fn parallelism(job: &Job) -> i32 {
    job.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1)
}

pub(super) fn backoff_limit(job: &Job) -> i32 {
    job.spec
        .as_ref()
        .and_then(|s| s.backoff_limit)
        .unwrap_or(DEFAULT_BACKOFF_LIMIT)
}

pub fn backoff_limit_per_index(job: &Job) -> Option<i32> {
    job.spec.as_ref().and_then(|s| s.backoff_limit_per_index)
}

pub fn find_condition<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

pub(super) fn has_true(status: &JobStatus, type_: &str) -> Option<JobCondition> {
    find_condition(status, type_)
        .filter(|c| c.status == c::TRUE)
        .cloned()
}

/// `Complete` or `Failed` is True.
pub fn is_finished(job: &Job) -> bool {
    job.status.as_ref().is_some_and(|s| {
        s.conditions.iter().flatten().any(|cond| {
            (cond.type_ == c::COMPLETE || cond.type_ == c::FAILED) && cond.status == c::TRUE
        })
    })
}

pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: jiff::Timestamp,
) -> JobCondition {
    JobCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

pub(super) fn failure_target(reason: &str, message: &str, now: jiff::Timestamp) -> JobCondition {
    new_condition(c::FAILURE_TARGET, c::TRUE, reason, message, now)
}

pub(crate) fn uncounted_sets(status: &JobStatus) -> (HashSet<String>, HashSet<String>) {
    let u = status.uncounted_terminated_pods.clone().unwrap_or_default();
    (
        u.succeeded.unwrap_or_default().into_iter().collect(),
        u.failed.unwrap_or_default().into_iter().collect(),
    )
}

/// The external controller named in `spec.managedBy`, if it is not this controller.
pub fn managed_by_external(job: &Job) -> Option<&str> {
    job.spec
        .as_ref()
        .and_then(|s| s.managed_by.as_deref())
        .filter(|m| *m != crate::consts::MANAGED_BY_JOB_CONTROLLER)
}

/// The Job's selector; a missing one selects nothing (`LabelSelectorAsSelector(nil)`).
pub fn selector_of(job: &Job) -> Result<rkcm_runtime::workload::selector::Selector, String> {
    rkcm_runtime::workload::selector::Selector::from_optional(
        job.spec.as_ref().and_then(|s| s.selector.as_ref()),
    )
    .map_err(|e| e.to_string())
}
