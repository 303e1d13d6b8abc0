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

/// What the terminated-pod cache keeps of a pod: what the threshold sweep reads to choose
/// ([`crate::plan::terminated_above`]: phase, eviction reason, creation time, name) and to
/// delete (namespace, UID precondition, and the generation a status write of a pod without
/// a phase stamps). Every other field goes: the cache holds the terminated pods of every
/// namespace in the one replica holding the global Lease, beside that replica's own caches,
/// so a whole cached pod there cost as much as a pod in its own ranges.
pub(crate) fn threshold_view(pod: &mut Pod, keep: Fields) {
    use rkcm_runtime::cache::projection::Projectable;
    pod.project(keep);
    let meta = &mut pod.metadata;
    meta.labels = None;
    meta.annotations = None;
    meta.owner_references = None;
    meta.finalizers = None;
    meta.generate_name = None;
    meta.managed_fields = None;
    pod.spec = None;
    if let Some(status) = pod.status.as_mut() {
        status.conditions = None;
        status.start_time = None;
        status.container_statuses = None;
        status.init_container_statuses = None;
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
            informer.keep_with(threshold_view, self.fields);
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rkcm_runtime::cache::cached::Pod;
    use rkcm_runtime::cache::projection::pod as fields;
    use serde_json::json;

    use super::threshold_view;
    use crate::plan::terminated_above;
    use crate::plan::tests::pod;
    use crate::status::failed_status_apply;

    /// A terminated pod as the API server sends it, with fields of every kind.
    fn wire(name: &str, created: &str, phase: &str, reason: Option<&str>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "resourceVersion": "7", "generation": 3, "creationTimestamp": created,
                "generateName": "job-", "labels": {"a": "b"}, "annotations": {"x": "y"},
                "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job",
                    "uid": "job-uid", "controller": true}]},
            "spec": {"nodeName": "n1", "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": phase, "reason": reason, "startTime": created,
                "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted"}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "finishedAt": created}}}]}
        }))
        .expect("valid pod")
    }

    fn lean(p: &Pod) -> Pod {
        let mut p = p.clone();
        threshold_view(&mut p, fields::ALL);
        p
    }

    #[test]
    fn the_terminated_cache_keeps_what_the_threshold_reads() {
        let p = lean(&wire(
            "a",
            "2026-01-01T00:00:00Z",
            "Failed",
            Some("Evicted"),
        ));
        let meta = &p.metadata;
        assert_eq!(meta.name.as_deref(), Some("a"));
        assert_eq!(meta.namespace.as_deref(), Some("ns"));
        assert_eq!(meta.uid.as_deref(), Some("uid-a"));
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(meta.generation, Some(3));
        assert!(meta.creation_timestamp.is_some());
        let status = p.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(status.reason.as_deref(), Some("Evicted"));
        // Dropped: nothing the sweep reads.
        assert_eq!(meta.labels, None);
        assert_eq!(meta.annotations, None);
        assert_eq!(meta.owner_references, None);
        assert_eq!(meta.finalizers, None);
        assert_eq!(meta.generate_name, None);
        assert!(p.spec.is_none());
        assert_eq!(status.conditions, None);
        assert_eq!(status.start_time, None);
        assert_eq!(status.container_statuses, None);
    }

    #[test]
    fn the_threshold_sweep_chooses_the_same_pods_from_the_lean_cache() {
        let full = [
            wire("old-ok", "2026-01-01T00:00:00Z", "Succeeded", None),
            wire(
                "new-evicted",
                "2026-01-01T01:00:00Z",
                "Failed",
                Some("Evicted"),
            ),
            wire(
                "mid-failed",
                "2026-01-01T00:30:00Z",
                "Failed",
                Some("Error"),
            ),
            wire("newest-ok", "2026-01-01T02:00:00Z", "Succeeded", None),
            wire("twin-b", "2026-01-01T00:10:00Z", "Succeeded", None),
            wire("twin-a", "2026-01-01T00:10:00Z", "Succeeded", None),
        ];
        let full: Vec<Arc<Pod>> = full.into_iter().map(Arc::new).collect();
        let lean: Vec<Arc<Pod>> = full.iter().map(|p| Arc::new(lean(p))).collect();
        let keys = |pods: Vec<Arc<Pod>>| {
            pods.iter()
                .map(|p| {
                    let m = &p.metadata;
                    format!(
                        "{}/{}",
                        m.namespace.as_deref().unwrap_or_default(),
                        m.name.as_deref().unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
        };
        for threshold in 1..=6 {
            assert_eq!(
                keys(terminated_above(&lean, threshold)),
                keys(terminated_above(&full, threshold)),
                "threshold {threshold}"
            );
        }
        assert_eq!(
            keys(terminated_above(&lean, 2)),
            ["ns/new-evicted", "ns/old-ok", "ns/twin-a", "ns/twin-b"],
            "evicted first, then the oldest, then by name"
        );
    }

    #[test]
    fn a_lean_pod_without_a_phase_is_marked_failed_as_the_whole_one() {
        let mut whole = pod("ns", "p", 0, "");
        whole.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("timestamp");
        let reason = crate::plan::Reason::Terminated;
        assert_eq!(
            failed_status_apply(&lean(&whole), reason, now),
            failed_status_apply(&whole, reason, now)
        );
        assert!(failed_status_apply(&lean(&whole), reason, now).is_some());
    }
}
