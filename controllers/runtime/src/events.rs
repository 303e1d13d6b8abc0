//! core/v1 Event recording with client-go semantics (mirrors client-go `tools/record/event.go`
//! and `tools/record/events_cache.go`).
//!
//! Guarantees:
//! - [`EventRecorder::event`] never blocks, never does I/O inline and never fails: it puts the
//!   event into a bounded buffer (1000 entries; a full buffer drops the event with a log line)
//!   and one background task per recorder writes it.
//! - Events are **core/v1** objects named `<involvedObject.name>.<hex unix nanoseconds>` in the
//!   involved object's namespace (`default` for cluster-scoped objects), with
//!   `source.component`, `reportingComponent`, `firstTimestamp`, `lastTimestamp` and `count`,
//!   because tooling selects KCM events on `source.component` and `reason`.
//! - Correlation is client-go's [`EventCorrelator`], in client-go's order: similar-event
//!   aggregation, then counting of identical events (a repeat PATCHes `count`,
//!   `lastTimestamp` and `message` of the existing Event instead of creating one), then the
//!   per source+object spam filter (token bucket, burst 25, one token per 300 s). The counter
//!   advances even for events the spam filter drops, exactly as upstream does.
//! - Write failures are logged. Only transport-level failures are retried (at most 12
//!   attempts, 10 s apart, the first delay randomised); an API status error ends the attempt.
//!   A count PATCH answered with NotFound falls back to a create.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use kube::api::Patch;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::clock::{self, SharedClock};
use crate::flowcontrol::TokenBucket;
use crate::tracked;

/// Upstream constants (client-go `tools/record`).
pub mod consts {
    /// Buffer between recorders and the writer task (`maxQueuedEvents`).
    pub const MAX_QUEUED_EVENTS: usize = 1000;
    /// Write attempts per event (`maxTriesPerEvent`).
    pub const MAX_TRIES_PER_EVENT: u32 = 12;
    /// Pause between write attempts (`defaultSleepDuration`).
    pub const SLEEP_BETWEEN_TRIES: std::time::Duration = std::time::Duration::from_secs(10);
    /// Size of each correlation LRU cache (`maxLruCacheEntries`).
    pub const LRU_CACHE_ENTRIES: usize = 4096;
    /// Similar events (differing only in message) before aggregation (`defaultAggregateMaxEvents`).
    pub const AGGREGATE_MAX_EVENTS: usize = 10;
    /// Window of the aggregation (`defaultAggregateIntervalInSeconds`).
    pub const AGGREGATE_INTERVAL_SECONDS: i64 = 600;
    /// How often the correlator drops entries that can no longer change an outcome (rkcm's
    /// own; upstream relies on the LRU alone).
    pub const SWEEP_EVERY_SECONDS: i64 = 60;
    /// Spam filter bucket size per source+object (`defaultSpamBurst`).
    pub const SPAM_BURST: f64 = 25.0;
    /// Spam filter refill, tokens per second (`defaultSpamQPS`).
    pub const SPAM_QPS: f64 = 1.0 / 300.0;
    /// Prefix of aggregated messages (`EventAggregatorByReasonMessageFunc`).
    pub const AGGREGATE_MESSAGE_PREFIX: &str = "(combined from similar events): ";
    /// Namespace of events about cluster-scoped objects (`metav1.NamespaceDefault`).
    pub const DEFAULT_NAMESPACE: &str = "default";
    /// Status cause the apiserver gives when the namespace is being deleted.
    pub const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";
}

/// `type` of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The reference client-go's `ref.GetReference` builds: kind, apiVersion, namespace, name, uid
/// and resourceVersion of the object.
pub fn object_reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    let meta = obj.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

/// An event as a fake recorder captured it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    pub object: ObjectReference,
    pub type_: EventType,
    pub reason: String,
    pub message: String,
}

/// What a fake recorder captured; shared with the recorder.
#[derive(Debug, Clone, Default)]
pub struct FakeEvents {
    events: Arc<Mutex<Vec<RecordedEvent>>>,
}

impl FakeEvents {
    /// Everything recorded so far, leaving the buffer empty.
    pub fn take(&self) -> Vec<RecordedEvent> {
        std::mem::take(&mut *self.events.lock())
    }
    /// A copy of everything recorded so far.
    pub fn all(&self) -> Vec<RecordedEvent> {
        self.events.lock().clone()
    }
}

#[derive(Clone)]
enum Target {
    Writer(mpsc::Sender<Event>),
    Fake(FakeEvents),
}

/// Records core/v1 Events for one event source (one controller). Cheap to clone; every clone
/// feeds the same writer task.
#[derive(Clone)]
pub struct EventRecorder {
    source: EventSource,
    clock: SharedClock,
    target: Target,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.source.component)
            .finish()
    }
}

impl EventRecorder {
    /// A recorder writing with `client` as `source.component = component` (upstream KCM leaves
    /// `source.host` empty). Spawns the writer task: call inside a tokio runtime. The task ends
    /// when the last clone is dropped.
    pub fn new(client: kube::Client, component: &str) -> Self {
        Self::with_options(client, component, None, clock::system())
    }

    /// Like [`EventRecorder::new`] with an explicit `source.host` and wall clock.
    pub fn with_options(
        client: kube::Client,
        component: &str,
        host: Option<String>,
        clock: SharedClock,
    ) -> Self {
        let (tx, rx) = mpsc::channel(consts::MAX_QUEUED_EVENTS);
        let sizes = Arc::new(CacheSizes::default());
        tracked::track(component, &sizes, CacheSizes::report);
        let writer = Writer {
            client,
            correlator: EventCorrelator::new(clock.clone()),
            sleep: consts::SLEEP_BETWEEN_TRIES,
            sizes,
        };
        tokio::spawn(writer.run(rx));
        Self {
            source: EventSource {
                component: Some(component.to_string()),
                host,
            },
            clock,
            target: Target::Writer(tx),
        }
    }

    /// A recorder that only captures events, for tests: no task, no API, no correlation.
    pub fn fake(component: &str) -> (Self, FakeEvents) {
        let events = FakeEvents::default();
        let rec = Self {
            source: EventSource {
                component: Some(component.to_string()),
                host: None,
            },
            clock: clock::system(),
            target: Target::Fake(events.clone()),
        };
        (rec, events)
    }

    /// The `source.component` of this recorder.
    pub fn component(&self) -> &str {
        self.source.component.as_deref().unwrap_or_default()
    }

    /// Records an event about `object`. Never blocks; drops the event (with a log line) when
    /// the buffer is full.
    pub fn event(&self, object: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        tracing::debug!(
            kind = object.kind.as_deref().unwrap_or_default(),
            namespace = object.namespace.as_deref().unwrap_or_default(),
            name = object.name.as_deref().unwrap_or_default(),
            component = self.component(),
            event_type = type_.as_str(),
            reason,
            message,
            "event occurred"
        );
        match &self.target {
            Target::Fake(events) => events.events.lock().push(RecordedEvent {
                object: object.clone(),
                type_,
                reason: reason.to_string(),
                message: message.to_string(),
            }),
            Target::Writer(tx) => {
                let event = make_event(
                    &self.source,
                    object,
                    type_,
                    reason,
                    message,
                    self.clock.wall(),
                );
                match tx.try_send(event) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(ev)) => tracing::error!(
                        name = ev.metadata.name.as_deref().unwrap_or_default(),
                        reason,
                        "unable to record event: too many queued events, dropped event"
                    ),
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        tracing::debug!(reason, "event writer stopped, dropped event")
                    }
                }
            }
        }
    }

    /// [`EventRecorder::event`] with the reference built from `obj`.
    pub fn event_for<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        self.event(&object_reference(obj), type_, reason, message);
    }
}

/// The Event client-go's `makeEvent` builds (plus source and reporting fields as
/// `generateEvent` sets them).
fn make_event(
    source: &EventSource,
    object: &ObjectReference,
    type_: EventType,
    reason: &str,
    message: &str,
    now: jiff::Timestamp,
) -> Event {
    let namespace = match object.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => ns.to_string(),
        _ => consts::DEFAULT_NAMESPACE.to_string(),
    };
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(object.name.as_deref().unwrap_or_default(), now)),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        involved_object: object.clone(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some(type_.as_str().to_string()),
        source: Some(source.clone()),
        reporting_component: source.component.clone(),
        reporting_instance: Some(source.host.clone().unwrap_or_default()),
        ..Event::default()
    }
}

/// `<name>.<unix nanoseconds in lowercase hex>` (client-go: `fmt.Sprintf("%v.%x", ...)`).
fn event_name(involved_name: &str, now: jiff::Timestamp) -> String {
    format!("{involved_name}.{:x}", now.as_nanosecond())
}

// ---------------------------------------------------------------------------------------------
// Correlation (pure; wall clock injected)
// ---------------------------------------------------------------------------------------------

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
struct Lru<V> {
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
    fn new(cap: usize) -> Self {
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

    fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let key = self.digest(key);
        self.touch(key);
        self.entries.get_mut(&key).map(|(v, _)| v)
    }

    fn add(&mut self, key: String, value: V) {
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

    fn len(&self) -> usize {
        self.entries.len()
    }
}

fn s(o: &Option<String>) -> &str {
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
fn aggregate_keys(event: &Event) -> (String, String) {
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
struct AggregateRecord {
    local_keys: BTreeSet<String>,
    last: jiff::Timestamp,
}

/// What the logger remembers about an event it has seen (client-go `eventLog`).
#[derive(Debug, Clone)]
struct EventLog {
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
    spam: Lru<TokenBucket<jiff::Timestamp>>,
    aggregates: Lru<AggregateRecord>,
    logs: Lru<EventLog>,
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
    fn sizes(&self) -> (usize, usize, usize) {
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

// ---------------------------------------------------------------------------------------------
// Writer task
// ---------------------------------------------------------------------------------------------

struct Writer {
    client: kube::Client,
    correlator: EventCorrelator,
    sleep: Duration,
    /// The correlator's cache sizes after its last event, for [`tracked`]; dropped with the
    /// task, which ends the registration.
    sizes: Arc<CacheSizes>,
}

/// The entries of the three correlation caches of one recorder.
#[derive(Debug, Default)]
struct CacheSizes {
    spam: AtomicUsize,
    aggregates: AtomicUsize,
    logs: AtomicUsize,
}

impl CacheSizes {
    fn report(&self, out: &mut Vec<tracked::Size>) {
        let read = |n: &AtomicUsize| n.load(AtomicOrdering::Relaxed);
        out.push(tracked::Size::capacity("events_spam", read(&self.spam)));
        out.push(tracked::Size::capacity(
            "events_aggregates",
            read(&self.aggregates),
        ));
        out.push(tracked::Size::capacity("events_logs", read(&self.logs)));
    }

    fn update(&self, correlator: &EventCorrelator) {
        let (spam, aggregates, logs) = correlator.sizes();
        self.spam.store(spam, AtomicOrdering::Relaxed);
        self.aggregates.store(aggregates, AtomicOrdering::Relaxed);
        self.logs.store(logs, AtomicOrdering::Relaxed);
    }
}

/// How one write attempt ended.
enum Attempt {
    Done,
    Retry,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Event>) {
        while let Some(event) = rx.recv().await {
            self.record(event).await;
        }
        tracing::debug!("event writer stopped");
    }

    async fn record(&mut self, event: Event) {
        let decision = self.correlator.correlate(event);
        self.sizes.update(&self.correlator);
        let (event, patch) = match decision {
            Correlation::Skip => return,
            Correlation::Create(e) => (e, None),
            Correlation::Patch { event, patch } => (event, Some(patch)),
        };
        let mut tries = 0;
        loop {
            if let Attempt::Done = self.attempt(&event, patch.as_ref()).await {
                return;
            }
            tries += 1;
            if tries >= consts::MAX_TRIES_PER_EVENT {
                tracing::error!(
                    name = s(&event.metadata.name),
                    reason = s(&event.reason),
                    "unable to write event (retry limit exceeded)"
                );
                return;
            }
            // Randomise the first pause so many clients do not retry in lockstep after an
            // apiserver outage.
            let delay = if tries == 1 {
                self.sleep.mul_f64(rand::random::<f64>())
            } else {
                self.sleep
            };
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt(&mut self, event: &Event, patch: Option<&serde_json::Value>) -> Attempt {
        let namespace = s(&event.metadata.namespace);
        let mut result = None;
        if let Some(patch) = patch {
            let name = s(&event.metadata.name);
            let r = crate::write::patch::<Event, _>(
                &self.client,
                Some(namespace),
                name,
                &Patch::Strategic(patch),
            )
            .await;
            // The aggregated-into Event may have expired or been deleted: create it anew.
            let gone = matches!(&r, Err(kube::Error::Api(st)) if st.is_not_found());
            if !gone {
                result = Some(r);
            }
        }
        let result = match result {
            Some(r) => r,
            None => {
                let mut fresh = event.clone();
                fresh.metadata.resource_version = None;
                crate::write::create(&self.client, Some(namespace), &fresh).await
            }
        };
        match result {
            Ok(written) => {
                // The server stores what was sent (the patch sets the count, message and last
                // time the correlator computed): only its name and resourceVersion are new.
                let mut server = event.clone();
                server.metadata.resource_version = written.resource_version;
                if written.name.is_some() {
                    server.metadata.name = written.name;
                }
                self.correlator.update_state(&server);
                Attempt::Done
            }
            Err(kube::Error::Api(status)) => {
                let terminating = status.details.as_ref().is_some_and(|d| {
                    d.causes
                        .iter()
                        .any(|c| c.reason == consts::NAMESPACE_TERMINATING_CAUSE)
                });
                if status.is_already_exists() || terminating {
                    tracing::debug!(
                        name = s(&event.metadata.name),
                        error = %status.message,
                        "server rejected event (will not retry)"
                    );
                } else {
                    tracing::error!(
                        name = s(&event.metadata.name),
                        reason = s(&event.reason),
                        code = status.code,
                        error = %status.message,
                        "server rejected event (will not retry)"
                    );
                }
                Attempt::Done
            }
            Err(e @ kube::Error::BuildRequest(_)) => {
                tracing::error!(name = s(&event.metadata.name), error = %e, "unable to construct event (will not retry)");
                Attempt::Done
            }
            Err(e) => {
                tracing::error!(name = s(&event.metadata.name), error = %e, "unable to write event (may retry after sleeping)");
                Attempt::Retry
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};
    use k8s_openapi::api::core::v1::Pod;
    use rkcm_testkit::fake_api::{FakeApi, Reply, Request};

    fn t0() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_700_000_000).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    }

    fn pod_ref() -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some("web-0".into()),
            namespace: Some("ns".into()),
            uid: Some("u1".into()),
            resource_version: Some("7".into()),
            field_path: None,
        }
    }

    fn source() -> EventSource {
        EventSource {
            component: Some("replicaset-controller".into()),
            host: None,
        }
    }

    fn ev(clock: &FakeClock, reason: &str, message: &str) -> Event {
        make_event(
            &source(),
            &pod_ref(),
            EventType::Warning,
            reason,
            message,
            clock.wall(),
        )
    }

    /// Plays the writer: correlate, then feed back the "server" copy as a real write would.
    fn write(c: &mut EventCorrelator, e: Event) -> Correlation {
        let d = c.correlate(e);
        match &d {
            Correlation::Create(e) | Correlation::Patch { event: e, .. } => {
                let mut server = e.clone();
                server.metadata.resource_version = Some("1".into());
                c.update_state(&server);
            }
            Correlation::Skip => {}
        }
        d
    }

    fn setup() -> (FakeClock, EventCorrelator) {
        let clock = FakeClock::new(t0());
        let c = EventCorrelator::new(Arc::new(clock.clone()));
        (clock, c)
    }

    #[test]
    fn make_event_fills_core_v1_fields() {
        let clock = FakeClock::new(t0());
        let e = ev(&clock, "FailedCreate", "Error creating: boom");
        let nanos = t0().as_nanosecond();
        assert_eq!(
            e.metadata.name.as_deref(),
            Some(format!("web-0.{nanos:x}").as_str())
        );
        assert_eq!(e.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(e.count, Some(1));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(
            e.source.as_ref().and_then(|s| s.component.as_deref()),
            Some("replicaset-controller")
        );
        assert_eq!(
            e.reporting_component.as_deref(),
            Some("replicaset-controller")
        );
        assert_eq!(e.first_timestamp, e.last_timestamp);
        assert_eq!(e.involved_object.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn cluster_scoped_objects_get_events_in_default() {
        let mut r = pod_ref();
        r.namespace = None;
        let e = make_event(&source(), &r, EventType::Normal, "R", "m", t0());
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(e.involved_object.namespace, None);
    }

    #[test]
    fn object_reference_has_kind_version_and_resource_version() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                resource_version: Some("42".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let r = object_reference(&pod);
        assert_eq!(r.kind.as_deref(), Some("Pod"));
        assert_eq!(r.api_version.as_deref(), Some("v1"));
        assert_eq!(r.resource_version.as_deref(), Some("42"));
        assert_eq!(r.uid.as_deref(), Some("u"));
    }

    #[test]
    fn thirty_identical_events_in_a_burst_make_one_event_with_count_25() {
        let (clock, mut c) = setup();
        let mut creates = 0;
        let mut patches = 0;
        let mut skips = 0;
        let mut last_count = 0;
        let mut names = BTreeSet::new();
        for _ in 0..30 {
            match write(&mut c, ev(&clock, "FailedCreate", "Error creating: quota")) {
                Correlation::Create(e) => {
                    creates += 1;
                    last_count = e.count.unwrap_or(0);
                    names.insert(e.metadata.name.clone());
                }
                Correlation::Patch { event, patch } => {
                    patches += 1;
                    last_count = event.count.unwrap_or(0);
                    assert_eq!(patch["count"], serde_json::json!(last_count));
                    assert_eq!(patch["message"], serde_json::json!("Error creating: quota"));
                    assert!(patch.get("lastTimestamp").is_some());
                    names.insert(event.metadata.name.clone());
                }
                Correlation::Skip => skips += 1,
            }
            clock.advance(Duration::from_millis(10));
        }
        assert_eq!((creates, patches, skips), (1, 24, 5));
        assert_eq!(last_count, 25);
        assert_eq!(names.len(), 1, "every write targets the same Event object");
    }

    #[test]
    fn spam_filter_refills_one_token_per_five_minutes() {
        let (clock, mut c) = setup();
        for i in 0..25 {
            assert_ne!(
                write(&mut c, ev(&clock, "R", &format!("m{}", i % 3))),
                Correlation::Skip
            );
        }
        assert_eq!(write(&mut c, ev(&clock, "R", "m0")), Correlation::Skip);
        clock.advance(Duration::from_secs(299));
        assert_eq!(write(&mut c, ev(&clock, "R", "m0")), Correlation::Skip);
        clock.advance(Duration::from_secs(1));
        // Upstream keeps counting dropped repeats, so the next accepted patch jumps ahead.
        match write(&mut c, ev(&clock, "R", "m0")) {
            Correlation::Patch { event, .. } => assert_eq!(event.count, Some(12)),
            other => panic!("expected a patch, got {other:?}"),
        }
        assert_eq!(write(&mut c, ev(&clock, "R", "m0")), Correlation::Skip);
    }

    #[test]
    fn spam_filter_is_per_object() {
        let (clock, mut c) = setup();
        for _ in 0..25 {
            write(&mut c, ev(&clock, "R", "m"));
        }
        assert_eq!(write(&mut c, ev(&clock, "R", "m")), Correlation::Skip);
        let mut other = ev(&clock, "R", "m");
        other.involved_object.name = Some("web-1".into());
        other.involved_object.uid = Some("u2".into());
        assert!(matches!(write(&mut c, other), Correlation::Create(_)));
    }

    #[test]
    fn ten_similar_events_are_aggregated() {
        let (clock, mut c) = setup();
        for i in 1..=9 {
            match write(
                &mut c,
                ev(&clock, "FailedCreate", &format!("Error creating: {i}")),
            ) {
                Correlation::Create(e) => assert_eq!(
                    e.message.as_deref(),
                    Some(format!("Error creating: {i}").as_str())
                ),
                other => panic!("event {i}: expected create, got {other:?}"),
            }
            clock.advance(Duration::from_secs(1));
        }
        let aggregated_name = match write(&mut c, ev(&clock, "FailedCreate", "Error creating: 10"))
        {
            Correlation::Create(e) => {
                assert_eq!(
                    e.message.as_deref(),
                    Some("(combined from similar events): Error creating: 10")
                );
                assert_eq!(e.count, Some(1));
                e.metadata.name
            }
            other => panic!("expected aggregated create, got {other:?}"),
        };
        clock.advance(Duration::from_secs(1));
        match write(&mut c, ev(&clock, "FailedCreate", "Error creating: 11")) {
            Correlation::Patch { event, patch } => {
                assert_eq!(event.metadata.name, aggregated_name);
                assert_eq!(event.count, Some(2));
                assert_eq!(
                    patch["message"],
                    serde_json::json!("(combined from similar events): Error creating: 11")
                );
            }
            other => panic!("expected patch of the aggregate, got {other:?}"),
        }
    }

    #[test]
    fn aggregation_window_expires_after_ten_minutes() {
        let (clock, mut c) = setup();
        for i in 1..=9 {
            write(&mut c, ev(&clock, "R", &format!("m{i}")));
        }
        clock.advance(Duration::from_secs(601));
        match write(&mut c, ev(&clock, "R", "m10")) {
            Correlation::Create(e) => assert_eq!(e.message.as_deref(), Some("m10")),
            other => panic!("expected a plain create, got {other:?}"),
        }
    }

    #[test]
    fn different_reasons_are_not_aggregated_together() {
        let (clock, mut c) = setup();
        for i in 0..12 {
            let reason = if i % 2 == 0 { "A" } else { "B" };
            match write(&mut c, ev(&clock, reason, &format!("m{i}"))) {
                Correlation::Create(e) => assert!(!s(&e.message).starts_with("(combined")),
                other => panic!("expected create, got {other:?}"),
            }
        }
    }

    #[test]
    fn lru_evicts_least_recently_used() {
        let mut l = Lru::new(2);
        l.add("a".into(), 1);
        l.add("b".into(), 2);
        assert_eq!(l.get_mut("a").copied(), Some(1));
        l.add("c".into(), 3);
        assert_eq!(l.len(), 2);
        assert!(l.get_mut("b").is_none());
        assert!(l.get_mut("a").is_some());
        assert!(l.get_mut("c").is_some());
    }

    /// An event about pod `name` (its own uid).
    fn ev_about(clock: &FakeClock, name: &str, reason: &str, message: &str) -> Event {
        let mut object = pod_ref();
        object.name = Some(name.into());
        object.uid = Some(format!("uid-{name}"));
        make_event(
            &source(),
            &object,
            EventType::Normal,
            reason,
            message,
            clock.wall(),
        )
    }

    #[test]
    fn objects_gone_quiet_leave_the_aggregation_and_spam_caches() {
        let (clock, mut c) = setup();
        for i in 0..50 {
            let name = format!("gone-{i}");
            write(&mut c, ev_about(&clock, &name, "Created", "created it"));
        }
        assert_eq!(
            (c.aggregates.len(), c.spam.len(), c.logs.len()),
            (50, 50, 50)
        );
        // Within the aggregation window nothing is dropped, even after a sweep.
        clock.advance(Duration::from_secs(120));
        write(&mut c, ev_about(&clock, "other", "Created", "created it"));
        assert_eq!((c.aggregates.len(), c.spam.len()), (51, 51));
        // Past the window and the bucket refill, the quiet objects' entries are gone; the
        // logger keeps its entries (bounded by its LRU, as upstream's).
        clock.advance(Duration::from_secs(500));
        write(&mut c, ev_about(&clock, "new", "Created", "created it"));
        assert_eq!((c.aggregates.len(), c.spam.len(), c.logs.len()), (2, 1, 52));
        // "other" had its record refreshed 500 s ago: still within the window.
        assert!(
            c.aggregates
                .get_mut(&aggregate_keys(&ev_about(&clock, "other", "Created", "x")).0)
                .is_some()
        );
    }

    #[test]
    fn sweeping_keeps_every_bucket_that_still_limits() {
        let (clock, mut c) = setup();
        // 30 events in a burst: 25 pass, the spam filter drops 5; the bucket is empty.
        let passed = (0..30)
            .filter(|i| {
                let e = ev(&clock, "Unhealthy", &format!("probe failed {i}"));
                write(&mut c, e) != Correlation::Skip
            })
            .count();
        assert_eq!(passed, 25);
        // 601 s later two tokens have come back (one per 300 s): two events pass, the third
        // is dropped, exactly as if nothing had been swept.
        clock.advance(Duration::from_secs(601));
        let after: Vec<bool> = (0..3)
            .map(|i| {
                write(&mut c, ev(&clock, "Unhealthy", &format!("later {i}"))) != Correlation::Skip
            })
            .collect();
        assert_eq!(after, vec![true, true, false]);
    }

    /// A writer whose requests go to `api`.
    fn writer(api: &FakeApi) -> (Writer, FakeClock) {
        let clock = FakeClock::new(t0());
        let w = Writer {
            client: api.client(),
            correlator: EventCorrelator::new(Arc::new(clock.clone())),
            sleep: Duration::from_millis(1),
            sizes: Arc::default(),
        };
        (w, clock)
    }

    /// Echoes creates and patches like the apiserver, with a resourceVersion.
    fn echo(req: &Request) -> Reply {
        let mut body = req.body.clone();
        if req.method == "PATCH" {
            body = serde_json::json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x", "namespace": "ns"}, "involvedObject": {}});
        }
        body["metadata"]["resourceVersion"] = serde_json::json!("5");
        Reply::json(if req.method == "POST" { 201 } else { 200 }, body)
    }

    #[tokio::test]
    async fn writer_creates_then_patches_the_count() {
        let api = FakeApi::new();
        api.on_fn("*", "**", echo);
        let (mut w, clock) = writer(&api);
        for _ in 0..3 {
            w.record(ev(&clock, "FailedCreate", "Error creating: x"))
                .await;
            clock.advance(Duration::from_secs(1));
        }
        // One key in each cache, as reported to `tracked`.
        let mut sizes = Vec::new();
        w.sizes.report(&mut sizes);
        let entries: Vec<_> = sizes.iter().map(|s| (s.map, s.entries)).collect();
        assert_eq!(
            entries,
            vec![
                ("events_spam", 1),
                ("events_aggregates", 1),
                ("events_logs", 1)
            ]
        );
        let reqs = api.requests();
        let methods: Vec<_> = reqs.iter().map(|r| r.method.as_str()).collect();
        assert_eq!(methods, vec!["POST", "PATCH", "PATCH"]);
        assert_eq!(reqs[0].path, "/api/v1/namespaces/ns/events");
        assert_eq!(reqs[0].body["source"]["component"], "replicaset-controller");
        assert_eq!(reqs[0].body["count"], 1);
        let name = reqs[0].body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(reqs[1].path, format!("/api/v1/namespaces/ns/events/{name}"));
        assert_eq!(
            reqs[1].content_type,
            "application/strategic-merge-patch+json"
        );
        assert_eq!(reqs[2].body["count"], 3);
        assert_eq!(reqs[2].body["message"], "Error creating: x");
    }

    #[tokio::test]
    async fn writer_recreates_when_the_patched_event_is_gone() {
        let api = FakeApi::new();
        api.on("PATCH", "**", Reply::not_found("events", "x"))
            .on_fn("*", "**", echo);
        let (mut w, clock) = writer(&api);
        w.record(ev(&clock, "R", "m")).await;
        w.record(ev(&clock, "R", "m")).await;
        let reqs = api.requests();
        let methods: Vec<_> = reqs.iter().map(|r| r.method.as_str()).collect();
        assert_eq!(methods, vec!["POST", "PATCH", "POST"]);
        assert_eq!(reqs[2].body["count"], 2);
        assert!(reqs[2].body["metadata"].get("resourceVersion").is_none());
    }

    #[tokio::test]
    async fn writer_does_not_retry_status_errors() {
        let api = FakeApi::new();
        api.on("*", "**", Reply::forbidden("events is forbidden"));
        let (mut w, clock) = writer(&api);
        w.record(ev(&clock, "R", "m")).await;
        assert_eq!(api.count(), 1);
    }

    #[tokio::test]
    async fn writer_retries_transport_failures() {
        let api = FakeApi::new();
        api.times(2, "*", "**", Reply::transport_error("connection refused"))
            .on(
                "*",
                "**",
                Reply::created(
                    serde_json::json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"}, "involvedObject": {}}),
                ),
            );
        let (mut w, clock) = writer(&api);
        w.record(ev(&clock, "R", "m")).await;
        assert_eq!(api.count(), 3);
    }

    #[test]
    fn fake_recorder_captures_events() {
        let (rec, events) = EventRecorder::fake("deployment-controller");
        rec.event(
            &pod_ref(),
            EventType::Normal,
            "ScalingReplicaSet",
            "Scaled up",
        );
        let got = events.take();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].reason, "ScalingReplicaSet");
        assert_eq!(got[0].type_, EventType::Normal);
        assert!(events.all().is_empty());
    }
}
