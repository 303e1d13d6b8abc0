//! Black-box tests of the HTTPS endpoints (k8s.io/controller-manager `app/serve.go`), plus
//! the process/HTTPS helpers the leader-election tests share.
//!
//! Each test starts the rkcm binary against the local control plane with its own Lease (in
//! its own namespace) and its own port, and kills it when the test ends, pass or fail.
//! Delegated authentication and authorization are covered in `secure_serving.rs`; tests here
//! that do not configure them read `/metrics` without credentials (see [`Rkcm::spawn`]). Not
//! covered: `--bind-address` unreachability on other interfaces (needs a second local
//! address).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
pub(crate) use rkcm_testkit::scrape::{
    AcceptAnyCert, HttpResponse, cert_client_config, client_config, free_port, https_get,
    https_get_with, https_request,
};
use rkcm_testkit::{ScopedProxy, TestCluster, unique_name, wait_for};

/// Generous bound for a process to start serving / acquire a free lease.
pub(crate) const STARTUP: Duration = Duration::from_secs(30);

/// The binary under test; `RKCM_TEST_BIN` may point at another build (e.g. the release one).
pub(crate) fn rkcm_bin() -> PathBuf {
    std::env::var_os("RKCM_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rkcm")))
}

/// A running rkcm process. Dropping it kills the process (SIGKILL) and, when the test is
/// failing, prints the tail of its log.
pub(crate) struct Rkcm {
    pub name: String,
    child: Child,
    pub port: u16,
    log_path: PathBuf,
    exited: Option<ExitStatus>,
    /// The proxy confining it to one namespace, when started by [`Rkcm::spawn_scoped`].
    proxy: Option<ScopedProxy>,
}

impl Rkcm {
    /// Starts rkcm with JSON logs to a temp file, serving on `127.0.0.1:<free port>` (unless
    /// `args` sets `--secure-port`), with the cluster's kubeconfig and `args`. Unless `args`
    /// configure authorization themselves, `/metrics` joins the always-allowed paths (as
    /// upstream's scenario for unauthenticated scrapes does), since these tests scrape
    /// without credentials.
    pub(crate) fn spawn(
        name: &str,
        cluster: &TestCluster,
        args: &[String],
    ) -> anyhow::Result<Self> {
        Self::spawn_with(name, cluster.kubeconfig_path(), args, None)
    }

    /// Like [`Rkcm::spawn`], through a [`ScopedProxy`] that confines it to `namespace`. For
    /// every test that runs a controller: the plane is shared, and an unscoped PodGC fails and
    /// force-deletes other tests' unscheduled terminating pods on its first sweep.
    pub(crate) async fn spawn_scoped(
        name: &str,
        cluster: &TestCluster,
        namespace: &str,
        args: &[String],
    ) -> anyhow::Result<Self> {
        let proxy = ScopedProxy::start(cluster, namespace).await?;
        let kubeconfig = proxy.kubeconfig().to_path_buf();
        Self::spawn_with(name, &kubeconfig, args, Some(proxy))
    }

    pub(crate) fn spawn_with(
        name: &str,
        kubeconfig: &Path,
        args: &[String],
        proxy: Option<ScopedProxy>,
    ) -> anyhow::Result<Self> {
        let port = if args.iter().any(|a| a.starts_with("--secure-port")) {
            0
        } else {
            free_port()?
        };
        let log_path =
            std::env::temp_dir().join(format!("{}.log", unique_name(&format!("rkcm-test-{name}"))));
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("creating {}", log_path.display()))?;
        let mut cmd = Command::new(rkcm_bin());
        cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--logging-format=json")
            .arg("--bind-address=127.0.0.1");
        if port != 0 {
            cmd.arg(format!("--secure-port={port}"));
        }
        if !args.iter().any(|a| a.starts_with("--authorization-")) {
            cmd.arg(
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/metrics/slis",
            );
        }
        isolated(cmd.args(args))
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = cmd
            .spawn()
            .with_context(|| format!("spawning {}", rkcm_bin().display()))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            port,
            log_path,
            exited: None,
            proxy,
        })
    }

    /// The proxy it talks through, when started by [`Rkcm::spawn_scoped`] (its journal of
    /// writes).
    pub(crate) fn proxy(&self) -> Option<&ScopedProxy> {
        self.proxy.as_ref()
    }

    pub(crate) fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(0)
    }

    pub(crate) fn signal(&self, sig: i32) -> anyhow::Result<()> {
        // kill(1) rather than libc (the workspace forbids unsafe code) on the pid of our own
        // child, which has not been reaped (we hold the Child), so it cannot have been reused.
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .context("running kill")?;
        if !status.success() {
            bail!("kill -{sig} {}: {status}", self.pid());
        }
        Ok(())
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// JSON log lines (non-JSON lines, e.g. panics, are skipped).
    pub(crate) fn log_lines(&self) -> Vec<serde_json::Value> {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The election identity, from the elector's first log line.
    pub(crate) async fn identity(&self) -> anyhow::Result<String> {
        wait_for(
            &format!("{} to log its identity", self.name),
            STARTUP,
            || async {
                Ok(self.log_lines().iter().find_map(|l| {
                    l.get("identity")
                        .and_then(|v| v.as_str())
                        .map(str::to_owned)
                }))
            },
        )
        .await
    }

    /// Whether the process has exited (without waiting).
    pub(crate) fn has_exited(&mut self) -> anyhow::Result<bool> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait()?;
        }
        Ok(self.exited.is_some())
    }

    /// Polls until the process has exited, returning its status.
    pub(crate) async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        if let Some(s) = self.exited {
            return Ok(s);
        }
        let child = &mut self.child;
        let name = self.name.clone();
        let status = wait_for(&format!("{name} to exit"), timeout, || {
            let r = child.try_wait();
            async move { Ok(r?) }
        })
        .await?;
        self.exited = Some(status);
        Ok(status)
    }

    pub(crate) async fn get(&self, path: &str) -> anyhow::Result<HttpResponse> {
        https_get(self.port, path, Arc::new(AcceptAnyCert::new())).await
    }

    pub(crate) async fn metrics(&self) -> anyhow::Result<String> {
        let r = self.get("/metrics").await?;
        if r.status != 200 {
            bail!("/metrics answered {}: {}", r.status, r.body);
        }
        Ok(r.body)
    }

    /// Waits until the HTTPS server answers `/healthz`.
    pub(crate) async fn wait_serving(&self) -> anyhow::Result<()> {
        wait_for(
            &format!("{} to serve /healthz", self.name),
            STARTUP,
            || async { Ok(self.get("/healthz").await.ok().map(|_| ())) },
        )
        .await
    }
}

impl Drop for Rkcm {
    fn drop(&mut self) {
        if self.exited.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "---- last log lines of {} ({}) ----",
                self.name,
                self.log_path.display()
            );
            for l in tail.iter().rev() {
                let _ = writeln!(err, "{l}");
            }
        } else {
            let _ = std::fs::remove_file(&self.log_path);
        }
    }
}

/// Flags shared by the tests: a Lease of their own in `namespace`, short election timings,
/// and a `--controllers` selection that starts nothing (a known controller rkcm does not
/// implement), unless `controllers` names one.
pub(crate) fn election_args(
    namespace: &str,
    lease: &str,
    controllers: Option<&str>,
) -> Vec<String> {
    vec![
        format!("--leader-elect-resource-namespace={namespace}"),
        format!("--leader-elect-resource-name={lease}"),
        "--leader-elect-lease-duration=4s".to_owned(),
        "--leader-elect-renew-deadline=3s".to_owned(),
        "--leader-elect-retry-period=500ms".to_owned(),
        format!(
            "--controllers={}",
            controllers.unwrap_or("bootstrap-signer-controller")
        ),
    ]
}

/// Value of the sample whose line starts with `series` (exact name and labels as rendered).
pub(crate) fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let rest = l.strip_prefix(series)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

/// Waits for `leader_election_master_status{name="<lease>"}` to equal `want`.
pub(crate) async fn wait_master_status(p: &Rkcm, lease: &str, want: f64) -> anyhow::Result<()> {
    let series = format!("leader_election_master_status{{name=\"{lease}\"}}");
    wait_for(
        &format!("{} to report {series} {want}", p.name),
        STARTUP,
        || async {
            let m = p.metrics().await?;
            Ok((sample(&m, &series) == Some(want)).then_some(()))
        },
    )
    .await
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn health_endpoints_answer() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-serve").await?;
    let lease = unique_name("health");
    let mut args = election_args(ns.name(), &lease, None);
    // Sub-paths are not covered by the default `/livez` (exact, as upstream).
    args.push("--authorization-always-allow-paths=/healthz,/readyz,/livez,/livez/*".to_owned());
    let p = Rkcm::spawn("health", &cluster, &args)?;
    p.wait_serving().await?;

    let r = p.get("/healthz").await?;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    assert!(
        r.content_type.starts_with("text/plain"),
        "{}",
        r.content_type
    );

    let r = p.get("/healthz?verbose").await?;
    assert_eq!(r.status, 200);
    assert!(r.body.contains("[+]leaderElection ok\n"), "{}", r.body);
    assert!(r.body.ends_with("healthz check passed\n"), "{}", r.body);

    let r = p.get("/livez?verbose&exclude=leaderElection").await?;
    assert_eq!(r.status, 200);
    assert!(
        r.body.contains("[+]leaderElection excluded: ok\n"),
        "{}",
        r.body
    );
    assert!(r.body.ends_with("livez check passed\n"), "{}", r.body);

    // Standby or leading with (no) synced caches: either way readiness turns 200.
    let body = wait_for("/readyz to answer 200", STARTUP, || async {
        let r = p.get("/readyz?verbose").await?;
        Ok((r.status == 200).then_some(r.body))
    })
    .await?;
    assert!(body.contains("[+]informer-sync ok\n"), "{body}");
    assert!(body.ends_with("readyz check passed\n"), "{body}");

    assert_eq!(p.get("/livez/leaderElection").await?.status, 200);
    // Outside the always-allowed paths an anonymous request is forbidden.
    assert_eq!(p.get("/healthz/leaderElection").await?.status, 403);
    // Authorization comes before routing, as upstream: an unknown path is forbidden too.
    assert_eq!(p.get("/no-such-path").await?.status, 403);
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn metrics_families_present() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-serve").await?;
    let lease = unique_name("metrics");
    // PodGC, confined to the test namespace (its first sweep would otherwise fail other
    // tests' unscheduled terminating pods).
    let controller = "pod-garbage-collector-controller";
    let p = Rkcm::spawn_scoped(
        "metrics",
        &cluster,
        ns.name(),
        &election_args(ns.name(), &lease, Some(controller)),
    )
    .await?;
    p.wait_serving().await?;
    wait_master_status(&p, &lease, 1.0).await?;
    let running = format!(
        "running_managed_controllers{{manager=\"kube-controller-manager\",name=\"{controller}\"}}"
    );
    let m = wait_for("the controller to be running", STARTUP, || async {
        let m = p.metrics().await?;
        Ok((sample(&m, &running) == Some(1.0)).then_some(m))
    })
    .await?;

    let r = p.get("/metrics").await?;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type, "text/plain; version=0.0.4; charset=utf-8");

    for family in [
        "# TYPE leader_election_master_status gauge",
        "# TYPE rest_client_requests_total counter",
        "# TYPE rest_client_request_duration_seconds histogram",
        "# TYPE running_managed_controllers gauge",
        "# TYPE kubernetes_build_info gauge",
        "# TYPE process_cpu_seconds_total counter",
        "# TYPE process_resident_memory_bytes gauge",
        "# TYPE process_start_time_seconds gauge",
        "# TYPE process_open_fds gauge",
        "# TYPE process_max_fds gauge",
    ] {
        assert!(m.contains(family), "missing {family:?} in\n{m}");
    }
    assert!(m.contains("rest_client_requests_total{code=\"200\""), "{m}");
    assert!(
        m.contains("le=\"0.005\""),
        "rest client histogram buckets:\n{m}"
    );
    // workqueue_* families exist once a controller has created a named queue; check their
    // complete set whenever any is present (PodGC may not use a queue).
    if m.contains("workqueue_adds_total{") {
        for family in [
            "workqueue_depth{",
            "workqueue_adds_total{",
            "workqueue_queue_duration_seconds_bucket{",
            "workqueue_work_duration_seconds_bucket{",
            "workqueue_unfinished_work_seconds{",
            "workqueue_longest_running_processor_seconds{",
            "workqueue_retries_total{",
        ] {
            assert!(m.contains(family), "missing {family:?} in\n{m}");
        }
    } else {
        eprintln!("note: no workqueue_* series: {controller} created no named queue");
    }

    let slis = p.get("/metrics/slis").await?;
    assert_eq!(slis.status, 200);
    assert!(
        slis.body.contains("kubernetes_healthcheck{"),
        "{}",
        slis.body
    );
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn tls_files_are_used() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-serve").await?;
    let dir = TempDir::new("rkcm-tls")?;
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])?.self_signed(&key)?;
    let cert_path = dir.path().join("tls.crt");
    let key_path = dir.path().join("tls.key");
    std::fs::write(&cert_path, cert.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;

    let mut args = election_args(ns.name(), &unique_name("tls"), None);
    args.push(format!("--tls-cert-file={}", cert_path.display()));
    args.push(format!("--tls-private-key-file={}", key_path.display()));
    let p = Rkcm::spawn("tls", &cluster, &args)?;
    p.wait_serving().await?;

    // Trusting exactly our certificate: the handshake only succeeds if rkcm serves it.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone())?;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let r = https_get_with(p.port, "/healthz", config).await?;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn secure_port_zero_serves_nothing_but_runs() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-serve").await?;
    let lease = unique_name("noport");
    let mut args = election_args(ns.name(), &lease, None);
    args.push("--secure-port=0".to_owned());
    let p = Rkcm::spawn("noport", &cluster, &args)?;
    let id = p.identity().await?;
    // Still elects (and would run controllers) without serving.
    let leases = ns.api::<k8s_openapi::api::coordination::v1::Lease>();
    wait_for("the lease to name the process", STARTUP, || async {
        let l = leases.get_opt(&lease).await?;
        let holder = l.and_then(|l| l.spec).and_then(|s| s.holder_identity);
        Ok((holder.as_deref() == Some(id.as_str())).then_some(()))
    })
    .await?;
    assert!(
        p.log_lines()
            .iter()
            .any(|l| l.get("message").and_then(|m| m.as_str())
                == Some("secure port is 0, not serving")),
        "{}",
        p.log()
    );
    assert!(
        !p.log_lines()
            .iter()
            .any(|l| l.get("message").and_then(|m| m.as_str()) == Some("serving securely")),
        "{}",
        p.log()
    );
    Ok(())
}

/// A temporary directory removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(prefix: &str) -> anyhow::Result<Self> {
        let p = std::env::temp_dir().join(unique_name(prefix));
        std::fs::create_dir_all(&p)?;
        Ok(Self(p))
    }
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn samples_are_found_by_exact_series() {
    assert_eq!(
        sample("a{x=\"1\"} 3\na{x=\"10\"} 4\n", "a{x=\"1\"}"),
        Some(3.0)
    );
    assert_eq!(sample("a{x=\"10\"} 4\n", "a{x=\"1\"}"), None);
}

/// `cmd` without the environment that would point rkcm elsewhere than its flags say
/// (`KUBECONFIG`, in-cluster variables, `RUST_LOG`), and with no stdin.
pub(crate) fn isolated(cmd: &mut std::process::Command) -> &mut std::process::Command {
    cmd.env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .stdin(Stdio::null())
}

/// A pipe for a child's stdin if there is something to feed it, else nothing.
pub(crate) fn stdin_for(stdin: Option<&str>) -> Stdio {
    if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    }
}
