//! Pod predicates (`IsPodTerminal`, `IsPodReady`, `IsPodAvailable` of upstream
//! `pkg/api/v1/pod/util.go`). Temporary: the shared versions are moving into
//! `rkcm_runtime`, and this module goes when they land.

use k8s_openapi::api::core::v1::Pod;

/// Phase `Succeeded` or `Failed`.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// `status.phase`, or `""`.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn ready_since(pod: &Pod) -> Option<Option<jiff::Timestamp>> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}

/// The `Ready` condition is `True`.
pub fn is_pod_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Ready for strictly longer than `min_ready_seconds` at `now`.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(since) => since.is_some_and(|t| {
            t.saturating_add(jiff::SignedDuration::from_secs(i64::from(
                min_ready_seconds,
            )))
            .is_ok_and(|due| due < now)
        }),
    }
}
