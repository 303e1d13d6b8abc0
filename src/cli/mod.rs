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
//! `--controller-start-interval`, `--feature-gates` (upstream's v1.37 registry, [`FEATURE_GATES`];
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

use std::collections::BTreeSet;
use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};

use rkcm_runtime::informer::ContentType;

use crate::registry;

mod controllers;
mod delegation;
mod duration;
mod gates;
mod generic;
mod own;
mod rejected;

use duration::GoDuration;

pub use controllers::*;
pub use delegation::*;
pub use gates::*;
pub use generic::*;
pub use own::*;
pub use rejected::*;

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

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// Rewrites `_` to `-` in every flag name (upstream `WordSepNormalizeFunc`). Values, and
/// everything after a bare `--`, are untouched.
pub fn normalize_args<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut out = Vec::new();
    let mut terminated = false;
    for arg in args {
        let arg: OsString = arg.into();
        if terminated {
            out.push(arg);
            continue;
        }
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if s == "--" {
            terminated = true;
            out.push(arg);
            continue;
        }
        match s.strip_prefix("--") {
            Some(rest) => {
                let (name, value) = match rest.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (rest, None),
                };
                let mut norm = format!("--{}", name.replace('_', "-"));
                if let Some(v) = value {
                    norm.push('=');
                    norm.push_str(v);
                }
                out.push(norm.into());
            }
            None => out.push(arg),
        }
    }
    out
}

/// The clap command: the derived flags plus the hidden ones of controllers rkcm does not run
/// and the rejected ones.
pub fn command() -> clap::Command {
    Cli::command()
        .args(REJECTED_FLAGS.iter().map(rejected_arg))
        .args(FOREIGN_FLAGS.iter().map(foreign_arg))
}

/// Parses and validates `args` (including the program name). No I/O besides clap's own
/// help/usage rendering.
pub fn parse<I, T>(args: I) -> Result<Invocation, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(normalize_args(args))?;
    let mut cli = Cli::from_arg_matches(&matches)?;

    if !cli.positional.is_empty() {
        return Err(CliError::Invalid(vec![format!(
            "{COMMAND:?} does not take any arguments, got {:?}",
            cli.positional
        )]));
    }

    // Upstream handles --version before validating anything else.
    if let Some(v) = cli.generic.version.as_deref() {
        let text = match v {
            "raw" => Some(version_raw()),
            other => match parse_go_bool(other) {
                Ok(true) => Some(version_short()),
                Ok(false) => None,
                Err(e) => {
                    return Err(CliError::Invalid(vec![format!(
                        "invalid argument {other:?} for \"--version\" flag: {e}"
                    )]));
                }
            },
        };
        if let Some(text) = text {
            return Ok(Invocation::PrintVersion(text));
        }
    }

    let mut errors = Vec::new();

    for r in REJECTED_FLAGS {
        if matches.value_source(r.name) == Some(ValueSource::CommandLine) {
            errors.push(format!(
                "flag --{} is not implemented by rkcm: {}",
                r.name, r.reason
            ));
        }
    }
    errors.extend(cli.validate());

    match FeatureGates::parse(&cli.generic.feature_gates) {
        Ok(g) => cli.feature_gates = g,
        Err(e) => errors.extend(e),
    }

    // `--controllers=` (empty) means "no controllers", as pflag reads an empty slice.
    let entries: Vec<String> = cli
        .generic
        .controllers
        .iter()
        .filter(|e| !e.is_empty())
        .cloned()
        .collect();
    match registry::resolve_aliases(&entries) {
        Ok(resolved) => cli.controllers = resolved,
        Err(unknown) => errors.extend(unknown.iter().map(ToString::to_string)),
    }

    if !errors.is_empty() {
        return Err(CliError::Invalid(errors));
    }

    cli.effective_flags = effective_flags(&cmd, &matches);
    cli.notices = notices(&cli, &cmd, &matches);
    Ok(Invocation::Run(Box::new(cli)))
}

fn version_short() -> String {
    format!("rkcm v{}", env!("CARGO_PKG_VERSION"))
}

fn version_raw() -> String {
    let (major, minor) = {
        let mut parts = env!("CARGO_PKG_VERSION").split('.');
        (parts.next().unwrap_or("0"), parts.next().unwrap_or("0"))
    };
    format!(
        "version.Info{{Major:{major:?}, Minor:{minor:?}, GitVersion:\"v{}\", GitCommit:\"\", \
         GitTreeState:\"\", BuildDate:\"\", GoVersion:\"\", Compiler:\"rustc\", \
         Platform:\"{}/{}\"}}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        rkcm_runtime::client::go_arch()
    )
}

fn effective_flags(cmd: &clap::Command, matches: &ArgMatches) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if arg.is_hide_set() && matches.value_source(arg.get_id().as_str()).is_none() {
            continue;
        }
        if matches!(long, "help" | "version") {
            continue;
        }
        let value = matches
            .get_raw(arg.get_id().as_str())
            .map(|vals| {
                vals.map(|v| v.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        out.push((long.to_string(), value));
    }
    out.sort();
    out
}

fn notices(cli: &Cli, cmd: &clap::Command, matches: &ArgMatches) -> Vec<Notice> {
    let mut out = Vec::new();
    // Flags given on the command line, by long name (clap ids are field names).
    let given: BTreeSet<&str> = cmd
        .get_arguments()
        .filter(|a| matches.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
        .filter_map(|a| a.get_long())
        .collect();
    for f in FOREIGN_FLAGS {
        if given.contains(f.name) {
            out.push(Notice {
                flag: format!("--{}", f.name),
                reason: f.reason,
            });
        }
    }
    for (flag, reason) in NOT_HONOURED {
        if given.contains(flag) {
            out.push(Notice {
                flag: format!("--{flag}"),
                reason,
            });
        }
    }
    if ContentType::from_media_type(&cli.api.kube_api_content_type).is_none() {
        out.push(Notice {
            flag: format!("--kube-api-content-type={}", cli.api.kube_api_content_type),
            reason: "not supported, using application/json",
        });
    }
    out
}

impl Cli {
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
    pub fn client_options(&self) -> rkcm_runtime::client::ClientOptions {
        rkcm_runtime::client::ClientOptions {
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
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::duration::GoDuration;
    use super::*;

    fn run(args: &[&str]) -> Result<Cli, CliError> {
        match parse(std::iter::once("rkcm").chain(args.iter().copied()))? {
            Invocation::Run(cli) => Ok(*cli),
            Invocation::PrintVersion(v) => panic!("unexpected version output {v}"),
        }
    }

    fn errors(args: &[&str]) -> Vec<String> {
        match run(args) {
            Ok(_) => panic!("{args:?} should fail"),
            Err(CliError::Invalid(errs)) => errs,
            Err(CliError::Clap(e)) => vec![e.to_string()],
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        command().debug_assert();
    }

    /// Every visible flag with its upstream default (leader-elect-resource-name is rkcm's
    /// deliberate `rkcm`). Adding a flag without listing it here fails the test.
    #[test]
    fn defaults_equal_upstream() {
        let expected: &[(&str, &str)] = &[
            ("allow-metric-labels", ""),
            ("allow-metric-labels-manifest", ""),
            ("authentication-kubeconfig", ""),
            ("authentication-skip-lookup", "false"),
            ("authentication-token-webhook-cache-ttl", "10s"),
            ("authentication-tolerate-lookup-failure", "false"),
            (
                "authorization-always-allow-paths",
                "/healthz,/readyz,/livez",
            ),
            ("authorization-kubeconfig", ""),
            ("authorization-webhook-cache-authorized-ttl", "10s"),
            ("authorization-webhook-cache-unauthorized-ttl", "10s"),
            ("bind-address", "0.0.0.0"),
            ("cert-dir", ""),
            ("client-ca-file", ""),
            ("cluster-name", "kubernetes"),
            ("concurrent-cron-job-syncs", "5"),
            ("concurrent-daemonset-syncs", "2"),
            ("concurrent-deployment-syncs", "5"),
            ("concurrent-endpoint-syncs", "5"),
            ("concurrent-ephemeralvolume-syncs", "5"),
            ("concurrent-gc-syncs", "20"),
            ("concurrent-horizontal-pod-autoscaler-syncs", "5"),
            ("concurrent-job-syncs", "5"),
            ("concurrent-namespace-syncs", "10"),
            ("concurrent-rc-syncs", "5"),
            ("concurrent-replicaset-syncs", "5"),
            ("concurrent-resource-quota-syncs", "5"),
            ("concurrent-service-endpoint-syncs", "5"),
            ("concurrent-service-syncs", "1"),
            ("concurrent-serviceaccount-token-syncs", "5"),
            ("concurrent-statefulset-syncs", "5"),
            ("concurrent-ttl-after-finished-syncs", "5"),
            ("concurrent-validating-admission-policy-status-syncs", "5"),
            ("contention-profiling", "false"),
            ("controller-start-interval", "0s"),
            ("controllers", "*"),
            ("disable-http2-serving", "false"),
            ("disabled-metrics", ""),
            ("emulated-version", ""),
            ("enable-garbage-collector", "true"),
            ("enable-leader-migration", "false"),
            ("feature-gates", ""),
            ("http2-max-streams-per-connection", "0"),
            ("kube-api-burst", "30"),
            (
                "kube-api-content-type",
                "application/vnd.kubernetes.protobuf",
            ),
            ("kube-api-qps", "20"),
            ("kubeconfig", ""),
            ("leader-elect", "true"),
            ("leader-elect-lease-duration", "15s"),
            ("leader-elect-renew-deadline", "10s"),
            ("leader-elect-resource-lock", "leases"),
            ("leader-elect-resource-name", "rkcm"),
            ("leader-elect-resource-namespace", "kube-system"),
            ("leader-elect-retry-period", "2s"),
            ("leader-migration-config", ""),
            ("log-flush-frequency", "5s"),
            ("log-json-info-buffer-size", "0"),
            ("log-json-split-stream", "false"),
            ("log-text-info-buffer-size", "0"),
            ("log-text-split-stream", "false"),
            ("logging-format", "text"),
            ("master", ""),
            ("min-resync-period", "12h0m0s"),
            ("mirroring-concurrent-service-endpoint-syncs", "5"),
            ("permit-address-sharing", "false"),
            ("permit-port-sharing", "false"),
            ("profiling", "true"),
            ("requestheader-allowed-names", ""),
            ("requestheader-client-ca-file", ""),
            ("requestheader-extra-headers-prefix", "x-remote-extra-"),
            ("requestheader-group-headers", "x-remote-group"),
            ("requestheader-uid-headers", ""),
            ("requestheader-username-headers", "x-remote-user"),
            // rkcm's own (not upstream's): off is upstream's behaviour.
            ("rkcm-cronjob-defer-status-writes", "true"),
            ("rkcm-daemonset-rollout-skip-not-ready-nodes", "false"),
            ("rkcm-retry-ignores-early-failures", "true"),
            ("root-ca-file", ""),
            ("secure-port", "10257"),
            ("service-account-private-key-file", ""),
            ("show-hidden-metrics-for-version", ""),
            ("terminated-pod-gc-threshold", "12500"),
            ("tls-cert-file", ""),
            ("tls-cipher-suites", ""),
            ("tls-min-version", ""),
            ("tls-private-key-file", ""),
            ("use-service-account-credentials", "false"),
            ("v", "0"),
            ("vmodule", ""),
        ];
        let cli = run(&[]).expect("defaults parse");
        let got: BTreeMap<&str, &str> = cli
            .effective_flags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let want: BTreeMap<&str, &str> = expected.iter().copied().collect();
        assert_eq!(got, want);

        // And the typed view of the most important ones.
        assert_eq!(cli.api.kube_api_qps, 20.0);
        assert_eq!(cli.api.kube_api_burst, 30);
        assert!(cli.leader.leader_elect);
        assert_eq!(
            cli.leader.leader_elect_lease_duration,
            GoDuration::from_secs(15)
        );
        assert_eq!(
            cli.leader.leader_elect_renew_deadline,
            GoDuration::from_secs(10)
        );
        assert_eq!(
            cli.leader.leader_elect_retry_period,
            GoDuration::from_secs(2)
        );
        assert_eq!(
            cli.generic.min_resync_period,
            GoDuration::from_secs(12 * 3600)
        );
        assert_eq!(cli.serving.secure_port, 10257);
        assert_eq!(cli.podgc.terminated_pod_gc_threshold, 12500);
        assert_eq!(cli.controllers, vec!["*".to_string()]);
        assert_eq!(cli.logging.v, 0);
        assert_eq!(cli.notices, vec![], "the protobuf default is honoured");
    }

    #[test]
    fn underscores_in_flag_names_are_dashes() {
        let cli = run(&["--concurrent_rc_syncs=3"]).expect("underscore");
        assert_eq!(cli.replicationcontroller.concurrent_rc_syncs, 3);
        let cli = run(&["--concurrent-rc-syncs=3"]).expect("dash");
        assert_eq!(cli.replicationcontroller.concurrent_rc_syncs, 3);
        let cli = run(&["--concurrent_rc_syncs", "4", "--leader_elect=false"]).expect("separate");
        assert_eq!(cli.replicationcontroller.concurrent_rc_syncs, 4);
        assert!(!cli.leader.leader_elect);
        // Values keep their underscores.
        let cli = run(&[
            "--leader-elect-resource-name=my_lease",
            "--master",
            "http://a_b:1",
        ])
        .expect("values");
        assert_eq!(cli.leader.leader_elect_resource_name, "my_lease");
        assert_eq!(cli.api.master.as_deref(), Some("http://a_b:1"));
        assert_eq!(
            normalize_args(["rkcm", "--a_b=c_d", "-v", "--", "--x_y"]),
            ["rkcm", "--a-b=c_d", "-v", "--", "--x_y"]
                .map(OsString::from)
                .to_vec()
        );
    }

    #[test]
    fn bools_follow_pflag() {
        assert!(run(&["--leader-elect"]).expect("bare").leader.leader_elect);
        assert!(
            !run(&["--leader-elect=false"])
                .expect("=false")
                .leader
                .leader_elect
        );
        assert!(!run(&["--leader-elect=F"]).expect("=F").leader.leader_elect);
        // pflag never consumes a separate word for a bool: it becomes a positional.
        let errs = errors(&["--leader-elect", "false"]);
        assert_eq!(
            errs,
            vec![r#""rkcm" does not take any arguments, got ["false"]"#]
        );
    }

    #[test]
    fn verbosity_spellings() {
        for args in [
            &["-v", "3"][..],
            &["-v=3"],
            &["-v3"],
            &["--v=3"],
            &["--v", "3"],
        ] {
            assert_eq!(run(args).expect("verbosity").logging.v, 3, "{args:?}");
        }
    }

    #[test]
    fn repeated_single_value_flags_take_the_last_value() {
        let cli = run(&[
            "--secure-port=1",
            "--secure-port=2",
            "--kube-api-qps",
            "5",
            "--kube-api-qps=7",
        ])
        .expect("repeated flags");
        assert_eq!(cli.serving.secure_port, 2);
        assert_eq!(cli.api.kube_api_qps, 7.0);
        let cli = run(&["--leader-elect=false", "--leader-elect"]).expect("repeated bool");
        assert!(cli.leader.leader_elect);
    }

    #[test]
    fn slices_accumulate() {
        let cli = run(&[
            "--controllers=deployment",
            "--controllers",
            "-job,replicaset",
        ])
        .expect("slices");
        assert_eq!(
            cli.controllers,
            vec![
                "deployment-controller",
                "-job-controller",
                "replicaset-controller"
            ]
        );
        let cli = run(&["--controllers="]).expect("empty");
        assert!(cli.controllers.is_empty());
    }

    #[test]
    fn unknown_controller_is_rejected() {
        assert_eq!(
            errors(&["--controllers=*,foo"]),
            vec![r#""foo" is not in the list of known controllers"#]
        );
        assert_eq!(
            errors(&["--controllers=*,-foo"]),
            vec![r#""foo" is not in the list of known controllers"#]
        );
    }

    #[test]
    fn leader_election_validation() {
        assert_eq!(
            errors(&["--leader-elect-resource-lock=endpoints"]),
            vec![r#"resourceLock value must be "leases""#]
        );
        run(&[
            "--leader-elect-resource-lock=endpoints",
            "--leader-elect=false",
        ])
        .expect("lock not checked without election");
        assert_eq!(
            errors(&[
                "--leader-elect-lease-duration=10s",
                "--leader-elect-renew-deadline=10s"
            ]),
            vec!["leaseDuration must be greater than renewDeadline"]
        );
        assert_eq!(
            errors(&["--leader-elect-retry-period=9s"]),
            vec!["renewDeadline must be greater than retryPeriod*JitterFactor"]
        );
        run(&["--leader-elect-retry-period=8s"]).expect("10 > 9.6");
        let errs = errors(&["--leader-elect-retry-period=0s"]);
        assert!(
            errs.contains(&"retryPeriod must be greater than zero".to_string()),
            "{errs:?}"
        );
        let errs = errors(&["--leader-elect-lease-duration=-1s"]);
        assert!(
            errs.contains(&"leaseDuration must be greater than zero".to_string()),
            "{errs:?}"
        );
        assert!(
            errors(&["--enable-leader-migration"])[0].contains("--enable-leader-migration=true")
        );
        run(&[
            "--enable-leader-migration=false",
            "--leader-migration-config=/x",
        ])
        .expect("accepted when off");
    }

    #[test]
    fn concurrency_must_be_positive() {
        assert_eq!(
            errors(&["--concurrent-job-syncs=0"]),
            vec!["concurrent-job-syncs must be greater than 0, but got 0"]
        );
        assert_eq!(
            errors(&["--concurrent_rc_syncs", "-2"]),
            vec!["concurrent-rc-syncs must be greater than 0, but got -2"]
        );
        // Controllers rkcm does not implement: accepted as upstream does.
        run(&["--concurrent-namespace-syncs=0"]).expect("not validated");
        assert!(errors(&["--concurrent-job-syncs=x"])[0].contains("concurrent-job-syncs"));
        assert!(errors(&["--concurrent-job-syncs=3000000000"])[0].contains("concurrent-job-syncs"));
    }

    /// kubeadm v1.37's kube-controller-manager command line (cmd/kubeadm/app/phases/
    /// controlplane/manifests.go `getControllerManagerCommand`, arguments sorted as kubeadm
    /// writes them, with a pod and a service subnet and the default cluster name).
    const KUBEADM_ARGS: &[&str] = &[
        "--allocate-node-cidrs=true",
        "--authentication-kubeconfig=/etc/kubernetes/controller-manager.conf",
        "--authorization-kubeconfig=/etc/kubernetes/controller-manager.conf",
        "--bind-address=127.0.0.1",
        "--client-ca-file=/etc/kubernetes/pki/ca.crt",
        "--cluster-cidr=10.244.0.0/16",
        "--cluster-name=kubernetes",
        "--cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt",
        "--cluster-signing-key-file=/etc/kubernetes/pki/ca.key",
        "--controllers=*,bootstrapsigner,tokencleaner",
        "--kubeconfig=/etc/kubernetes/controller-manager.conf",
        "--leader-elect=true",
        "--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
        "--root-ca-file=/etc/kubernetes/pki/ca.crt",
        "--service-account-private-key-file=/etc/kubernetes/pki/sa.key",
        "--service-cluster-ip-range=10.96.0.0/12",
        "--use-service-account-credentials=true",
    ];

    #[test]
    fn kubeadm_command_line_is_accepted() {
        let cli = run(KUBEADM_ARGS).expect("kubeadm's command line");
        assert!(cli.generic.use_service_account_credentials);
        assert_eq!(
            cli.authentication.client_ca_file,
            "/etc/kubernetes/pki/ca.crt"
        );
        assert_eq!(
            cli.authentication.requestheader_client_ca_file,
            "/etc/kubernetes/pki/front-proxy-ca.crt"
        );
        assert_eq!(
            cli.authorization.authorization_kubeconfig,
            Some(PathBuf::from("/etc/kubernetes/controller-manager.conf"))
        );
        assert_eq!(
            cli.authorization.authorization_always_allow_paths,
            ["/healthz", "/readyz", "/livez"]
        );
        assert_eq!(
            cli.controllers,
            [
                "*",
                "bootstrap-signer-controller",
                "token-cleaner-controller"
            ]
        );
        // Every flag of a controller rkcm does not run is named once in the start log.
        let noticed: Vec<&str> = cli.notices.iter().map(|n| n.flag.as_str()).collect();
        for flag in [
            "--allocate-node-cidrs",
            "--cluster-cidr",
            "--service-cluster-ip-range",
            "--cluster-signing-cert-file",
            "--cluster-signing-key-file",
            "--cluster-name",
            "--root-ca-file",
            "--service-account-private-key-file",
        ] {
            assert!(noticed.contains(&flag), "{flag} not in {noticed:?}");
        }
        let n = cli
            .notices
            .iter()
            .find(|n| n.flag == "--cluster-cidr")
            .expect("notice");
        assert!(
            n.reason.ends_with("which this manager does not run"),
            "{n:?}"
        );
    }

    #[test]
    fn flags_of_other_controllers_are_accepted_and_type_checked() {
        let cli = run(&[
            "--cloud-provider=external",
            "--node-monitor-grace-period=50s",
            "--node-cidr-mask-size",
            "24",
            "--node-eviction-rate=0.1",
            "--enable-taint-manager",
        ])
        .expect("accepted");
        assert_eq!(cli.notices.len(), 5, "{:?}", cli.notices);
        // Values are checked as pflag would: a bad one names the flag.
        for bad in [
            &["--node-monitor-grace-period=50"][..],
            &["--node-cidr-mask-size=x"],
            &["--allocate-node-cidrs=maybe"],
            &["--node-eviction-rate=fast"],
        ] {
            match run(bad) {
                Err(CliError::Clap(e)) => {
                    let flag = bad[0].split('=').next().unwrap_or_default();
                    assert!(e.to_string().contains(flag), "{bad:?}: {e}");
                }
                other => panic!("{bad:?} should fail, got {other:?}"),
            }
        }
        // Still rejected: a promise rkcm cannot keep.
        let errs = errors(&["--tls-sni-cert-key=a.crt,a.key"]);
        assert!(
            errs[0].starts_with("flag --tls-sni-cert-key is not implemented by rkcm"),
            "{errs:?}"
        );
        assert!(errors(&["--tls-min-version=TLS13"])[0].contains("unknown tls version"));
        assert!(errors(&["--tls-cipher-suites=TLS_NOPE"])[0].contains("TLS_NOPE"));
        run(&[
            "--tls-min-version=VersionTLS13",
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "--authorization-always-allow-paths=/healthz,/metrics",
            "--authentication-skip-lookup",
            "--requestheader-allowed-names=front-proxy-client",
        ])
        .expect("serving flags");
        // Underscore spelling is still recognised.
        run(&["--cloud_provider=external"]).expect("underscore");
    }

    #[test]
    fn notices_for_accepted_flags() {
        let cli = run(&[
            "--kube-api-content-type=application/json",
            "--concurrent-namespace-syncs=3",
            "--profiling=false",
            "--deployment-controller-sync-period=30s",
            "--tls-min-version=VersionTLS12",
        ])
        .expect("accepted");
        let flags: Vec<&str> = cli.notices.iter().map(|n| n.flag.as_str()).collect();
        assert_eq!(
            flags,
            vec![
                "--profiling",
                "--deployment-controller-sync-period",
                "--concurrent-namespace-syncs"
            ]
        );
    }

    #[test]
    fn only_json_and_protobuf_content_types_are_honoured() {
        for (value, noticed) in [
            ("application/json", false),
            ("application/vnd.kubernetes.protobuf", false),
            ("application/yaml", true),
        ] {
            let cli = run(&[&format!("--kube-api-content-type={value}")]).expect("accepted");
            let flags: Vec<&str> = cli.notices.iter().map(|n| n.flag.as_str()).collect();
            assert_eq!(
                flags
                    .iter()
                    .any(|f| f.starts_with("--kube-api-content-type")),
                noticed,
                "{value}: {flags:?}"
            );
        }
    }

    #[test]
    fn unknown_flag_and_positional_fail() {
        assert!(matches!(run(&["--no-such-flag"]), Err(CliError::Clap(_))));
        assert_eq!(
            errors(&["foo"]),
            vec![r#""rkcm" does not take any arguments, got ["foo"]"#]
        );
    }

    #[test]
    fn help_and_version_exit_zero() {
        let err = run(&["--help"]).expect_err("help");
        assert_eq!(err.exit_code(), 0);
        let help = command().render_long_help().to_string();
        for heading in [
            "Generic flags",
            "API client flags",
            "Leader election flags",
            "Secure serving flags",
            "Deployment controller flags",
            "ReplicaSet controller flags",
            "PodGC controller flags",
        ] {
            assert!(help.contains(heading), "missing heading {heading}");
        }
        for flag in [
            "--kubeconfig",
            "--concurrent-rc-syncs",
            "--terminated-pod-gc-threshold",
        ] {
            assert!(help.contains(flag), "missing {flag}");
        }
        assert!(
            !help.contains("--cloud-provider"),
            "rejected flags are hidden"
        );
        for v in [&["--version"][..], &["--version=true"], &["--version=raw"]] {
            let out = parse(std::iter::once("rkcm").chain(v.iter().copied())).expect("version");
            assert!(matches!(out, Invocation::PrintVersion(_)));
        }
        run(&["--version=false"]).expect("--version=false runs");
    }

    #[test]
    fn feature_gates() {
        let cli = run(&["--feature-gates=WatchListClient=false,kube:PodDeletionCost=false"])
            .expect("gates");
        assert!(!cli.feature_gates.enabled("WatchListClient"));
        assert!(!cli.feature_gates.enabled("PodDeletionCost"));
        assert!(cli.feature_gates.enabled("InOrderInformers"), "default");
        // Repeated flags accumulate.
        let cli = run(&[
            "--feature-gates=TaintTolerationComparisonOperators=true",
            "--feature-gates=MaxUnavailableStatefulSet=false",
        ])
        .expect("repeated");
        assert!(
            cli.feature_gates
                .enabled("TaintTolerationComparisonOperators")
        );
        assert!(!cli.feature_gates.enabled("MaxUnavailableStatefulSet"));

        assert_eq!(
            errors(&["--feature-gates=NoSuchGate=true"]),
            [
                "invalid argument for \"--feature-gates\" flag: unrecognized feature gate: NoSuchGate"
            ]
        );
        assert_eq!(
            errors(&["--feature-gates=StatefulSetRecreateStrategy=true"]),
            [
                "feature gate StatefulSetRecreateStrategy=true is not implemented by rkcm: the \
              Recreate update strategy is not implemented (with the gate off a Recreate \
              StatefulSet gets upstream's error and no update)"
            ]
        );
        assert!(
            errors(&["--feature-gates=CoordinatedLeaderElection=true"])[0]
                .contains("CoordinatedLeaderElection=true is not implemented by rkcm")
        );
        run(&["--feature-gates=CoordinatedLeaderElection=false"]).expect("off is fine");
        assert!(errors(&["--feature-gates=JobManagedBy=false"])[0].contains("locked to true"));
        assert!(errors(&["--feature-gates=WatchList"])[0].contains("missing bool value"));
        assert!(errors(&["--feature-gates=WatchList=maybe"])[0].contains("invalid value"));
    }

    #[test]
    fn configz_has_upstreams_shape() {
        let cli = run(&["--concurrent-replicaset-syncs=7", "--leader-elect=false"]).expect("ok");
        let c = cli.configz();
        let cc = &c["componentconfig"];
        assert_eq!(cc["ReplicaSetController"]["ConcurrentRSSyncs"], 7);
        assert_eq!(cc["Generic"]["LeaderElection"]["LeaderElect"], false);
        assert_eq!(cc["Generic"]["LeaderElection"]["LeaseDuration"], "15s");
        assert_eq!(cc["PodGCController"]["TerminatedPodGCThreshold"], 12500);
        assert_eq!(cc["Generic"]["Controllers"], serde_json::json!(["*"]));
    }

    #[test]
    fn client_options_from_flags() {
        let cli = run(&["--kubeconfig=/k", "--kube-api-qps=5", "--kube-api-burst=7"]).expect("ok");
        let o = cli.client_options();
        assert_eq!(o.kubeconfig, Some(PathBuf::from("/k")));
        assert_eq!(o.master, None);
        assert_eq!((o.qps, o.burst), (5.0, 7));
    }
}
