//! The stale-cache guard over real informers: it lets a sync through once the cache's own
//! version (objects, the list's version, bookmarks) reaches the controller's write, also when
//! the written object is gone, and in any case after [`MAX_HOLD`].

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use rkcm_runtime::cache::cached::Pod as CachedPod;
use rkcm_runtime::cache::{Informable, InformerFactory, Store};
use rkcm_runtime::workload::consistency::{GroupResource, MAX_HOLD, StaleGuard};
use rkcm_testkit::{TestCluster, wait_for};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Stop;
use super::probe::Probe;

/// Well under [`MAX_HOLD`]: a guard that lets the sync through within it did so because the
/// cache's version reached the write, not because the hold ran out.
const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(10);
const OWNER: &str = "ns/owner";

fn pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))?)
}

fn config_map(name: &str) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(json!({"metadata": {"name": name}}))?)
}

/// Creates `obj` and deletes it again (an unscheduled pod goes at once); its version.
async fn written_and_gone<K>(api: &Api<K>, obj: &K) -> anyhow::Result<String>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let created = api.create(&PostParams::default(), obj).await?;
    let name = created.name_any();
    api.delete(&name, &DeleteParams::default()).await?;
    wait_for("the written object to be gone", CAUGHT_UP_WITHIN, || {
        let (api, name) = (api.clone(), name.clone());
        async move { Ok(api.get_opt(&name).await?.is_none().then_some(())) }
    })
    .await?;
    created
        .resource_version()
        .ok_or_else(|| anyhow::anyhow!("created {name} without a resourceVersion"))
}

/// How long until the guard lets `OWNER`'s sync through on `store`, up to `within`.
async fn through_after<K: Informable>(
    guard: &StaleGuard,
    store: &Store<K>,
    within: Duration,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    wait_for("the guard to let the sync through", within, || {
        let through = guard.ensure_caught_up(OWNER, &[store]).is_ok();
        async move { Ok(through.then_some(())) }
    })
    .await?;
    Ok(start.elapsed())
}

/// The empty-cache case: a synced pod cache (the slim pods controllers cache, read as
/// protobuf, whose informer sees the list's version) that has applied no pod (the only pod the
/// controller wrote was deleted before the cache listed) is current at its list's version,
/// so the guard does not hold the sync (client-go's cache knows that version too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn guard_lets_a_sync_through_on_an_empty_synced_cache() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("guard-empty").await?;
    let pods: Api<Pod> = ns.api();
    let written = written_and_gone(&pods, &pod("child")?).await?;

    let factory = InformerFactory::namespaced(cluster.client(), ns.name());
    let informer = factory.informer::<CachedPod>();
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(informer.wait_synced(&shutdown).await);
    let store = informer.store();
    assert!(store.is_empty(), "no pod in the namespace");

    let guard = StaleGuard::new("guard-plane", "guard_plane_empty", "help");
    guard.wrote(
        OWNER,
        "uid-1",
        GroupResource::of::<CachedPod>(),
        Some(&written),
    );
    through_after(&guard, &store, CAUGHT_UP_WITHIN).await?;
    Ok(())
}

/// The vanished-object case: the controller wrote an object that was deleted while the
/// cache's watch was down, and the watch came back with a relist (410) that no longer holds
/// it. The list's own version covers the write, so the owner syncs at once; nothing else in
/// the namespace changes, so no later event would. For pods (read as protobuf) and for a
/// JSON type.
async fn vanished_during_a_watch_gap<K, W>(
    prefix: &str,
    make: fn(&str) -> anyhow::Result<W>,
) -> anyhow::Result<()>
where
    K: Informable,
    W: Informable + serde::Serialize + kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace(prefix).await?;
    let api: Api<W> = ns.api();
    api.create(&PostParams::default(), &make("keep")?).await?;
    let probe = Probe::new();
    probe.short_watches(2);
    let factory = InformerFactory::namespaced(probe.client(&cluster).await?, ns.name());
    let informer = factory.informer::<K>();
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(informer.wait_synced(&shutdown).await);
    let store = informer.store();

    // The watch ends within seconds; its re-watch is held, then answered 410 Gone.
    let collection = K::url_path(&(), None);
    probe.trap_next_watch(&collection, true);
    wait_for("the re-watch to be held", CAUGHT_UP_WITHIN, || {
        let parked = probe.parked();
        async move { Ok((parked > 0).then_some(())) }
    })
    .await?;
    let written = written_and_gone(&api, &make("child")?).await?;
    let guard = StaleGuard::new("guard-plane", "guard_plane_vanished", "help");
    guard.wrote(OWNER, "uid-1", GroupResource::of::<K>(), Some(&written));
    assert!(
        guard.ensure_caught_up(OWNER, &[&store]).is_err(),
        "held while the watch is down"
    );
    probe.release();
    through_after(&guard, &store, CAUGHT_UP_WITHIN).await?;
    assert!(store.get(&format!("{}/child", ns.name())).is_none());
    assert!(store.get(&format!("{}/keep", ns.name())).is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn guard_lets_a_sync_through_when_the_written_pod_vanished_during_a_watch_gap()
-> anyhow::Result<()> {
    vanished_during_a_watch_gap::<CachedPod, Pod>("guard-vanished", pod).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn guard_lets_a_sync_through_when_the_written_config_map_vanished_during_a_watch_gap()
-> anyhow::Result<()> {
    vanished_during_a_watch_gap::<ConfigMap, ConfigMap>("guard-vanished-json", config_map).await
}

/// A write the cache never reaches (a version past anything the namespace will see) holds the
/// owner's syncs for [`MAX_HOLD`], and then no longer: the sync goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn guard_hold_on_a_vanished_write_ends_after_the_longest_hold() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("guard-bound").await?;
    let maps: Api<ConfigMap> = ns.api();
    maps.create(&PostParams::default(), &config_map("keep")?)
        .await?;
    let factory = InformerFactory::namespaced(cluster.client(), ns.name());
    let informer = factory.informer::<ConfigMap>();
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(informer.wait_synced(&shutdown).await);
    let store = informer.store();
    // Written at a version the cache will never show.
    let seen = informer
        .last_synced_resource_version()
        .ok_or_else(|| anyhow::anyhow!("a synced cache holding an object has a version"))?;
    let written = format!("{}", seen.parse::<u64>()? + 1_000_000);
    let guard = StaleGuard::new("guard-plane", "guard_plane_bound", "help");
    guard.wrote(
        OWNER,
        "uid-1",
        GroupResource::of::<ConfigMap>(),
        Some(&written),
    );
    let held = through_after(&guard, &store, MAX_HOLD + CAUGHT_UP_WITHIN).await?;
    assert!(
        held >= MAX_HOLD - Duration::from_secs(1),
        "let through after {held:?}, before the bound"
    );
    Ok(())
}
