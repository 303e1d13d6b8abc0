//! Failover at the threshold: the measured manager paused (SIGSTOP), two replicas of the same
//! manager started with leader election on a Lease of the run's, the second once the first
//! leads and has synced and once it has synced as far as a standby does; then the leader is
//! SIGKILLed and a Deployment scaled at once. The answer is the standby's first write for
//! that Deployment (its ReplicaSet resized), read from the audit log. The standby's CPU from
//! the kill to that write is charged to the manager: a standby opens no watch, so taking over
//! is a cold start, as the sharded survivors' lists of the ranges they take are in theirs.

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::phases::wait_synced;
use super::shared::{LEASE, Threshold, failover_target, ns_of};
use crate::harness::{Env, Probe};
use crate::manager::{Running, signal};
use crate::{audit, k8s, latency};

/// How long a replica may take to lead, sync or answer.
const WAIT: Duration = Duration::from_secs(1800);

async fn wait_line(log: &std::path::Path, line: &str, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        // Upstream capitalises its lines ("Successfully acquired lease"), rkcm does not.
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.to_lowercase().contains(&line.to_lowercase()) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{}: no \"{line}\" within {} s",
            log.display(),
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Seconds from the leader's kill to the standby's first write for the change.
pub async fn run(t: &Threshold, env: &Env, probe: &Probe) -> anyhow::Result<f64> {
    let main = probe.manager_pid();
    signal(main, libc::SIGSTOP);
    let r = replicas(t, env, probe).await;
    signal(main, libc::SIGCONT);
    r
}

async fn replicas(t: &Threshold, env: &Env, probe: &Probe) -> anyhow::Result<f64> {
    let m = probe.manager();
    k8s::delete_lease(&env.client, LEASE).await?;
    let args = m.args(
        &m.kubeconfig(&env.cluster_dir),
        &ALL,
        env.qps,
        env.burst,
        &[
            "--leader-elect=true".into(),
            format!("--leader-elect-resource-name={LEASE}"),
            "--leader-elect-resource-namespace=kube-system".into(),
        ],
    );
    let log = |x: &str| {
        env.logs_dir
            .join(format!("threshold-{}-failover-{x}.log", m.name()))
    };
    let bin = &env.bins[&m];
    let phase = probe.begin("failover");
    let mut a = Running::spawn(bin, &args, &log("a"))?;
    probe.progress("failover: replica a acquiring the lease");
    wait_line(&a.log, "successfully acquired lease", WAIT).await?;
    wait_synced(&a.log, WAIT, || {}).await?;
    let mut b = Running::spawn(bin, &args, &log("b"))?;
    probe.progress("failover: replica b standing by");
    wait_line(&b.log, "attempting to acquire leader lease", WAIT).await?;
    // A standby that syncs its caches before it leads says so; one that does not logs nothing
    // more: either way, its log goes quiet.
    wait_quiet_log(&b.log, Duration::from_secs(10), WAIT).await?;
    let target = failover_target(&t.plan)?;
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), &ns_of(target.ns));
    let d = api
        .get(&target.name)
        .await
        .with_context(|| format!("reading deployment {}", target.name))?;
    let replicas = d.spec.replicas.unwrap_or(1) + 1;
    let from = audit::offset(&env.audit_log)?;
    let standby_cpu = crate::procfs::cpu_seconds(b.pid);
    signal(a.pid, libc::SIGKILL);
    let killed = jiff::Timestamp::now();
    let patch = json!({"spec": {"replicas": replicas}});
    api.patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("scaling deployment {} to {replicas}", target.name))?;
    probe.progress("failover: waiting for the standby's first write");
    let deadline = Instant::now() + WAIT;
    let secs = loop {
        let records = latency::read(&env.audit_log, from, None)?;
        let first = records
            .iter()
            .filter(|r| r.user == m.user() && r.received > killed && r.code < 400)
            .filter(|r| {
                r.name == target.name
                    || r.name
                        .rsplit_once('-')
                        .is_some_and(|(p, _)| p == target.name)
            })
            .map(|r| r.received)
            .min();
        if let Some(at) = first {
            break at.duration_since(killed).as_secs_f64();
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the standby wrote nothing for {} within {} s",
            target.name,
            WAIT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let takeover = standby_cpu
        .zip(crate::procfs::cpu_seconds(b.pid))
        .map(|(at_kill, now)| now - at_kill);
    if let Some(cpu) = takeover {
        probe.charge_cpu(cpu);
    }
    probe.end(
        phase,
        format!(
            "standby answered {secs:.1} s after the leader's kill, its CPU {} s charged",
            takeover.map_or_else(|| "(unreadable, none)".to_owned(), |c| format!("{c:.2}"))
        ),
    );
    b.stop(Duration::from_secs(10)).await;
    a.stop(Duration::from_secs(1)).await;
    Ok(secs)
}

const ALL: [&str; 9] = crate::scenarios::idle::ALL_CONTROLLERS;

/// Waits until `log` has not grown for `quiet`.
async fn wait_quiet_log(
    log: &std::path::Path,
    quiet: Duration,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let (mut len, mut since) = (0u64, Instant::now());
    loop {
        let now = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
        if now != len {
            (len, since) = (now, Instant::now());
        }
        if since.elapsed() >= quiet {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{}: still writing after {} s",
            log.display(),
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
