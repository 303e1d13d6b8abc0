//! The failed-pod back-off: per (DaemonSet UID, observed generation, node), a failed daemon
//! pod is deleted at most once per window, the window doubling from 1 s to 15 min. Pure.
//!
//! Mirrors client-go `util/flowcontrol.Backoff` as upstream's controller-manager wires it for
//! the DaemonSet controller (`NewBackOff(1s, 15m)`, no jitter) and `failedPodsBackoffKey` of
//! `pkg/controller/daemon/daemon_controller.go`.

use std::collections::HashMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::DaemonSet;

use crate::consts::{FAILED_POD_BACKOFF_INITIAL, FAILED_POD_BACKOFF_MAX};

/// `failedPodsBackoffKey`: `<ds uid>/<status.observedGeneration>/<node>`, so a new
/// generation starts over.
pub fn backoff_key(ds: &DaemonSet, node: &str) -> String {
    let uid = ds.metadata.uid.as_deref().unwrap_or_default();
    let generation = ds
        .status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .unwrap_or(0);
    format!("{uid}/{generation}/{node}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    backoff: Duration,
    last_update: Timestamp,
}

/// Back-off windows by key.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(FAILED_POD_BACKOFF_INITIAL, FAILED_POD_BACKOFF_MAX)
    }
}

fn since(now: Timestamp, then: Timestamp) -> SignedDuration {
    now.duration_since(then)
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            entries: HashMap::new(),
        }
    }

    /// An entry older than twice the maximum counts as forgotten.
    fn expired(&self, now: Timestamp, entry: &Entry) -> bool {
        let limit =
            SignedDuration::try_from(self.max.saturating_mul(2)).unwrap_or(SignedDuration::MAX);
        since(now, entry.last_update) > limit
    }

    /// `Next`: opens the first window, or doubles the current one (up to the maximum).
    pub fn next(&mut self, key: &str, now: Timestamp) {
        let fresh = self.entries.get(key).is_none_or(|e| self.expired(now, e));
        let backoff = if fresh {
            self.initial
        } else {
            self.entries
                .get(key)
                .map_or(self.initial, |e| e.backoff.saturating_mul(2).min(self.max))
        };
        self.entries.insert(
            key.to_owned(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }

    /// `IsInBackOffSinceUpdate`: less than the current window has passed since the last
    /// [`Backoff::next`].
    pub fn in_backoff_since_update(&self, key: &str, now: Timestamp) -> bool {
        let Some(e) = self.entries.get(key) else {
            return false;
        };
        if self.expired(now, e) {
            return false;
        }
        let window = SignedDuration::try_from(e.backoff).unwrap_or(SignedDuration::MAX);
        since(now, e.last_update) < window
    }

    /// `Get`: the current window (zero for an unknown key).
    pub fn get(&self, key: &str) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| e.backoff)
    }

    /// `GC`: drops expired entries.
    pub fn gc(&mut self, now: Timestamp) {
        let max = self.max;
        let limit = SignedDuration::try_from(max.saturating_mul(2)).unwrap_or(SignedDuration::MAX);
        self.entries
            .retain(|_, e| since(now, e.last_update) <= limit);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn windows_double_up_to_the_max_and_reset_after_twice_the_max() {
        let mut b = Backoff::default();
        assert!(!b.in_backoff_since_update("k", t(0)));
        assert_eq!(b.get("k"), Duration::ZERO);
        b.next("k", t(0));
        assert_eq!(b.get("k"), Duration::from_secs(1));
        assert!(b.in_backoff_since_update("k", t(0)));
        assert!(!b.in_backoff_since_update("k", t(1)), "window is [0, 1s)");
        b.next("k", t(1));
        assert_eq!(b.get("k"), Duration::from_secs(2));
        assert!(b.in_backoff_since_update("k", t(2)));
        assert!(!b.in_backoff_since_update("k", t(3)));
        for i in 0..20 {
            b.next("k", t(10 + i));
        }
        assert_eq!(b.get("k"), Duration::from_secs(900), "capped at 15 min");
        // Forgotten after twice the max without an update.
        assert!(!b.in_backoff_since_update("k", t(29 + 1801 + 1)));
        b.next("k", t(29 + 1801 + 1));
        assert_eq!(b.get("k"), Duration::from_secs(1), "starts over");
    }

    #[test]
    fn gc_drops_only_expired_entries() {
        let mut b = Backoff::default();
        b.next("old", t(0));
        b.next("new", t(1000));
        b.gc(t(1800));
        assert_eq!(b.len(), 2);
        b.gc(t(1801));
        assert_eq!(b.len(), 1);
        assert_eq!(b.get("new"), Duration::from_secs(1));
    }

    #[test]
    fn key_names_uid_generation_and_node() {
        let ds: DaemonSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "ds", "uid": "u1"},
            "status": {"observedGeneration": 3, "currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}
        }))
        .unwrap_or_default();
        assert_eq!(backoff_key(&ds, "node-a"), "u1/3/node-a");
    }
}
