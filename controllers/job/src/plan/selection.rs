//! PURE: which pods a sync counts and which it acts on: pods not yet accounted for, the restart
//! and pod-failure-policy checks, failed and pending indexes, the pods removed first, and the
//! failed pods kept until their index is replaced (`indexed_job_utils.go`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::cache::cached::Pod;

use super::spec::{backoff_limit, completions, is_indexed};
use crate::consts::pod as phase;
use crate::indexes::{
    Intervals, completion_index, index_absolute_failure_count, index_failure_count,
    index_ignored_failure_count, valid_index,
};
use crate::pods::{
    cmp_for_removal, finished_time, has_tracking_finalizer, is_failed, is_terminating_not_terminal,
    only_replace_failed, phase_of, uid,
};
use crate::policy::{Action as PolicyAction, match_pod_failure_policy};

/// Pods not yet accounted for (finalizer present, not in `uncounted`, removal not pending)
/// with a valid index for Indexed Jobs, that pass `filter` (`getValidPodsWithFilter`).
pub(super) fn valid_pods<'p>(
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
pub(super) fn past_backoff_limit_on_failure(job: &Job, pods: &[Arc<Pod>]) -> bool {
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
pub(super) fn fail_job_message(job: &Job, pods: &[Arc<Pod>]) -> Option<String> {
    let policy = job.spec.as_ref()?.pod_failure_policy.as_ref()?;
    pods.iter()
        .filter(|p| is_failed(p, job))
        .find_map(|p| match_pod_failure_policy(Some(policy), p).fail_job_message)
}

pub(super) fn is_index_failed(job: &Job, pod: &Pod, limit: i32) -> bool {
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

pub(super) fn indexes_of<'a>(pods: impl Iterator<Item = &'a Pod>) -> Vec<i32> {
    let set: BTreeSet<i32> = pods.filter_map(completion_index).collect();
    set.into_iter().collect()
}

/// `firstPendingIndexes`: the lowest `count` indexes below `completions` that are not
/// succeeded, active, failed, or (when only failed pods are replaced) held by a terminating
/// pod.
pub(super) fn first_pending_indexes(
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
pub(super) fn pods_with_delayed_deletion(
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
pub(super) fn new_index_failure_counts(job: &Job, replaced: Option<&Arc<Pod>>) -> (i32, i32) {
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
