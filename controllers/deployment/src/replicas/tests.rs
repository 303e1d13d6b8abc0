//! Table tests of the replica arithmetic. Mirrors upstream `TestResolveFenceposts`,
//! `TestMaxUnavailable`, `TestNewRSNewReplicas`, `TestFindActiveOrLatest`,
//! `TestGetReplicaSetFraction`-style cases, and the numbers of the acceptance scenarios.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

/// `(maxSurge, maxUnavailable, desired, expected (surge, unavailable))`.
type FencepostCase = (IntOrString, IntOrString, i32, Result<(i32, i32), ()>);
use crate::model::tests::{
    R, annotated, dep, dep25, int, pct, recreate, rs_new, rs_old, with_status_replicas,
};

#[test]
fn scaled_values_round_like_upstream() {
    let cases: &[(IntOrString, i32, bool, Result<i32, ()>)] = &[
        (int(3), 10, true, Ok(3)),
        (pct("25%"), 10, true, Ok(3)),
        (pct("25%"), 10, false, Ok(2)),
        (pct("30%"), 5, true, Ok(2)),
        (pct("30%"), 5, false, Ok(1)),
        (pct("25%"), 1, false, Ok(0)),
        (pct("100%"), 7, false, Ok(7)),
        (pct("+10%"), 10, true, Ok(1)),
        (pct("0%"), 0, true, Ok(0)),
        (pct("5"), 10, true, Err(())),
        (pct("oops%"), 10, true, Err(())),
        (pct("oops"), 10, true, Err(())),
    ];
    for (value, total, up, want) in cases {
        let got = scaled_value(value, *total, *up).map_err(|_| ());
        assert_eq!(&got, want, "{value:?} of {total} (round up {up})");
    }
}

#[test]
fn fenceposts() {
    let cases: &[FencepostCase] = &[
        // Upstream TestResolveFenceposts.
        (pct("0%"), pct("0%"), 0, Ok((0, 1))),
        (pct("39%"), pct("39%"), 10, Ok((4, 3))),
        (pct("oops"), pct("39%"), 10, Err(())),
        (pct("55%"), pct("urg"), 10, Err(())),
        (pct("5"), pct("39%"), 10, Err(())),
        // Both literally 0 (rejected by validation, still resolved): unavailable 1.
        (int(0), int(0), 3, Ok((0, 1))),
        // spec §9: 10 at 25%/25% → surge 3, unavailable 2.
        (pct("25%"), pct("25%"), 10, Ok((3, 2))),
        // spec §9: 5 at 30%/30% → surge 2, unavailable 1.
        (pct("30%"), pct("30%"), 5, Ok((2, 1))),
        // spec §9: maxSurge 0 + 25% of 1 both round to zero → unavailable 1.
        (int(0), pct("25%"), 1, Ok((0, 1))),
    ];
    for (surge, unavailable, desired, want) in cases {
        let got = resolve_fenceposts(surge, unavailable, *desired).map_err(|_| ());
        assert_eq!(&got, want, "{surge:?}/{unavailable:?} of {desired}");
    }
}

#[test]
fn max_surge_and_unavailable() {
    // (deployment, maxSurge, maxUnavailable)
    let cases = [
        (dep25(10), 3, 2),
        (dep(5, pct("30%"), pct("30%")), 2, 1),
        (dep(1, int(0), pct("25%")), 0, 1),
        // Unavailable is capped at the desired replicas.
        (dep(3, int(1), int(5)), 1, 3),
        // Zero replicas: nothing may be unavailable.
        (dep(0, int(1), int(1)), 1, 0),
        (dep(0, pct("0%"), pct("0%")), 0, 0),
        // Recreate has neither.
        (recreate(10), 0, 0),
        // Unusable values count as 0.
        (dep(10, pct("x"), pct("25%")), 0, 0),
    ];
    for (d, surge, unavailable) in cases {
        assert_eq!(
            (max_surge(&d), max_unavailable(&d)),
            (surge, unavailable),
            "{:?}",
            d.spec.strategy
        );
    }
    // spec §9: 30%/30% of 5 → max-replicas 7, min available 4.
    let d = dep(5, pct("30%"), pct("30%"));
    assert_eq!(model::desired(&d) + max_surge(&d), 7);
    assert_eq!(model::desired(&d) - max_unavailable(&d), 4);
}

#[test]
fn new_rs_new_replicas_cases() {
    let old = rs_old;
    let new = rs_new;
    // (deployment, old size, new size, want)
    let cases = [
        // 10 at 25%: room for 3 more while old still has 10.
        (dep25(10), 10, 0, 3),
        (dep25(10), 8, 3, 5),
        // At the ceiling: stays.
        (dep25(10), 8, 5, 5),
        // Never beyond desired.
        (dep25(10), 0, 9, 10),
        // maxSurge 0: the new RS starts at 0.
        (dep(3, int(0), int(1)), 3, 0, 0),
        (dep(3, int(0), int(1)), 2, 0, 1),
        // Recreate: full size at once.
        (recreate(4), 0, 0, 4),
    ];
    for (d, o, n, want) in cases {
        let all = vec![old(o), new(n)];
        assert_eq!(
            new_rs_new_replicas(&d, &all, n),
            Ok(want),
            "old {o} new {n} of {}",
            model::desired(&d)
        );
    }
    let mut bad = dep25(3);
    if let Some(s) = bad.spec.strategy.as_mut() {
        s.type_ = Some("Canary".into());
    }
    assert!(new_rs_new_replicas(&bad, &[], 0).is_err());
    let bad_surge = dep(3, pct("x"), int(1));
    assert!(new_rs_new_replicas(&bad_surge, &[], 0).is_err());
}

#[test]
fn active_or_latest() {
    let rs = |name, replicas, age| {
        R {
            name,
            replicas,
            age,
            ..R::default()
        }
        .build()
    };
    let pick = |new: Option<&Rs>, old: &[Rs]| {
        find_active_or_latest(new, old).map(|rs| model::rs_name(&rs).to_owned())
    };
    assert_eq!(pick(None, &[]), None);
    // One active among old and new.
    assert_eq!(
        pick(Some(&rs("new", 0, 1)), &[rs("a", 3, 10), rs("b", 0, 5)]),
        Some("a".into())
    );
    // None active: the new one, else the newest old one.
    assert_eq!(
        pick(Some(&rs("new", 0, 1)), &[rs("a", 0, 10)]),
        Some("new".into())
    );
    assert_eq!(
        pick(None, &[rs("a", 0, 10), rs("b", 0, 5)]),
        Some("b".into())
    );
    // Two active: none.
    assert_eq!(pick(Some(&rs("new", 1, 1)), &[rs("a", 3, 10)]), None);
}

#[test]
fn saturation() {
    let d = dep25(3);
    let rs = |replicas, available, desired: &'static str| {
        R {
            name: "new",
            replicas,
            available,
            annotations: if desired.is_empty() {
                &[]
            } else if desired == "3" {
                &[("deployment.kubernetes.io/desired-replicas", "3")]
            } else {
                &[("deployment.kubernetes.io/desired-replicas", "2")]
            },
            ..R::default()
        }
        .build()
    };
    assert!(is_saturated(&d, Some(&rs(3, 3, "3"))));
    assert!(!is_saturated(&d, Some(&rs(3, 2, "3"))), "not all available");
    assert!(!is_saturated(&d, Some(&rs(3, 3, "2"))), "sized for 2");
    assert!(!is_saturated(&d, Some(&rs(3, 3, ""))), "no annotation");
    assert!(!is_saturated(&d, None));
}

#[test]
fn replica_annotations() {
    let rs = R {
        name: "a",
        annotations: &[
            ("deployment.kubernetes.io/desired-replicas", "10"),
            ("deployment.kubernetes.io/max-replicas", "13"),
        ],
        ..R::default()
    }
    .rs();
    assert!(!replicas_annotations_need_update(&rs, 10, 13));
    assert!(replicas_annotations_need_update(&rs, 20, 25));
    assert!(replicas_annotations_need_update(&R::default().rs(), 1, 2));
    assert_eq!(desired_annotation(&rs), Some(10));
    assert_eq!(max_replicas_annotation(&rs), Some(13));
    let mut meta = rs.metadata.clone();
    assert!(!set_replicas_annotations(&mut meta, 10, 13));
    assert!(set_replicas_annotations(&mut meta, 20, 25));
    let mut probe = R::default().rs();
    probe.metadata = meta;
    assert_eq!(
        (desired_annotation(&probe), max_replicas_annotation(&probe)),
        (Some(20), Some(25))
    );
    // Upstream parses these with ParseUint: no sign, no negatives, int32 only.
    for bad in ["-1", "+3", "x", "", "2147483648"] {
        let mut rs = R::default().rs();
        rs.metadata.annotations = Some(
            [(
                "deployment.kubernetes.io/desired-replicas".to_owned(),
                bad.to_owned(),
            )]
            .into(),
        );
        assert_eq!(desired_annotation(&rs), None, "{bad:?}");
    }
}

fn sized(name: &'static str, replicas: i32, max: &'static str) -> Rs {
    let annotations: &'static [(&'static str, &'static str)] = match max {
        "13" => &[
            ("deployment.kubernetes.io/desired-replicas", "10"),
            ("deployment.kubernetes.io/max-replicas", "13"),
        ],
        "0" => &[("deployment.kubernetes.io/max-replicas", "0")],
        _ => &[],
    };
    annotated(name, replicas, annotations)
}

#[test]
fn fractions() {
    // 10 → 20 at 25%: max 13 → 25.
    let up = dep25(20);
    assert_eq!(replica_set_fraction(&sized("old", 8, "13"), &up, 13), 7);
    assert_eq!(replica_set_fraction(&sized("new", 5, "13"), &up, 13), 5);
    // 10 → 5 at 25%: max 13 → 7.
    let down = dep25(5);
    assert_eq!(replica_set_fraction(&sized("old", 8, "13"), &down, 13), -4);
    assert_eq!(replica_set_fraction(&sized("new", 5, "13"), &down, 13), -2);
    // To zero: everything goes.
    assert_eq!(
        replica_set_fraction(&sized("old", 8, "13"), &dep25(0), 13),
        -8
    );
    // Without (or with a zero) annotation the Deployment's observed size is the base.
    assert_eq!(
        replica_set_fraction(&sized("old", 4, ""), &up, 8),
        4 * 25 / 8 + 1 - 4
    );
    assert_eq!(replica_set_fraction(&sized("old", 4, "0"), &up, 0), 0);
    // Half rounds away from zero: 1 × 3 / 2 = 1.5 → 2.
    let d = dep(2, int(1), int(0));
    let rs = R {
        name: "a",
        replicas: 1,
        annotations: &[("deployment.kubernetes.io/max-replicas", "2")],
        ..R::default()
    }
    .rs();
    assert_eq!(replica_set_fraction(&rs, &d, 0), 1);
}

#[test]
fn proportions_never_overshoot() {
    let up = with_status_replicas(dep25(20), 13);
    let old = sized("old", 8, "13");
    assert_eq!(replica_set_proportion(&old, &up, 13, 12, 0), 7);
    assert_eq!(
        replica_set_proportion(&old, &up, 13, 12, 10),
        2,
        "only 2 left"
    );
    assert_eq!(
        replica_set_proportion(&old, &up, 13, 12, 12),
        0,
        "all added"
    );
    assert_eq!(replica_set_proportion(&old, &up, 13, 0, 0), 0);
    let empty = sized("empty", 0, "13");
    assert_eq!(replica_set_proportion(&empty, &up, 13, 12, 0), 0);
    let down = dep25(5);
    assert_eq!(replica_set_proportion(&old, &down, 13, -6, 0), -4);
    assert_eq!(replica_set_proportion(&old, &down, 13, -6, -5), -1);
}
