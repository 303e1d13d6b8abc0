//! `daemonset_controller_stale_sync_skips_total{group,resource}`, registered once in the
//! process registry (upstream `pkg/controller/daemon/metrics`).

use rkcm_runtime::workload::consistency::StaleGuard;

use crate::consts::metrics as m;

/// The controller's stale-cache guard, counting its skips in
/// `daemonset_controller_stale_sync_skips_total` (registered now, so it renders before the
/// first skip).
pub(crate) fn stale_guard() -> StaleGuard {
    StaleGuard::new(crate::config::NAME, m::SUBSYSTEM, m::STALE_SYNC_SKIPS_HELP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_sync_skips_render_with_upstream_name_and_labels() {
        let _guard = stale_guard();
        let skips = rkcm_runtime::workload::consistency::stale_sync_skips(
            m::SUBSYSTEM,
            m::STALE_SYNC_SKIPS_HELP,
        );
        skips
            .expect("valid")
            .with_label_values(&["apps", "daemonsets"])
            .inc();
        let text = rkcm_runtime::metrics::render();
        assert!(
            text.contains(
                "daemonset_controller_stale_sync_skips_total{group=\"apps\",resource=\"daemonsets\"}"
            ),
            "{text}"
        );
        assert!(text.contains(m::STALE_SYNC_SKIPS_HELP), "{text}");
    }
}
