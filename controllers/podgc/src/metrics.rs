//! PodGC's force-delete counters, with upstream names and labels, registered once in the
//! process registry (`rkcm_runtime::metrics::registry()`).

use std::sync::OnceLock;

use prometheus::{IntCounterVec, Opts};
use rkcm_runtime::metrics::{get_or_register, register};

use crate::consts::metrics as m;
use crate::plan::Reason;

/// The two counters of upstream `pkg/controller/podgc/metrics`.
#[derive(Debug)]
struct Counters {
    /// `pod_gc_collector_force_delete_pods_total{namespace,reason}`: attempts.
    deleting: IntCounterVec,
    /// `pod_gc_collector_force_delete_pod_errors_total{namespace,reason}`: failed attempts.
    errors: IntCounterVec,
}

impl Counters {
    fn build() -> prometheus::Result<Self> {
        let counter = |name: &str, help: &str| {
            IntCounterVec::new(
                Opts::new(name, help).subsystem(m::SUBSYSTEM),
                &[m::LABEL_NAMESPACE, m::LABEL_REASON],
            )
            .map(register)
        };
        Ok(Self {
            deleting: counter(m::FORCE_DELETE_PODS_TOTAL, m::FORCE_DELETE_PODS_TOTAL_HELP)?,
            errors: counter(
                m::FORCE_DELETE_POD_ERRORS_TOTAL,
                m::FORCE_DELETE_POD_ERRORS_TOTAL_HELP,
            )?,
        })
    }
}

/// The process-wide counters, registered on first use; `None` only if they could not be built
/// (the options are constants; a unit test proves they are valid).
fn counters() -> Option<&'static Counters> {
    static COUNTERS: OnceLock<Option<Counters>> = OnceLock::new();
    get_or_register(&COUNTERS, "podgc", Counters::build)
}

/// A handle on PodGC's force-delete counters.
#[derive(Debug)]
pub(crate) struct Metrics;

impl Metrics {
    pub(crate) fn attempt(&self, namespace: &str, reason: Reason) {
        if let Some(c) = counters() {
            c.deleting
                .with_label_values(&[namespace, reason.label()])
                .inc();
        }
    }

    pub(crate) fn error(&self, namespace: &str, reason: Reason) {
        if let Some(c) = counters() {
            c.errors
                .with_label_values(&[namespace, reason.label()])
                .inc();
        }
    }

    #[cfg(test)]
    pub(crate) fn attempts(&self, namespace: &str, reason: Reason) -> u64 {
        counters().map_or(0, |c| {
            c.deleting
                .with_label_values(&[namespace, reason.label()])
                .get()
        })
    }

    #[cfg(test)]
    pub(crate) fn errors(&self, namespace: &str, reason: Reason) -> u64 {
        counters().map_or(0, |c| {
            c.errors
                .with_label_values(&[namespace, reason.label()])
                .get()
        })
    }
}

/// The process-wide counters; the first call registers them.
pub(crate) fn get() -> &'static Metrics {
    static METRICS: Metrics = Metrics;
    counters();
    &METRICS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_with_upstream_names_and_labels() {
        assert!(counters().is_some(), "the definitions are valid");
        let metrics = get();
        metrics.attempt("metrics-test-ns", Reason::OutOfService);
        metrics.error("metrics-test-ns", Reason::OutOfService);
        let text = rkcm_runtime::metrics::render();
        assert!(
            text.contains(r#"pod_gc_collector_force_delete_pods_total{namespace="metrics-test-ns",reason="out-of-service"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"pod_gc_collector_force_delete_pod_errors_total{namespace="metrics-test-ns",reason="out-of-service"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains("# HELP pod_gc_collector_force_delete_pods_total [ALPHA] Number of pods"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE pod_gc_collector_force_delete_pod_errors_total counter"),
            "{text}"
        );
        // Registered once: a second call returns the same counters.
        assert!(std::ptr::eq(
            counters().expect("built"),
            counters().expect("built")
        ));
    }
}
