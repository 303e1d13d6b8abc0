//! The node model of the simulation: a scheduler that binds pods to a random fitting node,
//! a kubelet per node that starts pods, makes them Ready, runs them to success or failure
//! (pods that do not restart always), kills them within their grace period when they are
//! deleted and then removes them (a grace-0 delete with a UID precondition, as the kubelet's
//! status manager does), and the node lifecycle controller: a node that stops reporting is
//! marked `Ready=Unknown` and tainted unreachable after `not_ready_after`, its pods marked
//! not ready, and evicted `evict_after` later (taint-based eviction, for pods that do not
//! tolerate the taint). A dead node's containers keep running while its pod objects go; they
//! stop when the node comes back (the kubelet kills what has no pod object) or when the node
//! object is deleted (the machine is gone).
//!
//! Upstream: `pkg/kubelet/status/status_manager.go` (terminal phase, then the final delete),
//! `pkg/controller/nodelifecycle/node_lifecycle_controller.go` (`MarkPodsNotReady`, taints),
//! `pkg/controller/tainteviction` (eviction after `tolerationSeconds`, 300 s by default; the
//! simulation shortens it).

use std::collections::BTreeMap;

use rand::Rng;
use serde_json::{Value, json};

use super::server::{Caller, World, resource};

/// Timings of the model, in virtual milliseconds.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// From binding to `Running`.
    pub start_ms: (u64, u64),
    /// From `Running` to `Ready`.
    pub ready_ms: (u64, u64),
    /// From `Running` to the end, for pods whose restartPolicy is not `Always`.
    pub run_ms: (u64, u64),
    /// Probability that such a pod succeeds (else it fails with `fail_exit_code`).
    pub succeed: f64,
    pub fail_exit_code: i64,
    /// The longest a container takes to stop after its pod is deleted (capped by the grace
    /// period).
    pub kill_ms: u64,
    /// From binding attempt to binding.
    pub bind_ms: (u64, u64),
    pub not_ready_after_ms: u64,
    pub evict_after_ms: u64,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            start_ms: (200, 2_000),
            ready_ms: (0, 1_500),
            run_ms: (1_000, 20_000),
            succeed: 0.8,
            fail_exit_code: 1,
            kill_ms: 3_000,
            bind_ms: (20, 500),
            not_ready_after_ms: 40_000,
            evict_after_ms: 60_000,
        }
    }
}

#[derive(Debug, Default, Clone)]
struct PodLife {
    bind_at: Option<u64>,
    start_at: Option<u64>,
    ready_at: Option<u64>,
    finish_at: Option<(u64, i64)>,
    kill_at: Option<u64>,
    /// The node its containers run on (set at start, cleared when they stop).
    running_on: Option<String>,
}

#[derive(Debug, Default, Clone)]
struct NodeState {
    up: bool,
    down_since: Option<u64>,
    unreachable: bool,
    evicted: bool,
}

/// A container still running on a node after its pod object went (the node was down).
#[derive(Debug, Clone)]
pub struct Ghost {
    pub uid: String,
    pub pod: Value,
}

/// Nodes, scheduler, kubelets and node lifecycle.
#[derive(Debug, Default)]
pub struct NodeModel {
    pub config: KubeletConfig,
    nodes: BTreeMap<String, NodeState>,
    pods: BTreeMap<String, PodLife>,
    ghosts: BTreeMap<String, Vec<Ghost>>,
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_str()
        .unwrap_or_default()
}

fn pod_key(p: &Value) -> String {
    format!(
        "{}/{}",
        s(p, &["metadata", "namespace"]),
        s(p, &["metadata", "name"])
    )
}

fn rand_in(world: &mut World, (lo, hi): (u64, u64)) -> u64 {
    if hi > lo {
        world.rng.random_range(lo..=hi)
    } else {
        lo
    }
}

fn set_condition(pod: &mut Value, type_: &str, status: &str, now: &str) {
    let conds = &mut pod["status"]["conditions"];
    if !conds.is_array() {
        *conds = json!([]);
    }
    let Some(list) = conds.as_array_mut() else {
        return;
    };
    match list.iter_mut().find(|c| c["type"] == type_) {
        Some(c) if c["status"] == status => {}
        Some(c) => {
            c["status"] = json!(status);
            c["lastTransitionTime"] = json!(now);
        }
        None => list.push(json!({"type": type_, "status": status, "lastTransitionTime": now})),
    }
}

/// A pod whose containers run but never pass their readiness probe: an image whose name
/// starts with [`NEVER_READY_IMAGE`] or [`BROKEN_IMAGE`] (a broken template, for the scenarios
/// of a stalled rollout).
fn never_ready(pod: &Value) -> bool {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["image"]
                .as_str()
                .is_some_and(|i| i.starts_with(NEVER_READY_IMAGE) || i.starts_with(BROKEN_IMAGE))
        })
}

/// The image prefix of containers that never become Ready (the Deployment rollback scenario).
pub const NEVER_READY_IMAGE: &str = "bad:";

/// The same, as the StatefulSet recovery scenario names its broken templates.
pub const BROKEN_IMAGE: &str = "broken:";

fn container_names(pod: &Value) -> Vec<String> {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| s(c, &["name"]).to_owned())
        .collect()
}

fn tolerates(pod: &Value, key: &str, effect: &str) -> bool {
    pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| {
            let k = s(t, &["key"]);
            let e = s(t, &["effect"]);
            let op = s(t, &["operator"]);
            (k == key || (k.is_empty() && op == "Exists"))
                && (e.is_empty() || e == effect)
                && t["tolerationSeconds"].is_null()
        })
}

/// Whether `pod` may run on `node` (taints with NoSchedule/NoExecute, nodeSelector,
/// required node affinity on `metadata.name` and labels).
fn fits(pod: &Value, node: &Value) -> bool {
    let tolerated = |t: &Value| {
        let effect = s(t, &["effect"]);
        effect == "PreferNoSchedule"
            || pod["spec"]["tolerations"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|x| {
                    (s(x, &["key"]) == s(t, &["key"])
                        || (s(x, &["key"]).is_empty() && s(x, &["operator"]) == "Exists"))
                        && (s(x, &["effect"]).is_empty() || s(x, &["effect"]) == effect)
                })
    };
    let taints_ok = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .all(tolerated);
    let labels = &node["metadata"]["labels"];
    let selector_ok = pod["spec"]["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let terms = &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    let affinity_ok = match terms.as_array() {
        None => true,
        Some(terms) => terms.iter().any(|term| {
            let fields_ok = term["matchFields"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|r| {
                    let values: Vec<&str> = r["values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    s(r, &["key"]) != "metadata.name"
                        || values.contains(&s(node, &["metadata", "name"]))
                });
            let exprs_ok = term["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|r| {
                    let have = labels[s(r, &["key"])].as_str();
                    let values: Vec<&str> = r["values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    match s(r, &["operator"]) {
                        "In" => have.is_some_and(|h| values.contains(&h)),
                        "NotIn" => have.is_none_or(|h| !values.contains(&h)),
                        "Exists" => have.is_some(),
                        "DoesNotExist" => have.is_none(),
                        _ => true,
                    }
                });
            fields_ok && exprs_ok
        }),
    };
    taints_ok && selector_ok && affinity_ok
}

impl NodeModel {
    pub fn new(config: KubeletConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// Creates a Ready node.
    pub fn add_node(&mut self, world: &mut World, name: &str) {
        let now = world.wall().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let node = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": now, "lastTransitionTime": now}],
                "allocatable": {"pods": "110", "cpu": "8", "memory": "32Gi"},
                "capacity": {"pods": "110", "cpu": "8", "memory": "32Gi"}}});
        if let Some(r) = resource("nodes") {
            let _ = world.create(&Caller::sim("sim"), r, "", node);
            if world.get("nodes", name).is_some() {
                // create() resets status: report Ready as the kubelet would.
                let status = json!({"conditions": [{"type": "Ready", "status": "True",
                    "lastHeartbeatTime": now, "lastTransitionTime": now}],
                    "allocatable": {"pods": "110", "cpu": "8", "memory": "32Gi"},
                    "capacity": {"pods": "110", "cpu": "8", "memory": "32Gi"}});
                world.edit("kubelet", "nodes", name, |n| {
                    n["status"] = status;
                    true
                });
            }
        }
        self.nodes.insert(
            name.to_owned(),
            NodeState {
                up: true,
                ..NodeState::default()
            },
        );
        world.trace_line(format!("sim add node {name}"));
    }

    /// The node stops: its kubelet does nothing until [`NodeModel::revive`].
    pub fn kill(&mut self, world: &mut World, name: &str) {
        let now = world.now_ms();
        if let Some(n) = self.nodes.get_mut(name)
            && n.up
        {
            n.up = false;
            n.down_since = Some(now);
            world.trace_line(format!("sim node {name} dies"));
        }
    }

    /// The node comes back: Ready again, taints gone, the kubelet resumes (and kills the
    /// containers whose pod objects went meanwhile).
    pub fn revive(&mut self, world: &mut World, name: &str) {
        let Some(n) = self.nodes.get_mut(name) else {
            return;
        };
        if n.up {
            return;
        }
        *n = NodeState {
            up: true,
            ..NodeState::default()
        };
        self.ghosts.remove(name);
        let now = world.wall().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        world.edit("kubelet", "nodes", name, |node| {
            if let Some(m) = node["spec"].as_object_mut() {
                m.remove("taints");
            }
            set_condition(node, "Ready", "True", &now);
            true
        });
        world.trace_line(format!("sim node {name} returns"));
    }

    /// The node object is deleted (the machine is gone, with its containers).
    pub fn delete_node(&mut self, world: &mut World, name: &str) {
        if let Some(r) = resource("nodes") {
            let _ = world.delete(&Caller::sim("cloud"), r, "", name, &Value::Null);
        }
        self.nodes.remove(name);
        self.ghosts.remove(name);
        for life in self.pods.values_mut() {
            if life.running_on.as_deref() == Some(name) {
                life.running_on = None;
            }
        }
    }

    /// An operator marks a dead node out of service (the
    /// `node.kubernetes.io/out-of-service` taint): its containers are known to be stopped.
    pub fn out_of_service(&mut self, world: &mut World, name: &str) {
        if self.nodes.get(name).is_none_or(|n| n.up) {
            return;
        }
        self.ghosts.remove(name);
        for life in self.pods.values_mut() {
            if life.running_on.as_deref() == Some(name) {
                life.running_on = None;
            }
        }
        world.edit("operator", "nodes", name, |node| {
            let taints = &mut node["spec"]["taints"];
            if !taints.is_array() {
                *taints = json!([]);
            }
            if let Some(list) = taints.as_array_mut() {
                list.push(json!({"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}));
            }
            true
        });
    }

    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    pub fn is_up(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|n| n.up)
    }

    /// Containers running per pod identity: `(pod uid, node)` of every pod whose containers
    /// run (pods and ghosts).
    pub fn running(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .pods
            .iter()
            .filter_map(|(uid, l)| l.running_on.clone().map(|n| (uid.clone(), n)))
            .collect();
        for (node, ghosts) in &self.ghosts {
            out.extend(ghosts.iter().map(|g| (g.uid.clone(), node.clone())));
        }
        out
    }

    /// Ghost containers (pod objects gone, containers still running), with their last pods.
    pub fn ghosts(&self) -> impl Iterator<Item = (&String, &Ghost)> {
        self.ghosts
            .iter()
            .flat_map(|(n, g)| g.iter().map(move |x| (n, x)))
    }

    /// A running pod of restartPolicy Always fails (its container exits, e.g. evicted by the
    /// kubelet for memory): phase `Failed`.
    pub fn fail_pod(&mut self, world: &mut World, key: &str, exit_code: i64) {
        let Some(pod) = world.get("pods", key) else {
            return;
        };
        let node = s(&pod, &["spec", "nodeName"]).to_owned();
        if node.is_empty() || !self.is_up(&node) || s(&pod, &["status", "phase"]) != "Running" {
            return;
        }
        let uid = s(&pod, &["metadata", "uid"]).to_owned();
        let now = world.wall().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        world.trace_line(format!("sim pod {key} fails with exit code {exit_code}"));
        world.edit("kubelet", "pods", key, |p| {
            terminate_status(p, "Failed", exit_code, &now);
            true
        });
        if let Some(l) = self.pods.get_mut(&uid) {
            l.running_on = None;
            l.finish_at = None;
        }
    }

    /// One step of every kubelet, the scheduler and the node lifecycle controller.
    pub fn step(&mut self, world: &mut World) {
        let now = world.now_ms();
        let wall = world.wall().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        self.lifecycle(world, now, &wall);
        let pods = world.list("pods");
        let mut present = std::collections::BTreeSet::new();
        for pod in &pods {
            let uid = s(pod, &["metadata", "uid"]).to_owned();
            present.insert(uid.clone());
            self.pod_step(world, pod, &uid, now, &wall);
        }
        // Pods whose objects went: their containers stop, unless their node is down.
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|uid| !present.contains(*uid))
            .cloned()
            .collect();
        for uid in gone {
            if let Some(life) = self.pods.remove(&uid)
                && let Some(node) = life.running_on
                && self.nodes.get(&node).is_some_and(|n| !n.up)
            {
                let pod = world
                    .deletions
                    .iter()
                    .rev()
                    .find(|d| d.resource == "pods" && s(&d.obj, &["metadata", "uid"]) == uid)
                    .map(|d| (*d.obj).clone())
                    .unwrap_or(Value::Null);
                self.ghosts
                    .entry(node)
                    .or_default()
                    .push(Ghost { uid, pod });
            }
        }
    }

    fn lifecycle(&mut self, world: &mut World, now: u64, wall: &str) {
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for name in names {
            let Some(state) = self.nodes.get(&name).cloned() else {
                continue;
            };
            let Some(since) = state.down_since else {
                continue;
            };
            if !state.unreachable && now >= since + self.config.not_ready_after_ms {
                world.edit("node-lifecycle", "nodes", &name, |node| {
                    set_condition(node, "Ready", "Unknown", wall);
                    let taints = &mut node["spec"]["taints"];
                    if !taints.is_array() {
                        *taints = json!([]);
                    }
                    if let Some(list) = taints.as_array_mut() {
                        for effect in ["NoSchedule", "NoExecute"] {
                            list.push(json!({"key": "node.kubernetes.io/unreachable", "effect": effect, "timeAdded": wall}));
                        }
                    }
                    true
                });
                for pod in world.list("pods") {
                    if s(&pod, &["spec", "nodeName"]) == name {
                        world.edit("node-lifecycle", "pods", &pod_key(&pod), |p| {
                            set_condition(p, "Ready", "False", wall);
                            true
                        });
                    }
                }
                if let Some(n) = self.nodes.get_mut(&name) {
                    n.unreachable = true;
                }
            }
            if !state.evicted
                && now >= since + self.config.not_ready_after_ms + self.config.evict_after_ms
            {
                for pod in world.list("pods") {
                    if s(&pod, &["spec", "nodeName"]) == name
                        && pod["metadata"]["deletionTimestamp"].is_null()
                        && !tolerates(&pod, "node.kubernetes.io/unreachable", "NoExecute")
                        && let Some(r) = resource("pods")
                    {
                        let uid = s(&pod, &["metadata", "uid"]);
                        let opts = json!({"preconditions": {"uid": uid}});
                        let _ = world.delete(
                            &Caller::sim("taint-eviction"),
                            r,
                            s(&pod, &["metadata", "namespace"]),
                            s(&pod, &["metadata", "name"]),
                            &opts,
                        );
                    }
                }
                if let Some(n) = self.nodes.get_mut(&name) {
                    n.evicted = true;
                }
            }
        }
    }

    #[allow(clippy::too_many_lines)] // one kubelet step per pod phase, read top to bottom
    fn pod_step(&mut self, world: &mut World, pod: &Value, uid: &str, now: u64, wall: &str) {
        let key = pod_key(pod);
        let node = s(pod, &["spec", "nodeName"]).to_owned();
        let terminating = !pod["metadata"]["deletionTimestamp"].is_null();
        let phase = s(pod, &["status", "phase"]).to_owned();
        let cfg = self.config.clone();
        let mut life = self.pods.get(uid).cloned().unwrap_or_default();
        if node.is_empty() {
            if terminating {
                return;
            }
            let at = match life.bind_at {
                Some(at) => at,
                None => {
                    let at = now + rand_in(world, cfg.bind_ms);
                    life.bind_at = Some(at);
                    self.pods.insert(uid.to_owned(), life);
                    return;
                }
            };
            if now < at {
                return;
            }
            let fitting: Vec<String> = self
                .nodes
                .iter()
                .filter(|(_, st)| st.up)
                .filter_map(|(n, _)| {
                    world
                        .get("nodes", n)
                        .filter(|obj| fits(pod, obj))
                        .map(|_| n.clone())
                })
                .collect();
            if fitting.is_empty() {
                life.bind_at = Some(now + 2_000);
            } else {
                let chosen = fitting[world.rng.random_range(0..fitting.len())].clone();
                world.edit("scheduler", "pods", &key, |p| {
                    p["spec"]["nodeName"] = json!(chosen);
                    set_condition(p, "PodScheduled", "True", wall);
                    true
                });
            }
            self.pods.insert(uid.to_owned(), life);
            return;
        }
        if !self.is_up(&node) {
            self.pods.insert(uid.to_owned(), life);
            return;
        }
        if terminating {
            let grace_ms = pod["metadata"]["deletionGracePeriodSeconds"]
                .as_u64()
                .unwrap_or(30)
                .saturating_mul(1000);
            let at = match life.kill_at {
                Some(at) => at,
                None => {
                    let at = now + rand_in(world, (0, cfg.kill_ms.min(grace_ms)));
                    life.kill_at = Some(at);
                    self.pods.insert(uid.to_owned(), life);
                    return;
                }
            };
            if now < at {
                self.pods.insert(uid.to_owned(), life);
                return;
            }
            life.running_on = None;
            self.pods.insert(uid.to_owned(), life);
            if phase != "Succeeded" && phase != "Failed" {
                world.edit("kubelet", "pods", &key, |p| {
                    terminate_status(p, "Failed", 137, wall);
                    true
                });
            }
            if pod["metadata"]["deletionGracePeriodSeconds"].as_i64() != Some(0)
                && let Some(r) = resource("pods")
            {
                let opts = json!({"gracePeriodSeconds": 0, "preconditions": {"uid": uid}});
                let _ = world.delete(
                    &Caller::sim("kubelet"),
                    r,
                    s(pod, &["metadata", "namespace"]),
                    s(pod, &["metadata", "name"]),
                    &opts,
                );
            }
            return;
        }
        match phase.as_str() {
            "Pending" => {
                let at = match life.start_at {
                    Some(at) => at,
                    None => {
                        let at = now + rand_in(world, cfg.start_ms);
                        life.start_at = Some(at);
                        at
                    }
                };
                if now >= at {
                    let names = container_names(pod);
                    world.edit("kubelet", "pods", &key, |p| {
                        p["status"]["phase"] = json!("Running");
                        p["status"]["startTime"] = json!(wall);
                        p["status"]["podIP"] = json!("10.0.0.1");
                        p["status"]["containerStatuses"] = Value::Array(
                            names
                                .iter()
                                .map(|n| {
                                    json!({"name": n, "ready": false, "started": true,
                                    "restartCount": 0, "image": "sim", "imageID": "", 
                                    "state": {"running": {"startedAt": wall}}})
                                })
                                .collect(),
                        );
                        set_condition(p, "Initialized", "True", wall);
                        set_condition(p, "ContainersReady", "False", wall);
                        set_condition(p, "Ready", "False", wall);
                        true
                    });
                    life.running_on = Some(node.clone());
                    life.ready_at = (!never_ready(pod)).then(|| now + rand_in(world, cfg.ready_ms));
                    if s(pod, &["spec", "restartPolicy"]) != "Always" {
                        let run = rand_in(world, cfg.run_ms);
                        let ok = world.rng.random_bool(cfg.succeed.clamp(0.0, 1.0));
                        let exit = if ok { 0 } else { cfg.fail_exit_code };
                        life.finish_at = Some((now + run, exit));
                    }
                }
            }
            "Running" => {
                let ready = pod["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                if !ready && life.ready_at.is_none() && !never_ready(pod) {
                    // Marked not ready while its node was unreachable: the kubelet reports
                    // it again once the node is back.
                    life.running_on = Some(node.clone());
                    life.ready_at = Some(now + rand_in(world, cfg.ready_ms));
                }
                if let Some(at) = life.ready_at
                    && now >= at
                {
                    life.ready_at = None;
                    world.edit("kubelet", "pods", &key, |p| {
                        if let Some(list) = p["status"]["containerStatuses"].as_array_mut() {
                            for c in list {
                                c["ready"] = json!(true);
                            }
                        }
                        set_condition(p, "ContainersReady", "True", wall);
                        set_condition(p, "Ready", "True", wall);
                        true
                    });
                }
                if let Some((at, exit)) = life.finish_at
                    && now >= at
                {
                    life.finish_at = None;
                    life.running_on = None;
                    let phase = if exit == 0 { "Succeeded" } else { "Failed" };
                    world.edit("kubelet", "pods", &key, |p| {
                        terminate_status(p, phase, exit, wall);
                        true
                    });
                }
            }
            _ => {
                life.running_on = None;
            }
        }
        self.pods.insert(uid.to_owned(), life);
    }
}

/// The status of a pod whose containers ended: `phase`, each container terminated with
/// `exit_code`, not ready.
fn terminate_status(p: &mut Value, phase: &str, exit_code: i64, now: &str) {
    p["status"]["phase"] = json!(phase);
    let reason = if exit_code == 0 { "Completed" } else { "Error" };
    if let Some(list) = p["status"]["containerStatuses"].as_array_mut() {
        for c in list {
            c["ready"] = json!(false);
            c["started"] = json!(false);
            c["state"] = json!({"terminated": {"exitCode": exit_code, "reason": reason,
                "startedAt": now, "finishedAt": now}});
        }
    } else {
        let names = container_names(p);
        p["status"]["containerStatuses"] = Value::Array(
            names
                .iter()
                .map(|n| json!({"name": n, "ready": false, "restartCount": 0, "image": "sim", "imageID": "",
                    "state": {"terminated": {"exitCode": exit_code, "reason": reason,
                        "startedAt": now, "finishedAt": now}}}))
                .collect(),
        );
    }
    set_condition(p, "ContainersReady", "False", now);
    set_condition(p, "Ready", "False", now);
}
