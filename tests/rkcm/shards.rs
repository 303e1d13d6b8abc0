//! Black-box tests of sharded mode (`--rkcm-shards`): two rkcm processes split a ring of
//! namespace-hash ranges over Leases in a test namespace (short timings: lease 4 s, renew
//! deadline 3 s, retry 500 ms), each confined to that namespace by the scoping proxy.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use rkcm_testkit::{TestCluster, wait_for};
use serde_json::json;

use crate::explain::explain;
use crate::serve::{Rkcm, STARTUP};

const RANGES: u32 = 4;
const LEASE_DURATION: Duration = Duration::from_secs(4);
/// Scheduling, request latency and process start-up noise on a loaded 2-core CI box.
const SLACK: Duration = Duration::from_secs(5);

fn args(namespace: &str) -> Vec<String> {
    vec![
        format!("--rkcm-shards={RANGES}"),
        format!("--leader-elect-resource-namespace={namespace}"),
        "--leader-elect-lease-duration=4s".to_owned(),
        "--leader-elect-renew-deadline=3s".to_owned(),
        "--leader-elect-retry-period=500ms".to_owned(),
        "--controllers=replicaset-controller".to_owned(),
    ]
}

fn holder(l: &Lease) -> Option<String> {
    l.spec
        .as_ref()?
        .holder_identity
        .clone()
        .filter(|h| !h.is_empty())
}

async fn active_pods(pods: &Api<Pod>) -> anyhow::Result<usize> {
    Ok(pods
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn sharded_processes_split_the_ring_and_take_over_a_killed_one_s_ranges() -> anyhow::Result<()>
{
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-shards").await?;
    let a = Rkcm::spawn_scoped("a", &cluster, ns.name(), &args(ns.name())).await?;
    let b = Rkcm::spawn_scoped("b", &cluster, ns.name(), &args(ns.name())).await?;
    let (id_a, id_b) = (a.identity().await?, b.identity().await?);
    assert_ne!(id_a, id_b);

    // Both active, two ranges each, and the global Lease held by one of them.
    let leases: Api<Lease> = ns.api();
    let range_leases =
        ListParams::default().labels("rkcm.io/shard-ring=rkcm-shard,rkcm.io/shard-role=range");
    wait_for("the ring split 2/2", STARTUP, || async {
        let list = leases.list(&range_leases).await?;
        let of = |id: &str| {
            list.items
                .iter()
                .filter(|l| holder(l).as_deref() == Some(id))
                .count()
        };
        Ok((list.items.len() == RANGES as usize && of(&id_a) == 2 && of(&id_b) == 2).then_some(()))
    })
    .await?;
    let global = leases.get("rkcm-shard-global").await?;
    assert!(
        [Some(id_a.clone()), Some(id_b.clone())].contains(&holder(&global)),
        "the global Lease is held by one of them: {:?}",
        holder(&global)
    );

    // The owner of the test namespace's range acts on it, and explain names it.
    let rs: Api<ReplicaSet> = ns.api();
    rs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}
                }
            }
        }))?,
    )
    .await?;
    let pods: Api<Pod> = ns.api();
    wait_for("2 pods", STARTUP, || async {
        Ok((active_pods(&pods).await? == 2).then_some(()))
    })
    .await?;
    let range = rkcm_runtime::shard::Ring::new(RANGES)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .range_of(ns.name());
    let lease_name = format!("rkcm-shard-{range}");
    let owner = leases
        .get(&lease_name)
        .await
        .ok()
        .as_ref()
        .and_then(holder)
        .ok_or_else(|| anyhow::anyhow!("Lease {lease_name} has no holder"))?;
    let shards_flag = format!("--rkcm-shards={RANGES}");
    let lease_ns_flag = format!("--leader-elect-resource-namespace={}", ns.name());
    let target = format!("replicaset/{}/web", ns.name());
    let explained = explain(&cluster, &target, &[&shards_flag, &lease_ns_flag]).await?;
    assert_eq!(explained["shard"]["holder"].as_str(), Some(owner.as_str()));
    // The range is held through the owner's member session, which runs.
    assert!(explained["shard"]["session"].is_string(), "{explained}");
    assert_eq!(explained["shard"]["sessionRunning"].as_bool(), Some(true));
    assert_eq!(explained["shard"]["range"].as_u64(), Some(u64::from(range)));
    assert_eq!(
        explained["shard"]["lease"].as_str(),
        Some(format!("{}/{lease_name}", ns.name()).as_str())
    );

    // SIGKILL the owner: the other takes every range within the lease duration (plus
    // slack), and acts on the namespace.
    let (mut killed, survivor, survivor_id) = if owner == id_a {
        (a, b, id_b)
    } else {
        (b, a, id_a)
    };
    killed.signal(9)?;
    let since = Instant::now();
    wait_for(
        "the survivor to hold every range",
        LEASE_DURATION + SLACK + Duration::from_secs(2),
        || async {
            let list = leases.list(&range_leases).await?;
            Ok(list
                .items
                .iter()
                .all(|l| holder(l).as_deref() == Some(survivor_id.as_str()))
                .then_some(()))
        },
    )
    .await?;
    let took = since.elapsed();
    assert!(
        took <= LEASE_DURATION + SLACK,
        "the killed replica's ranges were owned again after {took:?}"
    );
    rs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await?;
    wait_for("3 pods, created by the survivor", STARTUP, || async {
        Ok((active_pods(&pods).await? == 3).then_some(()))
    })
    .await?;
    assert!(killed.has_exited()?, "the killed process is gone");
    drop(survivor);
    Ok(())
}
