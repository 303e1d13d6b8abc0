//! How a work queue delays a failed key: the rate limiters of client-go
//! `default_rate_limiters.go` (per-key exponential backoff, an overall token bucket, the max of
//! several).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::Duration;

use tokio::time::Instant;

use crate::queue::flowcontrol::TokenBucket;

/// Per-key backoff base of the default controller rate limiter.
pub const DEFAULT_ITEM_BASE_DELAY: Duration = Duration::from_millis(5);
/// Per-key backoff cap of the default controller rate limiter.
pub const DEFAULT_ITEM_MAX_DELAY: Duration = Duration::from_secs(1000);
/// Refill rate of the default controller rate limiter's overall bucket.
pub const DEFAULT_BUCKET_QPS: f64 = 10.0;
/// Size of the default controller rate limiter's overall bucket.
pub const DEFAULT_BUCKET_BURST: u32 = 100;

/// How [`WorkQueue::add_rate_limited`](crate::queue::WorkQueue::add_rate_limited) delays a key. The queue keeps the limiter's state
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
    /// One token bucket shared by all keys ([`crate::queue::flowcontrol::TokenBucket`]): every call
    /// takes a token and waits until it is available. An infinite `qps` never delays; a
    /// `qps <= 0` hands out the burst and then delays by the capped maximum
    /// ([`crate::queue::flowcontrol::MAX_WAIT`]); a `burst` of 0 is treated as 1.
    Bucket { qps: f64, burst: u32 },
    /// The longest delay of all the given limiters (each one is consulted on every call).
    MaxOf(Vec<RateLimiter>),
}

/// One key's backoff: failures counted, and when the current backoff ends.
#[derive(Debug, Clone, Copy)]
pub(super) struct Backoff {
    failures: u32,
    until: Instant,
}

/// The live state of a [`RateLimiter`].
pub(super) enum Limiter<K> {
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
pub(super) static IGNORE_EARLY_FAILURES: AtomicBool = AtomicBool::new(true);

/// Whether queues created from now on ignore failures that come before a key's pending retry
/// (`--rkcm-retry-ignores-early-failures`, on; off: client-go's counting, as upstream).
pub fn set_ignore_early_failures(on: bool) {
    IGNORE_EARLY_FAILURES.store(on, AtomicOrdering::Relaxed);
}

impl<K: Clone + Eq + Hash> Limiter<K> {
    pub(super) fn new(config: &RateLimiter) -> Self {
        Self::with(config, IGNORE_EARLY_FAILURES.load(AtomicOrdering::Relaxed))
    }

    pub(super) fn with(config: &RateLimiter, ignore_early: bool) -> Self {
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
    pub(super) fn when(&mut self, key: &K, now: Instant) -> Duration {
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

    pub(super) fn forget(&mut self, key: &K) {
        match self {
            Limiter::ItemExponential { failures, .. } => {
                failures.remove(key);
            }
            Limiter::Bucket(_) => {}
            Limiter::MaxOf(limiters) => limiters.iter_mut().for_each(|l| l.forget(key)),
        }
    }

    /// Keys with a failure history (in the per-item limiters).
    pub(super) fn tracked(&self) -> usize {
        match self {
            Limiter::ItemExponential { failures, .. } => failures.len(),
            Limiter::Bucket(_) => 0,
            Limiter::MaxOf(limiters) => limiters.iter().map(Limiter::tracked).sum(),
        }
    }

    pub(super) fn num_requeues(&self, key: &K) -> u32 {
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
