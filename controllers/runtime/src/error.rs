//! The runtime's error type. Every variant names the step and the object it concerns.

/// Errors from the shared machinery.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("building API client config: {0}")]
    Config(String),
    #[error("{verb} {kind} {key}: {source}")]
    Api {
        verb: &'static str,
        kind: &'static str,
        key: String,
        #[source]
        source: kube::Error,
    },
    /// A write made on behalf of an owner (a pod created from its template, an adoption);
    /// `owner` is the owner's key.
    #[error("{verb} {kind} for {owner}: {source}")]
    ForOwner {
        verb: &'static str,
        kind: &'static str,
        owner: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    Other(String),
}

impl Error {
    pub fn api(
        verb: &'static str,
        kind: &'static str,
        key: impl Into<String>,
        source: kube::Error,
    ) -> Self {
        Error::Api {
            verb,
            kind,
            key: key.into(),
            source,
        }
    }

    /// True when the API answered 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { source: kube::Error::Api(s), .. } | Error::ForOwner { source: kube::Error::Api(s), .. } if s.code == 404)
    }

    /// True when the API answered 409 (conflict or already exists).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Api { source: kube::Error::Api(s), .. } | Error::ForOwner { source: kube::Error::Api(s), .. } if s.code == 409)
    }

    /// A short label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::Api { .. } | Error::ForOwner { .. } => "api",
            Error::Other(_) => "other",
        }
    }
}

/// Which step of a controller's work on its pods failed; the text starts the error message
/// ("creating pods for ns/web: ...").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodStep {
    /// Adopting or releasing pods; nothing else was done.
    Claim,
    /// Creating pods; the rest of the slow start was skipped.
    Create,
    /// Deleting pods (or the finalizer patch before a delete).
    Delete,
}

/// A failed step of a controller's work on the pods of one owner (`key`).
#[derive(Debug, thiserror::Error)]
#[error("{step} {key}: {source}")]
pub struct PodsError {
    pub step: PodStep,
    pub key: String,
    #[source]
    pub source: Error,
}

impl PodStep {
    /// This step failed for the owner `key`.
    pub fn failed(self, key: impl Into<String>, source: Error) -> PodsError {
        PodsError {
            step: self,
            key: key.into(),
            source,
        }
    }
}

impl std::fmt::Display for PodStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PodStep::Claim => "claiming pods for",
            PodStep::Create => "creating pods for",
            PodStep::Delete => "deleting pods of",
        })
    }
}

/// Writing the status subresource of an object failed (after the controller's one retry on a
/// fresh read, where it makes one). `kind` names the object's kind as the message shows it
/// ("statefulset"), `key` the object.
#[derive(Debug, thiserror::Error)]
#[error("updating status of {kind} {key}: {source}")]
pub struct StatusError {
    pub kind: &'static str,
    pub key: String,
    #[source]
    pub source: kube::Error,
}

impl StatusError {
    pub fn new(kind: &'static str, key: impl Into<String>, source: kube::Error) -> Self {
        StatusError {
            kind,
            key: key.into(),
            source,
        }
    }

    /// The write met a 409 conflict: it was made from a stale copy, an expected requeue.
    pub fn is_write_conflict(&self) -> bool {
        is_write_conflict(&self.source)
    }
}

/// True for a 409 `Conflict` (the object changed since it was read), not `AlreadyExists`: a
/// write made from a stale copy, which upstream's controllers retry quietly.
pub fn is_write_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "Conflict")
}

/// True for any 409: a write made from a stale copy (`Conflict`) or a create of a name that
/// exists (`AlreadyExists`); either way the object is not as the writer saw it.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// True for a 404: the object is gone.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Status cause the apiserver gives when the namespace is being deleted.
pub const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// The API status inside a kube error, if the server answered with one.
pub fn api_status(err: &kube::Error) -> Option<&kube::core::Status> {
    match err {
        kube::Error::Api(s) => Some(s),
        _ => None,
    }
}

/// The API status inside one of our errors, if any.
pub fn error_status(err: &Error) -> Option<&kube::core::Status> {
    match err {
        Error::Api { source, .. } | Error::ForOwner { source, .. } => api_status(source),
        _ => None,
    }
}

/// True when the server refused the write because the namespace is terminating.
pub fn is_namespace_terminating(err: &kube::Error) -> bool {
    api_status(err).is_some_and(|s| {
        s.details.as_ref().is_some_and(|d| {
            d.causes
                .iter()
                .any(|c| c.reason == NAMESPACE_TERMINATING_CAUSE)
        })
    })
}

/// The error text upstream puts in event messages: a status error prints as its message.
pub fn error_message(err: &kube::Error) -> String {
    match api_status(err) {
        Some(s) if !s.message.is_empty() => s.message.clone(),
        _ => err.to_string(),
    }
}

/// 410 Gone / `Expired`: the requested resourceVersion is compacted away.
pub fn is_gone(status: &kube::core::Status) -> bool {
    status.code == 410 || status.reason == "Expired" || status.reason == "Gone"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("refused", reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn only_a_409_conflict_is_a_write_conflict() {
        assert!(is_write_conflict(&api(409, "Conflict")));
        assert!(!is_write_conflict(&api(409, "AlreadyExists")));
        assert!(!is_write_conflict(&api(422, "Invalid")));
        let e = Error::api("update", "Pod", "ns/p", api(409, "Conflict"));
        assert!(e.is_conflict() && !e.is_not_found());
    }

    #[test]
    fn a_status_error_names_the_kind_and_tells_a_conflict() {
        let e = StatusError::new("statefulset", "ns/web", api(409, "Conflict"));
        assert!(e.is_write_conflict());
        assert!(
            e.to_string()
                .starts_with("updating status of statefulset ns/web: "),
            "{e}"
        );
        assert!(!StatusError::new("cronjob", "ns/c", api(422, "Invalid")).is_write_conflict());
    }
}
