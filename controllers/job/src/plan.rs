//! The pure decision of one Job sync: from the Job, its claimed pods, the expectations and the
//! backoff record, what to do with pods this sync and what the sync knows about success and
//! failure. Nothing here does I/O; [`crate::status`] turns the executed plan into status.
//!
//! - [`skip`]: the Jobs a sync leaves alone before planning; [`release_orphan`]: the orphan
//!   pods whose tracking finalizer comes off (`syncOrphanPod`).
//! - [`plan`]: this sync's [`Action`] and why it waits ([`Waiting`], each with its requeue
//!   delay); [`deadline_changed`]: the requeue when an update moves the active deadline.
//! - [`pod_template`] and [`new_pod`]: the pods the executor creates.
//!
//! Mirrors the first half of `syncJob` and `manageJob` in upstream
//! `pkg/controller/job/job_controller.go`, plus `calculateSucceededIndexes`,
//! `calculateFailedIndexes`, `firstPendingIndexes`, `activePodsForRemoval` and
//! `getPodsWithDelayedDeletionPerIndex` of `indexed_job_utils.go`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use rkcm_runtime::cache::cached::Pod;

use crate::backoff::{BackoffRecord, remaining_for_index};
use crate::consts::{
    MAX_POD_CREATE_DELETE_PER_SYNC, REPLACEMENT_FAILED, SYNC_BATCH_PERIOD, TRACKING_FINALIZER,
    condition as c, message, metrics as m, reason,
};
use crate::indexes::{
    Intervals, add_completion_index_env, apply_index, generate_name_with_index, valid_index,
};
use crate::pods::{
    has_tracking_finalizer, is_active, is_failed, is_ready, is_succeeded,
    is_terminating_not_terminal, only_replace_failed,
};
use crate::policy::{match_pod_failure_policy, match_success_policy};

mod gate;
mod selection;
mod spec;

pub use gate::{Skip, release_orphan, skip};
pub use selection::active_pods_for_removal;
use selection::{
    fail_job_message, first_pending_indexes, indexes_of, is_index_failed, new_index_failure_counts,
    past_backoff_limit_on_failure, pods_with_delayed_deletion, valid_pods,
};
pub(crate) use spec::uncounted_sets;
pub use spec::{
    DEFAULT_BACKOFF_LIMIT, backoff_limit_per_index, completion_mode_label, completions,
    find_condition, has_unknown_completion_mode, is_finished, is_indexed, is_suspended,
    managed_by_external, new_condition, selector_of, spec_of,
};
use spec::{backoff_limit, failure_target, has_true, parallelism};

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

/// Why a sync waits: the Job's reason codes, each with the time left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// `activeDeadlineSeconds` is reached in `remaining`, when the Job fails.
    ActiveDeadline { remaining: Duration },
    /// The Job's pod recreation backoff (failed pods counted against `backoffLimit`) ends in
    /// `remaining`; no pod is created until then.
    PodBackoff { remaining: Duration },
    /// Every pending index of a `backoffLimitPerIndex` Job is in its own recreation backoff;
    /// the first ends in `remaining`.
    IndexBackoff { remaining: Duration },
}

impl Waiting {
    /// The reason code (logs, `rkcm explain`).
    pub fn code(self) -> &'static str {
        match self {
            Self::ActiveDeadline { .. } => "ActiveDeadline",
            Self::PodBackoff { .. } => "PodBackoff",
            Self::IndexBackoff { .. } => "IndexBackoff",
        }
    }

    /// When to sync again: at the deadline itself; at the end of a backoff but no sooner than
    /// the sync batch period (upstream's `enqueueSyncJobWithDelay`).
    pub fn requeue_after(self) -> Duration {
        match self {
            Self::ActiveDeadline { remaining } => remaining,
            Self::PodBackoff { remaining } | Self::IndexBackoff { remaining } => {
                remaining.max(SYNC_BATCH_PERIOD)
            }
        }
    }
}

/// An update of a started Job that changed its `activeDeadlineSeconds`: the sync at the new
/// deadline (now, when it has passed).
pub fn deadline_changed(old: &Job, new: &Job, now: jiff::Timestamp) -> Option<Waiting> {
    let deadline = |j: &Job| j.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    let start = new.status.as_ref().and_then(|s| s.start_time.as_ref())?;
    let current = deadline(new)?;
    if deadline(old) == Some(current) {
        return None;
    }
    let elapsed = now.duration_since(start.0);
    let left = jiff::SignedDuration::from_secs(current).saturating_sub(elapsed);
    Some(Waiting::ActiveDeadline {
        remaining: Duration::try_from(left).unwrap_or(Duration::ZERO),
    })
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
    /// Why this sync waits, each a re-sync after [`Waiting::requeue_after`].
    pub waiting: Vec<Waiting>,
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

    let (mut finished, deadline) =
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
        waiting: deadline
            .map(|remaining| Waiting::ActiveDeadline { remaining })
            .into_iter()
            .collect(),
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
            plan.waiting.push(Waiting::PodBackoff { remaining });
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
            plan.waiting.push(Waiting::IndexBackoff { remaining: r });
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

/// The template every pod of this sync's creates starts from: the Job's, with the completion
/// index environment variable for Indexed Jobs and the tracking finalizer (once).
pub fn pod_template(job: &Job) -> PodTemplateSpec {
    let mut template = spec_of(job).template.clone();
    if is_indexed(job) {
        add_completion_index_env(&mut template);
    }
    let meta = template.metadata.get_or_insert_with(Default::default);
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.to_owned());
    }
    template
}

/// The pod to create for `new` from [`pod_template`]'s `template`, and its `generateName`
/// when it is not the default: an indexed pod gets its index fields (annotation, label,
/// hostname, failure counts) and a name carrying its index.
pub fn new_pod(
    template: &PodTemplateSpec,
    job_name: &str,
    new: Option<&NewPod>,
) -> (PodTemplateSpec, Option<String>) {
    let mut pod = template.clone();
    match new {
        Some(&NewPod {
            index: Some(ix),
            failure_counts,
        }) => {
            apply_index(&mut pod, job_name, ix, failure_counts);
            (pod, Some(generate_name_with_index(job_name, ix)))
        }
        _ => (pod, None),
    }
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

#[cfg(test)]
mod tests;
