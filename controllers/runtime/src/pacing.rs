//! Spacing out routine status writes of one object.
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
//! anyway. Routine writes then wait the longer [`TERMINATING_WRITE_INTERVAL`] per object, and
//! all objects together take turns at [`PRESSED_SHARE`] of the client's QPS: a key without a
//! turn gets the next free one and is looked at again by then (at the latest after
//! [`PRESSED_RECHECK`], so it writes soon after the budget recovers). A mass rollout of a
//! thousand Deployments otherwise spends as much of the ReplicaSet controller's budget on
//! counting pods as on creating and deleting them, and each count wakes a Deployment sync
//! that may take one more, smaller step. Upstream gets a similar effect unasked, because under
//! such load its queues back up and one sync covers many changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::flowcontrol::RateLimiter;

/// The least time between two routine status writes of one object.
pub const STATUS_WRITE_INTERVAL: Duration = Duration::from_millis(200);

/// The least time between two status writes of one object when the later one changes nothing
/// but the count of terminating pods. While a rollout drains, the node agents remove deleted
/// pods one by one, seconds after they were deleted; each removal moves that count of the
/// ReplicaSet and then of its Deployment, and nothing reads the count to decide anything.
pub const TERMINATING_WRITE_INTERVAL: Duration = Duration::from_secs(1);

/// While the client is short of budget, routine status writes of all keys together take at
/// most this share of its QPS.
pub const PRESSED_SHARE: f64 = 0.2;

/// While the client is short of budget, a key waiting for its turn is looked at again after at
/// most this long.
pub const PRESSED_RECHECK: Duration = Duration::from_secs(2);

/// The time between two turns at `qps`: one write per [`PRESSED_SHARE`] of `qps` (at most an
/// hour, for a budget that barely refills).
pub fn turn_spacing(qps: f64) -> Duration {
    const LONGEST: Duration = Duration::from_secs(3600);
    Duration::try_from_secs_f64(1.0 / (qps * PRESSED_SHARE)).map_or(LONGEST, |d| d.min(LONGEST))
}

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
    /// While the budget is pressed: the earliest free turn.
    next_turn: Option<Instant>,
    /// While the budget is pressed: the turn each waiting key was given.
    turns: HashMap<String, Instant>,
}

impl State {
    fn hold_within(
        &mut self,
        key: &str,
        now: Instant,
        interval: Duration,
        slow: Duration,
    ) -> Option<Duration> {
        let last = self.last.get(key).copied();
        let hold = hold_for(last, now, interval);
        if last.is_some_and(|t| now.saturating_duration_since(t) >= slow) {
            // Older than either interval: no longer needed.
            self.last.remove(key);
        }
        hold
    }

    /// `key`'s turn (a new one after the others' when it has none): `None` when it is now.
    fn take_turn(&mut self, key: &str, now: Instant, spacing: Duration) -> Option<Duration> {
        let turn = match self.turns.get(key) {
            Some(&turn) => turn,
            None => {
                let turn = self.next_turn.map_or(now, |next| next.max(now));
                self.next_turn = Some(turn + spacing);
                self.turns.insert(key.to_owned(), turn);
                turn
            }
        };
        if turn <= now {
            self.turns.remove(key);
            None
        } else {
            Some((turn - now).min(PRESSED_RECHECK))
        }
    }
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
    /// the interval ago, or waits for its turn; re-queue it after `d` and ask again then.
    pub fn hold(&self, key: &str, now: Instant) -> Option<Duration> {
        self.hold_with(key, now, self.interval)
    }

    /// [`Self::hold`] for a write that changes nothing but the count of terminating pods:
    /// held until [`TERMINATING_WRITE_INTERVAL`] after the last write.
    pub fn hold_slow(&self, key: &str, now: Instant) -> Option<Duration> {
        self.hold_with(key, now, self.slow)
    }

    fn hold_with(&self, key: &str, now: Instant, interval: Duration) -> Option<Duration> {
        if self.interval.is_zero() {
            return None;
        }
        let pressed = self.budget.as_ref().filter(|b| b.is_pressed(now));
        let mut state = self.state.lock();
        let Some(budget) = pressed else {
            // Enough budget: no turns to wait for.
            state.turns.remove(key);
            return state.hold_within(key, now, interval, self.slow);
        };
        if let Some(hold) = state.hold_within(key, now, self.slow, self.slow) {
            return Some(hold);
        }
        state.take_turn(key, now, turn_spacing(budget.qps()))
    }

    /// Records a routine status write of `key` at `now`.
    pub fn wrote(&self, key: &str, now: Instant) {
        if self.interval.is_zero() {
            return;
        }
        let mut state = self.state.lock();
        state.last.insert(key.to_owned(), now);
        state.turns.remove(key);
        // Entries only matter for one interval: drop the expired ones whenever the map has
        // doubled since the last prune, so it stays the size of one interval's writes.
        if state.last.len() >= PRUNE_FLOOR.max(2 * state.after_prune) {
            let interval = self.slow;
            state
                .last
                .retain(|_, t| now.saturating_duration_since(*t) < interval);
            // A turn not taken for a whole interval belongs to a key that found nothing to
            // write by then.
            state
                .turns
                .retain(|_, t| now.saturating_duration_since(*t) < interval);
            state.after_prune = state.last.len();
        }
    }

    /// Forgets `key` (its object was deleted).
    pub fn forget(&self, key: &str) {
        let mut state = self.state.lock();
        state.last.remove(key);
        state.turns.remove(key);
    }

    /// Keys currently remembered (written lately or waiting for a turn).
    pub fn len(&self) -> usize {
        let state = self.state.lock();
        state.last.len() + state.turns.len()
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

    #[tokio::test(start_paused = true)]
    async fn keys_take_turns_at_a_share_of_the_budget_while_it_is_pressed() {
        // 2 requests per second, burst 100, drained: pressed (below 50 tokens) for 25 s.
        let budget = Arc::new(RateLimiter::new(2.0, 100));
        for _ in 0..100 {
            budget.reserve();
        }
        let pacer = StatusPacer::new(200 * MS).with_budget(Some(budget.clone()));
        let t0 = Instant::now();
        // A fifth of 2 per second: one turn every 2.5 s.
        assert_eq!(turn_spacing(2.0), 2_500 * MS);
        // (key, ms after t0, hold in ms); a key that may write does (the caller's `wrote`).
        let cases: [(&str, u32, Option<u32>); 11] = [
            ("ns/a", 0, None),
            // b's turn is at 2.5 s, c's at 5 s; each is looked at again after at most 2 s.
            ("ns/b", 0, Some(2_000)),
            ("ns/c", 0, Some(2_000)),
            // b keeps its turn instead of queueing again.
            ("ns/b", 1_000, Some(1_500)),
            ("ns/c", 2_000, Some(2_000)),
            ("ns/b", 2_500, None),
            // Written 0.5 s ago: the longer per-object interval applies first.
            ("ns/b", 3_000, Some(500)),
            // The next free turn is at 7.5 s.
            ("ns/d", 3_000, Some(2_000)),
            ("ns/c", 5_000, None),
            // a wrote at 0 and waits again, behind d: its turn is at 10 s.
            ("ns/a", 5_000, Some(2_000)),
            ("ns/d", 7_500, None),
        ];
        for (key, at, want) in cases {
            let now = t0 + at * MS;
            let got = pacer.hold(key, now);
            assert_eq!(got, want.map(|ms| ms * MS), "{key} at {at} ms");
            if got.is_none() {
                pacer.wrote(key, now);
            }
        }
        // Terminating-only writes take turns as well.
        assert_eq!(pacer.hold_slow("ns/e", t0 + 7_500 * MS), Some(2_000 * MS));
        // At 30 s the bucket holds 60 tokens: no longer pressed, a waiting key writes at once
        // and gives up its turn.
        assert_eq!(pacer.hold("ns/a", t0 + 30_000 * MS), None);
        pacer.forget("ns/e");
        pacer.forget("ns/a");
        assert_eq!(pacer.len(), 3, "b, c and d written lately; no turns left");
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
}
