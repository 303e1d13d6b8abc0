//! Node events: which ones matter, and which DaemonSets a changed node concerns. Pure.
//!
//! Upstream (v1.36+) pushes the name of an added node, or of an updated node whose labels or
//! taints changed, onto the `daemonset-node-updates` queue; a worker then enqueues every
//! DaemonSet for which the node makes a difference. Heartbeats, condition and other status
//! updates, and changes to fields eligibility does not read, cost nothing. Node deletion has
//! no handler: pods of a deleted node are deleted by pod GC (bound) or by the next sync of
//! their DaemonSet (unbound).

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Taint;
use rkcm_runtime::cache::cached::Node;

use crate::eligibility::node_should_run_daemon_pod;
use crate::plan::{node_is_not_ready, skips_not_ready_nodes};

fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// An update worth looking at (upstream `shouldIgnoreNodeUpdate`): labels or taints differ
/// (semantically: an empty list or map equals an absent one). With `readiness_matters` (some
/// DaemonSet opted into rkcm's rollout past NotReady nodes, see
/// `plan::skips_not_ready_nodes`) also a node going NotReady or coming back, so such a
/// rollout looks again when that changes. Heartbeats never flip it.
pub fn node_update_matters(old: &Node, new: &Node, readiness_matters: bool) -> bool {
    fn labels(n: &Node) -> Option<&std::collections::BTreeMap<String, String>> {
        n.metadata.labels.as_ref().filter(|l| !l.is_empty())
    }
    labels(old) != labels(new)
        || taints(old) != taints(new)
        || (readiness_matters && node_is_not_ready(old) != node_is_not_ready(new))
}

/// A rolling update that has not reached every node yet.
fn rolling_out(ds: &DaemonSet) -> bool {
    crate::template::strategy_type(ds) == crate::consts::strategy::ROLLING_UPDATE
        && ds
            .status
            .as_ref()
            .is_some_and(|s| s.updated_number_scheduled.unwrap_or(0) < s.desired_number_scheduled)
}

/// Whether the DaemonSet must sync because of `node`: it should run there and has no pod
/// bound there, it should not run there (or must not continue there) but has a bound pod, or
/// it has a bound pod and counts misscheduled pods; or it opted into rkcm's rollout past
/// NotReady nodes and is mid-rollout with a pod there. `comparison_operators`: gate
/// `TaintTolerationComparisonOperators`; `skip_not_ready_default`: the manager's opt-in.
pub fn daemonset_needs_sync(
    node: &Node,
    ds: &DaemonSet,
    has_bound_pod: bool,
    comparison_operators: bool,
    skip_not_ready_default: bool,
) -> bool {
    let p = node_should_run_daemon_pod(node, ds, comparison_operators);
    let misscheduled = ds
        .status
        .as_ref()
        .is_some_and(|s| s.number_misscheduled > 0);
    if has_bound_pod {
        // Upstream enqueues for `!shouldContinueRunning` or a non-zero misscheduled count;
        // `!shouldRun` also covers a new `NoSchedule` taint, which keeps the pod but makes it
        // misscheduled, so the status follows at once.
        !p.should_run
            || misscheduled
            || (skips_not_ready_nodes(ds, skip_not_ready_default) && rolling_out(ds))
    } else {
        p.should_run
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).unwrap_or_default()
    }

    #[test]
    fn only_label_and_taint_changes_matter() {
        let base = node(json!({
            "metadata": {"name": "n", "labels": {"a": "1"}, "resourceVersion": "1"},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}
        }));
        let mut heartbeat = base.clone();
        heartbeat.metadata.resource_version = Some("2".into());
        heartbeat.status = Some(serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:40Z"}]})).unwrap_or_default());
        assert!(
            !node_update_matters(&base, &heartbeat, true),
            "heartbeat only"
        );
        let mut not_ready = base.clone();
        not_ready.status = Some(serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "Unknown", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]})).unwrap_or_default());
        // Upstream ignores readiness; rkcm looks only when some DaemonSet opted in.
        assert!(
            !node_update_matters(&base, &not_ready, false),
            "went NotReady"
        );
        assert!(!node_update_matters(&not_ready, &base, false), "came back");
        assert!(
            node_update_matters(&base, &not_ready, true),
            "went NotReady, opted in"
        );
        assert!(
            node_update_matters(&not_ready, &base, true),
            "came back, opted in"
        );
        let mut cordoned = base.clone();
        if let Some(s) = cordoned.spec.as_mut() {
            s.unschedulable = Some(true);
        }
        assert!(
            !node_update_matters(&base, &cordoned, true),
            "only the unschedulable taint counts"
        );
        let mut relabelled = base.clone();
        relabelled.metadata.labels = Some([("a".to_string(), "2".to_string())].into());
        assert!(node_update_matters(&base, &relabelled, false));
        let mut tainted = base.clone();
        if let Some(s) = tainted.spec.as_mut() {
            s.taints = None;
        }
        assert!(node_update_matters(&base, &tainted, false));
        let mut empty_vs_none = tainted.clone();
        if let Some(s) = empty_vs_none.spec.as_mut() {
            s.taints = Some(vec![]);
        }
        assert!(!node_update_matters(&tainted, &empty_vs_none, true));
    }

    fn ds(selector: serde_json::Value, misscheduled: i32) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "ds", "namespace": "ns", "uid": "u"},
            "spec": {
                "selector": {"matchLabels": {"app": "ds"}},
                "template": {"metadata": {"labels": {"app": "ds"}}, "spec": {"nodeSelector": selector, "containers": [{"name": "c", "image": "i"}]}}
            },
            "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": misscheduled, "numberReady": 0}
        }))
        .unwrap_or_default()
    }

    #[test]
    fn a_daemonset_syncs_only_when_the_node_changes_something_for_it() {
        let edge = node(json!({"metadata": {"name": "n", "labels": {"role": "edge"}}}));
        let noexec = node(
            json!({"metadata": {"name": "n", "labels": {"role": "edge"}}, "spec": {"taints": [{"key": "x", "effect": "NoExecute"}]}}),
        );
        let sel = ds(json!({"role": "edge"}), 0);
        assert!(
            daemonset_needs_sync(&edge, &sel, false, false, false),
            "needs a pod"
        );
        assert!(
            !daemonset_needs_sync(&edge, &sel, true, false, false),
            "has its pod"
        );
        assert!(
            daemonset_needs_sync(&noexec, &sel, true, false, false),
            "its pod must go"
        );
        assert!(!daemonset_needs_sync(&noexec, &sel, false, false, false));
        let nosched = node(
            json!({"metadata": {"name": "n", "labels": {"role": "edge"}}, "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}),
        );
        assert!(
            daemonset_needs_sync(&nosched, &sel, true, false, false),
            "its pod becomes misscheduled"
        );
        assert!(
            !daemonset_needs_sync(&nosched, &sel, false, false, false),
            "no pod may start there"
        );
        let other = ds(json!({"role": "core"}), 0);
        assert!(!daemonset_needs_sync(&edge, &other, false, false, false));
        assert!(
            daemonset_needs_sync(&edge, &other, true, false, false),
            "misplaced pod"
        );
        let mut rolling = ds(json!({"role": "edge"}), 0);
        if let Some(s) = rolling.status.as_mut() {
            s.desired_number_scheduled = 2;
            s.updated_number_scheduled = Some(1);
        }
        assert!(
            !daemonset_needs_sync(&edge, &rolling, true, false, false),
            "upstream: a rollout with a pod on the node has nothing to look at"
        );
        assert!(
            daemonset_needs_sync(&edge, &rolling, true, false, true),
            "opted in: a rollout looks again at a node it may have left out"
        );
        let counted = ds(json!({"role": "edge"}), 1);
        assert!(
            daemonset_needs_sync(&edge, &counted, true, false, false),
            "misscheduled count may change"
        );
    }
}
