//! The controller's error type: one variant per step, each naming the Job's key. A failed
//! sync is requeued with the default controller backoff.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The finished Job's finish time cannot be determined.
    #[error("checking TTL of {key}: {source}")]
    FinishTime {
        key: String,
        #[source]
        source: crate::plan::FinishTimeError,
    },
    /// The fresh GET before deleting failed (other than NotFound).
    #[error("reading {key}: {source}")]
    Get {
        key: String,
        #[source]
        source: kube::Error,
    },
    /// The delete failed (a retry then finds the Job gone or different).
    #[error("deleting {key}: {source}")]
    Delete {
        key: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    pub fn key(&self) -> &str {
        match self {
            Error::FinishTime { key, .. } | Error::Get { key, .. } | Error::Delete { key, .. } => {
                key
            }
        }
    }
}
