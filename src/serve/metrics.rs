//! Manager-level metrics that no controller owns: `kubernetes_build_info`,
//! `running_managed_controllers` and the health-check SLIs of `/metrics/slis`.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use rkcm_runtime::metrics::{get_or_register, register};

use super::health::CheckResult;

/// Value of the `manager` label of `running_managed_controllers`: upstream's, so existing
/// dashboards and alerts select rkcm's controllers too.
pub const MANAGER_LABEL: &str = "kube-controller-manager";

/// Go-style names of the platform (`GOOS/GOARCH`), as upstream's `platform` label shows.
pub(super) fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    format!("{}/{}", std::env::consts::OS, arch)
}

/// Build facts for `kubernetes_build_info` and `--version`. Values the build does not
/// provide (commit, date, toolchain) are read from optional compile-time environment
/// variables `RKCM_GIT_COMMIT`, `RKCM_GIT_TREE_STATE`, `RKCM_BUILD_DATE`, `RKCM_RUSTC_VERSION`
/// (set them in the release build) and are otherwise empty or `unknown`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildInfo {
    pub major: String,
    pub minor: String,
    pub git_version: String,
    pub git_commit: String,
    pub git_tree_state: String,
    pub build_date: String,
    /// The Rust toolchain; fills upstream's `go_version` label.
    pub rustc_version: String,
    pub compiler: String,
    pub platform: String,
}

pub fn build_info() -> BuildInfo {
    BuildInfo {
        major: env!("CARGO_PKG_VERSION_MAJOR").to_owned(),
        minor: env!("CARGO_PKG_VERSION_MINOR").to_owned(),
        git_version: format!("v{}", env!("CARGO_PKG_VERSION")),
        git_commit: option_env!("RKCM_GIT_COMMIT").unwrap_or("").to_owned(),
        git_tree_state: option_env!("RKCM_GIT_TREE_STATE").unwrap_or("").to_owned(),
        build_date: option_env!("RKCM_BUILD_DATE")
            .unwrap_or("1970-01-01T00:00:00Z")
            .to_owned(),
        rustc_version: option_env!("RKCM_RUSTC_VERSION")
            .unwrap_or("unknown")
            .to_owned(),
        compiler: "rustc".to_owned(),
        platform: platform(),
    }
}

/// `kubernetes_build_info`, registered on first use with its one constant sample.
fn build_info_metric() -> Option<&'static IntGaugeVec> {
    static METRIC: OnceLock<Option<IntGaugeVec>> = OnceLock::new();
    get_or_register(&METRIC, "kubernetes_build_info", || {
        let g = register(IntGaugeVec::new(
            Opts::new(
                "kubernetes_build_info",
                "A metric with a constant '1' value labeled by major, minor, git version, git \
                 commit, git tree state, build date, Go version, and compiler from which \
                 Kubernetes was built, and platform on which it is running.",
            ),
            &[
                "major",
                "minor",
                "git_version",
                "git_commit",
                "git_tree_state",
                "build_date",
                "go_version",
                "compiler",
                "platform",
            ],
        )?);
        let b = build_info();
        g.with_label_values(&[
            &b.major,
            &b.minor,
            &b.git_version,
            &b.git_commit,
            &b.git_tree_state,
            &b.build_date,
            &b.rustc_version,
            &b.compiler,
            &b.platform,
        ])
        .set(1);
        Ok(g)
    })
}

fn running_controllers() -> Option<&'static IntGaugeVec> {
    static METRIC: OnceLock<Option<IntGaugeVec>> = OnceLock::new();
    get_or_register(&METRIC, "running_managed_controllers", || {
        Ok(register(IntGaugeVec::new(
            Opts::new(
                "running_managed_controllers",
                "Indicates where instances of a controller are currently running",
            ),
            &["name", "manager"],
        )?))
    })
}

/// Registers `kubernetes_build_info` (idempotent). [`start`](super::start) calls it; call it directly when
/// serving is disabled but metrics are still gathered.
pub fn register_build_info() {
    build_info_metric();
}

/// Sets `running_managed_controllers{name, manager="kube-controller-manager"}` to 1 or 0.
pub fn set_controller_running(name: &str, running: bool) {
    if let Some(g) = running_controllers() {
        g.with_label_values(&[name, MANAGER_LABEL])
            .set(i64::from(running));
    }
}

/// `/metrics/slis` lives in its own registry, as upstream's does (so not the process one).
struct Slis {
    registry: Registry,
    healthcheck: IntGaugeVec,
    healthchecks_total: IntCounterVec,
}

impl Slis {
    fn build() -> prometheus::Result<Self> {
        let healthcheck = IntGaugeVec::new(
            Opts::new(
                "kubernetes_healthcheck",
                "This metric records the result of a single healthcheck.",
            ),
            &["name", "type"],
        )?;
        let healthchecks_total = IntCounterVec::new(
            Opts::new(
                "kubernetes_healthchecks_total",
                "This metric records the results of all healthcheck.",
            ),
            &["name", "type", "status"],
        )?;
        let registry = Registry::new();
        registry.register(Box::new(healthcheck.clone()))?;
        registry.register(Box::new(healthchecks_total.clone()))?;
        Ok(Self {
            registry,
            healthcheck,
            healthchecks_total,
        })
    }
}

fn slis() -> Option<&'static Slis> {
    static SLIS: OnceLock<Option<Slis>> = OnceLock::new();
    get_or_register(&SLIS, "slis", Slis::build)
}

pub(super) fn observe_slis(endpoint: &str, checks: &[CheckResult]) {
    let Some(slis) = slis() else { return };
    for (name, result) in checks {
        let ok = result.is_ok();
        slis.healthcheck
            .with_label_values(&[name.as_str(), endpoint])
            .set(i64::from(ok));
        slis.healthchecks_total
            .with_label_values(&[
                name.as_str(),
                endpoint,
                if ok { "success" } else { "error" },
            ])
            .inc();
    }
}

pub(super) fn render_slis() -> String {
    let mut buf = Vec::new();
    let families = slis().map(|s| s.registry.gather()).unwrap_or_default();
    if let Err(error) =
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &families, &mut buf)
    {
        tracing::warn!(%error, "encoding slis metrics failed");
    }
    String::from_utf8(buf).unwrap_or_default()
}
