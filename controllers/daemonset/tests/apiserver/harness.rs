//! What every scenario needs: the controller in-process (the testkit's [`Controllers`]),
//! kwok-served nodes of the test's own, DaemonSet builders and waits.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
pub use rkcm_testkit::harness::Controllers;
pub use rkcm_testkit::harness::merge_patch as merge;
use rkcm_testkit::{TestCluster, TestNamespace, wait_for};
use serde_json::{Value, json};

/// "Within T" for anything the controller should do promptly.
pub const WITHIN: Duration = Duration::from_secs(45);
/// How long "never happens" is watched.
pub const HOLDS: Duration = Duration::from_secs(5);
/// Label every node of a test carries, with a value unique to the test.
pub const NODE_LABEL: &str = "rkcm.test/daemonset";
/// The taint test nodes carry (testkit's default) and test DaemonSets tolerate.
pub const TEST_TAINT: &str = "rkcm.test/no-schedule";

/// Sets node `name`'s Ready condition through `nodes` (see [`Env::set_node_ready`]).
pub async fn set_node_ready_on(nodes: &Api<Node>, name: &str, ready: bool) -> Result<()> {
    let now = jiff::Timestamp::now().to_string();
    let (status, reason) = if ready {
        ("True", "KubeletReady")
    } else {
        ("Unknown", "NodeStatusUnknown")
    };
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "Ready", "status": status, "reason": reason, "message": "set by test",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }]}})),
        )
        .await
        .with_context(|| format!("setting Ready={ready} on node {name}"))?;
    Ok(())
}

/// One test's cluster connection, namespace and node label value.
pub struct Env {
    pub cluster: TestCluster,
    pub ns: TestNamespace,
    /// The value of [`NODE_LABEL`] on this test's nodes (the namespace name: unique).
    pub group: String,
    /// Nodes this test created, deleted (after its pods) when the Env drops.
    created_nodes: std::sync::Mutex<Vec<String>>,
}

impl Env {
    pub async fn new(prefix: &str) -> Result<Self> {
        let cluster = TestCluster::connect().await?;
        let ns = cluster.namespace(prefix).await?;
        let group = ns.name().to_owned();
        Ok(Self {
            cluster,
            ns,
            group,
            created_nodes: std::sync::Mutex::new(Vec::new()),
        })
    }

    pub fn name(&self) -> &str {
        self.ns.name()
    }

    /// Starts the controller with upstream defaults on informers scoped to the namespace.
    pub fn start(&self) -> Controllers {
        self.start_with(rkcm_daemonset::Config::default())
    }

    /// Starts the controller with upstream defaults on a client whose requests `recorder`
    /// records (its informers read through the plain client).
    pub fn start_recorded(&self, recorder: &rkcm_testkit::recorder::Recorder) -> Controllers {
        self.start_recorded_on(recorder, None)
    }

    /// [`Env::start_recorded`], the controller seeing `budget` as its client's token bucket.
    pub fn start_recorded_on(
        &self,
        recorder: &rkcm_testkit::recorder::Recorder,
        budget: Option<std::sync::Arc<rkcm_runtime::queue::flowcontrol::RateLimiter>>,
    ) -> Controllers {
        let client = self.cluster.client();
        let mut controllers =
            Controllers::with_clients(recorder.wrap(client.clone()), client, &[self.name()]);
        if let Some(budget) = budget {
            controllers = controllers.with_budget(budget);
        }
        controllers
            .spawn("daemonset", |ctx| {
                rkcm_daemonset::start(ctx, rkcm_daemonset::Config::default())
            })
            .run()
    }

    pub fn start_with(&self, cfg: rkcm_daemonset::Config) -> Controllers {
        Controllers::new(self.cluster.client(), &[self.name()])
            .spawn("daemonset", move |ctx| {
                rkcm_daemonset::start(ctx, cfg.clone())
            })
            .run()
    }

    pub fn pods(&self) -> Api<Pod> {
        self.ns.api()
    }
    pub fn daemonsets(&self) -> Api<DaemonSet> {
        self.ns.api()
    }
    pub fn revisions(&self) -> Api<ControllerRevision> {
        self.ns.api()
    }
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.cluster.client())
    }

    /// A kwok-served node of this test named `<namespace>-<suffix>`, with the test's label,
    /// the test taint, and `labels`/`taints` on top. Deleted when the guard drops.
    pub async fn node(
        &self,
        suffix: &str,
        labels: &[(&str, &str)],
        taints: &[(&str, &str, &str)],
    ) -> Result<NodeGuard> {
        let name = format!("{}-{suffix}", self.group);
        let mut l = serde_json::Map::new();
        l.insert(NODE_LABEL.into(), json!(self.group));
        for (k, v) in labels {
            l.insert((*k).into(), json!(v));
        }
        let mut t = vec![json!({"key": TEST_TAINT, "value": "true", "effect": "NoSchedule"})];
        for (k, v, e) in taints {
            t.push(json!({"key": k, "value": v, "effect": e}));
        }
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": l, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": t},
        }))?;
        self.nodes()
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("creating node {name}"))?;
        if let Ok(mut nodes) = self.created_nodes.lock() {
            nodes.push(name.clone());
        }
        Ok(NodeGuard { name })
    }

    /// A node nobody simulates, named `<namespace>-<suffix>`, with the test's label and
    /// taint, room for pods (so the scheduler binds there) and a Ready condition that only the
    /// test changes ([`Env::set_node_ready`]). The test plays its kubelet. Deleted with the Env.
    pub async fn manual_node(&self, suffix: &str) -> Result<String> {
        let name = format!("{}-{suffix}", self.group);
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {NODE_LABEL: self.group, "kubernetes.io/hostname": name}},
            "spec": {"taints": [{"key": TEST_TAINT, "value": "true", "effect": "NoSchedule"}]},
        }))?;
        self.nodes()
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("creating node {name}"))?;
        if let Ok(mut nodes) = self.created_nodes.lock() {
            nodes.push(name.clone());
        }
        let room = json!({"pods": "110", "cpu": "8", "memory": "32Gi"});
        self.nodes()
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"capacity": room, "allocatable": room}})),
            )
            .await
            .with_context(|| format!("setting capacity of node {name}"))?;
        self.set_node_ready(&name, true).await?;
        Ok(name)
    }

    /// Sets the node's Ready condition, as its kubelet (True) or the node lifecycle
    /// controller (Unknown, once the kubelet is silent) would.
    pub async fn set_node_ready(&self, name: &str, ready: bool) -> Result<()> {
        set_node_ready_on(&self.nodes(), name, ready).await
    }

    /// Merges `patch` into a node.
    pub async fn patch_node(&self, name: &str, patch: Value) -> Result<()> {
        self.nodes()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .with_context(|| format!("patching node {name}"))?;
        Ok(())
    }

    /// Adds a taint to a node (keeping the test taint).
    pub async fn taint_node(&self, name: &str, key: &str, value: &str, effect: &str) -> Result<()> {
        let node = self.nodes().get(name).await?;
        let mut taints: Vec<Value> = node
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .map(|t| serde_json::to_value(t).unwrap_or_default())
            .collect();
        taints.push(json!({"key": key, "value": value, "effect": effect}));
        self.patch_node(name, json!({"spec": {"taints": taints}}))
            .await
    }

    /// The DaemonSet `name` (selector and labels `app=<name>`), one container with `image`,
    /// selecting this test's nodes and tolerating the test taint; `extra` is merged into it.
    pub fn daemonset(&self, name: &str, image: &str, extra: Value) -> DaemonSet {
        let mut v = json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": self.name()},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "nodeSelector": {NODE_LABEL: self.group},
                        "tolerations": [{"key": TEST_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "main", "image": image}]
                    }
                }
            }
        });
        merge(&mut v, &extra);
        serde_json::from_value(v).unwrap_or_else(|e| panic!("bad DaemonSet: {e}"))
    }

    pub async fn create(&self, ds: &DaemonSet) -> Result<DaemonSet> {
        self.daemonsets()
            .create(&PostParams::default(), ds)
            .await
            .context("creating DaemonSet")
    }

    pub async fn patch_ds(&self, name: &str, patch: Value) -> Result<DaemonSet> {
        self.daemonsets()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .context("patching DaemonSet")
    }

    /// Sets the image of the DaemonSet's container.
    pub async fn set_image(&self, name: &str, image: &str) -> Result<DaemonSet> {
        self.patch_ds(
            name,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}}),
        )
        .await
    }

    /// Live (not deleting) pods of DaemonSet `name`.
    pub async fn live_pods(&self, name: &str) -> Result<Vec<Pod>> {
        let list = self
            .pods()
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect())
    }

    /// All pods of DaemonSet `name`, terminating ones included.
    pub async fn all_pods(&self, name: &str) -> Result<Vec<Pod>> {
        Ok(self
            .pods()
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await?
            .items)
    }

    /// Waits until the DaemonSet has exactly one live pod on each of `nodes` (by target node)
    /// and no other, all Ready with hash label `hash` when given; returns them by node.
    pub async fn wait_one_per_node(
        &self,
        name: &str,
        nodes: &[&str],
        hash: Option<&str>,
    ) -> Result<BTreeMap<String, Pod>> {
        let want: Vec<String> = nodes.iter().map(|s| s.to_string()).collect();
        wait_for(
            &format!("one ready pod of {name} on each of {want:?} (hash {hash:?})"),
            WITHIN,
            || async {
                let pods = self.all_pods(name).await?;
                let mut by_node: BTreeMap<String, Pod> = BTreeMap::new();
                for p in pods {
                    let Some(node) = target_node(&p) else {
                        return Ok(None);
                    };
                    if by_node.insert(node, p).is_some() {
                        return Ok(None);
                    }
                }
                let ok = by_node.keys().cloned().collect::<Vec<_>>() == sorted(want.clone())
                    && by_node.values().all(|p| {
                        p.metadata.deletion_timestamp.is_none()
                            && is_ready(p)
                            && hash.is_none_or(|h| pod_hash(p) == h)
                    });
                Ok(ok.then_some(by_node))
            },
        )
        .await
    }

    /// Waits until the DaemonSet's status satisfies `check`.
    pub async fn wait_status(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&DaemonSet) -> bool,
    ) -> Result<DaemonSet> {
        let check = Arc::new(check);
        wait_for(what, WITHIN, || {
            let check = check.clone();
            async move {
                let ds = self.daemonsets().get(name).await?;
                Ok(check(&ds).then_some(ds))
            }
        })
        .await
    }

    /// Events on the DaemonSet `name` with `reason`.
    pub async fn events(&self, name: &str, reason: &str) -> Result<Vec<Event>> {
        let events: Api<Event> = self.ns.api();
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.involved_object.kind.as_deref() == Some("DaemonSet")
                    && e.involved_object.name.as_deref() == Some(name)
                    && e.reason.as_deref() == Some(reason)
            })
            .collect())
    }

    pub async fn wait_event(&self, name: &str, reason: &str, contains: &str) -> Result<Event> {
        wait_for(
            &format!("event {reason} on {name} containing {contains:?}"),
            WITHIN,
            || async {
                Ok(self
                    .events(name, reason)
                    .await?
                    .into_iter()
                    .find(|e| e.message.as_deref().is_some_and(|m| m.contains(contains))))
            },
        )
        .await
    }

    /// Revisions owned by the DaemonSet `name`.
    pub async fn owned_revisions(&self, name: &str) -> Result<Vec<ControllerRevision>> {
        Ok(self
            .revisions()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.controller == Some(true) && o.kind == "DaemonSet" && o.name == name)
            })
            .collect())
    }
}

pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// `spec.nodeName`, or the node of the `metadata.name` affinity term.
pub fn target_node(p: &Pod) -> Option<String> {
    rkcm_daemonset::template::target_node_name(&rkcm_runtime::cache::cached::Pod::from(p))
        .map(str::to_owned)
}

pub fn is_ready(p: &Pod) -> bool {
    rkcm_runtime::workload::pod::is_pod_ready(&rkcm_runtime::cache::cached::Pod::from(p))
}

pub fn pod_hash(p: &Pod) -> String {
    rkcm_daemonset::template::pod_hash(&rkcm_runtime::cache::cached::Pod::from(p)).to_owned()
}

pub fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// A node a test created (deleted with its [`Env`]).
pub struct NodeGuard {
    name: String,
}

impl NodeGuard {
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Env {
    /// Pods bound to a deleted node never finish terminating (nothing serves the node any
    /// more), which would keep the namespace from going: so first remove the test's pods as
    /// the kubelet would (finalizers dropped, grace period 0: the harness acts as the node),
    /// then delete its nodes. Runs on a runtime of its own: the test's may be gone.
    fn drop(&mut self) {
        if std::env::var(rkcm_testkit::KEEP_ENV).is_ok_and(|v| v == "1" || v == "true") {
            return;
        }
        let nodes = self
            .created_nodes
            .lock()
            .map(|n| n.clone())
            .unwrap_or_default();
        let namespace = self.ns.name().to_owned();
        let kubeconfig = self.cluster.kubeconfig_path().to_path_buf();
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let Ok(config) = TestCluster::config_from(&kubeconfig).await else {
                    return;
                };
                let Ok(client) = kube::Client::try_from(config) else {
                    return;
                };
                let cleanup = async {
                    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
                    if let Ok(list) = pods.list(&ListParams::default()).await {
                        for p in list.items {
                            let name = p.metadata.name.clone().unwrap_or_default();
                            if p.metadata
                                .finalizers
                                .as_ref()
                                .is_some_and(|f| !f.is_empty())
                            {
                                let _ = pods
                                    .patch(
                                        &name,
                                        &PatchParams::default(),
                                        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                                    )
                                    .await;
                            }
                            let _ = pods
                                .delete(&name, &kube::api::DeleteParams::default().grace_period(0))
                                .await;
                        }
                    }
                    // A DaemonSet a test held with a finalizer would keep the namespace.
                    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace);
                    if let Ok(list) = sets.list(&ListParams::default()).await {
                        for d in list.items {
                            if d.metadata
                                .finalizers
                                .as_ref()
                                .is_some_and(|f| !f.is_empty())
                            {
                                let name = d.metadata.name.clone().unwrap_or_default();
                                let _ = sets
                                    .patch(
                                        &name,
                                        &PatchParams::default(),
                                        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                                    )
                                    .await;
                            }
                        }
                    }
                    let api = Api::<Node>::all(client.clone());
                    for n in nodes {
                        let _ = api.delete(&n, &kube::api::DeleteParams::default()).await;
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(20), cleanup).await;
            });
        })
        .join();
    }
}
