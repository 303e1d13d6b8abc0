//! [`RealNodes`]: the real nodes of the local plane (kubelets with containerd, started by
//! `REAL_NODES=N e2e/cluster.sh up`), and what tests do to them: place pods there, see
//! whether a container really runs, cut a node off by freezing its kubelet.
//!
//! Real nodes carry the label `type=real` and the taint `rkcm.test/real-node=true:NoSchedule`
//! (simulated nodes are `type=kwok` and untainted), so only pods made with [`on_real_nodes`]
//! land there. Tests that freeze a kubelet take [`RealNodes::exclusive`]; every other test
//! on real nodes takes [`RealNodes::shared`], so no test sees its pods stall on a node
//! another test cut off.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::{TestCluster, wait_for};

/// The label value of real nodes (`type=real`; simulated nodes are `type=kwok`).
pub const REAL_NODE_LABEL: (&str, &str) = ("type", "real");
/// The taint that keeps pods off real nodes unless they tolerate it.
pub const REAL_NODE_TAINT: &str = "rkcm.test/real-node";
/// Set to 1 to leave the real-node tier out of `make test` (never set in CI).
pub const SKIP_ENV: &str = "RKCM_SKIP_REAL_NODES";
/// The taint an operator puts on a node that is shut down for good (PodGC then force-deletes
/// its terminating pods).
pub const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

static NODES_LOCK: RwLock<()> = RwLock::const_new(());

/// Puts a pod spec (or a pod template's spec) on the real nodes: a node selector for
/// `type=real` and a toleration of their taint. Images must be local (`busybox`, `httpd`,
/// `registry.k8s.io/pause:3.10`) with `imagePullPolicy: IfNotPresent`.
pub fn on_real_nodes(spec: &mut Value) {
    spec["nodeSelector"] = json!({ REAL_NODE_LABEL.0: REAL_NODE_LABEL.1 });
    let toleration = json!({"key": REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"});
    match spec["tolerations"].as_array_mut() {
        Some(list) => list.push(toleration),
        None => spec["tolerations"] = json!([toleration]),
    }
}

/// A node selector term that matches the simulated and the real nodes of the local plane
/// (and no node a test made by hand).
pub fn kwok_or_real_affinity() -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "type", "operator": "In", "values": ["kwok", "real"]}]}
    ]}}})
}

/// The real nodes of the plane, Ready when found.
pub struct RealNodes {
    names: Vec<String>,
    cluster_dir: PathBuf,
    cluster: TestCluster,
}

impl RealNodes {
    /// Finds at least `at_least` Ready real nodes, or fails saying how to start them: a
    /// machine without real nodes fails this tier, it never skips it.
    pub async fn get(cluster: &TestCluster, at_least: usize) -> Result<Self> {
        let how = "start them with `REAL_NODES=2 bash e2e/cluster.sh up` as root (`make test` \
                   does; on a running plane it adds them), or leave the real-node tier out \
                   explicitly with RKCM_SKIP_REAL_NODES=1";
        let dir = std::env::var_os("RKCM_CLUSTER_DIR").with_context(|| {
            format!("RKCM_CLUSTER_DIR is not set: real nodes need the local plane; {how}")
        })?;
        let api = Api::<Node>::all(cluster.client());
        let nodes = api
            .list(
                &ListParams::default()
                    .labels(&format!("{}={}", REAL_NODE_LABEL.0, REAL_NODE_LABEL.1)),
            )
            .await
            .context("listing the real nodes (type=real)")?;
        let mut names: Vec<String> = nodes
            .items
            .iter()
            .filter(|n| node_ready(n) == Some("True"))
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        names.sort();
        ensure!(
            names.len() >= at_least,
            "this test needs {at_least} Ready real nodes (label type=real), the cluster has {} \
             ({names:?} of {} listed); {how}",
            names.len(),
            nodes.items.len()
        );
        Ok(Self {
            names,
            cluster_dir: PathBuf::from(dir),
            cluster: cluster.clone(),
        })
    }

    /// The Ready real nodes, sorted by name.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Held by a test that runs pods on real nodes and needs every node answering.
    pub async fn shared() -> RwLockReadGuard<'static, ()> {
        NODES_LOCK.read().await
    }

    /// Held by a test that cuts a node off; no other real-node test runs meanwhile.
    pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
        NODES_LOCK.write().await
    }

    fn node_dir(&self, node: &str) -> Result<PathBuf> {
        let index = node
            .strip_prefix("real-node-")
            .with_context(|| format!("{node} is not a real node (real-node-<i>)"))?;
        Ok(self.cluster_dir.join("real").join(format!("node-{index}")))
    }

    /// The pid of the node's kubelet.
    pub fn kubelet_pid(&self, node: &str) -> Result<u32> {
        let file = self
            .cluster_dir
            .join("pids")
            .join(format!("{node}-kubelet.pid"));
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading the kubelet pid of {node} ({})", file.display()))?;
        text.trim()
            .parse()
            .with_context(|| format!("{} holds no pid: {text:?}", file.display()))
    }

    /// Freezes the node's kubelet (SIGSTOP): its containers keep running, it reports
    /// nothing and acts on nothing, as when the node is cut off from the network. The guard
    /// thaws it (SIGCONT) when dropped.
    pub fn freeze_kubelet(&self, node: &str) -> Result<FrozenKubelet> {
        let pid = self.kubelet_pid(node)?;
        signal(pid, "STOP").with_context(|| format!("freezing the kubelet of {node}"))?;
        Ok(FrozenKubelet {
            pid,
            node: node.to_owned(),
            thawed: false,
        })
    }

    /// The static pod directory of `node` (its kubelet's `staticPodPath`).
    pub fn manifests_dir(&self, node: &str) -> Result<PathBuf> {
        Ok(self.node_dir(node)?.join("manifests"))
    }

    /// Imports an OCI image archive into the containerd of every real node, as the local
    /// images are (nothing can be pulled).
    pub async fn import_image(&self, archive: &std::path::Path) -> Result<()> {
        for node in &self.names {
            let sock = self.node_dir(node)?.join("containerd.sock");
            let out = tokio::process::Command::new("ctr")
                .arg("--address")
                .arg(&sock)
                .args(["-n", "k8s.io", "images", "import"])
                .arg(archive)
                .output()
                .await
                .with_context(|| format!("running ctr images import on {node}"))?;
            ensure!(
                out.status.success(),
                "importing {} into {node} failed: {}",
                archive.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// The host pid of a running container's first process, from the node's containerd.
    pub async fn container_pid(&self, node: &str, container_id: &str) -> Result<Option<u32>> {
        let id = container_id
            .strip_prefix("containerd://")
            .with_context(|| format!("{container_id:?} is not a containerd container id"))?;
        Ok(self
            .tasks(node)
            .await?
            .into_iter()
            .find_map(|(task, pid, status)| (task == id && status == "RUNNING").then_some(pid)))
    }

    /// The node's containerd tasks: (container id, pid, status).
    async fn tasks(&self, node: &str) -> Result<Vec<(String, u32, String)>> {
        let sock = self.node_dir(node)?.join("containerd.sock");
        let out = tokio::process::Command::new("ctr")
            .arg("--address")
            .arg(&sock)
            .args(["-n", "k8s.io", "tasks", "ls"])
            .output()
            .await
            .with_context(|| format!("running ctr tasks ls on {node}"))?;
        ensure!(
            out.status.success(),
            "ctr tasks ls on {node} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| {
                let mut cols = line.split_whitespace();
                let task = cols.next()?.to_owned();
                let pid = cols.next()?.parse().ok()?;
                Some((task, pid, cols.next()?.to_owned()))
            })
            .collect())
    }

    /// Whether the container with `container_id` (a pod status's `containerID`,
    /// `containerd://<id>`) runs on `node`, asked of the node's containerd.
    pub async fn container_running(&self, node: &str, container_id: &str) -> Result<bool> {
        Ok(self.container_pid(node, container_id).await?.is_some())
    }

    /// Sets the node's Ready condition to Unknown, as the node lifecycle controller does when
    /// a kubelet stops reporting (the local plane runs no node lifecycle controller).
    pub async fn mark_unreachable(&self, node: &str) -> Result<()> {
        let now = jiff::Timestamp::now().to_string();
        let api = Api::<Node>::all(self.cluster.client());
        let current = api
            .get(node)
            .await
            .with_context(|| format!("reading node {node}"))?;
        let mut conditions: Vec<Value> = current
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
            .collect();
        for c in &mut conditions {
            if c["type"] == "Ready" {
                c["status"] = json!("Unknown");
                c["reason"] = json!("NodeStatusUnknown");
                c["message"] = json!("Kubelet stopped posting node status.");
                c["lastTransitionTime"] = json!(now);
            }
        }
        api.patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": conditions}})),
        )
        .await
        .with_context(|| format!("marking node {node} unreachable"))?;
        Ok(())
    }

    /// Adds a NoExecute taint (e.g. [`OUT_OF_SERVICE`]) to the node.
    pub async fn taint(&self, node: &str, key: &str, value: &str) -> Result<()> {
        let taint = json!({"key": key, "value": value, "effect": "NoExecute"});
        self.set_taint(node, key, Some(taint)).await
    }

    /// Removes the taint `key` from the node.
    pub async fn untaint(&self, node: &str, key: &str) -> Result<()> {
        self.set_taint(node, key, None).await
    }

    /// Replaces the node's taint `key` with `taint` (none: removes it), keeping the others.
    async fn set_taint(&self, node: &str, key: &str, taint: Option<Value>) -> Result<()> {
        let api = Api::<Node>::all(self.cluster.client());
        let current = api
            .get(node)
            .await
            .with_context(|| format!("reading node {node}"))?;
        let mut taints: Vec<Value> = current
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
            .filter(|t| t["key"] != key)
            .collect();
        taints.extend(taint);
        api.patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": taints}})),
        )
        .await
        .with_context(|| format!("setting taint {key} of node {node}"))?;
        Ok(())
    }

    /// Waits until the node is Ready again (its kubelet reports).
    pub async fn wait_ready(&self, node: &str, timeout: Duration) -> Result<()> {
        let api = Api::<Node>::all(self.cluster.client());
        wait_for(&format!("node {node} Ready"), timeout, || {
            let api = api.clone();
            async move {
                let n = api.get_opt(node).await?;
                Ok(n.filter(|n| node_ready(n) == Some("True")).map(|_| ()))
            }
        })
        .await
    }
}

/// A kubelet frozen by [`RealNodes::freeze_kubelet`]; thawed when dropped.
pub struct FrozenKubelet {
    pid: u32,
    node: String,
    thawed: bool,
}

impl FrozenKubelet {
    /// Thaws the kubelet (SIGCONT).
    pub fn thaw(mut self) -> Result<()> {
        self.thawed = true;
        signal(self.pid, "CONT").with_context(|| format!("thawing the kubelet of {}", self.node))
    }
}

impl Drop for FrozenKubelet {
    fn drop(&mut self) {
        if !self.thawed {
            let _ = signal(self.pid, "CONT");
        }
    }
}

fn signal(pid: u32, sig: &str) -> Result<()> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill -{sig} {pid} failed: {status}");
    }
    Ok(())
}

fn node_ready(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// The node a pod runs on and its first container's id, once the container runs.
pub fn running_container(pod: &Pod) -> Option<(String, String)> {
    let node = pod.spec.as_ref()?.node_name.clone()?;
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    status.state.as_ref()?.running.as_ref()?;
    Some((node, status.container_id.clone()?))
}
