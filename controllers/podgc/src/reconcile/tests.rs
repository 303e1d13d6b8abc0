//! Sweep tests through the real API calls against the testkit's fake API server, on tokio's
//! paused clock.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use rkcm_runtime::cache::cached::Node;
use rkcm_runtime::cache::cached::{NodeCondition, NodeSpec, NodeStatus};
use rkcm_runtime::clock::{FakeClock, SharedClock};
use rkcm_testkit::fake_api::{FakeApi, Reply};
use tokio::time::Instant;

use super::*;
use crate::plan::tests::{deleting, on, pod};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeAnswer {
    Exists,
    Error,
}

/// One PodGC call the fake API server saw, read back from its request log.
#[derive(Debug, Clone, PartialEq)]
enum Call {
    Apply(Box<core::Pod>),
    Delete { key: String, uid: Option<String> },
    GetNode(String),
}

/// The testkit's fake API server behind the real [`KubeApi`]: unscripted writes succeed,
/// unscripted node GETs find nothing (404).
#[derive(Clone)]
struct Api(FakeApi);

impl Default for Api {
    fn default() -> Self {
        let api = FakeApi::new();
        api.echo_writes();
        Self(api)
    }
}

impl Api {
    /// The status write of pod `name` fails (500).
    fn fail_apply(&self, name: &str) {
        self.0.on(
            "PATCH",
            &format!("/api/v1/namespaces/*/pods/{name}/status"),
            Reply::internal("injected"),
        );
    }

    /// The delete of pod `name` fails (404).
    fn fail_delete(&self, name: &str) {
        self.0.on(
            "DELETE",
            &format!("/api/v1/namespaces/*/pods/{name}"),
            Reply::not_found("pods", name),
        );
    }

    /// The live GET of node `name` answers `answer`.
    fn node(&self, name: &str, answer: NodeAnswer) {
        let reply = match answer {
            NodeAnswer::Exists => Reply::ok(
                serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
            ),
            NodeAnswer::Error => Reply::status(503, "ServiceUnavailable", "injected"),
        };
        self.0.on("GET", &format!("/api/v1/nodes/{name}"), reply);
    }

    /// Every delete is held for `delay` before the server sees it.
    fn delete_delay(&self, delay: Duration) {
        self.0.delay("DELETE", "**", delay);
    }

    fn calls(&self) -> Vec<Call> {
        self.0
            .requests()
            .into_iter()
            .filter_map(|r| {
                let segments: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
                match (r.method.as_str(), segments.as_slice()) {
                    ("PATCH", ["api", "v1", "namespaces", _, "pods", _, "status"]) => {
                        serde_json::from_value(r.body.clone())
                            .ok()
                            .map(|p| Call::Apply(Box::new(p)))
                    }
                    ("DELETE", ["api", "v1", "namespaces", ns, "pods", name]) => {
                        Some(Call::Delete {
                            key: format!("{ns}/{name}"),
                            uid: r.body["preconditions"]["uid"].as_str().map(str::to_owned),
                        })
                    }
                    ("GET", ["api", "v1", "nodes", name]) => {
                        Some(Call::GetNode((*name).to_owned()))
                    }
                    _ => None,
                }
            })
            .collect()
    }
    fn deleted(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Delete { key, .. } => Some(key),
                _ => None,
            })
            .collect()
    }
    fn applied(&self) -> Vec<core::Pod> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Apply(p) => Some(*p),
                _ => None,
            })
            .collect()
    }
    fn node_gets(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::GetNode(n) => Some(n),
                _ => None,
            })
            .collect()
    }
}

/// Advances paused time and lets the quarantine queue's background task move due names.
async fn advance(d: Duration) {
    tokio::time::advance(d).await;
    for _ in 0..5 {
        tokio::task::yield_now().await;
    }
}

fn clock() -> SharedClock {
    Arc::new(FakeClock::new(
        jiff::Timestamp::from_second(1_800_000_000).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
    ))
}

fn cfg(threshold: i32) -> Config {
    Config {
        terminated_pod_gc_threshold: threshold,
        ..Config::default()
    }
}

fn sweeper(api: &Api, cfg: Config) -> Sweeper<KubeApi> {
    Sweeper::new(KubeApi::new(api.0.client()), cfg, clock())
}

fn arcs<T>(v: Vec<T>) -> Vec<Arc<T>> {
    v.into_iter().map(Arc::new).collect()
}

fn node(name: &str, ready: &str, out_of_service: bool) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.spec = Some(NodeSpec {
        taints: out_of_service.then(|| {
            vec![Taint {
                key: "node.kubernetes.io/out-of-service".into(),
                value: Some("nodeshutdown".into()),
                effect: "NoExecute".into(),
                time_added: None,
            }]
        }),
        ..Default::default()
    });
    n.status = Some(NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: ready.into(),
        }]),
    });
    n
}

#[tokio::test(start_paused = true)]
async fn terminated_sweep_deletes_excess_oldest_first_without_status_writes() {
    let ns = "rt-terminated";
    let api = Api::default();
    let mut s = sweeper(&api, cfg(2));
    let pods = arcs(
        (0..4)
            .map(|i| pod(ns, &format!("p{i}"), i, "Succeeded"))
            .collect(),
    );
    let report = s.sweep(&pods, &[]).await;

    let mut deleted = api.deleted();
    deleted.sort();
    assert_eq!(deleted, [format!("{ns}/p0"), format!("{ns}/p1")]);
    assert!(api.applied().is_empty(), "terminal pods are never patched");
    assert!(
        api.calls().iter().all(|c| match c {
            Call::Delete { key, uid } =>
                uid.as_deref() == Some(format!("uid-{key}").replace('/', "-").as_str()),
            _ => true,
        }),
        "every delete carries the pod's UID precondition: {:?}",
        api.calls()
    );
    assert_eq!(report.attempted.len(), 2);
    assert!(report.failed.is_empty());
    let m = metrics::get();
    assert_eq!(m.attempts(ns, Reason::Terminated), 2);
    assert_eq!(m.errors(ns, Reason::Terminated), 0);
}

#[tokio::test(start_paused = true)]
async fn terminated_non_terminal_phase_is_marked_failed_first() {
    // An empty phase counts as terminated yet is not terminal: upstream patches it to Failed.
    let ns = "rt-empty-phase";
    let api = Api::default();
    let mut s = sweeper(&api, cfg(1));
    let pods = arcs(vec![pod(ns, "a", 0, ""), pod(ns, "b", 1, "Succeeded")]);
    s.sweep(&pods, &[]).await;
    assert_eq!(
        api.calls()
            .iter()
            .map(|c| matches!(c, Call::Apply(_)))
            .collect::<Vec<_>>(),
        [true, false],
        "apply before delete"
    );
    assert_eq!(api.deleted(), [format!("{ns}/a")]);
}

#[tokio::test(start_paused = true)]
async fn one_failure_never_stops_the_sweep() {
    let ns = "rt-failures";
    let api = Api::default();
    api.fail_apply("u-apply-fails");
    api.fail_delete("u-delete-fails");
    api.fail_delete("t-delete-fails");
    let mut s = sweeper(&api, cfg(1));
    let pods = arcs(vec![
        deleting(pod(ns, "u-apply-fails", 0, "Pending")),
        deleting(pod(ns, "u-delete-fails", 1, "Pending")),
        deleting(pod(ns, "u-ok", 2, "Pending")),
        pod(ns, "t-delete-fails", 3, "Succeeded"),
        pod(ns, "t-ok", 4, "Succeeded"),
        pod(ns, "t-kept", 5, "Succeeded"),
    ]);
    let report = s.sweep(&pods, &[]).await;

    let deleted: HashSet<String> = api.deleted().into_iter().collect();
    // The failed status write skips that pod's delete only.
    assert!(!deleted.contains(&format!("{ns}/u-apply-fails")));
    for name in ["u-delete-fails", "u-ok", "t-delete-fails", "t-ok"] {
        assert!(
            deleted.contains(&format!("{ns}/{name}")),
            "{name} attempted: {deleted:?}"
        );
    }
    assert!(!deleted.contains(&format!("{ns}/t-kept")));

    let mut failed: Vec<_> = report.failed.clone();
    failed.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        failed,
        [
            (Reason::Terminated, format!("{ns}/t-delete-fails")),
            (Reason::Unscheduled, format!("{ns}/u-apply-fails")),
            (Reason::Unscheduled, format!("{ns}/u-delete-fails")),
        ]
    );
    let m = metrics::get();
    assert_eq!(m.attempts(ns, Reason::Unscheduled), 3);
    assert_eq!(m.errors(ns, Reason::Unscheduled), 2);
    assert_eq!(m.attempts(ns, Reason::Terminated), 2);
    assert_eq!(m.errors(ns, Reason::Terminated), 1);
}

#[tokio::test(start_paused = true)]
async fn orphan_needs_full_quarantine_then_live_not_found() {
    let ns = "rt-orphan";
    let api = Api::default();
    let mut s = sweeper(
        &api,
        Config {
            quarantine: Duration::from_secs(40),
            ..cfg(0)
        },
    );
    let mut p = on(pod(ns, "p", 0, "Running"), "ghost");
    p.metadata.generation = Some(2);
    let pods = arcs(vec![p]);

    s.sweep(&pods, &[]).await;
    assert!(api.calls().is_empty(), "first sighting only quarantines");
    advance(Duration::from_secs(20)).await;
    s.sweep(&pods, &[]).await;
    advance(Duration::from_millis(19_999)).await;
    s.sweep(&pods, &[]).await;
    assert!(
        api.calls().is_empty(),
        "no GET and no delete before 40 s: {:?}",
        api.calls()
    );

    advance(Duration::from_millis(1)).await;
    let report = s.sweep(&pods, &[]).await;
    assert_eq!(api.node_gets(), ["ghost"]);
    assert_eq!(
        report
            .deleted_nodes
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["ghost"]
    );
    let applied = api.applied();
    assert_eq!(applied.len(), 1);
    let status = applied[0].status.clone().unwrap_or_default();
    assert_eq!(applied[0].metadata.uid.as_deref(), Some("uid-rt-orphan-p"));
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.observed_generation, Some(2));
    let cond = status.conditions.unwrap_or_default();
    assert_eq!(cond.len(), 1);
    assert_eq!(cond[0].type_, "DisruptionTarget");
    assert_eq!(cond[0].reason.as_deref(), Some("DeletionByPodGC"));
    assert_eq!(api.deleted(), [format!("{ns}/p")]);
    assert_eq!(metrics::get().attempts(ns, Reason::Orphaned), 1);
    // The quarantine is upstream's named delaying queue: its workqueue metrics carry the name.
    let text = rkcm_runtime::metrics::render();
    assert!(
        text.lines()
            .any(|l| l.starts_with("workqueue_adds_total{name=\"orphaned_pods_nodes\"}")),
        "workqueue metrics for orphaned_pods_nodes"
    );
    // Released from the quarantine: a pod still there (finalizer) waits a full period again.
    s.sweep(&pods, &[]).await;
    advance(Duration::from_millis(39_999)).await;
    s.sweep(&pods, &[]).await;
    assert_eq!(
        api.node_gets().len(),
        1,
        "no second GET before a new full wait"
    );
    advance(Duration::from_millis(1)).await;
    s.sweep(&pods, &[]).await;
    assert_eq!(api.node_gets().len(), 2);
    assert_eq!(
        api.deleted().len(),
        2,
        "deleted again while a finalizer holds it"
    );
}

#[tokio::test(start_paused = true)]
async fn terminal_orphan_is_deleted_without_status_write() {
    let ns = "rt-terminal-orphan";
    let api = Api::default();
    let mut s = sweeper(
        &api,
        Config {
            quarantine: Duration::from_secs(2),
            ..cfg(0)
        },
    );
    let pods = arcs(vec![on(pod(ns, "done", 0, "Succeeded"), "ghost")]);
    s.sweep(&pods, &[]).await;
    advance(Duration::from_secs(2)).await;
    s.sweep(&pods, &[]).await;
    assert!(api.applied().is_empty());
    assert_eq!(api.deleted(), [format!("{ns}/done")]);
}

#[tokio::test(start_paused = true)]
async fn orphan_node_found_or_get_error_never_deletes() {
    for answer in [NodeAnswer::Exists, NodeAnswer::Error] {
        let api = Api::default();
        api.node("lagging", answer);
        let mut s = sweeper(
            &api,
            Config {
                quarantine: Duration::from_secs(40),
                ..cfg(0)
            },
        );
        let pods = arcs(vec![on(pod("rt-lagging", "p", 0, "Running"), "lagging")]);
        s.sweep(&pods, &[]).await;
        advance(Duration::from_secs(40)).await;
        let report = s.sweep(&pods, &[]).await;
        assert_eq!(api.node_gets(), ["lagging"], "{answer:?}");
        assert!(
            api.deleted().is_empty() && api.applied().is_empty(),
            "{answer:?}"
        );
        assert!(report.deleted_nodes.is_empty());
        // The next sweep quarantines the name again with a fresh wait.
        s.sweep(&pods, &[]).await;
        advance(Duration::from_millis(39_999)).await;
        s.sweep(&pods, &[]).await;
        assert_eq!(api.node_gets().len(), 1, "{answer:?}");
        advance(Duration::from_millis(1)).await;
        s.sweep(&pods, &[]).await;
        assert_eq!(api.node_gets().len(), 2, "{answer:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn node_back_in_cache_saves_its_pods() {
    let api = Api::default();
    let mut s = sweeper(
        &api,
        Config {
            quarantine: Duration::from_secs(40),
            ..cfg(0)
        },
    );
    let pods = arcs(vec![on(pod("rt-back", "p", 0, "Running"), "slow")]);
    s.sweep(&pods, &[]).await;
    advance(Duration::from_secs(15)).await;
    let nodes = arcs(vec![node("slow", "True", false)]);
    s.sweep(&pods, &nodes).await;
    advance(Duration::from_secs(30)).await;
    s.sweep(&pods, &nodes).await;
    assert!(
        api.calls().is_empty(),
        "known again: no GET, no delete: {:?}",
        api.calls()
    );
}

#[tokio::test(start_paused = true)]
async fn out_of_service_marks_failed_without_condition_and_counts() {
    let ns = "rt-oos";
    let api = Api::default();
    let mut s = sweeper(&api, cfg(0));
    let nodes = arcs(vec![
        node("dead", "False", true),
        node("ready", "True", true),
        node("down", "Unknown", false),
    ]);
    let pods = arcs(vec![
        deleting(on(pod(ns, "stuck", 0, "Running"), "dead")),
        on(pod(ns, "not-terminating", 0, "Running"), "dead"),
        deleting(on(pod(ns, "on-ready", 0, "Running"), "ready")),
        deleting(on(pod(ns, "untainted", 0, "Running"), "down")),
    ]);
    s.sweep(&pods, &nodes).await;
    assert_eq!(api.deleted(), [format!("{ns}/stuck")]);
    let applied = api.applied();
    assert_eq!(applied.len(), 1);
    let status = applied[0].status.clone().unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert!(status.conditions.is_none());
    assert_eq!(metrics::get().attempts(ns, Reason::OutOfService), 1);
    assert_eq!(metrics::get().errors(ns, Reason::OutOfService), 0);
}

#[tokio::test(start_paused = true)]
async fn sweeps_run_in_upstream_order() {
    let ns = "rt-order";
    let api = Api::default();
    let mut s = sweeper(
        &api,
        Config {
            quarantine: Duration::ZERO,
            ..cfg(1)
        },
    );
    let nodes = arcs(vec![node("dead", "False", true)]);
    let pods = arcs(vec![
        deleting(pod(ns, "unscheduled", 0, "Pending")),
        on(pod(ns, "orphan", 1, "Running"), "ghost"),
        deleting(on(pod(ns, "oos", 2, "Running"), "dead")),
        on(pod(ns, "old-done", 3, "Succeeded"), "dead"),
        on(pod(ns, "new-done", 4, "Succeeded"), "dead"),
    ]);
    s.sweep(&pods, &nodes).await;
    let order: Vec<String> = api
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Delete { key, .. } => Some(key),
            Call::GetNode(n) => Some(format!("GET {n}")),
            Call::Apply(_) => None,
        })
        .collect();
    assert_eq!(
        order,
        [
            format!("{ns}/old-done"),
            format!("{ns}/oos"),
            "GET ghost".to_owned(),
            format!("{ns}/orphan"),
            format!("{ns}/unscheduled"),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn concurrent_deletes_are_bounded() {
    let api = Api::default();
    api.delete_delay(Duration::from_millis(100));
    let mut s = sweeper(
        &api,
        Config {
            delete_concurrency: 3,
            ..cfg(1)
        },
    );
    let pods = arcs(
        (0..21)
            .map(|i| pod("rt-bounded", &format!("p{i:02}"), i, "Failed"))
            .collect(),
    );
    let started = Instant::now();
    let report = s.sweep(&pods, &[]).await;
    assert_eq!(report.attempted.len(), 20, "the per-sweep count is kept");
    assert_eq!(api.0.max_in_flight(), 3);
    // 20 deletes, 3 at a time, 100 ms each: 7 rounds.
    assert_eq!(started.elapsed(), Duration::from_millis(700));

    let api = Api::default();
    api.delete_delay(Duration::from_millis(100));
    let mut s = sweeper(
        &api,
        Config {
            delete_concurrency: 0,
            ..cfg(1)
        },
    );
    s.sweep(&pods, &[]).await;
    assert_eq!(
        api.0.max_in_flight(),
        1,
        "0 means one at a time, never unbounded"
    );
}

#[tokio::test(start_paused = true)]
async fn run_sweeps_uses_a_sliding_period_and_stops_on_shutdown() {
    let api = Api::default();
    // Each sweep takes 5 s (one delete), so starts are 25 s apart with a 20 s period.
    api.delete_delay(Duration::from_secs(5));
    let s = sweeper(&api, cfg(1));
    let pods = arcs(vec![
        pod("rt-run", "a", 0, "Succeeded"),
        pod("rt-run", "b", 1, "Succeeded"),
    ]);
    let starts = Arc::new(Mutex::new(Vec::new()));
    let origin = Instant::now();
    let recorded = starts.clone();
    let snapshot = move || {
        recorded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(origin.elapsed());
        (pods.clone(), Vec::new()).into()
    };
    run_sweeps(
        s,
        snapshot,
        Duration::from_secs(20),
        tokio::time::sleep(Duration::from_secs(52)),
    )
    .await;
    assert_eq!(
        origin.elapsed(),
        Duration::from_secs(52),
        "returns as soon as shutdown fires"
    );
    let starts = starts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert_eq!(
        starts,
        [
            Duration::ZERO,
            Duration::from_secs(25),
            Duration::from_secs(50)
        ]
    );
    assert_eq!(
        api.deleted().len(),
        2,
        "the sweep cut short by shutdown issued nothing more"
    );
}

#[tokio::test(start_paused = true)]
async fn run_sweeps_returns_immediately_when_already_shut_down() {
    let api = Api::default();
    let s = sweeper(&api, cfg(1));
    let sweeps = Arc::new(AtomicUsize::new(0));
    let counted = sweeps.clone();
    let pods = arcs(vec![
        pod("rt-stop", "a", 0, "Succeeded"),
        pod("rt-stop", "b", 1, "Succeeded"),
    ]);
    run_sweeps(
        s,
        move || {
            counted.fetch_add(1, Ordering::SeqCst);
            (pods.clone(), Vec::new()).into()
        },
        Duration::from_secs(20),
        std::future::ready(()),
    )
    .await;
    assert!(api.calls().is_empty());
    assert!(sweeps.load(Ordering::SeqCst) <= 1);
}

/// A store of this test's own (the process's store is shared by every test).
fn store() -> &'static Decisions {
    Box::leak(Box::new(Decisions::new(100)))
}

fn decided(store: &Decisions, key: &str) -> Option<decisions::Decided> {
    store.get(NAME, key)
}

/// Each sweep leaves a last decision for every pod it acted on or waits on, as the queue
/// controllers do per sync: the force-delete with its writes (or the refused write), the
/// quarantine a missing node's pods wait out, a pod stuck terminating on a NotReady node; and
/// a pod that no longer needs PodGC is forgotten by the next sweep.
#[tokio::test(start_paused = true)]
async fn every_sweep_records_its_decisions_and_forgets_the_rest() {
    let ns = "rt-decided";
    let api = Api::default();
    api.0.on(
        "DELETE",
        &format!("/api/v1/namespaces/{ns}/pods/refused"),
        Reply::forbidden(&format!(
            "pods \"refused\" is forbidden: User \"system:serviceaccount:kube-system:rkcm\" cannot delete resource \"pods\" in API group \"\" in the namespace \"{ns}\""
        )),
    );
    let store = store();
    let mut s = sweeper(
        &api,
        Config {
            quarantine: Duration::from_secs(40),
            ..cfg(0)
        },
    )
    .with_decisions(store);
    let nodes = arcs(vec![
        node("down", "False", false),
        node("up", "True", false),
    ]);
    let stuck = deleting(on(pod(ns, "stuck", 0, "Running"), "down"));
    let draining = deleting(on(pod(ns, "draining", 0, "Running"), "up"));
    let orphan = on(pod(ns, "orphan", 0, "Running"), "ghost");
    let pods = arcs(vec![
        stuck,
        draining,
        orphan,
        deleting(pod(ns, "unbound", 1, "Pending")),
        deleting(pod(ns, "refused", 2, "Pending")),
    ]);
    s.sweep(&pods, &nodes).await;

    let key = |name: &str| format!("{ns}/{name}");
    let unbound = decided(store, &key("unbound")).expect("unbound pod recorded");
    assert_eq!(unbound.controller, NAME);
    assert_eq!(unbound.outcome, Outcome::Synced);
    assert_eq!(
        unbound.actions.first().map(String::as_str),
        Some("force-delete the pod (grace period 0): unscheduled")
    );
    // The writes themselves are noted by the manager's client stack, which this fake API
    // server's client lacks: the plane test `explain/decided.rs` checks them.
    let refused = decided(store, &key("refused")).expect("refused pod recorded");
    assert!(
        matches!(&refused.outcome, Outcome::Failed { error } if error.contains("cannot delete")),
        "{refused:?}"
    );
    assert!(
        refused
            .waiting
            .iter()
            .any(|w| w.starts_with("WriteForbidden: ")),
        "a refused write is a wait: {refused:?}"
    );
    let orphan = decided(store, &key("orphan")).expect("orphan recorded");
    assert_eq!(orphan.actions, Vec::<String>::new());
    assert_eq!(orphan.waiting.len(), 1, "{orphan:?}");
    assert!(
        orphan.waiting[0].starts_with("NodeQuarantine: node ghost is not in the cluster"),
        "{orphan:?}"
    );
    let stuck = decided(store, &key("stuck")).expect("stuck pod recorded");
    assert!(
        stuck.waiting.len() == 1 && stuck.waiting[0].starts_with("NodePresent: "),
        "{stuck:?}"
    );
    assert_eq!(
        decided(store, &key("draining")),
        None,
        "a pod its Ready node's kubelet is deleting is not PodGC's wait"
    );

    // The next sweep: the deleted pods are gone, the node is back: nothing left to record.
    let nodes = arcs(vec![
        node("down", "True", false),
        node("up", "True", false),
        node("ghost", "True", false),
    ]);
    let pods = arcs(vec![
        deleting(on(pod(ns, "stuck", 0, "Running"), "down")),
        on(pod(ns, "orphan", 0, "Running"), "ghost"),
    ]);
    s.sweep(&pods, &nodes).await;
    assert_eq!(store.list(Some(NAME)), Vec::new());
}

/// Sharded mode: the per-pod sweeps delete only in namespaces whose range is held; the
/// threshold runs over the terminated pods it is given, and only with the global Lease.
#[tokio::test(start_paused = true)]
async fn sharded_sweeps_write_only_for_held_ranges_and_the_threshold_only_with_the_global_lease() {
    let mine = "rt-shard-mine";
    let other = rkcm_testkit::shards::other_range(
        16,
        mine,
        &[
            "rt-shard-payments",
            "rt-shard-search",
            "rt-shard-billing",
            "rt-shard-web",
        ],
    );
    let terminated = |ns: &str| -> Vec<Pod> {
        (0..3)
            .map(|i| pod(ns, &format!("done{i}"), i, "Succeeded"))
            .collect()
    };
    let unscheduled = |ns: &str| deleting(pod(ns, "stuck", 9, "Pending"));
    let mut all = terminated(mine);
    all.extend(terminated(other));
    all.extend([unscheduled(mine), unscheduled(other)]);
    let all = arcs(all);
    let cluster_terminated: Vec<Arc<Pod>> = all
        .iter()
        .filter(|p| crate::plan::is_terminated(p))
        .cloned()
        .collect();

    // Ranges of `mine` only, no global Lease: the unscheduled pod of `mine`, nothing else,
    // even when handed the cluster's terminated pods.
    let api = Api::default();
    let shards = rkcm_testkit::shards::holding(16, &[mine], false);
    let mut s = sweeper(&api, cfg(2)).with_shards(shards);
    s.sweep_with(&all, &[], Some(&cluster_terminated)).await;
    assert_eq!(api.deleted(), vec![format!("{mine}/stuck")]);

    // With the global Lease: the threshold counts both namespaces' 6 terminated pods and
    // trims the 4 oldest, whichever range they are in.
    let api = Api::default();
    let shards = rkcm_testkit::shards::holding(16, &[mine], true);
    let mut s = sweeper(&api, cfg(2)).with_shards(shards);
    s.sweep_with(&all, &[], Some(&cluster_terminated)).await;
    let mut deleted = api.deleted();
    deleted.sort();
    let mut expected = vec![
        format!("{mine}/done0"),
        format!("{mine}/done1"),
        format!("{other}/done0"),
        format!("{other}/done1"),
        format!("{mine}/stuck"),
    ];
    expected.sort();
    assert_eq!(deleted, expected);

    // Without the cluster's terminated pods (the cache not synced yet) no threshold sweep,
    // though the local pods alone are above it.
    let api = Api::default();
    let shards = rkcm_testkit::shards::holding(16, &[mine, other], true);
    let mut s = sweeper(&api, cfg(2)).with_shards(shards);
    s.sweep_with(&all, &[], None).await;
    let mut deleted = api.deleted();
    deleted.sort();
    assert_eq!(
        deleted,
        vec![format!("{mine}/stuck"), format!("{other}/stuck")]
    );
}
