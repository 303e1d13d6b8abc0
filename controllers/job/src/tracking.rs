//! Pods whose tracking-finalizer removal the controller issued but has not yet seen in the
//! pod cache, per Job key. While a UID is here the pod counts as already accounted for, so a
//! pod cache that lags behind the finalizer patch never makes a pod count twice.
//!
//! Mirrors upstream `uidTrackingExpectations` in `pkg/controller/job/tracking_utils.go`
//! (the runtime's `UidTrackingExpectations` tracks pod deletions by key and replaces its set on
//! every call, while this one accumulates UIDs and is consulted by UID).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct FinalizerExpectations {
    by_job: Mutex<HashMap<String, HashSet<String>>>,
}

impl FinalizerExpectations {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.by_job
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Jobs with removals still unobserved (`rkcm_runtime::tracked`).
    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// UIDs of `job_key`'s pods whose finalizer removal is still unobserved.
    pub fn get(&self, job_key: &str) -> HashSet<String> {
        self.map().get(job_key).cloned().unwrap_or_default()
    }

    /// Registers removals about to be issued.
    pub fn expect_removed(&self, job_key: &str, uids: impl IntoIterator<Item = String>) {
        self.map()
            .entry(job_key.to_owned())
            .or_default()
            .extend(uids);
    }

    /// The removal of `uid`'s finalizer was observed (or will never be: the patch failed).
    pub fn observed(&self, job_key: &str, uid: &str) {
        let mut map = self.map();
        if let Some(set) = map.get_mut(job_key) {
            set.remove(uid);
            if set.is_empty() {
                map.remove(job_key);
            }
        }
    }

    pub fn delete(&self, job_key: &str) {
        self.map().remove(job_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulates_and_observes() {
        let e = FinalizerExpectations::default();
        e.expect_removed("ns/a", ["u1".to_owned(), "u2".to_owned()]);
        e.expect_removed("ns/a", ["u3".to_owned()]);
        assert_eq!(e.get("ns/a").len(), 3);
        e.observed("ns/a", "u2");
        e.observed("ns/a", "unknown");
        e.observed("ns/b", "u1");
        let got = e.get("ns/a");
        assert!(got.contains("u1") && got.contains("u3") && !got.contains("u2"));
        e.delete("ns/a");
        assert!(e.get("ns/a").is_empty());
    }
}
