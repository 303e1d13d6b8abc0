//! PURE: pod phases and the pod predicates every workload controller shares.
//!
//! Mirrors `IsPodActive` and `IsPodTerminal` of `pkg/controller/controller_utils.go` and
//! `IsPodReady`, `IsPodAvailable` and `GetPodReadyCondition` of `pkg/api/v1/pod/util.go`
//! (the phase strings are `core/v1` `PodPhase` values).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::cache::cached::{Pod, PodCondition};

/// `core/v1` pod phases.
pub const PHASE_PENDING: &str = "Pending";
pub const PHASE_RUNNING: &str = "Running";
pub const PHASE_SUCCEEDED: &str = "Succeeded";
pub const PHASE_FAILED: &str = "Failed";
pub const PHASE_UNKNOWN: &str = "Unknown";

/// The pod condition type `Ready` and the condition status `True`.
pub const CONDITION_READY: &str = "Ready";
pub const CONDITION_TRUE: &str = "True";

/// `metadata.labels` of a pod template: the labels an owner's pods are created with.
pub fn template_labels(template: &PodTemplateSpec) -> Option<&BTreeMap<String, String>> {
    template.metadata.as_ref().and_then(|m| m.labels.as_ref())
}

/// `status.phase`, or `""` when the pod has none yet.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// `IsPodTerminal`: phase `Succeeded` or `Failed`.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), PHASE_SUCCEEDED | PHASE_FAILED)
}

/// `IsPodActive`: not terminal and not being deleted.
pub fn is_pod_active(pod: &Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// `GetPodReadyCondition`: the pod's `Ready` condition, if it has one.
pub fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == CONDITION_READY)
}

/// `IsPodReady`: the `Ready` condition is `True`.
pub fn is_pod_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == CONDITION_TRUE)
}

/// The `Ready` condition's `lastTransitionTime` when the pod is ready; `None` when it is not
/// ready or the time is unset (Go's zero time).
pub fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    ready_condition(pod)
        .filter(|c| c.status == CONDITION_TRUE)
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// `IsPodAvailable`: ready, and ready for strictly longer than `min_ready_seconds` at `now`
/// (with `min_ready_seconds > 0`, a pod without a ready transition time never is).
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    if !is_pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    ready_since(pod).is_some_and(|t| {
        t.saturating_add(jiff::SignedDuration::from_secs(i64::from(
            min_ready_seconds,
        )))
        .is_ok_and(|due| due < now)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ts(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(secs).expect("valid time")
    }

    fn pod(phase: Option<&str>, ready: Option<(&str, Option<i64>)>, deleting: bool) -> Pod {
        let mut pod = Pod::default();
        let status = pod.status.get_or_insert_with(Default::default);
        status.phase = phase.map(str::to_owned);
        if let Some((st, since)) = ready {
            status.conditions = Some(vec![PodCondition {
                type_: CONDITION_READY.into(),
                status: st.into(),
                last_transition_time: since.map(|s| Time(ts(s))),
                ..PodCondition::default()
            }]);
        }
        if deleting {
            pod.metadata.deletion_timestamp = Some(Time(ts(1)));
        }
        pod
    }

    #[test]
    fn phases_and_activity() {
        assert_eq!(phase(&Pod::default()), "");
        let cases = [
            (None, false, false, true),
            (Some(PHASE_PENDING), false, false, true),
            (Some(PHASE_RUNNING), false, false, true),
            (Some(PHASE_UNKNOWN), false, false, true),
            (Some(PHASE_SUCCEEDED), false, true, false),
            (Some(PHASE_FAILED), false, true, false),
            (Some(PHASE_RUNNING), true, false, false),
            (Some(PHASE_FAILED), true, true, false),
        ];
        for (ph, deleting, terminal, active) in cases {
            let p = pod(ph, None, deleting);
            assert_eq!(phase(&p), ph.unwrap_or(""));
            assert_eq!(is_terminal(&p), terminal, "{ph:?} deleting={deleting}");
            assert_eq!(is_pod_active(&p), active, "{ph:?} deleting={deleting}");
        }
    }

    #[test]
    fn readiness() {
        assert!(!is_pod_ready(&pod(Some(PHASE_RUNNING), None, false)));
        assert!(!is_pod_ready(&pod(
            Some(PHASE_RUNNING),
            Some(("False", Some(5))),
            false
        )));
        let ready = pod(Some(PHASE_RUNNING), Some(("True", Some(5))), false);
        assert!(is_pod_ready(&ready));
        assert_eq!(ready_since(&ready), Some(ts(5)));
        assert_eq!(
            ready_since(&pod(Some(PHASE_RUNNING), Some(("False", Some(5))), false)),
            None
        );
        assert_eq!(
            ready_since(&pod(Some(PHASE_RUNNING), Some(("True", None)), false)),
            None
        );
    }

    #[test]
    fn availability_is_strictly_after_min_ready() {
        let ready_at_100 = pod(Some(PHASE_RUNNING), Some(("True", Some(100))), false);
        assert!(is_pod_available(&ready_at_100, 0, ts(100)));
        assert!(is_pod_available(&ready_at_100, -1, ts(0)));
        assert!(
            !is_pod_available(&ready_at_100, 10, ts(110)),
            "not strictly"
        );
        assert!(is_pod_available(&ready_at_100, 10, ts(111)));
        let no_time = pod(Some(PHASE_RUNNING), Some(("True", None)), false);
        assert!(is_pod_available(&no_time, 0, ts(1)));
        assert!(!is_pod_available(&no_time, 1, ts(1_000_000)));
        let not_ready = pod(Some(PHASE_RUNNING), Some(("False", Some(1))), false);
        assert!(!is_pod_available(&not_ready, 0, ts(1_000)));
    }
}
