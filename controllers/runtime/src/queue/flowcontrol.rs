//! The one token bucket of the runtime: client-go `util/flowcontrol` on top of
//! `golang.org/x/time/rate`. The API clients' `--kube-api-qps`/`--kube-api-burst` limiter,
//! the work queue's overall bucket (10/s, burst 100) and the event recorder's spam filter
//! (burst 25, one token per 300 s, on the controller's clock) are all this type.
//!
//! Guarantees:
//! - Capacity `burst`, refilled at `qps` tokens per second, full before the first call.
//! - Reservation semantics: every [`TokenBucket::reserve`] takes a token, now or in the
//!   future (tokens may go negative), so concurrent callers are served in arrival order at
//!   exactly `qps`.
//! - A wait longer than [`MAX_WAIT`] (Go's `rate.InfDuration`, the largest `time.Duration`) is
//!   capped at it: a tiny positive `qps` means "practically never", not a panic or an
//!   overflow.
//! - `qps = +∞` never delays (`rate.Inf`). `qps <= 0` (or NaN) never refills: the burst is
//!   handed out, then every wait is [`MAX_WAIT`], as `rate.Limiter` with a zero limit.
//!   A `burst` of 0 counts as 1 (`rate` would refuse every call; client-go never asks for it).
//! - [`client_limiter`] applies client-go `rest.RESTClientFor` defaulting to the flags:
//!   qps 0 → [`DEFAULT_QPS`], burst 0 → [`DEFAULT_BURST`], qps < 0 → no limiter at all.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// client-go `rest` default when `--kube-api-qps` is 0.
pub const DEFAULT_QPS: f32 = 5.0;
/// client-go `rest` default when `--kube-api-burst` is 0.
pub const DEFAULT_BURST: u32 = 10;

/// The longest wait a bucket hands out: Go's `rate.InfDuration` (`math.MaxInt64` ns, about
/// 292 years).
pub const MAX_WAIT: Duration = Duration::from_nanos(i64::MAX as u64);

/// A point in time a bucket measures refills from: tokio's monotonic [`Instant`] (clients,
/// queues) or a wall-clock [`jiff::Timestamp`] (the event spam filter, which runs on the
/// controller's `Clock`).
pub trait Moment: Copy + Ord {
    /// Seconds from `earlier` to `self`; 0 when `earlier` is not earlier.
    fn seconds_since(self, earlier: Self) -> f64;
}

impl Moment for Instant {
    fn seconds_since(self, earlier: Self) -> f64 {
        self.saturating_duration_since(earlier).as_secs_f64()
    }
}

impl Moment for jiff::Timestamp {
    fn seconds_since(self, earlier: Self) -> f64 {
        self.duration_since(earlier).as_secs_f64().max(0.0)
    }
}

/// A token bucket with `golang.org/x/time/rate` reservation semantics. Plain data: the caller
/// passes the time, so it can live under the caller's own lock or in a pure test.
#[derive(Debug, Clone)]
pub struct TokenBucket<T = Instant> {
    qps: f64,
    burst: f64,
    /// May go negative: outstanding reservations.
    tokens: f64,
    /// Time of the previous reservation; `None` until the first (the bucket starts full).
    last: Option<T>,
}

impl<T: Moment> TokenBucket<T> {
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            tokens: burst,
            last: None,
        }
    }

    /// Refill rate in tokens per second.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// Capacity.
    pub fn burst(&self) -> u32 {
        // `burst` was built from a u32 and is never changed.
        self.burst as u32
    }

    /// Takes one token at `now`, returning how long the caller must wait before using it.
    pub fn reserve(&mut self, now: T) -> Duration {
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        self.advance(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            self.time_for(-self.tokens)
        }
    }

    /// Takes one token at `now` only if one is available without waiting (client-go
    /// `TryAccept`); a refusal takes nothing.
    pub fn try_accept(&mut self, now: T) -> bool {
        if self.qps == f64::INFINITY {
            return true;
        }
        self.advance(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Whether the bucket would hold `burst` tokens at `now`, i.e. behaves from `now` on
    /// exactly as a new bucket would. Takes nothing.
    pub fn is_full_at(&self, now: T) -> bool {
        self.tokens_at(now) >= self.burst
    }

    /// Tokens the bucket would hold at `now` (negative while reservations are outstanding).
    /// Takes nothing.
    pub fn tokens_at(&self, now: T) -> f64 {
        if self.qps == f64::INFINITY {
            return self.burst;
        }
        let Some(last) = self.last else {
            return self.burst;
        };
        let refilled = if self.refills() {
            now.seconds_since(last) * self.qps
        } else {
            0.0
        };
        (self.tokens + refilled).min(self.burst)
    }

    /// Adds the tokens refilled since the previous call, up to `burst`.
    fn advance(&mut self, now: T) {
        if let Some(last) = self.last
            && self.refills()
        {
            let elapsed = now.seconds_since(last);
            self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        }
        // Never move backwards: a caller with an older `now` refills nothing.
        self.last = Some(self.last.map_or(now, |last| last.max(now)));
    }

    fn refills(&self) -> bool {
        self.qps.is_finite() && self.qps > 0.0
    }

    /// How long refilling `tokens` takes, capped at [`MAX_WAIT`].
    fn time_for(&self, tokens: f64) -> Duration {
        if !self.refills() {
            return MAX_WAIT;
        }
        Duration::try_from_secs_f64(tokens / self.qps).map_or(MAX_WAIT, |wait| wait.min(MAX_WAIT))
    }
}

/// A [`TokenBucket`] shared by concurrent callers, on tokio time (client-go
/// `flowcontrol.NewTokenBucketRateLimiter`).
#[derive(Debug)]
pub struct RateLimiter {
    bucket: Mutex<TokenBucket>,
}

impl RateLimiter {
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            bucket: Mutex::new(TokenBucket::new(qps, burst)),
        }
    }

    pub fn qps(&self) -> f64 {
        self.bucket.lock().qps()
    }

    pub fn burst(&self) -> u32 {
        self.bucket.lock().burst()
    }

    /// Whether less than half the burst is left at `now`: the client has been sending faster
    /// than its QPS for a while, so a request it adds now waits behind the others (or soon
    /// will). Takes nothing.
    pub fn is_pressed(&self, now: Instant) -> bool {
        let bucket = self.bucket.lock();
        bucket.tokens_at(now) < bucket.burst / 2.0
    }

    /// Takes one token now, returning how long the caller must wait before using it.
    pub fn reserve(&self) -> Duration {
        self.bucket.lock().reserve(Instant::now())
    }

    /// Waits for a token (`Accept`); returns the time spent waiting.
    pub async fn acquire(&self) -> Duration {
        let wait = self.reserve();
        if !wait.is_zero() {
            // tokio clamps a deadline beyond its range to its far future.
            tokio::time::sleep(wait).await;
        }
        wait
    }
}

/// The limiter an API client gets for `--kube-api-qps`/`--kube-api-burst`, with client-go's
/// defaulting: qps 0 → 5, burst 0 → 10, qps < 0 (or NaN) → unlimited (`None`).
pub fn client_limiter(qps: f32, burst: u32) -> Option<Arc<RateLimiter>> {
    let qps = if qps == 0.0 { DEFAULT_QPS } else { qps };
    let burst = if burst == 0 { DEFAULT_BURST } else { burst };
    (qps > 0.0).then(|| Arc::new(RateLimiter::new(f64::from(qps), burst)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_one_token_per_period() {
        let mut bucket = TokenBucket::new(10.0, 100);
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(bucket.reserve(now), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(now), ms(100));
        assert_eq!(bucket.reserve(now), ms(200));
        assert_eq!(
            bucket.reserve(now + ms(300)),
            Duration::ZERO,
            "refilled three tokens, two were owed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn refills_up_to_burst_only() {
        let mut bucket = TokenBucket::new(10.0, 2);
        let now = Instant::now();
        bucket.reserve(now);
        bucket.reserve(now);
        let later = now + Duration::from_secs(60);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), ms(100));
    }

    #[tokio::test(start_paused = true)]
    async fn tiny_positive_qps_caps_the_wait_instead_of_panicking() {
        let now = Instant::now();
        for qps in [1e-300, f64::from(1e-30_f32), f64::MIN_POSITIVE, 1e-19] {
            let mut bucket = TokenBucket::new(qps, 1);
            assert_eq!(bucket.reserve(now), Duration::ZERO, "{qps}");
            assert_eq!(bucket.reserve(now), MAX_WAIT, "{qps}");
            // Later reservations are capped too, however deep the debt.
            assert_eq!(bucket.reserve(now + ms(1)), MAX_WAIT, "{qps}");
        }
        // Below the cap the wait is exact.
        let mut bucket = TokenBucket::new(1.0 / 1024.0 / 1024.0, 1);
        bucket.reserve(now);
        assert_eq!(bucket.reserve(now), Duration::from_secs(1024 * 1024));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_or_negative_qps_hands_out_the_burst_then_never_refills() {
        for qps in [0.0, -1.0, f64::NAN] {
            let mut bucket = TokenBucket::new(qps, 2);
            let now = Instant::now();
            assert_eq!(bucket.reserve(now), Duration::ZERO, "{qps}");
            assert!(bucket.try_accept(now), "{qps}");
            let later = now + Duration::from_secs(3600);
            assert!(!bucket.try_accept(later), "{qps}");
            assert_eq!(bucket.reserve(later), MAX_WAIT, "{qps}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn infinite_qps_never_waits() {
        let mut bucket = TokenBucket::new(f64::INFINITY, 1);
        let now = Instant::now();
        for _ in 0..1000 {
            assert_eq!(bucket.reserve(now), Duration::ZERO);
            assert!(bucket.try_accept(now));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn try_accept_takes_nothing_when_refusing() {
        let mut bucket = TokenBucket::new(1.0, 1);
        let now = Instant::now();
        assert!(bucket.try_accept(now));
        assert!(!bucket.try_accept(now + ms(500)));
        // The refusal left the half token in place.
        assert!(bucket.try_accept(now + ms(1000)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_now_refills_nothing() {
        let mut bucket = TokenBucket::new(1.0, 1);
        let now = Instant::now() + Duration::from_secs(10);
        assert_eq!(bucket.reserve(now), Duration::ZERO);
        assert_eq!(bucket.reserve(now - Duration::from_secs(5)), ms(1000));
    }

    #[test]
    fn wall_clock_buckets_refill_from_timestamps() {
        // The event spam filter: burst 25, one token per 300 s.
        let t0 = jiff::Timestamp::UNIX_EPOCH;
        let mut bucket = TokenBucket::new(1.0 / 300.0, 25);
        for _ in 0..25 {
            assert!(bucket.try_accept(t0));
        }
        assert!(!bucket.try_accept(t0 + jiff::SignedDuration::from_secs(299)));
        assert!(bucket.try_accept(t0 + jiff::SignedDuration::from_secs(300)));
        // A clock that went back refills nothing.
        assert!(!bucket.try_accept(t0));
    }

    #[test]
    fn a_bucket_is_full_again_once_every_token_taken_has_refilled() {
        let t0 = jiff::Timestamp::from_second(1_000).unwrap();
        let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        // One token per 10 s, burst 3.
        let mut b: TokenBucket<jiff::Timestamp> = TokenBucket::new(0.1, 3);
        assert!(b.is_full_at(t0), "a new bucket is full");
        assert!(b.try_accept(t0));
        assert!(b.try_accept(t0));
        assert!(!b.is_full_at(at(19)), "two tokens taken, 1.9 refilled");
        assert!(b.is_full_at(at(20)), "two tokens taken, two refilled");
        assert!(b.is_full_at(at(3_600)), "never above burst, still full");
        // Asking takes nothing.
        assert!(b.try_accept(at(20)));
        assert!(!b.is_full_at(at(20)));
        let mut never: TokenBucket<jiff::Timestamp> = TokenBucket::new(0.0, 1);
        assert!(never.try_accept(t0));
        assert!(
            !never.is_full_at(at(1_000_000)),
            "a bucket that never refills stays empty"
        );
    }

    #[test]
    fn zero_burst_counts_as_one() {
        let mut bucket = TokenBucket::new(1.0, 0);
        assert_eq!(bucket.burst(), 1);
        let now = Instant::now();
        assert_eq!(bucket.reserve(now), Duration::ZERO);
        assert_eq!(bucket.reserve(now), ms(1000));
    }

    #[tokio::test(start_paused = true)]
    async fn acquire_waits_for_the_reserved_token() {
        let limiter = RateLimiter::new(2.0, 3);
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.acquire().await, Duration::ZERO);
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        for i in 1..=3u32 {
            limiter.acquire().await;
            assert_eq!(start.elapsed(), ms(500) * i, "token {i}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_waiters_are_spaced_by_qps() {
        let limiter = Arc::new(RateLimiter::new(4.0, 1));
        let start = Instant::now();
        let mut handles = Vec::new();
        for _ in 0..5 {
            let l = limiter.clone();
            handles.push(tokio::spawn(async move {
                l.acquire().await;
                Instant::now()
            }));
        }
        let mut done = Vec::new();
        for h in handles {
            done.push(h.await.expect("task").duration_since(start));
        }
        done.sort();
        let want: Vec<Duration> = (0..5).map(|i| ms(250) * i).collect();
        assert_eq!(done, want);
    }

    #[tokio::test(start_paused = true)]
    async fn acquire_with_a_capped_wait_does_not_panic() {
        let limiter = RateLimiter::new(1e-300, 1);
        assert_eq!(limiter.acquire().await, Duration::ZERO);
        let waiting = tokio::time::timeout(Duration::from_secs(3600), limiter.acquire()).await;
        assert!(
            waiting.is_err(),
            "the second token is practically never due"
        );
    }

    #[test]
    fn client_limiter_defaults_follow_client_go() {
        assert!(client_limiter(-1.0, 30).is_none(), "negative qps: no limit");
        assert!(client_limiter(f32::NAN, 30).is_none());
        let l = client_limiter(0.0, 0).expect("qps 0 means the default 5");
        assert_eq!(
            (l.qps(), l.burst()),
            (f64::from(DEFAULT_QPS), DEFAULT_BURST)
        );
        let l = client_limiter(20.0, 30).expect("limited");
        assert_eq!((l.qps(), l.burst()), (20.0, 30));
        let l = client_limiter(1e-30, 1).expect("tiny but positive still limits");
        assert_eq!(l.burst(), 1);
    }
}
