//! Pod predicates the Job controller decides on: active, ready, terminating, failed (per the
//! Job's replacement policy), finish time, tracking finalizer, and upstream's `ActivePods`
//! removal order. Pure.
//!
//! Mirrors `isPodFailed`, `onlyReplaceFailedPods`, `hasJobTrackingFinalizer` of upstream
//! `pkg/controller/job/job_controller.go`, `getFinishedTime` of `backoff_utils.go`, and
//! `FilterActivePods`, `CountTerminatingPods`, `ActivePods` of `pkg/controller/controller_utils.go`.

use std::cmp::Ordering;

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::cache::cached::Pod;

use crate::consts::{REPLACEMENT_FAILED, TRACKING_FINALIZER, pod as phase};

pub use rkcm_runtime::workload::pod::{
    is_pod_active as is_active, is_pod_ready as is_ready, is_terminal, phase as phase_of,
    ready_condition,
};

pub fn is_succeeded(pod: &Pod) -> bool {
    phase_of(pod) == phase::SUCCEEDED
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Being deleted but not terminal yet (`FilterTerminatingPods`).
pub fn is_terminating_not_terminal(pod: &Pod) -> bool {
    is_terminating(pod) && !is_terminal(pod)
}

pub fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == TRACKING_FINALIZER))
}

pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

/// Only failed pods are replaced: `podReplacementPolicy: Failed`, or any pod failure policy.
pub fn only_replace_failed(job: &Job) -> bool {
    let Some(spec) = job.spec.as_ref() else {
        return false;
    };
    spec.pod_replacement_policy.as_deref() == Some(REPLACEMENT_FAILED)
        || spec.pod_failure_policy.is_some()
}

/// Whether the pod counts as failed for `job`: phase Failed, or (unless only failed pods are
/// replaced) being deleted without having succeeded.
pub fn is_failed(pod: &Pod, job: &Job) -> bool {
    if phase_of(pod) == phase::FAILED {
        return true;
    }
    if only_replace_failed(job) {
        return false;
    }
    is_terminating(pod) && phase_of(pod) != phase::SUCCEEDED
}

/// When the pod finished: the latest container `finishedAt` if every container terminated;
/// else the `Ready=False` transition; else `deletionTimestamp - grace`; else creation.
pub fn finished_time(pod: &Pod) -> jiff::Timestamp {
    if let Some(t) = finish_time_from_containers(pod) {
        return t;
    }
    if let Some(c) = ready_condition(pod)
        && c.status == "False"
        && let Some(t) = &c.last_transition_time
    {
        return t.0;
    }
    if let Some(dt) = &pod.metadata.deletion_timestamp {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        return dt
            .0
            .checked_sub(jiff::SignedDuration::from_secs(grace))
            .unwrap_or(dt.0);
    }
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

fn finish_time_from_containers(pod: &Pod) -> Option<jiff::Timestamp> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let mut latest: Option<jiff::Timestamp> = None;
    for cs in statuses {
        let t = cs
            .state
            .as_ref()?
            .terminated
            .as_ref()?
            .finished_at
            .as_ref()?
            .0;
        if t == jiff::Timestamp::UNIX_EPOCH {
            return None;
        }
        latest = Some(latest.map_or(t, |l| l.max(t)));
    }
    latest
}

fn phase_ordinal(pod: &Pod) -> u8 {
    match phase_of(pod) {
        phase::PENDING => 0,
        phase::UNKNOWN => 1,
        phase::RUNNING => 2,
        _ => 3,
    }
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

/// `a` "after or zero" `b`: unset times sort first, then newer.
fn after_or_zero(a: Option<jiff::Timestamp>, b: Option<jiff::Timestamp>) -> bool {
    match (a, b) {
        (None, _) | (_, None) => a.is_none(),
        (Some(a), Some(b)) => a > b,
    }
}

/// Upstream `ActivePods.Less`: the pod to remove first sorts first.
pub fn less_for_removal(a: &Pod, b: &Pod) -> bool {
    let node = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    if node(a) != node(b) {
        return !node(a);
    }
    if phase_ordinal(a) != phase_ordinal(b) {
        return phase_ordinal(a) < phase_ordinal(b);
    }
    if is_ready(a) != is_ready(b) {
        return !is_ready(a);
    }
    let ready_since =
        |p: &Pod| ready_condition(p).and_then(|c| c.last_transition_time.as_ref().map(|t| t.0));
    if is_ready(a) && is_ready(b) && ready_since(a) != ready_since(b) {
        return after_or_zero(ready_since(a), ready_since(b));
    }
    if max_restarts(a) != max_restarts(b) {
        return max_restarts(a) > max_restarts(b);
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    if created(a) != created(b) {
        return after_or_zero(created(a), created(b));
    }
    false
}

/// A total order built from [`less_for_removal`] for stable sorts.
pub fn cmp_for_removal(a: &Pod, b: &Pod) -> Ordering {
    if less_for_removal(a, b) {
        Ordering::Less
    } else if less_for_removal(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

pub fn labels_of(pod: &Pod) -> Option<&std::collections::BTreeMap<String, String>> {
    pod.metadata.labels.as_ref()
}

/// The strategic-merge patch that removes only the tracking finalizer.
pub fn remove_finalizer_patch() -> serde_json::Value {
    serde_json::json!({
        "metadata": { "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER] }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn job(v: serde_json::Value) -> Job {
        serde_json::from_value(json!({"spec": v})).unwrap()
    }

    #[test]
    fn failed_depends_on_replacement_policy() {
        let deleting = pod(
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}}),
        );
        let deleting_succeeded = pod(
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Succeeded"}}),
        );
        let failed = pod(json!({"status": {"phase": "Failed"}}));
        let default = job(json!({"template": {}}));
        let only_failed = job(json!({"template": {}, "podReplacementPolicy": "Failed"}));
        let with_policy = job(json!({"template": {}, "podFailurePolicy": {"rules": []}}));
        // (pod, job, failed?)
        let cases = [
            (&deleting, &default, true),
            (&deleting, &only_failed, false),
            (&deleting, &with_policy, false),
            (&deleting_succeeded, &default, false),
            (&failed, &default, true),
            (&failed, &only_failed, true),
        ];
        for (i, (p, j, want)) in cases.iter().enumerate() {
            assert_eq!(is_failed(p, j), *want, "case {i}");
        }
        assert!(is_terminating_not_terminal(&deleting));
        assert!(!is_active(&deleting) && !is_terminating_not_terminal(&deleting_succeeded));
    }

    #[test]
    fn finished_time_lookups() {
        let ts = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let containers = pod(
            json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {
                "containerStatuses": [
                    {"name": "a", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:00:10Z"}}},
                    {"name": "b", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-01-01T00:00:20Z"}}}
                ],
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:30Z"}]
            }}),
        );
        assert_eq!(finished_time(&containers), ts("2026-01-01T00:00:20Z"));
        let ready_false = pod(
            json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {
                "containerStatuses": [{"name": "a", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": {"running": {}}}],
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:30Z"}]
            }}),
        );
        assert_eq!(finished_time(&ready_false), ts("2026-01-01T00:00:30Z"));
        let deleted = pod(
            json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z", "deletionTimestamp": "2026-01-01T00:01:00Z", "deletionGracePeriodSeconds": 30}}),
        );
        assert_eq!(finished_time(&deleted), ts("2026-01-01T00:00:30Z"));
        let created = pod(json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:05Z"}}));
        assert_eq!(finished_time(&created), ts("2026-01-01T00:00:05Z"));
    }

    #[test]
    fn removal_order_table() {
        let unscheduled = pod(json!({"spec": {"containers": []}, "status": {"phase": "Pending"}}));
        let pending = pod(
            json!({"spec": {"containers": [], "nodeName": "n"}, "status": {"phase": "Pending"}}),
        );
        let running = pod(
            json!({"spec": {"containers": [], "nodeName": "n"}, "status": {"phase": "Running"}}),
        );
        let ready_new = pod(
            json!({"spec": {"containers": [], "nodeName": "n"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}]}}),
        );
        let ready_old = pod(
            json!({"spec": {"containers": [], "nodeName": "n"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        );
        let order = [&unscheduled, &pending, &running, &ready_new, &ready_old];
        for i in 0..order.len() {
            for j in 0..order.len() {
                assert_eq!(less_for_removal(order[i], order[j]), i < j, "{i} vs {j}");
            }
        }
        let young = pod(
            json!({"metadata": {"creationTimestamp": "2026-01-01T00:01:00Z"}, "status": {"phase": "Running"}}),
        );
        let old = pod(
            json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}}),
        );
        assert!(less_for_removal(&young, &old) && !less_for_removal(&old, &young));
    }
}
