//! What a list+watch stream hands the informer, in order: a watcher event, or a
//! resourceVersion the cache reflects once every item before it is applied although no object
//! carries it (a complete list's own resourceVersion, a watch bookmark's).
//!
//! client-go's reflector sets `LastSyncResourceVersion` from both; kube's `watcher::Event`
//! has no place for them, so a cache fed only events knows the versions of the objects it
//! applied, and stays behind a write whose object is gone (or an empty list) until another
//! object of the resource changes.

use kube::runtime::watcher;

/// One step of an informer's list+watch stream.
#[derive(Debug, Clone)]
pub enum Item<K> {
    Event(watcher::Event<K>),
    /// The cache, with every item before this one applied, reflects this resourceVersion.
    Version(String),
}

impl<K> From<watcher::Event<K>> for Item<K> {
    fn from(event: watcher::Event<K>) -> Self {
        Item::Event(event)
    }
}
