//! Whether a Job's TTL has expired, and when it will. Pure.
//!
//! Mirrors `processTTL`, `needsCleanup`, `timeLeft`, `jobFinishTime` of upstream
//! `pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;

/// The outcome of checking one Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ttl {
    /// Being deleted, no TTL, or not finished: nothing to do.
    NotEligible,
    /// Expired at this time: delete it.
    Expired { expire_at: jiff::Timestamp },
    /// Expires after this long: look again then.
    Wait(Duration),
}

/// Why the finish time of a finished Job is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FinishTimeError {
    #[error("unable to find the time when the Job {0} finished")]
    NoTime(String),
    #[error("unable to find the status of the finished Job {0}")]
    NoCondition(String),
}

fn key(job: &Job) -> String {
    format!(
        "{}/{}",
        job.metadata.namespace.as_deref().unwrap_or(""),
        job.metadata.name.as_deref().unwrap_or("")
    )
}

fn is_terminal(type_: &str) -> bool {
    type_ == "Complete" || type_ == "Failed"
}

/// `Complete` or `Failed` with status True (`FailureTarget`/`SuccessCriteriaMet` are not).
pub fn is_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| is_terminal(&c.type_) && c.status == "True")
        })
}

/// TTL set and finished (`needsCleanup`), whatever the deletion state.
pub fn needs_cleanup(job: &Job) -> bool {
    job.spec
        .as_ref()
        .is_some_and(|s| s.ttl_seconds_after_finished.is_some())
        && is_finished(job)
}

/// `lastTransitionTime` of the first terminal condition in list order.
pub fn finish_time(job: &Job) -> Result<jiff::Timestamp, FinishTimeError> {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    let c = conditions
        .into_iter()
        .flatten()
        .find(|c| is_terminal(&c.type_) && c.status == "True")
        .ok_or_else(|| FinishTimeError::NoCondition(key(job)))?;
    match &c.last_transition_time {
        Some(t) if t.0 != jiff::Timestamp::UNIX_EPOCH => Ok(t.0),
        _ => Err(FinishTimeError::NoTime(key(job))),
    }
}

/// `processTTL` without the requeue: expired, waiting, or not eligible.
pub fn check(job: &Job, now: jiff::Timestamp) -> Result<Ttl, FinishTimeError> {
    if job.metadata.deletion_timestamp.is_some() || !needs_cleanup(job) {
        return Ok(Ttl::NotEligible);
    }
    let ttl = job
        .spec
        .as_ref()
        .and_then(|s| s.ttl_seconds_after_finished)
        .unwrap_or(0);
    let finished = finish_time(job)?;
    if finished > now {
        tracing::info!(
            job = %key(job),
            "Warning: Found Job finished in the future. This is likely due to time skew in the cluster. Job cleanup will be deferred."
        );
    }
    let expire_at = finished
        .checked_add(jiff::SignedDuration::from_secs(i64::from(ttl)))
        .unwrap_or(finished);
    let remaining = expire_at.duration_since(now);
    if remaining <= jiff::SignedDuration::ZERO {
        return Ok(Ttl::Expired { expire_at });
    }
    Ok(Ttl::Wait(
        Duration::try_from(remaining).unwrap_or(Duration::ZERO),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(spec: serde_json::Value, meta: serde_json::Value, conditions: serde_json::Value) -> Job {
        let mut m = json!({"name": "a", "namespace": "ns"});
        for (k, v) in meta.as_object().cloned().unwrap_or_default() {
            m[k] = v;
        }
        serde_json::from_value(json!({
            "metadata": m,
            "spec": spec,
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn check_table() {
        let now = ts("2026-01-01T00:01:00Z");
        let tmpl = |ttl: serde_json::Value| json!({"template": {}, "ttlSecondsAfterFinished": ttl});
        let complete =
            |t: &str| json!([{"type": "Complete", "status": "True", "lastTransitionTime": t}]);
        // (name, spec, meta, conditions, expected)
        let cases = vec![
            (
                "no ttl",
                json!({"template": {}}),
                json!({}),
                complete("2026-01-01T00:00:00Z"),
                Ok(Ttl::NotEligible),
            ),
            (
                "unfinished",
                tmpl(json!(0)),
                json!({}),
                json!([]),
                Ok(Ttl::NotEligible),
            ),
            (
                "interim only",
                tmpl(json!(0)),
                json!({}),
                json!([
                    {"type": "FailureTarget", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]),
                Ok(Ttl::NotEligible),
            ),
            (
                "deleting",
                tmpl(json!(0)),
                json!({"deletionTimestamp": "2026-01-01T00:00:30Z"}),
                complete("2026-01-01T00:00:00Z"),
                Ok(Ttl::NotEligible),
            ),
            (
                "zero ttl",
                tmpl(json!(0)),
                json!({}),
                complete("2026-01-01T00:00:00Z"),
                Ok(Ttl::Expired {
                    expire_at: ts("2026-01-01T00:00:00Z"),
                }),
            ),
            (
                "expired exactly now",
                tmpl(json!(60)),
                json!({}),
                complete("2026-01-01T00:00:00Z"),
                Ok(Ttl::Expired { expire_at: now }),
            ),
            (
                "waiting",
                tmpl(json!(100)),
                json!({}),
                complete("2026-01-01T00:00:00Z"),
                Ok(Ttl::Wait(Duration::from_secs(40))),
            ),
            (
                "failed counts",
                tmpl(json!(10)),
                json!({}),
                json!([
                    {"type": "FailureTarget", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-01T00:00:55Z"}
                ]),
                Ok(Ttl::Wait(Duration::from_secs(5))),
            ),
            (
                "future finish",
                tmpl(json!(0)),
                json!({}),
                complete("2026-01-01T00:01:20Z"),
                Ok(Ttl::Wait(Duration::from_secs(20))),
            ),
            (
                "no transition time",
                tmpl(json!(0)),
                json!({}),
                json!([{"type": "Complete", "status": "True"}]),
                Err(FinishTimeError::NoTime("ns/a".into())),
            ),
        ];
        for (name, spec, meta, conditions, want) in cases {
            assert_eq!(check(&job(spec, meta, conditions), now), want, "{name}");
        }
    }

    #[test]
    fn error_texts_are_upstream() {
        assert_eq!(
            FinishTimeError::NoTime("ns/a".into()).to_string(),
            "unable to find the time when the Job ns/a finished"
        );
        assert_eq!(
            FinishTimeError::NoCondition("ns/a".into()).to_string(),
            "unable to find the status of the finished Job ns/a"
        );
    }
}
