//! PURE: what the StatefulSet controller would do with one StatefulSet now and what it waits
//! on (`rkcm explain statefulset/NS/NAME`), from the set, its controller revisions, its
//! claimed pods and the namespace's claims, through the functions the sync runs: the
//! revision choice of [`crate::revision`] and [`plan::begin`] / [`plan::plan`], whose
//! [`Waiting`] reasons become the reason codes below.
//!
//! Reason codes:
//! - `PodNotReady`: `OrderedReady`: the pod of an ordinal is not Running, Ready and available
//!   (or is terminating); every higher ordinal waits for it.
//! - `OldRevisionPodNotReady`: the stuck rollout (kubernetes/kubernetes#67250): under
//!   `RollingUpdate` + `OrderedReady`, a pod of an old revision that is not Ready blocks the
//!   replicas phase, so the update phase that would replace it never runs. It stays until
//!   someone deletes it (after fixing the template if the old revision is the broken one).
//! - `StuckPodRecoveryPending`: the stuck rollout with rkcm's opt-in recovery on
//!   ([`crate::recovery`]): the pod breaks a rule and is deleted when its time is up, unless
//!   it becomes Ready first. (When the rule is due, the delete is this sync's action.)
//! - `FailedPodTerminating`: a Failed or Succeeded pod is terminating; its ordinal is
//!   recreated once the object is gone.
//! - `StaleClaim`: a claim of the ordinal still refers to an earlier pod
//!   (`whenScaled: Delete`); the pod waits for the garbage collector.
//! - `ScaleDownBlocked`: `OrderedReady` scale-down waits for a condemned pod to terminate, or
//!   for lower pods to be healthy.
//! - `UpdatedPodNotAvailable`: `RollingUpdate` waits for a pod to be Running, Ready and
//!   available before updating lower ordinals.
//! - `MaxUnavailable`: `RollingUpdate` with `maxUnavailable` has no budget left for old pods.
//! - `Partition`: pods below `rollingUpdate.partition` stay at their old revision.
//! - `OnDelete`: pods stay at their old revision until someone deletes them.
//! - `InvalidSelector`, `InvalidStrategy` (`Recreate`, or an unusable `maxUnavailable`),
//!   `RevisionUnreadable` (a controller revision that does not decode): nothing moves until
//!   the set changes.
//! - `Deleting`: the set is being deleted; only its status is written.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::explain::{Explanation, ObjectRef, State, Waiting as Wait};
use rkcm_runtime::workload::history::{next_revision, sort_controller_revisions};

use crate::claims::Claims;
use crate::config::{Config, NAME};
use crate::consts::{policy, strategy};
use crate::identity::{
    claims_for, is_pending, is_running_and_ready, is_terminating, min_ready_seconds, ordinal,
    phase, pod_name, pod_revision, replicas, set_name, set_namespace, strategy_type,
};
use crate::plan::{self, Action, Begin, DeleteReason, Snapshot, Waiting};
use crate::recovery::{self, ANNOTATION, Judgement, Recovery};
use crate::revision::{self, UpdateChoice};

/// Reasons that hold the set until a person changes something.
const STALLED: &[&str] = &[
    "OldRevisionPodNotReady",
    "InvalidSelector",
    "InvalidStrategy",
    "RevisionUnreadable",
];
/// Reasons that hold pods back on purpose: stalled only when nothing else is going on.
const HELD: &[&str] = &["Partition", "OnDelete"];

/// What one explanation reads.
struct Seen<'a> {
    set: &'a StatefulSet,
    pods: &'a [Arc<Pod>],
    update_revision: String,
    now: jiff::Timestamp,
    /// The stuck-rollout recovery's judgement of the pod the ordered wait stops at.
    recovery: Option<Judgement>,
}

impl Seen<'_> {
    fn pod(&self, ord: i32) -> Option<&Pod> {
        self.pods
            .iter()
            .find(|p| ordinal(p) == Some(ord))
            .map(|p| &**p)
    }

    fn name(&self, ord: i32) -> String {
        pod_name(set_name(self.set), ord)
    }

    fn describe(&self, ord: i32) -> String {
        format!(
            "see why: kubectl describe pod -n {} {}",
            set_namespace(self.set),
            self.name(ord)
        )
    }
}

fn pod_ref(name: &str) -> String {
    format!("Pod/{name}")
}

/// When the pod's Ready condition last changed.
fn ready_since(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0.to_string())
}

/// Where a pod stands, in words.
fn pod_state(pod: &Pod, min_ready: i32) -> String {
    if is_terminating(pod) {
        "terminating".into()
    } else if is_pending(pod) {
        "Pending".into()
    } else if !is_running_and_ready(pod) {
        format!("{} and not Ready", phase(pod))
    } else {
        format!("Ready but not yet available (minReadySeconds {min_ready})")
    }
}

/// The explanation for `set` with its controller revisions, claimed pods and the namespace's
/// claims, at `now`, under the controller's configuration (its gates).
pub fn explain(
    set: &StatefulSet,
    revisions: &[Arc<ControllerRevision>],
    pods: &[Arc<Pod>],
    claims: &Claims,
    nodes: &[Arc<Node>],
    cfg: &Config,
    now: jiff::Timestamp,
) -> Explanation {
    let nodes: recovery::Nodes = nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.clone()?, recovery::node_reachable(n))))
        .collect();
    let seen = Inputs {
        revisions,
        pods,
        claims,
        nodes: &nodes,
        cfg,
        now,
    };
    let mut e = Explanation {
        object: ObjectRef {
            kind: "StatefulSet".into(),
            namespace: set_namespace(set).to_owned(),
            name: set_name(set).to_owned(),
        },
        controller: NAME,
        state: State::Settled,
        actions: Vec::new(),
        waiting_on: Vec::new(),
        remedies: Vec::new(),
    };
    match plan::begin(Some(set), true) {
        Begin::Sync(set, _) => {
            if let Err(message) = sync(&mut e, set, &seen) {
                e.waiting_on
                    .push(Wait::new("RevisionUnreadable", message, Vec::new()));
                e.remedies.push(
                    "correct the pod template (spec.template) so a revision can be made of it"
                        .into(),
                );
            }
        }
        Begin::Wait {
            reason: Waiting::InvalidSelector(message),
            ..
        } => {
            e.waiting_on
                .push(Wait::new("InvalidSelector", message, Vec::new()));
            e.remedies.push("correct spec.selector".into());
        }
        Begin::Wait { .. } | Begin::Forget => {}
    }
    e.state = state_of(&e);
    e
}

fn state_of(e: &Explanation) -> State {
    let has = |list: &[&str]| e.waiting_on.iter().any(|w| list.contains(&w.reason));
    if has(STALLED) {
        State::Stalled
    } else if !e.actions.is_empty() {
        State::Acting
    } else if e.waiting_on.iter().any(|w| !HELD.contains(&w.reason)) {
        State::Waiting
    } else if has(HELD) {
        State::Stalled
    } else {
        State::Settled
    }
}

/// What the explanation reads besides the set.
struct Inputs<'a> {
    revisions: &'a [Arc<ControllerRevision>],
    pods: &'a [Arc<Pod>],
    claims: &'a Claims,
    nodes: &'a recovery::Nodes,
    cfg: &'a Config,
    now: jiff::Timestamp,
}

/// The revisions as the sync chooses them, then the plan.
fn sync(e: &mut Explanation, set: &StatefulSet, inputs: &Inputs<'_>) -> Result<(), String> {
    let Inputs {
        revisions,
        pods,
        claims,
        nodes,
        cfg,
        now,
    } = *inputs;
    let mut sorted = revisions.to_vec();
    sort_controller_revisions(&mut sorted);
    let collision_count = set
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let update = match revision::choose_update(
        set,
        &sorted,
        collision_count,
        cfg.semantic_revision_comparison,
    )? {
        UpdateChoice::Latest(r) => r,
        UpdateChoice::Rollback(r, number) => {
            e.actions.push(format!(
                "renumber ControllerRevision/{} as revision {number} (a rollback to it)",
                r.metadata.name.as_deref().unwrap_or_default()
            ));
            r
        }
        UpdateChoice::Create(proposed) => {
            e.actions.push(format!(
                "create ControllerRevision/{} (revision {}) for the changed template",
                proposed.metadata.name.as_deref().unwrap_or_default(),
                next_revision(&sorted)
            ));
            Arc::new(*proposed)
        }
    };
    let current = revision::current_revision(set, &sorted, &update);
    let current_set = revision::apply_revision(set, &current)?;
    let update_set = revision::apply_revision(set, &update)?;
    let current_name = current.metadata.name.clone().unwrap_or_default();
    let update_name = update.metadata.name.clone().unwrap_or_default();
    let snapshot = Snapshot {
        set,
        current_set: &current_set,
        update_set: &update_set,
        current_revision: &current_name,
        update_revision: &update_name,
        collision_count,
        pods,
        claims,
        now,
        max_unavailable_gate: cfg.max_unavailable,
        recovery: Recovery {
            default_on: cfg.recover_stuck_rollout,
            after: cfg.recover_stuck_after,
            nodes,
        },
    };
    let p = plan::plan(&snapshot);
    let recovery = p.waiting.iter().find_map(|w| match w {
        Waiting::NotReady { ordinal: o } => pods
            .iter()
            .find(|pod| ordinal(pod) == Some(*o))
            .map(|pod| recovery::judge(&snapshot.recovery_context(), pod)),
        _ => None,
    });
    let seen = Seen {
        set,
        pods,
        update_revision: update_name.clone(),
        now,
        recovery,
    };
    if let Some(message) = p
        .unknown_strategy
        .clone()
        .or(p.max_unavailable_error.clone())
    {
        e.waiting_on
            .push(Wait::new("InvalidStrategy", message, Vec::new()));
        e.remedies.push("correct spec.updateStrategy".into());
        if p.phases.is_empty() {
            return Ok(());
        }
    }
    for a in p.actions() {
        e.actions.push(action_text(&seen, a));
    }
    for w in &p.waiting {
        waiting(e, &seen, w);
    }
    Ok(())
}

fn action_text(seen: &Seen<'_>, a: &Action) -> String {
    let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.name.clone().unwrap_or_default()
    };
    match a {
        Action::DeletePod {
            pod,
            reason: DeleteReason::Terminal,
        } => format!(
            "delete pod {} ({}); its ordinal is recreated once it is gone",
            name(&pod.metadata),
            phase(pod)
        ),
        Action::DeletePod {
            pod,
            reason: DeleteReason::ScaleDown,
        } => format!(
            "delete pod {} (scale down to {} replicas)",
            name(&pod.metadata),
            replicas(seen.set)
        ),
        Action::DeletePod {
            pod,
            reason: DeleteReason::Update,
        } => format!(
            "delete pod {} (revision {}) to recreate it at revision {}",
            name(&pod.metadata),
            pod_revision(pod),
            seen.update_revision
        ),
        Action::DeletePod {
            pod,
            reason: DeleteReason::Recover(rule),
        } => format!(
            "delete stuck pod {} (revision {}, not Ready) to recreate it at revision {}: rkcm's \
             stuck-rollout recovery, rule {}",
            name(&pod.metadata),
            pod_revision(pod),
            seen.update_revision,
            rule.as_str()
        ),
        Action::CreatePod { pod, .. } => format!(
            "create pod {} at revision {}",
            name(&pod.metadata),
            pod_revision(&Pod::from(&**pod))
        ),
        Action::EnsureClaims { pod, .. } => {
            format!("create or fix the claims of pod {}", name(&pod.metadata))
        }
        Action::UpdatePod { pod } => format!(
            "repair the identity, storage or claim references of pod {}",
            name(&pod.metadata)
        ),
        Action::FixClaimOwners { pod, .. } => format!(
            "set the owner references of the claims of pod {} per the retention policy",
            name(&pod.metadata)
        ),
    }
}

fn waiting(e: &mut Explanation, seen: &Seen<'_>, w: &Waiting) {
    match w {
        Waiting::NotReady { ordinal } => not_ready(e, seen, *ordinal),
        Waiting::UpdateNotAvailable { ordinal } => {
            let name = seen.name(*ordinal);
            let (state, since) = seen.pod(*ordinal).map_or_else(
                || ("not created".to_owned(), None),
                |p| (pod_state(p, min_ready_seconds(seen.set)), ready_since(p)),
            );
            e.waiting_on.push(Wait {
                since,
                ..Wait::new(
                    "UpdatedPodNotAvailable",
                    format!(
                        "RollingUpdate: pod {name} (revision {}) is {state}; pods below ordinal \
                         {ordinal} are updated after it is available",
                        seen.update_revision
                    ),
                    vec![pod_ref(&name)],
                )
            });
            e.remedies.push(seen.describe(*ordinal));
            e.remedies.push(format!(
                "roll back: kubectl rollout undo statefulset/{} -n {}",
                set_name(seen.set),
                set_namespace(seen.set)
            ));
        }
        Waiting::MaxUnavailable { unavailable, max } => {
            let unavailable_pods: Vec<String> = seen
                .pods
                .iter()
                .filter(|p| {
                    crate::identity::is_unavailable(p, min_ready_seconds(seen.set), seen.now)
                })
                .filter_map(|p| p.metadata.name.as_deref().map(pod_ref))
                .collect();
            e.waiting_on.push(Wait::new(
                "MaxUnavailable",
                format!(
                    "{unavailable} of {} pods unavailable, maxUnavailable {max}: no further old \
                     pod is replaced until one becomes available",
                    replicas(seen.set)
                ),
                unavailable_pods,
            ));
            e.remedies.push(
                "make the unavailable pods available, or raise \
                 spec.updateStrategy.rollingUpdate.maxUnavailable"
                    .into(),
            );
        }
        Waiting::Partition {
            partition,
            ordinals,
        } => held(e, seen, "Partition", Some(*partition), ordinals),
        Waiting::OnDelete { ordinals } => held(e, seen, "OnDelete", None, ordinals),
        other => blocked(e, seen, other),
    }
}

/// `NotReady`: the ordered wait, or the stuck rollout when the pod is of an old revision.
fn not_ready(e: &mut Explanation, seen: &Seen<'_>, ord: i32) {
    let set = seen.set;
    let name = seen.name(ord);
    let Some(pod) = seen.pod(ord) else {
        return;
    };
    let rev = pod_revision(pod);
    let state = pod_state(pod, min_ready_seconds(set));
    let later = crate::identity::end_ordinal(set).saturating_sub(ord);
    let stuck = strategy_type(set) == strategy::ROLLING_UPDATE
        && rev != seen.update_revision
        && !is_terminating(pod);
    let (reason, message) = if stuck {
        let (reason, recovery) = recovery_note(seen);
        (
            reason,
            format!(
                "pod {name} is of the old revision {rev} and {state}; OrderedReady waits for it \
                 before anything else, so the rolling update to revision {} never replaces it \
                 (kubernetes/kubernetes#67250); {recovery}",
                seen.update_revision
            ),
        )
    } else {
        (
            "PodNotReady",
            format!(
                "{}: pod {name} (revision {rev}) is {state}; {later} higher ordinal(s) wait for \
                 it{}",
                policy::ORDERED_READY,
                match &seen.recovery {
                    Some(Judgement::No(why)) => format!(
                        "; stuck-rollout recovery is on ({ANNOTATION}) but does not replace it: \
                         {why}"
                    ),
                    _ => String::new(),
                }
            ),
        )
    };
    e.waiting_on.push(Wait {
        since: ready_since(pod),
        ..Wait::new(reason, message, vec![pod_ref(&name)])
    });
    if stuck {
        e.remedies.push(format!(
            "if revision {rev} is the broken one, fix the template first; then delete the pod so \
             it is recreated at revision {}: kubectl delete pod -n {} {name}",
            seen.update_revision,
            set_namespace(set)
        ));
    }
    if stuck && matches!(seen.recovery, Some(Judgement::Off)) {
        e.remedies.push(format!(
            "or let rkcm replace such a pod (the rule: README, Opt-in remedies): kubectl \
             annotate statefulset -n {} {} {ANNOTATION}=true",
            set_namespace(set),
            set_name(set)
        ));
    }
    e.remedies.push(seen.describe(ord));
}

/// The reason code of a stuck pod's wait and what rkcm's recovery makes of it.
fn recovery_note(seen: &Seen<'_>) -> (&'static str, String) {
    match &seen.recovery {
        Some(Judgement::Later { rule, after }) => (
            "StuckPodRecoveryPending",
            format!(
                "stuck-rollout recovery is on ({ANNOTATION}): rule {} holds, and the pod is \
                 deleted in {}s unless it becomes Ready",
                rule.as_str(),
                after.as_secs()
            ),
        ),
        Some(Judgement::NodeNotReady { recheck }) => (
            "OldRevisionPodNotReady",
            format!(
                "stuck-rollout recovery is on ({ANNOTATION}) but the pod's node is not Ready \
                 or unreachable (left to pod safety); judged again in {}s",
                recheck.as_secs()
            ),
        ),
        Some(Judgement::No(why)) => (
            "OldRevisionPodNotReady",
            format!("stuck-rollout recovery is on ({ANNOTATION}) but does not replace it: {why}"),
        ),
        Some(Judgement::Due(rule)) => (
            "StuckPodRecoveryPending",
            format!(
                "stuck-rollout recovery is on ({ANNOTATION}): rule {} is due",
                rule.as_str()
            ),
        ),
        Some(Judgement::Off) | None => (
            "OldRevisionPodNotReady",
            format!("stuck-rollout recovery is off ({ANNOTATION})"),
        ),
    }
}

/// Pods held at an old revision on purpose (partition, OnDelete).
fn held(
    e: &mut Explanation,
    seen: &Seen<'_>,
    reason: &'static str,
    partition: Option<i32>,
    ordinals: &[i32],
) {
    let names: Vec<String> = ordinals.iter().map(|o| seen.name(*o)).collect();
    let (ns, set) = (set_namespace(seen.set), set_name(seen.set));
    let (message, remedy) = match partition {
        Some(p) => (
            format!(
                "partition {p}: {} pod(s) ({}) stay at their old revision while revision {} \
                 rolls out above the partition",
                names.len(),
                names.join(", "),
                seen.update_revision
            ),
            format!(
                "lower the partition to roll them: kubectl patch statefulset {set} -n {ns} -p \
                 '{{\"spec\":{{\"updateStrategy\":{{\"rollingUpdate\":{{\"partition\":0}}}}}}}}'"
            ),
        ),
        None => (
            format!(
                "updateStrategy OnDelete: {} pod(s) ({}) stay at their old revision until \
                 deleted; they come back at revision {}",
                names.len(),
                names.join(", "),
                seen.update_revision
            ),
            format!(
                "delete each pod to update it: kubectl delete pod -n {ns} {}",
                names.first().map_or("", String::as_str)
            ),
        ),
    };
    e.waiting_on.push(Wait::new(
        reason,
        message,
        names.iter().map(|n| pod_ref(n)).collect(),
    ));
    e.remedies.push(remedy);
}

/// The waits whose action is elsewhere (creating, deleting) and the rarer blocks.
fn blocked(e: &mut Explanation, seen: &Seen<'_>, w: &Waiting) {
    let set = seen.set;
    let (reason, message, objects) = match w {
        Waiting::Terminal { ordinal } if seen.pod(*ordinal).is_some_and(is_terminating) => {
            let name = seen.name(*ordinal);
            (
                "FailedPodTerminating",
                format!(
                    "pod {name} finished ({}) and is terminating; ordinal {ordinal} is recreated \
                     once the object is gone",
                    seen.pod(*ordinal).map_or("", phase)
                ),
                vec![pod_ref(&name)],
            )
        }
        Waiting::StaleClaim { ordinal } => (
            "StaleClaim",
            format!(
                "a claim of ordinal {ordinal} still refers to an earlier pod (whenScaled: \
                 Delete); pod {} is created once the garbage collector removes it",
                seen.name(*ordinal)
            ),
            claims_for(set, *ordinal)
                .into_iter()
                .filter_map(|(_, c)| c.metadata.name)
                .map(|n| format!("PersistentVolumeClaim/{n}"))
                .collect(),
        ),
        Waiting::CondemnedTerminating { ordinal } => (
            "ScaleDownBlocked",
            format!(
                "scale down to {} waits for pod {} to terminate",
                replicas(set),
                seen.name(*ordinal)
            ),
            vec![pod_ref(&seen.name(*ordinal))],
        ),
        Waiting::CondemnedNotReady { ordinal } => (
            "ScaleDownBlocked",
            format!(
                "scale down to {}: pod {} is not Ready, and OrderedReady removes an unhealthy \
                 pod only when it is the first unavailable one",
                replicas(set),
                seen.name(*ordinal)
            ),
            vec![pod_ref(&seen.name(*ordinal))],
        ),
        Waiting::SetDeleting => (
            "Deleting",
            "the StatefulSet is being deleted; only its status is written".to_owned(),
            Vec::new(),
        ),
        // Creating, ScalingDown, Updating and a Terminal pod still to delete are actions of
        // this sync; Expectations and InvalidSelector come from `begin`.
        _ => return,
    };
    e.waiting_on.push(Wait::new(reason, message, objects));
}

#[cfg(test)]
mod tests;
