//! The workload of each controller: the objects a run starts with, the user's operations a
//! seed draws during the fault phase (scale, template change, pod deletion and failure, node
//! death, suspend, new Jobs...), and what "converged" means once faults stop.

use rand::Rng;
use rand::rngs::StdRng;
use rkcm_testkit::sim::nodes::{NEVER_READY_IMAGE, NodeModel};
use rkcm_testkit::sim::server::{Caller, World, resource};
use serde_json::{Value, json};

use crate::manager::Ctl;

/// The namespace of every workload object.
pub const NS: &str = "sim";
/// Names of the run-to-completion pods of the PodGC scenario.
const BARE_POOL: usize = 4;
/// How often a node joins the cluster in the PodGC scenario (virtual ms).
const GROW_EVERY_MS: u64 = 30_000;
/// The namespaces of the sharded scenarios' workload: names that differ early, so that
/// FNV-1a spreads them over a ring of [`SHARD_RANGES`] (ranges 0, 1, 2, 4, 5 and 6).
pub const SHARD_NAMESPACES: [&str; 6] = ["papa", "echo", "delta", "alpha", "bravo", "juliet"];
/// The ring of the sharded scenarios.
pub const SHARD_RANGES: u32 = 8;

/// `path` of `v` as a string (`""` when absent).
pub fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_str()
        .unwrap_or_default()
}

/// `path` of `v` as a number (0 when absent).
pub fn n(v: &Value, path: &[&str]) -> i64 {
    path.iter().fold(v, |v, k| &v[*k]).as_i64().unwrap_or(0)
}

pub fn key(v: &Value) -> String {
    format!(
        "{}/{}",
        s(v, &["metadata", "namespace"]),
        s(v, &["metadata", "name"])
    )
}

/// The controller owner reference of `v`: (kind, name, uid).
pub fn controller_of(v: &Value) -> Option<(String, String, String)> {
    v["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"].as_bool() == Some(true))
        .map(|r| {
            (
                s(r, &["kind"]).to_owned(),
                s(r, &["name"]).to_owned(),
                s(r, &["uid"]).to_owned(),
            )
        })
}

pub fn is_terminal(p: &Value) -> bool {
    matches!(s(p, &["status", "phase"]), "Succeeded" | "Failed")
}

pub fn is_terminating(v: &Value) -> bool {
    !v["metadata"]["deletionTimestamp"].is_null()
}

pub fn is_ready(p: &Value) -> bool {
    p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn condition_true(v: &Value, type_: &str) -> bool {
    v["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

pub fn job_finished(j: &Value) -> bool {
    condition_true(j, "Complete") || condition_true(j, "Failed")
}

/// Pods whose controller is the object with `uid`.
fn owned_pods(world: &World, uid: &str) -> Vec<std::sync::Arc<Value>> {
    world
        .list("pods")
        .into_iter()
        .filter(|p| controller_of(p).is_some_and(|(_, _, u)| u == uid))
        .collect()
}

fn pod_template(app: &str, image: &str, restart: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": image}],
            "restartPolicy": restart, "terminationGracePeriodSeconds": 10}})
}

fn create(world: &mut World, plural: &str, obj: Value) {
    if let Some(r) = resource(plural) {
        let _ = world.create(&Caller::sim("user"), r, NS, obj);
    }
}

fn create_in(world: &mut World, ns: &str, plural: &str, obj: Value) {
    if let Some(r) = resource(plural) {
        let _ = world.create(&Caller::sim("user"), r, ns, obj);
    }
}

fn delete(world: &mut World, plural: &str, name: &str) {
    if let Some(r) = resource(plural) {
        let _ = world.delete(&Caller::sim("user"), r, NS, name, &Value::Null);
    }
}

fn pick<T: Clone>(rng: &mut StdRng, items: &[T]) -> Option<T> {
    (!items.is_empty()).then(|| items[rng.random_range(0..items.len())].clone())
}

/// A workload.
pub struct Scenario {
    pub ctl: Ctl,
    /// Template versions handed out so far.
    version: u32,
    jobs: u32,
    nodes: u32,
    /// When the faults stopped (wall clock of the simulated cluster).
    calm_at: Option<jiff::Timestamp>,
}

impl Scenario {
    pub fn new(ctl: Ctl) -> Self {
        Self {
            ctl,
            version: 1,
            jobs: 0,
            nodes: 0,
            calm_at: None,
        }
    }

    /// How long the fault phase lasts (virtual seconds): CronJobs need minutes to pass.
    pub fn fault_secs(&self) -> u64 {
        match self.ctl {
            Ctl::CronJob => 200,
            _ => 120,
        }
    }

    fn add_node(&mut self, world: &mut World, model: &mut NodeModel) {
        let name = format!("node-{}", self.nodes);
        self.nodes += 1;
        model.add_node(world, &name);
    }

    /// The objects a run starts with.
    pub fn setup(&mut self, world: &mut World, model: &mut NodeModel, rng: &mut StdRng) {
        for _ in 0..3 {
            self.add_node(world, model);
        }
        match self.ctl {
            Ctl::ReplicaSet | Ctl::PodGc => {
                for (name, replicas) in [("web-a", 3), ("web-b", 2)] {
                    create(world, "replicasets", replicaset(name, replicas, "img:1"));
                }
                if self.ctl == Ctl::PodGc {
                    // Pods no controller owns, to be left to PodGC on a dead node.
                    for i in 0..2 {
                        create(world, "pods", bare_pod(&format!("bare-{i}"), "Always"));
                    }
                }
            }
            Ctl::Deployment => {
                let surge = pick(rng, &[json!(1), json!(0), json!("25%")]).unwrap_or(json!(1));
                let unavailable = if surge == json!(0) {
                    json!(1)
                } else {
                    json!(0)
                };
                create(
                    world,
                    "deployments",
                    deployment("front", 3, surge, unavailable, "img:1"),
                );
                create(
                    world,
                    "deployments",
                    deployment("back", 2, json!("25%"), json!("25%"), "img:1"),
                );
            }
            Ctl::DeploymentRollback => {
                let surge = pick(rng, &[json!(1), json!(0), json!("25%")]).unwrap_or(json!(1));
                let unavailable = if surge == json!(0) {
                    json!(1)
                } else {
                    json!(0)
                };
                for (name, replicas, opt_in) in [("front", 3, true), ("back", 2, false)] {
                    let mut d =
                        deployment(name, replicas, surge.clone(), unavailable.clone(), "img:1");
                    d["spec"]["progressDeadlineSeconds"] = json!(ROLLBACK_DEADLINE_S);
                    if opt_in {
                        d["metadata"]["annotations"] = json!({ROLLBACK_OPT_IN: "true"});
                    }
                    create(world, "deployments", d);
                }
            }
            Ctl::StatefulSet => {
                create(
                    world,
                    "statefulsets",
                    statefulset("db", 3, "OrderedReady", "img:1"),
                );
                create(
                    world,
                    "statefulsets",
                    statefulset("cache", 2, "Parallel", "img:1"),
                );
                // Opted in to the stuck-rollout recovery; its templates are sometimes broken
                // (pods never Ready), and minReadySeconds keeps Ready pods in the ordered
                // wait for a while (recovery must leave them).
                let mut queue = statefulset("queue", 3, "OrderedReady", "img:1");
                queue["metadata"]["annotations"] =
                    json!({"rkcm.io/statefulset-recover-stuck-rollout": "true"});
                queue["spec"]["minReadySeconds"] = json!(10);
                create(world, "statefulsets", queue);
            }
            Ctl::DaemonSet => {
                create(world, "daemonsets", daemonset("agent", "img:1"));
            }
            Ctl::Job => {
                for _ in 0..2 {
                    self.new_job(world, rng, None);
                }
            }
            Ctl::CronJob => {
                let policy = pick(rng, &["Allow", "Forbid", "Replace"]).unwrap_or("Allow");
                create(world, "cronjobs", cronjob("tick", "* * * * *", policy));
                create(
                    world,
                    "cronjobs",
                    cronjob("every2", "*/2 * * * *", "Forbid"),
                );
            }
            Ctl::TtlAfterFinished => {
                for _ in 0..2 {
                    let ttl = rng.random_range(0..30);
                    self.new_job(world, rng, Some(ttl));
                }
            }
            Ctl::Sharded2 | Ctl::Sharded3 => self.sharded_setup(world, model, rng),
        }
    }

    /// The sharded scenarios' objects: a Deployment and a pod that runs to completion in every
    /// namespace of [`SHARD_NAMESPACES`], a ReplicaSet of its own in every other one, and a
    /// fourth node.
    fn sharded_setup(&mut self, world: &mut World, model: &mut NodeModel, rng: &mut StdRng) {
        self.add_node(world, model);
        // The namespaces exist (a replica starting on a ring nobody counted lists them).
        if let Some(r) = resource("namespaces") {
            for ns in SHARD_NAMESPACES {
                let _ = world.create(
                    &Caller::sim("user"),
                    r,
                    "",
                    json!({"metadata": {"name": ns}}),
                );
            }
        }
        // A Deployment in every namespace, a ReplicaSet of its own in every other.
        for (i, ns) in SHARD_NAMESPACES.iter().enumerate() {
            let surge = pick(rng, &[json!(1), json!(0), json!("25%")]).unwrap_or(json!(1));
            let unavailable = if surge == json!(0) {
                json!(1)
            } else {
                json!(0)
            };
            create_in(
                world,
                ns,
                "deployments",
                deployment("web", 2, surge, unavailable, "img:1"),
            );
            if i % 2 == 0 {
                create_in(world, ns, "replicasets", replicaset("solo", 2, "img:1"));
            }
            // Runs to completion: six terminated pods are past PodGC's threshold.
            create_in(world, ns, "pods", bare_pod("batch-0", "Never"));
        }
    }

    fn new_job(&mut self, world: &mut World, rng: &mut StdRng, ttl: Option<i64>) {
        self.jobs += 1;
        let name = format!("job-{}", self.jobs);
        let indexed = rng.random_bool(0.5);
        let completions = rng.random_range(1..=4);
        let parallelism = rng.random_range(1..=3);
        let mut job = json!({"metadata": {"name": name},
            "spec": {"completions": completions, "parallelism": parallelism,
                "completionMode": if indexed { "Indexed" } else { "NonIndexed" },
                "backoffLimit": 6,
                "template": pod_template(&name, "img:1", "Never")}});
        if let Some(ttl) = ttl {
            job["spec"]["ttlSecondsAfterFinished"] = json!(ttl);
        }
        create(world, "jobs", job);
    }

    /// One operation of the user, drawn by `rng`.
    pub fn op(&mut self, world: &mut World, model: &mut NodeModel, rng: &mut StdRng) {
        let nodes = model.node_names();
        let up: Vec<String> = nodes.iter().filter(|n| model.is_up(n)).cloned().collect();
        let down: Vec<String> = nodes.iter().filter(|n| !model.is_up(n)).cloned().collect();
        let pods: Vec<String> = world
            .list("pods")
            .iter()
            .filter(|p| !is_terminating(p))
            .map(|p| s(p, &["metadata", "name"]).to_owned())
            .collect();
        if self.ctl.is_sharded() {
            self.sharded_op(world, model, rng, &up, &down);
            return;
        }
        let roll = rng.random_range(0..100);
        match roll {
            // Node faults, for every workload.
            0..=7 if up.len() > 1 => {
                if let Some(n) = pick(rng, &up) {
                    model.kill(world, &n);
                }
            }
            8..=11 if !down.is_empty() => {
                if let Some(n) = pick(rng, &down) {
                    match rng.random_range(0..3) {
                        0 => model.revive(world, &n),
                        1 => {
                            world.trace_line(format!("user delete node {n}"));
                            model.delete_node(world, &n);
                            self.add_node(world, model);
                        }
                        _ => {
                            world.trace_line(format!("user out-of-service {n}"));
                            model.out_of_service(world, &n);
                        }
                    }
                }
            }
            12..=24 => {
                if let Some(p) = pick(rng, &pods) {
                    world.trace_line(format!("user delete pod {p}"));
                    delete(world, "pods", &p);
                }
            }
            25..=32 => {
                if let Some(p) = pick(rng, &pods) {
                    model.fail_pod(world, &format!("{NS}/{p}"), 1);
                }
            }
            _ => self.workload_op(world, model, rng),
        }
    }

    /// One operation of the sharded scenarios' user: node faults, pod deletions and failures
    /// in any namespace, scaling and new templates of the Deployments and ReplicaSets.
    fn sharded_op(
        &mut self,
        world: &mut World,
        model: &mut NodeModel,
        rng: &mut StdRng,
        up: &[String],
        down: &[String],
    ) {
        let pods: Vec<String> = world
            .list("pods")
            .iter()
            .filter(|p| !is_terminating(p))
            .map(|p| key(p))
            .collect();
        match rng.random_range(0..100) {
            0..=7 if up.len() > 1 => {
                if let Some(n) = pick(rng, up) {
                    model.kill(world, &n);
                }
            }
            8..=11 if !down.is_empty() => {
                if let Some(n) = pick(rng, down) {
                    if rng.random_bool(0.5) {
                        model.revive(world, &n);
                    } else {
                        // Its pods are PodGC's (orphans), swept by the replica holding each
                        // pod's range.
                        world.trace_line(format!("user delete node {n}"));
                        model.delete_node(world, &n);
                        self.add_node(world, model);
                    }
                }
            }
            33..=40 => {
                // A pod that runs to completion: terminated pods past PodGC's threshold go in
                // the cluster-wide pass of the global Lease's holder.
                if let Some(ns) = pick(rng, &SHARD_NAMESPACES) {
                    self.jobs += 1;
                    let name = format!("batch-{}", self.jobs);
                    world.trace_line(format!("user create pod {ns}/{name}"));
                    create_in(world, ns, "pods", bare_pod(&name, "Never"));
                }
            }
            12..=24 => {
                if let Some(p) = pick(rng, &pods)
                    && let (Some((ns, name)), Some(r)) = (p.split_once('/'), resource("pods"))
                {
                    world.trace_line(format!("user delete pod {p}"));
                    let _ = world.delete(&Caller::sim("user"), r, ns, name, &Value::Null);
                }
            }
            25..=32 => {
                if let Some(p) = pick(rng, &pods) {
                    model.fail_pod(world, &p, 1);
                }
            }
            _ => {
                let plural = if rng.random_bool(0.6) {
                    "deployments"
                } else {
                    "replicasets"
                };
                // The Deployments' own ReplicaSets are the Deployment controller's to scale.
                let objs: Vec<String> = world
                    .list(plural)
                    .iter()
                    .filter(|o| controller_of(o).is_none())
                    .map(|o| key(o))
                    .collect();
                let Some(target) = pick(rng, &objs) else {
                    return;
                };
                if plural == "deployments" && rng.random_bool(0.5) {
                    self.version += 1;
                    let image = format!("img:{}", self.version);
                    world.trace_line(format!("user set image of {target} to {image}"));
                    world.edit("user", plural, &target, |o| {
                        o["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
                        true
                    });
                } else {
                    let replicas = rng.random_range(0..=4);
                    world.trace_line(format!("user scale {target} to {replicas}"));
                    world.edit("user", plural, &target, |o| {
                        o["spec"]["replicas"] = json!(replicas);
                        true
                    });
                }
            }
        }
    }

    /// Called every step of the fault phase. In the PodGC scenario, a pod no controller owns,
    /// running to completion, is created under each name of a small pool whose pod is gone,
    /// at once (a name used again and again, as a StatefulSet or a user's script would): the
    /// new pod is running or about to run on a live node, so it is not garbage, while a
    /// cache that has not yet seen the old pod go may still show it terminated; a delete or
    /// a status write by name alone made on that cache would reach the new pod. And every
    /// [`GROW_EVERY_MS`] a node joins with a pod created on it (`spec.nodeName` set, as a
    /// user or an agent pinning a pod does): a node cache that lags behind the pod cache
    /// does not show the node yet (what PodGC's quarantine of unknown node names is for).
    pub fn tick(&mut self, world: &mut World, model: &mut NodeModel) {
        if self.ctl != Ctl::PodGc {
            return;
        }
        let now = world.now_ms();
        if now > 0 && now.is_multiple_of(GROW_EVERY_MS) {
            let node = format!("node-{}", self.nodes);
            self.add_node(world, model);
            let mut pod = bare_pod(&format!("pinned-{node}"), "Always");
            pod["spec"]["nodeName"] = json!(node);
            world.trace_line(format!("user create pod pinned-{node} on {node}"));
            create(world, "pods", pod);
        }
        for i in 0..BARE_POOL {
            let name = format!("bare-run-{i}");
            if world.get("pods", &format!("{NS}/{name}")).is_none() {
                world.trace_line(format!("user create pod {name}"));
                create(world, "pods", bare_pod(&name, "Never"));
            }
        }
    }

    /// The rollback scenario's user: scales, rolls to a good (`img:N`) or a broken (`bad:N`,
    /// never Ready) template. No pause: with pauses and resumes this workload shows findings
    /// of the Deployment controller with the remedy off too (seeds 112, 255 and 286 of the
    /// scenario with pauses: a status write retry storm, a scale-down below
    /// `replicas - maxUnavailable`), not investigated yet; paused Deployments are covered by
    /// the table tests of the rule and of the check.
    fn rollback_op(&mut self, world: &mut World, rng: &mut StdRng) {
        let objs: Vec<String> = world.list("deployments").iter().map(|o| key(o)).collect();
        let Some(target) = pick(rng, &objs) else {
            return;
        };
        match rng.random_range(0..5) {
            0 => {
                let replicas = rng.random_range(0..=5);
                world.trace_line(format!("user scale {target} to {replicas}"));
                world.edit("user", "deployments", &target, |o| {
                    o["spec"]["replicas"] = json!(replicas);
                    true
                });
            }
            n => {
                self.version += 1;
                let prefix = if n <= 2 { "img:" } else { NEVER_READY_IMAGE };
                self.set_image(world, &target, &format!("{prefix}{}", self.version));
            }
        }
    }

    fn set_image(&self, world: &mut World, target: &str, image: &str) {
        world.trace_line(format!("user set image of {target} to {image}"));
        world.edit("user", "deployments", target, |o| {
            o["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
            true
        });
    }

    /// The rollback scenario's calm: every Deployment resumes; a broken template is fixed by
    /// hand where rkcm leaves it broken by its rule (not opted in, or nothing good to return
    /// to: no old ReplicaSet with available pods); otherwise rkcm's rollback must bring it back.
    fn rollback_calm(&mut self, world: &mut World) {
        for d in world.list("deployments") {
            let target = key(&d);
            world.edit("user", "deployments", &target, |o| {
                if o["spec"]["paused"] != json!(true) {
                    return false;
                }
                o["spec"]["paused"] = json!(false);
                true
            });
            let image = image_of(&d);
            if !image.starts_with(NEVER_READY_IMAGE) {
                continue;
            }
            let opted_in = s(&d, &["metadata", "annotations", ROLLBACK_OPT_IN]) == "true";
            let previous_good = working_previous(world, &d);
            if !(opted_in && previous_good) {
                self.version += 1;
                let fixed = format!("img:{}", self.version);
                self.set_image(world, &target, &fixed);
            }
        }
    }

    fn workload_op(&mut self, world: &mut World, model: &mut NodeModel, rng: &mut StdRng) {
        if self.ctl == Ctl::DeploymentRollback {
            self.rollback_op(world, rng);
            return;
        }
        let plural = match self.ctl {
            Ctl::ReplicaSet | Ctl::PodGc => "replicasets",
            Ctl::Deployment | Ctl::DeploymentRollback => "deployments",
            Ctl::StatefulSet => "statefulsets",
            Ctl::DaemonSet => "daemonsets",
            Ctl::Job | Ctl::TtlAfterFinished => "jobs",
            Ctl::CronJob => "cronjobs",
            // Their user is `sharded_op`.
            Ctl::Sharded2 | Ctl::Sharded3 => return,
        };
        let objs: Vec<String> = world.list(plural).iter().map(|o| key(o)).collect();
        let Some(target) = pick(rng, &objs) else {
            if plural == "jobs" {
                self.new_job(world, rng, (self.ctl == Ctl::TtlAfterFinished).then_some(5));
            }
            return;
        };
        let mut choice = rng.random_range(0..3);
        // The set opted in to the stuck-rollout recovery only changes its template: a
        // scale-down past pods that never become Ready stays stuck under OrderedReady, as
        // upstream (a condemned unhealthy pod that is not the first unavailable one blocks).
        if target == format!("{NS}/queue") {
            choice = 2;
        }
        match (self.ctl, choice) {
            // The rollback scenario's user is `rollback_op`, the sharded ones' `sharded_op`.
            (Ctl::DeploymentRollback | Ctl::Sharded2 | Ctl::Sharded3, _) => {}
            (Ctl::ReplicaSet | Ctl::PodGc, _) | (Ctl::Deployment | Ctl::StatefulSet, 0 | 1) => {
                let replicas = rng.random_range(0..=5);
                world.trace_line(format!("user scale {target} to {replicas}"));
                world.edit("user", plural, &target, |o| {
                    o["spec"]["replicas"] = json!(replicas);
                    true
                });
            }
            (Ctl::DaemonSet, 0) => {
                self.add_node(world, model);
            }
            (Ctl::Deployment | Ctl::StatefulSet | Ctl::DaemonSet, _) => {
                self.version += 1;
                let broken = target == format!("{NS}/queue") && rng.random_bool(0.5);
                let image = format!("{}:{}", if broken { "broken" } else { "img" }, self.version);
                world.trace_line(format!("user set image of {target} to {image}"));
                world.edit("user", plural, &target, |o| {
                    o["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
                    true
                });
            }
            (Ctl::Job | Ctl::TtlAfterFinished, 0) => {
                let ttl = (self.ctl == Ctl::TtlAfterFinished).then(|| rng.random_range(0..20));
                self.new_job(world, rng, ttl);
            }
            (Ctl::Job, 1) => {
                let suspend = rng.random_bool(0.5);
                world.trace_line(format!("user suspend {target}: {suspend}"));
                world.edit("user", plural, &target, |o| {
                    if job_finished(o) {
                        return false;
                    }
                    o["spec"]["suspend"] = json!(suspend);
                    true
                });
            }
            (Ctl::TtlAfterFinished, 1) => {
                let ttl = rng.random_range(0..20);
                world.trace_line(format!("user set ttl of {target} to {ttl}"));
                world.edit("user", plural, &target, |o| {
                    o["spec"]["ttlSecondsAfterFinished"] = json!(ttl);
                    true
                });
            }
            (Ctl::Job | Ctl::TtlAfterFinished, _) => {
                let ttl = (self.ctl == Ctl::TtlAfterFinished).then_some(3);
                self.new_job(world, rng, ttl);
            }
            (Ctl::CronJob, 0) => {
                let suspend = rng.random_bool(0.3);
                world.trace_line(format!("user suspend {target}: {suspend}"));
                world.edit("user", plural, &target, |o| {
                    o["spec"]["suspend"] = json!(suspend);
                    true
                });
            }
            (Ctl::CronJob, _) => {
                // Only finished Jobs, as a user cleaning up would: deleting the Job of a
                // slot whose lastScheduleTime is not written yet makes any controller
                // (upstream's too) run that slot again.
                let jobs: Vec<String> = world
                    .list("jobs")
                    .iter()
                    .filter(|j| job_finished(j))
                    .map(|j| s(j, &["metadata", "name"]).to_owned())
                    .collect();
                if let Some(j) = pick(rng, &jobs) {
                    world.trace_line(format!("user delete job {j}"));
                    delete(world, "jobs", &j);
                }
            }
        }
    }

    /// The end of faults: dead nodes come back, suspended CronJobs resume, so that every
    /// object can converge.
    pub fn calm(&mut self, world: &mut World, model: &mut NodeModel) {
        self.calm_at = Some(world.wall());
        if self.ctl == Ctl::DeploymentRollback {
            self.rollback_calm(world);
        }
        // Pod failures belong to the fault phase: afterwards pods run to success, so a Job
        // whose pods kept failing waits out at most one more backoff (capped at 6 minutes)
        // instead of failing again and again past the liveness bound.
        model.config.succeed = 1.0;
        for n in model.node_names() {
            model.revive(world, &n);
        }
        while model.node_names().len() < 3 {
            self.add_node(world, model);
        }
        // A broken template is fixed by a new one (a rollback is the same to the
        // controller: a revision that is not the stuck pods').
        for set in world.list("statefulsets") {
            let image = set["spec"]["template"]["spec"]["containers"][0]["image"].as_str();
            if image.is_some_and(|i| i.starts_with("broken:")) {
                self.version += 1;
                let image = format!("img:{}", self.version);
                world.trace_line(format!("user set image of {} to {image}", key(&set)));
                world.edit("user", "statefulsets", &key(&set), |o| {
                    o["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
                    true
                });
            }
        }
        if self.ctl == Ctl::CronJob {
            for cj in world.list("cronjobs") {
                world.edit("user", "cronjobs", &key(&cj), |o| {
                    o["spec"]["suspend"] = json!(false);
                    true
                });
            }
        }
        if self.ctl == Ctl::Job {
            for j in world.list("jobs") {
                world.edit("user", "jobs", &key(&j), |o| {
                    if job_finished(o) {
                        return false;
                    }
                    o["spec"]["suspend"] = json!(false);
                    true
                });
            }
        }
    }

    /// A CronJob's Job created after the faults stopped: the CronJobs keep firing (each
    /// minute or two) and a Job's pods may fail and back off, so such a Job need not have
    /// finished when the others have; the CronJob's liveness is that it scheduled again.
    fn started_after_calm(&self, job: &Value) -> bool {
        self.ctl == Ctl::CronJob
            && self.calm_at.is_some_and(|calm| {
                s(job, &["metadata", "creationTimestamp"])
                    .parse::<jiff::Timestamp>()
                    .is_ok_and(|created| created > calm)
            })
    }

    /// Every CronJob (unsuspended when the faults stopped) has scheduled a Job since.
    fn cronjobs_scheduled_after_calm(&self, world: &World) -> Result<(), String> {
        let Some(calm) = self.calm_at else {
            return Ok(());
        };
        for cj in world.list("cronjobs") {
            let last = s(&cj, &["status", "lastScheduleTime"]).parse::<jiff::Timestamp>();
            if !last.is_ok_and(|t| t > calm) {
                return Err(format!(
                    "cronjob {} has not scheduled since the faults stopped: status {}",
                    key(&cj),
                    cj["status"]
                ));
            }
        }
        Ok(())
    }

    /// `Ok` once every object has converged; else what has not.
    #[allow(clippy::too_many_lines)] // one convergence rule per controller, side by side
    pub fn converged(&self, world: &World, model: &NodeModel) -> Result<(), String> {
        let now_s = world.now_ms() / 1000;
        match self.ctl {
            Ctl::ReplicaSet => replicasets_converged(world),
            Ctl::PodGc => {
                replicasets_converged(world)?;
                let nodes: Vec<String> = model.node_names();
                for p in world.list("pods") {
                    let node = s(&p, &["spec", "nodeName"]);
                    if !node.is_empty() && !nodes.iter().any(|n| n == node) {
                        return Err(format!("pod {} bound to missing node {node}", key(&p)));
                    }
                }
                Ok(())
            }
            Ctl::Deployment | Ctl::DeploymentRollback | Ctl::Sharded2 | Ctl::Sharded3 => {
                for d in world.list("deployments") {
                    let typed: k8s_openapi::api::apps::v1::Deployment =
                        serde_json::from_value((*d).clone()).map_err(|e| e.to_string())?;
                    if let Some(why) = rkcm_testkit::invariants::deployment_unsettled(&typed) {
                        return Err(why);
                    }
                    let uid = s(&d, &["metadata", "uid"]);
                    let live = world
                        .list("replicasets")
                        .into_iter()
                        .filter(|rs| controller_of(rs).is_some_and(|(_, _, u)| u == uid))
                        .flat_map(|rs| owned_pods(world, s(&rs, &["metadata", "uid"])))
                        .filter(|p| !is_terminal(p) && !is_terminating(p))
                        .count();
                    let want = usize::try_from(n(&d, &["spec", "replicas"])).unwrap_or(0);
                    if live != want {
                        return Err(format!(
                            "deployment {}: {live} live pods, want {want}",
                            key(&d)
                        ));
                    }
                }
                replicasets_converged(world)
            }
            Ctl::StatefulSet => {
                for set in world.list("statefulsets") {
                    let want = n(&set, &["spec", "replicas"]);
                    let st = &set["status"];
                    let name = s(&set, &["metadata", "name"]);
                    let ok = n(st, &["observedGeneration"]) == n(&set, &["metadata", "generation"])
                        && n(st, &["readyReplicas"]) == want
                        && n(st, &["replicas"]) == want
                        && n(st, &["updatedReplicas"]) == want
                        && s(st, &["currentRevision"]) == s(st, &["updateRevision"]);
                    if !ok {
                        return Err(format!("statefulset {name}: want {want}, status {st}"));
                    }
                    let pods = owned_pods(world, s(&set, &["metadata", "uid"]));
                    for i in 0..want {
                        let pod = format!("{name}-{i}");
                        if !pods
                            .iter()
                            .any(|p| s(p, &["metadata", "name"]) == pod && is_ready(p))
                        {
                            return Err(format!("statefulset {name}: pod {pod} not ready"));
                        }
                    }
                    if pods.len() != usize::try_from(want).unwrap_or(0) {
                        return Err(format!(
                            "statefulset {name}: {} pods, want {want}",
                            pods.len()
                        ));
                    }
                }
                Ok(())
            }
            Ctl::DaemonSet => {
                let nodes = i64::try_from(model.node_names().len()).unwrap_or(0);
                for ds in world.list("daemonsets") {
                    let st = &ds["status"];
                    let ok = n(st, &["observedGeneration"]) == n(&ds, &["metadata", "generation"])
                        && n(st, &["desiredNumberScheduled"]) == nodes
                        && n(st, &["currentNumberScheduled"]) == nodes
                        && n(st, &["numberReady"]) == nodes
                        && n(st, &["updatedNumberScheduled"]) == nodes
                        && n(st, &["numberMisscheduled"]) == 0;
                    if !ok {
                        return Err(format!(
                            "daemonset {}: {nodes} nodes, status {st}",
                            key(&ds)
                        ));
                    }
                    let live = owned_pods(world, s(&ds, &["metadata", "uid"]))
                        .into_iter()
                        .filter(|p| !is_terminal(p) && !is_terminating(p) && is_ready(p))
                        .count();
                    if i64::try_from(live).unwrap_or(0) != nodes {
                        return Err(format!(
                            "daemonset {}: {live} ready pods on {nodes} nodes",
                            key(&ds)
                        ));
                    }
                }
                Ok(())
            }
            Ctl::Job | Ctl::CronJob | Ctl::TtlAfterFinished => {
                if self.ctl == Ctl::CronJob {
                    self.cronjobs_scheduled_after_calm(world)?;
                }
                for j in world.list("jobs") {
                    let owner_gone = controller_of(&j).is_none() && self.ctl == Ctl::CronJob;
                    if owner_gone || self.started_after_calm(&j) {
                        continue;
                    }
                    if !job_finished(&j) {
                        return Err(format!(
                            "job {} not finished: status {}",
                            key(&j),
                            j["status"]
                        ));
                    }
                    if n(&j, &["status", "active"]) != 0 {
                        return Err(format!("job {} finished with active pods", key(&j)));
                    }
                    if self.ctl == Ctl::TtlAfterFinished
                        && let Some(ttl) = j["spec"]["ttlSecondsAfterFinished"].as_i64()
                    {
                        let done = s(&j, &["status", "completionTime"]);
                        let finished: Option<jiff::Timestamp> = done.parse().ok().or_else(|| {
                            j["status"]["conditions"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .find(|c| c["status"] == "True")
                                .and_then(|c| c["lastTransitionTime"].as_str())
                                .and_then(|t| t.parse().ok())
                        });
                        if let Some(at) = finished {
                            let expire = at.as_second() + ttl;
                            let now = world.wall().as_second();
                            if now > expire + 10 {
                                return Err(format!(
                                    "job {} expired at {expire}, still there",
                                    key(&j)
                                ));
                            }
                        }
                    }
                }
                for p in world.list("pods") {
                    let holds = p["metadata"]["finalizers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|f| f == rkcm_testkit::invariants::JOB_TRACKING_FINALIZER);
                    if holds && (is_terminal(&p) || is_terminating(&p)) {
                        return Err(format!(
                            "pod {} still holds the tracking finalizer",
                            key(&p)
                        ));
                    }
                }
                if self.ctl == Ctl::CronJob {
                    // Every CronJob scheduled its latest slot that is a minute old.
                    for cj in world.list("cronjobs") {
                        let every = if s(&cj, &["metadata", "name"]) == "tick" {
                            60
                        } else {
                            120
                        };
                        let base = world.base.as_second();
                        let now = world.wall().as_second();
                        let slot = (now - 60) / every * every;
                        if slot <= base {
                            continue;
                        }
                        let last: Option<jiff::Timestamp> =
                            s(&cj, &["status", "lastScheduleTime"]).parse().ok();
                        if last.is_none_or(|t| t.as_second() < slot) {
                            return Err(format!(
                                "cronjob {}: last schedule {:?}, slot {slot} at {now_s}s",
                                key(&cj),
                                last
                            ));
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

fn replicasets_converged(world: &World) -> Result<(), String> {
    for rs in world.list("replicasets") {
        let want = n(&rs, &["spec", "replicas"]);
        let pods = owned_pods(world, s(&rs, &["metadata", "uid"]));
        let live: Vec<_> = pods
            .iter()
            .filter(|p| !is_terminal(p) && !is_terminating(p))
            .collect();
        let ready = live.iter().filter(|p| is_ready(p)).count();
        let st = &rs["status"];
        let live_n = i64::try_from(live.len()).unwrap_or(0);
        let ready_n = i64::try_from(ready).unwrap_or(0);
        if live_n != want
            || ready_n != want
            || n(st, &["replicas"]) != want
            || n(st, &["readyReplicas"]) != want
            || n(st, &["availableReplicas"]) != want
            || n(st, &["observedGeneration"]) != n(&rs, &["metadata", "generation"])
        {
            return Err(format!(
                "replicaset {}: want {want}, {live_n} live, {ready_n} ready, status {st}",
                key(&rs)
            ));
        }
    }
    Ok(())
}

/// The rollback scenario's progress deadline (seconds): short against the fault phase.
pub const ROLLBACK_DEADLINE_S: i64 = 20;
/// rkcm's opt-in annotation of the rollback on progress deadline.
pub const ROLLBACK_OPT_IN: &str = "rkcm.io/deployment-rollback-on-progress-deadline";

/// The first container's image of a Deployment's or ReplicaSet's template.
fn image_of(v: &Value) -> &str {
    v["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
}

/// Whether the Deployment has an old ReplicaSet (another image than its own) with available
/// pods: a revision known to work, where rkcm's rollback of a rolling update returns (the
/// newest such; never-Ready images never have available pods). Without one, rkcm leaves a
/// broken rollout as upstream does.
///
/// A rolling update may scale the old ReplicaSets down by `maxUnavailable` (1 here when
/// `maxSurge` is 0, else 0): with that many replicas or fewer, the old pods may all go before
/// rkcm decides, and nothing known to work is left, so the scenario fixes such a Deployment
/// by hand.
fn working_previous(world: &World, d: &Value) -> bool {
    let uid = s(d, &["metadata", "uid"]);
    let current = image_of(d);
    let surge = &d["spec"]["strategy"]["rollingUpdate"]["maxSurge"];
    let max_unavailable = i64::from(*surge == json!(0));
    if n(d, &["spec", "replicas"]) <= max_unavailable {
        return false;
    }
    world
        .list("replicasets")
        .into_iter()
        .filter(|rs| controller_of(rs).is_some_and(|(_, _, u)| u == uid))
        .any(|rs| {
            image_of(&rs) != current
                && !image_of(&rs).starts_with(NEVER_READY_IMAGE)
                && n(&rs, &["status", "availableReplicas"]) > 0
        })
}

fn selector(app: &str) -> Value {
    json!({"matchLabels": {"app": app}})
}

fn replicaset(name: &str, replicas: i64, image: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "minReadySeconds": 0, "selector": selector(name),
            "template": pod_template(name, image, "Always")}})
}

fn bare_pod(name: &str, restart: &str) -> Value {
    let mut p = pod_template(name, "img:1", restart);
    p["metadata"]["name"] = json!(name);
    p
}

fn deployment(name: &str, replicas: i64, surge: Value, unavailable: Value, image: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": selector(name),
            "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
            "revisionHistoryLimit": 3, "progressDeadlineSeconds": 600, "minReadySeconds": 0,
            "template": pod_template(name, image, "Always")}})
}

fn statefulset(name: &str, replicas: i64, policy: &str, image: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": selector(name), "serviceName": name,
            "podManagementPolicy": policy,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "revisionHistoryLimit": 10, "minReadySeconds": 0,
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": pod_template(name, image, "Always")}})
}

fn daemonset(name: &str, image: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"selector": selector(name),
            "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "revisionHistoryLimit": 10, "minReadySeconds": 0,
            "template": pod_template(name, image, "Always")}})
}

fn cronjob(name: &str, schedule: &str, policy: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"schedule": schedule, "concurrencyPolicy": policy, "suspend": false,
            "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"backoffLimit": 2,
                "template": pod_template(name, "img:1", "Never")}}}})
}
