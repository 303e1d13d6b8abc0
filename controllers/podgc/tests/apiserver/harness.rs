//! What only PodGC scenarios need on top of the testkit's harness: PodGC in-process with a
//! scaled-down period and quarantine, limited to the test's namespaces, its metrics, and pod
//! predicates about force deletion.

use std::time::Duration;

pub use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::PodCondition;
use rkcm_podgc::Config;
use rkcm_testkit::TestCluster;
pub use rkcm_testkit::harness::*;

/// Scaled-down sweep period and quarantine (upstream: 20 s / 40 s).
pub const PERIOD: Duration = Duration::from_millis(500);
pub const QUARANTINE: Duration = Duration::from_secs(2);
/// How long "never happens" is watched: many periods and quarantines.
pub const HOLDS: Duration = Duration::from_secs(8);

/// A scaled-down configuration.
pub fn fast(threshold: i32) -> Config {
    Config {
        terminated_pod_gc_threshold: threshold,
        gc_check_period: PERIOD,
        quarantine: QUARANTINE,
        ..Config::default()
    }
}

/// PodGC running in-process on informers of its own scoped to `namespaces` (nodes stay
/// cluster-wide); stopped when dropped.
pub fn start_podgc(cluster: &TestCluster, namespaces: &[&str], cfg: Config) -> Controllers {
    Controllers::new(cluster.client(), namespaces)
        .spawn(rkcm_podgc::NAME, move |ctx| {
            rkcm_podgc::start(ctx, cfg.clone())
        })
        .run()
}

/// Creates pods `held` (with finalizer [`HOLD`]) and `free` on `node`, both Running.
pub async fn held_and_free(env: &Env, node: &str) -> anyhow::Result<()> {
    let held = rkcm_testkit::builders::pod(env.name(), "held")
        .node(node)
        .finalizer(HOLD);
    env.create_pod(held.build()).await?;
    env.create_pod(
        rkcm_testkit::builders::pod(env.name(), "free")
            .node(node)
            .build(),
    )
    .await?;
    env.set_phase("held", "Running").await?;
    env.set_phase("free", "Running").await?;
    Ok(())
}

pub fn exists(p: Option<&Pod>) -> bool {
    p.is_some()
}

pub fn is_deleting(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

/// Force-deleted: terminating with grace period 0 (held only by our finalizer).
pub fn force_deleted(p: &Pod) -> bool {
    is_deleting(p) && p.metadata.deletion_grace_period_seconds == Some(0)
}

pub fn disruption_target(p: &Pod) -> Option<&PodCondition> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
}

/// Managers that wrote the pod's status subresource.
pub fn status_managers(p: &Pod) -> Vec<String> {
    p.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref() == Some("status"))
        .filter_map(|m| m.manager.clone())
        .collect()
}

/// Waits until a pod created now has a creation timestamp strictly after one created
/// before, so that creation order is visible at the API's 1 s resolution.
pub async fn next_second() {
    tokio::time::sleep(Duration::from_millis(1100)).await;
}

/// Reads a counter of the process registry (0 when the series does not exist yet).
pub fn counter(name: &str, namespace: &str, reason: &str) -> f64 {
    let needle = format!("{name}{{namespace=\"{namespace}\",reason=\"{reason}\"}} ");
    rkcm_runtime::metrics::render()
        .lines()
        .find_map(|l| l.strip_prefix(&needle))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

pub const DELETED_TOTAL: &str = "pod_gc_collector_force_delete_pods_total";
pub const ERRORS_TOTAL: &str = "pod_gc_collector_force_delete_pod_errors_total";
