//! Pod recreation backoff after failures: 10 s doubling per consecutive failure, capped at
//! 10 minutes, measured from the last failed pod's finish time. The record lives in memory
//! per Job key. Upstream starts a Job's record empty in a new process, so after a failover it
//! replaces a failed pod at once, and so does this controller by default. With
//! [`crate::Config::backoff_from_counted_pods`] (always in sharded mode, where a range moving
//! to another replica is routine) a Job first synced without a record starts from the
//! finished pods its status already accounts for ([`BackoffRecord::of_counted_pods`]), so the
//! backoff survives a restart, a failover and a range taken over.
//!
//! Mirrors upstream `pkg/controller/job/backoff_utils.go`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rkcm_runtime::cache::cached::Pod;

use crate::consts::{POD_FAILURE_BACKOFF_BASE, POD_FAILURE_BACKOFF_MAX};
use crate::indexes::index_absolute_failure_count;
use crate::pods::{finished_time, has_tracking_finalizer, is_failed, is_succeeded};

/// Consecutive failures since the last success, and when the last one finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    pub failures_after_last_success: i32,
    pub last_failure_time: Option<jiff::Timestamp>,
}

impl BackoffRecord {
    /// The record after this sync's newly finished pods (upstream `newBackoffRecord`).
    pub fn next(self, new_succeeded: &[&Pod], new_failed: &[&Pod]) -> Self {
        let mut succeeded: Vec<jiff::Timestamp> =
            new_succeeded.iter().map(|p| finished_time(p)).collect();
        let mut failed: Vec<jiff::Timestamp> =
            new_failed.iter().map(|p| finished_time(p)).collect();
        succeeded.sort();
        failed.sort();
        match (succeeded.last(), failed.last()) {
            (None, None) => self,
            (None, Some(last)) => Self {
                failures_after_last_success: self
                    .failures_after_last_success
                    .saturating_add(i32::try_from(failed.len()).unwrap_or(i32::MAX)),
                last_failure_time: Some(*last),
            },
            (Some(_), None) => Self::default(),
            (Some(last_success), Some(_)) => {
                let after: Vec<&jiff::Timestamp> =
                    failed.iter().filter(|t| *t > last_success).collect();
                Self {
                    failures_after_last_success: i32::try_from(after.len()).unwrap_or(i32::MAX),
                    last_failure_time: after.last().map(|t| **t),
                }
            }
        }
    }

    /// The record of a controller that saw the finished pods the Job's status already
    /// accounts for finish, one after the other: pods without the tracking finalizer and pods
    /// listed in `uncountedTerminatedPods` (their finalizer is on its way out). The rest are
    /// exactly the pods [`crate::plan::plan`] adds as newly finished, so a reader of the
    /// cluster (`rkcm explain`) and a controller without a record for the Job (a new process
    /// or a new holder of its range) start from this one and let the plan add the others.
    pub fn of_counted_pods(job: &k8s_openapi::api::batch::v1::Job, pods: &[&Pod]) -> Self {
        let uncounted = job
            .status
            .as_ref()
            .and_then(|s| s.uncounted_terminated_pods.as_ref());
        let listed = |p: &Pod| {
            let uid = p.metadata.uid.as_deref().unwrap_or_default();
            uncounted.is_some_and(|u| {
                [u.succeeded.as_ref(), u.failed.as_ref()]
                    .into_iter()
                    .flatten()
                    .any(|l| l.iter().any(|x| x == uid))
            })
        };
        let counted = || {
            pods.iter()
                .copied()
                .filter(|p| !has_tracking_finalizer(p) || listed(p))
        };
        let succeeded: Vec<&Pod> = counted().filter(|p| is_succeeded(p)).collect();
        let failed: Vec<&Pod> = counted().filter(|p| is_failed(p, job)).collect();
        Self::default().next(&succeeded, &failed)
    }

    /// Time left before pods may be created again.
    pub fn remaining(&self, now: jiff::Timestamp) -> Duration {
        remaining_for(
            self.failures_after_last_success,
            self.last_failure_time,
            now,
        )
    }
}

/// `10s * 2^(failures-1)`, capped, minus the time since `last`; zero when no failures.
pub fn remaining_for(
    failures: i32,
    last: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
) -> Duration {
    if failures <= 0 {
        return Duration::ZERO;
    }
    let Some(last) = last else {
        return Duration::ZERO;
    };
    let mut backoff = POD_FAILURE_BACKOFF_BASE;
    for _ in 1..failures {
        backoff = backoff.saturating_mul(2);
        if backoff >= POD_FAILURE_BACKOFF_MAX {
            backoff = POD_FAILURE_BACKOFF_MAX;
            break;
        }
    }
    let elapsed = now.duration_since(last);
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    backoff.saturating_sub(elapsed)
}

/// Per-index backoff: from the index's last failed pod (its failure counts + 1).
pub fn remaining_for_index(last_failed: Option<&Pod>, now: jiff::Timestamp) -> Duration {
    let Some(pod) = last_failed else {
        return Duration::ZERO;
    };
    remaining_for(
        index_absolute_failure_count(pod).saturating_add(1),
        Some(finished_time(pod)),
        now,
    )
}

/// Backoff records per Job key.
#[derive(Debug, Default)]
pub struct BackoffStore {
    records: Mutex<HashMap<String, BackoffRecord>>,
}

impl BackoffStore {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, BackoffRecord>> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The record of `key`; empty (and not kept) for a Job this process has no record of.
    pub fn get(&self, key: &str) -> BackoffRecord {
        self.map().get(key).copied().unwrap_or_default()
    }

    /// The record of `key`, or, for a Job this process has no record of, `seed` (kept).
    pub fn get_or_seed(&self, key: &str, seed: impl FnOnce() -> BackoffRecord) -> BackoffRecord {
        *self.map().entry(key.to_owned()).or_insert_with(seed)
    }

    pub fn update(&self, key: &str, record: BackoffRecord) {
        self.map().insert(key.to_owned(), record);
    }

    pub fn remove(&self, key: &str) {
        self.map().remove(key);
    }

    /// Jobs with a record (`rkcm_runtime::tracked`).
    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    fn finished_at(t: &str) -> Pod {
        serde_json::from_value(json!({"status": {"containerStatuses": [
            {"name": "a", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "finishedAt": t}}}
        ]}}))
        .unwrap()
    }

    #[test]
    fn next_record_table() {
        let t1 = finished_at("2026-01-01T00:00:01Z");
        let t2 = finished_at("2026-01-01T00:00:02Z");
        let t3 = finished_at("2026-01-01T00:00:03Z");
        let prior = BackoffRecord {
            failures_after_last_success: 2,
            last_failure_time: Some(ts("2026-01-01T00:00:00Z")),
        };
        // (previous, succeeded, failed, want failures, want last)
        let cases: Vec<(BackoffRecord, Vec<&Pod>, Vec<&Pod>, i32, Option<&str>)> = vec![
            (prior, vec![], vec![], 2, Some("2026-01-01T00:00:00Z")),
            (
                prior,
                vec![],
                vec![&t2, &t1],
                4,
                Some("2026-01-01T00:00:02Z"),
            ),
            (prior, vec![&t1], vec![], 0, None),
            (
                prior,
                vec![&t2],
                vec![&t1, &t3],
                1,
                Some("2026-01-01T00:00:03Z"),
            ),
            (prior, vec![&t3], vec![&t1, &t2], 0, None),
            (
                BackoffRecord::default(),
                vec![&t1],
                vec![&t2, &t3],
                2,
                Some("2026-01-01T00:00:03Z"),
            ),
        ];
        for (i, (prev, s, f, n, last)) in cases.into_iter().enumerate() {
            let got = prev.next(&s, &f);
            assert_eq!(got.failures_after_last_success, n, "case {i}");
            assert_eq!(got.last_failure_time, last.map(ts), "case {i}");
        }
    }

    #[test]
    fn remaining_table() {
        let last = Some(ts("2026-01-01T00:00:00Z"));
        // (failures, now, remaining seconds)
        let cases = [
            (0, "2026-01-01T00:00:00Z", 0),
            (1, "2026-01-01T00:00:00Z", 10),
            (1, "2026-01-01T00:00:04Z", 6),
            (1, "2026-01-01T00:00:11Z", 0),
            (2, "2026-01-01T00:00:05Z", 15),
            (3, "2026-01-01T00:00:00Z", 40),
            (7, "2026-01-01T00:00:00Z", 600),
            (100, "2026-01-01T00:00:00Z", 600),
        ];
        for (failures, now, want) in cases {
            assert_eq!(
                remaining_for(failures, last, ts(now)),
                Duration::from_secs(want),
                "{failures} at {now}"
            );
        }
    }

    #[test]
    fn per_index_remaining_uses_failure_counts() {
        let mut pod = finished_at("2026-01-01T00:00:00Z");
        assert_eq!(
            remaining_for_index(None, ts("2026-01-01T00:00:00Z")),
            Duration::ZERO
        );
        assert_eq!(
            remaining_for_index(Some(&pod), ts("2026-01-01T00:00:01Z")),
            Duration::from_secs(9)
        );
        pod.metadata.annotations = Some(
            [(
                "batch.kubernetes.io/job-index-failure-count".to_owned(),
                "1".to_owned(),
            )]
            .into_iter()
            .collect(),
        );
        assert_eq!(
            remaining_for_index(Some(&pod), ts("2026-01-01T00:00:01Z")),
            Duration::from_secs(19)
        );
    }

    /// A pod of `uid` in `phase`, its container finished at `t`, holding the tracking
    /// finalizer or not.
    fn finished_pod(uid: &str, phase: &str, t: &str, finalizer: bool) -> Pod {
        let finalizers: Vec<&str> = if finalizer {
            vec![crate::consts::TRACKING_FINALIZER]
        } else {
            vec![]
        };
        serde_json::from_value(json!({
            "metadata": {"uid": uid, "finalizers": finalizers},
            "status": {"phase": phase, "containerStatuses": [
                {"name": "a", "image": "", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 1, "finishedAt": t}}}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn a_record_starts_from_the_pods_the_status_accounts_for() {
        let job = |uncounted_failed: &[&str]| -> k8s_openapi::api::batch::v1::Job {
            serde_json::from_value(json!({
                "spec": {"template": {}},
                "status": {"uncountedTerminatedPods": {"failed": uncounted_failed}}
            }))
            .unwrap()
        };
        let counted_1 = finished_pod("f1", "Failed", "2026-01-01T00:00:01Z", false);
        let counted_2 = finished_pod("f2", "Failed", "2026-01-01T00:00:02Z", false);
        let uncounted_3 = finished_pod("f3", "Failed", "2026-01-01T00:00:03Z", true);
        let new_4 = finished_pod("f4", "Failed", "2026-01-01T00:00:04Z", true);
        let success_0 = finished_pod("s0", "Succeeded", "2026-01-01T00:00:00Z", false);
        let success_5 = finished_pod("s5", "Succeeded", "2026-01-01T00:00:05Z", false);
        let running = serde_json::from_value::<Pod>(json!({
            "metadata": {"uid": "r"}, "status": {"phase": "Running"}
        }))
        .unwrap();
        // (pods, uncounted failed UIDs in the status, want failures, want last failure)
        let cases: Vec<(Vec<&Pod>, Vec<&str>, i32, Option<&str>)> = vec![
            (vec![], vec![], 0, None),
            (vec![&running], vec![], 0, None),
            (
                vec![&counted_1, &counted_2, &running],
                vec![],
                2,
                Some("2026-01-01T00:00:02Z"),
            ),
            // Listed as uncounted: its finalizer is on its way out, the status holds it.
            (
                vec![&counted_1, &uncounted_3],
                vec!["f3"],
                2,
                Some("2026-01-01T00:00:03Z"),
            ),
            // Still with its finalizer and not listed: the plan adds it, not the seed.
            (
                vec![&counted_1, &new_4],
                vec![],
                1,
                Some("2026-01-01T00:00:01Z"),
            ),
            (
                vec![&success_0, &counted_1, &counted_2],
                vec![],
                2,
                Some("2026-01-01T00:00:02Z"),
            ),
            (vec![&counted_1, &counted_2, &success_5], vec![], 0, None),
        ];
        for (i, (pods, uncounted, n, last)) in cases.into_iter().enumerate() {
            let got = BackoffRecord::of_counted_pods(&job(&uncounted), &pods);
            assert_eq!(got.failures_after_last_success, n, "case {i}");
            assert_eq!(got.last_failure_time, last.map(ts), "case {i}");
        }
    }

    #[test]
    fn a_job_without_a_record_keeps_its_seed_and_a_record_wins_over_it() {
        let store = BackoffStore::default();
        let seeded = BackoffRecord {
            failures_after_last_success: 3,
            last_failure_time: Some(ts("2026-01-01T00:00:03Z")),
        };
        assert_eq!(store.get_or_seed("ns/a", || seeded), seeded);
        assert_eq!(
            store.get_or_seed("ns/a", BackoffRecord::default),
            seeded,
            "the seed is kept"
        );
        let updated = BackoffRecord {
            failures_after_last_success: 4,
            last_failure_time: Some(ts("2026-01-01T00:00:04Z")),
        };
        store.update("ns/a", updated);
        assert_eq!(store.get_or_seed("ns/a", || seeded), updated);
        store.remove("ns/a");
        assert_eq!(
            store.get_or_seed("ns/a", BackoffRecord::default),
            BackoffRecord::default(),
            "a forgotten Job starts again"
        );
    }

    /// Without a seed (upstream's way), reading a Job that never failed keeps nothing.
    #[test]
    fn reading_a_job_without_a_record_keeps_nothing() {
        let store = BackoffStore::default();
        assert_eq!(store.get("ns/a"), BackoffRecord::default());
        assert!(store.is_empty(), "an empty record was kept");
        let failed = BackoffRecord {
            failures_after_last_success: 1,
            last_failure_time: Some(ts("2026-01-01T00:00:01Z")),
        };
        store.update("ns/a", failed);
        assert_eq!(store.get("ns/a"), failed);
    }
}
