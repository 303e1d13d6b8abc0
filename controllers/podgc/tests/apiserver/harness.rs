//! What every PodGC scenario needs: a PodGC running in-process against the test cluster and
//! scoped to the test's namespaces, pods with finalizers that are always released, and
//! polling helpers on one pod.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use rkcm_podgc::Config;
use rkcm_runtime::informer::{InformerFactory, Scope};
use rkcm_runtime::{CancellationToken, ControllerContext};
use rkcm_testkit::{TestCluster, TestNamespace, holds_for, wait_for};
use serde_json::json;
use tokio::task::JoinHandle;

/// The finalizer tests put on pods to observe them after PodGC's delete.
pub const HOLD: &str = "rkcm.test/hold";
/// Scaled-down sweep period and quarantine (upstream: 20 s / 40 s).
pub const PERIOD: Duration = Duration::from_millis(500);
pub const QUARANTINE: Duration = Duration::from_secs(2);
/// "Within T" for anything PodGC should do in a few scaled periods.
pub const WITHIN: Duration = Duration::from_secs(20);
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

/// A PodGC running on its own informers; stopped when dropped.
pub struct Controller {
    shutdown: CancellationToken,
    handle: Option<JoinHandle<Result<(), rkcm_podgc::Error>>>,
}

impl Controller {
    /// Starts PodGC on informers scoped to `namespaces` (nodes stay cluster-wide).
    pub fn start(cluster: &TestCluster, namespaces: &[&str], cfg: Config) -> Self {
        let shutdown = CancellationToken::new();
        let client = cluster.client();
        let informers = InformerFactory::scoped(client.clone(), Scope::namespaces(namespaces));
        let ctx = ControllerContext::new(client, informers.clone(), shutdown.clone());
        let handle = tokio::spawn(rkcm_podgc::start(ctx, cfg));
        informers.start(shutdown.clone());
        Self {
            shutdown,
            handle: Some(handle),
        }
    }

    /// Stops the controller and checks that it ended cleanly and promptly.
    pub async fn stop(mut self) -> Result<()> {
        self.shutdown.cancel();
        let Some(handle) = self.handle.take() else {
            return Ok(());
        };
        let ended = tokio::time::timeout(Duration::from_secs(10), handle)
            .await
            .context("PodGC did not stop within 10 s of shutdown")?;
        ended
            .context("PodGC task panicked")?
            .context("PodGC returned an error")?;
        Ok(())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// One test's cluster connection and namespace.
pub struct Env {
    pub cluster: TestCluster,
    pub ns: TestNamespace,
}

impl Env {
    pub async fn new(prefix: &str) -> Result<Self> {
        let cluster = TestCluster::connect().await?;
        let ns = cluster.namespace(prefix).await?;
        Ok(Self { cluster, ns })
    }

    pub fn name(&self) -> &str {
        self.ns.name()
    }

    pub fn pods(&self) -> Api<Pod> {
        self.ns.api()
    }

    /// Returns `result` after releasing every pod's finalizers and removing the pods, so the
    /// namespace can go: without a kubelet, the namespace controller's graceful deletes of
    /// bound pods would never finish.
    pub async fn finish(self, result: Result<()>) -> Result<()> {
        let cleanup = match release_all(&self.pods()).await {
            Ok(()) => remove_all(&self.pods()).await,
            Err(e) => Err(e),
        };
        result?;
        cleanup
    }

    pub async fn create(&self, pod: Pod) -> Result<Pod> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .with_context(|| format!("creating pod {}/{name}", self.name()))
    }

    pub async fn get(&self, name: &str) -> Result<Option<Pod>> {
        self.pods()
            .get_opt(name)
            .await
            .with_context(|| format!("reading pod {}/{name}", self.name()))
    }

    /// Graceful delete, as a user would (the pod stays Terminating without a kubelet).
    pub async fn delete_gracefully(&self, name: &str) -> Result<()> {
        self.pods()
            .delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting pod {}/{name}", self.name()))?;
        Ok(())
    }

    pub async fn set_phase(&self, name: &str, phase: &str) -> Result<Pod> {
        self.cluster
            .set_pod_phase(self.name(), name, phase, phase == "Running")
            .await
    }

    /// Waits until `check` holds for the pod (`None`: it is gone) and returns what was seen.
    pub async fn wait_pod(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(Option<&Pod>) -> bool,
    ) -> Result<Option<Pod>> {
        let api = self.pods();
        let what = format!("pod {}/{name}: {what}", self.name());
        wait_for(&what, timeout, || {
            let api = api.clone();
            let check = &check;
            async move {
                let pod = api.get_opt(name).await?;
                Ok(check(pod.as_ref()).then_some(pod))
            }
        })
        .await
    }

    pub async fn wait_gone(&self, name: &str, timeout: Duration) -> Result<()> {
        self.wait_pod(name, "gone", timeout, |p| p.is_none())
            .await
            .map(drop)
    }

    /// Fails as soon as `check` stops holding for the pod within `period`.
    pub async fn pod_holds(
        &self,
        name: &str,
        what: &str,
        period: Duration,
        check: impl Fn(Option<&Pod>) -> bool,
    ) -> Result<()> {
        let api = self.pods();
        let what = format!("pod {}/{name}: {what}", self.name());
        holds_for(&what, period, || {
            let api = api.clone();
            let check = &check;
            async move { Ok(check(api.get_opt(name).await?.as_ref())) }
        })
        .await
    }

    /// Removes `HOLD` from one pod.
    pub async fn release(&self, name: &str) -> Result<()> {
        release(&self.pods(), name).await
    }
}

async fn release(api: &Api<Pod>, name: &str) -> Result<()> {
    match api
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("releasing finalizers of pod {name}")),
    }
}

async fn release_all(api: &Api<Pod>) -> Result<()> {
    let pods = api
        .list(&Default::default())
        .await
        .context("listing pods to release")?;
    for pod in pods.items {
        if pod
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty())
        {
            release(api, pod.metadata.name.as_deref().unwrap_or_default()).await?;
        }
    }
    Ok(())
}

async fn remove_all(api: &Api<Pod>) -> Result<()> {
    // Test cleanup only: the force-delete privilege of PodGC does not extend to controllers.
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    api.delete_collection(&now, &Default::default())
        .await
        .context("removing the test's pods")?;
    Ok(())
}

pub fn exists(p: Option<&Pod>) -> bool {
    p.is_some()
}

pub fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
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

/// Waits until the pod's creation timestamp is strictly after `after`'s, so that creation
/// order is visible at the API's 1 s resolution.
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

/// Fails with `what` unless `cond`.
pub fn ensure(cond: bool, what: impl std::fmt::Display) -> Result<()> {
    if !cond {
        bail!("{what}");
    }
    Ok(())
}
