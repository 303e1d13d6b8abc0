//! `daemonset_controller_stale_sync_skips_total{group,resource}`, registered once in the
//! process registry (upstream `pkg/controller/daemon/metrics`).

use std::sync::OnceLock;

use prometheus::{IntCounterVec, Opts};
use rkcm_runtime::metrics::{get_or_register, register};

use crate::consts::metrics as m;

/// The counter, or `None` if it could not be built (its options are constants; a test proves
/// they are valid). Losing a metric must never stop the controller.
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
    fn stale_sync_skips_render_with_upstream_name_and_labels() {
        count_stale_sync_skip("apps", "daemonsets");
        let text = rkcm_runtime::metrics::render();
        assert!(
            text.contains(
                "daemonset_controller_stale_sync_skips_total{group=\"apps\",resource=\"daemonsets\"}"
            ),
            "{text}"
        );
    }
}
