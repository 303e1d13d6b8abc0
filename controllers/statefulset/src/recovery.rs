//! PURE: rkcm's opt-in remedy for the stuck StatefulSet rollout (kubernetes/kubernetes#67250;
//! the StatefulSet docs' "Forced rollback"). Not upstream: off unless a set carries the
//! annotation [`ANNOTATION`] `"true"`, or the manager runs with
//! `--rkcm-statefulset-recover-stuck-rollout` (then `"false"` opts a set out).
//!
//! The trap: under `OrderedReady`, upstream's `processReplica`
//! (`pkg/controller/statefulset/stateful_set_control.go`) stops the whole sync at the lowest
//! replica that is not Running and Ready ("StatefulSet is waiting for Pod to be Running and
//! Ready"), before `updateStatefulSetAfterInvariantEstablished` would replace an old-revision
//! pod. A pod of an old revision that never becomes Ready therefore blocks the rolling update
//! that would replace it, even after the template is reverted; someone must delete it.
//!
//! The remedy takes exactly that wait's place: when the sync would stop at pod *k* for not
//! being Ready, and [`judge`] finds *k* stuck, the sync deletes *k* (gracefully, with UID and
//! resourceVersion preconditions) and does nothing else; the ordered creation brings *k* back
//! at the update revision. The rule ([`judge`]): the set is `OrderedReady` and
//! `RollingUpdate`; the pod exists, is not terminating and not Ready; it is not on the update
//! revision (recreating a pod of the update revision would not help: that revision itself is
//! what blocks); its slot is at or above the partition (so it comes back at the update
//! revision); its node, if it has one, is Ready and not tainted unreachable (a cut-off pod is
//! pod safety's business); no other pod of the set is terminating (one replacement at a
//! time: a pod recovery deleted may stay terminating for long on a node that went down,
//! while a lower pod blocks the wait); and one [`Rule`] holds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::workload::pod::is_pod_ready;

use crate::consts::strategy;
use crate::identity::{
    is_created, is_monotonic, is_terminating, ordinal, partition, phase, pod_revision,
    start_ordinal, strategy_type,
};

/// The per-set opt-in (`"true"` / `"false"`; any other value means the manager's default).
pub const ANNOTATION: &str = "rkcm.io/statefulset-recover-stuck-rollout";
/// The Warning event on the set naming the pod and the rule.
pub const EVENT_REASON: &str = "RecoveredStuckPod";
/// How soon a pod left alone for its node is judged again.
pub const NODE_RECHECK: Duration = Duration::from_secs(30);
/// Default of `--rkcm-statefulset-recover-stuck-after`.
pub const DEFAULT_AFTER: Duration = Duration::from_secs(300);

/// Node name to whether the node is reachable ([`node_reachable`]), for the nodes the set's
/// pods are bound to; a node missing from the map counts as unreachable.
pub type Nodes = BTreeMap<String, bool>;

static NO_NODES: Nodes = BTreeMap::new();

/// What [`judge`] reads besides the snapshot.
#[derive(Debug, Clone, Copy)]
pub struct Recovery<'a> {
    /// `--rkcm-statefulset-recover-stuck-rollout`: on for sets without the annotation.
    pub default_on: bool,
    /// `--rkcm-statefulset-recover-stuck-after`: how long a pod of the current revision must
    /// be broken before it is replaced.
    pub after: Duration,
    pub nodes: &'a Nodes,
}

impl Recovery<'static> {
    /// Off for every set without the annotation, and no node known.
    pub const OFF: Recovery<'static> = Recovery {
        default_on: false,
        after: DEFAULT_AFTER,
        nodes: &NO_NODES,
    };
}

/// What [`judge`] reads of a sync's snapshot (`plan::Snapshot::recovery_context`).
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub set: &'a StatefulSet,
    /// Every pod the set claimed.
    pub pods: &'a [Arc<Pod>],
    pub current_revision: &'a str,
    pub update_revision: &'a str,
    pub now: Timestamp,
    pub recovery: Recovery<'a>,
}

/// Why a stuck pod is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The pod is of neither the current nor the update revision: a rollout to its revision
    /// was superseded (rolled back, or a newer template). The rolling update would delete it
    /// at once if it were not waiting for it, so it is replaced at once.
    AbandonedRevision,
    /// Current revision, condition `PodScheduled=False` reason `Unschedulable` for `after`.
    Unschedulable,
    /// Current revision, a container restarted and the pod has not been Ready for `after`.
    CrashLooping,
    /// Current revision, Running with no restarts and not Ready for `after` (a failing
    /// readiness probe).
    ReadinessFailing,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::AbandonedRevision => "AbandonedRevision",
            Rule::Unschedulable => "Unschedulable",
            Rule::CrashLooping => "CrashLooping",
            Rule::ReadinessFailing => "ReadinessFailing",
        }
    }
}

/// [`judge`]'s answer for the pod the ordered wait stops at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Recovery is off for this set.
    Off,
    /// On, but this pod is not recovered, and why.
    No(&'static str),
    /// Delete it now.
    Due(Rule),
    /// The rule holds, but not for long enough yet: due in `after`.
    Later { rule: Rule, after: Duration },
    /// The pod's node is not Ready, unreachable or unknown (a cut-off pod is pod safety's
    /// business): judged again in `recheck`.
    NodeNotReady { recheck: Duration },
}

/// Whether recovery is on for `set`: its annotation, else the manager's default.
pub fn enabled(set: &StatefulSet, default_on: bool) -> bool {
    match set
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION))
        .map(String::as_str)
    {
        Some("true") => true,
        Some("false") => false,
        _ => default_on,
    }
}

/// A node whose pods recovery may replace: Ready and not tainted unreachable.
pub fn node_reachable(node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let unreachable = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "node.kubernetes.io/unreachable"));
    ready && !unreachable
}

/// Whether recovery replaces `pod`, the replica the ordered wait stops at (module docs).
pub fn judge(s: &Context<'_>, pod: &Pod) -> Judgement {
    if !enabled(s.set, s.recovery.default_on) {
        return Judgement::Off;
    }
    if let Some(why) = not_applicable(s, pod) {
        return Judgement::No(why);
    }
    if !on_reachable_node(s, pod) {
        // The controller has no node handler: a node that comes back sends nothing.
        return Judgement::NodeNotReady {
            recheck: NODE_RECHECK,
        };
    }
    if pod_revision(pod) != s.current_revision {
        return Judgement::Due(Rule::AbandonedRevision);
    }
    let Some((rule, since)) = broken(pod) else {
        return Judgement::No(
            "no rule holds (not unschedulable, crash-looping or failing readiness)",
        );
    };
    let broken_for = s.now.duration_since(since);
    let after =
        jiff::SignedDuration::try_from(s.recovery.after).unwrap_or(jiff::SignedDuration::MAX);
    if broken_for >= after {
        Judgement::Due(rule)
    } else {
        let left = after - broken_for;
        Judgement::Later {
            rule,
            after: Duration::try_from(left).unwrap_or(s.recovery.after),
        }
    }
}

/// The conditions every rule shares, or why they do not hold.
fn not_applicable(s: &Context<'_>, pod: &Pod) -> Option<&'static str> {
    let set = s.set;
    if !is_monotonic(set) {
        return Some("podManagementPolicy Parallel: no ordered wait to break");
    }
    if strategy_type(set) != strategy::ROLLING_UPDATE {
        return Some("updateStrategy is not RollingUpdate: pods change only when deleted");
    }
    if !is_created(pod) || is_terminating(pod) {
        return Some("the pod is not created yet, or is terminating");
    }
    // One at a time: a pod recovery deleted stays terminating until its containers stopped
    // (for long, on a node that went down), while a lower pod may block the wait meanwhile.
    if s.pods.iter().any(|p| is_terminating(p)) {
        return Some("another pod of the set is terminating: one replacement at a time");
    }
    // Mutant (sim only): a Ready pod (e.g. one within minReadySeconds) is taken for stuck.
    if is_pod_ready(pod) && !rkcm_runtime::mutants::on("sts-recover-ready-pod") {
        return Some("the pod is Ready (it waits for minReadySeconds)");
    }
    if pod_revision(pod) == s.update_revision {
        return Some(
            "the pod is of the update revision: that revision itself does not become Ready",
        );
    }
    let slot = ordinal(pod)
        .unwrap_or(-1)
        .saturating_sub(start_ordinal(set));
    if slot < partition(set).unwrap_or(0) {
        return Some("the pod is below the partition: it would come back at its old revision");
    }
    None
}

/// Whether the pod's node (if it has one) is reachable.
fn on_reachable_node(s: &Context<'_>, pod: &Pod) -> bool {
    let node = pod.spec.as_ref().and_then(|sp| sp.node_name.as_deref());
    node.filter(|n| !n.is_empty())
        .is_none_or(|n| s.recovery.nodes.get(n) == Some(&true))
}

/// Which rule a current-revision pod breaks, and since when.
fn broken(pod: &Pod) -> Option<(Rule, Timestamp)> {
    let status = pod.status.as_ref()?;
    let condition = |type_: &str| {
        status
            .conditions
            .as_ref()
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
    };
    if let Some(c) = condition("PodScheduled")
        && c.status == "False"
        && c.reason.as_deref() == Some("Unschedulable")
    {
        return Some((Rule::Unschedulable, c.last_transition_time.as_ref()?.0));
    }
    let not_ready_since = condition("Ready")
        .filter(|c| c.status != "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)?;
    let restarted = status
        .container_statuses
        .iter()
        .chain(status.init_container_statuses.iter())
        .flatten()
        .any(|c| c.restart_count > 0);
    if restarted {
        Some((Rule::CrashLooping, not_ready_since))
    } else if phase(pod) == crate::consts::phase::RUNNING {
        Some((Rule::ReadinessFailing, not_ready_since))
    } else {
        None
    }
}

/// The event's message: the pod, its revision, the rule and the revision it comes back at.
pub fn event_message(
    pod: &str,
    pod_revision: &str,
    update_revision: &str,
    rule: Rule,
    after: Duration,
) -> String {
    let why = match rule {
        Rule::AbandonedRevision => {
            "its revision is neither the current nor the update revision".to_owned()
        }
        Rule::Unschedulable => format!("unschedulable for {}s or more", after.as_secs()),
        Rule::CrashLooping => format!("crash-looping, not Ready for {}s or more", after.as_secs()),
        Rule::ReadinessFailing => {
            format!("Running but not Ready for {}s or more", after.as_secs())
        }
    };
    format!(
        "deleted stuck pod {pod} (revision {pod_revision}, not Ready, blocking the ordered \
         rolling update) so that it is recreated at revision {update_revision}: rule {} ({why}); \
         annotation {ANNOTATION}",
        rule.as_str()
    )
}

#[cfg(test)]
#[path = "recovery/tests.rs"]
mod tests;
