//! PURE: the changes a sync makes to a CronJob's status (its working copy): Jobs leaving and
//! entering `status.active`, `lastScheduleTime` and `lastSuccessfulTime`. Each returns or
//! implies that the status must be written.
//!
//! Mirrors the status edits of upstream `syncCronJob` and `deleteFromActiveList` in
//! `cronjob_controllerv2.go` and `utils.go`.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::plan::job_reference;

/// Removes every `status.active` entry with this UID.
pub fn delete_from_active_list(cj: &mut CronJob, uid: &str) {
    if let Some(a) = cj.status.as_mut().and_then(|s| s.active.as_mut()) {
        a.retain(|r| r.uid.as_deref() != Some(uid));
    }
}

/// After a start: record the Job in `status.active` and the instant in `lastScheduleTime`.
pub fn record_start(cj: &mut CronJob, job: &Job, scheduled: Timestamp) {
    let status = cj.status.get_or_insert_with(Default::default);
    status
        .active
        .get_or_insert_with(Vec::new)
        .push(job_reference(job));
    status.last_schedule_time = Some(Time(scheduled));
}

/// A succeeded child's completion: `lastSuccessfulTime` becomes the newest completion time
/// seen. Returns whether the status changed.
pub fn record_success(cj: &mut CronJob, job: &Job) -> bool {
    let completion = job.status.as_ref().and_then(|s| s.completion_time.clone());
    let status = cj.status.get_or_insert_with(Default::default);
    let mut changed = false;
    if status.last_successful_time.is_none() {
        status.last_successful_time = completion.clone();
        changed = true;
    }
    if let (Some(c), Some(last)) = (&completion, &status.last_successful_time)
        && c.0 > last.0
    {
        status.last_successful_time = completion.clone();
        changed = true;
    }
    changed
}

#[cfg(test)]
#[path = "status/tests.rs"]
mod tests;
