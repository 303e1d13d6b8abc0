//! `statefulset_controller_stale_sync_skips_total`,
//! `statefulset_controller_statefulset_max_unavailable` and
//! `statefulset_controller_statefulset_unavailable_replicas` (upstream
//! `pkg/controller/statefulset/metrics/metrics.go`), registered once in the process registry.
//! Losing a metric never stops the controller.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use crate::consts::metrics as m;

fn register<C: prometheus::core::Collector + Clone + 'static>(name: &str, c: C) -> C {
    if let Err(error) = rkcm_runtime::metrics::registry().register(Box::new(c.clone())) {
        tracing::error!(metric = name, %error, "registering StatefulSet metric failed");
    }
    c
}

fn stale_sync_skips() -> Option<&'static IntCounterVec> {
    static METRIC: OnceLock<Option<IntCounterVec>> = OnceLock::new();
    METRIC
        .get_or_init(|| {
            let opts =
                Opts::new(m::STALE_SYNC_SKIPS, m::STALE_SYNC_SKIPS_HELP).subsystem(m::SUBSYSTEM);
            IntCounterVec::new(opts, m::STALE_SYNC_SKIPS_LABELS)
                .ok()
                .map(|c| register(m::STALE_SYNC_SKIPS, c))
        })
        .as_ref()
}

fn gauge(
    cell: &'static OnceLock<Option<IntGaugeVec>>,
    name: &str,
    help: &str,
) -> Option<&'static IntGaugeVec> {
    cell.get_or_init(|| {
        let opts = Opts::new(name, help).subsystem(m::SUBSYSTEM);
        IntGaugeVec::new(opts, m::SET_LABELS)
            .ok()
            .map(|g| register(name, g))
    })
    .as_ref()
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
