//! [`OffsetClock`]: a controller clock that runs at real speed from a chosen instant.

use std::sync::{Mutex, PoisonError};

use jiff::{SignedDuration, Timestamp};
use rkcm_runtime::clock::Clock;

/// A wall clock that flows with real time from an offset the test moves: `set(t)` makes it
/// read `t` now and `t + d` after `d` of real time. For scenarios on schedules or deadlines
/// (minutes, hours) that must still see time pass, unlike the frozen
/// [`FakeClock`](rkcm_runtime::clock::FakeClock). Hand it to controllers with
/// [`Controllers::with_clock`](super::Controllers::with_clock).
#[derive(Debug, Default)]
pub struct OffsetClock {
    offset: Mutex<SignedDuration>,
}

impl OffsetClock {
    /// A clock reading real time.
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on the clock reads `t` (and moves on with real time).
    pub fn set(&self, t: Timestamp) {
        *self.offset.lock().unwrap_or_else(PoisonError::into_inner) =
            t.duration_since(Timestamp::now());
    }

    /// What the clock reads now.
    pub fn now(&self) -> Timestamp {
        self.wall()
    }
}

impl Clock for OffsetClock {
    fn wall(&self) -> Timestamp {
        Timestamp::now() + *self.offset.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_set_instant_and_flows_on() {
        let clock = OffsetClock::new();
        let t = Timestamp::from_second(1_000_000_000).expect("instant");
        clock.set(t);
        let read = clock.now();
        assert!(
            read >= t && read.duration_since(t) < SignedDuration::from_secs(5),
            "{read}"
        );
    }
}
