//! The one table of controllers: every upstream kube-controller-manager controller name and
//! legacy alias (so `--controllers` written for upstream validates unchanged), which of them
//! are off by default, and — for those rkcm implements — how to start them.
//!
//! Mirrors upstream `cmd/kube-controller-manager/names/controller_names.go` (canonical names,
//! `KCMControllerAliases`) and `IsControllerEnabled` in k8s.io/controller-manager
//! `app/helper.go`. This is the only file that knows every controller
//! crate.

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::ReplicationController;
use rkcm_runtime::ControllerContext;
use rkcm_runtime::informer::InformerFactory;

use crate::cli::Cli;

/// What a running controller returns when it stops.
pub type ControllerError = Box<dyn std::error::Error + Send + Sync>;
/// A running controller: resolves when it has stopped (after `ctx.shutdown`, or on error).
pub type ControllerFuture = Pin<Box<dyn Future<Output = Result<(), ControllerError>> + Send>>;

pub use rkcm_runtime::controller::SyncProbe;

/// How rkcm runs a controller it implements.
pub struct Implementation {
    /// Requests the informers the controller reads (before the factory starts, so one
    /// start covers them) and returns probes for readiness and progress logs.
    pub informers: fn(&InformerFactory) -> Vec<SyncProbe>,
    /// Runs the controller with its own context until shutdown.
    pub start: fn(ControllerContext, &Cli) -> ControllerFuture,
}

/// One upstream controller.
pub struct ControllerDef {
    /// Canonical name (`<thing>-controller`): `--controllers`, logs, health check and
    /// `running_managed_controllers{name}`.
    pub name: &'static str,
    /// Legacy short names (pre-1.29), rewritten to `name`.
    pub aliases: &'static [&'static str],
    /// Not started by `*` (upstream `ControllersDisabledByDefault`).
    pub disabled_by_default: bool,
    /// `None`: recognised so `--controllers` validates, but not run by rkcm.
    pub implementation: Option<Implementation>,
}

const fn known(name: &'static str, aliases: &'static [&'static str]) -> ControllerDef {
    ControllerDef {
        name,
        aliases,
        disabled_by_default: false,
        implementation: None,
    }
}

const fn off_by_default(name: &'static str, aliases: &'static [&'static str]) -> ControllerDef {
    ControllerDef {
        name,
        aliases,
        disabled_by_default: true,
        implementation: None,
    }
}

/// Every controller upstream knows (v1.34+ help text), alphabetical.
pub static CONTROLLERS: &[ControllerDef] = &[
    off_by_default("bootstrap-signer-controller", &["bootstrapsigner"]),
    known(
        "certificatesigningrequest-approving-controller",
        &["csrapproving"],
    ),
    known(
        "certificatesigningrequest-cleaner-controller",
        &["csrcleaner"],
    ),
    known(
        "certificatesigningrequest-signing-controller",
        &["csrsigning"],
    ),
    known("cloud-node-lifecycle-controller", &["cloud-node-lifecycle"]),
    known(
        "clusterrole-aggregation-controller",
        &["clusterrole-aggregation"],
    ),
    ControllerDef {
        name: rkcm_cronjob::NAME,
        aliases: &["cronjob"],
        disabled_by_default: false,
        implementation: Some(Implementation {
            informers: rkcm_cronjob::informers,
            start: |ctx, cli| {
                let cfg = rkcm_cronjob::Config {
                    workers: workers(cli.cronjob.concurrent_cron_job_syncs),
                    defer_status_writes: cli.rkcm.rkcm_cronjob_defer_status_writes,
                    ..rkcm_cronjob::Config::default()
                };
                boxed(rkcm_cronjob::start(ctx, cfg))
            },
        }),
    },
    ControllerDef {
        name: rkcm_daemonset::NAME,
        aliases: &["daemonset"],
        disabled_by_default: false,
        implementation: Some(Implementation {
            informers: rkcm_daemonset::informers,
            start: |ctx, cli| {
                let cfg = daemonset_config(cli);
                boxed(rkcm_daemonset::start(ctx, cfg))
            },
        }),
    },
    ControllerDef {
        name: rkcm_deployment::NAME,
        aliases: &["deployment"],
        disabled_by_default: false,
        implementation: Some(Implementation {
            informers: rkcm_deployment::informers,
            start: |ctx, cli| {
                let cfg = deployment_config(cli);
                boxed(rkcm_deployment::start(ctx, cfg))
            },
        }),
    },
    known("device-taint-eviction-controller", &[]),
    known("disruption-controller", &["disruption"]),
    known("endpoints-controller", &["endpoint"]),
    known("endpointslice-controller", &["endpointslice"]),
    known(
        "endpointslice-mirroring-controller",
        &["endpointslicemirroring"],
    ),
    known("ephemeral-volume-controller", &["ephemeral-volume"]),
    known("garbage-collector-controller", &["garbagecollector"]),
    known(
        "horizontal-pod-autoscaler-controller",
        &["horizontalpodautoscaling"],
    ),
    ControllerDef {
        name: rkcm_job::NAME,
        aliases: &["job"],
        disabled_by_default: false,
        implementation: Some(Implementation {
            informers: rkcm_job::informers,
            start: |ctx, cli| {
                let cfg = job_config(cli);
                boxed(rkcm_job::start(ctx, cfg))
            },
        }),
    },
    known(
        "kube-apiserver-serving-clustertrustbundle-publisher-controller",
        &[],
    ),
    known(
        "legacy-serviceaccount-token-cleaner-controller",
        &["legacy-service-account-token-cleaner"],
    ),
    known("namespace-controller", &["namespace"]),
    known("node-ipam-controller", &["nodeipam"]),
    known("node-lifecycle-controller", &["nodelifecycle"]),
    known("node-route-controller", &["route"]),
    known(
        "persistentvolume-attach-detach-controller",
        &["attachdetach"],
    ),
    known(
        "persistentvolume-binder-controller",
        &["persistentvolume-binder"],
    ),
    known(
        "persistentvolume-expander-controller",
        &["persistentvolume-expander"],
    ),
    known("persistentvolume-protection-controller", &["pv-protection"]),
    known(
        "persistentvolumeclaim-protection-controller",
        &["pvc-protection"],
    ),
    ControllerDef {
        name: rkcm_podgc::NAME,
        aliases: &["podgc"],
        disabled_by_default: false,
        implementation: Some(Implementation {
            informers: rkcm_podgc::informers,
            start: |ctx, cli| boxed(rkcm_podgc::start(ctx, rkcm_podgc::Config::from(&cli.podgc))),
        }),
    },
    known("podcertificaterequest-cleaner-controller", &[]),
    ControllerDef {
        name: rkcm_replicaset::NAME,
        aliases: &["replicaset"],
        disabled_by_default: false,
        implementation: Some(Implementation {
            informers: rkcm_replicaset::informers::<ReplicaSet>,
            start: |ctx, cli| {
                let cfg = replica_config(cli.replicaset.concurrent_replicaset_syncs, cli);
                boxed(rkcm_replicaset::start_replicaset(ctx, cfg))
            },
        }),
    },
    ControllerDef {
        name: rkcm_replicaset::RC_NAME,
        aliases: &["replicationcontroller"],
        disabled_by_default: false,
        implementation: Some(Implementation {
            informers: rkcm_replicaset::informers::<ReplicationController>,
            start: |ctx, cli| {
                let cfg = replica_config(cli.replicationcontroller.concurrent_rc_syncs, cli);
                boxed(rkcm_replicaset::start_replication_controller(ctx, cfg))
            },
        }),
    },
    known("resourceclaim-controller", &["resource-claim-controller"]),
    known("resourcequota-controller", &["resourcequota"]),
    known(
        "root-ca-certificate-publisher-controller",
        &["root-ca-cert-publisher"],
    ),
    off_by_default("selinux-warning-controller", &[]),
    known("service-cidr-controller", &[]),
    known("service-lb-controller", &["service"]),
    known("serviceaccount-controller", &["serviceaccount"]),
    known("serviceaccount-token-controller", &["serviceaccount-token"]),
    ControllerDef {
        name: rkcm_statefulset::NAME,
        aliases: &["statefulset"],
        disabled_by_default: false,
        implementation: Some(Implementation {
            informers: rkcm_statefulset::informers,
            start: |ctx, cli| {
                let cfg = statefulset_config(cli);
                boxed(rkcm_statefulset::start(ctx, cfg))
            },
        }),
    },
    known("storage-version-migrator-controller", &[]),
    known(
        "storageversion-garbage-collector-controller",
        &["storage-version-gc"],
    ),
    known("taint-eviction-controller", &[]),
    off_by_default("token-cleaner-controller", &["tokencleaner"]),
    ControllerDef {
        name: rkcm_ttlafterfinished::NAME,
        aliases: &["ttl-after-finished"],
        disabled_by_default: false,
        implementation: Some(Implementation {
            informers: rkcm_ttlafterfinished::informers,
            start: |ctx, cli| {
                // As upstream, the flag value is taken as is (the componentconfig default of
                // 5 applies only when the flag is absent).
                let cfg = rkcm_ttlafterfinished::Config {
                    workers: workers(cli.ttl_after_finished.concurrent_ttl_after_finished_syncs),
                };
                boxed(rkcm_ttlafterfinished::start(ctx, cfg))
            },
        }),
    },
    known("ttl-controller", &["ttl"]),
    known("validatingadmissionpolicy-status-controller", &[]),
    known("volumeattributesclass-protection-controller", &[]),
];
// To wire another controller crate, replace its `known(...)` line with a `ControllerDef`
// carrying an `Implementation` (the crate's `informers` and a `start` closure building its
// `Config` from the flags), like PodGC's above. Nothing else in this file changes.

/// A controller's `start` future as the process runs it.
fn boxed<E>(run: impl Future<Output = Result<(), E>> + Send + 'static) -> ControllerFuture
where
    E: std::error::Error + Send + Sync + 'static,
{
    Box::pin(async move { run.await.map_err(ControllerError::from) })
}

/// A `--concurrent-*-syncs` value as a worker count (negative: none).
fn workers(flag: i32) -> usize {
    usize::try_from(flag).unwrap_or(0)
}

/// The DaemonSet configuration from its flags, `--feature-gates` and rkcm's own flag.
fn daemonset_config(cli: &Cli) -> rkcm_daemonset::Config {
    rkcm_daemonset::Config {
        workers: workers(cli.daemonset.concurrent_daemonset_syncs),
        // Needs AtomicFIFO, which `--feature-gates` checks (a dependency upstream).
        stale_cache_guard: cli
            .feature_gates
            .enabled("StaleControllerConsistencyDaemonSet"),
        taint_comparison_operators: cli
            .feature_gates
            .enabled("TaintTolerationComparisonOperators"),
        rollout_skips_not_ready_nodes: cli.rkcm.rkcm_daemonset_rollout_skip_not_ready_nodes,
        ..rkcm_daemonset::Config::default()
    }
}

/// The Deployment configuration from its flags and `--feature-gates`.
fn deployment_config(cli: &Cli) -> rkcm_deployment::Config {
    rkcm_deployment::Config {
        workers: workers(cli.deployment.concurrent_deployment_syncs),
        terminating_replicas: cli
            .feature_gates
            .enabled("DeploymentReplicaSetTerminatingReplicas"),
    }
}

/// The Job configuration from its flags and `--feature-gates`.
fn job_config(cli: &Cli) -> rkcm_job::Config {
    rkcm_job::Config {
        workers: workers(cli.job.concurrent_job_syncs),
        stale_cache_guard: cli.feature_gates.enabled("StaleControllerConsistencyJob"),
        clear_start_time_on_suspend: cli
            .feature_gates
            .enabled("MutableSchedulingDirectivesForSuspendedJobs"),
    }
}

/// The StatefulSet configuration from its flags and `--feature-gates`.
fn statefulset_config(cli: &Cli) -> rkcm_statefulset::Config {
    rkcm_statefulset::Config {
        workers: workers(cli.statefulset.concurrent_statefulset_syncs),
        max_unavailable: cli.feature_gates.enabled("MaxUnavailableStatefulSet"),
        stale_cache_guard: cli
            .feature_gates
            .enabled("StaleControllerConsistencyStatefulSet"),
        semantic_revision_comparison: cli
            .feature_gates
            .enabled("StatefulSetSemanticRevisionComparison"),
    }
}

/// The RS/RC configuration from `--concurrent-*-syncs` and `--feature-gates`.
fn replica_config(concurrency: i32, cli: &Cli) -> rkcm_replicaset::Config {
    rkcm_replicaset::Config {
        workers: workers(concurrency),
        terminating_replicas: cli
            .feature_gates
            .enabled("DeploymentReplicaSetTerminatingReplicas"),
        pod_deletion_cost: cli.feature_gates.enabled("PodDeletionCost"),
        // Needs AtomicFIFO, which `--feature-gates` checks (a dependency upstream).
        stale_cache_guard: cli
            .feature_gates
            .enabled("StaleControllerConsistencyReplicaSet"),
        ..rkcm_replicaset::Config::default()
    }
}

/// A `--controllers` entry that names no known controller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not in the list of known controllers")]
pub struct UnknownController(pub String);

/// The controller called `name_or_alias`, if any.
pub fn lookup(name_or_alias: &str) -> Option<&'static ControllerDef> {
    CONTROLLERS
        .iter()
        .find(|c| c.name == name_or_alias || c.aliases.contains(&name_or_alias))
}

/// Rewrites aliases to canonical names, keeping a leading `-` and `*`, and rejects unknown
/// names (upstream `Validate`: every unknown entry is reported, without its `-`).
pub fn resolve_aliases(entries: &[String]) -> Result<Vec<String>, Vec<UnknownController>> {
    let mut out = Vec::with_capacity(entries.len());
    let mut unknown = Vec::new();
    for entry in entries {
        if entry == "*" {
            out.push(entry.clone());
            continue;
        }
        let (negated, bare) = match entry.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, entry.as_str()),
        };
        match lookup(bare) {
            Some(def) if negated => out.push(format!("-{}", def.name)),
            Some(def) => out.push(def.name.to_string()),
            None => unknown.push(UnknownController(bare.to_string())),
        }
    }
    if unknown.is_empty() {
        Ok(out)
    } else {
        Err(unknown)
    }
}

/// Upstream `IsControllerEnabled` over canonical entries: the first entry naming the
/// controller decides; otherwise it runs iff a `*` was seen and it is on by default.
pub fn is_enabled(entries: &[String], def: &ControllerDef) -> bool {
    let mut star = false;
    for entry in entries {
        if entry == def.name {
            return true;
        }
        if entry.strip_prefix('-') == Some(def.name) {
            return false;
        }
        if entry == "*" {
            star = true;
        }
    }
    star && !def.disabled_by_default
}

/// The controllers `entries` enable, implemented or not, in table order.
pub fn enabled(entries: &[String]) -> Vec<&'static ControllerDef> {
    CONTROLLERS
        .iter()
        .filter(|def| is_enabled(entries, def))
        .collect()
}

/// Why an enabled, implemented controller is nevertheless not started, if it is not.
pub fn skip_reason(def: &ControllerDef, cli: &Cli) -> Option<&'static str> {
    if def.name == "garbage-collector-controller" && !cli.garbage_collector.enable_garbage_collector
    {
        return Some("--enable-garbage-collector=false");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Upstream's names, queue names, event components and defaults of every workload
    /// controller, in one table (`pkg/controller/*`, `cmd/kube-controller-manager/app/options`).
    #[test]
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
        assert_eq!(
            rkcm_cronjob::consts::NEXT_SCHEDULE_DELTA,
            jiff::SignedDuration::from_millis(100)
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
        match crate::cli::parse(std::iter::once("rkcm").chain(args.iter().copied())) {
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
            assert_eq!(deployment_config(&c).terminating_replicas, on);
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
}
