//! Status writes that wait for Job creation.
//!
//! Upstream ends every sync that changed anything with a `cronjobs/status` PUT, on the same
//! client (and token bucket) as the Job creates. When many CronJobs share a schedule, the
//! status writes of the first CronJobs then hold back the Job creates of the later ones: at
//! `--kube-api-qps=100` 500 CronJobs on `*/1` need 1 000 requests per minute and the last Job
//! is created about eight seconds late. rkcm hands the status write of a sync to this module
//! instead, which sends it as soon as no sync is running and no key waits in the queue (at
//! the latest [`MAX_DEFER`] after the sync), so every due Job is created first.
//!
//! What stays as upstream: one status write per sync that changed something, with the
//! resourceVersion the sync read (a conflict retries the key with backoff, as a failed write
//! does upstream); a CronJob is never synced while its own status write is outstanding —
//! its syncs are skipped until the write is done and the cache shows a newer version (or
//! [`WRITTEN_GRACE`] has passed), so no sync acts on the status the write replaces. A crash
//! before the write leaves what a crash between create and status write leaves upstream: the
//! next sync finds the Job and puts it back into `status.active`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::batch::v1::CronJob;
use parking_lot::Mutex;
use rkcm_runtime::queue::WorkQueue;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::reconcile::CronJobApi;

/// The longest a status write waits for the controller to be idle.
pub const MAX_DEFER: Duration = Duration::from_secs(5);

/// After a write, how long the CronJob's syncs wait for the cache to show the new version
/// before they go ahead anyway.
pub const WRITTEN_GRACE: Duration = Duration::from_secs(10);

/// Where one CronJob's status write stands.
#[derive(Debug)]
enum Entry {
    /// Waiting for a writer.
    Queued {
        status: Box<CronJob>,
        since: Instant,
    },
    /// A writer sends it now.
    Writing,
    /// Sent; the cache still had `base_rv` when the sync computed it.
    Written { at: Instant },
}

#[derive(Debug)]
struct Pending {
    entry: Entry,
    /// The CronJob's resourceVersion the sync read.
    base_rv: Option<String>,
}

/// What a sync of a key must do given the key's outstanding status write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// No write outstanding, or it is done and the cache moved on: sync.
    Proceed,
    /// A write is queued, in flight, or done but not yet in the cache: skip this sync (the
    /// write's outcome enqueues the key again).
    Skip,
}

/// The outstanding status writes and the count of running syncs.
pub struct Deferred {
    pending: Mutex<HashMap<String, Pending>>,
    tx: mpsc::UnboundedSender<String>,
    rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>,
    in_flight: AtomicUsize,
    idle: Notify,
    /// Consecutive failed status writes per CronJob. The sync before each write succeeds and
    /// resets the queue's backoff for the key, so a failed write backs off by this count
    /// instead (the queue's per-item exponential delay, as upstream's failed sync would).
    failures: Mutex<HashMap<String, u32>>,
}

/// The wait before retrying a CronJob after its `failures`-th consecutive failed status
/// write: the work queue's default per-item backoff (5 ms doubling, at most 1000 s).
pub fn write_retry_delay(failures: u32) -> Duration {
    use rkcm_runtime::queue::{DEFAULT_ITEM_BASE_DELAY, DEFAULT_ITEM_MAX_DELAY};
    DEFAULT_ITEM_BASE_DELAY
        .saturating_mul(1u32 << failures.saturating_sub(1).min(20))
        .min(DEFAULT_ITEM_MAX_DELAY)
}

/// Counts a running sync; dropping it ends the count (and may wake the writers).
pub struct SyncGuard<'a>(&'a Deferred);

impl Drop for SyncGuard<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Default for Deferred {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            pending: Mutex::new(HashMap::new()),
            tx,
            rx: tokio::sync::Mutex::new(rx),
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl Deferred {
    /// Marks a sync as running until the guard drops.
    pub fn enter(&self) -> SyncGuard<'_> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        SyncGuard(self)
    }

    /// Whether a sync of `key`, whose cached CronJob has `cache_rv`, may run now.
    pub fn gate(&self, key: &str, cache_rv: Option<&str>, now: Instant) -> Gate {
        let mut pending = self.pending.lock();
        let Some(p) = pending.get(key) else {
            return Gate::Proceed;
        };
        match p.entry {
            Entry::Queued { .. } | Entry::Writing => Gate::Skip,
            Entry::Written { at } => {
                if p.base_rv.as_deref() != cache_rv || now.duration_since(at) >= WRITTEN_GRACE {
                    pending.remove(key);
                    Gate::Proceed
                } else {
                    Gate::Skip
                }
            }
        }
    }

    /// The CronJob of `key` is gone: drops a finished write's entry, which only a sync of a
    /// CronJob still in the cache would otherwise drop. A queued or running write keeps its
    /// entry: its outcome (refused for a deleted object, or written and synced again after
    /// [`WRITTEN_GRACE`]) ends it.
    pub fn forget(&self, key: &str) {
        self.failures.lock().remove(key);
        let mut pending = self.pending.lock();
        if matches!(
            pending.get(key),
            Some(Pending {
                entry: Entry::Written { .. },
                ..
            })
        ) {
            pending.remove(key);
        }
    }

    /// Keys with a status write queued, running or not yet seen in the cache
    /// (`rkcm_runtime::tracked`).
    pub fn len(&self) -> usize {
        self.pending.lock().len()
    }

    /// Hands over the status a sync of `key` computed from the version `base_rv`.
    pub fn push(&self, key: String, status: CronJob, base_rv: Option<String>, now: Instant) {
        self.pending.lock().insert(
            key.clone(),
            Pending {
                entry: Entry::Queued {
                    status: Box::new(status),
                    since: now,
                },
                base_rv,
            },
        );
        // The receiver lives as long as `self`: sending cannot fail while anyone pushes.
        let _ = self.tx.send(key);
    }

    /// Whether the controller has nothing else to do: no sync runs and no key waits.
    fn is_idle(&self, queue: &WorkQueue<String>) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0 && queue.is_empty()
    }

    /// Waits until the controller is idle or `deadline` passes.
    async fn wait_idle(&self, queue: &WorkQueue<String>, deadline: Instant) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_idle(queue) {
                return;
            }
            tokio::select! {
                biased;
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => return,
                // The queue may empty without a sync ending (a key handed to no worker yet
                // is counted neither way for long): look again shortly.
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    }

    /// Marks the queued write of `key`, if it is still queued, as being written and returns
    /// its status.
    fn take(&self, key: &str) -> Option<(Box<CronJob>, Instant)> {
        let mut pending = self.pending.lock();
        let p = pending.get_mut(key)?;
        if !matches!(p.entry, Entry::Queued { .. }) {
            return None;
        }
        match std::mem::replace(&mut p.entry, Entry::Writing) {
            Entry::Queued { status, since } => Some((status, since)),
            _ => None,
        }
    }

    /// The next queued write: its key and status, marked as being written. `None` once every
    /// sender is gone.
    async fn next(&self) -> Option<(String, Box<CronJob>, Instant)> {
        loop {
            let key = self.rx.lock().await.recv().await?;
            if let Some((status, since)) = self.take(&key) {
                return Some((key, status, since));
            }
        }
    }

    /// Like [`Deferred::next`], without waiting: `None` when nothing is queued now.
    async fn next_now(&self) -> Option<(String, Box<CronJob>)> {
        loop {
            let key = self.rx.lock().await.try_recv().ok()?;
            if let Some((status, _)) = self.take(&key) {
                return Some((key, status));
            }
        }
    }

    /// Sends one status write and records its outcome.
    async fn write<A: CronJobApi>(
        &self,
        api: &A,
        queue: &WorkQueue<String>,
        key: String,
        status: &CronJob,
    ) {
        match api.update_status(status).await {
            Ok(_) => {
                self.failures.lock().remove(&key);
                if let Some(p) = self.pending.lock().get_mut(&key) {
                    p.entry = Entry::Written { at: Instant::now() };
                }
                // The cache's update event syncs the key; this covers a write that changed
                // nothing (no event).
                queue.add_after(key, WRITTEN_GRACE);
            }
            Err(error) => {
                tracing::debug!(cronjob = %key, %error, "unable to update status for cronjob");
                self.pending.lock().remove(&key);
                let failures = {
                    let mut all = self.failures.lock();
                    let n = all.entry(key.clone()).or_insert(0);
                    *n = n.saturating_add(1);
                    *n
                };
                queue.add_after(key, write_retry_delay(failures));
            }
        }
    }

    /// One writer: sends queued status writes when the controller is idle. Once `stop` is
    /// cancelled (a graceful shutdown, which still holds the lease; losing the lease ends the
    /// process without it) it sends what is queued at once and returns, so the drain loses no
    /// status of a Job it created.
    pub async fn run_writer<A: CronJobApi>(
        self: Arc<Self>,
        api: Arc<A>,
        queue: WorkQueue<String>,
        stop: CancellationToken,
    ) {
        loop {
            let next = tokio::select! {
                biased;
                () = stop.cancelled() => break,
                next = self.next() => next,
            };
            let Some((key, status, since)) = next else {
                return;
            };
            tokio::select! {
                biased;
                () = stop.cancelled() => {}
                () = self.wait_idle(&queue, since + MAX_DEFER) => {}
            }
            self.write(api.as_ref(), &queue, key, &status).await;
        }
        while let Some((key, status)) = self.next_now().await {
            self.write(api.as_ref(), &queue, key, &status).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cj(rv: &str) -> CronJob {
        let mut cj = CronJob::default();
        cj.metadata.name = Some("c".into());
        cj.metadata.namespace = Some("ns".into());
        cj.metadata.resource_version = Some(rv.into());
        cj
    }

    #[tokio::test(start_paused = true)]
    async fn syncs_wait_for_the_write_and_the_cache() {
        let d = Deferred::default();
        let t0 = Instant::now();
        assert_eq!(d.gate("ns/c", Some("5"), t0), Gate::Proceed);
        d.push("ns/c".into(), cj("5"), Some("5".into()), t0);
        assert_eq!(d.gate("ns/c", Some("5"), t0), Gate::Skip, "queued");
        assert_eq!(d.gate("ns/other", Some("5"), t0), Gate::Proceed);
        let (key, status, _) = d.next().await.expect("queued write");
        assert_eq!(key, "ns/c");
        assert_eq!(status.metadata.resource_version.as_deref(), Some("5"));
        assert_eq!(d.gate("ns/c", Some("6"), t0), Gate::Skip, "in flight");
        d.pending.lock().get_mut("ns/c").expect("pending").entry = Entry::Written { at: t0 };
        assert_eq!(
            d.gate("ns/c", Some("5"), t0 + Duration::from_secs(1)),
            Gate::Skip,
            "written, cache not there yet"
        );
        assert_eq!(
            d.gate("ns/c", Some("6"), t0 + Duration::from_secs(1)),
            Gate::Proceed,
            "cache moved on"
        );
        assert_eq!(d.gate("ns/c", Some("5"), t0), Gate::Proceed, "entry gone");
    }

    /// A deleted CronJob's finished write leaves nothing behind; a queued one stays until its
    /// write ends.
    #[test]
    fn failed_writes_back_off_like_the_queue() {
        assert_eq!(write_retry_delay(1), Duration::from_millis(5));
        assert_eq!(write_retry_delay(2), Duration::from_millis(10));
        assert_eq!(write_retry_delay(11), Duration::from_millis(5 * 1024));
        assert_eq!(write_retry_delay(40), Duration::from_secs(1000));
    }

    #[tokio::test(start_paused = true)]
    async fn forgetting_a_deleted_cronjob_drops_only_a_finished_write() {
        let d = Deferred::default();
        let t0 = Instant::now();
        d.push("ns/c".into(), cj("5"), Some("5".into()), t0);
        d.forget("ns/c");
        assert_eq!(d.len(), 1, "queued: its write decides");
        let _ = d.next().await.expect("queued write");
        d.forget("ns/c");
        assert_eq!(d.len(), 1, "in flight: its outcome decides");
        d.pending.lock().get_mut("ns/c").expect("pending").entry = Entry::Written { at: t0 };
        d.forget("ns/c");
        assert_eq!(d.len(), 0);
    }

    /// A graceful shutdown sends the queued writes at once instead of dropping them.
    #[tokio::test(start_paused = true)]
    async fn shutdown_flushes_queued_writes() {
        use rkcm_testkit::fake_api::FakeApi;
        let fake = FakeApi::new();
        fake.echo_writes();
        let d = Arc::new(Deferred::default());
        let queue: WorkQueue<String> =
            WorkQueue::new("t", rkcm_runtime::queue::RateLimiter::Default);
        let t0 = Instant::now();
        for name in ["a", "b", "c"] {
            let mut status = cj("5");
            status.metadata.name = Some(name.into());
            d.push(format!("ns/{name}"), status, Some("5".into()), t0);
        }
        // A sync that never ends keeps the controller busy: without the shutdown the writes
        // would wait for MAX_DEFER.
        let _busy = d.enter();
        let stop = CancellationToken::new();
        let api = Arc::new(crate::reconcile::KubeApi::new(fake.client()));
        let writer = tokio::spawn(d.clone().run_writer(api, queue, stop.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(fake.requests_to("PUT", "**/status").len(), 0, "held back");
        stop.cancel();
        tokio::time::timeout(Duration::from_millis(100), writer)
            .await
            .expect("the writer returns after flushing")
            .expect("no panic");
        assert_eq!(fake.requests_to("PUT", "**/status").len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_written_entry_expires_without_a_cache_update() {
        let d = Deferred::default();
        let t0 = Instant::now();
        d.push("ns/c".into(), cj("5"), Some("5".into()), t0);
        d.next().await.expect("queued write");
        d.pending.lock().get_mut("ns/c").expect("pending").entry = Entry::Written { at: t0 };
        assert_eq!(d.gate("ns/c", Some("5"), t0 + WRITTEN_GRACE), Gate::Proceed);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_means_no_running_sync_and_an_empty_queue() {
        let d = Deferred::default();
        let queue: WorkQueue<String> =
            WorkQueue::new("t", rkcm_runtime::queue::RateLimiter::Default);
        assert!(d.is_idle(&queue));
        let guard = d.enter();
        assert!(!d.is_idle(&queue));
        drop(guard);
        assert!(d.is_idle(&queue));
        queue.add("ns/x".into());
        assert!(!d.is_idle(&queue));
        // A busy controller holds the write back until the deadline at most.
        let start = Instant::now();
        d.wait_idle(&queue, start + MAX_DEFER).await;
        assert_eq!(start.elapsed(), MAX_DEFER);
        // A sync ending wakes the waiter at once.
        let _ = queue.get().await;
        let guard = d.enter();
        let start = Instant::now();
        let wait = d.wait_idle(&queue, start + MAX_DEFER);
        tokio::pin!(wait);
        assert!(
            tokio::time::timeout(Duration::from_millis(10), &mut wait)
                .await
                .is_err(),
            "busy"
        );
        drop(guard);
        tokio::time::timeout(Duration::from_millis(1), wait)
            .await
            .expect("woken when the sync ends");
    }
}
