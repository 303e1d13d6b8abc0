//! The controller's error type: one variant per step of a sync, each naming the Job's key
//! (`namespace/name`). A sync that returns an error is retried with the default controller
//! backoff, for ever, as upstream's `handleErr` does; nothing here stops the controller.

/// Errors of one sync of one Job.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Checking the TTL: the Job is finished but its terminal condition has no
    /// `lastTransitionTime` (upstream `jobFinishTime`).
    #[error("unable to find the time when the Job {key} finished")]
    FinishTimeUnknown { key: String },
    /// Checking the TTL: no `Complete`/`Failed` condition is `True` (upstream `jobFinishTime`;
    /// never returned for a Job that passed the "finished" test).
    #[error("unable to find the status of the finished Job {key}")]
    NotFinished { key: String },
    /// Checking the TTL of a Job that has no TTL or is not finished (upstream
    /// `getFinishAndExpireTime`; the sync never asks for such a Job's expiry).
    #[error("job {key} should not be cleaned up")]
    NotEligible { key: String },
    /// The live GET of the Job before deleting it failed (other than 404).
    #[error("getting job {key} before deleting it: {source}")]
    GetJob {
        key: String,
        #[source]
        source: kube::Error,
    },
    /// The DELETE of an expired Job failed (including a failed precondition or 404: the
    /// retry finds the Job gone or changed and stops).
    #[error("deleting expired job {key}: {source}")]
    DeleteJob {
        key: String,
        #[source]
        source: kube::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_job() {
        let e = Error::FinishTimeUnknown { key: "ns/a".into() };
        assert_eq!(
            e.to_string(),
            "unable to find the time when the Job ns/a finished"
        );
        assert!(e.to_string().contains("ns/a"), "{e}");
        let e = Error::NotFinished { key: "ns/b".into() };
        assert_eq!(
            e.to_string(),
            "unable to find the status of the finished Job ns/b"
        );
        let e = Error::NotEligible { key: "ns/c".into() };
        assert_eq!(e.to_string(), "job ns/c should not be cleaned up");
        let status = kube::core::Status::failure("gone", "NotFound").with_code(404);
        let e = Error::DeleteJob {
            key: "ns/d".into(),
            source: kube::Error::Api(status.boxed()),
        };
        assert!(e.to_string().starts_with("deleting expired job ns/d: "));
        assert!(e.to_string().contains("ns/d"), "{e}");
    }
}
