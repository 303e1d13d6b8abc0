//! PURE: whether a Job is due for deletion, from the Job and the controller's wall clock.
//!
//! Mirrors `needsCleanup`, `getFinishAndExpireTime`, `timeLeft`, `jobFinishTime` and the
//! decision half of `processTTL` in upstream
//! `pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`, and `IsJobFinished` of
//! `pkg/controller/job/util/utils.go`. The clock starts at the `lastTransitionTime` of the
//! first `Complete`/`Failed` condition that is `True`; timestamps stored in the Job are trusted
//! as they are, so a skewed clock defers or advances deletion and nothing is clamped.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use rkcm_runtime::keys::key_of;

use crate::consts::{CONDITION_TRUE, JOB_COMPLETE, JOB_FAILED};
use crate::error::Error;

/// A terminal condition: `Complete` or `Failed`, status `True`. Interim conditions
/// (`FailureTarget`, `SuccessCriteriaMet`) do not count.
fn is_terminal(c: &JobCondition) -> bool {
    (c.type_ == JOB_COMPLETE || c.type_ == JOB_FAILED) && c.status == CONDITION_TRUE
}

fn conditions(job: &Job) -> &[JobCondition] {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

/// `spec.ttlSecondsAfterFinished`, if set.
pub fn ttl_seconds(job: &Job) -> Option<i32> {
    job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished)
}

/// Whether the Job has a terminal condition (upstream `IsJobFinished`).
pub fn is_finished(job: &Job) -> bool {
    conditions(job).iter().any(is_terminal)
}

/// Whether the Job has a TTL and is finished (upstream `needsCleanup`).
pub fn needs_cleanup(job: &Job) -> bool {
    ttl_seconds(job).is_some() && is_finished(job)
}

/// Whether an informer change of this Job should put it on the queue now: not being
/// deleted, and [`needs_cleanup`] (upstream `addJob`/`updateJob`).
pub fn should_enqueue(job: &Job) -> bool {
    job.metadata.deletion_timestamp.is_none() && needs_cleanup(job)
}

/// Go's zero `time.Time` as an RFC 3339 value (what `IsZero` sees if a client writes it).
const GO_ZERO_TIME: Timestamp = Timestamp::constant(-62_135_596_800, 0);

/// When the Job finished: the `lastTransitionTime` of its first terminal condition, in list
/// order (upstream `jobFinishTime`).
pub fn finish_time(job: &Job) -> Result<Timestamp, Error> {
    let Some(condition) = conditions(job).iter().find(|c| is_terminal(c)) else {
        return Err(Error::NotFinished { key: key_of(job) });
    };
    match &condition.last_transition_time {
        Some(t) if t.0 != GO_ZERO_TIME => Ok(t.0),
        _ => Err(Error::FinishTimeUnknown { key: key_of(job) }),
    }
}

/// A finished Job's TTL clock at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    pub finish_at: Timestamp,
    /// `finish_at + ttlSecondsAfterFinished`.
    pub expire_at: Timestamp,
    /// `expire_at - now`; zero or negative once expired.
    pub remaining: SignedDuration,
    /// The finish time is after `now`: the cluster's clocks disagree, deletion is deferred.
    pub finished_in_future: bool,
}

/// The Job's expiry seen at `now` (upstream `timeLeft`); an error for a Job without a TTL or
/// not finished, or whose finish time is unknown.
pub fn time_left(job: &Job, now: Timestamp) -> Result<Expiry, Error> {
    let Some(ttl) = ttl_seconds(job).filter(|_| is_finished(job)) else {
        return Err(Error::NotEligible { key: key_of(job) });
    };
    let finish_at = finish_time(job)?;
    let ttl = SignedDuration::from_secs(i64::from(ttl));
    // Only a finish time near the end of jiff's range (year 9999) overflows: never due.
    let expire_at = finish_at.checked_add(ttl).unwrap_or(Timestamp::MAX);
    Ok(Expiry {
        finish_at,
        expire_at,
        remaining: expire_at.duration_since(now),
        finished_in_future: finish_at > now,
    })
}

/// What the controller does with a Job at one instant (the decision of upstream
/// `processTTL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Being deleted, no TTL, or not finished: nothing to do, no timer.
    Ignore,
    /// Not yet expired: look again after `after` (the remaining time).
    Wait { after: Duration, expiry: Expiry },
    /// Expired at `expire_at`: delete it.
    Expired { expire_at: Timestamp },
}

/// The verdict for `job` at `now`.
pub fn evaluate(job: &Job, now: Timestamp) -> Result<Verdict, Error> {
    if job.metadata.deletion_timestamp.is_some() || !needs_cleanup(job) {
        return Ok(Verdict::Ignore);
    }
    let expiry = time_left(job, now)?;
    if expiry.remaining <= SignedDuration::ZERO {
        return Ok(Verdict::Expired {
            expire_at: expiry.expire_at,
        });
    }
    Ok(Verdict::Wait {
        after: expiry.remaining.unsigned_abs(),
        expiry,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{JobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn now() -> Timestamp {
        "2026-11-24T07:00:00Z".parse().expect("valid")
    }

    fn secs(n: i64) -> SignedDuration {
        SignedDuration::from_secs(n)
    }

    fn cond(type_: &str, status: &str, at: Option<Timestamp>) -> JobCondition {
        JobCondition {
            type_: type_.into(),
            status: status.into(),
            last_transition_time: at.map(Time),
            ..JobCondition::default()
        }
    }

    /// Upstream's `newJob`: a `Complete` condition at `completed`, a `Failed` one at
    /// `failed`, each only if given.
    fn job(completed: Option<Timestamp>, failed: Option<Timestamp>, ttl: Option<i32>) -> Job {
        let mut conditions = Vec::new();
        if let Some(t) = completed {
            conditions.push(cond(JOB_COMPLETE, "True", Some(t)));
        }
        if let Some(t) = failed {
            conditions.push(cond(JOB_FAILED, "True", Some(t)));
        }
        with_conditions(conditions, ttl)
    }

    fn with_conditions(conditions: Vec<JobCondition>, ttl: Option<i32>) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("foobar".into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            spec: Some(JobSpec {
                ttl_seconds_after_finished: ttl,
                ..JobSpec::default()
            }),
            status: Some(JobStatus {
                conditions: Some(conditions),
                ..JobStatus::default()
            }),
        }
    }

    /// Upstream `TestTimeLeft`, case by case.
    #[test]
    fn time_left_table() {
        let n = now();
        struct Case {
            name: &'static str,
            completed: Option<Timestamp>,
            failed: Option<Timestamp>,
            ttl: Option<i32>,
            want: Result<(SignedDuration, Timestamp), &'static str>,
        }
        let cases = [
            Case {
                name: "unfinished",
                completed: None,
                failed: None,
                ttl: Some(100),
                want: Err("should not be cleaned up"),
            },
            Case {
                name: "completed now, no TTL",
                completed: Some(n),
                failed: None,
                ttl: None,
                want: Err("should not be cleaned up"),
            },
            Case {
                name: "completed now, 0s TTL",
                completed: Some(n),
                failed: None,
                ttl: Some(0),
                want: Ok((secs(0), n)),
            },
            Case {
                name: "completed now, 10s TTL",
                completed: Some(n),
                failed: None,
                ttl: Some(10),
                want: Ok((secs(10), n + secs(10))),
            },
            Case {
                name: "completed 10s ago, 15s TTL",
                completed: Some(n - secs(10)),
                failed: None,
                ttl: Some(15),
                want: Ok((secs(5), n + secs(5))),
            },
            Case {
                name: "failed now, no TTL",
                completed: None,
                failed: Some(n),
                ttl: None,
                want: Err("should not be cleaned up"),
            },
            Case {
                name: "failed now, 0s TTL",
                completed: None,
                failed: Some(n),
                ttl: Some(0),
                want: Ok((secs(0), n)),
            },
            Case {
                name: "failed now, 10s TTL",
                completed: None,
                failed: Some(n),
                ttl: Some(10),
                want: Ok((secs(10), n + secs(10))),
            },
            Case {
                name: "failed 10s ago, 15s TTL",
                completed: None,
                failed: Some(n - secs(10)),
                ttl: Some(15),
                want: Ok((secs(5), n + secs(5))),
            },
        ];
        for case in cases {
            let got = time_left(&job(case.completed, case.failed, case.ttl), n);
            match (got, case.want) {
                (Ok(e), Ok((remaining, expire_at))) => {
                    assert_eq!(e.remaining, remaining, "{}", case.name);
                    assert_eq!(e.expire_at, expire_at, "{}", case.name);
                    assert!(!e.finished_in_future, "{}", case.name);
                }
                (Err(e), Err(text)) => {
                    assert!(e.to_string().contains(text), "{}: {e}", case.name);
                    assert!(
                        e.to_string().contains("default/foobar"),
                        "{}: {e}",
                        case.name
                    );
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", case.name),
            }
        }
    }

    #[test]
    fn finished_means_complete_or_failed_true() {
        let n = now();
        let table: [(&str, Vec<JobCondition>, bool); 7] = [
            ("no conditions", vec![], false),
            ("complete", vec![cond("Complete", "True", Some(n))], true),
            ("failed", vec![cond("Failed", "True", Some(n))], true),
            (
                "complete false",
                vec![cond("Complete", "False", Some(n))],
                false,
            ),
            (
                "failed unknown",
                vec![cond("Failed", "Unknown", Some(n))],
                false,
            ),
            (
                "interim conditions only",
                vec![
                    cond("FailureTarget", "True", Some(n)),
                    cond("SuccessCriteriaMet", "True", Some(n)),
                    cond("Suspended", "True", Some(n)),
                ],
                false,
            ),
            (
                "interim then terminal",
                vec![
                    cond("SuccessCriteriaMet", "True", Some(n)),
                    cond("Complete", "True", Some(n)),
                ],
                true,
            ),
        ];
        for (name, conditions, finished) in table {
            let with_ttl = with_conditions(conditions.clone(), Some(0));
            let without_ttl = with_conditions(conditions, None);
            assert_eq!(is_finished(&with_ttl), finished, "{name}");
            assert_eq!(needs_cleanup(&with_ttl), finished, "{name}");
            assert!(!needs_cleanup(&without_ttl), "{name}: no TTL");
        }
        let no_status = Job {
            status: None,
            ..job(None, None, Some(0))
        };
        assert!(!is_finished(&no_status));
    }

    #[test]
    fn finish_time_is_the_first_terminal_condition() {
        let n = now();
        let j = with_conditions(
            vec![
                cond("SuccessCriteriaMet", "True", Some(n - secs(30))),
                cond("Failed", "False", Some(n - secs(20))),
                cond("Complete", "True", Some(n - secs(10))),
                cond("Failed", "True", Some(n - secs(5))),
            ],
            Some(0),
        );
        assert_eq!(finish_time(&j).expect("finished"), n - secs(10));
    }

    #[test]
    fn finish_time_errors() {
        let n = now();
        let no_time = with_conditions(vec![cond("Complete", "True", None)], Some(0));
        assert!(matches!(
            finish_time(&no_time),
            Err(Error::FinishTimeUnknown { ref key }) if key == "default/foobar"
        ));
        let go_zero = with_conditions(vec![cond("Failed", "True", Some(GO_ZERO_TIME))], Some(0));
        assert_eq!(
            GO_ZERO_TIME,
            "0001-01-01T00:00:00Z".parse::<Timestamp>().expect("valid")
        );
        assert!(matches!(
            finish_time(&go_zero),
            Err(Error::FinishTimeUnknown { .. })
        ));
        // The first terminal condition decides, even if a later one has a time.
        let first_has_none = with_conditions(
            vec![
                cond("Complete", "True", None),
                cond("Failed", "True", Some(n)),
            ],
            Some(0),
        );
        assert!(matches!(
            finish_time(&first_has_none),
            Err(Error::FinishTimeUnknown { .. })
        ));
        let unfinished = with_conditions(vec![cond("FailureTarget", "True", Some(n))], Some(0));
        assert!(matches!(
            finish_time(&unfinished),
            Err(Error::NotFinished { .. })
        ));
        // The sync surfaces the unknown finish time as an error (retried with backoff).
        assert!(matches!(
            evaluate(&no_time, n),
            Err(Error::FinishTimeUnknown { .. })
        ));
    }

    /// Upstream `processTTL`: ignore, wait for the remaining time, or expired.
    #[test]
    fn evaluate_table() {
        let n = now();
        let deleting = Job {
            metadata: ObjectMeta {
                deletion_timestamp: Some(Time(n - secs(1))),
                ..job(Some(n - secs(100)), None, Some(0)).metadata
            },
            ..job(Some(n - secs(100)), None, Some(0))
        };
        let table: [(&str, Job, Verdict); 9] = [
            (
                "no TTL",
                job(Some(n - secs(100)), None, None),
                Verdict::Ignore,
            ),
            ("not finished", job(None, None, Some(0)), Verdict::Ignore),
            ("being deleted", deleting, Verdict::Ignore),
            (
                "TTL 0 finished now",
                job(Some(n), None, Some(0)),
                Verdict::Expired { expire_at: n },
            ),
            (
                "TTL 5 finished now: wait 5 s",
                job(Some(n), None, Some(5)),
                Verdict::Wait {
                    after: Duration::from_secs(5),
                    expiry: Expiry {
                        finish_at: n,
                        expire_at: n + secs(5),
                        remaining: secs(5),
                        finished_in_future: false,
                    },
                },
            ),
            (
                "TTL 10 failed 7.5 s ago: wait 2.5 s",
                job(None, Some(n - SignedDuration::from_millis(7500)), Some(10)),
                Verdict::Wait {
                    after: Duration::from_millis(2500),
                    expiry: Expiry {
                        finish_at: n - SignedDuration::from_millis(7500),
                        expire_at: n + SignedDuration::from_millis(2500),
                        remaining: SignedDuration::from_millis(2500),
                        finished_in_future: false,
                    },
                },
            ),
            (
                "expired exactly now",
                job(Some(n - secs(10)), None, Some(10)),
                Verdict::Expired { expire_at: n },
            ),
            (
                "expired long ago",
                job(None, Some(n - secs(3600)), Some(60)),
                Verdict::Expired {
                    expire_at: n - secs(3540),
                },
            ),
            (
                "finished 20 s in the future (clock skew), TTL 0: deferred",
                job(Some(n + secs(20)), None, Some(0)),
                Verdict::Wait {
                    after: Duration::from_secs(20),
                    expiry: Expiry {
                        finish_at: n + secs(20),
                        expire_at: n + secs(20),
                        remaining: secs(20),
                        finished_in_future: true,
                    },
                },
            ),
        ];
        for (name, job, want) in table {
            assert_eq!(evaluate(&job, n).expect(name), want, "{name}");
        }
    }

    /// A TTL raised on the fresh copy turns "expired" back into "wait" (the re-check before
    /// deleting); lowered, it turns "wait" into "expired".
    #[test]
    fn ttl_edits_change_the_verdict() {
        let n = now();
        let finished = n - secs(5);
        assert!(matches!(
            evaluate(&job(Some(finished), None, Some(5)), n),
            Ok(Verdict::Expired { .. })
        ));
        assert!(matches!(
            evaluate(&job(Some(finished), None, Some(60)), n),
            Ok(Verdict::Wait { after, .. }) if after == Duration::from_secs(55)
        ));
        assert!(matches!(
            evaluate(&job(Some(finished), None, Some(3600)), n),
            Ok(Verdict::Wait { .. })
        ));
        assert!(matches!(
            evaluate(&job(Some(finished), None, Some(1)), n),
            Ok(Verdict::Expired { .. })
        ));
    }

    #[test]
    fn enqueue_only_finished_jobs_with_ttl_not_being_deleted() {
        let n = now();
        assert!(should_enqueue(&job(Some(n), None, Some(30))));
        assert!(should_enqueue(&job(None, Some(n), Some(0))));
        assert!(!should_enqueue(&job(Some(n), None, None)));
        assert!(!should_enqueue(&job(None, None, Some(0))));
        let mut deleting = job(Some(n), None, Some(0));
        deleting.metadata.deletion_timestamp = Some(Time(n));
        assert!(!should_enqueue(&deleting));
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let far = Timestamp::MAX - secs(10);
        let e = time_left(&job(Some(far), None, Some(i32::MAX)), now()).expect("finished");
        assert_eq!(e.expire_at, Timestamp::MAX);
        assert!(e.finished_in_future);
        let e =
            time_left(&job(Some(Timestamp::MIN), None, Some(0)), Timestamp::MAX).expect("finished");
        assert!(e.remaining < SignedDuration::ZERO);
    }
}
