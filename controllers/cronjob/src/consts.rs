//! Exact strings and numbers the CronJob controller shares with upstream
//! (`pkg/controller/cronjob/cronjob_controllerv2.go`, `utils.go`, `k8s.io/api/batch/v1`).

use jiff::SignedDuration;

/// Canonical name of the CronJob controller (`--controllers`; alias `cronjob`).
pub const NAME: &str = "cronjob-controller";
/// `source.component` of the events this controller records.
pub const EVENT_COMPONENT: &str = "cronjob-controller";
/// Work queue name (the `name` label of `workqueue_*` metrics).
pub const QUEUE_NAME: &str = "cronjob";
/// Added to every requeue so the sync lands just after the scheduled instant. Upstream pads
/// by 100 ms; rkcm's queue timer runs on the monotonic clock and never fires before its
/// deadline, so the pad only has to cover the wall clock being slewed against it (a sync
/// that still wakes early finds nothing due and requeues for the rest). 5 ms creates the
/// Job about 95 ms sooner than upstream; its name, annotation and status still carry the
/// scheduled instant.
pub const NEXT_SCHEDULE_DELTA: SignedDuration = SignedDuration::from_millis(5);

pub const CRONJOB_KIND: &str = "CronJob";
pub const CRONJOB_API_VERSION: &str = "batch/v1";
/// The scheduled instant of a Job, RFC 3339 in the CronJob's time zone (UTC when unset).
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// Event reasons.
pub mod reasons {
    pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
    pub const FAILED_CREATE: &str = "FailedCreate";
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
    pub const FAILED_DELETE: &str = "FailedDelete";
    pub const FAILED_GET: &str = "FailedGet";
    pub const SAW_COMPLETED_JOB: &str = "SawCompletedJob";
    pub const MISSING_JOB: &str = "MissingJob";
    pub const UNEXPECTED_JOB: &str = "UnexpectedJob";
    pub const JOB_ALREADY_ACTIVE: &str = "JobAlreadyActive";
    pub const MISS_SCHEDULE: &str = "MissSchedule";
    pub const TOO_MANY_MISSED_TIMES: &str = "TooManyMissedTimes";
    pub const UNKNOWN_TIME_ZONE: &str = "UnknownTimeZone";
    pub const UNPARSEABLE_SCHEDULE: &str = "UnparseableSchedule";
    pub const UNPARSEABLE_CRONJOB_SCHEDULE: &str = "UnParseableCronJobSchedule";
    pub const INVALID_SCHEDULE: &str = "InvalidSchedule";
    pub const UNSUPPORTED_SCHEDULE: &str = "UnsupportedSchedule";
}
