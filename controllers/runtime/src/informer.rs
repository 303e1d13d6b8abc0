//! Shared informers: one LIST+WATCH per resource type for the whole process, an indexed
//! in-memory cache, and ordered `(old, new)` change delivery to every subscriber.
//!
//! Mirrors client-go `tools/cache`: the reflector (list, then watch from the list's
//! resourceVersion, relist on `410 Gone`), `shared_informer.go` (one informer per type, one
//! buffer per listener, synthetic adds for late listeners, `WaitForCacheSync`) and the
//! `DeltaFIFO.Replace` semantics of a relist (new keys are adds, known keys are updates,
//! vanished keys are deletes with `DeletedFinalStateUnknown`).
//!
//! Guarantees:
//! - [`InformerFactory::informer`] returns the same informer for the same type, so a type is
//!   listed and watched once no matter how many controllers read it.
//! - The engine is `kube::runtime::watcher` (paged LIST of 500 served from the watch cache,
//!   bookmarks, re-watch from the last resourceVersion, relist on an in-stream 410), retried
//!   with a backoff of 0.8 s doubling to 4 s (kube's and client-go's go up to 30 s, which
//!   delays recovery after an API server outage); a watch *request* answered with 410 also forces a
//!   relist (kube-rs would retry the expired resourceVersion forever). Errors are logged and
//!   retried until shutdown; they never end the informer.
//! - A relist replaces the cache atomically and delivers the difference, so a delete missed
//!   while the watch was down still reaches every subscriber, as a tombstone
//!   (`final_state_unknown: true`) carrying the last state the cache knew.
//! - Each subscriber has its own unbounded buffer and task, so a slow subscriber never holds
//!   up the watch or another subscriber. Every subscriber sees every change exactly once and
//!   in order; one that subscribes late first gets `Added` for everything already cached.
//! - Stored objects never carry `metadata.managedFields`, and once a controller declares the
//!   fields it reads ([`Informer::keep`], see [`crate::projection`]) they carry only the
//!   fields some declaring controller reads. A declaration that widens the projection of a
//!   started informer relists it, and `has_synced` is false until that relist is complete.
//! - `has_synced` turns true once the first complete list is in the cache and its changes are
//!   queued to every subscriber registered by then.
//! - [`Store::last_synced_resource_version`] is the newest resourceVersion the cache reflects
//!   (client-go `LastStoreSyncResourceVersion`), advanced in the same critical section that
//!   applies the change; [`Informer::wait_for_resource_version`] waits for it. kube's watcher
//!   keeps list resourceVersions and bookmarks to itself, so it is the newest resourceVersion of
//!   an object the cache applied (watch events in order; a relist contributes its newest
//!   object): never ahead of client-go's value, at most behind it by writes that left no object.

use std::any::{Any, TypeId};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Debug;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{self, AtomicBool};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, ListSemantic};
use kube::{Api, Resource};
use parking_lot::{Mutex, RwLock};
use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use serde::de::DeserializeOwned;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::fasthash::HashMap as FastMap;
use crate::keys;
use crate::metrics::{get_or_register, register};
use crate::projection::{Fields, Projectable};

/// Name of the built-in index by namespace.
pub const INDEX_NAMESPACE: &str = "namespace";
/// Name of the built-in index by the UID of the controller owner reference.
pub const INDEX_CONTROLLER_UID: &str = "controller-uid";
/// Name of the built-in index of objects without a controller owner reference, by namespace
/// (upstream's orphan key of `PodControllerUIDIndex`): with [`INDEX_CONTROLLER_UID`] it gives
/// the objects one owner may claim without scanning its whole namespace.
pub const INDEX_ORPHANS_BY_NAMESPACE: &str = "orphans-by-namespace";
/// Name of the pod index by `spec.nodeName`; register it with
/// `informer.add_index(INDEX_NODE_NAME, pods_by_node)`.
pub const INDEX_NODE_NAME: &str = "node-name";

/// Index function for pods by the node they are bound to; unscheduled pods are not indexed.
pub fn pods_by_node(pod: &crate::cached::Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
        .into_iter()
        .collect()
}

/// LIST page size, as client-go's pager.
const PAGE_SIZE: u32 = 500;
/// Watch `timeoutSeconds` is drawn from this range per informer so that the informers of a
/// process (and of many processes) do not all reconnect at once (client-go: [5m, 10m)).
const WATCH_TIMEOUT_SECS: std::ops::Range<u32> = 300..600;
/// Pause before rebuilding the list+watch stream should it ever end.
const RESTART_DELAY: Duration = Duration::from_secs(1);
/// First wait before retrying a failed list or watch (kube's and client-go's: 0.8 s).
const RETRY_FIRST: Duration = Duration::from_millis(800);
/// Longest wait between two retries. kube's and client-go's default is 30 s, so after an API
/// server outage of half a minute or more an informer may sit out another 30 s (plus jitter)
/// after the server is back, and every controller with it. A controller-manager holds a
/// handful of watches: a retry every few seconds costs the server nothing.
const RETRY_MAX: Duration = Duration::from_secs(4);
/// Retrying without failure for this long starts the backoff over (kube's reset timer).
const RETRY_RESET_AFTER: Duration = Duration::from_secs(120);

/// The wait before retry number `attempt` (0 for the first) of a failed list or watch:
/// [`RETRY_FIRST`] doubling per attempt up to [`RETRY_MAX`], scaled by `jitter` (in `[0, 1)`)
/// into `[d/2, d)` so that the informers of a process do not all retry at once.
fn retry_wait(attempt: u32, jitter: f64) -> Duration {
    let full = RETRY_FIRST
        .saturating_mul(1u32 << attempt.min(16))
        .min(RETRY_MAX);
    full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// The informers' retry backoff (see [`retry_wait`]); starts over after a success.
#[derive(Debug, Default)]
struct RetryBackoff {
    attempt: u32,
}

impl Iterator for RetryBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let wait = retry_wait(self.attempt, rand::random::<f64>());
        self.attempt = self.attempt.saturating_add(1);
        Some(wait)
    }
}

impl kube::runtime::utils::Backoff for RetryBackoff {
    fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The retry backoff of the shared informers (see [`retry_wait`]), for any other watch that
/// should come back as quickly after an API server outage (`.backoff(retry_backoff())`).
pub fn retry_backoff() -> impl kube::runtime::utils::Backoff {
    kube::runtime::utils::ResetTimerBackoff::new(RetryBackoff::default(), RETRY_RESET_AFTER)
}

/// Bounds every informed type satisfies.
pub trait Informable:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}
impl<K> Informable for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// A change delivered to subscribers, in order, per subscriber.
#[derive(Debug, Clone)]
pub enum Change<K> {
    Added(Arc<K>),
    Updated {
        old: Arc<K>,
        new: Arc<K>,
    },
    /// `final_state_unknown`: the delete was inferred on a relist (a tombstone); `obj` is the
    /// last state the cache knew.
    Deleted {
        obj: Arc<K>,
        final_state_unknown: bool,
    },
}

impl<K> Change<K> {
    /// The object as it is now (for `Deleted`: its last known state).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Change::Added(obj) | Change::Updated { new: obj, .. } | Change::Deleted { obj, .. } => {
                obj
            }
        }
    }

    /// The metric label of the change kind.
    fn kind(&self) -> &'static str {
        match self {
            Change::Added(_) => "added",
            Change::Updated { .. } => "updated",
            Change::Deleted { .. } => "deleted",
        }
    }
}

/// An index function: the index values of one object.
pub type IndexFn<K> = fn(&K) -> Vec<String>;

fn index_by_namespace<K: Resource>(obj: &K) -> Vec<String> {
    match obj.meta().namespace.as_deref() {
        Some(ns) if !ns.is_empty() => vec![ns.to_string()],
        _ => Vec::new(),
    }
}

fn index_by_controller_uid<K: Resource>(obj: &K) -> Vec<String> {
    keys::controller_uid(obj)
        .map(str::to_string)
        .into_iter()
        .collect()
}

fn index_orphans_by_namespace<K: Resource>(obj: &K) -> Vec<String> {
    if keys::controller_uid(obj).is_some() {
        return Vec::new();
    }
    index_by_namespace(obj)
}

// ---------------------------------------------------------------------------------------------
// The pure core: cache contents, indexes and the watcher-event state machine.
// ---------------------------------------------------------------------------------------------

/// Index value -> key -> object. The objects themselves are kept (as in `objects`), so a
/// lookup clones `Arc`s without hashing every key a second time.
type Index<K> = FastMap<String, FastMap<String, Arc<K>>>;
/// Index name -> index.
type Indices<K> = FastMap<&'static str, Index<K>>;

/// The cache of one informer and the state machine that turns watcher events into changes.
/// No I/O and no locking: the informer wraps it in a lock and delivers what it returns.
pub(crate) struct State<K> {
    objects: FastMap<String, Arc<K>>,
    indexers: BTreeMap<&'static str, IndexFn<K>>,
    indices: Indices<K>,
    /// Objects of a relist in progress (between `Init` and `InitDone`); `None` when not
    /// relisting. Kept apart so readers see the old cache until the new list is complete.
    relist: Option<FastMap<String, Arc<K>>>,
    synced: bool,
    /// The newest resourceVersion the contents reflect; `None` before any versioned object.
    last_synced_rv: Option<String>,
    /// What cached objects keep; `None`: whole objects (nobody declared).
    projection: Option<Projection<K>>,
    /// The projection widened after objects were cached or listed: a relist must bring the
    /// fields they lack, and the cache is not synced until it has.
    reproject_pending: bool,
    /// The relist in progress started after a widening: objects it brings replace cached
    /// ones even at the same resourceVersion.
    reprojecting: bool,
}

/// How one type is trimmed, and which optional groups its cache keeps.
struct Projection<K> {
    apply: fn(&mut K, Fields),
    keep: Fields,
}

impl<K: Resource + Clone> State<K> {
    pub(crate) fn new() -> Self {
        let mut state = Self {
            objects: FastMap::default(),
            indexers: BTreeMap::new(),
            indices: FastMap::default(),
            relist: None,
            synced: false,
            last_synced_rv: None,
            projection: None,
            reproject_pending: false,
            reprojecting: false,
        };
        state.add_index(INDEX_NAMESPACE, index_by_namespace::<K>);
        state.add_index(INDEX_CONTROLLER_UID, index_by_controller_uid::<K>);
        state.add_index(INDEX_ORPHANS_BY_NAMESPACE, index_orphans_by_namespace::<K>);
        state
    }

    /// Registers an index and builds it from the current contents; a known name is a no-op.
    pub(crate) fn add_index(&mut self, name: &'static str, f: IndexFn<K>) {
        if self.indexers.contains_key(name) {
            return;
        }
        self.indexers.insert(name, f);
        let mut index: Index<K> = FastMap::default();
        for (key, obj) in &self.objects {
            for value in f(obj) {
                index
                    .entry(value)
                    .or_default()
                    .insert(key.clone(), obj.clone());
            }
        }
        self.indices.insert(name, index);
    }

    /// Adds `keep` to what cached objects keep (trimmed by `apply`). True when that widened
    /// the projection of objects already cached or being listed: they lack fields now
    /// declared, so the cache is unsynced until a relist has brought them.
    pub(crate) fn declare(&mut self, apply: fn(&mut K, Fields), keep: Fields) -> bool {
        let widened = match self.projection.as_mut() {
            None => {
                // The first declaration narrows: cached whole objects hold every field.
                self.projection = Some(Projection { apply, keep });
                false
            }
            Some(p) => {
                let wider = p.keep.union(keep);
                let widened = wider != p.keep;
                p.keep = wider;
                widened
            }
        };
        let holds_objects = !self.objects.is_empty() || self.relist.is_some();
        if widened && holds_objects {
            self.reproject_pending = true;
            self.synced = false;
            return true;
        }
        false
    }

    /// The object as the cache keeps it.
    fn strip(&self, mut obj: K) -> K {
        obj.meta_mut().managed_fields = None;
        if let Some(p) = &self.projection {
            (p.apply)(&mut obj, p.keep);
        }
        obj
    }

    /// Applies one watcher event and returns the changes subscribers must see, in order.
    pub(crate) fn apply(&mut self, event: watcher::Event<K>) -> Vec<Change<K>> {
        match event {
            watcher::Event::Init => {
                // A new list starts; a partial list left by a failed one is discarded.
                self.relist = Some(FastMap::default());
                self.reprojecting = std::mem::take(&mut self.reproject_pending);
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                let obj = self.strip(obj);
                match self.relist.as_mut() {
                    Some(buffer) => {
                        buffer.insert(keys::key_of(&obj), Arc::new(obj));
                        Vec::new()
                    }
                    // kube-rs never sends this outside a list; treat it as a watch event
                    // rather than lose it.
                    None => {
                        self.observe_version(obj.meta().resource_version.as_deref());
                        self.upsert(obj).into_iter().collect()
                    }
                }
            }
            watcher::Event::InitDone => {
                let listed = self.relist.take().unwrap_or_default();
                let newest = newest_version(
                    listed
                        .values()
                        .filter_map(|o| o.meta().resource_version.as_deref()),
                );
                self.observe_version(newest.as_deref());
                let changes = self.replace(listed);
                self.reprojecting = false;
                // A widening during this list needs one more.
                self.synced = !self.reproject_pending;
                changes
            }
            watcher::Event::Apply(obj) => {
                self.observe_version(obj.meta().resource_version.as_deref());
                let obj = self.strip(obj);
                self.upsert(obj).into_iter().collect()
            }
            watcher::Event::Delete(obj) => {
                // A delete advances the version even when the object was never cached.
                self.observe_version(obj.meta().resource_version.as_deref());
                let obj = self.strip(obj);
                self.delete(obj).into_iter().collect()
            }
        }
    }

    /// The newest resourceVersion the contents reflect.
    pub(crate) fn last_synced_resource_version(&self) -> Option<&str> {
        self.last_synced_rv.as_deref()
    }

    /// Advances the synced resourceVersion to `rv`. Comparable versions only move forward
    /// (a relist served from an older cache does not move it back); an incomparable one
    /// replaces it, as the newest seen, as client-go records whatever it saw last.
    fn observe_version(&mut self, rv: Option<&str>) {
        let Some(rv) = rv.filter(|rv| !rv.is_empty()) else {
            return;
        };
        let newer = match self.last_synced_rv.as_deref() {
            None => true,
            Some(current) => {
                compare_resource_versions(current, rv) != Some(Ordering::Greater) && current != rv
            }
        };
        if newer {
            self.last_synced_rv = Some(rv.to_owned());
        }
    }

    pub(crate) fn has_synced(&self) -> bool {
        self.synced
    }

    fn upsert(&mut self, obj: K) -> Option<Change<K>> {
        let key = keys::key_of(&obj);
        let new = Arc::new(obj);
        match self.objects.get(&key).cloned() {
            None => {
                self.index_insert(&key, None, &new);
                self.objects.insert(key, new.clone());
                Some(Change::Added(new))
            }
            // Same resourceVersion: the same object seen twice (e.g. a re-watch replaying
            // an event); nothing changed.
            Some(old) if same_version(&*old, &*new) => None,
            Some(old) => {
                self.index_insert(&key, Some(&old), &new);
                self.objects.insert(key, new.clone());
                Some(Change::Updated { old, new })
            }
        }
    }

    fn delete(&mut self, obj: K) -> Option<Change<K>> {
        let key = keys::key_of(&obj);
        // As DeltaFIFO: a delete of an object the cache never had is dropped, so handlers
        // only see deletes of objects they saw added.
        let old = self.objects.remove(&key)?;
        self.index_remove(&key, &old);
        Some(Change::Deleted {
            obj: Arc::new(obj),
            final_state_unknown: false,
        })
    }

    /// Swaps in a complete list and returns the difference to the old contents: adds and
    /// updates in key order, then tombstones for keys that vanished, in key order.
    fn replace(&mut self, listed: FastMap<String, Arc<K>>) -> Vec<Change<K>> {
        let mut listed: Vec<(String, Arc<K>)> = listed.into_iter().collect();
        listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut vanished: Vec<String> = self
            .objects
            .keys()
            .filter(|key| listed.binary_search_by(|(k, _)| k.cmp(key)).is_err())
            .cloned()
            .collect();
        vanished.sort_unstable();

        let mut changes = Vec::new();
        for (key, new) in listed {
            match self.objects.get(&key).cloned() {
                None => {
                    self.index_insert(&key, None, &new);
                    self.objects.insert(key, new.clone());
                    changes.push(Change::Added(new));
                }
                Some(old) if same_version(&*old, &*new) => {
                    if self.reprojecting {
                        // The same version with the fields a widening added: swapped in
                        // silently, subscribers saw this version already.
                        self.index_insert(&key, Some(&old), &new);
                        self.objects.insert(key, new);
                    } else {
                        // As client-go's `Replace`: a known object listed again is an update
                        // even at the same version. Owner handlers enqueue on any update, so
                        // after an outage every owner is synced at once, including those
                        // whose retries the outage's failures left waiting in a long backoff;
                        // child handlers ignore updates that keep the version.
                        changes.push(Change::Updated {
                            old: old.clone(),
                            new: old,
                        });
                    }
                }
                Some(old) => {
                    self.index_insert(&key, Some(&old), &new);
                    self.objects.insert(key, new.clone());
                    changes.push(Change::Updated { old, new });
                }
            }
        }
        for key in vanished {
            if let Some(old) = self.objects.remove(&key) {
                self.index_remove(&key, &old);
                changes.push(Change::Deleted {
                    obj: old,
                    final_state_unknown: true,
                });
            }
        }
        changes
    }

    fn index_insert(&mut self, key: &str, old: Option<&K>, new: &Arc<K>) {
        for (name, f) in &self.indexers {
            let index = self.indices.entry(name).or_default();
            let new_values = f(new);
            if let Some(old) = old {
                for value in f(old) {
                    if !new_values.contains(&value) {
                        remove_from_index(index, &value, key);
                    }
                }
            }
            for value in new_values {
                let objects = index.entry(value).or_default();
                // Replace in place: an update keeps the key's entry.
                match objects.get_mut(key) {
                    Some(slot) => *slot = new.clone(),
                    None => {
                        objects.insert(key.to_string(), new.clone());
                    }
                }
            }
        }
    }

    fn index_remove(&mut self, key: &str, old: &K) {
        for (name, f) in &self.indexers {
            if let Some(index) = self.indices.get_mut(name) {
                for value in f(old) {
                    remove_from_index(index, &value, key);
                }
            }
        }
    }

    fn get(&self, key: &str) -> Option<Arc<K>> {
        self.objects.get(key).cloned()
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.objects.values().cloned().collect()
    }

    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        self.indices
            .get(index)
            .and_then(|values| values.get(value))
            .map(|objects| objects.values().cloned().collect())
            .unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.objects.len()
    }
}

fn remove_from_index<K>(index: &mut Index<K>, value: &str, key: &str) {
    if let Some(keys) = index.get_mut(value) {
        keys.remove(key);
        // Drop empty sets so an index over short-lived values (owner UIDs) does not grow
        // forever.
        if keys.is_empty() {
            index.remove(value);
        }
    }
}

/// Compares two resourceVersions as the integers the API server issues (upstream
/// `resourceversion.CompareResourceVersion`): digits only, no leading zero, longer is
/// larger. `None` when either is not of that form; resourceVersions are otherwise opaque.
pub fn compare_resource_versions(a: &str, b: &str) -> Option<Ordering> {
    fn valid(rv: &str) -> bool {
        !rv.is_empty()
            && rv.bytes().all(|c| c.is_ascii_digit())
            && (rv == "0" || !rv.starts_with('0'))
    }
    (valid(a) && valid(b)).then(|| a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

/// The newest of comparable resourceVersions; `None` if none is comparable.
fn newest_version<'a>(versions: impl Iterator<Item = &'a str>) -> Option<String> {
    versions
        .filter(|rv| compare_resource_versions(rv, rv).is_some())
        .max_by(|a, b| compare_resource_versions(a, b).unwrap_or(Ordering::Equal))
        .map(str::to_owned)
}

fn same_version<K: Resource>(a: &K, b: &K) -> bool {
    match (
        a.meta().resource_version.as_deref(),
        b.meta().resource_version.as_deref(),
    ) {
        (Some(a), Some(b)) => !a.is_empty() && a == b,
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------

struct Metrics {
    lists: IntCounterVec,
    events: IntCounterVec,
    objects: IntGaugeVec,
}

impl Metrics {
    fn build() -> prometheus::Result<Self> {
        Ok(Self {
            lists: register(IntCounterVec::new(
                Opts::new(
                    "rkcm_informer_lists_total",
                    "Full LISTs (initial list and relists) started by the shared informer of a resource.",
                ),
                &["resource"],
            )?),
            events: register(IntCounterVec::new(
                Opts::new(
                    "rkcm_informer_events_total",
                    "Changes delivered by the shared informer of a resource, by type (added, updated, deleted).",
                ),
                &["resource", "type"],
            )?),
            objects: register(IntGaugeVec::new(
                Opts::new(
                    "rkcm_informer_objects",
                    "Objects in the cache of the shared informer of a resource.",
                ),
                &["resource"],
            )?),
        })
    }
}

fn metrics() -> Option<&'static Metrics> {
    static METRICS: OnceLock<Option<Metrics>> = OnceLock::new();
    get_or_register(&METRICS, "informer", Metrics::build)
}

// ---------------------------------------------------------------------------------------------
// Factory
// ---------------------------------------------------------------------------------------------

/// The process-wide set of informers.
#[derive(Clone)]
pub struct InformerFactory {
    inner: Arc<FactoryInner>,
}

struct FactoryInner {
    client: kube::Client,
    source: Source,
    state: Mutex<FactoryState>,
}

/// How every informer of a factory lists and watches.
#[derive(Debug, Clone, Default)]
struct Source {
    list_mode: ListMode,
    scope: Scope,
    content_type: ContentType,
}

/// The encoding informers ask the API server for (`--kube-api-content-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentType {
    /// JSON for every type.
    Json,
    /// Protobuf for the types [`crate::protobuf`] reads (pods and nodes: most of the bytes a
    /// manager receives), JSON for the others. Upstream's default.
    #[default]
    Protobuf,
}

impl ContentType {
    /// The value of `--kube-api-content-type`: `None` for a media type informers cannot use.
    pub fn from_media_type(media_type: &str) -> Option<Self> {
        match media_type {
            "application/json" => Some(ContentType::Json),
            crate::protobuf::MEDIA_TYPE => Some(ContentType::Protobuf),
            _ => None,
        }
    }
}

/// Which objects the informers of a factory hold.
///
/// Upstream's `informers.WithNamespace`: a manager runs cluster-wide ([`Scope::Cluster`]);
/// tests that share one cluster run their in-process controllers on a factory scoped to
/// their own namespaces, so the controllers never see, let alone touch, other tests'
/// objects. Cluster-scoped types (Nodes) are always informed cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Scope {
    /// Every namespace (what the process uses).
    #[default]
    Cluster,
    /// Only objects of these namespaces. With one namespace, namespaced types are listed and
    /// watched with the field selector `metadata.namespace=<ns>`; with several, cluster-wide
    /// and filtered before the cache.
    Namespaces(BTreeSet<String>),
}

impl Scope {
    /// Only the namespace `ns`.
    pub fn namespace(ns: &str) -> Self {
        Self::Namespaces(BTreeSet::from([ns.to_owned()]))
    }

    /// Only the namespaces `namespaces`.
    pub fn namespaces<S: AsRef<str>>(namespaces: impl IntoIterator<Item = S>) -> Self {
        Self::Namespaces(
            namespaces
                .into_iter()
                .map(|n| n.as_ref().to_owned())
                .collect(),
        )
    }

    /// Whether an object of `namespace` (`None` or empty: cluster-scoped) is in scope.
    pub fn contains(&self, namespace: Option<&str>) -> bool {
        match self {
            Scope::Cluster => true,
            Scope::Namespaces(set) => namespace.is_none_or(|ns| ns.is_empty() || set.contains(ns)),
        }
    }

    /// The server-side field selector for type `K`, when the scope can be expressed as one.
    fn field_selector<K: Resource>(&self) -> Option<String> {
        match self {
            Scope::Namespaces(set) if set.len() == 1 && is_namespaced::<K>() => {
                set.first().map(|ns| format!("metadata.namespace={ns}"))
            }
            _ => None,
        }
    }
}

/// Whether `K` is a namespaced kind. kube's typed `Api` only names a namespace for types it
/// knows to be namespaced at compile time; the informer is generic over both, so it compares
/// the scope marker type instead.
fn is_namespaced<K: Resource>() -> bool {
    std::any::type_name::<K::Scope>()
        == std::any::type_name::<k8s_openapi::NamespaceResourceScope>()
}

/// How an informer gets its initial state (and its state after a 410).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListMode {
    /// Paginated LISTs (500 per page) from the apiserver watch cache, then a WATCH.
    #[default]
    Paged,
    /// One WATCH with `sendInitialEvents=true` that streams the initial state and goes on as
    /// the watch: no LIST requests and no page buffering. Upstream's `WatchListClient`
    /// feature gate (on by default since v1.34) does the same.
    Streaming,
}

#[derive(Default)]
struct FactoryState {
    informers: HashMap<TypeId, Box<dyn ErasedInformer>>,
    /// Set by `start`: later informers start at once with this token on this runtime.
    started: Option<(CancellationToken, Handle)>,
}

/// An informer of any type, as the factory keeps it.
trait ErasedInformer: Send + Sync {
    fn start(
        &self,
        client: &kube::Client,
        source: &Source,
        shutdown: &CancellationToken,
        runtime: &Handle,
    );
    fn as_any(&self) -> &dyn Any;
}

impl<K: Informable> ErasedInformer for Informer<K> {
    fn start(
        &self,
        client: &kube::Client,
        source: &Source,
        shutdown: &CancellationToken,
        runtime: &Handle,
    ) {
        self.start_on(client.clone(), source.clone(), shutdown.clone(), runtime);
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl InformerFactory {
    pub fn new(client: kube::Client) -> Self {
        Self::with_list_mode(client, ListMode::default())
    }

    /// A factory whose informers list the given way.
    pub fn with_list_mode(client: kube::Client, list_mode: ListMode) -> Self {
        Self::with_options(client, list_mode, ContentType::default())
    }

    /// A factory whose informers list the given way, asking for `content_type`.
    pub fn with_options(
        client: kube::Client,
        list_mode: ListMode,
        content_type: ContentType,
    ) -> Self {
        Self::scoped_with(client, Scope::Cluster, list_mode, content_type)
    }

    /// A factory whose informers hold only objects of namespace `ns` (and every object of a
    /// cluster-scoped type). For tests sharing a cluster.
    pub fn namespaced(client: kube::Client, ns: &str) -> Self {
        Self::scoped(client, Scope::namespace(ns))
    }

    /// A factory whose informers hold only the objects `scope` admits.
    pub fn scoped(client: kube::Client, scope: Scope) -> Self {
        Self::scoped_with(client, scope, ListMode::default(), ContentType::default())
    }

    /// [`InformerFactory::scoped`], listing the given way and asking for `content_type`.
    pub fn scoped_with(
        client: kube::Client,
        scope: Scope,
        list_mode: ListMode,
        content_type: ContentType,
    ) -> Self {
        Self::build(
            client,
            Source {
                list_mode,
                scope,
                content_type,
            },
        )
    }

    fn build(client: kube::Client, source: Source) -> Self {
        Self {
            inner: Arc::new(FactoryInner {
                client,
                source,
                state: Mutex::new(FactoryState::default()),
            }),
        }
    }

    /// Which objects this factory's informers hold.
    pub fn scope(&self) -> &Scope {
        &self.inner.source.scope
    }

    /// The informer for `K` (every object the factory's [`Scope`] admits), created on first
    /// request.
    pub fn informer<K: Informable>(&self) -> Informer<K> {
        let mut state = self.inner.state.lock();
        let type_id = TypeId::of::<K>();
        if let Some(existing) = state
            .informers
            .get(&type_id)
            .and_then(|erased| erased.as_any().downcast_ref::<Informer<K>>())
        {
            return existing.clone();
        }
        let informer = Informer::<K>::detached();
        if let Some((shutdown, runtime)) = &state.started {
            informer.start_on(
                self.inner.client.clone(),
                self.inner.source.clone(),
                shutdown.clone(),
                runtime,
            );
        }
        state.informers.insert(type_id, Box::new(informer.clone()));
        informer
    }

    /// Starts every informer requested so far; later requests start at once.
    ///
    /// Informers run on the Tokio runtime this is called from until `shutdown` is cancelled.
    /// Calling it again starts nothing new: the first token and runtime stay in force.
    ///
    /// # Panics
    /// When called outside a Tokio runtime.
    pub fn start(&self, shutdown: CancellationToken) {
        let mut state = self.inner.state.lock();
        let (shutdown, runtime) = state
            .started
            .get_or_insert_with(|| (shutdown, Handle::current()))
            .clone();
        for informer in state.informers.values() {
            informer.start(&self.inner.client, &self.inner.source, &shutdown, &runtime);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Informer
// ---------------------------------------------------------------------------------------------

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A handle on one shared informer. Cheap to clone.
pub struct Informer<K> {
    shared: Arc<Shared<K>>,
}
impl<K> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<K> {
    resource: String,
    inner: Arc<RwLock<Inner<K>>>,
    synced: tokio::sync::watch::Sender<bool>,
    started: AtomicBool,
    /// Asks the running list/watch to start over with a fresh list.
    relist: tokio::sync::Notify,
    /// Subscriber tasks created where no runtime was available; spawned on start.
    pending_tasks: Mutex<Vec<BoxFuture>>,
}

/// Cache and subscribers under one lock: a change is applied to the cache and queued to every
/// subscriber in one critical section, and a new subscriber snapshots the cache in another,
/// so a subscriber can neither miss a change nor see one twice.
struct Inner<K> {
    state: State<K>,
    subscribers: Vec<mpsc::UnboundedSender<Change<K>>>,
    /// `state.last_synced_resource_version()`, for waiters.
    synced_version: tokio::sync::watch::Sender<Option<String>>,
}

impl<K: Informable> Informer<K> {
    /// An informer no factory owns or starts; feed it with [`Informer::feed`]. For tests
    /// and fakes: code under test reads and subscribes exactly as with a shared informer.
    pub fn detached() -> Self {
        Self {
            shared: Arc::new(Shared {
                resource: K::plural(&()).into_owned(),
                inner: Arc::new(RwLock::new(Inner {
                    state: State::new(),
                    subscribers: Vec::new(),
                    synced_version: tokio::sync::watch::Sender::new(None),
                })),
                synced: tokio::sync::watch::Sender::new(false),
                started: AtomicBool::new(false),
                relist: tokio::sync::Notify::new(),
                pending_tasks: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The resource's plural name (e.g. `pods`), for logs and metric labels.
    pub fn resource_name(&self) -> &str {
        &self.shared.resource
    }

    pub fn store(&self) -> Store<K> {
        Store {
            inner: self.shared.inner.clone(),
        }
    }

    /// Declares that a controller reads the optional field groups `fields` of `K` (and the
    /// base, see [`crate::projection`]): from the first declaration on, the cache keeps only
    /// the base and the declared groups. Call it before the informer starts (in the crate's
    /// `informers`); a later declaration that widens the projection relists.
    pub fn keep(&self, fields: Fields)
    where
        K: Projectable,
    {
        let mut inner = self.shared.inner.write();
        if inner.state.declare(K::project, fields) {
            info!(resource = %self.shared.resource, "Projection widened; relisting");
            self.shared.synced.send_replace(false);
            self.shared.relist.notify_one();
        }
    }

    /// Registers a secondary index; registering the same name twice is a no-op.
    pub fn add_index(&self, name: &'static str, f: IndexFn<K>) {
        self.shared.inner.write().state.add_index(name, f);
    }

    /// [`Informer::subscribe`] with a handler that is a method of a shared controller, e.g.
    /// `pods.subscribe_with(&controller, Controller::on_pod)`.
    pub fn subscribe_with<C: Send + Sync + 'static>(
        &self,
        controller: &Arc<C>,
        handler: impl Fn(&C, Change<K>) + Send + Sync + 'static,
    ) {
        let controller = controller.clone();
        self.subscribe(move |change| handler(&controller, change));
    }

    /// Every change, in order. A subscriber added after sync first gets `Added` for every
    /// cached object. The handler must be cheap (compute keys, enqueue): no API calls.
    pub fn subscribe(&self, handler: impl Fn(Change<K>) + Send + Sync + 'static) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut inner = self.shared.inner.write();
            for obj in inner.state.objects.values() {
                // The receiver is alive: it is in this scope.
                let _ = tx.send(Change::Added(obj.clone()));
            }
            inner.subscribers.push(tx);
        }
        let resource = self.shared.resource.clone();
        let task: BoxFuture = Box::pin(async move {
            while let Some(change) = rx.recv().await {
                // A panicking handler loses this change but must not silently stop all
                // later deliveries to its controller.
                if std::panic::catch_unwind(AssertUnwindSafe(|| handler(change))).is_err() {
                    error!(resource = %resource, "Informer event handler panicked");
                }
            }
        });
        match Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(task);
            }
            Err(_) => self.shared.pending_tasks.lock().push(task),
        }
    }

    pub fn has_synced(&self) -> bool {
        *self.shared.synced.borrow()
    }

    /// Waits until synced; false if `shutdown` fired first.
    pub async fn wait_synced(&self, shutdown: &CancellationToken) -> bool {
        let resource = self.resource_name();
        info!(resource, "Waiting for caches to sync");
        let mut synced = self.shared.synced.subscribe();
        let done = tokio::select! {
            biased;
            result = synced.wait_for(|synced| *synced) => result.is_ok(),
            () = shutdown.cancelled() => false,
        };
        if done {
            info!(resource, "Caches are synced");
        } else {
            info!(
                resource,
                "Stopped waiting for caches to sync: shutting down"
            );
        }
        done
    }

    /// Applies one watcher event as if it came from the API server and delivers the
    /// resulting changes. The informer's own watch uses this; tests and fakes may too.
    pub fn feed(&self, event: watcher::Event<K>) {
        let metrics = metrics();
        let resource = self.shared.resource.as_str();
        if let Some(m) = metrics
            && matches!(event, watcher::Event::Init)
        {
            m.lists.with_label_values(&[resource]).inc();
        }
        let mut inner = self.shared.inner.write();
        let changes = inner.state.apply(event);
        if let Some(m) = metrics {
            for change in &changes {
                m.events.with_label_values(&[resource, change.kind()]).inc();
            }
        }
        if !changes.is_empty() {
            // A closed channel means the subscriber's task is gone (runtime shut down).
            inner
                .subscribers
                .retain(|tx| changes.iter().all(|change| tx.send(change.clone()).is_ok()));
        }
        if let Some(m) = metrics {
            m.objects
                .with_label_values(&[resource])
                .set(i64::try_from(inner.state.len()).unwrap_or(i64::MAX));
        }
        // Still under the lock: a waiter woken by a version finds the cache at least there.
        let version = inner.state.last_synced_resource_version();
        if inner.synced_version.borrow().as_deref() != version {
            let version = version.map(str::to_owned);
            inner.synced_version.send_replace(version);
        }
        // Still under the lock: once synced is visible, the initial adds are queued.
        if inner.state.has_synced() && !*self.shared.synced.borrow() {
            self.shared.synced.send_replace(true);
        }
    }

    /// The newest resourceVersion the cache reflects (see [`Store::last_synced_resource_version`]).
    pub fn last_synced_resource_version(&self) -> Option<String> {
        self.store().last_synced_resource_version()
    }

    /// Waits until the cache reflects resourceVersion `rv` or newer: true then, and at once
    /// when `rv` cannot be compared with the cache's version (nothing to wait for); false if
    /// `shutdown` fired first.
    pub async fn wait_for_resource_version(&self, rv: &str, shutdown: &CancellationToken) -> bool {
        let mut versions = self.shared.inner.read().synced_version.subscribe();
        let caught_up = |seen: &Option<String>| {
            seen.as_deref()
                .is_some_and(|seen| compare_resource_versions(seen, rv) != Some(Ordering::Less))
        };
        tokio::select! {
            biased;
            result = versions.wait_for(caught_up) => result.is_ok(),
            () = shutdown.cancelled() => false,
        }
    }

    fn start_on(
        &self,
        client: kube::Client,
        source: Source,
        shutdown: CancellationToken,
        runtime: &Handle,
    ) {
        if self.shared.started.swap(true, atomic::Ordering::SeqCst) {
            return;
        }
        for task in self.shared.pending_tasks.lock().drain(..) {
            runtime.spawn(task);
        }
        let informer = self.clone();
        runtime.spawn(async move { informer.run(client, source, shutdown).await });
    }

    async fn run(self, client: kube::Client, source: Source, shutdown: CancellationToken) {
        let resource = self.shared.resource.clone();
        let timeout = rand::random_range(WATCH_TIMEOUT_SECS);
        let mut config = watcher::Config::default()
            .page_size(PAGE_SIZE)
            .list_semantic(ListSemantic::Any)
            .timeout(timeout);
        if source.list_mode == ListMode::Streaming {
            config = config.streaming_lists();
        }
        if let Some(fields) = source.scope.field_selector::<K>() {
            config = config.fields(&fields);
        }
        let codec = match source.content_type {
            ContentType::Protobuf => crate::protobuf::codec::<K>(),
            ContentType::Json => None,
        };
        debug!(resource = %resource, protobuf = codec.is_some(), "Starting informer");
        let mut errors = ErrorLog::default();
        while !shutdown.is_cancelled() {
            let events: BoxStream<'static, watcher::Result<watcher::Event<K>>> = match &codec {
                Some(codec) => {
                    let params = crate::protobuf::watcher::Params {
                        path: K::url_path(&(), None),
                        kind: codec.kind,
                        list_kind: codec.list_kind,
                        field_selector: source.scope.field_selector::<K>(),
                        page_size: PAGE_SIZE,
                        timeout,
                        streaming: source.list_mode == ListMode::Streaming,
                    };
                    crate::protobuf::watcher::watch(client.clone(), params, codec.decode).boxed()
                }
                None => list_watch(Api::<K>::all(client.clone()), config.clone()).boxed(),
            };
            let mut stream = Box::pin(events.backoff(retry_backoff()));
            loop {
                let item = tokio::select! {
                    biased;
                    () = shutdown.cancelled() => break,
                    () = self.shared.relist.notified() => break,
                    item = stream.next() => item,
                };
                match item {
                    Some(Ok(event)) => {
                        errors.clear();
                        if let Some(event) = in_scope(&source.scope, event) {
                            self.feed(event);
                        }
                    }
                    Some(Err(err)) => errors.report(&resource, &err),
                    None => {
                        // kube's watcher and backoff never end; should that change, rebuild
                        // rather than stop informing.
                        warn!(resource = %resource, "Informer list/watch stream ended; restarting");
                        tokio::select! {
                            () = shutdown.cancelled() => {}
                            () = tokio::time::sleep(RESTART_DELAY) => {}
                        }
                        break;
                    }
                }
            }
        }
        // Closing the channels lets every subscriber task drain its buffer and end.
        self.shared.inner.write().subscribers.clear();
        debug!(resource = %resource, "Informer stopped");
    }
}

/// The event without the objects `scope` excludes: `None` for an object event out of scope.
fn in_scope<K: Resource>(scope: &Scope, event: watcher::Event<K>) -> Option<watcher::Event<K>> {
    let admits = |obj: &K| scope.contains(obj.meta().namespace.as_deref());
    match &event {
        watcher::Event::Apply(obj)
        | watcher::Event::Delete(obj)
        | watcher::Event::InitApply(obj)
            if !admits(obj) =>
        {
            None
        }
        _ => Some(event),
    }
}

/// kube's watcher, except that a watch request answered with 410 Gone starts over with a
/// fresh LIST: kube-rs relists only on a 410 inside the watch stream and would otherwise retry
/// the expired resourceVersion forever (client-go relists in both cases).
fn list_watch<K: Informable>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send {
    type Events<T> = BoxStream<'static, watcher::Result<watcher::Event<T>>>;
    futures::stream::unfold(None::<Events<K>>, move |current| {
        let mut stream =
            current.unwrap_or_else(|| watcher::watcher(api.clone(), config.clone()).boxed());
        async move {
            let item = stream.next().await?;
            let keep = match &item {
                Err(watcher::Error::WatchStartFailed(kube::Error::Api(status))) => !is_gone(status),
                _ => true,
            };
            Some((item, keep.then_some(stream)))
        }
    })
}

/// 410 Gone / `Expired`: the requested resourceVersion is compacted away.
pub(crate) fn is_gone(status: &kube::core::Status) -> bool {
    status.code == 410 || status.reason == "Expired" || status.reason == "Gone"
}

/// Logs list/watch errors without flooding: the backoff already spaces retries (0.8 s
/// doubling to 4 s), and a run of identical errors is logged at warn only on its 1st, 2nd,
/// 4th, 8th, ... occurrence.
#[derive(Default)]
struct ErrorLog {
    last: Option<String>,
    repeats: u64,
}

impl ErrorLog {
    fn clear(&mut self) {
        self.last = None;
        self.repeats = 0;
    }

    fn report(&mut self, resource: &str, err: &watcher::Error) {
        let message = err.to_string();
        if self.last.as_deref() == Some(message.as_str()) {
            self.repeats += 1;
        } else {
            self.last = Some(message);
            self.repeats = 1;
        }
        let attempts = self.repeats;
        if expired(err) {
            // Routine: the watch fell behind compaction; the relist repairs the cache.
            info!(resource, error = %err, "Watch expired; relisting");
        } else if attempts.is_power_of_two() {
            warn!(resource, error = %err, attempts, "Informer list/watch failed; retrying with backoff");
        } else {
            debug!(resource, error = %err, attempts, "Informer list/watch failed; retrying with backoff");
        }
    }
}

fn expired(err: &watcher::Error) -> bool {
    match err {
        watcher::Error::WatchError(status) => is_gone(status),
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => is_gone(status),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Store
// ---------------------------------------------------------------------------------------------

/// Read access to the cache. Objects are shared: clone before changing.
pub struct Store<K> {
    inner: Arc<RwLock<Inner<K>>>,
}
impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K: Informable> Store<K> {
    /// By key (`namespace/name` or `name`).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().state.get(key)
    }
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().state.list()
    }
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.by_index(INDEX_NAMESPACE, namespace)
    }
    /// Objects whose index `index` has `value`; empty for an unknown index.
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        self.inner.read().state.by_index(index, value)
    }
    pub fn len(&self) -> usize {
        self.inner.read().state.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The newest resourceVersion the cache reflects (client-go's
    /// `LastStoreSyncResourceVersion`): a reader that sees it also sees every change up to
    /// it. `None` until an object with a resourceVersion was applied. Compare with
    /// [`compare_resource_versions`].
    pub fn last_synced_resource_version(&self) -> Option<String> {
        self.inner
            .read()
            .state
            .last_synced_resource_version()
            .map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        ManagedFieldsEntry, ObjectMeta, OwnerReference,
    };

    #[test]
    fn retries_double_from_0_8_s_to_a_4_s_cap_with_jitter_below_the_full_wait() {
        let ms = |attempt, jitter| retry_wait(attempt, jitter).as_millis();
        // Without jitter's upper half: d/2 .. d.
        for (attempt, full) in [
            (0, 800),
            (1, 1600),
            (2, 3200),
            (3, 4000),
            (9, 4000),
            (40, 4000),
        ] {
            assert_eq!(ms(attempt, 1.0), full, "attempt {attempt}, largest");
            assert_eq!(ms(attempt, 0.0), full / 2, "attempt {attempt}, smallest");
        }
        assert_eq!(ms(1, 0.5), 1200);
        // A restart after a long outage is at most 4 s away once the server is back.
        let mut b = RetryBackoff::default();
        let waits: Vec<Duration> = (&mut b).take(20).collect();
        assert!(waits.iter().all(|w| *w <= RETRY_MAX));
        assert!(waits[10] >= RETRY_MAX / 2);
        kube::runtime::utils::Backoff::reset(&mut b);
        assert!(b.next().is_some_and(|w| w <= RETRY_FIRST));
    }

    fn cm(ns: &str, name: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn owned_pod(ns: &str, name: &str, rv: &str, owner_uid: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                owner_references: owner_uid.map(|uid| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "ReplicaSet".into(),
                        name: "rs".into(),
                        uid: uid.into(),
                        controller: Some(true),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A compact, comparable rendering of changes: `+key@rv`, `~key@old->new`,
    /// `-key@rv` (observed) or `?key@rv` (tombstone).
    fn render<K: Resource>(changes: &[Change<K>]) -> Vec<String> {
        let id = |o: &K| {
            format!(
                "{}@{}",
                keys::key_of(o),
                o.meta().resource_version.as_deref().unwrap_or("")
            )
        };
        changes
            .iter()
            .map(|c| match c {
                Change::Added(o) => format!("+{}", id(o)),
                Change::Updated { old, new } => format!(
                    "~{}->{}",
                    id(old),
                    new.meta().resource_version.as_deref().unwrap_or("")
                ),
                Change::Deleted {
                    obj,
                    final_state_unknown: false,
                } => format!("-{}", id(obj)),
                Change::Deleted {
                    obj,
                    final_state_unknown: true,
                } => format!("?{}", id(obj)),
            })
            .collect()
    }

    fn list(state: &mut State<ConfigMap>, objs: Vec<ConfigMap>) -> Vec<String> {
        assert!(state.apply(watcher::Event::Init).is_empty());
        for o in objs {
            assert!(state.apply(watcher::Event::InitApply(o)).is_empty());
        }
        render(&state.apply(watcher::Event::InitDone))
    }

    fn keys_of(objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
        let mut keys: Vec<String> = objs.iter().map(|o| keys::key_of(&**o)).collect();
        keys.sort();
        keys
    }

    #[test]
    fn initial_list_adds_everything_and_syncs() {
        let mut state = State::new();
        assert!(!state.has_synced());
        assert!(state.apply(watcher::Event::Init).is_empty());
        assert!(
            state
                .apply(watcher::Event::InitApply(cm("a", "x", "1")))
                .is_empty()
        );
        // Readers keep the old contents until the list is complete.
        assert_eq!(state.len(), 0);
        assert!(!state.has_synced());
        state.apply(watcher::Event::InitApply(cm("a", "y", "2")));
        let changes = render(&state.apply(watcher::Event::InitDone));
        assert_eq!(changes, ["+a/x@1", "+a/y@2"]);
        assert!(state.has_synced());
        assert_eq!(state.len(), 2);
    }

    #[test]
    fn empty_initial_list_syncs() {
        let mut state: State<ConfigMap> = State::new();
        assert!(list(&mut state, vec![]).is_empty());
        assert!(state.has_synced());
    }

    #[test]
    fn watch_add_update_delete() {
        let mut state = State::new();
        list(&mut state, vec![]);
        let add = render(&state.apply(watcher::Event::Apply(cm("a", "x", "1"))));
        assert_eq!(add, ["+a/x@1"]);
        let update = render(&state.apply(watcher::Event::Apply(cm("a", "x", "2"))));
        assert_eq!(update, ["~a/x@1->2"]);
        assert_eq!(
            state
                .get("a/x")
                .and_then(|o| o.metadata.resource_version.clone()),
            Some("2".into())
        );
        let delete = render(&state.apply(watcher::Event::Delete(cm("a", "x", "3"))));
        // The observed delete carries the object from the DELETE event.
        assert_eq!(delete, ["-a/x@3"]);
        assert_eq!(state.len(), 0);
    }

    #[test]
    fn identical_resource_version_is_not_a_change() {
        let mut state = State::new();
        list(&mut state, vec![cm("a", "x", "1")]);
        assert!(
            state
                .apply(watcher::Event::Apply(cm("a", "x", "1")))
                .is_empty()
        );
    }

    #[test]
    fn delete_of_unknown_object_is_dropped() {
        let mut state = State::new();
        list(&mut state, vec![]);
        assert!(
            state
                .apply(watcher::Event::Delete(cm("a", "x", "1")))
                .is_empty()
        );
    }

    #[test]
    fn relist_reports_the_difference() {
        let mut state = State::new();
        list(
            &mut state,
            vec![
                cm("a", "keep", "1"),
                cm("a", "gone", "2"),
                cm("a", "changed", "3"),
            ],
        );
        let changes = list(
            &mut state,
            vec![
                cm("a", "keep", "1"),
                cm("a", "changed", "7"),
                cm("a", "new", "8"),
            ],
        );
        // Unchanged `keep` is an update at the same version (client-go's `Replace`); `gone`
        // becomes a tombstone with its last state.
        assert_eq!(
            changes,
            ["~a/changed@3->7", "~a/keep@1->1", "+a/new@8", "?a/gone@2"]
        );
        assert_eq!(
            keys_of(state.list()),
            ["a/changed", "a/keep", "a/new"].map(String::from)
        );
    }

    #[test]
    fn failed_list_restarts_cleanly() {
        let mut state = State::new();
        list(&mut state, vec![cm("a", "x", "1")]);
        // A list that fails part-way is followed by a fresh Init; the partial page is
        // forgotten and the old cache stays readable meanwhile.
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitApply(cm("a", "partial", "5")));
        assert_eq!(state.len(), 1);
        let changes = list(&mut state, vec![cm("a", "x", "1"), cm("a", "y", "6")]);
        assert_eq!(changes, ["~a/x@1->1", "+a/y@6"]);
    }

    #[test]
    fn managed_fields_are_dropped() {
        let mut state = State::new();
        let mut obj = cm("a", "x", "1");
        obj.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl".into()),
            ..Default::default()
        }]);
        let mut listed = obj.clone();
        listed.metadata.name = Some("y".into());
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitApply(listed));
        state.apply(watcher::Event::InitDone);
        let changes = state.apply(watcher::Event::Apply(obj.clone()));
        assert!(changes[0].object().metadata.managed_fields.is_none());
        let mut deleted = obj;
        deleted.metadata.resource_version = Some("2".into());
        let changes = state.apply(watcher::Event::Delete(deleted));
        assert!(changes[0].object().metadata.managed_fields.is_none());
        for stored in state.list() {
            assert!(stored.metadata.managed_fields.is_none());
        }
    }

    #[test]
    fn indexes_follow_changes_and_deletes() {
        let mut state: State<Pod> = State::new();
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitApply(owned_pod(
            "a",
            "p1",
            "1",
            Some("u1"),
        )));
        state.apply(watcher::Event::InitApply(owned_pod(
            "b",
            "p2",
            "2",
            Some("u1"),
        )));
        state.apply(watcher::Event::InitDone);
        let names = |objs: Vec<Arc<Pod>>| {
            let mut v: Vec<String> = objs.iter().map(|o| keys::key_of(&**o)).collect();
            v.sort();
            v
        };
        assert_eq!(
            names(state.by_index(INDEX_CONTROLLER_UID, "u1")),
            ["a/p1", "b/p2"]
        );
        assert_eq!(names(state.by_index(INDEX_NAMESPACE, "a")), ["a/p1"]);

        // Re-owned: leaves the old value's set and joins the new one.
        state.apply(watcher::Event::Apply(owned_pod("a", "p1", "3", Some("u2"))));
        assert_eq!(names(state.by_index(INDEX_CONTROLLER_UID, "u1")), ["b/p2"]);
        assert_eq!(names(state.by_index(INDEX_CONTROLLER_UID, "u2")), ["a/p1"]);

        // Orphaned: in no controller set.
        state.apply(watcher::Event::Apply(owned_pod("b", "p2", "4", None)));
        assert!(state.by_index(INDEX_CONTROLLER_UID, "u1").is_empty());
        assert!(!state.indices[INDEX_CONTROLLER_UID].contains_key("u1"));

        state.apply(watcher::Event::Delete(owned_pod(
            "a",
            "p1",
            "5",
            Some("u2"),
        )));
        assert!(state.by_index(INDEX_CONTROLLER_UID, "u2").is_empty());
        assert!(state.by_index(INDEX_NAMESPACE, "a").is_empty());

        // A tombstone from a relist leaves the indexes too.
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitDone);
        assert!(state.by_index(INDEX_NAMESPACE, "b").is_empty());
        assert!(state.indices.values().all(HashMap::is_empty));
        assert!(state.by_index("no-such-index", "x").is_empty());
    }

    #[test]
    fn orphans_are_indexed_by_namespace() {
        let mut state: State<Pod> = State::new();
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitApply(owned_pod("a", "o1", "1", None)));
        state.apply(watcher::Event::InitApply(owned_pod(
            "a",
            "p1",
            "2",
            Some("u1"),
        )));
        state.apply(watcher::Event::InitApply(owned_pod("b", "o2", "3", None)));
        state.apply(watcher::Event::InitDone);
        let names = |objs: Vec<Arc<Pod>>| {
            let mut v: Vec<String> = objs.iter().map(|o| keys::key_of(&**o)).collect();
            v.sort();
            v
        };
        assert_eq!(
            names(state.by_index(INDEX_ORPHANS_BY_NAMESPACE, "a")),
            ["a/o1"]
        );
        // Adopted: leaves the orphans; released: joins them again.
        state.apply(watcher::Event::Apply(owned_pod("a", "o1", "4", Some("u1"))));
        assert!(state.by_index(INDEX_ORPHANS_BY_NAMESPACE, "a").is_empty());
        assert_eq!(
            names(state.by_index(INDEX_CONTROLLER_UID, "u1")),
            ["a/o1", "a/p1"]
        );
        state.apply(watcher::Event::Apply(owned_pod("a", "p1", "5", None)));
        assert_eq!(
            names(state.by_index(INDEX_ORPHANS_BY_NAMESPACE, "a")),
            ["a/p1"]
        );
        // The index hands out the current object, not the one first indexed.
        let current = state.by_index(INDEX_ORPHANS_BY_NAMESPACE, "a");
        assert_eq!(current[0].metadata.resource_version.as_deref(), Some("5"));
        state.apply(watcher::Event::Apply(owned_pod("b", "o2", "6", None)));
        let current = state.by_index(INDEX_ORPHANS_BY_NAMESPACE, "b");
        assert_eq!(current[0].metadata.resource_version.as_deref(), Some("6"));
        state.apply(watcher::Event::Delete(owned_pod("b", "o2", "7", None)));
        assert!(state.by_index(INDEX_ORPHANS_BY_NAMESPACE, "b").is_empty());
    }

    #[test]
    fn pods_are_indexed_by_node() {
        use crate::cached::Pod;
        let pod = |name: &str, node: Option<&str>| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"},
                "spec": {"containers": [], "nodeName": node},
            }))
            .expect("valid pod")
        };
        let names = |objs: Vec<Arc<Pod>>| -> Vec<String> {
            objs.iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect()
        };
        let mut state = State::<Pod>::new();
        state.add_index(INDEX_NODE_NAME, pods_by_node);
        state.apply(watcher::Event::Init);
        for p in [pod("a", Some("n1")), pod("b", Some("n2")), pod("c", None)] {
            state.apply(watcher::Event::InitApply(p));
        }
        state.apply(watcher::Event::InitDone);
        assert_eq!(names(state.by_index(INDEX_NODE_NAME, "n1")), ["a"]);
        assert!(
            state.by_index(INDEX_NODE_NAME, "").is_empty(),
            "unscheduled pods are not indexed"
        );
        state.apply(watcher::Event::Delete(pod("a", Some("n1"))));
        assert!(state.by_index(INDEX_NODE_NAME, "n1").is_empty());
        assert_eq!(names(state.by_index(INDEX_NODE_NAME, "n2")), ["b"]);
    }

    #[test]
    fn declared_projection_trims_cached_pods_and_a_widening_relists() {
        use crate::cached::Pod;
        use crate::projection::{Projectable, pod as fields};
        let pod = |rv: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "ns", "resourceVersion": rv},
                "spec": {"containers": [{"name": "c", "image": "i"}],
                    "affinity": {"nodeAffinity": {}}},
                "status": {"phase": "Running",
                    "containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                        "ready": true, "restartCount": 2}]},
            }))
            .expect("valid pod")
        };
        let restarts = |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|c| c[0].restart_count)
        };
        let mut state = State::<Pod>::new();
        assert!(
            !state.declare(Pod::project, fields::AFFINITY),
            "first: no relist"
        );
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitApply(pod("1")));
        state.apply(watcher::Event::InitDone);
        assert!(state.has_synced());
        let cached = state.get("ns/p").expect("cached");
        assert!(cached.spec.as_ref().is_some_and(|s| s.affinity.is_some()));
        assert_eq!(restarts(&cached), None, "not declared: dropped");

        // The same groups again change nothing; a new group unsyncs until a relist.
        assert!(!state.declare(Pod::project, fields::AFFINITY));
        assert!(state.declare(Pod::project, fields::CONTAINER_STATUSES));
        assert!(!state.has_synced());
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitApply(pod("1")));
        let changes = state.apply(watcher::Event::InitDone);
        assert!(changes.is_empty(), "same version: swapped silently");
        assert!(state.has_synced());
        assert_eq!(restarts(&state.get("ns/p").expect("cached")), Some(2));
        assert_eq!(
            restarts(&state.by_index(INDEX_NAMESPACE, "ns")[0]),
            Some(2),
            "indexes hold the new copy"
        );

        // A widening during a list needs one more list.
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitApply(pod("1")));
        assert!(state.declare(Pod::project, fields::VOLUME_CLAIMS));
        state.apply(watcher::Event::InitDone);
        assert!(!state.has_synced());
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitDone);
        assert!(state.has_synced());
    }

    #[test]
    fn index_added_late_is_built_from_the_cache() {
        fn by_name(cm: &ConfigMap) -> Vec<String> {
            cm.metadata.name.clone().into_iter().collect()
        }
        let mut state = State::new();
        list(&mut state, vec![cm("a", "x", "1"), cm("b", "x", "2")]);
        state.add_index("name", by_name);
        assert_eq!(keys_of(state.by_index("name", "x")), ["a/x", "b/x"]);
        state.apply(watcher::Event::Apply(cm("c", "x", "3")));
        assert_eq!(keys_of(state.by_index("name", "x")), ["a/x", "b/x", "c/x"]);
        // The same name again keeps the first function.
        state.add_index("name", |_| vec!["other".into()]);
        assert!(state.by_index("name", "other").is_empty());
    }

    /// Collects what a subscriber receives.
    fn recorder(informer: &Informer<ConfigMap>) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        informer.subscribe(move |change| {
            let _ = tx.send(render(std::slice::from_ref(&change)).remove(0));
        });
        rx
    }

    async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| "<nothing>".into())
    }

    #[tokio::test]
    async fn late_subscriber_gets_the_snapshot_then_live_changes() {
        let informer = Informer::<ConfigMap>::detached();
        let mut early = recorder(&informer);
        informer.feed(watcher::Event::Init);
        informer.feed(watcher::Event::InitApply(cm("a", "x", "1")));
        assert!(!informer.has_synced());
        informer.feed(watcher::Event::InitDone);
        assert!(informer.has_synced());
        assert!(informer.wait_synced(&CancellationToken::new()).await);

        let mut late = recorder(&informer);
        informer.feed(watcher::Event::Apply(cm("a", "x", "2")));
        informer.feed(watcher::Event::Delete(cm("a", "x", "3")));

        for rx in [&mut early, &mut late] {
            assert_eq!(next(rx).await, "+a/x@1");
            assert_eq!(next(rx).await, "~a/x@1->2");
            assert_eq!(next(rx).await, "-a/x@3");
            assert!(rx.try_recv().is_err(), "no duplicates");
        }
        let store = informer.store();
        assert!(store.is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slow_subscriber_does_not_block_others() {
        let informer = Informer::<ConfigMap>::detached();
        let (release, parked) = std::sync::mpsc::channel::<()>();
        let parked = std::sync::Mutex::new(parked);
        // Blocks its task's thread until released, once per change.
        informer.subscribe(move |_| {
            if let Ok(parked) = parked.lock() {
                let _ = parked.recv();
            }
        });
        let mut fast = recorder(&informer);
        informer.feed(watcher::Event::Init);
        informer.feed(watcher::Event::InitDone);
        for i in 0..3 {
            informer.feed(watcher::Event::Apply(cm("a", &format!("x{i}"), "1")));
        }
        assert_eq!(next(&mut fast).await, "+a/x0@1");
        assert_eq!(next(&mut fast).await, "+a/x1@1");
        assert_eq!(next(&mut fast).await, "+a/x2@1");
        for _ in 0..3 {
            let _ = release.send(());
        }
    }

    #[tokio::test]
    async fn handler_panic_does_not_stop_delivery() {
        let informer = Informer::<ConfigMap>::detached();
        let (tx, mut rx) = mpsc::unbounded_channel();
        informer.subscribe(move |change| {
            let name = change.object().metadata.name.clone().unwrap_or_default();
            assert_ne!(name, "boom", "test handler panics on purpose");
            let _ = tx.send(name);
        });
        informer.feed(watcher::Event::Apply(cm("a", "boom", "1")));
        informer.feed(watcher::Event::Apply(cm("a", "fine", "2")));
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert_eq!(got.ok().flatten().as_deref(), Some("fine"));
    }

    #[tokio::test]
    async fn wait_synced_returns_false_on_shutdown() {
        let informer = Informer::<ConfigMap>::detached();
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        assert!(!informer.wait_synced(&shutdown).await);
    }

    #[tokio::test]
    async fn factory_shares_one_informer_per_type() {
        let api = rkcm_testkit::fake_api::FakeApi::new();
        api.on(
            "*",
            "**",
            rkcm_testkit::fake_api::Reply::transport_error("no server"),
        );
        let factory = InformerFactory::new(api.client());
        let a = factory.informer::<ConfigMap>();
        let b = factory.clone().informer::<ConfigMap>();
        let pods = factory.informer::<Pod>();
        assert!(Arc::ptr_eq(&a.shared, &b.shared));
        assert_eq!(a.resource_name(), "configmaps");
        assert_eq!(pods.resource_name(), "pods");
        a.feed(watcher::Event::Apply(cm("a", "x", "1")));
        assert_eq!(b.store().len(), 1);
        assert!(pods.store().is_empty());
    }

    #[test]
    fn resource_versions_compare_as_integers() {
        use std::cmp::Ordering::{Equal, Greater, Less};
        assert_eq!(compare_resource_versions("9", "10"), Some(Less));
        assert_eq!(compare_resource_versions("100", "99"), Some(Greater));
        assert_eq!(compare_resource_versions("42", "42"), Some(Equal));
        assert_eq!(
            compare_resource_versions("18446744073709551616", "18446744073709551615"),
            Some(Greater),
            "no 64-bit limit"
        );
        for bad in ["", "01", "1a", "-1", " 1"] {
            assert_eq!(compare_resource_versions(bad, "1"), None, "{bad:?}");
            assert_eq!(compare_resource_versions("1", bad), None, "{bad:?}");
        }
    }

    #[test]
    fn synced_version_follows_lists_and_events() {
        let mut state: State<ConfigMap> = State::new();
        assert_eq!(state.last_synced_resource_version(), None);
        state.apply(watcher::Event::Init);
        state.apply(watcher::Event::InitApply(cm("a", "x", "12")));
        state.apply(watcher::Event::InitApply(cm("a", "y", "9")));
        // Not before the list is complete: readers still see the old contents.
        assert_eq!(state.last_synced_resource_version(), None);
        state.apply(watcher::Event::InitDone);
        assert_eq!(state.last_synced_resource_version(), Some("12"));

        state.apply(watcher::Event::Apply(cm("a", "y", "13")));
        assert_eq!(state.last_synced_resource_version(), Some("13"));
        // A replayed event changes nothing, and neither does an older one.
        state.apply(watcher::Event::Apply(cm("a", "y", "13")));
        state.apply(watcher::Event::Apply(cm("a", "z", "11")));
        assert_eq!(state.last_synced_resource_version(), Some("13"));
        // The delete of an object never cached still carries the stream's version.
        state.apply(watcher::Event::Delete(cm("a", "never", "20")));
        assert_eq!(state.last_synced_resource_version(), Some("20"));

        // A relist contributes its newest object and never moves the version back.
        list(&mut state, vec![cm("a", "x", "15")]);
        assert_eq!(state.last_synced_resource_version(), Some("20"));
        list(&mut state, vec![cm("a", "x", "25"), cm("a", "w", "7")]);
        assert_eq!(state.last_synced_resource_version(), Some("25"));
        list(&mut state, vec![]);
        assert_eq!(state.last_synced_resource_version(), Some("25"));

        // Opaque versions from a non-standard server: the newest seen wins.
        state.apply(watcher::Event::Apply(cm("a", "x", "opaque")));
        assert_eq!(state.last_synced_resource_version(), Some("opaque"));
        state.apply(watcher::Event::Apply(cm("a", "x", "26")));
        assert_eq!(state.last_synced_resource_version(), Some("26"));
    }

    #[tokio::test]
    async fn waiting_for_a_resource_version() {
        let informer = Informer::<ConfigMap>::detached();
        let shutdown = CancellationToken::new();
        assert_eq!(informer.last_synced_resource_version(), None);
        informer.feed(watcher::Event::Init);
        informer.feed(watcher::Event::InitApply(cm("a", "x", "5")));
        informer.feed(watcher::Event::InitDone);
        assert_eq!(
            informer.last_synced_resource_version().as_deref(),
            Some("5")
        );
        assert_eq!(
            informer.store().last_synced_resource_version().as_deref(),
            Some("5")
        );

        // Caught up already (equal, older, or incomparable): no wait.
        for rv in ["5", "4", "opaque"] {
            let done = tokio::time::timeout(
                Duration::from_secs(5),
                informer.wait_for_resource_version(rv, &shutdown),
            )
            .await;
            assert_eq!(done.ok(), Some(true), "{rv}");
        }

        let waiter = {
            let informer = informer.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move { informer.wait_for_resource_version("7", &shutdown).await })
        };
        informer.feed(watcher::Event::Apply(cm("a", "x", "6")));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "6 is older than 7");
        informer.feed(watcher::Event::Apply(cm("a", "y", "8")));
        let woke = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(matches!(woke, Ok(Ok(true))), "{woke:?}");
        // Whoever is woken finds the cache at that version.
        assert!(informer.store().get("a/y").is_some());

        shutdown.cancel();
        assert!(!informer.wait_for_resource_version("100", &shutdown).await);
    }

    #[test]
    fn metrics_are_registered() {
        let informer = Informer::<ConfigMap>::detached();
        informer.feed(watcher::Event::Init);
        informer.feed(watcher::Event::InitDone);
        let text = crate::metrics::render();
        assert!(text.contains("rkcm_informer_lists_total{resource=\"configmaps\"}"));
        assert!(text.contains("rkcm_informer_objects{resource=\"configmaps\"}"));
    }

    #[test]
    fn scope_admits_its_namespaces_and_cluster_scoped_objects() {
        use k8s_openapi::api::core::v1::Node;
        let one = Scope::namespace("a");
        assert!(one.contains(Some("a")));
        assert!(!one.contains(Some("b")));
        assert!(
            one.contains(None) && one.contains(Some("")),
            "cluster-scoped"
        );
        assert!(Scope::Cluster.contains(Some("b")));
        let two = Scope::namespaces(["a", "b"]);
        assert!(two.contains(Some("b")) && !two.contains(Some("c")));

        assert!(is_namespaced::<Pod>() && is_namespaced::<ConfigMap>());
        assert!(!is_namespaced::<Node>());
        assert_eq!(
            one.field_selector::<Pod>().as_deref(),
            Some("metadata.namespace=a")
        );
        assert_eq!(
            one.field_selector::<Node>(),
            None,
            "nodes stay cluster-wide"
        );
        assert_eq!(two.field_selector::<Pod>(), None, "filtered client-side");
        assert_eq!(Scope::Cluster.field_selector::<Pod>(), None);

        let kept = |event| in_scope(&two, event).is_some();
        assert!(kept(watcher::Event::Apply(cm("a", "x", "1"))));
        assert!(!kept(watcher::Event::Apply(cm("c", "x", "1"))));
        assert!(!kept(watcher::Event::InitApply(cm("c", "x", "1"))));
        assert!(!kept(watcher::Event::Delete(cm("c", "x", "1"))));
        assert!(kept(watcher::Event::Init) && kept(watcher::Event::InitDone));
    }

    #[tokio::test]
    async fn scoped_factory_reports_its_scope() {
        let client = kube::Client::new(
            tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("no server"))
            }),
            "default",
        );
        assert_eq!(
            InformerFactory::namespaced(client.clone(), "t1").scope(),
            &Scope::namespace("t1")
        );
        assert_eq!(InformerFactory::new(client).scope(), &Scope::Cluster);
    }
}
