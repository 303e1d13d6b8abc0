//! The cache and informers: one list+watch per resource type for the whole process
//! ([`InformerFactory`], [`Informer`]), the indexed store each keeps ([`Store`]), the slim types
//! they hold ([`cached`]) and the projections of the fields controllers read ([`projection`]).
//!
//! - `store`: the cache of one informer and the state machine from watcher events to changes.
//! - `informer`: the shared informer: subscriptions, delivery, its list/watch loop.
//! - `watch`: the list+watch stream, its retry backoff and error logging.
//! - `item`: what the stream hands the informer (events, and versions without an object).
//! - `source`: what a factory's informers hold and how they list (scope, encoding, list mode).
//! - `factory`: the process-wide set of informers.
//! - `signal`: what waiters of an informer wait on (sync, resourceVersion), woken in order.

pub mod cached;
mod factory;
mod informer;
pub mod item;
pub mod projection;
pub(crate) mod signal;
mod source;
mod store;
mod watch;

#[cfg(test)]
mod tests;

pub use factory::InformerFactory;
pub use informer::Informer;
pub use source::{ContentType, FieldScope, ListMode, Scope, ShardScope};
pub use store::{
    Change, INDEX_CONTROLLER_UID, INDEX_NAMESPACE, INDEX_NODE_NAME, INDEX_ORPHANS_BY_NAMESPACE,
    IndexFn, Informable, Store, compare_resource_versions, pods_by_node,
};
pub use watch::retry_backoff;
