//! `/flagz` and `/statusz` of the rkcm binary (gates `ComponentFlagz`, `ComponentStatusz`),
//! authorized as kube-controller-manager authorizes them: behind the same delegated
//! authentication and authorization as `/metrics`, a `get` of the path.

use std::sync::Arc;

use rkcm_testkit::{TestCluster, unique_name};
use serde_json::json;

use crate::secure_serving::{
    As, ClusterRbac, get_as, service_account_token, status_message, wait_allowed,
};
use crate::serve::{AcceptAnyCert, HttpResponse, Rkcm, client_config, https_request};

const PAGES: [&str; 2] = ["/flagz", "/statusz"];

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn zpages_are_served_and_authorized_like_metrics() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-zpages").await?;
    ClusterRbac::around(&cluster.client(), async |rbac| {
        scenario(&cluster, ns.name(), rbac).await
    })
    .await
}

/// GET `path` with a bearer `token` and an `Accept` header.
async fn get_accepting(
    port: u16,
    path: &str,
    token: &str,
    accept: &str,
) -> anyhow::Result<HttpResponse> {
    let headers = [
        format!("Authorization: Bearer {token}"),
        format!("Accept: {accept}"),
    ];
    let config = client_config(Arc::new(AcceptAnyCert::new()))?;
    https_request(port, path, &headers, config).await
}

/// A ServiceAccount token that RBAC lets `get` both pages (and nothing else).
async fn reader_token(
    cluster: &TestCluster,
    ns: &str,
    rbac: &mut ClusterRbac,
) -> anyhow::Result<String> {
    let client = cluster.client();
    let reader = service_account_token(&client, ns, "zpages-reader").await?;
    let role = unique_name("rkcm-zpages-reader");
    rbac.role(
        &client,
        &role,
        json!([{"nonResourceURLs": PAGES, "verbs": ["get"]}]),
    )
    .await?;
    rbac.binding(
        &client,
        &role,
        &role,
        json!([{"kind": "ServiceAccount", "name": "zpages-reader", "namespace": ns}]),
    )
    .await?;
    let user = format!("system:serviceaccount:{ns}:zpages-reader");
    for path in PAGES {
        wait_allowed(
            &client,
            &user,
            &["system:serviceaccounts", "system:authenticated"],
            path,
        )
        .await?;
    }
    Ok(reader)
}

async fn scenario(cluster: &TestCluster, ns: &str, rbac: &mut ClusterRbac) -> anyhow::Result<()> {
    let reader = reader_token(cluster, ns, rbac).await?;
    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    let args = |extra: &[&str]| -> Vec<String> {
        [
            "--leader-elect=false",
            // Starts nothing: a known controller rkcm does not implement.
            "--controllers=bootstrap-signer-controller",
        ]
        .iter()
        .chain(extra)
        .map(|a| (*a).to_owned())
        .chain([
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
        ])
        .collect()
    };
    let p = Rkcm::spawn("zpages", cluster, &args(&[]))?;
    p.wait_serving().await?;
    for path in PAGES {
        let r = get_as(p.port, path, &As::Anonymous).await?;
        assert_eq!(r.status, 403, "{path} anonymously: {}", r.body);
        assert_eq!(
            status_message(&r),
            format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\"")
        );
        let r = get_as(p.port, path, &As::Token(reader.clone())).await?;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.content_type, "text/plain; charset=utf-8");
        let page = path.trim_start_matches('/');
        assert!(
            r.body.starts_with(&format!("\nrkcm {page}\nWarning: ")),
            "{}",
            r.body
        );
    }
    let r = get_accepting(
        p.port,
        "/flagz",
        &reader,
        "application/json;as=Flagz;g=config.k8s.io;v=v1beta1",
    )
    .await?;
    assert_eq!(r.status, 200, "{}", r.body);
    let flagz: serde_json::Value = serde_json::from_str(&r.body)?;
    assert_eq!(flagz["kind"], "Flagz");
    assert_eq!(flagz["flags"]["controllers"], "bootstrap-signer-controller");
    assert_eq!(flagz["flags"]["leader-elect"], "false");
    let r = get_accepting(
        p.port,
        "/statusz",
        &reader,
        "application/json;as=Statusz;g=config.k8s.io;v=v1beta1",
    )
    .await?;
    let statusz: serde_json::Value = serde_json::from_str(&r.body)?;
    assert_eq!(statusz["binaryVersion"], env!("CARGO_PKG_VERSION"));
    assert!(
        statusz["paths"]
            .as_array()
            .is_some_and(|p| p.contains(&json!("/flagz"))),
        "{statusz}"
    );
    let r = get_accepting(p.port, "/flagz", &reader, "application/json").await?;
    assert_eq!(r.status, 406, "{}", r.body);
    drop(p);

    // Both gates off: the pages are not there.
    let p = Rkcm::spawn(
        "zpages-off",
        cluster,
        &args(&["--feature-gates=ComponentFlagz=false,ComponentStatusz=false"]),
    )?;
    p.wait_serving().await?;
    for path in PAGES {
        let r = get_as(p.port, path, &As::Token(reader.clone())).await?;
        assert_eq!(r.status, 404, "{path} with its gate off: {}", r.body);
    }
    Ok(())
}
