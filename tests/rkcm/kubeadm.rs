//! rkcm as a drop-in for a kubeadm cluster's kube-controller-manager, on the local plane.
//!
//! The command line is kubeadm v1.37's (`cmd/kubeadm/app/phases/controlplane/manifests.go`
//! `getControllerManagerCommand`, arguments in kubeadm's order) with `--controllers` changed to
//! rkcm's set and the paths pointing at the plane's files. Three flags are added for the
//! shared test plane only: `--secure-port` (a free port), `--leader-elect-resource-namespace`
//! (the test namespace, so no two tests share a lease).
//!
//! The process reaches the API server through the namespace-scoping proxy in its
//! credential-passing mode, so it acts on the test namespace only while the API server still
//! authenticates every request itself: the manager's own identity is a ServiceAccount token
//! bound to upstream's `system:kube-controller-manager` ClusterRole (kubeadm's
//! `controller-manager.conf` user has that role), and each controller's writes carry the token
//! of its own ServiceAccount. The proxy records which credential every write carried, and the
//! test asks the API server (TokenReview) whose it is. (The test plane runs without an audit
//! log; this is the API server's own view of each request's user.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, ReplicationController};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use rkcm_testkit::proxy::ProxiedRequest;
use rkcm_testkit::{ScopedProxy, TestCluster, unique_name, wait_for};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

use crate::kubeconfig::proxy_kubeconfig;
use crate::rollout::deployment_manifest;
use crate::secure_serving::{
    As, ClusterRbac, TestCa, get_as, service_account_token, status_message,
};
use crate::serve::{Rkcm, STARTUP, TempDir};

/// Bound for the workloads to converge on the kwok nodes.
const CONVERGE: Duration = Duration::from_secs(90);
/// Path prefix of the controllers' ServiceAccounts and their token requests.
pub(crate) const SA_WRITES: &str = "/api/v1/namespaces/kube-system/serviceaccounts";
/// The controllers rkcm implements (its `--controllers` set in a kubeadm cluster).
const RKCM_CONTROLLERS: &str = "cronjob-controller,daemonset-controller,deployment-controller,\
                                job-controller,pod-garbage-collector-controller,\
                                replicaset-controller,replicationcontroller-controller,\
                                statefulset-controller,ttl-after-finished-controller";

/// The plane's PKI directory (`$RKCM_CLUSTER_DIR/pki`), or `None` on a cluster of one's own.
fn plane_pki() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("RKCM_CLUSTER_DIR")?).join("pki");
    dir.join("ca.crt").exists().then_some(dir)
}

/// The manager's identity: a ServiceAccount `rkcm-root` in `ns` with upstream's manager
/// ClusterRole, plus the Lease of the test namespace. Returns its token.
async fn manager_identity(
    client: &kube::Client,
    ns: &str,
    rbac: &mut ClusterRbac,
) -> anyhow::Result<String> {
    let token = service_account_token(client, ns, "rkcm-root").await?;
    let binding = unique_name("rkcm-root");
    rbac.binding(
        client,
        &binding,
        "system:kube-controller-manager",
        json!([{"kind": "ServiceAccount", "name": "rkcm-root", "namespace": ns}]),
    )
    .await?;
    // Upstream's role allows get/update only on the Lease named kube-controller-manager.
    let role: k8s_openapi::api::rbac::v1::Role = serde_json::from_value(json!({
        "metadata": {"name": "rkcm-lease"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                   "verbs": ["get", "create", "update"]}],
    }))?;
    Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await?;
    let rb: k8s_openapi::api::rbac::v1::RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "rkcm-lease"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rkcm-lease"},
        "subjects": [{"kind": "ServiceAccount", "name": "rkcm-root", "namespace": ns}],
    }))?;
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rb)
        .await?;
    Ok(token)
}

/// kubeadm's arguments with the plane's files, rkcm's controllers and the test additions.
fn kubeadm_args(
    pki: &Path,
    kubeconfig: &Path,
    front_proxy_ca: &Path,
    controllers: &str,
    ns: &str,
) -> Vec<String> {
    let kc = kubeconfig.display();
    let ca = pki.join("ca.crt");
    let ca = ca.display();
    vec![
        "--allocate-node-cidrs=true".to_owned(),
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--client-ca-file={ca}"),
        "--cluster-cidr=10.244.0.0/16".to_owned(),
        "--cluster-name=kubernetes".to_owned(),
        format!("--cluster-signing-cert-file={ca}"),
        format!(
            "--cluster-signing-key-file={}",
            pki.join("ca.key").display()
        ),
        format!("--controllers={controllers}"),
        format!("--kubeconfig={kc}"),
        "--leader-elect=true".to_owned(),
        format!(
            "--requestheader-client-ca-file={}",
            front_proxy_ca.display()
        ),
        format!("--root-ca-file={ca}"),
        format!(
            "--service-account-private-key-file={}",
            pki.join("sa.key").display()
        ),
        "--service-cluster-ip-range=10.96.0.0/12".to_owned(),
        "--use-service-account-credentials=true".to_owned(),
        // Test-plane additions, see the module doc.
        format!("--leader-elect-resource-namespace={ns}"),
    ]
}

/// The plane's front-proxy CA if it has one (planes started since it was added), else one
/// made for the test.
fn front_proxy_ca(pki: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    let plane = pki.join("front-proxy-ca.crt");
    if plane.exists() {
        return Ok(plane);
    }
    let path = dir.join("front-proxy-ca.crt");
    TestCa::new("front-proxy-ca")?.write(&path)?;
    Ok(path)
}

/// The plane's admin client certificate (group system:masters), signed by the plane's CA.
fn admin_cert(pki: &Path) -> anyhow::Result<(CertificateDer<'static>, PrivateKeyDer<'static>)> {
    let cert_pem = std::fs::read(pki.join("admin.crt"))?;
    let key_pem = std::fs::read(pki.join("admin.key"))?;
    let cert = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .next()
        .context("no certificate in admin.crt")??;
    let key =
        rustls_pemfile::private_key(&mut key_pem.as_slice())?.context("no key in admin.key")?;
    Ok((cert, key))
}

/// Who the API server says each credential is (TokenReview).
async fn users_of(
    client: &kube::Client,
    writes: &[ProxiedRequest],
) -> anyhow::Result<BTreeMap<String, String>> {
    let api: Api<TokenReview> = Api::all(client.clone());
    let mut out = BTreeMap::new();
    for cred in writes.iter().filter_map(|w| w.credential.as_deref()) {
        if out.contains_key(cred) {
            continue;
        }
        let token = cred.strip_prefix("Bearer ").unwrap_or(cred);
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let status = api
            .create(&PostParams::default(), &review)
            .await?
            .status
            .unwrap_or_default();
        let user = status
            .user
            .and_then(|u| u.username)
            .filter(|_| status.authenticated == Some(true))
            .unwrap_or_else(|| "<not authenticated>".to_owned());
        out.insert(cred.to_owned(), user);
    }
    Ok(out)
}

/// `(method, path, user)` of every successful write.
fn attributed(
    writes: &[ProxiedRequest],
    users: &BTreeMap<String, String>,
) -> Vec<(String, String, String)> {
    writes
        .iter()
        .filter(|w| w.status < 300)
        .map(|w| {
            let user = w
                .credential
                .as_ref()
                .and_then(|c| users.get(c))
                .cloned()
                .unwrap_or_else(|| "<no credential>".to_owned());
            (w.method.to_string(), w.path.clone(), user)
        })
        .collect()
}

fn controller_sa(name: &str) -> String {
    format!("system:serviceaccount:kube-system:{name}")
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn kubeadm_command_line_runs_the_controllers_as_their_service_accounts() -> anyhow::Result<()>
{
    let Some(pki) = plane_pki() else {
        eprintln!("skipped: needs the local plane's PKI (RKCM_CLUSTER_DIR)");
        return Ok(());
    };
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-kubeadm").await?;
    ClusterRbac::around(&cluster.client(), async |rbac| {
        kubeadm_scenario(&cluster, &pki, ns.name(), rbac).await
    })
    .await
}

#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn kubeadm_scenario(
    cluster: &TestCluster,
    pki: &Path,
    ns: &str,
    rbac: &mut ClusterRbac,
) -> anyhow::Result<()> {
    let client = cluster.client();
    let token = manager_identity(&client, ns, rbac).await?;
    let proxy = ScopedProxy::start_passing_credentials(cluster, ns, &[SA_WRITES]).await?;
    let dir = TempDir::new("rkcm-kubeadm")?;
    let kubeconfig = proxy_kubeconfig(dir.path(), proxy.url(), &token)?;
    let front = front_proxy_ca(pki, dir.path())?;
    let args = kubeadm_args(pki, &kubeconfig, &front, RKCM_CONTROLLERS, ns);
    let p = Rkcm::spawn("kubeadm", cluster, &args)?;
    p.wait_serving().await?;

    // Flags of controllers rkcm does not run are named once, as such.
    let notice = wait_for("the --cluster-cidr notice", STARTUP, || async {
        Ok(p.log_lines()
            .into_iter()
            .find(|l| l.get("flag").and_then(|f| f.as_str()) == Some("--cluster-cidr")))
    })
    .await?;
    let reason = notice.get("reason").and_then(|r| r.as_str()).unwrap_or("");
    ensure!(
        reason.ends_with("which this manager does not run"),
        "{notice}"
    );

    // Secure serving as kubeadm configures it: health for anyone, /metrics for identities
    // RBAC allows; the plane's admin certificate (system:masters, signed by the CA given as
    // --client-ca-file) needs no review.
    assert_eq!(
        get_as(p.port, "/healthz", &As::Anonymous).await?.status,
        200
    );
    let r = get_as(p.port, "/metrics", &As::Anonymous).await?;
    assert_eq!(r.status, 403, "{}", r.body);
    let (cert, key) = admin_cert(pki)?;
    let r = get_as(p.port, "/metrics", &As::Cert(cert.clone(), key.clone_key())).await?;
    assert_eq!(r.status, 200, "{} {}", r.status, status_message(&r));
    // /configz shows the configuration in upstream's shape.
    let r = get_as(p.port, "/configz", &As::Cert(cert, key)).await?;
    assert_eq!(r.status, 200, "{}", r.body);
    let configz: serde_json::Value = serde_json::from_str(&r.body)?;
    assert_eq!(
        configz["componentconfig"]["KubeCloudShared"]["UseServiceAccountCredentials"], true,
        "{configz}"
    );

    // The controllers run: a Deployment rolls out, a Job completes.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let d: Deployment = serde_json::from_value(deployment_manifest(
        "web",
        2,
        "registry.example/web:v1",
        json!({}),
    ))?;
    deployments.create(&PostParams::default(), &d).await?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "once"},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"type": "kwok"},
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "registry.example/once:v1"}],
        }}},
    }))?;
    jobs.create(&PostParams::default(), &job).await?;
    wait_for("the Deployment to be available", CONVERGE, || async {
        let d = deployments.get("web").await?;
        let s = d.status.unwrap_or_default();
        Ok((s.available_replicas == Some(2) && s.updated_replicas == Some(2)).then_some(()))
    })
    .await?;
    wait_for("the Job to complete", CONVERGE, || async {
        let j = jobs.get("once").await?;
        Ok(rkcm_testkit::harness::job_complete(&j).then_some(()))
    })
    .await?;

    // Every write, with the user the API server authenticated it as.
    let writes = proxy.writes();
    let users = users_of(&client, &writes).await?;
    let rows = attributed(&writes, &users);
    let by = |method: &str, pred: &dyn Fn(&str) -> bool| -> Vec<&str> {
        rows.iter()
            .filter(|(m, p, _)| m == method && pred(p))
            .map(|(_, _, u)| u.as_str())
            .collect()
    };
    let base = format!("/apis/apps/v1/namespaces/{ns}");
    let expect = [
        (
            "POST",
            Box::new(|p: &str| p == format!("{base}/replicasets")) as Box<dyn Fn(&str) -> bool>,
            "deployment-controller",
        ),
        (
            "PUT",
            Box::new(|p: &str| {
                p.starts_with(&format!("{base}/deployments/")) && p.ends_with("/status")
            }),
            "deployment-controller",
        ),
        (
            "PUT",
            Box::new(|p: &str| {
                p.starts_with(&format!("{base}/replicasets/")) && p.ends_with("/status")
            }),
            "replicaset-controller",
        ),
        (
            "PUT",
            Box::new(|p: &str| {
                p.starts_with(&format!("/apis/batch/v1/namespaces/{ns}/jobs/"))
                    && p.ends_with("/status")
            }),
            "job-controller",
        ),
    ];
    for (method, pred, sa) in &expect {
        let seen = by(method, pred.as_ref());
        ensure!(
            !seen.is_empty(),
            "no {method} write expected of {sa}:\n{rows:#?}"
        );
        for u in seen {
            ensure!(
                u == controller_sa(sa),
                "{method} by {u}, expected {sa}:\n{rows:#?}"
            );
        }
    }
    // Pods: created by the ReplicaSet and Job controllers' accounts, and nobody else.
    let pod_creators: std::collections::BTreeSet<&str> =
        by("POST", &|p| p == format!("/api/v1/namespaces/{ns}/pods"))
            .into_iter()
            .collect();
    let want: std::collections::BTreeSet<String> = [
        controller_sa("replicaset-controller"),
        controller_sa("job-controller"),
    ]
    .into();
    ensure!(
        pod_creators
            .iter()
            .map(|s| s.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            == want,
        "pod creators {pod_creators:?}:\n{rows:#?}"
    );
    // The manager's own identity wrote only its Lease (and the election event), the
    // controllers' accounts and tokens, and the reviews of /metrics requests.
    let root = format!("system:serviceaccount:{ns}:rkcm-root");
    for (m, p, u) in &rows {
        if *u == root {
            ensure!(
                p.contains("/leases")
                    || p.starts_with(SA_WRITES)
                    || p.ends_with("/events")
                    || p.starts_with("/apis/authentication.k8s.io/")
                    || p.starts_with("/apis/authorization.k8s.io/"),
                "{m} {p} by the manager identity"
            );
        } else {
            ensure!(
                u.starts_with("system:serviceaccount:kube-system:"),
                "{m} {p} by {u}"
            );
        }
    }
    Ok(())
}

/// Restores a bootstrap ClusterRoleBinding the test took away.
async fn restore_binding(client: &kube::Client, saved: &ClusterRoleBinding) -> anyhow::Result<()> {
    let api: Api<ClusterRoleBinding> = Api::all(client.clone());
    let mut fresh = saved.clone();
    fresh.metadata.resource_version = None;
    fresh.metadata.uid = None;
    fresh.metadata.creation_timestamp = None;
    fresh.metadata.managed_fields = None;
    match api.create(&PostParams::default(), &fresh).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn a_controller_whose_service_account_lacks_a_permission_fails_visibly() -> anyhow::Result<()>
{
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-sa-denied").await?;
    let client = cluster.client();
    // Upstream's bootstrap binding of the ReplicationController controller's account
    // (no other test uses that account: the plane's kube-controller-manager runs with its
    // own identity). Swapped for a copy of its role without `create pods` while the test
    // runs, restored afterwards.
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let name = "system:controller:replication-controller";
    let saved = bindings
        .get(name)
        .await
        .context("reading the bootstrap binding")?;
    bindings.delete(name, &DeleteParams::default()).await?;
    ClusterRbac::around(&client, async |rbac| {
        let result = denied_scenario(&cluster, ns.name(), rbac).await;
        let restored = restore_binding(&client, &saved).await;
        result.and(restored)
    })
    .await
}

async fn denied_scenario(
    cluster: &TestCluster,
    ns: &str,
    rbac: &mut ClusterRbac,
) -> anyhow::Result<()> {
    let client = cluster.client();
    let reduced = unique_name("rkcm-rc-without-pod-create");
    let events = json!({"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
                        "verbs": ["create", "update", "patch"]});
    rbac.role(
        &client,
        &reduced,
        json!([
            {"apiGroups": [""], "resources": ["replicationcontrollers"],
             "verbs": ["get", "list", "watch", "update"]},
            {"apiGroups": [""], "resources": ["replicationcontrollers/status",
                                              "replicationcontrollers/finalizers"],
             "verbs": ["update"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch", "patch", "delete"]},
            events,
        ]),
    )
    .await?;
    rbac.binding(
        &client,
        &reduced,
        &reduced,
        json!([{"kind": "ServiceAccount", "name": "replication-controller",
                "namespace": "kube-system"}]),
    )
    .await?;

    let token = manager_identity(&client, ns, rbac).await?;
    let proxy = ScopedProxy::start_passing_credentials(cluster, ns, &[SA_WRITES]).await?;
    let dir = TempDir::new("rkcm-sa-denied")?;
    let kubeconfig = proxy_kubeconfig(dir.path(), proxy.url(), &token)?;
    let mut p = Rkcm::spawn(
        "sa-denied",
        cluster,
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            "--leader-elect=false".to_owned(),
            "--use-service-account-credentials=true".to_owned(),
            "--controllers=replicationcontroller-controller".to_owned(),
        ],
    )?;
    let rcs: Api<ReplicationController> = Api::namespaced(client.clone(), ns);
    let rc: ReplicationController = serde_json::from_value(json!({
        "metadata": {"name": "denied"},
        "spec": {"replicas": 1, "selector": {"app": "denied"},
                 "template": {"metadata": {"labels": {"app": "denied"}},
                              "spec": {"containers": [{"name": "c", "image": "registry.example/d:v1"}]}}},
    }))?;
    rcs.create(&PostParams::default(), &rc).await?;

    // Visible: a Warning event on the ReplicationController naming the refusal and the
    // controller's account.
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let user = controller_sa("replication-controller");
    let event = wait_for("a FailedCreate event", CONVERGE, || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("FailedCreate")
                && e.involved_object.name.as_deref() == Some("denied")
        }))
    })
    .await?;
    let message = event.message.clone().unwrap_or_default();
    ensure!(event.type_.as_deref() == Some("Warning"), "{event:?}");
    ensure!(
        message.contains("forbidden") && message.contains(&user),
        "event message: {message}"
    );
    // And not a crash: the process keeps running (and keeps retrying).
    if let Ok(status) = p.wait_exit(Duration::from_secs(3)).await {
        bail!("rkcm exited ({status}) instead of reporting the refusal");
    }
    let pods = client_pods(&client, ns).await?;
    ensure!(pods == 0, "{pods} pods were created without permission");
    Ok(())
}

async fn client_pods(client: &kube::Client, ns: &str) -> anyhow::Result<usize> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    Ok(pods.list(&ListParams::default()).await?.items.len())
}
