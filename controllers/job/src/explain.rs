//! PURE: what the Job controller would do with one Job now and what it waits on
//! (`rkcm explain job/NS/NAME`), from the Job and the pods it controls, through the plan the
//! sync runs ([`crate::plan::plan`]) with the recreation backoff rebuilt from the pods
//! ([`BackoffRecord::of_counted_pods`]).
//!
//! Reason codes:
//! - `Suspended`: `spec.suspend`; no pod runs until it is resumed.
//! - `PodFailureBackoff`: pods failed since the last success; the next pod is created when
//!   the backoff (10 s doubling per failure, at most 10 minutes) has passed.
//! - `PodsActive`: pods are running toward the completions; nothing to change.
//! - `PodFailurePolicy`: a `spec.podFailurePolicy` rule failed the Job (the rule index, the
//!   pod and its exit code or condition, from the `Failed`/`FailureTarget` condition).
//! - `BackoffLimitExceeded`: more pods failed than `backoffLimit` allows.
//! - `DeadlineExceeded`: the Job ran longer than `activeDeadlineSeconds`.
//! - `FailedIndexes`: an Indexed Job with `backoffLimitPerIndex` failed indexes.
//! - `TrackingFinalizers`: a finished (or finishing) Job's pods still carry the
//!   `batch.kubernetes.io/job-tracking` finalizer, which the controller removes once it has
//!   counted them.
//! - `ManagedElsewhere`: `spec.managedBy` names another controller; this one leaves the Job
//!   alone.
//!
//! A failure reason comes from the Job's condition once written, and from the plan's finish
//! candidate before that (then the Job is acting: the condition is written next).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::explain::{Explanation, ObjectRef, State, Waiting};

use crate::backoff::BackoffRecord;
use crate::config::NAME;
use crate::consts::{TRACKING_FINALIZER, condition as c, reason};
use crate::plan::{self, Action, Plan, Snapshot};
use crate::pods::{finished_time, has_tracking_finalizer, is_active, is_failed};

fn rfc3339(t: jiff::Timestamp) -> String {
    t.to_string()
}

fn pod_ref(p: &Pod) -> String {
    format!("Pod/{}", p.metadata.name.as_deref().unwrap_or_default())
}

/// What one explanation reads.
struct Seen<'a> {
    job: &'a Job,
    pods: &'a [Arc<Pod>],
    ns: String,
    name: String,
}

impl Seen<'_> {
    fn describe_pods(&self) -> String {
        format!(
            "see why pods failed: kubectl describe pods -n {} -l batch.kubernetes.io/job-name={}",
            self.ns, self.name
        )
    }

    fn recreate(&self) -> String {
        "a failed Job is not retried: fix the cause, then delete the Job and create it again".into()
    }
}

/// The explanation for `job` with the pods it controls, at `now`.
pub fn explain(job: &Job, pods: &[Arc<Pod>], now: jiff::Timestamp) -> Explanation {
    let seen = Seen {
        job,
        pods,
        ns: job.metadata.namespace.clone().unwrap_or_default(),
        name: job.metadata.name.clone().unwrap_or_default(),
    };
    let mut e = Explanation {
        object: ObjectRef {
            kind: "Job".into(),
            namespace: seen.ns.clone(),
            name: seen.name.clone(),
        },
        controller: NAME,
        state: State::Settled,
        actions: Vec::new(),
        waiting_on: Vec::new(),
        remedies: Vec::new(),
    };
    if let Some(by) = plan::managed_by_external(job) {
        e.state = State::Waiting;
        e.waiting_on.push(Waiting::new(
            "ManagedElsewhere",
            format!("spec.managedBy is {by:?}: that controller runs the Job, this one does not"),
            Vec::new(),
        ));
        return e;
    }
    if let Some(cond) = terminal_condition(job) {
        finished(&mut e, &seen, &cond);
    } else {
        running(&mut e, &seen, now);
    }
    tracking_finalizers(&mut e, &seen);
    e
}

/// The `Failed` or `Complete` condition that is True.
fn terminal_condition(job: &Job) -> Option<JobCondition> {
    let status = job.status.as_ref()?;
    [c::FAILED, c::COMPLETE]
        .iter()
        .find_map(|t| plan::find_condition(status, t).filter(|x| x.status == c::TRUE))
        .cloned()
}

fn finished(e: &mut Explanation, seen: &Seen<'_>, cond: &JobCondition) {
    if cond.type_ == c::COMPLETE {
        return;
    }
    e.state = State::Stalled;
    failure(e, seen, cond);
}

/// The reason code, message and remedies of a failure condition (written or planned).
fn failure(e: &mut Explanation, seen: &Seen<'_>, cond: &JobCondition) {
    let job = seen.job;
    let status = job.status.clone().unwrap_or_default();
    let spec = plan::spec_of(job);
    let message = cond.message.clone().unwrap_or_default();
    let since = cond.last_transition_time.as_ref().map(|t| rfc3339(t.0));
    let w = match cond.reason.as_deref().unwrap_or_default() {
        reason::POD_FAILURE_POLICY => {
            let parsed = PolicyMessage::parse(&message);
            let rule = parsed
                .rule
                .map_or_else(String::new, |r| format!("rule {r} of "));
            let objects = parsed.pod.iter().map(|p| format!("Pod/{p}")).collect();
            if let Some(pod) = &parsed.pod {
                e.remedies.push(format!(
                    "see the pod's output: kubectl logs -n {} {pod}",
                    seen.ns
                ));
            }
            Waiting::new(
                "PodFailurePolicy",
                format!("{rule}spec.podFailurePolicy failed the Job: {message}"),
                objects,
            )
        }
        reason::BACKOFF_LIMIT_EXCEEDED => {
            e.remedies.push(seen.describe_pods());
            Waiting::new(
                "BackoffLimitExceeded",
                format!(
                    "{} pod(s) failed, backoffLimit {}: {message}",
                    status.failed.unwrap_or(0),
                    spec.backoff_limit.unwrap_or(plan::DEFAULT_BACKOFF_LIMIT)
                ),
                failed_pods(seen),
            )
        }
        reason::DEADLINE_EXCEEDED => {
            let ran = status
                .start_time
                .as_ref()
                .zip(cond.last_transition_time.as_ref())
                .map(|(s, t)| format!("ran {}s, ", t.0.duration_since(s.0).as_secs()))
                .unwrap_or_default();
            e.remedies.push(
                "raise spec.activeDeadlineSeconds in the new Job if the work needs longer".into(),
            );
            Waiting::new(
                "DeadlineExceeded",
                format!(
                    "{ran}activeDeadlineSeconds {}: {message}",
                    spec.active_deadline_seconds.unwrap_or(0)
                ),
                Vec::new(),
            )
        }
        _ => {
            e.remedies.push(seen.describe_pods());
            Waiting::new(
                "FailedIndexes",
                format!(
                    "failed indexes {:?} (maxFailedIndexes {}): {message}",
                    status.failed_indexes.unwrap_or_default(),
                    spec.max_failed_indexes
                        .map_or_else(|| "unset".to_owned(), |m| m.to_string())
                ),
                failed_pods(seen),
            )
        }
    };
    e.waiting_on.push(Waiting { since, ..w });
    e.remedies.push(seen.recreate());
}

fn failed_pods(seen: &Seen<'_>) -> Vec<String> {
    seen.pods
        .iter()
        .filter(|p| is_failed(p, seen.job))
        .map(|p| pod_ref(p))
        .collect()
}

/// The parts of a pod-failure-policy condition message: `Container main for pod ns/p failed
/// with exit code 42 matching FailJob rule at index 0` or `Pod ns/p has condition
/// DisruptionTarget matching FailJob rule at index 0` (upstream's formats).
#[derive(Debug, Default, PartialEq, Eq)]
struct PolicyMessage {
    pod: Option<String>,
    rule: Option<u32>,
}

impl PolicyMessage {
    fn parse(message: &str) -> Self {
        let after = |marker: &str| {
            message
                .find(marker)
                .map(|i| &message[i + marker.len()..])
                .and_then(|rest| rest.split_whitespace().next())
        };
        let pod = after("for pod ")
            .or_else(|| {
                message
                    .strip_prefix("Pod ")
                    .and_then(|r| r.split_whitespace().next())
            })
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned());
        Self {
            pod,
            rule: after("rule at index ").and_then(|r| r.parse().ok()),
        }
    }
}

/// A Job not yet finished: the plan's decision.
fn running(e: &mut Explanation, seen: &Seen<'_>, now: jiff::Timestamp) {
    let job = seen.job;
    let all: Vec<&Pod> = seen.pods.iter().map(|p| &**p).collect();
    let none = HashSet::new();
    let p = plan::plan(
        &Snapshot {
            job,
            pods: seen.pods,
            expected_rm_finalizers: &none,
            expectations_satisfied: true,
            backoff: BackoffRecord::of_counted_pods(job, &all),
        },
        now,
    );
    if let Some(cond) = &p.finished {
        e.state = State::Acting;
        e.actions.push(format!(
            "record the {} condition ({})",
            cond.type_,
            cond.reason.as_deref().unwrap_or_default()
        ));
        if cond.type_ != c::SUCCESS_CRITERIA_MET {
            failure(e, seen, cond);
        }
    }
    match &p.action {
        Action::DeleteActive(pods) | Action::Remove(pods) if !pods.is_empty() => {
            e.state = State::Acting;
            e.actions.push(format!(
                "delete {} active pod(s): {}",
                pods.len(),
                names(pods)
            ));
        }
        Action::Create(new) => {
            e.state = State::Acting;
            let indexes: Vec<String> = new
                .iter()
                .filter_map(|n| n.index.map(|i| i.to_string()))
                .collect();
            e.actions.push(if indexes.is_empty() {
                format!("create {} pod(s)", new.len())
            } else {
                format!("create pods for indexes {}", indexes.join(","))
            });
        }
        _ => {}
    }
    if plan::is_suspended(job) {
        suspended(e, seen);
    } else if let Some(left) =
        p.waiting
            .iter()
            .find_map(|w| match *w {
                plan::Waiting::PodBackoff { remaining }
                | plan::Waiting::IndexBackoff { remaining } => Some(remaining),
                plan::Waiting::ActiveDeadline { .. } => None,
            })
            .filter(|_| p.finished.is_none())
    {
        backoff(e, seen, &p, left);
    } else if p.finished.is_none() && e.actions.is_empty() && !p.active.is_empty() {
        active(e, seen, &p);
    }
}

fn names(pods: &[Arc<Pod>]) -> String {
    pods.iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect::<Vec<_>>()
        .join(", ")
}

fn suspended(e: &mut Explanation, seen: &Seen<'_>) {
    e.state = State::Stalled;
    let since = seen
        .job
        .status
        .as_ref()
        .and_then(|s| plan::find_condition(s, c::SUSPENDED))
        .filter(|x| x.status == c::TRUE)
        .and_then(|x| x.last_transition_time.as_ref())
        .map(|t| rfc3339(t.0));
    let status = seen.job.status.clone().unwrap_or_default();
    e.waiting_on.push(Waiting {
        since,
        ..Waiting::new(
            "Suspended",
            format!(
                "spec.suspend is true: no pod runs ({} of {} completions succeeded)",
                status.succeeded.unwrap_or(0),
                completions_text(seen.job)
            ),
            Vec::new(),
        )
    });
    e.remedies.push(format!(
        "resume: kubectl patch job {} -n {} --type=merge -p '{{\"spec\":{{\"suspend\":false}}}}'",
        seen.name, seen.ns
    ));
}

fn completions_text(job: &Job) -> String {
    plan::completions(job).map_or_else(|| "unset".to_owned(), |c| c.to_string())
}

fn backoff(e: &mut Explanation, seen: &Seen<'_>, p: &Plan, left: Duration) {
    e.state = State::Waiting;
    let job = seen.job;
    let last = seen
        .pods
        .iter()
        .filter(|x| is_failed(x, job))
        .max_by_key(|x| finished_time(x));
    e.waiting_on.push(Waiting {
        since: p.new_backoff.last_failure_time.map(rfc3339),
        ..Waiting::new(
            "PodFailureBackoff",
            format!(
                "{} pod failure(s) since the last success ({} failed of backoffLimit {}): the \
                 next pod is created in {}s",
                p.new_backoff.failures_after_last_success,
                p.failed,
                plan::spec_of(job)
                    .backoff_limit
                    .unwrap_or(plan::DEFAULT_BACKOFF_LIMIT),
                left.as_secs().max(1)
            ),
            last.iter().map(|x| pod_ref(x)).collect(),
        )
    });
    match last.and_then(|x| x.metadata.name.as_deref()) {
        Some(name) => e.remedies.push(format!(
            "see why the last pod failed: kubectl logs -n {} {name}",
            seen.ns
        )),
        None => e.remedies.push(seen.describe_pods()),
    }
}

fn active(e: &mut Explanation, seen: &Seen<'_>, p: &Plan) {
    e.state = State::Waiting;
    let deadline = p
        .waiting
        .iter()
        .find_map(|w| match *w {
            plan::Waiting::ActiveDeadline { remaining } => Some(remaining),
            _ => None,
        })
        .map(|d| format!("; active deadline in {}s", d.as_secs()))
        .unwrap_or_default();
    e.waiting_on.push(Waiting {
        since: p.start_time.map(rfc3339),
        ..Waiting::new(
            "PodsActive",
            format!(
                "{} pod(s) active ({} ready), {} of {} completions succeeded, parallelism \
                 {}{deadline}",
                p.active.len(),
                p.ready,
                p.succeeded,
                completions_text(seen.job),
                plan::spec_of(seen.job).parallelism.unwrap_or(1)
            ),
            p.active.iter().map(|x| pod_ref(x)).collect(),
        )
    });
}

/// Finished pods still holding the tracking finalizer once the Job is finished or finishing.
fn tracking_finalizers(e: &mut Explanation, seen: &Seen<'_>) {
    let finishing =
        plan::is_finished(seen.job) || e.actions.iter().any(|a| a.starts_with("record the"));
    if !finishing {
        return;
    }
    let held: Vec<&Arc<Pod>> = seen
        .pods
        .iter()
        .filter(|p| has_tracking_finalizer(p) && !is_active(p))
        .collect();
    let Some(first) = held.first() else {
        return;
    };
    if e.state == State::Settled {
        e.state = State::Waiting;
    }
    e.waiting_on.push(Waiting::new(
        "TrackingFinalizers",
        format!(
            "{} finished pod(s) still carry the {TRACKING_FINALIZER} finalizer; the Job \
             controller removes it once the pods are counted",
            held.len()
        ),
        held.iter().map(|p| pod_ref(p)).collect(),
    ));
    e.remedies.push(format!(
        "if no Job controller runs, remove it by hand: kubectl patch pod -n {} {} --type=json \
         -p '[{{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}}]'",
        seen.ns,
        first.metadata.name.as_deref().unwrap_or_default()
    ));
}

#[cfg(test)]
mod tests;
