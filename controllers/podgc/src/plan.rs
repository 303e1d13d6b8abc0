//! PURE: which pods one sweep force-deletes, in which order, and why.
//!
//! Everything here is a function of a snapshot of the pod and node caches, the configuration
//! and the quarantine's answer; no I/O, no clock reads, no async.
//!
//! A sweep is planned in steps because the orphan sweep needs the quarantine and a live API
//! answer in the middle: [`plan`] selects the terminated, out-of-service and unscheduled
//! victims and the unknown node names to quarantine; [`SweepPlan::still_unknown`] tells
//! which names out of quarantine are still unknown; after the caller has confirmed with a `GET` which of
//! those are really gone, [`orphaned_pods`] selects the pods bound to them.
//!
//! Mirrors the selection logic of upstream `pkg/controller/podgc/gc_controller.go`
//! (`gcTerminated`, `gcTerminating`, `gcOrphaned`, `gcUnscheduledTerminating`,
//! `byEvictionAndCreationTimestamp`).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::fasthash::{HashMap, HashSet};

use crate::consts;
use rkcm_runtime::workload::pod::{
    CONDITION_TRUE, PHASE_FAILED, PHASE_PENDING, PHASE_RUNNING, PHASE_UNKNOWN, phase as phase_of,
};

/// Why a pod is force-deleted; one per sweep. The label is the metrics `reason` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Terminated pods above `--terminated-pod-gc-threshold`.
    Terminated,
    /// Terminating pods on a not-ready node with the out-of-service taint.
    OutOfService,
    /// Pods bound to a node that no longer exists.
    Orphaned,
    /// Terminating pods never bound to a node.
    Unscheduled,
}

impl Reason {
    /// The `reason` label value of the force-delete metrics.
    pub fn label(self) -> &'static str {
        match self {
            Reason::Terminated => consts::metrics::REASON_TERMINATED,
            Reason::OutOfService => consts::metrics::REASON_OUT_OF_SERVICE,
            Reason::Orphaned => consts::metrics::REASON_ORPHANED,
            Reason::Unscheduled => consts::metrics::REASON_UNSCHEDULED,
        }
    }

    /// Only orphans get the `DisruptionTarget` condition: the other sweeps act on pods that
    /// are already finished or already being deleted by someone else, whose cause is known.
    pub fn adds_disruption_condition(self) -> bool {
        matches!(self, Reason::Orphaned)
    }
}

fn node_name_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// Terminated for the threshold: any phase but `Pending`, `Running` and `Unknown`. An empty
/// phase counts as terminated, as upstream does.
pub fn is_terminated(pod: &Pod) -> bool {
    !matches!(phase_of(pod), PHASE_PENDING | PHASE_RUNNING | PHASE_UNKNOWN)
}

/// Someone has already asked for the pod's deletion.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Evicted by the kubelet: phase `Failed` with reason `Evicted`.
pub fn is_evicted(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    status.phase.as_deref() == Some(PHASE_FAILED)
        && status.reason.as_deref() == Some(consts::POD_REASON_EVICTED)
}

/// Ready means a `Ready` condition with status `True`; a node without conditions (just
/// registered, or never heard from) is not ready.
pub fn is_node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == consts::NODE_CONDITION_READY && c.status == CONDITION_TRUE)
}

/// The admin's "this node is really down" signal; key match only, value and effect ignored.
pub fn has_out_of_service_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .any(|t| t.key == consts::TAINT_OUT_OF_SERVICE)
}

/// Deletion order: evicted pods first, so that finished pods of controllers survive longer;
/// then oldest `creationTimestamp` first (a missing timestamp sorts as the oldest, like Go's
/// zero time); ties by name. Namespace is deliberately not a tie-breaker: the threshold is
/// cluster-wide.
pub fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    is_evicted(b)
        .cmp(&is_evicted(a))
        .then_with(|| {
            a.metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp)
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// What one sweep does before the orphan confirmation.
#[derive(Debug, Default, Clone)]
pub struct SweepPlan {
    /// The `#terminated − threshold` first terminated pods in [`deletion_order`]; empty when
    /// the threshold is ≤ 0 or not exceeded.
    pub terminated: Vec<Arc<Pod>>,
    /// Terminating pods on not-ready, out-of-service-tainted nodes, in [`deletion_order`].
    pub out_of_service: Vec<Arc<Pod>>,
    /// Names of nodes that pods are bound to but the node cache does not know: they go into
    /// the quarantine (upstream's delaying queue `orphaned_pods_nodes`).
    pub unknown_nodes: BTreeSet<String>,
    /// Terminating pods without a node, in snapshot order.
    pub unscheduled: Vec<Arc<Pod>>,
    /// Names of the nodes in the snapshot, to re-check quarantined names against.
    pub known_nodes: HashSet<String>,
}

impl SweepPlan {
    /// Whether a name out of quarantine is still absent from the node cache; only such names
    /// are worth a live `GET`. A node that showed up during the quarantine saves its pods.
    pub fn still_unknown(&self, node: &str) -> bool {
        !self.known_nodes.contains(node)
    }
}

/// Plans the terminated, out-of-service and unscheduled sweeps of one tick and collects the
/// unknown node names for the orphan sweep. All sweeps share the same snapshot, so a pod may
/// be selected by more than one of them (a repeated delete is harmless).
pub fn plan(pods: &[Arc<Pod>], nodes: &[Arc<Node>], terminated_pod_gc_threshold: i32) -> SweepPlan {
    let by_name: HashMap<&str, &Node> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref().map(|name| (name, n.as_ref())))
        .collect();

    SweepPlan {
        terminated: terminated_above(pods, terminated_pod_gc_threshold),
        out_of_service: plan_out_of_service(pods, &by_name),
        unknown_nodes: pods
            .iter()
            .map(|p| node_name_of(p))
            .filter(|n| !n.is_empty() && !by_name.contains_key(n))
            .map(str::to_owned)
            .collect(),
        unscheduled: pods
            .iter()
            .filter(|p| is_terminating(p) && node_name_of(p).is_empty())
            .cloned()
            .collect(),
        known_nodes: by_name.keys().map(|n| (*n).to_owned()).collect(),
    }
}

/// The terminated pods of `pods` above `threshold`, in [`deletion_order`] (the threshold
/// sweep of [`plan`]; sharded PodGC runs it over the cluster's terminated pods alone).
pub fn terminated_above(pods: &[Arc<Pod>], threshold: i32) -> Vec<Arc<Pod>> {
    // ≤ 0 disables only this sweep (upstream flag semantics).
    let Ok(threshold) = usize::try_from(threshold) else {
        return Vec::new();
    };
    if threshold == 0 {
        return Vec::new();
    }
    let mut terminated: Vec<Arc<Pod>> = pods.iter().filter(|p| is_terminated(p)).cloned().collect();
    let Some(delete_count) = terminated.len().checked_sub(threshold).filter(|c| *c > 0) else {
        return Vec::new();
    };
    terminated.sort_by(|a, b| deletion_order(a, b));
    terminated.truncate(delete_count);
    terminated
}

fn plan_out_of_service(pods: &[Arc<Pod>], nodes: &HashMap<&str, &Node>) -> Vec<Arc<Pod>> {
    let mut selected: Vec<Arc<Pod>> = pods
        .iter()
        .filter(|p| is_terminating(p))
        .filter(|p| {
            // An unbound pod or an unknown node is not this sweep's business (the unscheduled
            // and orphan sweeps cover those).
            nodes.get(node_name_of(p)).is_some_and(|n| {
                // Mutant (sim only): any not-ready node counts as out of service.
                !is_node_ready(n)
                    && (has_out_of_service_taint(n)
                        || rkcm_runtime::mutants::on("podgc-out-of-service-without-taint"))
            })
        })
        .cloned()
        .collect();
    selected.sort_by(|a, b| deletion_order(a, b));
    selected
}

/// The pods of the orphan sweep: those bound to a node confirmed gone. Snapshot order.
pub fn orphaned_pods(pods: &[Arc<Pod>], deleted_nodes: &BTreeSet<String>) -> Vec<Arc<Pod>> {
    if deleted_nodes.is_empty() {
        return Vec::new();
    }
    pods.iter()
        .filter(|p| {
            let node = node_name_of(p);
            !node.is_empty() && deleted_nodes.contains(node)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Taint;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use rkcm_runtime::cache::cached::{NodeCondition, NodeSpec, NodeStatus, PodSpec, PodStatus};

    pub(crate) fn ts(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(1_700_000_000 + secs).expect("valid test timestamp"))
    }

    pub(crate) fn pod(ns: &str, name: &str, created: i64, phase: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some(ns.into());
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(format!("uid-{ns}-{name}"));
        p.metadata.generation = Some(1);
        p.metadata.creation_timestamp = Some(ts(created));
        p.spec = Some(PodSpec::default());
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        });
        p
    }

    pub(crate) fn on(mut p: Pod, node: &str) -> Pod {
        p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        p
    }

    pub(crate) fn deleting(mut p: Pod) -> Pod {
        p.metadata.deletion_timestamp = Some(ts(10_000));
        p
    }

    fn evicted(mut p: Pod) -> Pod {
        let s = p.status.get_or_insert_with(Default::default);
        s.phase = Some(PHASE_FAILED.into());
        s.reason = Some(consts::POD_REASON_EVICTED.into());
        p
    }

    pub(crate) fn node(name: &str, ready: Option<&str>, taints: &[(&str, &str, &str)]) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.spec = Some(NodeSpec {
            taints: Some(
                taints
                    .iter()
                    .map(|(k, v, e)| Taint {
                        key: (*k).into(),
                        value: (!v.is_empty()).then(|| (*v).into()),
                        effect: (*e).into(),
                        time_added: None,
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        n.status = Some(NodeStatus {
            conditions: ready.map(|s| {
                vec![NodeCondition {
                    type_: "Ready".into(),
                    status: s.into(),
                }]
            }),
        });
        n
    }

    fn arcs<T>(v: Vec<T>) -> Vec<Arc<T>> {
        v.into_iter().map(Arc::new).collect()
    }

    fn names(v: &[Arc<Pod>]) -> Vec<String> {
        v.iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect()
    }

    const OOS: &str = "node.kubernetes.io/out-of-service";

    #[test]
    fn reason_labels_are_upstream_values() {
        assert_eq!(Reason::Terminated.label(), "terminated");
        assert_eq!(Reason::OutOfService.label(), "out-of-service");
        assert_eq!(Reason::Orphaned.label(), "orphaned");
        assert_eq!(Reason::Unscheduled.label(), "unscheduled");
        assert!(Reason::Orphaned.adds_disruption_condition());
        for r in [
            Reason::Terminated,
            Reason::OutOfService,
            Reason::Unscheduled,
        ] {
            assert!(!r.adds_disruption_condition(), "{r:?}");
        }
    }

    #[test]
    fn terminated_phase_table() {
        let cases = [
            ("Pending", false),
            ("Running", false),
            ("Unknown", false),
            ("Succeeded", true),
            ("Failed", true),
            // An empty or unexpected phase counts as terminated, as upstream.
            ("", true),
            ("Bogus", true),
        ];
        for (phase, want) in cases {
            assert_eq!(
                is_terminated(&pod("ns", "p", 0, phase)),
                want,
                "phase {phase:?}"
            );
        }
        let mut no_status = pod("ns", "p", 0, "");
        no_status.status = None;
        assert!(is_terminated(&no_status));
        assert!(!rkcm_runtime::workload::pod::is_terminal(&no_status));
    }

    #[test]
    fn evicted_needs_failed_phase_and_reason() {
        assert!(is_evicted(&evicted(pod("ns", "a", 0, "Failed"))));
        let mut succeeded_evicted = pod("ns", "a", 0, "Succeeded");
        succeeded_evicted
            .status
            .get_or_insert_with(Default::default)
            .reason = Some("Evicted".into());
        assert!(!is_evicted(&succeeded_evicted));
        let mut other_reason = pod("ns", "a", 0, "Failed");
        other_reason
            .status
            .get_or_insert_with(Default::default)
            .reason = Some("DeadlineExceeded".into());
        assert!(!is_evicted(&other_reason));
        assert!(!is_evicted(&pod("ns", "a", 0, "Failed")));
    }

    #[test]
    fn node_readiness_table() {
        assert!(is_node_ready(&node("n", Some("True"), &[])));
        assert!(!is_node_ready(&node("n", Some("False"), &[])));
        assert!(!is_node_ready(&node("n", Some("Unknown"), &[])));
        // No Ready condition at all: a freshly registered node is not ready.
        assert!(!is_node_ready(&node("n", None, &[])));
        let mut bare = Node::default();
        bare.metadata.name = Some("n".into());
        assert!(!is_node_ready(&bare));
    }

    #[test]
    fn out_of_service_taint_matches_key_only() {
        assert!(has_out_of_service_taint(&node(
            "n",
            None,
            &[(OOS, "nodeshutdown", "NoExecute")]
        )));
        assert!(has_out_of_service_taint(&node(
            "n",
            None,
            &[(OOS, "", "NoSchedule")]
        )));
        assert!(has_out_of_service_taint(&node(
            "n",
            None,
            &[("a", "", "NoSchedule"), (OOS, "x", "PreferNoSchedule")]
        )));
        assert!(!has_out_of_service_taint(&node(
            "n",
            None,
            &[("node.kubernetes.io/unreachable", "", "NoExecute")]
        )));
        assert!(!has_out_of_service_taint(&node("n", None, &[])));
    }

    #[test]
    fn deletion_order_evicted_then_oldest_then_name() {
        let old_ok = pod("ns", "old", 0, "Succeeded");
        let new_evicted = evicted(pod("ns", "new", 100, "Failed"));
        assert_eq!(deletion_order(&new_evicted, &old_ok), Ordering::Less);
        assert_eq!(deletion_order(&old_ok, &new_evicted), Ordering::Greater);

        let older = pod("ns", "z", 1, "Succeeded");
        let newer = pod("ns", "a", 2, "Succeeded");
        assert_eq!(deletion_order(&older, &newer), Ordering::Less);

        // Same second: the smaller name goes first (spec scenario 3).
        let a = pod("ns", "pod-a", 5, "Succeeded");
        let b = pod("ns", "pod-b", 5, "Succeeded");
        assert_eq!(deletion_order(&a, &b), Ordering::Less);
        assert_eq!(deletion_order(&b, &a), Ordering::Greater);

        // Namespace is not a tie-breaker: equal name and time compare equal.
        let x = pod("ns-a", "same", 5, "Succeeded");
        let y = pod("ns-b", "same", 5, "Succeeded");
        assert_eq!(deletion_order(&x, &y), Ordering::Equal);

        // Two evicted pods still order by age.
        let e_old = evicted(pod("ns", "e2", 1, "Failed"));
        let e_new = evicted(pod("ns", "e1", 2, "Failed"));
        assert_eq!(deletion_order(&e_old, &e_new), Ordering::Less);

        // A missing creation timestamp sorts as the oldest (Go zero time).
        let mut no_ts = pod("ns", "zz", 0, "Succeeded");
        no_ts.metadata.creation_timestamp = None;
        assert_eq!(deletion_order(&no_ts, &older), Ordering::Less);
    }

    #[test]
    #[allow(clippy::too_many_lines, reason = "a table test: one case per row")]
    fn terminated_sweep_table() {
        struct Case {
            name: &'static str,
            threshold: i32,
            pods: Vec<Pod>,
            want: Vec<&'static str>,
        }
        let five_succeeded = || {
            (0..5)
                .map(|i| {
                    pod(
                        "ns",
                        ["p0", "p1", "p2", "p3", "p4"][i],
                        i as i64,
                        "Succeeded",
                    )
                })
                .collect()
        };
        let cases = vec![
            Case {
                name: "trims the oldest above the threshold",
                threshold: 3,
                pods: five_succeeded(),
                want: vec!["ns/p0", "ns/p1"],
            },
            Case {
                name: "at the threshold nothing",
                threshold: 5,
                pods: five_succeeded(),
                want: vec![],
            },
            Case {
                name: "below the threshold nothing",
                threshold: 12500,
                pods: five_succeeded(),
                want: vec![],
            },
            Case {
                name: "threshold 0 disables",
                threshold: 0,
                pods: five_succeeded(),
                want: vec![],
            },
            Case {
                name: "negative threshold disables",
                threshold: -1,
                pods: five_succeeded(),
                want: vec![],
            },
            Case {
                name: "threshold 1 keeps the newest",
                threshold: 1,
                pods: five_succeeded(),
                want: vec!["ns/p0", "ns/p1", "ns/p2", "ns/p3"],
            },
            Case {
                name: "evicted first even if newest",
                threshold: 2,
                pods: vec![
                    pod("ns", "a", 0, "Succeeded"),
                    pod("ns", "b", 1, "Succeeded"),
                    evicted(pod("ns", "c", 2, "Failed")),
                ],
                want: vec!["ns/c"],
            },
            Case {
                name: "non-terminal pods never count nor get picked",
                threshold: 1,
                pods: vec![
                    pod("ns", "r1", 0, "Running"),
                    pod("ns", "r2", 1, "Pending"),
                    pod("ns", "r3", 2, "Unknown"),
                    pod("ns", "s", 3, "Succeeded"),
                ],
                want: vec![],
            },
            Case {
                name: "non-terminal pods ignored among terminated",
                threshold: 1,
                pods: vec![
                    pod("ns", "r", 0, "Running"),
                    pod("ns", "s1", 1, "Succeeded"),
                    pod("ns", "f2", 2, "Failed"),
                ],
                want: vec!["ns/s1"],
            },
            Case {
                name: "name tie-break within the same second",
                threshold: 1,
                pods: vec![
                    pod("ns", "pod-b", 7, "Succeeded"),
                    pod("ns", "pod-a", 7, "Succeeded"),
                ],
                want: vec!["ns/pod-a"],
            },
            Case {
                name: "global threshold across namespaces",
                threshold: 2,
                pods: vec![
                    pod("ns-b", "b1", 10, "Succeeded"),
                    pod("ns-a", "a1", 1, "Failed"),
                    pod("ns-b", "b2", 11, "Succeeded"),
                    pod("ns-a", "a2", 2, "Succeeded"),
                ],
                want: vec!["ns-a/a1", "ns-a/a2"],
            },
            Case {
                name: "terminating terminated pods still count",
                threshold: 1,
                pods: vec![
                    deleting(pod("ns", "d", 0, "Succeeded")),
                    pod("ns", "s", 1, "Succeeded"),
                ],
                want: vec!["ns/d"],
            },
            Case {
                name: "empty snapshot",
                threshold: 1,
                pods: vec![],
                want: vec![],
            },
        ];
        for c in cases {
            let p = plan(&arcs(c.pods), &[], c.threshold);
            assert_eq!(names(&p.terminated), c.want, "{}", c.name);
        }
    }

    #[test]
    fn out_of_service_sweep_table() {
        let nodes = arcs(vec![
            node("dead", Some("False"), &[(OOS, "nodeshutdown", "NoExecute")]),
            node("dead-noschedule", None, &[(OOS, "", "NoSchedule")]),
            node(
                "ready-tainted",
                Some("True"),
                &[(OOS, "nodeshutdown", "NoExecute")],
            ),
            node(
                "notready-untainted",
                Some("False"),
                &[("node.kubernetes.io/unreachable", "", "NoExecute")],
            ),
        ]);
        struct Case {
            name: &'static str,
            pod: Pod,
            selected: bool,
        }
        let cases = vec![
            Case {
                name: "terminating on dead tainted node",
                pod: deleting(on(pod("ns", "p", 0, "Running"), "dead")),
                selected: true,
            },
            Case {
                name: "no Ready condition and NoSchedule empty-value taint",
                pod: deleting(on(pod("ns", "p", 0, "Running"), "dead-noschedule")),
                selected: true,
            },
            Case {
                name: "terminal terminating pod also selected",
                pod: deleting(on(pod("ns", "p", 0, "Succeeded"), "dead")),
                selected: true,
            },
            Case {
                name: "not terminating",
                pod: on(pod("ns", "p", 0, "Running"), "dead"),
                selected: false,
            },
            Case {
                name: "node ready",
                pod: deleting(on(pod("ns", "p", 0, "Running"), "ready-tainted")),
                selected: false,
            },
            Case {
                name: "node without the taint",
                pod: deleting(on(pod("ns", "p", 0, "Running"), "notready-untainted")),
                selected: false,
            },
            Case {
                name: "unknown node",
                pod: deleting(on(pod("ns", "p", 0, "Running"), "ghost")),
                selected: false,
            },
            Case {
                name: "unbound",
                pod: deleting(pod("ns", "p", 0, "Pending")),
                selected: false,
            },
        ];
        for c in cases {
            let p = plan(&arcs(vec![c.pod]), &nodes, 0);
            assert_eq!(
                p.out_of_service.len(),
                usize::from(c.selected),
                "{}",
                c.name
            );
        }

        // All qualifying pods, no threshold, in deletion order.
        let pods = arcs(vec![
            deleting(on(pod("ns", "young", 5, "Running"), "dead")),
            deleting(on(evicted(pod("ns", "evicted", 9, "Failed")), "dead")),
            deleting(on(pod("ns", "old", 1, "Running"), "dead-noschedule")),
        ]);
        let p = plan(&pods, &nodes, 12500);
        assert_eq!(
            names(&p.out_of_service),
            ["ns/evicted", "ns/old", "ns/young"]
        );
    }

    #[test]
    fn unscheduled_sweep_table() {
        let nodes = arcs(vec![node("n1", Some("True"), &[])]);
        let mut empty_node_name = deleting(pod("ns", "empty", 0, "Pending"));
        empty_node_name
            .spec
            .get_or_insert_with(Default::default)
            .node_name = Some(String::new());
        let pods = arcs(vec![
            deleting(pod("ns", "u1", 3, "Pending")),
            pod("ns", "not-terminating", 0, "Pending"),
            deleting(on(pod("ns", "bound", 0, "Running"), "n1")),
            empty_node_name,
            deleting(pod("ns", "u0", 0, "Succeeded")),
        ]);
        let p = plan(&pods, &nodes, 0);
        // Snapshot order, no sorting.
        assert_eq!(names(&p.unscheduled), ["ns/u1", "ns/empty", "ns/u0"]);
        assert!(p.unknown_nodes.is_empty());
    }

    #[test]
    fn unknown_nodes_and_orphans() {
        let nodes = arcs(vec![node("n1", Some("True"), &[])]);
        let pods = arcs(vec![
            on(pod("ns", "a", 0, "Running"), "ghost"),
            on(pod("ns", "b", 1, "Succeeded"), "ghost"),
            on(pod("ns", "c", 2, "Running"), "n1"),
            pod("ns", "d", 3, "Pending"),
            deleting(on(pod("ns", "e", 4, "Running"), "gone")),
        ]);
        let p = plan(&pods, &nodes, 0);
        assert_eq!(
            p.unknown_nodes
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["ghost", "gone"]
        );
        // A quarantined name that is known again by the time it is ready is not checked.
        assert!(p.still_unknown("ghost"));
        assert!(!p.still_unknown("n1"));

        let deleted: BTreeSet<String> = ["ghost".to_owned()].into();
        // Terminal orphans are selected too (they get no condition: see status.rs).
        assert_eq!(names(&orphaned_pods(&pods, &deleted)), ["ns/a", "ns/b"]);
        assert!(orphaned_pods(&pods, &BTreeSet::new()).is_empty());
        // Unbound pods are never orphans, even if "" were somehow reported deleted.
        let odd: BTreeSet<String> = [String::new()].into();
        assert!(orphaned_pods(&pods, &odd).is_empty());
    }

    #[test]
    fn a_pod_may_be_picked_by_several_sweeps() {
        // A terminated orphan above the threshold: terminated now, orphan after quarantine.
        let pods = arcs(vec![
            on(pod("ns", "a", 0, "Succeeded"), "ghost"),
            pod("ns", "b", 1, "Succeeded"),
        ]);
        let p = plan(&pods, &[], 1);
        assert_eq!(names(&p.terminated), ["ns/a"]);
        assert!(p.unknown_nodes.contains("ghost"));
    }
}
