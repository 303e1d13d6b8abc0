//! The command line: kube-controller-manager's flag names, defaults and validation
//! (upstream `cmd/kube-controller-manager/app/options/options.go`), parsed with clap.
//!
//! Parsing follows pflag where operators would notice a difference:
//! - `_` in a flag *name* means `-` (upstream installs `WordSepNormalizeFunc` globally), so
//!   `--concurrent_rc_syncs` is `--concurrent-rc-syncs`. We rewrite argv before clap sees it.
//! - Booleans take `--flag`, `--flag=true|false` (Go `ParseBool` spellings) but never a
//!   separate value word, as in pflag.
//! - String slices (`--controllers`, `--feature-gates`) are comma separated and accumulate
//!   when repeated.
//! - Durations use Go syntax (`15s`, `1m30s`, `12h0m0s`, `500ms`), see
//!   [`GoDuration`](duration::GoDuration).
//! - Positional arguments are an error naming the command; errors exit 1 before any network
//!   access; `--help` and `--version[=raw]` exit 0.
//!
//! # What happens to each upstream flag
//!
//! **Accepted and honoured:** `--kubeconfig`, `--master`, `--kube-api-qps`,
//! `--kube-api-burst`, `--controllers`, `--leader-elect*` (lock must be `leases`; default
//! lease name is `rkcm`, deliberately not `kube-controller-manager`, so rkcm and an upstream
//! manager running side by side never contend for one lease), `--enable-leader-migration`
//! (`false` only), every `--concurrent-*-syncs` of an in-scope controller,
//! `--terminated-pod-gc-threshold`, `--enable-garbage-collector`, `--min-resync-period`,
//! `--controller-start-interval`, `--feature-gates` (upstream's registry of the server's minor, [`REGISTRIES`];
//! values rkcm does not implement are refused naming the gate, see [`Support`]),
//! `--use-service-account-credentials` (see `credentials.rs`), the secure serving flags
//! (`--bind-address`, `--secure-port`, `--tls-cert-file`, `--tls-private-key-file`,
//! `--cert-dir`, `--tls-min-version`, `--tls-cipher-suites`), delegated authentication and
//! authorization (`--authentication-*`, `--authorization-*`, `--client-ca-file`,
//! `--requestheader-*`, see `auth.rs`), `-v/--v`, `--logging-format`, `--version`, `--help`.
//!
//! **Accepted, type-checked, and logged once at startup as "configures X, which this manager
//! does not run"** ([`FOREIGN_FLAGS`], [`Cli::notices`]): flags of controllers rkcm does not
//! run — cloud provider, node IPAM and routes (`--allocate-node-cidrs`, `--cluster-cidr`,
//! `--service-cluster-ip-range`, ...), node lifecycle, volumes, certificate signing
//! (`--cluster-signing-*`), HPA, namespace, resource quota, endpoints, legacy token cleaner —
//! plus `--cluster-name`, `--root-ca-file`, `--service-account-private-key-file`, so
//! kubeadm's command line works unchanged.
//!
//! **Accepted because harmless, logged once at startup when given:**
//! `--kube-api-content-type` when neither `application/json` nor
//! `application/vnd.kubernetes.protobuf` (with protobuf, the default, informers read pods and
//! nodes in protobuf and everything else in JSON), the `--concurrent-*-syncs` flags of controllers rkcm does not
//! implement, `--deployment-controller-sync-period` (removed upstream),
//! `--leader-migration-config`, `--profiling`, `--contention-profiling`,
//! `--permit-port-sharing`, `--permit-address-sharing`, `--http2-max-streams-per-connection`,
//! `--disable-http2-serving`, the metrics flags (`--show-hidden-metrics-for-version`,
//! `--disabled-metrics`, `--allow-metric-labels`, `--allow-metric-labels-manifest`) and the
//! logging tuning flags (`--vmodule`, `--log-flush-frequency`, `--log-*-info-buffer-size`,
//! `--log-*-split-stream`), and `--emulated-version`.
//!
//! **Rejected with an error naming the flag** ([`REJECTED_FLAGS`]): `--tls-sni-cert-key`
//! and `--enable-leader-migration=true`, which would promise behaviour rkcm does not have. A
//! flag upstream does not know is an error naming it, as upstream, except rkcm's own
//! `--rkcm-*` flags ([`RkcmFlags`]).

use clap::Parser;

mod controllers;
mod delegation;
mod duration;
mod gates;
mod generic;
mod own;
pub mod parse;
mod rejected;

use duration::GoDuration;

pub use controllers::*;
pub use delegation::*;
pub use gates::*;
pub use generic::*;
pub use own::*;

/// The command name used in messages, as upstream uses `kube-controller-manager`.
pub const COMMAND: &str = "rkcm";

/// Why parsing did not produce a runnable configuration.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Usage errors, and also `--help` (not an error: exit 0).
    #[error("{0}")]
    Clap(#[from] clap::Error),
    /// Every validation failure, reported together as upstream aggregates them.
    #[error("{}", .0.join("\n"))]
    Invalid(Vec<String>),
}

impl CliError {
    /// 0 for `--help`, 1 otherwise (upstream exits 1 on every flag error).
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Clap(e) if !e.use_stderr() => 0,
            _ => 1,
        }
    }

    /// Prints the message where upstream does: help on stdout, errors on stderr.
    pub fn print(&self) {
        match self {
            CliError::Clap(e) => {
                let _ = e.print();
            }
            CliError::Invalid(errs) => {
                for e in errs {
                    eprintln!("Error: {e}");
                }
            }
        }
    }
}

/// What the process was asked to do.
#[derive(Debug)]
pub enum Invocation {
    Run(Box<Cli>),
    /// `--version` or `--version=raw`: print and exit 0.
    PrintVersion(String),
}

// ---------------------------------------------------------------------------------------------
// Flags
// ---------------------------------------------------------------------------------------------

/// All flags. Field groups map to `--help` headings.
#[derive(Debug, Clone, Parser)]
#[command(
    name = COMMAND,
    about = "rkcm: the workload controllers of kube-controller-manager, in Rust.",
    long_about = "rkcm runs the workload controllers of kube-controller-manager (PodGC, \
                  ReplicaSet, Deployment, StatefulSet, DaemonSet, Job, CronJob, ...) against \
                  any conformant kube-apiserver, with upstream's flag names and defaults.",
    disable_version_flag = true,
    // pflag semantics: a repeated single-value flag takes its last value (so a chart's
    // extraArgs can override a flag it already sets); slice flags still accumulate.
    args_override_self = true,
    after_help = "Flags of upstream controllers that rkcm does not run (cloud, node IPAM, \
                  node lifecycle, volume, certificate signing, HPA, ...) are accepted, their \
                  values checked, and logged once at start."
)]
pub struct Cli {
    #[command(flatten)]
    pub generic: GenericFlags,
    #[command(flatten)]
    pub api: ApiFlags,
    #[command(flatten)]
    pub leader: LeaderElectionFlags,
    #[command(flatten)]
    pub serving: ServingFlags,
    #[command(flatten)]
    pub authentication: AuthenticationFlags,
    #[command(flatten)]
    pub authorization: AuthorizationFlags,
    #[command(flatten)]
    pub logging: LoggingFlags,
    #[command(flatten)]
    pub metrics: MetricsFlags,
    #[command(flatten)]
    pub debugging: DebuggingFlags,
    #[command(flatten)]
    pub deployment: DeploymentFlags,
    #[command(flatten)]
    pub replicaset: ReplicaSetFlags,
    #[command(flatten)]
    pub replicationcontroller: ReplicationControllerFlags,
    #[command(flatten)]
    pub statefulset: StatefulSetFlags,
    #[command(flatten)]
    pub daemonset: DaemonSetFlags,
    #[command(flatten)]
    pub job: JobFlags,
    #[command(flatten)]
    pub cronjob: CronJobFlags,
    #[command(flatten)]
    pub ttl_after_finished: TtlAfterFinishedFlags,
    #[command(flatten)]
    pub garbage_collector: GarbageCollectorFlags,
    #[command(flatten, next_help_heading = "PodGC controller flags")]
    pub podgc: rkcm_podgc::Options,
    #[command(flatten)]
    pub other: OtherControllerFlags,
    #[command(flatten)]
    pub rkcm: RkcmFlags,

    /// Upstream rejects positional arguments; kept to give its message.
    #[arg(hide = true, value_name = "ARGS")]
    pub positional: Vec<String>,

    /// `--feature-gates` after parsing and validation.
    #[arg(skip)]
    pub feature_gates: FeatureGates,
    /// `--controllers` after alias resolution, in order.
    #[arg(skip)]
    pub controllers: Vec<String>,
    /// Every flag with its effective value, for the `FLAG:` startup log.
    #[arg(skip)]
    pub effective_flags: Vec<(String, String)>,
    /// Accepted-but-not-honoured flags given on the command line.
    #[arg(skip)]
    pub notices: Vec<Notice>,
}

/// A flag that was accepted but has no effect in rkcm; logged once at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub flag: String,
    pub reason: &'static str,
}

impl Cli {
    /// Sharded mode's Lease ring config from the flags (`--rkcm-shards`, the
    /// `--leader-elect-*` timings and namespace, `--rkcm-shard-selector`) for the replica
    /// `identity`; `None` when sharded mode is off.
    pub fn shard_config(
        &self,
        identity: &str,
    ) -> anyhow::Result<Option<rkcm_runtime::shard::ShardConfig>> {
        if self.rkcm.rkcm_shards == 0 {
            return Ok(None);
        }
        let le = &self.leader;
        let ring = rkcm_runtime::shard::Ring::new(self.rkcm.rkcm_shards)
            .map_err(|e| anyhow::anyhow!("--rkcm-shards: {e}"))?;
        Ok(Some(rkcm_runtime::shard::ShardConfig {
            ring,
            namespace: le.leader_elect_resource_namespace.clone(),
            prefix: rkcm_runtime::shard::LEASE_PREFIX.to_owned(),
            identity: identity.to_owned(),
            lease_duration: le.leader_elect_lease_duration.to_std(),
            renew_deadline: le.leader_elect_renew_deadline.to_std(),
            retry_period: le.leader_elect_retry_period.to_std(),
            server_selector: self.rkcm.rkcm_shard_selector,
        }))
    }

    /// Upstream validation (`options.go` `Validate`) plus rkcm's deliberate restrictions. Returns
    /// every failure.
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        let le = &self.leader;
        if le.leader_elect {
            if le.leader_elect_resource_lock != "leases" {
                errs.push(r#"resourceLock value must be "leases""#.to_string());
            }
            if le.leader_elect_resource_name.is_empty() {
                errs.push("leaderElection.resourceName: Required value".to_string());
            }
            if le.leader_elect_resource_namespace.is_empty() {
                errs.push("leaderElection.resourceNamespace: Required value".to_string());
            }
            let (lease, renew, retry) = (
                le.leader_elect_lease_duration,
                le.leader_elect_renew_deadline,
                le.leader_elect_retry_period,
            );
            // client-go `NewLeaderElector` checks, same messages.
            if !lease.is_positive() {
                errs.push("leaseDuration must be greater than zero".to_string());
            }
            if !renew.is_positive() {
                errs.push("renewDeadline must be greater than zero".to_string());
            }
            if !retry.is_positive() {
                errs.push("retryPeriod must be greater than zero".to_string());
            }
            if lease <= renew {
                errs.push("leaseDuration must be greater than renewDeadline".to_string());
            }
            // JitterFactor 1.2, computed in integer nanoseconds as client-go does.
            let jittered = (retry.as_nanos() as f64 * 1.2) as i64;
            if renew.as_nanos() <= jittered {
                errs.push(
                    "renewDeadline must be greater than retryPeriod*JitterFactor".to_string(),
                );
            }
        }
        if le.enable_leader_migration {
            errs.push(
                "flag --enable-leader-migration=true is not implemented by rkcm: leader \
                 migration is not supported"
                    .to_string(),
            );
        }
        if let Err(e) = allows_tls12(self.serving.tls_min_version.as_deref()) {
            errs.push(e);
        }
        if let Err(e) = tls12_suites(&self.serving.tls_cipher_suites) {
            errs.push(e);
        }
        for (flag, d) in [
            (
                "authentication-token-webhook-cache-ttl",
                self.authentication.authentication_token_webhook_cache_ttl,
            ),
            (
                "authorization-webhook-cache-authorized-ttl",
                self.authorization
                    .authorization_webhook_cache_authorized_ttl,
            ),
            (
                "authorization-webhook-cache-unauthorized-ttl",
                self.authorization
                    .authorization_webhook_cache_unauthorized_ttl,
            ),
        ] {
            if d.as_nanos() < 0 {
                errs.push(format!("{flag} must not be negative, but got {d}"));
            }
        }
        if self.serving.tls_cert_file.is_some() != self.serving.tls_private_key_file.is_some() {
            errs.push(
                "--tls-cert-file and --tls-private-key-file must be given together".to_string(),
            );
        }
        for (flag, value) in self.concurrency_flags() {
            if value < 1 {
                errs.push(format!("{flag} must be greater than 0, but got {value}"));
            }
        }
        if self.api.kube_api_burst < 0 {
            errs.push(format!(
                "kube-api-burst must not be negative, but got {}",
                self.api.kube_api_burst
            ));
        }
        for (flag, d) in [
            ("min-resync-period", self.generic.min_resync_period),
            (
                "controller-start-interval",
                self.generic.controller_start_interval,
            ),
        ] {
            if d.as_nanos() < 0 {
                errs.push(format!("{flag} must not be negative, but got {d}"));
            }
        }
        errs
    }

    /// The `--concurrent-*-syncs` flags of in-scope controllers (rkcm requires >= 1 for all
    /// of them; upstream only for jobs — documented deviation).
    pub fn concurrency_flags(&self) -> [(&'static str, i32); 9] {
        [
            (
                "concurrent-deployment-syncs",
                self.deployment.concurrent_deployment_syncs,
            ),
            (
                "concurrent-replicaset-syncs",
                self.replicaset.concurrent_replicaset_syncs,
            ),
            (
                "concurrent-rc-syncs",
                self.replicationcontroller.concurrent_rc_syncs,
            ),
            (
                "concurrent-statefulset-syncs",
                self.statefulset.concurrent_statefulset_syncs,
            ),
            (
                "concurrent-daemonset-syncs",
                self.daemonset.concurrent_daemonset_syncs,
            ),
            ("concurrent-job-syncs", self.job.concurrent_job_syncs),
            (
                "concurrent-cron-job-syncs",
                self.cronjob.concurrent_cron_job_syncs,
            ),
            (
                "concurrent-ttl-after-finished-syncs",
                self.ttl_after_finished.concurrent_ttl_after_finished_syncs,
            ),
            (
                "concurrent-gc-syncs",
                self.garbage_collector.concurrent_gc_syncs,
            ),
        ]
    }

    /// `/configz`: upstream serves its component config under `componentconfig`, with the
    /// internal type's Go field names (`KubeControllerManagerConfiguration`); this is the part
    /// rkcm honours, in that shape.
    pub fn configz(&self) -> serde_json::Value {
        let d = |d: GoDuration| d.to_string();
        let le = &self.leader;
        serde_json::json!({"componentconfig": {
            "Generic": {
                "MinResyncPeriod": d(self.generic.min_resync_period),
                "ClientConnection": {
                    "Kubeconfig": self.api.kubeconfig.as_ref()
                        .map(|p| p.display().to_string()).unwrap_or_default(),
                    "ContentType": self.api.kube_api_content_type,
                    "QPS": self.api.kube_api_qps,
                    "Burst": self.api.kube_api_burst,
                },
                "ControllerStartInterval": d(self.generic.controller_start_interval),
                "LeaderElection": {
                    "LeaderElect": le.leader_elect,
                    "LeaseDuration": d(le.leader_elect_lease_duration),
                    "RenewDeadline": d(le.leader_elect_renew_deadline),
                    "RetryPeriod": d(le.leader_elect_retry_period),
                    "ResourceLock": le.leader_elect_resource_lock,
                    "ResourceName": le.leader_elect_resource_name,
                    "ResourceNamespace": le.leader_elect_resource_namespace,
                },
                "Controllers": self.controllers,
            },
            "KubeCloudShared": {
                "UseServiceAccountCredentials": self.generic.use_service_account_credentials,
                "ClusterName": self.generic.cluster_name,
            },
            "DeploymentController": {
                "ConcurrentDeploymentSyncs": self.deployment.concurrent_deployment_syncs,
            },
            "ReplicaSetController": {
                "ConcurrentRSSyncs": self.replicaset.concurrent_replicaset_syncs,
            },
            "ReplicationController": {
                "ConcurrentRCSyncs": self.replicationcontroller.concurrent_rc_syncs,
            },
            "StatefulSetController": {
                "ConcurrentStatefulSetSyncs": self.statefulset.concurrent_statefulset_syncs,
            },
            "DaemonSetController": {
                "ConcurrentDaemonSetSyncs": self.daemonset.concurrent_daemonset_syncs,
            },
            "JobController": {"ConcurrentJobSyncs": self.job.concurrent_job_syncs},
            "CronJobController": {
                "ConcurrentCronJobSyncs": self.cronjob.concurrent_cron_job_syncs,
            },
            "TTLAfterFinishedController": {
                "ConcurrentTTLSyncs": self.ttl_after_finished.concurrent_ttl_after_finished_syncs,
            },
            "GarbageCollectorController": {
                "EnableGarbageCollector": self.garbage_collector.enable_garbage_collector,
                "ConcurrentGCSyncs": self.garbage_collector.concurrent_gc_syncs,
            },
            "PodGCController": {
                "TerminatedPodGCThreshold": self.podgc.terminated_pod_gc_threshold,
            },
        }})
    }

    /// The client flags as the runtime's client builder takes them.
    pub fn client_options(&self) -> rkcm_runtime::api::client::ClientOptions {
        rkcm_runtime::api::client::ClientOptions {
            kubeconfig: self
                .api
                .kubeconfig
                .clone()
                .filter(|p| !p.as_os_str().is_empty()),
            master: self.api.master.clone().filter(|m| !m.is_empty()),
            qps: self.api.kube_api_qps,
            burst: u32::try_from(self.api.kube_api_burst).unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests;
