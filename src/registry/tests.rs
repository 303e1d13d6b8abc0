use super::*;
use std::collections::HashSet;

/// Upstream's names, queue names, event components and defaults of every workload
/// controller, in one table (`pkg/controller/*`, `cmd/kube-controller-manager/app/options`).
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn controller_names_queues_and_defaults_are_upstream() {
    use rkcm_replicaset::ReplicaOwner;
    let got = [
        (
            rkcm_replicaset::NAME,
            <ReplicaSet as ReplicaOwner>::QUEUE_NAME,
            <ReplicaSet as ReplicaOwner>::EVENT_COMPONENT,
            rkcm_replicaset::Config::default().workers,
        ),
        (
            rkcm_replicaset::RC_NAME,
            <ReplicationController as ReplicaOwner>::QUEUE_NAME,
            <ReplicationController as ReplicaOwner>::EVENT_COMPONENT,
            rkcm_replicaset::Config::default().workers,
        ),
        (
            rkcm_deployment::NAME,
            rkcm_deployment::consts::QUEUE_NAME,
            rkcm_deployment::consts::EVENT_COMPONENT,
            rkcm_deployment::Config::default().workers,
        ),
        (
            rkcm_statefulset::NAME,
            rkcm_statefulset::consts::QUEUE_NAME,
            rkcm_statefulset::consts::EVENT_COMPONENT,
            rkcm_statefulset::Config::default().workers,
        ),
        (
            rkcm_daemonset::NAME,
            rkcm_daemonset::consts::QUEUE_NAME,
            rkcm_daemonset::consts::EVENT_COMPONENT,
            rkcm_daemonset::Config::default().workers,
        ),
        (
            rkcm_job::NAME,
            rkcm_job::consts::QUEUE_NAME,
            rkcm_job::consts::EVENT_COMPONENT,
            rkcm_job::Config::default().workers,
        ),
        (
            rkcm_cronjob::NAME,
            rkcm_cronjob::consts::QUEUE_NAME,
            rkcm_cronjob::consts::EVENT_COMPONENT,
            rkcm_cronjob::Config::default().workers,
        ),
        (
            rkcm_ttlafterfinished::NAME,
            rkcm_ttlafterfinished::consts::QUEUE_NAME,
            "",
            rkcm_ttlafterfinished::Config::default().workers,
        ),
    ];
    let want = [
        (
            "replicaset-controller",
            "replicaset",
            "replicaset-controller",
            5,
        ),
        (
            "replicationcontroller-controller",
            "replicationmanager",
            "replication-controller",
            5,
        ),
        (
            "deployment-controller",
            "deployment",
            "deployment-controller",
            5,
        ),
        (
            "statefulset-controller",
            "statefulset",
            "statefulset-controller",
            5,
        ),
        (
            "daemonset-controller",
            "daemonset",
            "daemonset-controller",
            2,
        ),
        ("job-controller", "job", "job-controller", 5),
        ("cronjob-controller", "cronjob", "cronjob-controller", 5),
        ("ttl-after-finished-controller", "ttl_jobs_to_delete", "", 5),
    ];
    assert_eq!(got, want);

    // Second queues, retry limits, timing and the gates each controller reads.
    assert_eq!(
        rkcm_daemonset::consts::NODE_QUEUE_NAME,
        "daemonset-node-updates"
    );
    assert_eq!(rkcm_job::consts::ORPHAN_QUEUE_NAME, "job_orphan_pod");
    assert_eq!(rkcm_deployment::consts::MAX_RETRIES, 15);
    // Upstream pads a CronJob's requeue by 100 ms; rkcm by 5 (see the constant).
    assert_eq!(
        rkcm_cronjob::consts::NEXT_SCHEDULE_DELTA,
        jiff::SignedDuration::from_millis(5)
    );
    let rs = rkcm_replicaset::Config::default();
    assert_eq!(rs.burst_replicas, 500);
    assert!(rs.terminating_replicas && rs.pod_deletion_cost && rs.stale_cache_guard);
    let ds = rkcm_daemonset::Config::default();
    assert_eq!(ds.burst_replicas, 250);
    assert!(ds.stale_cache_guard);
    assert!(rkcm_deployment::Config::default().terminating_replicas);
    let sts = rkcm_statefulset::Config::default();
    assert!(sts.max_unavailable && sts.stale_cache_guard);
}

fn cli(args: &[&str]) -> Cli {
    match crate::cli::parse::parse(std::iter::once("rkcm").chain(args.iter().copied())) {
        Ok(crate::cli::Invocation::Run(cli)) => *cli,
        Ok(_) => panic!("{args:?}: not a run"),
        Err(e) => panic!("{args:?}: {e}"),
    }
}

/// Every gate a controller honours reaches its Config with both settings, and rkcm's own
/// DaemonSet flag does too; the defaults are upstream's.
#[test]
fn gates_and_own_flags_reach_the_controllers_in_both_settings() {
    for on in [true, false] {
        let gates = |names: &[&str]| {
            let list: Vec<String> = names.iter().map(|n| format!("{n}={on}")).collect();
            format!("--feature-gates={}", list.join(","))
        };
        let c = cli(&[
            &gates(&[
                "TaintTolerationComparisonOperators",
                "StaleControllerConsistencyDaemonSet",
                "StaleControllerConsistencyJob",
                "StaleControllerConsistencyReplicaSet",
                "StaleControllerConsistencyStatefulSet",
                // Keep the guards' upstream dependency satisfied when they are on, and
                // the HPA one (not rkcm's) off with the others.
                "StaleControllerConsistencyHPA",
                "MutableSchedulingDirectivesForSuspendedJobs",
                "MaxUnavailableStatefulSet",
                "StatefulSetSemanticRevisionComparison",
                "DeploymentReplicaSetTerminatingReplicas",
                "PodDeletionCost",
            ]),
            &format!("--rkcm-daemonset-rollout-skip-not-ready-nodes={on}"),
            &format!("--rkcm-deployment-rollback-on-progress-deadline={on}"),
        ]);
        let ds = daemonset_config(&c);
        assert_eq!(
            (
                ds.taint_comparison_operators,
                ds.stale_cache_guard,
                ds.rollout_skips_not_ready_nodes
            ),
            (on, on, on)
        );
        let job = job_config(&c);
        assert_eq!(
            (job.stale_cache_guard, job.clear_start_time_on_suspend),
            (on, on)
        );
        let sts = statefulset_config(&c);
        assert_eq!(
            (
                sts.max_unavailable,
                sts.stale_cache_guard,
                sts.semantic_revision_comparison
            ),
            (on, on, on)
        );
        let d = deployment_config(&c);
        assert_eq!(
            (d.terminating_replicas, d.rollback_on_progress_deadline),
            (on, on)
        );
        let rs = replica_config(5, &c);
        assert_eq!(
            (
                rs.terminating_replicas,
                rs.pod_deletion_cost,
                rs.stale_cache_guard
            ),
            (on, on, on)
        );
    }
    // No flags: upstream's v1.37 defaults.
    let c = cli(&[]);
    let ds = daemonset_config(&c);
    assert!(ds.stale_cache_guard && !ds.taint_comparison_operators);
    assert!(
        !ds.rollout_skips_not_ready_nodes,
        "rkcm's own opt-in is off"
    );
    assert_eq!(ds, rkcm_daemonset::Config::default());
    assert_eq!(job_config(&c), rkcm_job::Config::default());
    assert_eq!(statefulset_config(&c), rkcm_statefulset::Config::default());
    assert_eq!(deployment_config(&c), rkcm_deployment::Config::default());
    assert!(
        !deployment_config(&c).rollback_on_progress_deadline,
        "rkcm's own opt-in is off"
    );
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn enabled_names(entries: &[&str]) -> Vec<&'static str> {
    let resolved = resolve_aliases(&strings(entries)).expect("known names");
    enabled(&resolved).into_iter().map(|d| d.name).collect()
}

#[test]
fn names_and_aliases_are_unique() {
    let mut seen = HashSet::new();
    for def in CONTROLLERS {
        assert!(seen.insert(def.name), "duplicate {}", def.name);
        for a in def.aliases {
            assert!(seen.insert(a), "duplicate alias {a}");
        }
    }
    assert_eq!(
        CONTROLLERS.len(),
        50,
        "upstream v1.34 list has 50 controllers"
    );
}

#[test]
fn spec_list_is_recognised() {
    for name in [
        "deployment-controller",
        "replicaset-controller",
        "replicationcontroller-controller",
        "statefulset-controller",
        "daemonset-controller",
        "job-controller",
        "cronjob-controller",
        "ttl-after-finished-controller",
        "garbage-collector-controller",
        "pod-garbage-collector-controller",
    ] {
        assert_eq!(lookup(name).map(|d| d.name), Some(name));
    }
    for (alias, canonical) in [
        ("deployment", "deployment-controller"),
        ("replicaset", "replicaset-controller"),
        ("replicationcontroller", "replicationcontroller-controller"),
        ("statefulset", "statefulset-controller"),
        ("daemonset", "daemonset-controller"),
        ("job", "job-controller"),
        ("cronjob", "cronjob-controller"),
        ("ttl-after-finished", "ttl-after-finished-controller"),
        ("garbagecollector", "garbage-collector-controller"),
        ("podgc", "pod-garbage-collector-controller"),
        ("bootstrapsigner", "bootstrap-signer-controller"),
        ("tokencleaner", "token-cleaner-controller"),
        ("csrsigning", "certificatesigningrequest-signing-controller"),
        ("attachdetach", "persistentvolume-attach-detach-controller"),
        ("endpoint", "endpoints-controller"),
        ("nodelifecycle", "node-lifecycle-controller"),
        ("ttl", "ttl-controller"),
    ] {
        assert_eq!(lookup(alias).map(|d| d.name), Some(canonical), "{alias}");
    }
}

#[test]
fn star_enables_on_by_default_only() {
    let names = enabled_names(&["*"]);
    assert!(names.contains(&"pod-garbage-collector-controller"));
    assert!(names.contains(&"job-controller"));
    for off in [
        "bootstrap-signer-controller",
        "token-cleaner-controller",
        "selinux-warning-controller",
    ] {
        assert!(!names.contains(&off), "{off} is off by default");
    }
    assert_eq!(names.len(), CONTROLLERS.len() - 3);
}

#[test]
fn minus_disables_one() {
    let names = enabled_names(&["*", "-job-controller"]);
    assert!(!names.contains(&"job-controller"));
    assert!(names.contains(&"replicaset-controller"));
    // Alias with a leading `-`.
    let names = enabled_names(&["*", "-podgc"]);
    assert!(!names.contains(&"pod-garbage-collector-controller"));
}

/// Scenario 5: named entries only, via aliases.
#[test]
fn only_named_via_aliases() {
    assert_eq!(
        enabled_names(&["deployment", "replicaset"]),
        vec!["deployment-controller", "replicaset-controller"]
    );
    assert_eq!(
        resolve_aliases(&strings(&["deployment", "-job", "*"])).expect("ok"),
        strings(&["deployment-controller", "-job-controller", "*"])
    );
    // Naming an off-by-default controller enables it even without `*`.
    assert_eq!(
        enabled_names(&["tokencleaner"]),
        vec!["token-cleaner-controller"]
    );
    assert!(enabled_names(&[]).is_empty());
}

/// Scenario 6: the first decisive entry wins.
#[test]
fn first_match_wins() {
    let names = enabled_names(&["-replicaset-controller", "replicaset-controller", "*"]);
    assert!(!names.contains(&"replicaset-controller"));
    assert!(names.contains(&"deployment-controller"));
    let names = enabled_names(&["replicaset", "-replicaset"]);
    assert_eq!(names, vec!["replicaset-controller"]);
    // `*` before the negation does not decide: the negation still applies.
    let names = enabled_names(&["*", "-replicaset", "replicaset"]);
    assert!(!names.contains(&"replicaset-controller"));
}

/// Scenario 7: unknown names, with or without `-`, are errors naming the bare name.
#[test]
fn unknown_names_are_errors() {
    assert_eq!(
        resolve_aliases(&strings(&["*", "foo"])),
        Err(vec![UnknownController("foo".into())])
    );
    let err = resolve_aliases(&strings(&["*", "-foo", "bar"])).expect_err("unknown");
    assert_eq!(
        err.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![
            r#""foo" is not in the list of known controllers"#,
            r#""bar" is not in the list of known controllers"#
        ]
    );
}

#[test]
fn implemented_controllers() {
    let implemented: Vec<&str> = CONTROLLERS
        .iter()
        .filter(|d| d.implementation.is_some())
        .map(|d| d.name)
        .collect();
    assert_eq!(
        implemented,
        vec![
            "cronjob-controller",
            "daemonset-controller",
            "deployment-controller",
            "job-controller",
            "pod-garbage-collector-controller",
            "replicaset-controller",
            "replicationcontroller-controller",
            "statefulset-controller",
            "ttl-after-finished-controller"
        ]
    );
}
