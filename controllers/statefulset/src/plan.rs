//! PURE: every decision of one sync of a StatefulSet, from a snapshot (the set, its two
//! revisions, the claimed pods, the cached claims) and `now`. The sync in `reconcile.rs`
//! reads the caches and performs what these functions return; `executor.rs` writes.
//!
//! - [`begin`]: forget a deleted set, wait for expectations or a valid selector, or sync.
//! - [`plan`]: which pods to create, repair and delete, in which order and grouping, the
//!   status that goes with them, and why the plan ends where it does ([`Waiting`]).
//! - [`status_step`]: the status after the plan ran, and whether it is written now, paced,
//!   skipped or fails; [`outcome`]: the sync's result from its parts.
//!
//! Mirrors `sync` of upstream `pkg/controller/statefulset/stateful_set.go` and
//! `updateStatefulSet`, `processReplica`, `processCondemned`, `runForAll`,
//! `updateStatefulSetAfterInvariantEstablished` and `updateStatefulSetStatus` of
//! `stateful_set_control.go`; the claim work of one pod is in [`crate::claims`].
//!
//! The plan is a list of [`Phase`]s (replicas, condemned claims, condemned pods, update).
//! Under `OrderedReady` a phase is executed unit by unit and the plan already ends at the
//! first unit that blocks; under `Parallel` a phase runs in slow-start batches. Either way the
//! executor stops at the first phase with an error, as upstream's `runForAll` does.
//!
//! Safety: a pod is only ever created for an ordinal with no pod object in the snapshot (a
//! terminating pod keeps its slot), a failed pod's replacement comes in a later sync, deletes
//! are of existing pods only (never of a placeholder), and nothing is written for a set
//! being deleted.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::workload::expectations::EXPECTATIONS_TIMEOUT;
use rkcm_runtime::workload::selector::Selector;

use crate::claims::{
    ClaimWork, Claims, OwnerWork, claim_work, claims_match_policy, owner_work, pod_claim_is_stale,
};
use crate::consts::{policy, strategy};
use crate::identity::{
    end_ordinal, identity_matches, is_created, is_failed, is_healthy, is_monotonic, is_pending,
    is_running_and_available, is_running_and_ready, is_succeeded, is_terminating, is_unavailable,
    min_ready_seconds, new_versioned_pod, ordinal, partition, pod_revision, replicas,
    start_ordinal, storage_matches, strategy_type,
};
use crate::recovery::{Judgement, Recovery, Rule};
use crate::status::{self, Counts, count, new_status};

/// What one sync sees.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    pub set: &'a StatefulSet,
    /// `set` with the current revision's template.
    pub current_set: &'a StatefulSet,
    /// `set` with the update revision's template.
    pub update_set: &'a StatefulSet,
    pub current_revision: &'a str,
    pub update_revision: &'a str,
    pub collision_count: i32,
    /// The pods the set claimed.
    pub pods: &'a [Arc<Pod>],
    pub claims: &'a Claims,
    pub now: jiff::Timestamp,
    /// Gate `MaxUnavailableStatefulSet`.
    pub max_unavailable_gate: bool,
    /// rkcm's opt-in stuck-rollout recovery ([`crate::recovery`]).
    pub recovery: Recovery<'a>,
}

impl<'a> Snapshot<'a> {
    /// What the stuck-rollout recovery reads of this snapshot.
    pub fn recovery_context(&self) -> crate::recovery::Context<'a> {
        crate::recovery::Context {
            set: self.set,
            pods: self.pods,
            current_revision: self.current_revision,
            update_revision: self.update_revision,
            now: self.now,
            recovery: self.recovery,
        }
    }
}

/// Why a pod is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Failed or Succeeded: recreated in a later sync once the object is gone.
    Terminal,
    /// Ordinal outside `[start, end]`.
    ScaleDown,
    /// Old revision under RollingUpdate: decrements `currentReplicas`.
    Update,
    /// rkcm's stuck-rollout recovery ([`crate::recovery`]): the not-Ready pod the ordered
    /// wait stops at, deleted in that wait's place.
    Recover(Rule),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Graceful delete of an existing pod (UID precondition).
    DeletePod { pod: Arc<Pod>, reason: DeleteReason },
    /// `CreateStatefulPod`: create the missing claims (fails if one is being deleted), then
    /// the pod, then bring the claims' owner references in line with the policy.
    CreatePod {
        pod: Box<k8s_openapi::api::core::v1::Pod>,
        claims: ClaimWork,
    },
    /// A `Pending` pod: recreate missing claims and fix their owner references.
    EnsureClaims {
        pod: Arc<Pod>,
        claims: ClaimWork,
        owners: OwnerWork,
    },
    /// `UpdateStatefulPod`: identity, storage or claim owner references need repair; the
    /// executor recomputes [`repair`] on the freshest copy for every attempt.
    UpdatePod { pod: Arc<Pod> },
    /// Claims of a condemned pod: owner references per policy before the pod is deleted.
    FixClaimOwners { pod: Arc<Pod>, owners: OwnerWork },
}

/// The work of one ordinal: executed in order, stopping at the first error.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub ordinal: i32,
    pub actions: Vec<Action>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    Replicas,
    CondemnedClaims,
    Condemned,
    Update,
}

/// Units executed one after the other (`burst == false`) or in slow-start batches.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub kind: PhaseKind,
    pub burst: bool,
    pub units: Vec<Unit>,
}

/// The plan of one sync.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The status before any update deletion (each successful one lowers
    /// `currentReplicas` by one).
    pub status: StatefulSetStatus,
    pub phases: Vec<Phase>,
    /// Gauges of the maxUnavailable path (gate on, RollingUpdate).
    pub max_unavailable: Option<i32>,
    pub unavailable: Option<i32>,
    /// Gate on and `rollingUpdate.maxUnavailable` unusable: upstream takes no update step,
    /// writes no status and fails the sync with this message.
    pub max_unavailable_error: Option<String>,
    /// Why the plan ends where it does (empty when nothing is left for a later sync).
    pub waiting: Vec<Waiting>,
    /// `updateStrategy.type: Recreate` ([`unknown_strategy_error`]): no phases; the sync
    /// records an `UnknownStrategy` event, truncates history and fails with this message.
    pub unknown_strategy: Option<String>,
}

/// Why a sync stops short: what it waits for, with the ordinal or numbers behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// The cache has not yet observed this controller's earlier creates and deletes.
    Expectations,
    /// `spec.selector` does not parse: nothing until the set changes.
    InvalidSelector(String),
    /// The set is being deleted: status only.
    SetDeleting,
    /// A replica failed or succeeded: deleted (unless already terminating), replaced in a
    /// later sync once the object is gone.
    Terminal { ordinal: i32 },
    /// A claim of the ordinal still refers to an earlier pod (`whenScaled: Delete`).
    StaleClaim { ordinal: i32 },
    /// `OrderedReady`: the replica is created this sync; its successors wait for it.
    Creating { ordinal: i32 },
    /// `OrderedReady`: the replica is terminating, or not yet running, ready and available.
    NotReady { ordinal: i32 },
    /// rkcm's stuck-rollout recovery deletes the replica this sync, in place of the
    /// `NotReady` wait ([`crate::recovery`]).
    Recovering { ordinal: i32, rule: Rule },
    /// Beside `NotReady`: the replica breaks `rule` and is recovered in `after` unless it
    /// becomes Ready first (the sync is requeued for then).
    RecoveryDue {
        ordinal: i32,
        rule: Rule,
        after: Duration,
    },
    /// Beside `NotReady`: recovery would judge the replica but its node is not Ready; the
    /// sync is requeued to look again in `recheck`.
    RecoveryNodeNotReady { ordinal: i32, recheck: Duration },
    /// `OrderedReady`: a condemned pod is deleted this sync; the next one waits for it.
    ScalingDown { ordinal: i32 },
    /// `OrderedReady`: a condemned pod is terminating.
    CondemnedTerminating { ordinal: i32 },
    /// `OrderedReady`: a condemned pod is unhealthy and not the first unavailable pod.
    CondemnedNotReady { ordinal: i32 },
    /// RollingUpdate, one pod at a time: the replica is deleted this sync for its update.
    Updating { ordinal: i32 },
    /// RollingUpdate: the replica is not yet created, healthy and available, so no lower
    /// ordinal is updated.
    UpdateNotAvailable { ordinal: i32 },
    /// RollingUpdate with `maxUnavailable`: no budget left for the old pods still to update.
    MaxUnavailable { unavailable: i32, max: i32 },
    /// RollingUpdate: these ordinals, below `partition`, stay at an old revision until the
    /// partition is lowered (a standing fact, reported alongside any other wait).
    Partition { partition: i32, ordinals: Vec<i32> },
    /// OnDelete: these ordinals stay at an old revision until someone deletes their pods.
    OnDelete { ordinals: Vec<i32> },
}

impl Plan {
    /// Every action, in order (tests and logs).
    pub fn actions(&self) -> impl Iterator<Item = &Action> {
        self.phases
            .iter()
            .flat_map(|p| p.units.iter().flat_map(|u| u.actions.iter()))
    }
}

/// `getStatefulSetMaxUnavailable` (upstream `stateful_set_utils.go`): `maxUnavailable`
/// (1 when unset) scaled against `spec.replicas` and rounded down, at least 1. A string that
/// is not a percentage, or whose number does not parse, is an error with
/// `intstr.GetScaledValueFromIntOrPercent`'s message.
pub fn max_unavailable(set: &StatefulSet) -> Result<i32, String> {
    let v = Some(&set.spec)
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.max_unavailable.as_ref());
    let n = match v {
        None => 1,
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .to_owned(),
                );
            };
            let percent = go_atoi(number).ok_or_else(|| {
                format!(
                    "invalid value for IntOrString: invalid value {s:?}: strconv.Atoi: parsing \
                     {number:?}: invalid syntax"
                )
            })?;
            let scaled = (percent as f64 * f64::from(replicas(set)) / 100.0).floor();
            // Beyond i32, more than every replica: the same as all of them.
            if scaled >= f64::from(i32::MAX) {
                i32::MAX
            } else if scaled <= f64::from(i32::MIN) {
                i32::MIN
            } else {
                scaled as i32
            }
        }
    };
    Ok(n.max(1))
}

/// Go's `strconv.Atoi`: an optional sign and decimal digits fitting an `int64`.
fn go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The error upstream's `updateStatefulSet` gives a set whose update strategy is `Recreate`
/// while gate `StatefulSetRecreateStrategy` is off (rkcm refuses to start with it on): a
/// Warning event `UnknownStrategy` with this message, no pod or status written, the sync
/// retried with backoff.
pub fn unknown_strategy_error(set: &StatefulSet) -> Option<String> {
    (strategy_type(set) == strategy::RECREATE).then(|| {
        format!(
            "statefulset {}/{} uses Recreate strategy but feature gate \
             StatefulSetRecreateStrategy is disabled",
            set.metadata.namespace.as_deref().unwrap_or_default(),
            set.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// The plan of one sync (`updateStatefulSet`).
pub fn plan(s: &Snapshot<'_>) -> Plan {
    let set = s.set;
    let (replicas_, condemned) = slots(s);
    let mut plan = Plan {
        status: new_status(
            set,
            s.current_revision,
            s.update_revision,
            s.collision_count,
            counts(s, &mut s.pods.iter()),
        ),
        phases: Vec::new(),
        max_unavailable: None,
        unavailable: None,
        waiting: Vec::new(),
        unknown_strategy: None,
        // Upstream's status write reads it whenever the gate is on and `rollingUpdate` is
        // set, on every path (`updateStatefulSetStatus`).
        max_unavailable_error: s
            .max_unavailable_gate
            .then(|| {
                set.spec
                    .update_strategy
                    .as_ref()
                    .and_then(|u| u.rolling_update.as_ref())
                    .and_then(|_| max_unavailable(set).err())
            })
            .flatten(),
    };
    if let Some(message) = unknown_strategy_error(set) {
        plan.unknown_strategy = Some(message);
        return plan;
    }
    if set.metadata.deletion_timestamp.is_some() {
        plan.waiting.push(Waiting::SetDeleting);
        return plan;
    }
    plan.status = new_status(
        set,
        s.current_revision,
        s.update_revision,
        s.collision_count,
        counts(s, &mut replicas_.iter().chain(condemned.iter())),
    );
    let monotonic = is_monotonic(set);
    let burst = !monotonic;
    if !replicas_phase(s, &mut plan, &replicas_, monotonic) {
        return plan;
    }
    plan.phases
        .push(condemned_claims_phase(s, &condemned, burst));
    if !condemned_phase(s, &mut plan, &replicas_, &condemned, monotonic) {
        return plan;
    }
    if strategy_type(set) != strategy::ROLLING_UPDATE {
        let ordinals = old_ordinals(s, &replicas_, usize::MAX);
        if !ordinals.is_empty() {
            plan.waiting.push(Waiting::OnDelete { ordinals });
        }
        return plan;
    }
    let units = update_units(s, &mut plan, &replicas_);
    if let Some(p) = partition(set).filter(|p| *p > 0) {
        let ordinals = old_ordinals(s, &replicas_, usize::try_from(p).unwrap_or(0));
        if !ordinals.is_empty() {
            plan.waiting.push(Waiting::Partition {
                partition: p,
                ordinals,
            });
        }
    }
    finish(plan, units, burst)
}

/// The ordinals of the first `below` replicas whose pods are of an old revision.
fn old_ordinals(s: &Snapshot<'_>, replicas_: &[Arc<Pod>], below: usize) -> Vec<i32> {
    replicas_
        .iter()
        .take(below)
        .filter(|p| is_old(s, p))
        .filter_map(|p| ordinal(p))
        .collect()
}

/// The replicas `[start, end]` in ascending order (a placeholder from the revisions for each
/// missing ordinal) and the condemned pods (outside the range) in descending order.
fn slots(s: &Snapshot<'_>) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
    let start = start_ordinal(s.set);
    let end = end_ordinal(s.set);
    let n = usize::try_from(replicas(s.set)).unwrap_or(0);
    let mut slots: Vec<Option<Arc<Pod>>> = vec![None; n];
    let mut condemned: Vec<Arc<Pod>> = Vec::new();
    for pod in s.pods {
        match ordinal(pod) {
            Some(o) if o >= start && o <= end => {
                if let Ok(i) = usize::try_from(o - start)
                    && let Some(slot) = slots.get_mut(i)
                {
                    *slot = Some(pod.clone());
                }
            }
            Some(o) if o >= 0 => condemned.push(pod.clone()),
            _ => {}
        }
    }
    let replicas_: Vec<Arc<Pod>> = slots
        .into_iter()
        .enumerate()
        .map(|(i, slot)| {
            slot.unwrap_or_else(|| {
                let ord = start.saturating_add(i32::try_from(i).unwrap_or(i32::MAX));
                Arc::new(Pod::from(new_versioned_pod(
                    s.current_set,
                    s.update_set,
                    s.current_revision,
                    s.update_revision,
                    ord,
                )))
            })
        })
        .collect();
    condemned.sort_by_key(|p| std::cmp::Reverse(ordinal(p)));
    (replicas_, condemned)
}

fn counts(s: &Snapshot<'_>, pods: &mut dyn Iterator<Item = &Arc<Pod>>) -> Counts {
    count(
        pods.map(|p| &**p),
        min_ready_seconds(s.set),
        s.current_revision,
        s.update_revision,
        s.now,
    )
}

/// The replicas phase, ascending; `false` when the plan ends with it (monotonic and blocked).
fn replicas_phase(
    s: &Snapshot<'_>,
    plan: &mut Plan,
    replicas_: &[Arc<Pod>],
    monotonic: bool,
) -> bool {
    let mut units = Vec::new();
    let mut blocked = false;
    for pod in replicas_ {
        let (actions, block) = process_replica(s, pod, monotonic);
        units.push(Unit {
            ordinal: ordinal(pod).unwrap_or(-1),
            actions,
        });
        if monotonic && let Some(wait) = block {
            let wait = match units.last_mut() {
                Some(unit) => recover(s, plan, pod, unit, wait),
                None => wait,
            };
            plan.waiting.push(wait);
            blocked = true;
            break;
        }
    }
    plan.phases.push(Phase {
        kind: PhaseKind::Replicas,
        burst: !monotonic,
        units,
    });
    !blocked
}

/// rkcm's stuck-rollout recovery at the ordered wait for `pod` ([`crate::recovery`]): a
/// pod found stuck is deleted as the sync's one action, in place of the wait.
fn recover(
    s: &Snapshot<'_>,
    plan: &mut Plan,
    pod: &Arc<Pod>,
    unit: &mut Unit,
    wait: Waiting,
) -> Waiting {
    let Waiting::NotReady { ordinal } = wait else {
        return wait;
    };
    match crate::recovery::judge(&s.recovery_context(), pod) {
        Judgement::Due(rule) => {
            unit.actions = vec![Action::DeletePod {
                pod: pod.clone(),
                reason: DeleteReason::Recover(rule),
            }];
            Waiting::Recovering { ordinal, rule }
        }
        Judgement::Later { rule, after } => {
            plan.waiting.push(Waiting::RecoveryDue {
                ordinal,
                rule,
                after,
            });
            wait
        }
        Judgement::NodeNotReady { recheck } => {
            plan.waiting
                .push(Waiting::RecoveryNodeNotReady { ordinal, recheck });
            wait
        }
        Judgement::Off | Judgement::No(_) => wait,
    }
}

/// Claims of condemned pods first, so the collector removes them after their pod.
fn condemned_claims_phase(s: &Snapshot<'_>, condemned: &[Arc<Pod>], burst: bool) -> Phase {
    let units = condemned
        .iter()
        .map(|pod| {
            let mut actions = Vec::new();
            if !claims_match_policy(s.update_set, pod, s.claims) {
                actions.push(Action::FixClaimOwners {
                    pod: pod.clone(),
                    owners: owner_work(s.update_set, pod, s.claims),
                });
            }
            Unit {
                ordinal: ordinal(pod).unwrap_or(-1),
                actions,
            }
        })
        .collect();
    Phase {
        kind: PhaseKind::CondemnedClaims,
        burst,
        units,
    }
}

/// Condemned pods, descending; `false` when the plan ends with it (monotonic and blocked).
fn condemned_phase(
    s: &Snapshot<'_>,
    plan: &mut Plan,
    replicas_: &[Arc<Pod>],
    condemned: &[Arc<Pod>],
    monotonic: bool,
) -> bool {
    let (mrs, now) = (min_ready_seconds(s.set), s.now);
    let first_unavailable: Option<&Arc<Pod>> = replicas_
        .iter()
        .find(|p| is_unavailable(p, mrs, now))
        .or_else(|| condemned.iter().rev().find(|p| is_unavailable(p, mrs, now)));
    let mut units = Vec::new();
    let mut blocked = false;
    for pod in condemned {
        let (actions, block) = process_condemned(s, pod, first_unavailable, monotonic);
        units.push(Unit {
            ordinal: ordinal(pod).unwrap_or(-1),
            actions,
        });
        if monotonic && let Some(wait) = block {
            plan.waiting.push(wait);
            blocked = true;
            break;
        }
    }
    plan.phases.push(Phase {
        kind: PhaseKind::Condemned,
        burst: !monotonic,
        units,
    });
    !blocked
}

/// An old-revision pod that RollingUpdate replaces.
fn is_old(s: &Snapshot<'_>, p: &Pod) -> bool {
    is_created(p) && pod_revision(p) != s.update_revision && !is_terminating(p)
}

fn update_delete(p: &Arc<Pod>) -> Unit {
    Unit {
        ordinal: ordinal(p).unwrap_or(-1),
        actions: vec![Action::DeletePod {
            pod: p.clone(),
            reason: DeleteReason::Update,
        }],
    }
}

/// The update phase's deletions (`updateStatefulSetAfterInvariantEstablished`), from the
/// highest ordinal down to the partition.
fn update_units(s: &Snapshot<'_>, plan: &mut Plan, replicas_: &[Arc<Pod>]) -> Vec<Unit> {
    let (mrs, now) = (min_ready_seconds(s.set), s.now);
    let update_min = usize::try_from(partition(s.set).unwrap_or(0)).unwrap_or(0);
    let top: Vec<&Arc<Pod>> = replicas_
        .iter()
        .enumerate()
        .rev()
        .filter(|(i, _)| *i >= update_min)
        .map(|(_, p)| p)
        .collect();
    if s.max_unavailable_gate {
        return max_unavailable_units(s, plan, replicas_, &top);
    }
    let mut units = Vec::new();
    for p in top {
        if is_old(s, p) {
            units.push(update_delete(p));
            plan.waiting.push(Waiting::Updating {
                ordinal: ordinal(p).unwrap_or(-1),
            });
            break;
        }
        if !is_created(p) || !is_healthy(p) || !is_running_and_available(p, mrs, now) {
            plan.waiting.push(Waiting::UpdateNotAvailable {
                ordinal: ordinal(p).unwrap_or(-1),
            });
            break;
        }
    }
    units
}

/// The update phase with gate `MaxUnavailableStatefulSet`: old pods deleted within the
/// `maxUnavailable` budget (under `Parallel`, old pods already unavailable first and beyond
/// the budget).
fn max_unavailable_units(
    s: &Snapshot<'_>,
    plan: &mut Plan,
    replicas_: &[Arc<Pod>],
    top: &[&Arc<Pod>],
) -> Vec<Unit> {
    let (mrs, now) = (min_ready_seconds(s.set), s.now);
    let mut units = Vec::new();
    let Ok(max) = max_unavailable(s.set) else {
        // `updateStatefulSetAfterInvariantEstablished` fails before any deletion.
        return units;
    };
    let unavailable = replicas_
        .iter()
        .filter(|p| is_unavailable(p, mrs, now))
        .count();
    let unavailable = i32::try_from(unavailable).unwrap_or(i32::MAX);
    plan.max_unavailable = Some(max);
    plan.unavailable = Some(unavailable);
    let parallel = Some(&s.set.spec).and_then(|sp| sp.pod_management_policy.as_deref())
        == Some(policy::PARALLEL);
    let unavailable_old = |p: &Pod| is_old(s, p) && is_unavailable(p, mrs, now);
    let needing_update = if parallel {
        replicas_.iter().filter(|p| unavailable_old(p)).count()
    } else {
        0
    };
    if unavailable >= max && needing_update == 0 {
        if top.iter().any(|p| is_old(s, p)) {
            plan.waiting
                .push(Waiting::MaxUnavailable { unavailable, max });
        }
        return units;
    }
    if parallel {
        units.extend(
            top.iter()
                .filter(|p| unavailable_old(p))
                .map(|p| update_delete(p)),
        );
    }
    // Under `Parallel`, the budget goes to old pods that are still available.
    let takes_budget = |p: &Pod| is_old(s, p) && (!parallel || !is_unavailable(p, mrs, now));
    let mut budget = max - unavailable;
    for p in top {
        if takes_budget(p) {
            if budget <= 0 {
                plan.waiting
                    .push(Waiting::MaxUnavailable { unavailable, max });
                break;
            }
            units.push(update_delete(p));
            budget -= 1;
        }
    }
    units
}

/// How a sync starts (upstream `sync` before `UpdateStatefulSet`).
#[derive(Debug)]
pub enum Begin<'a> {
    /// The set is gone: forget what is kept for it.
    Forget,
    /// Nothing is done now; the awaited events requeue the set, `requeue_after` covers one
    /// that never comes.
    Wait {
        reason: Waiting,
        requeue_after: Option<Duration>,
    },
    /// Claim children with this selector, then plan.
    Sync(&'a StatefulSet, Selector),
}

/// [`Begin`] from the cached set (if any) and whether the set's expectations are satisfied.
pub fn begin(set: Option<&StatefulSet>, expectations_satisfied: bool) -> Begin<'_> {
    let Some(set) = set else {
        return Begin::Forget;
    };
    if !expectations_satisfied {
        return Begin::Wait {
            reason: Waiting::Expectations,
            requeue_after: Some(EXPECTATIONS_TIMEOUT),
        };
    }
    let spec_selector = set.spec.selector.clone();
    match Selector::from_label_selector(&spec_selector) {
        Ok(selector) => Begin::Sync(set, selector),
        Err(error) => Begin::Wait {
            reason: Waiting::InvalidSelector(error.to_string()),
            requeue_after: None,
        },
    }
}

/// What becomes of the status after the plan was executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusWrite {
    /// Upstream's status write reads maxUnavailable first and fails without writing.
    Fail(String),
    /// Nothing changed.
    Skip,
    /// Only counts moved: written unless the status pacer holds it back (then the set is
    /// requeued when the hold ends).
    Paced,
    /// Written now.
    Now,
}

/// The status half of a sync (`updateStatefulSetStatus`).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusStep {
    pub status: StatefulSetStatus,
    pub write: StatusWrite,
    /// Export the maxUnavailable gauges ([`Plan::max_unavailable`]).
    pub gauges: bool,
    /// Sync again then (a ready pod becomes available).
    pub requeue_after: Option<Duration>,
}

/// [`StatusStep`] from the plan and the number of update deletions that succeeded (each
/// lowers `currentReplicas` by one).
pub fn status_step(
    set: &StatefulSet,
    plan: &Plan,
    update_deletions: i32,
    pods: &[Arc<Pod>],
    now: jiff::Timestamp,
) -> StatusStep {
    let mut st = plan.status.clone();
    st.current_replicas = Some(st.current_replicas.unwrap_or(0) - update_deletions);
    status::complete_rollout(set, &mut st);
    let write = if let Some(message) = &plan.max_unavailable_error {
        StatusWrite::Fail(message.clone())
    } else if !status::needs_write(set, &st) {
        StatusWrite::Skip
    } else if status::is_routine(set, &st) {
        StatusWrite::Paced
    } else {
        StatusWrite::Now
    };
    let requeue_after = status::requeue_after(set, pods.iter().map(|p| &**p), &st, now);
    StatusStep {
        status: st,
        write,
        gauges: plan.max_unavailable_error.is_none(),
        requeue_after,
    }
}

/// The result of a sync from its three parts: the pod phases' error first, then the status
/// write's, then history truncation's (which runs even after a failed sync). A status error
/// behind a pod error is returned second, for the log only.
pub fn outcome<E>(
    pods: Result<(), E>,
    status: Result<(), E>,
    history: Result<(), E>,
) -> (Result<(), E>, Option<E>) {
    match (pods, status) {
        (Err(e), Err(status_error)) => (Err(e), Some(status_error)),
        (Err(e), _) | (_, Err(e)) => (Err(e), None),
        _ => (history, None),
    }
}

fn finish(mut plan: Plan, units: Vec<Unit>, burst: bool) -> Plan {
    plan.phases.push(Phase {
        kind: PhaseKind::Update,
        burst,
        units,
    });
    plan
}

/// `processReplica`: the actions for one slot and, if it blocks, why (monotonic mode stops
/// there).
fn process_replica(
    s: &Snapshot<'_>,
    pod: &Arc<Pod>,
    monotonic: bool,
) -> (Vec<Action>, Option<Waiting>) {
    let set = s.set;
    let mrs = min_ready_seconds(set);
    let ord = ordinal(pod).unwrap_or(-1);
    if is_failed(pod) || is_succeeded(pod) {
        let mut actions = Vec::new();
        if !is_terminating(pod) {
            actions.push(Action::DeletePod {
                pod: pod.clone(),
                reason: DeleteReason::Terminal,
            });
        }
        return (actions, Some(Waiting::Terminal { ordinal: ord }));
    }
    if !is_created(pod) {
        if pod_claim_is_stale(set, pod, s.claims) {
            return (Vec::new(), Some(Waiting::StaleClaim { ordinal: ord }));
        }
        let claims = claim_work(set, pod, s.claims);
        return (
            vec![Action::CreatePod {
                pod: Box::new(new_versioned_pod(
                    s.current_set,
                    s.update_set,
                    s.current_revision,
                    s.update_revision,
                    ordinal(pod).unwrap_or_default(),
                )),
                claims,
            }],
            monotonic.then_some(Waiting::Creating { ordinal: ord }),
        );
    }
    let mut actions = Vec::new();
    if is_pending(pod) {
        let claims = claim_work(set, pod, s.claims);
        let owners = owner_work(set, pod, s.claims);
        if !claims.is_empty() || !owners.is_empty() {
            actions.push(Action::EnsureClaims {
                pod: pod.clone(),
                claims,
                owners,
            });
        }
    }
    if monotonic
        && (is_terminating(pod)
            || !is_running_and_ready(pod)
            || !is_running_and_available(pod, mrs, s.now))
    {
        return (actions, Some(Waiting::NotReady { ordinal: ord }));
    }
    let retention_match = claims_match_policy(s.update_set, pod, s.claims);
    if !(identity_matches(set, pod) && storage_matches(set, pod) && retention_match) {
        actions.push(Action::UpdatePod { pod: pod.clone() });
    }
    (actions, None)
}

/// `processCondemned`.
fn process_condemned(
    s: &Snapshot<'_>,
    pod: &Arc<Pod>,
    first_unavailable: Option<&Arc<Pod>>,
    monotonic: bool,
) -> (Vec<Action>, Option<Waiting>) {
    let ord = ordinal(pod).unwrap_or(-1);
    if is_terminating(pod) {
        return (
            Vec::new(),
            monotonic.then_some(Waiting::CondemnedTerminating { ordinal: ord }),
        );
    }
    let mrs = min_ready_seconds(s.set);
    let is_first = first_unavailable.is_some_and(|f| f.metadata.name == pod.metadata.name);
    if monotonic
        && !is_first
        && (!is_running_and_ready(pod) || !is_running_and_available(pod, mrs, s.now))
    {
        return (
            Vec::new(),
            Some(Waiting::CondemnedNotReady { ordinal: ord }),
        );
    }
    (
        vec![Action::DeletePod {
            pod: pod.clone(),
            reason: DeleteReason::ScaleDown,
        }],
        monotonic.then_some(Waiting::ScalingDown { ordinal: ord }),
    )
}

#[cfg(test)]
#[path = "plan/tests.rs"]
mod tests;
