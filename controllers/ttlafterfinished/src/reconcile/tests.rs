//! The handler and the sync against a detached informer, a fake clock and a scripted API
//! server: which Jobs are queued, when the timer fires, and what the fresh re-check and the
//! DELETE send (upstream `processJob`/`processTTL`).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{JobCondition, JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::runtime::watcher;
use rkcm_runtime::clock::FakeClock;
use rkcm_runtime::informer::Informer;
use rkcm_runtime::workqueue::RateLimiter;
use serde_json::{Value, json};

use super::*;

#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    body: Value,
}

type Handler = dyn Fn(&Request) -> (u16, Value) + Send + Sync;

fn mock_client(handler: Arc<Handler>) -> (kube::Client, Arc<Mutex<Vec<Request>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let handler = handler.clone();
        let seen = seen.clone();
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let request = Request {
                method: parts.method.to_string(),
                path: parts.uri.path().to_string(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            let (code, resp) = handler(&request);
            seen.lock().expect("log").push(request);
            let mut response = http::Response::new(kube::client::Body::from(
                serde_json::to_vec(&resp).expect("json"),
            ));
            *response.status_mut() = http::StatusCode::from_u16(code).expect("code");
            Ok::<_, Infallible>(response)
        }
    });
    (kube::Client::new(svc, "default"), log)
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": reason})
}

fn now() -> Timestamp {
    "2026-11-24T07:00:00Z".parse().expect("valid")
}

const KEY: &str = "ns/pi";
const PATH: &str = "/apis/batch/v1/namespaces/ns/jobs/pi";

/// Job `ns/pi`, Complete at `finished` (if any), with `ttl`.
fn job(uid: &str, rv: &str, finished: Option<Timestamp>, ttl: Option<i32>) -> Job {
    let conditions = finished.map(|t| {
        vec![JobCondition {
            type_: "Complete".into(),
            status: "True".into(),
            last_transition_time: Some(Time(t)),
            ..JobCondition::default()
        }]
    });
    Job {
        metadata: ObjectMeta {
            name: Some("pi".into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            ttl_seconds_after_finished: ttl,
            ..JobSpec::default()
        }),
        status: Some(JobStatus {
            conditions,
            ..JobStatus::default()
        }),
    }
}

fn json_of(job: &Job) -> Value {
    let mut v = serde_json::to_value(job).expect("json");
    v["apiVersion"] = json!("batch/v1");
    v["kind"] = json!("Job");
    v
}

struct Fixture {
    controller: Controller,
    informer: Informer<Job>,
    clock: FakeClock,
    log: Arc<Mutex<Vec<Request>>>,
}

impl Fixture {
    /// A controller whose cache holds `cached` and whose API server answers GETs of `ns/pi`
    /// with `fresh` (404 if `None`) and DELETEs with `delete_code`.
    fn new(queue: &str, cached: Option<Job>, fresh: Option<Job>, delete_code: u16) -> Self {
        let fresh = fresh.map(|j| json_of(&j));
        let handler: Arc<Handler> =
            Arc::new(
                move |req: &Request| match (req.method.as_str(), req.path.as_str()) {
                    ("GET", PATH) => match &fresh {
                        Some(j) => (200, j.clone()),
                        None => (404, status(404, "NotFound")),
                    },
                    ("DELETE", PATH) if delete_code == 200 => (
                        200,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
                    ),
                    ("DELETE", PATH) => (delete_code, status(delete_code, "Conflict")),
                    _ => (404, status(404, "NotFound")),
                },
            );
        let (client, log) = mock_client(handler);
        let informer = Informer::<Job>::detached();
        informer.feed(watcher::Event::Init);
        if let Some(job) = cached {
            informer.feed(watcher::Event::InitApply(job));
        }
        informer.feed(watcher::Event::InitDone);
        let clock = FakeClock::new(now());
        let controller = Controller {
            client,
            jobs: informer.store(),
            queue: WorkQueue::new(queue, RateLimiter::Default),
            clock: Arc::new(clock.clone()),
        };
        Self {
            controller,
            informer,
            clock,
            log,
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.log.lock().expect("log").clone()
    }

    fn deletes(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == "DELETE")
            .collect()
    }

    /// Whether the key becomes ready when monotonic time advances by `by` (paused clock).
    async fn ready_after(&self, by: Duration) -> bool {
        tokio::time::advance(by).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        !self.controller.queue.is_empty()
    }
}

fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

#[tokio::test]
async fn expired_job_is_deleted_foreground_with_fresh_preconditions() {
    let cached = job("u1", "10", Some(now() - secs(100)), Some(30));
    let fresh = job("u1", "11", Some(now() - secs(100)), Some(30));
    let f = Fixture::new("ttl-test-expired", Some(cached), Some(fresh), 200);
    f.controller.sync(KEY.into()).await.expect("deleted");
    let requests = f.requests();
    assert_eq!(
        requests
            .iter()
            .map(|r| (r.method.as_str(), r.path.as_str()))
            .collect::<Vec<_>>(),
        vec![("GET", PATH), ("DELETE", PATH)],
        "a fresh GET, then the delete"
    );
    let body = &requests[1].body;
    assert_eq!(body["propagationPolicy"], "Foreground", "{body}");
    assert_eq!(body["preconditions"]["uid"], "u1", "{body}");
    assert_eq!(
        body["preconditions"]["resourceVersion"], "11",
        "the fresh copy's resourceVersion: {body}"
    );
    assert!(f.controller.queue.is_empty(), "no timer for a deleted job");
}

/// The cache still says TTL 30 (expired), the API server already has 3600: no delete, and a
/// timer for the new expiry.
#[tokio::test(start_paused = true)]
async fn ttl_raised_since_the_cache_saw_it_is_not_deleted() {
    let finished = now() - secs(100);
    let cached = job("u1", "10", Some(finished), Some(30));
    let fresh = job("u1", "11", Some(finished), Some(3600));
    let f = Fixture::new("ttl-test-raised", Some(cached), Some(fresh), 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert!(f.deletes().is_empty(), "{:?}", f.requests());
    // Re-armed for finish+3600 = now+3500 s.
    assert!(!f.ready_after(Duration::from_secs(3499)).await);
    assert!(f.ready_after(Duration::from_secs(2)).await);
}

/// A Job re-created under the same name and not finished: the old timer's sync finds it in
/// the cache as not due.
#[tokio::test]
async fn recreated_unfinished_job_is_not_deleted() {
    let cached = job("u2", "20", None, Some(0));
    let f = Fixture::new("ttl-test-recreated", Some(cached), None, 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert!(f.requests().is_empty(), "{:?}", f.requests());
    assert!(f.controller.queue.is_empty());
}

/// The cache says expired, the fresh copy is a new, unfinished Job with the same name.
#[tokio::test]
async fn fresh_copy_not_finished_is_not_deleted() {
    let cached = job("u1", "10", Some(now() - secs(100)), Some(0));
    let fresh = job("u2", "30", None, Some(0));
    let f = Fixture::new("ttl-test-fresh-new", Some(cached), Some(fresh), 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert!(f.deletes().is_empty(), "{:?}", f.requests());
}

/// Not yet expired: no API call; the key comes back on its own when the TTL has passed.
#[tokio::test(start_paused = true)]
async fn not_expired_requeues_after_the_remaining_time() {
    let cached = job("u1", "10", Some(now() - secs(7)), Some(10));
    let f = Fixture::new("ttl-test-wait", Some(cached), None, 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert!(f.requests().is_empty(), "{:?}", f.requests());
    assert!(!f.ready_after(Duration::from_millis(2990)).await);
    assert!(f.ready_after(Duration::from_millis(20)).await);
    // Then, 3 s later by the wall clock, the same key deletes (the fresh copy is 404 here:
    // gone meanwhile, which ends the sync quietly).
    f.clock.advance(Duration::from_secs(3));
    f.controller.sync(KEY.into()).await.expect("no error");
    assert_eq!(f.requests().len(), 1, "the fresh GET");
}

/// A finish time 20 s in the future with TTL 0: deferred by 20 s, not deleted.
#[tokio::test(start_paused = true)]
async fn finish_time_in_the_future_is_deferred() {
    let cached = job("u1", "10", Some(now() + secs(20)), Some(0));
    let f = Fixture::new("ttl-test-skew", Some(cached), None, 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert!(f.requests().is_empty());
    assert!(!f.ready_after(Duration::from_millis(19_990)).await);
    assert!(f.ready_after(Duration::from_millis(20)).await);
}

#[tokio::test]
async fn gone_jobs_end_the_sync() {
    // Not in the cache.
    let f = Fixture::new("ttl-test-gone-cache", None, None, 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert!(f.requests().is_empty());
    // In the cache, expired, but already gone on the server.
    let cached = job("u1", "10", Some(now() - secs(100)), Some(0));
    let f = Fixture::new("ttl-test-gone-server", Some(cached), None, 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert!(f.deletes().is_empty());
}

#[tokio::test]
async fn failed_delete_is_an_error_naming_the_job() {
    let cached = job("u1", "10", Some(now() - secs(100)), Some(0));
    let fresh = job("u1", "11", Some(now() - secs(100)), Some(0));
    let f = Fixture::new("ttl-test-conflict", Some(cached), Some(fresh), 409);
    let err = f.controller.sync(KEY.into()).await.expect_err("conflict");
    assert!(
        matches!(err, Error::DeleteJob { ref key, .. } if key == KEY),
        "{err}"
    );
    assert_eq!(f.deletes().len(), 1);
}

#[tokio::test]
async fn unknown_finish_time_is_an_error() {
    let mut cached = job("u1", "10", Some(now()), Some(0));
    if let Some(c) = cached
        .status
        .as_mut()
        .and_then(|s| s.conditions.as_mut())
        .and_then(|c| c.first_mut())
    {
        c.last_transition_time = None;
    }
    let f = Fixture::new("ttl-test-no-time", Some(cached), None, 200);
    let err = f.controller.sync(KEY.into()).await.expect_err("no time");
    assert_eq!(
        err.to_string(),
        "unable to find the time when the Job ns/pi finished"
    );
    assert!(f.requests().is_empty());
}

#[tokio::test]
async fn handler_queues_only_finished_jobs_with_ttl() {
    let f = Fixture::new("ttl-test-handler", None, None, 200);
    let queued = |change: Change<Job>| {
        f.controller.on_job(change);
        let n = f.controller.queue.len();
        // Drain for the next case.
        while !f.controller.queue.is_empty() {
            let key = take_ready(&f.controller.queue);
            f.controller.queue.done(&key);
        }
        n
    };
    let finished = Some(now() - secs(5));
    let added = |j: Job| Change::Added(Arc::new(j));
    assert_eq!(queued(added(job("u", "1", finished, Some(60)))), 1);
    assert_eq!(queued(added(job("u", "1", finished, None))), 0, "no TTL");
    assert_eq!(queued(added(job("u", "1", None, Some(0)))), 0, "running");
    let mut deleting = job("u", "1", finished, Some(0));
    deleting.metadata.deletion_timestamp = Some(Time(now()));
    assert_eq!(queued(added(deleting.clone())), 0, "being deleted");
    // An update that adds the TTL (or the terminal condition) queues it.
    assert_eq!(
        queued(Change::Updated {
            old: Arc::new(job("u", "1", finished, None)),
            new: Arc::new(job("u", "2", finished, Some(0))),
        }),
        1
    );
    assert_eq!(
        queued(Change::Deleted {
            obj: Arc::new(job("u", "3", finished, Some(0))),
            final_state_unknown: false,
        }),
        0,
        "deletions need nothing"
    );
    drop(f.informer);
}

/// Takes a ready key without awaiting (the queue has one).
fn take_ready(queue: &WorkQueue<String>) -> String {
    let fut = queue.get();
    let mut fut = std::pin::pin!(fut);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Some(key)) => key,
        other => panic!("no ready key: {other:?}"),
    }
}
