//! Failover of a sharded run: once the replicas hold the whole ring, the replica holding the
//! range of a Deployment's namespace is SIGKILLed and that Deployment scaled at once. Two
//! answers: when every range the killed replica held is held by another replica again (its
//! Leases polled; the target is the lease duration plus 5 s), and when the first write for the
//! change came (the Deployment's ReplicaSet resized, read from the audit log).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, Patch, PatchParams};
use rkcm_runtime::shard::{LEASE_PREFIX, Ring};
use serde_json::json;

use super::shared::{Threshold, failover_target, ns_of};
use crate::harness::{Env, Probe};
use crate::manager::SHARD_NAMESPACE;
use crate::{audit, latency};

/// How long the replicas may take to hold the whole ring, re-own the ranges, or answer.
const WAIT: Duration = Duration::from_secs(300);
/// How often the Leases are read while waiting.
const POLL: Duration = Duration::from_millis(200);

/// What the sharded failover measured.
pub struct Measured {
    /// Seconds from the kill until every range the killed replica held had another holder.
    pub reowned: f64,
    /// Seconds from the kill to the first write for the change.
    pub first_write: f64,
    /// Ranges the killed replica held.
    pub ranges: usize,
}

/// The identity replica `log` runs its shard holder with (its "starting the shard holder"
/// line), once it has written it.
fn identity(log: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text
        .lines()
        .find(|l| l.contains("starting the shard holder"))?;
    let value = line.split_once("identity=")?.1;
    let value = value.split_whitespace().next()?.trim_matches('"');
    Some(value.to_owned()).filter(|v| !v.is_empty())
}

/// Range → holder of every range Lease of the ring (no entry: no holder).
async fn holders(api: &Api<Lease>, ranges: u32) -> anyhow::Result<BTreeMap<u32, String>> {
    let list = api
        .list(&ListParams::default().labels(&format!("rkcm.io/shard-ring={LEASE_PREFIX}")))
        .await
        .with_context(|| format!("listing the shard Leases in {SHARD_NAMESPACE}"))?;
    let mut out = BTreeMap::new();
    for l in list.items {
        let Some(i) = l
            .metadata
            .name
            .as_deref()
            .and_then(|n| n.strip_prefix(&format!("{LEASE_PREFIX}-")))
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&i| i < ranges)
        else {
            continue;
        };
        if let Some(h) = l
            .spec
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty())
        {
            out.insert(i, h);
        }
    }
    Ok(out)
}

/// Polls the Leases until `done` holds of the holders, at most [`WAIT`]; `what` names the
/// condition for the error.
async fn wait_holders(
    api: &Api<Lease>,
    ranges: u32,
    what: &str,
    mut done: impl FnMut(&BTreeMap<u32, String>) -> bool,
) -> anyhow::Result<BTreeMap<u32, String>> {
    let deadline = Instant::now() + WAIT;
    loop {
        let h = holders(api, ranges).await?;
        if done(&h) {
            return Ok(h);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "shard failover: {what} not within {} s ({} of {ranges} ranges held)",
            WAIT.as_secs(),
            h.len()
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the replicas of a sharded run hold every range of the ring (each range Lease
/// naming one of them), as a scenario that measures reactions from its first change must:
/// replicas take ranges only in their second round (the first announces them, a retry
/// period after the start), and a change made before its range is held waits for that.
pub async fn wait_ring_held(env: &Env, probe: &Probe, ranges: u32) -> anyhow::Result<f64> {
    let t = Instant::now();
    let deadline = t + WAIT;
    let ids = loop {
        let ids: Vec<String> = probe.logs().iter().filter_map(|l| identity(l)).collect();
        if ids.len() == probe.manager_pids().len() {
            break ids;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "sharded run: {} of {} replicas named their shard identity within {} s",
            ids.len(),
            probe.manager_pids().len(),
            WAIT.as_secs()
        );
        tokio::time::sleep(POLL).await;
    };
    let api: Api<Lease> = Api::namespaced(env.client.clone(), SHARD_NAMESPACE);
    wait_holders(&api, ranges, "every range held by a replica", |h| {
        h.len() == ranges as usize && h.values().all(|id| ids.contains(id))
    })
    .await?;
    Ok(t.elapsed().as_secs_f64())
}

/// Kills the replica holding a Deployment's range, scales that Deployment, and measures.
pub async fn run(t: &Threshold, env: &Env, probe: &Probe, ranges: u32) -> anyhow::Result<Measured> {
    let ring = Ring::new(ranges).map_err(|e| anyhow::anyhow!("shard failover: {e}"))?;
    let mut ids: BTreeMap<String, u32> = BTreeMap::new();
    for (log, &pid) in probe.logs().iter().zip(probe.manager_pids()) {
        let id = identity(log).with_context(|| {
            format!(
                "shard failover: no shard holder identity in {}",
                log.display()
            )
        })?;
        ids.insert(id, pid);
    }
    let api: Api<Lease> = Api::namespaced(env.client.clone(), SHARD_NAMESPACE);
    let phase = probe.begin("failover (shards)");
    probe.progress("shard failover: waiting for the replicas to hold every range");
    let before = wait_holders(&api, ranges, "every range held by a replica", |h| {
        h.len() == ranges as usize && h.values().all(|id| ids.contains_key(id))
    })
    .await?;
    let target = failover_target(&t.plan)?;
    let ns = ns_of(target.ns);
    let victim = before
        .get(&ring.range_of(&ns))
        .cloned()
        .with_context(|| format!("shard failover: nobody holds the range of {ns}"))?;
    let victim_pid = ids[&victim];
    let held: BTreeSet<u32> = before
        .iter()
        .filter(|(_, h)| **h == victim)
        .map(|(i, _)| *i)
        .collect();
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &ns);
    let d = deployments
        .get(&target.name)
        .await
        .with_context(|| format!("reading deployment {ns}/{}", target.name))?;
    let replicas = d.spec.replicas.unwrap_or(1) + 1;
    let from = audit::offset(&env.audit_log)?;
    say!(
        "  killing replica pid {victim_pid} ({} of {ranges} ranges, among them {ns}'s)",
        held.len()
    );
    let killed_at = Instant::now();
    let killed = jiff::Timestamp::now();
    probe.kill_replica(victim_pid);
    deployments
        .patch(
            &target.name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
        )
        .await
        .with_context(|| format!("scaling deployment {ns}/{} to {replicas}", target.name))?;
    probe.progress("shard failover: waiting for the killed replica's ranges to be held again");
    wait_holders(
        &api,
        ranges,
        "the killed replica's ranges held again",
        |h| {
            held.iter().all(|i| {
                h.get(i)
                    .is_some_and(|id| *id != victim && ids.contains_key(id))
            })
        },
    )
    .await?;
    let reowned = killed_at.elapsed().as_secs_f64();
    probe.progress("shard failover: waiting for the first write for the change");
    let first_write = first_write(env, &target.name, probe.manager_user(), from, killed).await?;
    probe.end(
        phase,
        format!(
            "{} ranges held again {reowned:.1} s after the kill; first write {first_write:.1} s",
            held.len()
        ),
    );
    Ok(Measured {
        reowned,
        first_write,
        ranges: held.len(),
    })
}

/// Seconds from `killed` to the first successful request of `user` after it that names the
/// Deployment `name` or one of its ReplicaSets (`<name>-<hash>`), from the audit log.
async fn first_write(
    env: &Env,
    name: &str,
    user: &str,
    from: u64,
    killed: jiff::Timestamp,
) -> anyhow::Result<f64> {
    let deadline = Instant::now() + WAIT;
    loop {
        let records = latency::read(&env.audit_log, from, None)?;
        let first = records
            .iter()
            .filter(|r| r.user == user && r.received > killed && r.code < 400)
            .filter(|r| r.name == name || r.name.rsplit_once('-').is_some_and(|(p, _)| p == name))
            .map(|r| r.received)
            .min();
        if let Some(at) = first {
            return Ok(at.duration_since(killed).as_secs_f64());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "shard failover: no write for {name} within {} s",
            WAIT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::identity;

    #[test]
    fn the_identity_is_read_from_the_shard_holder_line() {
        let dir = std::env::temp_dir().join(format!("rkcm-bench-identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let log = dir.join("replica.log");
        std::fs::write(
            &log,
            "2026-12-06T10:48:34Z  INFO rkcm: leader election enabled identity=\"vm_other\"\n\
             2026-12-06T10:48:34Z  INFO rkcm: starting the shard holder identity=vm_aed7 ranges=64\n",
        )
        .expect("write log");
        assert_eq!(identity(&log).as_deref(), Some("vm_aed7"));
        std::fs::write(&log, "nothing yet\n").expect("write log");
        assert_eq!(identity(&log), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
