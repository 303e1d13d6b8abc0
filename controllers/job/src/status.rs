//! Status from an executed [`Plan`](crate::plan::Plan), and the two-phase count of
//! terminated pods. Pure.
//!
//! The count (upstream `trackJobStatusAndRemoveFinalizers`,
//! `flushUncountedAndRemoveFinalizers`, `cleanUncountedPodsWithoutFinalizers` and
//! `enactJobFinished` in `pkg/controller/job/job_controller.go`):
//! 1. [`track`]: every finished pod still holding the tracking finalizer is recorded in
//!    `status.uncountedTerminatedPods` (NonIndexed) or its index in `completedIndexes`
//!    (Indexed); the interim condition is added. The caller writes this status (write 1).
//! 2. The caller removes the finalizers of those pods.
//! 3. [`clean_uncounted`]: UIDs whose pod no longer has the finalizer move from
//!    `uncountedTerminatedPods` into `succeeded`/`failed`.
//! 4. [`enact_finished`]: once nothing is uncounted and no pod is terminating, the terminal
//!    condition is set. The caller writes again.
//!
//! A crash between any two steps is resumed by the next sync: a UID stays in `uncounted` until
//! the pod's finalizer is gone, and is counted exactly once when it is.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rkcm_runtime::cache::cached::Pod;

use crate::consts::{MAX_UNCOUNTED_PODS, condition as c, event, message, metrics as m, reason};
use crate::indexes::{Intervals, valid_index};
use crate::plan::{
    Action, Plan, backoff_limit_per_index, completion_mode_label, completions, find_condition,
    is_indexed, is_suspended, new_condition, uncounted_sets,
};
use crate::pods::{has_tracking_finalizer, is_failed, is_succeeded, uid};
use crate::policy::match_pod_failure_policy;

/// What executing the plan's pod action achieved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Executed {
    /// Pods deleted (NotFound counts as deleted).
    pub removed: i32,
    /// Of those, how many were Ready.
    pub removed_ready: i32,
    /// Pods created.
    pub created: i32,
}

/// An event to emit on the Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEvent {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

impl JobEvent {
    fn normal(reason: &str, message: &str) -> Self {
        Self {
            warning: false,
            reason: reason.to_owned(),
            message: message.to_owned(),
        }
    }
}

/// The status after the pod action, before counting.
#[derive(Debug, Clone)]
pub struct Managed {
    pub status: JobStatus,
    /// The finish candidate after the action (cleared when not every active pod could be
    /// deleted or expectations were unmet).
    pub finished: Option<JobCondition>,
    /// Active/ready/terminating or the Suspended condition changed.
    pub needs_flush: bool,
    pub events: Vec<JobEvent>,
}

/// Sets or updates a condition (`ensureJobConditionStatus`): never creates a False condition
/// from nothing. Returns whether the list changed.
pub fn ensure_condition(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: jiff::Timestamp,
) -> bool {
    if let Some(cond) = conditions.iter_mut().find(|x| x.type_ == type_) {
        if cond.status != status
            || cond.reason.as_deref().unwrap_or("") != reason
            || cond.message.as_deref().unwrap_or("") != message
        {
            *cond = new_condition(type_, status, reason, message, now);
            return true;
        }
        return false;
    }
    if status != c::FALSE {
        conditions.push(new_condition(type_, status, reason, message, now));
        return true;
    }
    false
}

/// Active, ready, terminating, completion check and suspend/resume after the pod action.
/// `clear_start_time_on_suspend`: gate `MutableSchedulingDirectivesForSuspendedJobs`.
pub fn after_action(
    job: &Job,
    plan: &Plan,
    expectations_satisfied: bool,
    exec: Executed,
    clear_start_time_on_suspend: bool,
    now: jiff::Timestamp,
) -> Managed {
    let mut status = job.status.clone().unwrap_or_default();
    if status.uncounted_terminated_pods.is_none() {
        status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());
    }
    status.start_time = plan.start_time.map(Time);
    let mut active = i32::try_from(plan.active.len()).unwrap_or(i32::MAX);
    let mut ready = plan.ready;
    let mut terminating = plan.terminating;
    let mut finished = plan.finished.clone();
    let mut events = Vec::new();
    let mut suspend_changed = false;
    match &plan.action {
        Action::DeleteActive(pods) => {
            let all = i32::try_from(pods.len()).unwrap_or(i32::MAX);
            if exec.removed != all || !expectations_satisfied {
                finished = None;
            }
            active -= exec.removed;
            terminating += exec.removed;
            ready -= exec.removed_ready;
        }
        Action::Remove(_) => {
            active -= exec.removed;
            terminating += exec.removed;
            ready -= exec.removed_ready;
        }
        Action::Create(_) => active += exec.created,
        Action::None => {}
    }
    if plan.finished.is_none() {
        let complete = match completions(job) {
            None => plan.succeeded > 0 && active == 0,
            Some(c) => plan.succeeded >= c && active == 0,
        };
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        if complete {
            finished = Some(new_condition(
                c::SUCCESS_CRITERIA_MET,
                c::TRUE,
                reason::COMPLETIONS_REACHED,
                message::COMPLETIONS_REACHED,
                now,
            ));
        } else if plan.manage_called {
            if is_suspended(job) {
                if ensure_condition(
                    conditions,
                    c::SUSPENDED,
                    c::TRUE,
                    reason::JOB_SUSPENDED,
                    message::JOB_SUSPENDED,
                    now,
                ) {
                    suspend_changed = true;
                    events.push(JobEvent::normal(event::SUSPENDED, message::JOB_SUSPENDED));
                    // The active deadline restarts on resume; with the gate on, the Job then
                    // counts as never started, so its scheduling directives may change
                    // (upstream `job_controller.go` `syncJob`).
                    if clear_start_time_on_suspend {
                        status.start_time = None;
                    }
                }
            } else if ensure_condition(
                conditions,
                c::SUSPENDED,
                c::FALSE,
                reason::JOB_RESUMED,
                message::JOB_RESUMED,
                now,
            ) {
                suspend_changed = true;
                events.push(JobEvent::normal(event::RESUMED, message::JOB_RESUMED));
                status.start_time = Some(Time(now));
            }
        }
        if status.conditions.as_ref().is_some_and(Vec::is_empty) {
            status.conditions = job.status.as_ref().and_then(|s| s.conditions.clone());
        }
    }
    let needs_flush = suspend_changed
        || status.active.unwrap_or(0) != active
        || status.ready != Some(ready)
        || status.terminating != Some(terminating);
    status.active = Some(active);
    status.ready = Some(ready);
    status.terminating = Some(terminating);
    Managed {
        status,
        finished,
        needs_flush,
        events,
    }
}

/// Phase 1 of the count.
#[derive(Debug, Clone)]
pub struct Tracked {
    /// The status to write first (uncounted UIDs, indexes, interim condition).
    pub status: JobStatus,
    pub needs_flush: bool,
    /// Pods whose finalizer to remove after the status write.
    pub remove_finalizer: Vec<Arc<Pod>>,
    /// UIDs of pods that still hold the finalizer (removal not pending).
    pub with_finalizer: HashSet<String>,
    /// The terminal condition to set once everything is counted.
    pub finished: Option<JobCondition>,
    /// The 500-entry cap was hit: more pods next sync, no terminal condition now.
    pub reached_max_uncounted: bool,
    /// Failed pods per matched policy action (metric).
    pub policy_actions: BTreeMap<&'static str, u64>,
}

fn uncounted_mut(status: &mut JobStatus) -> &mut UncountedTerminatedPods {
    status
        .uncounted_terminated_pods
        .get_or_insert_with(UncountedTerminatedPods::default)
}

/// `cleanUncountedPodsWithoutFinalizers`: UIDs whose pod no longer holds the finalizer move
/// from `uncountedTerminatedPods` into the counters. Returns whether anything changed.
pub fn clean_uncounted(status: &mut JobStatus, with_finalizer: &HashSet<String>) -> bool {
    let mut changed = false;
    // Mutant (sim only): a UID is counted while its pod still has the finalizer.
    let still_held = |uid: &String| {
        !rkcm_runtime::mutants::on("job-count-before-finalizer") && with_finalizer.contains(uid)
    };
    let u = uncounted_mut(status);
    let mut counted_succeeded = 0;
    let mut counted_failed = 0;
    if let Some(list) = u.succeeded.as_mut() {
        let before = list.len();
        list.retain(still_held);
        counted_succeeded = before - list.len();
    }
    if let Some(list) = u.failed.as_mut() {
        let before = list.len();
        list.retain(still_held);
        counted_failed = before - list.len();
    }
    if counted_succeeded > 0 {
        changed = true;
        status.succeeded = Some(
            status
                .succeeded
                .unwrap_or(0)
                .saturating_add(i32::try_from(counted_succeeded).unwrap_or(i32::MAX)),
        );
    }
    if counted_failed > 0 {
        changed = true;
        status.failed = Some(
            status
                .failed
                .unwrap_or(0)
                .saturating_add(i32::try_from(counted_failed).unwrap_or(i32::MAX)),
        );
    }
    changed
}

/// Phase 1: record finished pods before their finalizers go.
#[allow(clippy::too_many_arguments)]
pub fn track(
    job: &Job,
    pods: &[Arc<Pod>],
    expected_rm: &HashSet<String>,
    plan: &Plan,
    managed: Managed,
    now: jiff::Timestamp,
) -> Tracked {
    let Managed {
        mut status,
        finished,
        mut needs_flush,
        ..
    } = managed;
    let indexed = is_indexed(job);
    let completions = completions(job).unwrap_or(0);
    let ordered = in_index_order(pods, indexed);
    let with_finalizer: HashSet<String> = ordered
        .iter()
        .filter(|p| has_tracking_finalizer(p) && !expected_rm.contains(uid(p)))
        .map(|p| uid(p).to_owned())
        .collect();
    let (unc_succeeded, unc_failed) = uncounted_sets(&status);
    if clean_uncounted(&mut status, &with_finalizer) {
        needs_flush = true;
    }
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref());
    let finishing_with_failure = finished
        .as_ref()
        .is_some_and(|f| f.type_ != c::SUCCESS_CRITERIA_MET);
    let mut remove = Vec::new();
    let mut new_indexes: Vec<i32> = Vec::new();
    let mut policy_actions: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut reached_max = false;
    for pod in &ordered {
        if !has_tracking_finalizer(pod) || expected_rm.contains(uid(pod)) {
            continue;
        }
        let failed = is_failed(pod, job);
        if !can_remove_finalizer(job, plan, finished.as_ref(), pod, failed) {
            continue;
        }
        remove.push(pod.clone());
        let u = uid(pod).to_owned();
        if is_succeeded(pod) && !unc_failed.contains(&u) {
            if indexed {
                if let Some(ix) = valid_index(pod, completions)
                    && !plan.prev_succeeded_indexes.has(ix)
                {
                    new_indexes.push(ix);
                    needs_flush = true;
                }
            } else if !unc_succeeded.contains(&u) {
                needs_flush = true;
                uncounted_mut(&mut status)
                    .succeeded
                    .get_or_insert_with(Vec::new)
                    .push(u);
            }
        } else if (failed || finishing_with_failure)
            && !unc_failed.contains(&u)
            && (!indexed || valid_index(pod, completions).is_some())
        {
            let counted = if policy.is_some() {
                let m = match_pod_failure_policy(policy, pod);
                if let Some(a) = m.action {
                    *policy_actions.entry(a.as_str()).or_default() += 1;
                }
                m.count_failed
            } else {
                true
            };
            if counted {
                needs_flush = true;
                uncounted_mut(&mut status)
                    .failed
                    .get_or_insert_with(Vec::new)
                    .push(u);
            }
        }
        let u = uncounted_mut(&mut status);
        let recorded = new_indexes.len()
            + u.succeeded.as_ref().map_or(0, Vec::len)
            + u.failed.as_ref().map_or(0, Vec::len);
        if recorded >= MAX_UNCOUNTED_PODS {
            reached_max = true;
            break;
        }
    }
    if indexed && record_indexes(&mut status, plan, new_indexes) {
        needs_flush = true;
    }
    let (terminal, recorded) = terminal_condition(&mut status, finished, now);
    needs_flush |= recorded;
    Tracked {
        status,
        needs_flush,
        remove_finalizer: remove,
        with_finalizer,
        finished: terminal,
        reached_max_uncounted: reached_max,
        policy_actions,
    }
}

/// The pods, for an Indexed Job in index order (stable: pods of one index keep theirs).
fn in_index_order(pods: &[Arc<Pod>], indexed: bool) -> Vec<Arc<Pod>> {
    let mut ordered: Vec<Arc<Pod>> = pods.to_vec();
    if indexed {
        ordered.sort_by_key(|p| crate::indexes::completion_index(p).unwrap_or(-1));
    }
    ordered
}

/// An Indexed Job's `completedIndexes` (with the indexes newly succeeded), `succeeded` and
/// `failedIndexes`; whether a recorded value changed.
fn record_indexes(status: &mut JobStatus, plan: &Plan, mut new_indexes: Vec<i32>) -> bool {
    let mut changed = false;
    new_indexes.sort_unstable();
    new_indexes.dedup();
    let succeeded_indexes = plan.succeeded_indexes.with_indexes(&new_indexes);
    let s = succeeded_indexes.to_string();
    if status.completed_indexes.as_deref().unwrap_or("") != s {
        changed = true;
    }
    status.succeeded = Some(i32::try_from(succeeded_indexes.total()).unwrap_or(i32::MAX));
    status.completed_indexes = Some(s);
    let failed_str = plan.failed_indexes.as_ref().map(Intervals::to_string);
    if status.failed_indexes != failed_str {
        status.failed_indexes = failed_str;
        changed = true;
    }

    changed
}

/// The condition that ends the Job (`Failed` after a `FailureTarget`, `Complete` after
/// `SuccessCriteriaMet`), recording the interim condition in `status` if it is not yet there;
/// whether the status changed.
fn terminal_condition(
    status: &mut JobStatus,
    finished: Option<JobCondition>,
    now: jiff::Timestamp,
) -> (Option<JobCondition>, bool) {
    let mut recorded = false;
    let mut terminal = finished;
    if let Some(f) = terminal.as_ref()
        && f.type_ == c::FAILURE_TARGET
    {
        status
            .conditions
            .get_or_insert_with(Vec::new)
            .push(f.clone());
        recorded = true;
        terminal = Some(new_condition(
            c::FAILED,
            c::TRUE,
            f.reason.as_deref().unwrap_or(""),
            f.message.as_deref().unwrap_or(""),
            now,
        ));
    } else if let Some(f) = terminal.as_ref()
        && f.type_ == c::SUCCESS_CRITERIA_MET
        && f.status == c::TRUE
    {
        let existing =
            find_condition(status, c::SUCCESS_CRITERIA_MET).is_some_and(|x| x.status == c::TRUE);
        if !existing {
            status
                .conditions
                .get_or_insert_with(Vec::new)
                .push(f.clone());
            recorded = true;
        }
        terminal = Some(new_condition(
            c::COMPLETE,
            c::TRUE,
            f.reason.as_deref().unwrap_or(""),
            f.message.as_deref().unwrap_or(""),
            now,
        ));
    }
    (terminal, recorded)
}

/// `canRemoveFinalizer`: the Job is being deleted or finishing, the pod succeeded, or it
/// failed and is not the failed pod an index keeps until its replacement exists.
fn can_remove_finalizer(
    job: &Job,
    plan: &Plan,
    finished: Option<&JobCondition>,
    pod: &Arc<Pod>,
    failed: bool,
) -> bool {
    if job.metadata.deletion_timestamp.is_some() || finished.is_some() || is_succeeded(pod) {
        return true;
    }
    if !failed {
        return false;
    }
    if backoff_limit_per_index(job).is_some()
        && let Some(ix) = crate::indexes::completion_index(pod)
        && plan
            .delayed_deletion
            .get(&ix)
            .is_some_and(|p| uid(p) == uid(pod))
    {
        return false;
    }
    true
}

/// `enactJobFinished`: sets the terminal condition (and `completionTime` for `Complete`) once
/// every finished pod is counted and none is terminating. Returns whether it did.
pub fn enact_finished(
    status: &mut JobStatus,
    finished: &JobCondition,
    now: jiff::Timestamp,
) -> bool {
    let u = status.uncounted_terminated_pods.clone().unwrap_or_default();
    if !u.succeeded.unwrap_or_default().is_empty() || !u.failed.unwrap_or_default().is_empty() {
        return false;
    }
    if status.terminating.unwrap_or(0) > 0 {
        return false;
    }
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    ensure_condition(
        conditions,
        &finished.type_,
        &finished.status,
        finished.reason.as_deref().unwrap_or(""),
        finished.message.as_deref().unwrap_or(""),
        now,
    );
    if finished.type_ == c::COMPLETE {
        status.completion_time = conditions
            .iter()
            .find(|x| x.type_ == c::COMPLETE)
            .and_then(|x| x.last_transition_time.clone());
    }
    true
}

/// Events after the finishing write (`recordJobFinished`).
pub fn finished_events(job: &Job, status: &JobStatus, finished: &JobCondition) -> Vec<JobEvent> {
    let mut out = Vec::new();
    if finished.type_ == c::COMPLETE {
        if let Some(c) = completions(job)
            && status.succeeded.unwrap_or(0) > c
        {
            out.push(JobEvent {
                warning: true,
                reason: event::TOO_MANY_SUCCEEDED.to_owned(),
                message: event::TOO_MANY_SUCCEEDED_MESSAGE.to_owned(),
            });
        }
        out.push(JobEvent::normal(event::COMPLETED, event::COMPLETED_MESSAGE));
    } else {
        out.push(JobEvent {
            warning: true,
            reason: finished.reason.clone().unwrap_or_default(),
            message: finished.message.clone().unwrap_or_default(),
        });
    }
    out
}

/// What a status write finished, for `job_pods_finished_total` (per completion mode) and, for
/// Indexed Jobs, `job_finished_indexes_total`. Counters only grow: a decrease counts 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinishedCounts {
    /// `Indexed` or `NonIndexed`.
    pub mode: &'static str,
    pub succeeded_pods: u64,
    pub failed_pods: u64,
    /// Indexed Jobs: the label (`perIndex` with `backoffLimitPerIndex`, else `global`) and
    /// the newly succeeded and failed indexes.
    pub indexes: Option<(&'static str, u64, u64)>,
}

/// [`FinishedCounts`] of the change from `old` to `new`: for an Indexed Job the succeeded pods
/// are its newly succeeded indexes.
pub fn finished_counts(job: &Job, old: &JobStatus, new: &JobStatus) -> FinishedCounts {
    let delta = |new: Option<i32>, old: Option<i32>| {
        i64::from(new.unwrap_or(0)) - i64::from(old.unwrap_or(0))
    };
    let counted = |d: i64| u64::try_from(d).unwrap_or(0);
    let (succeeded, indexes) = if is_indexed(job) {
        let (s, f) = finished_index_deltas(job, old, new);
        let label = if backoff_limit_per_index(job).is_some() {
            "perIndex"
        } else {
            "global"
        };
        (s, Some((label, counted(s), counted(f))))
    } else {
        (delta(new.succeeded, old.succeeded), None)
    };
    FinishedCounts {
        mode: completion_mode_label(job),
        succeeded_pods: counted(succeeded),
        failed_pods: counted(delta(new.failed, old.failed)),
        indexes,
    }
}

/// The `result` label of `job_finished_total` for the terminal condition `finished`.
pub fn finished_result(finished: &JobCondition) -> &'static str {
    if finished.type_ == c::COMPLETE {
        m::SUCCEEDED
    } else {
        m::FAILED
    }
}

/// Index count changes between two statuses, for `job_finished_indexes_total`:
/// `(newly succeeded, newly failed)`.
pub fn finished_index_deltas(job: &Job, old: &JobStatus, new: &JobStatus) -> (i64, i64) {
    let completions = completions(job).unwrap_or(0);
    let count = |s: Option<&String>| -> i64 {
        s.map_or(0, |s| {
            i64::try_from(Intervals::parse(s, completions).total()).unwrap_or(0)
        })
    };
    let succeeded = count(new.completed_indexes.as_ref()) - count(old.completed_indexes.as_ref());
    let failed = if backoff_limit_per_index(job).is_some() {
        (count(new.failed_indexes.as_ref()) - count(old.failed_indexes.as_ref())).max(0)
    } else {
        0
    };
    (succeeded, failed)
}

#[cfg(test)]
mod tests;
