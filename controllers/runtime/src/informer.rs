//! CONTRACT STUB — the informer helper replaces the bodies; keep these signatures.
//!
//! Shared informers: one list+watch per resource type for the whole process.

use std::fmt::Debug;
use std::sync::Arc;

use kube::Resource;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// Name of the built-in index by namespace.
pub const INDEX_NAMESPACE: &str = "namespace";
/// Name of the built-in index by the UID of the controller owner reference.
pub const INDEX_CONTROLLER_UID: &str = "controller-uid";

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
    Updated { old: Arc<K>, new: Arc<K> },
    /// `final_state_unknown`: the delete was inferred on a relist (a tombstone); `obj` is the
    /// last state the cache knew.
    Deleted { obj: Arc<K>, final_state_unknown: bool },
}

/// An index function: the index values of one object.
pub type IndexFn<K> = fn(&K) -> Vec<String>;

/// The process-wide set of informers.
#[derive(Clone)]
pub struct InformerFactory {
    _client: kube::Client,
}

impl InformerFactory {
    pub fn new(client: kube::Client) -> Self {
        Self { _client: client }
    }
    /// The informer for `K` (cluster-wide, unfiltered), created on first request.
    pub fn informer<K: Informable>(&self) -> Informer<K> {
        unimplemented!()
    }
    /// Starts every informer requested so far; later requests start at once.
    pub fn start(&self, _shutdown: CancellationToken) {
        unimplemented!()
    }
}

/// A handle on one shared informer. Cheap to clone.
pub struct Informer<K> {
    _k: std::marker::PhantomData<K>,
}
impl<K> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Self { _k: std::marker::PhantomData }
    }
}

impl<K: Informable> Informer<K> {
    pub fn store(&self) -> Store<K> {
        unimplemented!()
    }
    /// Registers a secondary index; registering the same name twice is a no-op.
    pub fn add_index(&self, _name: &'static str, _f: IndexFn<K>) {
        unimplemented!()
    }
    /// Every change, in order. A subscriber added after sync first gets `Added` for every
    /// cached object. The handler must be cheap (compute keys, enqueue): no API calls.
    pub fn subscribe(&self, _handler: impl Fn(Change<K>) + Send + Sync + 'static) {
        unimplemented!()
    }
    pub fn has_synced(&self) -> bool {
        unimplemented!()
    }
    /// Waits until synced; false if `shutdown` fired first.
    pub async fn wait_synced(&self, _shutdown: &CancellationToken) -> bool {
        unimplemented!()
    }
}

/// Read access to the cache. Objects are shared: clone before changing.
pub struct Store<K> {
    _k: std::marker::PhantomData<K>,
}
impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self { _k: std::marker::PhantomData }
    }
}

impl<K: Informable> Store<K> {
    /// By key (`namespace/name` or `name`).
    pub fn get(&self, _key: &str) -> Option<Arc<K>> {
        unimplemented!()
    }
    pub fn list(&self) -> Vec<Arc<K>> {
        unimplemented!()
    }
    pub fn list_namespace(&self, _namespace: &str) -> Vec<Arc<K>> {
        unimplemented!()
    }
    pub fn by_index(&self, _index: &str, _value: &str) -> Vec<Arc<K>> {
        unimplemented!()
    }
    pub fn len(&self) -> usize {
        unimplemented!()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
