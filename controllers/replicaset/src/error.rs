//! The controller's error type: one variant per sync step, each naming the owner's key.
//! A sync that returns an error is requeued with backoff; nothing here ever stops the
//! controller.

use rkcm_runtime::error::StatusError;
use rkcm_runtime::error::{PodsError, is_write_conflict};

/// Errors of one sync of one ReplicaSet or ReplicationController.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Claiming (nothing else was done), creating (the rest of the slow start was skipped)
    /// or deleting pods failed.
    #[error(transparent)]
    Pods(#[from] PodsError),
    /// The stale-cache guard held the sync back: a cache has not yet seen the controller's
    /// own last write for this owner. Nothing was read or written; retried with backoff.
    #[error("syncing {key}: {source}")]
    StaleCache {
        key: String,
        #[source]
        source: rkcm_runtime::workload::consistency::Stale,
    },
    /// Writing the status subresource failed.
    #[error(transparent)]
    UpdateStatus(#[from] StatusError),
}

impl Error {
    /// An expected requeue in normal operation, not a failure to warn about: the stale-cache
    /// guard held the sync back (counted by `replicaset_controller_stale_sync_skips_total`),
    /// or a write made from a cached copy met a 409 conflict. Retried with backoff like any
    /// error; the worker logs it at debug.
    pub fn is_expected_requeue(&self) -> bool {
        match self {
            Error::StaleCache { .. } => true,
            Error::UpdateStatus(StatusError { source, .. }) => is_write_conflict(source),
            Error::Pods(PodsError { source, .. }) => match source {
                rkcm_runtime::Error::Api { source, .. }
                | rkcm_runtime::Error::ForOwner { source, .. } => is_write_conflict(source),
                _ => false,
            },
        }
    }

    /// The text upstream puts in the `ReplicaFailure` condition: the create/delete error as
    /// the API server worded it.
    pub fn condition_message(&self) -> String {
        match self {
            Error::Pods(PodsError { source, .. }) => runtime_error_text(source),
            Error::UpdateStatus(StatusError { source, .. }) => {
                rkcm_runtime::error::error_message(source)
            }
            Error::StaleCache { source, .. } => source.to_string(),
        }
    }
}

/// The API's own message for API errors, the error text otherwise.
pub(crate) fn runtime_error_text(e: &rkcm_runtime::Error) -> String {
    match e {
        rkcm_runtime::Error::Api { source, .. } | rkcm_runtime::Error::ForOwner { source, .. } => {
            rkcm_runtime::error::error_message(source)
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use rkcm_runtime::error::PodStep;
    use rkcm_testkit::builders::{api_error, stale};

    use super::*;

    #[test]
    fn condition_message_is_the_api_message() {
        let status = kube::core::Status::failure(
            "pods \"web-abc\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2",
            "Forbidden",
        )
        .with_code(403)
        .boxed();
        let e = Error::Pods(PodsError {
            step: PodStep::Create,
            key: "ns/web".into(),
            source: rkcm_runtime::Error::ForOwner {
                verb: "create",
                kind: "Pod",
                owner: "ns/web".into(),
                source: kube::Error::Api(status),
            },
        });
        assert!(
            e.condition_message()
                .starts_with("pods \"web-abc\" is forbidden: exceeded quota")
        );
        assert!(e.to_string().contains("ns/web"), "{e}");
        assert!(e.to_string().starts_with("creating pods for ns/web: "));
        assert!(
            !e.is_expected_requeue(),
            "a quota refusal is worth a warning"
        );
    }

    #[test]
    fn stale_cache_and_conflicts_are_expected_requeues() {
        let stale = Error::StaleCache {
            key: "ns/web".into(),
            source: stale("", "pods", "12", "11"),
        };
        assert!(stale.is_expected_requeue());
        let conflict = Error::UpdateStatus(StatusError::new(
            "replicaset",
            "ns/web",
            api_error(409, "Conflict"),
        ));
        assert!(conflict.is_expected_requeue());
        let adoption = Error::Pods(PodsError {
            step: PodStep::Claim,
            key: "ns/web".into(),
            source: rkcm_runtime::Error::api(
                "patch",
                "Pod",
                "ns/web-1",
                api_error(409, "Conflict"),
            ),
        });
        assert!(adoption.is_expected_requeue());
        let exists = Error::Pods(PodsError {
            step: PodStep::Create,
            key: "ns/web".into(),
            source: rkcm_runtime::Error::api(
                "create",
                "Pod",
                "ns/web",
                api_error(409, "AlreadyExists"),
            ),
        });
        assert!(!exists.is_expected_requeue());
        let server = Error::UpdateStatus(StatusError::new(
            "replicaset",
            "ns/web",
            api_error(500, "InternalError"),
        ));
        assert!(!server.is_expected_requeue());
    }
}
