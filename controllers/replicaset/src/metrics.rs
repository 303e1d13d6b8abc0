//! `replicaset_controller_sorting_deletion_age_ratio` and
//! `replicaset_controller_stale_sync_skips_total`, registered once in the process registry and
//! shared by the ReplicaSet and ReplicationController controllers (as upstream).

use std::sync::OnceLock;

use prometheus::{Histogram, HistogramOpts, IntCounterVec, Opts};
use rkcm_runtime::metrics::{get_or_register, register};

use crate::consts::metrics as m;

/// The histogram, registered on first use; `None` only if it could not be built (the options
/// are constants; a test proves they are valid). Losing a metric never stops the controller.
pub(crate) fn sorting_deletion_age_ratio() -> Option<&'static Histogram> {
    static METRIC: OnceLock<Option<Histogram>> = OnceLock::new();
    get_or_register(&METRIC, m::SORTING_DELETION_AGE_RATIO, || {
        let opts = HistogramOpts::new(
            m::SORTING_DELETION_AGE_RATIO,
            m::SORTING_DELETION_AGE_RATIO_HELP,
        )
        .subsystem(m::SUBSYSTEM)
        .buckets(m::SORTING_DELETION_AGE_RATIO_BUCKETS.to_vec());
        Histogram::with_opts(opts).map(register)
    })
}

/// The stale-sync counter (see above).
pub(crate) fn stale_sync_skips() -> Option<&'static IntCounterVec> {
    static METRIC: OnceLock<Option<IntCounterVec>> = OnceLock::new();
    get_or_register(&METRIC, m::STALE_SYNC_SKIPS, || {
        let opts = Opts::new(m::STALE_SYNC_SKIPS, m::STALE_SYNC_SKIPS_HELP).subsystem(m::SUBSYSTEM);
        IntCounterVec::new(opts, m::STALE_SYNC_SKIPS_LABELS).map(register)
    })
}

/// Counts one sync skipped because the cache of `group`/`resource` lagged.
pub(crate) fn count_stale_sync_skip(group: &str, resource: &str) {
    if let Some(c) = stale_sync_skips() {
        c.with_label_values(&[group, resource]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_renders_with_upstream_name_and_buckets() {
        let h = sorting_deletion_age_ratio().expect("valid options");
        h.observe(1.0);
        let text = rkcm_runtime::metrics::render();
        assert!(
            text.contains("replicaset_controller_sorting_deletion_age_ratio_bucket{le=\"0.25\"}"),
            "{text}"
        );
        assert!(text.contains("replicaset_controller_sorting_deletion_age_ratio_bucket{le=\"8\"}"));
        assert!(std::ptr::eq(h, sorting_deletion_age_ratio().expect("same")));
    }

    #[test]
    fn stale_sync_skips_render_with_upstream_name_and_labels() {
        count_stale_sync_skip("", "pods");
        let text = rkcm_runtime::metrics::render();
        assert!(
            text.contains(
                "replicaset_controller_stale_sync_skips_total{group=\"\",resource=\"pods\"}"
            ),
            "{text}"
        );
    }
}
