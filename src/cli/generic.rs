//! The process-wide flag groups: generic, API client, leader election, serving, logging,
//! metrics and debugging flags, and the Go-compatible bool and IP parsers they use.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use clap::{ArgAction, Args};

use super::duration::{GoDuration, parse_duration};

/// Go `strconv.ParseBool`, which pflag uses for boolean flags.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("strconv.ParseBool: parsing {s:?}: invalid syntax")),
    }
}

/// `--bind-address`: an IP; empty means all interfaces, as upstream.
fn parse_bind_address(s: &str) -> Result<IpAddr, String> {
    if s.is_empty() {
        return Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    }
    s.parse::<IpAddr>()
        .map_err(|_| format!("{s:?} is not a valid IP address"))
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
    /// Every gate kube-controller-manager v1.37 knows is accepted; a value rkcm does not
    /// implement (e.g. StatefulSetRecreateStrategy=true) is an error naming the gate (see the
    /// README's feature-gate table).
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, value_name = "mapStringBool")]
    pub feature_gates: Vec<String>,

    /// Accepted for compatibility; rkcm implements one version's behaviour and ignores it.
    #[arg(long, value_name = "strings")]
    pub emulated_version: Option<String>,

    /// If true, use individual service account credentials for each controller: each
    /// controller talks to the API server as ServiceAccount kube-system/<its upstream name>,
    /// with tokens from the TokenRequest API (the ServiceAccount is created if missing).
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

    /// Content type of requests sent to apiserver. With protobuf, rkcm lists and watches pods
    /// and nodes in protobuf and asks for the answers of its writes in protobuf; every other
    /// request is JSON.
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

    /// The directory where the TLS certs are located. If --tls-cert-file and
    /// --tls-private-key-file are provided, this flag will be ignored. Otherwise a
    /// self-signed pair is kept there (kube-controller-manager.crt/.key), generated if
    /// missing; empty keeps it in memory.
    #[arg(long, default_value = "", value_name = "string")]
    pub cert_dir: String,

    /// Minimum TLS version supported. Possible values: VersionTLS10, VersionTLS11,
    /// VersionTLS12, VersionTLS13. rkcm never negotiates below TLS 1.2.
    #[arg(long, value_name = "string")]
    pub tls_min_version: Option<String>,

    /// Comma-separated list of cipher suites for the server (Go names). If omitted, the
    /// default suites are used. Suites rkcm's TLS stack does not implement (CBC, RSA key
    /// exchange, RC4, 3DES) are accepted and not offered; TLS 1.3 suites are not
    /// configurable.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, value_name = "strings")]
    pub tls_cipher_suites: Vec<String>,

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
