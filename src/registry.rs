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
use rkcm_runtime::cache::InformerFactory;

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
                    adopt_forgotten_runs: cli.rkcm.rkcm_cronjob_adopt_forgotten_runs,
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
pub(crate) fn daemonset_config(cli: &Cli) -> rkcm_daemonset::Config {
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

/// The Deployment configuration from its flags, `--feature-gates` and rkcm's own flags.
pub(crate) fn deployment_config(cli: &Cli) -> rkcm_deployment::Config {
    rkcm_deployment::Config {
        workers: workers(cli.deployment.concurrent_deployment_syncs),
        terminating_replicas: cli
            .feature_gates
            .enabled("DeploymentReplicaSetTerminatingReplicas"),
        stale_cache_guard: cli.rkcm.rkcm_deployment_stale_cache_guard,
        rollback_on_progress_deadline: cli.rkcm.rkcm_deployment_rollback_on_progress_deadline,
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
        // Upstream's: a new controller starts without backoff records (sharded mode turns the
        // seed on in the controller itself).
        backoff_from_counted_pods: false,
    }
}

/// The StatefulSet configuration from its flags and `--feature-gates`.
pub(crate) fn statefulset_config(cli: &Cli) -> rkcm_statefulset::Config {
    rkcm_statefulset::Config {
        workers: workers(cli.statefulset.concurrent_statefulset_syncs),
        max_unavailable: cli.feature_gates.enabled("MaxUnavailableStatefulSet"),
        stale_cache_guard: cli
            .feature_gates
            .enabled("StaleControllerConsistencyStatefulSet"),
        semantic_revision_comparison: cli
            .feature_gates
            .enabled("StatefulSetSemanticRevisionComparison"),
        recover_stuck_rollout: cli.rkcm.rkcm_statefulset_recover_stuck_rollout,
        recover_stuck_after: cli.rkcm.rkcm_statefulset_recover_stuck_after.to_std(),
    }
}

/// The RS/RC configuration from `--concurrent-*-syncs` and `--feature-gates`.
pub(crate) fn replica_config(concurrency: i32, cli: &Cli) -> rkcm_replicaset::Config {
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
mod tests;
