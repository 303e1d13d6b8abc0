//! rkcm in a pod on the real nodes: the container image `make image` builds, the README's
//! kubeadm static pod, and the Helm chart.
//!
//! - The image (`e2e/image.sh`, an OCI archive built without a container engine) agrees with
//!   the Dockerfile (binary path, user, entrypoint, exposed port, label names), is imported
//!   into every real node, and `rkcm --version` runs in a container as its non-root user.
//! - Static pod: the manifest of the README's "Static pod (kubeadm clusters)" section, with
//!   only the image and the host paths changed, written to a real node's static pod
//!   directory: the kubelet runs it on the host network, its HTTPS probes pass, it takes
//!   the Lease `kube-system/rkcm`, runs its controllers as user 65532, and `kubectl logs`
//!   of the mirror pod shows it.
//! - Helm: `helm install` of `charts/rkcm` (two replicas, leader election, in-cluster
//!   credentials of the chart's ServiceAccount; pods reach the API server at the
//!   `kubernetes` Service address), bootstrapped by an rkcm process that leads until the pods
//!   take over. Deleting the leader's pod hands the Lease to the other replica; the metrics
//!   endpoints answer an authorized scrape and refuse an anonymous one; `helm upgrade` to
//!   another image name rolls rkcm's own Deployment, done by rkcm's own Deployment
//!   controller, with no leadership gap longer than a failover.
//!
//! The static pod and the chart run controllers for the whole cluster, so those two tests
//! are named `solo_*`: `e2e/run-tests.py` runs them after every other test, one at a time.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use rkcm_testkit::harness::{Env, RealNodes, e2e_bin, is_ready, on_real_nodes, running_container};
use rkcm_testkit::scrape::{AcceptAnyCert, client_config, https_request_to};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use super::{START, Tier};
use crate::secure_serving::{ClusterRbac, service_account_token};
use crate::serve::TempDir;

/// The second name the image is built with, for `helm upgrade` to a new image.
const NEXT_TAG: &str = "upgrade-test";

fn root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The image built by `e2e/image.sh`.
struct Image {
    archive: PathBuf,
    /// `rkcm:<version>`, the chart's default image.
    name: String,
    version: String,
}

static IMAGE: tokio::sync::OnceCell<Image> = tokio::sync::OnceCell::const_new();

/// Builds the image once per test process (a release build of rkcm; cargo skips it when
/// nothing changed) and imports it into every real node.
async fn image(nodes: &RealNodes) -> anyhow::Result<&'static Image> {
    let image = IMAGE
        .get_or_try_init(|| async {
            let out = tokio::process::Command::new("bash")
                .arg(root().join("e2e/image.sh"))
                .arg(format!("rkcm:{NEXT_TAG}"))
                .current_dir(root())
                .output()
                .await
                .context("running e2e/image.sh")?;
            ensure!(
                out.status.success(),
                "e2e/image.sh failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            let archive = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
            let file = archive
                .file_name()
                .and_then(|f| f.to_str())
                .context("e2e/image.sh printed no archive")?;
            let version = file
                .strip_prefix("rkcm-")
                .and_then(|f| f.strip_suffix(".tar"))
                .with_context(|| format!("archive name {file} is not rkcm-<version>.tar"))?
                .to_owned();
            Ok(Image {
                name: format!("rkcm:{version}"),
                archive,
                version,
            })
        })
        .await?;
    nodes.import_image(&image.archive).await?;
    Ok(image)
}

/// One member of a tar archive.
fn tar_member(archive: &Path, member: &str) -> anyhow::Result<Vec<u8>> {
    let out = std::process::Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg(member)
        .output()
        .context("running tar")?;
    ensure!(
        out.status.success(),
        "reading {member} from {}: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out.stdout)
}

fn blob(archive: &Path, digest: &str) -> anyhow::Result<Vec<u8>> {
    let hex = digest
        .strip_prefix("sha256:")
        .with_context(|| format!("digest {digest} is not sha256"))?;
    tar_member(archive, &format!("blobs/sha256/{hex}"))
}

/// The image's config and the paths in its layer.
fn image_contents(archive: &Path) -> anyhow::Result<(serde_json::Value, Vec<String>)> {
    let index: serde_json::Value = serde_json::from_slice(&tar_member(archive, "index.json")?)?;
    let manifest_digest = index["manifests"][0]["digest"]
        .as_str()
        .context("index.json names no manifest")?;
    let manifest: serde_json::Value = serde_json::from_slice(&blob(archive, manifest_digest)?)?;
    let config_digest = manifest["config"]["digest"].as_str().context("no config")?;
    let config: serde_json::Value = serde_json::from_slice(&blob(archive, config_digest)?)?;
    let layer_digest = manifest["layers"][0]["digest"]
        .as_str()
        .context("no layer")?;
    let layer = blob(archive, layer_digest)?;
    let mut child = std::process::Command::new("tar")
        .arg("-tzf")
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("running tar -tz")?;
    let mut stdin = child.stdin.take().context("tar stdin")?;
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &layer));
    let out = child.wait_with_output()?;
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writing the layer to tar panicked"))??;
    ensure!(out.status.success(), "listing the image's layer failed");
    let paths = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| format!("/{}", l.trim_end_matches('/')))
        .collect();
    Ok((config["config"].clone(), paths))
}

/// Words of a Dockerfile instruction's arguments, double quotes kept together.
fn words(args: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in args.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The Dockerfile's final stage: binary path, USER, ENTRYPOINT, EXPOSE, LABEL names.
struct Runtime {
    binary: String,
    user: String,
    entrypoint: Vec<String>,
    expose: Vec<String>,
    labels: Vec<String>,
}

fn dockerfile_runtime() -> anyhow::Result<Runtime> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).context("reading Dockerfile")?;
    let joined = text.replace("\\\n", " ");
    let lines: Vec<&str> = joined.lines().map(str::trim).collect();
    let from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .context("Dockerfile has no FROM")?;
    let mut rt = Runtime {
        binary: String::new(),
        user: String::new(),
        entrypoint: Vec::new(),
        expose: Vec::new(),
        labels: Vec::new(),
    };
    for line in &lines[from + 1..] {
        let Some((instruction, args)) = line.split_once(' ') else {
            continue;
        };
        match instruction {
            "COPY" => {
                let w = words(args);
                if w.iter().any(|w| w.ends_with("/rkcm")) {
                    rt.binary = w.last().cloned().unwrap_or_default();
                }
            }
            "USER" => args.trim().clone_into(&mut rt.user),
            "ENTRYPOINT" => {
                rt.entrypoint =
                    serde_json::from_str(args.trim()).context("ENTRYPOINT is not a JSON list")?;
            }
            "EXPOSE" => rt.expose = words(args),
            "LABEL" => {
                for w in words(args) {
                    if let Some((key, _)) = w.split_once('=') {
                        rt.labels.push(key.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    rt.labels.sort();
    Ok(rt)
}

fn version_pod() -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "version"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "rkcm", "image": "", "imagePullPolicy": "IfNotPresent", "args": ["--version"]}],
        },
    })
}

async fn image_scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let img = image(&t.nodes).await?;
    let (config, paths) = image_contents(&img.archive)?;
    let Runtime {
        binary,
        user,
        entrypoint: entry,
        expose,
        labels,
    } = dockerfile_runtime()?;
    ensure!(
        config["User"] == json!(user) && user == "65532:65532",
        "image user {:?}, Dockerfile USER {user:?}",
        config["User"]
    );
    ensure!(
        config["Entrypoint"] == json!(entry),
        "entrypoint {:?} vs {entry:?}",
        config["Entrypoint"]
    );
    ensure!(
        entry.first() == Some(&binary) && paths.contains(&binary),
        "the Dockerfile copies the binary to {binary:?}; the image's layer has it: {}",
        paths.contains(&binary)
    );
    let ports: Vec<String> = config["ExposedPorts"]
        .as_object()
        .map(|o| {
            o.keys()
                .map(|k| k.trim_end_matches("/tcp").to_owned())
                .collect()
        })
        .unwrap_or_default();
    ensure!(
        ports == expose,
        "exposed ports {ports:?}, Dockerfile EXPOSE {expose:?}"
    );
    let mut image_labels: Vec<String> = config["Labels"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    image_labels.sort();
    ensure!(
        image_labels == labels,
        "labels {image_labels:?}, Dockerfile {labels:?}"
    );

    let mut pod = version_pod();
    pod["spec"]["containers"][0]["image"] = json!(img.name);
    on_real_nodes(&mut pod["spec"]);
    t.env.create::<Pod>(pod).await?;
    let done = wait_for("rkcm --version in a container", START, || async {
        let p: Pod = t.env.get("version").await?;
        let phase = rkcm_testkit::harness::phase(&p).to_owned();
        Ok((phase == "Succeeded" || phase == "Failed").then_some((phase, p)))
    })
    .await?;
    let logs = t
        .env
        .pods()
        .logs("version", &kube::api::LogParams::default())
        .await
        .context("reading the version pod's log")?;
    ensure!(
        done.0 == "Succeeded" && logs.starts_with(&format!("rkcm v{}", img.version)),
        "rkcm --version in the image: phase {}, output {logs:?}; status {:?}",
        done.0,
        done.1.status.map(|s| s.container_statuses)
    );
    Ok(())
}

real_node_test!(
    real_nodes_image_agrees_with_the_dockerfile_and_runs_as_non_root,
    "rn-image",
    "pod-garbage-collector-controller",
    image_scenario
);

// ---------------------------------------------------------------------------------------------
// Static pod

/// The README's static pod manifest (the YAML block of "Static pod (kubeadm clusters)").
fn readme_static_pod() -> anyhow::Result<serde_yaml::Value> {
    let readme = std::fs::read_to_string(root().join("README.md")).context("reading README.md")?;
    let after = readme
        .split_once("/etc/kubernetes/manifests/rkcm.yaml")
        .context("README has no static pod section")?
        .1;
    let block = after
        .split_once("```yaml\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .context("no YAML block after the static pod step")?
        .0;
    serde_yaml::from_str(block).context("parsing the README's static pod manifest")
}

fn plane_dir() -> anyhow::Result<PathBuf> {
    std::env::var_os("RKCM_CLUSTER_DIR")
        .map(PathBuf::from)
        .context("RKCM_CLUSTER_DIR is not set")
}

/// kubeadm's files for the static pod: `pki/` (the plane's CA, service account key and front
/// proxy CA, and a client certificate of `system:kube-controller-manager`) and
/// `controller-manager.conf` naming them at their paths inside the container.
fn kubeadm_files(dir: &Path, api_server: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let plane = plane_dir()?.join("pki");
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki)?;
    for f in ["ca.crt", "ca.key", "sa.key", "sa.pub", "front-proxy-ca.crt"] {
        std::fs::copy(plane.join(f), pki.join(f)).with_context(|| format!("copying {f}"))?;
    }
    let openssl = |args: &[&str]| -> anyhow::Result<()> {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(&pki)
            .output()
            .context("running openssl")?;
        ensure!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    std::fs::write(
        pki.join("client.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    )?;
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=system:kube-controller-manager",
        "-keyout",
        "controller-manager.key",
        "-out",
        "controller-manager.csr",
    ])?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "controller-manager.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "client.ext",
        "-out",
        "controller-manager.crt",
    ])?;
    // Readable by the container's user (65532).
    for f in ["controller-manager.key", "sa.key", "ca.key"] {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(pki.join(f), std::fs::Permissions::from_mode(0o644))?;
    }
    let conf = dir.join("controller-manager.conf");
    std::fs::write(
        &conf,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    \
             server: {api_server}\n    certificate-authority: /etc/kubernetes/pki/ca.crt\n\
             users:\n- name: system:kube-controller-manager\n  user:\n    \
             client-certificate: /etc/kubernetes/pki/controller-manager.crt\n    \
             client-key: /etc/kubernetes/pki/controller-manager.key\n\
             contexts:\n- name: system:kube-controller-manager@kubernetes\n  context:\n    \
             cluster: kubernetes\n    user: system:kube-controller-manager\n\
             current-context: system:kube-controller-manager@kubernetes\n"
        ),
    )?;
    Ok((pki, conf))
}

/// The README's step 2: the manager identity may hold the Lease `kube-system/rkcm`.
async fn lease_rbac(client: &kube::Client) -> anyhow::Result<()> {
    let roles: Api<Role> = Api::namespaced(client.clone(), "kube-system");
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "kube-system");
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "rkcm-leader-election"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                   "resourceNames": ["rkcm"], "verbs": ["get", "update"]}],
    }))?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "rkcm-leader-election"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rkcm-leader-election"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-controller-manager"}],
    }))?;
    for r in [
        roles.create(&PostParams::default(), &role).await.map(drop),
        bindings
            .create(&PostParams::default(), &binding)
            .await
            .map(drop),
    ] {
        match r {
            Ok(()) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(e).context("creating the README's lease RBAC"),
        }
    }
    Ok(())
}

async fn remove_lease_rbac(client: &kube::Client) {
    let dp = DeleteParams::default();
    let _ = Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
        .delete("rkcm-leader-election", &dp)
        .await;
    let _ = Api::<Role>::namespaced(client.clone(), "kube-system")
        .delete("rkcm-leader-election", &dp)
        .await;
}

fn api_server_url(env: &Env) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(env.cluster.kubeconfig_path())?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .map(str::to_owned)
        .context("no server in the plane's kubeconfig")
}

fn set_host_path(pod: &mut serde_yaml::Value, volume: &str, path: &Path) -> anyhow::Result<()> {
    let volumes = pod["spec"]["volumes"]
        .as_sequence_mut()
        .context("the manifest has no volumes")?;
    let v = volumes
        .iter_mut()
        .find(|v| v["name"].as_str() == Some(volume))
        .with_context(|| format!("the manifest has no volume {volume}"))?;
    v["hostPath"]["path"] = serde_yaml::Value::String(path.display().to_string());
    Ok(())
}

fn lease_holder(l: &Lease) -> (String, Option<jiff::Timestamp>) {
    let spec = l.spec.clone().unwrap_or_default();
    (
        spec.holder_identity.unwrap_or_default(),
        spec.acquire_time.map(|t| t.0),
    )
}

async fn static_pod_scenario(env: &Env, nodes: &RealNodes) -> anyhow::Result<()> {
    let client = env.cluster.client();
    let img = image(nodes).await?;
    let node = nodes.names()[0].clone();
    let dir = TempDir::new("rkcm-static-pod")?;
    let (pki, conf) = kubeadm_files(dir.path(), &api_server_url(env)?)?;
    lease_rbac(&client).await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let _ = leases.delete("rkcm", &DeleteParams::default()).await;

    let mut manifest = readme_static_pod()?;
    manifest["spec"]["containers"][0]["image"] = serde_yaml::Value::String(img.name.clone());
    set_host_path(&mut manifest, "k8s-certs", &pki)?;
    set_host_path(&mut manifest, "kubeconfig", &conf)?;
    let target = nodes.manifests_dir(&node)?.join("rkcm.yaml");
    let started = Instant::now();
    let started_at = jiff::Timestamp::now();
    std::fs::write(&target, serde_yaml::to_string(&manifest)?)
        .with_context(|| format!("writing {}", target.display()))?;
    let result = async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
        let mirror = format!("rkcm-{node}");
        let pod = wait_for(&format!("mirror pod {mirror} Ready"), Duration::from_secs(120), || async {
            Ok(pods.get_opt(&mirror).await?.filter(is_ready))
        })
        .await?;
        let ready_after = started.elapsed();
        let (holder, acquired) = wait_for("rkcm takes the Lease kube-system/rkcm", START, || async {
            let l = leases.get_opt("rkcm").await?;
            Ok(l.map(|l| lease_holder(&l))
                .filter(|(h, at)| !h.is_empty() && at.is_some_and(|at| at >= started_at.saturating_sub(jiff::SignedDuration::from_secs(1)).unwrap_or(started_at))))
        })
        .await?;
        let leading = acquired.map(|at| at.duration_since(started_at));
        eprintln!(
            "static pod: Lease taken {leading:?} and mirror pod Ready {ready_after:?} after the manifest was written (holder {holder})"
        );
        let restarts = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .map(|c| c.restart_count);
        ensure!(restarts == Some(0), "the static pod restarted: {restarts:?}");

        // Its controllers work: a ReplicaSet of this test gets its pods.
        env.create::<ReplicaSet>(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"nodeSelector": {"type": "kwok"},
                                           "containers": [{"name": "c", "image": rkcm_testkit::harness::PAUSE}]}}},
        }))
        .await?;
        env.wait_object::<ReplicaSet>("web", "the static pod's ReplicaSet controller made 2 ready pods", START, |rs| {
            rs.status.as_ref().and_then(|s| s.ready_replicas) == Some(2)
        }, |rs| format!("{:?}", rs.status))
        .await?;

        let (running_node, id) = running_container(&pod).context("the static pod's container does not run")?;
        let pid = nodes
            .container_pid(&running_node, &id)
            .await?
            .context("no task for the static pod's container")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or_default();
        ensure!(
            uid.split_whitespace().skip(1).all(|u| u == "65532"),
            "the static pod's rkcm runs as {uid:?}, want 65532"
        );
        let k = crate::rollout::Kubectl::new(&env.cluster, "kube-system")?;
        let logs = k.ok(&["logs", &mirror]).await?;
        ensure!(
            logs.stderr.contains("successfully acquired lease") || logs.stdout.contains("successfully acquired lease"),
            "kubectl logs of {mirror} does not show the Lease taken: {}",
            logs.stdout.lines().take(20).collect::<Vec<_>>().join("\n")
        );
        anyhow::Ok(())
    }
    .await;

    // The kubelet stops the static pod when its manifest goes.
    std::fs::remove_file(&target).with_context(|| format!("removing {}", target.display()))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let gone = wait_for("the mirror pod gone", Duration::from_secs(90), || async {
        Ok(pods
            .get_opt(&format!("rkcm-{node}"))
            .await?
            .is_none()
            .then_some(()))
    })
    .await;
    let _ = leases.delete("rkcm", &DeleteParams::default()).await;
    remove_lease_rbac(&client).await;
    result?;
    gone
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs real nodes: make test (run alone: it runs controllers cluster-wide)"]
async fn solo_real_nodes_rkcm_runs_as_the_readmes_static_pod() -> anyhow::Result<()> {
    let _hold = RealNodes::exclusive().await;
    let env = Env::new("rn-static-pod").await?;
    let result = async {
        let nodes = RealNodes::get(&env.cluster, 1).await?;
        static_pod_scenario(&env, &nodes).await
    }
    .await;
    env.finish(result).await
}

// ---------------------------------------------------------------------------------------------
// Helm

/// One look at the Lease: when, its holder, its renewTime.
type LeaseSample = (Instant, String, Option<jiff::Timestamp>);

/// Samples the Lease every 100 ms.
struct LeaseWatch {
    samples: Arc<Mutex<Vec<LeaseSample>>>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaseWatch {
    fn start(api: Api<Lease>, name: &str) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (s, name) = (samples.clone(), name.to_owned());
        let task = tokio::spawn(async move {
            loop {
                if let Ok(Some(l)) = api.get_opt(&name).await {
                    let spec = l.spec.unwrap_or_default();
                    let entry = (
                        Instant::now(),
                        spec.holder_identity.unwrap_or_default(),
                        spec.renew_time.map(|t| t.0),
                    );
                    s.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(entry);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self { samples, task }
    }

    fn holder(&self) -> String {
        let s = self
            .samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.last().map(|e| e.1.clone()).unwrap_or_default()
    }

    /// The longest time between two renewals seen after `from` (by any holder): how long the
    /// cluster went without a leader that had proved itself alive.
    fn longest_gap(&self, from: Instant) -> Duration {
        let s = self
            .samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut renewals: Vec<jiff::Timestamp> = s
            .iter()
            .filter(|e| e.0 >= from)
            .filter_map(|e| e.2)
            .collect();
        renewals.dedup();
        renewals
            .windows(2)
            .map(|w| Duration::try_from(w[1].duration_since(w[0])).unwrap_or_default())
            .max()
            .unwrap_or_default()
    }

    /// When the holder first became something other than `old`.
    fn changed_at(&self, old: &str, from: Instant) -> Option<(Instant, String)> {
        let s = self
            .samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.iter()
            .find(|e| e.0 >= from && !e.1.is_empty() && e.1 != old)
            .map(|e| (e.0, e.1.clone()))
    }
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn helm(args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new(e2e_bin("helm")?)
        .args(args)
        .env(
            "KUBECONFIG",
            std::env::var_os("RKCM_TEST_KUBECONFIG").unwrap_or_default(),
        )
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("rkcm-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("rkcm-helm-config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("rkcm-helm-data"),
        )
        .output()
        .context("running helm")?;
    if !out.status.success() {
        bail!(
            "helm {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The rkcm pods of the release, not terminating, by name.
async fn rkcm_pods(env: &Env) -> anyhow::Result<Vec<Pod>> {
    let pods: Vec<Pod> = env.list().await?;
    Ok(pods
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/name"))
                .is_some_and(|n| n == "rkcm")
        })
        .collect())
}

fn pod_of_identity(identity: &str) -> &str {
    identity.split('_').next().unwrap_or_default()
}

async fn scrape(host: &str, port: u16, token: Option<&str>) -> anyhow::Result<u16> {
    let config = client_config(Arc::new(AcceptAnyCert::new()))?;
    let headers: Vec<String> = token
        .map(|t| format!("Authorization: Bearer {t}"))
        .into_iter()
        .collect();
    Ok(https_request_to(host, port, "/metrics", &headers, config)
        .await?
        .status)
}

async fn helm_scenario(env: &Env, nodes: &RealNodes) -> anyhow::Result<()> {
    let client = env.cluster.client();
    let img = image(nodes).await?;
    let ns = env.name().to_owned();
    let release = ns.clone();
    let chart = root().join("charts/rkcm");
    let chart = chart.to_str().context("chart path")?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let watch = LeaseWatch::start(leases.clone(), "rkcm");

    // Nothing else runs a Deployment controller: an rkcm process leads first and rolls the
    // chart's Deployment out, then hands over to the pods.
    let boot_log = TempDir::new("rkcm-helm-boot")?;
    let mut boot = std::process::Command::new(crate::serve::rkcm_bin())
        .args([
            &format!("--kubeconfig={}", env.cluster.kubeconfig_path().display()),
            "--controllers=deployment-controller,replicaset-controller",
            "--leader-elect=true",
            &format!("--leader-elect-resource-namespace={ns}"),
            "--leader-elect-resource-name=rkcm",
            "--secure-port=0",
        ])
        .stdout(std::fs::File::create(boot_log.path().join("log"))?)
        .stderr(std::fs::File::create(boot_log.path().join("err"))?)
        .spawn()
        .context("starting the bootstrap rkcm")?;
    let boot_identity = wait_for("the bootstrap rkcm leads", START, || async {
        Ok(Some(watch.holder()).filter(|h| !h.is_empty()))
    })
    .await?;

    let sets = [
        format!("image.tag={}", img.version),
        "controllers={deployment-controller,replicaset-controller}".to_owned(),
        "nodeSelector.type=real".to_owned(),
        "tolerations[0].key=rkcm.test/real-node".to_owned(),
        "tolerations[0].operator=Exists".to_owned(),
        "tolerations[0].effect=NoSchedule".to_owned(),
    ];
    let mut args = vec![
        "install",
        release.as_str(),
        chart,
        "--namespace",
        ns.as_str(),
    ];
    for s in &sets {
        args.extend(["--set", s.as_str()]);
    }
    helm(&args)?;
    let result = async {
        // The chart's full name: `<release>-rkcm` (the release name does not contain "rkcm").
        let dname = format!("{release}-rkcm");
        env.wait_object::<Deployment>(&dname, "the chart's two replicas Ready", START, |d| {
            d.status.as_ref().and_then(|s| s.ready_replicas) == Some(2)
        }, |d| format!("{:?}", d.status))
        .await?;
        // The bootstrap process stops; its Lease expires.
        let t_boot = Instant::now();
        let _ = std::process::Command::new("kill").arg(boot.id().to_string()).status();
        let _ = boot.wait();
        let (_, first) = wait_for("a pod of the chart leads", START, || async {
            Ok(watch.changed_at(&boot_identity, t_boot))
        })
        .await?;
        let pods = rkcm_pods(env).await?;
        ensure!(
            pods.iter().any(|p| p.metadata.name.as_deref() == Some(pod_of_identity(&first))),
            "the Lease went to {first}, not to a pod of the chart"
        );
        eprintln!("helm: the chart's pod {first} leads {:?} after the bootstrap process stopped", t_boot.elapsed());

        // Failover: the leader's pod is deleted; the other replica takes over.
        let t_fail = Instant::now();
        env.pods()
            .delete(pod_of_identity(&first), &DeleteParams::default())
            .await
            .context("deleting the leader's pod")?;
        let (at, second) = wait_for("the other replica leads", Duration::from_secs(60), || async {
            Ok(watch.changed_at(&first, t_fail))
        })
        .await?;
        let failover = at.duration_since(t_fail);
        eprintln!("helm: failover to {second} {failover:?} after the leader's pod was deleted");
        // As upstream, the Lease is not released on exit unless gate
        // ControllerManagerReleaseLeaderElectionLockOnExit is on: the standby waits it out
        // (15 s lease, 2 s retry period).
        ensure!(
            failover < Duration::from_secs(25),
            "failover took {failover:?}: the standby must lead within the 15 s lease and a \
             2 s retry period (with margin)"
        );
        env.wait_object::<Deployment>(&dname, "the new leader replaces the deleted pod", START, |d| {
            d.status.as_ref().and_then(|s| s.ready_replicas) == Some(2)
        }, |d| format!("{:?}", d.status))
        .await?;

        // Metrics: an authorized scrape of the Service's endpoints, and an anonymous one.
        let token = service_account_token(&client, &ns, "scraper").await?;
        let mut rbac = ClusterRbac::default();
        let role = format!("{ns}-metrics");
        rbac.role(&client, &role, json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])).await?;
        rbac.binding(&client, &role, &role,
            json!([{"kind": "ServiceAccount", "name": "scraper", "namespace": ns}])).await?;
        let scraped = async {
            crate::secure_serving::wait_allowed(
                &client,
                &format!("system:serviceaccount:{ns}:scraper"),
                &["system:serviceaccounts"],
                "/metrics",
            )
            .await?;
            let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
            let ips = wait_for("the metrics Service's endpoints", START, || async {
                let list = slices
                    .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={dname}")))
                    .await?;
                let ips: Vec<(String, u16)> = list
                    .items
                    .iter()
                    .flat_map(|s| {
                        let port = s.ports.as_ref().and_then(|p| p.first()).and_then(|p| p.port).unwrap_or(0);
                        s.endpoints.iter().flatten().filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                            .flat_map(move |e| e.addresses.iter().map(move |a| (a.clone(), u16::try_from(port).unwrap_or(0))))
                    })
                    .collect();
                Ok((ips.len() == 2).then_some(ips))
            })
            .await?;
            for (ip, port) in &ips {
                let authorized = scrape(ip, *port, Some(&token)).await?;
                let anonymous = scrape(ip, *port, None).await?;
                ensure!(
                    authorized == 200 && (anonymous == 401 || anonymous == 403),
                    "metrics at {ip}:{port}: authorized scrape {authorized}, anonymous {anonymous}"
                );
                eprintln!("helm: metrics at {ip}:{port}: authorized {authorized}, anonymous {anonymous}");
            }
            anyhow::Ok(())
        }
        .await;
        rbac.delete(&client).await;
        scraped?;

        // Self-upgrade: a new image name rolls the Deployment; rkcm's own Deployment
        // controller does it, handing the Lease over as its pods are replaced.
        let t_up = Instant::now();
        let leader_before = watch.holder();
        let mut up = vec!["upgrade", release.as_str(), chart, "--namespace", ns.as_str(), "--reuse-values",
                          "--set"];
        let tag = format!("image.tag={NEXT_TAG}");
        up.push(&tag);
        helm(&up)?;
        let want_image = format!("rkcm:{NEXT_TAG}");
        wait_for("the upgraded Deployment rolled out", Duration::from_secs(180), || async {
            let d: Deployment = env.get(&dname).await?;
            let s = d.status.unwrap_or_default();
            let done = s.observed_generation == d.metadata.generation
                && s.updated_replicas == Some(2)
                && s.ready_replicas == Some(2)
                && s.replicas == Some(2);
            let pods = rkcm_pods(env).await?;
            let all_new = pods.len() == 2
                && pods.iter().all(|p| rkcm_testkit::harness::pod_image(p) == want_image && is_ready(p));
            Ok((done && all_new).then_some(()))
        })
        .await?;
        let leader_after = wait_for("a new pod leads", START, || async {
            let h = watch.holder();
            let pods = rkcm_pods(env).await?;
            Ok(pods
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(pod_of_identity(&h))
                    && rkcm_testkit::harness::pod_image(p) == want_image)
                .then_some(h))
        })
        .await?;
        let gap = watch.longest_gap(t_up);
        eprintln!(
            "helm: upgrade rolled in {:?}; leader {leader_before} -> {leader_after}; longest time without a renewal {gap:?} (failover {failover:?})",
            t_up.elapsed()
        );
        ensure!(
            gap <= failover.max(Duration::from_secs(2)) + Duration::from_secs(4),
            "the upgrade left the Lease unrenewed for {gap:?}, longer than a failover ({failover:?})"
        );
        let rss: Vec<ReplicaSet> = env.list().await?;
        let by = rss
            .iter()
            .filter(|rs| rs.spec.template.as_ref().and_then(|t| t.spec.as_ref()).and_then(|s| s.containers.first())
                .and_then(|c| c.image.as_deref()) == Some(want_image.as_str()))
            .count();
        ensure!(by == 1, "want one ReplicaSet of the new image, have {by}");
        holds_for("the upgraded pods keep running", Duration::from_secs(3), || async {
            Ok(rkcm_pods(env).await?.iter().all(is_ready))
        })
        .await
    }
    .await;
    // Normally gone already (it stepped down); on a failure before that, stopped here.
    let _ = boot.kill();
    let _ = boot.wait();
    let uninstall = helm(&[
        "uninstall",
        release.as_str(),
        "--namespace",
        ns.as_str(),
        "--wait",
    ]);
    result?;
    uninstall.map(drop)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs real nodes: make test (run alone: it runs controllers cluster-wide)"]
async fn solo_real_nodes_helm_chart_runs_rkcm_with_failover_and_self_upgrade() -> anyhow::Result<()>
{
    let _hold = RealNodes::exclusive().await;
    let env = Env::new("rn-helm").await?;
    let result = async {
        let nodes = RealNodes::get(&env.cluster, 2).await?;
        helm_scenario(&env, &nodes).await
    }
    .await;
    env.finish(result).await
}
