//! rkcm-runtime against the real local control plane (`make test` starts it and sets
//! `RKCM_TEST_KUBECONFIG`). Run alone with
//! `cargo test -p rkcm-runtime --test apiserver -- --ignored`.
//!
//! Informer scenarios: one LIST+WATCH per type however many subscribers; add/update/delete
//! with old and new objects; a watch gap closed by a relist (forced 410, and a real etcd
//! compaction) that reports exactly what changed in the gap, once. The stale-cache guard over
//! real informers (`apiserver/guard.rs`): an empty cache and a written object that vanished in
//! a watch gap let the sync through at the list's version, and a hold ends after its bound.

#[path = "apiserver/probe.rs"]
mod probe;

#[path = "apiserver/controls.rs"]
mod controls;

#[path = "apiserver/guard.rs"]
mod guard;

#[path = "apiserver/shard.rs"]
mod shard;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, PodTemplate};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use parking_lot::Mutex;
use probe::{Probe, Verb};
use rkcm_runtime::cache::{Change, Informable, Informer, InformerFactory, ListMode};
use rkcm_testkit::{TestCluster, wait_for};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(30);
const LABEL: &str = "rkcm.test/step";

/// One change as a subscriber saw it, reduced to what the tests compare.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Added(String),
    /// Name and the `LABEL` value of the old and new objects.
    Updated(String, Option<String>, Option<String>),
    /// Name and `final_state_unknown`.
    Deleted(String, bool),
}

fn step<K: Resource>(obj: &K) -> Option<String> {
    obj.meta().labels.as_ref()?.get(LABEL).cloned()
}

/// Subscribes a handler that records the changes of the test's own objects (those with
/// `LABEL`) in `namespace`; the cluster adds objects of its own (`kube-root-ca.crt`).
fn record<K: Informable>(informer: &Informer<K>, namespace: &str) -> Arc<Mutex<Vec<Seen>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let namespace = namespace.to_string();
    informer.subscribe(move |change| {
        let obj = change.object();
        if obj.meta().namespace.as_deref() != Some(namespace.as_str()) || step(&**obj).is_none() {
            return;
        }
        let entry = match change {
            Change::Added(obj) => Seen::Added(obj.name_any()),
            Change::Updated { old, new } => Seen::Updated(new.name_any(), step(&*old), step(&*new)),
            Change::Deleted {
                obj,
                final_state_unknown,
            } => Seen::Deleted(obj.name_any(), final_state_unknown),
        };
        sink.lock().push(entry);
    });
    seen
}

/// Waits until `seen` holds every entry of `want` (other entries may be there too).
async fn wait_seen(what: &str, seen: &Arc<Mutex<Vec<Seen>>>, want: &[Seen]) -> anyhow::Result<()> {
    wait_for(what, TIMEOUT, || {
        let seen = seen.lock().clone();
        let missing: Vec<&Seen> = want.iter().filter(|w| !seen.contains(w)).collect();
        async move {
            if missing.is_empty() {
                Ok(Some(()))
            } else {
                Err(anyhow::anyhow!("missing {missing:?}; seen so far {seen:?}"))
            }
        }
    })
    .await
}

fn count(seen: &Arc<Mutex<Vec<Seen>>>, entry: &Seen) -> usize {
    seen.lock().iter().filter(|s| *s == entry).count()
}

fn added(name: &str) -> Seen {
    Seen::Added(name.into())
}

fn config_map(name: &str, step: &str) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {LABEL: step}},
        "data": {"k": "v"},
    }))?)
}

fn pod_template(name: &str, step: &str) -> anyhow::Result<PodTemplate> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name, "labels": {LABEL: step}},
        "template": {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}},
    }))?)
}

async fn set_step<K>(api: &Api<K>, name: &str, step: &str) -> anyhow::Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"metadata": {"labels": {LABEL: step}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Cancels the informers when a test ends, pass or fail.
struct Stop(CancellationToken);
impl Drop for Stop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn one_list_and_watch_per_type_for_all_subscribers() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("informer-shared").await?;
    let probe = Probe::new();
    let factory = InformerFactory::new(probe.client(&cluster).await?);

    // Three "controllers" each ask the factory for pods and subscribe.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let controller_factory = factory.clone();
        let pods = controller_factory.informer::<Pod>();
        seen.push(record(&pods, ns.name()));
    }
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(factory.informer::<Pod>().wait_synced(&shutdown).await);

    let api: Api<Pod> = ns.api();
    for name in ["p1", "p2"] {
        // The namespace's default ServiceAccount may not exist yet; admission needs it.
        let pod = rkcm_testkit::builders::pod(ns.name(), name)
            .label(LABEL, "1")
            .unschedulable()
            .build();
        wait_for("pod creation", TIMEOUT, || {
            let (api, pod) = (api.clone(), pod.clone());
            async move { Ok(Some(api.create(&PostParams::default(), &pod).await?)) }
        })
        .await?;
    }
    // Unscheduled pods are deleted at once, whatever their grace period.
    api.delete("p1", &DeleteParams::default()).await?;

    let want = [added("p1"), added("p2"), Seen::Deleted("p1".into(), false)];
    for (i, seen) in seen.iter().enumerate() {
        wait_seen(&format!("subscriber {i} to see the pods"), seen, &want).await?;
        assert_eq!(
            count(seen, &added("p1")),
            1,
            "subscriber {i}: {:?}",
            seen.lock()
        );
    }
    assert_eq!(probe.count(Verb::Watch, "/api/v1/pods"), 1, "pod watches");
    assert_eq!(probe.count(Verb::List, "/api/v1/pods"), 1, "pod lists");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn namespaced_factory_holds_one_namespace_and_every_node() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let mine = cluster.namespace("informer-scoped").await?;
    let other = cluster.namespace("informer-unscoped").await?;
    let (my_api, other_api): (Api<ConfigMap>, Api<ConfigMap>) = (mine.api(), other.api());
    my_api
        .create(&PostParams::default(), &config_map("before", "1")?)
        .await?;
    other_api
        .create(&PostParams::default(), &config_map("before", "1")?)
        .await?;

    let factory = InformerFactory::namespaced(cluster.client(), mine.name());
    let config_maps = factory.informer::<ConfigMap>();
    let nodes = factory.informer::<Node>();
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(config_maps.wait_synced(&shutdown).await && nodes.wait_synced(&shutdown).await);
    let store = config_maps.store();
    let namespaces = || {
        let mut seen: Vec<String> = store.list().iter().filter_map(|c| c.namespace()).collect();
        seen.sort();
        seen.dedup();
        seen
    };
    assert_eq!(
        namespaces(),
        [mine.name().to_owned()],
        "listed in scope only"
    );
    let node_count = Api::<Node>::all(cluster.client())
        .list(&Default::default())
        .await?
        .items
        .len();
    assert_eq!(nodes.store().len(), node_count, "nodes stay cluster-wide");

    // Written in this order, a cluster-wide watch would deliver "other" first.
    other_api
        .create(&PostParams::default(), &config_map("after", "2")?)
        .await?;
    my_api
        .create(&PostParams::default(), &config_map("after", "2")?)
        .await?;
    let key = format!("{}/after", mine.name());
    wait_for("the in-scope config map", TIMEOUT, || {
        let found = config_maps.store().get(&key);
        async move { Ok(found.map(|_| ())) }
    })
    .await?;
    assert_eq!(
        namespaces(),
        [mine.name().to_owned()],
        "watched in scope only"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn informer_requested_after_start_starts_at_once() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("informer-late").await?;
    let probe = Probe::new();
    let factory = InformerFactory::new(probe.client(&cluster).await?);
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());

    let api: Api<ConfigMap> = ns.api();
    api.create(&PostParams::default(), &config_map("before", "1")?)
        .await?;
    let informer = factory.informer::<ConfigMap>();
    assert!(informer.wait_synced(&shutdown).await);
    assert!(
        informer
            .store()
            .get(&format!("{}/before", ns.name()))
            .is_some()
    );
    // Subscribing after sync replays the cache as adds.
    let seen = record(&informer, ns.name());
    wait_seen("the cached object replayed", &seen, &[added("before")]).await?;
    assert_eq!(probe.count(Verb::List, "/api/v1/configmaps"), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn subscribers_see_add_update_with_old_and_new_and_delete() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("informer-events").await?;
    let factory = InformerFactory::new(cluster.client());
    let informer = factory.informer::<ConfigMap>();
    let seen = record(&informer, ns.name());
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(informer.wait_synced(&shutdown).await);

    let api: Api<ConfigMap> = ns.api();
    api.create(&PostParams::default(), &config_map("cm", "1")?)
        .await?;
    wait_seen("the add", &seen, &[added("cm")]).await?;
    set_step(&api, "cm", "2").await?;
    let update = Seen::Updated("cm".into(), Some("1".into()), Some("2".into()));
    wait_seen("the update with old and new", &seen, &[update]).await?;
    let key = format!("{}/cm", ns.name());
    let cached = informer.store().get(&key);
    assert_eq!(cached.as_deref().and_then(step), Some("2".into()));
    assert!(
        cached.is_some_and(|cm| cm.metadata.managed_fields.is_none()),
        "managedFields are dropped"
    );
    api.delete("cm", &DeleteParams::default()).await?;
    wait_seen("the delete", &seen, &[Seen::Deleted("cm".into(), false)]).await?;
    assert!(informer.store().get(&key).is_none());
    assert_eq!(
        *seen.lock(),
        [
            added("cm"),
            Seen::Updated("cm".into(), Some("1".into()), Some("2".into())),
            Seen::Deleted("cm".into(), false),
        ]
    );
    Ok(())
}

/// A watch-gap scenario: `keep` never changes, `doomed` is deleted, `changed` updated and
/// `born` created while the informer's re-watch is held by the probe.
struct Gap<'a, K: Informable> {
    api: Api<K>,
    make: fn(&str, &str) -> anyhow::Result<K>,
    informer: &'a Informer<K>,
    probe: &'a Probe,
    /// The collection path the informer lists and watches.
    collection: &'a str,
    namespace: &'a str,
    /// Answer the held re-watch with HTTP 410 instead of letting it through.
    gone: bool,
    /// Paged informers relist with one LIST, which the scenario counts; streaming informers
    /// relist with a WATCH, indistinguishable by count from their periodic re-watches.
    list_mode: ListMode,
}

async fn gap_scenario<K>(
    gap: Gap<'_, K>,
    during_gap_after_changes: impl AsyncFnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<()>
where
    K: Informable + serde::Serialize,
{
    let Gap {
        api,
        make,
        informer,
        probe,
        collection,
        namespace,
        gone,
        list_mode,
    } = gap;
    let api = &api;
    for name in ["keep", "doomed", "changed"] {
        api.create(&PostParams::default(), &make(name, "1")?)
            .await?;
    }
    let seen = record(informer, namespace);
    wait_seen(
        "the initial objects",
        &seen,
        &[added("keep"), added("doomed"), added("changed")],
    )
    .await?;
    // The watch works before the gap.
    set_step(api, "changed", "2").await?;
    wait_seen(
        "a live update",
        &seen,
        &[Seen::Updated(
            "changed".into(),
            Some("1".into()),
            Some("2".into()),
        )],
    )
    .await?;

    // The watch ends within seconds (short server timeout); its re-watch is held.
    probe.trap_next_watch(collection, gone);
    wait_for("the re-watch to be held", TIMEOUT, || {
        let parked = probe.parked();
        async move { Ok((parked > 0).then_some(())) }
    })
    .await?;
    let lists_before = probe.count(Verb::List, collection);
    api.delete("doomed", &DeleteParams::default()).await?;
    set_step(api, "changed", "3").await?;
    api.create(&PostParams::default(), &make("born", "1")?)
        .await?;
    during_gap_after_changes().await?;
    probe.release();

    let want = [
        Seen::Deleted("doomed".into(), true),
        added("born"),
        Seen::Updated("changed".into(), Some("2".into()), Some("3".into())),
    ];
    wait_seen("the gap's changes from the relist", &seen, &want).await?;
    let lists_expected = match list_mode {
        ListMode::Paged => lists_before + 1,
        ListMode::Streaming => 0,
    };
    assert_eq!(
        probe.count(Verb::List, collection),
        lists_expected,
        "one relist (paged) or no LIST at all (streaming)"
    );
    let seen = seen.lock().clone();
    for name in ["keep", "doomed", "changed", "born"] {
        assert_eq!(
            seen.iter().filter(|s| **s == added(name)).count(),
            1,
            "{name} added exactly once: {seen:?}"
        );
    }
    // The unchanged object is never deleted or added again; the relist reports it once as an
    // update to the same version (client-go's `Replace`), so owner handlers resync it.
    assert!(
        !seen
            .iter()
            .any(|s| matches!(s, Seen::Deleted(n, _) if n == "keep")),
        "the unchanged object is not deleted: {seen:?}"
    );
    let keep_updates: Vec<&Seen> = seen
        .iter()
        .filter(|s| matches!(s, Seen::Updated(n, ..) if n == "keep"))
        .collect();
    assert!(
        keep_updates.len() == 1
            && keep_updates
                .iter()
                .all(|s| matches!(s, Seen::Updated(_, old, new) if old == new)),
        "the unchanged object is reported once, as an update to the same version: {seen:?}"
    );
    assert_eq!(
        seen.iter()
            .filter(|s| matches!(s, Seen::Deleted(n, _) if n == "doomed"))
            .count(),
        1,
        "doomed deleted exactly once: {seen:?}"
    );
    let store = informer.store();
    assert!(store.get(&format!("{namespace}/doomed")).is_none());
    assert!(store.get(&format!("{namespace}/born")).is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn watch_answered_with_410_relists_without_losing_or_repeating_events() -> anyhow::Result<()>
{
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("informer-gone").await?;
    let probe = Probe::new();
    probe.short_watches(2);
    let factory = InformerFactory::new(probe.client(&cluster).await?);
    let informer = factory.informer::<ConfigMap>();
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(informer.wait_synced(&shutdown).await);

    // The held re-watch is answered with HTTP 410, which kube-rs alone would retry with the
    // same resourceVersion forever.
    let gap = Gap {
        api: ns.api::<ConfigMap>(),
        make: config_map,
        informer: &informer,
        probe: &probe,
        collection: "/api/v1/configmaps",
        namespace: ns.name(),
        gone: true,
        list_mode: ListMode::Paged,
    };
    gap_scenario(gap, async || Ok(())).await
}

/// A watch gap closed by a real etcd compaction. PodTemplates bypass the apiserver's watch
/// cache on the local control plane (--watch-cache-sizes=podtemplates#0), so a watch from a
/// compacted revision reaches etcd and gets a real "too old resource version" 410 inside the
/// watch stream.
async fn compaction_gap(namespace_prefix: &str, list_mode: ListMode) -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace(namespace_prefix).await?;
    let probe = Probe::new();
    probe.short_watches(2);
    let factory = InformerFactory::with_list_mode(probe.client(&cluster).await?, list_mode);
    let informer = factory.informer::<PodTemplate>();
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(informer.wait_synced(&shutdown).await);

    let compact = async || {
        cluster.compact_etcd().await?;
        Ok(())
    };
    let gap = Gap {
        api: ns.api::<PodTemplate>(),
        make: pod_template,
        informer: &informer,
        probe: &probe,
        collection: "/api/v1/podtemplates",
        namespace: ns.name(),
        gone: false,
        list_mode,
    };
    gap_scenario(gap, compact).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn etcd_compaction_during_a_watch_gap_relists() -> anyhow::Result<()> {
    compaction_gap("informer-compact", ListMode::Paged).await
}

/// Streaming lists (`WatchListClient`, rkcm's default as upstream's): the initial state
/// comes from one WATCH, no LIST is ever sent, and every subscriber sees the changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn streaming_informer_opens_one_watch_and_no_list() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("informer-stream").await?;
    let api: Api<ConfigMap> = ns.api();
    api.create(&PostParams::default(), &config_map("before", "1")?)
        .await?;
    let probe = Probe::new();
    let factory =
        InformerFactory::with_list_mode(probe.client(&cluster).await?, ListMode::Streaming);
    let seen: Vec<_> = (0..2)
        .map(|_| record(&factory.informer::<ConfigMap>(), ns.name()))
        .collect();
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(factory.informer::<ConfigMap>().wait_synced(&shutdown).await);
    api.create(&PostParams::default(), &config_map("after", "1")?)
        .await?;
    set_step(&api, "after", "2").await?;
    api.delete("before", &DeleteParams::default()).await?;
    let want = [
        added("before"),
        added("after"),
        Seen::Updated("after".into(), Some("1".into()), Some("2".into())),
        Seen::Deleted("before".into(), false),
    ];
    for (i, seen) in seen.iter().enumerate() {
        wait_seen(&format!("subscriber {i}"), seen, &want).await?;
    }
    assert_eq!(
        probe.count(Verb::List, "/api/v1/configmaps"),
        0,
        "configmap lists"
    );
    assert_eq!(
        probe.count(Verb::Watch, "/api/v1/configmaps"),
        1,
        "configmap watches"
    );
    Ok(())
}

/// A real 410 from etcd during a watch gap, for a streaming informer: its relist is a new
/// streaming WATCH, and the gap's changes arrive exactly once, with a tombstone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn streaming_informer_relists_after_etcd_compaction() -> anyhow::Result<()> {
    compaction_gap("informer-stream-compact", ListMode::Streaming).await
}

/// A pod with every field the cache keeps: init containers (one a sidecar), claim and other
/// volumes, node and pod affinity, owners, a finalizer; no node, so it stays pending.
fn rich_pod(ns: &str, name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {LABEL: "1", "app": "rich"},
            "annotations": {"note": "a b", "empty": ""},
            "finalizers": ["example.com/hold"],
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                 "uid": "11111111-2222-4333-8444-555555555555", "controller": true},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "other",
                 "uid": "66666666-2222-4333-8444-555555555555"},
            ],
        },
        "spec": {
            "hostname": "web-0", "subdomain": "web", "restartPolicy": "Never",
            "schedulerName": "no-such-scheduler",
            "initContainers": [
                {"name": "setup", "image": "busybox"},
                {"name": "sidecar", "image": "busybox", "restartPolicy": "Always"},
            ],
            "containers": [{"name": "app", "image": "busybox"}, {"name": "two", "image": "busybox"}],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
                {"name": "ro", "persistentVolumeClaim": {"claimName": "shared", "readOnly": true}},
                {"name": "scratch", "emptyDir": {}},
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                        {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                    ]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 5, "preference": {"matchExpressions": [
                            {"key": "disk", "operator": "In", "values": ["ssd", "nvme"]}]}},
                    ],
                },
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "rich"}}},
                ]},
            },
        },
    }))?)
}

/// A status as a kubelet would write it: a failed pod with terminated containers.
fn failed_status() -> serde_json::Value {
    json!({"status": {
        "phase": "Failed", "reason": "Evicted", "message": "gone",
        "startTime": "2026-11-25T01:02:03Z",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "PodFailed", "message": "m",
             "lastTransitionTime": "2026-11-25T01:02:04Z", "observedGeneration": 1},
            {"type": "PodScheduled", "status": "True"},
        ],
        "initContainerStatuses": [
            {"name": "setup", "ready": false, "restartCount": 0, "image": "busybox", "imageID": "",
             "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                      "finishedAt": "2026-11-25T01:02:05Z"}}},
            {"name": "sidecar", "ready": false, "restartCount": 3, "image": "busybox", "imageID": "",
             "state": {"running": {"startedAt": "2026-11-25T01:02:05Z"}}},
        ],
        "containerStatuses": [
            {"name": "app", "ready": false, "restartCount": 2, "image": "busybox", "imageID": "",
             "state": {"terminated": {"exitCode": 137, "reason": "Error",
                                      "startedAt": "2026-11-25T01:02:06Z",
                                      "finishedAt": "2026-11-25T01:03:06Z"}}},
            {"name": "two", "ready": false, "restartCount": 0, "image": "busybox", "imageID": "",
             "state": {"waiting": {"reason": "PodInitializing"}}},
        ],
    }})
}

/// Waits until both stores hold `key` at the same resourceVersion, no older than `rv` (others
/// may change the object meanwhile: node heartbeats, annotations), and returns both copies.
async fn both_cached<K: Informable>(
    what: &str,
    stores: [&rkcm_runtime::cache::Store<K>; 2],
    key: &str,
    rv: &str,
) -> anyhow::Result<(Arc<K>, Arc<K>)> {
    let rv: u64 = rv.parse()?;
    let version = |o: &Arc<K>| {
        o.meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    };
    wait_for(what, TIMEOUT, || {
        let got = match (stores[0].get(key), stores[1].get(key)) {
            (Some(a), Some(b))
                if version(&a) == version(&b) && version(&a).is_some_and(|v| v >= rv) =>
            {
                Some((a, b))
            }
            _ => None,
        };
        async move { Ok(got) }
    })
    .await
}

/// Pods and nodes read in protobuf (upstream's default encoding, and rkcm's) are exactly the
/// objects the JSON informer holds: a pod created, given a status and deleted while a
/// finalizer holds it, and a tainted node. Both informers keep every optional field group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn protobuf_informers_hold_what_json_informers_hold() -> anyhow::Result<()> {
    use rkcm_runtime::cache::cached;
    use rkcm_runtime::cache::projection::pod as pod_fields;
    use rkcm_runtime::cache::{ContentType, Scope};

    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("informer-protobuf").await?;
    let probe = Probe::new();
    let mut stores = Vec::new();
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    for content_type in [ContentType::Json, ContentType::Protobuf] {
        let factory = InformerFactory::scoped_with(
            probe.client(&cluster).await?,
            Scope::namespace(ns.name()),
            ListMode::Paged,
            content_type,
        );
        let pods = factory.informer::<cached::Pod>();
        pods.keep(pod_fields::ALL);
        let nodes = factory.informer::<cached::Node>();
        factory.start(shutdown.clone());
        assert!(pods.wait_synced(&shutdown).await && nodes.wait_synced(&shutdown).await);
        stores.push((pods.store(), nodes.store()));
    }
    assert_eq!(probe.protobuf_count(Verb::List, "/api/v1/pods"), 1);
    assert_eq!(
        probe.count(Verb::List, "/api/v1/pods"),
        2,
        "one per factory"
    );
    assert_eq!(probe.protobuf_count(Verb::List, "/api/v1/nodes"), 1);

    let pods: Api<Pod> = ns.api();
    let key = format!("{}/rich", ns.name());
    wait_for("pod creation", TIMEOUT, || {
        let (pods, pod) = (pods.clone(), rich_pod(ns.name(), "rich"));
        async move { Ok(Some(pods.create(&PostParams::default(), &pod?).await?)) }
    })
    .await?;
    pods.patch_status(
        "rich",
        &PatchParams::default(),
        &Patch::Merge(failed_status()),
    )
    .await?;
    pods.delete("rich", &DeleteParams::default()).await?;
    let deleting = pods.get("rich").await?;
    assert!(
        deleting.metadata.deletion_timestamp.is_some(),
        "held by its finalizer"
    );
    let rv = deleting.resource_version().unwrap_or_default();
    let (json_pod, pb_pod) = both_cached(
        "the pod in both caches",
        [&stores[0].0, &stores[1].0],
        &key,
        &rv,
    )
    .await?;
    assert_eq!(json_pod, pb_pod);
    // The pod has what it is meant to test.
    let spec = pb_pod.spec.as_ref().expect("spec");
    assert!(
        spec.affinity
            .as_ref()
            .is_some_and(|a| a.node_affinity.is_some())
    );
    assert_eq!(
        spec.volumes.as_ref().map(Vec::len),
        Some(2),
        "claim volumes only"
    );
    assert!(
        pb_pod
            .status
            .as_ref()
            .is_some_and(|s| s.container_statuses.is_some())
    );

    // A node with taints and conditions.
    let nodes: Api<Node> = Api::all(cluster.client());
    let node_name = format!("{}-node", ns.name());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node_name, "labels": {"zone": "a"}},
        "spec": {"unschedulable": true, "taints": [
            {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
             "timeAdded": "2026-11-25T01:00:00Z"},
        ]},
    }))?;
    nodes.create(&PostParams::default(), &node).await?;
    let node = nodes
        .patch_status(
            &node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Ready", "status": "False", "reason": "KubeletDown", "message": "x",
                 "lastHeartbeatTime": "2026-11-25T01:00:00Z",
                 "lastTransitionTime": "2026-11-25T01:00:00Z"},
            ]}})),
        )
        .await?;
    let rv = node.resource_version().unwrap_or_default();
    let cached = both_cached(
        "the node in both caches",
        [&stores[0].1, &stores[1].1],
        &node_name,
        &rv,
    )
    .await;
    nodes.delete(&node_name, &DeleteParams::default()).await?;
    let (json_node, pb_node) = cached?;
    assert_eq!(json_node, pb_node);
    assert!(
        pb_node
            .spec
            .as_ref()
            .is_some_and(|s| s.taints.as_ref().map(Vec::len) == Some(2))
    );

    // The protobuf informer's changes came from protobuf watches.
    assert!(probe.protobuf_count(Verb::Watch, "/api/v1/pods") >= 1);
    assert!(probe.protobuf_count(Verb::Watch, "/api/v1/nodes") >= 1);

    // Let the pod go.
    pods.patch(
        "rich",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    Ok(())
}

/// A protobuf watch answered with 410 relists (in protobuf) and delivers the gap's changes
/// once each, with a tombstone for the pod deleted meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn a_protobuf_watch_answered_with_410_relists() -> anyhow::Result<()> {
    protobuf_gap("informer-pb-gone", ListMode::Paged).await
}

/// The same with a streaming list: the relist is a new streaming watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn a_protobuf_streaming_watch_answered_with_410_relists() -> anyhow::Result<()> {
    protobuf_gap("informer-pb-stream", ListMode::Streaming).await
}

async fn protobuf_gap(prefix: &str, list_mode: ListMode) -> anyhow::Result<()> {
    use rkcm_runtime::cache::cached;
    use rkcm_runtime::cache::{ContentType, Scope};

    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace(prefix).await?;
    let probe = Probe::new();
    probe.short_watches(2);
    let factory = InformerFactory::scoped_with(
        probe.client(&cluster).await?,
        Scope::namespace(ns.name()),
        list_mode,
        ContentType::Protobuf,
    );
    let informer = factory.informer::<cached::Pod>();
    let shutdown = CancellationToken::new();
    let _stop = Stop(shutdown.clone());
    factory.start(shutdown.clone());
    assert!(informer.wait_synced(&shutdown).await);
    let api: Api<Pod> = ns.api();
    let make = |name: &str| {
        rkcm_testkit::builders::pod(ns.name(), name)
            .label(LABEL, "1")
            .unschedulable()
            .build()
    };
    for name in ["keep", "doomed"] {
        wait_for("pod creation", TIMEOUT, || {
            let (api, pod) = (api.clone(), make(name));
            async move { Ok(Some(api.create(&PostParams::default(), &pod).await?)) }
        })
        .await?;
    }
    let seen = record(&informer, ns.name());
    wait_seen("the initial pods", &seen, &[added("keep"), added("doomed")]).await?;
    set_step(&api, "keep", "2").await?;
    wait_seen(
        "a live update",
        &seen,
        &[Seen::Updated(
            "keep".into(),
            Some("1".into()),
            Some("2".into()),
        )],
    )
    .await?;

    probe.trap_next_watch("/api/v1/pods", true);
    wait_for("the re-watch to be held", TIMEOUT, || {
        let parked = probe.parked();
        async move { Ok((parked > 0).then_some(())) }
    })
    .await?;
    // Unscheduled pods are deleted at once.
    api.delete("doomed", &DeleteParams::default()).await?;
    api.create(&PostParams::default(), &make("born")).await?;
    probe.release();
    wait_seen(
        "the gap's changes",
        &seen,
        &[Seen::Deleted("doomed".into(), true), added("born")],
    )
    .await?;
    let seen = seen.lock().clone();
    for name in ["keep", "doomed", "born"] {
        assert_eq!(
            seen.iter().filter(|s| **s == added(name)).count(),
            1,
            "{name} added exactly once: {seen:?}"
        );
    }
    let lists = probe.protobuf_count(Verb::List, "/api/v1/pods");
    match list_mode {
        ListMode::Paged => assert_eq!(lists, 2, "the first list and the relist"),
        ListMode::Streaming => assert_eq!(lists, 0, "no LIST at all"),
    }
    assert_eq!(
        probe.count(Verb::Watch, "/api/v1/pods"),
        probe.protobuf_count(Verb::Watch, "/api/v1/pods"),
        "every watch in protobuf"
    );
    Ok(())
}
