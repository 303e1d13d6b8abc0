//! What every scenario needs: the controllers running in-process and scoped to the test's
//! namespace, object builders, polling helpers, and a cleanup that always runs.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod, ReplicationController};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rkcm_runtime::informer::InformerFactory;
use rkcm_runtime::{CancellationToken, ControllerContext};
use rkcm_testkit::{TestCluster, TestNamespace, holds_for, wait_for};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// The finalizer tests put on pods (or owners) to observe them terminating.
pub const HOLD: &str = "rkcm.test/hold";
/// "Within T" for anything the controller should do promptly.
pub const WITHIN: Duration = Duration::from_secs(20);
/// How long "never happens" is watched.
pub const HOLDS: Duration = Duration::from_secs(5);
/// A scheduler that does not exist: the pods stay unbound unless a test binds them.
pub const NO_SCHEDULER: &str = "rkcm-test-no-scheduler";

/// The RS and RC controllers on informers of their own; stopped when dropped.
pub struct Controllers {
    shutdown: CancellationToken,
    handles: Vec<JoinHandle<Result<(), rkcm_replicaset::Error>>>,
}

impl Controllers {
    /// Starts both controllers on informers scoped to `namespace`.
    pub fn start(cluster: &TestCluster, namespace: &str, cfg: rkcm_replicaset::Config) -> Self {
        Self::start_with_watch_lag(cluster, namespace, cfg, Duration::ZERO)
    }

    /// Like [`Controllers::start`], but the controllers' pod informer sees every change
    /// `lag` late (writes are not delayed).
    pub fn start_with_watch_lag(
        cluster: &TestCluster,
        namespace: &str,
        cfg: rkcm_replicaset::Config,
        lag: Duration,
    ) -> Self {
        Self::start_recorded(cluster, namespace, cfg, lag, None)
    }

    /// Like [`Controllers::start_with_watch_lag`]; every request the controllers send
    /// themselves (not their informers' lists and watches) goes to `recorder` too.
    pub fn start_recorded(
        cluster: &TestCluster,
        namespace: &str,
        cfg: rkcm_replicaset::Config,
        lag: Duration,
        recorder: Option<&crate::recorder::Recorder>,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let client = cluster.client();
        let informer_client = if lag.is_zero() {
            client.clone()
        } else {
            crate::lag::lagging(client.clone(), lag)
        };
        let informers = InformerFactory::namespaced(informer_client, namespace);
        let client = match recorder {
            Some(r) => r.wrap(client),
            None => client,
        };
        let ctx = ControllerContext::new(client, informers.clone(), shutdown.clone());
        let handles = vec![
            tokio::spawn(rkcm_replicaset::start_replicaset(ctx.clone(), cfg.clone())),
            tokio::spawn(rkcm_replicaset::start_replication_controller(ctx, cfg)),
        ];
        informers.start(shutdown.clone());
        Self { shutdown, handles }
    }

    /// Stops both controllers and checks that they ended cleanly and promptly.
    pub async fn stop(mut self) -> Result<()> {
        self.shutdown.cancel();
        for handle in self.handles.drain(..) {
            tokio::time::timeout(Duration::from_secs(10), handle)
                .await
                .context("controller did not stop within 10 s of shutdown")?
                .context("controller task panicked")?
                .context("controller returned an error")?;
        }
        Ok(())
    }
}

impl Drop for Controllers {
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

    /// Upstream defaults.
    pub fn config(&self) -> rkcm_replicaset::Config {
        rkcm_replicaset::Config::default()
    }

    /// Both controllers with upstream defaults, scoped to this test's namespace.
    pub fn start(&self) -> Controllers {
        Controllers::start(&self.cluster, self.name(), self.config())
    }

    pub fn pods(&self) -> Api<Pod> {
        self.ns.api()
    }
    pub fn replicasets(&self) -> Api<ReplicaSet> {
        self.ns.api()
    }
    pub fn rcs(&self) -> Api<ReplicationController> {
        self.ns.api()
    }

    /// Returns `result` after removing finalizers from every pod and owner and removing the
    /// pods, so the namespace can go (no kubelet finishes graceful deletes of bound pods).
    pub async fn finish(self, result: Result<()>) -> Result<()> {
        let cleanup = self.cleanup().await;
        result?;
        cleanup
    }

    async fn cleanup(&self) -> Result<()> {
        let unhold = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        let pp = PatchParams::default();
        for rs in self.replicasets().list(&ListParams::default()).await?.items {
            if rs
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                let name = rs.metadata.name.unwrap_or_default();
                ignore_404(self.replicasets().patch(&name, &pp, &unhold).await)?;
            }
        }
        for pod in self.pods().list(&ListParams::default()).await?.items {
            if pod
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                let name = pod.metadata.name.unwrap_or_default();
                ignore_404(self.pods().patch(&name, &pp, &unhold).await)?;
            }
        }
        // Test cleanup only: controllers never force-delete.
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        self.pods()
            .delete_collection(&now, &ListParams::default())
            .await
            .context("removing the test's pods")?;
        Ok(())
    }

    pub async fn create_rs(&self, rs: Value) -> Result<ReplicaSet> {
        let rs: ReplicaSet = serde_json::from_value(rs)?;
        self.replicasets()
            .create(&PostParams::default(), &rs)
            .await
            .context("creating ReplicaSet")
    }

    pub async fn create_rc(&self, rc: Value) -> Result<ReplicationController> {
        let rc: ReplicationController = serde_json::from_value(rc)?;
        self.rcs()
            .create(&PostParams::default(), &rc)
            .await
            .context("creating ReplicationController")
    }

    pub async fn create_pod(&self, pod: Value) -> Result<Pod> {
        let pod: Pod = serde_json::from_value(pod)?;
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .context("creating pod")
    }

    /// Creates a ConfigMap to serve as a live owner (the garbage collector removes
    /// references to owners that do not exist) and returns its UID.
    pub async fn config_map(&self, name: &str) -> Result<String> {
        let cm: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name}}))?;
        let cm = self
            .ns
            .api::<k8s_openapi::api::core::v1::ConfigMap>()
            .create(&PostParams::default(), &cm)
            .await
            .with_context(|| format!("creating ConfigMap {name}"))?;
        Ok(uid_of(&cm))
    }

    pub async fn scale(&self, name: &str, replicas: i32) -> Result<()> {
        self.replicasets()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .with_context(|| format!("scaling {name} to {replicas}"))?;
        Ok(())
    }

    /// Every pod of the namespace controlled by `uid` (terminating ones included).
    pub async fn owned(&self, uid: &str) -> Result<Vec<Pod>> {
        Ok(self
            .pods()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|p| controller_uid(p) == Some(uid))
            .collect())
    }

    /// Pods controlled by `uid` that are neither terminating nor terminal.
    pub async fn active(&self, uid: &str) -> Result<Vec<Pod>> {
        Ok(self
            .owned(uid)
            .await?
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && !is_terminal(p))
            .collect())
    }

    /// Waits until exactly `n` active pods are controlled by `uid`, and returns them.
    pub async fn wait_active(&self, uid: &str, n: usize) -> Result<Vec<Pod>> {
        wait_for(&format!("{n} active pods of {uid}"), WITHIN, || async {
            let pods = self.active(uid).await?;
            Ok((pods.len() == n).then_some(pods))
        })
        .await
    }

    /// Asserts that the active pods of `uid` keep exactly these names for `period`.
    pub async fn active_names_hold(
        &self,
        uid: &str,
        names: &[String],
        period: Duration,
    ) -> Result<()> {
        let mut want = names.to_vec();
        want.sort();
        holds_for(
            &format!("active pods of {uid} stay {want:?}"),
            period,
            || {
                let want = want.clone();
                async move {
                    let mut got = names_of(&self.active(uid).await?);
                    got.sort();
                    Ok(got == want)
                }
            },
        )
        .await
    }

    pub async fn wait_rs(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ReplicaSet) -> bool,
    ) -> Result<ReplicaSet> {
        let what = format!("ReplicaSet {}/{name}: {what}", self.name());
        wait_for(&what, WITHIN, || {
            let check = &check;
            async move {
                let rs = self.replicasets().get(name).await?;
                Ok(check(&rs).then_some(rs))
            }
        })
        .await
    }

    pub async fn wait_rc(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ReplicationController) -> bool,
    ) -> Result<ReplicationController> {
        let what = format!("ReplicationController {}/{name}: {what}", self.name());
        wait_for(&what, WITHIN, || {
            let check = &check;
            async move {
                let rc = self.rcs().get(name).await?;
                Ok(check(&rc).then_some(rc))
            }
        })
        .await
    }

    /// Core/v1 events about `object`.
    pub async fn events_for(&self, object: &str) -> Result<Vec<Event>> {
        let lp = ListParams::default().fields(&format!("involvedObject.name={object}"));
        Ok(self.ns.api::<Event>().list(&lp).await?.items)
    }

    /// Marks a pod `Running` and Ready since `since` (the Ready transition time is always
    /// set explicitly: the API server does not fill it in).
    pub async fn set_ready(&self, pod: &str, since: jiff::Timestamp) -> Result<Pod> {
        let t = since.to_string();
        self.cluster
            .patch_pod_status(
                self.name(),
                pod,
                json!({"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": t},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": t},
                ]}),
            )
            .await
    }

    /// Binds an unbound pod to `node`, as the scheduler would.
    pub async fn bind(&self, pod: &str, node: &str) -> Result<()> {
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": self.name()},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        self.pods()
            .create_subresource::<Value, Value>("binding", pod, &PostParams::default(), &binding)
            .await
            .with_context(|| format!("binding pod {pod} to {node}"))?;
        Ok(())
    }

    /// Waits until `pod` is gone or terminating.
    pub async fn wait_deleted(&self, pod: &str) -> Result<()> {
        wait_for(&format!("pod {pod} deleted"), WITHIN, || async {
            let p = self.pods().get_opt(pod).await?;
            Ok(p.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
                .then_some(()))
        })
        .await
    }
}

fn ignore_404<T>(r: Result<T, kube::Error>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub fn controller_uid(p: &Pod) -> Option<&str> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

pub fn is_terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

pub fn names_of(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}

pub fn uid_of<K: kube::Resource>(obj: &K) -> String {
    obj.meta().uid.clone().unwrap_or_default()
}

/// Labels as a JSON object.
pub fn labels(pairs: &[(&str, &str)]) -> Value {
    let map: BTreeMap<&str, &str> = pairs.iter().copied().collect();
    json!(map)
}

/// A pod template: one container, never scheduled by kube-scheduler.
pub fn template(labels_: &[(&str, &str)]) -> Value {
    json!({
        "metadata": {"labels": labels(labels_)},
        "spec": {
            "schedulerName": NO_SCHEDULER,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    })
}

/// A ReplicaSet selecting `selector` with a template labelled `template_labels`.
pub fn replicaset(
    name: &str,
    replicas: i32,
    selector: &[(&str, &str)],
    template_labels: &[(&str, &str)],
) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels(selector)},
            "template": template(template_labels),
        },
    })
}

/// A bare pod (no owner) that the scheduler leaves alone.
pub fn bare_pod(name: &str, labels_: &[(&str, &str)]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels(labels_)},
        "spec": {
            "schedulerName": NO_SCHEDULER,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    })
}

pub fn rs_status(rs: &ReplicaSet) -> (i32, i32, i32, i32) {
    let s = rs.status.clone().unwrap_or_default();
    (
        s.replicas,
        s.fully_labeled_replicas.unwrap_or(0),
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
    )
}

pub fn observed(rs: &ReplicaSet) -> bool {
    rs.status.as_ref().and_then(|s| s.observed_generation) == rs.metadata.generation
}

pub fn failure_condition(
    rs: &ReplicaSet,
) -> Option<k8s_openapi::api::apps::v1::ReplicaSetCondition> {
    rs.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some("ReplicaFailure"))
        .cloned()
}

/// Fails with `what` unless `cond`.
pub fn ensure(cond: bool, what: impl std::fmt::Display) -> Result<()> {
    if !cond {
        bail!("{what}");
    }
    Ok(())
}
