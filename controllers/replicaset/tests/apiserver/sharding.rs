//! Sharded replicas (`--rkcm-shards`): three replicas of the ReplicaSet controller split a
//! ring of namespace-hash ranges over real Leases, and each writes only for the namespaces of
//! the ranges it holds.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Result;
use rkcm_testkit::recorder::Recorder;
use rkcm_testkit::wait_for;

use crate::harness::*;

const RANGES: u32 = 8;
const REPLICAS: usize = 3;

rkcm_testkit::scenario! {
    sharded_replicas_each_write_only_for_their_own_ranges, "rs-shard", sharded
}

/// The namespace a request path names (`/api/v1/namespaces/<ns>/...`), if any.
fn namespace_of(path: &str) -> Option<&str> {
    let mut parts = path.split('/');
    parts.find(|p| *p == "namespaces")?;
    parts.next()
}

async fn sharded(env: &Env) -> Result<()> {
    // Six namespaces for the workload; the Leases live in the scenario's own.
    let mut workload = Vec::new();
    for _ in 0..6 {
        workload.push(Env::new("rs-shard-w").await?);
    }
    let mut namespaces = vec![env.name()];
    namespaces.extend(workload.iter().map(Env::name));
    let recorders: Vec<Recorder> = (0..REPLICAS).map(|_| Recorder::new()).collect();
    let client = env.cluster.client();
    let ctrl = Controllers::sharded(
        recorders.iter().map(|r| r.wrap(client.clone())).collect(),
        client.clone(),
        &namespaces,
        RANGES,
    )
    .spawn("replicaset-controller", |ctx| {
        rkcm_replicaset::start_replicaset(ctx, env.config())
    })
    .run();
    let shards = ctrl.shards();

    // The split settles: every range held by exactly one replica, each at its share, and
    // every replica's caches cover what it holds.
    wait_for(
        "the ring split between the replicas",
        Duration::from_secs(30),
        || async {
            let held: Vec<BTreeSet<u32>> = shards.iter().map(|s| s.held()).collect();
            let all: usize = held.iter().map(BTreeSet::len).sum();
            let union: BTreeSet<u32> = held.iter().flatten().copied().collect();
            let cached = shards.iter().zip(&held).all(|(s, h)| s.cached() == *h);
            let shares = held.iter().all(|h| h.len() >= 2);
            Ok((all == RANGES as usize && union.len() == all && cached && shares).then_some(held))
        },
    )
    .await?;
    let held: Vec<BTreeSet<u32>> = shards.iter().map(|s| s.held()).collect();
    let ring = shards[0].config().ring;

    let mut uids = Vec::new();
    for w in &workload {
        let rs = w
            .create_rs(replicaset("web", 2, &[("app", "web")], &[("app", "web")]))
            .await?;
        uids.push(uid_of(&rs));
    }
    for (w, uid) in workload.iter().zip(&uids) {
        w.wait_active(uid, 2).await?;
    }
    let after: Vec<BTreeSet<u32>> = shards.iter().map(|s| s.held()).collect();
    ensure_eq(&after, &held, "held ranges during the workload")?;

    // Every write of a replica names a namespace of its own ranges; each workload namespace
    // was written for by exactly one replica, the one holding its range.
    let mut writers: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (i, recorder) in recorders.iter().enumerate() {
        for call in recorder.calls() {
            // Reads, and the shard holder's own Lease writes, are not writes for a namespace.
            if call.method == "GET" || call.path.contains("/leases") {
                continue;
            }
            let Some(ns) = namespace_of(&call.path) else {
                continue;
            };
            ensure(
                held[i].contains(&ring.range_of(ns)),
                format!(
                    "replica {i} wrote {} {} for namespace {ns} of range {}, holding {:?}",
                    call.method,
                    call.path,
                    ring.range_of(ns),
                    held[i]
                ),
            )?;
            writers.entry(ns.to_owned()).or_default().insert(i);
        }
    }
    for w in &workload {
        let expected: BTreeSet<usize> = held
            .iter()
            .enumerate()
            .filter(|(_, h)| h.contains(&ring.range_of(w.name())))
            .map(|(i, _)| i)
            .collect();
        ensure_eq(
            writers.get(w.name()).cloned().unwrap_or_default(),
            expected,
            &format!("replicas that wrote for {}", w.name()),
        )?;
    }
    ctrl.stop().await?;
    for w in workload {
        w.finish(Ok(())).await?;
    }
    Ok(())
}
