//! What the informers' list+watch streams share (the streams themselves are
//! `crate::api::protobuf::watcher`'s, in protobuf or JSON): the retry backoff, the scope
//! filter and the logging of list/watch errors.

use std::time::Duration;

use kube::Resource;
use kube::runtime::watcher;
use tracing::{debug, info, warn};

use crate::error::is_gone;

/// LIST page size, as client-go's pager.
pub(super) const PAGE_SIZE: u32 = 500;
/// Watch `timeoutSeconds` is drawn from this range per informer so that the informers of a
/// process (and of many processes) do not all reconnect at once (client-go: [5m, 10m)).
pub(super) const WATCH_TIMEOUT_SECS: std::ops::Range<u32> = 300..600;
/// Pause before rebuilding the list+watch stream should it ever end.
pub(super) const RESTART_DELAY: Duration = Duration::from_secs(1);
/// First wait before retrying a failed list or watch (kube's and client-go's: 0.8 s).
pub(super) const RETRY_FIRST: Duration = Duration::from_millis(800);
/// Longest wait between two retries. kube's and client-go's default is 30 s, so after an API
/// server outage of half a minute or more an informer may sit out another 30 s (plus jitter)
/// after the server is back, and every controller with it. A controller-manager holds a
/// handful of watches: a retry every few seconds costs the server nothing.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(4);
/// Retrying without failure for this long starts the backoff over (kube's reset timer).
const RETRY_RESET_AFTER: Duration = Duration::from_secs(120);

/// The wait before retry number `attempt` (0 for the first) of a failed list or watch:
/// [`RETRY_FIRST`] doubling per attempt up to [`RETRY_MAX`], scaled by `jitter` (in `[0, 1)`)
/// into `[d/2, d)` so that the informers of a process do not all retry at once.
pub(super) fn retry_wait(attempt: u32, jitter: f64) -> Duration {
    let full = RETRY_FIRST
        .saturating_mul(1u32 << attempt.min(16))
        .min(RETRY_MAX);
    full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// The informers' retry backoff (see [`retry_wait`]); starts over after a success.
#[derive(Debug, Default)]
pub(super) struct RetryBackoff {
    attempt: u32,
}

impl Iterator for RetryBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let wait = retry_wait(self.attempt, crate::jitter::unit());
        self.attempt = self.attempt.saturating_add(1);
        Some(wait)
    }
}

impl kube::runtime::utils::Backoff for RetryBackoff {
    fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The retry backoff of the shared informers (see [`retry_wait`]), for any other watch that
/// should come back as quickly after an API server outage (`.backoff(retry_backoff())`).
pub fn retry_backoff() -> impl kube::runtime::utils::Backoff {
    kube::runtime::utils::ResetTimerBackoff::new(RetryBackoff::default(), RETRY_RESET_AFTER)
}

/// The event without the objects `holds` excludes (by namespace; `None`: cluster-scoped):
/// `None` for an object event out of scope.
pub(super) fn in_scope<K: Resource>(
    holds: &dyn Fn(Option<&str>) -> bool,
    event: watcher::Event<K>,
) -> Option<watcher::Event<K>> {
    let admits = |obj: &K| holds(obj.meta().namespace.as_deref());
    match &event {
        watcher::Event::Apply(obj)
        | watcher::Event::Delete(obj)
        | watcher::Event::InitApply(obj)
            if !admits(obj) =>
        {
            None
        }
        _ => Some(event),
    }
}

/// Logs list/watch errors without flooding: the backoff already spaces retries (0.8 s
/// doubling to 4 s), and a run of identical errors is logged at warn only on its 1st, 2nd,
/// 4th, 8th, ... occurrence.
#[derive(Default)]
pub(super) struct ErrorLog {
    last: Option<String>,
    repeats: u64,
}

impl ErrorLog {
    pub(super) fn clear(&mut self) {
        self.last = None;
        self.repeats = 0;
    }

    pub(super) fn report(&mut self, resource: &str, err: &watcher::Error) {
        let message = err.to_string();
        if self.last.as_deref() == Some(message.as_str()) {
            self.repeats += 1;
        } else {
            self.last = Some(message);
            self.repeats = 1;
        }
        let attempts = self.repeats;
        if expired(err) {
            // Routine: the watch fell behind compaction; the relist repairs the cache.
            info!(resource, error = %err, "Watch expired; relisting");
        } else if attempts.is_power_of_two() {
            warn!(resource, error = %err, attempts, "Informer list/watch failed; retrying with backoff");
        } else {
            debug!(resource, error = %err, attempts, "Informer list/watch failed; retrying with backoff");
        }
    }
}

fn expired(err: &watcher::Error) -> bool {
    match err {
        watcher::Error::WatchError(status) => is_gone(status),
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => is_gone(status),
        _ => false,
    }
}
