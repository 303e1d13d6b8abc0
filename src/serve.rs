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
//! rkcm's own: `/debug/rkcm/decisions` lists the controllers' last decision per object (JSON;
//! `?controller=NAME` keeps one controller's), `/debug/rkcm/decisions/CONTROLLER/NS/NAME`
//! answers one (404 when there is none); see [`rkcm_runtime::explain::decisions`]. They are
//! authorized like `/metrics` (a `get` of the path).
//!
//! Not served (optional upstream endpoints): `/debug/pprof/*`, `/debug/flags/v`. `/configz`
//! answers the part of upstream's component config that rkcm honours, in upstream's shape;
//! `/flagz` and `/statusz` are upstream's pages ([`Zpages`]), authorized like `/metrics`.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::CertificateDer;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::auth::{Decision, Delegation};

mod config;
pub mod effective;
mod health;
mod metrics;
mod tls;
mod zpages;

pub use config::{ServeConfig, ServeError};

pub use health::{Health, HealthQuery, render_health};
use metrics::{observe_slis, render_slis};
pub use metrics::{register_build_info, set_controller_running};
use tls::tls_acceptor;
pub use zpages::{Zpages, mark_process_start};

/// Bound on a TLS handshake, so a client that connects and stays silent does not pin a task.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

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
        effective::PATH => effective::answer(),
        _ if path == DECISIONS || path.starts_with(DECISIONS_PREFIX) => {
            decisions(rkcm_runtime::explain::decisions::global(), path, query)
        }
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

const DECISIONS: &str = "/debug/rkcm/decisions";
const DECISIONS_PREFIX: &str = "/debug/rkcm/decisions/";

/// `/debug/rkcm/decisions[/CONTROLLER/NS/NAME]` from `store`.
fn decisions(
    store: &rkcm_runtime::explain::decisions::Decisions,
    path: &str,
    query: Option<&str>,
) -> Response<Full<Bytes>> {
    let body = match path.strip_prefix(DECISIONS_PREFIX) {
        None => {
            let controller = query
                .into_iter()
                .flat_map(|q| q.split('&'))
                .find_map(|kv| kv.strip_prefix("controller="));
            serde_json::to_string(&store.list(controller))
        }
        Some(rest) => {
            let Some((controller, key)) = rest.split_once('/') else {
                return text(
                    StatusCode::NOT_FOUND,
                    PLAIN,
                    format!("expected {DECISIONS_PREFIX}CONTROLLER/NAMESPACE/NAME\n"),
                );
            };
            match store.get(controller, key) {
                Some(d) => serde_json::to_string(&d),
                None => {
                    return text(
                        StatusCode::NOT_FOUND,
                        PLAIN,
                        format!("no decision of {controller} for {key}\n"),
                    );
                }
            }
        }
    };
    match body {
        Ok(json) => text(StatusCode::OK, "application/json", json),
        Err(err) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            PLAIN,
            format!("encoding decisions: {err}\n"),
        ),
    }
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
        zpages: cfg.zpages,
    });
    Ok(tokio::spawn(accept_loop(listener, acceptor, shared)))
}

/// What every connection needs.
struct Shared {
    health: Health,
    delegation: Delegation,
    configz: String,
    zpages: Zpages,
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
    if let Some(page) = shared.zpages.answer(method, path, query, headers) {
        let mut resp = text(page.status, &page.content_type, page.body);
        if let Some(w) = page
            .warning
            .and_then(|w| header::HeaderValue::from_str(&w).ok())
        {
            resp.headers_mut().insert(header::WARNING, w);
        }
        return resp;
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
    use super::health::{CheckResult, INFORMER_SYNC_CHECK, LEADER_ELECTION_CHECK, percent_decode};
    use super::metrics::platform;
    use super::tls::load_identity;
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
    fn serves_the_last_decisions() {
        use rkcm_runtime::explain::decisions::{Decisions, Note, Outcome};
        let store = Decisions::new(10);
        let note = Note {
            actions: vec!["POST /api/v1/namespaces/ns/pods: 201".into()],
            ..Note::default()
        };
        store.record("job-controller", "ns/pi", Outcome::Synced, note, "t".into());
        store.record(
            "deployment-controller",
            "ns/web",
            Outcome::Failed {
                error: "conflict".into(),
            },
            Note::default(),
            "t".into(),
        );
        let body = |r: Response<Full<Bytes>>| {
            let status = r.status();
            let bytes =
                futures::executor::block_on(http_body_util::BodyExt::collect(r.into_body()))
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
            (status, String::from_utf8_lossy(&bytes).into_owned())
        };
        let (status, one) = body(decisions(
            &store,
            "/debug/rkcm/decisions/job-controller/ns/pi",
            None,
        ));
        assert_eq!(status, StatusCode::OK);
        let v: serde_json::Value = serde_json::from_str(&one).expect("json");
        assert_eq!(v["controller"], "job-controller");
        assert_eq!(v["key"], "ns/pi");
        assert_eq!(v["outcome"]["result"], "synced");
        assert_eq!(v["actions"][0], "POST /api/v1/namespaces/ns/pods: 201");
        let (status, all) = body(decisions(&store, "/debug/rkcm/decisions", None));
        assert_eq!(status, StatusCode::OK);
        let v: serde_json::Value = serde_json::from_str(&all).expect("json");
        assert_eq!(v.as_array().map(Vec::len), Some(2));
        let (_, some) = body(decisions(
            &store,
            "/debug/rkcm/decisions",
            Some("controller=deployment-controller"),
        ));
        let v: serde_json::Value = serde_json::from_str(&some).expect("json");
        assert_eq!(v[0]["outcome"]["error"], "conflict");
        assert_eq!(v.as_array().map(Vec::len), Some(1));
        for missing in [
            "/debug/rkcm/decisions/job-controller/ns/other",
            "/debug/rkcm/decisions/job-controller",
        ] {
            assert_eq!(
                decisions(&store, missing, None).status(),
                StatusCode::NOT_FOUND,
                "{missing}"
            );
        }
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
            zpages: Zpages::default(),
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
            zpages: Zpages::default(),
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
            zpages: Zpages::default(),
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
