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
//! Deviation from upstream: [`run_workers`](crate::queue::run_workers) catches a panic inside one sync, logs it and
//! requeues the key rate-limited, instead of crashing the process as upstream's `HandleCrash`
//! (`staging/src/k8s.io/apimachinery/pkg/util/runtime/runtime.go`) does.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::queue::limiter::{Limiter, RateLimiter};
use crate::queue::metrics::{QueueMetrics, families};
use crate::tracked;

/// Upper bound on how long the delay task sleeps without re-checking the heap (upstream
/// `maxWait`), a safety net against a missed wake-up.
const MAX_DELAY_WAIT: Duration = Duration::from_secs(10);

/// How often the in-progress work gauges are refreshed (upstream `unfinishedWorkUpdatePeriod`).
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// What a queue key must be: cheap to clone, hashable, printable in logs, shareable.
pub trait QueueKey: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static {}
impl<T> QueueKey for T where T: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static {}

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
    /// Rounds of the background task (tests: an idle queue wakes only on its heartbeat).
    #[cfg(test)]
    driver_rounds: std::sync::atomic::AtomicU64,
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
        tracing::trace!(queue = self.name.as_str(), ?key, "queued");
        state.queue.push_back(key);
        drop(state);
        self.ready.notify_one();
    }

    /// Refreshes the in-progress gauges; whether a key is being processed.
    fn update_unfinished_work(&self, metrics: &QueueMetrics, now: Instant) -> bool {
        let state = self.state.lock();
        let busy = !state.processing_start.is_empty();
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
        busy
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
///
/// The gauges are refreshed every [`UNFINISHED_WORK_UPDATE_PERIOD`] while a key is processed
/// and once more after the last one is done (to zero); an idle queue does not wake for them
/// (a manager has a dozen queues, idle most of the time). [`WorkQueue::get`] wakes the task
/// when processing starts.
async fn drive<K: QueueKey>(queue: Weak<Inner<K>>, wake: Arc<Notify>) {
    let mut next_gauge_update = Instant::now() + UNFINISHED_WORK_UPDATE_PERIOD;
    // The gauges last set show work in progress.
    let mut gauges_busy = false;
    loop {
        let Some(inner) = queue.upgrade() else { return };
        #[cfg(test)]
        inner
            .driver_rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let busy = {
            let state = inner.state.lock();
            if state.shutting_down {
                return;
            }
            !state.processing_start.is_empty()
        };
        let now = Instant::now();
        let (due, next_ready) = inner.waiting.lock().pop_due(now);
        for key in due {
            inner.add(key);
        }
        let heartbeat = now + MAX_DELAY_WAIT;
        let mut deadline = next_ready.map_or(heartbeat, |ready| ready.min(heartbeat));
        if let Some(metrics) = &inner.metrics
            && (busy || gauges_busy)
        {
            if now >= next_gauge_update {
                gauges_busy = inner.update_unfinished_work(metrics, now);
                next_gauge_update = now + UNFINISHED_WORK_UPDATE_PERIOD;
            }
            if busy || gauges_busy {
                deadline = deadline.min(next_gauge_update);
            }
        }
        drop(inner);
        tokio::select! {
            biased;
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
                #[cfg(test)]
                driver_rounds: std::sync::atomic::AtomicU64::new(0),
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
                let mut gauges_start = false;
                if let Some(key) = state.queue.pop_front() {
                    if let Some(metrics) = &self.inner.metrics {
                        let now = Instant::now();
                        metrics.depth.dec();
                        if let Some(added) = state.add_times.remove(&key) {
                            metrics
                                .queue_duration
                                .observe(now.saturating_duration_since(added).as_secs_f64());
                        }
                        // The first key in progress: the background task refreshes the
                        // gauges from now on.
                        gauges_start = state.processing_start.is_empty();
                        state.processing_start.insert(key.clone(), now);
                    }
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    drop(guard);
                    if gauges_start {
                        self.inner.wake_driver.notify_one();
                    }
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
    /// Rounds its background task ran so far.
    #[cfg(test)]
    pub(super) fn driver_rounds(&self) -> u64 {
        self.inner
            .driver_rounds
            .load(std::sync::atomic::Ordering::Relaxed)
    }

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
