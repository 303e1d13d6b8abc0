//! The per-test environment: a namespace of the shared plane, and what tests do in it.

use std::fmt::Debug;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod, ReplicationController};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::cluster::{TestCluster, TestNamespace};

use super::checks::ignore_404;
use super::controllers::Controllers;
use super::objects::{
    WITHIN, controller_uid, describe_event, describe_pod, describe_rss, describe_status,
    has_finalizers, is_active, is_ready, job_condition, name_of, names_of, ready_status, uid_of,
};
use super::seen::{holds_seen, wait_seen};

/// What a namespaced kind needs for the generic helpers.
pub trait Object:
    kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
}

impl<K> Object for K where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static
{
}

/// One test's cluster connection and namespace.
pub struct Env {
    pub cluster: TestCluster,
    pub ns: TestNamespace,
}

impl Env {
    /// Connects (`RKCM_TEST_KUBECONFIG`) and creates a namespace `<prefix>-<random>`.
    pub async fn new(prefix: &str) -> Result<Self> {
        let cluster = TestCluster::connect().await?;
        let ns = cluster.namespace(prefix).await?;
        Ok(Self { cluster, ns })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        self.ns.name()
    }

    /// An empty set of in-process controllers on informers scoped to this namespace.
    pub fn controllers(&self) -> Controllers {
        Controllers::new(self.cluster.client(), &[self.name()])
    }

    /// An API of kind `K` in the namespace.
    pub fn api<K: Object>(&self) -> Api<K> {
        self.ns.api()
    }

    /// Pods of the namespace.
    pub fn pods(&self) -> Api<Pod> {
        self.ns.api()
    }

    /// Returns `result` after [`Env::cleanup`]; a failing test's error wins over a failing
    /// cleanup.
    pub async fn finish(self, result: Result<()>) -> Result<()> {
        let cleanup = self.cleanup().await;
        result?;
        cleanup
    }

    /// Removes every finalizer from the namespace's workload objects, claims and pods, then
    /// removes the pods at once: without a kubelet, graceful deletes of bound pods never
    /// finish and the namespace would stay.
    pub async fn cleanup(&self) -> Result<()> {
        self.release_all::<Deployment>().await?;
        self.release_all::<ReplicaSet>().await?;
        self.release_all::<ReplicationController>().await?;
        self.release_all::<StatefulSet>().await?;
        self.release_all::<DaemonSet>().await?;
        self.release_all::<Job>().await?;
        self.release_all::<CronJob>().await?;
        self.release_all::<PersistentVolumeClaim>().await?;
        self.release_all::<Pod>().await?;
        // Test cleanup only: controllers never force-delete (PodGC aside).
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

    /// Removes the finalizers of every object of kind `K` that has any.
    pub async fn release_all<K: Object>(&self) -> Result<()> {
        let api = self.api::<K>();
        let list = api
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing {} to release", K::plural(&())))?;
        for obj in list.items.iter().filter(|o| has_finalizers(*o)) {
            self.release::<K>(&name_of(obj)).await?;
        }
        Ok(())
    }

    /// Removes every finalizer of object `name` of kind `K` (gone already is fine).
    pub async fn release<K: Object>(&self, name: &str) -> Result<()> {
        let unhold = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        ignore_404(
            self.api::<K>()
                .patch(name, &PatchParams::default(), &unhold)
                .await,
        )
        .with_context(|| format!("releasing finalizers of {} {name}", K::kind(&())))
    }

    // ---- Objects ----------------------------------------------------------------------------

    /// Creates an object of kind `K` from JSON in the namespace.
    pub async fn create<K: Object>(&self, body: Value) -> Result<K> {
        let obj: K = serde_json::from_value(body)
            .with_context(|| format!("building a {} from JSON", K::kind(&())))?;
        self.create_object(&obj).await
    }

    /// Creates `obj` in the namespace.
    pub async fn create_object<K: Object>(&self, obj: &K) -> Result<K> {
        self.api::<K>()
            .create(&PostParams::default(), obj)
            .await
            .with_context(|| format!("creating {} {}/{}", K::kind(&()), self.name(), name_of(obj)))
    }

    /// Reads object `name` of kind `K`.
    pub async fn get<K: Object>(&self, name: &str) -> Result<K> {
        self.api::<K>()
            .get(name)
            .await
            .with_context(|| format!("reading {} {}/{name}", K::kind(&()), self.name()))
    }

    /// Reads object `name` of kind `K`, `None` if it does not exist.
    pub async fn get_opt<K: Object>(&self, name: &str) -> Result<Option<K>> {
        self.api::<K>()
            .get_opt(name)
            .await
            .with_context(|| format!("reading {} {}/{name}", K::kind(&()), self.name()))
    }

    /// Every object of kind `K` in the namespace.
    pub async fn list<K: Object>(&self) -> Result<Vec<K>> {
        Ok(self
            .api::<K>()
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing {} in {}", K::plural(&()), self.name()))?
            .items)
    }

    /// JSON merge patch on object `name` of kind `K`.
    pub async fn merge<K: Object>(&self, name: &str, patch: Value) -> Result<K> {
        self.api::<K>()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .with_context(|| format!("patching {} {}/{name}", K::kind(&()), self.name()))
    }

    /// Strategic merge patch on object `name` of kind `K`.
    pub async fn strategic<K: Object>(&self, name: &str, patch: Value) -> Result<K> {
        self.api::<K>()
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .with_context(|| format!("patching {} {}/{name}", K::kind(&()), self.name()))
    }

    /// Sets `spec.replicas` of object `name` of kind `K`.
    pub async fn set_replicas<K: Object>(&self, name: &str, replicas: i32) -> Result<K> {
        self.merge(name, json!({"spec": {"replicas": replicas}}))
            .await
            .with_context(|| format!("scaling {name} to {replicas}"))
    }

    /// Waits up to `timeout` until object `name` of kind `K` satisfies `check`; on timeout
    /// the error shows the object as last seen, through `describe`.
    pub async fn wait_object<K: Object>(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&K) -> bool,
        describe: impl Fn(&K) -> String,
    ) -> Result<K> {
        let what = format!("{} {}/{name}: {what}", K::kind(&()), self.name());
        wait_seen(&what, timeout, || self.get::<K>(name), check, describe).await
    }

    /// Waits up to [`WITHIN`] until object `name` of kind `K` satisfies `check`; on timeout
    /// the error shows the object's status as last seen.
    pub async fn wait<K: Object>(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&K) -> bool,
    ) -> Result<K> {
        self.wait_object(name, what, WITHIN, check, describe_status)
            .await
    }

    /// Fails unless object `name` of kind `K` satisfies `check` for the whole of `period`;
    /// the error shows what broke it, through `describe`.
    pub async fn object_holds<K: Object>(
        &self,
        name: &str,
        what: &str,
        period: Duration,
        check: impl Fn(&K) -> bool,
        describe: impl Fn(&K) -> String,
    ) -> Result<()> {
        holds_seen(what, period, || self.get::<K>(name), check, describe).await
    }

    /// Creates a ConfigMap to serve as a live owner (the garbage collector removes
    /// references to owners that do not exist) and returns its UID.
    pub async fn config_map(&self, name: &str) -> Result<String> {
        let cm: k8s_openapi::api::core::v1::ConfigMap =
            self.create(json!({"metadata": {"name": name}})).await?;
        Ok(uid_of(&cm))
    }

    /// JSON merge patch on the status of object `name` of kind `K` (`{"status": status}`).
    pub async fn status_patch<K: Object>(&self, name: &str, status: Value) -> Result<K> {
        self.api::<K>()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .with_context(|| format!("writing status of {} {}/{name}", K::kind(&()), self.name()))
    }

    // ---- Jobs (suites with no Job controller running: CronJob, TTL-after-finished) -----------

    /// Writes what the Job controller writes when Job `name` succeeds: `startTime = start`,
    /// then `succeeded: 1`, `completionTime = done` and the SuccessCriteriaMet and Complete
    /// conditions (reason CompletionsReached) at `done`.
    pub async fn complete_job(
        &self,
        name: &str,
        start: jiff::Timestamp,
        done: jiff::Timestamp,
    ) -> Result<Job> {
        let counts = json!({"succeeded": 1, "completionTime": done.to_string()});
        let conditions = ["SuccessCriteriaMet", "Complete"];
        self.finish_job(
            name,
            start,
            counts,
            (&conditions, "CompletionsReached", done),
        )
        .await
    }

    /// Writes what the Job controller writes when Job `name` fails: `startTime = start`, then
    /// `failed: 1` and the FailureTarget and Failed conditions (reason BackoffLimitExceeded)
    /// at `done`.
    pub async fn fail_job(
        &self,
        name: &str,
        start: jiff::Timestamp,
        done: jiff::Timestamp,
    ) -> Result<Job> {
        let conditions = ["FailureTarget", "Failed"];
        self.finish_job(
            name,
            start,
            json!({"failed": 1}),
            (&conditions, "BackoffLimitExceeded", done),
        )
        .await
    }

    /// `startTime = start`, then `status` with the True `conditions` (all of one reason, at
    /// one time) added.
    async fn finish_job(
        &self,
        name: &str,
        start: jiff::Timestamp,
        mut status: Value,
        (conditions, reason, at): (&[&str], &str, jiff::Timestamp),
    ) -> Result<Job> {
        self.status_patch::<Job>(name, json!({"startTime": start.to_string()}))
            .await?;
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|type_| job_condition(type_, reason, at))
            .collect();
        status["conditions"] = json!(conditions);
        self.status_patch(name, status).await
    }

    // ---- ReplicaSets (the ReplicaSet and Deployment suites) ----------------------------------

    /// ReplicaSets of the namespace.
    pub fn replicasets(&self) -> Api<ReplicaSet> {
        self.ns.api()
    }

    /// Creates a ReplicaSet from JSON.
    pub async fn create_rs(&self, body: Value) -> Result<ReplicaSet> {
        self.create(body).await
    }

    /// Waits up to [`WITHIN`] for ReplicaSet `name` to satisfy `check`; on timeout the
    /// error shows it as last seen ([`describe_rss`]).
    pub async fn wait_rs(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ReplicaSet) -> bool,
    ) -> Result<ReplicaSet> {
        self.wait_object(name, what, WITHIN, check, |rs| {
            describe_rss(std::slice::from_ref(rs))
        })
        .await
    }

    // ---- Pods -------------------------------------------------------------------------------

    /// Creates a pod (a [`Pod`] or its JSON).
    pub async fn create_pod(&self, pod: impl Serialize) -> Result<Pod> {
        self.create(serde_json::to_value(pod)?).await
    }

    /// Every pod of the namespace controlled by `uid` (terminating ones included).
    pub async fn owned(&self, uid: &str) -> Result<Vec<Pod>> {
        Ok(self
            .list::<Pod>()
            .await?
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

    /// Waits up to [`WITHIN`] until exactly `n` active pods are controlled by `uid`, and
    /// returns them sorted by name; on timeout the error names the pods last seen.
    pub async fn wait_active(&self, uid: &str, n: usize) -> Result<Vec<Pod>> {
        self.wait_active_within(uid, n, WITHIN).await
    }

    /// [`Env::wait_active`] with a timeout of the suite's choosing.
    pub async fn wait_active_within(
        &self,
        uid: &str,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<Pod>> {
        let mut pods = wait_seen(
            &format!("{n} active pods of {uid}"),
            timeout,
            || self.active(uid),
            |pods| pods.len() == n,
            |pods| format!("{:?}", names_of(pods)),
        )
        .await?;
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(pods)
    }

    /// Fails unless the active pods of `uid` keep exactly these names for `period`.
    pub async fn active_names_hold(
        &self,
        uid: &str,
        names: &[String],
        period: Duration,
    ) -> Result<()> {
        let mut want = names.to_vec();
        want.sort();
        holds_seen(
            &format!("active pods of {uid} stay {want:?}"),
            period,
            || self.active(uid),
            |pods| {
                let mut got = names_of(pods);
                got.sort();
                got == want
            },
            |pods| format!("{:?}", names_of(pods)),
        )
        .await
    }

    /// Waits until `check` holds for pod `name` (`None`: it is gone) and returns what was
    /// seen.
    pub async fn wait_pod(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(Option<&Pod>) -> bool,
    ) -> Result<Option<Pod>> {
        wait_seen(
            &format!("pod {}/{name}: {what}", self.name()),
            timeout,
            || self.get_opt::<Pod>(name),
            |p| check(p.as_ref()),
            |p| p.as_ref().map_or_else(|| "gone".to_owned(), describe_pod),
        )
        .await
    }

    /// Fails as soon as `check` stops holding for pod `name` within `period`.
    pub async fn pod_holds(
        &self,
        name: &str,
        what: &str,
        period: Duration,
        check: impl Fn(Option<&Pod>) -> bool,
    ) -> Result<()> {
        holds_seen(
            &format!("pod {}/{name}: {what}", self.name()),
            period,
            || self.get_opt::<Pod>(name),
            |p| check(p.as_ref()),
            |p| p.as_ref().map_or_else(|| "gone".to_owned(), describe_pod),
        )
        .await
    }

    /// Waits until pod `name` no longer exists.
    pub async fn wait_gone(&self, name: &str, timeout: Duration) -> Result<()> {
        self.wait_pod(name, "gone", timeout, |p| p.is_none())
            .await
            .map(drop)
    }

    /// Waits up to [`WITHIN`] until pod `name` is gone or terminating.
    pub async fn wait_deleted(&self, name: &str) -> Result<()> {
        self.wait_pod(name, "deleted", WITHIN, |p| {
            p.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
        })
        .await
        .map(drop)
    }

    /// Graceful delete, as a user would (a bound pod stays terminating without a kubelet).
    pub async fn delete_gracefully(&self, name: &str) -> Result<()> {
        self.pods()
            .delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting pod {}/{name}", self.name()))?;
        Ok(())
    }

    /// Marks pod `name` Running and Ready since `since`, with both conditions and their
    /// transition times, as a kubelet reports it (the API server fills in no times).
    pub async fn set_ready(&self, name: &str, since: jiff::Timestamp) -> Result<Pod> {
        self.cluster
            .patch_pod_status(self.name(), name, ready_status(since))
            .await
    }

    /// Sets pod `name`'s phase, Ready only if the phase is `Running`.
    pub async fn set_phase(&self, name: &str, phase: &str) -> Result<Pod> {
        self.cluster
            .set_pod_phase(self.name(), name, phase, phase == "Running")
            .await
    }

    /// Waits for `n` active pods of `uid` and makes every one not yet ready Ready now.
    pub async fn make_ready(&self, uid: &str, n: usize) -> Result<Vec<Pod>> {
        let pods = self.wait_active(uid, n).await?;
        let now = jiff::Timestamp::now();
        for p in pods.iter().filter(|p| !is_ready(p)) {
            self.set_ready(&name_of(p), now).await?;
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

    // ---- Events -----------------------------------------------------------------------------

    /// Core/v1 events about the object named `name` (any kind).
    pub async fn events_for(&self, name: &str) -> Result<Vec<Event>> {
        let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
        Ok(self.ns.api::<Event>().list(&lp).await?.items)
    }

    /// Core/v1 events about object `name` of `kind` recorded by `component`.
    pub async fn events_about(
        &self,
        kind: &str,
        name: &str,
        component: &str,
    ) -> Result<Vec<Event>> {
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind={kind},involvedObject.name={name}"
        ));
        Ok(self
            .ns
            .api::<Event>()
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(component))
            .collect())
    }

    /// Events about object `name` of `kind` by `component` with this reason.
    pub async fn events_by_reason(
        &self,
        kind: &str,
        name: &str,
        component: &str,
        reason: &str,
    ) -> Result<Vec<Event>> {
        Ok(self
            .events_about(kind, name, component)
            .await?
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect())
    }

    /// Waits up to [`WITHIN`] for an event about object `name` of `kind` by `component` with
    /// exactly this type, reason and message; on timeout the error lists the events seen.
    pub async fn wait_event_about(
        &self,
        (kind, name, component): (&str, &str, &str),
        type_: &str,
        reason: &str,
        message: &str,
    ) -> Result<Event> {
        let found = wait_seen(
            &format!("{type_} event {reason} {message:?} about {kind} {name}"),
            WITHIN,
            || self.events_about(kind, name, component),
            |events| {
                events.iter().any(|e| {
                    e.type_.as_deref() == Some(type_)
                        && e.reason.as_deref() == Some(reason)
                        && e.message.as_deref() == Some(message)
                })
            },
            |events| {
                format!(
                    "{:?}",
                    events.iter().map(describe_event).collect::<Vec<_>>()
                )
            },
        )
        .await?;
        found
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason) && e.message.as_deref() == Some(message))
            .context("the event vanished")
    }
}
