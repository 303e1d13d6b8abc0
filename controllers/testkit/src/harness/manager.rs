//! [`Manager`]: a controller-manager process confined to one namespace.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result, bail, ensure};

use crate::cluster::{TestCluster, unique_name};
use crate::proxy::{ProxiedRequest, ScopedProxy};

/// Environment variable naming the directory of the plane's upstream binaries.
pub const E2E_BIN_ENV: &str = "RKCM_E2E_BIN";
/// Environment variable naming the rkcm binary to run (default: the one cargo built).
pub const RKCM_BIN_ENV: &str = "RKCM_TEST_BIN";

/// The path of upstream binary `name` of the local plane (`RKCM_E2E_BIN`).
pub fn e2e_bin(name: &str) -> Result<PathBuf> {
    let dir = std::env::var_os(E2E_BIN_ENV).with_context(|| {
        format!("{E2E_BIN_ENV} is not set: run `eval \"$(bash e2e/cluster.sh env)\"`")
    })?;
    Ok(PathBuf::from(dir).join(name))
}

/// The rkcm binary: `RKCM_TEST_BIN`, or the one cargo built next to the running test
/// executable (`<target>/<profile>/deps/<test>-<hash>` → `<target>/<profile>/rkcm`). Run
/// `cargo build -p rkcm` with the same target directory and profile first.
pub fn rkcm_binary() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os(RKCM_BIN_ENV) {
        return Ok(PathBuf::from(bin));
    }
    let exe = std::env::current_exe().context("locating the test executable")?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .with_context(|| format!("no target profile directory above {}", exe.display()))?;
    let bin = profile_dir.join(format!("rkcm{}", std::env::consts::EXE_SUFFIX));
    ensure!(
        bin.is_file(),
        "rkcm binary not found at {}: run `cargo build -p rkcm` with the same CARGO_TARGET_DIR \
         and profile as this test, or set {RKCM_BIN_ENV}",
        bin.display()
    );
    Ok(bin)
}

/// Which controller-manager a [`Manager`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManagerKind {
    /// Upstream kube-controller-manager of the plane (`RKCM_E2E_BIN`).
    Upstream,
    /// The rkcm binary ([`rkcm_binary`]).
    Rkcm,
}

impl ManagerKind {
    /// The process's name, for messages and log files.
    pub fn name(self) -> &'static str {
        match self {
            ManagerKind::Upstream => "kube-controller-manager",
            ManagerKind::Rkcm => "rkcm",
        }
    }

    /// The binary to run.
    pub fn binary(self) -> Result<PathBuf> {
        match self {
            ManagerKind::Upstream => e2e_bin("kube-controller-manager"),
            ManagerKind::Rkcm => rkcm_binary(),
        }
    }
}

/// A controller-manager process (upstream's or rkcm's) talking to the plane through its own
/// [`ScopedProxy`], so it sees and writes only one namespace. Runs without leader election
/// and without a serving port, with `--v=2`; its output goes to a log file that is removed
/// unless [`Manager::keep_log`] was called. Killed when dropped.
pub struct Manager {
    kind: ManagerKind,
    child: tokio::process::Child,
    /// The command line, kept for [`Manager::kill_and_restart`].
    bin: PathBuf,
    args: Vec<String>,
    proxy: ScopedProxy,
    log: PathBuf,
    keep: bool,
}

impl Manager {
    /// Starts `kind` with `--controllers=<controllers>`, confined to `namespace`.
    pub async fn start(
        kind: ManagerKind,
        cluster: &TestCluster,
        namespace: &str,
        controllers: &str,
    ) -> Result<Self> {
        Self::start_with(kind, cluster, namespace, controllers, &[]).await
    }

    /// Like [`Manager::start`], with more flags.
    pub async fn start_with(
        kind: ManagerKind,
        cluster: &TestCluster,
        namespace: &str,
        controllers: &str,
        extra: &[&str],
    ) -> Result<Self> {
        let bin = kind.binary()?;
        let proxy = ScopedProxy::start(cluster, namespace).await?;
        let log = std::env::temp_dir()
            .join(unique_name(&format!("{}-{namespace}", kind.name())))
            .with_extension("log");
        let mut args = vec![
            format!("--kubeconfig={}", proxy.kubeconfig().display()),
            format!("--controllers={controllers}"),
        ];
        args.extend(
            ["--leader-elect=false", "--secure-port=0", "--v=2"]
                .iter()
                .chain(extra)
                .map(|a| (*a).to_owned()),
        );
        let child = spawn(&bin, &args, &log)?;
        Ok(Self {
            kind,
            child,
            bin,
            args,
            proxy,
            log,
            keep: false,
        })
    }

    /// Kills the process with SIGKILL (no chance to clean up, as in a node crash) and starts
    /// it again with the same command line, through the same proxy (its watch delays hold);
    /// the new process's output is appended to the same log.
    pub async fn kill_and_restart(&mut self) -> Result<()> {
        self.child
            .kill()
            .await
            .with_context(|| format!("killing {}", self.kind.name()))?;
        self.child = spawn(&self.bin, &self.args, &self.log)?;
        Ok(())
    }

    /// Which manager this is.
    pub fn kind(&self) -> ManagerKind {
        self.kind
    }

    /// The process id of the running process.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The proxy the process talks through.
    pub fn proxy(&self) -> &ScopedProxy {
        &self.proxy
    }

    /// Writes that went through the proxy.
    pub fn writes(&self) -> Vec<ProxiedRequest> {
        self.proxy.writes()
    }

    /// Kills the process (SIGKILL: the harshest handover) and closes its proxy.
    pub async fn stop(mut self) -> Result<()> {
        self.child
            .kill()
            .await
            .with_context(|| format!("stopping {}", self.kind.name()))?;
        self.proxy.stop();
        Ok(())
    }

    /// Like [`Manager::stop`], and fails if the process ever tried to write outside its
    /// namespace.
    pub async fn stop_scoped(self) -> Result<()> {
        let refused = self.proxy.refused();
        let name = self.kind.name();
        self.stop().await?;
        ensure!(
            refused.is_empty(),
            "{name} tried to write outside the test namespace: {refused:?}"
        );
        Ok(())
    }

    /// Fails if the process has exited (a crash or a refused flag), with its log's tail.
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited: {status}\n{}",
                self.kind.name(),
                self.log_tail(30)
            );
        }
        Ok(())
    }

    /// Fails if the process has exited ([`Manager::check_running`]) or tried to write outside
    /// its namespace (the proxy refused it).
    pub fn check_running_in_namespace(&mut self) -> Result<()> {
        self.check_running()?;
        let refused = self.proxy().refused();
        if !refused.is_empty() {
            bail!(
                "{} tried to write outside its namespace: {refused:?}",
                self.kind.name()
            );
        }
        Ok(())
    }

    /// The last `lines` lines of the process's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Keeps the log file (for a failing test) and says where it is, with its last lines.
    pub fn keep_log(&mut self) -> String {
        self.keep = true;
        format!(
            "{} log: {} (last lines:)\n{}",
            self.kind.name(),
            self.log.display(),
            self.log_tail(15)
        )
    }

    /// Adds each manager's log location and tail to a failing `result` (and keeps the logs).
    pub fn with_logs<T>(result: Result<T>, managers: &mut [&mut Manager]) -> Result<T> {
        result.map_err(|mut e| {
            for m in managers.iter_mut() {
                e = e.context(m.keep_log());
            }
            e
        })
    }
}

/// Starts `bin` with `args`, output appended to `log`, killed when dropped.
fn spawn(bin: &Path, args: &[String], log: &Path) -> Result<tokio::process::Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    tokio::process::Command::new(bin)
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if !self.keep {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}
