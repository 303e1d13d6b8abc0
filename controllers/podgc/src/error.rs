//! PodGC's error type: one variant per step, each naming the object it concerns.

/// Errors of one PodGC step. Per-pod errors never stop a sweep: they are logged, counted in
/// `pod_gc_collector_force_delete_pod_errors_total` and the pod is retried on a later sweep
/// if it still qualifies.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server-side apply of `status.phase=Failed` (and condition) failed; the pod was not
    /// deleted.
    #[error("marking pod {pod} failed: {source}")]
    MarkFailed {
        pod: String,
        #[source]
        source: kube::Error,
    },
    /// The force delete (grace period 0, UID precondition) failed.
    #[error("force-deleting pod {pod}: {source}")]
    ForceDelete {
        pod: String,
        #[source]
        source: kube::Error,
    },
    /// The live `GET` confirming that a quarantined node is gone failed (other than 404).
    #[error("checking whether node {node} exists: {source}")]
    GetNode {
        node: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// True when the API answered 404: the pod (or node) is already gone.
    pub fn is_not_found(&self) -> bool {
        let (Error::MarkFailed { source, .. }
        | Error::ForceDelete { source, .. }
        | Error::GetNode { source, .. }) = self;
        matches!(source, kube::Error::Api(s) if s.code == 404)
    }

    /// A short label for logs and metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Error::MarkFailed { .. } => "mark_failed",
            Error::ForceDelete { .. } => "force_delete",
            Error::GetNode { .. } => "get_node",
        }
    }
}
