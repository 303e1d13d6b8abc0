//! Exact strings and numbers the TTL-after-finished controller shares with upstream
//! (`pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`,
//! `pkg/controller/ttlafterfinished/metrics/metrics.go`, `k8s.io/api/batch/v1`). Dashboards
//! select on them: changing one breaks compatibility.

/// Work queue name (the `name` label of `workqueue_*` metrics).
pub const QUEUE_NAME: &str = "ttl_jobs_to_delete";

/// Job condition types that mean "finished" when their status is `True`.
pub const JOB_COMPLETE: &str = "Complete";
pub const JOB_FAILED: &str = "Failed";
pub const CONDITION_TRUE: &str = "True";

/// The controller's histogram (`metrics.go`).
pub mod metrics {
    pub const SUBSYSTEM: &str = "ttl_after_finished_controller";
    pub const JOB_DELETION_DURATION: &str = "job_deletion_duration_seconds";
    pub const JOB_DELETION_DURATION_HELP: &str =
        "[ALPHA] The time it took to delete the job since it became eligible for deletion";
    /// `ExponentialBuckets(0.1, 2, 14)`: 100 ms up to about 27 minutes.
    pub const BUCKET_START: f64 = 0.1;
    pub const BUCKET_FACTOR: f64 = 2.0;
    pub const BUCKET_COUNT: usize = 14;
}
