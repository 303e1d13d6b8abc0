//! The handler and the sync against a detached informer, a fake clock and a scripted API
//! server: which Jobs are queued, when the timer fires, and what the DELETE of the cached
//! copy, the fresh re-check after a refusal and the DELETE of the fresh copy send (upstream
//! `processJob`/`processTTL`).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rkcm_runtime::cache::Change;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{JobCondition, JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::runtime::watcher;
use rkcm_runtime::cache::Informer;
use rkcm_runtime::clock::FakeClock;
use rkcm_runtime::queue::RateLimiter;
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
    /// A controller whose cache holds `cached` and whose API server holds `fresh` (nothing if
    /// `None`): it answers GETs of `ns/pi` with it, refuses a DELETE whose preconditions do not
    /// match it with 409 (as the API server does), and answers the others with `delete_code`.
    fn new(queue: &str, cached: Option<Job>, fresh: Option<Job>, delete_code: u16) -> Self {
        let fresh = fresh.map(|j| json_of(&j));
        let handler: Arc<Handler> =
            Arc::new(
                move |req: &Request| match (req.method.as_str(), req.path.as_str(), &fresh) {
                    (_, PATH, None) => (404, status(404, "NotFound")),
                    ("GET", PATH, Some(j)) => (200, j.clone()),
                    ("DELETE", PATH, Some(j))
                        if req.body["preconditions"]["uid"] != j["metadata"]["uid"]
                            || req.body["preconditions"]["resourceVersion"]
                                != j["metadata"]["resourceVersion"] =>
                    {
                        (409, status(409, "Conflict"))
                    }
                    ("DELETE", PATH, Some(_)) if delete_code == 200 => (
                        200,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
                    ),
                    ("DELETE", PATH, Some(_)) => {
                        (delete_code, status(delete_code, "InternalError"))
                    }
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

/// The (method, path, preconditions' resourceVersion) of each request.
fn calls(f: &Fixture) -> Vec<(String, &'static str, String)> {
    f.requests()
        .iter()
        .map(|r| {
            let path = if r.path == PATH { PATH } else { "other" };
            let rv = r.body["preconditions"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (r.method.clone(), path, rv)
        })
        .collect()
}

fn call(method: &str, rv: &str) -> (String, &'static str, String) {
    (method.to_string(), PATH, rv.to_string())
}

/// The cache is current: the cached copy is deleted under its own preconditions, and no GET
/// is needed.
#[tokio::test]
async fn expired_job_is_deleted_foreground_with_the_cached_copys_preconditions() {
    let cached = job("u1", "10", Some(now() - secs(100)), Some(30));
    let f = Fixture::new("ttl-test-expired", Some(cached.clone()), Some(cached), 200);
    f.controller.sync(KEY.into()).await.expect("deleted");
    assert_eq!(calls(&f), vec![call("DELETE", "10")], "one delete, no GET");
    let body = &f.requests()[0].body;
    assert_eq!(body["propagationPolicy"], "Foreground", "{body}");
    assert_eq!(body["preconditions"]["uid"], "u1", "{body}");
    assert!(f.controller.queue.is_empty(), "no timer for a deleted job");
}

/// The cache is behind the server: the server refuses the cached copy's delete, and the
/// Job is read, judged again and deleted under the fresh copy's preconditions.
#[tokio::test]
async fn a_stale_cache_is_refused_and_the_fresh_copy_deleted() {
    let cached = job("u1", "10", Some(now() - secs(100)), Some(30));
    let fresh = job("u1", "11", Some(now() - secs(100)), Some(30));
    let f = Fixture::new("ttl-test-stale", Some(cached), Some(fresh), 200);
    f.controller.sync(KEY.into()).await.expect("deleted");
    assert_eq!(
        calls(&f),
        vec![call("DELETE", "10"), call("GET", ""), call("DELETE", "11")],
        "the refused delete, a fresh GET, then the delete of the fresh copy"
    );
    let body = &f.requests()[2].body;
    assert_eq!(body["propagationPolicy"], "Foreground", "{body}");
    assert_eq!(body["preconditions"]["uid"], "u1", "{body}");
}

/// The cache still says TTL 30 (expired), the API server already has 3600: its delete is
/// refused, the fresh copy is not due, and a timer is armed for the new expiry.
#[tokio::test(start_paused = true)]
async fn ttl_raised_since_the_cache_saw_it_is_not_deleted() {
    let finished = now() - secs(100);
    let cached = job("u1", "10", Some(finished), Some(30));
    let fresh = job("u1", "11", Some(finished), Some(3600));
    let f = Fixture::new("ttl-test-raised", Some(cached), Some(fresh), 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert_eq!(
        calls(&f),
        vec![call("DELETE", "10"), call("GET", "")],
        "only the stale copy's delete, which the server refuses"
    );
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

/// The cache says expired, the server has a new, unfinished Job with the same name: the
/// old copy's delete is refused (its UID) and the new Job is left alone.
#[tokio::test]
async fn fresh_copy_not_finished_is_not_deleted() {
    let cached = job("u1", "10", Some(now() - secs(100)), Some(0));
    let fresh = job("u2", "30", None, Some(0));
    let f = Fixture::new("ttl-test-fresh-new", Some(cached), Some(fresh), 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert_eq!(calls(&f), vec![call("DELETE", "10"), call("GET", "")]);
    assert_eq!(f.deletes()[0].body["preconditions"]["uid"], "u1");
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
    // Then, 3 s later by the wall clock, the same key deletes (the server has no such Job
    // here: gone meanwhile, its 404 ends the sync quietly).
    f.clock.advance(Duration::from_secs(3));
    f.controller.sync(KEY.into()).await.expect("no error");
    assert_eq!(calls(&f), vec![call("DELETE", "10")]);
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
    // In the cache, expired, but already gone on the server: the delete's 404 ends it.
    let cached = job("u1", "10", Some(now() - secs(100)), Some(0));
    let f = Fixture::new("ttl-test-gone-server", Some(cached), None, 200);
    f.controller.sync(KEY.into()).await.expect("no error");
    assert_eq!(calls(&f), vec![call("DELETE", "10")]);
}

#[tokio::test]
async fn failed_delete_is_an_error_naming_the_job() {
    let finished = Some(now() - secs(100));
    let current = job("u1", "10", finished, Some(0));
    let cases = [
        // Of the cached copy, current: no GET, the error at once.
        (Some(current.clone()), vec![call("DELETE", "10")]),
        // Of the fresh copy, after the cached one was refused.
        (
            Some(job("u1", "11", finished, Some(0))),
            vec![call("DELETE", "10"), call("GET", ""), call("DELETE", "11")],
        ),
    ];
    for (i, (server, want)) in cases.into_iter().enumerate() {
        let queue = format!("ttl-test-failed-{i}");
        let f = Fixture::new(&queue, Some(current.clone()), server, 500);
        let err = f
            .controller
            .sync(KEY.into())
            .await
            .expect_err("server error");
        assert!(
            matches!(err, Error::DeleteJob { ref key, .. } if key == KEY),
            "{err}"
        );
        assert_eq!(calls(&f), want, "case {i}");
    }
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
