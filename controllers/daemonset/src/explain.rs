//! PURE: what the DaemonSet controller would do with one DaemonSet now, what it waits on, and
//! why each node without a daemon pod has none (`rkcm explain daemonset/NS/NAME`), from the
//! DaemonSet, the nodes, its pods and its ControllerRevisions, through the controller's own
//! plan ([`crate::plan::plan`]) and node rules ([`Eligibility::judge`]).
//!
//! Reason codes:
//! - `RolloutBudget`: a rolling update has pods of an old revision left and no step to take:
//!   the pods that are unavailable use up `maxUnavailable` (no surge) and it waits for them.
//! - `PodsUnavailable`: pods that are not available yet (not Ready, or Ready for less than
//!   `minReadySeconds`).
//! - `OnDelete`: pods of an old revision under the `OnDelete` strategy: replaced only when a
//!   person deletes them.
//! - `InvalidStrategy`: `maxUnavailable`/`maxSurge` cannot be worked out.
//! - `NodeSelectorMismatch`, `TaintNotTolerated`, `PinnedToOtherNode`: nodes that get no pod
//!   and why (the template's `nodeSelector` or required node affinity, a `NoSchedule` or
//!   `NoExecute` taint the pod does not tolerate, including `spec.unschedulable`'s taint, or a
//!   template `nodeName` naming another node). These say why, they are not waits: a DaemonSet
//!   with only these is settled.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::explain::{Explanation, ObjectRef, State, Waiting};
use rkcm_runtime::workload::pod::{is_pod_available, is_terminal};

use crate::NAME;
use crate::backoff::Backoff;
use crate::config::Config;
use crate::consts::strategy;
use crate::eligibility::{Eligibility, Ineligible};
use crate::plan::{Plan, Snapshot, plan, pods_by_node};
use crate::revision;
use crate::template::{
    is_pod_updated, min_ready_seconds, strategy_type, template_generation_label, unavailable_count,
};

/// What one explanation reads.
pub struct Seen<'a> {
    pub ds: &'a DaemonSet,
    pub nodes: &'a [Arc<Node>],
    /// The DaemonSet's pods.
    pub pods: &'a [Arc<Pod>],
    /// Its ControllerRevisions.
    pub revisions: &'a [Arc<ControllerRevision>],
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// The current revision's hash: the newest revision whose data is the live template, or the
/// hash the controller would give a new one.
fn current_hash(seen: &Seen<'_>) -> String {
    let history = revision::split_history(seen.ds, seen.revisions);
    match revision::keeper(&history.current) {
        Some(current) => revision::revision_hash(&current).to_owned(),
        None => revision::hash_and_name(seen.ds).0,
    }
}

/// The explanation for `seen.ds` at `now`, with the manager's configuration `cfg` (its gate
/// `TaintTolerationComparisonOperators` and rkcm's opt-in
/// `--rkcm-daemonset-rollout-skip-not-ready-nodes` change the plan).
pub fn explain(seen: &Seen<'_>, cfg: &Config, now: Timestamp) -> Explanation {
    let hash = current_hash(seen);
    let backoff = Backoff::default();
    let snap = Snapshot {
        ds: seen.ds,
        nodes: seen.nodes,
        pods: seen.pods,
        hash: &hash,
        expectations_satisfied: true,
        backoff: &backoff,
        burst: cfg.burst_replicas,
        comparison_operators: cfg.taint_comparison_operators,
        skip_not_ready_nodes: cfg.rollout_skips_not_ready_nodes,
    };
    let p = plan(&snap, now);
    explain_plan(&snap, &p, now)
}

/// The explanation a sync records for its decision, from the plan `p` it made from `snap`
/// (so that recording does not plan every node a second time), unless the sync waits for its
/// earlier creates and deletes to be observed: then what the plan would be once they are, as
/// `rkcm explain` says (no revisions: the current hash is the live template's, as the sync's).
pub fn explain_sync(snap: &Snapshot<'_>, p: &Plan, cfg: &Config, now: Timestamp) -> Explanation {
    if snap.expectations_satisfied {
        return explain_plan(snap, p, now);
    }
    let seen = Seen {
        ds: snap.ds,
        nodes: snap.nodes,
        pods: snap.pods,
        revisions: &[],
    };
    explain(&seen, cfg, now)
}

/// The explanation of a plan already made from `snap`.
fn explain_plan(snap: &Snapshot<'_>, p: &Plan, now: Timestamp) -> Explanation {
    let ds = snap.ds;
    let mut e = Explanation {
        object: ObjectRef {
            kind: "DaemonSet".into(),
            namespace: ds.metadata.namespace.clone().unwrap_or_default(),
            name: name(&ds.metadata).to_owned(),
        },
        controller: NAME,
        state: State::Settled,
        actions: Vec::new(),
        waiting_on: Vec::new(),
        remedies: Vec::new(),
    };
    let hash = snap.hash;
    for node in &p.creates {
        e.actions.push(format!("create a pod on node {node}"));
    }
    for pod in &p.deletes {
        e.actions
            .push(format!("delete pod {}", name(&pod.metadata)));
    }
    if !e.actions.is_empty() {
        e.state = State::Acting;
    }
    if let Some(error) = &p.error {
        e.state = State::Stalled;
        e.waiting_on.push(Waiting {
            reason: "InvalidStrategy",
            message: error.to_string(),
            objects: Vec::new(),
            since: None,
        });
        e.remedies
            .push("fix spec.updateStrategy.rollingUpdate (maxUnavailable, maxSurge)".into());
    }
    let live: Vec<&Arc<Pod>> = snap
        .pods
        .iter()
        .filter(|p| !is_terminal(p) && p.metadata.deletion_timestamp.is_none())
        .collect();
    let generation = template_generation_label(ds);
    let old: Vec<&Arc<Pod>> = live
        .iter()
        .copied()
        .filter(|p| !is_pod_updated(p, hash, generation.as_deref()))
        .collect();
    let min_ready = min_ready_seconds(ds);
    let unavailable: Vec<&Arc<Pod>> = live
        .iter()
        .copied()
        .filter(|p| !is_pod_available(p, min_ready, now))
        .collect();
    rollout(&mut e, ds, &p.status, &old, &unavailable, p.is_idle());
    ineligible_nodes(&mut e, snap);
    e
}

fn pod_refs(pods: &[&Arc<Pod>]) -> Vec<String> {
    pods.iter()
        .map(|p| format!("Pod/{}", name(&p.metadata)))
        .collect()
}

/// The rollout's waits: pods of an old revision, and unavailable pods.
fn rollout(
    e: &mut Explanation,
    ds: &DaemonSet,
    status: &crate::status::Counts,
    old: &[&Arc<Pod>],
    unavailable: &[&Arc<Pod>],
    idle: bool,
) {
    let desired = status.desired_number_scheduled;
    let updated = status.updated_number_scheduled;
    if !old.is_empty() && strategy_type(ds) == strategy::ON_DELETE {
        if e.state == State::Settled {
            e.state = State::Stalled;
        }
        e.waiting_on.push(Waiting {
            reason: "OnDelete",
            message: format!(
                "{} pods run an old revision ({updated} of {desired} nodes updated); the OnDelete strategy replaces a pod only once it is deleted",
                old.len()
            ),
            objects: pod_refs(old),
            since: None,
        });
        e.remedies.push(format!(
            "delete the old pods to roll them: kubectl -n {} delete pod {}",
            ds.metadata.namespace.as_deref().unwrap_or_default(),
            old.iter()
                .map(|p| name(&p.metadata))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    } else if !old.is_empty() && idle {
        let max = unavailable_count(ds, desired).unwrap_or(0);
        if e.state == State::Settled {
            e.state = State::Waiting;
        }
        e.waiting_on.push(Waiting {
            reason: "RolloutBudget",
            message: format!(
                "{updated} of {desired} nodes run the current revision, {} pods an old one; {} pods unavailable with maxUnavailable {max}: the next old pod goes once one becomes available",
                old.len(),
                unavailable.len()
            ),
            objects: pod_refs(unavailable),
            since: None,
        });
        e.remedies.push(
            "if new pods never become available, fix the template (kubectl rollout undo daemonset/NAME)"
                .into(),
        );
    }
    if !unavailable.is_empty() {
        if e.state == State::Settled {
            e.state = State::Waiting;
        }
        e.waiting_on.push(Waiting {
            reason: "PodsUnavailable",
            message: format!(
                "{} of {} pods are not available yet (minReadySeconds {})",
                unavailable.len(),
                status.current_number_scheduled,
                min_ready_seconds(ds)
            ),
            objects: pod_refs(unavailable),
            since: None,
        });
    }
}

/// For every node without a pod of the DaemonSet that gets none, why.
fn ineligible_nodes(e: &mut Explanation, snap: &Snapshot<'_>) {
    let by_node = pods_by_node(snap.pods, false);
    let eligibility = Eligibility::of(snap.ds, snap.comparison_operators);
    let mut selector = Vec::new();
    let mut pinned = Vec::new();
    let mut tainted: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in snap.nodes {
        let node_name = name(&node.metadata);
        if by_node.contains_key(node_name) {
            continue;
        }
        match eligibility.judge(node).1 {
            None => {}
            Some(Ineligible::NodeSelector) => selector.push(format!("Node/{node_name}")),
            Some(Ineligible::OtherNode) => pinned.push(format!("Node/{node_name}")),
            Some(Ineligible::Taint(t)) => {
                let taint = match t.value.as_deref().filter(|v| !v.is_empty()) {
                    Some(v) => format!("{}={v}:{}", t.key, t.effect),
                    None => format!("{}:{}", t.key, t.effect),
                };
                tainted
                    .entry(taint)
                    .or_default()
                    .push(format!("Node/{node_name}"));
            }
        }
    }
    let mut note = |reason: &'static str, message: String, objects: Vec<String>| {
        e.waiting_on.push(Waiting::new(reason, message, objects));
    };
    if !selector.is_empty() {
        let n = selector.len();
        note(
            "NodeSelectorMismatch",
            format!("{n} nodes do not match the template's nodeSelector or required node affinity"),
            selector,
        );
    }
    for (taint, nodes) in tainted {
        let n = nodes.len();
        note(
            "TaintNotTolerated",
            format!("{n} nodes carry the taint {taint}, which the pod does not tolerate"),
            nodes,
        );
    }
    if !pinned.is_empty() {
        let n = pinned.len();
        note(
            "PinnedToOtherNode",
            format!("{n} nodes are not the node the template's nodeName names"),
            pinned,
        );
    }
}

#[cfg(test)]
mod tests;
