//! Table tests mirroring upstream `TestSortingActivePodsWithRanks`
//! (`pkg/controller/controller_utils_test.go`), `TestGetPodsToDelete` and the manage cases of
//! `pkg/controller/replicaset/replica_set_test.go`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::cached::{Container, ContainerStatus, PodCondition, PodSpec, PodStatus};

use super::*;

pub(crate) fn now() -> jiff::Timestamp {
    "2026-06-01T12:00:00Z".parse().expect("valid timestamp")
}

pub(crate) fn ago(d: Duration) -> jiff::Timestamp {
    now()
        .checked_sub(jiff::SignedDuration::try_from(d).expect("small"))
        .expect("in range")
}

const HOUR: Duration = Duration::from_secs(3600);

/// A pod as upstream's test helper builds it.
#[derive(Clone, Default)]
pub(crate) struct P {
    pub name: &'static str,
    pub uid: &'static str,
    pub node: &'static str,
    pub phase: &'static str,
    pub ready: bool,
    pub ready_since: Option<jiff::Timestamp>,
    pub created: Option<jiff::Timestamp>,
    pub restarts: i32,
    pub sidecar_restarts: i32,
    pub cost: Option<&'static str>,
    pub labels: &'static [(&'static str, &'static str)],
    pub deleting: bool,
    pub owner_uid: Option<&'static str>,
}

impl P {
    /// The pod as the controller's projected pod cache holds it.
    pub(crate) fn build(&self) -> Arc<Pod> {
        Arc::new(
            rkcm_runtime::cache::projection::projected(&self.whole(), crate::POD_FIELDS)
                .expect("a fixture reads as the cache reads it"),
        )
    }

    fn whole(&self) -> Pod {
        let mut annotations = BTreeMap::new();
        if let Some(c) = self.cost {
            annotations.insert(
                crate::consts::POD_DELETION_COST_ANNOTATION.to_owned(),
                c.to_owned(),
            );
        }
        let ready = PodCondition {
            type_: "Ready".into(),
            status: if self.ready { "True" } else { "False" }.into(),
            last_transition_time: self.ready_since.map(Time),
            ..PodCondition::default()
        };
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.into()),
                namespace: Some("ns".into()),
                uid: Some(self.uid.into()),
                creation_timestamp: self.created.map(Time),
                annotations: (!annotations.is_empty()).then_some(annotations),
                labels: Some(
                    self.labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                deletion_timestamp: self.deleting.then(|| Time(now())),
                owner_references: self.owner_uid.map(|uid| {
                    vec![
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                            api_version: "apps/v1".into(),
                            kind: "ReplicaSet".into(),
                            name: "web".into(),
                            uid: uid.into(),
                            controller: Some(true),
                            block_owner_deletion: Some(true),
                        },
                    ]
                }),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: (!self.node.is_empty()).then(|| self.node.to_owned()),
                containers: vec![Container {
                    name: "c".into(),
                    ..Container::default()
                }],
                init_containers: Some(vec![Container {
                    name: "sidecar".into(),
                    restart_policy: Some("Always".into()),
                }]),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: (!self.phase.is_empty()).then(|| self.phase.to_owned()),
                conditions: Some(vec![ready]),
                container_statuses: Some(vec![ContainerStatus {
                    name: "c".into(),
                    restart_count: self.restarts,
                    ..ContainerStatus::default()
                }]),
                init_container_statuses: Some(vec![ContainerStatus {
                    name: "sidecar".into(),
                    restart_count: self.sidecar_restarts,
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            }),
        }
    }
}

fn cmp(a: &(Arc<Pod>, usize), b: &(Arc<Pod>, usize), cost: bool) -> Ordering {
    compare_for_deletion((&a.0, a.1), (&b.0, b.1), now(), cost)
}

struct Pods {
    unscheduled: Arc<Pod>,
    scheduled_pending: Arc<Pod>,
    unknown_phase: Arc<Pod>,
    running_not_ready: Arc<Pod>,
    ready_no_transition: Arc<Pod>,
    ready_now: Arc<Pod>,
    ready_then: Arc<Pod>,
    ready_now_high_restarts: Arc<Pod>,
    ready_now_created_then: Arc<Pod>,
    low_cost: Arc<Pod>,
    high_cost: Arc<Pod>,
    unscheduled_5h: Arc<Pod>,
    unscheduled_8h: Arc<Pod>,
    ready_2h: Arc<Pod>,
    ready_5h: Arc<Pod>,
    ready_8h: Arc<Pod>,
    no_sidecar_restarts: Arc<Pod>,
    sidecar_restarts: Arc<Pod>,
}

fn pods() -> Pods {
    let month = ago(30 * 24 * HOUR);
    let running_ready = |name, ready_since, created| P {
        name,
        node: "node",
        phase: "Running",
        ready: true,
        ready_since,
        created,
        ..P::default()
    };
    Pods {
        unscheduled: P {
            name: "unscheduled",
            phase: "Pending",
            ..P::default()
        }
        .build(),
        scheduled_pending: P {
            name: "pending",
            node: "node",
            phase: "Pending",
            ..P::default()
        }
        .build(),
        unknown_phase: P {
            name: "unknown-phase",
            node: "node",
            phase: "Unknown",
            ..P::default()
        }
        .build(),
        running_not_ready: P {
            name: "not-ready",
            node: "node",
            phase: "Running",
            ..P::default()
        }
        .build(),
        ready_no_transition: running_ready("ready-no-ltt", None, None).build(),
        ready_now: running_ready("ready-now", Some(now()), Some(now())).build(),
        ready_then: running_ready("ready-then", Some(month), Some(month)).build(),
        ready_now_high_restarts: P {
            restarts: 9001,
            ..running_ready("ready-high-restarts", Some(now()), Some(now()))
        }
        .build(),
        ready_now_created_then: running_ready("ready-now-created-then", Some(now()), Some(month))
            .build(),
        low_cost: P {
            cost: Some("10"),
            ..running_ready("low-cost", Some(now()), Some(month))
        }
        .build(),
        high_cost: P {
            cost: Some("100"),
            ..running_ready("high-cost", Some(now()), Some(month))
        }
        .build(),
        unscheduled_5h: P {
            name: "unscheduled-5h",
            phase: "Pending",
            created: Some(ago(5 * HOUR)),
            ..P::default()
        }
        .build(),
        unscheduled_8h: P {
            name: "unscheduled-8h",
            phase: "Pending",
            created: Some(ago(8 * HOUR)),
            ..P::default()
        }
        .build(),
        ready_2h: P {
            node: "",
            ..running_ready("ready-2h", Some(ago(2 * HOUR)), Some(month))
        }
        .build(),
        ready_5h: P {
            node: "",
            ..running_ready("ready-5h", Some(ago(5 * HOUR)), Some(month))
        }
        .build(),
        ready_8h: P {
            node: "",
            ..running_ready("ready-8h", Some(ago(8 * HOUR)), Some(month))
        }
        .build(),
        no_sidecar_restarts: P {
            restarts: 1,
            ..running_ready("no-sidecar-restarts", Some(now()), Some(now()))
        }
        .build(),
        sidecar_restarts: P {
            restarts: 1,
            sidecar_restarts: 1,
            ..running_ready("sidecar-restarts", Some(now()), Some(now()))
        }
        .build(),
    }
}

#[test]
fn ranking_equalities() {
    let p = pods();
    let equal = [
        (&p.unscheduled, &p.unscheduled),
        (&p.scheduled_pending, &p.scheduled_pending),
        (&p.unknown_phase, &p.unknown_phase),
        (&p.running_not_ready, &p.running_not_ready),
        (&p.ready_now_created_then, &p.ready_now_created_then),
        (&p.ready_now, &p.ready_now),
        (&p.ready_then, &p.ready_then),
        (&p.ready_now_high_restarts, &p.ready_now_high_restarts),
        // Same log2 bucket of creation (2^44 ns ≈ 4.9 h .. 9.8 h) and equal (empty) UIDs.
        (&p.unscheduled_5h, &p.unscheduled_8h),
        // Same log2 bucket of ready time.
        (&p.ready_5h, &p.ready_8h),
    ];
    for (a, b) in equal {
        let (a, b) = ((a.clone(), 1), (b.clone(), 1));
        assert_eq!(
            cmp(&a, &b, true),
            Ordering::Equal,
            "{:?} vs {:?}",
            a.0.metadata.name,
            b.0.metadata.name
        );
        assert_eq!(cmp(&b, &a, true), Ordering::Equal);
    }
}

#[test]
fn ranking_inequalities() {
    let p = pods();
    // (lesser = deleted first, rank), (greater, rank), pod-deletion-cost gate
    type Ranked<'a> = (&'a Arc<Pod>, usize);
    let cases: Vec<(Ranked<'_>, Ranked<'_>, bool)> = vec![
        ((&p.unscheduled, 1), (&p.scheduled_pending, 2), true),
        ((&p.unscheduled, 2), (&p.scheduled_pending, 1), true),
        ((&p.scheduled_pending, 1), (&p.unknown_phase, 2), true),
        ((&p.unknown_phase, 1), (&p.running_not_ready, 2), true),
        ((&p.running_not_ready, 1), (&p.ready_no_transition, 1), true),
        ((&p.ready_no_transition, 1), (&p.ready_now, 1), true),
        ((&p.ready_now, 2), (&p.ready_no_transition, 1), true),
        ((&p.ready_now, 1), (&p.ready_then, 1), true),
        ((&p.ready_now, 2), (&p.ready_then, 1), true),
        ((&p.ready_now_high_restarts, 1), (&p.ready_now, 1), true),
        ((&p.ready_now, 2), (&p.ready_now_high_restarts, 1), true),
        ((&p.ready_now, 1), (&p.ready_now_created_then, 1), true),
        ((&p.ready_now_created_then, 2), (&p.ready_now, 1), true),
        ((&p.low_cost, 2), (&p.high_cost, 1), true),
        // Gate off: the cost is ignored and the rank decides.
        ((&p.high_cost, 2), (&p.low_cost, 1), false),
        ((&p.ready_2h, 1), (&p.ready_5h, 1), true),
        ((&p.sidecar_restarts, 1), (&p.no_sidecar_restarts, 1), true),
    ];
    for ((l, lr), (g, gr), cost) in cases {
        let (l, g) = ((l.clone(), lr), (g.clone(), gr));
        let names = (l.0.metadata.name.clone(), g.0.metadata.name.clone());
        assert_eq!(cmp(&l, &g, cost), Ordering::Less, "{names:?}");
        assert_eq!(cmp(&g, &l, cost), Ordering::Greater, "{names:?}");
    }
}

#[test]
fn same_bucket_ready_times_break_ties_by_uid() {
    // Spec scenario 11: 100 s vs 120 s ago share bucket 36 (2^36 ns ≈ 68.7 s .. 137 s).
    let a = P {
        name: "a",
        uid: "bbb",
        node: "n",
        phase: "Running",
        ready: true,
        ready_since: Some(ago(Duration::from_secs(100))),
        ..P::default()
    }
    .build();
    let b = P {
        name: "b",
        uid: "aaa",
        node: "n",
        phase: "Running",
        ready: true,
        ready_since: Some(ago(Duration::from_secs(120))),
        ..P::default()
    }
    .build();
    assert_eq!(
        cmp(&(b.clone(), 1), &(a.clone(), 1), true),
        Ordering::Less,
        "smaller UID first"
    );
    // 10 s vs 1 h ago: the more recently ready goes first.
    let recent = P {
        name: "r",
        uid: "zzz",
        node: "n",
        phase: "Running",
        ready: true,
        ready_since: Some(ago(Duration::from_secs(10))),
        ..P::default()
    }
    .build();
    let old = P {
        name: "o",
        uid: "aaa",
        node: "n",
        phase: "Running",
        ready: true,
        ready_since: Some(ago(HOUR)),
        ..P::default()
    }
    .build();
    assert_eq!(cmp(&(recent, 1), &(old, 1), true), Ordering::Less);
}

/// A burst-created ReplicaSet: ready and creation times repeat at the API's 1 s resolution
/// and share a few log buckets, restart counts differ. The ranking must be a total order
/// (Rust's sort panics otherwise, which stalled a 1000 → 500 scale-down in the benchmark).
#[test]
fn ranking_is_a_total_order_for_a_burst_created_replicaset() {
    let base = P {
        name: "x",
        uid: "x",
        node: "n",
        phase: "Running",
        ready: true,
        ..P::default()
    };
    let claimed: Vec<Arc<Pod>> = (0..1000u64)
        .map(|i| {
            let mut pod = P {
                ready_since: Some(ago(Duration::from_secs(30 + i % 40))),
                created: Some(ago(Duration::from_secs(60 + i % 25))),
                restarts: i32::try_from(i % 3).unwrap_or(0),
                ..base.clone()
            }
            .build();
            let p = Arc::make_mut(&mut pod);
            p.metadata.name = Some(format!("p-{i}"));
            p.metadata.uid = Some(format!("{:08x}", (i as u32).wrapping_mul(2_654_435_761)));
            pod
        })
        .collect();
    let (victims, sorted) = pods_to_delete(&claimed, &claimed, 500, now(), true);
    assert!(sorted);
    assert_eq!(victims.len(), 500);

    let sample: Vec<(Arc<Pod>, usize)> = claimed.iter().take(60).map(|p| (p.clone(), 1)).collect();
    for a in &sample {
        for b in &sample {
            assert_eq!(cmp(a, b, true), cmp(b, a, true).reverse(), "antisymmetric");
            for c in &sample {
                if cmp(a, b, true) != Ordering::Greater && cmp(b, c, true) != Ordering::Greater {
                    assert_ne!(
                        cmp(a, c, true),
                        Ordering::Greater,
                        "transitive: {:?} {:?} {:?}",
                        a.0.metadata.name,
                        b.0.metadata.name,
                        c.0.metadata.name
                    );
                }
            }
        }
    }
}

#[test]
fn deletion_cost_parsing() {
    let with = |c| {
        P {
            cost: Some(c),
            ..P::default()
        }
        .build()
    };
    assert_eq!(deletion_cost(&with("-50")), -50);
    assert_eq!(deletion_cost(&with("2147483647")), i32::MAX);
    assert_eq!(deletion_cost(&with("2147483648")), 0, "out of int32 range");
    assert_eq!(deletion_cost(&with("abc")), 0);
    assert_eq!(deletion_cost(&P::default().build()), 0);
}

#[test]
fn ranks_count_active_related_pods_per_node() {
    let on = |name, node, deleting| {
        P {
            name,
            node,
            phase: "Running",
            deleting,
            ..P::default()
        }
        .build()
    };
    let a1 = on("a1", "n1", false);
    let a2 = on("a2", "n2", false);
    let b1 = on("b1", "n1", false);
    let b2 = on("b2", "n1", false);
    let gone = on("gone", "n2", true);
    let unscheduled = on("u", "", false);
    let claimed = vec![a1.clone(), a2.clone(), unscheduled.clone()];
    let related = vec![a1, a2, b1, b2, gone, unscheduled];
    assert_eq!(ranks(&claimed, &related), vec![3, 1, 1]);
    assert_eq!(ranks(&claimed, &[]), vec![0, 0, 0]);
}

#[test]
fn pods_to_delete_sorts_only_when_some_survive() {
    let ready = P {
        name: "ready",
        uid: "1",
        node: "n",
        phase: "Running",
        ready: true,
        ready_since: Some(ago(HOUR)),
        ..P::default()
    }
    .build();
    let pending = P {
        name: "pending",
        uid: "2",
        node: "n",
        phase: "Pending",
        ..P::default()
    }
    .build();
    let unscheduled = P {
        name: "unscheduled",
        uid: "3",
        phase: "Pending",
        ..P::default()
    }
    .build();
    let claimed = vec![ready.clone(), pending.clone(), unscheduled.clone()];
    let names = |v: &[Arc<Pod>]| {
        v.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    let (victims, sorted) = pods_to_delete(&claimed, &claimed, 1, now(), true);
    assert!(sorted);
    assert_eq!(names(&victims), ["unscheduled"]);
    let (victims, sorted) = pods_to_delete(&claimed, &claimed, 2, now(), true);
    assert!(sorted);
    assert_eq!(names(&victims), ["unscheduled", "pending"]);
    let (victims, sorted) = pods_to_delete(&claimed, &claimed, 3, now(), true);
    assert!(!sorted, "all go: no ranking");
    assert_eq!(names(&victims), ["ready", "pending", "unscheduled"]);
}

fn snapshot<'a>(desired: i32, claimed: &'a [Arc<Pod>]) -> Snapshot<'a> {
    Snapshot {
        desired,
        claimed,
        related: &[],
        expectations_satisfied: true,
        owner_deleting: false,
    }
}

#[test]
fn plan_scales_up_capped_by_burst() {
    let cfg = PlanConfig::default();
    assert_eq!(plan(&snapshot(3, &[]), &cfg, now()), Plan::Create(3));
    assert_eq!(plan(&snapshot(600, &[]), &cfg, now()), Plan::Create(500));
    let one = vec![
        P {
            name: "a",
            ..P::default()
        }
        .build(),
    ];
    assert_eq!(plan(&snapshot(1, &one), &cfg, now()), Plan::Nothing);
    assert_eq!(plan(&snapshot(0, &[]), &cfg, now()), Plan::Nothing);
}

#[test]
fn plan_scales_down_capped_by_burst() {
    let cfg = PlanConfig {
        burst: 2,
        ..PlanConfig::default()
    };
    let pods: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| {
            P {
                name: n,
                ..P::default()
            }
            .build()
        })
        .collect();
    match plan(&snapshot(0, &pods), &cfg, now()) {
        Plan::Delete { victims, sorted } => assert_eq!((victims.len(), sorted), (2, true)),
        other => panic!("expected a delete, got {other:?}"),
    }
    match plan(&snapshot(3, &pods), &cfg, now()) {
        Plan::Delete { victims, .. } => assert_eq!(victims.len(), 1),
        other => panic!("expected a delete, got {other:?}"),
    }
}

/// What a plan amounts to, for tables.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Nothing,
    Create(usize),
    Delete(usize),
}

fn kind(p: &Plan) -> Kind {
    match p {
        Plan::Nothing => Kind::Nothing,
        Plan::Create(n) => Kind::Create(*n),
        Plan::Delete { victims, .. } => Kind::Delete(victims.len()),
    }
}

#[test]
fn guards_hold_back_creates_and_deletes() {
    // Upstream `syncReplicaSet` manages replicas only when `rsNeedsSync` (expectations met)
    // and the owner has no deletionTimestamp; the plan owns both guards.
    let pods: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| {
            P {
                name: n,
                ..P::default()
            }
            .build()
        })
        .collect();
    let cfg = PlanConfig::default();
    // (desired, claimed, expectations satisfied, owner deleting) -> plan
    let table = [
        (6, 4, true, false, Kind::Create(2)),
        (6, 4, false, false, Kind::Nothing),
        (6, 4, true, true, Kind::Nothing),
        (6, 4, false, true, Kind::Nothing),
        (1, 4, true, false, Kind::Delete(3)),
        (1, 4, false, false, Kind::Nothing),
        (1, 4, true, true, Kind::Nothing),
        (1, 4, false, true, Kind::Nothing),
        (4, 4, true, false, Kind::Nothing),
        (4, 4, false, true, Kind::Nothing),
        (0, 0, true, true, Kind::Nothing),
    ];
    for (desired, have, satisfied, deleting, want) in table {
        let snap = Snapshot {
            expectations_satisfied: satisfied,
            owner_deleting: deleting,
            ..snapshot(desired, &pods[..have])
        };
        assert_eq!(
            kind(&plan(&snap, &cfg, now())),
            want,
            "desired {desired}, claimed {have}, satisfied {satisfied}, deleting {deleting}"
        );
    }
}

#[test]
fn active_and_available() {
    let failed = P {
        phase: "Failed",
        ..P::default()
    }
    .build();
    let succeeded = P {
        phase: "Succeeded",
        ..P::default()
    }
    .build();
    let deleting = P {
        phase: "Running",
        deleting: true,
        ..P::default()
    }
    .build();
    let running = P {
        phase: "Running",
        ..P::default()
    }
    .build();
    assert!(!is_pod_active(&failed) && !is_pod_active(&succeeded) && !is_pod_active(&deleting));
    assert!(is_pod_active(&running));

    let ready_since = |d| {
        P {
            ready: true,
            ready_since: Some(ago(d)),
            ..P::default()
        }
        .build()
    };
    assert!(is_pod_available(&ready_since(Duration::ZERO), 0, now()));
    assert!(!is_pod_available(
        &ready_since(Duration::from_secs(5)),
        10,
        now()
    ));
    assert!(
        !is_pod_available(&ready_since(Duration::from_secs(10)), 10, now()),
        "strictly after"
    );
    assert!(is_pod_available(
        &ready_since(Duration::from_secs(11)),
        10,
        now()
    ));
    let no_time = P {
        ready: true,
        ..P::default()
    }
    .build();
    assert!(
        !is_pod_available(&no_time, 10, now()),
        "zero transition time never becomes available"
    );
    assert!(
        !is_pod_available(&P::default().build(), 0, now()),
        "not ready"
    );
}

#[test]
fn availability_requeue_targets_the_earliest_pod() {
    let ready = |d| {
        P {
            ready: true,
            ready_since: Some(ago(d)),
            ..P::default()
        }
        .build()
    };
    let pods = vec![
        ready(Duration::from_secs(2)),
        ready(Duration::from_secs(7)),
        ready(Duration::from_secs(60)),
    ];
    assert_eq!(
        availability_requeue(&pods, 10, now()),
        Some(Duration::from_secs(3))
    );
    assert_eq!(availability_requeue(&pods, 0, now()), None);
    let no_time = vec![
        P {
            ready: true,
            ..P::default()
        }
        .build(),
    ];
    assert_eq!(
        availability_requeue(&no_time, 10, now()),
        Some(Duration::from_secs(10))
    );
}

#[test]
fn age_ratio_uses_youngest_ready_and_guards_division() {
    let ready = |name, created| {
        P {
            name,
            ready: true,
            created: Some(created),
            ..P::default()
        }
        .build()
    };
    let young = ready("young", ago(Duration::from_secs(10)));
    let old = ready("old", ago(Duration::from_secs(45)));
    let not_ready = P {
        name: "nr",
        created: Some(ago(Duration::from_secs(100))),
        ..P::default()
    }
    .build();
    let claimed = vec![young.clone(), old.clone(), not_ready.clone()];
    // 45 s / 10 s truncates to 4; the not-ready victim is not reported.
    assert_eq!(
        deletion_age_ratios(&claimed, &[old, not_ready], now()),
        vec![4.0]
    );
    let brand_new = ready("new", now());
    assert!(
        deletion_age_ratios(
            std::slice::from_ref(&brand_new),
            std::slice::from_ref(&brand_new),
            now()
        )
        .is_empty()
    );
}
