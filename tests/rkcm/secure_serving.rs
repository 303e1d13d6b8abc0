//! Delegated authentication and authorization of rkcm's endpoints against the local plane
//! (k8s.io/controller-manager `app/serve.go` `BuildHandlerChain`): TokenReview for bearer
//! tokens, client certificates against `--client-ca-file`, SubjectAccessReview for
//! everything outside `--authorization-always-allow-paths`, answers cached.
//!
//! Shared helpers for the drop-in tests (`kubeadm.rs`) live here too: ServiceAccount tokens,
//! cluster-scoped RBAC that is removed again, a private CA with client certificates.

use std::sync::Arc;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
pub(crate) use rkcm_testkit::TestCa;
use rkcm_testkit::{TestCluster, unique_name, wait_for};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

use crate::serve::{
    AcceptAnyCert, HttpResponse, Rkcm, STARTUP, TempDir, cert_client_config, client_config,
    https_request,
};

/// A ServiceAccount `name` in `namespace` (created) and a one-hour token for it.
pub(crate) async fn service_account_token(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<String> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    sas.create(&PostParams::default(), &sa)
        .await
        .with_context(|| format!("creating ServiceAccount {namespace}/{name}"))?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let answer = sas
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("requesting a token for {namespace}/{name}"))?;
    answer
        .status
        .and_then(|s| s.token)
        .context("token request answered without a token")
}

/// Cluster-scoped RBAC objects a test created; [`ClusterRbac::delete`] removes them.
#[derive(Default)]
pub(crate) struct ClusterRbac {
    roles: Vec<String>,
    bindings: Vec<String>,
}

impl ClusterRbac {
    pub(crate) async fn role(
        &mut self,
        client: &kube::Client,
        name: &str,
        rules: serde_json::Value,
    ) -> anyhow::Result<()> {
        let role: ClusterRole =
            serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules}))?;
        Api::<ClusterRole>::all(client.clone())
            .create(&PostParams::default(), &role)
            .await
            .with_context(|| format!("creating ClusterRole {name}"))?;
        self.roles.push(name.to_owned());
        Ok(())
    }

    pub(crate) async fn binding(
        &mut self,
        client: &kube::Client,
        name: &str,
        role: &str,
        subjects: serde_json::Value,
    ) -> anyhow::Result<()> {
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subjects,
        }))?;
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .with_context(|| format!("creating ClusterRoleBinding {name}"))?;
        self.bindings.push(name.to_owned());
        Ok(())
    }

    pub(crate) async fn delete(&self, client: &kube::Client) {
        for b in &self.bindings {
            let _ = Api::<ClusterRoleBinding>::all(client.clone())
                .delete(b, &DeleteParams::default())
                .await;
        }
        for r in &self.roles {
            let _ = Api::<ClusterRole>::all(client.clone())
                .delete(r, &DeleteParams::default())
                .await;
        }
    }

    /// Runs `scenario` with a fresh record of the cluster-scoped RBAC it creates, then
    /// deletes that RBAC whatever the outcome; returns what the scenario returned.
    pub(crate) async fn around(
        client: &kube::Client,
        scenario: impl AsyncFnOnce(&mut Self) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut rbac = Self::default();
        let result = scenario(&mut rbac).await;
        rbac.delete(client).await;
        result
    }
}

/// Waits until RBAC lets `user` (with `groups`) `get` the non-resource `path`, so the
/// process under test never caches a denial from before the binding took effect.
pub(crate) async fn wait_allowed(
    client: &kube::Client,
    user: &str,
    groups: &[&str],
    path: &str,
) -> anyhow::Result<()> {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some("get".to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    wait_for(
        &format!("RBAC to let {user} get {path}"),
        STARTUP,
        || async {
            let r = api.create(&PostParams::default(), &review).await?;
            Ok(r.status.is_some_and(|s| s.allowed).then_some(()))
        },
    )
    .await
}

/// How a request authenticates.
pub(crate) enum As {
    Anonymous,
    Token(String),
    Cert(CertificateDer<'static>, PrivateKeyDer<'static>),
    /// A front proxy's certificate vouching for the user in `X-Remote-User`.
    Proxy(CertificateDer<'static>, PrivateKeyDer<'static>, String),
}

/// GET `path` from rkcm on `port` as `who`.
pub(crate) async fn get_as(port: u16, path: &str, who: &As) -> anyhow::Result<HttpResponse> {
    let verifier = Arc::new(AcceptAnyCert::new());
    match who {
        As::Anonymous => https_request(port, path, &[], client_config(verifier)?).await,
        As::Token(t) => {
            let header = format!("Authorization: Bearer {t}");
            https_request(port, path, &[header], client_config(verifier)?).await
        }
        As::Cert(cert, key) => {
            https_request(port, path, &[], cert_client_config(verifier, cert, key)?).await
        }
        As::Proxy(cert, key, user) => {
            let headers = [
                format!("X-Remote-User: {user}"),
                "X-Remote-Group: system:authenticated".to_owned(),
            ];
            https_request(
                port,
                path,
                &headers,
                cert_client_config(verifier, cert, key)?,
            )
            .await
        }
    }
}

/// The `message` of an upstream `Status` body.
pub(crate) fn status_message(r: &HttpResponse) -> String {
    serde_json::from_str::<serde_json::Value>(&r.body)
        .ok()
        .and_then(|v| v.get("message")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Requests rkcm sent with `method`, summed over codes and hosts, from its `/metrics`.
fn requests_with_method(metrics: &str, method: &str) -> f64 {
    let label = format!("method=\"{method}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn metrics_need_an_authorized_identity() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-authz").await?;
    ClusterRbac::around(&cluster.client(), async |rbac| {
        metrics_scenario(&cluster, ns.name(), rbac).await
    })
    .await
}

#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn metrics_scenario(
    cluster: &TestCluster,
    ns: &str,
    rbac: &mut ClusterRbac,
) -> anyhow::Result<()> {
    let client = cluster.client();
    let allowed = service_account_token(&client, ns, "scraper").await?;
    let denied = service_account_token(&client, ns, "nosy").await?;
    let dir = TempDir::new("rkcm-authz")?;
    let ca = TestCa::new("rkcm-test-client-ca")?;
    let ca_file = dir.path().join("client-ca.crt");
    ca.write(&ca_file)?;
    let cert_user = unique_name("scraper-cert");
    let (cert, key) = ca.client(&cert_user, Some("metrics-readers"))?;
    let (stray_cert, stray_key) = TestCa::new("some-other-ca")?.client(&cert_user, None)?;
    let front = TestCa::new("rkcm-test-front-proxy-ca")?;
    let front_file = dir.path().join("front-proxy-ca.crt");
    front.write(&front_file)?;
    let (proxy_cert, proxy_key) = front.client("front-proxy-client", None)?;
    let (rogue_cert, rogue_key) = front.client("not-the-proxy", None)?;

    // RBAC: `get` on the /metrics URL for one ServiceAccount and the certificate's user.
    let role = unique_name("rkcm-metrics-reader");
    rbac.role(
        &client,
        &role,
        json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
    )
    .await?;
    rbac.binding(
        &client,
        &role,
        &role,
        json!([
            {"kind": "ServiceAccount", "name": "scraper", "namespace": ns},
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": cert_user},
        ]),
    )
    .await?;
    let sa_user = format!("system:serviceaccount:{ns}:scraper");
    wait_allowed(
        &client,
        &sa_user,
        &["system:serviceaccounts", "system:authenticated"],
        "/metrics",
    )
    .await?;
    wait_allowed(&client, &cert_user, &["system:authenticated"], "/metrics").await?;

    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    let p = Rkcm::spawn(
        "authz",
        cluster,
        &[
            "--leader-elect=false".to_owned(),
            // Starts nothing: a known controller rkcm does not implement.
            "--controllers=bootstrap-signer-controller".to_owned(),
            format!("--client-ca-file={}", ca_file.display()),
            format!("--requestheader-client-ca-file={}", front_file.display()),
            "--requestheader-allowed-names=front-proxy-client".to_owned(),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
        ],
    )?;
    p.wait_serving().await?;

    // The always-allowed paths need no credentials.
    for path in ["/healthz", "/livez", "/readyz"] {
        let r = get_as(p.port, path, &As::Anonymous).await?;
        ensure!(
            r.status == 200 || (path == "/readyz" && r.status == 500),
            "{path} anonymously: {} {}",
            r.status,
            r.body
        );
    }
    // ... exactly: a sub-path is not in the default list.
    let r = get_as(p.port, "/healthz/ping", &As::Anonymous).await?;
    assert_eq!(r.status, 403, "{}", r.body);

    // No credentials: system:anonymous, not allowed: 403 with upstream's Status body.
    let r = get_as(p.port, "/metrics", &As::Anonymous).await?;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.content_type, "application/json");
    assert_eq!(
        status_message(&r),
        "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
    );

    // A token the API server does not know: 401.
    let r = get_as(p.port, "/metrics", &As::Token("not-a-token".into())).await?;
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(status_message(&r), "Unauthorized");

    // A ServiceAccount RBAC allows: the metrics.
    let r = get_as(p.port, "/metrics", &As::Token(allowed.clone())).await?;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("# TYPE kubernetes_build_info gauge"),
        "{}",
        r.body
    );
    // Scraping again within the cache TTLs costs no TokenReview or SubjectAccessReview.
    let before = requests_with_method(&r.body, "POST");
    ensure!(
        before >= 2.0,
        "expected the reviews to be counted: {before}"
    );
    let mut last = r;
    for _ in 0..5 {
        last = get_as(p.port, "/metrics", &As::Token(allowed.clone())).await?;
        assert_eq!(last.status, 200);
    }
    assert_eq!(
        requests_with_method(&last.body, "POST"),
        before,
        "cached scrapes must not review again"
    );

    // A ServiceAccount RBAC does not allow: 403 naming it.
    let r = get_as(p.port, "/metrics", &As::Token(denied)).await?;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(
        status_message(&r).contains(&format!("system:serviceaccount:{ns}:nosy")),
        "{}",
        r.body
    );

    // A client certificate signed by --client-ca-file authenticates as its common name.
    let r = get_as(p.port, "/metrics", &As::Cert(cert, key)).await?;
    assert_eq!(r.status, 200, "{}", r.body);
    // One signed by another authority is refused, never treated as anonymous.
    let r = get_as(p.port, "/metrics", &As::Cert(stray_cert, stray_key)).await?;
    assert_eq!(r.status, 401, "{}", r.body);

    // A front proxy (certificate from --requestheader-client-ca-file with an allowed name)
    // vouches for the user in its headers, who is then authorized as any other.
    let proxied = |user: &str| As::Proxy(proxy_cert.clone(), proxy_key.clone_key(), user.into());
    let r = get_as(p.port, "/metrics", &proxied(&cert_user)).await?;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = get_as(p.port, "/metrics", &proxied("nobody-special")).await?;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(
        status_message(&r).contains("\"nobody-special\""),
        "{}",
        r.body
    );
    // A certificate of that authority with a name not allowed to proxy: 401.
    let r = get_as(
        p.port,
        "/metrics",
        &As::Proxy(rogue_cert, rogue_key, cert_user.clone()),
    )
    .await?;
    assert_eq!(r.status, 401, "{}", r.body);

    // The SLI endpoint is protected the same way; the same identity sees it only if allowed.
    let r = get_as(p.port, "/metrics/slis", &As::Token(allowed)).await?;
    assert_eq!(r.status, 403, "{}", r.body);
    Ok(())
}

/// Without `--client-ca-file`, rkcm reads the API server's client CA from
/// `kube-system/extension-apiserver-authentication` with the authentication kubeconfig's
/// identity; an identity that may not read it stops the start, unless the lookup is
/// tolerated or skipped (upstream's `--authentication-tolerate-lookup-failure`,
/// `--authentication-skip-lookup`).
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn client_ca_lookup_follows_the_flags() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-lookup").await?;
    let client = cluster.client();
    // A ServiceAccount with no grants at all: it cannot read the ConfigMap.
    let token = service_account_token(&client, ns.name(), "unprivileged").await?;
    let dir = TempDir::new("rkcm-lookup")?;
    let kubeconfig = crate::kubeconfig::token_kubeconfig(&token, ns.name(), dir.path())?;
    let base = [
        "--leader-elect=false".to_owned(),
        "--controllers=bootstrap-signer-controller".to_owned(),
        format!("--authentication-kubeconfig={}", kubeconfig.display()),
        format!("--authorization-kubeconfig={}", kubeconfig.display()),
    ];

    let mut refused = Rkcm::spawn("lookup-refused", &cluster, &base)?;
    let status = refused.wait_exit(STARTUP).await?;
    assert_eq!(status.code(), Some(1), "{}", refused.log());
    assert!(
        refused.log().contains("extension-apiserver-authentication"),
        "{}",
        refused.log()
    );

    for extra in [
        "--authentication-tolerate-lookup-failure",
        "--authentication-skip-lookup",
    ] {
        let mut args = base.to_vec();
        args.push(extra.to_owned());
        let p = Rkcm::spawn("lookup-ok", &cluster, &args)?;
        p.wait_serving().await?;
        let r = get_as(p.port, "/healthz", &As::Anonymous).await?;
        assert_eq!(r.status, 200, "{extra}: {}", r.body);
    }
    Ok(())
}
