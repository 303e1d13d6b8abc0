//! The controller worker loop: workers that take keys from a queue, sync them, and forget or
//! requeue them by a retry policy.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tokio::task::JoinSet;

use crate::queue::workqueue::{QueueKey, WorkQueue};

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
pub(super) enum Failure {
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
    pub(super) fn on_failure(&self, error: &E, requeues: u32) -> Failure {
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
