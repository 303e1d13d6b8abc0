//! Where the informers of a factory get their objects from: the encoding they ask for, the
//! namespaces they hold and how they list.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::Resource;

use crate::shard::{Ring, Shards};

/// How every informer of a factory lists and watches.
#[derive(Debug, Clone, Default)]
pub(super) struct Source {
    pub(super) list_mode: ListMode,
    pub(super) scope: Scope,
    pub(super) content_type: ContentType,
}

/// The encoding informers ask the API server for (`--kube-api-content-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentType {
    /// JSON for every type.
    Json,
    /// Protobuf for the types [`crate::api::protobuf`] reads (pods and nodes: most of the bytes a
    /// manager receives), JSON for the others. Upstream's default.
    #[default]
    Protobuf,
}

impl ContentType {
    /// The value of `--kube-api-content-type`: `None` for a media type informers cannot use.
    pub fn from_media_type(media_type: &str) -> Option<Self> {
        match media_type {
            "application/json" => Some(ContentType::Json),
            crate::api::protobuf::MEDIA_TYPE => Some(ContentType::Protobuf),
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
    /// Sharded mode: only objects of the namespaces whose ranges this replica holds, listed
    /// and watched with the API server's shard selector and filtered before the cache too
    /// (a server without sharding ignores the selector); listed again when the held ranges
    /// change.
    Shards(ShardScope),
    /// [`Scope::Shards`] within these namespaces only (tests sharing a cluster run sharded
    /// replicas over their own namespaces).
    ShardsIn(ShardScope, BTreeSet<String>),
    /// Namespaced types listed and watched with a field selector (the server filters; an
    /// object leaving the selector arrives as a deletion). Sharded PodGC's terminated pods of
    /// the whole cluster.
    Fields(FieldScope),
}

/// The objects a [`Scope::Fields`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldScope {
    /// The field selector.
    pub selector: String,
    /// Only these namespaces (tests sharing a cluster); `None`: every namespace.
    pub namespaces: Option<BTreeSet<String>>,
}

/// The held ranges a [`Scope::Shards`] follows (compared by identity).
#[derive(Clone)]
pub struct ShardScope(pub Arc<Shards>);

impl PartialEq for ShardScope {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ShardScope {}

impl std::fmt::Debug for ShardScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ShardScope")
            .field(&self.0.held_ranges())
            .finish()
    }
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

    /// The namespaces a scope is limited to, if it is (tests sharing a cluster).
    pub fn limited_to(&self) -> Option<&BTreeSet<String>> {
        match self {
            Scope::Namespaces(set) | Scope::ShardsIn(_, set) => Some(set),
            Scope::Fields(f) => f.namespaces.as_ref(),
            _ => None,
        }
    }

    /// The shard view of a sharded scope.
    pub fn shards(&self) -> Option<&Arc<Shards>> {
        match self {
            Scope::Shards(ShardScope(shards)) | Scope::ShardsIn(ShardScope(shards), _) => {
                Some(shards)
            }
            _ => None,
        }
    }

    /// Whether an object of `namespace` (`None` or empty: cluster-scoped) is in scope.
    pub fn contains(&self, namespace: Option<&str>) -> bool {
        match self {
            Scope::Cluster => true,
            Scope::Fields(f) => match (&f.namespaces, namespace) {
                (Some(set), Some(ns)) if !ns.is_empty() => set.contains(ns),
                _ => true,
            },
            Scope::Namespaces(set) => namespace.is_none_or(|ns| ns.is_empty() || set.contains(ns)),
            Scope::Shards(ShardScope(shards)) => namespace
                .is_none_or(|ns| ns.is_empty() || shards.keeps(shards.config().ring.range_of(ns))),
            Scope::ShardsIn(ShardScope(shards), set) => namespace.is_none_or(|ns| {
                ns.is_empty()
                    || (set.contains(ns) && shards.keeps(shards.config().ring.range_of(ns)))
            }),
        }
    }

    /// The API server's shard selector for type `K`: the held ranges, for a namespaced type
    /// in sharded mode (none when nothing or everything is held, or when the config says not
    /// to send one: then the client filter of [`Scope::contains`] alone keeps the ranges).
    #[cfg(test)]
    pub(super) fn shard_selector<K: Resource>(&self) -> Option<String> {
        let held = self.shards()?.held_ranges();
        self.shard_selector_for::<K>(&held)
    }

    /// The API server's shard selector for type `K` and the ranges `ranges` (see
    /// [`Scope::shard_selector`]): what one list+watch stream of a sharded informer sends.
    pub(super) fn shard_selector_for<K: Resource>(&self, ranges: &BTreeSet<u32>) -> Option<String> {
        match self {
            Scope::Shards(ShardScope(shards)) | Scope::ShardsIn(ShardScope(shards), _)
                if is_namespaced::<K>() && shards.config().server_selector =>
            {
                if ranges.is_empty() {
                    // Nothing held: a range of one hash value (an empty range is refused),
                    // so that the list is not of every namespace; the client filter drops a
                    // namespace that hashes to it.
                    return Some(NOTHING_HELD.to_owned());
                }
                shards.config().ring.selector(ranges)
            }
            _ => None,
        }
    }

    /// Whether a list+watch stream keeps an object of `namespace` (`None` or empty:
    /// cluster-scoped): in sharded mode a stream holds its own `ranges` of the `ring` (within
    /// the namespaces a [`Scope::ShardsIn`] names), whatever is held now: the ranges handed
    /// over leave a stream when the cache drops them; without `ranges`, [`Scope::contains`].
    pub(super) fn holds(
        &self,
        namespace: Option<&str>,
        ranges: Option<(&BTreeSet<u32>, &Ring)>,
    ) -> bool {
        match ranges {
            None => self.contains(namespace),
            Some((ranges, ring)) => namespace.is_none_or(|ns| {
                ns.is_empty()
                    || (self.limited_to().is_none_or(|set| set.contains(ns))
                        && ranges.contains(&ring.range_of(ns)))
            }),
        }
    }

    /// The server-side field selector for type `K`, when the scope can be expressed as one.
    pub(super) fn field_selector<K: Resource>(&self) -> Option<String> {
        match self {
            Scope::Namespaces(set) | Scope::ShardsIn(_, set)
                if set.len() == 1 && is_namespaced::<K>() =>
            {
                set.first().map(|ns| format!("metadata.namespace={ns}"))
            }
            Scope::Fields(f) if is_namespaced::<K>() => Some(match &f.namespaces {
                Some(set) if set.len() == 1 => {
                    let ns = set.first().map(String::as_str).unwrap_or_default();
                    format!("{},metadata.namespace={ns}", f.selector)
                }
                _ => f.selector.clone(),
            }),
            _ => None,
        }
    }
}

/// The shard selector of a replica that holds no range.
const NOTHING_HELD: &str =
    "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000001')";

/// Whether `K` is a namespaced kind. kube's typed `Api` only names a namespace for types it
/// knows to be namespaced at compile time; the informer is generic over both, so it compares
/// the scope marker type instead.
pub(super) fn is_namespaced<K: Resource>() -> bool {
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
