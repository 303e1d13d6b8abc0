//! Spacing out routine status writes of one object, and the syncs its children ask for.
//!
//! A controller writes an owner's status from its caches after each sync. When the watch
//! delivers a burst of changes for one owner (ten pods of a ReplicaSet turning ready within
//! a few milliseconds, or a backlog the informer catches up on after a slow moment), each
//! change can wake a sync that finds one more pod counted and writes again; the writes right
//! after one another are superseded within milliseconds. On a busy cluster this turns into
//! two or three status writes where one would do, on the controller's own QPS budget, and
//! each ReplicaSet status write wakes its Deployment, which writes its status as well.
//!
//! [`StatusPacer`] keeps, per owner key, when the controller last wrote a routine status.
//! A sync that wants to write again sooner than [`STATUS_WRITE_INTERVAL`] after it leaves
//! the status for a sync at the end of the interval instead (the caller re-queues the key
//! for then), and that sync writes whatever the caches say by then. Pod creates and deletes
//! are never held back, only the counting that follows them, by at most the interval.
//! Writes that record decisions (a revision, a collision count, a failed create) do not go
//! through the pacer.
//!
//! When the controller's API client is short of its QPS budget ([`StatusPacer::with_budget`],
//! less than half its burst left), every request it adds waits behind the pod creates and
//! deletes it has queued, and the next sync of the owner is likely to see more changes
//! anyway: routine writes then wait the longer [`TERMINATING_WRITE_INTERVAL`]. Upstream gets
//! a similar effect unasked, because under such load its queues back up and one sync covers
//! many changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::queue::flowcontrol::RateLimiter;

/// The least time between two routine status writes of one object.
pub const STATUS_WRITE_INTERVAL: Duration = Duration::from_millis(200);

/// The least time between two status writes of one object when the later one changes nothing
/// but the count of terminating pods. While a rollout drains, the node agents remove deleted
/// pods one by one, seconds after they were deleted; each removal moves that count of the
/// ReplicaSet and then of its Deployment, and nothing reads the count to decide anything.
pub const TERMINATING_WRITE_INTERVAL: Duration = Duration::from_secs(1);

/// How long a write at `now` must wait when the last one was at `last`: `None` to write
/// now.
pub fn hold_for(last: Option<Instant>, now: Instant, interval: Duration) -> Option<Duration> {
    let since = now.saturating_duration_since(last?);
    (since < interval).then(|| interval - since)
}

/// Per owner key, the time of the last routine status write (see the module documentation).
#[derive(Debug)]
pub struct StatusPacer {
    interval: Duration,
    /// For writes that only move the count of terminating pods ([`StatusPacer::hold_slow`]):
    /// never shorter than `interval`, zero when `interval` is.
    slow: Duration,
    /// The controller client's token bucket: while it is pressed, routine writes wait `slow`.
    budget: Option<Arc<RateLimiter>>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last: HashMap<String, Instant>,
    /// Entries after the last prune; the next prune comes when the map has doubled.
    after_prune: usize,
}

/// The map is pruned no smaller than this.
const PRUNE_FLOOR: usize = 256;

impl Default for StatusPacer {
    fn default() -> Self {
        Self::new(STATUS_WRITE_INTERVAL)
    }
}

impl StatusPacer {
    /// A pacer with `interval` between writes; zero never holds a write back.
    pub fn new(interval: Duration) -> Self {
        let slow = if interval.is_zero() {
            Duration::ZERO
        } else {
            interval.max(TERMINATING_WRITE_INTERVAL)
        };
        Self {
            interval,
            slow,
            budget: None,
            state: Mutex::new(State::default()),
        }
    }

    /// Routine writes wait the longer interval while `budget` (the controller's client
    /// limiter, `None` when unlimited) has less than half its burst left.
    pub fn with_budget(mut self, budget: Option<Arc<RateLimiter>>) -> Self {
        self.budget = budget;
        self
    }

    /// `None`: write now (then call [`Self::wrote`]). `Some(d)`: `key` was written less than
    /// the interval ago; re-queue it after `d` and write then.
    pub fn hold(&self, key: &str, now: Instant) -> Option<Duration> {
        let pressed = self.budget.as_ref().is_some_and(|b| b.is_pressed(now));
        let interval = if pressed { self.slow } else { self.interval };
        self.hold_within(key, now, interval)
    }

    /// [`Self::hold`] for a write that changes nothing but the count of terminating pods:
    /// held until [`TERMINATING_WRITE_INTERVAL`] after the last write.
    pub fn hold_slow(&self, key: &str, now: Instant) -> Option<Duration> {
        self.hold_within(key, now, self.slow)
    }

    fn hold_within(&self, key: &str, now: Instant, interval: Duration) -> Option<Duration> {
        let mut state = self.state.lock();
        let last = state.last.get(key).copied();
        let hold = hold_for(last, now, interval);
        if last.is_some_and(|t| now.saturating_duration_since(t) >= self.slow) {
            // Older than either interval: no longer needed.
            state.last.remove(key);
        }
        hold
    }

    /// Records a routine status write of `key` at `now`.
    pub fn wrote(&self, key: &str, now: Instant) {
        if self.interval.is_zero() {
            return;
        }
        let mut state = self.state.lock();
        state.last.insert(key.to_owned(), now);
        // Entries only matter for one interval: drop the expired ones whenever the map has
        // doubled since the last prune, so it stays the size of one interval's writes.
        if state.last.len() >= PRUNE_FLOOR.max(2 * state.after_prune) {
            let interval = self.slow;
            state
                .last
                .retain(|_, t| now.saturating_duration_since(*t) < interval);
            state.after_prune = state.last.len();
        }
    }

    /// Forgets `key` (its object was deleted).
    pub fn forget(&self, key: &str) {
        self.state.lock().last.remove(key);
    }

    /// Keys currently remembered.
    pub fn len(&self) -> usize {
        self.state.lock().last.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A child's change waits for the next sync of its owner at most this long
/// ([`SyncSpacer`]).
pub const MAX_SYNC_SPACING: Duration = Duration::from_millis(500);

/// How many times its own decision time a sync of one owner is spaced from the next one
/// that a child's change asks for ([`SyncSpacer`]): the re-decisions of one owner take at
/// most about 1/(1 + this) of a core, however fast its children change.
pub const SYNC_SPACING_FACTOR: u32 = 40;

/// The spacing after a sync whose decision took `cost`: `factor` times it, at most `max`.
pub fn sync_spacing(cost: Duration, factor: u32, max: Duration) -> Duration {
    cost.saturating_mul(factor).min(max)
}

/// Spacing out the syncs of one owner that its children's changes ask for.
///
/// A DaemonSet's sync looks at every node and every pod of the set, and each pod change
/// (created, scheduled, running, ready, deleted) asks for another. On a thousand nodes a
/// rolling update delivers about a hundred such changes a second, and the queue's dedup
/// only merges the changes that arrive while a sync runs: with decisions that take a few
/// milliseconds, the controller decides the same set again and again, one pod further each
/// time. Upstream's slower syncs merge more changes by themselves.
///
/// [`SyncSpacer`] remembers, per owner key, when its last sync ended and how long that
/// sync's decision took (the pure planning step, not its API calls). A child's change seen
/// less than [`sync_spacing`] after that end is queued for the end of the spacing instead
/// of at once; the queue keeps one delayed entry per key, so all the changes of that
/// interval lead to one sync. Changes of the owner itself and of nodes are never held back,
/// and nothing is lost: every change is followed by a sync that starts after it.
#[derive(Debug)]
pub struct SyncSpacer {
    factor: u32,
    max: Duration,
    /// Per key, when its last sync ended and the spacing that sync set.
    last: Mutex<HashMap<String, (Instant, Duration)>>,
}

impl Default for SyncSpacer {
    fn default() -> Self {
        Self::new(SYNC_SPACING_FACTOR, MAX_SYNC_SPACING)
    }
}

impl SyncSpacer {
    /// Spacing `factor` times a sync's decision time, at most `max`; a zero `max` or
    /// `factor` never holds a change back.
    pub fn new(factor: u32, max: Duration) -> Self {
        Self {
            factor,
            max,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// Records that a sync of `key` ended at `end` after a decision of `cost`.
    pub fn synced(&self, key: &str, end: Instant, cost: Duration) {
        let spacing = sync_spacing(cost, self.factor, self.max);
        let mut last = self.last.lock();
        if spacing.is_zero() {
            last.remove(key);
        } else {
            last.insert(key.to_owned(), (end, spacing));
        }
    }

    /// `None`: a child's change of `key` seen at `now` syncs it at once. `Some(d)`: queue
    /// the key after `d`.
    pub fn hold(&self, key: &str, now: Instant) -> Option<Duration> {
        let mut last = self.last.lock();
        let (end, spacing) = *last.get(key)?;
        let hold = hold_for(Some(end), now, spacing);
        if hold.is_none() {
            last.remove(key);
        }
        hold
    }

    /// Forgets `key` (its object was deleted).
    pub fn forget(&self, key: &str) {
        self.last.lock().remove(key);
    }

    /// Keys currently remembered.
    pub fn len(&self) -> usize {
        self.last.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn holds_a_write_only_within_the_interval() {
        let t0 = Instant::now();
        let i = 200 * MS;
        // (last write, now) → hold
        let cases = [
            (None, t0, None),
            (Some(t0), t0, Some(200 * MS)),
            (Some(t0), t0 + 50 * MS, Some(150 * MS)),
            (Some(t0), t0 + 199 * MS, Some(MS)),
            (Some(t0), t0 + 200 * MS, None),
            (Some(t0), t0 + 10_000 * MS, None),
            // A clock that went backwards counts as no time passed.
            (Some(t0 + 100 * MS), t0, Some(200 * MS)),
        ];
        for (last, now, want) in cases {
            assert_eq!(hold_for(last, now, i), want, "last {last:?} now {now:?}");
        }
        assert_eq!(hold_for(Some(t0), t0, Duration::ZERO), None);
    }

    #[test]
    fn a_key_is_held_after_a_write_and_free_after_the_interval() {
        let pacer = StatusPacer::new(200 * MS);
        let t0 = Instant::now();
        assert_eq!(pacer.hold("ns/a", t0), None);
        pacer.wrote("ns/a", t0);
        assert_eq!(pacer.hold("ns/a", t0 + 80 * MS), Some(120 * MS));
        assert_eq!(
            pacer.hold("ns/b", t0 + 80 * MS),
            None,
            "other keys are free"
        );
        assert_eq!(pacer.hold("ns/a", t0 + 200 * MS), None);
        assert_eq!(pacer.hold("ns/a", t0 + TERMINATING_WRITE_INTERVAL), None);
        assert!(
            pacer.is_empty(),
            "an entry past both intervals is dropped when looked at"
        );
        pacer.wrote("ns/a", t0);
        pacer.forget("ns/a");
        assert_eq!(pacer.hold("ns/a", t0), None);
    }

    #[test]
    fn a_write_of_terminating_pods_alone_waits_the_longer_interval() {
        let pacer = StatusPacer::new(200 * MS);
        let t0 = Instant::now();
        pacer.wrote("ns/a", t0);
        // (now, routine hold, terminating-only hold)
        let cases = [
            (t0 + 100 * MS, Some(100 * MS), Some(900 * MS)),
            (t0 + 200 * MS, None, Some(800 * MS)),
            (t0 + 999 * MS, None, Some(MS)),
            (t0 + 1_000 * MS, None, None),
        ];
        for (now, routine, slow) in cases {
            assert_eq!(pacer.hold_slow("ns/a", now), slow, "terminating at {now:?}");
            assert_eq!(pacer.hold("ns/a", now), routine, "routine at {now:?}");
        }
        assert!(pacer.is_empty(), "dropped once past the longer interval");
        // A routine check past the short interval keeps the entry for a later slow check.
        pacer.wrote("ns/a", t0);
        assert_eq!(pacer.hold("ns/a", t0 + 300 * MS), None);
        assert_eq!(pacer.hold_slow("ns/a", t0 + 300 * MS), Some(700 * MS));
        // Zero disables both.
        let off = StatusPacer::new(Duration::ZERO);
        off.wrote("ns/a", t0);
        assert_eq!(off.hold_slow("ns/a", t0), None);
    }

    #[tokio::test(start_paused = true)]
    async fn routine_writes_wait_longer_while_the_client_is_short_of_budget() {
        // 10 requests per second, burst 10: pressed below 5 tokens.
        let budget = Arc::new(RateLimiter::new(10.0, 10));
        let pacer = StatusPacer::new(200 * MS).with_budget(Some(budget.clone()));
        let t0 = Instant::now();
        pacer.wrote("ns/a", t0);
        assert_eq!(pacer.hold("ns/a", t0 + 300 * MS), None, "full bucket");
        for _ in 0..6 {
            budget.reserve();
        }
        // 4 tokens left at t0: pressed, the longer interval applies.
        assert_eq!(pacer.hold("ns/a", t0 + 50 * MS), Some(950 * MS));
        // 100 ms refill one token: 5 left at t0 + 100 ms, no longer pressed.
        assert_eq!(pacer.hold("ns/a", t0 + 150 * MS), Some(50 * MS));
        assert_eq!(pacer.hold("ns/a", t0 + 300 * MS), None);
        // Without a budget (an unlimited client) the short interval always applies.
        let free = StatusPacer::new(200 * MS).with_budget(None);
        free.wrote("ns/a", t0);
        assert_eq!(free.hold("ns/a", t0 + 300 * MS), None);
    }

    #[test]
    fn expired_entries_do_not_pile_up() {
        let pacer = StatusPacer::new(200 * MS);
        let t0 = Instant::now();
        // 10 000 owners written once each, 1 ms apart: at most about one longer interval's
        // worth (1 000 writes, kept for a terminating-only check) plus the doubling slack
        // stays remembered.
        for i in 0..10_000u32 {
            pacer.wrote(&format!("ns/rs-{i}"), t0 + MS * i);
        }
        let per_interval = TERMINATING_WRITE_INTERVAL.as_millis() as usize;
        assert!(
            pacer.len() <= 2 * PRUNE_FLOOR.max(per_interval),
            "{} entries",
            pacer.len()
        );
    }

    #[test]
    fn a_zero_interval_remembers_nothing() {
        let pacer = StatusPacer::new(Duration::ZERO);
        let t0 = Instant::now();
        pacer.wrote("ns/a", t0);
        assert_eq!(pacer.hold("ns/a", t0), None);
        assert!(pacer.is_empty());
    }
    #[test]
    fn sync_spacing_is_a_multiple_of_the_decision_time_up_to_a_cap() {
        // (decision time, factor, cap) -> spacing
        let cases = [
            (Duration::ZERO, 40, 500 * MS, Duration::ZERO),
            (Duration::from_micros(25), 40, 500 * MS, MS),
            (2 * MS, 40, 500 * MS, 80 * MS),
            (12 * MS, 40, 500 * MS, 480 * MS),
            (13 * MS, 40, 500 * MS, 500 * MS),
            (Duration::from_secs(3600), 40, 500 * MS, 500 * MS),
            (2 * MS, 0, 500 * MS, Duration::ZERO),
            (2 * MS, 40, Duration::ZERO, Duration::ZERO),
            (Duration::MAX, u32::MAX, 500 * MS, 500 * MS),
        ];
        for (cost, factor, max, want) in cases {
            assert_eq!(
                sync_spacing(cost, factor, max),
                want,
                "{cost:?} x{factor} <= {max:?}"
            );
        }
    }

    #[test]
    fn a_child_change_waits_only_within_the_spacing_of_the_last_sync() {
        let spacer = SyncSpacer::new(40, 500 * MS);
        let t0 = Instant::now();
        assert_eq!(spacer.hold("ns/ds", t0), None, "never synced");
        // A 2 ms decision: 80 ms of spacing from the sync's end.
        spacer.synced("ns/ds", t0, 2 * MS);
        // (now) -> hold
        let cases = [
            (t0, Some(80 * MS)),
            (t0 + 30 * MS, Some(50 * MS)),
            (t0 + 79 * MS, Some(MS)),
        ];
        for (now, want) in cases {
            assert_eq!(spacer.hold("ns/ds", now), want, "at {now:?}");
        }
        assert_eq!(spacer.hold("ns/other", t0), None, "other keys are free");
        assert_eq!(spacer.hold("ns/ds", t0 + 80 * MS), None);
        assert!(
            spacer.is_empty(),
            "an entry past its spacing is dropped when looked at"
        );
        // A later sync replaces the entry; a decision too quick to space clears it.
        spacer.synced("ns/ds", t0, 20 * MS);
        assert_eq!(
            spacer.hold("ns/ds", t0 + 100 * MS),
            Some(400 * MS),
            "capped at 500 ms"
        );
        spacer.synced("ns/ds", t0 + 200 * MS, Duration::ZERO);
        assert_eq!(spacer.hold("ns/ds", t0 + 200 * MS), None);
        assert!(spacer.is_empty());
        spacer.synced("ns/ds", t0, 2 * MS);
        spacer.forget("ns/ds");
        assert_eq!(spacer.hold("ns/ds", t0), None);
        // Off: never holds back.
        let off = SyncSpacer::new(0, 500 * MS);
        off.synced("ns/ds", t0, 2 * MS);
        assert_eq!(off.hold("ns/ds", t0), None);
        assert!(off.is_empty());
    }
}
