//! What both webhook reviewers (TokenReview, SubjectAccessReview) share: the request timeout
//! and a small expiring cache of their answers.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Upstream `ClientTimeout` of the delegated authentication and authorization clients.
pub(super) const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Entries a review cache keeps before it drops expired ones (and, if still full, all).
const CACHE_CAPACITY: usize = 4096;

/// Answers kept until their own deadline. Bounded: when full, expired entries go; if it is
/// still full, everything goes (a storm of distinct keys must not grow memory).
pub(super) struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub(super) fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn get(&self, key: &K, now: Instant) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(_, deadline)| *deadline > now)
            .map(|(v, _)| v.clone())
    }

    pub(super) fn insert(&self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_CAPACITY {
            entries.retain(|_, (_, deadline)| *deadline > now);
            if entries.len() >= CACHE_CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (value, now + ttl));
    }
}
