//! Time sources. Monotonic time comes from `tokio::time`, so tests can pause and advance it;
//! wall time (for object timestamps and ages) comes from a [`Clock`], so tests can fix it.

use std::sync::Arc;

use parking_lot::Mutex;

/// A source of monotonic and wall-clock time.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic now; follows tokio's paused clock in tests.
    fn now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
    /// Wall-clock now, as written into and compared with API object timestamps.
    fn wall(&self) -> jiff::Timestamp;
    /// How long the work the caller began at `started` took (`std::time::Instant::now()`
    /// then), for limits that scale with a controller's own CPU time (the DaemonSet's sync
    /// spacing): real time, also where monotonic time is paused, since the work took real
    /// time. The deterministic simulation answers with a fixed cost, so that a seed does not
    /// depend on the speed of the machine.
    fn work_time(&self, started: std::time::Instant) -> std::time::Duration {
        started.elapsed()
    }
}

pub type SharedClock = Arc<dyn Clock>;

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn wall(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }
}

/// A wall clock tests set and advance by hand. Monotonic time still follows tokio.
#[derive(Debug, Clone)]
pub struct FakeClock {
    wall: Arc<Mutex<jiff::Timestamp>>,
}

impl FakeClock {
    pub fn new(start: jiff::Timestamp) -> Self {
        Self {
            wall: Arc::new(Mutex::new(start)),
        }
    }
    pub fn set(&self, t: jiff::Timestamp) {
        *self.wall.lock() = t;
    }
    pub fn advance(&self, d: std::time::Duration) {
        let mut w = self.wall.lock();
        let span = jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
        *w = w.saturating_add(span).unwrap_or(*w);
    }
}

impl Clock for FakeClock {
    fn wall(&self) -> jiff::Timestamp {
        *self.wall.lock()
    }
}

pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}
