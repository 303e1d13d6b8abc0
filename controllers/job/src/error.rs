//! The controller's error type: one variant per sync step, each naming the Job's key. A sync
//! that returns an error is requeued with per-key backoff (1 s doubling to 60 s).

use rkcm_runtime::error::PodsError;

/// Errors of one sync of one Job (or one orphan pod).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Claiming (nothing else was done), creating (the rest of the slow start was skipped)
    /// or deleting pods failed.
    #[error(transparent)]
    Pods(#[from] PodsError),
    /// Removing the tracking finalizer from a finished pod failed (other than NotFound).
    #[error("removing tracking finalizers of {key}: {source}")]
    RemoveFinalizers {
        key: String,
        #[source]
        source: rkcm_runtime::Error,
    },
    /// The status write failed (a conflict means the cache was stale: retried).
    #[error("updating status of {key} ({step}): {source}")]
    UpdateStatus {
        key: String,
        step: &'static str,
        #[source]
        source: kube::Error,
    },
    /// The stale-cache guard held the sync back: a cache has not yet seen this controller's
    /// own last write for the Job. Nothing was read or written; retried with backoff.
    #[error("syncing {key}: {source}")]
    StaleCache {
        key: String,
        #[source]
        source: Box<rkcm_runtime::workload::consistency::Stale>,
    },
}

impl Error {
    /// A retry that is part of normal operation (logged at debug, not as a failure): the
    /// stale-cache guard, or a status write that lost an optimistic-concurrency race.
    pub fn is_routine_retry(&self) -> bool {
        match self {
            Error::StaleCache { .. } => true,
            Error::UpdateStatus { source, .. } => {
                matches!(source, kube::Error::Api(s) if s.code == 409)
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_step_and_key() {
        let e = Error::StaleCache {
            key: "ns/job".into(),
            source: Box::new(rkcm_testkit::builders::stale("batch", "jobs", "42", "41")),
        };
        assert!(e.to_string().contains("ns/job"), "{e}");
        assert!(e.is_routine_retry());
        let conflict = Error::UpdateStatus {
            key: "ns/job".into(),
            step: "adding uncounted pods",
            source: rkcm_testkit::builders::api_error(409, "Conflict"),
        };
        assert!(conflict.is_routine_retry());
        assert!(e.to_string().starts_with("syncing ns/job: "));
    }
}
