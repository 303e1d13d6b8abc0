//! What every scenario needs: the controller in-process and scoped to the test's namespace,
//! a StatefulSet body, accessors and waits, watch-based pod histories, and cleanup.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use rkcm_runtime::informer::InformerFactory;
use rkcm_runtime::{CancellationToken, ControllerContext};
use rkcm_testkit::{TestCluster, TestNamespace, unique_name, wait_for};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// The finalizer tests put on pods to keep them terminating.
pub const HOLD: &str = "rkcm.test/hold";
/// "Within T" for anything the controller and kwok should do promptly.
pub const WITHIN: Duration = Duration::from_secs(60);
/// How long "never happens" is watched when the scenario names no period.
pub const HOLDS: Duration = Duration::from_secs(5);
pub const COMPONENT: &str = "statefulset-controller";

pub const V1: &str = "registry.k8s.io/pause:3.10";
pub const V2: &str = "registry.k8s.io/pause:3.9";
pub const V3: &str = "registry.k8s.io/pause:3.8";

pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The controller running in-process; stopped when dropped.
pub struct Controller {
    shutdown: CancellationToken,
    handle: Option<JoinHandle<Result<(), String>>>,
}

impl Controller {
    pub fn start(cluster: &TestCluster, namespace: &str) -> Self {
        let shutdown = CancellationToken::new();
        let client = cluster.client();
        // Every informer of this controller sees the test's namespace only.
        let informers = InformerFactory::namespaced(client.clone(), namespace);
        let ctx = ControllerContext::new(client, informers.clone(), shutdown.clone());
        let cfg = rkcm_statefulset::Config::default();
        let handle = tokio::spawn(async move {
            rkcm_statefulset::start(ctx, cfg)
                .await
                .map_err(|e| e.to_string())
        });
        informers.start(shutdown.clone());
        Self {
            shutdown,
            handle: Some(handle),
        }
    }

    /// Stops the controller and checks that it ended cleanly and promptly.
    pub async fn stop(mut self) -> Result<()> {
        self.shutdown.cancel();
        if let Some(handle) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(10), handle)
                .await
                .context("controller did not stop within 10 s")?
                .context("controller panicked")?
                .map_err(|e| anyhow::anyhow!("controller returned an error: {e}"))?;
        }
        Ok(())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// One test's connection, namespace and controller.
pub struct Env {
    pub cluster: TestCluster,
    pub ns: TestNamespace,
    pub controller: Option<Controller>,
    volumes: Vec<String>,
}

impl Env {
    /// Connects, creates the namespace and starts the controller.
    pub async fn new(prefix: &str) -> Result<Self> {
        let cluster = TestCluster::connect().await?;
        let ns = cluster.namespace(prefix).await?;
        let controller = Some(Controller::start(&cluster, ns.name()));
        Ok(Self {
            cluster,
            ns,
            controller,
            volumes: Vec::new(),
        })
    }

    pub fn name(&self) -> &str {
        self.ns.name()
    }

    pub fn sets(&self) -> Api<StatefulSet> {
        self.ns.api()
    }
    pub fn pods(&self) -> Api<Pod> {
        self.ns.api()
    }
    pub fn claims(&self) -> Api<PersistentVolumeClaim> {
        self.ns.api()
    }
    pub fn revisions(&self) -> Api<ControllerRevision> {
        self.ns.api()
    }

    pub async fn stop_controller(&mut self) -> Result<()> {
        match self.controller.take() {
            Some(c) => c.stop().await,
            None => Ok(()),
        }
    }

    pub fn start_controller(&mut self) {
        if self.controller.is_none() {
            self.controller = Some(Controller::start(&self.cluster, self.ns.name()));
        }
    }

    /// Ends a test: releases held pods, stops the controller, deletes the volumes, and
    /// returns the test's result (cleanup errors only when the test passed).
    pub async fn finish(mut self, result: Result<()>) -> Result<()> {
        let mut cleanup = Vec::new();
        if let Ok(pods) = self.pods().list(&ListParams::default()).await {
            for p in pods.items {
                if p.metadata.finalizers.iter().flatten().any(|f| f == HOLD) {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    if let Err(e) = self.release(&name).await {
                        cleanup.push(format!("releasing {name}: {e:#}"));
                    }
                }
            }
        }
        if let Err(e) = self.stop_controller().await {
            cleanup.push(format!("{e:#}"));
        }
        let pvs: Api<PersistentVolume> = Api::all(self.cluster.client());
        for v in std::mem::take(&mut self.volumes) {
            if let Err(e) = pvs.delete(&v, &DeleteParams::default()).await
                && !matches!(&e, kube::Error::Api(s) if s.code == 404)
            {
                cleanup.push(format!("deleting volume {v}: {e}"));
            }
        }
        match result {
            Err(e) => Err(e),
            Ok(()) if cleanup.is_empty() => Ok(()),
            Ok(()) => bail!("cleanup failed: {}", cleanup.join("; ")),
        }
    }

    /// Creates `count` hostPath PersistentVolumes of storage class `class` (unique to the
    /// test) for claims to bind to; deleted by [`Env::finish`].
    pub async fn create_volumes(&mut self, class: &str, count: usize) -> Result<()> {
        let pvs: Api<PersistentVolume> = Api::all(self.cluster.client());
        for _ in 0..count {
            let name = unique_name("rkcm-sts-pv");
            let pv: PersistentVolume = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name, "labels": {"rkcm.test/namespace": self.name()}},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": class,
                    "hostPath": {"path": format!("/tmp/rkcm-test/{name}")},
                }
            }))?;
            pvs.create(&PostParams::default(), &pv)
                .await
                .with_context(|| format!("creating volume {name}"))?;
            self.volumes.push(name);
        }
        Ok(())
    }

    pub async fn create_set(&self, body: Value) -> Result<StatefulSet> {
        let set: StatefulSet = serde_json::from_value(body)?;
        self.sets()
            .create(&PostParams::default(), &set)
            .await
            .context("creating statefulset")
    }

    pub async fn set(&self, name: &str) -> Result<StatefulSet> {
        self.sets()
            .get(name)
            .await
            .with_context(|| format!("reading statefulset {name}"))
    }

    pub async fn patch_set(&self, name: &str, patch: Value) -> Result<StatefulSet> {
        self.sets()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("patching statefulset {name}"))
    }

    pub async fn scale(&self, name: &str, replicas: i32) -> Result<StatefulSet> {
        self.patch_set(name, json!({"spec": {"replicas": replicas}}))
            .await
    }

    pub async fn set_image(&self, name: &str, image: &str) -> Result<StatefulSet> {
        self.patch_set(
            name,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}),
        )
        .await
    }

    pub async fn status(&self, name: &str) -> Result<StatefulSetStatus> {
        Ok(self.set(name).await?.status.unwrap_or_default())
    }

    /// Waits until the set's status satisfies `check`.
    pub async fn wait_status(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&StatefulSet, &StatefulSetStatus) -> bool,
    ) -> Result<StatefulSetStatus> {
        wait_for(what, WITHIN, || async {
            let s = self.set(name).await?;
            let st = s.status.clone().unwrap_or_default();
            Ok(check(&s, &st).then_some(st))
        })
        .await
    }

    /// Waits for the rollout to settle: all `replicas` pods ready and updated, current ==
    /// update revision, observed generation current.
    pub async fn wait_settled(&self, name: &str, replicas: i32) -> Result<StatefulSetStatus> {
        self.wait_status(name, &format!("{name} settled at {replicas}"), |s, st| {
            st.observed_generation == s.metadata.generation
                && st.replicas == replicas
                && st.ready_replicas.unwrap_or(0) == replicas
                && st.updated_replicas.unwrap_or(0) == replicas
                && st.current_replicas.unwrap_or(0) == replicas
                && st.current_revision == st.update_revision
        })
        .await
    }

    pub async fn pod(&self, name: &str) -> Result<Option<Pod>> {
        match self.pods().get(name).await {
            Ok(p) => Ok(Some(p)),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Names of the pods in the namespace, sorted.
    pub async fn pod_names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .pods()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        names.sort();
        Ok(names)
    }

    /// Waits until exactly `names` exist and are Running and Ready.
    pub async fn wait_ready_pods(&self, names: &[&str]) -> Result<Vec<Pod>> {
        let mut want: Vec<String> = names.iter().map(|s| (*s).to_string()).collect();
        want.sort();
        wait_for(
            &format!("exactly {want:?} running and ready"),
            WITHIN,
            || async {
                let pods = self.pods().list(&ListParams::default()).await?.items;
                let mut got: Vec<String> = pods
                    .iter()
                    .filter_map(|p| p.metadata.name.clone())
                    .collect();
                got.sort();
                Ok((got == want
                    && pods
                        .iter()
                        .all(|p| is_ready(p) && p.metadata.deletion_timestamp.is_none()))
                .then_some(pods))
            },
        )
        .await
    }

    /// Waits until exactly `names` exist (any state).
    pub async fn wait_pod_names(&self, names: &[&str]) -> Result<()> {
        let mut want: Vec<String> = names.iter().map(|s| (*s).to_string()).collect();
        want.sort();
        wait_for(&format!("exactly pods {want:?}"), WITHIN, || async {
            Ok((self.pod_names().await? == want).then_some(()))
        })
        .await
    }

    pub async fn hold(&self, pod: &str) -> Result<()> {
        self.pods()
            .patch(
                pod,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": [HOLD]}})),
            )
            .await
            .with_context(|| format!("holding pod {pod}"))?;
        Ok(())
    }

    pub async fn release(&self, pod: &str) -> Result<()> {
        match self
            .pods()
            .patch(
                pod,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("releasing pod {pod}")),
        }
    }

    /// Events the controller recorded on the set.
    pub async fn events(&self, set: &str) -> Result<Vec<Event>> {
        Ok(self
            .ns
            .api::<Event>()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.involved_object.name.as_deref() == Some(set)
                    && e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(COMPONENT)
            })
            .collect())
    }

    pub async fn wait_event(&self, set: &str, reason: &str, message: &str) -> Result<()> {
        wait_for(&format!("event {reason} {message:?}"), WITHIN, || async {
            Ok(self
                .events(set)
                .await?
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.message.as_deref().is_some_and(|m| m.contains(message))
                })
                .then_some(()))
        })
        .await
    }

    /// The set's revisions, by `.revision`.
    pub async fn revision_list(&self) -> Result<Vec<ControllerRevision>> {
        let mut r = self.revisions().list(&ListParams::default()).await?.items;
        r.sort_by_key(|r| r.revision);
        Ok(r)
    }

    /// A watch-based history of the namespace's pods, from now on.
    pub async fn pod_history(&self) -> Result<History<Pod>> {
        History::start(self.pods()).await
    }

    pub async fn claim_history(&self) -> Result<History<PersistentVolumeClaim>> {
        History::start(self.claims()).await
    }
}

pub fn is_ready(p: &Pod) -> bool {
    let status = p.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn revision_of(p: &Pod) -> String {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_LABEL))
        .cloned()
        .unwrap_or_default()
}

/// StatefulSet `name` with `replicas`, selector/labels `app=<name>`, service `name`, one
/// container `c` with image [`V1`], terminationGracePeriodSeconds 1.
pub fn sts(name: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": V1}],
                },
            },
        },
    })
}

/// Merges `patch` into `base` (JSON merge-patch semantics for objects).
pub fn merge(mut base: Value, patch: Value) -> Value {
    fn go(b: &mut Value, p: Value) {
        match (b, p) {
            (Value::Object(b), Value::Object(p)) => {
                for (k, v) in p {
                    go(b.entry(k).or_insert(Value::Null), v);
                }
            }
            (b, p) => *b = p,
        }
    }
    go(&mut base, patch);
    base
}

/// One observed state of an object.
#[derive(Debug, Clone)]
pub struct Seen<K> {
    pub deleted: bool,
    pub obj: Arc<K>,
}

/// Every state of the namespace's objects of one kind seen on a watch, in order.
pub struct History<K> {
    seen: Arc<Mutex<Vec<Seen<K>>>>,
    task: JoinHandle<()>,
}

impl<K> History<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    pub async fn start(api: Api<K>) -> Result<Self> {
        let seen: Arc<Mutex<Vec<Seen<K>>>> = Arc::default();
        let s = seen.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = stream.next().await {
                let Ok(ev) = ev else { continue };
                let mut seen = s.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                match ev {
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => seen.push(Seen {
                        deleted: false,
                        obj: Arc::new(o),
                    }),
                    watcher::Event::Delete(o) => seen.push(Seen {
                        deleted: true,
                        obj: Arc::new(o),
                    }),
                    watcher::Event::InitDone => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    watcher::Event::Init => {}
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(20), ready_rx)
            .await
            .context("watch did not start")?
            .context("watch ended")?;
        Ok(Self { seen, task })
    }

    pub fn all(&self) -> Vec<Seen<K>> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Fails if two objects of the same name (different UIDs) ever coexisted: a new UID
    /// appeared before the delete of the previous one was seen.
    pub fn assert_one_per_name(&self) -> Result<()> {
        let mut live: BTreeMap<String, String> = BTreeMap::new();
        for s in self.all() {
            let m = s.obj.meta();
            let name = m.name.clone().unwrap_or_default();
            let uid = m.uid.clone().unwrap_or_default();
            if s.deleted {
                if live.get(&name) == Some(&uid) {
                    live.remove(&name);
                }
                continue;
            }
            if let Some(other) = live.get(&name)
                && *other != uid
            {
                bail!(
                    "two objects named {name} at once: uid {other} still there when {uid} appeared"
                );
            }
            live.insert(name, uid);
        }
        Ok(())
    }

    /// Names in the order their objects (by UID) first appeared.
    pub fn creation_order(&self) -> Vec<String> {
        let mut uids = Vec::new();
        let mut names = Vec::new();
        for s in self.all() {
            let m = s.obj.meta();
            let uid = m.uid.clone().unwrap_or_default();
            if !uids.contains(&uid) {
                uids.push(uid);
                names.push(m.name.clone().unwrap_or_default());
            }
        }
        names
    }

    /// Index of the first observation satisfying `f`.
    pub fn first(&self, f: impl Fn(&Seen<K>) -> bool) -> Option<usize> {
        self.all().iter().position(f)
    }
}

impl<K> Drop for History<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The first observation of `name` being deleted or terminating.
pub fn terminating_at(h: &History<Pod>, name: &str) -> Option<usize> {
    h.first(|s| {
        s.obj.metadata.name.as_deref() == Some(name)
            && (s.deleted || s.obj.metadata.deletion_timestamp.is_some())
    })
}

/// The first observation of a pod `name`.
pub fn created_at(h: &History<Pod>, name: &str) -> Option<usize> {
    h.first(|s| s.obj.metadata.name.as_deref() == Some(name))
}
