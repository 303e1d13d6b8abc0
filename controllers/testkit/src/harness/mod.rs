//! The real-plane harness every controller suite shares.
//!
//! - [`Env`]: one test's cluster connection and namespace, generic object helpers (create,
//!   read, patch, waits that say what they last saw), pod helpers (the ones a kubelet or
//!   the scheduler would do: Running+Ready with conditions and timestamps, binding, phases,
//!   termination), events lookup, and [`Env::finish`], a cleanup that releases every
//!   finalizer a test put on and removes the pods, so the namespace can go.
//! - [`Controllers`]: a set of in-process controllers on one informer factory of their own;
//!   started, stopped (checking they end cleanly), stopped when dropped.
//! - [`Manager`]: a controller-manager process (the rkcm binary or upstream's) confined to
//!   the test namespace by a [`ScopedProxy`](crate::ScopedProxy).
//! - [`RealNodes`]: the real nodes (kubelets with containerd) of the local plane: placing
//!   pods there ([`on_real_nodes`]), asking a node's containerd whether a container runs,
//!   freezing a kubelet to cut its node off.
//! - [`OffsetClock`]: a controller clock running at real speed from an instant the test sets.
//! - [`History`]: every version of every object of one kind from a watch, for "never" and
//!   "before" claims; [`Readier`]: plays the kubelet for pods as they appear.
//! - [`JobPodRunner`]: plays the kubelet for Job pods (run, then exit with a chosen code, or
//!   keep running); [`Env::terminate_at`] finishes one pod at a chosen time;
//!   [`index_overlaps`]: two live pods of one completion index in a pod history.
//! - Free functions: object accessors, small JSON builders, `ensure`-style assertions.

use std::collections::BTreeMap;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod, ReplicationController};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::{TestCluster, TestNamespace, holds_for, wait_for};

mod clock;
mod controllers;
mod history;
mod job_pods;
mod manager;
mod real_nodes;

pub use clock::OffsetClock;
pub use controllers::Controllers;
pub use history::{History, Readier, Seen};
pub use job_pods::{
    COMPLETION_INDEX, IndexOverlap, JobPodRunner, completion_index, index_overlaps, job_complete,
    job_controlled, terminated_status,
};
pub use manager::{E2E_BIN_ENV, Manager, ManagerKind, RKCM_BIN_ENV, e2e_bin, rkcm_binary};
pub use real_nodes::{
    FrozenKubelet, OUT_OF_SERVICE, REAL_NODE_LABEL, REAL_NODE_TAINT, RealNodes, SKIP_ENV,
    kwok_or_real_affinity, on_real_nodes, running_container,
};

/// The finalizer tests put on objects to observe them terminating; [`Env::finish`]
/// removes it (and any other finalizer) before the namespace goes.
pub const HOLD: &str = "rkcm.test/hold";
/// "Within T" for anything a controller should do promptly.
pub const WITHIN: Duration = Duration::from_secs(20);
/// A scheduler that does not exist: pods naming it stay unbound unless a test binds them.
pub const NO_SCHEDULER: &str = "rkcm-test-no-scheduler";
/// The image of test pods (nothing pulls it without a kubelet).
pub const PAUSE: &str = "registry.k8s.io/pause:3.10";

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

// ---- Waits that say what they last saw ---------------------------------------------------

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads with `read` until `check` holds (up to `timeout`) and returns what was read; on
/// timeout the error carries `describe` of the last value read.
pub async fn wait_seen<T, R, Fut>(
    what: &str,
    timeout: Duration,
    read: R,
    check: impl Fn(&T) -> bool,
    describe: impl Fn(&T) -> String,
) -> Result<T>
where
    R: Fn() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let look = Look::new(read, check, describe);
    wait_for(what, timeout, || async {
        let (ok, value) = look.once().await?;
        Ok(ok.then_some(value))
    })
    .await
    .with_context(|| look.last_seen())
}

/// Fails unless `check` holds for everything `read` returns during `period`; the error
/// carries `describe` of the value that broke it.
pub async fn holds_seen<T, R, Fut>(
    what: &str,
    period: Duration,
    read: R,
    check: impl Fn(&T) -> bool,
    describe: impl Fn(&T) -> String,
) -> Result<()>
where
    R: Fn() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let look = Look::new(read, check, describe);
    holds_for(what, period, || async { Ok(look.once().await?.0) })
        .await
        .with_context(|| look.last_seen())
}

/// One read, checked, with a description of the value kept for the failure message.
struct Look<R, C, D> {
    read: R,
    check: C,
    describe: D,
    last: Mutex<Option<String>>,
}

impl<T, R, Fut, C, D> Look<R, C, D>
where
    R: Fn() -> Fut,
    Fut: Future<Output = Result<T>>,
    C: Fn(&T) -> bool,
    D: Fn(&T) -> String,
{
    fn new(read: R, check: C, describe: D) -> Self {
        Self {
            read,
            check,
            describe,
            last: Mutex::new(None),
        }
    }

    async fn once(&self) -> Result<(bool, T)> {
        let value = (self.read)().await?;
        let ok = (self.check)(&value);
        *lock(&self.last) = Some((self.describe)(&value));
        Ok((ok, value))
    }

    fn last_seen(&self) -> String {
        match &*lock(&self.last) {
            Some(seen) => format!("last seen: {seen}"),
            None => "never read".to_owned(),
        }
    }
}

// ---- Builders --------------------------------------------------------------------------------

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

/// A bare pod (no owner) that the scheduler leaves alone.
pub fn bare_pod(name: &str, labels_: &[(&str, &str)]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels(labels_)},
        "spec": {
            "schedulerName": NO_SCHEDULER,
            "containers": [{"name": "main", "image": PAUSE}],
        },
    })
}

/// Merges `patch` into `base`, for tweaking a builder's output: nested objects merge key by
/// key; anything else (arrays, and `null` too, unlike a JSON merge patch) replaces.
pub fn merge_json(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge_json(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// A True Job condition of `type_` with `reason`, probed and changed at `at`.
pub fn job_condition(type_: &str, reason: &str, at: jiff::Timestamp) -> Value {
    json!({
        "type": type_, "status": "True", "reason": reason, "message": "test",
        "lastProbeTime": at.to_string(), "lastTransitionTime": at.to_string(),
    })
}

/// A pod status: Running, and Ready and ContainersReady since `since`.
pub fn ready_status(since: jiff::Timestamp) -> Value {
    let t = since.to_string();
    json!({"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": t},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": t},
    ]})
}

// ---- Accessors -------------------------------------------------------------------------------

/// `metadata.name`, or `""`.
pub fn name_of<K: kube::Resource>(obj: &K) -> String {
    obj.meta().name.clone().unwrap_or_default()
}

/// `metadata.uid`, or `""`.
pub fn uid_of<K: kube::Resource>(obj: &K) -> String {
    obj.meta().uid.clone().unwrap_or_default()
}

/// The names of `objs`, in order.
pub fn names_of<K: kube::Resource>(objs: &[K]) -> Vec<String> {
    objs.iter().map(name_of).collect()
}

/// Names, sorted: for comparing sets of objects whose order does not matter.
pub fn sorted_names<K: kube::Resource>(objs: &[K]) -> Vec<String> {
    let mut names = names_of(objs);
    names.sort();
    names
}

/// The UID of the object's controller owner reference.
pub fn controller_uid<K: kube::Resource>(obj: &K) -> Option<&str> {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

/// Annotation `key` of the object.
pub fn ann<'a, K: kube::Resource>(obj: &'a K, key: &str) -> Option<&'a str> {
    obj.meta()
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Label `key` of the object.
pub fn label<'a, K: kube::Resource>(obj: &'a K, key: &str) -> Option<&'a str> {
    obj.meta().labels.as_ref()?.get(key).map(String::as_str)
}

/// Whether the object has any finalizer.
pub fn has_finalizers<K: kube::Resource>(obj: &K) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| !f.is_empty())
}

/// The resourceVersion as a number. On the local plane it is the etcd revision, which
/// orders changes across kinds (the API only promises that within one watch).
pub fn rv<K: kube::Resource>(obj: &K) -> Result<u64> {
    let rv = obj.meta().resource_version.clone().unwrap_or_default();
    rv.parse()
        .with_context(|| format!("resourceVersion {rv:?} is not an integer"))
}

/// The pod's phase, or `""`.
pub fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// `Succeeded` or `Failed`.
pub fn is_terminal(p: &Pod) -> bool {
    matches!(phase(p), "Succeeded" | "Failed")
}

/// Neither terminating nor terminal.
pub fn is_active(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none() && !is_terminal(p)
}

/// The Ready condition is True.
pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The image of the pod's first container.
pub fn pod_image(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

/// `spec.replicas` (the API's default 1 when absent).
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

/// One line per ReplicaSet for failure messages (with the Deployment controller's
/// annotations, absent on other ReplicaSets).
pub fn describe_rss(rss: &[ReplicaSet]) -> String {
    let lines: Vec<String> = rss
        .iter()
        .map(|rs| {
            format!(
                "{} image={} spec={} (replicas,ready,available)={:?} terminating={:?} \
                 observed={:?}/{:?} revision={:?} history={:?} desired={:?} max={:?} owner={:?}",
                name_of(rs),
                image_of(rs),
                spec_replicas(rs),
                rs_counts(rs),
                rs.status.as_ref().and_then(|s| s.terminating_replicas),
                rs.status.as_ref().and_then(|s| s.observed_generation),
                rs.metadata.generation,
                ann(rs, "deployment.kubernetes.io/revision"),
                ann(rs, "deployment.kubernetes.io/revision-history"),
                ann(rs, "deployment.kubernetes.io/desired-replicas"),
                ann(rs, "deployment.kubernetes.io/max-replicas"),
                controller_uid(rs),
            )
        })
        .collect();
    format!("[{}]", lines.join("; "))
}

/// One line about a pod for failure messages.
pub fn describe_pod(p: &Pod) -> String {
    format!(
        "{} phase={:?} ready={} deleting={} grace={:?} node={:?} finalizers={:?}",
        name_of(p),
        phase(p),
        is_ready(p),
        p.metadata.deletion_timestamp.is_some(),
        p.metadata.deletion_grace_period_seconds,
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        p.metadata.finalizers,
    )
}

/// The object's `metadata.generation` and `status`, as compact JSON, for failure messages.
pub fn describe_status<K: Serialize>(obj: &K) -> String {
    let v = serde_json::to_value(obj).unwrap_or_default();
    format!(
        "generation={} status={}",
        v["metadata"]["generation"], v["status"]
    )
}

/// `type/reason: message` of an event.
pub fn describe_event(e: &Event) -> String {
    format!(
        "{}/{}: {}",
        e.type_.as_deref().unwrap_or_default(),
        e.reason.as_deref().unwrap_or_default(),
        e.message.as_deref().unwrap_or_default()
    )
}

// ---- Assertions ------------------------------------------------------------------------------

/// Fails with `what` unless `cond`.
pub fn ensure(cond: bool, what: impl Display) -> Result<()> {
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

/// `Ok` for success and for 404 (already gone).
pub fn ignore_404<T>(r: Result<T, kube::Error>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Declares a real-plane scenario test: `body(&env)` runs in a fresh [`Env`] whose namespace
/// is named after `prefix`, and [`Env::finish`] cleans up after it whatever the outcome.
/// The test is ignored unless run with `--include-ignored` (it needs the plane). It runs on
/// two worker threads; with `; all_threads` after `body`, on tokio's default (one per core).
///
/// With `; start = start_fn` after `body`, `start_fn(&env)` (returning [`Controllers`]) runs
/// before the body and the controllers are stopped after it ([`Controllers::stop`]: a
/// controller that does not end cleanly fails the test, after the body's own error).
///
/// ```ignore
/// rkcm_testkit::scenario! {
///     /// What the scenario shows.
///     scales_up, "rs-scale-up", scale_up
/// }
/// rkcm_testkit::scenario! {
///     completes, "job-basic", complete_three; start = crate::harness::start
/// }
/// ```
#[macro_export]
macro_rules! scenario {
    (@test ($($how:tt)*) $(#[$meta:meta])* $name:ident, $prefix:literal, $body:path) => {
        $(#[$meta])*
        #[tokio::test($($how)*)]
        #[ignore = "needs apiserver: make test"]
        async fn $name() -> ::anyhow::Result<()> {
            let env = $crate::harness::Env::new($prefix).await?;
            let result = $body(&env).await;
            env.finish(result).await
        }
    };
    (@test ($($how:tt)*) $(#[$meta:meta])* $name:ident, $prefix:literal, $body:path,
        $start:path) => {
        $(#[$meta])*
        #[tokio::test($($how)*)]
        #[ignore = "needs apiserver: make test"]
        async fn $name() -> ::anyhow::Result<()> {
            let env = $crate::harness::Env::new($prefix).await?;
            let controllers: $crate::harness::Controllers = $start(&env);
            let result = $body(&env).await;
            let stopped = controllers.stop().await;
            env.finish(result.and(stopped)).await
        }
    };
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $body:path; start = $start:path) => {
        $crate::scenario!(
            @test (flavor = "multi_thread", worker_threads = 2) $(#[$meta])* $name, $prefix, $body,
            $start
        );
    };
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $body:path; all_threads) => {
        $crate::scenario!(@test (flavor = "multi_thread") $(#[$meta])* $name, $prefix, $body);
    };
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $body:path) => {
        $crate::scenario!(
            @test (flavor = "multi_thread", worker_threads = 2) $(#[$meta])* $name, $prefix, $body
        );
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn waits_report_the_last_value_seen() {
        let n = Mutex::new(0);
        let err = wait_seen(
            "n to reach 100",
            Duration::from_secs(1),
            || async {
                let mut n = lock(&n);
                *n += 1;
                Ok(*n)
            },
            |n| *n >= 100,
            |n| format!("n={n}"),
        )
        .await
        .expect_err("times out");
        let msg = format!("{err:#}");
        assert!(
            msg.contains("last seen: n=") && msg.contains("n to reach 100"),
            "{msg}"
        );

        let err = holds_seen(
            "n stays small",
            Duration::from_secs(10),
            || async {
                let mut n = lock(&n);
                *n += 1;
                Ok(*n)
            },
            |n| *n < 20,
            |n| format!("n={n}"),
        )
        .await
        .expect_err("breaks");
        assert!(format!("{err:#}").contains("last seen: n=20"), "{err:#}");
    }

    #[test]
    fn merge_json_merges_objects_and_replaces_the_rest() {
        let mut base = json!({"a": {"b": 1, "c": [1]}, "d": "x"});
        merge_json(
            &mut base,
            &json!({"a": {"c": [2], "e": null}, "d": {"f": true}}),
        );
        assert_eq!(
            base,
            json!({"a": {"b": 1, "c": [2], "e": null}, "d": {"f": true}})
        );
        let c = job_condition(
            "Complete",
            "CompletionsReached",
            jiff::Timestamp::UNIX_EPOCH,
        );
        let c: k8s_openapi::api::batch::v1::JobCondition =
            serde_json::from_value(c).expect("a Job condition");
        assert_eq!((c.type_.as_str(), c.status.as_str()), ("Complete", "True"));
    }

    #[test]
    fn accessors_read_pods() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u", "resourceVersion": "42",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "X", "name": "a", "uid": "other"},
                    {"apiVersion": "v1", "kind": "X", "name": "b", "uid": "ctl", "controller": true},
                ]},
            "spec": {"containers": [{"name": "c", "image": "img"}]},
            "status": ready_status(jiff::Timestamp::UNIX_EPOCH),
        }))
        .expect("pod");
        assert_eq!(controller_uid(&pod), Some("ctl"));
        assert!(is_ready(&pod) && is_active(&pod) && !is_terminal(&pod));
        assert_eq!(pod_image(&pod), "img");
        assert_eq!(rv(&pod).expect("rv"), 42);
        assert!(describe_pod(&pod).contains("phase=\"Running\" ready=true"));
        assert!(ensure_eq(1, 2, "x").is_err());
    }
}
