//! What a sync of a DaemonSet sees, and its pods grouped by node: the input that planning
//! ([`crate::plan`]) and status counting ([`crate::status`]) share. Pure.

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::fasthash::HashMap;
use rkcm_runtime::workload::pod::is_terminal;

use crate::backoff::Backoff;
use crate::template::target_node_name;

/// What a sync sees.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    pub ds: &'a DaemonSet,
    /// Every node in the cache.
    pub nodes: &'a [Arc<Node>],
    /// The DaemonSet's claimed pods (terminal and deleting ones included).
    pub pods: &'a [Arc<Pod>],
    /// The current revision's hash.
    pub hash: &'a str,
    /// No creates or deletes of earlier syncs are still unobserved.
    pub expectations_satisfied: bool,
    /// The failed-pod back-off as it stands.
    pub backoff: &'a Backoff,
    /// Most creates and most deletes (each) in one sync.
    pub burst: usize,
    /// Gate `TaintTolerationComparisonOperators` (alpha, off).
    pub comparison_operators: bool,
    /// rkcm's own opt-in for every DaemonSet (`--rkcm-daemonset-rollout-skip-not-ready-nodes`);
    /// the DaemonSet's annotation overrides it ([`crate::plan::skips_not_ready_nodes`]).
    pub skip_not_ready_nodes: bool,
}

/// `podByCreationTimestampAndPhase`: bound pods first, then older, then by name.
pub fn compare_pods(a: &Pod, b: &Pod) -> Ordering {
    let bound = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    bound(b)
        .cmp(&bound(a))
        .then_with(|| {
            let t = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            t(a).cmp(&t(b))
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// `getNodesToDaemonPods`: claimed pods grouped by target node (`spec.nodeName` or the
/// `metadata.name` affinity term), pods without one skipped. Terminal pods being deleted are
/// dropped unless `include_deleted_terminal`.
pub fn pods_by_node(pods: &[Arc<Pod>], include_deleted_terminal: bool) -> PodsByNode<'_> {
    let mut map: PodsByNode<'_> = HashMap::default();
    for pod in pods {
        if !include_deleted_terminal
            && is_terminal(pod)
            && pod.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        // Mutant (sim only): a terminating pod no longer holds its node, so its replacement
        // starts while its containers may still run (with maxSurge 0).
        if rkcm_runtime::mutants::on("daemonset-replace-terminating")
            && pod.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let Some(node) = target_node_name(pod) else {
            continue;
        };
        map.entry(node).or_default().push(pod.clone());
    }
    map
}

/// Pods by the node they are bound to or aimed at (keys borrowed from the snapshot). Looked
/// up once per node and sync; iterate it only through `plan`'s `unknown_nodes`, which sorts.
pub type PodsByNode<'a> = HashMap<&'a str, Vec<Arc<Pod>>>;
