//! PodGC's force-delete counters, with upstream names and labels, registered once in the
//! process registry (`rkcm_runtime::metrics::registry()`).

use std::sync::OnceLock;

use prometheus::{IntCounterVec, Opts};

use crate::consts::metrics as m;
use crate::plan::Reason;

/// The two counters of upstream `pkg/controller/podgc/metrics`. `None` only if a counter
/// could not be built (the options are constants; a unit test proves they are valid).
#[derive(Debug)]
pub(crate) struct Metrics {
    /// `pod_gc_collector_force_delete_pods_total{namespace,reason}`: attempts.
    deleting: Option<IntCounterVec>,
    /// `pod_gc_collector_force_delete_pod_errors_total{namespace,reason}`: failed attempts.
    errors: Option<IntCounterVec>,
}

impl Metrics {
    pub(crate) fn attempt(&self, namespace: &str, reason: Reason) {
        if let Some(c) = &self.deleting {
            c.with_label_values(&[namespace, reason.label()]).inc();
        }
    }

    pub(crate) fn error(&self, namespace: &str, reason: Reason) {
        if let Some(c) = &self.errors {
            c.with_label_values(&[namespace, reason.label()]).inc();
        }
    }

    #[cfg(test)]
    pub(crate) fn attempts(&self, namespace: &str, reason: Reason) -> u64 {
        self.deleting.as_ref().map_or(0, |c| {
            c.with_label_values(&[namespace, reason.label()]).get()
        })
    }

    #[cfg(test)]
    pub(crate) fn errors(&self, namespace: &str, reason: Reason) -> u64 {
        self.errors.as_ref().map_or(0, |c| {
            c.with_label_values(&[namespace, reason.label()]).get()
        })
    }
}

/// Builds and registers one counter. Registration fails only if something else registered
/// the same name; the counter then still counts and the failure is logged, because losing
/// metrics must not stop the controller.
fn counter(name: &'static str, help: &str) -> Option<IntCounterVec> {
    let opts = Opts::new(name, help).subsystem(m::SUBSYSTEM);
    let counter = match IntCounterVec::new(opts, &[m::LABEL_NAMESPACE, m::LABEL_REASON]) {
        Ok(c) => c,
        Err(error) => {
            tracing::error!(metric = name, %error, "building PodGC metric failed");
            return None;
        }
    };
    if let Err(error) = rkcm_runtime::metrics::registry().register(Box::new(counter.clone())) {
        tracing::error!(metric = name, %error, "registering PodGC metric failed");
    }
    Some(counter)
}

/// The process-wide counters; the first call registers them.
pub(crate) fn get() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| Metrics {
        deleting: counter(m::FORCE_DELETE_PODS_TOTAL, m::FORCE_DELETE_PODS_TOTAL_HELP),
        errors: counter(
            m::FORCE_DELETE_POD_ERRORS_TOTAL,
            m::FORCE_DELETE_POD_ERRORS_TOTAL_HELP,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_with_upstream_names_and_labels() {
        let metrics = get();
        assert!(metrics.deleting.is_some() && metrics.errors.is_some());
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
        assert!(std::ptr::eq(get(), metrics));
    }
}
