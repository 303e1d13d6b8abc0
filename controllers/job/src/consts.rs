//! Exact strings and numbers the Job controller shares with upstream
//! (`pkg/controller/job/job_controller.go`, `k8s.io/api/batch/v1/types.go`,
//! `pkg/controller/job/metrics/metrics.go`). Tools and users select on them.

use std::time::Duration;

/// Canonical controller name (`--controllers`; alias `job`).
pub const CONTROLLER_NAME: &str = "job-controller";
/// `source.component` of the events.
pub const EVENT_COMPONENT: &str = "job-controller";
/// Work queue names (`name` label of `workqueue_*` metrics).
pub const QUEUE_NAME: &str = "job";
pub const ORPHAN_QUEUE_NAME: &str = "job_orphan_pod";

/// The pod finalizer that keeps a finished pod until the Job status counts it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Completion index: pod annotation and label of Indexed Jobs.
pub const COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
pub const INDEX_FAILURE_COUNT_ANNOTATION: &str = "batch.kubernetes.io/job-index-failure-count";
pub const INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";
/// Env var injected into containers of Indexed pods.
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// `spec.managedBy` value that means "this controller".
pub const MANAGED_BY_JOB_CONTROLLER: &str = "kubernetes.io/job-controller";
/// Longest `generateName` prefix the API server keeps (`names.MaxGeneratedNameLength`).
pub const MAX_GENERATED_NAME_LENGTH: usize = 58;

pub const COMPLETION_NON_INDEXED: &str = "NonIndexed";
pub const COMPLETION_INDEXED: &str = "Indexed";
pub const REPLACEMENT_FAILED: &str = "Failed";

/// Job condition types.
pub mod condition {
    pub const SUSPENDED: &str = "Suspended";
    pub const FAILURE_TARGET: &str = "FailureTarget";
    pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
    pub const COMPLETE: &str = "Complete";
    pub const FAILED: &str = "Failed";
    pub const TRUE: &str = "True";
    pub const FALSE: &str = "False";
}

/// Condition reasons and messages.
pub mod reason {
    pub const JOB_SUSPENDED: &str = "JobSuspended";
    pub const JOB_RESUMED: &str = "JobResumed";
    pub const BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    pub const POD_FAILURE_POLICY: &str = "PodFailurePolicy";
    pub const MAX_FAILED_INDEXES_EXCEEDED: &str = "MaxFailedIndexesExceeded";
    pub const FAILED_INDEXES: &str = "FailedIndexes";
    pub const COMPLETIONS_REACHED: &str = "CompletionsReached";
    pub const SUCCESS_POLICY: &str = "SuccessPolicy";
}

pub mod message {
    pub const JOB_SUSPENDED: &str = "Job suspended";
    pub const JOB_RESUMED: &str = "Job resumed";
    pub const BACKOFF_LIMIT_EXCEEDED: &str = "Job has reached the specified backoff limit";
    pub const DEADLINE_EXCEEDED: &str = "Job was active longer than specified deadline";
    pub const MAX_FAILED_INDEXES_EXCEEDED: &str =
        "Job has exceeded the specified maximal number of failed indexes";
    pub const FAILED_INDEXES: &str = "Job has failed indexes";
    pub const COMPLETIONS_REACHED: &str = "Reached expected number of succeeded pods";
    pub const SUCCESS_POLICY_PREFIX: &str = "Matched rules at index";
}

/// Event reasons and messages (pod create/delete events come from the runtime's PodControl).
pub mod event {
    pub const SUSPENDED: &str = "Suspended";
    pub const RESUMED: &str = "Resumed";
    pub const COMPLETED: &str = "Completed";
    pub const COMPLETED_MESSAGE: &str = "Job completed";
    pub const TOO_MANY_SUCCEEDED: &str = "TooManySucceededPods";
    pub const TOO_MANY_SUCCEEDED_MESSAGE: &str =
        "Too many succeeded pods running after completion count reached";
    pub const UNKNOWN_COMPLETION_MODE: &str = "UnknownCompletionMode";
    pub const UNKNOWN_COMPLETION_MODE_MESSAGE: &str =
        "Skipped Job sync because completion mode is unknown";
}

/// Pod failure policy actions and exit-code operators.
pub mod policy {
    pub const FAIL_JOB: &str = "FailJob";
    pub const FAIL_INDEX: &str = "FailIndex";
    pub const IGNORE: &str = "Ignore";
    pub const COUNT: &str = "Count";
    pub const OP_IN: &str = "In";
    pub const OP_NOT_IN: &str = "NotIn";
}

/// Pod phases and condition types (`core/v1`).
pub mod pod {
    pub const PENDING: &str = "Pending";
    pub const RUNNING: &str = "Running";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    pub const UNKNOWN: &str = "Unknown";
    pub const READY: &str = "Ready";
    pub const RESTART_ON_FAILURE: &str = "OnFailure";
}

/// Delay for pod- and status-triggered syncs (`syncJobBatchPeriod`), also the floor of any
/// delayed requeue.
pub const SYNC_BATCH_PERIOD: Duration = Duration::from_secs(1);
/// Per-key API error backoff (`DefaultJobApiBackOff`, `MaxJobApiBackOff`).
pub const API_BACKOFF_BASE: Duration = Duration::from_secs(1);
pub const API_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Pod recreation backoff after failures (`DefaultJobPodFailureBackOff`,
/// `MaxJobPodFailureBackOff`).
pub const POD_FAILURE_BACKOFF_BASE: Duration = Duration::from_secs(10);
pub const POD_FAILURE_BACKOFF_MAX: Duration = Duration::from_secs(600);
/// Most UIDs/indexes added to `uncountedTerminatedPods` in one sync (`MaxUncountedPods`).
pub const MAX_UNCOUNTED_PODS: usize = 500;
/// Most pod creates or deletes in one sync (`MaxPodCreateDeletePerSync`).
pub const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;

/// Metric names (subsystem `job_controller`) and label values.
pub mod metrics {
    pub const SUBSYSTEM: &str = "job_controller";
    pub const SYNC_DURATION: &str = "job_sync_duration_seconds";
    pub const SYNCS: &str = "job_syncs_total";
    pub const FINISHED: &str = "jobs_finished_total";
    pub const BY_EXTERNAL: &str = "jobs_by_external_controller_total";
    pub const PODS_FINISHED: &str = "job_pods_finished_total";
    pub const POLICY_ACTIONS: &str = "pod_failures_handled_by_failure_policy_total";
    pub const TRACKING_FINALIZER: &str = "terminated_pods_tracking_finalizer_total";
    pub const FINISHED_INDEXES: &str = "job_finished_indexes_total";
    pub const PODS_CREATION: &str = "job_pods_creation_total";
    pub const STALE_SYNC_SKIPS_HELP: &str = "Number of times the job controller skipped a sync because its informer cache had not yet observed its own writes.";

    pub const ACTION_RECONCILING: &str = "reconciling";
    pub const ACTION_TRACKING: &str = "tracking";
    pub const ACTION_PODS_CREATED: &str = "pods_created";
    pub const ACTION_PODS_DELETED: &str = "pods_deleted";
    pub const SUCCEEDED: &str = "succeeded";
    pub const FAILED: &str = "failed";
    pub const ADD: &str = "add";
    pub const DELETE: &str = "delete";
    pub const CREATE_NEW: &str = "new";
    pub const RECREATE_TERMINATING_OR_FAILED: &str = "recreate_terminating_or_failed";
    pub const RECREATE_FAILED: &str = "recreate_failed";
}
