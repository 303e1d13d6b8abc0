//! The controller's error type: one variant per sync step, each naming the StatefulSet key.
//! A failed sync is requeued with the default controller backoff.

use rkcm_runtime::error::StatusError;
use rkcm_runtime::error::is_write_conflict;

use rkcm_runtime::error::is_namespace_terminating;

/// Errors of one sync of one StatefulSet.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the status subresource failed.
    #[error(transparent)]
    UpdateStatus(#[from] StatusError),
    /// The stale-cache guard held the sync back (a cache lags the controller's own writes).
    #[error("statefulset {key}: {source}")]
    StaleCache {
        key: String,
        #[source]
        source: rkcm_runtime::workload::consistency::Stale,
    },
    /// Adopting or releasing pods or ControllerRevisions failed.
    #[error("claiming {what} for statefulset {key}: {source}")]
    Claim {
        key: String,
        what: &'static str,
        #[source]
        source: rkcm_runtime::Error,
    },
    /// Creating, bumping or deleting a ControllerRevision failed.
    #[error("{step} controller revision for statefulset {key}: {source}")]
    Revision {
        key: String,
        step: &'static str,
        #[source]
        source: rkcm_runtime::Error,
    },
    /// A revision could not be built or read back.
    #[error("statefulset {key}: {message}")]
    RevisionData { key: String, message: String },
    /// The set asks for what this controller does not do (the `Recreate` update strategy),
    /// or `rollingUpdate.maxUnavailable` cannot be read: upstream's error, retried with
    /// backoff.
    #[error("statefulset {key}: {message}")]
    Spec { key: String, message: String },
    /// A pod write (create, update, delete) failed.
    #[error("{step} pod {pod} of statefulset {key}: {source}")]
    Pod {
        key: String,
        step: &'static str,
        pod: String,
        #[source]
        source: kube::Error,
    },
    /// A claim write failed, or a claim blocks its pod.
    #[error("{step} claims of pod {pod} of statefulset {key}: {message}")]
    Claims {
        key: String,
        step: &'static str,
        pod: String,
        message: String,
        namespace_terminating: bool,
    },
}

impl Error {
    /// Retried quietly: a 409 on a write from a cached copy, or a stale-cache skip.
    pub fn is_expected_requeue(&self) -> bool {
        match self {
            Error::UpdateStatus(e) => e.is_write_conflict(),
            // Counted by `statefulset_controller_stale_sync_skips_total`.
            Error::StaleCache { .. } => true,
            Error::Pod { source, .. } => is_write_conflict(source),
            Error::Claim { source, .. } | Error::Revision { source, .. } => match source {
                rkcm_runtime::Error::Api { source, .. }
                | rkcm_runtime::Error::ForOwner { source, .. } => is_write_conflict(source),
                _ => false,
            },
            _ => false,
        }
    }

    /// The namespace is being deleted: every later write would fail as well.
    pub fn is_namespace_terminating(&self) -> bool {
        match self {
            Error::Pod { source, .. } | Error::UpdateStatus(StatusError { source, .. }) => {
                is_namespace_terminating(source)
            }
            Error::Claims {
                namespace_terminating,
                ..
            } => *namespace_terminating,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use rkcm_testkit::builders::{api_error, stale};

    use super::*;

    #[test]
    fn stale_cache_and_conflicts_are_expected_requeues() {
        let status = |code, reason| {
            Error::UpdateStatus(StatusError::new(
                "statefulset",
                "ns/web",
                api_error(code, reason),
            ))
        };
        let pod = |code, reason| Error::Pod {
            key: "ns/web".into(),
            step: "create",
            pod: "web-0".into(),
            source: api_error(code, reason),
        };
        let guard = Error::StaleCache {
            key: "ns/web".into(),
            source: stale("", "pods", "12", "11"),
        };
        for (e, expected) in [
            (guard, true),
            (status(409, "Conflict"), true),
            (pod(409, "Conflict"), true),
            (pod(409, "AlreadyExists"), false),
            (status(403, "Forbidden"), false),
        ] {
            assert_eq!(e.is_expected_requeue(), expected, "{e}");
        }
    }
}
