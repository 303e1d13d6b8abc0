//! Each supported minor's registry and its answers to `--feature-gates`, on gates whose
//! existence, default or lock differs between minors (facts of the generated tables, which
//! `upstream.rs` checks against each minor's kube-controller-manager binary).

use super::{FeatureGates, GateSpec, NEWEST_MINOR, OLDEST_MINOR, REGISTRIES, Stage, registry};

fn parse_at(minor: u32, entries: &[&str]) -> Result<FeatureGates, String> {
    let entries: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
    FeatureGates::parse_at(minor, &entries).map_err(|e| e.join("\n"))
}

fn spec(minor: u32, name: &str) -> Option<&'static GateSpec> {
    registry(minor)?.gates.iter().find(|g| g.name == name)
}

#[test]
fn every_supported_minor_has_a_consistent_registry() {
    let minors: Vec<u32> = REGISTRIES.iter().map(|r| r.minor).collect();
    assert_eq!(minors, (OLDEST_MINOR..=NEWEST_MINOR).collect::<Vec<_>>());
    for (minor, count, deps) in [(34, 208, 0), (35, 218, 33), (36, 242, 49), (37, 254, 58)] {
        let r = registry(minor).expect("supported");
        assert!(
            r.version.starts_with(&format!("v1.{minor}.")),
            "{}",
            r.version
        );
        assert_eq!(
            (r.gates.len(), r.dependencies.len()),
            (count, deps),
            "v1.{minor}"
        );
        let names: Vec<&str> = r.gates.iter().map(|g| g.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted, "v1.{minor}: sorted, no duplicates");
        for (gate, needs) in r.dependencies {
            assert!(spec(minor, gate).is_some(), "v1.{minor}: {gate}");
            assert!(
                needs.iter().all(|d| spec(minor, d).is_some()),
                "v1.{minor}: {gate}"
            );
        }
    }
    assert!(registry(33).is_none() && registry(38).is_none());
}

/// `(gate, minor) -> (default, stage, locked)` or unknown, where minors differ.
#[test]
fn defaults_stages_and_locks_per_minor() {
    use Stage::*;
    type State = Option<(bool, Stage, bool)>;
    let cases: &[(&str, [State; 4])] = &[
        (
            "DeploymentReplicaSetTerminatingReplicas",
            [
                Some((false, Alpha, false)),
                Some((true, Beta, false)),
                Some((true, Beta, false)),
                Some((true, Beta, false)),
            ],
        ),
        (
            "MaxUnavailableStatefulSet",
            [
                Some((false, Alpha, false)),
                Some((false, Beta, false)),
                Some((false, Beta, false)),
                Some((true, Beta, false)),
            ],
        ),
        (
            // client-go's default is off at v1.34; kube-controller-manager turns it on.
            "WatchListClient",
            [
                Some((true, Beta, false)),
                Some((true, Beta, false)),
                Some((true, Beta, false)),
                Some((true, Beta, false)),
            ],
        ),
        (
            "ComponentFlagz",
            [
                Some((false, Alpha, false)),
                Some((false, Alpha, false)),
                Some((true, Beta, false)),
                Some((true, Beta, false)),
            ],
        ),
        (
            "MutableSchedulingDirectivesForSuspendedJobs",
            [
                None,
                Some((false, Alpha, false)),
                Some((true, Beta, false)),
                Some((true, Beta, false)),
            ],
        ),
        (
            "JobManagedBy",
            [
                Some((true, Beta, false)),
                Some((true, Ga, true)),
                Some((true, Ga, true)),
                Some((true, Ga, true)),
            ],
        ),
        (
            "JobSuccessPolicy",
            [
                Some((true, Ga, true)),
                Some((true, Ga, true)),
                Some((true, Ga, true)),
                None,
            ],
        ),
        (
            "StatefulSetAutoDeletePVC",
            [Some((true, Ga, true)), None, None, None],
        ),
        (
            "StaleControllerConsistencyJob",
            [
                None,
                None,
                Some((true, Beta, false)),
                Some((true, Beta, false)),
            ],
        ),
        (
            "StatefulSetRecreateStrategy",
            [None, None, None, Some((false, Alpha, false))],
        ),
    ];
    for (gate, per_minor) in cases {
        for (minor, want) in (34..=37).zip(per_minor) {
            let got = spec(minor, gate).map(|s| (s.default, s.stage, s.locked));
            assert_eq!(got, *want, "{gate} at v1.{minor}");
        }
    }
}

/// `--feature-gates` answered as each minor's kube-controller-manager answers it.
#[test]
fn each_minor_accepts_and_refuses_as_its_manager() {
    let unknown = |g: &str| format!("unrecognized feature gate: {g}");
    let locked = |g: &str, v: bool| {
        format!(
            "cannot set feature gate {g} to {v}, feature is locked to {}",
            !v
        )
    };
    // (entries, minor, Ok or the error's text)
    let cases: &[(&str, u32, Result<(), String>)] = &[
        // Unknown before v1.35.
        (
            "TaintTolerationComparisonOperators=true",
            34,
            Err(unknown("TaintTolerationComparisonOperators")),
        ),
        ("TaintTolerationComparisonOperators=true", 35, Ok(())),
        // Beta (settable) at v1.34, GA and locked from v1.35.
        ("JobManagedBy=true", 34, Ok(())),
        // ... where rkcm implements only the default.
        (
            "JobManagedBy=false",
            34,
            Err("feature gate JobManagedBy=false is not implemented by rkcm".into()),
        ),
        ("JobManagedBy=false", 35, Err(locked("JobManagedBy", false))),
        // GA and locked until v1.36, removed in v1.37.
        (
            "JobSuccessPolicy=false",
            36,
            Err(locked("JobSuccessPolicy", false)),
        ),
        ("JobSuccessPolicy=true", 36, Ok(())),
        (
            "JobSuccessPolicy=true",
            37,
            Err(unknown("JobSuccessPolicy")),
        ),
        ("StatefulSetAutoDeletePVC=true", 34, Ok(())),
        (
            "StatefulSetAutoDeletePVC=true",
            35,
            Err(unknown("StatefulSetAutoDeletePVC")),
        ),
        // The stale-cache guards and their dependency exist from v1.36.
        ("AtomicFIFO=false", 35, Err(unknown("AtomicFIFO"))),
        (
            "StaleControllerConsistencyJob=false",
            34,
            Err(unknown("StaleControllerConsistencyJob")),
        ),
        // rkcm's refusals apply at every minor: AllAlpha turns the CBOR clients on.
        (
            "AllAlpha=true",
            34,
            Err("ClientsAllowCBOR=true (set by AllAlpha=true) is not implemented".into()),
        ),
        (
            "AllAlpha=true,ClientsAllowCBOR=false,ClientsPreferCBOR=false",
            34,
            Ok(()),
        ),
        // v1.37 has more alpha gates rkcm refuses.
        (
            "AllAlpha=true,ClientsAllowCBOR=false,ClientsPreferCBOR=false",
            37,
            Err("StatefulSetRecreateStrategy=true (set by AllAlpha=true)".into()),
        ),
    ];
    for (entry, minor, want) in cases {
        let entries: Vec<&str> = entry.split(',').collect();
        let got = parse_at(*minor, &entries).map(|_| ());
        match (want, &got) {
            (Ok(()), Ok(())) => {}
            (Err(text), Err(err)) if err.contains(text.as_str()) => {}
            _ => panic!("{entry} at v1.{minor}: want {want:?}, got {got:?}"),
        }
    }
}

/// The behaviours behind gates follow the minor; the stale-cache guards stay on where the
/// minor lacks them; an unsupported minor reads as the newest.
#[test]
fn behaviour_follows_the_minor() {
    let at = |minor| parse_at(minor, &[]).expect("defaults");
    let v34 = at(34);
    assert_eq!(v34.minor(), 34);
    assert!(!v34.enabled("DeploymentReplicaSetTerminatingReplicas"));
    assert!(!v34.enabled("MaxUnavailableStatefulSet"));
    assert!(v34.enabled("WatchListClient"), "the manager's override");
    assert!(!v34.enabled("MutableSchedulingDirectivesForSuspendedJobs"));
    assert!(v34.enabled("StaleControllerConsistencyJob"), "kept");
    assert!(v34.enabled("AtomicFIFO"), "kept");
    assert!(!v34.enabled("StatefulSetRecreateStrategy"));
    assert!(at(35).enabled("DeploymentReplicaSetTerminatingReplicas"));
    assert!(!at(36).enabled("MaxUnavailableStatefulSet"));
    assert!(at(37).enabled("MaxUnavailableStatefulSet"));
    // The metric lists the minor's gates only.
    assert_eq!(v34.all().len(), 208);
    assert_eq!(parse_at(99, &[]).expect("newest").minor(), NEWEST_MINOR);
    // An explicit value of that minor wins.
    let on = parse_at(34, &["DeploymentReplicaSetTerminatingReplicas=true"]).expect("settable");
    assert!(on.enabled("DeploymentReplicaSetTerminatingReplicas"));
}

/// The command line, before the server's minor is known: refused only when no supported minor
/// accepts it, with the newest minor's errors; else the newest minor that accepts it.
#[test]
fn the_command_line_is_checked_against_every_minor() {
    let parse = |e: &[&str]| {
        FeatureGates::parse(&e.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .map_err(|e| e.join("\n"))
    };
    assert_eq!(parse(&[]).expect("defaults").minor(), 37);
    assert_eq!(
        parse(&["JobSuccessPolicy=true"])
            .expect("v1.36 knows it")
            .minor(),
        36
    );
    assert_eq!(
        parse(&["StatefulSetAutoDeletePVC=true"])
            .expect("v1.34 knows it")
            .minor(),
        34
    );
    let err = parse(&["NoSuchGate=true"]).expect_err("no minor knows it");
    assert!(
        err.ends_with("unrecognized feature gate: NoSuchGate"),
        "{err}"
    );
    // Each half is known to some minor, the pair to none.
    let err = parse(&[
        "StatefulSetAutoDeletePVC=true",
        "TaintTolerationComparisonOperators=true",
    ])
    .expect_err("no minor accepts both");
    assert!(
        err.ends_with("unrecognized feature gate: StatefulSetAutoDeletePVC"),
        "v1.37's: {err}"
    );
}
