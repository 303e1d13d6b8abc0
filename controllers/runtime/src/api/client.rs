//! API clients built the way kube-controller-manager builds them (client-go `rest` and
//! `tools/clientcmd`).
//!
//! Guarantees:
//! - [`build_config`] resolves `--kubeconfig` / `--master` exactly like client-go
//!   `BuildConfigFromFlags`: both empty → in-cluster config (with a warning), otherwise only
//!   the explicit kubeconfig path is read — never `KUBECONFIG` nor `~/.kube/config` — and
//!   `--master` overrides its server URL.
//! - [`make_client`] gives every logical client (one per controller, one for the shared
//!   informers, one for leader election) its **own** token bucket of `qps`/`burst`
//!   ([`crate::queue::flowcontrol::client_limiter`]), as upstream's per-controller client builder
//!   does. Every request waits for a token except the first attempt of a watch (`watch=true`
//!   in the query), which client-go does not throttle either; watch re-establishment is paced
//!   by the informer backoff instead.
//! - Responses 429, or 5xx carrying `Retry-After`, are retried after the advertised delay, at
//!   most [`MAX_RETRIES`] times, throttled again on every retry — client-go `rest.Request`
//!   semantics. This applies to every verb, as in client-go: a server that answers with
//!   `Retry-After` did not process the request. Requests whose body cannot be replayed (none
//!   that kube builds today) are not retried. kube's own retry layer is switched off so the
//!   two do not multiply.
//! - With client-go's `ClientsAllowCARotation` on ([`set_ca_rotation`], on by default as
//!   upstream), a CA given as a file (the kubeconfig's `certificate-authority` without
//!   `-data`, or the in-cluster ServiceAccount's `ca.crt`) is re-read while the process runs
//!   (client-go `transport/ca_rotation.go`): new connections trust the bundle the file holds
//!   then, so a rotated CA needs no restart. kube re-reads the file at most once a minute
//!   (upstream every five), keeping the last good bundle when the file is unreadable.
//! - Each client sends `User-Agent: rkcm/<version> (<os>/<arch>) <client-name>` so apiserver
//!   audit logs attribute requests to the controller, as upstream's do.
//! - Metrics with upstream names and buckets, registered once in
//!   [`crate::metrics::registry`]: `rest_client_requests_total{code,method,host}`,
//!   `rest_client_request_duration_seconds{verb,host}`,
//!   `rest_client_rate_limiter_duration_seconds{verb,host}`,
//!   `rest_client_request_size_bytes{verb,host}`, `rest_client_response_size_bytes{verb,host}`.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Request, Response, StatusCode, header};
use kube::client::{Body, ClientBuilder};
use kube::config::{KubeConfigOptions, Kubeconfig};
use parking_lot::Mutex;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use tokio::time::Instant;
use tower::{BoxError, Layer, Service};

use crate::error::Error;
use crate::explain::decisions;
use crate::queue::flowcontrol::{RateLimiter, client_limiter};

use super::service::call_inner;
pub use super::service::is_watch;

/// client-go `rest.Request` retries a `Retry-After` response at most this many times.
pub const MAX_RETRIES: u32 = 10;

/// The flags that decide how the process reaches the apiserver.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientOptions {
    /// `--kubeconfig`: the only kubeconfig file consulted.
    pub kubeconfig: Option<PathBuf>,
    /// `--master`: overrides the kubeconfig's server URL.
    pub master: Option<String>,
    /// `--kube-api-qps`: token refill rate per client. 0 → [`crate::queue::flowcontrol::DEFAULT_QPS`]; < 0 → no limit.
    pub qps: f32,
    /// `--kube-api-burst`: token bucket size per client. 0 → [`crate::queue::flowcontrol::DEFAULT_BURST`].
    pub burst: u32,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            master: None,
            qps: 20.0,
            burst: 30,
        }
    }
}

/// client-go's `ClientsAllowCARotation` gate, process-wide as there.
static CA_ROTATION: AtomicBool = AtomicBool::new(true);

/// Sets `ClientsAllowCARotation` for every config [`build_config`] builds from now on.
pub fn set_ca_rotation(enabled: bool) {
    CA_ROTATION.store(enabled, Ordering::Relaxed);
}

/// The CA file of the kubeconfig's current cluster, when its CA comes from a file only
/// (client-go reloads only then: `CAFile` set and `CAData` empty). kube has made the path
/// absolute.
pub fn ca_file(kubeconfig: &Kubeconfig) -> Option<PathBuf> {
    let context = kubeconfig.current_context.as_deref()?;
    let cluster = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)?
        .context
        .as_ref()?
        .cluster
        .clone();
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster)?
        .cluster
        .as_ref()?;
    if cluster
        .certificate_authority_data
        .as_deref()
        .is_some_and(|d| !d.is_empty())
    {
        return None;
    }
    cluster
        .certificate_authority
        .as_deref()
        .filter(|f| !f.is_empty())
        .map(PathBuf::from)
}

/// Resolves the client configuration from `--kubeconfig` and `--master`, mirroring client-go
/// `clientcmd.BuildConfigFromFlags`; see [`set_ca_rotation`] for the CA file.
pub async fn build_config(opts: &ClientOptions) -> Result<kube::Config, Error> {
    let mut config = resolve_config(opts).await?;
    if !CA_ROTATION.load(Ordering::Relaxed) {
        // kube sets it for the in-cluster config; the gate off reads the CA once.
        config.root_cert_file = None;
    }
    Ok(config)
}

async fn resolve_config(opts: &ClientOptions) -> Result<kube::Config, Error> {
    let kubeconfig = opts
        .kubeconfig
        .as_ref()
        .filter(|p| !p.as_os_str().is_empty());
    let master = opts.master.as_deref().filter(|m| !m.is_empty());

    if kubeconfig.is_none() && master.is_none() {
        tracing::warn!(
            "neither --kubeconfig nor --master was specified, using the in-cluster config; this might not work"
        );
        match kube::Config::incluster() {
            Ok(config) => return Ok(config),
            Err(err) => {
                // client-go falls back to loading rules with no explicit path, which yields
                // an empty config and fails; we fail directly with both reasons.
                return Err(Error::Config(format!(
                    "no configuration has been provided: neither --kubeconfig nor --master was \
                     specified and the in-cluster config is unavailable ({err}); note that \
                     KUBECONFIG and ~/.kube/config are deliberately not consulted"
                )));
            }
        }
    }

    let mut config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|err| {
                Error::Config(format!("reading kubeconfig {}: {err}", path.display()))
            })?;
            let ca = ca_file(&file);
            let mut config =
                kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                    .await
                    .map_err(|err| {
                        Error::Config(format!("loading kubeconfig {}: {err}", path.display()))
                    })?;
            config.root_cert_file = ca;
            config
        }
        None => {
            // `--master` alone: an unauthenticated config pointing at that URL.
            let url = master.unwrap_or_default();
            kube::Config::new(parse_master(url, false)?)
        }
    };
    if let Some(url) = master {
        let tls = config.root_cert.is_some()
            || config.accept_invalid_certs
            || config.auth_info.client_certificate.is_some()
            || config.auth_info.client_certificate_data.is_some();
        config.cluster_url = parse_master(url, tls)?;
    }
    Ok(config)
}

/// client-go `DefaultServerURL`: a bare `host[:port]` gets `https://` when the config carries
/// TLS material (a CA, a client certificate, or insecure-skip-verify), `http://` otherwise.
fn parse_master(url: &str, default_tls: bool) -> Result<http::Uri, Error> {
    let with_scheme = if url.contains("://") {
        url.to_string()
    } else if default_tls {
        format!("https://{url}")
    } else {
        format!("http://{url}")
    };
    with_scheme
        .parse::<http::Uri>()
        .map_err(|err| Error::Config(format!("invalid --master {url:?}: {err}")))
}

/// Builds a client of its own for `client_name` (a controller name, `shared-informers`,
/// `leader-election`, ...): its own token bucket, user agent and `rest_client_*` metrics.
pub fn make_client(
    config: &kube::Config,
    opts: &ClientOptions,
    client_name: &str,
) -> Result<kube::Client, Error> {
    make_client_limited(config, client_name, client_limiter(opts.qps, opts.burst))
}

/// [`make_client`] with the token bucket given (`None`: unlimited), so the caller can also
/// hand it to whoever paces work by the client's budget
/// ([`crate::queue::pacing::StatusPacer::with_budget`]).
pub fn make_client_limited(
    config: &kube::Config,
    client_name: &str,
    limiter: Option<Arc<RateLimiter>>,
) -> Result<kube::Client, Error> {
    make_client_fenced(config, client_name, limiter, None)
}

/// [`make_client_limited`]; with `fence` (sharded mode), behind the shard write fence
/// ([`crate::shard::fence`]): a write of a namespaced object is sent only while this replica's
/// window on the namespace's range is open, refused before it takes a token otherwise.
pub fn make_client_fenced(
    config: &kube::Config,
    client_name: &str,
    limiter: Option<Arc<RateLimiter>>,
    fence: Option<Arc<crate::shard::Shards>>,
) -> Result<kube::Client, Error> {
    let mut config = config.clone();
    // Our layer implements client-go's Retry-After handling; kube's own retry would run
    // beneath it, unthrottled and with different rules.
    config.default_retry = false;
    let layer = RestClientLayer::new(
        limiter,
        user_agent(client_name),
        host_label(&config.cluster_url),
    );
    let builder = ClientBuilder::try_from(config)
        .map_err(|err| Error::Config(format!("building API client {client_name}: {err}")))?;
    // Innermost of ours: a request throttled by the token bucket holds no permit yet.
    let builder = builder
        .with_layer(&super::inflight::InflightLayer::configured())
        .with_layer(&layer);
    Ok(match fence {
        None => builder.build(),
        Some(shards) => builder
            .with_layer(&crate::shard::FenceLayer::new(shards))
            .build(),
    })
}

/// `rkcm/<version> (<os>/<arch>) <client-name>`, with Go's os/arch spelling so tooling that
/// parses upstream user agents keeps working.
pub fn user_agent(client_name: &str) -> HeaderValue {
    let arch = go_arch();
    let ua = format!(
        "rkcm/{} ({}/{}) {}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        arch,
        client_name
    );
    // Controller names are ASCII; fall back rather than fail on an odd name.
    HeaderValue::from_str(&ua).unwrap_or_else(|_| HeaderValue::from_static("rkcm"))
}

/// This machine's architecture as Go spells it (`GOARCH`), which upstream tooling expects.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        other => other,
    }
}

fn host_label(url: &http::Uri) -> String {
    url.authority().map(|a| a.to_string()).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Metrics

const LATENCY_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];
const SIZE_BUCKETS: &[f64] = &[
    64.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0,
];

struct RestMetrics {
    requests_total: IntCounterVec,
    request_duration: HistogramVec,
    rate_limiter_duration: HistogramVec,
    request_size: HistogramVec,
    response_size: HistogramVec,
}

impl RestMetrics {
    fn build() -> prometheus::Result<Self> {
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            HistogramVec::new(
                HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                &["verb", "host"],
            )
            .map(crate::metrics::register)
        };
        Ok(Self {
            requests_total: crate::metrics::register(IntCounterVec::new(
                Opts::new(
                    "rest_client_requests_total",
                    "Number of HTTP requests, partitioned by status code, method, and host.",
                ),
                &["code", "method", "host"],
            )?),
            request_duration: histogram(
                "rest_client_request_duration_seconds",
                "Request latency in seconds. Broken down by verb, and host.",
                LATENCY_BUCKETS,
            )?,
            rate_limiter_duration: histogram(
                "rest_client_rate_limiter_duration_seconds",
                "Client side rate limiter latency in seconds. Broken down by verb, and host.",
                LATENCY_BUCKETS,
            )?,
            request_size: histogram(
                "rest_client_request_size_bytes",
                "Request size in bytes. Broken down by verb and host.",
                SIZE_BUCKETS,
            )?,
            response_size: histogram(
                "rest_client_response_size_bytes",
                "Response size in bytes. Broken down by verb and host.",
                SIZE_BUCKETS,
            )?,
        })
    }
}

fn rest_metrics() -> Option<&'static RestMetrics> {
    static METRICS: OnceLock<Option<RestMetrics>> = OnceLock::new();
    crate::metrics::get_or_register(&METRICS, "rest_client", RestMetrics::build)
}

// ---------------------------------------------------------------------------------------
// Tower layer

/// Rate limiting, `Retry-After` retries, user agent and `rest_client_*` metrics for one
/// client. Apply with [`ClientBuilder::with_layer`] (outermost, so every logical request
/// passes the bucket once per attempt).
#[derive(Clone)]
pub struct RestClientLayer {
    shared: Arc<Shared>,
}

#[derive(Clone)]
struct Shared {
    limiter: Option<Arc<RateLimiter>>,
    user_agent: HeaderValue,
    host: String,
    credential: Option<Arc<dyn Credential>>,
}

/// Supplies the `Authorization` header of every attempt of a client built with
/// [`RestClientLayer::with_credential`] (a ServiceAccount's token, for
/// `--use-service-account-credentials`).
pub trait Credential: Send + Sync + 'static {
    /// The header value for the next attempt.
    fn header(&self) -> Pin<Box<dyn Future<Output = Result<HeaderValue, BoxError>> + Send + '_>>;
    /// The server answered 401: what is cached is no longer good.
    fn reset(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

impl RestClientLayer {
    pub fn new(limiter: Option<Arc<RateLimiter>>, user_agent: HeaderValue, host: String) -> Self {
        Self {
            shared: Arc::new(Shared {
                limiter,
                user_agent,
                host,
                credential: None,
            }),
        }
    }

    /// Every attempt carries `Authorization` from `credential`; a 401 resets it.
    #[must_use]
    pub fn with_credential(self, credential: Arc<dyn Credential>) -> Self {
        let mut shared = (*self.shared).clone();
        shared.credential = Some(credential);
        Self {
            shared: Arc::new(shared),
        }
    }
}

impl<S> Layer<S> for RestClientLayer {
    type Service = RestClientService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestClientService {
            inner: Arc::new(Mutex::new(inner)),
            shared: self.shared.clone(),
        }
    }
}

/// The service of [`RestClientLayer`].
///
/// The inner service sits behind a mutex because a retry must call it again from inside the
/// response future; the lock is held only for `poll_ready` + `call`, never across an await.
pub struct RestClientService<S> {
    inner: Arc<Mutex<S>>,
    shared: Arc<Shared>,
}

impl<S> Clone for RestClientService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl<S, B> Service<Request<Body>> for RestClientService<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Response<B>, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness of the inner service is awaited per attempt inside the future.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let shared = self.shared.clone();
        Box::pin(async move {
            // A recorded sync's writes are its last decision's actions (`rkcm explain
            // --manager`). Checked here, in the task of the caller that awaits the answer.
            let write = decisions::write_of(req.method(), req.uri());
            let result = send(inner, shared, req).await;
            if let Some(write) = write {
                match &result {
                    Ok(resp) => {
                        decisions::note_action(format!("{write}: {}", resp.status().as_u16()))
                    }
                    Err(err) => decisions::note_action(format!("{write}: {err}")),
                }
            }
            result
        })
    }
}

async fn send<S, B>(
    inner: Arc<Mutex<S>>,
    shared: Arc<Shared>,
    mut req: Request<Body>,
) -> Result<Response<B>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    let metrics = rest_metrics();
    let host = shared.host.as_str();
    if !req.headers().contains_key(header::USER_AGENT) {
        req.headers_mut()
            .insert(header::USER_AGENT, shared.user_agent.clone());
    }
    let method = req.method().clone();
    let verb = method.as_str();
    let watch = is_watch(req.uri());

    let mut attempt = 0u32;
    loop {
        // client-go throttles every request except the first attempt of a watch.
        if let Some(limiter) = &shared.limiter
            && (!watch || attempt > 0)
        {
            let waited = limiter.acquire().await;
            if let Some(m) = metrics {
                m.rate_limiter_duration
                    .with_label_values(&[verb, host])
                    .observe(waited.as_secs_f64());
            }
            if waited > Duration::from_secs(1) {
                tracing::debug!(
                    verb,
                    path = req.uri().path(),
                    waited_ms = waited.as_millis() as u64,
                    "client-side throttling"
                );
            }
        }

        if let Some(credential) = &shared.credential {
            let value = credential.header().await?;
            req.headers_mut().insert(header::AUTHORIZATION, value);
        }
        let replay = if attempt < MAX_RETRIES {
            clone_request(&req)
        } else {
            None
        };
        if let Some(body) = req.body().try_clone() {
            // A replayable body is in memory: collecting it is a refcount bump.
            if let (Some(m), Ok(bytes)) = (metrics, body.collect_bytes().await) {
                m.request_size
                    .with_label_values(&[verb, host])
                    .observe(bytes.len() as f64);
            }
        }

        let start = Instant::now();
        let result = call_inner(&inner, req).await;
        if let Some(m) = metrics {
            m.request_duration
                .with_label_values(&[verb, host])
                .observe(start.elapsed().as_secs_f64());
        }

        let resp = match result {
            Ok(resp) => resp,
            Err(err) => {
                if let Some(m) = metrics {
                    m.requests_total
                        .with_label_values(&["<error>", verb, host])
                        .inc();
                }
                return Err(err);
            }
        };
        let status = resp.status();
        if let (Some(credential), StatusCode::UNAUTHORIZED) = (&shared.credential, status) {
            credential.reset().await;
        }
        if let Some(m) = metrics {
            m.requests_total
                .with_label_values(&[status.as_str(), verb, host])
                .inc();
        }

        match (retry_after(&resp), replay) {
            (Some(delay), Some(next)) => {
                tracing::debug!(
                    verb,
                    path = next.uri().path(),
                    status = status.as_u16(),
                    delay_s = delay.as_secs(),
                    attempt = attempt + 1,
                    "retrying after server-advised delay"
                );
                drop(resp);
                tokio::time::sleep(delay).await;
                req = next;
                attempt += 1;
            }
            _ => {
                if let (Some(m), Some(len)) = (metrics, content_length(&resp)) {
                    m.response_size
                        .with_label_values(&[verb, host])
                        .observe(len as f64);
                }
                return Ok(resp);
            }
        }
    }
}

/// client-go `checkWait`: retry a 429 or any 5xx only when the server sent an integer
/// `Retry-After`.
fn retry_after<B>(resp: &Response<B>) -> Option<Duration> {
    let status = resp.status();
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let secs = resp
        .headers()
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(Duration::from_secs(secs))
}

fn content_length<B>(resp: &Response<B>) -> Option<u64> {
    resp.headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

fn clone_request(req: &Request<Body>) -> Option<Request<Body>> {
    let body = req.body().try_clone()?;
    let mut builder = Request::builder()
        .method(req.method().clone())
        .uri(req.uri().clone())
        .version(req.version());
    if let Some(headers) = builder.headers_mut() {
        headers.extend(req.headers().clone());
    }
    let mut new = builder.body(body).ok()?;
    *new.extensions_mut() = req.extensions().clone();
    Some(new)
}

#[cfg(test)]
mod tests;
