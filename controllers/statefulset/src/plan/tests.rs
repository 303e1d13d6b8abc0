use super::*;
use crate::claims::{repair, repair_whole};
use crate::testutil::*;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const CUR: &str = "web-cur";
const UPD: &str = "web-upd";

fn run_with(s: &StatefulSet, pods: Vec<Pod>, claims: Claims, gate: bool, update: &str) -> Plan {
    let pods = arcs(pods);
    let snapshot = Snapshot {
        set: s,
        current_set: s,
        update_set: s,
        current_revision: CUR,
        update_revision: update,
        collision_count: 0,
        pods: &pods,
        claims: &claims,
        now: now(),
        max_unavailable_gate: gate,
        recovery: crate::recovery::Recovery::OFF,
    };
    plan(&snapshot)
}

/// The plan with the update revision equal to the current one.
fn run(s: &StatefulSet, pods: Vec<Pod>) -> Plan {
    run_with(s, pods, Claims::new(), true, CUR)
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// Every action as a short string.
fn ops(plan: &Plan) -> Vec<String> {
    plan.actions()
        .map(|a| match a {
            Action::DeletePod { pod, reason } => {
                format!("delete {} {reason:?}", name(&pod.metadata))
            }
            Action::CreatePod { pod, .. } => format!(
                "create {} {}",
                name(&pod.metadata),
                crate::identity::pod_revision(&Pod::from(&**pod))
            ),
            Action::EnsureClaims { pod, .. } => format!("claims {}", name(&pod.metadata)),
            Action::UpdatePod { pod } => format!("update {}", name(&pod.metadata)),
            Action::FixClaimOwners { pod, .. } => format!("fix {}", name(&pod.metadata)),
        })
        .collect()
}

fn ready(s: &StatefulSet, ord: i32) -> Pod {
    pod(s, ord, CUR, State::Ready(600))
}

#[test]
fn ordered_ready_creates_one_pod_at_a_time_after_its_predecessors_are_ready() {
    let s = set(3);
    assert_eq!(ops(&run(&s, vec![])), vec!["create web-0 web-cur"]);
    assert_eq!(
        ops(&run(&s, vec![ready(&s, 0)])),
        vec!["create web-1 web-cur"]
    );
    assert!(ops(&run(&s, vec![pod(&s, 0, CUR, State::Pending)])).is_empty());
    assert!(ops(&run(&s, vec![pod(&s, 0, CUR, State::Unready)])).is_empty());
    assert!(ops(&run(&s, vec![terminating(ready(&s, 0))])).is_empty());
    assert_eq!(
        ops(&run(&s, vec![ready(&s, 0), ready(&s, 1)])),
        vec!["create web-2 web-cur"]
    );
    assert!(ops(&run(&s, vec![ready(&s, 0), ready(&s, 1), ready(&s, 2)])).is_empty());
    // A predecessor that fails later blocks the next creation (web-0 fails after web-1 is up).
    assert_eq!(
        ops(&run(&s, vec![pod(&s, 0, CUR, State::Failed), ready(&s, 1)])),
        vec!["delete web-0 Terminal"]
    );
}

#[test]
fn min_ready_seconds_gates_the_next_pod() {
    let mut s = set(2);
    s.spec.min_ready_seconds = Some(10);
    assert!(ops(&run(&s, vec![pod(&s, 0, CUR, State::Ready(5))])).is_empty());
    assert_eq!(
        ops(&run(&s, vec![pod(&s, 0, CUR, State::Ready(11))])),
        vec!["create web-1 web-cur"]
    );
}

#[test]
fn parallel_creates_every_missing_pod_in_one_burst_phase() {
    let s = parallel(set(3));
    let p = run(&s, vec![]);
    assert_eq!(
        ops(&p),
        vec![
            "create web-0 web-cur",
            "create web-1 web-cur",
            "create web-2 web-cur"
        ]
    );
    assert!(p.phases.iter().all(|ph| ph.burst));
    // Unready and terminating pods do not hold the others back.
    assert_eq!(
        ops(&run(
            &s,
            vec![pod(&s, 0, CUR, State::Pending), terminating(ready(&s, 1))]
        )),
        vec!["create web-2 web-cur"]
    );
}

#[test]
fn failed_and_succeeded_pods_are_deleted_and_never_replaced_in_the_same_sync() {
    for s in [set(3), parallel(set(3))] {
        let p = run(
            &s,
            vec![ready(&s, 0), pod(&s, 1, CUR, State::Failed), ready(&s, 2)],
        );
        assert_eq!(ops(&p), vec!["delete web-1 Terminal"]);
        let p = run(
            &s,
            vec![
                ready(&s, 0),
                pod(&s, 1, CUR, State::Succeeded),
                ready(&s, 2),
            ],
        );
        assert_eq!(ops(&p), vec!["delete web-1 Terminal"]);
        // Already terminating: nothing, and no replacement while the object exists.
        let p = run(
            &s,
            vec![
                ready(&s, 0),
                terminating(pod(&s, 1, CUR, State::Failed)),
                ready(&s, 2),
            ],
        );
        assert!(ops(&p).is_empty(), "{:?}", ops(&p));
    }
}

#[test]
fn at_most_one_pod_per_identity() {
    // Whatever the state of existing pods, a create never names an existing pod.
    let states = [
        State::Pending,
        State::Ready(600),
        State::Unready,
        State::Failed,
        State::Succeeded,
    ];
    for s in [set(3), parallel(set(3))] {
        for st in states {
            for term in [false, true] {
                let mut p1 = pod(&s, 1, CUR, st);
                if term {
                    p1 = terminating(p1);
                }
                let pods = vec![ready(&s, 0), p1, ready(&s, 2)];
                let plan = run(&s, pods.clone());
                for a in plan.actions() {
                    if let Action::CreatePod { pod, .. } = a {
                        assert!(
                            !pods.iter().any(|p| p.metadata.name == pod.metadata.name),
                            "{st:?} {term}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn ordered_scale_down_goes_from_the_highest_ordinal_one_at_a_time() {
    let s = set(1);
    let all = vec![ready(&s, 0), ready(&s, 1), ready(&s, 2)];
    assert_eq!(ops(&run(&s, all)), vec!["delete web-2 ScaleDown"]);
    // web-2 terminating: web-1 waits.
    assert!(
        ops(&run(
            &s,
            vec![ready(&s, 0), ready(&s, 1), terminating(ready(&s, 2))]
        ))
        .is_empty()
    );
    assert_eq!(
        ops(&run(&s, vec![ready(&s, 0), ready(&s, 1)])),
        vec!["delete web-1 ScaleDown"]
    );
}

#[test]
fn scale_down_is_blocked_by_an_unhealthy_replica() {
    let s = set(2);
    let pods = vec![pod(&s, 0, CUR, State::Unready), ready(&s, 1), ready(&s, 2)];
    assert!(ops(&run(&s, pods)).is_empty());
}

#[test]
fn an_unhealthy_condemned_pod_is_deleted_only_if_it_is_the_first_unavailable() {
    let s = set(1);
    // web-2 unhealthy and the only unavailable pod: it goes.
    let pods = vec![ready(&s, 0), ready(&s, 1), pod(&s, 2, CUR, State::Unready)];
    assert_eq!(ops(&run(&s, pods)), vec!["delete web-2 ScaleDown"]);
    // web-1 and web-2 unhealthy: the first unavailable is web-1 (lowest), web-2 blocks.
    let pods = vec![
        ready(&s, 0),
        pod(&s, 1, CUR, State::Unready),
        pod(&s, 2, CUR, State::Unready),
    ];
    assert!(ops(&run(&s, pods)).is_empty());
}

#[test]
fn parallel_scale_down_deletes_every_condemned_pod_at_once() {
    let s = parallel(set(0));
    let pods = vec![
        ready(&s, 0),
        ready(&s, 1),
        terminating(ready(&s, 2)),
        pod(&s, 3, CUR, State::Unready),
    ];
    assert_eq!(
        ops(&run(&s, pods)),
        vec![
            "delete web-3 ScaleDown",
            "delete web-1 ScaleDown",
            "delete web-0 ScaleDown"
        ]
    );
}

#[test]
fn start_ordinal_moves_the_range() {
    let mut s = set(2);
    s.spec.ordinals = Some(k8s_openapi::api::apps::v1::StatefulSetOrdinals { start: Some(5) });
    assert_eq!(ops(&run(&s, vec![])), vec!["create web-5 web-cur"]);
    // Moving start to 0 with web-5, web-6 ready: web-0 first; the old ones wait.
    let mut moved = s.clone();
    moved.spec.ordinals = Some(k8s_openapi::api::apps::v1::StatefulSetOrdinals { start: Some(0) });
    let pods = vec![ready(&s, 5), ready(&s, 6)];
    assert_eq!(ops(&run(&moved, pods)), vec!["create web-0 web-cur"]);
    let pods = vec![ready(&s, 0), ready(&s, 1), ready(&s, 5), ready(&s, 6)];
    assert_eq!(ops(&run(&moved, pods)), vec!["delete web-6 ScaleDown"]);
}

#[test]
fn rolling_update_replaces_the_highest_old_pod_and_waits_for_it() {
    let s = set(3);
    let all = vec![ready(&s, 0), ready(&s, 1), ready(&s, 2)];
    let p = run_with(&s, all, Claims::new(), false, UPD);
    assert_eq!(ops(&p), vec!["delete web-2 Update"]);
    // The replacement (update revision) is not yet ready: nothing more.
    let pods = vec![ready(&s, 0), ready(&s, 1), pod(&s, 2, UPD, State::Unready)];
    assert!(ops(&run_with(&s, pods, Claims::new(), false, UPD)).is_empty());
    // Ready: the next one goes.
    let pods = vec![
        ready(&s, 0),
        ready(&s, 1),
        pod(&s, 2, UPD, State::Ready(60)),
    ];
    assert_eq!(
        ops(&run_with(&s, pods, Claims::new(), false, UPD)),
        vec!["delete web-1 Update"]
    );
    // Missing web-2 is recreated at the update revision first.
    let pods = vec![ready(&s, 0), ready(&s, 1)];
    assert_eq!(
        ops(&run_with(&s, pods, Claims::new(), false, UPD)),
        vec!["create web-2 web-upd"]
    );
    // The same with the gate on and maxUnavailable 1.
    let all = vec![ready(&s, 0), ready(&s, 1), ready(&s, 2)];
    assert_eq!(
        ops(&run_with(&s, all, Claims::new(), true, UPD)),
        vec!["delete web-2 Update"]
    );
}

#[test]
fn partition_limits_the_update() {
    let mut s = set(3);
    if let Some(r) = s
        .spec
        .update_strategy
        .as_mut()
        .and_then(|u| u.rolling_update.as_mut())
    {
        r.partition = Some(2);
    }
    for gate in [false, true] {
        let pods = vec![
            ready(&s, 0),
            ready(&s, 1),
            pod(&s, 2, UPD, State::Ready(60)),
        ];
        let plan = run_with(&s, pods, Claims::new(), gate, UPD);
        assert!(ops(&plan).is_empty());
        assert_eq!(
            plan.waiting,
            vec![Waiting::Partition {
                partition: 2,
                ordinals: vec![0, 1]
            }],
            "the pods below the partition are named"
        );
        let pods = vec![ready(&s, 0), ready(&s, 1), ready(&s, 2)];
        assert_eq!(
            ops(&run_with(&s, pods, Claims::new(), gate, UPD)),
            vec!["delete web-2 Update"]
        );
    }
}

#[test]
fn on_delete_never_deletes_for_an_update() {
    let mut s = set(3);
    s.spec.update_strategy = Some(k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy {
        type_: Some("OnDelete".into()),
        rolling_update: None,
    });
    let all = vec![ready(&s, 0), ready(&s, 1), ready(&s, 2)];
    let plan = run_with(&s, all, Claims::new(), true, UPD);
    assert!(ops(&plan).is_empty());
    assert_eq!(
        plan.waiting,
        vec![Waiting::OnDelete {
            ordinals: vec![0, 1, 2]
        }]
    );
    // A deleted pod comes back at the update revision.
    let pods = vec![ready(&s, 0), ready(&s, 2)];
    assert_eq!(
        ops(&run_with(&s, pods, Claims::new(), true, UPD)),
        vec!["create web-1 web-upd"]
    );
}

fn with_max_unavailable(mut s: StatefulSet, v: IntOrString) -> StatefulSet {
    if let Some(r) = s
        .spec
        .update_strategy
        .as_mut()
        .and_then(|u| u.rolling_update.as_mut())
    {
        r.max_unavailable = Some(v);
    }
    s
}

#[test]
fn max_unavailable_deletes_several_old_pods_at_once() {
    let s = with_max_unavailable(parallel(set(4)), IntOrString::Int(2));
    let all: Vec<Pod> = (0..4).map(|i| ready(&s, i)).collect();
    let p = run_with(&s, all.clone(), Claims::new(), true, UPD);
    assert_eq!(ops(&p), vec!["delete web-3 Update", "delete web-2 Update"]);
    assert_eq!((p.max_unavailable, p.unavailable), (Some(2), Some(0)));
    // Gate off: one at a time.
    let p = run_with(&s, all, Claims::new(), false, UPD);
    assert_eq!(ops(&p), vec!["delete web-3 Update"]);
    // Two replacements not yet available: the budget is used up.
    let pods = vec![
        ready(&s, 0),
        ready(&s, 1),
        pod(&s, 2, UPD, State::Unready),
        pod(&s, 3, UPD, State::Unready),
    ];
    assert!(ops(&run_with(&s, pods, Claims::new(), true, UPD)).is_empty());
    // An old pod that is already unavailable is replaced without using the budget (v1.37).
    let pods = vec![
        pod(&s, 0, CUR, State::Unready),
        ready(&s, 1),
        pod(&s, 2, UPD, State::Unready),
        pod(&s, 3, UPD, State::Unready),
    ];
    assert_eq!(
        ops(&run_with(&s, pods, Claims::new(), true, UPD)),
        vec!["delete web-0 Update"]
    );
}

#[test]
fn max_unavailable_values() {
    let s = set(10);
    let with = |v: IntOrString| max_unavailable(&with_max_unavailable(s.clone(), v));
    assert_eq!(max_unavailable(&s), Ok(1));
    assert_eq!(with(IntOrString::Int(3)), Ok(3));
    assert_eq!(with(IntOrString::Int(0)), Ok(1), "at least one");
    assert_eq!(with(IntOrString::String("25%".into())), Ok(2));
    assert_eq!(with(IntOrString::String("5%".into())), Ok(1));
    assert_eq!(
        with(IntOrString::String("+50%".into())),
        Ok(5),
        "Atoi takes a sign"
    );
    assert_eq!(with(IntOrString::String("-50%".into())), Ok(1));
    // Upstream's errors (`GetScaledValueFromIntOrPercent`), where rkcm used to read 1.
    assert_eq!(
        with(IntOrString::String("3".into())),
        Err("invalid value for IntOrString: invalid type: string is not a percentage".into())
    );
    assert_eq!(
        with(IntOrString::String("x%".into())),
        Err("invalid value for IntOrString: invalid value \"x%\": strconv.Atoi: parsing \"x\": invalid syntax".into())
    );
    assert!(with(IntOrString::String("%".into())).is_err());
    assert!(with(IntOrString::String("1.5%".into())).is_err());
}

/// An unusable `maxUnavailable` with the gate on: the pods are still managed, but no update
/// step is taken and the sync fails without a status write (upstream
/// `updateStatefulSetAfterInvariantEstablished` and `updateStatefulSetStatus`). With the gate
/// off the value is never read.
#[test]
fn an_unparsable_max_unavailable_fails_the_update_as_upstream() {
    let s = with_max_unavailable(set(3), IntOrString::String("x%".into()));
    let pods = vec![ready(&s, 0), ready(&s, 1)];
    let p = run_with(&s, pods.clone(), Claims::new(), true, UPD);
    assert!(
        p.max_unavailable_error
            .as_deref()
            .is_some_and(|e| e.contains("invalid value \"x%\"")),
        "{:?}",
        p.max_unavailable_error
    );
    assert_eq!(
        ops(&p),
        vec!["create web-2 web-upd"],
        "replicas still managed"
    );
    let all = vec![ready(&s, 0), ready(&s, 1), ready(&s, 2)];
    let p = run_with(&s, all.clone(), Claims::new(), true, UPD);
    assert!(ops(&p).is_empty(), "no update deletion: {:?}", ops(&p));
    assert!(p.max_unavailable_error.is_some());
    let p = run_with(&s, all, Claims::new(), false, UPD);
    assert_eq!(p.max_unavailable_error, None);
    assert_eq!(ops(&p), vec!["delete web-2 Update"]);
}

#[test]
fn a_recreate_set_gets_upstreams_unknown_strategy_error() {
    let mut s = set(3);
    s.spec.update_strategy = Some(k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
    assert_eq!(
        unknown_strategy_error(&s).as_deref(),
        Some(
            "statefulset ns/web uses Recreate strategy but feature gate StatefulSetRecreateStrategy is disabled"
        )
    );
    assert_eq!(unknown_strategy_error(&set(3)), None);
}

#[test]
fn a_set_being_deleted_gets_status_only() {
    let mut s = set(3);
    s.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let p = run(
        &s,
        vec![ready(&s, 0), pod(&s, 1, CUR, State::Failed), ready(&s, 5)],
    );
    assert!(p.phases.is_empty());
    assert_eq!((p.status.replicas, p.status.ready_replicas), (3, Some(2)));
}

#[test]
fn status_counts_existing_pods_of_slots_and_condemned() {
    let s = set(2);
    let p = run(&s, vec![ready(&s, 0), ready(&s, 2)]);
    assert_eq!(p.status.replicas, 2);
    assert_eq!(p.status.current_revision.as_deref(), Some(CUR));
    assert_eq!(p.status.observed_generation, Some(1));
    assert_eq!(p.status.collision_count, Some(0));
}

fn claims_map(list: Vec<PersistentVolumeClaim>) -> Claims {
    list.into_iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), Arc::new(c)))
        .collect()
}

#[test]
fn claims_are_created_with_the_pod_and_terminating_claims_block_it() {
    let s = with_claim_template(set(1), "data");
    let p = run(&s, vec![]);
    match p.actions().next() {
        Some(Action::CreatePod { claims, .. }) => {
            assert_eq!(claims.create.len(), 1);
            assert_eq!(
                claims.create[0].metadata.name.as_deref(),
                Some("data-web-0")
            );
        }
        other => panic!("{other:?}"),
    }
    let mut c = claim("data-web-0", vec![]);
    c.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let p = run_with(&s, vec![], claims_map(vec![c]), true, CUR);
    match p.actions().next() {
        Some(Action::CreatePod { claims, .. }) => {
            assert!(claims.create.is_empty());
            assert_eq!(claims.terminating, vec!["data-web-0"]);
        }
        other => panic!("{other:?}"),
    }
    // A pending pod whose claim vanished gets it back.
    let p = run_with(
        &s,
        vec![pod(&s, 0, CUR, State::Pending)],
        Claims::new(),
        true,
        CUR,
    );
    assert_eq!(ops(&p), vec!["claims web-0"]);
}

#[test]
fn a_stale_claim_blocks_the_ordinal() {
    let s = with_claim_template(with_policy(set(1), "Retain", "Delete"), "data");
    let stale = claim(
        "data-web-0",
        vec![owner("v1", "Pod", "web-0", "bogus", true)],
    );
    assert!(
        ops(&run_with(
            &s,
            vec![],
            claims_map(vec![stale.clone()]),
            true,
            CUR
        ))
        .is_empty()
    );
    // With Retain on scale-down the same claim is reused.
    let r = with_claim_template(set(1), "data");
    assert_eq!(
        ops(&run_with(&r, vec![], claims_map(vec![stale]), true, CUR)),
        vec!["create web-0 web-cur"]
    );
}

#[test]
fn condemned_claims_get_the_pod_ref_before_the_pod_is_deleted() {
    let s = with_claim_template(with_policy(set(1), "Retain", "Delete"), "data");
    let pods = vec![ready(&s, 0), ready(&s, 1)];
    let claims = claims_map(vec![
        claim("data-web-0", vec![]),
        claim("data-web-1", vec![]),
    ]);
    let p = run_with(&s, pods, claims, true, CUR);
    assert_eq!(ops(&p), vec!["fix web-1", "delete web-1 ScaleDown"]);
    match p.actions().next() {
        Some(Action::FixClaimOwners { owners, .. }) => {
            let refs = owners.updates[0]
                .metadata
                .owner_references
                .clone()
                .unwrap_or_default();
            assert_eq!(
                (refs[0].kind.as_str(), refs[0].uid.as_str()),
                ("Pod", "pod-uid-1")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn invariants_are_repaired_on_existing_pods() {
    let s = with_claim_template(with_policy(set(2), "Delete", "Retain"), "data");
    let mut broken = ready(&s, 1);
    if let Some(l) = broken.metadata.labels.as_mut() {
        l.remove(crate::consts::labels::POD_NAME);
    }
    let claims = claims_map(vec![
        claim(
            "data-web-0",
            vec![owner("apps/v1", "StatefulSet", "web", SET_UID, true)],
        ),
        claim(
            "data-web-1",
            vec![owner("apps/v1", "StatefulSet", "web", SET_UID, true)],
        ),
    ]);
    assert_eq!(
        ops(&run_with(
            &s,
            vec![ready(&s, 0), broken.clone()],
            claims.clone(),
            true,
            CUR
        )),
        vec!["update web-1"]
    );
    let r = repair(&s, &broken, &claims);
    assert!(r.dirty && r.owners.is_empty() && r.claims.is_empty());
    assert!(identity_matches(&s, &r.pod));
    // The write body: the whole pod, repaired the same way, keeping what the cache drops.
    let mut whole = whole_pod(&s, 1, CUR, State::Ready(600));
    if let Some(l) = whole.metadata.labels.as_mut() {
        l.remove(crate::consts::labels::POD_NAME);
    }
    assert_eq!(Pod::from(&whole), broken);
    if let Some(spec) = whole.spec.as_mut() {
        spec.containers[0].image = Some("kept".into());
        spec.volumes
            .get_or_insert_with(Vec::new)
            .push(core::Volume {
                name: "scratch".into(),
                empty_dir: Some(core::EmptyDirVolumeSource::default()),
                ..core::Volume::default()
            });
    }
    let (body, again) = repair_whole(&s, whole, &claims);
    assert_eq!(
        (again.dirty, &again.claims, &again.owners),
        (r.dirty, &r.claims, &r.owners),
        "the decision is the cached view's"
    );
    assert_eq!(Pod::from(&body).metadata, r.pod.metadata);
    let spec = body.spec.as_ref().expect("spec");
    assert_eq!(spec.containers[0].image.as_deref(), Some("kept"));
    assert!(
        spec.volumes
            .iter()
            .flatten()
            .any(|v| v.name == "scratch" && v.empty_dir.is_some()),
        "a volume the cache does not hold survives the repair"
    );
    // A policy change alone: the claim of web-0 lacks the set ref.
    let claims = claims_map(vec![
        claim("data-web-0", vec![]),
        claim(
            "data-web-1",
            vec![owner("apps/v1", "StatefulSet", "web", SET_UID, true)],
        ),
    ]);
    assert_eq!(
        ops(&run_with(
            &s,
            vec![ready(&s, 0), ready(&s, 1)],
            claims.clone(),
            true,
            CUR
        )),
        vec!["update web-0"]
    );
    let r = repair(&s, &ready(&s, 0), &claims);
    assert!(r.dirty);
    assert_eq!(r.owners.updates.len(), 1);
    assert_eq!(r.pod, ready(&s, 0), "the pod itself is unchanged");
}

/// Why the plan ends where it does, one case per reason.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn the_plan_says_what_it_waits_for() {
    let s = set(3);
    let par = parallel(set(3));
    let mut going = set(3);
    going.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let gate = |v: i32| with_max_unavailable(parallel(set(4)), IntOrString::Int(v));
    let g2 = gate(2);
    let cases: Vec<(&str, Plan, Vec<Waiting>)> = vec![
        (
            "all ready, nothing to do",
            run(&s, (0..3).map(|i| ready(&s, i)).collect()),
            vec![],
        ),
        (
            "first create",
            run(&s, vec![]),
            vec![Waiting::Creating { ordinal: 0 }],
        ),
        (
            "parallel creates wait for nothing",
            run(&par, vec![]),
            vec![],
        ),
        (
            "unready predecessor",
            run(&s, vec![pod(&s, 0, CUR, State::Unready)]),
            vec![Waiting::NotReady { ordinal: 0 }],
        ),
        (
            "failed pod",
            run(&s, vec![pod(&s, 0, CUR, State::Failed)]),
            vec![Waiting::Terminal { ordinal: 0 }],
        ),
        (
            "ordered scale-down, one at a time",
            run(&s, (0..5).map(|i| ready(&s, i)).collect()),
            vec![Waiting::ScalingDown { ordinal: 4 }],
        ),
        (
            "terminating condemned pod",
            run(
                &s,
                vec![
                    ready(&s, 0),
                    ready(&s, 1),
                    ready(&s, 2),
                    terminating(ready(&s, 3)),
                ],
            ),
            vec![Waiting::CondemnedTerminating { ordinal: 3 }],
        ),
        (
            "unhealthy condemned pod behind an unhealthy one",
            run(
                &s,
                vec![
                    ready(&s, 0),
                    ready(&s, 1),
                    ready(&s, 2),
                    pod(&s, 3, CUR, State::Unready),
                    pod(&s, 4, CUR, State::Unready),
                ],
            ),
            vec![Waiting::CondemnedNotReady { ordinal: 4 }],
        ),
        (
            "rolling update deletes one",
            run_with(
                &s,
                (0..3).map(|i| ready(&s, i)).collect(),
                Claims::new(),
                false,
                UPD,
            ),
            vec![Waiting::Updating { ordinal: 2 }],
        ),
        (
            "rolling update waits for the replacement",
            run_with(
                &par,
                vec![
                    ready(&par, 0),
                    ready(&par, 1),
                    pod(&par, 2, UPD, State::Unready),
                ],
                Claims::new(),
                false,
                UPD,
            ),
            vec![Waiting::UpdateNotAvailable { ordinal: 2 }],
        ),
        (
            "maxUnavailable budget used up before the step",
            run_with(
                &g2,
                vec![
                    ready(&g2, 0),
                    ready(&g2, 1),
                    pod(&g2, 2, UPD, State::Unready),
                    pod(&g2, 3, UPD, State::Unready),
                ],
                Claims::new(),
                true,
                UPD,
            ),
            vec![Waiting::MaxUnavailable {
                unavailable: 2,
                max: 2,
            }],
        ),
        (
            "maxUnavailable budget used up by the step",
            run_with(
                &g2,
                (0..4).map(|i| ready(&g2, i)).collect(),
                Claims::new(),
                true,
                UPD,
            ),
            vec![Waiting::MaxUnavailable {
                unavailable: 0,
                max: 2,
            }],
        ),
        (
            "maxUnavailable covers every old pod",
            run_with(
                &gate(4),
                (0..4).map(|i| ready(&g2, i)).collect(),
                Claims::new(),
                true,
                UPD,
            ),
            vec![],
        ),
        (
            "set being deleted",
            run(&going, vec![]),
            vec![Waiting::SetDeleting],
        ),
    ];
    for (name, plan, want) in cases {
        assert_eq!(plan.waiting, want, "{name}: {:?}", ops(&plan));
    }
}

#[test]
fn a_recreate_set_is_planned_as_a_refusal() {
    let mut s = set(3);
    s.spec.update_strategy = Some(k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
    let p = run(&s, vec![]);
    assert!(p.phases.is_empty(), "{:?}", ops(&p));
    assert_eq!(p.unknown_strategy, unknown_strategy_error(&s));
    assert!(p.unknown_strategy.is_some());
    assert_eq!(run(&set(3), vec![]).unknown_strategy, None);
}

#[test]
fn a_sync_begins_with_the_set_its_expectations_and_its_selector() {
    let s = set(3);
    assert!(matches!(begin(None, true), Begin::Forget));
    assert!(matches!(begin(None, false), Begin::Forget));
    assert!(matches!(
        begin(Some(&s), false),
        Begin::Wait {
            reason: Waiting::Expectations,
            requeue_after: Some(EXPECTATIONS_TIMEOUT)
        }
    ));
    assert!(matches!(begin(Some(&s), true), Begin::Sync(set, _) if set == &s));
    let mut bad = set(3);
    bad.spec.selector.match_expressions = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
            key: "app".into(),
            operator: "Sideways".into(),
            values: None,
        },
    ]);
    assert!(matches!(
        begin(Some(&bad), true),
        Begin::Wait {
            reason: Waiting::InvalidSelector(_),
            requeue_after: None
        }
    ));
}

#[test]
fn the_status_step_after_the_plan() {
    let s = set(3);
    let all: Vec<Pod> = (0..3).map(|i| ready(&s, i)).collect();
    let pods = arcs(all.clone());
    // First status of a set: written now.
    let p = run(&s, all.clone());
    let step = status_step(&s, &p, 0, &pods, now());
    assert_eq!(step.write, StatusWrite::Now);
    assert_eq!(step.status.current_replicas, Some(3));
    assert!(step.gauges);
    assert_eq!(step.requeue_after, None);
    // The same status again: nothing to write.
    let mut written = s.clone();
    written.status = Some(step.status.clone());
    let p = run(&written, all.clone());
    assert_eq!(
        status_step(&written, &p, 0, &pods, now()).write,
        StatusWrite::Skip
    );
    // Only counts moved: paced.
    let fewer = arcs(all[..2].to_vec());
    let p = run(&written, all[..2].to_vec());
    assert_eq!(
        status_step(&written, &p, 0, &fewer, now()).write,
        StatusWrite::Paced
    );
    // Update deletions lower currentReplicas.
    let p = run_with(&written, all.clone(), Claims::new(), false, UPD);
    let step = status_step(&written, &p, 1, &pods, now());
    assert_eq!(step.status.current_replicas, Some(2));
    assert_eq!(
        step.write,
        StatusWrite::Now,
        "a new update revision goes out at once"
    );
    // An unusable maxUnavailable fails the write, and no gauges.
    let bad = with_max_unavailable(set(3), IntOrString::String("x%".into()));
    let p = run_with(&bad, all.clone(), Claims::new(), true, UPD);
    let step = status_step(&bad, &p, 0, &pods, now());
    assert!(matches!(&step.write, StatusWrite::Fail(m) if m.contains("x%")));
    assert!(!step.gauges);
    // minReadySeconds with a ready pod not yet available: sync again when it will be.
    let mut slow = set(1);
    slow.spec.min_ready_seconds = Some(10);
    let young = vec![pod(&slow, 0, CUR, State::Ready(4))];
    let p = run(&slow, young.clone());
    let step = status_step(&slow, &p, 0, &arcs(young), now());
    assert_eq!(step.requeue_after, Some(std::time::Duration::from_secs(6)));
}

#[test]
fn a_sync_fails_with_its_first_error() {
    let ok = || Ok::<(), &str>(());
    assert_eq!(outcome(ok(), ok(), ok()), (Ok(()), None));
    assert_eq!(outcome(ok(), ok(), Err("history")), (Err("history"), None));
    assert_eq!(
        outcome(ok(), Err("status"), Err("history")),
        (Err("status"), None)
    );
    assert_eq!(
        outcome(Err("pods"), ok(), Err("history")),
        (Err("pods"), None)
    );
    assert_eq!(
        outcome(Err("pods"), Err("status"), ok()),
        (Err("pods"), Some("status"))
    );
}
