//! Invariants checked after every step: the fault suite's set ([`Checker`], fed every
//! committed change in commit order, so it never waits for a lagging watch) and those only
//! the simulation can see, because it knows who deleted what and which containers still
//! run on a dead node:
//! - `ForceDeleteOutsidePodGcRules`: a delete with grace period 0 by anyone but the kubelet
//!   must come from PodGC, for a terminal pod, a pod whose node is gone, an unscheduled
//!   terminating pod, or a terminating pod on a NotReady node with the out-of-service taint
//!   (`pkg/controller/podgc/gc_controller.go`), judged on the pod the server deleted (its
//!   UID), which a delete by name alone need not be the one the deleter saw.
//! - `FailedOutsidePodGcRules`: PodGC marked `Failed` a pod that, as it was just before the
//!   write, was not garbage by those rules.
//! - `StatefulSetIdentityRunningTwice`: two pods of one StatefulSet identity with running
//!   containers at once (one may be a container left on a dead node after its pod object
//!   was force-deleted).
//! - `StatefulSetRecoveryUnsafe`: the StatefulSet controller's stuck-rollout recovery (its
//!   only deletes with a resourceVersion precondition) deleted a pod that was Ready, a pod
//!   of a `Parallel` set, or a pod while another pod of the same set it had recovered still
//!   existed (two at once).
//! - `DaemonSetTwoLivePodsOnNode`: two live pods of one DaemonSet on one node while its
//!   `maxSurge` is 0, a pod counting as live while it is neither terminal nor terminating or
//!   while its containers still run (a terminating pod's, or a cut-off node's after its pod
//!   object went): with `maxSurge` 0 a new daemon pod must not start beside them.
//! - `DeploymentScaleDownBelowMinAvailable`: a scale-down of the Deployment controller took
//!   the available pods below `replicas - maxUnavailable` ([`availability`]).
//! - `JobDeletedBeforeTtl`: the TTL controller deleted a Job before its TTL passed, judged
//!   on the Job the server deleted ([`ttl`]).
//! - `DeploymentRollbackNotAsked`, `DeploymentRollbackLoop`: rkcm's opt-in rollback on
//!   progress deadline changed the template of a Deployment not opted in, paused or not past
//!   its deadline, or twice with no rollout by a person between
//!   ([`rkcm_testkit::invariants::rollbacks`], judged on each template write with its author).
//! - `DeploymentProgressAboutAnotherReplicaSet`: the Deployment controller recorded a new
//!   ReplicaSet's revision but kept a `Progressing` condition `NewReplicaSetAvailable` about
//!   another ReplicaSet (a previous rollout's, which never times out).
//! - `ShardWriteOutsideLeaseTerm`, `ShardLeaseTermsOverlap` (sharded scenarios): a manager
//!   wrote for a namespace outside its lease term on the namespace's range, or took a range
//!   while another's term ran, judged on the Lease records as the server stored them
//!   ([`shards`]; PodGC's writes may also fall in its term on the global Lease).
//! - `WriteRetryStorm`: one controller retried the same failing write more than
//!   [`STORM`] times within a virtual second (a failed sync backs off: 5 ms doubling, so
//!   about 8 tries in the first second, client-go's `ItemExponentialFailureRateLimiter`).

mod availability;
pub mod shards;
mod ttl;

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use rkcm_testkit::invariants::rollbacks::{Rollbacks, Writer};
use rkcm_testkit::invariants::{Checker, Config, Object, Observation};
use rkcm_testkit::sim::nodes::NodeModel;
use rkcm_testkit::sim::server::{Change, World};
use serde_json::Value;

use crate::scenario::{controller_of, is_terminal, is_terminating, s};

/// Whether PodGC may take a pod (mark it failed and force-delete it) by its rules, judged on
/// the pod given and the nodes as they are now.
struct Verdict {
    garbage: bool,
    /// What the verdict rests on, for the report.
    detail: String,
}

/// PodGC's rules: a terminal pod, a pod whose node is gone, an unscheduled terminating pod,
/// or a terminating pod on a NotReady node with the out-of-service taint
/// (`pkg/controller/podgc/gc_controller.go`). PodGC reads the node from its cache, as
/// upstream does, so a node that was out of service within the last [`NODE_LAG_MS`] counts as
/// out of service (`recent`: when each node last was).
fn podgc_rules(world: &World, recent: &BTreeMap<String, u64>, pod: &Value) -> Verdict {
    let node = s(pod, &["spec", "nodeName"]);
    let node_obj = (!node.is_empty())
        .then(|| world.get("nodes", node))
        .flatten();
    let out_of_service = node_obj.as_ref().is_some_and(|n| is_out_of_service(n))
        || recent
            .get(node)
            .is_some_and(|at| *at + NODE_LAG_MS >= world.now_ms());
    let garbage = is_terminal(pod)
        || (!node.is_empty() && node_obj.is_none())
        || (is_terminating(pod) && (node.is_empty() || out_of_service));
    Verdict {
        garbage,
        detail: format!(
            "phase {:?}, node {node:?} exists: {}, out of service: {out_of_service}, terminating: {}",
            s(pod, &["status", "phase"]),
            node_obj.is_some(),
            is_terminating(pod)
        ),
    }
}

/// How far behind the API a controller's node cache may be: more than the fault model's
/// longest watch delay (10 s).
const NODE_LAG_MS: u64 = 15_000;

/// A NotReady node with the out-of-service taint.
fn is_out_of_service(n: &Value) -> bool {
    let tainted = n["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == "node.kubernetes.io/out-of-service");
    let ready = n["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    tainted && !ready
}

/// One broken invariant, as the report prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub at_ms: u64,
    pub invariant: String,
    pub object: String,
    pub detail: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}.{:03}s {} {}: {}",
            self.at_ms / 1000,
            self.at_ms % 1000,
            self.invariant,
            self.object,
            self.detail
        )
    }
}

/// Failed tries of one write within one virtual second that count as a storm.
pub const STORM: usize = 40;

pub struct Checks {
    failed_done: usize,
    recent_failures: BTreeMap<String, std::collections::VecDeque<u64>>,
    checker: Checker,
    base: Timestamp,
    sim: Vec<Broken>,
    seen: BTreeSet<(String, String)>,
    deletions_done: usize,
    /// When each node was last out of service (NotReady, tainted), in commit order.
    out_of_service_at: BTreeMap<String, u64>,
    availability: availability::Availability,
    /// Per StatefulSet, the UIDs of the pods its recovery deleted.
    recovered: BTreeMap<String, Vec<String>>,
    rollbacks: Rollbacks,
    /// Sharded scenarios: the lease terms of the ring's ranges ([`shards`]).
    shard_terms: Option<shards::Terms>,
}

fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Option<Box<T>> {
    serde_json::from_value(v.clone()).ok().map(Box::new)
}

fn object(resource: &str, v: &Value) -> Option<Object> {
    Some(match resource {
        "pods" => Object::Pod(typed::<Pod>(v)?),
        "replicasets" => Object::ReplicaSet(typed::<ReplicaSet>(v)?),
        "deployments" => Object::Deployment(typed::<Deployment>(v)?),
        "jobs" => Object::Job(typed::<Job>(v)?),
        "nodes" => Object::Node(typed::<Node>(v)?),
        _ => return None,
    })
}

impl Checks {
    pub fn new(base: Timestamp) -> Self {
        let mut checker = Checker::new(Config {
            grace: jiff::SignedDuration::from_secs(15),
        });
        checker.listed_empty(base, |_| None);
        Self {
            checker,
            base,
            sim: Vec::new(),
            seen: BTreeSet::new(),
            deletions_done: 0,
            out_of_service_at: BTreeMap::new(),
            failed_done: 0,
            recent_failures: BTreeMap::new(),
            availability: availability::Availability::default(),
            recovered: BTreeMap::new(),
            rollbacks: Rollbacks::default(),
            shard_terms: None,
        }
    }

    /// Also judges every manager write against the lease terms of a sharded ring.
    pub fn with_shard_terms(mut self, terms: shards::Terms) -> Self {
        self.shard_terms = Some(terms);
        self
    }

    fn at(&self, ms: u64) -> Timestamp {
        self.base
            .checked_add(jiff::SignedDuration::from_millis(
                i64::try_from(ms).unwrap_or(i64::MAX),
            ))
            .unwrap_or(self.base)
    }

    fn report(&mut self, at_ms: u64, invariant: &str, object: String, detail: String) {
        if self.seen.insert((invariant.to_owned(), object.clone())) {
            self.sim.push(Broken {
                at_ms,
                invariant: invariant.to_owned(),
                object,
                detail,
            });
        }
    }

    /// Feeds the changes committed since the last step, then checks the state.
    pub fn step(&mut self, world: &World, model: &NodeModel, changes: &[Change]) {
        for c in changes {
            if c.resource == "nodes"
                && (is_out_of_service(&c.obj) || c.prev.as_deref().is_some_and(is_out_of_service))
            {
                self.out_of_service_at.insert(c.key.clone(), c.at_ms);
            }
            let Some(obj) = object(c.resource, &c.obj) else {
                continue;
            };
            let obs = if c.kind == "DELETED" {
                Observation::Deleted(obj)
            } else {
                Observation::Applied(obj)
            };
            self.checker.observe(self.at(c.at_ms), obs);
        }
        let now = world.now_ms();
        self.checker.tick(self.at(now));
        self.podgc_failed(world, changes);
        self.force_deletes(world);
        self.identities(world, model, now);
        self.daemons(world, model, now);
        self.storms(world);
        for (at, rs, detail) in self.availability.step(world, changes) {
            self.report(at, "DeploymentScaleDownBelowMinAvailable", rs, detail);
        }
        self.rollbacks(changes);
        self.progressing_conditions(world, changes);
        let findings = self
            .shard_terms
            .as_mut()
            .map(|t| t.step(changes))
            .unwrap_or_default();
        for f in findings {
            self.report(f.at_ms, f.invariant, f.object, f.detail);
        }
    }

    /// Every template write of a Deployment, with its author, to the rollback check.
    fn rollbacks(&mut self, changes: &[Change]) {
        for c in changes {
            if c.resource != "deployments" || c.kind != "MODIFIED" {
                continue;
            }
            let (Some(prev), Some(new)) = (
                c.prev.as_deref().and_then(typed::<Deployment>),
                typed::<Deployment>(&c.obj),
            ) else {
                continue;
            };
            let writer = if c.agent == "deployment-controller" {
                Writer::DeploymentController
            } else {
                Writer::Other
            };
            if let Some((invariant, detail)) = self.rollbacks.observe(writer, &prev, &new) {
                self.report(c.at_ms, invariant, c.key.clone(), detail);
            }
        }
    }

    /// `DeploymentProgressAboutAnotherReplicaSet`: a Deployment status written by its
    /// controller that records the revision of one ReplicaSet while its `Progressing`
    /// condition says `NewReplicaSetAvailable` about another: the previous rollout's
    /// condition kept over a new rollout, which never times out (upstream's Deployment
    /// controller does this when the status write of `NewReplicaSetCreated` is lost). The
    /// ReplicaSet named is judged as the server holds it: its revision annotation must be the
    /// Deployment's.
    fn progressing_conditions(&mut self, world: &World, changes: &[Change]) {
        const REVISION: &str = "deployment.kubernetes.io/revision";
        for c in changes {
            if c.resource != "deployments"
                || c.kind != "MODIFIED"
                || c.agent != "deployment-controller"
            {
                continue;
            }
            let d = &c.obj;
            let Some(cond) = d["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Progressing")
            else {
                continue;
            };
            if cond["reason"] != "NewReplicaSetAvailable" {
                continue;
            }
            let message = cond["message"].as_str().unwrap_or_default();
            // `ReplicaSet "NAME" has successfully progressed.`
            let Some(named) = message
                .strip_prefix("ReplicaSet \"")
                .and_then(|m| m.split('"').next())
            else {
                continue;
            };
            let revision = s(d, &["metadata", "annotations", REVISION]);
            let ns = s(d, &["metadata", "namespace"]);
            let Some(rs) = world.get("replicasets", &format!("{ns}/{named}")) else {
                continue;
            };
            let rs_revision = s(&rs, &["metadata", "annotations", REVISION]);
            if !revision.is_empty() && rs_revision != revision {
                self.report(
                    c.at_ms,
                    "DeploymentProgressAboutAnotherReplicaSet",
                    c.key.clone(),
                    format!(
                        "revision {revision} recorded with NewReplicaSetAvailable about {named} (revision {rs_revision})"
                    ),
                );
            }
        }
    }

    fn storms(&mut self, world: &World) {
        let new: Vec<(u64, String)> = world.failed_writes[self.failed_done..].to_vec();
        self.failed_done = world.failed_writes.len();
        for (at, what) in new {
            let times = self.recent_failures.entry(what.clone()).or_default();
            times.push_back(at);
            while times.front().is_some_and(|t| *t + 1000 < at) {
                times.pop_front();
            }
            if times.len() > STORM {
                self.report(
                    at,
                    "WriteRetryStorm",
                    what,
                    format!("failed more than {STORM} times within one second"),
                );
            }
        }
    }

    fn force_deletes(&mut self, world: &World) {
        let new: Vec<_> = world.deletions[self.deletions_done..].to_vec();
        self.deletions_done = world.deletions.len();
        for d in new {
            if d.resource == "jobs" && d.agent == "ttl-after-finished-controller" {
                if let Some(why) = ttl::early(&d.obj, self.at(d.at_ms)) {
                    self.report(d.at_ms, "JobDeletedBeforeTtl", d.key.clone(), why);
                }
                continue;
            }
            if d.resource == "pods" && d.rv_precondition && d.agent == "statefulset-controller" {
                self.recovery(world, &d);
            }
            if d.resource != "pods" || d.grace != Some(0) || d.epoch == 0 {
                continue;
            }
            // The object the server deleted, not the one the deleter meant: a delete by name
            // can reach a pod re-created under that name.
            let pod = &d.obj;
            let verdict = podgc_rules(world, &self.out_of_service_at, pod);
            if d.agent != "pod-garbage-collector" || !verdict.garbage {
                self.report(
                    d.at_ms,
                    "ForceDeleteOutsidePodGcRules",
                    d.key.clone(),
                    format!(
                        "{} deleted uid {} with grace 0 (uid precondition: {}): {}",
                        d.agent,
                        s(pod, &["metadata", "uid"]),
                        d.uid_precondition,
                        verdict.detail
                    ),
                );
            }
        }
    }

    /// A delete of the StatefulSet controller's stuck-rollout recovery: never a Ready pod,
    /// never a `Parallel` set's, never while a pod of the set it recovered before is still
    /// there (terminating).
    fn recovery(&mut self, world: &World, d: &rkcm_testkit::sim::server::Deletion) {
        let pod = &d.obj;
        let uid = s(pod, &["metadata", "uid"]).to_owned();
        let Some((_, set, _)) = controller_of(pod) else {
            return;
        };
        let set_key = format!("{}/{set}", s(pod, &["metadata", "namespace"]));
        let mut wrong = Vec::new();
        if crate::scenario::is_ready(pod) {
            wrong.push("the pod was Ready".to_owned());
        }
        let parallel = world
            .get("statefulsets", &set_key)
            .is_some_and(|o| s(&o, &["spec", "podManagementPolicy"]) == "Parallel");
        if parallel {
            wrong.push("the set is Parallel".to_owned());
        }
        let live: BTreeSet<String> = world
            .list("pods")
            .iter()
            .map(|p| s(p, &["metadata", "uid"]).to_owned())
            .collect();
        let earlier = self.recovered.entry(set_key.clone()).or_default();
        earlier.retain(|u| *u != uid && live.contains(u));
        if !earlier.is_empty() {
            wrong.push(format!(
                "pods {earlier:?} it recovered before are still there"
            ));
        }
        earlier.push(uid.clone());
        if !wrong.is_empty() {
            self.report(
                d.at_ms,
                "StatefulSetRecoveryUnsafe",
                d.key.clone(),
                format!("recovery deleted uid {uid}: {}", wrong.join("; ")),
            );
        }
    }

    /// PodGC marks a pod `Failed` only on its way to force-deleting it: the pod, as it was
    /// just before the write (the object written, not the one PodGC saw in its cache), must
    /// be garbage by PodGC's rules.
    fn podgc_failed(&mut self, world: &World, changes: &[Change]) {
        for c in changes {
            if c.resource != "pods" || c.kind != "MODIFIED" || c.agent != "pod-garbage-collector" {
                continue;
            }
            let Some(prev) = &c.prev else {
                continue;
            };
            if is_terminal(prev) || s(&c.obj, &["status", "phase"]) != "Failed" {
                continue;
            }
            let verdict = podgc_rules(world, &self.out_of_service_at, prev);
            if !verdict.garbage {
                self.report(
                    c.at_ms,
                    "FailedOutsidePodGcRules",
                    c.key.clone(),
                    format!(
                        "pod-garbage-collector marked uid {} Failed: {}",
                        s(prev, &["metadata", "uid"]),
                        verdict.detail
                    ),
                );
            }
        }
    }

    fn identities(&mut self, world: &World, model: &NodeModel, now: u64) {
        let running: BTreeMap<String, String> = model.running().into_iter().collect();
        let mut by_identity: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut note = |pod: &Value, uid: &str| {
            if controller_of(pod).is_some_and(|(k, _, _)| k == "StatefulSet") {
                let id = format!(
                    "{}/{}",
                    s(pod, &["metadata", "namespace"]),
                    s(pod, &["metadata", "name"])
                );
                by_identity.entry(id).or_default().push(uid.to_owned());
            }
        };
        for pod in world.list("pods") {
            let uid = s(&pod, &["metadata", "uid"]);
            if running.contains_key(uid) {
                note(&pod, uid);
            }
        }
        for (_, ghost) in model.ghosts() {
            note(&ghost.pod, &ghost.uid);
        }
        for (id, uids) in by_identity {
            if uids.len() > 1 {
                self.report(
                    now,
                    "StatefulSetIdentityRunningTwice",
                    id,
                    format!("containers of pods {uids:?} run at once"),
                );
            }
        }
    }

    /// Two pods of one DaemonSet whose maxSurge is 0 live on one node: each is live while it
    /// is neither terminal nor terminating, or while its containers still run (a terminating
    /// pod, or a pod object gone from a cut-off node), as [`live_daemon_pods`] counts.
    fn daemons(&mut self, world: &World, model: &NodeModel, now: u64) {
        for ((ds, node), pods) in live_daemon_pods(world, model) {
            let surge = world
                .get("daemonsets", &format!("{}/{ds}", crate::scenario::NS))
                .map(|d| d["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"].clone());
            let no_surge = surge.is_none_or(|v| v.is_null() || v == 0 || v == "0%");
            if pods.len() > 1 && no_surge {
                self.report(
                    now,
                    "DaemonSetTwoLivePodsOnNode",
                    format!("{ds} on {node}"),
                    format!("live pods {pods:?}"),
                );
            }
        }
    }

    /// Faults stopped `SETTLE` ago and an object has still not converged.
    pub fn liveness(&mut self, now: u64, why: String) {
        self.report(now, "NotConvergedAfterFaults", "-".into(), why);
    }

    /// Every broken invariant so far (the fault suite's, then the simulation's).
    pub fn broken(&self) -> Vec<Broken> {
        let mut out: Vec<Broken> = self
            .checker
            .violations()
            .iter()
            .map(|v| Broken {
                at_ms: u64::try_from(v.at.duration_since(self.base).as_millis()).unwrap_or(0),
                invariant: v.invariant.to_string(),
                object: v.object.clone(),
                detail: v.detail.clone(),
            })
            .collect();
        out.extend(self.sim.iter().cloned());
        out
    }
}

/// The live pods of each DaemonSet per node, `(daemonset, node)` to pod names: pods bound to
/// the node that are neither terminal nor terminating, and every pod whose containers still
/// run there (terminating, or its object gone while the node was cut off; as `name (uid)`).
fn live_daemon_pods(world: &World, model: &NodeModel) -> BTreeMap<(String, String), Vec<String>> {
    let running: BTreeMap<String, String> = model.running().into_iter().collect();
    let mut live: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut note = |pod: &Value, uid: &str, node: &str| {
        if let Some((kind, name, _)) = controller_of(pod)
            && kind == "DaemonSet"
            && !node.is_empty()
        {
            let pod = format!("{} ({uid})", s(pod, &["metadata", "name"]));
            live.entry((name, node.to_owned())).or_default().push(pod);
        }
    };
    for pod in world.list("pods") {
        let uid = s(&pod, &["metadata", "uid"]);
        let runs = running.get(uid);
        if runs.is_some() || !(is_terminal(&pod) || is_terminating(&pod)) {
            let node = runs.map_or(s(&pod, &["spec", "nodeName"]), String::as_str);
            note(&pod, uid, node);
        }
    }
    for (node, ghost) in model.ghosts() {
        note(&ghost.pod, &ghost.uid, node);
    }
    live
}
