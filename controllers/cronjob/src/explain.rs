//! PURE: what the CronJob controller would do with one CronJob now and what it waits on
//! (`rkcm explain cronjob/NS/NAME`), from the CronJob and the namespace's Jobs, through the
//! steps the sync takes ([`crate::plan`]: history cleanup, each child's step, the active
//! entries the server no longer has, then [`plan::plan_schedule`]) on a working copy, as the
//! executor does. The events the plan would record become the reason codes below.
//!
//! Reason codes:
//! - `NextScheduledRun`: when the next Job starts (the plan's own requeue delay), with the
//!   active Jobs. The only reason of a CronJob between runs, which is settled.
//! - `Suspended`: `spec.suspend`; no Job starts until it is resumed.
//! - `ConcurrencyForbid`: the due run is skipped because a Job is still active and
//!   `concurrencyPolicy` is `Forbid` (the Job is named).
//! - `MissedStartingDeadline`: the due run is more than `startingDeadlineSeconds` late and
//!   is skipped.
//! - `TooManyMissedStartTimes`: more than 100 scheduled instants passed unmet (upstream's
//!   warning); the most recent one still starts.
//! - `InvalidSchedule`: `spec.schedule` does not parse or never fires.
//! - `UnknownTimeZone`: `spec.timeZone` is not a known zone.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use rkcm_runtime::explain::{Explanation, ObjectRef, State, Waiting};

use crate::consts::{NEXT_SCHEDULE_DELTA, reasons};
use crate::plan::{self, Action, ChildStep, PlannedEvent};
use crate::schedule;
use crate::status;

fn job_ref(name: &str) -> String {
    format!("Job/{name}")
}

fn name_of(job: &Job) -> &str {
    job.metadata.name.as_deref().unwrap_or_default()
}

/// The `status.active` Jobs of the working copy, by name.
fn active_names(cj: &CronJob) -> Vec<String> {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|r| r.name.clone())
        .collect()
}

/// What one explanation reads.
struct Seen<'a> {
    ns: String,
    name: String,
    local: &'a TimeZone,
    now: Timestamp,
}

/// The explanation for `cj` with the Jobs of its namespace (`jobs`; its children are picked
/// by [`plan::is_child`]), schedules without `timeZone` read in `local`, at `now`.
pub fn explain(cj: &CronJob, jobs: &[Arc<Job>], local: &TimeZone, now: Timestamp) -> Explanation {
    let seen = Seen {
        ns: cj.metadata.namespace.clone().unwrap_or_default(),
        name: cj.metadata.name.clone().unwrap_or_default(),
        local,
        now,
    };
    let mut e = Explanation {
        object: ObjectRef {
            kind: "CronJob".into(),
            namespace: seen.ns.clone(),
            name: seen.name.clone(),
        },
        controller: crate::consts::NAME,
        state: State::Settled,
        actions: Vec::new(),
        waiting_on: Vec::new(),
        remedies: Vec::new(),
    };
    let mut working = cj.clone();
    children(&mut e, &mut working, jobs);
    let decision = plan::plan_schedule(&working, now, local);
    for ev in &decision.events {
        event(&mut e, &seen, &working, ev);
    }
    match decision.action {
        Action::Stop => {
            if working.spec.suspend == Some(true) && working.metadata.deletion_timestamp.is_none() {
                suspended(&mut e, &seen, &working);
            }
        }
        Action::Requeue(delay) => {
            if e.waiting_on.is_empty()
                && let Some(t) = missed_by_deadline(&working, &seen)
            {
                missed_deadline(&mut e, &seen, &working, Some(t));
            }
            let next = now
                .saturating_add(delay - NEXT_SCHEDULE_DELTA)
                .unwrap_or(now);
            next_run(&mut e, &seen, &working, next);
        }
        Action::Start(start) => {
            for r in &start.replace {
                e.actions.push(format!(
                    "delete active Job/{} (concurrencyPolicy Replace)",
                    r.name.as_deref().unwrap_or_default()
                ));
            }
            e.actions.push(format!(
                "create Job/{} for the run scheduled at {}",
                name_of(&start.job),
                start.scheduled
            ));
        }
    }
    e.state = state_of(&e);
    e
}

fn state_of(e: &Explanation) -> State {
    let has = |r: &str| e.waiting_on.iter().any(|w| w.reason == r);
    if ["Suspended", "InvalidSchedule", "UnknownTimeZone"]
        .iter()
        .any(|r| has(r))
    {
        State::Stalled
    } else if !e.actions.is_empty() {
        State::Acting
    } else if e.waiting_on.iter().any(|w| w.reason != "NextScheduledRun") {
        State::Waiting
    } else {
        State::Settled
    }
}

/// History cleanup, the children's steps and the active entries whose Job is gone, applied
/// to the working copy as the sync applies them.
fn children(e: &mut Explanation, working: &mut CronJob, jobs: &[Arc<Job>]) {
    let kids: Vec<&Job> = jobs
        .iter()
        .map(|j| &**j)
        .filter(|j| plan::is_child(j, working))
        .collect();
    for job in plan::history_deletions(working, &kids) {
        e.actions.push(format!(
            "delete finished Job/{} beyond the history limit",
            name_of(job)
        ));
        status::delete_from_active_list(working, job.metadata.uid.as_deref().unwrap_or_default());
    }
    for job in &kids {
        if let ChildStep::Finished {
            leave_active: Some(_),
            ..
        } = plan::child_step(working, job)
        {
            e.actions.push(format!(
                "drop finished Job/{} from status.active",
                name_of(job)
            ));
            status::delete_from_active_list(
                working,
                job.metadata.uid.as_deref().unwrap_or_default(),
            );
        }
    }
    let uids: HashSet<String> = kids.iter().filter_map(|j| j.metadata.uid.clone()).collect();
    for r in plan::unlisted_active(working, &uids) {
        let name = r.name.clone().unwrap_or_default();
        if jobs.iter().any(|j| name_of(j) == name) {
            continue;
        }
        e.actions
            .push(format!("drop missing Job/{name} from status.active"));
        status::delete_from_active_list(working, r.uid.as_deref().unwrap_or_default());
    }
}

/// The latest instant due by now, searched as the plan searches (`with_deadline`: no
/// earlier than `startingDeadlineSeconds` ago).
fn most_recent(cj: &CronJob, seen: &Seen<'_>, with_deadline: bool) -> Option<Timestamp> {
    let (formatted, _) = plan::format_schedule(cj, false);
    let sched = schedule::parse_standard(&formatted).ok()?;
    plan::most_recent_schedule_time(cj, seen.now, &sched, seen.local, with_deadline)
        .ok()?
        .most_recent
}

/// The instant the plan found due, for the messages of a skipped run.
fn due(cj: &CronJob, seen: &Seen<'_>) -> Option<Timestamp> {
    most_recent(cj, seen, true)
}

/// A run the plan never sees because `startingDeadlineSeconds` bounds its search: an instant
/// due since the last run that the bounded search no longer finds.
fn missed_by_deadline(cj: &CronJob, seen: &Seen<'_>) -> Option<Timestamp> {
    cj.spec.starting_deadline_seconds?;
    let t = most_recent(cj, seen, false)?;
    let started = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .is_some_and(|l| l.0 >= t);
    (!started && due(cj, seen).is_none_or(|d| d < t)).then_some(t)
}

fn missed_deadline(e: &mut Explanation, seen: &Seen<'_>, cj: &CronJob, at: Option<Timestamp>) {
    let sds = cj.spec.starting_deadline_seconds.unwrap_or(0);
    let when = at.map_or_else(String::new, |t| format!(" at {t}"));
    e.waiting_on.push(Waiting {
        since: at.map(|t| t.to_string()),
        ..Waiting::new(
            "MissedStartingDeadline",
            format!(
                "the run scheduled{when} is more than startingDeadlineSeconds ({sds}s) late and \
                 is skipped"
            ),
            Vec::new(),
        )
    });
    e.remedies.push(format!(
        "raise spec.startingDeadlineSeconds (now {sds}), or find why no controller ran \
         cronjob/{} on time",
        seen.name
    ));
}

fn event(e: &mut Explanation, seen: &Seen<'_>, cj: &CronJob, ev: &PlannedEvent) {
    let ns = &seen.ns;
    let due = || due(cj, seen);
    match ev.reason {
        reasons::JOB_ALREADY_ACTIVE => {
            let active = active_names(cj);
            let at = due().map_or_else(String::new, |t| format!(" at {t}"));
            e.waiting_on.push(Waiting {
                since: due().map(|t| t.to_string()),
                ..Waiting::new(
                    "ConcurrencyForbid",
                    format!(
                        "the run scheduled{at} is skipped: {} is still active and \
                         concurrencyPolicy is Forbid",
                        active
                            .iter()
                            .map(|n| job_ref(n))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    active.iter().map(|n| job_ref(n)).collect(),
                )
            });
            if let Some(first) = active.first() {
                e.remedies.push(format!(
                    "wait for Job/{first} to finish, or delete it: kubectl delete job -n {ns} \
                     {first}"
                ));
            }
            e.remedies
                .push("to let runs overlap, set spec.concurrencyPolicy to Allow or Replace".into());
        }
        reasons::MISS_SCHEDULE => missed_deadline(e, seen, cj, due()),
        reasons::TOO_MANY_MISSED_TIMES => {
            let since = cj
                .status
                .as_ref()
                .and_then(|s| s.last_schedule_time.as_ref())
                .or(cj.metadata.creation_timestamp.as_ref())
                .map(|t| t.0.to_string());
            e.waiting_on.push(Waiting {
                since,
                ..Waiting::new(
                    "TooManyMissedStartTimes",
                    format!(
                        "more than 100 scheduled start times were missed: {}",
                        ev.message
                    ),
                    Vec::new(),
                )
            });
        }
        reasons::INVALID_SCHEDULE | reasons::UNPARSEABLE_SCHEDULE => {
            e.waiting_on.push(Waiting::new(
                "InvalidSchedule",
                ev.message.clone(),
                Vec::new(),
            ));
            e.remedies.push("correct spec.schedule".into());
        }
        reasons::UNKNOWN_TIME_ZONE => {
            e.waiting_on.push(Waiting::new(
                "UnknownTimeZone",
                ev.message.clone(),
                Vec::new(),
            ));
            e.remedies.push("correct spec.timeZone".into());
        }
        _ => {}
    }
}

fn suspended(e: &mut Explanation, seen: &Seen<'_>, cj: &CronJob) {
    let last = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map_or_else(|| "never".to_owned(), |t| t.0.to_string());
    let active = active_names(cj);
    e.waiting_on.push(Waiting::new(
        "Suspended",
        format!(
            "spec.suspend is true: no Job starts (last scheduled: {last}; {} Job(s) active)",
            active.len()
        ),
        active.iter().map(|n| job_ref(n)).collect(),
    ));
    e.remedies.push(format!(
        "resume: kubectl patch cronjob {} -n {} --type=merge -p '{{\"spec\":{{\"suspend\":false}}}}'",
        seen.name, seen.ns
    ));
}

fn next_run(e: &mut Explanation, seen: &Seen<'_>, cj: &CronJob, next: Timestamp) {
    let active = active_names(cj);
    let since = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map(|t| t.0.to_string());
    e.waiting_on.push(Waiting {
        since,
        ..Waiting::new(
            "NextScheduledRun",
            format!(
                "next run at {next} (in {}s), schedule {:?}; {} Job(s) active",
                next.duration_since(seen.now).as_secs().max(0),
                cj.spec.schedule,
                active.len()
            ),
            active.iter().map(|n| job_ref(n)).collect(),
        )
    });
}

#[cfg(test)]
mod tests;
