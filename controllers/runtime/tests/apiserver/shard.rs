//! The shard ring against the API server's own sharded list (KEP-5866, gate
//! `ShardedListAndWatch`, alpha since v1.36; the local plane turns it on from v1.36): the
//! selector [`Ring::selector`] writes is accepted, and the server's FNV-1a ranges keep exactly
//! the namespaces [`Ring::range_of`] puts in them. A server without the gate ignores the
//! selector and says so by leaving `metadata.shardInfo` out.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use rkcm_runtime::shard::Ring;
use rkcm_testkit::{TestCluster, TestNamespace};
use serde_json::{Value, json};

const LABEL: &str = "rkcm.test/shard-ring";

/// Percent-encodes a query value (everything but the unreserved characters).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Lists the test's ConfigMaps with `selector`: the namespaces of the items, and the
/// selector the server says it applied.
async fn list(
    cluster: &TestCluster,
    run: &str,
    selector: &str,
) -> anyhow::Result<(BTreeSet<String>, Option<String>)> {
    let path = format!(
        "/api/v1/configmaps?labelSelector={}&shardSelector={}",
        encode(&format!("{LABEL}={run}")),
        encode(selector)
    );
    let req = http::Request::get(path).body(Vec::new())?;
    let answer: Value = cluster.client().request(req).await?;
    let namespaces = answer["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["namespace"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let applied = answer["metadata"]["shardInfo"]["selector"]
        .as_str()
        .map(str::to_owned);
    Ok((namespaces, applied))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn the_server_s_shard_ranges_are_the_ring_s() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let run = rkcm_testkit::unique_name("ring");
    let mut namespaces: Vec<TestNamespace> = Vec::new();
    for _ in 0..12 {
        let ns = cluster.namespace("shard").await?;
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "probe", "labels": {LABEL: run}}
        }))?;
        ns.api::<ConfigMap>()
            .create(&PostParams::default(), &cm)
            .await?;
        namespaces.push(ns);
    }
    let all: BTreeSet<String> = namespaces.iter().map(|n| n.name().to_owned()).collect();
    let ring = Ring::new(4)?;
    let held_sets: [&[u32]; 5] = [&[0], &[1], &[2], &[3], &[0, 2]];
    for held in held_sets {
        let held: BTreeSet<u32> = held.iter().copied().collect();
        let selector = ring
            .selector(&held)
            .ok_or_else(|| anyhow::anyhow!("no selector for {held:?}"))?;
        let (got, applied) = list(&cluster, &run, &selector).await?;
        if cluster.server_minor() < 36 {
            assert_eq!(
                applied,
                None,
                "a v1.{} server has no sharding",
                cluster.server_minor()
            );
            assert_eq!(got, all, "an ignored selector lists everything");
            continue;
        }
        assert_eq!(
            applied.as_deref(),
            Some(selector.as_str()),
            "shardInfo echoes the selector"
        );
        let want: BTreeSet<String> = all
            .iter()
            .filter(|ns| held.contains(&ring.range_of(ns)))
            .cloned()
            .collect();
        assert_eq!(got, want, "ranges {held:?}: {selector}");
    }
    drop(namespaces);
    Ok(())
}
