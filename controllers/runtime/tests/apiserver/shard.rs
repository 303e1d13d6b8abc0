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

/// A new test namespace holding one ConfigMap labelled for the run.
async fn probe_namespace(cluster: &TestCluster, run: &str) -> anyhow::Result<TestNamespace> {
    let ns = cluster.namespace("shard").await?;
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "probe", "labels": {LABEL: run}}
    }))?;
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await?;
    Ok(ns)
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
        let ns = probe_namespace(&cluster, &run).await?;
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

/// A replica's view of a ring of `ring` over real Leases in `leases` (`<run>-ring-…`), with
/// short lease timings.
fn test_replica(
    ring: Ring,
    leases: &str,
    run: &str,
    identity: &str,
) -> std::sync::Arc<rkcm_runtime::shard::Shards> {
    use std::time::Duration;
    rkcm_runtime::shard::Shards::new(
        rkcm_runtime::shard::ShardConfig {
            ring,
            namespace: leases.to_owned(),
            prefix: format!("{run}-ring"),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(6),
            renew_deadline: Duration::from_secs(4),
            retry_period: Duration::from_millis(500),
            server_selector: true,
        },
        rkcm_runtime::clock::system(),
    )
}

/// Namespaces of the test's ConfigMaps in `store`.
fn cached(store: &rkcm_runtime::cache::Store<ConfigMap>, run: &str) -> BTreeSet<String> {
    store
        .list()
        .iter()
        .filter(|cm| {
            cm.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL))
                .is_some_and(|v| v == run)
        })
        .filter_map(|cm| cm.metadata.namespace.clone())
        .collect()
}

/// Whether two replicas hold `ranges` ranges between them, each at least one.
fn split_between(a: &BTreeSet<u32>, b: &BTreeSet<u32>, ranges: usize) -> bool {
    !a.is_empty() && !b.is_empty() && a.len() + b.len() == ranges
}

/// Namespaces with one test ConfigMap each, at least one in every range of `ring` (random
/// names: created until every range has one), so that whichever ranges a replica holds or
/// hands over, its cache has objects to keep and to drop.
async fn in_every_range(
    cluster: &TestCluster,
    run: &str,
    ring: Ring,
) -> anyhow::Result<Vec<TestNamespace>> {
    let mut namespaces: Vec<TestNamespace> = Vec::new();
    let mut missing: BTreeSet<u32> = (0..ring.len()).collect();
    while !missing.is_empty() {
        anyhow::ensure!(
            namespaces.len() < 60,
            "60 namespaces and still none in ranges {missing:?}"
        );
        let ns = probe_namespace(cluster, run).await?;
        missing.remove(&ring.range_of(ns.name()));
        namespaces.push(ns);
    }
    Ok(namespaces)
}

/// Two replicas' holders split a ring of four over real Leases; the first replica's informers,
/// scoped to its held ranges, cache exactly the namespaces of those ranges; when the second
/// leaves, the first takes its ranges and its informers list them and cache everything; when
/// a third joins, the first hands half over and its cache drops those ranges' objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn informers_follow_the_held_ranges() -> anyhow::Result<()> {
    use std::time::Duration;

    use rkcm_runtime::cache::{InformerFactory, Scope, ShardScope};
    use tokio_util::sync::CancellationToken;

    let cluster = TestCluster::connect().await?;
    let leases = cluster.namespace("shard-leases").await?;
    let run = rkcm_testkit::unique_name("held");
    let ring = Ring::new(4)?;
    let replica = |identity: &str| test_replica(ring, leases.name(), &run, identity);
    let (a, b) = (replica("a"), replica("b"));
    let (stop_a, stop_b) = (CancellationToken::new(), CancellationToken::new());
    tokio::spawn(a.clone().run(cluster.client(), stop_a.clone()));
    tokio::spawn(b.clone().run(cluster.client(), stop_b.clone()));
    // Split by the server's namespaces (weighed before anything is counted): not always 2/2.
    rkcm_testkit::wait_for("the ring split", Duration::from_secs(30), || {
        let (ha, hb) = (a.held(), b.held());
        async move {
            if split_between(&ha, &hb, 4) {
                Ok(Some(()))
            } else {
                Err(anyhow::anyhow!("a holds {ha:?}, b holds {hb:?}"))
            }
        }
    })
    .await?;

    let held_by_a = a.held_ranges();
    let namespaces = in_every_range(&cluster, &run, ring).await?;
    let all: BTreeSet<String> = namespaces.iter().map(|n| n.name().to_owned()).collect();

    let factory = InformerFactory::scoped(cluster.client(), Scope::Shards(ShardScope(a.clone())));
    let informer = factory.informer::<ConfigMap>();
    let stop_informers = CancellationToken::new();
    factory.start(stop_informers.clone());
    let store = informer.store();
    let want = |held: &BTreeSet<u32>| -> BTreeSet<String> {
        all.iter()
            .filter(|ns| held.contains(&ring.range_of(ns)))
            .cloned()
            .collect()
    };
    let a_part = want(&held_by_a);
    rkcm_testkit::wait_for(
        "a's cache holds a's ranges",
        Duration::from_secs(30),
        || {
            let got = cached(&store, &run);
            let want = a_part.clone();
            async move {
                if got == want {
                    Ok(Some(()))
                } else {
                    Err(anyhow::anyhow!("cached {got:?}, want {want:?}"))
                }
            }
        },
    )
    .await?;

    // b leaves (releases); a takes its ranges and its caches list again.
    stop_b.cancel();
    rkcm_testkit::wait_for(
        "a's cache holds everything",
        Duration::from_secs(30),
        || {
            let got = cached(&store, &run);
            let (held, want) = (a.held(), all.clone());
            async move {
                if got == want && held.len() == 4 {
                    Ok(Some(()))
                } else {
                    Err(anyhow::anyhow!("a holds {held:?}; cached {got:?}"))
                }
            }
        },
    )
    .await?;

    // c joins: a hands part of the ring over to it (by the objects a counted), and a's
    // cache drops the objects of the ranges it handed over (no relist: they leave as
    // deletions) and keeps the rest.
    let c = replica("c");
    let stop_c = CancellationToken::new();
    tokio::spawn(c.clone().run(cluster.client(), stop_c.clone()));
    rkcm_testkit::wait_for(
        "a's cache holds only the ranges a kept",
        Duration::from_secs(30),
        || {
            let got = cached(&store, &run);
            let (held_a, held_c) = (a.held_ranges(), c.held_ranges());
            let want = want(&held_a);
            async move {
                if split_between(&held_a, &held_c, 4) && got == want {
                    Ok(Some(()))
                } else {
                    Err(anyhow::anyhow!(
                        "a holds {held_a:?}, c {held_c:?}; a cached {got:?}, want {want:?}"
                    ))
                }
            }
        },
    )
    .await?;
    stop_a.cancel();
    stop_c.cancel();
    stop_informers.cancel();
    drop(namespaces);
    Ok(())
}

/// On the real API server a holder reads the ring from its watch: once it holds the ring,
/// its rounds list no Lease (it listed once, then watches), while it renews its member Lease
/// every half renew deadline. Its requests go through a proxy that records them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn a_holder_reads_the_ring_from_its_watch_on_the_server() -> anyhow::Result<()> {
    use std::time::Duration;

    use rkcm_testkit::proxy::ScopedProxy;
    use tokio_util::sync::CancellationToken;

    let cluster = TestCluster::connect().await?;
    let leases = cluster.namespace("shard-watch").await?;
    let run = rkcm_testkit::unique_name("watch");
    let proxy = ScopedProxy::start(&cluster, leases.name()).await?;
    let a = test_replica(Ring::new(4)?, leases.name(), &run, "a");
    let stop = CancellationToken::new();
    tokio::spawn(a.clone().run(proxy.client().await?, stop.clone()));
    rkcm_testkit::wait_for("a holds the ring", Duration::from_secs(30), || {
        let held = a.held();
        async move {
            if held.len() == 4 {
                Ok(Some(()))
            } else {
                Err(anyhow::anyhow!("a holds {held:?}"))
            }
        }
    })
    .await?;

    let collection = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
        leases.name()
    );
    let lists = || {
        proxy
            .reads()
            .iter()
            .filter(|r| r.path == collection && !r.watch)
            .count()
    };
    let renewals = || {
        proxy
            .writes()
            .iter()
            .filter(|w| w.method == http::Method::PUT && w.path.contains("-member-"))
            .count()
    };
    let (lists_before, renewals_before) = (lists(), renewals());
    // Twenty rounds of holding (a round every 500 ms), renewing every 2 s.
    let rounds = a.rounds_done() + 20;
    tokio::time::timeout(Duration::from_secs(30), a.rounds(rounds))
        .await
        .map_err(|_| anyhow::anyhow!("20 more rounds took over 30 s"))?;
    let renewed = renewals() - renewals_before;
    assert!(
        (3..=8).contains(&renewed),
        "{renewed} member renewals in 20 rounds (one every 2 s, not one a round)"
    );
    let listed = lists() - lists_before;
    let watches = proxy
        .reads()
        .iter()
        .filter(|r| r.path == collection && r.watch)
        .count();
    stop.cancel();
    assert!(lists_before >= 1, "the holder never listed the ring");
    assert!(watches >= 1, "the holder never watched the ring");
    assert!(
        listed <= 1,
        "{listed} lists of the ring in 20 rounds of holding (a list a round is the old holder)"
    );
    drop(leases);
    Ok(())
}

/// Two replicas over real Leases balance a ring of four by the objects their caches hold: a
/// namespace of 300 ConfigMaps weighs as much as three empty ranges (a range costs 100 plus
/// its objects), so its holder ends up holding that range alone and the other replica the
/// three others, handed over on the real API server; the holder publishes the count on its
/// member Lease (`rkcm.io/shard-objects`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn replicas_balance_by_the_objects_they_cache() -> anyhow::Result<()> {
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::Api;
    use rkcm_runtime::cache::{InformerFactory, Scope, ShardScope};
    use rkcm_runtime::shard::balance::ANNOTATION_OBJECTS;
    use tokio_util::sync::CancellationToken;

    const OBJECTS: usize = 300;
    let cluster = TestCluster::connect().await?;
    let leases = cluster.namespace("shard-leases").await?;
    let heavy = cluster.namespace("shard-heavy").await?;
    let run = rkcm_testkit::unique_name("weigh");
    let ring = Ring::new(4)?;
    let configmaps = heavy.api::<ConfigMap>();
    let created: Vec<anyhow::Result<()>> = futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let api = configmaps.clone();
            async move {
                let cm: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))?;
                api.create(&PostParams::default(), &cm).await?;
                Ok(())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    created.into_iter().collect::<anyhow::Result<Vec<()>>>()?;

    let only = BTreeSet::from([heavy.name().to_owned()]);
    let stop = CancellationToken::new();
    let replica = |identity: &str| {
        let shards = test_replica(ring, leases.name(), &run, identity);
        let factory = InformerFactory::scoped(
            cluster.client(),
            Scope::ShardsIn(ShardScope(shards.clone()), only.clone()),
        );
        factory.informer::<ConfigMap>();
        factory.start(stop.clone());
        tokio::spawn(shards.clone().run(cluster.client(), stop.clone()));
        shards
    };
    let (a, b) = (replica("a"), replica("b"));
    let range = ring.range_of(heavy.name());
    let members: Api<Lease> = Api::namespaced(cluster.client(), leases.name());
    // Both at once: the split, and the count behind it on the holder's member Lease (the
    // first takes may already give the split, weighing the ranges by their namespaces before
    // anything is counted; the objects must keep it once the counts are out).
    let result = rkcm_testkit::wait_for(
        "the heavy range alone on its holder, the rest on the other, its count published",
        Duration::from_secs(90),
        || {
            let (ha, hb) = (a.held(), b.held());
            let holder = if ha.contains(&range) { &a } else { &b };
            let lease = holder.config().member_lease();
            let members = members.clone();
            async move {
                let (held, other) = if ha.contains(&range) {
                    (&ha, &hb)
                } else {
                    (&hb, &ha)
                };
                if held.len() != 1 || other.len() != 3 {
                    anyhow::bail!("a holds {ha:?}, b holds {hb:?}; heavy {range}");
                }
                let member = members.get(&lease).await?;
                let published = member
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION_OBJECTS))
                    .cloned()
                    .unwrap_or_default();
                let count = published
                    .split(',')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(r, _)| r.parse() == Ok(range))
                    .and_then(|(_, n)| n.parse::<usize>().ok());
                // The namespace's own kube-root-ca.crt is cached too.
                if count.is_some_and(|n| n >= OBJECTS) {
                    Ok(Some(()))
                } else {
                    Err(anyhow::anyhow!(
                        "member Lease publishes {published:?}, want range {range} with at least {OBJECTS}"
                    ))
                }
            }
        },
    )
    .await;
    stop.cancel();
    result
}

/// Two replicas start on a ring of 16 nobody has counted: they list the server's namespaces
/// before their first takes and split the two ranges the test fills with namespaces (more
/// than any other range holds), which the split by number gives both to the first replica
/// (ranges 0, 2, 4 … go to `a`, 1, 3, 5 … to `b`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn the_first_takes_split_the_server_s_namespaces() -> anyhow::Result<()> {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::Api;
    use kube::api::ListParams;
    use tokio_util::sync::CancellationToken;

    const MARGIN: usize = 15;
    let cluster = TestCluster::connect().await?;
    let leases = cluster.namespace("shard-leases").await?;
    let run = rkcm_testkit::unique_name("first");
    let ring = Ring::new(16)?;
    // The namespaces there are (other tests' too), per range.
    let mut background: BTreeMap<u32, usize> = BTreeMap::new();
    for ns in Api::<Namespace>::all(cluster.client())
        .list(&ListParams::default())
        .await?
    {
        if let Some(name) = ns.metadata.name.as_deref() {
            *background.entry(ring.range_of(name)).or_default() += 1;
        }
    }
    let most = background.values().copied().max().unwrap_or(0);
    // The two even ranges with the fewest namespaces, filled to `MARGIN` more than any range
    // holds: the heaviest two of the ring.
    let mut even: Vec<u32> = (0..16).step_by(2).collect();
    even.sort_by_key(|r| (background.get(r).copied().unwrap_or(0), *r));
    let heavy = [even[0], even[1]];
    let mut names: Vec<String> = Vec::new();
    for range in heavy {
        let want = most + MARGIN - background.get(&range).copied().unwrap_or(0);
        names.extend(
            (0..)
                .map(|i| format!("{run}-{i}"))
                .filter(|n| ring.range_of(n) == range)
                .take(want),
        );
    }
    let created: Vec<anyhow::Result<TestNamespace>> = futures::stream::iter(names)
        .map(|name| cluster.namespace_named(name))
        .buffer_unordered(16)
        .collect()
        .await;
    let _namespaces = created
        .into_iter()
        .collect::<anyhow::Result<Vec<TestNamespace>>>()?;

    let stop = CancellationToken::new();
    let replica = |identity: &str| {
        let shards = test_replica(ring, leases.name(), &run, identity);
        tokio::spawn(shards.clone().run(cluster.client(), stop.clone()));
        shards
    };
    let (a, b) = (replica("a"), replica("b"));
    let result = rkcm_testkit::wait_for(
        "each replica holds one of the two full ranges",
        Duration::from_secs(30),
        || {
            let (ha, hb) = (a.held(), b.held());
            async move {
                let all = ha.len() + hb.len() == 16;
                let split = heavy.iter().filter(|r| ha.contains(r)).count() == 1
                    && heavy.iter().filter(|r| hb.contains(r)).count() == 1;
                if all && split {
                    Ok(Some(()))
                } else {
                    Err(anyhow::anyhow!(
                        "a holds {ha:?}, b holds {hb:?}; full ranges {heavy:?}"
                    ))
                }
            }
        },
    )
    .await;
    // What `a` listed is on its member Lease, for every replica to weigh by.
    let published = published_namespaces(&cluster, leases.name(), &a.config().member_lease()).await;
    stop.cancel();
    result?;
    let published = published?;
    for range in heavy {
        let n = published.get(&range).copied().unwrap_or(0);
        anyhow::ensure!(
            n >= (most + MARGIN) as u64,
            "range {range} published with {n} namespaces, want at least {}: {published:?}",
            most + MARGIN
        );
    }
    Ok(())
}

/// The namespaces per range member Lease `lease` publishes, once it publishes them.
async fn published_namespaces(
    cluster: &TestCluster,
    leases: &str,
    lease: &str,
) -> anyhow::Result<std::collections::BTreeMap<u32, u64>> {
    use rkcm_runtime::shard::balance::{ANNOTATION_NAMESPACES, parse_objects};
    let members: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(cluster.client(), leases);
    rkcm_testkit::wait_for(
        "the member Lease publishes the namespaces its holder listed",
        std::time::Duration::from_secs(30),
        || {
            let members = members.clone();
            async move {
                let member = members.get(lease).await?;
                let value = member
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION_NAMESPACES))
                    .cloned();
                Ok(value.map(|v| parse_objects(&v)))
            }
        },
    )
    .await
}
