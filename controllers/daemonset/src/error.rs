//! The controller's error type: one variant per sync step, each naming the DaemonSet's key.
//! A sync that returns an error is requeued with backoff; nothing here stops the controller.

use crate::plan::PlanError;

/// Errors of one sync of one DaemonSet.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The stale-cache guard held the sync back: a cache has not yet seen the controller's
    /// own last write for this DaemonSet. Nothing was read or written.
    #[error("syncing {key}: {source}")]
    StaleCache {
        key: String,
        #[source]
        source: rkcm_runtime::workload::consistency::Stale,
    },
    /// Listing, adopting, labelling, creating, updating or deleting ControllerRevisions failed
    /// (`failed to construct revisions of DaemonSet`).
    #[error("failed to construct revisions of DaemonSet {key}: {message}")]
    History { key: String, message: String },
    /// A revision name was taken by different data: `status.collisionCount` was raised (or is
    /// about to be, by a sync with a fresher count) and the next sync tries the next name.
    #[error("revision name collision for DaemonSet {key}: {message}")]
    Collision { key: String, message: String },
    /// Adopting or releasing pods failed.
    #[error("couldn't get node to daemon pod mapping for daemon set {key}: {source}")]
    Claim {
        key: String,
        #[source]
        source: rkcm_runtime::Error,
    },
    /// Pod creates or deletes failed (the first error; the others were logged).
    #[error("syncing pods of {key}: {source}")]
    Pods {
        key: String,
        #[source]
        source: rkcm_runtime::Error,
    },
    /// The rolling update could not be computed.
    #[error("rolling update of {key}: {source}")]
    Plan {
        key: String,
        #[source]
        source: PlanError,
    },
    /// Deleting old revisions failed.
    #[error("failed to clean up revisions of DaemonSet {key}: {source}")]
    CleanupHistory {
        key: String,
        #[source]
        source: rkcm_runtime::Error,
    },
    /// Writing the status subresource failed twice (or the re-read between failed).
    #[error("error storing status for daemon set {key}: {source}")]
    UpdateStatus {
        key: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A requeue that is part of normal operation, logged at debug rather than as a failure:
    /// the stale-cache guard held the sync back until the pod cache shows the controller's
    /// own last write (in a rolling update of a thousand nodes that happens hundreds of
    /// times), or a status write made from a cached copy met a conflict.
    pub fn is_expected_requeue(&self) -> bool {
        match self {
            Error::StaleCache { .. } => true,
            Error::UpdateStatus { source, .. } => rkcm_runtime::error::is_write_conflict(source),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
