//! Takeover without churn: upstream kube-controller-manager's ReplicaSet controller scales a
//! ReplicaSet, stops, and rkcm's controller takes over without creating or deleting a pod.
//!
//! Upstream's controller-manager cannot be limited to a namespace, and the plane is shared
//! with other tests. So it talks to the API server through a proxy (in this test) that turns
//! its cluster-wide LIST/WATCH of pods and ReplicaSets into the test namespace's: it never
//! sees, and so never touches, another test's objects. Every other request passes unchanged.

use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rkcm_runtime::CancellationToken;
use rkcm_testkit::holds_for;

use crate::harness::*;

type ProxyBody = http_body_util::combinators::UnsyncBoxBody<
    bytes::Bytes,
    Box<dyn std::error::Error + Send + Sync>,
>;

/// The cluster-wide collections upstream's ReplicaSet controller lists and watches.
const SCOPED: &[(&str, &str)] = &[
    ("/api/v1/pods", "/api/v1/namespaces/{ns}/pods"),
    (
        "/apis/apps/v1/replicasets",
        "/apis/apps/v1/namespaces/{ns}/replicasets",
    ),
];

fn scoped_path(path: &str, namespace: &str) -> String {
    SCOPED
        .iter()
        .find(|(all, _)| *all == path)
        .map_or_else(|| path.to_owned(), |(_, ns)| ns.replace("{ns}", namespace))
}

fn text(code: http::StatusCode, msg: String) -> http::Response<ProxyBody> {
    let mut resp = http::Response::new(
        http_body_util::Full::new(bytes::Bytes::from(msg))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = code;
    resp
}

async fn forward(
    client: kube::Client,
    namespace: String,
    req: http::Request<Incoming>,
) -> Result<http::Response<ProxyBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(text(http::StatusCode::BAD_REQUEST, e.to_string())),
    };
    let path = scoped_path(parts.uri.path(), &namespace);
    let uri = match parts.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let mut builder = http::Request::builder().method(parts.method).uri(uri);
    for (name, value) in &parts.headers {
        if name != http::header::HOST && name != http::header::CONNECTION {
            builder = builder.header(name, value);
        }
    }
    let request = match builder.body(kube::client::Body::from(body.to_vec())) {
        Ok(r) => r,
        Err(e) => return Ok(text(http::StatusCode::BAD_REQUEST, e.to_string())),
    };
    Ok(match client.send(request).await {
        Ok(resp) => resp.map(|b| {
            b.map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
                .boxed_unsync()
        }),
        Err(e) => text(http::StatusCode::BAD_GATEWAY, e.to_string()),
    })
}

/// Serves the namespace-scoping proxy on a loopback port until `stop`; returns its URL.
async fn proxy(client: kube::Client, namespace: &str, stop: CancellationToken) -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let namespace = namespace.to_owned();
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                () = stop.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
            };
            let (client, namespace, stop) = (client.clone(), namespace.clone(), stop.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    forward(client.clone(), namespace.clone(), req)
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc);
                tokio::select! {
                    () = stop.cancelled() => {}
                    _ = conn => {}
                }
            });
        }
    });
    Ok(format!("http://{addr}"))
}

fn kcm_binary() -> Result<PathBuf> {
    let dir = std::env::var_os("RKCM_E2E_BIN")
        .context("RKCM_E2E_BIN is not set: run `eval \"$(bash e2e/cluster.sh env)\"`")?;
    Ok(PathBuf::from(dir).join("kube-controller-manager"))
}

/// Upstream kube-controller-manager running only the ReplicaSet controller, scoped to
/// `namespace` by the proxy. Killed when dropped.
struct UpstreamKcm {
    child: tokio::process::Child,
    stop_proxy: CancellationToken,
    log: PathBuf,
}

impl UpstreamKcm {
    async fn start(env: &Env) -> Result<Self> {
        let stop_proxy = CancellationToken::new();
        let url = proxy(env.cluster.client(), env.name(), stop_proxy.clone()).await?;
        let dir = std::env::temp_dir().join(format!("rkcm-takeover-{}", env.name()));
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster: {{server: \"{url}\"}}\n\
                 users:\n- name: proxy\n  user: {{}}\ncontexts:\n- name: proxy\n  context: {{cluster: proxy, user: proxy}}\n\
                 current-context: proxy\n"
            ),
        )?;
        let log = dir.join("kube-controller-manager.log");
        let out = std::fs::File::create(&log)?;
        let child = tokio::process::Command::new(kcm_binary()?)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args([
                "--controllers=replicaset-controller",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=2",
            ])
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .context("starting upstream kube-controller-manager")?;
        Ok(Self {
            child,
            stop_proxy,
            log,
        })
    }

    async fn stop(mut self) -> Result<()> {
        self.child
            .kill()
            .await
            .context("stopping kube-controller-manager")?;
        self.stop_proxy.cancel();
        if let Some(dir) = self.log.parent() {
            // Only the kubeconfig and the log live there; keep them only on failure.
            let _ = std::fs::remove_dir_all(dir);
        }
        Ok(())
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for UpstreamKcm {
    fn drop(&mut self) {
        self.stop_proxy.cancel();
    }
}

fn uids(pods: &[k8s_openapi::api::core::v1::Pod]) -> Vec<String> {
    let mut v: Vec<String> = pods.iter().map(uid_of).collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn takes_over_from_upstream_without_churn() -> Result<()> {
    let env = Env::new("rs-takeover").await?;
    let result = takeover(&env).await;
    env.finish(result).await
}

async fn takeover(env: &Env) -> Result<()> {
    let mut body = replicaset("web", 4, &[("app", "web")], &[("app", "web")]);
    body["spec"]["minReadySeconds"] = serde_json::json!(2);
    let rs = env.create_rs(body).await?;
    let uid = uid_of(&rs);
    let kcm = UpstreamKcm::start(env).await?;
    let pods = match env.wait_active(&uid, 4).await {
        Ok(p) => p,
        Err(e) => return Err(e.context(format!("upstream KCM log tail:\n{}", kcm.log_tail()))),
    };
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
    for name in names_of(&pods).iter().take(2) {
        env.set_ready(name, since).await?;
    }
    env.wait_rs(
        "web",
        "upstream wrote replicas=4 ready=2 available=2",
        |rs| rs_status(rs) == (4, 4, 2, 2) && observed(rs),
    )
    .await?;
    kcm.stop().await?;
    let before = uids(&env.owned(&uid).await?);

    let ctrl = env.start();
    holds_for(
        "pods unchanged after rkcm takes over",
        Duration::from_secs(8),
        || async { Ok(uids(&env.owned(&uid).await?) == before) },
    )
    .await?;
    let rs = env.replicasets().get("web").await?;
    ensure(
        rs_status(&rs) == (4, 4, 2, 2) && observed(&rs),
        format!("status after takeover: {:?}", rs.status),
    )?;
    // rkcm is really in charge: a scale-up is carried out by it.
    env.scale("web", 5).await?;
    let after = env.wait_active(&uid, 5).await?;
    ensure(
        before.iter().all(|u| uids(&after).contains(u)),
        "old pods kept",
    )?;
    ctrl.stop().await
}
