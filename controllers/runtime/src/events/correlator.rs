//! Client-go's event correlation (`events_cache.go`): similar-event aggregation, counting of
//! identical events and the per source+object spam filter. Pure; the wall clock is injected.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::clock::SharedClock;
use crate::events::consts;
use crate::queue::flowcontrol::TokenBucket;

/// `<name>.<unix nanoseconds in lowercase hex>` (client-go: `fmt.Sprintf("%v.%x", ...)`).
pub(super) fn event_name(involved_name: &str, now: jiff::Timestamp) -> String {
    format!("{involved_name}.{:x}", now.as_nanosecond())
}

/// A string-keyed LRU cache with groupcache `lru` semantics: `get` refreshes recency, `add`
/// evicts the least recently used entry beyond capacity.
///
/// Keys are kept as a 128-bit digest, not as the string: an event key (source, object kind,
/// namespace, name, UID, type, reason and message) is 200 bytes or more, and a busy recorder
/// keeps 4 096 of them per cache; the digest is 16. Two keys share a digest with a chance of
/// about n²/2¹²⁹ (10⁻³¹ for a full cache); the digest is seeded at random per cache, so no
/// input can be crafted to collide. A collision would count a repeat of one event against
/// another's Event object, nothing worse.
#[derive(Debug)]
pub(super) struct Lru<V> {
    cap: usize,
    tick: u64,
    seeds: (
        foldhash::quality::RandomState,
        foldhash::quality::RandomState,
    ),
    entries: HashMap<u128, (V, u64)>,
    order: BTreeMap<u64, u128>,
}

impl<V> Lru<V> {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            tick: 0,
            seeds: Default::default(),
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    fn digest(&self, key: &str) -> u128 {
        use std::hash::BuildHasher as _;
        (u128::from(self.seeds.0.hash_one(key)) << 64) | u128::from(self.seeds.1.hash_one(key))
    }

    fn touch(&mut self, key: u128) {
        self.tick += 1;
        let tick = self.tick;
        if let Some((_, t)) = self.entries.get_mut(&key) {
            let old = std::mem::replace(t, tick);
            self.order.remove(&old);
            self.order.insert(tick, key);
        }
    }

    pub(super) fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let key = self.digest(key);
        self.touch(key);
        self.entries.get_mut(&key).map(|(v, _)| v)
    }

    pub(super) fn add(&mut self, key: String, value: V) {
        let key = self.digest(&key);
        self.tick += 1;
        if let Some((_, old)) = self.entries.insert(key, (value, self.tick)) {
            self.order.remove(&old);
        }
        self.order.insert(self.tick, key);
        while self.entries.len() > self.cap {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }

    /// Drops every entry `keep` refuses.
    fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        let order = &mut self.order;
        self.entries.retain(|_, (v, tick)| {
            let kept = keep(v);
            if !kept {
                order.remove(tick);
            }
            kept
        });
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

pub(super) fn s(o: &Option<String>) -> &str {
    o.as_deref().unwrap_or_default()
}

fn source_of(event: &Event) -> (&str, &str) {
    match &event.source {
        Some(src) => (s(&src.component), s(&src.host)),
        None => ("", ""),
    }
}

/// client-go `getEventKey`: everything that makes two events identical.
fn event_key(event: &Event) -> String {
    let (component, host) = source_of(event);
    let o = &event.involved_object;
    [
        component,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.field_path),
        s(&o.uid),
        s(&o.api_version),
        s(&event.type_),
        s(&event.reason),
        s(&event.message),
    ]
    .concat()
}

/// client-go `getSpamKey`: source and involved object (not type, reason or message).
fn spam_key(event: &Event) -> String {
    let (component, host) = source_of(event);
    let o = &event.involved_object;
    [
        component,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.uid),
        s(&o.api_version),
    ]
    .concat()
}

/// client-go `EventAggregatorByReasonFunc`: (aggregate key, local key = message).
pub(super) fn aggregate_keys(event: &Event) -> (String, String) {
    let (component, host) = source_of(event);
    let o = &event.involved_object;
    let key = [
        component,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.uid),
        s(&o.api_version),
        s(&event.type_),
        s(&event.reason),
        s(&event.reporting_component),
        s(&event.reporting_instance),
    ]
    .concat();
    (key, s(&event.message).to_string())
}

#[derive(Debug, Clone)]
pub(super) struct AggregateRecord {
    local_keys: BTreeSet<String>,
    last: jiff::Timestamp,
}

/// What the logger remembers about an event it has seen (client-go `eventLog`).
#[derive(Debug, Clone)]
pub(super) struct EventLog {
    count: i32,
    first_timestamp: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

/// What to do with one recorded event.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlation {
    /// Dropped by the spam filter.
    Skip,
    /// POST this new Event.
    Create(Event),
    /// Strategic-merge PATCH `patch` onto the existing Event named in `event` (which carries
    /// the full new state, used for a create if the PATCH finds no object).
    Patch {
        event: Event,
        patch: serde_json::Value,
    },
}

/// client-go's `EventCorrelator` with its defaults: aggregation, counting and spam filtering.
/// Pure apart from the injected wall clock; the writer task owns one per recorder.
pub struct EventCorrelator {
    clock: SharedClock,
    pub(super) spam: Lru<TokenBucket<jiff::Timestamp>>,
    pub(super) aggregates: Lru<AggregateRecord>,
    pub(super) logs: Lru<EventLog>,
    /// When [`EventCorrelator::sweep`] last ran.
    swept: Option<jiff::Timestamp>,
}

impl EventCorrelator {
    pub fn new(clock: SharedClock) -> Self {
        Self {
            clock,
            spam: Lru::new(consts::LRU_CACHE_ENTRIES),
            aggregates: Lru::new(consts::LRU_CACHE_ENTRIES),
            logs: Lru::new(consts::LRU_CACHE_ENTRIES),
            swept: None,
        }
    }

    /// Drops, at most once per [`consts::SWEEP_EVERY_SECONDS`], the entries that can no longer
    /// change an outcome: aggregation records older than the aggregation window (the next
    /// event of that key starts a new record either way) and spam buckets that have refilled
    /// completely (a new bucket is full too). Without it both caches keep an entry for every
    /// object that ever had an event until 4 096 others push it out, so a manager whose objects
    /// come and go grows for hours before the caches are full (upstream does the same). The
    /// logger's cache is left to its LRU: an entry there lets a repeat patch the existing
    /// Event, for as long as upstream's would.
    fn sweep(&mut self, now: jiff::Timestamp) {
        let due = self.swept.is_none_or(|at| {
            now.duration_since(at) >= jiff::SignedDuration::from_secs(consts::SWEEP_EVERY_SECONDS)
        });
        if !due {
            return;
        }
        self.swept = Some(now);
        let window = jiff::SignedDuration::from_secs(consts::AGGREGATE_INTERVAL_SECONDS);
        self.aggregates
            .retain(|r| now.duration_since(r.last) <= window);
        self.spam.retain(|bucket| !bucket.is_full_at(now));
    }

    /// Entries of the spam, aggregation and logger caches.
    pub(super) fn sizes(&self) -> (usize, usize, usize) {
        (self.spam.len(), self.aggregates.len(), self.logs.len())
    }

    /// client-go `EventCorrelate`: aggregate, then observe (count), then spam-filter.
    pub fn correlate(&mut self, event: Event) -> Correlation {
        let now = self.clock.wall();
        self.sweep(now);
        let (event, key) = self.aggregate(event, now);
        let (event, patch) = self.observe(event, key);
        if self.filtered(&event, now) {
            return Correlation::Skip;
        }
        match patch {
            Some(patch) => Correlation::Patch { event, patch },
            None => Correlation::Create(event),
        }
    }

    /// Records the server's copy after a successful write, so later repeats patch the right
    /// object (client-go `UpdateState`; keyed by the event's full key, as upstream).
    pub fn update_state(&mut self, server: &Event) {
        self.logs.add(
            event_key(server),
            EventLog {
                count: server.count.unwrap_or(0),
                first_timestamp: server.first_timestamp.clone(),
                name: server.metadata.name.clone(),
                resource_version: server.metadata.resource_version.clone(),
            },
        );
    }

    fn aggregate(&mut self, event: Event, now: jiff::Timestamp) -> (Event, String) {
        let full_key = event_key(&event);
        let (agg_key, local_key) = aggregate_keys(&event);
        let window = jiff::SignedDuration::from_secs(consts::AGGREGATE_INTERVAL_SECONDS);
        let fresh = AggregateRecord {
            local_keys: BTreeSet::new(),
            last: now,
        };
        let mut record = match self.aggregates.get_mut(&agg_key) {
            Some(r) if now.duration_since(r.last) <= window => r.clone(),
            _ => fresh,
        };
        record.local_keys.insert(local_key);
        record.last = now;
        let aggregated = record.local_keys.len() >= consts::AGGREGATE_MAX_EVENTS;
        if aggregated {
            // Upstream pops an arbitrary key so the set never grows past the maximum; popping
            // the smallest keeps tests deterministic.
            record.local_keys.pop_first();
        }
        self.aggregates.add(agg_key.clone(), record);
        if !aggregated {
            return (event, full_key);
        }
        let message = format!("{}{}", consts::AGGREGATE_MESSAGE_PREFIX, s(&event.message));
        let combined = Event {
            metadata: ObjectMeta {
                name: Some(event_name(s(&event.involved_object.name), now)),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            message: Some(message),
            involved_object: event.involved_object,
            type_: event.type_,
            reason: event.reason,
            source: event.source,
            ..Event::default()
        };
        (combined, agg_key)
    }

    fn observe(&mut self, mut event: Event, key: String) -> (Event, Option<serde_json::Value>) {
        let mut patch = None;
        if let Some(last) = self.logs.get_mut(&key).filter(|l| l.count > 0) {
            event.metadata.name = last.name.clone();
            event.metadata.resource_version = last.resource_version.clone();
            event.first_timestamp = last.first_timestamp.clone();
            event.count = Some(last.count.saturating_add(1));
            // Upstream diffs the event against a copy with count, lastTimestamp and message
            // cleared, so the patch carries exactly those three fields (message when non-empty).
            let mut p = serde_json::Map::new();
            p.insert("count".into(), serde_json::json!(event.count));
            if let Some(ts) = &event.last_timestamp {
                p.insert(
                    "lastTimestamp".into(),
                    serde_json::to_value(ts).unwrap_or_default(),
                );
            }
            if let Some(msg) = event.message.as_deref().filter(|m| !m.is_empty()) {
                p.insert("message".into(), serde_json::Value::String(msg.to_string()));
            }
            patch = Some(serde_json::Value::Object(p));
        }
        self.logs.add(
            key,
            EventLog {
                count: event.count.unwrap_or(1),
                first_timestamp: event.first_timestamp.clone(),
                name: event.metadata.name.clone(),
                resource_version: event.metadata.resource_version.clone(),
            },
        );
        (event, patch)
    }

    fn filtered(&mut self, event: &Event, now: jiff::Timestamp) -> bool {
        let key = spam_key(event);
        let mut bucket = self
            .spam
            .get_mut(&key)
            .cloned()
            .unwrap_or_else(|| TokenBucket::new(consts::SPAM_QPS, consts::SPAM_BURST as u32));
        let accepted = bucket.try_accept(now);
        self.spam.add(key, bucket);
        !accepted
    }
}
