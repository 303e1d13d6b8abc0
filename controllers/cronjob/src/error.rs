//! The controller's error type: one variant per sync step, each naming the CronJob's key.
//! A sync that returns an error is requeued with backoff; nothing here stops the controller.

use rkcm_runtime::error::StatusError;
use rkcm_runtime::error::is_namespace_terminating;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The live `GET` of the CronJob (an unlisted child was seen) failed.
    #[error("getting cronjob {key}: {source}")]
    GetCronJob {
        key: String,
        #[source]
        source: kube::Error,
    },
    /// The live `GET` of an active Job failed with something other than 404.
    #[error("getting job {job} of cronjob {key}: {source}")]
    GetJob {
        key: String,
        job: String,
        #[source]
        source: kube::Error,
    },
    /// `Replace`: an active Job could not be deleted.
    #[error("could not replace job {job} of cronjob {key}")]
    Replace { key: String, job: String },
    /// Creating the Job failed.
    #[error("creating job {job} for cronjob {key}: {source}")]
    CreateJob {
        key: String,
        job: String,
        #[source]
        source: kube::Error,
    },
    /// Building the Job from the template failed (time zone not loadable).
    #[error("making job from template of cronjob {key}: {message}")]
    Template { key: String, message: String },
    /// Writing the status subresource failed.
    #[error(transparent)]
    UpdateStatus(StatusError),
}

impl Error {
    /// True when the namespace is being deleted (creates there can never succeed).
    pub fn is_namespace_terminating(&self) -> bool {
        matches!(self, Error::CreateJob { source, .. } if is_namespace_terminating(source))
    }
}
