//! The cache of one informer: its objects, secondary indexes and the state machine that turns
//! watcher events into `(old, new)` changes, and read access to it ([`Store`]).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;

use kube::Resource;
use kube::runtime::watcher;
use parking_lot::RwLock;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::cache::projection::Fields;
use crate::cache::signal::Signal;
use crate::fasthash::HashMap as FastMap;
use crate::keys;
use crate::shard::Ring;

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
pub fn pods_by_node(pod: &crate::cache::cached::Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
        .into_iter()
        .collect()
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
    pub(super) fn kind(&self) -> &'static str {
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

/// An object's key (`namespace/name`), allocated once and shared by the object map and every
/// index entry of the object (a cached pod is in four maps).
type Key = Arc<str>;
/// Index value -> key -> object. The objects themselves are kept (as in `objects`), so a
/// lookup clones `Arc`s without hashing every key a second time.
type Index<K> = FastMap<String, FastMap<Key, Arc<K>>>;
/// Index name -> index.
type Indices<K> = FastMap<&'static str, Index<K>>;

/// The cache of one informer and the state machine that turns watcher events into changes.
/// No I/O and no locking: the informer wraps it in a lock and delivers what it returns.
pub(crate) struct State<K> {
    pub(super) objects: FastMap<Key, Arc<K>>,
    indexers: BTreeMap<&'static str, IndexFn<K>>,
    pub(super) indices: Indices<K>,
    /// Objects of the lists in progress (between `Init` and `InitDone`), by the stream that
    /// lists them (see [`State::apply_in`]). Kept apart so readers see the old cache until a
    /// list is complete.
    lists: BTreeMap<u64, Listing<K>>,
    synced: bool,
    /// The newest resourceVersion the contents reflect; `None` before any versioned object.
    last_synced_rv: Option<String>,
    /// A cache fed by several streams (a sharded informer's): which ranges of which ring each
    /// stream holds, and the newest version each has delivered. Each stream is ordered on
    /// its own, so a namespace's objects are as new as its stream's version, not the newest
    /// version of any stream.
    routes: Option<Routes>,
    /// What cached objects keep; `None`: whole objects (nobody declared).
    projection: Option<Projection<K>>,
    /// The projection widened after objects were cached or listed: a relist of everything
    /// must bring the fields they lack, and the cache is not synced until it has.
    reproject_pending: bool,
}

/// The streams of a sharded cache (see [`State::route`]).
struct Routes {
    ring: Ring,
    ranges: BTreeMap<u64, BTreeSet<u32>>,
    versions: BTreeMap<u64, String>,
}

impl Routes {
    /// Moves the version of `stream`, a stream this cache routes to, to `rv`.
    fn advance(&mut self, stream: u64, rv: &str) {
        if !self.ranges.contains_key(&stream) {
            return;
        }
        let mut version = self.versions.remove(&stream);
        advance(&mut version, rv);
        if let Some(version) = version {
            self.versions.insert(stream, version);
        }
    }
}

/// Moves `current` to `rv`: comparable versions only forward (a relist served from an older
/// cache does not move it back); an incomparable one replaces it, as the newest seen, as
/// client-go records whatever it saw last.
fn advance(current: &mut Option<String>, rv: &str) {
    let newer = match current.as_deref() {
        None => true,
        Some(current) => {
            compare_resource_versions(current, rv) != Some(Ordering::Greater) && current != rv
        }
    };
    if newer {
        *current = Some(rv.to_owned());
    }
}

/// A list in progress.
struct Listing<K> {
    objects: FastMap<Key, Arc<K>>,
    /// The list began after a widening: objects it brings replace cached ones even at the
    /// same resourceVersion.
    reprojecting: bool,
}

/// The stream of a cache fed by one list+watch (tests, fakes, every informer but a sharded
/// one's).
pub(crate) const ONE_STREAM: u64 = 0;

/// How one type is trimmed, and which optional groups its cache keeps.
struct Projection<K> {
    apply: fn(&mut K, Fields),
    keep: Fields,
}

impl<K: Resource<DynamicType = ()> + Clone> State<K> {
    pub(crate) fn new() -> Self {
        let mut state = Self {
            objects: FastMap::default(),
            indexers: BTreeMap::new(),
            indices: FastMap::default(),
            lists: BTreeMap::new(),
            synced: false,
            last_synced_rv: None,
            routes: None,
            projection: None,
            reproject_pending: false,
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
        let holds_objects = !self.objects.is_empty() || !self.lists.is_empty();
        if widened && holds_objects {
            self.reproject_pending = true;
            self.synced = false;
            return true;
        }
        false
    }

    /// The object as the cache keeps it.
    fn strip(&self, mut obj: K) -> K {
        // The last look at who wrote the object before that is dropped.
        crate::handover::observe(&obj);
        obj.meta_mut().managed_fields = None;
        if let Some(p) = &self.projection {
            (p.apply)(&mut obj, p.keep);
        }
        obj
    }

    /// Applies one watcher event and returns the changes subscribers must see, in order.
    #[cfg(test)]
    pub(crate) fn apply(&mut self, event: watcher::Event<K>) -> Vec<Change<K>> {
        self.apply_in(ONE_STREAM, &|_| true, true, event)
    }

    /// [`State::apply`] for a cache fed by several list+watch streams, each holding the
    /// objects of its own namespaces (a sharded informer's streams, each over some ranges of
    /// the ring): `stream` names the one the event came from, `covers` says which namespaces
    /// it holds (`None`: a cluster-scoped object), so that its list replaces those objects
    /// only, and `whole` whether its lists cover everything the cache holds (only such a list
    /// brings the fields a widening of the projection added to every cached object).
    pub(crate) fn apply_in(
        &mut self,
        stream: u64,
        covers: &dyn Fn(Option<&str>) -> bool,
        whole: bool,
        event: watcher::Event<K>,
    ) -> Vec<Change<K>> {
        match event {
            watcher::Event::Init => {
                // A new list starts; a partial list left by a failed one is discarded.
                let reprojecting = whole && std::mem::take(&mut self.reproject_pending);
                self.lists.insert(
                    stream,
                    Listing {
                        objects: FastMap::default(),
                        reprojecting,
                    },
                );
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                let obj = self.strip(obj);
                match self.lists.get_mut(&stream) {
                    Some(listing) => {
                        listing
                            .objects
                            .insert(keys::key_of(&obj).into(), Arc::new(obj));
                        Vec::new()
                    }
                    // kube-rs never sends this outside a list; treat it as a watch event
                    // rather than lose it.
                    None => {
                        self.observe_version(stream, obj.meta().resource_version.as_deref());
                        self.upsert(obj).into_iter().collect()
                    }
                }
            }
            watcher::Event::InitDone => {
                let Listing {
                    mut objects,
                    reprojecting,
                } = self.lists.remove(&stream).unwrap_or(Listing {
                    objects: FastMap::default(),
                    reprojecting: false,
                });
                // Namespaces the stream stopped holding while it listed are not its to add.
                objects.retain(|_, o| covers(o.meta().namespace.as_deref()));
                let newest = newest_version(
                    objects
                        .values()
                        .filter_map(|o| o.meta().resource_version.as_deref()),
                );
                self.observe_version(stream, newest.as_deref());
                let changes = self.replace(objects, covers, reprojecting);
                // A widening during this list needs one more.
                self.synced = !self.reproject_pending;
                changes
            }
            watcher::Event::Apply(obj) => {
                self.observe_version(stream, obj.meta().resource_version.as_deref());
                let obj = self.strip(obj);
                self.upsert(obj).into_iter().collect()
            }
            watcher::Event::Delete(obj) => {
                // A delete advances the version even when the object was never cached.
                self.observe_version(stream, obj.meta().resource_version.as_deref());
                let obj = self.strip(obj);
                self.delete(obj).into_iter().collect()
            }
        }
    }

    /// Forgets the list `stream` had in progress (the stream stopped).
    pub(crate) fn abort_list(&mut self, stream: u64) {
        self.lists.remove(&stream);
    }

    /// Drops every object of the namespaces `drops` names and returns their tombstones, in
    /// key order, as a relist that no longer finds them would: a sharded informer's ranges
    /// handed over.
    pub(crate) fn purge(&mut self, drops: &dyn Fn(&str) -> bool) -> Vec<Change<K>> {
        let mut gone: Vec<Key> = self
            .objects
            .iter()
            .filter(|(_, o)| o.meta().namespace.as_deref().is_some_and(drops))
            .map(|(k, _)| k.clone())
            .collect();
        gone.sort_unstable();
        let mut changes = Vec::with_capacity(gone.len());
        self.remove_as_tombstones(gone, &mut changes);
        changes
    }

    /// Removes `keys` and appends their tombstones (deletes inferred, not observed) to
    /// `changes`, in the order given.
    fn remove_as_tombstones(&mut self, keys: Vec<Key>, changes: &mut Vec<Change<K>>) {
        for key in keys {
            if let Some(old) = self.objects.remove(&key) {
                self.index_remove(&key, &old);
                changes.push(Change::Deleted {
                    obj: old,
                    final_state_unknown: true,
                });
            }
        }
    }

    /// The newest resourceVersion the contents reflect (in a sharded cache: the newest any
    /// stream delivered).
    pub(crate) fn last_synced_resource_version(&self) -> Option<&str> {
        self.last_synced_rv.as_deref()
    }

    /// Advances the synced resourceVersion to `rv`. Comparable versions only move forward
    /// (a relist served from an older cache does not move it back); an incomparable one
    /// replaces it, as the newest seen, as client-go records whatever it saw last.
    fn observe_version(&mut self, stream: u64, rv: Option<&str>) {
        let Some(rv) = rv.filter(|rv| !rv.is_empty()) else {
            return;
        };
        advance(&mut self.last_synced_rv, rv);
        if let Some(routes) = self.routes.as_mut() {
            routes.advance(stream, rv);
        }
    }

    /// Advances the synced resourceVersion to a version no object carries (a list's, a
    /// bookmark's) unless a relist is in progress: readers still see the state before it.
    #[cfg(test)]
    pub(crate) fn observe_list_version(&mut self, rv: &str) {
        self.observe_list_version_in(ONE_STREAM, rv);
    }

    /// [`State::observe_list_version`] from stream `stream`: its own version moves unless it
    /// lists, the cache's unless any stream lists.
    pub(crate) fn observe_list_version_in(&mut self, stream: u64, rv: &str) {
        if rv.is_empty() {
            return;
        }
        if self.lists.is_empty() {
            advance(&mut self.last_synced_rv, rv);
        }
        if let Some(routes) = self.routes.as_mut()
            && !self.lists.contains_key(&stream)
        {
            routes.advance(stream, rv);
        }
    }

    /// A sharded cache: stream `stream` holds `ranges` of `ring` from now on (`None`: it
    /// stopped, and its version is forgotten).
    pub(crate) fn route(&mut self, ring: Ring, stream: u64, ranges: Option<&BTreeSet<u32>>) {
        let routes = self.routes.get_or_insert_with(|| Routes {
            ring,
            ranges: BTreeMap::new(),
            versions: BTreeMap::new(),
        });
        match ranges {
            Some(ranges) => {
                routes.ranges.insert(stream, ranges.clone());
            }
            None => {
                routes.ranges.remove(&stream);
                routes.versions.remove(&stream);
            }
        }
    }

    /// The newest resourceVersion the objects of `namespace` reflect: in a sharded cache the
    /// version of the stream that holds the namespace (`None` until it delivered one), else
    /// [`State::last_synced_resource_version`].
    pub(crate) fn last_synced_resource_version_in(&self, namespace: &str) -> Option<&str> {
        let Some(routes) = &self.routes else {
            return self.last_synced_resource_version();
        };
        let range = routes.ring.range_of(namespace);
        match routes.ranges.iter().find(|(_, r)| r.contains(&range)) {
            Some((stream, _)) => routes.versions.get(stream).map(String::as_str),
            // Not held here: nothing acts on it; the cache's version.
            None => self.last_synced_resource_version(),
        }
    }

    pub(crate) fn has_synced(&self) -> bool {
        self.synced
    }

    fn upsert(&mut self, obj: K) -> Option<Change<K>> {
        let name = keys::key_of(&obj);
        let new = Arc::new(obj);
        // A known object keeps its key: the one its index entries share.
        let (key, old): (Key, _) = match self.objects.get_key_value(name.as_str()) {
            Some((key, old)) => (key.clone(), Some(old.clone())),
            None => (name.into(), None),
        };
        match old {
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
        let old = self.objects.remove(key.as_str())?;
        self.index_remove(&key, &old);
        Some(Change::Deleted {
            obj: Arc::new(obj),
            final_state_unknown: false,
        })
    }

    /// Swaps in a complete list of the namespaces `covers` names and returns the difference to
    /// the old contents there: adds and updates in key order, then tombstones for keys that
    /// vanished, in key order.
    fn replace(
        &mut self,
        listed: FastMap<Key, Arc<K>>,
        covers: &dyn Fn(Option<&str>) -> bool,
        reprojecting: bool,
    ) -> Vec<Change<K>> {
        let mut listed: Vec<(Key, Arc<K>)> = listed.into_iter().collect();
        listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut vanished: Vec<Key> = self
            .objects
            .iter()
            .filter(|(key, o)| {
                covers(o.meta().namespace.as_deref())
                    && listed.binary_search_by(|(k, _)| k.cmp(key)).is_err()
            })
            .map(|(key, _)| key.clone())
            .collect();
        vanished.sort_unstable();

        let mut changes = Vec::new();
        for (key, new) in listed {
            // A known object keeps its key: the one its index entries share.
            let (key, old) = match self.objects.get_key_value(&key) {
                Some((known, old)) => (known.clone(), Some(old.clone())),
                None => (key, None),
            };
            match old {
                None => {
                    self.index_insert(&key, None, &new);
                    self.objects.insert(key, new.clone());
                    changes.push(Change::Added(new));
                }
                Some(old) if same_version(&*old, &*new) => {
                    if reprojecting {
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
        self.remove_as_tombstones(vanished, &mut changes);
        changes
    }

    fn index_insert(&mut self, key: &Key, old: Option<&K>, new: &Arc<K>) {
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
                match objects.get_mut(&**key) {
                    Some(slot) => *slot = new.clone(),
                    None => {
                        objects.insert(key.clone(), new.clone());
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

    pub(super) fn get(&self, key: &str) -> Option<Arc<K>> {
        self.objects.get(key).cloned()
    }

    pub(super) fn list(&self) -> Vec<Arc<K>> {
        self.objects.values().cloned().collect()
    }

    pub(super) fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        self.indices
            .get(index)
            .and_then(|values| values.get(value))
            .map(|objects| objects.values().cloned().collect())
            .unwrap_or_default()
    }

    pub(super) fn len(&self) -> usize {
        self.objects.len()
    }

    /// Each value of index `index` with how many objects have it.
    pub(super) fn index_sizes(&self, index: &str) -> Vec<(String, usize)> {
        self.indices
            .get(index)
            .map(|values| {
                values
                    .iter()
                    .map(|(value, objects)| (value.clone(), objects.len()))
                    .collect()
            })
            .unwrap_or_default()
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

/// Cache and subscribers under one lock: a change is applied to the cache and queued to every
/// subscriber in one critical section, and a new subscriber snapshots the cache in another,
/// so a subscriber can neither miss a change nor see one twice.
pub(super) struct Inner<K> {
    pub(super) state: State<K>,
    pub(super) subscribers: Vec<mpsc::UnboundedSender<Change<K>>>,
    /// `state.last_synced_resource_version()`, for waiters.
    pub(super) synced_version: Arc<Signal<Option<String>>>,
}

/// Read access to the cache. Objects are shared: clone before changing.
pub struct Store<K> {
    pub(super) inner: Arc<RwLock<Inner<K>>>,
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
    /// What an owner with UID `owner_uid` in `namespace` may claim: the namespace's objects
    /// without a controller and those it controls, from the two built-in indexes (upstream
    /// `FilterPodsByOwner`) rather than a scan of the namespace. Objects controlled by
    /// another owner are left out: a claim never takes them.
    pub fn claimable(&self, namespace: &str, owner_uid: &str) -> Vec<Arc<K>> {
        let inner = self.inner.read();
        let mut out = inner.state.by_index(INDEX_ORPHANS_BY_NAMESPACE, namespace);
        if !owner_uid.is_empty() {
            out.extend(
                inner
                    .state
                    .by_index(INDEX_CONTROLLER_UID, owner_uid)
                    .into_iter()
                    .filter(|o| o.meta().namespace.as_deref().unwrap_or_default() == namespace),
            );
        }
        out
    }
    pub fn len(&self) -> usize {
        self.inner.read().state.len()
    }
    /// How many objects each namespace has in the cache (cluster-scoped objects left out).
    pub fn count_by_namespace(&self) -> Vec<(String, usize)> {
        let mut counts = self.inner.read().state.index_sizes(INDEX_NAMESPACE);
        counts.retain(|(namespace, _)| !namespace.is_empty());
        counts
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

    /// The newest resourceVersion the objects of `namespace` reflect: the cache's, or in
    /// sharded mode the version of the list+watch stream that holds the namespace (each
    /// stream is ordered on its own; another stream's newer version says nothing of it).
    pub fn last_synced_resource_version_in(&self, namespace: &str) -> Option<String> {
        self.inner
            .read()
            .state
            .last_synced_resource_version_in(namespace)
            .map(str::to_owned)
    }
}
