//! The shared test cluster: connecting with `RKCM_TEST_KUBECONFIG`, a namespace per test,
//! nodes nothing simulates, pod status set by hand, and etcd compaction.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Config};
use serde_json::json;

use crate::builders::NodeBuilder;

/// Environment variable naming the kubeconfig of the cluster tests run against.
pub const KUBECONFIG_ENV: &str = "RKCM_TEST_KUBECONFIG";
/// Environment variable with the etcd client URL of the local control plane (optional).
pub const ETCD_ENV: &str = "RKCM_TEST_ETCD_ENDPOINT";
/// Set to 1 to keep test namespaces and nodes for inspection.
pub const KEEP_ENV: &str = "RKCM_KEEP_NAMESPACES";

/// A connection to the cluster under test.
#[derive(Clone)]
pub struct TestCluster {
    client: Client,
    kubeconfig: PathBuf,
    /// The API server's minor (`/version`, read at connect).
    server_minor: u32,
}

impl TestCluster {
    /// Connects with the kubeconfig in `RKCM_TEST_KUBECONFIG`.
    pub async fn connect() -> anyhow::Result<Self> {
        let path = std::env::var_os(KUBECONFIG_ENV).map(PathBuf::from).with_context(|| {
            format!(
                "{KUBECONFIG_ENV} is not set: start the local control plane with `make cluster-up` \
                 and `eval \"$(make -s cluster-env)\"`, or point it at a kubeconfig of your own"
            )
        })?;
        let config = Self::config_from(&path).await?;
        let client = Client::try_from(config)
            .with_context(|| format!("building a client from {}", path.display()))?;
        let server_minor = rkcm_runtime::api::server_version::read(&client)
            .await
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("the API server of {}", path.display()))?
            .minor;
        Ok(Self {
            client,
            kubeconfig: path,
            server_minor,
        })
    }

    /// The API server's Kubernetes minor (34 for v1.34).
    pub fn server_minor(&self) -> u32 {
        self.server_minor
    }

    /// Whether the API server keeps ReplicaSet and Deployment `status.terminatingReplicas`:
    /// from v1.35, where `DeploymentReplicaSetTerminatingReplicas` is on by default; a v1.34
    /// server drops the field, and rkcm, following that minor's gate, does not write it.
    pub fn keeps_terminating_replicas(&self) -> bool {
        self.server_minor >= 35
    }

    /// A client config from a kubeconfig file (its current context).
    pub async fn config_from(path: &Path) -> anyhow::Result<Config> {
        let kubeconfig = kube::config::Kubeconfig::read_from(path)
            .with_context(|| format!("reading kubeconfig {}", path.display()))?;
        Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .with_context(|| format!("loading kubeconfig {}", path.display()))
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The kubeconfig path, to hand to processes under test.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Creates a namespace `<prefix>-<random>` for one test.
    pub async fn namespace(&self, prefix: &str) -> anyhow::Result<TestNamespace> {
        self.namespace_named(unique_name(prefix)).await
    }

    /// Creates namespace `name` for one test (a name the test picked, e.g. for its hash).
    pub async fn namespace_named(&self, name: String) -> anyhow::Result<TestNamespace> {
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"rkcm.test/namespace": "true"}}
        }))?;
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating test namespace {name}"))?;
        Ok(TestNamespace {
            name,
            client: self.client.clone(),
            kubeconfig: self.kubeconfig.clone(),
        })
    }

    /// Creates a node that no simulator manages: it keeps the status the test gives it.
    /// The node is deleted when the returned guard drops.
    pub async fn create_node(&self, node: NodeBuilder) -> anyhow::Result<TestNode> {
        let (object, status) = node.build();
        let name = object.metadata.name.clone().unwrap_or_default();
        let api = Api::<Node>::all(self.client.clone());
        api.create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating node {name}"))?;
        let guard = TestNode {
            name: name.clone(),
            client: self.client.clone(),
            kubeconfig: self.kubeconfig.clone(),
        };
        if let Some(status) = status {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .with_context(|| format!("setting status of node {name}"))?;
        }
        Ok(guard)
    }

    /// Merges `status` into the pod's status subresource, as a kubelet would report it.
    pub async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        status: serde_json::Value,
    ) -> anyhow::Result<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .with_context(|| format!("patching status of pod {namespace}/{name}"))
    }

    /// Sets a pod's phase, and its Ready condition to `ready`.
    pub async fn set_pod_phase(
        &self,
        namespace: &str,
        name: &str,
        phase: &str,
        ready: bool,
    ) -> anyhow::Result<Pod> {
        let now = jiff::Timestamp::now().to_string();
        let ready = if ready { "True" } else { "False" };
        self.patch_pod_status(
            namespace,
            name,
            json!({
                "phase": phase,
                "conditions": [
                    {"type": "Ready", "status": ready, "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": ready, "lastTransitionTime": now},
                ],
            }),
        )
        .await
    }

    /// Marks every container of the pod terminated with `exit_code`, and the pod Failed
    /// (non-zero) or Succeeded (zero).
    pub async fn terminate_pod(
        &self,
        namespace: &str,
        name: &str,
        exit_code: i32,
    ) -> anyhow::Result<Pod> {
        let pod = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
            .with_context(|| format!("reading pod {namespace}/{name}"))?;
        let (phase, statuses) = terminated(&pod, exit_code, &jiff::Timestamp::now().to_string());
        self.patch_pod_status(
            namespace,
            name,
            json!({"phase": phase, "containerStatuses": statuses}),
        )
        .await
    }

    /// Compacts etcd up to its current revision, so any watch or list from an older
    /// resourceVersion gets 410 Gone. Needs `RKCM_TEST_ETCD_ENDPOINT` (set by the local
    /// control plane). Returns the revision compacted to.
    pub async fn compact_etcd(&self) -> anyhow::Result<i64> {
        let endpoint = std::env::var(ETCD_ENV).with_context(|| {
            format!("{ETCD_ENV} is not set: etcd compaction needs the local control plane")
        })?;
        etcd_compact(&endpoint).await
    }
}

/// A namespace owned by one test; deleted (without waiting) when dropped.
pub struct TestNamespace {
    name: String,
    client: Client,
    kubeconfig: PathBuf,
}

impl TestNamespace {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Deletes every pod of the namespace with grace period 0, as a kubelet would: pods bound
    /// to nodes that nothing runs never finish terminating otherwise. For cleanup: errors are
    /// ignored.
    pub async fn force_delete_pods(&self) {
        let _ = self
            .api::<Pod>()
            .delete_collection(
                &DeleteParams::default().grace_period(0),
                &kube::api::ListParams::default(),
            )
            .await;
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if keep() {
            eprintln!("keeping test namespace {} ({KEEP_ENV}=1)", self.name);
            return;
        }
        delete_blocking(&self.name, &self.kubeconfig, |client, name| async move {
            Api::<Namespace>::all(client)
                .delete(&name, &DeleteParams::background())
                .await
                .map(|_| ())
        });
    }
}

/// A node created by a test; deleted when dropped.
pub struct TestNode {
    name: String,
    client: Client,
    kubeconfig: PathBuf,
}

impl TestNode {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Deletes the node now (tests of orphaned pods need this).
    pub async fn delete(&self) -> anyhow::Result<()> {
        match Api::<Node>::all(self.client.clone())
            .delete(&self.name, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting node {}", self.name)),
        }
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        if keep() {
            return;
        }
        delete_blocking(&self.name, &self.kubeconfig, |client, name| async move {
            Api::<Node>::all(client)
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ())
        });
    }
}

pub(crate) fn keep() -> bool {
    std::env::var(KEEP_ENV).is_ok_and(|v| v == "1" || v == "true")
}

/// Runs an async delete to completion from a destructor. The test's runtime may be
/// blocked (a current-thread runtime is, while its test thread joins this one) or shutting
/// down, and the test's client runs its connection on that runtime: so the delete runs on a
/// runtime of its own, on another thread, with a client of its own.
pub(crate) fn delete_blocking<F, Fut>(name: &str, kubeconfig: &Path, delete: F)
where
    F: FnOnce(Client, String) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), kube::Error>>,
{
    let name = name.to_string();
    let kubeconfig = kubeconfig.to_path_buf();
    let handle = std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("cleanup of {name}: no runtime: {e}");
                return;
            }
        };
        rt.block_on(async {
            let client = match TestCluster::config_from(&kubeconfig)
                .await
                .and_then(|c| Ok(Client::try_from(c)?))
            {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("cleanup of {name}: no client: {e:#}");
                    return;
                }
            };
            match tokio::time::timeout(Duration::from_secs(10), delete(client, name.clone())).await
            {
                Ok(Ok(())) => {}
                Ok(Err(kube::Error::Api(s))) if s.code == 404 => {}
                Ok(Err(e)) => eprintln!("cleanup of {name} failed: {e}"),
                Err(_) => eprintln!("cleanup of {name} timed out"),
            }
        });
    });
    let _ = handle.join();
}

/// A name `<prefix>-<8 random lowercase letters and digits>`.
pub fn unique_name(prefix: &str) -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let suffix: String = (0..8)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect();
    format!("{prefix}-{suffix}")
}

/// The phase and container statuses a kubelet reports for `pod` once every container exited
/// with `exit_code` at `at`: Succeeded for 0, Failed otherwise.
pub(crate) fn terminated(
    pod: &Pod,
    exit_code: i32,
    at: &str,
) -> (&'static str, Vec<serde_json::Value>) {
    let statuses = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"terminated": {
                    "exitCode": exit_code,
                    "reason": if exit_code == 0 { "Completed" } else { "Error" },
                    "startedAt": at, "finishedAt": at}}
            })
        })
        .collect();
    let phase = if exit_code == 0 {
        "Succeeded"
    } else {
        "Failed"
    };
    (phase, statuses)
}

async fn etcd_compact(endpoint: &str) -> anyhow::Result<i64> {
    // etcd's gRPC gateway speaks JSON over plain HTTP on the client URL; a tiny HTTP/1.1
    // client avoids pulling an HTTP client crate into every test binary.
    let status = etcd_post(endpoint, "/v3/kv/range", r#"{"key":"AA==","limit":1}"#).await?;
    let rev: i64 = status["header"]["revision"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .context("etcd range answer has no header.revision")?;
    let body = format!(r#"{{"revision":"{rev}","physical":true}}"#);
    etcd_post(endpoint, "/v3/kv/compaction", &body).await?;
    Ok(rev)
}

async fn etcd_post(endpoint: &str, path: &str, body: &str) -> anyhow::Result<serde_json::Value> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let hostport = endpoint
        .strip_prefix("http://")
        .with_context(|| format!("etcd endpoint {endpoint} is not http://host:port"))?
        .trim_end_matches('/');
    let mut stream = tokio::net::TcpStream::connect(hostport)
        .await
        .with_context(|| format!("connecting to etcd at {hostport}"))?;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(req.as_bytes())
        .await
        .context("writing to etcd")?;
    let mut resp = Vec::new();
    stream
        .read_to_end(&mut resp)
        .await
        .context("reading from etcd")?;
    let text = String::from_utf8_lossy(&resp);
    let (head, payload) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP answer from etcd")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("etcd {path} answered: {head}: {payload}");
    }
    // The gateway may answer chunked; take the JSON object between the outer braces.
    let start = payload.find('{').context("no JSON in etcd answer")?;
    let end = payload.rfind('}').context("no JSON in etcd answer")?;
    serde_json::from_str(&payload[start..=end])
        .with_context(|| format!("parsing etcd answer to {path}"))
}
