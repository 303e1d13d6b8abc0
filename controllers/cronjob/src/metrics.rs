//! `cronjob_controller_job_creation_skew_duration_seconds` (upstream
//! `pkg/controller/cronjob/metrics/metrics.go`, STABLE): seconds between a Job's scheduled
//! instant and its creation, observed for Jobs this controller created.

use std::sync::OnceLock;

use prometheus::{Histogram, HistogramOpts};
use rkcm_runtime::metrics::{get_or_register, register};

pub const JOB_CREATION_SKEW: &str = "job_creation_skew_duration_seconds";
pub const SUBSYSTEM: &str = "cronjob_controller";
pub const JOB_CREATION_SKEW_HELP: &str =
    "Time between when a cronjob is scheduled to be run, and when the corresponding job is created";
/// Upstream `prometheus.ExponentialBuckets(1, 2, 10)`: 1, 2, 4, ..., 512 s.
pub const BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

/// The histogram, registered on first use; `None` if it could not be built. Losing a metric
/// never stops the controller.
pub(crate) fn job_creation_skew() -> Option<&'static Histogram> {
    static METRIC: OnceLock<Option<Histogram>> = OnceLock::new();
    get_or_register(&METRIC, JOB_CREATION_SKEW, || {
        let opts = HistogramOpts::new(JOB_CREATION_SKEW, JOB_CREATION_SKEW_HELP)
            .subsystem(SUBSYSTEM)
            .buckets(BUCKETS.to_vec());
        Histogram::with_opts(opts).map(register)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn histogram_builds_with_upstream_name() {
        let h = super::job_creation_skew().expect("histogram");
        h.observe(3.0);
        let text = rkcm_runtime::metrics::render();
        assert!(
            text.contains(
                "cronjob_controller_job_creation_skew_duration_seconds_bucket{le=\"512\"}"
            )
        );
    }
}
