//! Upstream flags of controllers rkcm does not run (accepted, type-checked, logged), those it
//! rejects, and those it accepts without honouring.

use clap::ArgAction;

// ---------------------------------------------------------------------------------------------
// Flags of controllers rkcm does not run, and rejected flags
// ---------------------------------------------------------------------------------------------

/// The value type of a recognised upstream flag, checked as pflag would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `--x` alone or `--x=<Go bool>`, never a separate value word.
    Bool,
    /// Any string.
    Value,
    /// A Go duration.
    Duration,
    /// A signed integer.
    Int,
    /// A float.
    Float,
}

/// An upstream flag that configures a controller rkcm does not run. Accepted (its value
/// type checked) and logged once at start, so kubeadm's and distributions' command lines
/// work unchanged.
#[derive(Clone, Copy, Debug)]
pub struct Foreign {
    pub name: &'static str,
    pub kind: Kind,
    /// Logged as the notice: "configures X, which this manager does not run".
    pub reason: &'static str,
}

/// An upstream flag rkcm recognises only to reject it.
#[derive(Clone, Copy, Debug)]
pub struct Rejected {
    pub name: &'static str,
    pub kind: Kind,
    pub reason: &'static str,
}

const CLOUD: &str = "configures the cloud-provider, node-ipam and route controllers, which this \
                     manager does not run";
const NODE: &str = "configures the node-lifecycle controller, which this manager does not run";
const VOLUME: &str = "configures the volume, attach-detach and persistent-volume controllers, \
                      which this manager does not run";
const CSR: &str = "configures the certificate-signing controller, which this manager does not \
                   run";
const HPA: &str = "configures the horizontal-pod-autoscaler controller, which this manager does \
                   not run";
const NAMESPACE: &str = "configures the namespace controller, which this manager does not run";
const QUOTA: &str = "configures the resource-quota controller, which this manager does not run";
const ENDPOINTS: &str = "configures the endpoint(slice) controllers, which this manager does not \
                         run";
const TOKENS: &str = "configures the legacy service account token cleaner, which this manager \
                      does not run";

const fn foreign(name: &'static str, kind: Kind, reason: &'static str) -> Foreign {
    Foreign { name, kind, reason }
}

/// Flags of upstream controllers rkcm does not run (accepted, logged).
pub const FOREIGN_FLAGS: &[Foreign] = &[
    foreign("cloud-provider", Kind::Value, CLOUD),
    foreign("cloud-config", Kind::Value, CLOUD),
    foreign("external-cloud-volume-plugin", Kind::Value, CLOUD),
    foreign("allocate-node-cidrs", Kind::Bool, CLOUD),
    foreign("cidr-allocator-type", Kind::Value, CLOUD),
    foreign("cluster-cidr", Kind::Value, CLOUD),
    foreign("service-cluster-ip-range", Kind::Value, CLOUD),
    foreign("node-cidr-mask-size", Kind::Int, CLOUD),
    foreign("node-cidr-mask-size-ipv4", Kind::Int, CLOUD),
    foreign("node-cidr-mask-size-ipv6", Kind::Int, CLOUD),
    foreign("configure-cloud-routes", Kind::Bool, CLOUD),
    foreign("route-reconciliation-period", Kind::Duration, CLOUD),
    foreign("node-monitor-period", Kind::Duration, NODE),
    foreign("node-monitor-grace-period", Kind::Duration, NODE),
    foreign("node-startup-grace-period", Kind::Duration, NODE),
    foreign("node-eviction-rate", Kind::Float, NODE),
    foreign("secondary-node-eviction-rate", Kind::Float, NODE),
    foreign("large-cluster-size-threshold", Kind::Int, NODE),
    foreign("unhealthy-zone-threshold", Kind::Float, NODE),
    foreign("pod-eviction-timeout", Kind::Duration, NODE),
    foreign("enable-taint-manager", Kind::Bool, NODE),
    foreign(
        "attach-detach-reconcile-sync-period",
        Kind::Duration,
        VOLUME,
    ),
    foreign("disable-attach-detach-reconcile-sync", Kind::Bool, VOLUME),
    foreign("disable-force-detach-on-timeout", Kind::Bool, VOLUME),
    foreign("enable-dynamic-provisioning", Kind::Bool, VOLUME),
    foreign("enable-hostpath-provisioner", Kind::Bool, VOLUME),
    foreign("flex-volume-plugin-dir", Kind::Value, VOLUME),
    foreign("pv-recycler-increment-timeout-nfs", Kind::Int, VOLUME),
    foreign("pv-recycler-minimum-timeout-hostpath", Kind::Int, VOLUME),
    foreign("pv-recycler-minimum-timeout-nfs", Kind::Int, VOLUME),
    foreign(
        "pv-recycler-pod-template-filepath-hostpath",
        Kind::Value,
        VOLUME,
    ),
    foreign("pv-recycler-pod-template-filepath-nfs", Kind::Value, VOLUME),
    foreign("pv-recycler-timeout-increment-hostpath", Kind::Int, VOLUME),
    foreign("pvclaimbinder-sync-period", Kind::Duration, VOLUME),
    foreign("volume-host-allow-local-loopback", Kind::Bool, VOLUME),
    foreign("volume-host-cidr-denylist", Kind::Value, VOLUME),
    foreign("cluster-signing-cert-file", Kind::Value, CSR),
    foreign("cluster-signing-key-file", Kind::Value, CSR),
    foreign("cluster-signing-duration", Kind::Duration, CSR),
    foreign(
        "cluster-signing-kube-apiserver-client-cert-file",
        Kind::Value,
        CSR,
    ),
    foreign(
        "cluster-signing-kube-apiserver-client-key-file",
        Kind::Value,
        CSR,
    ),
    foreign("cluster-signing-kubelet-client-cert-file", Kind::Value, CSR),
    foreign("cluster-signing-kubelet-client-key-file", Kind::Value, CSR),
    foreign(
        "cluster-signing-kubelet-serving-cert-file",
        Kind::Value,
        CSR,
    ),
    foreign("cluster-signing-kubelet-serving-key-file", Kind::Value, CSR),
    foreign("cluster-signing-legacy-unknown-cert-file", Kind::Value, CSR),
    foreign("cluster-signing-legacy-unknown-key-file", Kind::Value, CSR),
    foreign(
        "horizontal-pod-autoscaler-cpu-initialization-period",
        Kind::Duration,
        HPA,
    ),
    foreign(
        "horizontal-pod-autoscaler-downscale-stabilization",
        Kind::Duration,
        HPA,
    ),
    foreign(
        "horizontal-pod-autoscaler-initial-readiness-delay",
        Kind::Duration,
        HPA,
    ),
    foreign("horizontal-pod-autoscaler-sync-period", Kind::Duration, HPA),
    foreign("horizontal-pod-autoscaler-tolerance", Kind::Float, HPA),
    foreign("namespace-sync-period", Kind::Duration, NAMESPACE),
    foreign("resource-quota-sync-period", Kind::Duration, QUOTA),
    foreign("endpoint-updates-batch-period", Kind::Duration, ENDPOINTS),
    foreign(
        "endpointslice-updates-batch-period",
        Kind::Duration,
        ENDPOINTS,
    ),
    foreign(
        "mirroring-endpointslice-updates-batch-period",
        Kind::Duration,
        ENDPOINTS,
    ),
    foreign("max-endpoints-per-slice", Kind::Int, ENDPOINTS),
    foreign("mirroring-max-endpoints-per-subset", Kind::Int, ENDPOINTS),
    foreign(
        "legacy-service-account-token-clean-up-period",
        Kind::Duration,
        TOKENS,
    ),
];

/// Upstream flags that would promise behaviour rkcm does not have.
pub const REJECTED_FLAGS: &[Rejected] = &[Rejected {
    name: "tls-sni-cert-key",
    kind: Kind::Value,
    reason: "rkcm serves a single certificate (--tls-cert-file or a self-signed one)",
}];

fn hidden_arg(name: &'static str, kind: Kind) -> clap::Arg {
    let arg = clap::Arg::new(name)
        .long(name)
        .hide(true)
        .action(ArgAction::Append);
    match kind {
        // Like pflag bools: `--x` or `--x=v`, never a separate value word.
        Kind::Bool => arg
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
            .value_parser(super::generic::parse_go_bool),
        Kind::Value => arg.num_args(1).allow_hyphen_values(true),
        Kind::Duration => arg
            .num_args(1)
            .allow_hyphen_values(true)
            .value_parser(super::duration::parse_duration),
        Kind::Int => arg
            .num_args(1)
            .allow_negative_numbers(true)
            .value_parser(clap::value_parser!(i64)),
        Kind::Float => arg
            .num_args(1)
            .allow_negative_numbers(true)
            .value_parser(clap::value_parser!(f64)),
    }
}

pub(super) fn rejected_arg(r: &Rejected) -> clap::Arg {
    hidden_arg(r.name, r.kind)
}

pub(super) fn foreign_arg(f: &Foreign) -> clap::Arg {
    hidden_arg(f.name, f.kind)
}

/// Flags accepted only for compatibility: (flag, reason), logged when given.
pub(super) const NOT_HONOURED: &[(&str, &str)] = &[
    (
        "emulated-version",
        "rkcm implements one version's behaviour; emulation is not supported",
    ),
    (
        "cluster-name",
        "configures the cloud-provider and persistent-volume controllers, which this manager \
         does not run",
    ),
    (
        "root-ca-file",
        "configures the service-account-token and root-ca-certificate-publisher controllers, \
         which this manager does not run",
    ),
    (
        "service-account-private-key-file",
        "configures the service-account-token controller, which this manager does not run",
    ),
    (
        "leader-migration-config",
        "leader migration is not supported; the file is not read",
    ),
    ("permit-port-sharing", "not supported"),
    ("permit-address-sharing", "not supported"),
    (
        "http2-max-streams-per-connection",
        "the HTTP/2 server default is used",
    ),
    ("disable-http2-serving", "not supported"),
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
