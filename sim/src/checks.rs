//! Invariants checked after every step: the fault suite's set ([`Checker`], fed every
//! committed change in commit order, so it never waits for a lagging watch) and those only
//! the simulation can see, because it knows who deleted what and which containers still
//! run on a dead node:
//! - `ForceDeleteOutsidePodGcRules`: a delete with grace period 0 by anyone but the kubelet
//!   must come from PodGC, for a terminal pod, a pod whose node is gone, an unscheduled
//!   terminating pod, or a terminating pod on a NotReady node with the out-of-service taint
//!   (`pkg/controller/podgc/gc_controller.go`).
//! - `StatefulSetIdentityRunningTwice`: two pods of one StatefulSet identity with running
//!   containers at once (one may be a container left on a dead node after its pod object
//!   was force-deleted).
//! - `DaemonSetTwoLivePodsOnNode`: two live pods of one DaemonSet on one node while its
//!   `maxSurge` is 0.
//! - `WriteRetryStorm`: one controller retried the same failing write more than
//!   [`STORM`] times within a virtual second (a failed sync backs off: 5 ms doubling, so
//!   about 8 tries in the first second, client-go's `ItemExponentialFailureRateLimiter`).

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use rkcm_testkit::invariants::{Checker, Config, Object, Observation};
use rkcm_testkit::sim::nodes::NodeModel;
use rkcm_testkit::sim::server::{Change, World};
use serde_json::Value;

use crate::scenario::{controller_of, is_terminal, is_terminating, s};

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
            failed_done: 0,
            recent_failures: BTreeMap::new(),
        }
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
        self.force_deletes(world);
        self.identities(world, model, now);
        self.daemons(world, now);
        self.storms(world);
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
            if d.resource != "pods" || d.grace != Some(0) || d.epoch == 0 {
                continue;
            }
            let pod = &d.obj;
            let node = s(pod, &["spec", "nodeName"]);
            let node_obj = (!node.is_empty())
                .then(|| world.get("nodes", node))
                .flatten();
            let out_of_service = node_obj.as_ref().is_some_and(|n| {
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
            });
            let allowed = is_terminal(pod)
                || (!node.is_empty() && node_obj.is_none())
                || (is_terminating(pod) && (node.is_empty() || out_of_service));
            if d.agent != "pod-garbage-collector" || !allowed {
                self.report(
                    d.at_ms,
                    "ForceDeleteOutsidePodGcRules",
                    d.key.clone(),
                    format!(
                        "{} deleted with grace 0 (uid precondition: {}): phase {:?}, node {node:?} exists: {}, terminating: {}",
                        d.agent,
                        d.uid_precondition,
                        s(pod, &["status", "phase"]),
                        node_obj.is_some(),
                        is_terminating(pod)
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

    fn daemons(&mut self, world: &World, now: u64) {
        let mut live: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for pod in world.list("pods") {
            let Some((kind, name, _)) = controller_of(&pod) else {
                continue;
            };
            let node = s(&pod, &["spec", "nodeName"]);
            if kind != "DaemonSet" || node.is_empty() || is_terminal(&pod) || is_terminating(&pod) {
                continue;
            }
            live.entry((name, node.to_owned()))
                .or_default()
                .push(s(&pod, &["metadata", "name"]).to_owned());
        }
        for ((ds, node), pods) in live {
            if pods.len() > 1 {
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
