//! [`ScopedProxy`]: an HTTP proxy to the cluster under test that confines a controller
//! manager to one namespace.
//!
//! Upstream kube-controller-manager cannot be limited to a namespace, and neither can the rkcm
//! binary; the test plane is shared with other tests. A manager that talks to the API server
//! through this proxy:
//!
//! - **sees only the namespace**: its cluster-wide LIST/WATCH of a namespaced resource
//!   (`/api/v1/pods`, `/apis/apps/v1/replicasets`, ...) is rewritten to the namespace's
//!   collection (`/api/v1/namespaces/<ns>/pods`, ...), so its informers hold that namespace's
//!   objects only and its controllers never act on another test's objects;
//! - **writes only into the namespace**: a mutating request (POST, PUT, PATCH, DELETE) outside
//!   `.../namespaces/<ns>/...` is refused with 403 and remembered ([`ScopedProxy::refused`]),
//!   except access and token reviews (`authorization.k8s.io`, `authentication.k8s.io`), which
//!   change nothing;
//! - passes every other request (discovery, GETs of single objects) unchanged, with the
//!   credentials of the client the proxy was started with.
//!
//! Every write that went through is recorded ([`ScopedProxy::writes`]), so a test can say
//! which manager wrote what, and every read ([`ScopedProxy::reads`]), so it can count lists
//! and watches. A test can also make the manager's cache lag: with
//! [`ScopedProxy::delay_watches`] the events of its watches on one resource reach it late, in
//! their order, as from a slow or overloaded API server. The proxy serves plain HTTP/1.1 on a loopback port and writes a
//! kubeconfig pointing at it ([`ScopedProxy::kubeconfig`]); [`ScopedProxy::stop`] (or drop)
//! closes the listener and every open connection, ending the manager's watches.
//!
//! Faults for `make chaos`: [`ScopedProxy::cut`] drops the manager's traffic as a network
//! partition would ([`Cut::Blackhole`]: connections held open with nothing passing;
//! [`Cut::Refuse`]: connections closed as soon as they open) until it is healed
//! ([`Cut::Open`]); [`ScopedProxy::expire_watches`] ends every open watch and answers later
//! watches from an older resourceVersion with 410 Gone, as an API server without a watch
//! cache does after an etcd compaction. [`ScopedProxy::report_version`] answers `/version`
//! as another release would, as during an upgrade.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

use crate::cluster::TestCluster;

type ProxyBody =
    http_body_util::combinators::UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// Namespaced resources whose cluster-wide collection the proxy narrows to the namespace, in
/// any API group and version: what the workload controllers, the garbage collector and the
/// event machinery list and watch.
pub const NAMESPACED_RESOURCES: &[&str] = &[
    "pods",
    "podtemplates",
    "replicationcontrollers",
    "events",
    "endpoints",
    "endpointslices",
    "configmaps",
    "secrets",
    "serviceaccounts",
    "services",
    "persistentvolumeclaims",
    "resourcequotas",
    "limitranges",
    "deployments",
    "replicasets",
    "statefulsets",
    "daemonsets",
    "controllerrevisions",
    "jobs",
    "cronjobs",
    "poddisruptionbudgets",
    "leases",
    "resourceclaims",
    "resourceclaimtemplates",
    "horizontalpodautoscalers",
];

/// How the proxy passes traffic ([`ScopedProxy::cut`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Cut {
    /// Everything passes.
    Open,
    /// A partition that drops packets: open connections are held with nothing read or
    /// written, new ones are accepted and held the same way. When the cut heals, the held
    /// connections are closed (as TCP gives up on a long partition); requests sent on them
    /// never reach the API server.
    Blackhole,
    /// Open connections are closed and new ones closed as soon as they are accepted.
    Refuse,
}

/// One request that went through the proxy (or was refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedRequest {
    pub method: http::Method,
    /// Path as sent to the API server (after scoping), without the query.
    pub path: String,
    /// HTTP status of the answer (403 for refused requests, 502 if the API server was
    /// unreachable).
    pub status: u16,
    /// The caller's `Authorization` header, recorded only by a proxy that passes callers'
    /// credentials on ([`ScopedProxy::start_passing_credentials`]), so a test can ask the
    /// API server (TokenReview) who made each write.
    pub credential: Option<String>,
}

/// One read that went through the proxy ([`ScopedProxy::reads`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedRead {
    /// Path as sent to the API server (after scoping), without the query.
    pub path: String,
    /// A watch (`watch=true` or `watch=1`), not a list or a GET of one object.
    pub watch: bool,
    /// HTTP status of the answer.
    pub status: u16,
}

#[derive(Default)]
struct Journal {
    writes: Vec<ProxiedRequest>,
    reads: Vec<ProxiedRead>,
    refused: Vec<ProxiedRequest>,
    /// Watch requests answered 410 Gone ([`ScopedProxy::expire_watches`]).
    gone: u64,
}

/// A namespace-scoping proxy in front of the cluster under test. Stopped when dropped.
pub struct ScopedProxy {
    url: String,
    namespace: String,
    dir: PathBuf,
    kubeconfig: PathBuf,
    stop: CancellationToken,
    journal: Arc<Mutex<Journal>>,
    delays: WatchDelays,
    cut: tokio::sync::watch::Sender<Cut>,
    expiry: Expiry,
    version: ReportedVersion,
}

/// The `/version` answer the proxy gives instead of the API server's ([`ScopedProxy::report_version`]).
type ReportedVersion = Arc<Mutex<Option<serde_json::Value>>>;

/// Forced watch expiry: a generation that ends open watches when it changes, and the
/// resourceVersion below which a watch request is answered 410 Gone (0: none).
#[derive(Clone)]
struct Expiry {
    generation: tokio::sync::watch::Sender<u64>,
    below: Arc<std::sync::atomic::AtomicI64>,
}

/// Per resource (`pods`, `jobs`, ...): how late the proxy hands on watch events.
type WatchDelays = Arc<Mutex<HashMap<String, Duration>>>;

impl ScopedProxy {
    /// Starts a proxy confining its clients to `namespace`, forwarding with the cluster's
    /// (admin) credentials.
    pub async fn start(cluster: &TestCluster, namespace: &str) -> anyhow::Result<Self> {
        Self::start_with(cluster.client(), namespace).await
    }

    /// Starts a proxy that forwards with `client` (e.g. one built from a per-manager user's
    /// kubeconfig, so the API server tells managers apart).
    pub async fn start_with(client: kube::Client, namespace: &str) -> anyhow::Result<Self> {
        Self::start_scope(client, namespace, false, Vec::new()).await
    }

    /// Starts a proxy that keeps each caller's own identity: a request's `Authorization`
    /// header reaches the API server as it came, over a connection that carries no
    /// credentials of the proxy's own (the cluster's server and CA only), so the API server
    /// authenticates and authorizes the caller itself (give the process under test a
    /// kubeconfig with a bearer token for the proxy's URL). Writes outside the namespace are
    /// refused as usual, except under the path prefixes in `writable` (for example
    /// `/api/v1/namespaces/kube-system/serviceaccounts` for token requests). Every forwarded
    /// write records the credential it carried ([`ProxiedRequest::credential`]).
    pub async fn start_passing_credentials(
        cluster: &TestCluster,
        namespace: &str,
        writable: &[&str],
    ) -> anyhow::Result<Self> {
        let mut config = TestCluster::config_from(cluster.kubeconfig_path()).await?;
        config.auth_info = kube::config::AuthInfo::default();
        let client = kube::Client::try_from(config).context("building a credential-less client")?;
        let writable = writable.iter().map(|p| (*p).to_owned()).collect();
        Self::start_scope(client, namespace, true, writable).await
    }

    async fn start_scope(
        client: kube::Client,
        namespace: &str,
        pass_credentials: bool,
        writable: Vec<String>,
    ) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the proxy's loopback port")?;
        let addr = listener.local_addr()?;
        let url = format!("http://{addr}");
        let dir = std::env::temp_dir().join(crate::cluster::unique_name(&format!(
            "rkcm-proxy-{namespace}"
        )));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_text(&url, namespace))
            .with_context(|| format!("writing {}", kubeconfig.display()))?;

        let stop = CancellationToken::new();
        let journal = Arc::new(Mutex::new(Journal::default()));
        let delays = WatchDelays::default();
        let (cut, _) = tokio::sync::watch::channel(Cut::Open);
        let expiry = Expiry {
            generation: tokio::sync::watch::channel(0).0,
            below: Arc::new(std::sync::atomic::AtomicI64::new(0)),
        };
        let version = ReportedVersion::default();
        let scope = Arc::new(Scope {
            version: version.clone(),
            client,
            pass_credentials,
            writable,
            namespace: namespace.to_owned(),
            journal: journal.clone(),
            delays: delays.clone(),
            expiry: expiry.clone(),
        });
        tokio::spawn(serve(listener, scope, stop.clone(), cut.subscribe()));
        Ok(Self {
            url,
            namespace: namespace.to_owned(),
            dir,
            kubeconfig,
            stop,
            journal,
            delays,
            cut,
            expiry,
            version,
        })
    }

    /// Answers `GET /version` with `info` (a `version.Info` object) from now on, as the API
    /// server of another release would after an upgrade; `None` passes it to the API server
    /// again.
    pub fn report_version(&self, info: Option<serde_json::Value>) {
        if let Ok(mut v) = self.version.lock() {
            *v = info;
        }
    }

    /// Cuts the client off ([`Cut::Blackhole`], [`Cut::Refuse`]) or heals the cut
    /// ([`Cut::Open`]); applies to open connections at once.
    pub fn cut(&self, mode: Cut) {
        self.cut.send_replace(mode);
    }

    /// Ends every open watch (the client re-watches from its last resourceVersion) and answers
    /// later watch requests from a resourceVersion below `below` with 410 Gone, as the API
    /// server does for a revision etcd compacted away when it has no watch cache: pass the
    /// revision [`crate::TestCluster::compact_etcd`] returned.
    pub fn expire_watches(&self, below: i64) {
        self.expiry
            .below
            .fetch_max(below, std::sync::atomic::Ordering::SeqCst);
        self.expiry.generation.send_modify(|g| *g += 1);
    }

    /// From now on, every chunk of a watch response on `resource` (the collection's last path
    /// segment: `pods`, `jobs`, ...) reaches the client `delay` after the API server sent it,
    /// in order. Applies to open watches as well as later ones; `Duration::ZERO` ends the
    /// delay for chunks that arrive afterwards.
    pub fn delay_watches(&self, resource: &str, delay: Duration) {
        if let Ok(mut d) = self.delays.lock() {
            d.insert(resource.to_owned(), delay);
        }
    }

    /// The proxy's base URL (`http://127.0.0.1:<port>`).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A kubeconfig whose only context points at the proxy (no credentials: the proxy adds
    /// its own). Hand it to the process under test.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A client talking to the cluster through the proxy (its kubeconfig's only context).
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Writes (non-GET requests) that were forwarded, in arrival order.
    pub fn writes(&self) -> Vec<ProxiedRequest> {
        self.journal
            .lock()
            .map(|j| j.writes.clone())
            .unwrap_or_default()
    }

    /// Writes that were refused because they targeted something outside the namespace.
    /// Every read that went through (lists, watches, GETs), in the order they were sent.
    pub fn reads(&self) -> Vec<ProxiedRead> {
        self.journal
            .lock()
            .map(|j| j.reads.clone())
            .unwrap_or_default()
    }

    pub fn refused(&self) -> Vec<ProxiedRequest> {
        self.journal
            .lock()
            .map(|j| j.refused.clone())
            .unwrap_or_default()
    }

    /// How many watch requests were answered 410 Gone after [`ScopedProxy::expire_watches`].
    pub fn gone_answers(&self) -> u64 {
        self.journal.lock().map(|j| j.gone).unwrap_or_default()
    }

    /// Closes the listener and every open connection (watches end).
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for ScopedProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn kubeconfig_text(url: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: scoped-proxy\n  cluster: {{server: \"{url}\"}}\n\
         users:\n- name: scoped-proxy\n  user: {{}}\ncontexts:\n- name: scoped-proxy\n  \
         context: {{cluster: scoped-proxy, user: scoped-proxy, namespace: \"{namespace}\"}}\n\
         current-context: scoped-proxy\n"
    )
}

struct Scope {
    client: kube::Client,
    version: ReportedVersion,
    /// Forward the caller's `Authorization` header (the client has no credentials).
    pass_credentials: bool,
    /// Path prefixes outside the namespace that may be written.
    writable: Vec<String>,
    namespace: String,
    journal: Arc<Mutex<Journal>>,
    delays: WatchDelays,
    expiry: Expiry,
}

/// Whether a request's query asks for a watch (`watch=true` or `watch=1`).
fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
    })
}

/// The `resourceVersion` a watch request starts from, if it names one (not `0`, not empty).
fn watch_from(query: Option<&str>) -> Option<i64> {
    query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "resourceVersion")
            .and_then(|(_, v)| v.parse::<i64>().ok())
            .filter(|rv| *rv > 0)
    })
}

/// Hands the chunks of `body` on, each `delays[resource]` (looked up when the chunk arrives)
/// after it arrived; order is kept. The stream ends (after the chunks already taken) when
/// the expiry generation changes.
fn delayed(
    body: ProxyBody,
    resource: String,
    delays: WatchDelays,
    mut expiry: tokio::sync::watch::Receiver<u64>,
) -> ProxyBody {
    use futures::StreamExt as _;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    expiry.mark_unchanged();
    tokio::spawn(async move {
        let mut body = body;
        loop {
            let frame = tokio::select! {
                biased;
                _ = expiry.changed() => return,
                frame = body.frame() => frame,
            };
            let Some(frame) = frame else { return };
            let delay = delays
                .lock()
                .ok()
                .and_then(|d| d.get(&resource).copied())
                .unwrap_or_default();
            let end = frame.is_err();
            if tx
                .send((tokio::time::Instant::now() + delay, frame))
                .is_err()
                || end
            {
                return;
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        let (due, frame) = rx.recv().await?;
        tokio::time::sleep_until(due).await;
        Some((frame, rx))
    });
    http_body_util::StreamBody::new(stream.boxed()).boxed_unsync()
}

/// Waits until the cut is healed (or the proxy stops).
async fn healed(cut: &mut tokio::sync::watch::Receiver<Cut>, stop: &CancellationToken) {
    loop {
        if *cut.borrow_and_update() == Cut::Open {
            return;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            changed = cut.changed() => if changed.is_err() { return },
        }
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    scope: Arc<Scope>,
    stop: CancellationToken,
    cut: tokio::sync::watch::Receiver<Cut>,
) {
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let (scope, stop, mut cut) = (scope.clone(), stop.clone(), cut.clone());
        let now = *cut.borrow_and_update();
        match now {
            Cut::Refuse => {
                drop(stream);
                continue;
            }
            Cut::Blackhole => {
                tokio::spawn(async move {
                    healed(&mut cut, &stop).await;
                    drop(stream);
                });
                continue;
            }
            Cut::Open => {}
        }
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| forward(scope.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = &mut conn => return,
                    changed = cut.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let mode = *cut.borrow_and_update();
                        match mode {
                            Cut::Open => {}
                            // Dropping the connection closes the socket.
                            Cut::Refuse => return,
                            // Not polled: nothing is read or written until the cut heals.
                            Cut::Blackhole => {
                                healed(&mut cut, &stop).await;
                                return;
                            }
                        }
                    }
                }
            }
        });
    }
}

/// The path the API server gets: a cluster-wide collection of a namespaced resource becomes
/// the namespace's collection; anything else is unchanged.
pub fn scoped_path(path: &str, namespace: &str) -> String {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let narrowed = match segments.as_slice() {
        ["api", version, resource] if NAMESPACED_RESOURCES.contains(resource) => {
            Some(format!("/api/{version}/namespaces/{namespace}/{resource}"))
        }
        ["apis", group, version, resource] if NAMESPACED_RESOURCES.contains(resource) => Some(
            format!("/apis/{group}/{version}/namespaces/{namespace}/{resource}"),
        ),
        _ => None,
    };
    narrowed.unwrap_or_else(|| path.to_owned())
}

/// Whether a mutating request to `path` stays inside `namespace` (or is a review, which
/// mutates nothing).
pub fn write_allowed(path: &str, namespace: &str) -> bool {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["api", _, "namespaces", ns, _, ..] => *ns == namespace,
        ["apis", "authorization.k8s.io" | "authentication.k8s.io", ..] => true,
        ["apis", _, _, "namespaces", ns, _, ..] => *ns == namespace,
        _ => false,
    }
}

fn is_read(method: &http::Method) -> bool {
    matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    )
}

fn text(code: http::StatusCode, msg: String) -> http::Response<ProxyBody> {
    let mut resp = http::Response::new(
        Full::new(Bytes::from(msg))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = code;
    resp
}

/// A Kubernetes `Status` answer, so clients report the refusal like an API error.
fn forbidden(method: &http::Method, path: &str, namespace: &str) -> http::Response<ProxyBody> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "reason": "Forbidden", "code": 403,
        "message": format!(
            "scoped test proxy: {method} {path} is outside namespace {namespace}"
        ),
    });
    let mut resp = text(http::StatusCode::FORBIDDEN, body.to_string());
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// The API server's answer to a watch from a compacted resourceVersion.
fn gone(below: i64) -> http::Response<ProxyBody> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "reason": "Expired", "code": 410,
        "message": format!("too old resource version (compacted to {below}; scoped test proxy)"),
    });
    let mut resp = text(http::StatusCode::GONE, body.to_string());
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) and those the proxy recomputes.
fn skip_header(name: &http::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host"
            | "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "content-length"
            | "authorization"
    )
}

async fn forward(
    scope: Arc<Scope>,
    req: http::Request<Incoming>,
) -> Result<http::Response<ProxyBody>, Infallible> {
    let (parts, body) = req.into_parts();
    if let Some(resp) = reported_version(&scope, &parts) {
        return Ok(resp);
    }
    let path = scoped_path(parts.uri.path(), &scope.namespace);
    let write = !is_read(&parts.method);
    let credential = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .filter(|_| scope.pass_credentials)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if write
        && !write_allowed(&path, &scope.namespace)
        && !scope.writable.iter().any(|p| path.starts_with(p.as_str()))
    {
        if let Ok(mut j) = scope.journal.lock() {
            j.refused.push(ProxiedRequest {
                method: parts.method.clone(),
                path: path.clone(),
                status: 403,
                credential,
            });
        }
        return Ok(forbidden(&parts.method, &path, &scope.namespace));
    }
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(text(http::StatusCode::BAD_REQUEST, e.to_string())),
    };
    let uri = match parts.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.clone(),
    };
    let mut builder = http::Request::builder()
        .method(parts.method.clone())
        .uri(uri);
    for (name, value) in &parts.headers {
        let pass = scope.pass_credentials && name == http::header::AUTHORIZATION;
        if pass || !skip_header(name) {
            builder = builder.header(name, value);
        }
    }
    let request = match builder.body(kube::client::Body::from(body.to_vec())) {
        Ok(r) => r,
        Err(e) => return Ok(text(http::StatusCode::BAD_REQUEST, e.to_string())),
    };
    let watch = is_watch(parts.uri.query());
    let below = scope.expiry.below.load(std::sync::atomic::Ordering::SeqCst);
    if watch && watch_from(parts.uri.query()).is_some_and(|rv| rv < below) {
        if let Ok(mut j) = scope.journal.lock() {
            j.gone += 1;
        }
        return Ok(gone(below));
    }
    let resource = path.rsplit('/').next().unwrap_or_default().to_owned();
    let resp = match scope.client.send(request).await {
        Ok(resp) => resp.map(|b| {
            let body = b
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
                .boxed_unsync();
            if watch {
                delayed(
                    body,
                    resource,
                    scope.delays.clone(),
                    scope.expiry.generation.subscribe(),
                )
            } else {
                body
            }
        }),
        Err(e) => text(http::StatusCode::BAD_GATEWAY, e.to_string()),
    };
    let status = resp.status().as_u16();
    if write {
        record_write(
            &scope,
            ProxiedRequest {
                method: parts.method,
                path,
                status,
                credential,
            },
        );
    } else if let Ok(mut j) = scope.journal.lock() {
        j.reads.push(ProxiedRead {
            path,
            watch,
            status,
        });
    }
    Ok(resp)
}

fn record_write(scope: &Scope, request: ProxiedRequest) {
    if let Ok(mut j) = scope.journal.lock() {
        j.writes.push(request);
    }
}

/// The `/version` answer set by [`ScopedProxy::report_version`], if one is set and asked for.
fn reported_version(
    scope: &Scope,
    parts: &http::request::Parts,
) -> Option<http::Response<ProxyBody>> {
    if parts.method != http::Method::GET || parts.uri.path() != "/version" {
        return None;
    }
    let info = scope.version.lock().ok().and_then(|v| v.clone())?;
    let mut resp = text(http::StatusCode::OK, info.to_string());
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_wide_collections_of_namespaced_resources_are_narrowed() {
        assert_eq!(
            scoped_path("/api/v1/pods", "t"),
            "/api/v1/namespaces/t/pods"
        );
        assert_eq!(
            scoped_path("/apis/apps/v1/replicasets", "t"),
            "/apis/apps/v1/namespaces/t/replicasets"
        );
        assert_eq!(
            scoped_path("/apis/events.k8s.io/v1/events", "t"),
            "/apis/events.k8s.io/v1/namespaces/t/events"
        );
        // Cluster-scoped collections, single objects, namespaced paths and discovery pass.
        for p in [
            "/api/v1/nodes",
            "/api/v1/namespaces",
            "/api/v1/namespaces/t/pods",
            "/api/v1/namespaces/other/pods/x",
            "/apis/apps/v1",
            "/apis",
            "/api",
        ] {
            assert_eq!(scoped_path(p, "t"), p);
        }
    }

    #[test]
    fn watches_are_told_from_lists_by_their_query() {
        assert!(is_watch(Some("watch=true&resourceVersion=5")));
        assert!(is_watch(Some("labelSelector=a%3Db&watch=1")));
        assert!(!is_watch(Some("watch=false")));
        assert!(!is_watch(Some("limit=500")));
        assert!(!is_watch(None));
    }

    #[test]
    fn watches_name_the_resource_version_they_start_from() {
        assert_eq!(watch_from(Some("watch=true&resourceVersion=57")), Some(57));
        assert_eq!(watch_from(Some("watch=1&resourceVersion=0")), None);
        assert_eq!(watch_from(Some("watch=1&resourceVersion=")), None);
        assert_eq!(watch_from(Some("watch=1")), None);
        assert_eq!(watch_from(None), None);
    }

    #[test]
    fn writes_stay_inside_the_namespace() {
        assert!(write_allowed("/api/v1/namespaces/t/pods", "t"));
        assert!(write_allowed("/api/v1/namespaces/t/events", "t"));
        assert!(write_allowed(
            "/apis/apps/v1/namespaces/t/replicasets/web/status",
            "t"
        ));
        assert!(write_allowed(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            "t"
        ));
        assert!(!write_allowed("/api/v1/namespaces/other/pods", "t"));
        assert!(!write_allowed(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x",
            "t"
        ));
        assert!(!write_allowed("/api/v1/namespaces/t", "t"));
        assert!(!write_allowed("/api/v1/nodes/n1", "t"));
        assert!(!write_allowed("/apis/apps/v1/replicasets", "t"));
    }

    #[test]
    fn kubeconfig_points_at_the_proxy() {
        let text = kubeconfig_text("http://127.0.0.1:1234", "t");
        let kc: kube::config::Kubeconfig = serde_yaml_like(&text);
        assert_eq!(
            kc.clusters[0]
                .cluster
                .as_ref()
                .and_then(|c| c.server.as_deref()),
            Some("http://127.0.0.1:1234")
        );
        assert_eq!(kc.current_context.as_deref(), Some("scoped-proxy"));
    }

    fn serde_yaml_like(text: &str) -> kube::config::Kubeconfig {
        kube::config::Kubeconfig::from_yaml(text).expect("valid kubeconfig")
    }
}
