//! The simulated API server's state: the objects with their resourceVersions (one counter
//! for all resources, as etcd's revision), the event log that serves watches, the open
//! watches, who sent what, and the virtual clock. [`World::commit`] is the one place an
//! object changes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::faults::Faults;
use super::resources::{ResourceInfo, meta_str};
use crate::fake_api::status;
use crate::sim::select::Selector;

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
    /// The manager incarnation that wrote it (0: the simulation itself, or a concurrent
    /// writer).
    pub epoch: u64,
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
    /// The delete carried a resourceVersion precondition (the StatefulSet controller's
    /// stuck-rollout recovery is its only user).
    pub rv_precondition: bool,
}

/// What a watch stream carries: an encoded event, delivered at `at`.
pub struct Delivery {
    pub(crate) at: tokio::time::Instant,
    pub(crate) line: Bytes,
}

pub(super) struct Watch {
    pub(super) epoch: u64,
    pub(super) resource: &'static str,
    pub(super) namespace: Option<String>,
    pub(super) labels: Selector,
    pub(super) fields: Selector,
    pub(super) bookmarks: bool,
    pub(super) tx: mpsc::UnboundedSender<Delivery>,
    pub(super) last_at: tokio::time::Instant,
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
    pub(super) objects: BTreeMap<(&'static str, String), Arc<Value>>,
    pub(super) log: BTreeMap<&'static str, VecDeque<Change>>,
    /// Per resource: watches from a version at or below this answer 410.
    pub(super) compacted: BTreeMap<&'static str, u64>,
    pub(super) watches: Vec<Watch>,
    pub rng: StdRng,
    pub faults: Faults,
    pub(super) dead: BTreeSet<u64>,
    /// Changes not yet taken by the driver ([`World::drain_changes`]).
    pub(super) pending: Vec<Change>,
    pub deletions: Vec<Deletion>,
    /// Writes of managers that failed (4xx, 5xx): when, and `agent verb resource key`.
    pub failed_writes: Vec<(u64, String)>,
    /// One line per write, for the step-by-step trace.
    pub trace: Vec<String>,
    pub start: tokio::time::Instant,
    pub base: Timestamp,
    pub(super) uids: u64,
    pub requests: u64,
    pub crashes: u32,
    /// UIDs each manager epoch was sent (in a list, a watch event, a get or a write answer).
    pub seen: BTreeMap<u64, BTreeSet<String>>,
    /// The epoch of the write being applied ([`World::write`]); 0 outside one.
    pub(super) writer: u64,
    /// Manager incarnations cut off from the server for a while ([`World::cut_off`]).
    pub(super) cut: BTreeMap<u64, CutOff>,
    /// Whether the trace names the epoch of each manager write (several managers at once).
    pub trace_epochs: bool,
}

/// How a manager incarnation is cut off from the server ([`World::cut_off`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Every request fails at once (connection refused); its watches end.
    Refused,
    /// Every request hangs until the cut ends, then fails without reaching the server (a
    /// partition that drops packets); its watches end.
    Hang,
    /// Only its Lease requests hang until the cut ends, then reach the server and land late
    /// (a stalled shard holder: its renewals stop while its workers run on).
    SlowLeases,
}

/// One cut: how, and until when.
#[derive(Debug, Clone, Copy)]
pub struct CutOff {
    pub how: Cut,
    pub until: tokio::time::Instant,
}

pub(super) fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(super) fn not_found(r: &ResourceInfo, name: &str) -> Reply {
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
            writer: 0,
            cut: BTreeMap::new(),
            trace_epochs: false,
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

    /// Cuts manager incarnation `epoch` off for `span` (see [`Cut`]); a cut that refuses or
    /// hangs also ends its watches.
    pub fn cut_off(&mut self, epoch: u64, how: Cut, span: std::time::Duration) {
        let until = tokio::time::Instant::now() + span;
        self.cut.insert(epoch, CutOff { how, until });
        if how != Cut::SlowLeases {
            self.watches.retain(|w| w.epoch != epoch);
        }
        self.note(format!(
            "sim cut off manager epoch {epoch} ({how:?}) for {} ms",
            span.as_millis()
        ));
    }

    /// The cut a request of `epoch` meets now (`leases`: a request for Leases), if any.
    pub fn cut_of(&self, epoch: u64, leases: bool) -> Option<CutOff> {
        let cut = self.cut.get(&epoch)?;
        let active = cut.until > tokio::time::Instant::now();
        (active && (leases || cut.how != Cut::SlowLeases)).then_some(*cut)
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

    pub(super) fn note(&mut self, line: String) {
        let ms = self.now_ms();
        self.trace
            .push(format!("{:>4}.{:03} {line}", ms / 1000, ms % 1000));
    }

    /// Writes a line into the trace (the driver's operations and faults).
    pub fn trace_line(&mut self, line: String) {
        self.note(line);
    }

    pub(super) fn mark_seen(&mut self, epoch: u64, obj: &Value) {
        if epoch != 0 {
            let uid = meta_str(obj, "uid");
            if !uid.is_empty() {
                self.seen.entry(epoch).or_default().insert(uid.to_owned());
            }
        }
    }

    /// Commits a change: stores it, logs it for watches and the checker, delivers it.
    pub(super) fn commit(
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
            epoch: self.writer,
        };
        if r.plural != "events" {
            // The desired count of a scalable object, so a trace shows what each write set.
            let replicas = match obj["spec"]["replicas"].as_i64() {
                Some(n) => format!(" replicas={n}"),
                None => String::new(),
            };
            // A Lease's holder (and shard session), so a trace shows who holds what.
            let replicas = match obj["spec"]["holderIdentity"].as_str() {
                Some(h) if r.plural == "leases" => {
                    let session = obj["metadata"]["annotations"]["rkcm.io/shard-session"]
                        .as_str()
                        .map_or_else(String::new, |s| format!(" session={s}"));
                    format!("{replicas} holder={h:?}{session}")
                }
                _ => replicas,
            };
            // With several managers at once, which incarnation wrote it.
            let by = if self.trace_epochs && change.epoch != 0 {
                format!(" by epoch {}", change.epoch)
            } else {
                String::new()
            };
            self.note(format!(
                "{agent} {kind} {} {} rv={rv}{replicas}{by}",
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

    pub(super) fn new_uid(&mut self) -> String {
        self.uids += 1;
        let a: u32 = self.rng.random();
        format!("{a:08x}-0000-4000-8000-{:012x}", self.uids)
    }

    pub(super) fn random_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..5)
            .map(|_| char::from(ALPHABET[self.rng.random_range(0..ALPHABET.len())]))
            .collect()
    }
}
