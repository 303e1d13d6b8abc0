use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};

use tokio::sync::mpsc;
use tokio::time::{sleep, timeout};

use super::*;
use futures::FutureExt;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::limiter::Limiter;
use super::metrics::families;
use super::workers::Failure;
use crate::test_log::Captured;

fn k(s: &str) -> String {
    s.to_owned()
}

fn unnamed(limiter: RateLimiter) -> WorkQueue<String> {
    WorkQueue::new("", limiter)
}

/// The key `get` hands out without waiting, if any (`None` = it would block).
fn get_now(queue: &WorkQueue<String>) -> Option<Option<String>> {
    queue.get().now_or_never()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test]
async fn add_dedups_keys_waiting_to_be_processed() {
    let queue = unnamed(RateLimiter::Default);
    queue.add(k("a"));
    queue.add(k("b"));
    queue.add(k("a"));
    assert_eq!(queue.len(), 2);
    assert_eq!(get_now(&queue), Some(Some(k("a"))));
    assert_eq!(get_now(&queue), Some(Some(k("b"))));
    assert_eq!(get_now(&queue), None, "a duplicate was queued");
    assert!(queue.is_empty());
}

#[tokio::test]
async fn readd_while_processing_is_processed_again_once_after_done() {
    let queue = unnamed(RateLimiter::Default);
    queue.add(k("a"));
    assert_eq!(get_now(&queue), Some(Some(k("a"))));
    queue.add(k("a"));
    queue.add(k("a"));
    assert_eq!(
        queue.len(),
        0,
        "a key being processed must not be handed out"
    );
    assert_eq!(get_now(&queue), None);
    queue.done(&k("a"));
    assert_eq!(queue.len(), 1);
    assert_eq!(get_now(&queue), Some(Some(k("a"))));
    queue.done(&k("a"));
    assert_eq!(get_now(&queue), None, "processed more than once after done");
    // A stray done for a key not being processed must not queue it.
    queue.done(&k("a"));
    assert!(queue.is_empty());
}

#[tokio::test(start_paused = true)]
async fn key_is_never_processed_by_two_workers_at_once() {
    let queue = unnamed(RateLimiter::Default);
    let in_flight = Arc::new(Mutex::new(HashSet::<String>::new()));
    let overlaps = Arc::new(AtomicU32::new(0));
    // Version of the latest add per key, and the version each key's last pass saw.
    let added = Arc::new(Mutex::new(HashMap::<String, u64>::new()));
    let seen = Arc::new(Mutex::new(HashMap::<String, u64>::new()));
    let sync = {
        let (in_flight, overlaps, added, seen) = (
            in_flight.clone(),
            overlaps.clone(),
            added.clone(),
            seen.clone(),
        );
        move |key: String| {
            let (in_flight, overlaps, added, seen) = (
                in_flight.clone(),
                overlaps.clone(),
                added.clone(),
                seen.clone(),
            );
            async move {
                if !in_flight.lock().insert(key.clone()) {
                    overlaps.fetch_add(1, AtomicOrdering::SeqCst);
                }
                let version = added.lock().get(&key).copied().unwrap_or_default();
                seen.lock().insert(key.clone(), version);
                sleep(ms(3)).await;
                in_flight.lock().remove(&key);
                Ok::<(), String>(())
            }
        }
    };
    let workers = tokio::spawn(run_workers(queue.clone(), 4, sync));
    for version in 1..=300_u64 {
        let key = format!("k{}", version % 3);
        added.lock().insert(key.clone(), version);
        queue.add(key);
        if version % 2 == 0 {
            sleep(ms(1)).await;
        }
    }
    queue.shut_down_with_drain().await;
    timeout(Duration::from_secs(60), workers)
        .await
        .expect("workers did not exit after shutdown")
        .expect("run_workers panicked");
    assert_eq!(
        overlaps.load(AtomicOrdering::SeqCst),
        0,
        "a key was processed concurrently"
    );
    let (added, seen) = (added.lock(), seen.lock());
    assert_eq!(added.len(), 3);
    for (key, version) in added.iter() {
        assert_eq!(
            seen.get(key),
            Some(version),
            "the last add of {key} was lost"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn add_after_fires_at_ready_time() {
    let queue = unnamed(RateLimiter::Default);
    queue.add_after(k("now"), Duration::ZERO);
    assert_eq!(queue.len(), 1, "a zero delay adds immediately");
    assert_eq!(get_now(&queue), Some(Some(k("now"))));

    let start = Instant::now();
    queue.add_after(k("a"), ms(50));
    queue.add_after(k("b"), ms(20));
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.get().await, Some(k("b")));
    assert_eq!(start.elapsed(), ms(20));
    assert_eq!(queue.get().await, Some(k("a")));
    assert_eq!(start.elapsed(), ms(50));
}

#[tokio::test(start_paused = true)]
async fn earlier_add_after_wins_and_later_does_not_push_back() {
    let queue = unnamed(RateLimiter::Default);
    let start = Instant::now();
    queue.add_after(k("earlier"), ms(100));
    queue.add_after(k("earlier"), ms(30));
    queue.add_after(k("later"), ms(40));
    queue.add_after(k("later"), ms(200));

    assert_eq!(queue.get().await, Some(k("earlier")));
    assert_eq!(start.elapsed(), ms(30));
    queue.done(&k("earlier"));
    assert_eq!(queue.get().await, Some(k("later")));
    assert_eq!(start.elapsed(), ms(40));
    queue.done(&k("later"));

    // Neither the superseded 100 ms entry nor the ignored 200 ms one may fire.
    assert!(timeout(Duration::from_secs(1), queue.get()).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn delayed_entry_fires_even_if_key_was_added_meanwhile() {
    let queue = unnamed(RateLimiter::Default);
    let start = Instant::now();
    queue.add_after(k("a"), ms(50));
    queue.add(k("a"));
    assert_eq!(get_now(&queue), Some(Some(k("a"))));
    queue.done(&k("a"));
    assert_eq!(queue.get().await, Some(k("a")));
    assert_eq!(start.elapsed(), ms(50));
}

#[tokio::test(start_paused = true)]
async fn rate_limited_backoff_doubles_and_forget_resets_it() {
    let queue = unnamed(RateLimiter::Default);
    let key = k("a");
    for (failures, expected) in [5, 10, 20, 40, 80, 160].into_iter().enumerate() {
        let start = Instant::now();
        queue.add_rate_limited(key.clone());
        assert_eq!(queue.num_requeues(&key), failures as u32 + 1);
        assert_eq!(queue.get().await, Some(key.clone()));
        assert_eq!(start.elapsed(), ms(expected), "failure {failures}");
        queue.done(&key);
    }
    queue.forget(&key);
    assert_eq!(queue.num_requeues(&key), 0);
    let start = Instant::now();
    queue.add_rate_limited(key.clone());
    assert_eq!(queue.get().await, Some(key.clone()));
    assert_eq!(start.elapsed(), ms(5), "forget did not reset the backoff");
}

#[tokio::test(start_paused = true)]
async fn item_backoff_is_capped() {
    let mut limiter = Limiter::new(&RateLimiter::Default);
    let key = k("a");
    let mut now = Instant::now();
    let delays: Vec<Duration> = (0..100)
        .map(|_| {
            let d = limiter.when(&key, now);
            now += d;
            d
        })
        .collect();
    // The bucket is irrelevant for the first 100 reservations.
    assert_eq!(delays[17], ms(5 << 17));
    assert_eq!(delays[18], DEFAULT_ITEM_MAX_DELAY);
    assert_eq!(delays[99], DEFAULT_ITEM_MAX_DELAY);
    assert_eq!(limiter.num_requeues(&key), 100);

    let mut job = Limiter::new(&RateLimiter::ItemExponential {
        base: Duration::from_secs(1),
        max: Duration::from_secs(60),
    });
    let delays: Vec<u64> = (0..8)
        .map(|_| {
            let d = job.when(&key, now);
            now += d;
            d.as_secs()
        })
        .collect();
    assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
}

/// With `--rkcm-retry-ignores-early-failures=false`, upstream's rule (client-go
/// `ItemExponentialFailureRateLimiter`): every failure counts, also those of syncs that
/// events started before the pending retry.
#[tokio::test(start_paused = true)]
async fn every_failure_doubles_the_backoff_when_asked() {
    let mut limiter = Limiter::with(
        &RateLimiter::ItemExponential {
            base: ms(5),
            max: DEFAULT_ITEM_MAX_DELAY,
        },
        false,
    );
    let key = k("a");
    let now = Instant::now();
    let delays: Vec<Duration> = (0..5).map(|_| limiter.when(&key, now + ms(1))).collect();
    assert_eq!(delays, [ms(5), ms(10), ms(20), ms(40), ms(80)]);
    assert_eq!(limiter.num_requeues(&key), 5);
}

/// rkcm's default (kubernetes/kubernetes#132805): failures of syncs that events started
/// before the backoff elapsed keep the pending retry instead of doubling it again.
#[tokio::test(start_paused = true)]
async fn early_failures_do_not_inflate_the_backoff() {
    assert!(
        super::limiter::IGNORE_EARLY_FAILURES.load(AtomicOrdering::Relaxed),
        "rkcm's rule is the default"
    );
    let mut limiter = Limiter::with(
        &RateLimiter::ItemExponential {
            base: ms(5),
            max: DEFAULT_ITEM_MAX_DELAY,
        },
        true,
    );
    let key = k("a");
    let now = Instant::now();
    assert_eq!(limiter.when(&key, now), ms(5));
    for _ in 0..100 {
        assert_eq!(limiter.when(&key, now + ms(1)), ms(4));
    }
    assert_eq!(limiter.num_requeues(&key), 1);
    // Once the backoff has elapsed, a failure doubles it as usual.
    assert_eq!(limiter.when(&key, now + ms(5)), ms(10));
    assert_eq!(limiter.when(&key, now + ms(6)), ms(9));
    assert_eq!(limiter.when(&key, now + ms(15)), ms(20));
    assert_eq!(limiter.num_requeues(&key), 3);
}

#[tokio::test(start_paused = true)]
async fn overall_bucket_delays_the_101st_immediate_retry() {
    let queue = unnamed(RateLimiter::Default);
    let start = Instant::now();
    for i in 0..=100 {
        queue.add_rate_limited(format!("k{i}"));
    }
    for i in 0..100 {
        assert!(queue.get().await.is_some());
        assert_eq!(
            start.elapsed(),
            ms(5),
            "key {i} should only wait its own backoff"
        );
    }
    assert_eq!(queue.get().await, Some(k("k100")));
    assert_eq!(
        start.elapsed(),
        ms(100),
        "the 101st token is available after 1/10 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_tiny_bucket_qps_delays_for_ever_without_panicking() {
    let queue = unnamed(RateLimiter::Bucket {
        qps: 1e-300,
        burst: 1,
    });
    queue.add_rate_limited(k("a"));
    queue.add_rate_limited(k("b"));
    assert_eq!(queue.get().await, Some(k("a")));
    tokio::time::advance(Duration::from_secs(365 * 24 * 3600)).await;
    assert_eq!(get_now(&queue), None, "b is due in centuries");
}

#[tokio::test]
async fn shut_down_drains_queued_keys_then_get_returns_none() {
    let queue = unnamed(RateLimiter::Default);
    queue.add(k("a"));
    queue.add(k("b"));
    queue.shut_down();
    assert!(queue.is_shutting_down());
    assert_eq!(get_now(&queue), Some(Some(k("a"))));
    assert_eq!(get_now(&queue), Some(Some(k("b"))));
    assert_eq!(get_now(&queue), Some(None));
}

#[tokio::test(start_paused = true)]
async fn shut_down_wakes_waiting_workers() {
    let queue = unnamed(RateLimiter::Default);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            tokio::spawn({
                let queue = queue.clone();
                async move { queue.get().await }
            })
        })
        .collect();
    tokio::task::yield_now().await;
    queue.shut_down();
    for waiter in waiters {
        let got = timeout(Duration::from_secs(1), waiter)
            .await
            .expect("waiter not woken");
        assert_eq!(got.expect("waiter panicked"), None);
    }
}

#[tokio::test(start_paused = true)]
async fn adds_after_shut_down_are_ignored() {
    let queue = unnamed(RateLimiter::Default);
    queue.shut_down();
    queue.add(k("a"));
    queue.add_after(k("b"), Duration::ZERO);
    queue.add_after(k("c"), ms(10));
    queue.add_rate_limited(k("d"));
    assert!(queue.is_empty());
    assert_eq!(timeout(Duration::from_secs(1), queue.get()).await, Ok(None));
}

#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_waits_for_processing() {
    let queue = unnamed(RateLimiter::Default);
    queue.add(k("a"));
    assert_eq!(get_now(&queue), Some(Some(k("a"))));
    let mut drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    assert!(
        timeout(Duration::from_secs(1), &mut drain).await.is_err(),
        "drain returned while a key was processing"
    );
    assert!(queue.is_shutting_down());
    queue.done(&k("a"));
    timeout(Duration::from_secs(1), drain)
        .await
        .expect("drain did not return after done")
        .expect("drain panicked");
    assert_eq!(get_now(&queue), Some(None));
}

#[tokio::test(start_paused = true)]
async fn metrics_count_adds_depth_and_retries() {
    let name = "rkcm_test_counts";
    let queue = WorkQueue::new(name, RateLimiter::Default);
    let families = families().expect("metric families");
    let label = &[name];
    let adds = families.adds.with_label_values(label);
    let depth = families.depth.with_label_values(label);
    let retries = families.retries.with_label_values(label);
    let queued = families.queue_duration.with_label_values(label);
    let worked = families.work_duration.with_label_values(label);

    queue.add(k("a"));
    queue.add(k("a"));
    queue.add(k("b"));
    assert_eq!(
        (adds.get(), depth.get()),
        (2, 2),
        "a duplicate add was counted"
    );

    assert_eq!(get_now(&queue), Some(Some(k("a"))));
    assert_eq!(depth.get(), 1);
    assert_eq!(queued.get_sample_count(), 1);
    queue.add(k("a"));
    assert_eq!(
        (adds.get(), depth.get()),
        (3, 2),
        "a re-add while processing counts"
    );
    queue.done(&k("a"));
    assert_eq!(worked.get_sample_count(), 1);
    assert_eq!(depth.get(), 2);

    queue.add_after(k("c"), Duration::ZERO);
    queue.add_after(k("d"), ms(10));
    queue.add_rate_limited(k("e"));
    assert_eq!(retries.get(), 3);
    assert_eq!(adds.get(), 4, "only the immediate add_after is an add yet");

    for _ in 0..5 {
        assert!(queue.get().await.is_some());
    }
    assert_eq!((adds.get(), depth.get()), (6, 0));
}

#[tokio::test(start_paused = true)]
async fn metrics_track_unfinished_work() {
    let name = "rkcm_test_unfinished";
    let queue = WorkQueue::new(name, RateLimiter::Default);
    let families = families().expect("metric families");
    let unfinished = families.unfinished_work.with_label_values(&[name]);
    let longest = families.longest_running.with_label_values(&[name]);

    queue.add(k("a"));
    queue.add(k("b"));
    assert_eq!(get_now(&queue), Some(Some(k("a"))));
    sleep(Duration::from_secs(1)).await;
    assert_eq!(get_now(&queue), Some(Some(k("b"))));
    wait_gauge("the longest running processor at 2 s", &longest, |v| {
        v >= 2.0
    })
    .await;
    assert!(
        unfinished.get() >= longest.get() + 1.0,
        "both keys count as unfinished"
    );

    queue.done(&k("a"));
    queue.done(&k("b"));
    wait_gauge("unfinished work reset after done", &unfinished, |v| {
        v == 0.0
    })
    .await;
    wait_gauge("longest running reset after done", &longest, |v| v == 0.0).await;
}

/// Waits (five seconds of the paused clock at most) until `gauge` satisfies `ok`; panics
/// with its last value if it does not.
async fn wait_gauge(what: &str, gauge: &prometheus::Gauge, ok: impl Fn(f64) -> bool) {
    let waited = timeout(Duration::from_secs(5), async {
        while !ok(gauge.get()) {
            sleep(ms(100)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "{what}: the gauge stayed at {}",
        gauge.get()
    );
}

/// The gauges of work in progress are refreshed while a key is processed, not while the queue
/// is idle: an idle queue's background task wakes only on its heartbeat (the gauges every
/// half second would be twenty wake-ups a second for a manager's queues).
#[tokio::test(start_paused = true)]
async fn an_idle_queue_wakes_only_on_its_heartbeat() {
    let name = "rkcm_test_idle_wakes";
    let queue = WorkQueue::new(name, RateLimiter::Default);
    let families = families().expect("metric families");
    let longest = families.longest_running.with_label_values(&[name]);
    queue.add(k("a"));
    assert_eq!(get_now(&queue), Some(Some(k("a"))));
    wait_gauge("a key in progress in the gauge", &longest, |v| v >= 1.0).await;
    queue.done(&k("a"));
    wait_gauge("reset once the key is done", &longest, |v| v == 0.0).await;

    // The measurement window: a minute of the paused clock with nothing queued.
    let before = queue.driver_rounds();
    sleep(Duration::from_secs(60)).await;
    let rounds = queue.driver_rounds() - before;
    assert!(
        rounds <= 7,
        "{rounds} rounds in a minute idle (the heartbeat is every 10 s)"
    );

    // Work starting again wakes the task at once, and the gauges follow it.
    queue.add(k("b"));
    assert_eq!(get_now(&queue), Some(Some(k("b"))));
    wait_gauge("the gauge follows the new key", &longest, |v| v >= 2.0).await;
    queue.done(&k("b"));
}

#[tokio::test(start_paused = true)]
async fn run_workers_catches_a_panic_and_requeues_the_key() {
    let queue = WorkQueue::new(
        "",
        RateLimiter::ItemExponential {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        },
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let attempts = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let sync = move |key: String| {
        let (tx, attempts) = (tx.clone(), attempts.clone());
        async move {
            let attempt = {
                let mut attempts = attempts.lock();
                let n = attempts.entry(key.clone()).or_default();
                *n += 1;
                *n
            };
            let _ = tx.send((key.clone(), attempt, Instant::now()));
            if key == "bad" && attempt == 1 {
                panic!("boom");
            }
            Ok::<(), String>(())
        }
    };
    let start = Instant::now();
    let workers = tokio::spawn(run_workers(queue.clone(), 2, sync));
    queue.add(k("bad"));
    queue.add(k("good"));

    let mut events = Vec::new();
    for _ in 0..3 {
        let event = timeout(Duration::from_secs(10), rx.recv()).await;
        events.push(event.expect("sync not called").expect("channel closed"));
    }
    events.sort_by_key(|(key, attempt, _)| (key.clone(), *attempt));
    assert_eq!(events[0].0, "bad");
    assert_eq!(
        (events[1].0.as_str(), events[1].1),
        ("bad", 2),
        "panicked key not retried"
    );
    assert_eq!(
        events[1].2 - start,
        Duration::from_secs(1),
        "retry not rate-limited"
    );
    assert_eq!(events[2].0, "good");

    queue.shut_down();
    timeout(Duration::from_secs(10), workers)
        .await
        .expect("workers did not exit")
        .expect("a panic escaped run_workers");
    assert_eq!(
        queue.num_requeues(&k("bad")),
        0,
        "success must forget the failures"
    );
    assert!(
        timeout(Duration::from_secs(1), rx.recv())
            .await
            .ok()
            .flatten()
            .is_none(),
        "key processed again after success"
    );
}

#[tokio::test(start_paused = true)]
async fn run_workers_requeues_errors_with_backoff_until_success() {
    let queue = WorkQueue::new(
        "",
        RateLimiter::ItemExponential {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        },
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let attempts = Arc::new(AtomicU32::new(0));
    let sync = move |_key: String| {
        let (tx, attempts) = (tx.clone(), attempts.clone());
        async move {
            let attempt = attempts.fetch_add(1, AtomicOrdering::SeqCst) + 1;
            let _ = tx.send(Instant::now());
            if attempt <= 2 {
                Err(format!("attempt {attempt} failed"))
            } else {
                Ok(())
            }
        }
    };
    let start = Instant::now();
    let workers = tokio::spawn(run_workers(queue.clone(), 1, sync));
    queue.add(k("a"));
    let mut offsets = Vec::new();
    for _ in 0..3 {
        let at = timeout(Duration::from_secs(10), rx.recv()).await;
        offsets.push(at.expect("sync not called").expect("channel closed") - start);
    }
    assert_eq!(
        offsets,
        [
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(3)
        ]
    );
    queue.shut_down();
    timeout(Duration::from_secs(10), workers)
        .await
        .expect("workers did not exit")
        .expect("run_workers panicked");
    assert_eq!(queue.num_requeues(&k("a")), 0);
}

#[tokio::test(start_paused = true)]
async fn retry_policy_drops_a_key_after_max_retries_and_gives_up_at_once() {
    let queue = WorkQueue::new(
        "",
        RateLimiter::ItemExponential {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1),
        },
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sync = move |key: String| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(key.clone());
            Err(key)
        }
    };
    let policy = RetryPolicy {
        max_retries: Some(3),
        give_up: |e: &String| e == "final",
        ..RetryPolicy::default()
    };
    let workers = tokio::spawn(run_workers_with(queue.clone(), 1, policy, sync));
    queue.add(k("a"));
    // The first attempt and three retries, then nothing more.
    for _ in 0..4 {
        let got = timeout(Duration::from_secs(10), rx.recv()).await;
        assert_eq!(got.expect("sync not called").as_deref(), Some("a"));
    }
    assert!(
        timeout(Duration::from_secs(60), rx.recv()).await.is_err(),
        "a key past max_retries must be dropped"
    );
    assert_eq!(queue.num_requeues(&k("a")), 0, "forgotten when dropped");
    queue.add(k("final"));
    let got = timeout(Duration::from_secs(10), rx.recv()).await;
    assert_eq!(got.expect("sync not called").as_deref(), Some("final"));
    assert!(
        timeout(Duration::from_secs(60), rx.recv()).await.is_err(),
        "a give-up error is not retried"
    );
    queue.shut_down();
    timeout(Duration::from_secs(10), workers)
        .await
        .expect("workers did not exit")
        .expect("run_workers panicked");
}

#[test]
fn retry_policy_classifies_failures() {
    let policy = RetryPolicy {
        max_retries: Some(2),
        give_up: |e: &String| e == "gone",
        quiet: |e: &String| e.starts_with("stale"),
    };
    assert_eq!(policy.on_failure(&k("gone"), 0), Failure::GiveUp);
    assert_eq!(
        policy.on_failure(&k("stale cache"), 0),
        Failure::RequeueQuietly
    );
    assert_eq!(
        policy.on_failure(&k("stale cache"), 1),
        Failure::RequeueQuietly
    );
    assert_eq!(policy.on_failure(&k("boom"), 1), Failure::Requeue);
    // Quiet errors count towards max_retries like any other.
    assert_eq!(policy.on_failure(&k("stale cache"), 2), Failure::Drop);
    assert_eq!(policy.on_failure(&k("boom"), 2), Failure::Drop);
    let default = RetryPolicy::<String>::default();
    assert_eq!(
        default.on_failure(&k("stale cache"), 1_000),
        Failure::Requeue
    );
}

/// A key entering the queue is traced once (for latency profiles); a key already waiting is
/// not queued again and not traced again.
#[tokio::test]
async fn a_key_entering_the_queue_is_traced_once() {
    let captured = Captured::default();
    let _guard = tracing::subscriber::set_default(captured.clone());
    let queue = unnamed(RateLimiter::Default);
    queue.add(k("a"));
    queue.add(k("a"));
    queue.add(k("b"));
    let queued = captured.fields_of(tracing::Level::TRACE, "queued");
    assert_eq!(queued, ["queue= key=\"a\"", "queue= key=\"b\""]);
}

#[tokio::test(start_paused = true)]
async fn quiet_errors_are_requeued_at_debug_and_others_warn() {
    // A current-thread runtime: the workers log on this thread, under this subscriber.
    let captured = Captured::default();
    let _guard = tracing::subscriber::set_default(captured.clone());
    let queue = unnamed(RateLimiter::Default);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let attempts = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let sync = move |key: String| {
        let (tx, attempts) = (tx.clone(), attempts.clone());
        async move {
            let n = {
                let mut attempts = attempts.lock();
                let n = attempts.entry(key.clone()).or_default();
                *n += 1;
                *n
            };
            let _ = tx.send((key.clone(), n));
            if n == 1 {
                Err(format!("{key} failed"))
            } else {
                Ok(())
            }
        }
    };
    let policy = RetryPolicy {
        quiet: |e: &String| e.starts_with("stale"),
        ..RetryPolicy::default()
    };
    let workers = tokio::spawn(run_workers_with(queue.clone(), 1, policy, sync));
    queue.add(k("stale"));
    queue.add(k("broken"));
    // Each key fails once, then succeeds on its (rate-limited) retry.
    let mut seen = Vec::new();
    for _ in 0..4 {
        let got = timeout(Duration::from_secs(10), rx.recv()).await;
        seen.push(got.expect("sync not called").expect("channel open"));
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            (k("broken"), 1),
            (k("broken"), 2),
            (k("stale"), 1),
            (k("stale"), 2)
        ]
    );
    queue.shut_down();
    timeout(Duration::from_secs(10), workers)
        .await
        .expect("workers did not exit")
        .expect("run_workers panicked");
    let logged = captured.messages();
    let warnings = logged
        .iter()
        .filter(|(level, _)| *level == tracing::Level::WARN)
        .count();
    assert_eq!(warnings, 1, "only the real failure warns: {logged:?}");
    assert!(
        logged
            .iter()
            .any(|(level, message)| *level == tracing::Level::WARN
                && message == "sync failed, requeuing with backoff"),
        "{logged:?}"
    );
    assert!(
        logged
            .iter()
            .any(|(level, message)| *level == tracing::Level::DEBUG
                && message == "sync deferred, requeuing with backoff"),
        "{logged:?}"
    );
}

#[test]
fn queue_built_outside_a_runtime_works_inside_one_later() {
    let queue = unnamed(RateLimiter::Default);
    queue.add(k("a"));
    queue.add_after(k("b"), ms(10));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("test runtime");
    runtime.block_on(async {
        let start = Instant::now();
        assert_eq!(queue.get().await, Some(k("a")));
        let got = timeout(Duration::from_secs(60), queue.get()).await;
        assert_eq!(got, Ok(Some(k("b"))), "delayed key never delivered");
        assert!(start.elapsed() <= ms(10));
    });
}
