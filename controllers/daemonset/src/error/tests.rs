use super::*;

#[test]
fn stale_caches_and_conflicts_are_expected_requeues_other_failures_are_not() {
    let stale = Error::StaleCache {
        key: "ns/ds".into(),
        source: rkcm_runtime::workload::consistency::Stale {
            resource: rkcm_runtime::workload::consistency::GroupResource::of::<
                k8s_openapi::api::core::v1::Pod,
            >(),
            written: "12".into(),
            observed: "11".into(),
        },
    };
    assert!(stale.is_expected_requeue());
    // The controller's policy logs it at debug (a rolling update of a thousand nodes
    // meets the guard hundreds of times).
    let policy =
        <crate::reconcile::Controller as rkcm_runtime::controller::Reconcile>::retry_policy();
    assert!(policy.requeues_quietly(&stale));
    let status = |code: u16| Error::UpdateStatus {
        key: "ns/ds".into(),
        source: rkcm_testkit::builders::api_error(code, "Conflict"),
    };
    assert!(status(409).is_expected_requeue());
    assert!(!status(500).is_expected_requeue());
    let history = Error::History {
        key: "ns/ds".into(),
        message: "forbidden".into(),
    };
    assert!(!history.is_expected_requeue());
    assert!(!policy.requeues_quietly(&history));
}
