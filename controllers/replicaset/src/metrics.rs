//! `replicaset_controller_sorting_deletion_age_ratio` and
//! `replicaset_controller_stale_sync_skips_total`, registered once in the process registry and
//! shared by the ReplicaSet and ReplicationController controllers (as upstream).

use std::sync::OnceLock;

use prometheus::{Histogram, HistogramOpts};
use rkcm_runtime::metrics::{get_or_register, register};
use rkcm_runtime::workload::consistency::StaleGuard;

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

/// The stale-cache guard of the controller `controller`, counting its skips in
/// `replicaset_controller_stale_sync_skips_total` (shared by the ReplicaSet and
/// ReplicationController controllers, as upstream).
pub(crate) fn stale_guard(controller: &'static str) -> StaleGuard {
    StaleGuard::new(controller, m::SUBSYSTEM, m::STALE_SYNC_SKIPS_HELP)
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher;
    use rkcm_runtime::cache::Informer;
    use rkcm_runtime::cache::cached::Pod;
    use rkcm_runtime::workload::consistency::GroupResource;

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
        let guard = stale_guard("test");
        guard.wrote("ns/a", "uid", GroupResource::of::<Pod>(), Some("9"));
        let pods = Informer::<Pod>::detached();
        pods.feed(watcher::Event::Init);
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.resource_version = Some("3".into());
        pods.feed(watcher::Event::InitApply(pod));
        pods.feed(watcher::Event::InitDone);
        assert!(guard.ensure_caught_up("ns/a", &[&pods.store()]).is_err());
        let text = rkcm_runtime::metrics::render();
        assert!(
            text.contains(
                "replicaset_controller_stale_sync_skips_total{group=\"\",resource=\"pods\"}"
            ),
            "{text}"
        );
    }
}
