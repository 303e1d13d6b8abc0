//! What every scenario needs: the Deployment and ReplicaSet controllers running in-process
//! and scoped to the test's namespace, object builders, status accessors, polling helpers
//! that say what they last saw, pods made ready the way a kubelet would, watch-based
//! histories for "never" checks, and a cleanup that always runs.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use rkcm_runtime::informer::InformerFactory;
use rkcm_runtime::{CancellationToken, ControllerContext};
use rkcm_testkit::{TestCluster, TestNamespace, holds_for, wait_for};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// The finalizer tests put on pods and Deployments to keep them terminating.
pub const HOLD: &str = "rkcm.test/hold";
/// "Within T" for anything the controllers should do promptly.
pub const WITHIN: Duration = Duration::from_secs(20);
/// How long "stays so" / "never happens" is watched when the spec names no period.
pub const HOLDS: Duration = Duration::from_secs(5);
/// A scheduler that does not exist: the pods stay unbound unless a test binds them.
pub const NO_SCHEDULER: &str = "rkcm-test-no-scheduler";
/// The event source of the controller under test.
pub const COMPONENT: &str = "deployment-controller";

/// Template versions differ by image only (nothing pulls them: no kubelet).
pub const V1: &str = "registry.k8s.io/pause:3.10";
pub const V2: &str = "registry.k8s.io/pause:3.9";
pub const V3: &str = "registry.k8s.io/pause:3.8";

pub const HASH: &str = "pod-template-hash";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX: &str = "deployment.kubernetes.io/max-replicas";
pub const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The Deployment and ReplicaSet controllers on one informer factory of their own; stopped
/// when dropped.
pub struct Controllers {
    shutdown: CancellationToken,
    handles: Vec<(&'static str, JoinHandle<Result<(), String>>)>,
}

impl Controllers {
    /// Starts both controllers on informers scoped to `namespace`.
    pub fn start(
        cluster: &TestCluster,
        namespace: &str,
        deployment: rkcm_deployment::Config,
        replicaset: rkcm_replicaset::Config,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let client = cluster.client();
        let informers = InformerFactory::namespaced(client.clone(), namespace);
        let ctx = ControllerContext::new(client, informers.clone(), shutdown.clone());
        let d_ctx = ctx.clone();
        let handles = vec![
            (
                rkcm_deployment::NAME,
                tokio::spawn(async move {
                    rkcm_deployment::start(d_ctx, deployment)
                        .await
                        .map_err(|e| e.to_string())
                }),
            ),
            (
                "replicaset-controller",
                tokio::spawn(async move {
                    rkcm_replicaset::start_replicaset(ctx, replicaset)
                        .await
                        .map_err(|e| e.to_string())
                }),
            ),
        ];
        informers.start(shutdown.clone());
        Self { shutdown, handles }
    }

    /// Stops both controllers and checks that they ended cleanly and promptly.
    pub async fn stop(mut self) -> Result<()> {
        self.shutdown.cancel();
        for (name, handle) in self.handles.drain(..) {
            tokio::time::timeout(Duration::from_secs(10), handle)
                .await
                .with_context(|| format!("{name} did not stop within 10 s of shutdown"))?
                .with_context(|| format!("{name} panicked"))?
                .map_err(|e| anyhow::anyhow!("{name} returned an error: {e}"))?;
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

    /// Both controllers with upstream defaults, limited to this test's namespace.
    pub fn start(&self) -> Controllers {
        self.start_gated(true)
    }

    /// Like [`Env::start`] with the `DeploymentReplicaSetTerminatingReplicas` gate set to
    /// `terminating_replicas` in both controllers.
    pub fn start_gated(&self, terminating_replicas: bool) -> Controllers {
        let deployment = rkcm_deployment::Config {
            terminating_replicas,
            ..rkcm_deployment::Config::default()
        };
        let replicaset = rkcm_replicaset::Config {
            terminating_replicas,
            ..rkcm_replicaset::Config::default()
        };
        Controllers::start(&self.cluster, self.name(), deployment, replicaset)
    }

    pub fn deployments(&self) -> Api<Deployment> {
        self.ns.api()
    }
    pub fn replicasets(&self) -> Api<ReplicaSet> {
        self.ns.api()
    }
    pub fn pods(&self) -> Api<Pod> {
        self.ns.api()
    }

    /// Returns `result` after releasing everything tests hold (finalizers on Deployments,
    /// ReplicaSets and pods) and removing the pods, so the namespace can go (no kubelet
    /// finishes graceful deletes of bound pods).
    pub async fn finish(self, result: Result<()>) -> Result<()> {
        let cleanup = self.cleanup().await;
        result?;
        cleanup
    }

    async fn cleanup(&self) -> Result<()> {
        let unhold = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        let pp = PatchParams::default();
        for d in self.deployments().list(&ListParams::default()).await?.items {
            if has_finalizers(&d) {
                let name = d.metadata.name.unwrap_or_default();
                ignore_404(self.deployments().patch(&name, &pp, &unhold).await)?;
            }
        }
        for rs in self.replicasets().list(&ListParams::default()).await?.items {
            if has_finalizers(&rs) {
                let name = rs.metadata.name.unwrap_or_default();
                ignore_404(self.replicasets().patch(&name, &pp, &unhold).await)?;
            }
        }
        for pod in self.pods().list(&ListParams::default()).await?.items {
            if has_finalizers(&pod) {
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

    // ---- Deployments -------------------------------------------------------------------

    pub async fn create_deployment(&self, body: Value) -> Result<Deployment> {
        let d: Deployment = serde_json::from_value(body)?;
        self.deployments()
            .create(&PostParams::default(), &d)
            .await
            .context("creating Deployment")
    }

    pub async fn deployment(&self, name: &str) -> Result<Deployment> {
        self.deployments()
            .get(name)
            .await
            .with_context(|| format!("reading Deployment {name}"))
    }

    /// JSON merge patch on the Deployment's main endpoint.
    pub async fn patch_deployment(&self, name: &str, patch: Value) -> Result<Deployment> {
        self.deployments()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .with_context(|| format!("patching Deployment {name}"))
    }

    /// Strategic merge patch on the Deployment's main endpoint.
    pub async fn patch_strategic(&self, name: &str, patch: Value) -> Result<Deployment> {
        self.deployments()
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .with_context(|| format!("patching Deployment {name}"))
    }

    /// Changes the template's image (a new template, so a rollout).
    pub async fn set_image(&self, name: &str, image: &str) -> Result<Deployment> {
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": image}
        ]}}}});
        self.deployments()
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .with_context(|| format!("setting image of Deployment {name} to {image}"))
    }

    pub async fn scale(&self, name: &str, replicas: i32) -> Result<Deployment> {
        self.patch_deployment(name, json!({"spec": {"replicas": replicas}}))
            .await
    }

    pub async fn set_paused(&self, name: &str, paused: bool) -> Result<Deployment> {
        self.patch_deployment(name, json!({"spec": {"paused": paused}}))
            .await
    }

    pub async fn annotate(&self, name: &str, key: &str, value: Option<&str>) -> Result<Deployment> {
        self.patch_deployment(name, json!({"metadata": {"annotations": {key: value}}}))
            .await
    }

    /// Waits up to [`WITHIN`] for Deployment `name` to satisfy `check`.
    pub async fn wait_deployment(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Deployment) -> bool,
    ) -> Result<Deployment> {
        self.wait_deployment_for(name, what, WITHIN, check).await
    }

    /// Waits up to `timeout` for Deployment `name` to satisfy `check`; on timeout the error
    /// shows the Deployment as last seen.
    pub async fn wait_deployment_for(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Deployment) -> bool,
    ) -> Result<Deployment> {
        let last: Mutex<Option<Deployment>> = Mutex::new(None);
        let what = format!("Deployment {}/{name}: {what}", self.name());
        wait_for(&what, timeout, || {
            let (check, last) = (&check, &last);
            async move {
                let d = self.deployments().get(name).await?;
                let ok = check(&d);
                *lock(last) = Some(d.clone());
                Ok(ok.then_some(d))
            }
        })
        .await
        .with_context(|| match &*lock(&last) {
            Some(d) => format!("last seen: {}", describe_deployment(d)),
            None => "never read".to_owned(),
        })
    }

    /// Waits until `name` has rolled out completely: observed, every replica updated and
    /// available, `Progressing` reason `NewReplicaSetAvailable`.
    pub async fn wait_complete(&self, name: &str) -> Result<Deployment> {
        self.wait_deployment(name, "rollout complete", complete)
            .await
    }

    /// Waits until `name` has rolled out completely at `revision`.
    pub async fn wait_complete_at(&self, name: &str, revision: &str) -> Result<Deployment> {
        self.wait_deployment(
            name,
            &format!("rollout of revision {revision} complete"),
            |d| complete(d) && ann(d, REVISION) == Some(revision),
        )
        .await
    }

    // ---- ReplicaSets --------------------------------------------------------------------

    pub async fn create_rs(&self, body: Value) -> Result<ReplicaSet> {
        let rs: ReplicaSet = serde_json::from_value(body)?;
        self.replicasets()
            .create(&PostParams::default(), &rs)
            .await
            .context("creating ReplicaSet")
    }

    pub async fn patch_rs(&self, name: &str, patch: Value) -> Result<ReplicaSet> {
        self.replicasets()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .with_context(|| format!("patching ReplicaSet {name}"))
    }

    /// ReplicaSets of the namespace whose controller is `owner_uid`, oldest first (same
    /// second: by name).
    pub async fn rss_of(&self, owner_uid: &str) -> Result<Vec<ReplicaSet>> {
        let mut rss: Vec<ReplicaSet> = self
            .replicasets()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|rs| controller_uid(rs) == Some(owner_uid))
            .collect();
        sort_by_age(&mut rss);
        Ok(rss)
    }

    /// Every ReplicaSet of the namespace, oldest first (same second: by name).
    pub async fn all_rss(&self) -> Result<Vec<ReplicaSet>> {
        let mut rss = self.replicasets().list(&ListParams::default()).await?.items;
        sort_by_age(&mut rss);
        Ok(rss)
    }

    /// Waits up to [`WITHIN`] until the ReplicaSets controlled by `owner_uid` (oldest
    /// first) satisfy `check`.
    pub async fn wait_rss(
        &self,
        owner_uid: &str,
        what: &str,
        check: impl Fn(&[ReplicaSet]) -> bool,
    ) -> Result<Vec<ReplicaSet>> {
        self.wait_rss_for(owner_uid, what, WITHIN, check).await
    }

    pub async fn wait_rss_for(
        &self,
        owner_uid: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&[ReplicaSet]) -> bool,
    ) -> Result<Vec<ReplicaSet>> {
        let last: Mutex<Option<Vec<ReplicaSet>>> = Mutex::new(None);
        let what = format!("ReplicaSets of {owner_uid} in {}: {what}", self.name());
        wait_for(&what, timeout, || {
            let (check, last) = (&check, &last);
            async move {
                let rss = self.rss_of(owner_uid).await?;
                let ok = check(&rss);
                *lock(last) = Some(rss.clone());
                Ok(ok.then_some(rss))
            }
        })
        .await
        .with_context(|| match &*lock(&last) {
            Some(rss) => format!("last seen: {}", describe_rss(rss)),
            None => "never read".to_owned(),
        })
    }

    /// Waits up to [`WITHIN`] for ReplicaSet `name` to satisfy `check`.
    pub async fn wait_rs(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ReplicaSet) -> bool,
    ) -> Result<ReplicaSet> {
        let last: Mutex<Option<ReplicaSet>> = Mutex::new(None);
        let what = format!("ReplicaSet {}/{name}: {what}", self.name());
        wait_for(&what, WITHIN, || {
            let (check, last) = (&check, &last);
            async move {
                let rs = self.replicasets().get(name).await?;
                let ok = check(&rs);
                *lock(last) = Some(rs.clone());
                Ok(ok.then_some(rs))
            }
        })
        .await
        .with_context(|| match &*lock(&last) {
            Some(rs) => format!("last seen: {}", describe_rss(std::slice::from_ref(rs))),
            None => "never read".to_owned(),
        })
    }

    // ---- Pods ---------------------------------------------------------------------------

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
            .filter(is_active)
            .collect())
    }

    /// Waits until exactly `n` active pods are controlled by `uid`, and returns them
    /// (sorted by name).
    pub async fn wait_active(&self, uid: &str, n: usize) -> Result<Vec<Pod>> {
        let mut pods = wait_for(&format!("{n} active pods of {uid}"), WITHIN, || async {
            let pods = self.active(uid).await?;
            Ok((pods.len() == n).then_some(pods))
        })
        .await?;
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(pods)
    }

    /// Marks a pod `Running` and Ready since `since` (the Ready transition time is always
    /// set explicitly: the API server does not fill it in).
    pub async fn set_ready(&self, pod: &str, since: jiff::Timestamp) -> Result<Pod> {
        self.cluster
            .patch_pod_status(self.name(), pod, ready_status(since))
            .await
    }

    /// Waits for `n` active pods of ReplicaSet `rs_uid` and makes every one of them ready.
    pub async fn make_ready(&self, rs_uid: &str, n: usize) -> Result<Vec<Pod>> {
        let pods = self.wait_active(rs_uid, n).await?;
        let now = jiff::Timestamp::now();
        for p in &pods {
            if !is_ready(p) {
                self.set_ready(&name_of(p), now).await?;
            }
        }
        Ok(pods)
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

    // ---- Events -------------------------------------------------------------------------

    /// Core/v1 events the Deployment controller recorded about Deployment `name`.
    pub async fn events_of(&self, name: &str) -> Result<Vec<Event>> {
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=Deployment,involvedObject.name={name}"
        ));
        Ok(self
            .ns
            .api::<Event>()
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(COMPONENT))
            .collect())
    }

    /// Messages of the `ScalingReplicaSet` events about `name`, sorted.
    pub async fn scaling_messages(&self, name: &str) -> Result<Vec<String>> {
        let mut msgs: Vec<String> = self
            .events_of(name)
            .await?
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some("ScalingReplicaSet")
                    && e.type_.as_deref() == Some("Normal")
            })
            .filter_map(|e| e.message)
            .collect();
        msgs.sort();
        Ok(msgs)
    }

    /// Waits until the `ScalingReplicaSet` events about `name` are exactly `expected`
    /// (any order, each once).
    pub async fn wait_scaling_events(&self, name: &str, expected: &[String]) -> Result<()> {
        let mut want = expected.to_vec();
        want.sort();
        let last = Mutex::new(Vec::new());
        wait_for(
            &format!("ScalingReplicaSet events of {name} to be exactly {want:?}"),
            WITHIN,
            || {
                let (want, last) = (&want, &last);
                async move {
                    let got = self.scaling_messages(name).await?;
                    let ok = &got == want;
                    *lock(last) = got;
                    Ok(ok.then_some(()))
                }
            },
        )
        .await
        .with_context(|| format!("last seen: {:?}", lock(&last)))
    }

    /// Waits for an event about Deployment `name` with exactly this type, reason and message.
    pub async fn wait_event(
        &self,
        name: &str,
        type_: &str,
        reason: &str,
        message: &str,
    ) -> Result<Event> {
        let last = Mutex::new(Vec::new());
        wait_for(
            &format!("{type_} event {reason} {message:?} about Deployment {name}"),
            WITHIN,
            || {
                let last = &last;
                async move {
                    let events = self.events_of(name).await?;
                    let found = events.iter().find(|e| {
                        e.type_.as_deref() == Some(type_)
                            && e.reason.as_deref() == Some(reason)
                            && e.message.as_deref() == Some(message)
                    });
                    let found = found.cloned();
                    *lock(last) = events
                        .iter()
                        .map(|e| {
                            format!(
                                "{}/{}: {}",
                                e.type_.as_deref().unwrap_or_default(),
                                e.reason.as_deref().unwrap_or_default(),
                                e.message.as_deref().unwrap_or_default()
                            )
                        })
                        .collect();
                    Ok(found)
                }
            },
        )
        .await
        .with_context(|| format!("events seen: {:?}", lock(&last)))
    }
}

/// Creates `d`, makes its V1 pods ready and waits for the rollout to complete; returns the
/// Deployment and its one ReplicaSet.
pub async fn settled_v1(env: &Env, body: Value) -> Result<(Deployment, ReplicaSet)> {
    let name = body["metadata"]["name"]
        .as_str()
        .context("body has no name")?
        .to_owned();
    let n = body["spec"]["replicas"].as_i64().context("no replicas")?;
    let d = env.create_deployment(body).await?;
    let rss = env
        .wait_rss(&uid_of(&d), "one V1 RS", |rss| rss.len() == 1)
        .await?;
    env.make_ready(&uid_of(&rss[0]), usize::try_from(n)?)
        .await?;
    let d = env.wait_complete(&name).await?;
    Ok((d, rss[0].clone()))
}

// ---- Builders ----------------------------------------------------------------------------

/// Labels as a JSON object.
pub fn labels(pairs: &[(&str, &str)]) -> Value {
    let map: BTreeMap<&str, &str> = pairs.iter().copied().collect();
    json!(map)
}

/// A pod template: one container running `image`, never scheduled by kube-scheduler.
pub fn template(labels_: &[(&str, &str)], image: &str) -> Value {
    json!({
        "metadata": {"labels": labels(labels_)},
        "spec": {
            "schedulerName": NO_SCHEDULER,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": image}],
        },
    })
}

/// Deployment `name` with `replicas`, selector and template labels `app=<name>`, image
/// [`V1`], API defaults for everything else (RollingUpdate 25%/25%, history 10, deadline
/// 600 s).
pub fn deployment(name: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template(&[("app", name)], V1),
        },
    })
}

/// `strategy: RollingUpdate` with these `maxSurge` / `maxUnavailable` (ints or "N%").
pub fn rolling(d: &mut Value, max_surge: Value, max_unavailable: Value) {
    d["spec"]["strategy"] = json!({
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable},
    });
}

/// `strategy: Recreate`.
pub fn recreate(d: &mut Value) {
    d["spec"]["strategy"] = json!({"type": "Recreate"});
}

/// A pod status: Running and Ready since `since`.
pub fn ready_status(since: jiff::Timestamp) -> Value {
    let t = since.to_string();
    json!({"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": t},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": t},
    ]})
}

// ---- Accessors ---------------------------------------------------------------------------

pub fn name_of<K: kube::Resource>(obj: &K) -> String {
    obj.meta().name.clone().unwrap_or_default()
}

pub fn uid_of<K: kube::Resource>(obj: &K) -> String {
    obj.meta().uid.clone().unwrap_or_default()
}

pub fn names_of<K: kube::Resource>(objs: &[K]) -> Vec<String> {
    objs.iter().map(name_of).collect()
}

/// Names, sorted: for comparing sets of objects whose order does not matter (creation
/// timestamps have one-second resolution, so "oldest first" is no total order).
pub fn sorted_names<K: kube::Resource>(objs: &[K]) -> Vec<String> {
    let mut names = names_of(objs);
    names.sort();
    names
}

/// `names`, sorted.
pub fn sorted(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    names.sort();
    names
}

pub fn ann<'a, K: kube::Resource>(obj: &'a K, key: &str) -> Option<&'a str> {
    obj.meta()
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

pub fn label<'a, K: kube::Resource>(obj: &'a K, key: &str) -> Option<&'a str> {
    obj.meta().labels.as_ref()?.get(key).map(String::as_str)
}

pub fn annotations<K: kube::Resource>(obj: &K) -> BTreeMap<String, String> {
    obj.meta().annotations.clone().unwrap_or_default()
}

/// The resourceVersion as a number. On the local plane it is the etcd revision, which
/// orders changes across kinds (the API only promises that within one watch).
pub fn rv<K: kube::Resource>(obj: &K) -> Result<u64> {
    let rv = obj.meta().resource_version.clone().unwrap_or_default();
    rv.parse()
        .with_context(|| format!("resourceVersion {rv:?} is not an integer"))
}

pub fn has_finalizers<K: kube::Resource>(obj: &K) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| !f.is_empty())
}

pub fn controller_uid<K: kube::Resource>(obj: &K) -> Option<&str> {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn sort_by_age(rss: &mut [ReplicaSet]) {
    rss.sort_by(|a, b| {
        (&a.metadata.creation_timestamp, &a.metadata.name)
            .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
    });
}

pub fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

/// `(status.replicas, readyReplicas, availableReplicas)`.
pub fn rs_counts(rs: &ReplicaSet) -> (i32, i32, i32) {
    let s = rs.status.clone().unwrap_or_default();
    (
        s.replicas,
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
    )
}

pub fn rs_observed(rs: &ReplicaSet) -> bool {
    rs.status.as_ref().and_then(|s| s.observed_generation) == rs.metadata.generation
}

/// The image of the ReplicaSet's pod template.
pub fn image_of(rs: &ReplicaSet) -> &str {
    rs.spec
        .template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

/// The one ReplicaSet of `rss` whose template runs `image`.
pub fn with_image<'a>(rss: &'a [ReplicaSet], image: &str) -> Option<&'a ReplicaSet> {
    let mut it = rss.iter().filter(|rs| image_of(rs) == image);
    let first = it.next();
    if it.next().is_some() {
        return None;
    }
    first
}

/// `spec.replicas` of the one ReplicaSet running `image`, if there is exactly one.
pub fn size_of(rss: &[ReplicaSet], image: &str) -> Option<i32> {
    with_image(rss, image).map(spec_replicas)
}

/// True if the ReplicaSet running `image` has `spec.replicas == n` and that many pods.
pub fn settled(rss: &[ReplicaSet], image: &str, n: i32) -> bool {
    with_image(rss, image).is_some_and(|rs| spec_replicas(rs) == n && rs_counts(rs).0 == n)
}

pub fn condition(d: &Deployment, type_: &str) -> Option<DeploymentCondition> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(type_))
        .cloned()
}

/// True if the condition `type_` has this status and reason.
pub fn has_condition(d: &Deployment, type_: &str, status: &str, reason: &str) -> bool {
    condition(d, type_)
        .is_some_and(|c| c.status.as_deref() == Some(status) && c.reason.as_deref() == Some(reason))
}

/// `(status, reason, message)` of a condition, for exact comparisons.
pub fn cond_triple(d: &Deployment, type_: &str) -> Option<(String, String, String)> {
    condition(d, type_).map(|c| {
        (
            c.status.unwrap_or_default(),
            c.reason.unwrap_or_default(),
            c.message.unwrap_or_default(),
        )
    })
}

pub fn triple(status: &str, reason: &str, message: &str) -> Option<(String, String, String)> {
    Some((status.to_owned(), reason.to_owned(), message.to_owned()))
}

/// `[replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas]`
/// (absent counts are 0, as the API omits zeros).
pub fn counts(d: &Deployment) -> [i32; 5] {
    let s = d.status.clone().unwrap_or_default();
    [
        s.replicas.unwrap_or(0),
        s.updated_replicas.unwrap_or(0),
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
        s.unavailable_replicas.unwrap_or(0),
    ]
}

pub fn observed(d: &Deployment) -> bool {
    d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
}

pub fn desired(d: &Deployment) -> i32 {
    d.spec.replicas.unwrap_or(1)
}

/// Rolled out: observed, every replica updated and available, and `Progressing` says so.
pub fn complete(d: &Deployment) -> bool {
    let [replicas, updated, _, available, _] = counts(d);
    let want = desired(d);
    observed(d)
        && replicas == want
        && updated == want
        && available == want
        && has_condition(d, "Progressing", "True", "NewReplicaSetAvailable")
}

/// The Deployment's pod template as the API server stored it.
pub fn template_of(d: &Deployment) -> Result<Value> {
    Ok(serde_json::to_value(&d.spec.template)?)
}

/// The ReplicaSet's pod template without the `pod-template-hash` label.
pub fn template_without_hash(rs: &ReplicaSet) -> Result<Value> {
    let mut t = serde_json::to_value(
        rs.spec
            .template
            .as_ref()
            .context("ReplicaSet has no template")?,
    )?;
    if let Some(labels) = t["metadata"]["labels"].as_object_mut() {
        labels.remove(HASH);
    }
    Ok(t)
}

pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn is_terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

pub fn is_active(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none() && !is_terminal(p)
}

pub fn pod_image(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

/// Fails with `what` unless `cond`.
pub fn ensure(cond: bool, what: impl std::fmt::Display) -> Result<()> {
    if !cond {
        bail!("{what}");
    }
    Ok(())
}

/// Fails unless `got == want`, showing both.
pub fn ensure_eq<T: PartialEq + Debug>(got: T, want: T, what: &str) -> Result<()> {
    if got != want {
        bail!("{what}: got {got:?}, want {want:?}");
    }
    Ok(())
}

pub fn ignore_404<T>(r: Result<T, kube::Error>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One line about a Deployment for failure messages.
pub fn describe_deployment(d: &Deployment) -> String {
    let s = d.status.clone().unwrap_or_default();
    let conds: Vec<String> = s
        .conditions
        .iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={}/{}({:?}; updated {}, transition {})",
                c.type_.as_deref().unwrap_or_default(),
                c.status.as_deref().unwrap_or_default(),
                c.reason.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default(),
                c.last_update_time
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
                c.last_transition_time
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
            )
        })
        .collect();
    format!(
        "spec.replicas={} paused={} generation={:?} observed={:?} \
         [replicas,updated,ready,available,unavailable]={:?} terminating={:?} \
         collisionCount={:?} revision={:?} deleting={} conditions={conds:?}",
        desired(d),
        d.spec.paused.unwrap_or(false),
        d.metadata.generation,
        s.observed_generation,
        counts(d),
        s.terminating_replicas,
        s.collision_count,
        ann(d, REVISION),
        d.metadata.deletion_timestamp.is_some(),
    )
}

/// One line per ReplicaSet for failure messages.
pub fn describe_rss(rss: &[ReplicaSet]) -> String {
    let lines: Vec<String> = rss
        .iter()
        .map(|rs| {
            format!(
                "{} image={} spec={} (replicas,ready,available)={:?} terminating={:?} \
                 revision={:?} history={:?} desired={:?} max={:?} owner={:?}",
                name_of(rs),
                image_of(rs),
                spec_replicas(rs),
                rs_counts(rs),
                rs.status.as_ref().and_then(|s| s.terminating_replicas),
                ann(rs, REVISION),
                ann(rs, REVISION_HISTORY),
                ann(rs, DESIRED),
                ann(rs, MAX),
                controller_uid(rs),
            )
        })
        .collect();
    format!("[{}]", lines.join("; "))
}

// ---- Watch-based observation ---------------------------------------------------------------

/// One change a [`History`] saw, in watch order.
#[derive(Clone, Debug)]
pub enum Seen<K> {
    Applied(K),
    Deleted(K),
}

impl<K> Seen<K> {
    pub fn object(&self) -> &K {
        match self {
            Seen::Applied(o) | Seen::Deleted(o) => o,
        }
    }
}

/// Every version of every object of one kind in the namespace, from a watch started before
/// the test acts: "never more than N" and "X before Y" are checked on the whole sequence,
/// not on samples. A single watch delivers changes in the order the API server made them.
pub struct History<K> {
    seen: Arc<Mutex<Vec<Seen<K>>>>,
    relisted: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl<K> History<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts watching and returns once the initial list has been recorded.
    pub async fn start(api: Api<K>) -> Result<Self> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let relisted = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = {
            let (seen, relisted) = (seen.clone(), relisted.clone());
            tokio::spawn(async move {
                let mut tx = Some(tx);
                let mut inits = 0;
                let mut stream = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(ev) = stream.next().await {
                    match ev {
                        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                            lock(&seen).push(Seen::Applied(o));
                        }
                        Ok(watcher::Event::Delete(o)) => lock(&seen).push(Seen::Deleted(o)),
                        Ok(watcher::Event::Init) => {
                            inits += 1;
                            if inits > 1 {
                                relisted.store(true, Ordering::SeqCst);
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        Err(_) => {}
                    }
                }
            })
        };
        tokio::time::timeout(WITHIN, rx)
            .await
            .context("watch did not list within 20 s")?
            .context("watch task ended")?;
        Ok(Self {
            seen,
            relisted,
            task,
        })
    }

    /// Everything seen so far; fails if the watch had to relist (the sequence has a gap).
    pub fn seen(&self) -> Result<Vec<Seen<K>>> {
        ensure(
            !self.relisted.load(Ordering::SeqCst),
            "the watch relisted: the observed history has a gap",
        )?;
        Ok(lock(&self.seen).clone())
    }

    /// Every version of the object named `name`, in order (deleted ones last).
    pub fn versions(&self, name: &str) -> Result<Vec<Seen<K>>> {
        Ok(self
            .seen()?
            .into_iter()
            .filter(|s| s.object().meta().name.as_deref() == Some(name))
            .collect())
    }

    /// The index of the first change satisfying `f`.
    pub fn position(&self, f: impl Fn(&Seen<K>) -> bool) -> Result<Option<usize>> {
        Ok(self.seen()?.iter().position(f))
    }
}

impl<K> Drop for History<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl History<ReplicaSet> {
    /// `spec.replicas` of ReplicaSet `name` over time, repeats dropped.
    pub fn sizes(&self, name: &str) -> Result<Vec<i32>> {
        let mut out: Vec<i32> = Vec::new();
        for s in self.versions(name)? {
            if let Seen::Applied(rs) = s {
                let n = spec_replicas(&rs);
                if out.last() != Some(&n) {
                    out.push(n);
                }
            }
        }
        Ok(out)
    }

    /// The largest Σ `spec.replicas` over the ReplicaSets controlled by `owner_uid` at any
    /// point of the history.
    pub fn max_total(&self, owner_uid: &str) -> Result<i32> {
        let mut now: BTreeMap<String, i32> = BTreeMap::new();
        let mut max = 0;
        for s in self.seen()? {
            match s {
                Seen::Applied(rs) if controller_uid(&rs) == Some(owner_uid) => {
                    now.insert(name_of(&rs), spec_replicas(&rs));
                }
                Seen::Applied(rs) | Seen::Deleted(rs) => {
                    now.remove(&name_of(&rs));
                }
            }
            max = max.max(now.values().sum());
        }
        Ok(max)
    }

    /// Names of every ReplicaSet that ever existed during the history.
    pub fn names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self.seen()?.iter().map(|s| name_of(s.object())).collect();
        names.sort();
        names.dedup();
        Ok(names)
    }
}

impl History<Pod> {
    /// The most pods that existed at once (terminating ones included).
    pub fn max_existing(&self) -> Result<usize> {
        let mut now = std::collections::BTreeSet::new();
        let mut max = 0;
        for s in self.seen()? {
            match s {
                Seen::Applied(p) => {
                    now.insert(name_of(&p));
                }
                Seen::Deleted(p) => {
                    now.remove(&name_of(&p));
                }
            }
            max = max.max(now.len());
        }
        Ok(max)
    }
}

/// Plays the kubelet for pods matching a predicate: marks each one Running and Ready as
/// soon as it appears (through a watch). Stops when dropped.
pub struct Readier {
    task: JoinHandle<()>,
}

impl Readier {
    /// Makes every pod of the namespace ready as it appears.
    pub async fn all(env: &Env) -> Result<Self> {
        Self::start(env, |_| true).await
    }

    /// Makes every pod running `image` ready as it appears.
    pub async fn image(env: &Env, image: &'static str) -> Result<Self> {
        Self::start(env, move |p| pod_image(p) == image).await
    }

    /// Makes every pod controlled by ReplicaSet `rs_uid` ready as it appears.
    pub async fn replicaset(env: &Env, rs_uid: &str) -> Result<Self> {
        let uid = rs_uid.to_owned();
        Self::start(env, move |p| controller_uid(p) == Some(uid.as_str())).await
    }

    pub async fn start(env: &Env, which: impl Fn(&Pod) -> bool + Send + 'static) -> Result<Self> {
        let api = env.pods();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut tx = Some(tx);
            let mut stream = watcher(api.clone(), watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(ev) = stream.next().await {
                let pod = match ev {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    _ => continue,
                };
                if !is_active(&pod) || is_ready(&pod) || !which(&pod) {
                    continue;
                }
                let patch = Patch::Merge(json!({
                    "status": ready_status(jiff::Timestamp::now())
                }));
                for _ in 0..3 {
                    match api
                        .patch_status(&name_of(&pod), &PatchParams::default(), &patch)
                        .await
                    {
                        Ok(_) => break,
                        Err(kube::Error::Api(s)) if s.code == 404 => break,
                        Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
            }
        });
        tokio::time::timeout(WITHIN, rx)
            .await
            .context("pod watch did not list within 20 s")?
            .context("readier task ended")?;
        Ok(Self { task })
    }
}

impl Drop for Readier {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Env {
    /// Fails unless the ReplicaSets controlled by `owner_uid` satisfy `check` for the whole
    /// of `period`; the error shows what broke it.
    pub async fn rss_hold(
        &self,
        owner_uid: &str,
        what: &str,
        period: Duration,
        check: impl Fn(&[ReplicaSet]) -> bool,
    ) -> Result<()> {
        let last: Mutex<Option<Vec<ReplicaSet>>> = Mutex::new(None);
        holds_for(what, period, || {
            let (check, last) = (&check, &last);
            async move {
                let rss = self.rss_of(owner_uid).await?;
                let ok = check(&rss);
                *lock(last) = Some(rss);
                Ok(ok)
            }
        })
        .await
        .with_context(|| match &*lock(&last) {
            Some(rss) => format!("last seen: {}", describe_rss(rss)),
            None => "never read".to_owned(),
        })
    }

    /// Fails unless Deployment `name` satisfies `check` for the whole of `period`.
    pub async fn deployment_holds(
        &self,
        name: &str,
        what: &str,
        period: Duration,
        check: impl Fn(&Deployment) -> bool,
    ) -> Result<()> {
        let last: Mutex<Option<Deployment>> = Mutex::new(None);
        holds_for(what, period, || {
            let (check, last) = (&check, &last);
            async move {
                let d = self.deployments().get(name).await?;
                let ok = check(&d);
                *lock(last) = Some(d);
                Ok(ok)
            }
        })
        .await
        .with_context(|| match &*lock(&last) {
            Some(d) => format!("last seen: {}", describe_deployment(d)),
            None => "never read".to_owned(),
        })
    }
}
