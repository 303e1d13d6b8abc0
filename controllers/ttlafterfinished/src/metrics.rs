//! `ttl_after_finished_controller_job_deletion_duration_seconds` (upstream
//! `pkg/controller/ttlafterfinished/metrics/metrics.go`), registered once in the process
//! registry.

use std::sync::OnceLock;

use prometheus::{Histogram, HistogramOpts};
use rkcm_runtime::metrics;

use crate::consts::metrics as m;

/// The histogram, or `None` if it could not be built (its options are constants; a test
/// proves they are valid). Losing a metric must never stop the controller.
fn job_deletion_duration() -> Option<&'static Histogram> {
    static METRIC: OnceLock<Option<Histogram>> = OnceLock::new();
    metrics::get_or_register(&METRIC, m::JOB_DELETION_DURATION, || {
        let buckets =
            prometheus::exponential_buckets(m::BUCKET_START, m::BUCKET_FACTOR, m::BUCKET_COUNT)?;
        Histogram::with_opts(
            HistogramOpts::new(m::JOB_DELETION_DURATION, m::JOB_DELETION_DURATION_HELP)
                .subsystem(m::SUBSYSTEM)
                .buckets(buckets),
        )
        .map(metrics::register)
    })
}

/// Registers the metric, so that it is exported (with a zero count) before the first delete.
pub(crate) fn register() {
    let _ = job_deletion_duration();
}

/// Records that a Job was deleted `seconds` after its TTL expired.
pub(crate) fn observe_job_deletion(seconds: f64) {
    if let Some(h) = job_deletion_duration() {
        h.observe(seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_renders_with_upstream_name_and_buckets() {
        observe_job_deletion(0.05);
        let text = rkcm_runtime::metrics::render();
        let name = "ttl_after_finished_controller_job_deletion_duration_seconds";
        assert!(text.contains(&format!("# TYPE {name} histogram")), "{text}");
        // 0.1 s doubling, 14 buckets: the last finite bound is 0.1 * 2^13 = 819.2 s.
        for le in ["0.1", "0.2", "0.4", "0.8", "1.6", "102.4", "819.2", "+Inf"] {
            assert!(
                text.contains(&format!("{name}_bucket{{le=\"{le}\"}}")),
                "bucket {le}: {text}"
            );
        }
        assert!(!text.contains(&format!("{name}_bucket{{le=\"1638.4\"}}")));
        let buckets = text
            .lines()
            .filter(|l| l.starts_with(&format!("{name}_bucket")))
            .count();
        assert_eq!(buckets, 15, "14 bounds and +Inf");
        assert!(job_deletion_duration().is_some_and(|h| h.get_sample_count() >= 1));
    }
}
