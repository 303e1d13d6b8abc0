//! The `leader` scenario: two leader-elected replicas under churn, the leader killed and the next
//! one stopped, each handover measured from the audit log.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;

use super::outcome::{CONTROLLERS, Handover, Options, Outcome};
use super::report::count_panics;
use super::workload::{Workload, watched_namespace};
use crate::cluster::TestCluster;
use crate::harness::ManagerKind;
use crate::invariants::watch::InvariantWatcher;
use crate::wait::wait_for;

/// One workload write of the audit log: (time, user).
pub(crate) fn audit_writes(log: &str, namespace: &str) -> Vec<(jiff::Timestamp, String)> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            )
        })
        .filter(|e| e["objectRef"]["namespace"] == namespace)
        .filter(|e| {
            !matches!(
                e["objectRef"]["resource"].as_str(),
                Some("leases" | "events")
            )
        })
        .filter_map(|e| {
            let user = e["user"]["username"].as_str()?;
            if user != "rkcm" && user != "kcm" {
                return None;
            }
            let at: jiff::Timestamp = e["requestReceivedTimestamp"].as_str()?.parse().ok()?;
            Some((at, user.to_owned()))
        })
        .collect()
}

/// The handover measures for a fault at `at` that took `old` down.
pub fn handover(
    writes: &[(jiff::Timestamp, String)],
    signal: &str,
    old: &str,
    at: jiff::Timestamp,
    until: jiff::Timestamp,
) -> Handover {
    // Until the old leader is started again (then it may lead again, legitimately).
    let writes: Vec<_> = writes.iter().filter(|(t, _)| *t < until).cloned().collect();
    let first_new = writes.iter().find(|(t, u)| *t >= at && u != old);
    Handover {
        signal: signal.to_owned(),
        old_leader: old.to_owned(),
        new_leader: first_new.map(|(_, u)| u.clone()),
        gap_s: first_new.map(|(t, _)| t.duration_since(at).as_secs_f64()),
        old_writes_after_fault: writes.iter().filter(|(t, u)| *t >= at && u == old).count(),
        overlapping_writes: first_new.map_or(0, |(nt, _)| {
            writes.iter().filter(|(t, u)| t > nt && u == old).count()
        }),
    }
}

pub(crate) struct Replica {
    pub(crate) user: String,
    pub(crate) child: tokio::process::Child,
    args: Vec<String>,
    bin: std::path::PathBuf,
    pub(crate) log: std::path::PathBuf,
}

impl Replica {
    pub(crate) fn spawn(
        bin: &std::path::Path,
        user: &str,
        args: &[String],
        log: &std::path::Path,
    ) -> Result<Self> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let child = tokio::process::Command::new(bin)
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        Ok(Self {
            user: user.to_owned(),
            child,
            args: args.to_vec(),
            bin: bin.to_path_buf(),
            log: log.to_path_buf(),
        })
    }

    pub(crate) fn signal(&self, sig: &str) -> Result<()> {
        let pid = self.child.id().context("process already reaped")?;
        let status = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()?;
        anyhow::ensure!(status.success(), "kill -{sig} {pid}: {status}");
        Ok(())
    }

    pub(crate) async fn restart(&mut self) -> Result<()> {
        let _ = self.child.kill().await;
        *self = Self::spawn(&self.bin, &self.user, &self.args, &self.log)?;
        Ok(())
    }
}

/// Whether audit event `e` is a successful write of a Lease in `namespace`.
pub(crate) fn is_lease_write(e: &Value, namespace: &str) -> bool {
    e["stage"] == "ResponseComplete"
        && e["objectRef"]["namespace"] == namespace
        && e["objectRef"]["resource"] == "leases"
        && matches!(e["verb"].as_str(), Some("update" | "create" | "patch"))
        && e["responseStatus"]["code"]
            .as_i64()
            .is_some_and(|c| c < 300)
}

/// The user of the replica holding the Lease: the last one that wrote it (audit log).
pub(crate) fn lease_writer(log: &str, namespace: &str) -> Option<String> {
    log.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| is_lease_write(e, namespace))
        .and_then(|e| e["user"]["username"].as_str().map(str::to_owned))
}

/// The two replicas of the leader scenario, as users `rkcm` and `kcm`, each with its log.
fn spawn_pair(
    bin: &std::path::Path,
    kind: ManagerKind,
    args: &dyn Fn(&str) -> Vec<String>,
) -> Result<[Replica; 2]> {
    let logs = std::env::temp_dir();
    Ok([
        Replica::spawn(
            bin,
            "rkcm",
            &args("rkcm"),
            &logs
                .join(crate::cluster::unique_name(&format!(
                    "{}-rkcm",
                    kind.name()
                )))
                .with_extension("log"),
        )?,
        Replica::spawn(
            bin,
            "kcm",
            &args("kcm"),
            &logs
                .join(crate::cluster::unique_name(&format!("{}-kcm", kind.name())))
                .with_extension("log"),
        )?,
    ])
}

/// Closes a run of manager replicas: records the run's error, its duration, what the
/// invariant watcher saw and the panics in each replica's log, then kills the replicas.
pub(crate) async fn close_run(
    outcome: &mut Outcome,
    result: Result<()>,
    begun: Instant,
    watcher: InvariantWatcher,
    replicas: &mut [Replica],
) {
    if let Err(e) = result {
        outcome.error = Some(format!("{e:#}"));
    }
    outcome.duration_s = begun.elapsed().as_secs_f64();
    outcome.record(watcher.finish().await);
    for r in replicas {
        outcome.panics += count_panics(&std::fs::read_to_string(&r.log).unwrap_or_default());
        let _ = r.child.kill().await;
    }
}

/// The `leader` scenario for `kind`. Needs `RKCM_CLUSTER_DIR` (the plane's directory, for
/// the users' kubeconfigs and the audit log).
pub async fn run_leader(
    cluster: &TestCluster,
    kind: ManagerKind,
    opts: &Options,
) -> Result<Outcome> {
    let dir = std::path::PathBuf::from(
        std::env::var_os("RKCM_CLUSTER_DIR").context("RKCM_CLUSTER_DIR is not set")?,
    );
    let audit_path = dir.join("logs/audit.log");
    let audit_from = std::fs::metadata(&audit_path)
        .with_context(|| format!("no audit log at {}", audit_path.display()))?
        .len();
    let read_audit = || -> Result<String> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(&audit_path)?;
        f.seek(SeekFrom::Start(audit_from))?;
        let mut s = String::new();
        f.read_to_string(&mut s)?;
        Ok(s)
    };
    let (ns, watcher) = watched_namespace(cluster, "chaos-leader").await?;
    let bin = kind.binary()?;
    let args = |user: &str| -> Vec<String> {
        vec![
            format!(
                "--kubeconfig={}",
                dir.join(format!("kubeconfig-{user}")).display()
            ),
            format!("--controllers={CONTROLLERS}"),
            "--leader-elect=true".into(),
            format!("--leader-elect-resource-namespace={}", ns.name()),
            "--leader-elect-resource-name=chaos".into(),
            "--secure-port=0".into(),
            "--v=2".into(),
            format!("--kube-api-qps={}", opts.qps),
            format!("--kube-api-burst={}", opts.qps * 2),
        ]
    };
    let mut replicas = spawn_pair(&bin, kind, &args)?;
    let work = Workload {
        ns: &ns,
        opts,
        all: false,
    };
    let mut outcome = Outcome::empty("leader", kind, 0.0);
    let begun = Instant::now();
    let result = async {
        outcome.undisturbed_converge_s = work.baseline(opts.converge_timeout).await?;
        let mut faults = Vec::new();
        for signal in ["KILL", "TERM"] {
            let leader = wait_for("a leader", Duration::from_secs(60), || async {
                Ok(lease_writer(&read_audit()?, ns.name()))
            })
            .await?;
            // Some churn under the current leader, then the fault in the middle of it.
            let churn_until = Instant::now() + Duration::from_secs(60);
            let fault = async {
                tokio::time::sleep(Duration::from_secs(20)).await;
                let r = replicas
                    .iter()
                    .find(|r| r.user == leader)
                    .context("no replica for the leader")?;
                // The fault comes with the baseline's change.
                work.bump(1).await?;
                let at = jiff::Timestamp::now();
                r.signal(signal)?;
                anyhow::Ok(at)
            };
            let ((deleted, changes), at) = tokio::try_join!(work.churn(churn_until), fault)?;
            outcome.pod_deletions += deleted;
            outcome.spec_changes += changes;
            outcome.faults += 1;
            let t = work.wait_settled(opts.converge_timeout).await?;
            outcome.converge_after_fault_s = Some(t.as_secs_f64());
            // The old leader comes back as a standby.
            for r in replicas.iter_mut().filter(|r| r.user == leader) {
                r.restart().await?;
            }
            faults.push((signal, leader.clone(), at, jiff::Timestamp::now()));
        }
        let writes = audit_writes(&read_audit()?, ns.name());
        for (signal, old, at, until) in faults {
            outcome
                .handovers
                .push(handover(&writes, &format!("SIG{signal}"), &old, at, until));
        }
        anyhow::Ok(())
    }
    .await;
    close_run(&mut outcome, result, begun, watcher, &mut replicas).await;
    Ok(outcome)
}
