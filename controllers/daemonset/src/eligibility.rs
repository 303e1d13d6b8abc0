//! Which nodes a DaemonSet's pod belongs on. Pure.
//!
//! Mirrors `NodeShouldRunDaemonPod` and `predicates` of upstream
//! `pkg/controller/daemon/daemon_controller.go`, with the scheduler helpers it calls:
//! `nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)` and
//! `FindMatchingUntoleratedTaint` / `ToleratesTaint` of
//! `k8s.io/component-helpers/scheduling/corev1`.
//!
//! The decision is made for a hypothetical pod built from the template, with the DaemonSet's
//! default tolerations added. Only the node name, the `nodeSelector`, required node affinity
//! and `NoSchedule`/`NoExecute` taints count: the Ready condition, `spec.unschedulable`
//! (only its taint), capacity, ports and pod (anti-)affinity do not.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, PodSpec, Taint, Toleration,
};
use rkcm_runtime::cache::cached::Node;

use crate::consts::{OBJECT_NAME_FIELD, ops, taints};
use crate::template::add_or_update_daemon_pod_tolerations;

/// What a node means for a DaemonSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// A pod should be created here if none exists.
    pub should_run: bool,
    /// An existing pod may stay here (an untolerated `NoSchedule` taint stops new pods, not
    /// running ones).
    pub should_continue_running: bool,
}

impl Placement {
    pub const NONE: Placement = Placement {
        should_run: false,
        should_continue_running: false,
    };
    pub const RUN: Placement = Placement {
        should_run: true,
        should_continue_running: true,
    };
}

/// Why a node gets no new daemon pod (the first rule it fails, in upstream's order).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ineligible<'n> {
    /// The template's `spec.nodeName` names another node.
    OtherNode,
    /// The template's `nodeSelector` or required node affinity does not match the node.
    NodeSelector,
    /// A `NoSchedule` or `NoExecute` taint the pod does not tolerate (`spec.unschedulable`
    /// shows as the `node.kubernetes.io/unschedulable` taint).
    Taint(&'n Taint),
}

/// What [`node_should_run_daemon_pod`] reads of a DaemonSet, worked out once per DaemonSet
/// rather than once per node: the hypothetical daemon pod's fixed node, node selector,
/// required node affinity and tolerations (the template's, with the defaults added).
pub struct Eligibility<'a> {
    fixed_node: Option<&'a str>,
    node_selector: Option<&'a BTreeMap<String, String>>,
    required: Option<&'a NodeSelector>,
    tolerations: Vec<Toleration>,
    comparison_operators: bool,
}

impl<'a> Eligibility<'a> {
    /// `comparison_operators`: gate `TaintTolerationComparisonOperators` (alpha, off).
    pub fn of(ds: &'a DaemonSet, comparison_operators: bool) -> Self {
        let spec = ds.spec.template.spec.as_ref();
        let mut with_defaults = PodSpec {
            host_network: spec.and_then(|s| s.host_network),
            tolerations: spec.and_then(|s| s.tolerations.clone()),
            ..PodSpec::default()
        };
        add_or_update_daemon_pod_tolerations(&mut with_defaults);
        Eligibility {
            fixed_node: spec
                .and_then(|s| s.node_name.as_deref())
                .filter(|n| !n.is_empty()),
            node_selector: spec.and_then(|s| s.node_selector.as_ref()),
            required: spec
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|n| {
                    n.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
            tolerations: with_defaults.tolerations.unwrap_or_default(),
            comparison_operators,
        }
    }

    /// Upstream `NodeShouldRunDaemonPod(node, ds)`.
    pub fn placement(&self, node: &Node) -> Placement {
        self.judge(node).0
    }

    /// [`Self::placement`] with the reason a new pod does not belong on `node`, if it does not.
    pub fn judge<'n>(&self, node: &'n Node) -> (Placement, Option<Ineligible<'n>>) {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        // A fixed node name in the template pins the DaemonSet to that node alone.
        if self.fixed_node.is_some_and(|fixed| fixed != node_name) {
            return (Placement::NONE, Some(Ineligible::OtherNode));
        }
        if !self.matches_required_node_affinity(node) {
            return (Placement::NONE, Some(Ineligible::NodeSelector));
        }
        let node_taints: &[Taint] = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default();
        let untolerated = |effects: &[&str]| {
            find_matching_untolerated_taint(
                node_taints,
                &self.tolerations,
                self.comparison_operators,
                |t| effects.contains(&t.effect.as_str()),
            )
        };
        if let Some(taint) = untolerated(&[taints::NO_SCHEDULE, taints::NO_EXECUTE]) {
            // A running pod stays unless some untolerated taint evicts it.
            let placement = Placement {
                should_run: false,
                should_continue_running: untolerated(&[taints::NO_EXECUTE]).is_none(),
            };
            return (placement, Some(Ineligible::Taint(taint)));
        }
        (Placement::RUN, None)
    }

    /// `nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)`: the `nodeSelector` (every
    /// key=value) and the required node affinity terms. Parse errors count as "no match".
    fn matches_required_node_affinity(&self, node: &Node) -> bool {
        let labels = labels_of(node);
        if let Some(selector) = self.node_selector
            && !selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        {
            return false;
        }
        self.required
            .is_none_or(|selector| node_selector_matches(selector, node))
    }
}

/// Upstream `NodeShouldRunDaemonPod(node, ds)` for one node (see [`Eligibility`] for many).
pub fn node_should_run_daemon_pod(
    node: &Node,
    ds: &DaemonSet,
    comparison_operators: bool,
) -> Placement {
    Eligibility::of(ds, comparison_operators).placement(node)
}

/// A node's labels (an absent map reads as empty).
fn labels_of(node: &Node) -> &BTreeMap<String, String> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    node.metadata.labels.as_ref().unwrap_or(&NONE)
}

/// A required node selector: an OR over its terms. An empty term selects nothing; a term
/// that does not parse is skipped.
pub fn node_selector_matches(selector: &NodeSelector, node: &Node) -> bool {
    let labels = labels_of(node);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    selector.node_selector_terms.iter().any(|term| {
        let exprs = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if exprs.is_empty() && fields.is_empty() {
            return false;
        }
        let labels_ok = exprs
            .iter()
            .map(|r| label_requirement_matches(r, labels))
            .collect::<Option<Vec<bool>>>();
        let fields_ok = fields
            .iter()
            .map(|r| field_requirement_matches(r, name))
            .collect::<Option<Vec<bool>>>();
        match (labels_ok, fields_ok) {
            (Some(l), Some(f)) => {
                // Upstream only evaluates field requirements when the node has fields (a
                // name); every API node has one.
                l.iter().all(|m| *m) && (name.is_empty() || f.iter().all(|m| *m))
            }
            // A term with a malformed requirement never matches.
            _ => false,
        }
    })
}

/// One `matchExpressions` requirement against node labels; `None` when it does not parse
/// (`In`/`NotIn` without values, `Exists`/`DoesNotExist` with values, `Gt`/`Lt` without
/// exactly one integer, an unknown operator).
fn label_requirement_matches(
    r: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or_default();
    let value = labels.get(&r.key);
    match r.operator.as_str() {
        ops::IN | ops::NOT_IN if values.is_empty() => None,
        ops::IN => Some(value.is_some_and(|v| values.contains(v))),
        ops::NOT_IN => Some(value.is_none_or(|v| !values.contains(v))),
        ops::EXISTS | ops::DOES_NOT_EXIST if !values.is_empty() => None,
        ops::EXISTS => Some(value.is_some()),
        ops::DOES_NOT_EXIST => Some(value.is_none()),
        op @ (ops::GT | ops::LT) => {
            let [bound] = values else { return None };
            let bound: i64 = bound.parse().ok()?;
            // A label that is absent or not an integer does not match.
            Some(
                value
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| if op == ops::GT { v > bound } else { v < bound }),
            )
        }
        _ => None,
    }
}

/// One `matchFields` requirement: only `In`/`NotIn` with exactly one value, against the
/// node's `metadata.name` (the only field nodes expose to selectors).
fn field_requirement_matches(r: &NodeSelectorRequirement, node_name: &str) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or_default();
    let [value] = values else { return None };
    let field = if r.key == OBJECT_NAME_FIELD {
        node_name
    } else {
        ""
    };
    match r.operator.as_str() {
        ops::IN => Some(field == value),
        ops::NOT_IN => Some(field != value),
        _ => None,
    }
}

/// Upstream `ToleratesTaint` (k8s.io/api `core/v1/toleration.go`): the effect (when set) and
/// key (when set) must equal the taint's; `Exists` tolerates any value, `Equal` (or empty)
/// only the taint's value. `Gt`/`Lt` compare the two values as integers when
/// `comparison_operators` (gate `TaintTolerationComparisonOperators`) is on and tolerate
/// nothing when it is off.
pub fn tolerates_taint(toleration: &Toleration, taint: &Taint, comparison_operators: bool) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    let tol_value = toleration.value.as_deref().unwrap_or_default();
    let taint_value = taint.value.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | ops::EQUAL => tol_value == taint_value,
        ops::EXISTS => true,
        op @ (ops::GT | ops::LT) if comparison_operators => {
            let (Some(tol), Some(tnt)) = (decimal_integer(tol_value), decimal_integer(taint_value))
            else {
                // Upstream logs the parse error and does not tolerate.
                return false;
            };
            if op == ops::GT { tnt > tol } else { tnt < tol }
        }
        _ => false,
    }
}

/// A value `compareNumericValues` accepts: apimachinery `content.IsDecimalInteger` (an optional
/// `-`, then `0` alone or a non-zero digit followed by digits) that fits an `int64`.
fn decimal_integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = match digits.as_bytes() {
        [b'0'] => !s.starts_with('-'),
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical {
        return None;
    }
    s.parse().ok()
}

/// Upstream `FindMatchingUntoleratedTaint`: the first taint passing `filter` that no
/// toleration tolerates.
pub fn find_matching_untolerated_taint<'a>(
    node_taints: &'a [Taint],
    tolerations: &[Toleration],
    comparison_operators: bool,
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    node_taints.iter().filter(|t| filter(t)).find(|t| {
        !tolerations
            .iter()
            .any(|tol| tolerates_taint(tol, t, comparison_operators))
    })
}

#[cfg(test)]
mod tests;
