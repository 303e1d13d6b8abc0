//! `statefulset_controller_stale_sync_skips_total`,
//! `statefulset_controller_statefulset_max_unavailable` and
//! `statefulset_controller_statefulset_unavailable_replicas` (upstream
//! `pkg/controller/statefulset/metrics/metrics.go`), registered once in the process registry.
//! Losing a metric never stops the controller.

use std::sync::OnceLock;

use prometheus::{IntGaugeVec, Opts};
use rkcm_runtime::metrics::{get_or_register, register};
use rkcm_runtime::workload::consistency::StaleGuard;

use crate::consts::metrics as m;

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

/// The controller's stale-cache guard, counting its skips in
/// `statefulset_controller_stale_sync_skips_total` (registered now, so it renders before the
/// first skip).
pub(crate) fn stale_guard() -> StaleGuard {
    StaleGuard::new(crate::config::NAME, m::SUBSYSTEM, m::STALE_SYNC_SKIPS_HELP)
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
        let skips = rkcm_runtime::workload::consistency::stale_sync_skips(
            m::SUBSYSTEM,
            m::STALE_SYNC_SKIPS_HELP,
        );
        skips.expect("valid").with_label_values(&["", "pods"]).inc();
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
