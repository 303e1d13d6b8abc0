use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use tower::ServiceExt as _;

#[test]
fn watch_detection() {
    let w: http::Uri = "/api/v1/pods?&watch=true&timeoutSeconds=290"
        .parse()
        .expect("uri");
    assert!(is_watch(&w));
    let l: http::Uri = "/api/v1/pods?limit=500".parse().expect("uri");
    assert!(!is_watch(&l));
    let g: http::Uri = "/api/v1/namespaces/watch".parse().expect("uri");
    assert!(!is_watch(&g));
}

#[test]
fn user_agent_names_client() {
    let ua = user_agent("replicaset-controller");
    let ua = ua.to_str().expect("ascii");
    assert!(
        ua.starts_with(&format!("rkcm/{} (", env!("CARGO_PKG_VERSION"))),
        "{ua}"
    );
    assert!(ua.ends_with(") replicaset-controller"), "{ua}");
    assert!(ua.contains(std::env::consts::OS));
}

/// What the scripted service saw: when, with which user agent, which URI.
type Seen = Vec<(Instant, Option<String>, String)>;

/// A scripted inner service: answers from a list of statuses, records requests.
#[derive(Clone)]
struct Script {
    calls: Arc<AtomicUsize>,
    seen: Arc<Mutex<Seen>>,
    responses: Arc<Vec<(u16, Option<&'static str>)>>,
}

impl Service<Request<Body>> for Script {
    type Response = Response<()>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Self::Response, BoxError>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let ua = req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        self.seen
            .lock()
            .push((Instant::now(), ua, req.uri().to_string()));
        let (code, retry) = self.responses.get(n).copied().unwrap_or((200, None));
        Box::pin(async move {
            let mut b = Response::builder().status(code);
            if let Some(r) = retry {
                b = b.header(header::RETRY_AFTER, r);
            }
            b.body(()).map_err(BoxError::from)
        })
    }
}

fn script(responses: Vec<(u16, Option<&'static str>)>) -> Script {
    Script {
        calls: Arc::new(AtomicUsize::new(0)),
        seen: Arc::new(Mutex::new(Vec::new())),
        responses: Arc::new(responses),
    }
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).expect("request")
}

#[tokio::test(start_paused = true)]
async fn layer_throttles_requests_but_not_watches() {
    let inner = script(vec![]);
    let layer = RestClientLayer::new(
        client_limiter(1.0, 1),
        user_agent("test-controller"),
        "h:1".into(),
    );
    let svc = layer.layer(inner.clone());
    let start = Instant::now();
    svc.clone()
        .oneshot(get("/api/v1/pods"))
        .await
        .expect("first");
    // The watch does not wait although the bucket is empty.
    svc.clone()
        .oneshot(get("/api/v1/pods?watch=true"))
        .await
        .expect("watch");
    assert_eq!(start.elapsed(), Duration::ZERO);
    svc.clone()
        .oneshot(get("/api/v1/pods"))
        .await
        .expect("second");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    let seen = inner.seen.lock();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|(_, ua, _)| {
        ua.as_deref()
            .is_some_and(|u| u.ends_with(" test-controller"))
    }));
}

#[tokio::test(start_paused = true)]
async fn layer_honours_retry_after() {
    let inner = script(vec![(429, Some("3")), (503, Some("1")), (200, None)]);
    let layer = RestClientLayer::new(None, user_agent("t"), "h:1".into());
    let start = Instant::now();
    let resp = layer
        .layer(inner.clone())
        .oneshot(get("/api/v1/pods"))
        .await
        .expect("ok");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(inner.calls.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), Duration::from_secs(4));
}

#[tokio::test(start_paused = true)]
async fn layer_does_not_retry_without_retry_after() {
    let inner = script(vec![(429, None), (500, None)]);
    let layer = RestClientLayer::new(None, user_agent("t"), "h:1".into());
    let resp = layer
        .layer(inner.clone())
        .oneshot(get("/x"))
        .await
        .expect("response");
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn retries_are_bounded() {
    let inner = script(vec![(429, Some("1")); 20]);
    let layer = RestClientLayer::new(None, user_agent("t"), "h:1".into());
    let resp = layer
        .layer(inner.clone())
        .oneshot(get("/x"))
        .await
        .expect("response");
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(inner.calls.load(Ordering::SeqCst), MAX_RETRIES as usize + 1);
}

#[tokio::test(start_paused = true)]
async fn watch_retry_is_throttled() {
    let inner = script(vec![(200, None), (429, Some("0")), (200, None)]);
    let layer = RestClientLayer::new(client_limiter(1.0, 1), user_agent("t"), "h:1".into());
    let svc = layer.layer(inner.clone());
    svc.clone()
        .oneshot(get("/a"))
        .await
        .expect("drains the bucket");
    let start = Instant::now();
    svc.oneshot(get("/a?watch=true")).await.expect("watch");
    // First watch attempt is free; its retry waits for the next token.
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

#[test]
fn metrics_are_registered_once() {
    let first = rest_metrics().expect("valid definitions");
    assert!(std::ptr::eq(first, rest_metrics().expect("same")));
    // A vector without any child is not gathered: give each one a sample, as a request
    // would (other tests of this process may or may not have made one).
    first
        .requests_total
        .with_label_values(&["200", "GET", "x"])
        .inc();
    first
        .request_duration
        .with_label_values(&["GET", "x"])
        .observe(0.0);
    first
        .rate_limiter_duration
        .with_label_values(&["GET", "x"])
        .observe(0.0);
    let names: Vec<String> = crate::metrics::registry()
        .gather()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    for n in [
        "rest_client_requests_total",
        "rest_client_request_duration_seconds",
        "rest_client_rate_limiter_duration_seconds",
    ] {
        assert_eq!(names.iter().filter(|x| *x == n).count(), 1, "{n}");
    }
}

#[tokio::test]
async fn build_config_ignores_kubeconfig_env() {
    // Neither flag given: only in-cluster is tried; KUBECONFIG is not consulted even if
    // set. Outside a pod this fails.
    let opts = ClientOptions {
        kubeconfig: None,
        master: None,
        qps: 20.0,
        burst: 30,
    };
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_none() {
        assert!(build_config(&opts).await.is_err());
    }
}

#[tokio::test]
async fn build_config_master_overrides_kubeconfig() {
    let dir = std::env::temp_dir().join(format!("rkcm-client-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://10.0.0.1:6443\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    token: abc\n",
    )
    .expect("write kubeconfig");
    let mut opts = ClientOptions {
        kubeconfig: Some(path.clone()),
        ..Default::default()
    };
    let cfg = build_config(&opts).await.expect("kubeconfig loads");
    assert_eq!(cfg.cluster_url.to_string(), "https://10.0.0.1:6443/");
    opts.master = Some("http://127.0.0.1:8080".into());
    let cfg = build_config(&opts).await.expect("kubeconfig loads");
    assert_eq!(
        cfg.cluster_url.authority().map(|a| a.as_str()),
        Some("127.0.0.1:8080")
    );
    // --master alone: unauthenticated config for that URL.
    let cfg = build_config(&ClientOptions {
        master: Some("127.0.0.1:6443".into()),
        ..Default::default()
    })
    .await
    .expect("master alone");
    assert_eq!(
        cfg.cluster_url.scheme_str(),
        Some("http"),
        "no TLS material: plain http"
    );
    assert!(
        cfg.auth_info.token.is_none(),
        "--master alone is unauthenticated"
    );
    // A kubeconfig with TLS material makes a bare --master https, as in client-go.
    let tls_path = dir.join("kubeconfig-tls");
    std::fs::write(
        &tls_path,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://10.0.0.1:6443\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    token: abc\n",
    )
    .expect("write kubeconfig");
    let cfg = build_config(&ClientOptions {
        kubeconfig: Some(tls_path),
        master: Some("127.0.0.1:8443".into()),
        ..Default::default()
    })
    .await
    .expect("tls kubeconfig");
    assert_eq!(cfg.cluster_url.scheme_str(), Some("https"));
    std::fs::remove_dir_all(&dir).ok();
}

/// client-go reloads a CA given as a file only (`CAFile` set, `CAData` empty); kube re-reads
/// `root_cert_file`. The gate off reads the CA once.
#[tokio::test]
async fn a_ca_file_is_reloadable_unless_the_gate_is_off() {
    let dir = std::env::temp_dir().join(rkcm_testkit::unique_name("rkcm-ca-file"));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let ca = rkcm_testkit::TestCa::new("rkcm-test-ca").expect("ca");
    std::fs::write(dir.join("ca.crt"), ca.pem()).expect("write ca");
    let kubeconfig = |name: &str, cluster: &str| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  \
                 cluster:\n    server: https://10.0.0.1:6443\n{cluster}contexts:\n- name: c\n  \
                 context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    token: \
                 abc\n"
            ),
        )
        .expect("write kubeconfig");
        ClientOptions {
            kubeconfig: Some(path),
            ..Default::default()
        }
    };
    // A relative path is the kubeconfig's directory's.
    let by_file = kubeconfig("by-file", "    certificate-authority: ca.crt\n");
    let cfg = build_config(&by_file).await.expect("loads");
    assert_eq!(cfg.root_cert_file, Some(dir.join("ca.crt")));
    assert!(cfg.root_cert.is_some(), "read at start too");

    let mut file =
        Kubeconfig::read_from(by_file.kubeconfig.as_ref().expect("path")).expect("reads");
    assert_eq!(ca_file(&file), Some(dir.join("ca.crt")));
    if let Some(cluster) = file.clusters[0].cluster.as_mut() {
        cluster.certificate_authority_data = Some("aW5saW5l".to_owned());
    }
    assert_eq!(ca_file(&file), None, "inline data wins and is fixed");
    file.current_context = Some("elsewhere".to_owned());
    assert_eq!(ca_file(&file), None);

    set_ca_rotation(false);
    let off = build_config(&by_file).await.expect("loads");
    set_ca_rotation(true);
    assert_eq!(off.root_cert_file, None);
    std::fs::remove_dir_all(&dir).ok();
}
