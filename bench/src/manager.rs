//! The controller-managers under test, started as child processes with their own kubeconfig
//! (so the audit log tells their requests apart) and the same client rate limits.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Which manager a run measures. The bench always runs them in this order (upstream first).
/// The sharded variants share rkcm's binary and user: their runs come one after another, so
/// the audit log's requests of user `rkcm` over a run are that run's replicas' together.
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
    /// rkcm in sharded mode: [`Sharding::replicas`] processes with `--leader-elect=true
    /// --rkcm-shards=<ranges>`, the API server's shard selector on.
    #[serde(rename = "rkcm-shards")]
    RkcmShards,
    /// The same with `--rkcm-shard-selector=false`: every replica lists and watches every
    /// namespace and keeps its ranges' objects on the client.
    #[serde(rename = "rkcm-shards-client")]
    RkcmShardsClient,
}

/// How the sharded managers run: this many replicas, each its own process with the same
/// client limits and the same user, splitting a ring of `ranges`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sharding {
    pub replicas: usize,
    pub ranges: u32,
}

/// Where the sharded replicas keep their Leases (`--leader-elect-resource-namespace`).
pub const SHARD_NAMESPACE: &str = "kube-system";

impl Manager {
    pub fn name(self) -> &'static str {
        match self {
            Manager::Upstream => "upstream",
            Manager::Rkcm => "rkcm",
            Manager::RkcmShards => "rkcm-shards",
            Manager::RkcmShardsClient => "rkcm-shards-client",
        }
    }

    /// Whether this is rkcm in sharded mode (several replicas).
    pub fn is_sharded(self) -> bool {
        matches!(self, Manager::RkcmShards | Manager::RkcmShardsClient)
    }

    /// How many processes one run starts.
    pub fn replicas(self, sharding: Sharding) -> usize {
        if self.is_sharded() {
            sharding.replicas.max(1)
        } else {
            1
        }
    }

    /// The flags that make a run sharded (after [`Manager::args`], whose
    /// `--leader-elect=false` the later `--leader-elect=true` overrides); none otherwise.
    pub fn shard_flags(self, sharding: Sharding) -> Vec<String> {
        if !self.is_sharded() {
            return Vec::new();
        }
        let mut flags = vec![
            "--leader-elect=true".to_string(),
            format!("--leader-elect-resource-namespace={SHARD_NAMESPACE}"),
            format!("--rkcm-shards={}", sharding.ranges),
        ];
        if self == Manager::RkcmShardsClient {
            flags.push("--rkcm-shard-selector=false".to_string());
        }
        flags
    }

    /// The flags after the common ones: the scenario's, then a manager of one process gets
    /// the scenario's flags for such a manager (`single`, e.g. leader election as deployed)
    /// and a sharded one its replicas' flags instead ([`Manager::shard_flags`]).
    pub fn extra_flags(
        self,
        scenario: Vec<String>,
        single: Vec<String>,
        sharding: Sharding,
    ) -> Vec<String> {
        let mut flags = scenario;
        if !self.is_sharded() {
            flags.extend(single);
        }
        flags.extend(self.shard_flags(sharding));
        flags
    }

    /// The user name of its client certificate, as the audit log records it.
    pub fn user(self) -> &'static str {
        match self {
            Manager::Upstream => "kcm",
            Manager::Rkcm | Manager::RkcmShards | Manager::RkcmShardsClient => "rkcm",
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
            Manager::Rkcm | Manager::RkcmShards | Manager::RkcmShardsClient => &[
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
            .kill_on_drop(true)
            // A process group of its own, signalled as a whole: a wrapper given as the binary
            // (heaptrack, `BENCH_RKCM_BIN`) is stopped and killed with the manager it runs,
            // instead of leaving it holding the plane and the metrics port.
            .process_group(0);
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
        signal(self.pid, libc::SIGTERM);
        let status = match tokio::time::timeout(grace, self.wait()).await {
            Ok(s) => Some(s),
            Err(_) => {
                signal(self.pid, libc::SIGKILL);
                let s = self.child.wait().await.ok();
                self.exited = s;
                s
            }
        };
        // Whatever the manager left in its group (a wrapper's child) goes with it.
        signal(self.pid, libc::SIGKILL);
        status
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// The replicas of one run, each its own process; a replica SIGKILLed on purpose (the
/// failover's) is listed in `expected` so that its exit does not end the run.
pub struct Replicas {
    pub procs: Vec<Running>,
}

impl Replicas {
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(|p| p.pid).collect()
    }

    /// The first replica's log (unsupported-controller lines are the same in every replica).
    pub fn log(&self) -> &Path {
        &self.procs[0].log
    }

    /// The status of a replica that ended and was not SIGKILLed on purpose (does not block).
    pub fn exited(&mut self, expected: &std::collections::BTreeSet<u32>) -> Option<ExitStatus> {
        self.procs
            .iter_mut()
            .filter(|p| !expected.contains(&p.pid))
            .find_map(Running::exited)
    }

    /// Resolves when a replica not in `expected` ends (never, once only such are left).
    pub async fn wait(
        &mut self,
        expected: &std::sync::Mutex<std::collections::BTreeSet<u32>>,
    ) -> (u32, ExitStatus) {
        loop {
            let live: Vec<&mut Running> = self
                .procs
                .iter_mut()
                .filter(|p| p.exited.is_none())
                .collect();
            if live.is_empty() {
                return std::future::pending().await;
            }
            let pids: Vec<u32> = live.iter().map(|p| p.pid).collect();
            let (st, k, _) =
                futures::future::select_all(live.into_iter().map(|p| Box::pin(p.wait()))).await;
            let pid = pids[k];
            let on_purpose = expected
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains(&pid);
            if !on_purpose {
                return (pid, st);
            }
        }
    }

    /// Stops every replica at once (SIGTERM, SIGKILL after `grace`).
    pub async fn stop(&mut self, grace: Duration) {
        futures::future::join_all(self.procs.iter_mut().map(|p| p.stop(grace))).await;
    }

    /// The last `n` lines of the log of the replica `pid`.
    pub fn log_tail(&self, pid: u32, n: usize) -> String {
        self.procs
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| p.log_tail(n))
            .unwrap_or_default()
    }
}

/// Sends `sig` to the process group of `pid` (a manager or replica the bench started, each
/// the leader of a group of its own, see [`Running::spawn`]).
#[allow(unsafe_code)] // std can only SIGKILL a child, not stop, continue or kill another
pub fn signal(pid: u32, sig: libc::c_int) {
    let Ok(group) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) on a process group of the bench's own.
    unsafe {
        libc::kill(-group, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream and one rkcm get the scenario's flags for a manager of one process after the
    /// scenario's own; sharded replicas never get them, only their shard flags.
    #[test]
    fn single_flags_go_to_managers_of_one_process_only() {
        let sharding = Sharding {
            replicas: 3,
            ranges: 64,
        };
        let scenario = vec!["--a=1".to_owned()];
        let single = vec!["--leader-elect=true".to_owned()];
        for m in [Manager::Upstream, Manager::Rkcm] {
            assert_eq!(
                m.extra_flags(scenario.clone(), single.clone(), sharding),
                ["--a=1", "--leader-elect=true"],
                "{}",
                m.name()
            );
        }
        for m in [Manager::RkcmShards, Manager::RkcmShardsClient] {
            let flags = m.extra_flags(scenario.clone(), single.clone(), sharding);
            assert_eq!(flags[0], "--a=1", "{}", m.name());
            assert_eq!(flags[1..], m.shard_flags(sharding)[..], "{}", m.name());
            assert!(
                flags.contains(&"--rkcm-shards=64".to_owned()),
                "{}",
                m.name()
            );
        }
    }

    /// A wrapper's child (a shell running a process of its own, as heaptrack runs the
    /// manager) stops with the wrapper.
    #[tokio::test]
    async fn stopping_a_manager_stops_what_its_wrapper_started() {
        let dir = std::env::temp_dir().join(format!("rkcm-bench-group-{}", std::process::id()));
        let log = dir.join("wrapper.log");
        let args = vec![
            "-c".to_owned(),
            "sleep 1000 & echo $!; trap '' TERM; wait".to_owned(),
        ];
        let mut r = Running::spawn(Path::new("/bin/sh"), &args, &log).expect("spawn");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let child: i32 = loop {
            if let Ok(pid) = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .trim()
                .parse()
            {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the wrapper never started its child"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        r.stop(Duration::from_millis(200)).await;
        let gone = |pid: i32| {
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !gone(child) {
            assert!(
                std::time::Instant::now() < deadline,
                "the wrapper's child {child} outlived the stop"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
