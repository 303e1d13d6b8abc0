//! PodGC in sharded mode (`--rkcm-shards`): what one replica sweeps and may delete.
//!
//! The out-of-service, orphan and unscheduled sweeps are per pod: a replica sweeps the pods of
//! the namespaces whose ranges it holds and deletes one only while it still holds the range
//! (each write counted in flight, so a handover waits for it). The terminated-pod threshold
//! is cluster-wide by upstream's definition, so it runs in the one replica that holds the
//! global shard Lease, over the terminated pods of every namespace: while it holds that Lease
//! it keeps a cache of its own listed and watched with the field selector
//! [`TERMINATED_SELECTOR`] (terminated pods only), and drops it when the Lease goes.

use std::sync::Arc;

use rkcm_runtime::CancellationToken;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::projection::Fields;
use rkcm_runtime::cache::{FieldScope, InformerFactory, Scope, Store};
use rkcm_runtime::fasthash::HashMap;
use rkcm_runtime::shard::Shards;
use rkcm_runtime::shard::holder::InFlight;

use crate::plan::Reason;

/// Pods in a phase other than `Pending`, `Running` and `Unknown` (the threshold's terminated
/// pods, an empty phase included).
pub const TERMINATED_SELECTOR: &str =
    "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown";

/// One replica's share of PodGC.
pub(crate) struct Sharded {
    shards: Arc<Shards>,
    terminated: TerminatedPods,
}

impl Sharded {
    /// `fields`: what the pod cache keeps of each pod (PodGC's projection).
    pub(crate) fn new(shards: Arc<Shards>, factory: InformerFactory, fields: Fields) -> Self {
        Self {
            shards,
            terminated: TerminatedPods {
                base: factory,
                fields,
                current: None,
            },
        }
    }

    /// The pods of `pods` this replica may act on now (asked once per namespace).
    pub(crate) fn owned(&self, pods: Vec<Arc<Pod>>) -> Vec<Arc<Pod>> {
        let mut owns: HashMap<String, bool> = HashMap::default();
        pods.into_iter()
            .filter(|p| {
                let ns = p.metadata.namespace.as_deref().unwrap_or_default();
                if let Some(owned) = owns.get(ns) {
                    return *owned;
                }
                let owned = self.shards.owns(ns);
                owns.insert(ns.to_owned(), owned);
                owned
            })
            .collect()
    }

    /// The terminated pods of every namespace while this replica holds the global Lease and
    /// their cache has synced; `None` otherwise (no threshold sweep here this time).
    pub(crate) fn terminated(&mut self) -> Option<Vec<Arc<Pod>>> {
        self.terminated.snapshot(self.shards.owns_global())
    }

    /// Permission to write for `pod` now: its range (the threshold: the global Lease) is
    /// held; the token keeps the handover waiting until the write is done.
    pub(crate) fn begin(shards: &Arc<Shards>, pod: &Pod, reason: Reason) -> Option<InFlight> {
        if reason == Reason::Terminated {
            shards.begin_global()
        } else {
            shards.begin(pod.metadata.namespace.as_deref().unwrap_or_default())
        }
    }

    pub(crate) fn shards(&self) -> &Arc<Shards> {
        &self.shards
    }
}

/// The cluster's terminated pods, cached only while the global Lease is held.
struct TerminatedPods {
    base: InformerFactory,
    fields: Fields,
    current: Option<(
        CancellationToken,
        rkcm_runtime::cache::Informer<Pod>,
        Store<Pod>,
    )>,
}

impl TerminatedPods {
    fn snapshot(&mut self, held: bool) -> Option<Vec<Arc<Pod>>> {
        if !held {
            if let Some((stop, _, _)) = self.current.take() {
                tracing::info!("global shard lease gone: dropping the terminated-pod cache");
                stop.cancel();
            }
            return None;
        }
        let (_, informer, store) = self.current.get_or_insert_with(|| {
            tracing::info!(
                selector = TERMINATED_SELECTOR,
                "holding the global shard lease: caching the cluster's terminated pods"
            );
            // The whole cluster, or the namespaces the process's caches are limited to
            // (tests sharing a cluster).
            let factory = self.base.rescoped(Scope::Fields(FieldScope {
                selector: TERMINATED_SELECTOR.to_owned(),
                namespaces: self.base.scope().limited_to().cloned(),
            }));
            let informer = factory.informer::<Pod>();
            informer.keep(self.fields);
            let store = informer.store();
            let stop = CancellationToken::new();
            factory.start(stop.clone());
            (stop, informer, store)
        });
        informer.has_synced().then(|| store.list())
    }
}

impl Drop for TerminatedPods {
    fn drop(&mut self) {
        if let Some((stop, _, _)) = self.current.take() {
            stop.cancel();
        }
    }
}
