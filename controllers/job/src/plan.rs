//! The pure decision of one Job sync: from the Job, its claimed pods, the expectations and the
//! backoff record, what to do with pods this sync and what the sync knows about success and
//! failure. Nothing here does I/O; [`crate::status`] turns the executed plan into status.
//!
//! Mirrors the first half of `syncJob` and `manageJob` in upstream
//! `pkg/controller/job/job_controller.go`, plus `calculateSucceededIndexes`,
//! `calculateFailedIndexes`, `firstPendingIndexes`, `activePodsForRemoval` and
//! `getPodsWithDelayedDeletionPerIndex` of `indexed_job_utils.go`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rkcm_runtime::cache::cached::Pod;

use crate::backoff::{BackoffRecord, remaining_for_index};
use crate::consts::{
    COMPLETION_INDEXED, COMPLETION_NON_INDEXED, MAX_POD_CREATE_DELETE_PER_SYNC, REPLACEMENT_FAILED,
    condition as c, message, metrics as m, pod as phase, reason,
};
use crate::indexes::{
    Intervals, completion_index, index_absolute_failure_count, index_failure_count,
    index_ignored_failure_count, valid_index,
};
use crate::pods::{
    cmp_for_removal, finished_time, has_tracking_finalizer, is_active, is_failed, is_ready,
    is_succeeded, is_terminating_not_terminal, only_replace_failed, phase_of, uid,
};
use crate::policy::{Action as PolicyAction, match_pod_failure_policy, match_success_policy};

/// Upstream default of `spec.backoffLimit` (the API server defaults it; a missing value is
/// treated the same way).
pub const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// What the sync reads.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    pub job: &'a Job,
    /// Pods the Job controls after claiming (adopted ones already carry the finalizer).
    pub pods: &'a [Arc<Pod>],
    /// UIDs of pods whose finalizer removal was issued but not yet observed.
    pub expected_rm_finalizers: &'a HashSet<String>,
    /// Creation/deletion expectations were met (read before listing pods).
    pub expectations_satisfied: bool,
    /// The in-memory recreation backoff record of this Job.
    pub backoff: BackoffRecord,
}

/// A pod to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPod {
    /// The completion index (Indexed Jobs).
    pub index: Option<i32>,
    /// `(job-index-failure-count, job-index-ignored-failure-count)` with `backoffLimitPerIndex`.
    pub failure_counts: Option<(i32, i32)>,
}

/// What to do with pods this sync.
#[derive(Debug, Clone, Default)]
pub enum Action {
    /// Nothing.
    #[default]
    None,
    /// The Job is finishing: delete every active pod gracefully, keeping finalizers so the
    /// pods are counted once they terminate.
    DeleteActive(Vec<Arc<Pod>>),
    /// Suspension or surplus: remove the tracking finalizer, then delete (never counted).
    Remove(Vec<Arc<Pod>>),
    /// Create these pods (slow start).
    Create(Vec<NewPod>),
}

/// The decision of one sync.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `status.startTime` after the first step (set now when unset and not suspended).
    pub start_time: Option<jiff::Timestamp>,
    /// The finish candidate: `FailureTarget`, `SuccessCriteriaMet`, or the terminal condition
    /// when the interim one is already recorded.
    pub finished: Option<JobCondition>,
    pub action: Action,
    /// Whether `manageJob` ran (suspend/resume conditions are only updated then).
    pub manage_called: bool,
    /// The `action` label of the sync metrics.
    pub sync_action: &'static str,
    /// Re-sync when `activeDeadlineSeconds` expires.
    pub deadline_requeue: Option<Duration>,
    /// Re-sync when the recreation backoff ends (floored at 1 s by the caller).
    pub backoff_requeue: Option<Duration>,
    /// The backoff record to commit once the status write accounting for it succeeds.
    pub new_backoff: BackoffRecord,
    /// Running totals (including not-yet-counted pods).
    pub succeeded: i32,
    pub failed: i32,
    pub active: Vec<Arc<Pod>>,
    pub ready: i32,
    pub terminating: i32,
    pub prev_succeeded_indexes: Intervals,
    pub succeeded_indexes: Intervals,
    /// `Some` exactly when `backoffLimitPerIndex` is set.
    pub failed_indexes: Option<Intervals>,
    /// Per index, the failed pod whose finalizer stays until its replacement exists.
    pub delayed_deletion: HashMap<i32, Arc<Pod>>,
}

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

fn parallelism(job: &Job) -> i32 {
    job.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1)
}

fn backoff_limit(job: &Job) -> i32 {
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

fn has_true(status: &JobStatus, type_: &str) -> Option<JobCondition> {
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

fn failure_target(reason: &str, message: &str, now: jiff::Timestamp) -> JobCondition {
    new_condition(c::FAILURE_TARGET, c::TRUE, reason, message, now)
}

pub(crate) fn uncounted_sets(status: &JobStatus) -> (HashSet<String>, HashSet<String>) {
    let u = status.uncounted_terminated_pods.clone().unwrap_or_default();
    (
        u.succeeded.unwrap_or_default().into_iter().collect(),
        u.failed.unwrap_or_default().into_iter().collect(),
    )
}

/// Pods not yet accounted for (finalizer present, not in `uncounted`, removal not pending)
/// with a valid index for Indexed Jobs, that pass `filter` (`getValidPodsWithFilter`).
fn valid_pods<'p>(
    job: &Job,
    pods: &'p [Arc<Pod>],
    uncounted: Option<&HashSet<String>>,
    expected_rm: &HashSet<String>,
    filter: impl Fn(&Pod) -> bool,
) -> Vec<&'p Pod> {
    let indexed = is_indexed(job);
    let completions = completions(job).unwrap_or(0);
    pods.iter()
        .map(|p| &**p)
        .filter(|p| {
            let u = uid(p);
            if !has_tracking_finalizer(p)
                || uncounted.is_some_and(|s| s.contains(u))
                || expected_rm.contains(u)
            {
                return false;
            }
            if indexed && valid_index(p, completions).is_none() {
                return false;
            }
            filter(p)
        })
        .collect()
}

/// The restart count check of `restartPolicy: OnFailure` Jobs (`pastBackoffLimitOnFailure`).
fn past_backoff_limit_on_failure(job: &Job, pods: &[Arc<Pod>]) -> bool {
    let restart_policy = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.restart_policy.as_deref());
    if restart_policy != Some(phase::RESTART_ON_FAILURE) {
        return false;
    }
    let mut sum: i64 = 0;
    for p in pods {
        if !matches!(phase_of(p), phase::RUNNING | phase::PENDING) {
            continue;
        }
        if let Some(s) = &p.status {
            for cs in s
                .init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
            {
                sum += i64::from(cs.restart_count);
            }
        }
    }
    let limit = i64::from(backoff_limit(job));
    if limit == 0 { sum > 0 } else { sum >= limit }
}

/// `getFailJobMessage`: the message of the first failed pod matching a `FailJob` rule.
fn fail_job_message(job: &Job, pods: &[Arc<Pod>]) -> Option<String> {
    let policy = job.spec.as_ref()?.pod_failure_policy.as_ref()?;
    pods.iter()
        .filter(|p| is_failed(p, job))
        .find_map(|p| match_pod_failure_policy(Some(policy), p).fail_job_message)
}

fn is_index_failed(job: &Job, pod: &Pod, limit: i32) -> bool {
    if !is_failed(pod, job) {
        return false;
    }
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref());
    let counted = if policy.is_some() {
        let m = match_pod_failure_policy(policy, pod);
        if m.action == Some(PolicyAction::FailIndex) {
            return true;
        }
        m.count_failed
    } else {
        true
    };
    counted && index_failure_count(pod) >= limit
}

fn indexes_of<'a>(pods: impl Iterator<Item = &'a Pod>) -> Vec<i32> {
    let set: BTreeSet<i32> = pods.filter_map(completion_index).collect();
    set.into_iter().collect()
}

/// `firstPendingIndexes`: the lowest `count` indexes below `completions` that are not
/// succeeded, active, failed, or (when only failed pods are replaced) held by a terminating
/// pod.
fn first_pending_indexes(
    job: &Job,
    pods: &[Arc<Pod>],
    active: &[Arc<Pod>],
    succeeded: &Intervals,
    failed: Option<&Intervals>,
    count: usize,
    completions: i32,
) -> Vec<i32> {
    if count == 0 {
        return Vec::new();
    }
    let mut non_pending = succeeded.with_indexes(&indexes_of(active.iter().map(|p| &**p)));
    if only_replace_failed(job) {
        let terminating = indexes_of(
            pods.iter()
                .map(|p| &**p)
                .filter(|p| is_terminating_not_terminal(p)),
        );
        non_pending = non_pending.with_indexes(&terminating);
    }
    if let Some(f) = failed {
        non_pending = non_pending.merge(f);
    }
    let mut result = Vec::with_capacity(count);
    let mut candidate = 0i32;
    for iv in &non_pending.0 {
        while candidate < completions && result.len() < count && candidate < iv.first {
            result.push(candidate);
            candidate += 1;
        }
        if candidate < iv.last.saturating_add(1) {
            candidate = iv.last.saturating_add(1);
        }
    }
    while candidate < completions && result.len() < count {
        result.push(candidate);
        candidate += 1;
    }
    result
}

/// `activePodsForRemoval`: for Indexed Jobs every pod without a valid index and all but the
/// most advanced pod of a duplicated index, then the least advanced pods until `rm_at_least`.
pub fn active_pods_for_removal(
    job: &Job,
    active: &[Arc<Pod>],
    rm_at_least: usize,
) -> Vec<Arc<Pod>> {
    let mut rm: Vec<Arc<Pod>> = Vec::new();
    let mut left: Vec<Arc<Pod>> = Vec::new();
    if is_indexed(job) {
        let completions = completions(job).unwrap_or(0);
        let mut by_index: std::collections::BTreeMap<i32, Vec<Arc<Pod>>> = Default::default();
        for p in active {
            match completion_index(p) {
                Some(ix) if ix < completions => by_index.entry(ix).or_default().push(p.clone()),
                _ => rm.push(p.clone()),
            }
        }
        for (_, mut group) in by_index {
            group.sort_by(|a, b| cmp_for_removal(a, b));
            if let Some(keep) = group.pop() {
                rm.extend(group);
                left.push(keep);
            }
        }
    } else {
        left = active.to_vec();
    }
    if rm.len() < rm_at_least {
        left.sort_by(|a, b| cmp_for_removal(a, b));
        let n = (rm_at_least - rm.len()).min(left.len());
        rm.extend(left.into_iter().take(n));
    }
    rm
}

/// The failed pod per index whose finalizer stays until its replacement exists, so the
/// replacement can carry the failure count forward.
fn pods_with_delayed_deletion(
    job: &Job,
    pods: &[Arc<Pod>],
    expected_rm: &HashSet<String>,
    active: &[Arc<Pod>],
    succeeded: &Intervals,
    failed: &Intervals,
) -> HashMap<i32, Arc<Pod>> {
    let active_indexes: HashSet<i32> = active.iter().filter_map(|p| completion_index(p)).collect();
    let completions = completions(job).unwrap_or(0);
    let mut out: HashMap<i32, Arc<Pod>> = HashMap::new();
    for p in pods {
        let u = uid(p);
        if !has_tracking_finalizer(p) || expected_rm.contains(u) || !is_failed(p, job) {
            continue;
        }
        let Some(ix) = valid_index(p, completions) else {
            continue;
        };
        if succeeded.has(ix) || failed.has(ix) || active_indexes.contains(&ix) {
            continue;
        }
        let replace = match out.get(&ix) {
            Some(last) => {
                index_absolute_failure_count(last) <= index_absolute_failure_count(p)
                    && finished_time(p) >= finished_time(last)
            }
            None => true,
        };
        if replace {
            out.insert(ix, p.clone());
        }
    }
    out
}

/// Failure counts for the replacement of `replaced` (`getNewIndexFailureCounts`).
fn new_index_failure_counts(job: &Job, replaced: Option<&Arc<Pod>>) -> (i32, i32) {
    let Some(pod) = replaced else {
        return (0, 0);
    };
    let (mut failed, mut ignored) = (index_failure_count(pod), index_ignored_failure_count(pod));
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref());
    if policy.is_none() || match_pod_failure_policy(policy, pod).count_failed {
        failed = failed.saturating_add(1);
    } else {
        ignored = ignored.saturating_add(1);
    }
    (failed, ignored)
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Plans one sync of a Job that is not finished, not managed elsewhere and of a known
/// completion mode.
pub fn plan(s: &Snapshot<'_>, now: jiff::Timestamp) -> Plan {
    let job = s.job;
    let status = job.status.clone().unwrap_or_default();
    let (unc_succeeded, unc_failed) = uncounted_sets(&status);
    let pods = s.pods;
    let active: Vec<Arc<Pod>> = pods.iter().filter(|p| is_active(p)).cloned().collect();
    let ready = to_i32(active.iter().filter(|p| is_ready(p)).count());
    let terminating = to_i32(
        pods.iter()
            .filter(|p| is_terminating_not_terminal(p))
            .count(),
    );

    let new_succeeded = valid_pods(
        job,
        pods,
        Some(&unc_succeeded),
        s.expected_rm_finalizers,
        is_succeeded,
    );
    let new_failed = valid_pods(
        job,
        pods,
        Some(&unc_failed),
        s.expected_rm_finalizers,
        |p| is_failed(p, job),
    );
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref());
    let non_ignored_failed = new_failed
        .iter()
        .filter(|p| policy.is_none() || match_pod_failure_policy(policy, p).count_failed)
        .count();
    let mut succeeded = status
        .succeeded
        .unwrap_or(0)
        .saturating_add(to_i32(new_succeeded.len()))
        .saturating_add(to_i32(unc_succeeded.len()));
    let failed = status
        .failed
        .unwrap_or(0)
        .saturating_add(to_i32(non_ignored_failed))
        .saturating_add(to_i32(unc_failed.len()));

    let suspended = is_suspended(job);
    let start_time = match status.start_time.as_ref() {
        Some(t) => Some(t.0),
        None if !suspended => Some(now),
        None => None,
    };
    let new_backoff = s.backoff.next(&new_succeeded, &new_failed);

    let (mut finished, deadline_requeue) =
        finished_or_deadline(job, &status, pods, failed, start_time, now);

    let indexes = if is_indexed(job) {
        indexed(s, &status, &active, &mut finished, now)
    } else {
        Indexes::default()
    };
    if let Some(total) = indexes.succeeded {
        succeeded = total;
    }

    let mut plan = Plan {
        start_time,
        finished,
        action: Action::None,
        manage_called: false,
        sync_action: m::ACTION_RECONCILING,
        deadline_requeue,
        backoff_requeue: None,
        new_backoff,
        succeeded,
        failed,
        active,
        ready,
        terminating,
        prev_succeeded_indexes: indexes.prev_succeeded,
        succeeded_indexes: indexes.succeeded_indexes,
        failed_indexes: indexes.failed,
        delayed_deletion: indexes.delayed_deletion,
    };
    if plan.finished.is_some() {
        plan.action = Action::DeleteActive(plan.active.clone());
    } else if s.expectations_satisfied && job.metadata.deletion_timestamp.is_none() {
        manage(job, pods, &mut plan, now);
    }
    plan
}

/// The condition that finishes the Job before any index is judged (success criteria or a
/// failure target already recorded, the pod failure policy, the backoff limit, the active
/// deadline), or else the requeue for the active deadline.
fn finished_or_deadline(
    job: &Job,
    status: &JobStatus,
    pods: &[Arc<Pod>],
    failed: i32,
    start_time: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
) -> (Option<JobCondition>, Option<Duration>) {
    let suspended = is_suspended(job);
    let mut deadline_requeue = None;
    let mut finished = has_true(status, c::SUCCESS_CRITERIA_MET);
    if finished.is_none() {
        if let Some(ft) = has_true(status, c::FAILURE_TARGET) {
            finished = Some(new_condition(
                c::FAILED,
                c::TRUE,
                ft.reason.as_deref().unwrap_or(""),
                ft.message.as_deref().unwrap_or(""),
                now,
            ));
        } else if let Some(msg) = fail_job_message(job, pods) {
            finished = Some(failure_target(reason::POD_FAILURE_POLICY, &msg, now));
        }
    }
    let ads = job.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    if finished.is_none() {
        if failed > backoff_limit(job) || past_backoff_limit_on_failure(job, pods) {
            finished = Some(failure_target(
                reason::BACKOFF_LIMIT_EXCEEDED,
                message::BACKOFF_LIMIT_EXCEEDED,
                now,
            ));
        } else if let (Some(ads), Some(start), false) = (ads, start_time, suspended) {
            let allowed = jiff::SignedDuration::from_secs(ads);
            let elapsed = now.duration_since(start);
            if elapsed >= allowed {
                finished = Some(failure_target(
                    reason::DEADLINE_EXCEEDED,
                    message::DEADLINE_EXCEEDED,
                    now,
                ));
            } else {
                deadline_requeue = Some(
                    Duration::try_from(allowed.saturating_sub(elapsed)).unwrap_or(Duration::ZERO),
                );
            }
        }
    }
    (finished, deadline_requeue)
}

/// What an Indexed Job's indexes say: the succeeded and failed intervals, the pods whose
/// finalizer waits for their index's replacement, the succeeded count (the succeeded
/// indexes), and (into `finished`) the failure or success condition they reach.
#[derive(Default)]
struct Indexes {
    prev_succeeded: Intervals,
    succeeded_indexes: Intervals,
    failed: Option<Intervals>,
    delayed_deletion: HashMap<i32, Arc<Pod>>,
    succeeded: Option<i32>,
}

fn indexed(
    s: &Snapshot<'_>,
    status: &JobStatus,
    active: &[Arc<Pod>],
    finished: &mut Option<JobCondition>,
    now: jiff::Timestamp,
) -> Indexes {
    let (job, pods) = (s.job, s.pods);
    let mut failed_indexes = None;
    let mut delayed_deletion = HashMap::new();
    let completions = completions(job).unwrap_or(0);
    let prev_succeeded_indexes = Intervals::parse(
        status.completed_indexes.as_deref().unwrap_or(""),
        completions,
    );
    let new_indexes = indexes_of(pods.iter().map(|p| &**p).filter(|p| {
        is_succeeded(p) && has_tracking_finalizer(p) && valid_index(p, completions).is_some()
    }));
    let succeeded_indexes = prev_succeeded_indexes.with_indexes(&new_indexes);
    if let Some(limit) = backoff_limit_per_index(job) {
        let prev_failed =
            Intervals::parse(status.failed_indexes.as_deref().unwrap_or(""), completions);
        let newly_failed = indexes_of(pods.iter().map(|p| &**p).filter(|p| {
            valid_index(p, completions).is_some()
                && has_tracking_finalizer(p)
                && is_index_failed(job, p, limit)
        }));
        let fi = prev_failed.with_indexes(&newly_failed);
        if finished.is_none() {
            let max_failed = job.spec.as_ref().and_then(|s| s.max_failed_indexes);
            let nfailed = fi.total();
            if max_failed.is_some_and(|m| nfailed > usize::try_from(m).unwrap_or(0)) {
                *finished = Some(failure_target(
                    reason::MAX_FAILED_INDEXES_EXCEEDED,
                    message::MAX_FAILED_INDEXES_EXCEEDED,
                    now,
                ));
            } else if nfailed > 0
                && nfailed + succeeded_indexes.total() >= usize::try_from(completions).unwrap_or(0)
            {
                *finished = Some(failure_target(
                    reason::FAILED_INDEXES,
                    message::FAILED_INDEXES,
                    now,
                ));
            }
        }
        delayed_deletion = pods_with_delayed_deletion(
            job,
            pods,
            s.expected_rm_finalizers,
            active,
            &succeeded_indexes,
            &fi,
        );
        failed_indexes = Some(fi);
    }
    if finished.is_none()
        && let Some(msg) = match_success_policy(
            job.spec.as_ref().and_then(|s| s.success_policy.as_ref()),
            completions,
            &succeeded_indexes,
        )
    {
        *finished = Some(new_condition(
            c::SUCCESS_CRITERIA_MET,
            c::TRUE,
            reason::SUCCESS_POLICY,
            &msg,
            now,
        ));
    }
    Indexes {
        succeeded: Some(to_i32(succeeded_indexes.total())),
        prev_succeeded: prev_succeeded_indexes,
        succeeded_indexes,
        failed: failed_indexes,
        delayed_deletion,
    }
}

/// `manageJob`: suspend, scale down, or create (respecting the recreation backoff).
fn manage(job: &Job, pods: &[Arc<Pod>], plan: &mut Plan, now: jiff::Timestamp) {
    plan.manage_called = true;
    let active = plan.active.len();
    if is_suspended(job) {
        plan.action = Action::Remove(active_pods_for_removal(job, &plan.active, active));
        plan.sync_action = m::ACTION_PODS_DELETED;
        return;
    }
    let active_i = to_i32(active);
    let parallelism = parallelism(job);
    let want_active = match completions(job) {
        None if plan.succeeded > 0 => active_i,
        None => parallelism,
        Some(c) => c
            .saturating_sub(plan.succeeded)
            .clamp(0, parallelism.max(0)),
    };
    let rm_at_least = usize::try_from(active_i.saturating_sub(want_active).max(0)).unwrap_or(0);
    let mut to_delete = active_pods_for_removal(job, &plan.active, rm_at_least);
    to_delete.truncate(MAX_POD_CREATE_DELETE_PER_SYNC);
    if !to_delete.is_empty() {
        plan.action = Action::Remove(to_delete);
        plan.sync_action = m::ACTION_PODS_DELETED;
        return;
    }
    let terminating = if only_replace_failed(job) {
        plan.terminating
    } else {
        0
    };
    let diff = want_active
        .saturating_sub(terminating)
        .saturating_sub(active_i);
    if diff <= 0 {
        plan.sync_action = m::ACTION_TRACKING;
        return;
    }
    plan.sync_action = m::ACTION_PODS_CREATED;
    let per_index = backoff_limit_per_index(job).is_some();
    if !per_index {
        let remaining = plan.new_backoff.remaining(now);
        if remaining > Duration::ZERO {
            plan.backoff_requeue = Some(remaining);
            return;
        }
    }
    let diff = usize::try_from(diff)
        .unwrap_or(0)
        .min(MAX_POD_CREATE_DELETE_PER_SYNC);
    if !is_indexed(job) {
        plan.action = Action::Create(vec![
            NewPod {
                index: None,
                failure_counts: None,
            };
            diff
        ]);
        return;
    }
    let completions = completions(job).unwrap_or(0);
    let mut indexes = first_pending_indexes(
        job,
        pods,
        &plan.active,
        &plan.succeeded_indexes,
        plan.failed_indexes.as_ref(),
        diff,
        completions,
    );
    if per_index {
        let mut now_ok = Vec::new();
        let mut min_remaining: Option<Duration> = None;
        for ix in indexes {
            let r = remaining_for_index(plan.delayed_deletion.get(&ix).map(|p| &**p), now);
            if r.is_zero() {
                now_ok.push(ix);
            } else {
                min_remaining = Some(min_remaining.map_or(r, |m| m.min(r)));
            }
        }
        if now_ok.is_empty()
            && let Some(r) = min_remaining
        {
            plan.backoff_requeue = Some(r);
            return;
        }
        indexes = now_ok;
    }
    plan.action = Action::Create(
        indexes
            .into_iter()
            .map(|ix| NewPod {
                index: Some(ix),
                failure_counts: per_index
                    .then(|| new_index_failure_counts(job, plan.delayed_deletion.get(&ix))),
            })
            .collect(),
    );
}

/// The `reason` label of `job_pods_creation_total` for this sync's creates.
pub fn creation_reason(job: &Job, plan: &Plan) -> &'static str {
    let policy_failed = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_replacement_policy.as_deref())
        == Some(REPLACEMENT_FAILED);
    if policy_failed && plan.failed > 0 {
        m::RECREATE_FAILED
    } else if plan.failed > 0 || plan.terminating > 0 {
        m::RECREATE_TERMINATING_OR_FAILED
    } else {
        m::CREATE_NEW
    }
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

#[cfg(test)]
mod tests;
