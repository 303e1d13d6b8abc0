//! The controller-managers under test, started as child processes with their own kubeconfig
//! (so the audit log tells their requests apart) and the same client rate limits.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Which manager a run measures. The bench always runs them in this order (upstream first).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Manager {
    /// Upstream kube-controller-manager (the pinned build of the local plane).
    Upstream,
    /// rkcm (release build).
    Rkcm,
}

impl Manager {
    pub fn name(self) -> &'static str {
        match self {
            Manager::Upstream => "upstream",
            Manager::Rkcm => "rkcm",
        }
    }

    /// The user name of its client certificate, as the audit log records it.
    pub fn user(self) -> &'static str {
        match self {
            Manager::Upstream => "kcm",
            Manager::Rkcm => "rkcm",
        }
    }

    pub fn kubeconfig(self, cluster_dir: &Path) -> PathBuf {
        cluster_dir.join(format!("kubeconfig-{}", self.user()))
    }

    /// Log lines meaning "this build does not run the requested controller": the run then
    /// ends at once as unsupported instead of waiting for the timeout.
    pub fn unsupported_markers(self) -> &'static [&'static str] {
        match self {
            Manager::Upstream => &[],
            Manager::Rkcm => &[
                "is not implemented by this build",
                "no controller enabled by --controllers is implemented",
            ],
        }
    }

    /// The command line both managers share: same controllers, same client limits, no
    /// leader election, no serving port.
    pub fn args(
        self,
        kubeconfig: &Path,
        controllers: &[&str],
        qps: f32,
        burst: u32,
        extra: &[String],
    ) -> Vec<String> {
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--controllers={}", controllers.join(",")),
            "--leader-elect=false".to_string(),
            "--secure-port=0".to_string(),
            format!("--kube-api-qps={qps}"),
            format!("--kube-api-burst={burst}"),
        ];
        args.extend(extra.iter().cloned());
        args
    }
}

/// `<bin> --version`, first line, or why it could not be run.
pub fn version(bin: &Path) -> String {
    match std::process::Command::new(bin).arg("--version").output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            let text = if text.trim().is_empty() {
                String::from_utf8_lossy(&out.stderr).into_owned()
            } else {
                text.into_owned()
            };
            text.lines().next().unwrap_or("").trim().to_string()
        }
        Err(e) => format!("unknown ({e})"),
    }
}

/// A started manager process; its stdout and stderr go to `log`.
pub struct Running {
    child: tokio::process::Child,
    pub pid: u32,
    pub log: PathBuf,
    exited: Option<ExitStatus>,
}

impl Running {
    pub fn spawn(bin: &Path, args: &[String], log: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        let mut cmd = tokio::process::Command::new(bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe; the child dies with the bench process, so an
        // interrupted bench never leaves a manager running against the plane.
        #[allow(unsafe_code)] // std has no safe parent-death signal
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child.id().context("child has no pid")?;
        Ok(Self {
            child,
            pid,
            log: log.to_path_buf(),
            exited: None,
        })
    }

    /// The exit status if the process has ended (does not block).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// Resolves when the process ends.
    pub async fn wait(&mut self) -> ExitStatus {
        if let Some(s) = self.exited {
            return s;
        }
        match self.child.wait().await {
            Ok(s) => {
                self.exited = Some(s);
                s
            }
            Err(_) => std::future::pending().await,
        }
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.exited() {
            return Some(s);
        }
        // SAFETY: plain kill(2) on our own child's pid, which has not been reaped yet.
        #[allow(unsafe_code)] // std can only SIGKILL a child, not SIGTERM it
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        match tokio::time::timeout(grace, self.wait()).await {
            Ok(s) => Some(s),
            Err(_) => {
                let _ = self.child.start_kill();
                let s = self.child.wait().await.ok();
                self.exited = s;
                s
            }
        }
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}
