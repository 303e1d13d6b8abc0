//! Controller expectations: how many creates and deletes of children a controller has issued
//! for an owner and not yet seen in its informer cache, mirroring `ControllerExpectations` and
//! `UIDTrackingControllerExpectations` of `pkg/controller/controller_utils.go`.
//!
//! Guarantees:
//! - While an owner's expectations are unsatisfied, the controller can tell that its cache
//!   still lags its own writes and must not create or delete children again (no duplicate
//!   pods, no over-deletion).
//! - Expectations never wedge a controller: a record older than [`EXPECTATIONS_TIMEOUT`]
//!   (measured from the last `set`, on the injected clock's monotonic time) counts as
//!   satisfied, so lost watch events only delay a sync.
//! - [`UidTrackingExpectations`] counts each expected child deletion at most once, even if the
//!   child is observed twice (deletionTimestamp update, then the delete event).
//!
//! Keys are the owner's `namespace/name`; child keys are the children's `namespace/name`.
//! Both types are cheap to clone and share one state between clones.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::clock::SharedClock;

/// After this long without a `set`, an owner's expectations count as satisfied (upstream
/// `ExpectationsTimeout`).
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone, Copy)]
struct Record {
    add: i64,
    del: i64,
    set_at: Instant,
}

impl Record {
    fn fulfilled(&self) -> bool {
        self.add <= 0 && self.del <= 0
    }
}

/// Outstanding creates (`add`) and deletes (`del`) per owner key.
#[derive(Clone)]
pub struct ControllerExpectations {
    clock: SharedClock,
    records: Arc<Mutex<HashMap<String, Record>>>,
}

impl fmt::Debug for ControllerExpectations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerExpectations")
            .field("records", &*self.records.lock())
            .finish_non_exhaustive()
    }
}

impl ControllerExpectations {
    pub fn new(clock: SharedClock) -> Self {
        Self {
            clock,
            records: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The outstanding `(add, del)` of `key`, if a record exists.
    pub fn get(&self, key: &str) -> Option<(i64, i64)> {
        self.records.lock().get(key).map(|r| (r.add, r.del))
    }

    /// Whether the controller may create/delete children of `key`: no record, nothing
    /// outstanding, or the record has expired.
    /// How long until `key`'s unfulfilled expectations expire (zero once they have);
    /// `None` when none are pending. A controller whose sync they hold looks again then: the
    /// observation it waits for may never come (a relist that misses a child created and
    /// deleted meanwhile), and nothing else need enqueue the owner.
    pub fn expires_in(&self, key: &str) -> Option<Duration> {
        let records = self.records.lock();
        let record = records.get(key).filter(|r| !r.fulfilled())?;
        let age = self.clock.now().saturating_duration_since(record.set_at);
        Some(EXPECTATIONS_TIMEOUT.saturating_sub(age))
    }

    pub fn satisfied_expectations(&self, key: &str) -> bool {
        // Mutant (sim only): expectations never hold a sync back.
        if crate::mutants::on("no-expectations") {
            return true;
        }
        let records = self.records.lock();
        let Some(record) = records.get(key) else {
            // Never set, or deleted with the owner: nothing in flight that the cache lags.
            tracing::trace!(key, "no expectations, controller can sync");
            return true;
        };
        if record.fulfilled() {
            tracing::trace!(
                key,
                add = record.add,
                del = record.del,
                "expectations satisfied"
            );
            return true;
        }
        let age = self.clock.now().saturating_duration_since(record.set_at);
        if age > EXPECTATIONS_TIMEOUT {
            tracing::debug!(
                key,
                add = record.add,
                del = record.del,
                age_seconds = age.as_secs(),
                "expectations expired, controller can sync"
            );
            return true;
        }
        tracing::trace!(
            key,
            add = record.add,
            del = record.del,
            "expectations not yet satisfied"
        );
        false
    }

    /// Replaces the record of `key` with `add` creates and `del` deletes outstanding, and
    /// restarts its timeout.
    pub fn set_expectations(&self, key: &str, add: i64, del: i64) {
        let record = Record {
            add,
            del,
            set_at: self.clock.now(),
        };
        tracing::trace!(key, add, del, "setting expectations");
        self.records.lock().insert(key.to_owned(), record);
    }

    /// Expects `adds` creates (and no deletes) for `key`.
    pub fn expect_creations(&self, key: &str, adds: i64) {
        self.set_expectations(key, adds, 0);
    }

    /// Expects `dels` deletes (and no creates) for `key`.
    pub fn expect_deletions(&self, key: &str, dels: i64) {
        self.set_expectations(key, 0, dels);
    }

    /// Adds to the outstanding counts of an existing record; the timeout is not restarted.
    pub fn raise_expectations(&self, key: &str, add: i64, del: i64) {
        self.adjust(key, add, del);
    }

    /// Subtracts from the outstanding counts of an existing record; the timeout is not
    /// restarted.
    pub fn lower_expectations(&self, key: &str, add: i64, del: i64) {
        self.adjust(key, add.saturating_neg(), del.saturating_neg());
    }

    /// One expected create of a child of `key` was observed (no-op without a record).
    pub fn creation_observed(&self, key: &str) {
        self.lower_expectations(key, 1, 0);
    }

    /// One expected delete of a child of `key` was observed (no-op without a record).
    pub fn deletion_observed(&self, key: &str) {
        self.lower_expectations(key, 0, 1);
    }

    /// Drops the record of `key` (its owner is gone).
    pub fn delete_expectations(&self, key: &str) {
        self.records.lock().remove(key);
    }

    /// Owners with a record (`rkcm_runtime::tracked`).
    pub fn len(&self) -> usize {
        self.records.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn adjust(&self, key: &str, add: i64, del: i64) {
        let mut records = self.records.lock();
        // Without a record there is nothing in flight to account for; creating one here
        // would block the owner until the timeout.
        let Some(record) = records.get_mut(key) else {
            return;
        };
        record.add = record.add.saturating_add(add);
        record.del = record.del.saturating_add(del);
        tracing::trace!(
            key,
            add = record.add,
            del = record.del,
            "expectations adjusted"
        );
    }
}

/// [`ControllerExpectations`] whose deletions are tracked by child key, so each expected
/// child deletion is counted once however often it is observed.
#[derive(Clone)]
pub struct UidTrackingExpectations {
    expectations: ControllerExpectations,
    /// Child keys whose deletion is still expected, per owner key.
    pending_deletes: Arc<Mutex<HashMap<String, HashSet<String>>>>,
}

impl fmt::Debug for UidTrackingExpectations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UidTrackingExpectations")
            .field("expectations", &self.expectations)
            .field("pending_deletes", &*self.pending_deletes.lock())
            .finish()
    }
}

impl UidTrackingExpectations {
    pub fn new(clock: SharedClock) -> Self {
        Self {
            expectations: ControllerExpectations::new(clock),
            pending_deletes: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The outstanding `(add, del)` of `key`, if a record exists.
    pub fn get(&self, key: &str) -> Option<(i64, i64)> {
        self.expectations.get(key)
    }

    /// The child keys of `key` whose deletion is still expected.
    pub fn get_deletions(&self, key: &str) -> Option<HashSet<String>> {
        self.pending_deletes.lock().get(key).cloned()
    }

    /// See [`ControllerExpectations::satisfied_expectations`].
    pub fn satisfied_expectations(&self, key: &str) -> bool {
        self.expectations.satisfied_expectations(key)
    }

    /// See [`ControllerExpectations::expires_in`].
    pub fn expires_in(&self, key: &str) -> Option<Duration> {
        self.expectations.expires_in(key)
    }

    /// See [`ControllerExpectations::expect_creations`].
    pub fn expect_creations(&self, key: &str, adds: i64) {
        self.expectations.expect_creations(key, adds);
    }

    /// See [`ControllerExpectations::creation_observed`].
    pub fn creation_observed(&self, key: &str) {
        self.expectations.creation_observed(key);
    }

    /// See [`ControllerExpectations::raise_expectations`].
    pub fn raise_expectations(&self, key: &str, add: i64, del: i64) {
        self.expectations.raise_expectations(key, add, del);
    }

    /// See [`ControllerExpectations::lower_expectations`].
    pub fn lower_expectations(&self, key: &str, add: i64, del: i64) {
        self.expectations.lower_expectations(key, add, del);
    }

    /// Expects `adds` creations and the deletion of exactly these children of `key` at once
    /// (duplicates count once; a DaemonSet sync may do both), replacing any record and set
    /// still pending.
    pub fn set_expectations(&self, key: &str, adds: i64, child_keys: Vec<String>) {
        let children: HashSet<String> = child_keys.into_iter().collect();
        let count = i64::try_from(children.len()).unwrap_or(i64::MAX);
        let mut pending = self.pending_deletes.lock();
        if let Some(previous) = pending.get(key)
            && !previous.is_empty()
        {
            // Upstream logs this too: the previous deletions will never be accounted for,
            // which is harmless only because the new set supersedes them.
            tracing::debug!(key, previous = ?previous, "clobbering pending expected deletions");
        }
        pending.insert(key.to_owned(), children);
        // Under the set's lock so a concurrent deletion_observed sees set and count together.
        self.expectations.set_expectations(key, adds, count);
    }

    /// Expects the deletion of exactly these children of `key` (and no creations), replacing
    /// any set still pending.
    pub fn expect_deletions(&self, key: &str, child_keys: Vec<String>) {
        self.set_expectations(key, 0, child_keys);
    }

    /// The deletion of child `child_key` of `key` was observed; counted only if it was
    /// expected and not yet observed.
    pub fn deletion_observed(&self, key: &str, child_key: &str) {
        let mut pending = self.pending_deletes.lock();
        let Some(children) = pending.get_mut(key) else {
            return;
        };
        if children.remove(child_key) {
            tracing::trace!(key, child = child_key, "expected deletion observed");
            self.expectations.lower_expectations(key, 0, 1);
        }
    }

    /// Drops the counts and the pending child set of `key` (its owner is gone).
    pub fn delete_expectations(&self, key: &str) {
        let mut pending = self.pending_deletes.lock();
        self.expectations.delete_expectations(key);
        pending.remove(key);
    }

    /// Owners with a record, counted once whether they have counts, a pending child set or
    /// both (`rkcm_runtime::tracked`).
    pub fn len(&self) -> usize {
        let pending = self.pending_deletes.lock();
        let records = self.expectations.records.lock();
        records.len() + pending.keys().filter(|k| !records.contains_key(*k)).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock;

    const KEY: &str = "ns/owner";

    #[tokio::test(start_paused = true)]
    async fn pending_expectations_say_when_they_expire() {
        let exp = ControllerExpectations::new(clock::system());
        assert_eq!(exp.expires_in(KEY), None, "none set");
        exp.expect_creations(KEY, 1);
        assert_eq!(exp.expires_in(KEY), Some(EXPECTATIONS_TIMEOUT));
        tokio::time::advance(Duration::from_secs(100)).await;
        assert_eq!(
            exp.expires_in(KEY),
            Some(EXPECTATIONS_TIMEOUT - Duration::from_secs(100))
        );
        tokio::time::advance(EXPECTATIONS_TIMEOUT).await;
        assert_eq!(exp.expires_in(KEY), Some(Duration::ZERO), "expired");
        exp.creation_observed(KEY);
        assert_eq!(exp.expires_in(KEY), None, "fulfilled");
    }

    #[tokio::test(start_paused = true)]
    async fn raised_expectations_are_satisfied_once_observed() {
        let exp = ControllerExpectations::new(clock::system());
        exp.expect_creations(KEY, 2);
        assert!(!exp.satisfied_expectations(KEY));
        exp.raise_expectations(KEY, 1, 1);
        assert_eq!(exp.get(KEY), Some((3, 1)));
        for _ in 0..3 {
            assert!(!exp.satisfied_expectations(KEY));
            exp.creation_observed(KEY);
        }
        assert!(
            !exp.satisfied_expectations(KEY),
            "a delete is still outstanding"
        );
        exp.deletion_observed(KEY);
        assert_eq!(exp.get(KEY), Some((0, 0)));
        assert!(exp.satisfied_expectations(KEY));
        // Extra observations (e.g. children created by someone else) keep it satisfied.
        exp.creation_observed(KEY);
        assert_eq!(exp.get(KEY), Some((-1, 0)));
        assert!(exp.satisfied_expectations(KEY));
    }

    #[tokio::test(start_paused = true)]
    async fn lower_expectations_accounts_for_skipped_creates() {
        let exp = ControllerExpectations::new(clock::system());
        exp.set_expectations(KEY, 5, 2);
        exp.lower_expectations(KEY, 3, 0);
        assert_eq!(exp.get(KEY), Some((2, 2)));
        assert!(!exp.satisfied_expectations(KEY));
        exp.lower_expectations(KEY, 2, 2);
        assert!(exp.satisfied_expectations(KEY));
    }

    #[tokio::test(start_paused = true)]
    async fn expectations_expire_five_minutes_after_the_last_set() {
        let exp = ControllerExpectations::new(clock::system());
        exp.expect_deletions(KEY, 1);
        tokio::time::advance(Duration::from_secs(4 * 60)).await;
        // Lowering (without satisfying) must not restart the timeout.
        exp.set_expectations("ns/other", 1, 0);
        exp.raise_expectations(KEY, 0, 1);
        exp.lower_expectations(KEY, 0, 1);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(
            !exp.satisfied_expectations(KEY),
            "expired at exactly the timeout"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(
            exp.satisfied_expectations(KEY),
            "not expired after the timeout"
        );
        assert!(
            !exp.satisfied_expectations("ns/other"),
            "a younger record expired too"
        );

        // A new set restarts the timeout.
        exp.expect_deletions(KEY, 1);
        assert!(!exp.satisfied_expectations(KEY));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_record_it_is_satisfied_and_observations_are_no_ops() {
        let exp = ControllerExpectations::new(clock::system());
        assert!(exp.satisfied_expectations(KEY));
        exp.creation_observed(KEY);
        exp.deletion_observed(KEY);
        exp.lower_expectations(KEY, 1, 1);
        exp.raise_expectations(KEY, 1, 1);
        assert_eq!(exp.get(KEY), None, "an observation created a record");
        assert!(exp.satisfied_expectations(KEY));
    }

    #[tokio::test(start_paused = true)]
    async fn delete_expectations_drops_the_record() {
        let exp = ControllerExpectations::new(clock::system());
        exp.expect_creations(KEY, 3);
        let clone = exp.clone();
        clone.delete_expectations(KEY);
        assert_eq!(exp.get(KEY), None, "clones must share state");
        assert!(exp.satisfied_expectations(KEY));
    }

    #[tokio::test(start_paused = true)]
    async fn uid_tracked_deletion_counts_once_even_if_observed_twice() {
        let exp = UidTrackingExpectations::new(clock::system());
        exp.expect_deletions(KEY, vec!["ns/a".into(), "ns/b".into(), "ns/a".into()]);
        assert_eq!(
            exp.get(KEY),
            Some((0, 2)),
            "duplicate child keys count once"
        );
        exp.deletion_observed(KEY, "ns/a");
        exp.deletion_observed(KEY, "ns/a");
        exp.deletion_observed(KEY, "ns/unexpected");
        assert_eq!(exp.get(KEY), Some((0, 1)));
        assert!(!exp.satisfied_expectations(KEY));
        exp.deletion_observed(KEY, "ns/b");
        assert!(exp.satisfied_expectations(KEY));
        assert_eq!(exp.get_deletions(KEY), Some(HashSet::new()));
    }

    #[tokio::test(start_paused = true)]
    async fn uid_tracked_expectations_replace_and_delete() {
        let exp = UidTrackingExpectations::new(clock::system());
        exp.expect_deletions(KEY, vec!["ns/a".into()]);
        exp.expect_deletions(KEY, vec!["ns/b".into(), "ns/c".into()]);
        exp.deletion_observed(KEY, "ns/a");
        assert_eq!(
            exp.get(KEY),
            Some((0, 2)),
            "a clobbered child still counted"
        );

        exp.expect_creations("ns/other", 1);
        exp.creation_observed("ns/other");
        assert!(exp.satisfied_expectations("ns/other"));

        exp.delete_expectations(KEY);
        assert_eq!(exp.get(KEY), None);
        assert_eq!(exp.get_deletions(KEY), None);
        exp.deletion_observed(KEY, "ns/b");
        assert_eq!(
            exp.get(KEY),
            None,
            "observation after delete created a record"
        );
        assert!(exp.satisfied_expectations(KEY));
    }

    #[tokio::test(start_paused = true)]
    async fn creations_and_tracked_deletions_set_at_once() {
        let exp = UidTrackingExpectations::new(clock::system());
        exp.set_expectations(KEY, 2, vec!["ns/a".into(), "ns/b".into(), "ns/a".into()]);
        assert_eq!(exp.get(KEY), Some((2, 2)), "a duplicate child counts once");
        assert_eq!(exp.len(), 1);
        exp.creation_observed(KEY);
        exp.creation_observed(KEY);
        exp.deletion_observed(KEY, "ns/a");
        exp.deletion_observed(KEY, "ns/a");
        assert_eq!(exp.get(KEY), Some((0, 1)), "one child observed twice");
        assert!(!exp.satisfied_expectations(KEY));
        exp.deletion_observed(KEY, "ns/b");
        assert!(exp.satisfied_expectations(KEY));
        exp.delete_expectations(KEY);
        assert_eq!(exp.len(), 0);
    }
}
