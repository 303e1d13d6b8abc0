//! `statefulset_controller_stale_sync_skips_total`,
//! `statefulset_controller_statefulset_max_unavailable` and
//! `statefulset_controller_statefulset_unavailable_replicas` (upstream
//! `pkg/controller/statefulset/metrics/metrics.go`), registered once in the process registry.
//! Losing a metric never stops the controller.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use rkcm_runtime::metrics::{get_or_register, register};

use crate::consts::metrics as m;

fn stale_sync_skips() -> Option<&'static IntCounterVec> {
    static METRIC: OnceLock<Option<IntCounterVec>> = OnceLock::new();
    get_or_register(&METRIC, m::STALE_SYNC_SKIPS, || {
        let opts = Opts::new(m::STALE_SYNC_SKIPS, m::STALE_SYNC_SKIPS_HELP).subsystem(m::SUBSYSTEM);
        IntCounterVec::new(opts, m::STALE_SYNC_SKIPS_LABELS).map(register)
    })
}

fn gauge(
    cell: &'static OnceLock<Option<IntGaugeVec>>,
    name: &str,
    help: &str,
) -> Option<&'static IntGaugeVec> {
    get_or_register(cell, name, || {
        let opts = Opts::new(name, help).subsystem(m::SUBSYSTEM);
        IntGaugeVec::new(opts, m::SET_LABELS).map(register)
    })
}

fn max_unavailable() -> Option<&'static IntGaugeVec> {
    static METRIC: OnceLock<Option<IntGaugeVec>> = OnceLock::new();
    gauge(&METRIC, m::MAX_UNAVAILABLE, m::MAX_UNAVAILABLE_HELP)
}

fn unavailable_replicas() -> Option<&'static IntGaugeVec> {
    static METRIC: OnceLock<Option<IntGaugeVec>> = OnceLock::new();
    gauge(
        &METRIC,
        m::UNAVAILABLE_REPLICAS,
        m::UNAVAILABLE_REPLICAS_HELP,
    )
}

/// Registers every metric (so they render before the first event).
pub(crate) fn init() {
    let _ = stale_sync_skips();
}

pub(crate) fn count_stale_sync_skip(group: &str, resource: &str) {
    if let Some(c) = stale_sync_skips() {
        c.with_label_values(&[group, resource]).inc();
    }
}

pub(crate) fn set_max_unavailable(namespace: &str, name: &str, policy: &str, v: i32) {
    if let Some(g) = max_unavailable() {
        g.with_label_values(&[namespace, name, policy])
            .set(i64::from(v));
    }
}

pub(crate) fn set_unavailable_replicas(namespace: &str, name: &str, policy: &str, v: i32) {
    if let Some(g) = unavailable_replicas() {
        g.with_label_values(&[namespace, name, policy])
            .set(i64::from(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_with_upstream_names() {
        count_stale_sync_skip("", "pods");
        set_max_unavailable("ns", "web", "Parallel", 2);
        set_unavailable_replicas("ns", "web", "Parallel", 1);
        let text = rkcm_runtime::metrics::render();
        assert!(
            text.contains(
                "statefulset_controller_stale_sync_skips_total{group=\"\",resource=\"pods\"}"
            ),
            "{text}"
        );
        assert!(text.contains("statefulset_controller_statefulset_max_unavailable{pod_management_policy=\"Parallel\",statefulset_name=\"web\",statefulset_namespace=\"ns\"} 2"), "{text}");
        assert!(
            text.contains("statefulset_controller_statefulset_unavailable_replicas{"),
            "{text}"
        );
    }
}
