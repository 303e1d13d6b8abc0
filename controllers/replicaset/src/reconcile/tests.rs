//! Syncs and handlers against detached informers and a scripted API server. Mirrors the
//! upstream cases of `pkg/controller/replicaset/replica_set_test.go`:
//! `TestSyncReplicaSetCreateFailures`, `TestSyncReplicaSetDormancy`, `TestDeletionTimestamp`,
//! `TestControllerUpdateStatusWithFailure`, `TestRSSyncExpectations`,
//! `TestDeleteControllerAndExpectations`, `TestPodControllerLookup`, `TestUpdatePods`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{
    PodTemplateSpec, ReplicationController, ReplicationControllerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use kube::runtime::watcher;
use rkcm_runtime::cache::Change;
use rkcm_runtime::cache::Informer;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::clock::FakeClock;
use rkcm_runtime::events::{EventRecorder, FakeEvents};
use rkcm_runtime::queue::RateLimiter;
use rkcm_runtime::queue::pacing::{STATUS_WRITE_INTERVAL, StatusPacer, TERMINATING_WRITE_INTERVAL};
use rkcm_testkit::fake_api::{FakeApi, Reply, Request};
use serde_json::{Value, json};

use super::*;
use crate::plan::tests::{P, now};

/// Answers every request not yet answered by echoing its body (200).
fn echoing(api: &FakeApi) -> FakeApi {
    api.on_fn("*", "**", |req| Reply::ok(req.body.clone()));
    api.clone()
}

/// An API server that accepts everything: creates get a generated name, status writes and
/// patches echo the body, GETs of the owner return `owner`.
fn accepting(owner: Value) -> FakeApi {
    let n = Arc::new(AtomicUsize::new(0));
    let api = FakeApi::new();
    api.on("GET", "**", Reply::ok(owner))
        .on_fn("POST", "**", move |req| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            let mut pod = req.body.clone();
            pod["metadata"]["name"] = json!(format!("web-{i}"));
            pod["metadata"]["uid"] = json!(format!("new-{i}"));
            Reply::created(pod)
        })
        .on(
            "DELETE",
            "**",
            Reply::ok(json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x"}})),
        );
    echoing(&api)
}

const UID: &str = "rs-uid";

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn template() -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", "web")])),
            ..ObjectMeta::default()
        }),
        spec: None,
    }
}

fn rs(replicas: i32) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some(UID.into()),
            resource_version: Some("1".into()),
            generation: Some(1),
            ..ObjectMeta::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..LabelSelector::default()
            },
            template: Some(template()),
            ..ReplicaSetSpec::default()
        },
        status: None,
    }
}

fn owned(name: &'static str) -> P {
    P {
        name,
        uid: name,
        phase: "Running",
        labels: &[("app", "web")],
        owner_uid: Some(UID),
        ..P::default()
    }
}

struct Harness<O: ReplicaOwner> {
    ctrl: Controller<O>,
    owners: Informer<O>,
    pods: Informer<Pod>,
    api: FakeApi,
    events: FakeEvents,
}

impl<O: ReplicaOwner> Harness<O> {
    fn new(api: FakeApi) -> Self {
        Self::with_config(api, Config::default())
    }

    fn with_config(api: FakeApi, cfg: Config) -> Self {
        // Syncs back to back write as soon as something changed; pacing has its own test.
        Self::build(api, cfg, StatusPacer::new(Duration::ZERO))
    }

    fn build(api: FakeApi, cfg: Config, pacer: StatusPacer) -> Self {
        let client = api.client();
        let owners = Informer::<O>::detached();
        let pods = Informer::<Pod>::detached();
        let (recorder, events) = EventRecorder::fake(O::EVENT_COMPONENT);
        let clock = Arc::new(FakeClock::new(now()));
        let ctrl = Controller {
            client: client.clone(),
            owners: owners.store(),
            pods: pods.store(),
            expectations: UidTrackingExpectations::new(clock.clone()),
            pod_control: PodControl::new(client, recorder),
            queue: WorkQueue::new("", RateLimiter::Default),
            clock,
            consistency: crate::metrics::stale_guard(O::CONTROLLER_NAME)
                .enabled(O::HAS_STALE_CACHE_GUARD && cfg.stale_cache_guard),
            written: Mutex::new(HashMap::new()),
            pacer,
            cfg,
        };
        Self {
            ctrl,
            owners,
            pods,
            api,
            events,
        }
    }

    fn owner(&self, o: O) {
        self.owners.feed(watcher::Event::Apply(o));
    }

    fn pod(&self, p: &P) {
        self.pods.feed(watcher::Event::Apply((*p.build()).clone()));
    }

    fn requests(&self, method: &str) -> Vec<Request> {
        self.api.requests_to(method, "**")
    }
}

#[tokio::test]
async fn creates_missing_pods_and_waits_for_them() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    h.owner(rs(3));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let posts = h.requests("POST");
    assert_eq!(posts.len(), 3);
    for p in &posts {
        assert_eq!(p.path, "/api/v1/namespaces/ns/pods");
        assert_eq!(p.body["metadata"]["generateName"], "web-");
        let refs = &p.body["metadata"]["ownerReferences"];
        assert_eq!(refs[0]["kind"], "ReplicaSet");
        assert_eq!(refs[0]["apiVersion"], "apps/v1");
        assert_eq!(refs[0]["uid"], UID);
    }
    assert_eq!(h.ctrl.expectations.get("ns/web"), Some((3, 0)));
    let puts = h.requests("PUT");
    assert_eq!(puts.len(), 1);
    assert_eq!(
        puts[0].path,
        "/apis/apps/v1/namespaces/ns/replicasets/web/status"
    );
    assert_eq!(puts[0].body["status"]["replicas"], 0);
    assert_eq!(puts[0].body["status"]["observedGeneration"], 1);
    assert_eq!(puts[0].body["status"]["terminatingReplicas"], 0);
    assert_eq!(
        puts[0].body["metadata"]["resourceVersion"], "1",
        "status write carries the cached RV"
    );
    let events = h.events.take();
    assert_eq!(
        events
            .iter()
            .filter(|e| e.reason == "SuccessfulCreate")
            .count(),
        3
    );

    // Dormancy: the cache has not seen the pods yet, so a second sync creates nothing.
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(
        h.requests("POST").len(),
        3,
        "no duplicate creates under a lagging cache"
    );

    // The informer reports the pods: expectations are met and nothing more is created.
    for name in ["web-0", "web-1", "web-2"] {
        let p = owned(name);
        h.pod(&p);
        h.ctrl.on_pod_change(Change::Added(p.build()));
    }
    assert!(h.ctrl.expectations.satisfied_expectations("ns/web"));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(h.requests("POST").len(), 3);
}

#[tokio::test]
async fn create_failure_stops_slow_start_and_sets_condition() {
    let msg = "pods \"web-x\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2";
    let h = Harness::<ReplicaSet>::new(echoing(FakeApi::new().on(
        "POST",
        "**",
        Reply::forbidden(msg),
    )));
    h.owner(rs(5));
    let err = h
        .ctrl
        .sync("ns/web".into())
        .await
        .expect_err("create fails");
    assert!(
        matches!(
            err,
            Error::Pods(rkcm_runtime::error::PodsError {
                step: PodStep::Create,
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(
        h.requests("POST").len(),
        1,
        "slow start: one doomed create per sync"
    );
    assert!(
        h.ctrl.expectations.satisfied_expectations("ns/web"),
        "skipped creates un-counted"
    );
    let put = &h.requests("PUT")[0];
    let cond = &put.body["status"]["conditions"][0];
    assert_eq!(cond["type"], "ReplicaFailure");
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "FailedCreate");
    assert_eq!(cond["message"], msg);
    let events = h.events.take();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, "FailedCreate");
    assert_eq!(events[0].message, format!("Error creating: {msg}"));
}

#[tokio::test]
async fn namespace_terminating_counts_as_created() {
    let h = Harness::<ReplicaSet>::new(echoing(FakeApi::new().on(
        "POST",
        "**",
        Reply::namespace_terminating("ns"),
    )));
    h.owner(rs(2));
    h.ctrl.sync("ns/web".into()).await.expect("no error");
    assert_eq!(h.requests("POST").len(), 2);
    assert_eq!(
        h.ctrl.expectations.get("ns/web"),
        Some((2, 0)),
        "never observed: wait for the TTL"
    );
    assert!(
        h.requests("PUT")[0].body["status"]
            .get("conditions")
            .is_none()
    );
    assert!(h.events.take().is_empty());
}

#[tokio::test]
async fn scale_down_deletes_ranked_victims_gracefully() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    h.owner(rs(1));
    let ready = P {
        ready: true,
        node: "n",
        ..owned("ready")
    };
    let pending = P {
        phase: "Pending",
        node: "n",
        ..owned("pending")
    };
    let unscheduled = P {
        phase: "Pending",
        ..owned("unscheduled")
    };
    for p in [&ready, &pending, &unscheduled] {
        h.pod(p);
    }
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let mut deletes: Vec<(String, Value)> = h
        .requests("DELETE")
        .into_iter()
        .map(|r| (r.path, r.body))
        .collect();
    deletes.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(deletes.len(), 2);
    assert_eq!(deletes[0].0, "/api/v1/namespaces/ns/pods/pending");
    assert_eq!(deletes[1].0, "/api/v1/namespaces/ns/pods/unscheduled");
    for (_, body) in &deletes {
        assert!(body.get("gracePeriodSeconds").is_none(), "graceful only");
        assert!(body["preconditions"]["uid"].is_string(), "UID precondition");
    }
    assert_eq!(h.ctrl.expectations.get("ns/web"), Some((0, 2)));
    // Observed first as terminating, then as deleted: counted once.
    let terminating = P {
        deleting: true,
        ..pending.clone()
    }
    .build();
    h.ctrl.on_pod_change(Change::Updated {
        old: pending.build(),
        new: terminating.clone(),
    });
    h.ctrl.on_pod_change(Change::Deleted {
        obj: terminating,
        final_state_unknown: false,
    });
    assert_eq!(h.ctrl.expectations.get("ns/web"), Some((0, 1)));
    h.ctrl.on_pod_change(Change::Deleted {
        obj: unscheduled.build(),
        final_state_unknown: true,
    });
    assert!(h.ctrl.expectations.satisfied_expectations("ns/web"));
    assert_eq!(
        h.events
            .take()
            .iter()
            .filter(|e| e.reason == "SuccessfulDelete")
            .count(),
        2
    );
}

#[tokio::test]
async fn delete_not_found_is_success_and_lowers_expectations() {
    let h = Harness::<ReplicaSet>::new(echoing(FakeApi::new().on(
        "DELETE",
        "**",
        Reply::not_found("pods", "a"),
    )));
    h.owner(rs(0));
    h.pod(&owned("a"));
    h.ctrl
        .sync("ns/web".into())
        .await
        .expect("404 is not an error");
    assert!(h.ctrl.expectations.satisfied_expectations("ns/web"));
    assert!(h.events.take().is_empty(), "no FailedDelete for 404");
}

#[tokio::test]
async fn delete_failure_sets_failed_delete_condition() {
    let h = Harness::<ReplicaSet>::new(echoing(FakeApi::new().on(
        "DELETE",
        "**",
        Reply::internal("etcd is sad"),
    )));
    h.owner(rs(0));
    h.pod(&owned("a"));
    let err = h
        .ctrl
        .sync("ns/web".into())
        .await
        .expect_err("delete fails");
    assert!(matches!(
        err,
        Error::Pods(rkcm_runtime::error::PodsError {
            step: PodStep::Delete,
            ..
        })
    ));
    assert!(h.ctrl.expectations.satisfied_expectations("ns/web"));
    let cond = &h.requests("PUT")[0].body["status"]["conditions"][0];
    assert_eq!(cond["reason"], "FailedDelete");
    assert_eq!(cond["message"], "etcd is sad");
}

#[tokio::test]
async fn terminal_and_terminating_pods_are_replaced_not_counted() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    h.owner(rs(2));
    h.pod(&P {
        phase: "Failed",
        ..owned("failed")
    });
    h.pod(&P {
        deleting: true,
        ..owned("terminating")
    });
    h.pod(&owned("ok"));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(h.requests("POST").len(), 1);
    assert!(
        h.requests("DELETE").is_empty(),
        "terminal pods are never deleted"
    );
    let st = &h.requests("PUT")[0].body["status"];
    assert_eq!(st["replicas"], 1);
    assert_eq!(st["terminatingReplicas"], 1);
}

#[tokio::test]
async fn unchanged_status_is_not_written() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    let mut owner = rs(1);
    owner.status = Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
        replicas: 1,
        fully_labeled_replicas: Some(1),
        terminating_replicas: Some(0),
        observed_generation: Some(1),
        ..Default::default()
    });
    h.owner(owner);
    h.pod(&owned("a"));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let log = h.api.requests();
    assert!(log.is_empty(), "{log:?}");
}

#[tokio::test]
async fn status_conflict_rereads_and_retries_once() {
    let mut fresh = serde_json::to_value(rs(1)).expect("json");
    fresh["metadata"]["resourceVersion"] = json!("7");
    let h = Harness::<ReplicaSet>::new(echoing(
        FakeApi::new()
            .once("PUT", "**", Reply::conflict("replicasets.apps", "web"))
            .on("GET", "**", Reply::ok(fresh)),
    ));
    h.owner(rs(1));
    h.pod(&owned("a"));
    h.ctrl.sync("ns/web".into()).await.expect("retry succeeds");
    let puts = h.requests("PUT");
    assert_eq!(puts.len(), 2);
    assert_eq!(puts[1].body["metadata"]["resourceVersion"], "7");
    assert_eq!(puts[1].body["status"]["replicas"], 1);
}

#[tokio::test]
async fn owner_being_deleted_changes_no_pods() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    let mut owner = rs(3);
    owner.metadata.deletion_timestamp = Some(Time(now()));
    h.owner(owner);
    h.pod(&owned("a"));
    h.pod(&P {
        name: "orphan",
        uid: "orphan",
        labels: &[("app", "web")],
        phase: "Running",
        ..P::default()
    });
    h.pod(&P {
        labels: &[("app", "other")],
        ..owned("relabelled")
    });
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert!(h.requests("POST").is_empty());
    assert!(
        h.requests("PATCH").is_empty(),
        "no adoption or release while deleting"
    );
    assert_eq!(h.requests("PUT")[0].body["status"]["replicas"], 1);
}

#[tokio::test]
async fn adopts_orphans_after_fresh_owner_read_and_releases_mismatches() {
    let h = Harness::<ReplicaSet>::new(accepting(serde_json::to_value(rs(2)).expect("json")));
    h.owner(rs(2));
    h.pod(&P {
        name: "orphan",
        uid: "orphan-uid",
        labels: &[("app", "web")],
        phase: "Running",
        ..P::default()
    });
    h.pod(&P {
        labels: &[("app", "other")],
        ..owned("relabelled")
    });
    h.pod(&P {
        name: "foreign",
        uid: "f",
        labels: &[("app", "web")],
        phase: "Running",
        owner_uid: Some("other-uid"),
        ..P::default()
    });
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let gets = h.requests("GET");
    assert_eq!(gets.len(), 1, "one fresh read of the owner before adopting");
    assert_eq!(gets[0].path, "/apis/apps/v1/namespaces/ns/replicasets/web");
    let patches = h.requests("PATCH");
    assert_eq!(patches.len(), 2);
    let adopt = patches
        .iter()
        .find(|p| p.path.ends_with("/orphan"))
        .expect("adopted");
    assert_eq!(adopt.body["metadata"]["uid"], "orphan-uid");
    assert_eq!(adopt.body["metadata"]["ownerReferences"][0]["uid"], UID);
    assert_eq!(
        adopt.body["metadata"]["ownerReferences"][0]["controller"],
        true
    );
    let release = patches
        .iter()
        .find(|p| p.path.ends_with("/relabelled"))
        .expect("released");
    assert_eq!(
        release.body["metadata"]["ownerReferences"][0]["$patch"],
        "delete"
    );
    assert!(!patches.iter().any(|p| p.path.ends_with("/foreign")));
    // Adopted orphan counts; released pod does not: 1 of 2 exists, 1 create.
    assert_eq!(h.requests("POST").len(), 1);
}

#[tokio::test]
async fn invalid_selector_is_skipped_without_error() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    let mut owner = rs(1);
    owner.spec.selector.match_expressions = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
            key: "a".into(),
            operator: "Bogus".into(),
            values: None,
        },
    ]);
    h.owner(owner);
    h.ctrl
        .sync("ns/web".into())
        .await
        .expect("no retry for a bad selector");
    assert!(h.api.requests().is_empty());
}

#[tokio::test]
async fn missing_owner_drops_expectations() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    h.ctrl.expectations.expect_creations("ns/web", 2);
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(h.ctrl.expectations.get("ns/web"), None);
}

#[tokio::test]
async fn handlers_route_pod_events_to_owners() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    h.owner(rs(1));
    let mut other = rs(1);
    other.metadata.name = Some("db".into());
    other.metadata.uid = Some("db-uid".into());
    other.spec.selector.match_labels = Some(labels(&[("app", "db")]));
    h.owner(other);
    let drain = |h: &Harness<ReplicaSet>| {
        let mut keys = Vec::new();
        while !h.ctrl.queue.is_empty() {
            let key = futures::executor::block_on(h.ctrl.queue.get()).expect("queued");
            h.ctrl.queue.done(&key);
            keys.push(key);
        }
        keys.sort();
        keys
    };

    // Owned pod added: creation observed, owner queued.
    h.ctrl.expectations.expect_creations("ns/web", 1);
    h.ctrl.on_pod_change(Change::Added(owned("a").build()));
    assert!(h.ctrl.expectations.satisfied_expectations("ns/web"));
    assert_eq!(drain(&h), ["ns/web"]);

    // Controller ref of another kind or UID: nobody is queued.
    let wrong_uid = P {
        owner_uid: Some("nope"),
        ..owned("b")
    };
    h.ctrl.on_pod_change(Change::Added(wrong_uid.build()));
    assert!(drain(&h).is_empty());

    // Orphan: every owner whose selector matches.
    let orphan = P {
        name: "o",
        labels: &[("app", "db")],
        ..P::default()
    };
    h.ctrl.on_pod_change(Change::Added(orphan.build()));
    assert_eq!(drain(&h), ["ns/db"]);

    // Resync (same resourceVersion): ignored.
    let pod = owned("a").build();
    h.ctrl.on_pod_change(Change::Updated {
        old: pod.clone(),
        new: pod,
    });
    assert!(drain(&h).is_empty());

    // Owner deleted: expectations dropped, key queued.
    h.ctrl.expectations.expect_creations("ns/web", 1);
    h.ctrl.on_owner_change(Change::Deleted {
        obj: Arc::new(rs(1)),
        final_state_unknown: true,
    });
    assert_eq!(h.ctrl.expectations.get("ns/web"), None);
    assert_eq!(drain(&h), ["ns/web"]);
}

fn rc(replicas: i32) -> ReplicationController {
    ReplicationController {
        metadata: ObjectMeta {
            name: Some("rc1".into()),
            namespace: Some("ns".into()),
            uid: Some("rc-uid".into()),
            generation: Some(2),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicationControllerSpec {
            replicas: Some(replicas),
            selector: Some(labels(&[("app", "web")])),
            template: Some(template()),
            ..ReplicationControllerSpec::default()
        }),
        status: None,
    }
}

#[tokio::test]
async fn replication_controller_uses_its_own_kind() {
    let h = Harness::<ReplicationController>::new(accepting(json!({})));
    h.owner(rc(2));
    // An RS-owned pod with the same UID is not the RC's: the kind must match too.
    let rs_pod = P {
        owner_uid: Some("rc-uid"),
        ..owned("rs-pod")
    }
    .build();
    h.ctrl.on_pod_change(Change::Added(rs_pod));
    assert!(h.ctrl.queue.is_empty());
    h.ctrl.sync("ns/rc1".into()).await.expect("sync");
    let posts = h.requests("POST");
    assert_eq!(posts.len(), 2);
    let r: OwnerReference =
        serde_json::from_value(posts[0].body["metadata"]["ownerReferences"][0].clone())
            .expect("ref");
    assert_eq!(
        (r.api_version.as_str(), r.kind.as_str(), r.name.as_str()),
        ("v1", "ReplicationController", "rc1")
    );
    assert_eq!(
        (r.controller, r.block_owner_deletion),
        (Some(true), Some(true))
    );
    let put = &h.requests("PUT")[0];
    assert_eq!(
        put.path,
        "/api/v1/namespaces/ns/replicationcontrollers/rc1/status"
    );
    assert!(put.body["status"].get("terminatingReplicas").is_none());
    assert_eq!(put.body["status"]["observedGeneration"], 2);
    let events = h.events.take();
    assert!(
        events
            .iter()
            .all(|e| e.object.kind.as_deref() == Some("ReplicationController"))
    );
}

#[tokio::test]
async fn one_sync_creates_at_most_the_burst() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    h.owner(rs(600));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(h.requests("POST").len(), 500, "burst cap per sync");
    assert_eq!(h.ctrl.expectations.get("ns/web"), Some((500, 0)));
}

#[tokio::test]
async fn related_pods_come_from_owners_sharing_a_controller() {
    let h = Harness::<ReplicaSet>::new(accepting(json!({})));
    let controller = OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "d".into(),
        uid: "deploy-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let mut a = rs(1);
    a.metadata.owner_references = Some(vec![controller.clone()]);
    let mut b = rs(1);
    b.metadata.name = Some("other".into());
    b.metadata.uid = Some("other-uid".into());
    b.metadata.owner_references = Some(vec![controller]);
    b.spec.selector.match_labels = Some(labels(&[("app", "other")]));
    h.owner(a.clone());
    h.owner(b);
    h.pod(&owned("mine"));
    h.pod(&P {
        name: "sibling",
        uid: "sibling",
        labels: &[("app", "other")],
        ..P::default()
    });
    h.pod(&P {
        name: "stranger",
        uid: "stranger",
        labels: &[("app", "x")],
        ..P::default()
    });
    let mut related: Vec<String> = h
        .ctrl
        .related_pods(&a)
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    related.sort();
    assert_eq!(related, ["mine", "sibling"]);
    // Without a controller owner there are no related pods (all node ranks 0).
    assert!(h.ctrl.related_pods(&rs(1)).is_empty());
}

/// An API server that gives every write the next resourceVersion, from 100 up: creates get a
/// generated name and UID, status writes and patches echo the body with the new version,
/// GETs return `owner`.
fn versioned(owner: Value) -> FakeApi {
    let rv = Arc::new(AtomicUsize::new(100));
    let api = FakeApi::new();
    api.on("GET", "**", Reply::ok(owner))
        .on_fn("*", "**", move |req| {
            let next = rv.fetch_add(1, Ordering::SeqCst).to_string();
            let mut body = req.body.clone();
            body["metadata"]["resourceVersion"] = json!(next);
            if req.method == "POST" {
                body["metadata"]["name"] = json!(format!("web-{next}"));
                body["metadata"]["uid"] = json!(format!("new-{next}"));
                return Reply::created(body);
            }
            Reply::ok(body)
        });
    api
}

fn with_rv(p: &P, rv: &str) -> Pod {
    let mut pod = (*p.build()).clone();
    pod.metadata.resource_version = Some(rv.into());
    pod
}

fn rs_at(replicas: i32, rv: &str) -> ReplicaSet {
    let mut o = rs(replicas);
    o.metadata.resource_version = Some(rv.into());
    o
}

fn stale_skips(resource: &str) -> u64 {
    rkcm_runtime::workload::consistency::stale_sync_skips(
        crate::consts::metrics::SUBSYSTEM,
        crate::consts::metrics::STALE_SYNC_SKIPS_HELP,
    )
    .map(|c| {
        c.with_label_values(&[if resource == "pods" { "" } else { "apps" }, resource])
            .get()
    })
    .unwrap_or(0)
}

#[test]
fn freshest_owner_prefers_a_newer_own_write_of_the_same_object() {
    let cached = Arc::new(rs_at(1, "10"));
    let newer = Arc::new(rs_at(1, "12"));
    let (o, keep) = freshest(cached.clone(), Some(&newer));
    assert!(Arc::ptr_eq(&o, &newer) && keep, "cache behind the write");
    for written in [rs_at(1, "10"), rs_at(1, "9"), rs_at(1, "opaque")] {
        let written = Arc::new(written);
        let (o, keep) = freshest(cached.clone(), Some(&written));
        assert!(
            Arc::ptr_eq(&o, &cached) && !keep,
            "{:?}",
            written.metadata.resource_version
        );
    }
    let mut recreated = rs_at(1, "50");
    recreated.metadata.uid = Some("other".into());
    let (o, keep) = freshest(cached.clone(), Some(&Arc::new(recreated)));
    assert!(
        Arc::ptr_eq(&o, &cached) && !keep,
        "another object of that name"
    );
    let (o, keep) = freshest(cached.clone(), None);
    assert!(Arc::ptr_eq(&o, &cached) && !keep);
}

/// The 409s of a 0→1000→0 scale: the sync after the controller's own status write saw the
/// cached (older) ReplicaSet, wrote the same status again, with the old resourceVersion.
#[tokio::test]
async fn status_write_builds_on_the_controllers_own_last_write() {
    let cfg = Config {
        stale_cache_guard: false,
        ..Config::default()
    };
    let h = Harness::<ReplicaSet>::with_config(versioned(json!({})), cfg);
    h.owner(rs_at(1, "1"));
    h.pods
        .feed(watcher::Event::Apply(with_rv(&owned("a"), "2")));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let puts = h.requests("PUT");
    assert_eq!(puts.len(), 1);
    assert_eq!(puts[0].body["metadata"]["resourceVersion"], "1");
    assert_eq!(puts[0].body["status"]["replicas"], 1);

    // The cache still holds version 1 without status: nothing new to write.
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(
        h.requests("PUT").len(),
        1,
        "the same status is not written again"
    );

    // A real change is written on top of the controller's own version 100.
    let ready = P {
        ready: true,
        ready_since: Some(now()),
        ..owned("a")
    };
    h.pods.feed(watcher::Event::Apply(with_rv(&ready, "3")));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let puts = h.requests("PUT");
    assert_eq!(puts.len(), 2);
    assert_eq!(puts[1].body["metadata"]["resourceVersion"], "100");
    assert_eq!(puts[1].body["status"]["readyReplicas"], 1);

    // Once the cache is newer, it is the base again and the remembered write is dropped.
    let mut caught_up = rs_at(1, "150");
    caught_up.status = Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
        replicas: 1,
        ..Default::default()
    });
    h.owner(caught_up);
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let puts = h.requests("PUT");
    assert_eq!(puts.len(), 3, "cached status lacks readyReplicas");
    assert_eq!(puts[2].body["metadata"]["resourceVersion"], "150");
    h.owner(rs_at(1, "200"));
    h.ctrl.on_owner_change(Change::Deleted {
        obj: Arc::new(rs_at(1, "200")),
        final_state_unknown: false,
    });
    assert!(h.ctrl.written_map().is_empty(), "forgotten with the owner");
}

/// The object a status write returned is remembered only until the cache has caught up, and
/// without its managedFields (a mass rollout touches every ReplicaSet at once).
#[tokio::test]
async fn a_remembered_status_write_is_lean_and_dropped_once_the_cache_has_it() {
    let cfg = Config {
        stale_cache_guard: false,
        ..Config::default()
    };
    let api = FakeApi::new();
    api.on_fn("PUT", "**", |req| {
        let mut body = req.body.clone();
        body["metadata"]["resourceVersion"] = json!("100");
        body["metadata"]["managedFields"] = json!([{"manager": "rkcm", "operation": "Update",
            "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:replicas": {}}}}]);
        Reply::ok(body)
    });
    let h = Harness::<ReplicaSet>::with_config(api, cfg);
    h.owner(rs_at(1, "1"));
    h.pods
        .feed(watcher::Event::Apply(with_rv(&owned("a"), "2")));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(h.requests("PUT").len(), 1);
    let remembered = h.ctrl.written_map().get("ns/web").cloned();
    let remembered = remembered.expect("the write is remembered while the cache is behind");
    assert_eq!(remembered.metadata.resource_version.as_deref(), Some("100"));
    assert_eq!(remembered.metadata.managed_fields, None);

    // An update the cache delivers at an older version keeps it ...
    let older = Arc::new(rs_at(1, "50"));
    h.ctrl.on_owner_change(Change::Updated {
        old: Arc::new(rs_at(1, "1")),
        new: older.clone(),
    });
    assert!(h.ctrl.written_map().contains_key("ns/web"));
    // ... the written version itself (or a newer one) drops it, before any sync.
    h.ctrl.on_owner_change(Change::Updated {
        old: older,
        new: Arc::new(rs_at(1, "100")),
    });
    assert!(
        h.ctrl.written_map().is_empty(),
        "dropped once the cache has caught up"
    );
}

#[tokio::test]
async fn stale_cache_guard_waits_for_own_creates_and_status() {
    let h = Harness::<ReplicaSet>::new(versioned(json!({})));
    h.owner(rs_at(2, "1"));
    // Some unrelated pod gives the pod cache a version.
    h.pods.feed(watcher::Event::Apply(with_rv(
        &P {
            name: "unrelated",
            uid: "unrelated",
            labels: &[("app", "db")],
            ..P::default()
        },
        "50",
    )));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let posts = h.requests("POST");
    assert_eq!(posts.len(), 2, "slow start: two batches of one");
    assert_eq!(h.requests("PUT").len(), 1, "status written at version 102");
    let before = h.api.count();

    let skips = stale_skips("pods");
    let err = h
        .ctrl
        .sync("ns/web".into())
        .await
        .expect_err("pod cache is behind");
    assert!(matches!(err, crate::Error::StaleCache { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "syncing ns/web: read version: 50 is not as new as written version: 101 for group resource pods"
    );
    assert!(stale_skips("pods") > skips, "counted");
    assert_eq!(h.api.count(), before, "a skipped sync sends nothing");

    // The pods arrive; the ReplicaSet cache still lacks the status write.
    for (name, rv) in [("web-100", "100"), ("web-101", "101")] {
        let mut pod = (*owned("x").build()).clone();
        pod.metadata.name = Some(name.into());
        pod.metadata.uid = Some(name.into());
        pod.metadata.resource_version = Some(rv.into());
        h.pods.feed(watcher::Event::Apply(pod));
    }
    let err = h
        .ctrl
        .sync("ns/web".into())
        .await
        .expect_err("owner cache is behind");
    assert!(
        err.to_string()
            .ends_with("written version: 102 for group resource replicasets.apps"),
        "{err}"
    );

    let mut written = rs_at(2, "102");
    written.status = Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
        observed_generation: Some(1),
        terminating_replicas: Some(0),
        ..Default::default()
    });
    h.owner(written);
    h.ctrl.expectations.delete_expectations("ns/web");
    h.ctrl.sync("ns/web".into()).await.expect("caught up");
    assert_eq!(h.requests("POST").len(), 2, "both pods are seen: no create");
    assert_eq!(
        h.requests("PUT").len(),
        2,
        "replicas=2 written at version 103"
    );
    // The old record is gone; only the new status write holds the next sync back.
    let err = h
        .ctrl
        .sync("ns/web".into())
        .await
        .expect_err("own write unseen");
    assert!(
        err.to_string().contains("written version: 103 for"),
        "{err}"
    );
}

#[tokio::test]
async fn stale_cache_guard_off_proceeds_and_rcs_have_none() {
    let cfg = Config {
        stale_cache_guard: false,
        ..Config::default()
    };
    let h = Harness::<ReplicaSet>::with_config(versioned(json!({})), cfg);
    assert!(!h.ctrl.consistency.is_enabled());
    h.owner(rs_at(2, "1"));
    h.pods.feed(watcher::Event::Apply(with_rv(
        &P {
            name: "u",
            uid: "u",
            ..P::default()
        },
        "50",
    )));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    h.ctrl
        .sync("ns/web".into())
        .await
        .expect("no guard: proceeds on the stale cache");
    assert_eq!(
        h.requests("POST").len(),
        2,
        "expectations still hold back a second create"
    );

    let rc = Harness::<ReplicationController>::new(accepting(json!({})));
    assert!(
        !rc.ctrl.consistency.is_enabled(),
        "the gate names ReplicaSets only"
    );
}

#[tokio::test]
async fn stale_cache_guard_waits_for_adoptions() {
    let h = Harness::<ReplicaSet>::new(versioned(
        serde_json::to_value(rs_at(1, "1")).expect("json"),
    ));
    h.owner(rs_at(1, "1"));
    let orphan = P {
        name: "orphan",
        uid: "orphan-uid",
        labels: &[("app", "web")],
        phase: "Running",
        ..P::default()
    };
    h.pods.feed(watcher::Event::Apply(with_rv(&orphan, "60")));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(h.requests("PATCH").len(), 1, "adopted at version 100");
    assert!(h.requests("POST").is_empty(), "the adopted pod counts");
    let err = h
        .ctrl
        .sync("ns/web".into())
        .await
        .expect_err("cache still shows the orphan");
    assert!(
        err.to_string()
            .contains("written version: 100 for group resource pods"),
        "{err}"
    );
    assert_eq!(
        h.requests("PATCH").len(),
        1,
        "no second adoption on the stale cache"
    );
}

/// A harness whose controller paces status writes as in production, on a fake that answers
/// every write with a new resourceVersion.
fn paced() -> Harness<ReplicaSet> {
    Harness::build(
        versioned(json!({})),
        Config {
            stale_cache_guard: false,
            ..Config::default()
        },
        StatusPacer::default(),
    )
}

/// A status write right after the previous one waits for the end of the pacing interval,
/// and the sync then writes what the caches say by that time.
#[tokio::test(start_paused = true)]
async fn a_status_write_right_after_another_waits_for_the_interval() {
    let h = paced();
    h.owner(rs_at(2, "1"));
    h.pods
        .feed(watcher::Event::Apply(with_rv(&owned("a"), "2")));
    h.pods
        .feed(watcher::Event::Apply(with_rv(&owned("b"), "3")));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(
        h.requests("PUT").len(),
        1,
        "the first status is written at once"
    );

    // Both pods turn ready one after the other: the first sync after the write holds it.
    for (name, rv) in [("a", "4"), ("b", "5")] {
        let ready = P {
            ready: true,
            ready_since: Some(now()),
            ..owned(name)
        };
        h.pods.feed(watcher::Event::Apply(with_rv(&ready, rv)));
        h.ctrl.sync("ns/web".into()).await.expect("sync");
    }
    assert_eq!(h.requests("PUT").len(), 1, "held within the interval");
    assert_eq!(
        h.requests("POST").len(),
        0,
        "nothing else is held back: no pod is missing"
    );

    // The key comes back at the end of the interval, and one write counts both pods.
    let key = tokio::time::timeout(STATUS_WRITE_INTERVAL * 2, h.ctrl.queue.get())
        .await
        .expect("re-queued within the interval")
        .expect("queued");
    assert_eq!(key, "ns/web");
    h.ctrl.queue.done(&key);
    h.ctrl.sync(key).await.expect("sync");
    let puts = h.requests("PUT");
    assert_eq!(puts.len(), 2);
    assert_eq!(puts[1].body["status"]["readyReplicas"], 2);
}

/// A write that changes nothing but the count of terminating pods waits for the longer
/// interval; the write that follows counts the pod gone.
#[tokio::test(start_paused = true)]
async fn a_write_of_terminating_pods_alone_waits_the_longer_interval() {
    let h = paced();
    h.owner(rs_at(2, "1"));
    let leaving = P {
        deleting: true,
        ..owned("leaving")
    };
    h.pods
        .feed(watcher::Event::Apply(with_rv(&owned("a"), "2")));
    h.pods
        .feed(watcher::Event::Apply(with_rv(&owned("b"), "3")));
    h.pods.feed(watcher::Event::Apply(with_rv(&leaving, "4")));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let puts = h.requests("PUT");
    assert_eq!(puts.len(), 1, "the first status is written at once");
    assert_eq!(puts[0].body["status"]["terminatingReplicas"], 1);

    // The terminating pod goes away: only its count moves.
    h.pods.feed(watcher::Event::Delete(with_rv(&leaving, "5")));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(h.requests("PUT").len(), 1, "held");
    assert!(
        tokio::time::timeout(STATUS_WRITE_INTERVAL * 2, h.ctrl.queue.get())
            .await
            .is_err(),
        "not back after the routine interval"
    );
    let key = tokio::time::timeout(TERMINATING_WRITE_INTERVAL, h.ctrl.queue.get())
        .await
        .expect("re-queued within the longer interval")
        .expect("queued");
    h.ctrl.queue.done(&key);
    h.ctrl.sync(key).await.expect("sync");
    let puts = h.requests("PUT");
    assert_eq!(puts.len(), 2);
    assert_eq!(puts[1].body["status"]["terminatingReplicas"], 0);
    assert_eq!(puts[1].body["status"]["replicas"], 2);
}
