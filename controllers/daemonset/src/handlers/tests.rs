//! The handlers map events to queue keys as upstream does; nothing here talks to a server.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use kube::runtime::watcher;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::cache::{Change, INDEX_NODE_NAME, Informer, pods_by_node};
use rkcm_runtime::events::EventRecorder;
use rkcm_runtime::queue::{RateLimiter, WorkQueue};
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::history::History;
use rkcm_runtime::workload::podcontrol::PodControl;
use serde_json::json;

use crate::reconcile::Controller;
use crate::testutil::{ds, node_from, pod};

fn offline_client() -> kube::Client {
    kube::Client::new(
        tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("no server"))
        }),
        "default",
    )
}

struct Fixture {
    c: Arc<Controller>,
    daemonsets: Informer<DaemonSet>,
    pods: Informer<Pod>,
    nodes: Informer<Node>,
}

fn fixture() -> Fixture {
    let client = offline_client();
    let daemonsets = Informer::<DaemonSet>::detached();
    let pods = Informer::<Pod>::detached();
    pods.add_index(INDEX_NODE_NAME, pods_by_node);
    let nodes = Informer::<Node>::detached();
    let revisions = Informer::<ControllerRevision>::detached();
    let (recorder, _) = EventRecorder::fake("daemonset-controller");
    let clock = rkcm_runtime::clock::system();
    let c = Arc::new(Controller {
        client: client.clone(),
        daemonsets: daemonsets.store(),
        pods: pods.store(),
        nodes: nodes.store(),
        revisions: revisions.store(),
        expectations: UidTrackingExpectations::new(clock.clone()),
        pod_control: PodControl::new(client.clone(), recorder.clone()),
        recorder,
        history: History::new(client),
        queue: WorkQueue::new("test-daemonset", RateLimiter::Default),
        node_queue: WorkQueue::new("test-daemonset-node-updates", RateLimiter::Default),
        clock,
        cfg: crate::config::Config::default(),
        consistency: crate::metrics::stale_guard().enabled(false),
        backoff: Mutex::new(crate::backoff::Backoff::default()),
        pacer: rkcm_runtime::queue::pacing::StatusPacer::default(),
        spacer: rkcm_runtime::queue::pacing::SyncSpacer::default(),
    });
    Fixture {
        c,
        daemonsets,
        pods,
        nodes,
    }
}

fn with_rv<K: kube::Resource + Clone>(obj: &K, rv: &str) -> K {
    let mut o = obj.clone();
    o.meta_mut().resource_version = Some(rv.into());
    o
}

#[tokio::test]
async fn heartbeats_and_condition_updates_cost_nothing() {
    let f = fixture();
    f.daemonsets
        .feed(watcher::Event::Apply(with_rv(&ds(), "1")));
    let base = with_rv(
        &node_from(
            json!({"metadata": {"name": "n", "labels": {"a": "1"}}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        ),
        "1",
    );
    let mut beat = with_rv(&base, "2");
    beat.status = Some(serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:40Z"}]})).unwrap_or_default());
    f.c.on_node_change(Change::Updated {
        old: Arc::new(base.clone()),
        new: Arc::new(beat),
    });
    assert_eq!(
        f.c.node_queue.len(),
        0,
        "a heartbeat is ignored (a Ready flip is not: nodes.rs)"
    );
    let mut relabelled = with_rv(&base, "3");
    relabelled.metadata.labels = Some([("a".to_string(), "2".to_string())].into());
    f.c.on_node_change(Change::Updated {
        old: Arc::new(base.clone()),
        new: Arc::new(relabelled),
    });
    assert_eq!(f.c.node_queue.len(), 1);
    f.c.on_node_change(Change::Deleted {
        obj: Arc::new(base),
        final_state_unknown: false,
    });
    assert_eq!(f.c.node_queue.len(), 1, "node deletion has no handler");
}

#[tokio::test]
async fn the_node_worker_enqueues_only_daemonsets_the_node_concerns() {
    let f = fixture();
    f.daemonsets
        .feed(watcher::Event::Apply(with_rv(&ds(), "1")));
    f.nodes.feed(watcher::Event::Apply(with_rv(
        &node_from(json!({"metadata": {"name": "a"}})),
        "1",
    )));
    // A bound pod of the DaemonSet on node a: nothing to do there.
    let p = pod("p", "a", "h", 0).bound("a").build();
    f.pods.feed(watcher::Event::Apply(with_rv(&*p, "1")));
    let _ = f.c.sync_node("a".into()).await;
    assert_eq!(f.c.queue.len(), 0);
    // Without the pod the DaemonSet needs one there.
    f.pods.feed(watcher::Event::Delete(with_rv(&*p, "2")));
    let _ = f.c.sync_node("a".into()).await;
    assert_eq!(f.c.queue.len(), 1);
    // An unknown node concerns nobody.
    let _ = f.c.sync_node("nowhere".into()).await;
    assert_eq!(f.c.queue.len(), 1);
}

#[tokio::test]
async fn pod_events_observe_expectations_and_map_to_the_owner() {
    let f = fixture();
    f.daemonsets
        .feed(watcher::Event::Apply(with_rv(&ds(), "1")));
    let key = "ns/ds";
    f.c.expectations
        .set_expectations(key, 1, vec!["ns/p".into(), "ns/q".into()]);
    let p = with_rv(&*pod("p", "a", "h", 0).build(), "1");
    f.c.on_pod_change(Change::Added(Arc::new(p.clone())));
    assert_eq!(f.c.expectations.get(key), Some((0, 2)), "creation observed");
    assert_eq!(f.c.queue.len(), 1);
    // Same resourceVersion: a resync, ignored; a deletion timestamp: observed as a delete.
    f.c.on_pod_change(Change::Updated {
        old: Arc::new(p.clone()),
        new: Arc::new(p.clone()),
    });
    assert_eq!(f.c.expectations.get(key), Some((0, 2)));
    let mut deleting = with_rv(&p, "2");
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
    );
    f.c.on_pod_change(Change::Updated {
        old: Arc::new(p.clone()),
        new: Arc::new(deleting.clone()),
    });
    assert_eq!(
        f.c.expectations.get(key),
        Some((0, 1)),
        "deletion observed when it begins"
    );
    // The same pod seen again (another update while it terminates, then its removal) is
    // not a second deletion: `q` is still expected, so the batch is not done.
    let mut later = with_rv(&deleting, "3");
    later.metadata.labels = deleting.metadata.labels.clone();
    f.c.on_pod_change(Change::Updated {
        old: Arc::new(deleting.clone()),
        new: Arc::new(later.clone()),
    });
    f.c.on_pod_change(Change::Deleted {
        obj: Arc::new(later),
        final_state_unknown: false,
    });
    assert_eq!(f.c.expectations.get(key), Some((0, 1)));
    assert!(!f.c.expectations.satisfied_expectations(key));
    let mut q = with_rv(&*pod("q", "b", "h", 0).build(), "5");
    q.metadata.deletion_timestamp = deleting.metadata.deletion_timestamp.clone();
    f.c.on_pod_change(Change::Updated {
        old: Arc::new(q.clone()),
        new: Arc::new(with_rv(&q, "6")),
    });
    assert_eq!(f.c.expectations.get(key), Some((0, 0)));
    assert!(f.c.expectations.satisfied_expectations(key));
    // A pod whose controllerRef names another UID maps to nobody.
    let mut foreign = with_rv(&p, "3");
    if let Some(refs) = foreign.metadata.owner_references.as_mut() {
        refs[0].uid = "other".into();
    }
    f.c.expectations.set_expectations(key, 1, Vec::new());
    f.c.on_pod_change(Change::Added(Arc::new(foreign)));
    assert_eq!(f.c.expectations.get(key), Some((1, 0)));
    // An orphan whose labels match wakes the DaemonSet (to adopt it), observing nothing.
    let mut orphan = with_rv(&p, "4");
    orphan.metadata.owner_references = None;
    orphan.metadata.name = Some("orphan".into());
    f.c.on_pod_change(Change::Added(Arc::new(orphan)));
    assert_eq!(f.c.expectations.get(key), Some((1, 0)));
}

#[tokio::test(start_paused = true)]
async fn pod_changes_right_after_a_sync_wait_for_its_spacing_and_nothing_else_does() {
    let f = fixture();
    f.daemonsets
        .feed(watcher::Event::Apply(with_rv(&ds(), "1")));
    let key = "ns/ds".to_string();
    let p = with_rv(&*pod("p", "a", "h", 0).build(), "1");
    // No sync yet: a pod change queues the DaemonSet at once.
    f.c.on_pod_change(Change::Added(Arc::new(p.clone())));
    assert_eq!(f.c.queue.len(), 1);
    assert_eq!(f.c.queue.get().await, Some(key.clone()));
    f.c.queue.done(&key);
    // A sync that just ended after a 2 ms decision: 80 ms of spacing.
    let t0 = tokio::time::Instant::now();
    f.c.spacer
        .synced(&key, t0, std::time::Duration::from_millis(2));
    let mut ready = with_rv(&p, "2");
    ready.status = Some(
        serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True"}]}))
            .unwrap_or_default(),
    );
    f.c.on_pod_change(Change::Updated {
        old: Arc::new(p.clone()),
        new: Arc::new(ready.clone()),
    });
    f.c.on_pod_change(Change::Deleted {
        obj: Arc::new(ready),
        final_state_unknown: false,
    });
    assert_eq!(f.c.queue.len(), 0, "held back until the spacing ends");
    assert_eq!(f.c.queue.get().await, Some(key.clone()), "not lost");
    assert_eq!(
        t0.elapsed(),
        std::time::Duration::from_millis(80),
        "synced at the end of the spacing"
    );
    assert_eq!(f.c.queue.len(), 0, "both changes lead to one sync");
    f.c.queue.done(&key);
    // A change of the DaemonSet itself is never held back.
    f.c.spacer.synced(
        &key,
        tokio::time::Instant::now(),
        std::time::Duration::from_millis(2),
    );
    f.c.on_daemonset_change(Change::Updated {
        old: Arc::new(with_rv(&ds(), "1")),
        new: Arc::new(with_rv(&ds(), "2")),
    });
    assert_eq!(f.c.queue.len(), 1);
}
