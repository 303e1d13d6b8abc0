//! The decisions of one sync of a StatefulSet: which pods to create, repair and delete, in
//! which order and grouping, and the status that goes with them. Pure: a function of a
//! snapshot (set, the two revisions, claimed pods, cached claims) and `now`.
//!
//! Mirrors `updateStatefulSet`, `processReplica`, `processCondemned`, `runForAll` and
//! `updateStatefulSetAfterInvariantEstablished` of upstream
//! `pkg/controller/statefulset/stateful_set_control.go`, and the claim halves of
//! `stateful_pod_control.go` (`createPersistentVolumeClaims`, `ClaimsMatchRetentionPolicy`,
//! `UpdatePodClaimForRetentionPolicy`, `PodClaimIsStale`, `UpdateStatefulPod`).
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

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rkcm_runtime::cache::cached::Pod;

use crate::consts::{policy, strategy};
use crate::identity::{
    claims_for, end_ordinal, identity_matches, is_created, is_failed, is_healthy, is_monotonic,
    is_pending, is_running_and_available, is_running_and_ready, is_succeeded, is_terminating,
    is_unavailable, min_ready_seconds, new_versioned_pod, ordinal, partition, pod_revision,
    replicas, retention_policy, start_ordinal, storage_matches, storage_volumes, strategy_type,
    update_identity, update_storage,
};
use crate::retention::{
    claim_is_stale_for_pod, has_unexpected_controller, is_claim_owner_up_to_date,
    update_claim_owner_refs,
};
use crate::status::{Counts, count, new_status};

/// Cached claims of the set's namespace, by name.
pub type Claims = BTreeMap<String, Arc<PersistentVolumeClaim>>;

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
}

/// Claims a pod needs created, and those blocking it because they are being deleted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimWork {
    pub create: Vec<PersistentVolumeClaim>,
    pub terminating: Vec<String>,
}

impl ClaimWork {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.terminating.is_empty()
    }
}

/// Claim owner-reference changes for one pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnerWork {
    /// Claims to PUT with corrected ownerReferences.
    pub updates: Vec<PersistentVolumeClaim>,
    /// Claims with a foreign controller (a `ConflictingController` event each).
    pub conflicting: Vec<String>,
}

impl OwnerWork {
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty() && self.conflicting.is_empty()
    }
}

/// One write (or group of writes) on behalf of one ordinal.
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
}

impl Plan {
    /// Every action, in order (tests and logs).
    pub fn actions(&self) -> impl Iterator<Item = &Action> {
        self.phases
            .iter()
            .flat_map(|p| p.units.iter().flat_map(|u| u.actions.iter()))
    }
}

/// Claims of `pod`'s ordinal that are missing from the cache (to create) or being deleted.
pub fn claim_work(set: &StatefulSet, pod: &Pod, claims: &Claims) -> ClaimWork {
    let mut work = ClaimWork::default();
    let Some(ord) = ordinal(pod) else { return work };
    for (_, claim) in claims_for(set, ord) {
        let name = claim.metadata.name.clone().unwrap_or_default();
        match claims.get(&name) {
            None => work.create.push(claim),
            Some(c) if c.metadata.deletion_timestamp.is_some() => work.terminating.push(name),
            Some(_) => {}
        }
    }
    work
}

/// `UpdatePodClaimForRetentionPolicy` as data: owner-reference fixes of `pod`'s claims.
pub fn owner_work(set: &StatefulSet, pod: &Pod, claims: &Claims) -> OwnerWork {
    let mut work = OwnerWork::default();
    let Some(ord) = ordinal(pod) else { return work };
    for (_, want) in claims_for(set, ord) {
        let name = want.metadata.name.clone().unwrap_or_default();
        let Some(claim) = claims.get(&name) else {
            continue;
        };
        if has_unexpected_controller(claim, set, pod) {
            work.conflicting.push(name.clone());
        }
        if !is_claim_owner_up_to_date(claim, set, pod) {
            let mut updated = (**claim).clone();
            update_claim_owner_refs(&mut updated, set, pod);
            work.updates.push(updated);
        }
    }
    work
}

/// `ClaimsMatchRetentionPolicy`.
pub fn claims_match_policy(set: &StatefulSet, pod: &Pod, claims: &Claims) -> bool {
    let Some(ord) = ordinal(pod) else { return true };
    claims_for(set, ord).iter().all(|(_, want)| {
        let name = want.metadata.name.as_deref().unwrap_or_default();
        claims
            .get(name)
            .is_none_or(|c| is_claim_owner_up_to_date(c, set, pod))
    })
}

/// `PodClaimIsStale`: with `whenScaled: Delete`, some claim of the ordinal still refers to an
/// earlier pod of the same name.
pub fn pod_claim_is_stale(set: &StatefulSet, pod: &Pod, claims: &Claims) -> bool {
    let (_, when_scaled) = retention_policy(set);
    if !when_scaled {
        return false;
    }
    let Some(ord) = ordinal(pod) else {
        return false;
    };
    claims_for(set, ord).iter().any(|(_, want)| {
        claims
            .get(want.metadata.name.as_deref().unwrap_or_default())
            .is_some_and(|c| claim_is_stale_for_pod(c, pod))
    })
}

/// What `UpdateStatefulPod` does to one copy of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Repair {
    /// The pod with identity and storage corrected.
    pub pod: Pod,
    /// The pod must be written (something changed, or claim references were fixed).
    pub dirty: bool,
    /// Claims to create because the storage was rewritten.
    pub claims: ClaimWork,
    pub owners: OwnerWork,
}

/// `UpdateStatefulPod` as data, for one attempt on `pod` (the freshest copy).
pub fn repair(set: &StatefulSet, pod: &Pod, claims: &Claims) -> Repair {
    let mut out = pod.clone();
    let mut dirty = false;
    if !identity_matches(set, &out) {
        update_identity(set, &mut out);
        dirty = true;
    }
    let mut claim_work_ = ClaimWork::default();
    if !storage_matches(set, &out) {
        update_storage(set, &mut out);
        dirty = true;
        claim_work_ = claim_work(set, &out, claims);
    }
    let owners = if claims_match_policy(set, &out, claims) {
        OwnerWork::default()
    } else {
        dirty = true;
        owner_work(set, &out, claims)
    };
    Repair {
        pod: out,
        dirty,
        claims: claim_work_,
        owners,
    }
}

/// [`repair`] of the whole pod as the server has it, for the update the executor writes: the
/// decision is taken on the pod's cached view, and the identity and storage changes are made
/// on the whole pod, so fields the cache does not hold (volume sources, containers) survive.
pub fn repair_whole(
    set: &StatefulSet,
    mut whole: k8s_openapi::api::core::v1::Pod,
    claims: &Claims,
) -> (k8s_openapi::api::core::v1::Pod, Repair) {
    let view = Pod::from(&whole);
    if !identity_matches(set, &view) {
        update_identity(set, &mut whole);
    }
    if !storage_matches(set, &view)
        && let Some(ord) = ordinal(&view)
    {
        let spec = whole.spec.get_or_insert_with(Default::default);
        spec.volumes = storage_volumes(set, ord, spec.volumes.take());
    }
    let repair = repair(set, &view, claims);
    (whole, repair)
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
    let mrs = min_ready_seconds(set);
    let now = s.now;
    let start = start_ordinal(set);
    let end = end_ordinal(set);
    let n = usize::try_from(replicas(set)).unwrap_or(0);

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

    let first_unavailable: Option<&Arc<Pod>> = replicas_
        .iter()
        .find(|p| is_unavailable(p, mrs, now))
        .or_else(|| condemned.iter().rev().find(|p| is_unavailable(p, mrs, now)));

    let counts = |pods: &mut dyn Iterator<Item = &Arc<Pod>>| -> Counts {
        count(
            pods.map(|p| &**p),
            mrs,
            s.current_revision,
            s.update_revision,
            now,
        )
    };
    let mut plan = Plan {
        status: new_status(
            set,
            s.current_revision,
            s.update_revision,
            s.collision_count,
            counts(&mut s.pods.iter()),
        ),
        phases: Vec::new(),
        max_unavailable: None,
        unavailable: None,
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
    if set.metadata.deletion_timestamp.is_some() {
        return plan;
    }
    plan.status = new_status(
        set,
        s.current_revision,
        s.update_revision,
        s.collision_count,
        counts(&mut replicas_.iter().chain(condemned.iter())),
    );

    let monotonic = is_monotonic(set);
    let burst = !monotonic;

    // Replicas, ascending.
    let mut units = Vec::new();
    let mut blocked = false;
    for pod in &replicas_ {
        let (actions, block) = process_replica(s, pod, monotonic);
        units.push(Unit {
            ordinal: ordinal(pod).unwrap_or(-1),
            actions,
        });
        if monotonic && block {
            blocked = true;
            break;
        }
    }
    plan.phases.push(Phase {
        kind: PhaseKind::Replicas,
        burst,
        units,
    });
    if blocked {
        return plan;
    }

    // Claims of condemned pods first, so the collector removes them after their pod.
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
    plan.phases.push(Phase {
        kind: PhaseKind::CondemnedClaims,
        burst,
        units,
    });

    // Condemned pods, descending.
    let mut units = Vec::new();
    for pod in &condemned {
        let (actions, block) = process_condemned(s, pod, first_unavailable, monotonic);
        units.push(Unit {
            ordinal: ordinal(pod).unwrap_or(-1),
            actions,
        });
        if monotonic && block {
            blocked = true;
            break;
        }
    }
    plan.phases.push(Phase {
        kind: PhaseKind::Condemned,
        burst,
        units,
    });
    if blocked || strategy_type(set) != strategy::ROLLING_UPDATE {
        return plan;
    }

    let update_min = usize::try_from(partition(set).unwrap_or(0)).unwrap_or(0);
    let old =
        |p: &Arc<Pod>| is_created(p) && pod_revision(p) != s.update_revision && !is_terminating(p);
    let delete = |p: &Arc<Pod>| Unit {
        ordinal: ordinal(p).unwrap_or(-1),
        actions: vec![Action::DeletePod {
            pod: p.clone(),
            reason: DeleteReason::Update,
        }],
    };
    let mut units = Vec::new();
    let top = replicas_
        .iter()
        .enumerate()
        .rev()
        .filter(|(i, _)| *i >= update_min);
    if s.max_unavailable_gate {
        let Ok(max) = max_unavailable(set) else {
            // `updateStatefulSetAfterInvariantEstablished` fails before any deletion.
            return finish(plan, units, burst);
        };
        let unavailable = replicas_
            .iter()
            .filter(|p| is_unavailable(p, mrs, now))
            .count();
        let unavailable = i32::try_from(unavailable).unwrap_or(i32::MAX);
        plan.max_unavailable = Some(max);
        plan.unavailable = Some(unavailable);
        let parallel = Some(&set.spec).and_then(|sp| sp.pod_management_policy.as_deref())
            == Some(policy::PARALLEL);
        let unavailable_old = |p: &Arc<Pod>| old(p) && is_unavailable(p, mrs, now);
        let needing_update = if parallel {
            replicas_.iter().filter(|p| unavailable_old(p)).count()
        } else {
            0
        };
        if unavailable >= max && needing_update == 0 {
            return finish(plan, units, burst);
        }
        let mut budget = max - unavailable;
        if parallel {
            for (_, p) in top.clone() {
                if unavailable_old(p) {
                    units.push(delete(p));
                }
            }
            for (_, p) in top {
                if budget <= 0 {
                    break;
                }
                if old(p) && !is_unavailable(p, mrs, now) {
                    units.push(delete(p));
                    budget -= 1;
                }
            }
        } else {
            for (_, p) in top {
                if budget <= 0 {
                    break;
                }
                if old(p) {
                    units.push(delete(p));
                    budget -= 1;
                }
            }
        }
        return finish(plan, units, burst);
    }
    for (_, p) in top {
        if old(p) {
            units.push(delete(p));
            break;
        }
        if !is_created(p) || !is_healthy(p) || !is_running_and_available(p, mrs, now) {
            break;
        }
    }
    finish(plan, units, burst)
}

fn finish(mut plan: Plan, units: Vec<Unit>, burst: bool) -> Plan {
    plan.phases.push(Phase {
        kind: PhaseKind::Update,
        burst,
        units,
    });
    plan
}

/// `processReplica`: the actions for one slot and whether it blocks (monotonic mode stops
/// there).
fn process_replica(s: &Snapshot<'_>, pod: &Arc<Pod>, monotonic: bool) -> (Vec<Action>, bool) {
    let set = s.set;
    let mrs = min_ready_seconds(set);
    if is_failed(pod) || is_succeeded(pod) {
        let mut actions = Vec::new();
        if !is_terminating(pod) {
            actions.push(Action::DeletePod {
                pod: pod.clone(),
                reason: DeleteReason::Terminal,
            });
        }
        return (actions, true);
    }
    if !is_created(pod) {
        if pod_claim_is_stale(set, pod, s.claims) {
            return (Vec::new(), true);
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
            monotonic,
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
        return (actions, true);
    }
    let retention_match = claims_match_policy(s.update_set, pod, s.claims);
    if !(identity_matches(set, pod) && storage_matches(set, pod) && retention_match) {
        actions.push(Action::UpdatePod { pod: pod.clone() });
    }
    (actions, false)
}

/// `processCondemned`.
fn process_condemned(
    s: &Snapshot<'_>,
    pod: &Arc<Pod>,
    first_unavailable: Option<&Arc<Pod>>,
    monotonic: bool,
) -> (Vec<Action>, bool) {
    if is_terminating(pod) {
        return (Vec::new(), monotonic);
    }
    let mrs = min_ready_seconds(s.set);
    let is_first = first_unavailable.is_some_and(|f| f.metadata.name == pod.metadata.name);
    if monotonic
        && !is_first
        && (!is_running_and_ready(pod) || !is_running_and_available(pod, mrs, s.now))
    {
        return (Vec::new(), true);
    }
    (
        vec![Action::DeletePod {
            pod: pod.clone(),
            reason: DeleteReason::ScaleDown,
        }],
        monotonic,
    )
}

#[cfg(test)]
#[path = "plan/tests.rs"]
mod tests;
