//! The faults a seed injects into requests, and the rolls that decide each.

use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;

/// The faults a seed injects; the driver changes them between phases.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Delivery delay of each watch event, in milliseconds (uniform in the range).
    pub watch_delay_ms: (u64, u64),
    /// Probability that a list with `resourceVersion=0` is served from an older version (a
    /// lagging watch cache), at most `stale_window` back.
    pub stale_list: f64,
    pub stale_window: Duration,
    /// Probability that an update or patch of a manager meets a concurrent write first.
    pub conflict: f64,
    /// Probability that the manager crashes at one of its writes, before or after the write
    /// lands (the write's answer is lost either way).
    pub crash_on_write: f64,
    /// How many crashes may still be injected.
    pub crash_budget: u32,
    /// Probability that a manager's pod create is refused by admission (403, quota).
    pub reject_create: f64,
    /// Probability that a manager's write fails with 500 without landing, or with 504 after
    /// landing (the client cannot tell whether it happened).
    pub server_error: f64,
    /// Whether `server_error` also answers creates with 504 after they landed. On for half
    /// the seeds of the scenarios without the ReplicaSet controller, which counts such a
    /// create as failed (as upstream's `manageReplicas` does; upstream's Job and DaemonSet
    /// controllers do not) and may create one pod too many until its cache shows the first.
    pub timeout_creates: bool,
}

impl Faults {
    /// Rolls whether a write of manager epoch `epoch` crashes the manager (`Some(true)`: after
    /// it lands, `Some(false)`: before); each crash uses up one of the budget.
    pub(super) fn roll_crash(&mut self, rng: &mut StdRng, epoch: u64) -> Option<bool> {
        if epoch == 0 || self.crash_budget == 0 || self.crash_on_write <= 0.0 {
            return None;
        }
        if !rng.random_bool(self.crash_on_write.min(1.0)) {
            return None;
        }
        self.crash_budget -= 1;
        Some(rng.random_bool(0.5))
    }
}

/// Rolls whether a fault of probability `p` hits a request of manager epoch `epoch`; the
/// simulation's own requests (epoch 0) never fail.
pub(super) fn roll(rng: &mut StdRng, epoch: u64, p: f64) -> bool {
    epoch != 0 && p > 0.0 && rng.random_bool(p.min(1.0))
}
