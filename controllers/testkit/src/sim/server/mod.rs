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
//!
//! `store` holds the objects, their versions and the event log; `watch` serves GET, LIST and
//! WATCH; `writes` creates, updates, patches and deletes; `faults` says what a seed injects
//! and rolls the dice; `resources` says how each resource behaves and what defaulting adds.

mod faults;
mod resources;
mod store;
mod watch;
mod writes;

pub use faults::Faults;
pub use resources::{RESOURCES, ResourceInfo, key_of, resource};
pub use store::{Caller, Change, Cut, CutOff, Deletion, Delivery, Reply, World};
pub use watch::Query;
