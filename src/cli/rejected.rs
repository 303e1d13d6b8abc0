//! Upstream flags rkcm recognises only to reject them, and those it accepts without honouring.

use clap::ArgAction;

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

pub(super) fn rejected_arg(r: &Rejected) -> clap::Arg {
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
pub(super) const NOT_HONOURED: &[(&str, &str)] = &[
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
