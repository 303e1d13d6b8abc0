//! The controller's error type: one variant per sync step, each naming the Deployment's key
//! (and the ReplicaSet concerned, if any). A sync that returns an error is requeued with
//! backoff (at most 15 times in a row); nothing here ever stops the controller.

use rkcm_runtime::error::StatusError;
use rkcm_runtime::error::is_write_conflict;

use rkcm_runtime::error::is_namespace_terminating;

/// Errors of one sync of one Deployment.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `spec.selector` cannot be parsed; retried, as upstream, until the key is dropped.
    #[error("deployment {key} has invalid label selector: {message}")]
    InvalidSelector { key: String, message: String },
    /// Adopting or releasing ReplicaSets failed (owner re-check, or a patch).
    #[error("claiming replica sets for {key}: {source}")]
    Claim {
        key: String,
        #[source]
        source: rkcm_runtime::Error,
    },
    /// Updating a ReplicaSet (scaling, or syncing annotations and minReadySeconds) failed.
    #[error("updating replica set {replica_set} of {key}: {source}")]
    UpdateReplicaSet {
        key: String,
        replica_set: String,
        #[source]
        source: kube::Error,
    },
    /// Creating the new ReplicaSet failed (the condition and Warning event are recorded
    /// before this is returned).
    #[error("creating replica set {replica_set} for {key}: {source}")]
    CreateReplicaSet {
        key: String,
        replica_set: String,
        #[source]
        source: kube::Error,
    },
    /// The new ReplicaSet's name is taken but the object is not in the cache yet.
    #[error("replica set {replica_set} for {key} already exists but is not cached yet")]
    NotCached { key: String, replica_set: String },
    /// The new ReplicaSet's name is taken by another template: `collisionCount` was raised
    /// (best effort) so that the next sync hashes differently.
    #[error("hash collision creating replica set {replica_set} for {key}: {source}")]
    HashCollision {
        key: String,
        replica_set: String,
        #[source]
        source: kube::Error,
    },
    /// Deleting an old ReplicaSet beyond the revision history limit failed.
    #[error("deleting old replica set {replica_set} of {key}: {source}")]
    DeleteReplicaSet {
        key: String,
        replica_set: String,
        #[source]
        source: kube::Error,
    },
    /// Writing the status subresource failed.
    #[error(transparent)]
    UpdateStatus(#[from] StatusError),
    /// `PUT deployments` (rollback) failed.
    #[error("updating deployment {key}: {source}")]
    UpdateDeployment {
        key: String,
        #[source]
        source: kube::Error,
    },
    /// The opt-in rollback on progress deadline: `PUT deployments` failed (a conflict: the
    /// Deployment changed since the cache saw it; the next sync decides again).
    #[error("rolling back deployment {key} from revision {from} to revision {to}: {source}")]
    RollbackOnDeadline {
        key: String,
        from: i64,
        to: i64,
        #[source]
        source: kube::Error,
    },
    /// The stale-cache guard held the sync back: the Deployment or ReplicaSet cache has not
    /// yet seen this controller's own last write for the Deployment. Nothing was read or
    /// written; retried with backoff.
    #[error("syncing {key}: {source}")]
    StaleCache {
        key: String,
        #[source]
        source: rkcm_runtime::workload::consistency::Stale,
    },
    /// The strategy cannot be executed: unknown type or unusable `maxSurge`.
    #[error("deployment {key}: {message}")]
    Strategy { key: String, message: String },
}

impl Error {
    /// An expected requeue in normal operation, not a failure to warn about: the new
    /// ReplicaSet exists but the cache has not shown it yet, or a write made from a cached
    /// copy met a 409 conflict. Retried with backoff like any error; the worker logs it at
    /// debug.
    pub fn is_expected_requeue(&self) -> bool {
        match self {
            Error::NotCached { .. } | Error::StaleCache { .. } => true,
            Error::UpdateReplicaSet { source, .. }
            | Error::DeleteReplicaSet { source, .. }
            | Error::UpdateStatus(StatusError { source, .. })
            | Error::UpdateDeployment { source, .. }
            | Error::RollbackOnDeadline { source, .. } => is_write_conflict(source),
            Error::Claim {
                source:
                    rkcm_runtime::Error::Api { source, .. }
                    | rkcm_runtime::Error::ForOwner { source, .. },
                ..
            } => is_write_conflict(source),
            _ => false,
        }
    }

    /// The API refused a write because the namespace is being deleted: every later write
    /// would fail too, so the key is forgotten instead of retried.
    pub fn is_namespace_terminating(&self) -> bool {
        match self {
            Error::UpdateReplicaSet { source, .. }
            | Error::CreateReplicaSet { source, .. }
            | Error::HashCollision { source, .. }
            | Error::DeleteReplicaSet { source, .. }
            | Error::UpdateStatus(StatusError { source, .. })
            | Error::UpdateDeployment { source, .. }
            | Error::RollbackOnDeadline { source, .. } => is_namespace_terminating(source),
            Error::Claim {
                source:
                    rkcm_runtime::Error::Api { source, .. }
                    | rkcm_runtime::Error::ForOwner { source, .. },
                ..
            } => is_namespace_terminating(source),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str, cause: Option<&str>) -> kube::Error {
        let mut status = kube::core::Status::failure("refused", reason).with_code(code);
        if let Some(cause) = cause {
            status.details = Some(kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: vec![kube::core::response::StatusCause {
                    reason: cause.into(),
                    message: String::new(),
                    field: String::new(),
                }],
                retry_after_seconds: 0,
            });
        }
        kube::Error::Api(status.boxed())
    }

    #[test]
    fn namespace_terminating_is_recognised() {
        let e = Error::CreateReplicaSet {
            key: "ns/web".into(),
            replica_set: "web-abc".into(),
            source: api_error(403, "Forbidden", Some("NamespaceTerminating")),
        };
        assert!(e.is_namespace_terminating());
        assert!(e.to_string().contains("ns/web"), "{e}");
        let e = Error::UpdateStatus(StatusError::new(
            "deployment",
            "ns/web",
            api_error(409, "Conflict", None),
        ));
        assert!(!e.is_namespace_terminating());
        assert!(
            e.to_string()
                .starts_with("updating status of deployment ns/web: ")
        );
    }

    #[test]
    fn not_cached_and_conflicts_are_expected_requeues() {
        let conflict = Error::UpdateStatus(StatusError::new(
            "deployment",
            "ns/web",
            api_error(409, "Conflict", None),
        ));
        assert!(conflict.is_expected_requeue());
        let scale = Error::UpdateReplicaSet {
            key: "ns/web".into(),
            replica_set: "web-abc".into(),
            source: api_error(409, "Conflict", None),
        };
        assert!(scale.is_expected_requeue());
        let not_cached = Error::NotCached {
            key: "ns/web".into(),
            replica_set: "web-abc".into(),
        };
        assert!(not_cached.is_expected_requeue());
        let exists = Error::CreateReplicaSet {
            key: "ns/web".into(),
            replica_set: "web-abc".into(),
            source: api_error(409, "AlreadyExists", None),
        };
        assert!(!exists.is_expected_requeue());
        let forbidden = Error::UpdateStatus(StatusError::new(
            "deployment",
            "ns/web",
            api_error(403, "Forbidden", None),
        ));
        assert!(!forbidden.is_expected_requeue());
        let selector = Error::InvalidSelector {
            key: "ns/web".into(),
            message: "bad".into(),
        };
        assert!(!selector.is_expected_requeue());
    }
}
