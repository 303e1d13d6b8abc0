//! Syncs and handlers against detached informers and the testkit's scripted fake API
//! server. Mirrors upstream `TestSyncDeploymentCreatesReplicaSet`,
//! `TestSyncDeploymentDontDoAnythingDuringDeletion`, `TestGetReplicaSetsForDeployment`,
//! the hash-collision and rollback cases of `sync_test.go` / `deployment_controller_test.go`,
//! and `TestRequeueStuckDeployment`'s requeue.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DeploymentStatus, DeploymentStrategy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::runtime::watcher;
use rkcm_runtime::cache::{Change, Informer};
use rkcm_runtime::clock::FakeClock;
use rkcm_runtime::events::EventType;
use rkcm_runtime::events::FakeEvents;
use rkcm_runtime::queue::RateLimiter;
use rkcm_runtime::workload::history::compute_hash;
use rkcm_testkit::fake_api::{FIRST_ECHO_RESOURCE_VERSION, FakeApi, Reply, Request};
use serde_json::{Value, json};

use super::*;
use crate::model::tests::{R, ago, dep25, new_rs_created, now, template};
use crate::status;

/// An API server that accepts every write and echoes it (creates get a UID, writes a new
/// resourceVersion).
fn accepting() -> FakeApi {
    let api = FakeApi::new();
    api.echo_writes();
    api
}

struct Harness {
    ctrl: Arc<Controller>,
    deployments: Informer<Deployment>,
    replica_sets: Informer<ReplicaSet>,
    api: FakeApi,
    events: FakeEvents,
}

impl Harness {
    async fn new(api: FakeApi) -> Self {
        let client = api.client();
        let deployments = Informer::<Deployment>::detached();
        let replica_sets = Informer::<ReplicaSet>::detached();
        let pods = Informer::<Pod>::detached();
        let (recorder, events) = EventRecorder::fake(crate::consts::EVENT_COMPONENT);
        let ctrl = Arc::new(Controller {
            client,
            deployments: deployments.store(),
            replica_sets: replica_sets.store(),
            pods: pods.store(),
            recorder,
            queue: WorkQueue::new("", RateLimiter::Default),
            pending_pod_checks: Mutex::default(),
            pacer: rkcm_runtime::queue::pacing::StatusPacer::default(),
            clock: Arc::new(FakeClock::new(now())),
            guard: rkcm_runtime::workload::consistency::StaleGuard::new(
                crate::config::NAME,
                crate::consts::metrics::SUBSYSTEM,
                crate::consts::metrics::STALE_SYNC_SKIPS_HELP,
            )
            // The harness's caches do not see the fake API's writes; the guard is exercised
            // by the simulator's regression seeds (sim/tests/sim.rs).
            .enabled(false),
            cfg: Config::default(),
        });
        Self {
            ctrl,
            deployments,
            replica_sets,
            api,
            events,
        }
    }

    fn deployment(&self, d: Deployment) {
        self.deployments.feed(watcher::Event::Apply(d));
    }

    fn rs(&self, rs: ReplicaSet) {
        self.replica_sets.feed(watcher::Event::Apply(rs));
    }

    fn requests(&self, method: &str, path_suffix: &str) -> Vec<Request> {
        self.api
            .requests()
            .into_iter()
            .filter(|r| r.method == method && r.path.ends_with(path_suffix))
            .collect()
    }

    fn writes(&self) -> Vec<(String, String)> {
        self.api.writes()
    }

    fn events(&self) -> Vec<(EventType, String, String)> {
        self.events
            .all()
            .into_iter()
            .map(|e| (e.type_, e.reason, e.message))
            .collect()
    }
}

/// The web Deployment as the API server would store it.
fn stored(replicas: i32) -> Deployment {
    let mut d = dep25(replicas);
    d.metadata.resource_version = Some("7".into());
    d
}

/// An RS owned by `stored()`, labelled as its pods.
fn owned(r: R) -> ReplicaSet {
    let mut rs = model::tests::owned(r);
    rs.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "web".to_owned())]));
    rs
}

fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v["metadata"]["annotations"][key].as_str()
}

fn condition<'a>(v: &'a Value, type_: &str) -> Option<&'a Value> {
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

#[tokio::test]
async fn creates_the_new_replica_set() {
    // spec §9 scenario 1.
    let h = Harness::new(accepting()).await;
    h.deployment(stored(3));
    h.ctrl.sync("ns/web".into()).await.expect("sync");

    let hash = compute_hash(&template("v2"), None);
    let posts = h.requests("POST", "/namespaces/ns/replicasets");
    assert_eq!(posts.len(), 1);
    let rs = &posts[0].body;
    assert_eq!(rs["metadata"]["name"], json!(format!("web-{hash}")));
    assert_eq!(rs["spec"]["replicas"], json!(3));
    assert_eq!(rs["metadata"]["labels"]["pod-template-hash"], json!(hash));
    assert_eq!(
        rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
        json!(hash)
    );
    assert_eq!(rs["metadata"]["ownerReferences"][0]["uid"], json!("d-uid"));
    assert_eq!(
        annotation(rs, "deployment.kubernetes.io/revision"),
        Some("1")
    );
    assert_eq!(
        annotation(rs, "deployment.kubernetes.io/desired-replicas"),
        Some("3")
    );
    assert_eq!(
        annotation(rs, "deployment.kubernetes.io/max-replicas"),
        Some("4")
    );
    assert!(hash.chars().all(|c| "456789bcdf".contains(c)), "{hash}");

    assert_eq!(
        h.events(),
        [(
            EventType::Normal,
            "ScalingReplicaSet".to_owned(),
            format!("Scaled up replica set web-{hash} from 0 to 3")
        )]
    );
    let statuses = h.requests("PUT", "/namespaces/ns/deployments/web/status");
    assert!(!statuses.is_empty());
    // The first status write carries the revision and the creation condition, with the
    // cached resourceVersion; later ones the resourceVersion it returned.
    let first = &statuses[0].body;
    assert_eq!(
        annotation(first, "deployment.kubernetes.io/revision"),
        Some("1")
    );
    assert_eq!(first["metadata"]["resourceVersion"], json!("7"));
    let p = condition(first, "Progressing").expect("Progressing");
    assert_eq!(
        (&p["status"], &p["reason"], &p["message"]),
        (
            &json!("True"),
            &json!("NewReplicaSetCreated"),
            &json!(format!("Created new replica set \"web-{hash}\""))
        )
    );
    let last = &statuses[statuses.len() - 1].body;
    assert_eq!(
        annotation(last, "deployment.kubernetes.io/revision"),
        Some("1")
    );
    let a = condition(last, "Available").expect("Available");
    assert_eq!(a["reason"], json!("MinimumReplicasUnavailable"));
    assert_eq!(last["status"]["unavailableReplicas"], json!(3));
    assert_eq!(last["status"]["observedGeneration"], json!(1));
    if statuses.len() > 1 {
        // The echoing fake hands out one resourceVersion per write (deletes excepted), in
        // order: the last status write carries what the one before it got back.
        let echoed: Vec<Request> = h
            .api
            .requests()
            .into_iter()
            .filter(|r| r.method != "GET" && r.method != "DELETE")
            .collect();
        let is_status = |r: &Request| r.path.ends_with("/deployments/web/status");
        let last_index = echoed.iter().rposition(is_status).expect("a status write");
        let previous = echoed[..last_index]
            .iter()
            .rposition(is_status)
            .expect("an earlier status write");
        let returned = FIRST_ECHO_RESOURCE_VERSION + u64::try_from(previous).expect("small");
        assert_eq!(
            last["metadata"]["resourceVersion"],
            json!(returned.to_string())
        );
    }
}

#[tokio::test]
async fn hash_collision_bumps_collision_count() {
    let hash = compute_hash(&template("v2"), None);
    let api = accepting();
    api.on(
        "POST",
        "**/replicasets",
        Reply::already_exists("replicasets.apps", "web-x"),
    );
    let h = Harness::new(api).await;
    h.deployment(stored(3));
    // Someone else's RS holds the name.
    let mut squatter = R {
        name: "x",
        replicas: 1,
        image: "other",
        ..R::default()
    }
    .rs();
    squatter.metadata.name = Some(format!("web-{hash}"));
    squatter.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "other".into(),
        uid: "other-uid".into(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    h.rs(squatter);
    let err = h.ctrl.sync("ns/web".into()).await.expect_err("collision");
    assert!(matches!(err, Error::HashCollision { .. }), "{err}");
    let statuses = h.requests("PUT", "/deployments/web/status");
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].body["status"]["collisionCount"], json!(1));
    // The next sync hashes with the new count.
    assert_ne!(compute_hash(&template("v2"), Some(1)), hash);
}

#[tokio::test]
async fn already_existing_own_replica_set_is_used() {
    let hash = compute_hash(&template("v2"), None);
    let api = accepting();
    api.on(
        "POST",
        "**/replicasets",
        Reply::already_exists("replicasets.apps", &format!("web-{hash}")),
    );
    let h = Harness::new(api).await;
    h.deployment(stored(3));
    // Ours, same template, but not matching the selector any more (so not claimed).
    let mut mine = owned(R {
        name: "x",
        replicas: 3,
        image: "v2",
        ..R::default()
    });
    mine.metadata.name = Some(format!("web-{hash}"));
    mine.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "elsewhere".to_owned())]));
    h.rs(mine);
    // Release patch is answered by echo; the sync then finds the name taken by itself.
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert!(h.events().is_empty(), "no creation event: {:?}", h.events());
    let statuses = h.requests("PUT", "/deployments/web/status");
    assert!(
        statuses
            .iter()
            .all(|s| s.body["status"]["collisionCount"].is_null())
    );
    assert!(statuses.iter().all(|s| {
        condition(&s.body, "Progressing").is_none_or(|c| c["reason"] != "NewReplicaSetCreated")
    }));
}

#[tokio::test]
async fn create_failure_is_reported() {
    let api = accepting();
    api.on(
        "POST",
        "**/replicasets",
        Reply::forbidden("replicasets.apps is forbidden: nope"),
    );
    let h = Harness::new(api).await;
    h.deployment(stored(3));
    let err = h
        .ctrl
        .sync("ns/web".into())
        .await
        .expect_err("create fails");
    assert!(matches!(err, Error::CreateReplicaSet { .. }), "{err}");
    let hash = compute_hash(&template("v2"), None);
    let message = format!(
        "Failed to create new replica set \"web-{hash}\": replicasets.apps is forbidden: nope"
    );
    assert_eq!(
        h.events(),
        [(
            EventType::Warning,
            "ReplicaSetCreateError".to_owned(),
            message.clone()
        )]
    );
    let statuses = h.requests("PUT", "/deployments/web/status");
    assert_eq!(statuses.len(), 1);
    let p = condition(&statuses[0].body, "Progressing").expect("Progressing");
    assert_eq!(
        (&p["status"], &p["reason"], &p["message"]),
        (
            &json!("False"),
            &json!("ReplicaSetCreateError"),
            &json!(message)
        )
    );
}

#[tokio::test]
async fn rolling_step_scales_the_new_replica_set_up() {
    // spec §9 scenario 3, second sync: new RS at 3 next to old at 8 → new to 5.
    let h = Harness::new(accepting()).await;
    let mut d = stored(10);
    d.metadata.annotations = Some(BTreeMap::from([(
        "deployment.kubernetes.io/revision".to_owned(),
        "2".to_owned(),
    )]));
    h.deployment(d);
    h.rs(owned(R {
        name: "old",
        replicas: 8,
        status_replicas: 10,
        available: 10,
        ready: 10,
        age: 300,
        annotations: &[
            ("deployment.kubernetes.io/revision", "1"),
            ("deployment.kubernetes.io/desired-replicas", "10"),
            ("deployment.kubernetes.io/max-replicas", "13"),
        ],
        ..R::default()
    }));
    let mut new = owned(R {
        name: "new",
        replicas: 3,
        status_replicas: 3,
        age: 10,
        image: "v2",
        annotations: &[
            ("deployment.kubernetes.io/revision", "2"),
            ("deployment.kubernetes.io/desired-replicas", "10"),
            ("deployment.kubernetes.io/max-replicas", "13"),
        ],
        ..R::default()
    });
    new.spec.min_ready_seconds = Some(0);
    h.rs(new);
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let puts = h.requests("PUT", "/replicasets/new");
    assert_eq!(puts.len(), 1);
    assert_eq!(puts[0].body["spec"]["replicas"], json!(5));
    assert!(
        h.requests("PUT", "/replicasets/old").is_empty(),
        "one step per sync"
    );
    assert_eq!(
        h.events(),
        [(
            EventType::Normal,
            "ScalingReplicaSet".to_owned(),
            "Scaled up replica set new from 3 to 5".to_owned()
        )]
    );
}

#[tokio::test]
async fn recreate_scales_old_down_before_creating() {
    // spec §9 scenario 12.
    let h = Harness::new(accepting()).await;
    let mut d = stored(2);
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
    h.deployment(d);
    h.rs(owned(R {
        name: "old",
        replicas: 2,
        status_replicas: 2,
        available: 2,
        ready: 2,
        annotations: &[
            ("deployment.kubernetes.io/revision", "1"),
            ("deployment.kubernetes.io/desired-replicas", "2"),
        ],
        ..R::default()
    }));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert!(
        h.requests("POST", "/replicasets").is_empty(),
        "no new RS yet"
    );
    let puts = h.requests("PUT", "/replicasets/old");
    assert_eq!(puts[0].body["spec"]["replicas"], json!(0));
    assert_eq!(
        h.events(),
        [(
            EventType::Normal,
            "ScalingReplicaSet".to_owned(),
            "Scaled down replica set old from 2 to 0".to_owned()
        )]
    );
}

#[tokio::test]
async fn rollback_restores_the_revision_template() {
    // spec §9 scenario 22.
    let h = Harness::new(accepting()).await;
    let mut d = stored(1);
    d.metadata.annotations = Some(BTreeMap::from([
        (
            "deprecated.deployment.rollback.to".to_owned(),
            "1".to_owned(),
        ),
        (
            "deployment.kubernetes.io/revision".to_owned(),
            "2".to_owned(),
        ),
        ("kubernetes.io/change-cause".to_owned(), "v2".to_owned()),
    ]));
    h.deployment(d);
    h.rs(owned(R {
        name: "v1",
        replicas: 0,
        age: 300,
        annotations: &[
            ("deployment.kubernetes.io/revision", "1"),
            ("kubernetes.io/change-cause", "v1"),
        ],
        ..R::default()
    }));
    h.rs(owned(R {
        name: "v2",
        replicas: 1,
        status_replicas: 1,
        available: 1,
        age: 10,
        image: "v2",
        annotations: &[
            ("deployment.kubernetes.io/revision", "2"),
            ("kubernetes.io/change-cause", "v2"),
            ("deployment.kubernetes.io/desired-replicas", "1"),
        ],
        ..R::default()
    }));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let puts = h.requests("PUT", "/namespaces/ns/deployments/web");
    assert_eq!(puts.len(), 1);
    let body = &puts[0].body;
    assert_eq!(
        body["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("v1")
    );
    assert!(body["spec"]["template"]["metadata"]["labels"]["pod-template-hash"].is_null());
    assert_eq!(annotation(body, "deprecated.deployment.rollback.to"), None);
    assert_eq!(annotation(body, "kubernetes.io/change-cause"), Some("v1"));
    assert_eq!(
        annotation(body, "deployment.kubernetes.io/revision"),
        Some("2")
    );
    assert_eq!(
        h.events(),
        [(
            EventType::Normal,
            "DeploymentRollback".to_owned(),
            "Rolled back deployment \"web\" to revision 1".to_owned()
        )]
    );
}

#[tokio::test]
async fn rollback_edge_cases_clear_the_request() {
    // spec §9 scenario 23.
    for (to, reason, message) in [
        (
            "0",
            "DeploymentRollbackRevisionNotFound",
            "Unable to find last revision.",
        ),
        (
            "9",
            "DeploymentRollbackRevisionNotFound",
            "Unable to find the revision to rollback to.",
        ),
        (
            "1",
            "DeploymentRollbackTemplateUnchanged",
            "The rollback revision contains the same template as current deployment \"web\"",
        ),
    ] {
        let h = Harness::new(accepting()).await;
        let mut d = stored(1);
        d.metadata.annotations = Some(BTreeMap::from([(
            "deprecated.deployment.rollback.to".to_owned(),
            to.to_owned(),
        )]));
        h.deployment(d);
        h.rs(owned(R {
            name: "v1",
            replicas: 1,
            status_replicas: 1,
            image: "v2",
            annotations: &[("deployment.kubernetes.io/revision", "1")],
            ..R::default()
        }));
        h.ctrl.sync("ns/web".into()).await.expect("sync");
        let puts = h.requests("PUT", "/namespaces/ns/deployments/web");
        assert_eq!(puts.len(), 1, "{to}");
        assert_eq!(
            annotation(&puts[0].body, "deprecated.deployment.rollback.to"),
            None
        );
        assert_eq!(
            puts[0].body["spec"]["template"]["spec"]["containers"][0]["image"],
            json!("v2")
        );
        assert_eq!(
            h.events(),
            [(EventType::Warning, reason.to_owned(), message.to_owned())],
            "{to}"
        );
    }
}

#[tokio::test]
async fn deleting_deployment_only_updates_status() {
    // spec §9 scenario 30.
    let h = Harness::new(accepting()).await;
    let mut d = stored(5);
    d.metadata.deletion_timestamp = Some(Time(ago(5)));
    d.metadata.generation = Some(3);
    h.deployment(d);
    h.rs(owned(R {
        name: "only",
        replicas: 3,
        status_replicas: 3,
        available: 3,
        image: "v2",
        annotations: &[("deployment.kubernetes.io/revision", "1")],
        ..R::default()
    }));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let writes = h.writes();
    assert!(
        writes
            .iter()
            .all(|(m, p)| m == "PUT" && p.ends_with("/deployments/web/status")),
        "{writes:?}"
    );
    let statuses = h.requests("PUT", "/status");
    assert_eq!(
        statuses
            .last()
            .map(|s| s.body["status"]["observedGeneration"].clone()),
        Some(json!(3))
    );
}

#[tokio::test]
async fn paused_deployment_scales_but_does_not_roll_out() {
    // spec §9 scenario 17: template changed and 3 → 5 while paused.
    let h = Harness::new(accepting()).await;
    let mut d = stored(5);
    d.spec.paused = Some(true);
    h.deployment(d);
    h.rs(owned(R {
        name: "v1",
        replicas: 3,
        status_replicas: 3,
        available: 3,
        annotations: &[
            ("deployment.kubernetes.io/revision", "1"),
            ("deployment.kubernetes.io/desired-replicas", "3"),
            ("deployment.kubernetes.io/max-replicas", "4"),
        ],
        ..R::default()
    }));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert!(h.requests("POST", "/replicasets").is_empty());
    let puts = h.requests("PUT", "/replicasets/v1");
    assert_eq!(puts.len(), 1);
    assert_eq!(puts[0].body["spec"]["replicas"], json!(5));
    assert_eq!(
        annotation(&puts[0].body, "deployment.kubernetes.io/desired-replicas"),
        Some("5")
    );
    let statuses = h.requests("PUT", "/deployments/web/status");
    let p = condition(&statuses[0].body, "Progressing").expect("Progressing");
    assert_eq!(
        (&p["status"], &p["reason"]),
        (&json!("Unknown"), &json!("DeploymentPaused"))
    );
}

#[tokio::test]
async fn stalled_rollout_is_rechecked_without_events() {
    // spec §9 scenario 15: nothing changes, the deadline is under a second away.
    let h = Harness::new(accepting()).await;
    let mut d = stored(1);
    d.spec.progress_deadline_seconds = Some(10);
    d.metadata.annotations = Some(BTreeMap::from([(
        "deployment.kubernetes.io/revision".to_owned(),
        "1".to_owned(),
    )]));
    let rs = owned(R {
        name: "web-abc",
        replicas: 1,
        status_replicas: 1,
        image: "v2",
        annotations: &[
            ("deployment.kubernetes.io/revision", "1"),
            ("deployment.kubernetes.io/desired-replicas", "1"),
            ("deployment.kubernetes.io/max-replicas", "2"),
        ],
        ..R::default()
    });
    let mut with_rs = d.clone();
    with_rs.spec.min_ready_seconds = None;
    // The status this sync would compute, with the Progressing condition 9.5 s old.
    let rss = vec![Arc::new(rs.clone())];
    let mut st = status::calculate_status(&with_rs, &rss, rss.first(), true, now());
    let t = now()
        .checked_sub(jiff::SignedDuration::from_millis(9500))
        .expect("time");
    st.set_condition(new_rs_created(t));
    with_rs.status = Some(st.to_api());
    h.deployment(with_rs);
    h.rs(rs);
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert!(h.writes().is_empty(), "nothing to write: {:?}", h.writes());
    // Under a second to the deadline: requeued rate-limited, i.e. a few milliseconds later.
    let requeued = tokio::time::timeout(Duration::from_secs(5), h.ctrl.queue.get())
        .await
        .expect("requeued for the deadline check within 5 s");
    assert_eq!(requeued.as_deref(), Some("ns/web"));
}

#[tokio::test]
async fn missing_deployment_is_a_no_op() {
    let h = Harness::new(accepting()).await;
    h.ctrl.sync("ns/gone".into()).await.expect("sync");
    assert!(h.api.requests().is_empty());
}

#[tokio::test]
async fn handlers_map_replica_sets_to_deployments() {
    let h = Harness::new(accepting()).await;
    h.deployment(stored(1));
    let queued = || {
        let n = h.ctrl.queue.len();
        let mut keys = Vec::new();
        for _ in 0..n {
            if let Some(k) = futures::FutureExt::now_or_never(h.ctrl.queue.get()).flatten() {
                h.ctrl.queue.done(&k);
                keys.push(k);
            }
        }
        keys
    };
    // Owned RS → its Deployment.
    let mine = Arc::new(owned(R {
        name: "mine",
        ..R::default()
    }));
    h.ctrl.on_replica_set(Change::Added(mine.clone()));
    assert_eq!(queued(), ["ns/web"]);
    // Controller ref with another UID: nobody.
    let mut stranger = (*mine).clone();
    if let Some(r) = stranger.metadata.owner_references.as_mut() {
        r[0].uid = "someone-else".into();
    }
    h.ctrl.on_replica_set(Change::Added(Arc::new(stranger)));
    assert!(queued().is_empty());
    // Orphan with matching labels → every matching Deployment.
    let orphan = Arc::new(
        R {
            name: "orphan",
            ..R::default()
        }
        .rs(),
    );
    let mut labelled = (*orphan).clone();
    labelled.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "web".to_owned())]));
    h.ctrl
        .on_replica_set(Change::Added(Arc::new(labelled.clone())));
    assert_eq!(queued(), ["ns/web"]);
    // Unchanged resourceVersion: ignored.
    let same = Arc::new(labelled);
    h.ctrl.on_replica_set(Change::Updated {
        old: same.clone(),
        new: same.clone(),
    });
    assert!(queued().is_empty());
    // Owned by a Deployment of another namespace (same name and UID): nobody.
    let mut elsewhere = (*mine).clone();
    elsewhere.metadata.namespace = Some("other".into());
    h.ctrl.on_replica_set(Change::Added(Arc::new(elsewhere)));
    assert!(queued().is_empty());
    // Deleted owned RS → its Deployment.
    h.ctrl.on_replica_set(Change::Deleted {
        obj: mine,
        final_state_unknown: true,
    });
    assert_eq!(queued(), ["ns/web"]);
    // Deployment changes enqueue themselves.
    h.ctrl.on_deployment(Change::Added(Arc::new(stored(1))));
    assert_eq!(queued(), ["ns/web"]);
    let _ = (&h.replica_sets, &h.deployments);
    let _ = DeploymentStatus::default();
}

#[tokio::test]
async fn paused_cleanup_deletes_empty_old_replica_sets_with_preconditions() {
    // spec §9 scenario 20 (paused path) with an empty v1.
    let h = Harness::new(accepting()).await;
    let mut d = stored(2);
    d.spec.paused = Some(true);
    d.spec.revision_history_limit = Some(0);
    h.deployment(d);
    let mut empty = owned(R {
        name: "v1",
        replicas: 0,
        age: 300,
        annotations: &[("deployment.kubernetes.io/revision", "1")],
        ..R::default()
    });
    empty.metadata.resource_version = Some("42".into());
    h.rs(empty);
    h.rs(owned(R {
        name: "v2",
        replicas: 2,
        status_replicas: 2,
        available: 2,
        image: "v2",
        annotations: &[
            ("deployment.kubernetes.io/revision", "2"),
            ("deployment.kubernetes.io/desired-replicas", "2"),
            ("deployment.kubernetes.io/max-replicas", "3"),
        ],
        ..R::default()
    }));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let deletes = h.requests("DELETE", "/replicasets/v1");
    assert_eq!(deletes.len(), 1);
    assert_eq!(
        deletes[0].body["preconditions"],
        json!({"uid": "v1-uid", "resourceVersion": "42"})
    );
    assert!(
        h.requests("DELETE", "/replicasets/v2").is_empty(),
        "the current RS stays"
    );
}

/// Upstream's `sync` cleans up on the ReplicaSets as they were before its scaling step: an old
/// ReplicaSet that this very sync scales to zero is not deleted by it (a later sync does).
#[tokio::test]
async fn paused_cleanup_judges_the_replica_sets_from_before_the_scaling() {
    let h = Harness::new(accepting()).await;
    let mut d = stored(2);
    d.spec.paused = Some(true);
    d.spec.revision_history_limit = Some(0);
    h.deployment(d);
    // v1: one replica asked for, none left; v2 saturated: v1 goes to zero in this sync.
    h.rs(owned(R {
        name: "v1",
        replicas: 1,
        age: 300,
        annotations: &[("deployment.kubernetes.io/revision", "1")],
        ..R::default()
    }));
    h.rs(owned(R {
        name: "v2",
        replicas: 2,
        status_replicas: 2,
        available: 2,
        image: "v2",
        annotations: &[
            ("deployment.kubernetes.io/revision", "2"),
            ("deployment.kubernetes.io/desired-replicas", "2"),
            ("deployment.kubernetes.io/max-replicas", "3"),
        ],
        ..R::default()
    }));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let scaled = h.requests("PUT", "/replicasets/v1");
    assert_eq!(scaled.len(), 1, "v1 scaled to zero");
    assert_eq!(scaled[0].body["spec"]["replicas"], json!(0));
    assert!(
        h.requests("DELETE", "/replicasets/v1").is_empty(),
        "v1 was not empty before this sync's scaling: a later sync deletes it"
    );
}

/// A routine status write right after the previous one waits for the end of the pacing
/// interval; the sync then writes what the caches say by that time.
#[tokio::test(start_paused = true)]
async fn a_status_write_right_after_another_waits_for_the_interval() {
    let h = Harness::new(accepting()).await;
    let mut d = stored(5);
    d.metadata.deletion_timestamp = Some(Time(ago(5)));
    d.metadata.generation = Some(3);
    h.deployment(d);
    let rs = |available| {
        let mut rs = owned(R {
            name: "only",
            replicas: 3,
            status_replicas: 3,
            available,
            image: "v2",
            annotations: &[("deployment.kubernetes.io/revision", "1")],
            ..R::default()
        });
        rs.metadata.resource_version = Some(format!("{}", 10 + available));
        rs
    };
    h.rs(rs(3));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    let statuses = h.requests("PUT", "/status");
    let first = statuses.len();
    assert!(first >= 1, "the status is written");
    // The cache catches up with what was written (revision, conditions, counts).
    let written: Deployment =
        serde_json::from_value(statuses[first - 1].body.clone()).expect("a Deployment");
    h.deployment(written);

    h.rs(rs(2));
    h.ctrl.sync("ns/web".into()).await.expect("sync");
    assert_eq!(
        h.requests("PUT", "/status").len(),
        first,
        "held within the interval"
    );

    let key = tokio::time::timeout(
        rkcm_runtime::queue::pacing::STATUS_WRITE_INTERVAL * 2,
        h.ctrl.queue.get(),
    )
    .await
    .expect("re-queued within the interval")
    .expect("queued");
    h.ctrl.queue.done(&key);
    h.ctrl.sync(key).await.expect("sync");
    let statuses = h.requests("PUT", "/status");
    assert_eq!(statuses.len(), first + 1);
    assert_eq!(statuses[first].body["status"]["availableReplicas"], 2);
}

#[test]
fn writes_whose_outcome_is_unknown_or_stale() {
    let api = |code: u16| {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..kube::core::Status::default()
        }))
    };
    for (code, want) in [
        (409, true),
        (500, true),
        (504, true),
        (404, false),
        (422, false),
    ] {
        assert_eq!(outcome_unknown_or_stale(&api(code)), want, "HTTP {code}");
    }
}
