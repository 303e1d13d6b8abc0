//! PURE: whether PodGC would force-delete one pod now, and if not, why (`rkcm explain
//! pod/NS/NAME`), from the pod and node caches' contents and PodGC's configuration, through
//! PodGC's own sweep plan ([`crate::plan::plan`]).
//!
//! Reason codes:
//! - `NodeQuarantine`: the pod's node is not in the cluster; PodGC deletes the pod once the
//!   node has been missing for the quarantine (40 s) and a live `GET` confirms it is gone.
//! - `BelowTerminatedThreshold`: the pod has terminated, but the cluster holds no more
//!   terminated pods than `--terminated-pod-gc-threshold`; PodGC deletes the oldest ones only
//!   above it.
//! - `NodePresent`: the pod is being deleted on a node that exists and is not out of service:
//!   its kubelet finishes the deletion; PodGC force-deletes only on a NotReady node with the
//!   `node.kubernetes.io/out-of-service` taint.
//! - `NotGarbage`: a running or pending pod on a node that exists: nothing for PodGC (settled).

use std::collections::BTreeSet;
use std::sync::Arc;

use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::explain::{Explanation, ObjectRef, State, Waiting};
use rkcm_runtime::fasthash::HashMap;

use crate::config::NAME;
use crate::plan::{
    Reason, SweepPlan, has_out_of_service_taint, is_node_ready, is_terminated, is_terminating, plan,
};

fn key(pod: &Pod) -> (&str, &str) {
    (
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// The explanation for `pod`, one of `pods` (every pod of the cluster, as PodGC's cache holds
/// them), with the cluster's `nodes` and PodGC's `threshold`.
pub fn explain(
    pod: &Arc<Pod>,
    pods: &[Arc<Pod>],
    nodes: &[Arc<Node>],
    threshold: i32,
    quarantine_secs: u64,
) -> Explanation {
    let (namespace, name) = key(pod);
    let mut e = Explanation {
        object: ObjectRef {
            kind: "Pod".into(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        },
        controller: NAME,
        state: State::Settled,
        actions: Vec::new(),
        waiting_on: Vec::new(),
        remedies: Vec::new(),
    };
    let sweep = plan(pods, nodes, threshold);
    let this = |list: &[Arc<Pod>]| list.iter().any(|p| key(p) == (namespace, name));
    let chosen = [
        (Reason::Terminated, this(&sweep.terminated)),
        (Reason::OutOfService, this(&sweep.out_of_service)),
        (Reason::Unscheduled, this(&sweep.unscheduled)),
    ]
    .into_iter()
    .find_map(|(reason, yes)| yes.then_some(reason));
    if let Some(reason) = chosen {
        e.state = State::Acting;
        e.actions.push(format!(
            "force-delete the pod (grace period 0) at the next sweep: {}",
            reason.label()
        ));
        return e;
    }
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default();
    let node = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node_name));
    if sweep.unknown_nodes.contains(node_name) {
        e.waiting_on
            .push(quarantine_wait(node_name, quarantine_secs));
        e.state = State::Waiting;
        return e;
    }
    if is_terminated(pod) {
        let terminated = pods.iter().filter(|p| is_terminated(p)).count();
        let message = if threshold <= 0 {
            "the pod has terminated; the terminated-pod sweep is off (--terminated-pod-gc-threshold <= 0)".to_owned()
        } else {
            format!(
                "the pod has terminated; the cluster holds {terminated} terminated pods and PodGC deletes the oldest only above {threshold} (--terminated-pod-gc-threshold)"
            )
        };
        e.waiting_on.push(Waiting::new(
            "BelowTerminatedThreshold",
            message,
            Vec::new(),
        ));
        e.remedies.push(format!(
            "delete it yourself if it is not needed: kubectl -n {namespace} delete pod {name}"
        ));
        return e;
    }
    if is_terminating(pod)
        && let Some(n) = node
    {
        let ready = is_node_ready(n);
        e.waiting_on.push(node_present_wait(
            node_name,
            ready,
            has_out_of_service_taint(n),
        ));
        e.state = State::Waiting;
        if !ready {
            e.remedies.push(format!(
                "if node {node_name} is down for good: kubectl taint node {node_name} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, or delete the node"
            ));
        }
        return e;
    }
    e.waiting_on.push(Waiting::new(
        "NotGarbage",
        format!(
            "the pod is not terminated nor being deleted, and its node {node_name:?} exists or it is not bound: nothing for PodGC"
        ),
        Vec::new(),
    ));
    e
}

/// PodGC waits on a pod whose node `node` is missing from the cluster.
fn quarantine_wait(node: &str, quarantine_secs: u64) -> Waiting {
    Waiting::new(
        "NodeQuarantine",
        format!(
            "node {node} is not in the cluster: PodGC deletes the pod once the node has been missing for {quarantine_secs} s and a GET confirms it is gone"
        ),
        vec![format!("Node/{node}")],
    )
}

/// PodGC leaves a pod being deleted on node `node`, which exists, to its kubelet.
fn node_present_wait(node: &str, ready: bool, tainted: bool) -> Waiting {
    Waiting::new(
        "NodePresent",
        format!(
            "the pod is being deleted on node {node}, which exists (Ready: {ready}, out-of-service taint: {tainted}): its kubelet finishes the deletion; PodGC force-deletes only on a NotReady node with the out-of-service taint"
        ),
        vec![format!("Node/{node}")],
    )
}

/// What one sweep waits on, per pod key (`namespace/name`), for the sweep's last decisions:
/// every pod bound to a node missing from the cluster and not confirmed gone in this sweep
/// (`NodeQuarantine`), and every pod being deleted on a NotReady node without the
/// out-of-service taint (`NodePresent`: the pods people find stuck `Terminating`). The same
/// reasons and messages as [`explain`]. Terminated pods below the threshold and pods on Ready
/// nodes are settled for PodGC: no record, so the store holds only the pods that wait.
pub fn sweep_waits(
    pods: &[Arc<Pod>],
    nodes: &[Arc<Node>],
    sweep: &SweepPlan,
    confirmed_gone: &BTreeSet<String>,
    quarantine_secs: u64,
) -> Vec<(String, Waiting)> {
    let by_name: HashMap<&str, &Node> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref().map(|name| (name, n.as_ref())))
        .collect();
    pods.iter()
        .filter_map(|pod| {
            let node = pod.spec.as_ref()?.node_name.as_deref()?;
            let wait = if sweep.unknown_nodes.contains(node) {
                (!confirmed_gone.contains(node)).then(|| quarantine_wait(node, quarantine_secs))
            } else {
                // Only a terminating pod waits on a node that exists (checked first: most
                // pods are not, and the node need not be looked up for them).
                if !is_terminating(pod) {
                    return None;
                }
                let n = by_name.get(node)?;
                let stuck = !is_node_ready(n) && !has_out_of_service_taint(n);
                stuck.then(|| node_present_wait(node, false, false))
            }?;
            Some((rkcm_runtime::keys::key_of(pod.as_ref()), wait))
        })
        .collect()
}

#[cfg(test)]
mod tests;
