//! PURE: the CronJob controller's decisions, as functions of a CronJob (the sync's working
//! copy), its child Jobs, what the API answered and a clock reading. Mirrors upstream
//! `pkg/controller/cronjob/utils.go` and the decision parts of `syncCronJob` and
//! `cleanupFinishedJobs` in `cronjob_controllerv2.go`; the executor (`reconcile`) performs
//! the I/O between these steps in upstream's order and feeds each answer into the next.
//!
//! - Children: [`child_step`] for each cached child Job, [`unlisted_active`] for the
//!   `status.active` entries the cache lacks, [`history_deletions`] for cleanup.
//! - Scheduling: [`plan_schedule`] (stop, requeue, or start a Job, replacing active ones),
//!   [`existing_job`] when the create answers `AlreadyExists`.
//! - Status changes are in [`crate::status`].

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use rkcm_runtime::events::EventType;
use rkcm_runtime::workload::controller_ref::controller_of;

use crate::consts::{self, reasons};
use crate::schedule::{self, Location, Schedule};

/// An Event to record on the CronJob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEvent {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
}

impl PlannedEvent {
    pub fn normal(reason: &'static str, message: String) -> Self {
        Self {
            type_: EventType::Normal,
            reason,
            message,
        }
    }
    pub fn warning(reason: &'static str, message: String) -> Self {
        Self {
            type_: EventType::Warning,
            reason,
            message,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Children and Job state.

/// True when `job`'s controller reference resolves to `cj`: kind `CronJob`, same name, same UID
/// (v1.37: a Job controlled by another kind, or by an older CronJob of the same name, is not a
/// child).
pub fn is_child(job: &Job, cj: &CronJob) -> bool {
    let Some(r) = controller_of(&job.metadata) else {
        return false;
    };
    r.kind == consts::CRONJOB_KIND
        && Some(r.name.as_str()) == cj.metadata.name.as_deref()
        && Some(r.uid.as_str()) == cj.metadata.uid.as_deref()
        && job.metadata.namespace == cj.metadata.namespace
}

/// `Complete` or `Failed` when a condition of that type is `True` (the first such condition
/// wins, as upstream's `FinishedCondition`).
pub fn finished_condition(job: &Job) -> Option<&'static str> {
    job.status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find_map(|c| match (c.type_.as_str(), c.status.as_str()) {
            ("Complete", "True") => Some("Complete"),
            ("Failed", "True") => Some("Failed"),
            _ => None,
        })
}

pub fn is_finished(job: &Job) -> bool {
    finished_condition(job).is_some()
}

/// Upstream `IsJobSucceeded`: some `Complete` condition is `True`.
pub fn is_succeeded(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

fn active(cj: &CronJob) -> &[ObjectReference] {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_deref())
        .unwrap_or_default()
}

/// True when `status.active` lists a Job with this UID.
pub fn in_active_list(cj: &CronJob, uid: &str) -> bool {
    active(cj).iter().any(|r| r.uid.as_deref() == Some(uid))
}

/// True when `status.active` lists a Job with this name and namespace.
pub fn in_active_list_by_name(cj: &CronJob, namespace: Option<&str>, name: &str) -> bool {
    active(cj)
        .iter()
        .any(|r| r.name.as_deref() == Some(name) && r.namespace.as_deref() == namespace)
}

/// What one cached child Job asks of the sync (the loop over children in upstream
/// `syncCronJob`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildStep {
    /// Unfinished and not in `status.active`: a live `GET` of the CronJob tells whether the
    /// cache is behind this controller's own status write (then the sync continues from the
    /// fresh copy) or the Job is unexpected ([`unexpected_job_event`]).
    Confirm,
    /// Finished: leave `status.active` with this event if listed, and, if it succeeded,
    /// record its completion ([`crate::status::record_success`]).
    Finished {
        leave_active: Option<PlannedEvent>,
        succeeded: bool,
    },
    /// Listed and running: nothing to do.
    Keep,
}

/// [`ChildStep`] for `job`, a child of `cj`.
pub fn child_step(cj: &CronJob, job: &Job) -> ChildStep {
    let uid = job.metadata.uid.as_deref().unwrap_or_default();
    let found = in_active_list(cj, uid);
    match finished_condition(job) {
        None if !found => ChildStep::Confirm,
        None => ChildStep::Keep,
        Some(condition) => ChildStep::Finished {
            leave_active: found.then(|| {
                PlannedEvent::normal(
                    reasons::SAW_COMPLETED_JOB,
                    format!(
                        "Saw completed job: {}, condition: {condition}",
                        job.metadata.name.as_deref().unwrap_or_default()
                    ),
                )
            }),
            succeeded: is_succeeded(job),
        },
    }
}

/// The Warning for a child the controller did not create or forgot.
pub fn unexpected_job_event(job: &Job) -> PlannedEvent {
    PlannedEvent::warning(
        reasons::UNEXPECTED_JOB,
        format!(
            "Saw a job that the controller did not create or forgot: {}",
            job.metadata.name.as_deref().unwrap_or_default()
        ),
    )
}

/// An unfinished child Job missing from `status.active` even in a fresh copy of the CronJob
/// (the controller crashed between creating it and writing the status): the scheduled time
/// its annotation records, when later than `lastScheduleTime`. The sync then records the Job
/// as started ([`crate::status::record_start`]) besides the `UnexpectedJob` Warning upstream
/// gives (unless `--rkcm-cronjob-adopt-forgotten-runs=false`). Upstream v1.37 only warns: the
/// slot then counts as not yet run, so the Job is started again for it once the first one is
/// gone (a second Job for one scheduled time, found by the simulator,
/// `rkcm-sim --controller cronjob --seed 142`), and under `Forbid` another Job can start while
/// the forgotten one runs.
///
/// Only a Job this controller could have created for that time counts: its name is exactly
/// the one [`job_name`] gives the annotated time (upstream `getJobName`), and that time is not
/// after `now`. A Job made by hand (or by another tool) that carries the annotation, or one
/// annotated with a time yet to come, would otherwise move `lastScheduleTime` and skip a run
/// the schedule owes; such a Job only gets the Warning, as upstream.
pub fn forgotten_start(cj: &CronJob, job: &Job, now: Timestamp) -> Option<Timestamp> {
    let scheduled: Timestamp = job
        .metadata
        .annotations
        .as_ref()?
        .get(consts::SCHEDULED_TIMESTAMP_ANNOTATION)?
        .parse()
        .ok()?;
    let ours = job.metadata.name.as_deref() == Some(job_name(cj, scheduled).as_str());
    let newer = last_schedule_time(cj).is_none_or(|last| scheduled > last);
    (ours && scheduled <= now && newer && finished_condition(job).is_none()).then_some(scheduled)
}

/// `status.active` entries whose Job is not among the cached children: each is confirmed
/// with a live `GET`, and dropped ([`missing_job_event`]) when the server has no such Job.
pub fn unlisted_active(cj: &CronJob, child_uids: &HashSet<String>) -> Vec<ObjectReference> {
    active(cj)
        .iter()
        .filter(|r| !child_uids.contains(r.uid.as_deref().unwrap_or_default()))
        .cloned()
        .collect()
}

/// The event for an active Job the server no longer has.
pub fn missing_job_event(name: &str) -> PlannedEvent {
    PlannedEvent::normal(
        reasons::MISSING_JOB,
        format!("Active job went missing: {name}"),
    )
}

// ---------------------------------------------------------------------------------------------
// History cleanup.

/// The finished Jobs to delete beyond the history limits, successful ones first, each group
/// oldest `status.startTime` first (Jobs without a start time last, ties by name). Unfinished
/// Jobs are never listed. Upstream `cleanupFinishedJobs`/`removeOldestJobs`.
pub fn history_deletions<'a>(cj: &CronJob, children: &[&'a Job]) -> Vec<&'a Job> {
    let successful_limit = cj.spec.successful_jobs_history_limit;
    let failed_limit = cj.spec.failed_jobs_history_limit;
    if successful_limit.is_none() && failed_limit.is_none() {
        return Vec::new();
    }
    let mut successful = Vec::new();
    let mut failed = Vec::new();
    for job in children {
        match finished_condition(job) {
            Some("Complete") => successful.push(*job),
            Some(_) => failed.push(*job),
            None => {}
        }
    }
    let mut out = Vec::new();
    for (mut jobs, limit) in [(successful, successful_limit), (failed, failed_limit)] {
        let Some(limit) = limit else { continue };
        let excess = jobs.len() as i64 - i64::from(limit);
        if excess <= 0 {
            continue;
        }
        jobs.sort_by(|a, b| by_start_time(a, b));
        out.extend(jobs.into_iter().take(excess as usize));
    }
    out
}

fn start_time(job: &Job) -> Option<Timestamp> {
    job.status.as_ref()?.start_time.as_ref().map(|t| t.0)
}

fn by_start_time(a: &Job, b: &Job) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (start_time(a), start_time(b)) {
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (x, y) if x == y => a.metadata.name.cmp(&b.metadata.name),
        (x, y) => x.cmp(&y),
    }
}

// ---------------------------------------------------------------------------------------------
// Missed schedules (upstream `mostRecentScheduleTime`, `nextScheduleTimeDuration`).

/// How many scheduled instants passed unmet, roughly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    None,
    Few,
    /// More than 100.
    Many,
}

/// The result of [`most_recent_schedule_time`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MostRecent {
    /// `lastScheduleTime`, else `creationTimestamp` (raised to `now - startingDeadlineSeconds`
    /// when asked to).
    pub earliest: Timestamp,
    /// The latest instant in `(earliest, now]`, if any.
    pub most_recent: Option<Timestamp>,
    pub missed: Missed,
}

fn creation(cj: &CronJob) -> Timestamp {
    cj.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or_else(schedule::zero_time)
}

fn last_schedule_time(cj: &CronJob) -> Option<Timestamp> {
    cj.status.as_ref()?.last_schedule_time.as_ref().map(|t| t.0)
}

fn starting_deadline(cj: &CronJob) -> Option<i64> {
    cj.spec.starting_deadline_seconds
}

fn add_secs(t: Timestamp, secs: i64) -> Timestamp {
    t.saturating_add(SignedDuration::from_secs(secs))
        .unwrap_or(t)
}

/// Upstream `mostRecentScheduleTime`: finds the latest scheduled instant not after `now`
/// without walking every missed instant (it estimates the count from the first two instants
/// and starts the walk two intervals before the estimate). Errors when two consecutive
/// instants are less than a second apart, which is what a schedule that never fires yields.
pub fn most_recent_schedule_time(
    cj: &CronJob,
    now: Timestamp,
    sched: &Schedule,
    local: &TimeZone,
    include_starting_deadline: bool,
) -> Result<MostRecent, String> {
    let mut earliest = last_schedule_time(cj).unwrap_or_else(|| creation(cj));
    if include_starting_deadline && let Some(sds) = starting_deadline(cj) {
        let deadline = add_secs(now, sds.saturating_neg());
        if deadline > earliest {
            earliest = deadline;
        }
    }
    let none = |missed| MostRecent {
        earliest,
        most_recent: None,
        missed,
    };
    let t1 = sched.next(earliest, local);
    let t2 = sched.next(t1, local);
    if now < t1 {
        return Ok(none(Missed::None));
    }
    if now < t2 {
        return Ok(MostRecent {
            earliest,
            most_recent: Some(t1),
            missed: Missed::None,
        });
    }
    let between = t2.as_second() - t1.as_second();
    if between < 1 {
        return Err("time difference between two schedules is less than 1 second".to_string());
    }
    let elapsed = now.duration_since(t1).as_secs();
    let missed = elapsed / between + 1;
    let start = add_secs(t1, (missed - 2).saturating_mul(between));
    let mut most_recent = None;
    let mut t = sched.next(start, local);
    // Bounded only as a guard against pathological input: the walk starts about two
    // intervals before `now`.
    let mut steps = 0u32;
    while t <= now && !schedule::is_zero(t) && steps < 100_000 {
        most_recent = Some(t);
        t = sched.next(t, local);
        steps += 1;
    }
    let missed = if missed > 100 {
        Missed::Many
    } else if missed > 0 {
        Missed::Few
    } else {
        Missed::None
    };
    Ok(MostRecent {
        earliest,
        most_recent,
        missed,
    })
}

/// Upstream `nextScheduleTimeDuration`: from `now` until just after the next instant (the
/// [`consts::NEXT_SCHEDULE_DELTA`] pad lands the sync after it). Zero or negative means "now".
pub fn next_schedule_time_duration(
    cj: &CronJob,
    now: Timestamp,
    sched: &Schedule,
    local: &TimeZone,
) -> SignedDuration {
    let base = match most_recent_schedule_time(cj, now, sched, local, false) {
        Err(_) => now,
        Ok(MostRecent {
            most_recent: Some(t),
            ..
        }) => t,
        Ok(MostRecent {
            earliest,
            missed: Missed::None,
            ..
        }) => earliest,
        Ok(_) => now,
    };
    let next = sched.next(base, local);
    next.duration_since(now) + consts::NEXT_SCHEDULE_DELTA
}

/// A signed delay as a queue delay (negative is immediate).
pub fn as_queue_delay(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

// ---------------------------------------------------------------------------------------------
// The schedule string and the Job.

/// Upstream `formatSchedule`: a schedule with `TZ` in it is used as written (and warned
/// about, when `warn`); otherwise a loadable `spec.timeZone` becomes a `TZ=` prefix.
pub fn format_schedule(cj: &CronJob, warn: bool) -> (String, Option<PlannedEvent>) {
    let schedule = cj.spec.schedule.clone();
    if schedule.contains("TZ") {
        let event = warn.then(|| {
            PlannedEvent::warning(
                reasons::UNSUPPORTED_SCHEDULE,
                format!(
                    "CRON_TZ or TZ used in schedule {schedule:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
                ),
            )
        });
        return (schedule, event);
    }
    if let Some(tz) = cj.spec.time_zone.as_deref() {
        if schedule::load_location(tz).is_err() {
            return (schedule, None);
        }
        return (format!("TZ={tz} {schedule}"), None);
    }
    (schedule, None)
}

/// `<cronjob>-<scheduled Unix minutes>`.
pub fn job_name(cj: &CronJob, scheduled: Timestamp) -> String {
    format!(
        "{}-{}",
        cj.metadata.name.as_deref().unwrap_or_default(),
        scheduled.as_second() / 60
    )
}

/// Go's `time.RFC3339` rendering of `t` in `tz`: whole seconds, `Z` for a zero offset.
pub fn rfc3339_in(t: Timestamp, tz: &TimeZone) -> String {
    let offset = tz.to_offset(t);
    let dt = offset.to_datetime(t);
    let secs = offset.seconds();
    let zone = if secs == 0 {
        "Z".to_string()
    } else {
        let sign = if secs < 0 { '-' } else { '+' };
        let a = secs.unsigned_abs();
        format!("{sign}{:02}:{:02}", a / 3600, a % 3600 / 60)
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{zone}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    )
}

/// The controller reference a created Job carries.
pub fn owner_reference(cj: &CronJob) -> OwnerReference {
    OwnerReference {
        api_version: consts::CRONJOB_API_VERSION.to_string(),
        kind: consts::CRONJOB_KIND.to_string(),
        name: cj.metadata.name.clone().unwrap_or_default(),
        uid: cj.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Upstream `getJobFromTemplate2`: the Job for the instant `scheduled`. Fails only when
/// `spec.timeZone` cannot be loaded (for the scheduled-timestamp annotation).
pub fn job_from_template(
    cj: &CronJob,
    scheduled: Timestamp,
    local: &TimeZone,
) -> Result<Job, String> {
    let spec = cj.spec.clone();
    let template = spec.job_template;
    let meta = template.metadata.unwrap_or_default();
    let labels: BTreeMap<String, String> = meta.labels.unwrap_or_default();
    let mut annotations: BTreeMap<String, String> = meta.annotations.unwrap_or_default();
    let zone = match schedule::load_location(spec.time_zone.as_deref().unwrap_or_default())? {
        Location::Local => local.clone(),
        Location::Zone(tz) => tz,
    };
    annotations.insert(
        consts::SCHEDULED_TIMESTAMP_ANNOTATION.to_string(),
        rfc3339_in(scheduled, &zone),
    );
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job_name(cj, scheduled)),
            namespace: cj.metadata.namespace.clone(),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(cj)]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    })
}

/// The `status.active` entry for a Job (client-go `ref.GetReference`).
pub fn job_reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".to_string()),
        kind: Some("Job".to_string()),
        namespace: job.metadata.namespace.clone(),
        name: job.metadata.name.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

// ---------------------------------------------------------------------------------------------
// The scheduling decision.

/// What the scheduling part of a sync decided (after history cleanup and child
/// reconciliation).
#[derive(Debug, Clone)]
pub struct SchedulePlan {
    /// Events to record, in order.
    pub events: Vec<PlannedEvent>,
    pub action: Action,
}

#[derive(Debug, Clone)]
pub enum Action {
    /// Nothing to do and no requeue (deleted, suspended, bad zone or schedule).
    Stop,
    /// Nothing to create now; sync again after this delay.
    Requeue(SignedDuration),
    /// Start the Job for `scheduled` (after deleting `replace`, the active Jobs, under the
    /// `Replace` policy).
    Start(Box<Start>),
}

#[derive(Debug, Clone)]
pub struct Start {
    pub scheduled: Timestamp,
    pub job: Job,
    pub replace: Vec<ObjectReference>,
    /// The parsed schedule, for the requeue after the start.
    pub schedule: Schedule,
}

/// The checks before the schedule is evaluated: deleted, unknown `timeZone`, suspended, or
/// an unparseable schedule stop the sync (with an event for the two errors); otherwise the
/// parsed schedule.
fn schedule_to_run(cj: &CronJob, events: &mut Vec<PlannedEvent>) -> Option<Schedule> {
    if cj.metadata.deletion_timestamp.is_some() {
        return None;
    }
    if let Some(tz) = cj.spec.time_zone.as_deref()
        && let Err(e) = schedule::load_location(tz)
    {
        events.push(PlannedEvent::warning(
            reasons::UNKNOWN_TIME_ZONE,
            format!("invalid timeZone: {tz:?}: {e}"),
        ));
        return None;
    }
    if cj.spec.suspend == Some(true) {
        return None;
    }
    let (formatted, warning) = format_schedule(cj, true);
    events.extend(warning);
    match schedule::parse_standard(&formatted) {
        Ok(s) => Some(s),
        Err(e) => {
            events.push(PlannedEvent::warning(
                reasons::UNPARSEABLE_SCHEDULE,
                format!("unparseable schedule: {:?} : {e}", cj.spec.schedule),
            ));
            None
        }
    }
}

/// Upstream `nextScheduleTime`: the most recent instant due by `now`, if any (with a
/// warning when too many were missed), or the `InvalidSchedule` event.
fn next_schedule_time(
    cj: &CronJob,
    now: Timestamp,
    sched: &Schedule,
    local: &TimeZone,
    events: &mut Vec<PlannedEvent>,
) -> Result<Option<Timestamp>, PlannedEvent> {
    match most_recent_schedule_time(cj, now, sched, local, true) {
        Ok(m) => match m.most_recent {
            Some(t) if t <= now => {
                if m.missed == Missed::Many {
                    events.push(PlannedEvent::warning(
                        reasons::TOO_MANY_MISSED_TIMES,
                        "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".to_string(),
                    ));
                }
                Ok(Some(t))
            }
            _ => Ok(None),
        },
        Err(e) => Err(PlannedEvent::warning(
            reasons::INVALID_SCHEDULE,
            format!("invalid schedule: {} : {e}", cj.spec.schedule),
        )),
    }
}

/// Upstream `syncCronJob` from the deletion check on, up to (not including) the Job
/// creation. `cj` is the working copy after history cleanup and child reconciliation.
pub fn plan_schedule(cj: &CronJob, now: Timestamp, local: &TimeZone) -> SchedulePlan {
    let mut events = Vec::new();
    let stop = |events| SchedulePlan {
        events,
        action: Action::Stop,
    };
    let Some(sched) = schedule_to_run(cj, &mut events) else {
        return stop(events);
    };
    let spec = &cj.spec;
    let scheduled = match next_schedule_time(cj, now, &sched, local, &mut events) {
        Ok(scheduled) => scheduled,
        Err(invalid) => {
            events.push(invalid);
            return stop(events);
        }
    };
    let requeue = |events| SchedulePlan {
        events,
        action: Action::Requeue(next_schedule_time_duration(cj, now, &sched, local)),
    };
    let Some(scheduled) = scheduled else {
        return requeue(events);
    };
    if let Some(sds) = spec.starting_deadline_seconds
        && add_secs(scheduled, sds) < now
    {
        events.push(PlannedEvent::warning(
            reasons::MISS_SCHEDULE,
            format!(
                "Missed scheduled time to start a job: {}",
                rfc1123z_utc(scheduled)
            ),
        ));
        return requeue(events);
    }
    let name = job_name(cj, scheduled);
    if in_active_list_by_name(cj, cj.metadata.namespace.as_deref(), &name)
        || last_schedule_time(cj) == Some(scheduled)
    {
        return requeue(events);
    }
    let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
    if policy == "Forbid" && !active(cj).is_empty() {
        events.push(PlannedEvent::normal(
            reasons::JOB_ALREADY_ACTIVE,
            "Not starting job because prior execution is running and concurrency policy is Forbid"
                .to_string(),
        ));
        return requeue(events);
    }
    let replace = if policy == "Replace" {
        active(cj).to_vec()
    } else {
        Vec::new()
    };
    match job_from_template(cj, scheduled, local) {
        Ok(mut job) => {
            // Mutant (sim only): the Job is named for the moment of the sync, not for its
            // scheduled time, so a sync that does not see its earlier Job starts another one
            // for the same time.
            if rkcm_runtime::mutants::on("cronjob-job-name-from-clock") {
                job.metadata.name = Some(format!(
                    "{}-{}",
                    cj.metadata.name.as_deref().unwrap_or_default(),
                    now.as_second()
                ));
            }
            SchedulePlan {
                events,
                action: Action::Start(Box::new(Start {
                    scheduled,
                    job,
                    replace,
                    schedule: sched,
                })),
            }
        }
        // Only an unloadable zone gets here, and that was handled above.
        Err(_) => stop(events),
    }
}

/// Go's `t.UTC().Format(time.RFC1123Z)`, e.g. `Mon, 02 Jan 2006 15:04:05 +0000`.
pub fn rfc1123z_utc(t: Timestamp) -> String {
    t.strftime("%a, %d %b %Y %H:%M:%S +0000").to_string()
}

/// What the Job of the same name found after an `AlreadyExists` answer means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Someone else's Job has the name: leave it alone, no requeue.
    NotOurs,
    /// Ours and already in `status.active`: nothing to record, no requeue.
    AlreadyActive,
    /// Ours but not in `status.active` (a crash between create and status write): record it
    /// as this run's start.
    Adopt,
}

/// [`Existing`] for `existing`, the Job of the planned name.
pub fn existing_job(cj: &CronJob, existing: &Job) -> Existing {
    let ours = controller_of(&existing.metadata)
        .is_some_and(|r| Some(r.uid.as_str()) == cj.metadata.uid.as_deref());
    if !ours {
        return Existing::NotOurs;
    }
    if in_active_list(cj, existing.metadata.uid.as_deref().unwrap_or_default()) {
        Existing::AlreadyActive
    } else {
        Existing::Adopt
    }
}

#[cfg(test)]
pub(crate) mod tests;
