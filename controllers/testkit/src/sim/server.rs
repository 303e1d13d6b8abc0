//! The state of the simulated API server and its verbs: objects with resourceVersions,
//! generation, UID and deletion semantics, optimistic concurrency, the event log that serves
//! watches (with per-watch delivery delay, bookmarks and 410 after compaction), and the
//! faults a seed injects into requests.
//!
//! Semantics follow k8s.io/apiserver `pkg/registry/generic/registry/store.go` (create, update,
//! graceful delete, finalizers, preconditions), `pkg/registry/core/pod/strategy.go` (a pod that
//! is unbound or terminal is deleted at once) and the watch cache (`pkg/storage/cacher`: list
//! with `resourceVersion=0` may be served from a lagging cache; a watch from a compacted
//! version answers 410 Gone).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::patch::{self, PatchKind};
use super::select::Selector;
use crate::fake_api::status;

/// How one resource behaves.
#[derive(Debug, Clone, Copy)]
pub struct ResourceInfo {
    pub plural: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Has a status subresource: updates of the object keep the stored status, status
    /// updates keep everything else.
    pub status: bool,
    /// `metadata.generation` counts spec changes.
    pub generation: bool,
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

const fn info(
    plural: &'static str,
    group: &'static str,
    kind: &'static str,
    namespaced: bool,
    status: bool,
    generation: bool,
) -> ResourceInfo {
    ResourceInfo {
        plural,
        group,
        version: "v1",
        kind,
        namespaced,
        status,
        generation,
    }
}

/// Every resource the simulated server serves.
pub const RESOURCES: &[ResourceInfo] = &[
    info("pods", "", "Pod", true, true, false),
    info("nodes", "", "Node", false, true, false),
    info("events", "", "Event", true, false, false),
    info(
        "persistentvolumeclaims",
        "",
        "PersistentVolumeClaim",
        true,
        true,
        false,
    ),
    info(
        "replicationcontrollers",
        "",
        "ReplicationController",
        true,
        true,
        true,
    ),
    info("replicasets", "apps", "ReplicaSet", true, true, true),
    info("deployments", "apps", "Deployment", true, true, true),
    info("statefulsets", "apps", "StatefulSet", true, true, true),
    info("daemonsets", "apps", "DaemonSet", true, true, true),
    info(
        "controllerrevisions",
        "apps",
        "ControllerRevision",
        true,
        false,
        false,
    ),
    info("jobs", "batch", "Job", true, true, true),
    info("cronjobs", "batch", "CronJob", true, true, true),
];

/// The resource with this plural name.
pub fn resource(plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES.iter().find(|r| r.plural == plural)
}

/// `namespace/name` (`name` for cluster-scoped objects).
pub fn key_of(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_owned()
    } else {
        format!("{ns}/{name}")
    }
}

/// Who sends a request: a manager incarnation (`epoch` > 0, fenced when it crashes) or the
/// simulation itself (`epoch` 0: workload, kubelets, node lifecycle), and its user agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub epoch: u64,
    pub agent: String,
}

impl Caller {
    pub fn sim(agent: &str) -> Self {
        Self {
            epoch: 0,
            agent: agent.to_owned(),
        }
    }
}

/// The faults a seed injects; the driver changes them between phases.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Delivery delay of each watch event, in milliseconds (uniform in the range).
    pub watch_delay_ms: (u64, u64),
    /// Probability that a list with `resourceVersion=0` is served from an older version (a
    /// lagging watch cache), at most `stale_window` back.
    pub stale_list: f64,
    pub stale_window: Duration,
    /// Probability that an update or patch of a manager meets a concurrent write first.
    pub conflict: f64,
    /// Probability that the manager crashes at one of its writes, before or after the write
    /// lands (the write's answer is lost either way).
    pub crash_on_write: f64,
    /// How many crashes may still be injected.
    pub crash_budget: u32,
    /// Probability that a manager's pod create is refused by admission (403, quota).
    pub reject_create: f64,
    /// Probability that a manager's write fails with 500 without landing, or with 504 after
    /// landing (the client cannot tell whether it happened).
    pub server_error: f64,
    /// Whether `server_error` also answers creates with 504 after they landed. Off in the
    /// seed runs: the ReplicaSet controller counts such a create as failed (as upstream's
    /// `manageReplicas` does; upstream's Job and DaemonSet controllers do not) and may create
    /// one pod too many until its cache shows the first.
    pub timeout_creates: bool,
}

/// One committed change, as watches and the invariant checker see it.
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub at_ms: u64,
    /// `ADDED`, `MODIFIED`, `DELETED`.
    pub kind: &'static str,
    pub resource: &'static str,
    pub key: String,
    pub obj: Arc<Value>,
    /// The object before the change (`None` for `ADDED`).
    pub prev: Option<Arc<Value>>,
    pub agent: String,
}

/// One delete, with what the audit log would tell: who, which object (as it was) and how.
#[derive(Debug, Clone)]
pub struct Deletion {
    pub at_ms: u64,
    pub agent: String,
    pub epoch: u64,
    pub resource: &'static str,
    pub key: String,
    pub obj: Arc<Value>,
    /// The grace period asked for (`None`: the object's own).
    pub grace: Option<i64>,
    pub uid_precondition: bool,
}

/// What a watch stream carries: an encoded event, delivered at `at`.
pub struct Delivery {
    pub(super) at: tokio::time::Instant,
    pub(super) line: Bytes,
}

struct Watch {
    epoch: u64,
    resource: &'static str,
    namespace: Option<String>,
    labels: Selector,
    fields: Selector,
    bookmarks: bool,
    tx: mpsc::UnboundedSender<Delivery>,
    last_at: tokio::time::Instant,
}

/// The answer to one request.
pub enum Reply {
    Json(u16, Value),
    Watch(mpsc::UnboundedReceiver<Delivery>),
    /// The connection failed (a dead manager, a crash at this request).
    Fail(String),
}

/// How many events per resource the server keeps for watches (older: 410 Gone).
const HISTORY: usize = 4000;

/// The simulated API server's state.
pub struct World {
    pub rv: u64,
    objects: BTreeMap<(&'static str, String), Arc<Value>>,
    log: BTreeMap<&'static str, VecDeque<Change>>,
    /// Per resource: watches from a version at or below this answer 410.
    compacted: BTreeMap<&'static str, u64>,
    watches: Vec<Watch>,
    pub rng: StdRng,
    pub faults: Faults,
    dead: BTreeSet<u64>,
    /// Changes not yet taken by the driver ([`World::drain_changes`]).
    pending: Vec<Change>,
    pub deletions: Vec<Deletion>,
    /// Writes of managers that failed (4xx, 5xx): when, and `agent verb resource key`.
    pub failed_writes: Vec<(u64, String)>,
    /// One line per write, for the step-by-step trace.
    pub trace: Vec<String>,
    pub start: tokio::time::Instant,
    pub base: Timestamp,
    uids: u64,
    pub requests: u64,
    pub crashes: u32,
    /// UIDs each manager epoch was sent (in a list, a watch event, a get or a write answer).
    pub seen: BTreeMap<u64, BTreeSet<String>>,
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or_default()
}

fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// 409 Conflict as the registry answers a stale resourceVersion.
fn conflict(r: &ResourceInfo, name: &str) -> Reply {
    Reply::Json(
        409,
        status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                r.plural
            ),
        ),
    )
}

fn not_found(r: &ResourceInfo, name: &str) -> Reply {
    Reply::Json(
        404,
        status(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", r.plural),
        ),
    )
}

impl World {
    pub fn new(seed: u64, base: Timestamp) -> Self {
        Self {
            rv: 1000,
            objects: BTreeMap::new(),
            log: BTreeMap::new(),
            compacted: BTreeMap::new(),
            watches: Vec::new(),
            rng: StdRng::seed_from_u64(seed ^ 0x05ee_da91),
            faults: Faults::default(),
            dead: BTreeSet::new(),
            pending: Vec::new(),
            deletions: Vec::new(),
            failed_writes: Vec::new(),
            trace: Vec::new(),
            start: tokio::time::Instant::now(),
            base,
            uids: 0,
            requests: 0,
            crashes: 0,
            seen: BTreeMap::new(),
        }
    }

    /// Virtual milliseconds since the start.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(
            tokio::time::Instant::now()
                .saturating_duration_since(self.start)
                .as_millis(),
        )
        .unwrap_or(u64::MAX)
    }

    /// Virtual wall-clock now.
    pub fn wall(&self) -> Timestamp {
        let ms = i64::try_from(self.now_ms()).unwrap_or(i64::MAX);
        self.base
            .checked_add(jiff::SignedDuration::from_millis(ms))
            .unwrap_or(self.base)
    }

    pub fn is_dead(&self, epoch: u64) -> bool {
        epoch != 0 && self.dead.contains(&epoch)
    }

    /// Fences a manager incarnation: its watches end, its requests fail from now on.
    pub fn kill(&mut self, epoch: u64) {
        self.dead.insert(epoch);
        self.watches.retain(|w| w.epoch != epoch);
    }

    pub fn get(&self, resource: &'static str, key: &str) -> Option<Arc<Value>> {
        self.objects.get(&(resource, key.to_owned())).cloned()
    }

    /// Every object of `resource`, by key.
    pub fn list(&self, resource: &'static str) -> Vec<Arc<Value>> {
        self.objects
            .range((resource, String::new())..)
            .take_while(|((r, _), _)| *r == resource)
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub fn drain_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.pending)
    }

    fn note(&mut self, line: String) {
        let ms = self.now_ms();
        self.trace
            .push(format!("{:>4}.{:03} {line}", ms / 1000, ms % 1000));
    }

    /// Writes a line into the trace (the driver's operations and faults).
    pub fn trace_line(&mut self, line: String) {
        self.note(line);
    }

    fn mark_seen(&mut self, epoch: u64, obj: &Value) {
        if epoch != 0 {
            let uid = meta_str(obj, "uid");
            if !uid.is_empty() {
                self.seen.entry(epoch).or_default().insert(uid.to_owned());
            }
        }
    }

    /// Commits a change: stores it, logs it for watches and the checker, delivers it.
    fn commit(
        &mut self,
        r: &'static ResourceInfo,
        key: String,
        kind: &'static str,
        mut obj: Value,
        agent: &str,
    ) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        let obj = Arc::new(obj);
        let map_key = (r.plural, key.clone());
        let prev = if kind == "DELETED" {
            self.objects.remove(&map_key)
        } else {
            self.objects.insert(map_key, obj.clone())
        };
        let change = Change {
            rv,
            at_ms: self.now_ms(),
            kind,
            resource: r.plural,
            key,
            obj: obj.clone(),
            prev,
            agent: agent.to_owned(),
        };
        if r.plural != "events" {
            // The desired count of a scalable object, so a trace shows what each write set.
            let replicas = match obj["spec"]["replicas"].as_i64() {
                Some(n) => format!(" replicas={n}"),
                None => String::new(),
            };
            self.note(format!(
                "{agent} {kind} {} {} rv={rv}{replicas}",
                r.kind, change.key
            ));
        }
        self.deliver(&change);
        let log = self.log.entry(r.plural).or_default();
        log.push_back(change.clone());
        if log.len() > HISTORY
            && let Some(old) = log.pop_front()
        {
            self.compacted.insert(r.plural, old.rv);
        }
        self.pending.push(change);
        obj
    }

    fn watch_delay(&mut self) -> Duration {
        let (lo, hi) = self.faults.watch_delay_ms;
        let ms = if hi > lo {
            self.rng.random_range(lo..=hi)
        } else {
            lo
        };
        Duration::from_millis(ms)
    }

    fn deliver(&mut self, change: &Change) {
        let now = tokio::time::Instant::now();
        let mut targets = Vec::new();
        for (i, w) in self.watches.iter().enumerate() {
            if w.resource == change.resource && watch_admits(w, &change.obj) {
                targets.push(i);
            }
        }
        for i in targets {
            let delay = self.watch_delay();
            let line = event_line(change.kind, &change.obj);
            let w = &mut self.watches[i];
            let at = (now + delay).max(w.last_at);
            w.last_at = at;
            let epoch = w.epoch;
            let ok = w.tx.send(Delivery { at, line }).is_ok();
            if ok {
                self.mark_seen(epoch, &change.obj);
            }
        }
        self.watches.retain(|w| !w.tx.is_closed());
    }

    /// Sends a bookmark with the current resourceVersion to every watch that asked for them.
    pub fn bookmarks(&mut self) {
        let rv = self.rv;
        let now = tokio::time::Instant::now();
        for w in &mut self.watches {
            if !w.bookmarks {
                continue;
            }
            let r = resource(w.resource).map(|r| (r.kind, r.api_version()));
            let (kind, api_version) = r.unwrap_or(("", String::new()));
            let obj = json!({"kind": kind, "apiVersion": api_version,
                "metadata": {"resourceVersion": rv.to_string()}});
            let at = now.max(w.last_at);
            w.last_at = at;
            let _ = w.tx.send(Delivery {
                at,
                line: event_line("BOOKMARK", &obj),
            });
        }
    }

    /// Ends every watch of `resource` (all when `None`): the clients re-watch from their last
    /// version. With `expire`, the history is compacted first and the watches get a 410
    /// `Expired` event, so they relist.
    pub fn drop_watches(&mut self, resource: Option<&str>, expire: bool) {
        let now = tokio::time::Instant::now();
        let rv = self.rv;
        let hit = |w: &Watch| resource.is_none_or(|r| r == w.resource);
        if expire {
            for r in RESOURCES {
                if resource.is_none_or(|x| x == r.plural) {
                    self.compacted.insert(r.plural, rv);
                    self.log.remove(r.plural);
                }
            }
            for w in self.watches.iter_mut().filter(|w| hit(w)) {
                let st = status(
                    410,
                    "Expired",
                    "The resourceVersion for the provided watch is too old.",
                );
                let at = now.max(w.last_at);
                let _ = w.tx.send(Delivery {
                    at,
                    line: event_line("ERROR", &st),
                });
            }
        }
        self.watches.retain(|w| !hit(w));
        self.note(format!(
            "sim {} watches of {}",
            if expire { "expire" } else { "drop" },
            resource.unwrap_or("every resource")
        ));
    }

    fn new_uid(&mut self) -> String {
        self.uids += 1;
        let a: u32 = self.rng.random();
        format!("{a:08x}-0000-4000-8000-{:012x}", self.uids)
    }

    fn random_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..5)
            .map(|_| char::from(ALPHABET[self.rng.random_range(0..ALPHABET.len())]))
            .collect()
    }

    // ----- verbs -----

    /// The object with `key`, for a GET.
    pub fn read(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: &str,
        name: &str,
    ) -> Reply {
        match self.get(r.plural, &key_of(ns, name)) {
            Some(obj) => {
                self.mark_seen(caller.epoch, &obj);
                Reply::Json(200, (*obj).clone())
            }
            None => not_found(r, name),
        }
    }

    /// The state of `resource` as of version `at` (undoing later changes from the log).
    fn state_at(&self, r: &'static ResourceInfo, at: u64) -> BTreeMap<String, Arc<Value>> {
        let mut state: BTreeMap<String, Arc<Value>> = self
            .objects
            .range((r.plural, String::new())..)
            .take_while(|((res, _), _)| *res == r.plural)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        if let Some(log) = self.log.get(r.plural) {
            for c in log.iter().rev().take_while(|c| c.rv > at) {
                match &c.prev {
                    Some(p) => {
                        state.insert(c.key.clone(), p.clone());
                    }
                    None => {
                        state.remove(&c.key);
                    }
                }
            }
        }
        state
    }

    /// A LIST. With `resourceVersion=0` it may be served from a lagging cache (fault
    /// `stale_list`).
    pub fn list_reply(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        query: &Query,
    ) -> Reply {
        let mut at = self.rv;
        if query.resource_version.as_deref() == Some("0")
            && caller.epoch != 0
            && self.faults.stale_list > 0.0
            && self.rng.random_bool(self.faults.stale_list.min(1.0))
        {
            let window = u64::try_from(self.faults.stale_window.as_millis()).unwrap_or(0);
            let since = self.now_ms().saturating_sub(window);
            let floor = self.compacted.get(r.plural).copied().unwrap_or(0);
            let candidates: Vec<u64> = self
                .log
                .get(r.plural)
                .into_iter()
                .flatten()
                .filter(|c| c.at_ms >= since && c.rv > floor)
                .map(|c| c.rv - 1)
                .filter(|rv| *rv >= floor)
                .collect();
            if !candidates.is_empty() {
                at = candidates[self.rng.random_range(0..candidates.len())];
                let behind = self.rv - at;
                self.note(format!(
                    "sim stale list of {} for {} at rv={at} ({behind} behind)",
                    r.plural, caller.agent
                ));
            }
        }
        let items: Vec<Value> = self
            .state_at(r, at)
            .into_values()
            .filter(|o| ns.is_none_or(|n| meta_str(o, "namespace") == n))
            .filter(|o| query.labels.matches_labels(o) && query.fields.matches_fields(o))
            .map(|o| (*o).clone())
            .collect();
        for o in &items {
            self.mark_seen(caller.epoch, o);
        }
        Reply::Json(
            200,
            json!({"kind": format!("{}List", r.kind), "apiVersion": r.api_version(),
                "metadata": {"resourceVersion": at.to_string()}, "items": items}),
        )
    }

    /// A WATCH from `query.resource_version`.
    pub fn watch_reply(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        query: &Query,
    ) -> Reply {
        let from: u64 = match query.resource_version.as_deref() {
            None | Some("") | Some("0") => self.rv,
            Some(v) => match v.parse() {
                Ok(v) => v,
                Err(_) => {
                    return Reply::Json(
                        400,
                        status(400, "BadRequest", &format!("invalid resourceVersion {v}")),
                    );
                }
            },
        };
        let floor = self.compacted.get(r.plural).copied().unwrap_or(0);
        if from < floor {
            return Reply::Json(
                410,
                status(
                    410,
                    "Expired",
                    &format!("too old resource version: {from} ({floor})"),
                ),
            );
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let watch = Watch {
            epoch: caller.epoch,
            resource: r.plural,
            namespace: ns.map(str::to_owned),
            labels: query.labels.clone(),
            fields: query.fields.clone(),
            bookmarks: query.bookmarks,
            tx,
            last_at: tokio::time::Instant::now(),
        };
        let backlog: Vec<Change> = self
            .log
            .get(r.plural)
            .into_iter()
            .flatten()
            .filter(|c| c.rv > from && watch_admits(&watch, &c.obj))
            .cloned()
            .collect();
        self.watches.push(watch);
        let idx = self.watches.len() - 1;
        let now = tokio::time::Instant::now();
        for c in backlog {
            let delay = self.watch_delay();
            let w = &mut self.watches[idx];
            let at = (now + delay).max(w.last_at);
            w.last_at = at;
            let _ = w.tx.send(Delivery {
                at,
                line: event_line(c.kind, &c.obj),
            });
            self.mark_seen(caller.epoch, &c.obj);
        }
        Reply::Watch(rx)
    }

    /// Rolls whether a manager's write crashes the manager (`Some(true)`: after it lands,
    /// `Some(false)`: before).
    fn roll_crash(&mut self, caller: &Caller) -> Option<bool> {
        if caller.epoch == 0 || self.faults.crash_budget == 0 || self.faults.crash_on_write <= 0.0 {
            return None;
        }
        if !self.rng.random_bool(self.faults.crash_on_write.min(1.0)) {
            return None;
        }
        self.faults.crash_budget -= 1;
        Some(self.rng.random_bool(0.5))
    }

    fn roll(&mut self, caller: &Caller, p: f64) -> bool {
        caller.epoch != 0 && p > 0.0 && self.rng.random_bool(p.min(1.0))
    }

    /// A write of a manager or of the simulation, with the faults a seed injects around it.
    pub fn write(
        &mut self,
        caller: &Caller,
        describe: &str,
        op: impl FnOnce(&mut World) -> Reply,
    ) -> Reply {
        if self.roll(caller, self.faults.server_error / 2.0) {
            self.note(format!("sim 500 to {} {describe}", caller.agent));
            return Reply::Json(
                500,
                status(500, "InternalError", "Internal error occurred: injected"),
            );
        }
        let crash = self.roll_crash(caller);
        if crash == Some(false) {
            self.crash(caller, describe, "before");
            return Reply::Fail("connection reset by peer".into());
        }
        let reply = op(self);
        if let Reply::Json(code, body) = &reply {
            if *code >= 400 {
                if caller.epoch != 0 {
                    let at = self.now_ms();
                    self.failed_writes
                        .push((at, format!("{} {describe}", caller.agent)));
                }
                self.note(format!(
                    "{} {describe} -> {code} {}",
                    caller.agent,
                    body["reason"].as_str().unwrap_or_default()
                ));
            } else {
                self.mark_seen(caller.epoch, body);
            }
        }
        if crash == Some(true) {
            self.crash(caller, describe, "after");
            return Reply::Fail("connection reset by peer".into());
        }
        let create = describe.starts_with("POST");
        if (!create || self.faults.timeout_creates)
            && self.roll(caller, self.faults.server_error / 2.0)
        {
            self.note(format!("sim 504 after {} {describe}", caller.agent));
            return Reply::Json(
                504,
                status(
                    504,
                    "Timeout",
                    "Timeout: request did not complete within the allowed duration",
                ),
            );
        }
        reply
    }

    fn crash(&mut self, caller: &Caller, describe: &str, when: &str) {
        self.crashes += 1;
        self.note(format!(
            "sim CRASH manager epoch {} {when} {} {describe}",
            caller.epoch, caller.agent
        ));
        self.kill(caller.epoch);
    }

    /// POST.
    pub fn create(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: &str,
        mut obj: Value,
    ) -> Reply {
        if r.plural == "pods" && self.roll(caller, self.faults.reject_create) {
            self.note(format!("sim 403 quota to {} create pod", caller.agent));
            return Reply::Json(
                403,
                status(
                    403,
                    "Forbidden",
                    "pods \"x\" is forbidden: exceeded quota: sim, requested: pods=1",
                ),
            );
        }
        if !obj.is_object() {
            return Reply::Json(400, status(400, "BadRequest", "body is not an object"));
        }
        let mut name = meta_str(&obj, "name").to_owned();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName").to_owned();
            if prefix.is_empty() {
                return Reply::Json(
                    422,
                    status(
                        422,
                        "Invalid",
                        &format!("{} is invalid: metadata.name: Required value", r.kind),
                    ),
                );
            }
            name = format!("{prefix}{}", self.random_suffix());
        }
        let key = key_of(if r.namespaced { ns } else { "" }, &name);
        if self.objects.contains_key(&(r.plural, key.clone())) {
            return Reply::Json(
                409,
                status(
                    409,
                    "AlreadyExists",
                    &format!("{} \"{name}\" already exists", r.plural),
                ),
            );
        }
        let uid = self.new_uid();
        let now = rfc3339(self.wall());
        {
            let m = &mut obj["metadata"];
            m["name"] = json!(name);
            if r.namespaced {
                m["namespace"] = json!(ns);
            }
            m["uid"] = json!(uid);
            m["creationTimestamp"] = json!(now);
            if let Some(map) = m.as_object_mut() {
                map.remove("deletionTimestamp");
                map.remove("deletionGracePeriodSeconds");
                map.remove("managedFields");
            }
            if r.generation {
                m["generation"] = json!(1);
            }
        }
        obj["kind"] = json!(r.kind);
        obj["apiVersion"] = json!(r.api_version());
        default_on_create(r, &mut obj, &uid);
        let obj = self.commit(r, key, "ADDED", obj, &caller.agent);
        Reply::Json(201, (*obj).clone())
    }

    /// PUT of the object (`status`: of its status subresource) or PATCH (`patch`).
    #[allow(clippy::too_many_arguments)] // one request's parts, as the server's router has them
    pub fn update(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: &str,
        name: &str,
        status_only: bool,
        body: Value,
        patch: Option<PatchKind>,
    ) -> Reply {
        let key = key_of(if r.namespaced { ns } else { "" }, name);
        let Some(current) = self.get(r.plural, &key) else {
            return not_found(r, name);
        };
        let wanted_rv = match patch {
            None => meta_str(&body, "resourceVersion").to_owned(),
            Some(_) => body["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        };
        // A concurrent writer (kubelet heartbeat, another client) gets there first.
        let mut current = current;
        if !wanted_rv.is_empty() && self.roll(caller, self.faults.conflict) {
            let touched = (*current).clone();
            self.note(format!(
                "sim concurrent write before {} on {key}",
                caller.agent
            ));
            current = self.commit(r, key.clone(), "MODIFIED", touched, "sim-concurrent-writer");
        }
        if !wanted_rv.is_empty() && wanted_rv != meta_str(&current, "resourceVersion") {
            return conflict(r, name);
        }
        let proposed = match patch {
            Some(kind) => patch::apply(kind, &current, &body),
            None => body,
        };
        let mut next = if status_only {
            let mut next = (*current).clone();
            next["status"] = proposed["status"].clone();
            next
        } else {
            let mut next = proposed;
            if !next.is_object() {
                return Reply::Json(400, status(400, "BadRequest", "body is not an object"));
            }
            for field in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "resourceVersion",
            ] {
                next["metadata"][field] = current["metadata"][field].clone();
            }
            if let Some(m) = next["metadata"].as_object_mut() {
                m.retain(|_, v| !v.is_null());
                m.remove("managedFields");
            }
            next["kind"] = current["kind"].clone();
            next["apiVersion"] = current["apiVersion"].clone();
            if r.status {
                next["status"] = current["status"].clone();
            }
            if r.generation && next["spec"] != current["spec"] {
                let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
                next["metadata"]["generation"] = json!(g + 1);
            }
            if r.plural == "pods" {
                // spec.nodeName is set once (by binding), never by an update.
                next["spec"]["nodeName"] = current["spec"]["nodeName"].clone();
            }
            next
        };
        if let Some(m) = next.as_object_mut()
            && m.get("status").is_some_and(Value::is_null)
        {
            m.remove("status");
        }
        if next == *current {
            // A no-op write does not change the resourceVersion.
            return Reply::Json(200, (*current).clone());
        }
        let terminating = !current["metadata"]["deletionTimestamp"].is_null();
        let finalizers_left = next["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let pod_grace_over = r.plural != "pods"
            || current["metadata"]["deletionGracePeriodSeconds"].as_i64() == Some(0);
        if terminating && !finalizers_left && pod_grace_over {
            let obj = self.commit(r, key, "DELETED", next, &caller.agent);
            return Reply::Json(200, (*obj).clone());
        }
        let obj = self.commit(r, key, "MODIFIED", next, &caller.agent);
        Reply::Json(200, (*obj).clone())
    }

    /// DELETE with `options` (a `DeleteOptions` body, or `Null`).
    pub fn delete(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: &str,
        name: &str,
        options: &Value,
    ) -> Reply {
        let key = key_of(if r.namespaced { ns } else { "" }, name);
        let Some(current) = self.get(r.plural, &key) else {
            return not_found(r, name);
        };
        let pre = &options["preconditions"];
        if let Some(uid) = pre["uid"].as_str()
            && uid != meta_str(&current, "uid")
        {
            return Reply::Json(
                409,
                status(
                    409,
                    "Conflict",
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(&current, "uid")
                    ),
                ),
            );
        }
        if let Some(rv) = pre["resourceVersion"].as_str()
            && rv != meta_str(&current, "resourceVersion")
        {
            return Reply::Json(
                409,
                status(
                    409,
                    "Conflict",
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        meta_str(&current, "resourceVersion")
                    ),
                ),
            );
        }
        let asked = options["gracePeriodSeconds"].as_i64();
        self.deletions.push(Deletion {
            at_ms: self.now_ms(),
            agent: caller.agent.clone(),
            epoch: caller.epoch,
            resource: r.plural,
            key: key.clone(),
            obj: current.clone(),
            grace: asked,
            uid_precondition: pre["uid"].is_string(),
        });
        let has_finalizers = current["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let mut next = (*current).clone();
        let now = self.wall();
        if r.plural == "pods" {
            let phase = current["status"]["phase"].as_str().unwrap_or_default();
            let unbound = current["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .is_empty();
            let own = current["spec"]["terminationGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(30);
            let mut grace = asked.unwrap_or(own).max(0);
            if unbound || phase == "Succeeded" || phase == "Failed" {
                grace = 0;
            }
            let already = current["metadata"]["deletionGracePeriodSeconds"].as_i64();
            // A terminating pod's grace period can only be shortened.
            if let Some(g) = already
                && grace >= g
            {
                return Reply::Json(200, (*current).clone());
            }
            if grace == 0 && !has_finalizers {
                let obj = self.commit(r, key, "DELETED", next, &caller.agent);
                return Reply::Json(200, (*obj).clone());
            }
            let at = now
                .checked_add(jiff::SignedDuration::from_secs(grace))
                .unwrap_or(now);
            next["metadata"]["deletionTimestamp"] = json!(rfc3339(at));
            next["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            let obj = self.commit(r, key, "MODIFIED", next, &caller.agent);
            return Reply::Json(200, (*obj).clone());
        }
        if !has_finalizers {
            let obj = self.commit(r, key, "DELETED", next, &caller.agent);
            return Reply::Json(200, (*obj).clone());
        }
        if current["metadata"]["deletionTimestamp"].is_null() {
            next["metadata"]["deletionTimestamp"] = json!(rfc3339(now));
            next["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            let obj = self.commit(r, key, "MODIFIED", next, &caller.agent);
            return Reply::Json(200, (*obj).clone());
        }
        Reply::Json(200, (*current).clone())
    }

    /// Changes an object as the simulation (kubelet, scheduler, node lifecycle, workload)
    /// does, bypassing faults: `f` edits a copy; nothing is written when it returns false.
    pub fn edit(
        &mut self,
        agent: &str,
        plural: &str,
        key: &str,
        f: impl FnOnce(&mut Value) -> bool,
    ) -> bool {
        let Some(r) = resource(plural) else {
            return false;
        };
        let Some(current) = self.get(r.plural, key) else {
            return false;
        };
        let mut next = (*current).clone();
        if !f(&mut next) || next == *current {
            return false;
        }
        if r.generation && next["spec"] != current["spec"] {
            let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
            next["metadata"]["generation"] = json!(g + 1);
        }
        let terminating = !next["metadata"]["deletionTimestamp"].is_null();
        let finalizers_left = next["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let grace_over = r.plural != "pods"
            || next["metadata"]["deletionGracePeriodSeconds"].as_i64() == Some(0);
        let kind = if terminating && !finalizers_left && grace_over {
            "DELETED"
        } else {
            "MODIFIED"
        };
        self.commit(r, key.to_owned(), kind, next, agent);
        true
    }
}

fn watch_admits(w: &Watch, obj: &Value) -> bool {
    w.namespace
        .as_deref()
        .is_none_or(|ns| meta_str(obj, "namespace") == ns)
        && w.labels.matches_labels(obj)
        && w.fields.matches_fields(obj)
}

fn event_line(kind: &str, obj: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// What the API server's defaulting and `PrepareForCreate` add to a new object, for the
/// fields controllers read: a pod starts `Pending` with the default grace period; a Job gets
/// its generated selector and labels (`pkg/registry/batch/job/strategy.go`,
/// `generateSelector`) and the defaults of `pkg/apis/batch/v1/defaults.go`.
fn default_on_create(r: &ResourceInfo, obj: &mut Value, uid: &str) {
    match r.plural {
        "pods" => {
            let spec = &mut obj["spec"];
            if spec["terminationGracePeriodSeconds"].is_null() {
                spec["terminationGracePeriodSeconds"] = json!(30);
            }
            if spec["restartPolicy"].is_null() {
                spec["restartPolicy"] = json!("Always");
            }
            let mut st = json!({"phase": "Pending", "qosClass": "BestEffort"});
            if !obj["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
            {
                st["conditions"] = json!([{"type": "PodScheduled", "status": "True"}]);
            }
            obj["status"] = st;
        }
        "jobs" => {
            let manual = obj["spec"]["manualSelector"].as_bool() == Some(true);
            if !manual && obj["spec"]["selector"].is_null() {
                obj["spec"]["selector"] =
                    json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
                let name = meta_str(obj, "name").to_owned();
                let labels = &mut obj["spec"]["template"]["metadata"]["labels"];
                if !labels.is_object() {
                    *labels = json!({});
                }
                for (k, v) in [
                    ("batch.kubernetes.io/controller-uid", uid),
                    ("controller-uid", uid),
                    ("batch.kubernetes.io/job-name", name.as_str()),
                    ("job-name", name.as_str()),
                ] {
                    labels[k] = json!(v);
                }
            }
            let spec = &mut obj["spec"];
            if spec["completions"].is_null() && spec["parallelism"].is_null() {
                spec["completions"] = json!(1);
            }
            if spec["parallelism"].is_null() {
                spec["parallelism"] = json!(1);
            }
            if spec["backoffLimit"].is_null() {
                spec["backoffLimit"] = json!(6);
            }
            if spec["completionMode"].is_null() {
                spec["completionMode"] = json!("NonIndexed");
            }
            if spec["suspend"].is_null() {
                spec["suspend"] = json!(false);
            }
            if spec["podReplacementPolicy"].is_null() {
                spec["podReplacementPolicy"] = json!("TerminatingOrFailed");
            }
            if spec["manualSelector"].is_null() {
                spec["manualSelector"] = json!(false);
            }
            obj["status"] = json!({});
        }
        _ => {
            if r.status {
                obj["status"] = json!({});
            }
        }
    }
}

/// The query parameters of a list or watch.
#[derive(Debug, Default)]
pub struct Query {
    pub watch: bool,
    pub resource_version: Option<String>,
    pub labels: Selector,
    pub fields: Selector,
    pub bookmarks: bool,
}

impl Query {
    pub fn parse(q: &str) -> Self {
        let mut out = Query::default();
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            match &*k {
                "watch" => out.watch = v == "true" || v == "1",
                "resourceVersion" => out.resource_version = Some(v.into_owned()),
                "labelSelector" => out.labels = Selector::parse(&v),
                "fieldSelector" => out.fields = Selector::parse(&v),
                "allowWatchBookmarks" => out.bookmarks = v == "true",
                _ => {}
            }
        }
        out
    }
}
