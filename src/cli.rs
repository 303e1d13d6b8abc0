//! The command line: kube-controller-manager's flag names, defaults and validation
//! (spec/manager.md §1), parsed with clap.
//!
//! Parsing follows pflag where operators would notice a difference:
//! - `_` in a flag *name* means `-` (upstream installs `WordSepNormalizeFunc` globally), so
//!   `--concurrent_rc_syncs` is `--concurrent-rc-syncs`. We rewrite argv before clap sees it.
//! - Booleans take `--flag`, `--flag=true|false` (Go `ParseBool` spellings) but never a
//!   separate value word, as in pflag.
//! - String slices (`--controllers`, `--feature-gates`) are comma separated and accumulate
//!   when repeated.
//! - Durations use Go syntax (`15s`, `1m30s`, `12h0m0s`, `500ms`), see [`GoDuration`].
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
//! `--controller-start-interval`, `--feature-gates` (static v1.37 table, [`FEATURE_GATES`]),
//! `--bind-address`, `--secure-port`, `--tls-cert-file`, `--tls-private-key-file`,
//! `--use-service-account-credentials` (`false` only), `-v/--v`, `--logging-format`,
//! `--version`, `--help`.
//!
//! **Accepted because harmless, logged once at startup when given** ([`Cli::notices`]):
//! `--kube-api-content-type` (kube-rs speaks JSON only; logged whenever not JSON, including
//! the protobuf default), the `--concurrent-*-syncs` flags of controllers rkcm does not
//! implement (spec §1.5 requires accepting them), `--deployment-controller-sync-period`
//! (removed upstream), `--leader-migration-config`, `--cluster-name`, `--root-ca-file`,
//! `--service-account-private-key-file` (only read by controllers rkcm does not run),
//! `--profiling`, `--contention-profiling`, `--cert-dir`, `--permit-port-sharing`,
//! `--permit-address-sharing`, `--http2-max-streams-per-connection`,
//! `--disable-http2-serving`, `--tls-min-version` up to `VersionTLS12` (rustls never
//! negotiates below TLS 1.2), the metrics flags (`--show-hidden-metrics-for-version`,
//! `--disabled-metrics`, `--allow-metric-labels`, `--allow-metric-labels-manifest`) and the
//! logging tuning flags (`--vmodule`, `--log-flush-frequency`, `--log-*-info-buffer-size`,
//! `--log-*-split-stream`), and `--emulated-version`.
//!
//! **Rejected with an error naming the flag** ([`REJECTED_FLAGS`]): delegated
//! authentication/authorization of the serving endpoints (`--authentication-*`,
//! `--authorization-*`, `--client-ca-file`, `--requestheader-*`), `--tls-cipher-suites`,
//! `--tls-sni-cert-key`, `--tls-min-version=VersionTLS13`, cloud provider and node IPAM
//! flags, node-lifecycle, volume/attach-detach/PV recycler, CSR signing, HPA, namespace,
//! resource-quota, endpoint(-slice) and legacy token cleaner tuning flags,
//! `--use-service-account-credentials=true` and `--enable-leader-migration=true`. Each would
//! promise behaviour rkcm does not have (protection of `/metrics`, a controller running),
//! so silently accepting it would mislead.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Args, CommandFactory, FromArgMatches, Parser};

use crate::registry;

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
// Go-compatible value types
// ---------------------------------------------------------------------------------------------

/// A Go `time.Duration`: signed nanoseconds, parsed and printed with Go's syntax.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration(i64);

impl GoDuration {
    #[cfg(test)]
    pub const fn from_nanos(nanos: i64) -> Self {
        Self(nanos)
    }
    #[cfg(test)]
    pub const fn from_secs(secs: i64) -> Self {
        Self(secs * 1_000_000_000)
    }
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
    /// The duration as `std::time::Duration`; negative durations become zero.
    pub fn to_std(self) -> Duration {
        Duration::from_nanos(u64::try_from(self.0).unwrap_or(0))
    }
    pub fn is_positive(self) -> bool {
        self.0 > 0
    }
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        Self(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

/// Error of [`GoDuration::from_str`], worded like Go's `time.ParseDuration`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time: {0}")]
pub struct DurationError(String);

impl FromStr for GoDuration {
    type Err = DurationError;

    /// Go `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`.
    fn from_str(orig: &str) -> Result<Self, Self::Err> {
        let invalid = || DurationError(format!("invalid duration {orig:?}"));
        let mut s = orig;
        let mut neg = false;
        if let Some(rest) = s.strip_prefix('-') {
            neg = true;
            s = rest;
        } else if let Some(rest) = s.strip_prefix('+') {
            s = rest;
        }
        if s == "0" {
            return Ok(Self(0));
        }
        if s.is_empty() {
            return Err(invalid());
        }
        let mut total: u128 = 0;
        while !s.is_empty() {
            // The number: integer part, optional fraction; at least one digit.
            let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
            let int_part = &s[..int_len];
            s = &s[int_len..];
            let mut frac_part = "";
            if let Some(rest) = s.strip_prefix('.') {
                let frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
                frac_part = &rest[..frac_len];
                s = &rest[frac_len..];
            }
            if int_part.is_empty() && frac_part.is_empty() {
                return Err(invalid());
            }
            let unit_len = s
                .find(|c: char| c == '.' || c.is_ascii_digit())
                .unwrap_or(s.len());
            let unit = &s[..unit_len];
            s = &s[unit_len..];
            if unit.is_empty() {
                return Err(DurationError(format!("missing unit in duration {orig:?}")));
            }
            let scale: u128 = match unit {
                "ns" => 1,
                "us" | "\u{00b5}s" | "\u{03bc}s" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => {
                    return Err(DurationError(format!(
                        "unknown unit {unit:?} in duration {orig:?}"
                    )));
                }
            };
            let int: u128 = if int_part.is_empty() {
                0
            } else {
                int_part.parse().map_err(|_| invalid())?
            };
            let mut value = int.checked_mul(scale).ok_or_else(invalid)?;
            // Like Go, fraction digits beyond the unit's precision are dropped.
            let mut frac_scale = scale;
            for d in frac_part.bytes() {
                frac_scale /= 10;
                if frac_scale == 0 {
                    break;
                }
                value += u128::from(d - b'0') * frac_scale;
            }
            total = total.checked_add(value).ok_or_else(invalid)?;
            if total > 1u128 << 63 {
                return Err(invalid());
            }
        }
        if neg {
            Ok(Self(
                i64::try_from(-(total as i128)).map_err(|_| invalid())?,
            ))
        } else {
            Ok(Self(i64::try_from(total).map_err(|_| invalid())?))
        }
    }
}

impl fmt::Display for GoDuration {
    /// Go `Duration.String()`: `0s`, `500ms`, `1.5µs`, `15s`, `1m30s`, `12h0m0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0s");
        }
        let sign = if self.0 < 0 { "-" } else { "" };
        let u = self.0.unsigned_abs();
        fn frac(v: u64, digits: u32) -> String {
            // `v` holds `digits` fractional digits; print them without trailing zeros.
            let s = format!("{v:0width$}", width = digits as usize);
            let s = s.trim_end_matches('0');
            if s.is_empty() {
                String::new()
            } else {
                format!(".{s}")
            }
        }
        if u < 1_000_000_000 {
            let (whole, rest, digits, unit) = if u < 1_000 {
                (u, 0, 0, "ns")
            } else if u < 1_000_000 {
                (u / 1_000, u % 1_000, 3, "\u{00b5}s")
            } else {
                (u / 1_000_000, u % 1_000_000, 6, "ms")
            };
            let fr = if digits == 0 {
                String::new()
            } else {
                frac(rest, digits)
            };
            return write!(f, "{sign}{whole}{fr}{unit}");
        }
        let secs = u / 1_000_000_000;
        let fr = frac(u % 1_000_000_000, 9);
        let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
        if h > 0 {
            write!(f, "{sign}{h}h{m}m{s}{fr}s")
        } else if secs >= 60 {
            write!(f, "{sign}{m}m{s}{fr}s")
        } else {
            write!(f, "{sign}{s}{fr}s")
        }
    }
}

/// Go `strconv.ParseBool`, which pflag uses for boolean flags.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("strconv.ParseBool: parsing {s:?}: invalid syntax")),
    }
}

fn parse_duration(s: &str) -> Result<GoDuration, String> {
    s.parse::<GoDuration>().map_err(|e| e.to_string())
}

/// `--bind-address`: an IP; empty means all interfaces, as upstream.
fn parse_bind_address(s: &str) -> Result<IpAddr, String> {
    if s.is_empty() {
        return Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    }
    s.parse::<IpAddr>()
        .map_err(|_| format!("{s:?} is not a valid IP address"))
}

// ---------------------------------------------------------------------------------------------
// Feature gates
// ---------------------------------------------------------------------------------------------

/// Maturity of a feature gate; also the `stage` label of `kubernetes_feature_enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
    Ga,
}

impl Stage {
    /// The label value upstream uses (GA is the empty string).
    pub fn label(self) -> &'static str {
        match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "",
        }
    }
}

/// One known gate: name, v1.37 default, stage, and whether it is locked to its default.
#[derive(Clone, Copy, Debug)]
pub struct GateSpec {
    pub name: &'static str,
    pub default: bool,
    pub stage: Stage,
    pub locked: bool,
}

const fn gate(name: &'static str, default: bool, stage: Stage, locked: bool) -> GateSpec {
    GateSpec {
        name,
        default,
        stage,
        locked,
    }
}

/// The gates the specs name, with their v1.37 state (spec/*.md). Upstream knows many more
/// (apiserver/kubelet gates); an operator passing one of those gets an error rather than a
/// silently ignored gate.
pub const FEATURE_GATES: &[GateSpec] = &[
    // Meta gates.
    gate("AllAlpha", false, Stage::Alpha, false),
    gate("AllBeta", false, Stage::Beta, false),
    // Manager and client machinery (manager.md §1.8).
    gate("WatchListClient", true, Stage::Beta, false),
    gate("WatchList", true, Stage::Beta, false),
    gate("InOrderInformers", true, Stage::Beta, false),
    gate("InformerResourceVersion", false, Stage::Alpha, false),
    gate("AtomicFIFO", true, Stage::Beta, false),
    gate("CoordinatedLeaderElection", false, Stage::Beta, false),
    gate("ComponentSLIs", true, Stage::Ga, true),
    // Workload controllers.
    gate(
        "DeploymentReplicaSetTerminatingReplicas",
        true,
        Stage::Beta,
        false,
    ),
    gate("PodDeletionCost", true, Stage::Beta, false),
    gate("LogarithmicScaleDown", true, Stage::Ga, true),
    gate(
        "StaleControllerConsistencyReplicaSet",
        true,
        Stage::Beta,
        false,
    ),
    gate("StaleControllerConsistencyJob", true, Stage::Beta, false),
    gate(
        "StaleControllerConsistencyStatefulSet",
        true,
        Stage::Beta,
        false,
    ),
    gate(
        "StaleControllerConsistencyDaemonSet",
        true,
        Stage::Beta,
        false,
    ),
    gate("MaxUnavailableStatefulSet", true, Stage::Beta, false),
    gate(
        "StatefulSetSemanticRevisionComparison",
        true,
        Stage::Beta,
        false,
    ),
    gate("StatefulSetRecreateStrategy", false, Stage::Alpha, false),
    gate(
        "TaintTolerationComparisonOperators",
        false,
        Stage::Alpha,
        false,
    ),
    gate("JobBackoffLimitPerIndex", true, Stage::Ga, true),
    gate("JobSuccessPolicy", true, Stage::Ga, true),
    gate("JobPodReplacementPolicy", true, Stage::Ga, true),
    gate("JobManagedBy", true, Stage::Ga, true),
    gate(
        "MutableSchedulingDirectivesForSuspendedJobs",
        true,
        Stage::Beta,
        false,
    ),
    gate(
        "MutablePodResourcesForSuspendedJobs",
        true,
        Stage::Beta,
        false,
    ),
    gate("WorkloadWithJob", false, Stage::Alpha, false),
    gate("GenericWorkload", false, Stage::Alpha, false),
    gate("GangScheduling", false, Stage::Alpha, false),
    gate("PodObservedGenerationTracking", true, Stage::Ga, true),
    gate("SidecarContainers", true, Stage::Ga, true),
];

/// The effective feature gates: the table's defaults plus `--feature-gates` overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    overrides: BTreeMap<&'static str, bool>,
}

impl FeatureGates {
    /// Parses the accumulated `key=value` entries of `--feature-gates` (component-base
    /// `MapStringBool` + `featuregate.Set`).
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut overrides = BTreeMap::new();
        for entry in entries {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let Some((key, value)) = entry.split_once('=') else {
                return Err(format!("missing bool value for {entry}"));
            };
            let key = key.trim();
            // Versioned component registries prefix gates with their component.
            let key = key.strip_prefix("kube:").unwrap_or(key);
            let value = value.trim();
            let enabled = parse_go_bool(value)
                .map_err(|e| format!("invalid value of {key}={value}, err: {e}"))?;
            let spec = FEATURE_GATES
                .iter()
                .find(|g| g.name == key)
                .ok_or_else(|| format!("unrecognized feature gate: {key}"))?;
            if spec.locked && enabled != spec.default {
                return Err(format!(
                    "cannot set feature gate {key} to {enabled}, feature is locked to {}",
                    spec.default
                ));
            }
            if spec.name == "CoordinatedLeaderElection" && enabled {
                return Err(
                    "feature gate CoordinatedLeaderElection=true is not supported by rkcm"
                        .to_string(),
                );
            }
            overrides.insert(spec.name, enabled);
        }
        Ok(Self { overrides })
    }

    /// Whether `name` is on. Unknown names are off.
    pub fn enabled(&self, name: &str) -> bool {
        let Some(spec) = FEATURE_GATES.iter().find(|g| g.name == name) else {
            return false;
        };
        if let Some(v) = self.overrides.get(spec.name) {
            return *v;
        }
        if !spec.locked {
            let all = |meta: &str| self.overrides.get(meta).copied().unwrap_or(false);
            match spec.stage {
                Stage::Alpha if spec.name != "AllAlpha" && all("AllAlpha") => return true,
                Stage::Beta if spec.name != "AllBeta" && all("AllBeta") => return true,
                _ => {}
            }
        }
        spec.default
    }

    /// Every known gate with its effective state, for `kubernetes_feature_enabled`.
    pub fn all(&self) -> Vec<(&'static GateSpec, bool)> {
        FEATURE_GATES
            .iter()
            .map(|g| (g, self.enabled(g.name)))
            .collect()
    }
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
    after_help = "Flags of upstream controllers and serving features that rkcm does not \
                  implement (cloud, node, volume, certificate, HPA, delegated authn/authz, ...) \
                  are recognised and rejected with an error naming the flag."
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

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Generic flags")]
pub struct GenericFlags {
    /// A list of controllers to enable. '*' enables all on-by-default controllers, 'foo'
    /// enables the controller named 'foo', '-foo' disables the controller named 'foo'. The
    /// first entry naming a controller decides. Legacy aliases (e.g. 'replicaset') are
    /// accepted. Known controllers are upstream's full list; rkcm runs those it implements.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, default_value = "*",
          value_name = "strings", allow_hyphen_values = true)]
    pub controllers: Vec<String>,

    /// The resync period in reflectors will be random between MinResyncPeriod and
    /// 2*MinResyncPeriod.
    #[arg(long, default_value = "12h0m0s", value_parser = parse_duration, value_name = "duration")]
    pub min_resync_period: GoDuration,

    /// Interval between starting controller managers (jittered up to twice as long).
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "duration")]
    pub controller_start_interval: GoDuration,

    /// A set of key=value pairs that describe feature gates for alpha/experimental features.
    /// Options are the gates rkcm's controllers consult (see the project docs);
    /// CoordinatedLeaderElection=true is not supported.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, value_name = "mapStringBool")]
    pub feature_gates: Vec<String>,

    /// Accepted for compatibility; rkcm implements one version's behaviour and ignores it.
    #[arg(long, value_name = "strings")]
    pub emulated_version: Option<String>,

    /// If true, use individual service account credentials for each controller. rkcm
    /// supports only false (one identity for the whole process).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub use_service_account_credentials: bool,

    /// The instance prefix for the cluster. Accepted; only controllers rkcm does not run
    /// read it.
    #[arg(long, default_value = "kubernetes", value_name = "string")]
    pub cluster_name: String,

    /// Root certificate authority for service account token secrets. Accepted; only
    /// controllers rkcm does not run read it.
    #[arg(long, default_value = "", value_name = "string")]
    pub root_ca_file: String,

    /// Key used to sign service account tokens. Accepted; only controllers rkcm does not run
    /// read it.
    #[arg(long, default_value = "", value_name = "string")]
    pub service_account_private_key_file: String,

    /// Print version information and quit; --version=raw prints more detail.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_name = "true|raw")]
    pub version: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "API client flags")]
pub struct ApiFlags {
    /// Path to kubeconfig file with authorization and master location information (the
    /// master location can be overridden by the master flag). KUBECONFIG and ~/.kube/config
    /// are not consulted.
    #[arg(long, value_name = "string")]
    pub kubeconfig: Option<PathBuf>,

    /// The address of the Kubernetes API server (overrides any value in kubeconfig).
    #[arg(long, value_name = "string")]
    pub master: Option<String>,

    /// QPS to use while talking with kubernetes apiserver (per client: each controller has
    /// its own).
    #[arg(
        long,
        default_value_t = 20.0,
        value_name = "float32",
        allow_negative_numbers = true
    )]
    pub kube_api_qps: f32,

    /// Burst to use while talking with kubernetes apiserver.
    #[arg(
        long,
        default_value_t = 30,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub kube_api_burst: i32,

    /// Content type of requests sent to apiserver. rkcm always uses application/json.
    #[arg(
        long,
        default_value = "application/vnd.kubernetes.protobuf",
        value_name = "string"
    )]
    pub kube_api_content_type: String,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Leader election flags")]
pub struct LeaderElectionFlags {
    /// Start a leader election client and gain leadership before executing the main loop.
    /// Enable this when running replicated components for high availability.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "true", value_parser = parse_go_bool,
          value_name = "bool")]
    pub leader_elect: bool,

    /// The duration that non-leader candidates will wait after observing a leadership
    /// renewal until attempting to acquire leadership of a led but unrenewed leader slot.
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "duration")]
    pub leader_elect_lease_duration: GoDuration,

    /// The interval between attempts by the acting master to renew a leadership slot before
    /// it stops leading. This must be less than the lease duration.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "duration")]
    pub leader_elect_renew_deadline: GoDuration,

    /// The duration the clients should wait between attempting acquisition and renewal of a
    /// leadership.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "duration")]
    pub leader_elect_retry_period: GoDuration,

    /// The type of resource object that is used for locking during leader election.
    /// Supported option is 'leases'.
    #[arg(long, default_value = "leases", value_name = "string")]
    pub leader_elect_resource_lock: String,

    /// The name of resource object that is used for locking during leader election.
    /// Deliberately not upstream's 'kube-controller-manager', so that rkcm and an upstream
    /// manager can run side by side without contending for one lease.
    #[arg(long, default_value = "rkcm", value_name = "string")]
    pub leader_elect_resource_name: String,

    /// The namespace of resource object that is used for locking during leader election.
    #[arg(long, default_value = "kube-system", value_name = "string")]
    pub leader_elect_resource_namespace: String,

    /// Whether to enable controller leader migration. Not supported: only false is accepted.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub enable_leader_migration: bool,

    /// Path to the config file for controller leader migration. Accepted; not read.
    #[arg(long, default_value = "", value_name = "string")]
    pub leader_migration_config: String,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Secure serving flags")]
pub struct ServingFlags {
    /// The IP address on which to listen for the --secure-port port. If blank or an
    /// unspecified address (0.0.0.0 or ::), all interfaces and IP address families will be
    /// used.
    #[arg(long, default_value = "0.0.0.0", value_parser = parse_bind_address, value_name = "ip")]
    pub bind_address: IpAddr,

    /// The port on which to serve HTTPS with authentication and authorization. If 0, don't
    /// serve HTTPS at all.
    #[arg(long, default_value_t = 10257, value_name = "int")]
    pub secure_port: u16,

    /// File containing the default x509 Certificate for HTTPS. If not provided, a
    /// self-signed certificate is generated in memory.
    #[arg(long, value_name = "string")]
    pub tls_cert_file: Option<PathBuf>,

    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(long, value_name = "string")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Accepted; rkcm keeps its self-signed certificate in memory.
    #[arg(long, default_value = "", value_name = "string")]
    pub cert_dir: String,

    /// Minimum TLS version supported. rkcm never negotiates below TLS 1.2;
    /// VersionTLS13 is not supported.
    #[arg(long, value_name = "string")]
    pub tls_min_version: Option<String>,

    /// Accepted; not honoured.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub permit_port_sharing: bool,

    /// Accepted; not honoured.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub permit_address_sharing: bool,

    /// Accepted; the server's default is used.
    #[arg(long, default_value_t = 0, value_name = "int")]
    pub http2_max_streams_per_connection: i64,

    /// Accepted; not honoured.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub disable_http2_serving: bool,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Logging flags")]
pub struct LoggingFlags {
    /// Number for the log level verbosity: 0-1 info, 2-4 debug, 5+ trace. RUST_LOG, when
    /// set, overrides it.
    #[arg(
        short = 'v',
        long = "v",
        default_value_t = 0,
        value_name = "Level",
        allow_negative_numbers = true
    )]
    pub v: i32,

    /// Sets the log format. Permitted formats: "json", "text".
    #[arg(long, default_value = "text", value_name = "string",
          value_parser = ["text", "json"])]
    pub logging_format: String,

    /// Accepted; per-file verbosity is not supported (use RUST_LOG).
    #[arg(long, default_value = "", value_name = "pattern")]
    pub vmodule: String,

    /// Accepted; logs are written unbuffered.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "duration")]
    pub log_flush_frequency: GoDuration,

    /// Accepted; not honoured.
    #[arg(long, default_value = "0", value_name = "quantity")]
    pub log_json_info_buffer_size: String,

    /// Accepted; not honoured.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub log_json_split_stream: bool,

    /// Accepted; not honoured.
    #[arg(long, default_value = "0", value_name = "quantity")]
    pub log_text_info_buffer_size: String,

    /// Accepted; not honoured.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub log_text_split_stream: bool,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Metrics flags")]
pub struct MetricsFlags {
    /// Accepted; every metric is exposed.
    #[arg(long, default_value = "", value_name = "string")]
    pub show_hidden_metrics_for_version: String,

    /// Accepted; not honoured (every metric is exposed).
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, value_name = "strings")]
    pub disabled_metrics: Vec<String>,

    /// Accepted; not honoured.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, value_name = "stringToString")]
    pub allow_metric_labels: Vec<String>,

    /// Accepted; not honoured.
    #[arg(long, default_value = "", value_name = "string")]
    pub allow_metric_labels_manifest: String,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Debugging flags")]
pub struct DebuggingFlags {
    /// Accepted; rkcm serves no /debug/pprof endpoints.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "true", value_parser = parse_go_bool,
          value_name = "bool")]
    pub profiling: bool,

    /// Accepted; rkcm serves no /debug/pprof endpoints.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub contention_profiling: bool,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Deployment controller flags")]
pub struct DeploymentFlags {
    /// The number of deployment objects that are allowed to sync concurrently. Larger
    /// number = more responsive deployments, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_deployment_syncs: i32,

    /// Removed upstream; accepted and ignored so old manifests keep working.
    #[arg(long, value_parser = parse_duration, value_name = "duration", hide = true)]
    pub deployment_controller_sync_period: Option<GoDuration>,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "ReplicaSet controller flags")]
pub struct ReplicaSetFlags {
    /// The number of replica sets that are allowed to sync concurrently. Larger number =
    /// more responsive replica management, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_replicaset_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "ReplicationController flags")]
pub struct ReplicationControllerFlags {
    /// The number of replication controllers that are allowed to sync concurrently. Larger
    /// number = more responsive replica management, but more CPU (and network) load. Also
    /// spelled --concurrent_rc_syncs (upstream's registered name).
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_rc_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "StatefulSet controller flags")]
pub struct StatefulSetFlags {
    /// The number of statefulset objects that are allowed to sync concurrently. Larger
    /// number = more responsive statefulsets, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_statefulset_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "DaemonSet controller flags")]
pub struct DaemonSetFlags {
    /// The number of daemonset objects that are allowed to sync concurrently. Larger number
    /// = more responsive daemonsets, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 2,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_daemonset_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Job controller flags")]
pub struct JobFlags {
    /// The number of job objects that are allowed to sync concurrently. Larger number = more
    /// responsive jobs, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_job_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "CronJob controller flags")]
pub struct CronJobFlags {
    /// The number of cron job objects that are allowed to sync concurrently. Larger number =
    /// more responsive jobs, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_cron_job_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "TTL-after-finished controller flags")]
pub struct TtlAfterFinishedFlags {
    /// The number of TTL-after-finished controller workers that are allowed to sync
    /// concurrently.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_ttl_after_finished_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Garbage collector controller flags")]
pub struct GarbageCollectorFlags {
    /// The number of garbage collector workers that are allowed to sync concurrently.
    #[arg(
        long,
        default_value_t = 20,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_gc_syncs: i32,

    /// Enables the generic garbage collector. MUST be synced with the corresponding flag of
    /// the kube-apiserver.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "true", value_parser = parse_go_bool,
          value_name = "bool")]
    pub enable_garbage_collector: bool,
}

/// Concurrency flags of upstream controllers rkcm does not implement: accepted (spec §1.5)
/// so manifests written for kube-controller-manager keep working.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Flags of controllers rkcm does not implement (accepted, no effect)")]
pub struct OtherControllerFlags {
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_endpoint_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_service_endpoint_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub mirroring_concurrent_service_endpoint_syncs: i32,
    #[arg(
        long,
        default_value_t = 10,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_namespace_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_resource_quota_syncs: i32,
    #[arg(
        long,
        default_value_t = 1,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_service_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_serviceaccount_token_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_horizontal_pod_autoscaler_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_ephemeralvolume_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_validating_admission_policy_status_syncs: i32,
}

// ---------------------------------------------------------------------------------------------
// Rejected upstream flags
// ---------------------------------------------------------------------------------------------

/// Whether a rejected flag is boolean (`--x` alone is complete) or takes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Value,
}

/// An upstream flag rkcm recognises only to reject it.
#[derive(Clone, Copy, Debug)]
pub struct Rejected {
    pub name: &'static str,
    pub kind: Kind,
    pub reason: &'static str,
}

const AUTHN: &str = "delegated authentication/authorization of the serving endpoints is not \
                     implemented (they are served without credentials; restrict \
                     --bind-address instead)";
const TLS: &str = "rkcm serves with rustls defaults and a single certificate";
const CLOUD: &str = "rkcm runs no cloud-provider, node-ipam or route controller";
const NODE: &str = "rkcm runs no node-lifecycle controller";
const VOLUME: &str = "rkcm runs no volume, attach-detach or persistent-volume controller";
const CSR: &str = "rkcm runs no certificate-signing controller";
const HPA: &str = "rkcm runs no horizontal-pod-autoscaler controller";
const OTHER: &str = "rkcm does not run the controller this flag configures";

const fn rejected(name: &'static str, kind: Kind, reason: &'static str) -> Rejected {
    Rejected { name, kind, reason }
}

/// Upstream flags that would promise behaviour rkcm does not have.
pub const REJECTED_FLAGS: &[Rejected] = &[
    rejected("authentication-kubeconfig", Kind::Value, AUTHN),
    rejected("authentication-skip-lookup", Kind::Bool, AUTHN),
    rejected("authentication-token-webhook-cache-ttl", Kind::Value, AUTHN),
    rejected("authentication-tolerate-lookup-failure", Kind::Bool, AUTHN),
    rejected("authorization-always-allow-paths", Kind::Value, AUTHN),
    rejected("authorization-kubeconfig", Kind::Value, AUTHN),
    rejected(
        "authorization-webhook-cache-authorized-ttl",
        Kind::Value,
        AUTHN,
    ),
    rejected(
        "authorization-webhook-cache-unauthorized-ttl",
        Kind::Value,
        AUTHN,
    ),
    rejected("client-ca-file", Kind::Value, AUTHN),
    rejected("requestheader-allowed-names", Kind::Value, AUTHN),
    rejected("requestheader-client-ca-file", Kind::Value, AUTHN),
    rejected("requestheader-extra-headers-prefix", Kind::Value, AUTHN),
    rejected("requestheader-group-headers", Kind::Value, AUTHN),
    rejected("requestheader-uid-headers", Kind::Value, AUTHN),
    rejected("requestheader-username-headers", Kind::Value, AUTHN),
    rejected("tls-cipher-suites", Kind::Value, TLS),
    rejected("tls-sni-cert-key", Kind::Value, TLS),
    rejected("cloud-provider", Kind::Value, CLOUD),
    rejected("cloud-config", Kind::Value, CLOUD),
    rejected("external-cloud-volume-plugin", Kind::Value, CLOUD),
    rejected("allocate-node-cidrs", Kind::Bool, CLOUD),
    rejected("cidr-allocator-type", Kind::Value, CLOUD),
    rejected("cluster-cidr", Kind::Value, CLOUD),
    rejected("service-cluster-ip-range", Kind::Value, CLOUD),
    rejected("node-cidr-mask-size", Kind::Value, CLOUD),
    rejected("node-cidr-mask-size-ipv4", Kind::Value, CLOUD),
    rejected("node-cidr-mask-size-ipv6", Kind::Value, CLOUD),
    rejected("configure-cloud-routes", Kind::Bool, CLOUD),
    rejected("route-reconciliation-period", Kind::Value, CLOUD),
    rejected("node-monitor-period", Kind::Value, NODE),
    rejected("node-monitor-grace-period", Kind::Value, NODE),
    rejected("node-startup-grace-period", Kind::Value, NODE),
    rejected("node-eviction-rate", Kind::Value, NODE),
    rejected("secondary-node-eviction-rate", Kind::Value, NODE),
    rejected("large-cluster-size-threshold", Kind::Value, NODE),
    rejected("unhealthy-zone-threshold", Kind::Value, NODE),
    rejected("pod-eviction-timeout", Kind::Value, NODE),
    rejected("enable-taint-manager", Kind::Bool, NODE),
    rejected("attach-detach-reconcile-sync-period", Kind::Value, VOLUME),
    rejected("disable-attach-detach-reconcile-sync", Kind::Bool, VOLUME),
    rejected("disable-force-detach-on-timeout", Kind::Bool, VOLUME),
    rejected("enable-dynamic-provisioning", Kind::Bool, VOLUME),
    rejected("enable-hostpath-provisioner", Kind::Bool, VOLUME),
    rejected("flex-volume-plugin-dir", Kind::Value, VOLUME),
    rejected("pv-recycler-increment-timeout-nfs", Kind::Value, VOLUME),
    rejected("pv-recycler-minimum-timeout-hostpath", Kind::Value, VOLUME),
    rejected("pv-recycler-minimum-timeout-nfs", Kind::Value, VOLUME),
    rejected(
        "pv-recycler-pod-template-filepath-hostpath",
        Kind::Value,
        VOLUME,
    ),
    rejected("pv-recycler-pod-template-filepath-nfs", Kind::Value, VOLUME),
    rejected(
        "pv-recycler-timeout-increment-hostpath",
        Kind::Value,
        VOLUME,
    ),
    rejected("pvclaimbinder-sync-period", Kind::Value, VOLUME),
    rejected("volume-host-allow-local-loopback", Kind::Bool, VOLUME),
    rejected("volume-host-cidr-denylist", Kind::Value, VOLUME),
    rejected("cluster-signing-cert-file", Kind::Value, CSR),
    rejected("cluster-signing-key-file", Kind::Value, CSR),
    rejected("cluster-signing-duration", Kind::Value, CSR),
    rejected(
        "cluster-signing-kube-apiserver-client-cert-file",
        Kind::Value,
        CSR,
    ),
    rejected(
        "cluster-signing-kube-apiserver-client-key-file",
        Kind::Value,
        CSR,
    ),
    rejected("cluster-signing-kubelet-client-cert-file", Kind::Value, CSR),
    rejected("cluster-signing-kubelet-client-key-file", Kind::Value, CSR),
    rejected(
        "cluster-signing-kubelet-serving-cert-file",
        Kind::Value,
        CSR,
    ),
    rejected("cluster-signing-kubelet-serving-key-file", Kind::Value, CSR),
    rejected("cluster-signing-legacy-unknown-cert-file", Kind::Value, CSR),
    rejected("cluster-signing-legacy-unknown-key-file", Kind::Value, CSR),
    rejected(
        "horizontal-pod-autoscaler-cpu-initialization-period",
        Kind::Value,
        HPA,
    ),
    rejected(
        "horizontal-pod-autoscaler-downscale-stabilization",
        Kind::Value,
        HPA,
    ),
    rejected(
        "horizontal-pod-autoscaler-initial-readiness-delay",
        Kind::Value,
        HPA,
    ),
    rejected("horizontal-pod-autoscaler-sync-period", Kind::Value, HPA),
    rejected("horizontal-pod-autoscaler-tolerance", Kind::Value, HPA),
    rejected("namespace-sync-period", Kind::Value, OTHER),
    rejected("resource-quota-sync-period", Kind::Value, OTHER),
    rejected("endpoint-updates-batch-period", Kind::Value, OTHER),
    rejected("endpointslice-updates-batch-period", Kind::Value, OTHER),
    rejected(
        "mirroring-endpointslice-updates-batch-period",
        Kind::Value,
        OTHER,
    ),
    rejected("max-endpoints-per-slice", Kind::Value, OTHER),
    rejected("mirroring-max-endpoints-per-subset", Kind::Value, OTHER),
    rejected(
        "legacy-service-account-token-clean-up-period",
        Kind::Value,
        OTHER,
    ),
];

fn rejected_arg(r: &Rejected) -> clap::Arg {
    let arg = clap::Arg::new(r.name)
        .long(r.name)
        .hide(true)
        .action(ArgAction::Append);
    match r.kind {
        // Like pflag bools: `--x` or `--x=v`, never a separate value word.
        Kind::Bool => arg
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true"),
        Kind::Value => arg.num_args(1).allow_hyphen_values(true),
    }
}

/// Flags accepted only for compatibility: (flag, reason), logged when given.
const NOT_HONOURED: &[(&str, &str)] = &[
    (
        "emulated-version",
        "rkcm implements one version's behaviour; emulation is not supported",
    ),
    ("cluster-name", "only read by controllers rkcm does not run"),
    ("root-ca-file", "only read by controllers rkcm does not run"),
    (
        "service-account-private-key-file",
        "only read by controllers rkcm does not run",
    ),
    (
        "leader-migration-config",
        "leader migration is not supported; the file is not read",
    ),
    (
        "cert-dir",
        "the self-signed serving certificate is kept in memory",
    ),
    ("permit-port-sharing", "not supported"),
    ("permit-address-sharing", "not supported"),
    (
        "http2-max-streams-per-connection",
        "the HTTP/2 server default is used",
    ),
    ("disable-http2-serving", "not supported"),
    ("tls-min-version", "rustls never negotiates below TLS 1.2"),
    (
        "vmodule",
        "per-file verbosity is not supported; use RUST_LOG",
    ),
    ("log-flush-frequency", "logs are written unbuffered"),
    ("log-json-info-buffer-size", "not supported"),
    ("log-json-split-stream", "not supported"),
    ("log-text-info-buffer-size", "not supported"),
    ("log-text-split-stream", "not supported"),
    ("show-hidden-metrics-for-version", "every metric is exposed"),
    ("disabled-metrics", "not supported; every metric is exposed"),
    ("allow-metric-labels", "not supported"),
    ("allow-metric-labels-manifest", "not supported"),
    ("profiling", "rkcm serves no /debug/pprof endpoints"),
    (
        "contention-profiling",
        "rkcm serves no /debug/pprof endpoints",
    ),
    (
        "deployment-controller-sync-period",
        "removed upstream; ignored",
    ),
    (
        "concurrent-endpoint-syncs",
        "configures a controller rkcm does not implement",
    ),
    (
        "concurrent-service-endpoint-syncs",
        "configures a controller rkcm does not implement",
    ),
    (
        "mirroring-concurrent-service-endpoint-syncs",
        "configures a controller rkcm does not implement",
    ),
    (
        "concurrent-namespace-syncs",
        "configures a controller rkcm does not implement",
    ),
    (
        "concurrent-resource-quota-syncs",
        "configures a controller rkcm does not implement",
    ),
    (
        "concurrent-service-syncs",
        "configures a controller rkcm does not implement",
    ),
    (
        "concurrent-serviceaccount-token-syncs",
        "configures a controller rkcm does not implement",
    ),
    (
        "concurrent-horizontal-pod-autoscaler-syncs",
        "configures a controller rkcm does not implement",
    ),
    (
        "concurrent-ephemeralvolume-syncs",
        "configures a controller rkcm does not implement",
    ),
    (
        "concurrent-validating-admission-policy-status-syncs",
        "configures a controller rkcm does not implement",
    ),
];

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

/// The clap command: the derived flags plus the hidden rejected ones.
pub fn command() -> clap::Command {
    Cli::command().args(REJECTED_FLAGS.iter().map(rejected_arg))
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
        Err(e) => errors.push(format!(
            "invalid argument for \"--feature-gates\" flag: {e}"
        )),
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
    for (flag, reason) in NOT_HONOURED {
        if given.contains(flag) {
            out.push(Notice {
                flag: format!("--{flag}"),
                reason,
            });
        }
    }
    if cli.api.kube_api_content_type != "application/json" {
        out.push(Notice {
            flag: format!("--kube-api-content-type={}", cli.api.kube_api_content_type),
            reason: "not supported, using application/json",
        });
    }
    out
}

impl Cli {
    /// Upstream validation (spec §1.4, §1.5) plus rkcm's deliberate restrictions. Returns
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
        if self.generic.use_service_account_credentials {
            errs.push(
                "flag --use-service-account-credentials=true is not implemented by rkcm: all \
                 controllers use the identity of --kubeconfig"
                    .to_string(),
            );
        }
        if let Some(v) = &self.serving.tls_min_version
            && !matches!(
                v.as_str(),
                "" | "VersionTLS10" | "VersionTLS11" | "VersionTLS12"
            )
        {
            if v == "VersionTLS13" {
                errs.push(
                    "flag --tls-min-version=VersionTLS13 is not implemented by rkcm: the \
                     serving endpoint negotiates TLS 1.2 or 1.3"
                        .to_string(),
                );
            } else {
                errs.push(format!("unknown tls version {v:?} for --tls-min-version"));
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
    /// of them; upstream only for jobs — documented deviation, spec §1.5).
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

    #[test]
    fn duration_parsing_follows_go() {
        let ok = |s: &str| s.parse::<GoDuration>().expect(s).as_nanos();
        assert_eq!(ok("0"), 0);
        assert_eq!(ok("15s"), 15_000_000_000);
        assert_eq!(ok("1m30s"), 90_000_000_000);
        assert_eq!(ok("12h0m0s"), 12 * 3600 * 1_000_000_000);
        assert_eq!(ok("500ms"), 500_000_000);
        assert_eq!(ok("1.5s"), 1_500_000_000);
        assert_eq!(ok(".5s"), 500_000_000);
        assert_eq!(ok("1h1m1s1ms1us1ns"), 3_661_001_001_001);
        assert_eq!(ok("1µs"), 1_000);
        assert_eq!(ok("1μs"), 1_000);
        assert_eq!(ok("-1.5h"), -5_400_000_000_000);
        assert_eq!(ok("+10s"), 10_000_000_000);
        assert_eq!(ok("2562047h47m16.854775807s"), i64::MAX);
        let err = |s: &str| s.parse::<GoDuration>().expect_err(s).to_string();
        assert_eq!(err(""), r#"time: invalid duration """#);
        assert_eq!(err("1"), r#"time: missing unit in duration "1""#);
        assert_eq!(err("1x"), r#"time: unknown unit "x" in duration "1x""#);
        assert_eq!(err("."), r#"time: invalid duration ".""#);
        assert_eq!(err("2."), r#"time: missing unit in duration "2.""#);
        assert_eq!(err("s"), r#"time: invalid duration "s""#);
        assert_eq!(err("-"), r#"time: invalid duration "-""#);
        assert_eq!(
            err("9999999999h"),
            r#"time: invalid duration "9999999999h""#
        );
    }

    #[test]
    fn duration_display_follows_go() {
        let show = |n: i64| GoDuration::from_nanos(n).to_string();
        assert_eq!(show(0), "0s");
        assert_eq!(show(1), "1ns");
        assert_eq!(show(1_500), "1.5µs");
        assert_eq!(show(500_000_000), "500ms");
        assert_eq!(show(15_000_000_000), "15s");
        assert_eq!(show(90_000_000_000), "1m30s");
        assert_eq!(show(60_000_000_000), "1m0s");
        assert_eq!(show(12 * 3_600_000_000_000), "12h0m0s");
        assert_eq!(show(1_500_000_000), "1.5s");
        assert_eq!(show(-2_000_000_000), "-2s");
        for s in ["15s", "1m30s", "12h0m0s", "500ms", "1.5s", "2h3m4.005s"] {
            assert_eq!(s.parse::<GoDuration>().expect(s).to_string(), s);
        }
    }

    #[test]
    fn go_bools() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(t), Ok(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(f), Ok(false));
        }
        assert!(parse_go_bool("yes").is_err());
    }

    /// Every visible flag with its upstream default (leader-elect-resource-name is rkcm's
    /// deliberate `rkcm`). Adding a flag without listing it here fails the test.
    #[test]
    fn defaults_equal_upstream() {
        let expected: &[(&str, &str)] = &[
            ("allow-metric-labels", ""),
            ("allow-metric-labels-manifest", ""),
            ("bind-address", "0.0.0.0"),
            ("cert-dir", ""),
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
            ("root-ca-file", ""),
            ("secure-port", "10257"),
            ("service-account-private-key-file", ""),
            ("show-hidden-metrics-for-version", ""),
            ("terminated-pod-gc-threshold", "12500"),
            ("tls-cert-file", ""),
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
        assert_eq!(
            cli.notices,
            vec![Notice {
                flag: "--kube-api-content-type=application/vnd.kubernetes.protobuf".into(),
                reason: "not supported, using application/json",
            }]
        );
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

    #[test]
    fn rejected_flags_name_themselves() {
        let errs = errors(&["--cloud-provider", "aws"]);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].starts_with("flag --cloud-provider is not implemented by rkcm"),
            "{errs:?}"
        );
        let errs = errors(&["--allocate-node-cidrs"]);
        assert!(
            errs[0].starts_with("flag --allocate-node-cidrs is not implemented"),
            "{errs:?}"
        );
        let errs = errors(&["--authorization-kubeconfig=/k"]);
        assert!(errs[0].contains("--authorization-kubeconfig"), "{errs:?}");
        let errs = errors(&["--use-service-account-credentials=true"]);
        assert!(
            errs[0].contains("--use-service-account-credentials=true"),
            "{errs:?}"
        );
        run(&["--use-service-account-credentials=false"]).expect("false is fine");
        let errs = errors(&["--tls-min-version=VersionTLS13"]);
        assert!(
            errs[0].contains("--tls-min-version=VersionTLS13"),
            "{errs:?}"
        );
        // Underscore spelling of a rejected flag is still recognised.
        assert!(errors(&["--cloud_provider=x"])[0].contains("--cloud-provider"));
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
                "--tls-min-version",
                "--profiling",
                "--deployment-controller-sync-period",
                "--concurrent-namespace-syncs"
            ]
        );
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
        let cli =
            run(&["--feature-gates=WatchListClient=false,kube:StatefulSetRecreateStrategy=true"])
                .expect("gates");
        assert!(!cli.feature_gates.enabled("WatchListClient"));
        assert!(cli.feature_gates.enabled("StatefulSetRecreateStrategy"));
        assert!(cli.feature_gates.enabled("InOrderInformers"), "default");
        let cli = run(&[
            "--feature-gates=AllAlpha=true",
            "--feature-gates=GangScheduling=false",
        ])
        .expect("meta");
        assert!(cli.feature_gates.enabled("WorkloadWithJob"));
        assert!(
            !cli.feature_gates.enabled("GangScheduling"),
            "explicit beats AllAlpha"
        );
        assert!(
            cli.feature_gates.enabled("WatchListClient"),
            "beta default unaffected"
        );

        assert!(
            errors(&["--feature-gates=NoSuchGate=true"])[0]
                .contains("unrecognized feature gate: NoSuchGate")
        );
        assert!(
            errors(&["--feature-gates=CoordinatedLeaderElection=true"])[0]
                .contains("not supported")
        );
        run(&["--feature-gates=CoordinatedLeaderElection=false"]).expect("off is fine");
        assert!(errors(&["--feature-gates=JobManagedBy=false"])[0].contains("locked to true"));
        assert!(errors(&["--feature-gates=WatchList"])[0].contains("missing bool value"));
        assert!(errors(&["--feature-gates=WatchList=maybe"])[0].contains("invalid value"));
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
