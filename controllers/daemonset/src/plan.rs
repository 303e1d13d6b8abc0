//! What one sync of a DaemonSet does with pods, decided from a snapshot and a clock. Pure.
//!
//! Mirrors `manage`, `podsShouldBeOnNode`, `getUnscheduledPodsWithoutNode`, the counting part
//! of `syncNodes`, `updateDaemonSet` and `rollingUpdate` / `updatedDesiredNodeCounts` /
//! `findUpdatedPodsOnNode` of upstream `pkg/controller/daemon/daemon_controller.go` and
//! `update.go`.
//!
//! One sync either manages pods per node (create missing, delete extra, failed, succeeded and
//! misplaced ones) or, when that finds nothing to do and the strategy is RollingUpdate, takes
//! one rolling-update step (delete old pods within `maxUnavailable`, or surge new pods next
//! to old ones within `maxSurge`). At most [`BURST_REPLICAS`](crate::consts::BURST_REPLICAS)
//! creates and deletes each.

use rkcm_runtime::fasthash::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use rkcm_runtime::cache::cached::{Node, Pod};

use crate::backoff::backoff_key;
use crate::consts::strategy;
use crate::eligibility::{Eligibility, Placement};
pub use crate::snapshot::{PodsByNode, Snapshot, compare_pods, pods_by_node};
use crate::status::{Counts, calculate_status};
use crate::template::{
    IntOrPercentError, allows_surge, is_pod_updated, min_ready_seconds, pod_hash, strategy_type,
    surge_count, template_generation_label, unavailable_count,
};
use rkcm_runtime::workload::pod::{is_pod_available, is_pod_ready, is_terminal, phase};

/// Which part of the sync produced the pod writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Expectations are unmet: only status is written, `observedGeneration` untouched.
    WaitForExpectations,
    /// Per-node management (`manage`).
    Manage,
    /// A rolling-update step (`rollingUpdate`).
    RollingUpdate,
}

/// An event the sync records on the DaemonSet about one of its pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// Why a sync cannot finish its pod work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("couldn't get unavailable numbers: invalid value for MaxUnavailable: {0}")]
    MaxUnavailable(IntOrPercentError),
    #[error("couldn't get unavailable numbers: invalid value for MaxSurge: {0}")]
    MaxSurge(IntOrPercentError),
    #[error("couldn't get node for nodeName {0:?}: not found")]
    NodeNotFound(String),
}

/// The decisions of one sync.
#[derive(Debug, Clone)]
pub struct Plan {
    pub step: Step,
    /// Nodes to create a pod on, at most `burst`.
    pub creates: Vec<String>,
    /// Pods to delete (gracefully), at most `burst`.
    pub deletes: Vec<Arc<Pod>>,
    /// Failed/succeeded daemon pod events, in order.
    pub events: Vec<PodEvent>,
    /// Back-off keys to advance (`Next`) now.
    pub backoff_next: Vec<String>,
    /// Look again after this long (a failed pod still in its back-off window).
    pub requeue_after: Option<Duration>,
    /// The rolling update could not be computed; status is still written.
    pub error: Option<PlanError>,
    /// The status counters.
    pub status: Counts,
    /// Whether the status write may raise `observedGeneration`.
    pub update_observed_generation: bool,
}

impl Plan {
    /// True when the sync writes no pod.
    pub fn is_idle(&self) -> bool {
        self.creates.is_empty() && self.deletes.is_empty()
    }
}

/// The nodes pods are aimed at that are not in the node list, by name.
fn unknown_nodes<'a>(by_node: &PodsByNode<'a>, index: &NodeIndex<'_>) -> Vec<&'a str> {
    let mut names: Vec<&str> = by_node
        .keys()
        .copied()
        .filter(|k| !index.contains_key(k))
        .collect();
    names.sort_unstable();
    names
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// Position of each node in the snapshot's node list, by name: one sync looks nodes up by
/// name once per node, so a linear search would make it quadratic in the nodes.
type NodeIndex<'a> = HashMap<&'a str, usize>;

fn node_index<'a>(nodes: &'a [Arc<Node>]) -> NodeIndex<'a> {
    let mut index = NodeIndex::with_capacity_and_hasher(nodes.len(), Default::default());
    index.extend(nodes.iter().enumerate().map(|(i, n)| (node_name(n), i)));
    index
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

/// The decisions of one sync.
pub fn plan(snap: &Snapshot<'_>, now: Timestamp) -> Plan {
    let by_node = pods_by_node(snap.pods, false);
    let eligibility = Eligibility::of(snap.ds, snap.comparison_operators);
    let placements: Vec<Placement> = snap
        .nodes
        .iter()
        .map(|n| eligibility.placement(n))
        .collect();
    let index = node_index(snap.nodes);
    let status = calculate_status(snap, &by_node, &placements, now);
    let mut plan = Plan {
        step: Step::WaitForExpectations,
        creates: Vec::new(),
        deletes: Vec::new(),
        events: Vec::new(),
        backoff_next: Vec::new(),
        requeue_after: None,
        error: None,
        status,
        update_observed_generation: false,
    };
    plan.requeue_after = availability_requeue(snap.pods, min_ready_seconds(snap.ds), now);
    if !snap.expectations_satisfied {
        return plan;
    }
    plan.update_observed_generation = true;
    plan.step = Step::Manage;
    manage(snap, &index, &by_node, &placements, now, &mut plan);
    if plan.is_idle() && strategy_type(snap.ds) == strategy::ROLLING_UPDATE {
        plan.step = Step::RollingUpdate;
        let mut by_node = by_node;
        match rolling_update(snap, &index, &mut by_node, &placements, now) {
            Ok((deletes, creates)) => {
                plan.deletes = deletes;
                plan.creates = creates;
            }
            Err(e) => plan.error = Some(e),
        }
    }
    plan.creates.truncate(snap.burst);
    plan.deletes.truncate(snap.burst);
    plan
}

/// When the next ready pod becomes available (plus a second against clock skew), if any is
/// still waiting for `minReadySeconds`. Upstream relies on a delayed requeue when a pod turns
/// ready and on one after a status write; this also covers a surge pod whose old partner
/// still counts for the node's status, so a rollout never waits for an unrelated event.
pub fn availability_requeue(pods: &[Arc<Pod>], min_ready: i32, now: Timestamp) -> Option<Duration> {
    if min_ready <= 0 {
        return None;
    }
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !is_terminal(p))
        .filter_map(|p| rkcm_runtime::workload::pod::ready_since(p))
        .filter_map(|since| {
            let due = since
                .checked_add(jiff::SignedDuration::from_secs(i64::from(min_ready) + 1))
                .ok()?;
            let wait = now.duration_until(due);
            (wait > jiff::SignedDuration::ZERO).then(|| Duration::try_from(wait).ok())?
        })
        .min()
}

fn requeue_min(current: Option<Duration>, d: Duration) -> Option<Duration> {
    Some(current.map_or(d, |c| c.min(d)))
}

/// `manage`: per node, `podsShouldBeOnNode`; then unscheduled pods whose node is gone.
fn manage(
    snap: &Snapshot<'_>,
    index: &NodeIndex<'_>,
    by_node: &PodsByNode<'_>,
    placements: &[Placement],
    now: Timestamp,
    plan: &mut Plan,
) {
    // The sync's own view of the back-off: a key advanced for one pod puts a second failed
    // pod on the same node inside the new window, as upstream's shared back-off does.
    let mut backoff = snap.backoff.clone();
    let surge = allows_surge(snap.ds);
    let min_ready = min_ready_seconds(snap.ds);
    for (node, placement) in snap.nodes.iter().zip(placements) {
        let name = node_name(node);
        let pods = by_node.get(name);
        match pods {
            None if placement.should_run => plan.creates.push(name.to_owned()),
            None => {}
            Some(pods) if placement.should_continue_running => {
                let mut running: Vec<&Arc<Pod>> = Vec::new();
                for pod in pods {
                    if pod.metadata.deletion_timestamp.is_some() {
                        continue;
                    }
                    match phase(pod) {
                        "Failed" => {
                            let key = backoff_key(snap.ds, name);
                            if backoff.in_backoff_since_update(&key, now) {
                                let delay = backoff.get(&key);
                                tracing::debug!(
                                    pod = pod_name(pod),
                                    node = name,
                                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                                    "deleting failed pod on node has been limited by backoff"
                                );
                                plan.requeue_after = requeue_min(plan.requeue_after, delay);
                                continue;
                            }
                            backoff.next(&key, now);
                            plan.backoff_next.push(key);
                            plan.events.push(PodEvent {
                                warning: true,
                                reason: crate::consts::reasons::FAILED_DAEMON_POD,
                                message: format!(
                                    "Found failed daemon pod {}/{} on node {name}, will try to kill it",
                                    pod_namespace(pod),
                                    pod_name(pod)
                                ),
                            });
                            plan.deletes.push(pod.clone());
                        }
                        "Succeeded" => {
                            plan.events.push(PodEvent {
                                warning: false,
                                reason: crate::consts::reasons::SUCCEEDED_DAEMON_POD,
                                message: format!(
                                    "Found succeeded daemon pod {}/{} on node {name}, will try to delete it",
                                    pod_namespace(pod),
                                    pod_name(pod)
                                ),
                            });
                            plan.deletes.push(pod.clone());
                        }
                        _ => running.push(pod),
                    }
                }
                running.sort_by(|a, b| compare_pods(a, b));
                if !surge {
                    // One pod per node: keep the oldest, delete the rest. With none running
                    // (all failed, succeeded or terminating) the replacement comes in a later
                    // sync, once they are gone.
                    plan.deletes
                        .extend(running.iter().skip(1).map(|p| (*p).clone()));
                    continue;
                }
                if running.is_empty() {
                    if placement.should_run {
                        // Surging: a replacement may start while the old pod terminates.
                        plan.creates.push(name.to_owned());
                    }
                    continue;
                }
                if running.len() == 1 {
                    continue;
                }
                // Keep the oldest new pod and the oldest old pod; delete the others. The old
                // one goes when it is not ready or the new one is available.
                let mut oldest_new: Option<&Arc<Pod>> = None;
                let mut oldest_old: Option<&Arc<Pod>> = None;
                for pod in &running {
                    let slot = if pod_hash(pod) == snap.hash {
                        &mut oldest_new
                    } else {
                        &mut oldest_old
                    };
                    if slot.is_none() {
                        *slot = Some(pod);
                    } else {
                        plan.deletes.push((*pod).clone());
                    }
                }
                if let (Some(new), Some(old)) = (oldest_new, oldest_old)
                    && (!is_pod_ready(old) || is_pod_available(new, min_ready, now))
                {
                    plan.deletes.push(old.clone());
                }
            }
            Some(pods) if !placement.should_continue_running => {
                plan.deletes.extend(
                    pods.iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none())
                        .cloned(),
                );
            }
            Some(_) => {}
        }
    }
    // Unbound pods aimed at a node that no longer exists: nothing else deletes them.
    for node in unknown_nodes(by_node, index) {
        let pods = by_node.get(node).map(Vec::as_slice).unwrap_or_default();
        plan.deletes.extend(
            pods.iter()
                .filter(|p| {
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_none_or(str::is_empty)
                })
                .cloned(),
        );
    }
}

/// The new and the old pod of a node.
type NewAndOld<'p> = (Option<&'p Arc<Pod>>, Option<&'p Arc<Pod>>);

/// `findUpdatedPodsOnNode`: at most one new and one old non-deleting pod; `None` when there
/// are more (the manage loop prunes them first).
fn updated_pods_on_node<'p>(
    pods: &'p [Arc<Pod>],
    hash: &str,
    generation: Option<&str>,
) -> Option<NewAndOld<'p>> {
    let (mut new, mut old) = (None, None);
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let slot = if is_pod_updated(pod, hash, generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

/// `updatedDesiredNodeCounts`: `(maxSurge, maxUnavailable, desiredNumberScheduled)`, adding
/// an empty entry for every desired node without pods.
fn desired_node_counts<'a>(
    snap: &Snapshot<'a>,
    by_node: &mut PodsByNode<'a>,
    placements: &[Placement],
) -> Result<(i32, i32, i32), PlanError> {
    let mut desired = 0i32;
    for (node, placement) in snap.nodes.iter().zip(placements) {
        if !placement.should_run {
            continue;
        }
        desired += 1;
        by_node.entry(node_name(node)).or_default();
    }
    let mut max_unavailable =
        unavailable_count(snap.ds, desired).map_err(PlanError::MaxUnavailable)?;
    let max_surge = surge_count(snap.ds, desired).map_err(PlanError::MaxSurge)?;
    if desired > 0 && max_unavailable == 0 && max_surge == 0 {
        // An impossible configuration (both zero): accept one unavailable pod.
        max_unavailable = 1;
    }
    Ok((max_surge, max_unavailable, desired))
}

/// Whether the node reports a Ready condition that is not `True` (`False`, or `Unknown` once
/// the node lifecycle controller stops hearing from it). A node without a Ready condition has
/// not reported yet and is treated as ready.
pub fn node_is_not_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status != "True")
}

/// Whether the rolling update of `ds` leaves nodes that are not Ready out: rkcm's own opt-in,
/// never upstream's behaviour. The annotation
/// [`SKIP_NOT_READY_NODES_ANNOTATION`](crate::consts::SKIP_NOT_READY_NODES_ANNOTATION) says
/// `"true"` or `"false"` for one DaemonSet; otherwise `manager_default`
/// (`--rkcm-daemonset-rollout-skip-not-ready-nodes`, off) decides.
///
/// Upstream (`rollingUpdate` in `pkg/controller/daemon/update.go`) counts a NotReady node
/// whose pod is unavailable against `maxUnavailable` (or `maxSurge`) like any other. So when
/// the new revision itself breaks its nodes (a CNI plugin, kube-proxy or node agent that
/// takes the node down), the rollout stops after `maxUnavailable` broken nodes: that is the
/// default here too. The cost upstream accepted (kubernetes/kubernetes#117204, declined in
/// PR #117658): one node that dies for an unrelated reason while holding a new pod, or an
/// old pod the rollout deleted, uses the budget up until it is back or gone.
///
/// Opted in, such a node sits the rollout out: it neither uses budget nor has its pods
/// replaced, and it rejoins the arithmetic once Ready again. An unavailable old pod on a Ready
/// node still counts (kubernetes/kubernetes#123232). The risk: a revision that makes nodes
/// NotReady frees the budget on every node it breaks, so the rollout walks across the whole
/// cluster, `maxUnavailable` nodes at a time.
pub fn skips_not_ready_nodes(ds: &DaemonSet, manager_default: bool) -> bool {
    match ds
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::consts::SKIP_NOT_READY_NODES_ANNOTATION))
        .map(String::as_str)
    {
        Some("true") => true,
        Some("false") => false,
        _ => manager_default,
    }
}

/// `rollingUpdate`: `(pods to delete, nodes to create on)`. Nodes are visited in node-list
/// order, then pods aimed at unknown nodes by name (upstream's order is a map's).
fn rolling_update<'a>(
    snap: &Snapshot<'a>,
    index: &NodeIndex<'_>,
    by_node: &mut PodsByNode<'a>,
    placements: &[Placement],
    now: Timestamp,
) -> Result<(Vec<Arc<Pod>>, Vec<String>), PlanError> {
    let (max_surge, max_unavailable, desired) = desired_node_counts(snap, by_node, placements)?;
    let generation = template_generation_label(snap.ds);
    let generation = generation.as_deref();
    let min_ready = min_ready_seconds(snap.ds);
    let available = |p: &Pod| is_pod_available(p, min_ready, now);
    let mut order: Vec<&str> = snap
        .nodes
        .iter()
        .map(|n| node_name(n))
        .filter(|n| by_node.contains_key(*n))
        .collect();
    order.extend(unknown_nodes(by_node, index));
    let placement_of = |node: &str| index.get(node).and_then(|&i| placements.get(i)).copied();
    // Opted in (rkcm only, see `skips_not_ready_nodes`): nodes whose Ready condition is not
    // True sit the rollout out.
    if skips_not_ready_nodes(snap.ds, snap.skip_not_ready_nodes) {
        order.retain(|node| {
            index
                .get(node)
                .and_then(|&i| snap.nodes.get(i))
                .is_none_or(|n| !node_is_not_ready(n))
        });
    }

    if max_surge == 0 {
        let mut num_unavailable = 0i32;
        let mut replacements: Vec<Arc<Pod>> = Vec::new();
        let mut candidates: Vec<Arc<Pod>> = Vec::new();
        for node in &order {
            let pods = by_node.get(*node).map(Vec::as_slice).unwrap_or_default();
            let Some((new, old)) = updated_pods_on_node(pods, snap.hash, generation) else {
                // Excess pods: the manage loop cleans up; count the node as unavailable.
                num_unavailable += 1;
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => num_unavailable += 1,
                (Some(new), None) => {
                    if !available(new) {
                        num_unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(old) {
                        replacements.push(old.clone());
                        num_unavailable += 1;
                    } else if num_unavailable < max_unavailable {
                        candidates.push(old.clone());
                    }
                }
            }
        }
        let remaining = usize::try_from((max_unavailable - num_unavailable).max(0))
            .unwrap_or(0)
            .min(candidates.len());
        replacements.extend(candidates.into_iter().take(remaining));
        return Ok((replacements, Vec::new()));
    }

    let mut deletes: Vec<Arc<Pod>> = Vec::new();
    let mut should_not_run: Vec<Arc<Pod>> = Vec::new();
    let mut candidate_nodes: Vec<String> = Vec::new();
    let mut allowed_nodes: Vec<String> = Vec::new();
    let mut num_surge = 0i32;
    let mut num_available = 0i32;
    for node in &order {
        let pods = by_node.get(*node).map(Vec::as_slice).unwrap_or_default();
        let Some((new, old)) = updated_pods_on_node(pods, snap.hash, generation) else {
            // Excess pods: the manage loop cleans up; count the node as surging.
            num_surge += 1;
            continue;
        };
        match (old, new) {
            (Some(old), _) if available(old) => num_available += 1,
            (None, Some(new)) if available(new) => num_available += 1,
            _ => {}
        }
        match (old, new) {
            (None, _) => {}
            (Some(old), None) => {
                let placement = placement_of(node)
                    .ok_or_else(|| PlanError::NodeNotFound((*node).to_owned()))?;
                if !available(old) {
                    if !placement.should_run {
                        deletes.push(old.clone());
                    } else {
                        allowed_nodes.push((*node).to_owned());
                    }
                } else if !placement.should_run {
                    should_not_run.push(old.clone());
                } else if num_surge < max_surge {
                    candidate_nodes.push((*node).to_owned());
                }
            }
            (Some(old), Some(new)) => {
                if !available(new) {
                    num_surge += 1;
                } else {
                    deletes.push(old.clone());
                }
            }
        }
    }
    // Keep full availability when placement moves: a pod on a node that should no longer run
    // it goes only while more pods are available than desired.
    let deletable = usize::try_from((num_available - desired).max(0))
        .unwrap_or(0)
        .min(should_not_run.len());
    deletes.extend(should_not_run.into_iter().take(deletable));
    let remaining = usize::try_from((max_surge - num_surge).max(0))
        .unwrap_or(0)
        .min(candidate_nodes.len());
    allowed_nodes.extend(candidate_nodes.into_iter().take(remaining));
    Ok((deletes, allowed_nodes))
}

#[cfg(test)]
mod tests;
