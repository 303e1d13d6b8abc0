//! The HTTPS endpoints of the manager: `/healthz`, `/livez`, `/readyz`, `/metrics` and
//! `/metrics/slis`, plus the manager-level metrics that no controller owns
//! (`kubernetes_build_info`, `running_managed_controllers`).
//!
//! Mirrors k8s.io/controller-manager `app/serve.go` and k8s.io/apiserver `server/healthz`:
//! - HTTPS only (there is no insecure port upstream); `--secure-port=0` serves nothing.
//! - With `--tls-cert-file`/`--tls-private-key-file` those PEM files are used; otherwise an
//!   in-memory self-signed certificate is generated at start (names `localhost`,
//!   `127.0.0.1`, the hostname), as upstream does when no certificate is configured.
//! - An unspecified bind address (`0.0.0.0` or `::`) listens on all interfaces of both
//!   families, like Go's `net.Listen("tcp", "0.0.0.0:port")`.
//! - Health bodies are byte-compatible with upstream: `ok`, or per-check `[+]name ok` /
//!   `[-]name failed: reason withheld` lines and `<endpoint> check failed` with status 500;
//!   `?verbose` lists checks on success; `?exclude=name` skips a check. Failure reasons are
//!   withheld from the (unauthenticated) body and logged instead.
//!
//! - Every request is authenticated and authorized as upstream's `BuildHandlerChain` does
//!   ([`crate::auth`]): a credential that fails gets 401, a user who may not `get` the path
//!   gets 403 (bodies are upstream's `Status` JSON); `--authorization-always-allow-paths`
//!   (`/healthz,/readyz,/livez` by default, exact paths) need no authorization.
//! - Client certificates are requested (not required) when a client CA or request-header CA
//!   is configured, and verified by the authenticator, as Go's `RequestClientCert` does.
//! - `--tls-min-version` and `--tls-cipher-suites` restrict the TLS 1.2 offer (TLS 1.3 suites
//!   are not configurable, as in Go); `--cert-dir` keeps the self-signed pair on disk as
//!   `kube-controller-manager.crt`/`.key` and reuses it.
//!
//! Not served (optional upstream endpoints): `/debug/pprof/*`, `/debug/flags/v`. `/configz`
//! answers the part of upstream's component config that rkcm honours, in upstream's shape.

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use rkcm_runtime::metrics::{get_or_register, register};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::auth::{Decision, Delegation};

/// Name of the leader-election health check (upstream `leaderElection`).
pub const LEADER_ELECTION_CHECK: &str = "leaderElection";
/// Name of the readiness check that waits for informer caches.
pub const INFORMER_SYNC_CHECK: &str = "informer-sync";
/// Check shown when nothing else is registered (upstream `healthz.PingHealthz`).
pub const PING_CHECK: &str = "ping";
/// How long past the lease duration a leader may go without renewing before
/// `leaderElection` fails (upstream `NewLeaderHealthzAdaptor(20 * time.Second)`).
pub const LEADER_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);
/// Value of the `manager` label of `running_managed_controllers`: upstream's, so existing
/// dashboards and alerts select rkcm's controllers too.
pub const MANAGER_LABEL: &str = "kube-controller-manager";

/// Bound on a TLS handshake, so a client that connects and stays silent does not pin a task.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Errors of [`start`]: each names the step and the file or address involved.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("reading TLS file {path}: {source}")]
    ReadTls {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no certificate found in {path}")]
    NoCertificate { path: PathBuf },
    #[error("no private key found in {path}")]
    NoPrivateKey { path: PathBuf },
    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    IncompleteTlsPair,
    #[error("generating self-signed serving certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    #[error("building TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("{0}")]
    TlsFlags(String),
    #[error("listening on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Where and how to serve. `secure_port == 0` disables serving entirely.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub bind_address: IpAddr,
    pub secure_port: u16,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    /// `--cert-dir`: where the self-signed pair is kept; empty keeps it in memory.
    pub cert_dir: String,
    /// `--tls-min-version`.
    pub tls_min_version: Option<String>,
    /// `--tls-cipher-suites` (Go names).
    pub tls_cipher_suites: Vec<String>,
    /// The body of `/configz` (JSON).
    pub configz: String,
}

/// Upstream's name of the self-signed pair in `--cert-dir`.
const SELF_SIGNED_PAIR: &str = "kube-controller-manager";

// ---------------------------------------------------------------------------------------------
// Health state
// ---------------------------------------------------------------------------------------------

type CheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What the elector last told us (see [`Health::set_leader_observation`]).
#[derive(Clone, Copy, Debug)]
struct LeaderState {
    leading: bool,
    /// Local monotonic time the elector last observed the lease record change
    /// (client-go `observedTime`); for a leader this is its last successful renewal.
    observed_at: Instant,
    /// lease duration + [`LEADER_HEALTH_TOLERANCE`].
    tolerance: Duration,
}

#[derive(Default)]
struct HealthInner {
    ready: AtomicBool,
    /// `None` while leader election is not in use (`--leader-elect=false`, or before the
    /// elector is built).
    leader: Mutex<Option<LeaderState>>,
    checks: Mutex<Vec<(String, CheckFn)>>,
}

/// Shared health state behind `/healthz`, `/livez`, `/readyz`. Cheap to clone.
#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<HealthInner>,
}

/// The result of one check: `Err` carries the reason (logged, never served).
pub type CheckResult = (String, Result<(), String>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the data half-written (every
    // critical section is a single assignment or push), so poisoning carries no meaning.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Health {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records whether every informer used by an enabled controller has synced. Feeds the
    /// `informer-sync` readiness check.
    pub fn set_ready(&self, ready: bool) {
        self.inner.ready.store(ready, Ordering::Relaxed);
    }

    /// Registers a ping check named after a started controller (upstream
    /// `NamedPingChecker`). Re-registering a name replaces the earlier check.
    pub fn add_check(&self, name: impl Into<String>) {
        self.add_check_fn(name, || Ok(()));
    }

    /// Registers a real check; `Err(reason)` fails it (the reason is only logged).
    pub fn add_check_fn(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        let name = name.into();
        let mut checks = lock(&self.inner.checks);
        checks.retain(|(n, _)| *n != name);
        checks.push((name, Arc::new(check)));
    }

    /// Turns on the `leaderElection` check, initially as standby. Called by the elector.
    pub fn enable_leader_election(&self, lease_duration: Duration) {
        *lock(&self.inner.leader) = Some(LeaderState {
            leading: false,
            observed_at: Instant::now(),
            tolerance: lease_duration + LEADER_HEALTH_TOLERANCE,
        });
    }

    /// Called by the elector after every observation of the lease: whether the observed
    /// holder is us, and when the record was last observed to change. No-op unless
    /// [`Health::enable_leader_election`] was called.
    pub fn set_leader_observation(&self, leading: bool, observed_at: Instant) {
        if let Some(state) = lock(&self.inner.leader).as_mut() {
            state.leading = leading;
            state.observed_at = observed_at;
        }
    }

    /// True when leader election is off, or on and this process holds the lease.
    pub fn is_leading(&self) -> bool {
        lock(&self.inner.leader).is_none_or(|s| s.leading)
    }

    /// Runs the `/healthz` and `/livez` checks, in registration order.
    pub fn live_checks(&self, now: Instant) -> Vec<CheckResult> {
        let mut out = Vec::new();
        if let Some(state) = *lock(&self.inner.leader) {
            out.push((LEADER_ELECTION_CHECK.to_owned(), leader_check(state, now)));
        }
        // Clone the list so a slow check never runs under the lock.
        let checks: Vec<(String, CheckFn)> = lock(&self.inner.checks).clone();
        out.extend(checks.into_iter().map(|(name, check)| (name, check())));
        if out.is_empty() {
            out.push((PING_CHECK.to_owned(), Ok(())));
        }
        out
    }

    /// Runs the `/readyz` checks: the live checks plus `informer-sync`.
    pub fn ready_checks(&self, now: Instant) -> Vec<CheckResult> {
        let mut out = self.live_checks(now);
        let sync = if !self.is_leading() || self.inner.ready.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("informers not synced".to_owned())
        };
        out.push((INFORMER_SYNC_CHECK.to_owned(), sync));
        out
    }
}

/// Upstream `LeaderElector.Check`: only a leader that has gone without renewing for longer
/// than the lease duration plus the tolerance is unhealthy (it should have exited already,
/// so something is wedged). A standby always passes.
fn leader_check(state: LeaderState, now: Instant) -> Result<(), String> {
    if state.leading && now.saturating_duration_since(state.observed_at) > state.tolerance {
        Err("failed election to renew leadership on lease".to_owned())
    } else {
        Ok(())
    }
}

/// Options of a health request, from its query string.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct HealthQuery {
    pub verbose: bool,
    pub exclude: Vec<String>,
}

impl HealthQuery {
    pub fn parse(query: Option<&str>) -> Self {
        let mut out = Self::default();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match percent_decode(key).as_str() {
                "verbose" => out.verbose = true,
                "exclude" => out.exclude.push(percent_decode(value)),
                _ => {}
            }
        }
        out
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len()
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit() =>
            {
                // Both are ASCII hex digits, so the slice is on char boundaries and parses.
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Renders a health endpoint exactly like k8s.io/apiserver `healthz.handleRootHealth`.
/// `endpoint` is `healthz`, `livez` or `readyz`. Returns the status and the body; failing
/// checks' reasons are returned separately for the log.
pub fn render_health(
    endpoint: &str,
    checks: &[CheckResult],
    query: &HealthQuery,
) -> (StatusCode, String, Vec<(String, String)>) {
    let mut excluded: Vec<&str> = query.exclude.iter().map(String::as_str).collect();
    let mut lines = String::new();
    let mut failed = Vec::new();
    for (name, result) in checks {
        if let Some(pos) = excluded.iter().position(|e| e == name) {
            excluded.remove(pos);
            lines.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match result {
            Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                failed.push((name.clone(), reason.clone()));
            }
        }
    }
    let unmatched: HashSet<&str> = excluded.into_iter().collect();
    if !unmatched.is_empty() {
        let mut names: Vec<&str> = unmatched.into_iter().collect();
        names.sort_unstable();
        let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        lines.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            quoted.join(",")
        ));
    }
    if !failed.is_empty() {
        // Go's http.Error appends a newline.
        let body = format!("{lines}{endpoint} check failed\n");
        return (StatusCode::INTERNAL_SERVER_ERROR, body, failed);
    }
    if !query.verbose {
        return (StatusCode::OK, "ok".to_owned(), failed);
    }
    (
        StatusCode::OK,
        format!("{lines}{endpoint} check passed\n"),
        failed,
    )
}

// ---------------------------------------------------------------------------------------------
// Manager-level metrics
// ---------------------------------------------------------------------------------------------

/// Go-style names of the platform (`GOOS/GOARCH`), as upstream's `platform` label shows.
fn platform() -> String {
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

/// Registers `kubernetes_build_info` (idempotent). [`start`] calls it; call it directly when
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

fn observe_slis(endpoint: &str, checks: &[CheckResult]) {
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

fn render_slis() -> String {
    let mut buf = Vec::new();
    let families = slis().map(|s| s.registry.gather()).unwrap_or_default();
    if let Err(error) =
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &families, &mut buf)
    {
        tracing::warn!(%error, "encoding slis metrics failed");
    }
    String::from_utf8(buf).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------

fn text(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    // Upstream's cache-control filter: health and metrics must never be served from a cache.
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache, private"),
    );
    resp
}

const PLAIN: &str = "text/plain; charset=utf-8";

/// Answers one request. Pure apart from reading `health` and the metrics registries.
pub fn route(
    health: &Health,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Response<Full<Bytes>> {
    if method != Method::GET && method != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "method not allowed\n".to_owned(),
        );
    }
    let path = if path.len() > 1 {
        path.trim_end_matches('/')
    } else {
        path
    };
    match path {
        "/metrics" => text(
            StatusCode::OK,
            METRICS_CONTENT_TYPE,
            rkcm_runtime::metrics::render(),
        ),
        "/metrics/slis" => text(StatusCode::OK, METRICS_CONTENT_TYPE, render_slis()),
        _ => {
            let (endpoint, sub) = match path.trim_start_matches('/').split_once('/') {
                Some((e, s)) => (e, Some(s)),
                None => (path.trim_start_matches('/'), None),
            };
            let now = Instant::now();
            let checks = match endpoint {
                "healthz" | "livez" => health.live_checks(now),
                "readyz" => health.ready_checks(now),
                _ => {
                    return text(
                        StatusCode::NOT_FOUND,
                        PLAIN,
                        "404 page not found\n".to_owned(),
                    );
                }
            };
            observe_slis(endpoint, &checks);
            match sub {
                None => {
                    let (status, body, failed) =
                        render_health(endpoint, &checks, &HealthQuery::parse(query));
                    for (check, reason) in failed {
                        tracing::info!(endpoint, check, reason, "health check failed");
                    }
                    text(status, PLAIN, body)
                }
                // Upstream routes `/livez/<check>` and `/readyz/<check>`; we do it for
                // `/healthz` too (a superset: nothing upstream serves is missing).
                Some(name) => match checks.into_iter().find(|(n, _)| n == name) {
                    None => text(
                        StatusCode::NOT_FOUND,
                        PLAIN,
                        "404 page not found\n".to_owned(),
                    ),
                    Some((_, Ok(()))) => text(StatusCode::OK, PLAIN, "ok".to_owned()),
                    Some((_, Err(reason))) => text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        PLAIN,
                        format!("internal server error: {reason}\n"),
                    ),
                },
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ServeError> {
    std::fs::read(path).map_err(|source| ServeError::ReadTls {
        path: path.to_owned(),
        source,
    })
}

fn parse_pair(
    cert_path: &Path,
    cert_pem: &[u8],
    key_path: &Path,
    key_pem: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ServeError> {
    let certs = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ServeError::ReadTls {
            path: cert_path.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(ServeError::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let key = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|source| ServeError::ReadTls {
            path: key_path.to_owned(),
            source,
        })?
        .ok_or_else(|| ServeError::NoPrivateKey {
            path: key_path.to_owned(),
        })?;
    Ok((certs, key))
}

/// The certificate chain and key: from the PEM files, from `--cert-dir` (generated there
/// when missing, as upstream's `MaybeDefaultWithSelfSignedCerts`), or a fresh in-memory
/// self-signed pair.
fn load_identity(
    cfg: &ServeConfig,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ServeError> {
    match (&cfg.tls_cert_file, &cfg.tls_private_key_file) {
        (Some(cert_path), Some(key_path)) => {
            parse_pair(cert_path, &read(cert_path)?, key_path, &read(key_path)?)
        }
        (None, None) if !cfg.cert_dir.is_empty() => {
            let dir = Path::new(&cfg.cert_dir);
            let cert_path = dir.join(format!("{SELF_SIGNED_PAIR}.crt"));
            let key_path = dir.join(format!("{SELF_SIGNED_PAIR}.key"));
            if cert_path.exists() && key_path.exists() {
                return parse_pair(&cert_path, &read(&cert_path)?, &key_path, &read(&key_path)?);
            }
            let (cert_pem, key_pem) = self_signed_pem()?;
            let write = |path: &Path, data: &str| {
                std::fs::create_dir_all(dir)
                    .and_then(|()| std::fs::write(path, data))
                    .map_err(|source| ServeError::ReadTls {
                        path: path.to_owned(),
                        source,
                    })
            };
            write(&cert_path, &cert_pem)?;
            write(&key_path, &key_pem)?;
            tracing::info!(cert = %cert_path.display(), "generated self-signed serving certificate");
            parse_pair(
                &cert_path,
                cert_pem.as_bytes(),
                &key_path,
                key_pem.as_bytes(),
            )
        }
        (None, None) => {
            let (cert_pem, key_pem) = self_signed_pem()?;
            parse_pair(
                Path::new("self-signed"),
                cert_pem.as_bytes(),
                Path::new("self-signed"),
                key_pem.as_bytes(),
            )
        }
        _ => Err(ServeError::IncompleteTlsPair),
    }
}

/// A self-signed serving pair as PEM (certificate, key).
fn self_signed_pem() -> Result<(String, String), ServeError> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    // A hostname that is not a valid DNS name would make rcgen reject the whole request;
    // the certificate is self-signed and unverifiable anyway, so just leave it out.
    if !host.is_empty()
        && host != "localhost"
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        names.push(host);
    }
    let mut params = rcgen::CertificateParams::new(names)?;
    // Upstream names the self-signed pair `localhost@<unix seconds>`.
    let now = jiff::Timestamp::now().as_second();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("localhost@{now}"));
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Requests a client certificate without requiring or judging it (Go's
/// `tls.RequestClientCert`): the authenticator verifies it against the right CA per request.
/// Handshake signatures are still checked, so a client cannot present a certificate whose
/// key it does not hold.
#[derive(Debug)]
struct RequestClientCert {
    hints: Vec<rustls::DistinguishedName>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::server::danger::ClientCertVerifier for RequestClientCert {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &self.hints
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn tls_acceptor(
    cfg: &ServeConfig,
    client_cert_hints: Option<Vec<rustls::DistinguishedName>>,
) -> Result<TlsAcceptor, ServeError> {
    let (certs, key) = load_identity(cfg)?;
    // An explicit provider: the process-wide default may be unset (or ambiguous if another
    // crate enables a second provider).
    let mut provider = rustls::crypto::ring::default_provider();
    let tls12 =
        crate::cli::allows_tls12(cfg.tls_min_version.as_deref()).map_err(ServeError::TlsFlags)?;
    let wanted = crate::cli::tls12_suites(&cfg.tls_cipher_suites).map_err(ServeError::TlsFlags)?;
    if !cfg.tls_cipher_suites.is_empty() {
        if wanted.is_empty() && tls12 {
            return Err(ServeError::TlsFlags(
                "--tls-cipher-suites names no TLS 1.2 suite this server implements".to_owned(),
            ));
        }
        provider.cipher_suites.retain(|s| match s {
            rustls::SupportedCipherSuite::Tls13(_) => true,
            rustls::SupportedCipherSuite::Tls12(_) => wanted.contains(&s.suite()),
        });
    }
    let provider = Arc::new(provider);
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13]
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)?;
    let builder = match client_cert_hints {
        Some(hints) => {
            builder.with_client_cert_verifier(Arc::new(RequestClientCert { hints, provider }))
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn bind(cfg: &ServeConfig) -> Result<std::net::TcpListener, ServeError> {
    let addr = SocketAddr::new(cfg.bind_address, cfg.secure_port);
    if cfg.bind_address.is_unspecified() {
        // Go listens dual-stack on an unspecified address; `[::]` does that on Linux. Fall
        // back to IPv4 only when IPv6 is unavailable.
        let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), cfg.secure_port);
        if let Ok(listener) = std::net::TcpListener::bind(v6) {
            return Ok(listener);
        }
    }
    std::net::TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })
}

/// Starts serving on `bind_address:secure_port` and returns the accept loop's task.
/// Binding happens before returning, so a busy port is an error here, not in the task.
/// With `secure_port == 0` nothing is served and the returned task finishes at once.
/// Must be called inside a tokio runtime.
pub fn start(
    cfg: ServeConfig,
    health: Health,
    delegation: Delegation,
) -> Result<tokio::task::JoinHandle<()>, ServeError> {
    register_build_info();
    if cfg.secure_port == 0 {
        tracing::info!("secure port is 0, not serving");
        return Ok(tokio::spawn(async {}));
    }
    let acceptor = tls_acceptor(&cfg, delegation.authn.client_cert_hints())?;
    let std_listener = bind(&cfg)?;
    let local = std_listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::new(cfg.bind_address, cfg.secure_port));
    std_listener
        .set_nonblocking(true)
        .map_err(|source| ServeError::Bind {
            addr: local,
            source,
        })?;
    let listener =
        tokio::net::TcpListener::from_std(std_listener).map_err(|source| ServeError::Bind {
            addr: local,
            source,
        })?;
    tracing::info!(address = %local, self_signed = cfg.tls_cert_file.is_none(), "serving securely");
    let shared = Arc::new(Shared {
        health,
        delegation,
        configz: cfg.configz,
    });
    Ok(tokio::spawn(accept_loop(listener, acceptor, shared)))
}

/// What every connection needs.
struct Shared {
    health: Health,
    delegation: Delegation,
    configz: String,
}

/// Upstream's `Status` error body (`apierrors.NewUnauthorized` / `NewForbidden`).
fn status_error(code: StatusCode, reason: &str, message: &str) -> Response<Full<Bytes>> {
    let details = if code == StatusCode::FORBIDDEN {
        ",\"details\":{}"
    } else {
        ""
    };
    let body = format!(
        "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\
         \"message\":{},\"reason\":\"{reason}\"{details},\"code\":{}}}\n",
        serde_json::Value::String(message.to_owned()),
        code.as_u16()
    );
    text(code, "application/json", body)
}

/// The handler chain of one request: authenticate, authorize, then route.
async fn handle(
    shared: &Shared,
    method: &Method,
    headers: &http::HeaderMap,
    path: &str,
    query: Option<&str>,
    chain: Option<&[CertificateDer<'static>]>,
) -> Response<Full<Bytes>> {
    let user = match shared.delegation.authn.authenticate(headers, chain).await {
        Ok(user) => user,
        Err(reason) => {
            tracing::info!(path, reason, "unable to authenticate the request");
            return status_error(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
    };
    // Non-resource request: the verb is the lower-cased method (upstream RequestInfo).
    let verb = method.as_str().to_ascii_lowercase();
    match shared.delegation.authz.authorize(&user, &verb, path).await {
        Decision::Allow => {}
        Decision::Deny(reason) | Decision::NoOpinion(reason) => {
            tracing::debug!(path, user = user.name, reason, "forbidden");
            let mut message = format!(
                "forbidden: User {:?} cannot {verb} path {path:?}",
                user.name
            );
            if !reason.is_empty() {
                message.push_str(": ");
                message.push_str(&reason);
            }
            return status_error(StatusCode::FORBIDDEN, "Forbidden", &message);
        }
    }
    if path == "/configz" && (method == Method::GET || method == Method::HEAD) {
        return text(StatusCode::OK, "application/json", shared.configz.clone());
    }
    route(&shared.health, method, path, query)
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(error) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(%error, "accepting connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let tls =
                match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, %error, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let chain: Option<Arc<Vec<CertificateDer<'static>>>> = tls
                .get_ref()
                .1
                .peer_certificates()
                .map(|c| Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()));
            let service = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                let chain = chain.clone();
                async move {
                    let resp = handle(
                        &shared,
                        req.method(),
                        req.headers(),
                        req.uri().path(),
                        req.uri().query(),
                        chain.as_deref().map(Vec::as_slice),
                    )
                    .await;
                    Ok::<_, Infallible>(resp)
                }
            });
            if let Err(error) = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await
            {
                tracing::debug!(%peer, %error, "serving connection failed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(name: &str) -> CheckResult {
        (name.to_owned(), Ok(()))
    }
    fn bad(name: &str) -> CheckResult {
        (name.to_owned(), Err("boom".to_owned()))
    }

    #[test]
    fn all_ok_is_plain_ok() {
        let (status, body, failed) =
            render_health("healthz", &[ok("ping")], &HealthQuery::default());
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "ok");
        assert!(failed.is_empty());
    }

    #[test]
    fn verbose_lists_checks() {
        let q = HealthQuery::parse(Some("verbose"));
        let (status, body, _) =
            render_health("livez", &[ok("leaderElection"), ok("job-controller")], &q);
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body,
            "[+]leaderElection ok\n[+]job-controller ok\nlivez check passed\n"
        );
    }

    #[test]
    fn failure_withholds_reason() {
        let (status, body, failed) = render_health(
            "healthz",
            &[bad("leaderElection"), ok("job-controller")],
            &HealthQuery::default(),
        );
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body,
            "[-]leaderElection failed: reason withheld\n[+]job-controller ok\nhealthz check failed\n"
        );
        assert_eq!(
            failed,
            vec![("leaderElection".to_owned(), "boom".to_owned())]
        );
    }

    #[test]
    fn exclude_skips_a_failing_check() {
        let q = HealthQuery::parse(Some("exclude=leaderElection&verbose=1"));
        let (status, body, _) =
            render_health("readyz", &[bad("leaderElection"), ok("informer-sync")], &q);
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body,
            "[+]leaderElection excluded: ok\n[+]informer-sync ok\nreadyz check passed\n"
        );
    }

    #[test]
    fn excluding_unknown_check_warns() {
        let q = HealthQuery::parse(Some("exclude=nope&exclude=ping&verbose"));
        let (_, body, _) = render_health("healthz", &[ok("ping")], &q);
        assert_eq!(
            body,
            "[+]ping excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"
        );
    }

    #[test]
    fn query_parsing() {
        assert_eq!(
            HealthQuery::parse(Some("verbose&exclude=a%2Db&exclude=c")),
            HealthQuery {
                verbose: true,
                exclude: vec!["a-b".into(), "c".into()]
            }
        );
        assert_eq!(HealthQuery::parse(None), HealthQuery::default());
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("a%4"), "a%4");
        assert_eq!(percent_decode("%41"), "A");
    }

    #[test]
    fn ping_only_without_other_checks() {
        let h = Health::new();
        let checks = h.live_checks(Instant::now());
        assert_eq!(checks, vec![ok("ping")]);
        h.add_check("podgc");
        h.add_check("podgc");
        assert_eq!(h.live_checks(Instant::now()), vec![ok("podgc")]);
    }

    #[tokio::test(start_paused = true)]
    async fn leader_check_fails_only_for_a_stale_leader() {
        let h = Health::new();
        h.enable_leader_election(Duration::from_secs(15));
        let t0 = Instant::now();
        // Standby: passes however old the observation.
        tokio::time::advance(Duration::from_secs(100)).await;
        assert_eq!(h.live_checks(Instant::now())[0], ok(LEADER_ELECTION_CHECK));

        h.set_leader_observation(true, t0);
        // 100 s > 15 s + 20 s since the last renewal.
        assert!(h.live_checks(Instant::now())[0].1.is_err());

        h.set_leader_observation(true, Instant::now());
        tokio::time::advance(Duration::from_secs(35)).await;
        assert!(
            h.live_checks(Instant::now())[0].1.is_ok(),
            "exactly the tolerance still passes"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(h.live_checks(Instant::now())[0].1.is_err());
    }

    #[test]
    fn readiness_passes_for_standby_or_synced_leader() {
        let h = Health::new();
        // Election off: we lead, so readiness waits for caches.
        assert!(
            h.ready_checks(Instant::now())
                .last()
                .is_some_and(|c| c.1.is_err())
        );
        h.enable_leader_election(Duration::from_secs(15));
        assert!(
            h.ready_checks(Instant::now())
                .last()
                .is_some_and(|c| c.1.is_ok())
        );
        h.set_leader_observation(true, Instant::now());
        assert!(
            h.ready_checks(Instant::now())
                .last()
                .is_some_and(|c| c.1.is_err())
        );
        h.set_ready(true);
        let checks = h.ready_checks(Instant::now());
        assert_eq!(checks.last(), Some(&ok(INFORMER_SYNC_CHECK)));
    }

    #[test]
    fn routes() {
        let h = Health::new();
        let r = route(&h, &Method::GET, "/healthz", None);
        assert_eq!(r.status(), StatusCode::OK);
        let r = route(&h, &Method::GET, "/readyz", Some("verbose"));
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let r = route(&h, &Method::GET, "/livez/ping", None);
        assert_eq!(r.status(), StatusCode::OK);
        let r = route(&h, &Method::GET, "/livez/nope", None);
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = route(&h, &Method::GET, "/nope", None);
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = route(&h, &Method::POST, "/healthz", None);
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        let r = route(&h, &Method::GET, "/metrics", None);
        assert_eq!(
            r.headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
            Some(METRICS_CONTENT_TYPE)
        );
    }

    #[test]
    fn manager_metrics_render() {
        register_build_info();
        set_controller_running("job-controller", true);
        let body = rkcm_runtime::metrics::render();
        assert!(body.contains("kubernetes_build_info{"), "{body}");
        assert!(body.contains("compiler=\"rustc\""));
        assert!(body.contains(
            "running_managed_controllers{manager=\"kube-controller-manager\",name=\"job-controller\"} 1"
        ));
    }

    #[test]
    fn platform_uses_go_names() {
        let p = platform();
        assert!(p.starts_with("linux/") || !cfg!(target_os = "linux"));
        if cfg!(target_arch = "x86_64") {
            assert_eq!(p, "linux/amd64");
        }
    }

    #[test]
    fn cert_dir_keeps_the_self_signed_pair() {
        let dir = std::env::temp_dir().join(format!("rkcm-cert-dir-{}", uuid::Uuid::new_v4()));
        let cfg = ServeConfig {
            bind_address: IpAddr::from([127, 0, 0, 1]),
            secure_port: 1,
            tls_cert_file: None,
            tls_private_key_file: None,
            cert_dir: dir.display().to_string(),
            tls_min_version: None,
            tls_cipher_suites: vec![],
            configz: String::new(),
        };
        let (first, _) = load_identity(&cfg).expect("generated");
        assert!(dir.join("kube-controller-manager.crt").exists());
        assert!(dir.join("kube-controller-manager.key").exists());
        let (again, _) = load_identity(&cfg).expect("reused");
        assert_eq!(first, again, "the pair on disk is reused, not regenerated");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn tls_min_version_13_refuses_a_tls12_client() {
        let cfg = ServeConfig {
            bind_address: IpAddr::from([127, 0, 0, 1]),
            secure_port: 1,
            tls_cert_file: None,
            tls_private_key_file: None,
            cert_dir: String::new(),
            tls_min_version: Some("VersionTLS13".into()),
            tls_cipher_suites: vec![],
            configz: String::new(),
        };
        let acceptor = tls_acceptor(&cfg, None).expect("acceptor");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let _ = acceptor.accept(s).await;
            }
        });
        let handshake = |versions: &'static [&'static rustls::SupportedProtocolVersion]| async move {
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_protocol_versions(versions)
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer))
            .with_no_client_auth();
            let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
            tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await
                .is_ok()
        };
        static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
        static TLS12_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
        assert!(handshake(TLS13_ONLY).await);
        assert!(!handshake(TLS12_ONLY).await);
    }

    /// Trusts any server certificate (checks handshake signatures only).
    #[derive(Debug)]
    struct AnyServer;

    impl rustls::client::danger::ServerCertVerifier for AnyServer {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                m,
                c,
                d,
                &rustls::crypto::ring::default_provider().signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                m,
                c,
                d,
                &rustls::crypto::ring::default_provider().signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }

    #[test]
    fn self_signed_identity_builds_a_tls_config() {
        let cfg = ServeConfig {
            bind_address: IpAddr::from([127, 0, 0, 1]),
            secure_port: 1,
            tls_cert_file: None,
            tls_private_key_file: None,
            cert_dir: String::new(),
            tls_min_version: None,
            tls_cipher_suites: vec![],
            configz: String::new(),
        };
        assert!(tls_acceptor(&cfg, None).is_ok());
        assert!(tls_acceptor(&cfg, Some(vec![])).is_ok());
        let half = ServeConfig {
            tls_cert_file: Some("/nonexistent".into()),
            ..cfg.clone()
        };
        assert!(matches!(
            tls_acceptor(&half, None),
            Err(ServeError::IncompleteTlsPair)
        ));
        let only_cbc = ServeConfig {
            tls_cipher_suites: vec!["TLS_RSA_WITH_AES_128_CBC_SHA".into()],
            ..cfg.clone()
        };
        assert!(matches!(
            tls_acceptor(&only_cbc, None),
            Err(ServeError::TlsFlags(_))
        ));
        let tls13 = ServeConfig {
            tls_min_version: Some("VersionTLS13".into()),
            ..cfg
        };
        assert!(tls_acceptor(&tls13, None).is_ok());
    }
}
