//! Invariants of the workload controllers, checked continuously while faults happen.
//!
//! Two parts:
//! - [`Checker`] (pure): a function of what the watches delivered (every version of every
//!   pod, ReplicaSet, Deployment, Job and Node, in watch order per kind, stamped with the
//!   time it was received) and of a clock ([`Checker::tick`]). It records a [`Violation`]
//!   for each broken invariant ([`Invariant`]). Table-tested with hand-built objects.
//! - [`watch`]: kube watches of a cluster (one namespace, several, or all) feeding a
//!   [`Checker`]; [`watch::InvariantWatcher`] for tests, the `rkcm-check` binary for any
//!   cluster.
//!
//! A watch delivers every change of its kind in order, but watches of different kinds are
//! not ordered with each other: a Job's status may arrive before the pod events it counts,
//! a ReplicaSet's scale-up before its Deployment's. Checks that compare kinds wait
//! [`Config::grace`] for the other kind to catch up before they call something a
//! violation, and scale bounds take the largest value seen within `grace` either side.
//! When a watch has to relist (410 Gone), changes during the gap are lost: the gap is
//! recorded ([`Checker::gaps`]), objects that vanished are dropped without judging, and
//! Jobs stop being compared with their pods (a pod may have come and gone unseen).
//!
//! What is and is not observable without the API server's audit log: a pod deleted without
//! a graceful phase (it went from bound, non-terminal and not terminating straight to
//! deleted, which the API server does only for a grace period of 0) is seen, and so is
//! whether its node existed; WHO deleted it is not (Events do not name the deleter; the
//! audit log's `user.username`/`userAgent` does). A graceful delete that a kubelet (or kwok)
//! finishes with grace 0 is indistinguishable from a force delete of a terminating pod, so
//! force deletes of pods that were already terminating (PodGC's out-of-service and
//! unscheduled-terminating cases) are not judged. PodGC's legal force deletes of running
//! pods are those of orphans (node gone): they pass; any other is reported.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Resource;
use serde::Serialize;

pub mod faults;
pub mod outages;
pub mod rollbacks;
pub mod scenario;
pub mod soak;
pub mod watch;

mod deployments;
mod jobs;
mod objects;
mod pods;

pub use objects::{deployment_unsettled, is_live, max_surge, parse_indexes};
use objects::{key_of, max_within, node_of, phase, terminal};

#[cfg(test)]
mod tests;

/// The Job controller's pod finalizer (`pkg/controller/job/job_controller.go`).
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The CronJob controller's annotation with a Job's scheduled time
/// (`pkg/controller/cronjob/utils.go`).
pub const CRONJOB_SCHEDULED_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// The Job controller's annotation with a pod's completion index.
pub const COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";

/// Each invariant the checker knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub enum Invariant {
    /// A ReplicaSet created a pod while its live pods (not terminal, not terminating) were
    /// already at `spec.replicas`.
    ReplicaSetAboveReplicas,
    /// A Deployment's ReplicaSet was created or scaled up while the `spec.replicas` of its
    /// ReplicaSets add up to more than its `replicas + maxSurge` (the bound upstream's e2e
    /// rolling-update checks use).
    DeploymentAboveSurge,
    /// Two pod objects with one StatefulSet identity (set name and ordinal) existed at once.
    StatefulSetIdentityShared,
    /// A Job's `status.succeeded` or `status.failed` went down.
    JobCountDecreased,
    /// A Job counts more succeeded (failed) pods than distinct pods were seen succeed (end).
    JobCountAboveTerminatedPods,
    /// An Indexed Job's `completedIndexes` is malformed, out of range, shrank, disagrees
    /// with `succeeded`, or names an index no pod succeeded for.
    JobCompletedIndexesWrong,
    /// A pod of a finished Job still holds the `batch.kubernetes.io/job-tracking` finalizer.
    TrackingFinalizerLeft,
    /// Two Jobs for one CronJob scheduled time.
    CronJobSlotTwice,
    /// A pod that was not terminal, on a node that exists, was deleted with grace period 0.
    ForceDeleteOnLiveNode,
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Violation {
    /// When it was first seen (receive time of the change that showed it).
    pub at: Timestamp,
    pub invariant: Invariant,
    /// `namespace/name` of the object the invariant is about.
    pub object: String,
    pub detail: String,
    /// How many times the same invariant broke for the same object.
    pub count: u32,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}: {}",
            self.at, self.invariant, self.object, self.detail
        )?;
        if self.count > 1 {
            write!(f, " ({} times)", self.count)?;
        }
        Ok(())
    }
}

/// The kinds the checker watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Kind {
    Pod,
    ReplicaSet,
    Deployment,
    Job,
    Node,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 5] = [
        Kind::Pod,
        Kind::ReplicaSet,
        Kind::Deployment,
        Kind::Job,
        Kind::Node,
    ];
}

/// One object as a watch delivered it.
#[derive(Debug, Clone)]
pub enum Object {
    Pod(Box<Pod>),
    ReplicaSet(Box<ReplicaSet>),
    Deployment(Box<Deployment>),
    Job(Box<Job>),
    Node(Box<Node>),
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::Pod(_) => Kind::Pod,
            Object::ReplicaSet(_) => Kind::ReplicaSet,
            Object::Deployment(_) => Kind::Deployment,
            Object::Job(_) => Kind::Job,
            Object::Node(_) => Kind::Node,
        }
    }

    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Object::Pod(o) => o.meta(),
            Object::ReplicaSet(o) => o.meta(),
            Object::Deployment(o) => o.meta(),
            Object::Job(o) => o.meta(),
            Object::Node(o) => o.meta(),
        }
    }

    fn uid(&self) -> String {
        self.meta().uid.clone().unwrap_or_default()
    }
}

/// What a watch delivered.
#[derive(Debug, Clone)]
pub enum Observation {
    /// A (re)list of `Kind` (in one namespace, or everywhere) begins.
    ListStart(Kind, Option<String>),
    /// An object of the current (re)list.
    Listed(Object),
    /// The (re)list of `Kind` is complete: objects not listed are gone.
    ListDone(Kind, Option<String>),
    /// A change after the list.
    Applied(Object),
    Deleted(Object),
    /// The watch of `Kind` failed (the API server went away, a 410): its view is stale
    /// until the next [`Observation::ListDone`] of that kind.
    WatchLost(Kind, Option<String>),
}

/// Tuning of the checker.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// How long one kind's watch may lag another's before a cross-kind comparison counts.
    pub grace: SignedDuration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            grace: SignedDuration::from_secs(10),
        }
    }
}

/// A watch that had to relist: changes of `kind` before `at` may be missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    pub at: Timestamp,
    pub kind: Kind,
}

#[derive(Debug, Default)]
struct JobState {
    job: Job,
    /// Every pod of the Job was seen (the Job appeared after the watches listed, and no
    /// pod relist since): counts can be compared with pods.
    exact: bool,
    finished_at: Option<Timestamp>,
    /// The finalizer check fired once already.
    finalizer_reported: bool,
    /// Status versions waiting for the pod watch to catch up: (received, succeeded,
    /// failed, completed indexes).
    pending: Vec<(Timestamp, i32, i32, BTreeSet<i64>)>,
}

#[derive(Debug, Default)]
struct JobPods {
    succeeded: BTreeSet<String>,
    ended: BTreeSet<String>,
    succeeded_indexes: BTreeSet<i64>,
}

/// A cross-kind suspicion, judged once `grace` has passed.
#[derive(Debug)]
enum Suspect {
    ReplicaSet {
        at: Timestamp,
        rs: String,
        key: String,
        live: i64,
        pod: String,
        /// The live pods counted (names), for the report.
        counted: Vec<String>,
    },
    Deployment {
        at: Timestamp,
        deployment: String,
        key: String,
        sum: i64,
    },
    ForceDelete {
        at: Timestamp,
        key: String,
        node: String,
        detail: String,
    },
}

/// The pure invariant checker. Feed it with [`Checker::observe`], call
/// [`Checker::tick`] now and then (and once at the end with a time past the last change +
/// grace), read [`Checker::violations`].
#[derive(Debug, Default)]
pub struct Checker {
    config: Config,
    pods: BTreeMap<String, Pod>,
    replicasets: BTreeMap<String, ReplicaSet>,
    deployments: BTreeMap<String, Deployment>,
    jobs: BTreeMap<String, JobState>,
    nodes: BTreeSet<String>,
    /// A pod's `deletionGracePeriodSeconds` when it was first seen terminating.
    first_grace: BTreeMap<String, i64>,
    /// When a pod was first seen bound to a node.
    bound_at: BTreeMap<String, Timestamp>,
    node_deleted: BTreeMap<String, Timestamp>,
    /// Every `spec.replicas` a ReplicaSet had, with when it was seen.
    rs_replicas: BTreeMap<String, Vec<(Timestamp, i64)>>,
    /// Every `replicas + maxSurge` a Deployment had.
    deploy_bound: BTreeMap<String, Vec<(Timestamp, i64)>>,
    job_pods: BTreeMap<String, JobPods>,
    /// (namespace, CronJob name, scheduled time) → Job UIDs.
    cron_slots: BTreeMap<(String, String, String), BTreeSet<String>>,
    listing: BTreeMap<(Kind, Option<String>), BTreeSet<String>>,
    listed_once: BTreeSet<(Kind, Option<String>)>,
    suspects: Vec<Suspect>,
    violations: Vec<Violation>,
    gaps: Vec<Gap>,
    observed: u64,
    /// Suspicions left unjudged: the watch their bound comes from was down around them.
    unjudged: u64,
    /// Kinds whose watch failed and has not relisted yet: since when.
    lost: BTreeMap<Kind, Timestamp>,
    /// Past outages of a kind's watch: (lost at, relisted at).
    outages: BTreeMap<Kind, Vec<(Timestamp, Timestamp)>>,
}

impl Checker {
    pub fn new(config: Config) -> Self {
        Self {
            config,
            ..Default::default()
        }
    }

    /// Observes a first, empty list of every kind at `at`, each in the namespace `scope`
    /// gives (`None`: cluster-wide), so the watches start from nothing.
    pub fn listed_empty(&mut self, at: Timestamp, scope: impl Fn(Kind) -> Option<String>) {
        for kind in Kind::ALL {
            self.observe(at, Observation::ListStart(kind, scope(kind)));
            self.observe(at, Observation::ListDone(kind, scope(kind)));
        }
    }

    /// Every violation so far, in the order found (one entry per invariant and object).
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Relists of a watch (gaps in the observed history).
    pub fn gaps(&self) -> &[Gap] {
        &self.gaps
    }

    /// How many observations were fed in.
    pub fn observed(&self) -> u64 {
        self.observed
    }

    fn violate(&mut self, at: Timestamp, invariant: Invariant, object: &str, detail: String) {
        if let Some(v) = self
            .violations
            .iter_mut()
            .find(|v| v.invariant == invariant && v.object == object)
        {
            v.count += 1;
            return;
        }
        self.violations.push(Violation {
            at,
            invariant,
            object: object.to_owned(),
            detail,
            count: 1,
        });
    }

    /// Feeds one change received at `at`.
    pub fn observe(&mut self, at: Timestamp, obs: Observation) {
        self.observed += 1;
        match obs {
            Observation::ListStart(kind, ns) => {
                self.listing.insert((kind, ns), BTreeSet::new());
            }
            Observation::Listed(obj) => {
                let id = match &obj {
                    Object::Node(n) => n.metadata.name.clone().unwrap_or_default(),
                    _ => obj.uid(),
                };
                let ns = obj.meta().namespace.clone();
                for scope in [ns, None] {
                    if let Some(set) = self.listing.get_mut(&(obj.kind(), scope)) {
                        set.insert(id.clone());
                    }
                }
                self.apply(at, obj, true);
            }
            Observation::ListDone(kind, ns) => {
                if let Some(since) = self.lost.remove(&kind) {
                    self.outages.entry(kind).or_default().push((since, at));
                }
                self.list_done(at, kind, ns);
            }
            Observation::Applied(obj) => {
                self.resumed(at, obj.kind());
                self.apply(at, obj, false)
            }
            Observation::Deleted(obj) => {
                self.resumed(at, obj.kind());
                self.delete(at, obj)
            }
            Observation::WatchLost(kind, _) => {
                self.lost.entry(kind).or_insert(at);
            }
        }
    }

    /// A watch of `kind` that broke delivers again without a relist (it went on from its
    /// last resourceVersion): its outage ends here. The changes it missed arrive now, stamped
    /// late.
    fn resumed(&mut self, at: Timestamp, kind: Kind) {
        if let Some(since) = self.lost.remove(&kind) {
            self.outages.entry(kind).or_default().push((since, at));
        }
    }

    /// Whether a watch of one of `kinds` was down within `grace` of `at`: a bound it delivers
    /// for that moment is unknown, since a value that came and went while it was down was
    /// never seen (the relist or the resumed watch shows only what came after). The manager's
    /// own watches may well have been back sooner and acted on that value.
    fn blind(&self, kinds: &[Kind], at: Timestamp) -> bool {
        let grace = self.config.grace;
        kinds.iter().any(|kind| {
            self.outages
                .get(kind)
                .into_iter()
                .flatten()
                .any(|(lost, back)| *lost <= at + grace && *back >= at - grace)
                || self.lost.get(kind).is_some_and(|lost| *lost <= at + grace)
        })
    }

    /// Suspicions that were dropped unjudged because a watch their bound comes from was
    /// down around them.
    pub fn unjudged(&self) -> u64 {
        self.unjudged
    }

    /// The start of the window in which a bound is looked up for a suspicion at `at`:
    /// `at - grace`, or earlier after an outage of the checker's watches (the API server went
    /// away): the manager's watches broke at the same moment, and until it relisted, its
    /// view was as old as the outage's start. The checker cannot see when the manager
    /// relisted; it allows three graces after its own relist.
    fn bound_window_start(&self, at: Timestamp) -> Timestamp {
        let grace = self.config.grace;
        let past = self
            .outages
            .values()
            .flatten()
            .filter(|(lost, relisted)| *lost <= at && at <= *relisted + grace * 3)
            .map(|(lost, _)| *lost);
        let ongoing = self.lost.values().copied().filter(|lost| *lost <= at);
        past.chain(ongoing)
            .map(|lost| lost - grace)
            .fold(at - grace, Timestamp::min)
    }

    /// The end of the window in which a bound (from `kind`'s watch) is looked up for a
    /// suspicion at `at`: `at + grace`, or later if `kind`'s watch was down around `at`
    /// (its relist then shows the value it missed). `None` while it is still down: the
    /// suspicion waits.
    fn bound_window_end(&self, kind: Kind, at: Timestamp) -> Option<Timestamp> {
        let grace = self.config.grace;
        if self.lost.contains_key(&kind) {
            return None;
        }
        let end = self
            .outages
            .get(&kind)
            .into_iter()
            .flatten()
            .filter(|(lost, relisted)| *lost <= at + grace && *relisted >= at - grace)
            .map(|(_, relisted)| *relisted)
            .fold(at + grace, Timestamp::max);
        Some(end)
    }

    fn list_done(&mut self, at: Timestamp, kind: Kind, ns: Option<String>) {
        let listed = self.listing.remove(&(kind, ns.clone())).unwrap_or_default();
        let relist = !self.listed_once.insert((kind, ns.clone()));
        if relist {
            self.gaps.push(Gap { at, kind });
        }
        // Objects of this list's scope that the list did not return are gone.
        let keep =
            |uid: &String, m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
                listed.contains(uid) || (ns.is_some() && m.namespace != ns)
            };
        match kind {
            Kind::Pod => {
                self.pods.retain(|uid, p| keep(uid, &p.metadata));
                if relist {
                    for j in self.jobs.values_mut() {
                        j.exact = false;
                        j.pending.clear();
                    }
                }
                let pods: Vec<Pod> = self.pods.values().cloned().collect();
                for p in &pods {
                    self.check_identity(at, p);
                }
            }
            Kind::ReplicaSet => self.replicasets.retain(|uid, o| keep(uid, &o.metadata)),
            Kind::Deployment => self.deployments.retain(|uid, o| keep(uid, &o.metadata)),
            Kind::Job => self.jobs.retain(|uid, o| keep(uid, &o.job.metadata)),
            Kind::Node => {
                let names: BTreeSet<String> = self
                    .nodes
                    .iter()
                    .filter(|n| !listed.contains(*n))
                    .cloned()
                    .collect();
                for n in names {
                    self.nodes.remove(&n);
                    self.node_deleted.insert(n, at);
                }
            }
        }
    }

    fn apply(&mut self, at: Timestamp, obj: Object, listed: bool) {
        match obj {
            Object::Pod(p) => self.apply_pod(at, *p, listed),
            Object::ReplicaSet(rs) => self.apply_rs(at, *rs),
            Object::Deployment(d) => self.apply_deployment(at, *d),
            Object::Job(j) => self.apply_job(at, *j, listed),
            Object::Node(n) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                self.node_deleted.remove(&name);
                self.nodes.insert(name);
            }
        }
    }

    fn delete(&mut self, at: Timestamp, obj: Object) {
        let uid = obj.uid();
        match obj {
            Object::Pod(p) => {
                let before = self.pods.remove(&uid).unwrap_or((*p).clone());
                self.record_job_pod(&p, true);
                let node = node_of(&before);
                // Force deleted: gone without a graceful phase, either at once or through a
                // terminating version whose grace period was already 0 (the API server
                // shows the latter for a delete with grace 0). A kubelet's final delete
                // follows a terminating version with a real grace period.
                let forced = self.first_grace.remove(&uid).is_none_or(|g| g == 0);
                // The API server computes the grace period from the object it read and
                // deletes without a resourceVersion precondition: a delete that read the pod
                // just before the scheduler bound it removes it at once. Not judged.
                let just_bound = self
                    .bound_at
                    .remove(&uid)
                    .is_none_or(|t| at.duration_since(t) < SignedDuration::from_secs(2));
                if !node.is_empty() && !terminal(&before) && forced && !just_bound {
                    let detail = format!(
                        "uid {}, phase {:?}, resourceVersion {}",
                        uid,
                        phase(&before),
                        before
                            .metadata
                            .resource_version
                            .as_deref()
                            .unwrap_or_default()
                    );
                    self.suspects.push(Suspect::ForceDelete {
                        at,
                        key: key_of(&before.metadata),
                        node: node.to_owned(),
                        detail,
                    });
                }
            }
            Object::ReplicaSet(_) => {
                self.replicasets.remove(&uid);
            }
            Object::Deployment(_) => {
                self.deployments.remove(&uid);
            }
            Object::Job(_) => {
                self.jobs.remove(&uid);
            }
            Object::Node(n) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                self.nodes.remove(&name);
                self.node_deleted.insert(name, at);
            }
        }
    }

    // ---- the clock --------------------------------------------------------------------

    /// Judges every suspicion older than `grace` at `now`.
    pub fn tick(&mut self, now: Timestamp) {
        let grace = self.config.grace;
        let ripe = |at: Timestamp| at + grace <= now;

        let suspects = std::mem::take(&mut self.suspects);
        for s in suspects {
            match s {
                Suspect::ReplicaSet {
                    at,
                    rs,
                    key,
                    live,
                    pod,
                    counted,
                } if ripe(at) && self.bound_window_end(Kind::ReplicaSet, at).is_some() => {
                    // The pod watch too: a create it delivered late is stamped late.
                    if self.blind(&[Kind::ReplicaSet, Kind::Pod], at) {
                        self.unjudged += 1;
                        continue;
                    }
                    let end = self
                        .bound_window_end(Kind::ReplicaSet, at)
                        .unwrap_or(at + grace);
                    let start = self.bound_window_start(at);
                    let bound = self
                        .rs_replicas
                        .get(&key)
                        .and_then(|h| max_within(h, start, end));
                    if let Some(bound) = bound
                        && live > bound
                    {
                        self.violate(
                            at,
                            Invariant::ReplicaSetAboveReplicas,
                            &rs,
                            format!(
                                "created {pod}: {live} live pods, replicas at most {bound} \
                                 (counted {counted:?}; last bounds seen {:?}; window {start}..{end}; \
                                 checker watch outages: replica sets {:?}, pods {:?})",
                                self.rs_replicas
                                    .get(&key)
                                    .map(|h| h.iter().rev().take(6).collect::<Vec<_>>()),
                                self.outages.get(&Kind::ReplicaSet),
                                self.outages.get(&Kind::Pod),
                            ),
                        );
                    }
                }
                Suspect::Deployment {
                    at,
                    deployment,
                    key,
                    sum,
                } if ripe(at) && self.bound_window_end(Kind::Deployment, at).is_some() => {
                    if self.blind(&[Kind::Deployment, Kind::ReplicaSet], at) {
                        self.unjudged += 1;
                        continue;
                    }
                    let end = self
                        .bound_window_end(Kind::Deployment, at)
                        .unwrap_or(at + grace);
                    let start = self.bound_window_start(at);
                    let bound = self
                        .deploy_bound
                        .get(&key)
                        .and_then(|h| max_within(h, start, end));
                    if let Some(bound) = bound
                        && sum > bound
                    {
                        self.violate(
                                at,
                                Invariant::DeploymentAboveSurge,
                                &deployment,
                                format!("ReplicaSets' replicas add up to {sum}, replicas + maxSurge at most {bound}"),
                            );
                    }
                }
                Suspect::ForceDelete {
                    at,
                    key,
                    node,
                    detail,
                } if ripe(at) => {
                    let gone = !self.nodes.contains(&node)
                        || self
                            .node_deleted
                            .get(&node)
                            .is_some_and(|t| *t <= at + grace);
                    if !gone {
                        self.violate(
                            at,
                            Invariant::ForceDeleteOnLiveNode,
                            &key,
                            format!(
                                "deleted with grace 0 while on node {node}, which exists, and not terminal ({detail})"
                            ),
                        );
                    }
                }
                other => self.suspects.push(other),
            }
        }

        self.judge_jobs(now);
    }

    fn listing_pods(&self) -> bool {
        self.listing.keys().any(|(k, _)| *k == Kind::Pod)
    }

    /// Whether suspicions or Job statuses still wait for `grace` to pass.
    pub fn pending(&self) -> bool {
        !self.suspects.is_empty() || self.jobs.values().any(|j| !j.pending.is_empty())
    }
}
