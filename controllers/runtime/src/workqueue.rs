//! The work queue every controller drives its workers from, with client-go `util/workqueue`
//! semantics (`queue.go`, `delaying_queue.go`, `rate_limiting_queue.go`,
//! `default_rate_limiters.go`, `metrics.go`).
//!
//! Guarantees:
//! - A key added while it is already waiting is queued once (dedup).
//! - A key is never handed to two workers at once. A key added while a worker holds it is
//!   handed out again after that worker calls [`WorkQueue::done`], exactly once, so no update
//!   is lost and none is processed concurrently.
//! - [`WorkQueue::add_after`] delivers the key no earlier than asked; a key waits in the delay
//!   heap at most once and a second `add_after` can only move it earlier. A delayed entry fires
//!   even if the key was added immediately in the meantime (one extra, harmless pass that
//!   controllers rely on for deadline checks).
//! - [`WorkQueue::add_rate_limited`] delays by the queue's [`RateLimiter`]; [`WorkQueue::forget`]
//!   resets the key's failure history.
//! - After [`WorkQueue::shut_down`] adds are ignored, queued keys are still handed out, and then
//!   [`WorkQueue::get`] returns `None`. Delayed keys not yet due are dropped.
//! - Named queues export the upstream `workqueue_*` metrics with label `name`. The
//!   `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`
//!   gauges are refreshed every 500 ms by the queue's background task (as upstream does), not
//!   computed at scrape time; they stop being refreshed once the queue shuts down.
//!
//! Each queue owns one background tokio task: it moves due delayed keys into the queue and
//! refreshes the gauges. It is spawned when the queue is created inside a tokio runtime, or
//! otherwise on the first [`WorkQueue::get`] / [`WorkQueue::add_after`] made inside one, and it
//! ends at shutdown or when the last handle of the queue is dropped. All timing uses
//! `tokio::time`, so tests can run on paused time.
//!
//! Deviation from upstream: [`run_workers`] catches a panic inside one sync, logs it and
//! requeues the key rate-limited, instead of crashing the process as upstream's `HandleCrash`
//! (`staging/src/k8s.io/apimachinery/pkg/util/runtime/runtime.go`) does.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use futures::FutureExt;
use parking_lot::Mutex;
use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts,
};
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;

use crate::flowcontrol::TokenBucket;
use crate::metrics::register;
use crate::tracked;

/// Upper bound on how long the delay task sleeps without re-checking the heap (upstream
/// `maxWait`), a safety net against a missed wake-up.
const MAX_DELAY_WAIT: Duration = Duration::from_secs(10);

/// How often the in-progress work gauges are refreshed (upstream `unfinishedWorkUpdatePeriod`).
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// Per-key backoff base of the default controller rate limiter.
pub const DEFAULT_ITEM_BASE_DELAY: Duration = Duration::from_millis(5);
/// Per-key backoff cap of the default controller rate limiter.
pub const DEFAULT_ITEM_MAX_DELAY: Duration = Duration::from_secs(1000);
/// Refill rate of the default controller rate limiter's overall bucket.
pub const DEFAULT_BUCKET_QPS: f64 = 10.0;
/// Size of the default controller rate limiter's overall bucket.
pub const DEFAULT_BUCKET_BURST: u32 = 100;

/// What a queue key must be: cheap to clone, hashable, printable in logs, shareable.
pub trait QueueKey: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static {}
impl<T> QueueKey for T where T: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static {}

/// How [`WorkQueue::add_rate_limited`] delays a key. The queue keeps the limiter's state
/// (failure counts, bucket tokens) per queue; this value only describes it.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum RateLimiter {
    /// Upstream `DefaultControllerRateLimiter`: the max of per-key exponential backoff
    /// (5 ms × 2^failures, capped at 1000 s) and an overall token bucket (10/s, burst 100).
    #[default]
    Default,
    /// Per-key exponential backoff only: `base × 2^failures`, capped at `max` (Job: 1 s..60 s).
    ///
    /// Unlike client-go's `ItemExponentialFailureRateLimiter` (unless
    /// [`set_ignore_early_failures`]`(false)`, `--rkcm-retry-ignores-early-failures=false`), a
    /// failure that comes before the key's current backoff has elapsed (the key was synced
    /// early, because an event added it again) does not count and keeps the pending retry time.
    /// Upstream counts it, so every unrelated event during an outage doubles the delay again
    /// and the backoff can reach its 1000 s cap within minutes (kubernetes/kubernetes#132805).
    ItemExponential { base: Duration, max: Duration },
    /// One token bucket shared by all keys ([`crate::flowcontrol::TokenBucket`]): every call
    /// takes a token and waits until it is available. An infinite `qps` never delays; a
    /// `qps <= 0` hands out the burst and then delays by the capped maximum
    /// ([`crate::flowcontrol::MAX_WAIT`]); a `burst` of 0 is treated as 1.
    Bucket { qps: f64, burst: u32 },
    /// The longest delay of all the given limiters (each one is consulted on every call).
    MaxOf(Vec<RateLimiter>),
}

/// One key's backoff: failures counted, and when the current backoff ends.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    failures: u32,
    until: Instant,
}

/// The live state of a [`RateLimiter`].
enum Limiter<K> {
    ItemExponential {
        base: Duration,
        max: Duration,
        failures: HashMap<K, Backoff>,
        /// Failures before the pending retry do not count (rkcm's default).
        ignore_early: bool,
    },
    Bucket(TokenBucket),
    MaxOf(Vec<Limiter<K>>),
}

/// rkcm's rule for every queue created afterwards (see [`RateLimiter::ItemExponential`]).
static IGNORE_EARLY_FAILURES: AtomicBool = AtomicBool::new(true);

/// Whether queues created from now on ignore failures that come before a key's pending retry
/// (`--rkcm-retry-ignores-early-failures`, on; off: client-go's counting, as upstream).
pub fn set_ignore_early_failures(on: bool) {
    IGNORE_EARLY_FAILURES.store(on, AtomicOrdering::Relaxed);
}

impl<K: QueueKey> Limiter<K> {
    fn new(config: &RateLimiter) -> Self {
        Self::with(config, IGNORE_EARLY_FAILURES.load(AtomicOrdering::Relaxed))
    }

    fn with(config: &RateLimiter, ignore_early: bool) -> Self {
        match config {
            RateLimiter::Default => Limiter::MaxOf(vec![
                Limiter::with(
                    &RateLimiter::ItemExponential {
                        base: DEFAULT_ITEM_BASE_DELAY,
                        max: DEFAULT_ITEM_MAX_DELAY,
                    },
                    ignore_early,
                ),
                Limiter::with(
                    &RateLimiter::Bucket {
                        qps: DEFAULT_BUCKET_QPS,
                        burst: DEFAULT_BUCKET_BURST,
                    },
                    ignore_early,
                ),
            ]),
            RateLimiter::ItemExponential { base, max } => Limiter::ItemExponential {
                base: *base,
                max: *max,
                failures: HashMap::new(),
                ignore_early,
            },
            RateLimiter::Bucket { qps, burst } => Limiter::Bucket(TokenBucket::new(*qps, *burst)),
            RateLimiter::MaxOf(limiters) => Limiter::MaxOf(
                limiters
                    .iter()
                    .map(|l| Limiter::with(l, ignore_early))
                    .collect(),
            ),
        }
    }

    /// Records one more failure of `key` and returns how long it should wait.
    fn when(&mut self, key: &K, now: Instant) -> Duration {
        match self {
            Limiter::ItemExponential {
                base,
                max,
                failures,
                ignore_early,
            } => {
                let backoff = failures.entry(key.clone()).or_insert(Backoff {
                    failures: 0,
                    until: now,
                });
                if *ignore_early && backoff.failures > 0 && now < backoff.until {
                    // Opted in: synced early and failed again, the pending retry stands.
                    return backoff.until - now;
                }
                let delay = exponential_delay(*base, *max, backoff.failures);
                backoff.failures = backoff.failures.saturating_add(1);
                backoff.until = now.checked_add(delay).unwrap_or(now);
                delay
            }
            Limiter::Bucket(bucket) => bucket.reserve(now),
            Limiter::MaxOf(limiters) => limiters
                .iter_mut()
                .map(|l| l.when(key, now))
                .max()
                .unwrap_or(Duration::ZERO),
        }
    }

    fn forget(&mut self, key: &K) {
        match self {
            Limiter::ItemExponential { failures, .. } => {
                failures.remove(key);
            }
            Limiter::Bucket(_) => {}
            Limiter::MaxOf(limiters) => limiters.iter_mut().for_each(|l| l.forget(key)),
        }
    }

    /// Keys with a failure history (in the per-item limiters).
    fn tracked(&self) -> usize {
        match self {
            Limiter::ItemExponential { failures, .. } => failures.len(),
            Limiter::Bucket(_) => 0,
            Limiter::MaxOf(limiters) => limiters.iter().map(Limiter::tracked).sum(),
        }
    }

    fn num_requeues(&self, key: &K) -> u32 {
        match self {
            Limiter::ItemExponential { failures, .. } => {
                failures.get(key).map_or(0, |b| b.failures)
            }
            Limiter::Bucket(_) => 0,
            Limiter::MaxOf(limiters) => limiters
                .iter()
                .map(|l| l.num_requeues(key))
                .max()
                .unwrap_or(0),
        }
    }
}

/// `base × 2^failures`, capped at `max`; overflow means "very long", hence the cap.
fn exponential_delay(base: Duration, max: Duration, failures: u32) -> Duration {
    1u32.checked_shl(failures)
        .and_then(|factor| base.checked_mul(factor))
        .map_or(max, |delay| delay.min(max))
}

/// The metric families, registered once per process; queues take their labelled children.
struct Families {
    depth: IntGaugeVec,
    adds: IntCounterVec,
    queue_duration: HistogramVec,
    work_duration: HistogramVec,
    unfinished_work: GaugeVec,
    longest_running: GaugeVec,
    retries: IntCounterVec,
}

impl Families {
    fn build() -> prometheus::Result<Self> {
        let label = &["name"];
        let buckets = prometheus::exponential_buckets(1e-8, 10.0, 10)?;
        let families = Self {
            depth: register(IntGaugeVec::new(
                Opts::new("workqueue_depth", "Current depth of workqueue"),
                label,
            )?),
            adds: register(IntCounterVec::new(
                Opts::new(
                    "workqueue_adds_total",
                    "Total number of adds handled by workqueue",
                ),
                label,
            )?),
            queue_duration: register(HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_queue_duration_seconds",
                    "How long in seconds an item stays in workqueue before being requested.",
                )
                .buckets(buckets.clone()),
                label,
            )?),
            work_duration: register(HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_work_duration_seconds",
                    "How long in seconds processing an item from workqueue takes.",
                )
                .buckets(buckets),
                label,
            )?),
            unfinished_work: register(GaugeVec::new(
                Opts::new(
                    "workqueue_unfinished_work_seconds",
                    "How many seconds of work has done that is in progress and hasn't been \
                     observed by work_duration. Large values indicate stuck threads. One can \
                     deduce the number of stuck threads by observing the rate at which this \
                     increases.",
                ),
                label,
            )?),
            longest_running: register(GaugeVec::new(
                Opts::new(
                    "workqueue_longest_running_processor_seconds",
                    "How many seconds has the longest running processor for workqueue been \
                     running.",
                ),
                label,
            )?),
            retries: register(IntCounterVec::new(
                Opts::new(
                    "workqueue_retries_total",
                    "Total number of retries handled by workqueue",
                ),
                label,
            )?),
        };
        Ok(families)
    }

    fn for_queue(&self, name: &str) -> QueueMetrics {
        let label = &[name];
        QueueMetrics {
            depth: self.depth.with_label_values(label),
            adds: self.adds.with_label_values(label),
            queue_duration: self.queue_duration.with_label_values(label),
            work_duration: self.work_duration.with_label_values(label),
            unfinished_work: self.unfinished_work.with_label_values(label),
            longest_running: self.longest_running.with_label_values(label),
            retries: self.retries.with_label_values(label),
        }
    }
}

fn families() -> Option<&'static Families> {
    static FAMILIES: OnceLock<Option<Families>> = OnceLock::new();
    crate::metrics::get_or_register(&FAMILIES, "workqueue", Families::build)
}

/// One queue's labelled metric children.
struct QueueMetrics {
    depth: IntGauge,
    adds: IntCounter,
    queue_duration: Histogram,
    work_duration: Histogram,
    unfinished_work: Gauge,
    longest_running: Gauge,
    retries: IntCounter,
}

/// The three structures of client-go `queue.go` (queue, dirty, processing) plus the metric
/// timestamps, all under one mutex.
struct State<K> {
    /// FIFO of keys ready to hand out; each is dirty and not processing.
    queue: VecDeque<K>,
    /// Keys that need processing.
    dirty: HashSet<K>,
    /// Keys handed out and not yet done.
    processing: HashSet<K>,
    shutting_down: bool,
    /// A `shut_down_with_drain` is waiting for `processing` to empty.
    drain: bool,
    /// First un-consumed add per key (metrics only).
    add_times: HashMap<K, Instant>,
    /// When each processing key was handed out (metrics only).
    processing_start: HashMap<K, Instant>,
}

/// Delayed keys: a min-heap by ready time, with at most one live entry per key. Moving a key
/// earlier pushes a new entry and leaves the old one stale; stale entries are skipped.
struct Waiting<K> {
    heap: BinaryHeap<Delayed<K>>,
    live: HashMap<K, (Instant, u64)>,
    next_seq: u64,
}

struct Delayed<K> {
    ready: Instant,
    /// Insertion order, so keys due at the same instant come out first-in first-out.
    seq: u64,
    key: K,
}

impl<K> PartialEq for Delayed<K> {
    fn eq(&self, other: &Self) -> bool {
        self.ready == other.ready && self.seq == other.seq
    }
}
impl<K> Eq for Delayed<K> {}
impl<K> PartialOrd for Delayed<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Delayed<K> {
    // Reversed: BinaryHeap is a max-heap and the earliest entry must be on top.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .ready
            .cmp(&self.ready)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl<K: QueueKey> Waiting<K> {
    fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            live: HashMap::new(),
            next_seq: 0,
        }
    }

    fn insert(&mut self, key: K, ready: Instant) {
        if let Some((current, _)) = self.live.get(&key)
            && *current <= ready
        {
            return;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.live.insert(key.clone(), (ready, seq));
        self.heap.push(Delayed { ready, seq, key });
    }

    /// Removes the entries due at `now`; returns them and the ready time of the next one.
    fn pop_due(&mut self, now: Instant) -> (Vec<K>, Option<Instant>) {
        let mut due = Vec::new();
        while let Some(head) = self.heap.peek() {
            let live = self
                .live
                .get(&head.key)
                .is_some_and(|&(_, seq)| seq == head.seq);
            if live && head.ready > now {
                return (due, Some(head.ready));
            }
            if let Some(entry) = self.heap.pop()
                && live
            {
                self.live.remove(&entry.key);
                due.push(entry.key);
            }
        }
        (due, None)
    }
}

struct Inner<K> {
    name: String,
    state: Mutex<State<K>>,
    /// A key became available or the queue shut down.
    ready: Notify,
    /// `processing` became empty or the drain was cancelled.
    idle: Notify,
    waiting: Mutex<Waiting<K>>,
    /// Wakes the background task: new delayed entry or shutdown. Held outside `Inner` so the
    /// task can wait on it without keeping the queue alive.
    wake_driver: Arc<Notify>,
    limiter: Mutex<Limiter<K>>,
    metrics: Option<QueueMetrics>,
    driver: Mutex<Option<AbortHandle>>,
}

impl<K: QueueKey> Inner<K> {
    /// The per-key maps, for [`tracked`]: every key in them leaves by itself once its object
    /// is gone (handed out, synced, found deleted, forgotten); a delayed key only at its due
    /// time.
    fn sizes(&self, out: &mut Vec<tracked::Size>) {
        let (pending, processing, timestamps) = {
            let state = self.state.lock();
            (
                state.dirty.len(),
                state.processing.len(),
                state.add_times.len() + state.processing_start.len(),
            )
        };
        out.push(tracked::Size::object("queue_pending", pending));
        out.push(tracked::Size::object("queue_processing", processing));
        out.push(tracked::Size::object("queue_timestamps", timestamps));
        out.push(tracked::Size::object(
            "queue_failures",
            self.limiter.lock().tracked(),
        ));
        out.push(tracked::Size::time(
            "queue_waiting",
            self.waiting.lock().live.len(),
        ));
    }

    fn add(&self, key: K) {
        let mut state = self.state.lock();
        if state.shutting_down || state.dirty.contains(&key) {
            return;
        }
        if let Some(metrics) = &self.metrics {
            metrics.adds.inc();
            metrics.depth.inc();
            state
                .add_times
                .entry(key.clone())
                .or_insert_with(Instant::now);
        }
        state.dirty.insert(key.clone());
        // The worker holding it re-queues it in `done`; pushing now would let a second
        // worker process it concurrently.
        if state.processing.contains(&key) {
            return;
        }
        state.queue.push_back(key);
        drop(state);
        self.ready.notify_one();
    }

    fn update_unfinished_work(&self, metrics: &QueueMetrics, now: Instant) {
        let state = self.state.lock();
        let mut total = 0.0;
        let mut longest = 0.0_f64;
        for started in state.processing_start.values() {
            let running = now.saturating_duration_since(*started).as_secs_f64();
            total += running;
            longest = longest.max(running);
        }
        drop(state);
        metrics.unfinished_work.set(total);
        metrics.longest_running.set(longest);
    }
}

impl<K> Drop for Inner<K> {
    fn drop(&mut self) {
        if let Some(driver) = self.driver.get_mut().take() {
            driver.abort();
        }
    }
}

/// The background task of one queue: feeds due delayed keys into the queue and refreshes the
/// in-progress gauges. Holds only a weak reference so an abandoned queue can be dropped.
async fn drive<K: QueueKey>(queue: Weak<Inner<K>>, wake: Arc<Notify>) {
    let mut next_gauge_update = Instant::now() + UNFINISHED_WORK_UPDATE_PERIOD;
    loop {
        let Some(inner) = queue.upgrade() else { return };
        if inner.state.lock().shutting_down {
            return;
        }
        let now = Instant::now();
        let (due, next_ready) = inner.waiting.lock().pop_due(now);
        for key in due {
            inner.add(key);
        }
        let heartbeat = now + MAX_DELAY_WAIT;
        let mut deadline = next_ready.map_or(heartbeat, |ready| ready.min(heartbeat));
        if let Some(metrics) = &inner.metrics {
            if now >= next_gauge_update {
                inner.update_unfinished_work(metrics, now);
                next_gauge_update = now + UNFINISHED_WORK_UPDATE_PERIOD;
            }
            deadline = deadline.min(next_gauge_update);
        }
        drop(inner);
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {}
            () = wake.notified() => {}
        }
    }
}

/// A rate-limiting, delaying, de-duplicating work queue (client-go `TypedRateLimitingInterface`).
/// Clones share the queue.
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K: QueueKey> fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.lock();
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .field("queued", &state.queue.len())
            .field("processing", &state.processing.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

impl<K: QueueKey> WorkQueue<K> {
    /// Creates a queue. `name` is the `name` label of its metrics (upstream queue names); an
    /// empty name exports no metrics. Safe to call outside a tokio runtime.
    pub fn new(name: &str, limiter: RateLimiter) -> Self {
        let metrics = if name.is_empty() {
            None
        } else {
            families().map(|f| f.for_queue(name))
        };
        let queue = Self {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    shutting_down: false,
                    drain: false,
                    add_times: HashMap::new(),
                    processing_start: HashMap::new(),
                }),
                ready: Notify::new(),
                idle: Notify::new(),
                waiting: Mutex::new(Waiting::new()),
                wake_driver: Arc::new(Notify::new()),
                limiter: Mutex::new(Limiter::new(&limiter)),
                metrics,
                driver: Mutex::new(None),
            }),
        };
        queue.ensure_driver();
        if !name.is_empty() {
            tracked::track(name, &queue.inner, Inner::sizes);
        }
        queue
    }

    /// The metrics label of this queue ("" when it exports none).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Marks `key` as needing processing. No-op if it already waits or the queue shuts down.
    pub fn add(&self, key: K) {
        self.inner.add(key);
    }

    /// Adds `key` once `delay` has passed (immediately for a zero delay). Every call counts
    /// as a retry in the metrics.
    pub fn add_after(&self, key: K, delay: Duration) {
        if self.is_shutting_down() {
            return;
        }
        if let Some(metrics) = &self.inner.metrics {
            metrics.retries.inc();
        }
        if delay.is_zero() {
            self.inner.add(key);
            return;
        }
        let now = Instant::now();
        // An absurd delay means "not in this process's lifetime", not a panic.
        let ready = now
            .checked_add(delay)
            .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 24 * 3600));
        self.inner.waiting.lock().insert(key, ready);
        self.ensure_driver();
        self.inner.wake_driver.notify_one();
    }

    /// Adds `key` after the delay the rate limiter assigns it, counting one more failure.
    pub fn add_rate_limited(&self, key: K) {
        let delay = self.inner.limiter.lock().when(&key, Instant::now());
        self.add_after(key, delay);
    }

    /// Clears the failure history of `key` (call after a successful sync).
    pub fn forget(&self, key: &K) {
        self.inner.limiter.lock().forget(key);
    }

    /// How many times `key` has been rate-limited since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.inner.limiter.lock().num_requeues(key)
    }

    /// Waits for a key to process. Returns `None` once the queue is shut down and no key is
    /// left. The caller owns the key until it calls [`WorkQueue::done`].
    pub async fn get(&self) -> Option<K> {
        self.ensure_driver();
        loop {
            // Registered before checking so a wake-up between check and await is not lost.
            let notified = self.inner.ready.notified();
            {
                let mut guard = self.inner.state.lock();
                let state = &mut *guard;
                if let Some(key) = state.queue.pop_front() {
                    if let Some(metrics) = &self.inner.metrics {
                        let now = Instant::now();
                        metrics.depth.dec();
                        if let Some(added) = state.add_times.remove(&key) {
                            metrics
                                .queue_duration
                                .observe(now.saturating_duration_since(added).as_secs_f64());
                        }
                        state.processing_start.insert(key.clone(), now);
                    }
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    return Some(key);
                }
                if state.shutting_down {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Ends processing of `key`; if it was added meanwhile it is queued again now.
    pub fn done(&self, key: &K) {
        let mut guard = self.inner.state.lock();
        let state = &mut *guard;
        // Guarding on `processing` keeps a stray `done` from queueing a key twice.
        if !state.processing.remove(key) {
            return;
        }
        if let Some(metrics) = &self.inner.metrics
            && let Some(started) = state.processing_start.remove(key)
        {
            metrics.work_duration.observe(
                Instant::now()
                    .saturating_duration_since(started)
                    .as_secs_f64(),
            );
        }
        let requeued = state.dirty.contains(key);
        if requeued {
            state.queue.push_back(key.clone());
        }
        let idle = state.processing.is_empty();
        drop(guard);
        if requeued {
            self.inner.ready.notify_one();
        }
        if idle {
            self.inner.idle.notify_waiters();
        }
    }

    /// Number of keys ready to be handed out (informational).
    pub fn len(&self) -> usize {
        self.inner.state.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting adds and wakes all waiting workers; they drain what is queued and then
    /// get `None`. Cancels a pending [`WorkQueue::shut_down_with_drain`] wait.
    pub fn shut_down(&self) {
        {
            let mut state = self.inner.state.lock();
            state.drain = false;
            state.shutting_down = true;
        }
        self.wake_all();
    }

    /// Like [`WorkQueue::shut_down`], then waits until no key is being processed. Every key
    /// handed out must eventually be `done`, or this waits forever (a later `shut_down`
    /// ends the wait).
    pub async fn shut_down_with_drain(&self) {
        {
            let mut state = self.inner.state.lock();
            state.drain = true;
            state.shutting_down = true;
        }
        self.wake_all();
        loop {
            let idle = self.inner.idle.notified();
            {
                let state = self.inner.state.lock();
                if state.processing.is_empty() || !state.drain {
                    return;
                }
            }
            idle.await;
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.inner.state.lock().shutting_down
    }

    fn wake_all(&self) {
        self.inner.ready.notify_waiters();
        self.inner.idle.notify_waiters();
        self.inner.wake_driver.notify_one();
    }

    /// Starts the background task if it is not running and a runtime is at hand. Also
    /// restarts it if its runtime went away while the queue lived on.
    fn ensure_driver(&self) {
        let mut driver = self.inner.driver.lock();
        if driver.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        if self.inner.state.lock().shutting_down {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let task = runtime.spawn(drive(
            Arc::downgrade(&self.inner),
            Arc::clone(&self.inner.wake_driver),
        ));
        *driver = Some(task.abort_handle());
    }
}

/// Runs the standard controller worker loop on `workers` tasks and returns when all of them
/// have exited, i.e. after the queue was shut down and drained.
///
/// Each worker: take a key, run `sync`; on success forget the key's failures, on error log it
/// and requeue rate-limited; then mark the key done. A panic inside `sync` is caught, logged
/// and handled like an error, so one bad object cannot take the process down. With
/// `workers == 0` nothing is processed and this returns at once.
pub async fn run_workers<K, F, Fut, E>(queue: WorkQueue<K>, workers: usize, sync: F)
where
    K: QueueKey,
    F: Fn(K) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    run_workers_with(queue, workers, RetryPolicy::default(), sync).await;
}

/// How a worker treats a failed sync (upstream's per-controller `handleErr`).
pub struct RetryPolicy<E> {
    /// Consecutive requeues of one key before it is dropped (forgotten until its next event);
    /// `None`: retried for ever with backoff.
    pub max_retries: Option<u32>,
    /// Errors that are not retried at all (e.g. a terminating namespace).
    pub give_up: fn(&E) -> bool,
    /// Errors that are an expected requeue in normal operation, not a failure an operator
    /// should look at: a cache that has not caught up with the controller's own write, a 409
    /// conflict on a write made from a stale copy. They are retried exactly like the others
    /// (backoff, `max_retries`) but logged at debug instead of WARN; the controller counts
    /// them in its own metrics.
    pub quiet: fn(&E) -> bool,
}

impl<E> Default for RetryPolicy<E> {
    fn default() -> Self {
        Self {
            max_retries: None,
            give_up: |_| false,
            quiet: |_| false,
        }
    }
}

impl<E> RetryPolicy<E> {
    /// Drops a key after `n` consecutive requeues.
    #[must_use]
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = Some(n);
        self
    }

    /// Does not retry errors for which `f` holds.
    #[must_use]
    pub fn give_up_on(mut self, f: fn(&E) -> bool) -> Self {
        self.give_up = f;
        self
    }

    /// Logs errors for which `f` holds at debug: expected requeues.
    #[must_use]
    pub fn quiet_on(mut self, f: fn(&E) -> bool) -> Self {
        self.quiet = f;
        self
    }
}

impl<E> Clone for RetryPolicy<E> {
    fn clone(&self) -> Self {
        Self {
            max_retries: self.max_retries,
            give_up: self.give_up,
            quiet: self.quiet,
        }
    }
}

/// What a worker does with one failed sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Not retried (debug log).
    GiveUp,
    /// Retried with backoff, logged at debug: an expected requeue.
    RequeueQuietly,
    /// Retried with backoff, logged as a warning.
    Requeue,
    /// Retried too often: forgotten until the key's next event (warning).
    Drop,
}

impl<E> RetryPolicy<E> {
    /// Whether a first failure with `error` is retried and logged at debug only (for tests of
    /// a controller's policy).
    pub fn requeues_quietly(&self, error: &E) -> bool {
        self.on_failure(error, 0) == Failure::RequeueQuietly
    }

    /// Classifies a failed sync of a key that has been requeued `requeues` times in a row.
    fn on_failure(&self, error: &E, requeues: u32) -> Failure {
        if (self.give_up)(error) {
            Failure::GiveUp
        } else if self.max_retries.is_some_and(|max| requeues >= max) {
            Failure::Drop
        } else if (self.quiet)(error) {
            Failure::RequeueQuietly
        } else {
            Failure::Requeue
        }
    }
}

/// [`run_workers`] with a [`RetryPolicy`].
pub async fn run_workers_with<K, F, Fut, E>(
    queue: WorkQueue<K>,
    workers: usize,
    policy: RetryPolicy<E>,
    sync: F,
) where
    K: QueueKey,
    F: Fn(K) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    let mut tasks = JoinSet::new();
    for _ in 0..workers {
        tasks.spawn(worker(queue.clone(), policy.clone(), sync.clone()));
    }
    while let Some(result) = tasks.join_next().await {
        if let Err(error) = result {
            tracing::error!(queue = queue.name(), %error, "work queue worker ended abnormally");
        }
    }
}

async fn worker<K, F, Fut, E>(queue: WorkQueue<K>, policy: RetryPolicy<E>, sync: F)
where
    K: QueueKey,
    F: Fn(K) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: fmt::Display,
{
    while let Some(key) = queue.get().await {
        // Calling `sync` inside the guarded future also catches a panic while building it.
        let outcome = AssertUnwindSafe(async { sync(key.clone()).await })
            .catch_unwind()
            .await;
        match outcome {
            Ok(Ok(())) => queue.forget(&key),
            Ok(Err(error)) => match policy.on_failure(&error, queue.num_requeues(&key)) {
                Failure::GiveUp => {
                    tracing::debug!(queue = queue.name(), ?key, %error, "sync failed, not retrying");
                    queue.forget(&key);
                }
                Failure::RequeueQuietly => {
                    tracing::debug!(queue = queue.name(), ?key, %error, "sync deferred, requeuing with backoff");
                    queue.add_rate_limited(key.clone());
                }
                Failure::Requeue => {
                    tracing::warn!(queue = queue.name(), ?key, %error, "sync failed, requeuing with backoff");
                    queue.add_rate_limited(key.clone());
                }
                Failure::Drop => {
                    tracing::warn!(queue = queue.name(), ?key, %error, "sync failed too often, dropping the key until its next change");
                    queue.forget(&key);
                }
            },
            Err(panic) => {
                tracing::error!(
                    queue = queue.name(),
                    ?key,
                    panic = panic_message(panic.as_ref()),
                    "sync panicked, requeuing with backoff"
                );
                queue.add_rate_limited(key.clone());
            }
        }
        queue.done(&key);
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(message) = payload.downcast_ref::<&str>() {
        message
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message
    } else {
        "non-string panic payload"
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};

    use tokio::sync::mpsc;
    use tokio::time::{sleep, timeout};

    use super::*;

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
            IGNORE_EARLY_FAILURES.load(AtomicOrdering::Relaxed),
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
        let waited = timeout(Duration::from_secs(5), async {
            while longest.get() < 2.0 {
                sleep(ms(100)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "longest running processor gauge never reached 2 s"
        );
        assert!(
            unfinished.get() >= longest.get() + 1.0,
            "both keys count as unfinished"
        );

        queue.done(&k("a"));
        queue.done(&k("b"));
        let waited = timeout(Duration::from_secs(5), async {
            while unfinished.get() != 0.0 || longest.get() != 0.0 {
                sleep(ms(100)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "gauges not reset after done");
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

    /// Records the level and message of every event logged on this thread.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<(tracing::Level, String)>>>);

    struct MessageOf(String);

    impl tracing::field::Visit for MessageOf {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
            if field.name() == "message" {
                self.0 = format!("{value:?}");
            }
        }
    }

    impl tracing::Subscriber for Captured {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut message = MessageOf(String::new());
            event.record(&mut message);
            self.0.lock().push((*event.metadata().level(), message.0));
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
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
        let logged = captured.0.lock().clone();
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
}
