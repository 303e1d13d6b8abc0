//! PURE: what the TTL-after-finished controller would do with one Job now and what it waits on
//! (`rkcm explain ttl/NS/NAME`), through the controller's own verdict ([`plan::evaluate`]).
//!
//! Reason codes:
//! - `NoTtl`: the Job has no `spec.ttlSecondsAfterFinished`; it is never deleted (settled).
//! - `NotFinished`: the Job has a TTL and has not finished; its clock starts when it does.
//! - `TtlNotExpired`: finished, its TTL still running: deleted at the expiry time.
//! - `FinishedInFuture`: the finish time is after now (clock skew): deletion is deferred.
//! - `FinishTimeUnknown`: the terminal condition has no `lastTransitionTime`; the controller
//!   cannot start the clock and retries (stalled).
//! - `Deleting`: the Job is being deleted (foreground: it goes once its pods are gone).

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::explain::{Explanation, ObjectRef, State, Waiting};

use crate::config::NAME;
use crate::plan::{self, Verdict};

/// The explanation for `job` at `now`.
pub fn explain(job: &Job, now: jiff::Timestamp) -> Explanation {
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let mut e = Explanation {
        object: ObjectRef {
            kind: "Job".into(),
            namespace: ns.clone(),
            name: name.clone(),
        },
        controller: NAME,
        state: State::Settled,
        actions: Vec::new(),
        waiting_on: Vec::new(),
        remedies: Vec::new(),
    };
    let ttl = plan::ttl_seconds(job);
    if let Some(t) = &job.metadata.deletion_timestamp {
        e.state = State::Waiting;
        e.waiting_on.push(Waiting {
            reason: "Deleting",
            message:
                "the Job is being deleted; it goes once the garbage collector has removed its pods"
                    .into(),
            objects: Vec::new(),
            since: Some(t.0.to_string()),
        });
        return e;
    }
    let Some(ttl) = ttl else {
        e.waiting_on.push(Waiting::new(
            "NoTtl",
            "spec.ttlSecondsAfterFinished is not set: the controller never deletes this Job".into(),
            Vec::new(),
        ));
        return e;
    };
    if !plan::is_finished(job) {
        e.state = State::Waiting;
        e.waiting_on.push(Waiting::new(
            "NotFinished",
            format!("the Job has not finished; it is deleted {ttl} s after it does"),
            Vec::new(),
        ));
        return e;
    }
    match plan::evaluate(job, now) {
        Ok(Verdict::Ignore) => {}
        Ok(Verdict::Expired { expire_at }) => {
            e.state = State::Acting;
            e.actions.push(format!(
                "delete Job {name} (foreground, with its pods): its TTL of {ttl} s expired at {expire_at}"
            ));
        }
        Ok(Verdict::Wait { after, expiry }) => {
            e.state = State::Waiting;
            let (reason, message) = if expiry.finished_in_future {
                (
                    "FinishedInFuture",
                    format!(
                        "the Job finished at {}, after now: the cluster's clocks disagree; deletion is deferred to {}",
                        expiry.finish_at, expiry.expire_at
                    ),
                )
            } else {
                (
                    "TtlNotExpired",
                    format!(
                        "finished at {}; deleted at {} (TTL {ttl} s), in {} s",
                        expiry.finish_at,
                        expiry.expire_at,
                        after.as_secs()
                    ),
                )
            };
            e.waiting_on.push(Waiting {
                reason,
                message,
                objects: Vec::new(),
                since: Some(expiry.finish_at.to_string()),
            });
            e.remedies.push(format!(
                "to keep the Job longer, raise its TTL: kubectl -n {ns} patch job {name} --type=merge -p '{{\"spec\":{{\"ttlSecondsAfterFinished\":SECONDS}}}}'"
            ));
        }
        Err(err) => {
            e.state = State::Stalled;
            e.waiting_on.push(Waiting::new(
                "FinishTimeUnknown",
                format!("the controller cannot start the TTL clock: {err}"),
                Vec::new(),
            ));
            e.remedies.push(format!(
                "delete the Job by hand if it is no longer needed: kubectl -n {ns} delete job {name}"
            ));
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::Job;

    use super::*;

    fn job(ttl: Option<i32>, finished: Option<&str>) -> Job {
        let conditions: Vec<serde_json::Value> = finished
            .map(|t| {
                vec![serde_json::json!({"type": "Complete", "status": "True", "lastTransitionTime": t})]
            })
            .unwrap_or_default();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pi", "namespace": "ns"},
            "spec": {"ttlSecondsAfterFinished": ttl, "template": {}},
            "status": {"conditions": conditions},
        }))
        .expect("job")
    }

    fn now() -> jiff::Timestamp {
        "2026-12-05T12:00:00Z".parse().expect("now")
    }

    #[test]
    fn explains_each_verdict() {
        for (name, job, state, reasons, action) in [
            (
                "no ttl",
                job(None, Some("2026-12-05T11:00:00Z")),
                State::Settled,
                vec!["NoTtl"],
                false,
            ),
            (
                "running",
                job(Some(60), None),
                State::Waiting,
                vec!["NotFinished"],
                false,
            ),
            (
                "counting",
                job(Some(600), Some("2026-12-05T11:55:00Z")),
                State::Waiting,
                vec!["TtlNotExpired"],
                false,
            ),
            (
                "expired",
                job(Some(60), Some("2026-12-05T11:55:00Z")),
                State::Acting,
                vec![],
                true,
            ),
            (
                "skew",
                job(Some(60), Some("2026-12-05T12:10:00Z")),
                State::Waiting,
                vec!["FinishedInFuture"],
                false,
            ),
        ] {
            let e = explain(&job, now());
            let got: Vec<&str> = e.waiting_on.iter().map(|w| w.reason).collect();
            assert_eq!(
                (e.state, got, !e.actions.is_empty()),
                (state, reasons, action),
                "{name}: {e:?}"
            );
            assert_eq!(e.controller, "ttl-after-finished-controller");
        }
        let e = explain(&job(Some(600), Some("2026-12-05T11:55:00Z")), now());
        assert_eq!(
            e.waiting_on[0].message,
            "finished at 2026-12-05T11:55:00Z; deleted at 2026-12-05T12:05:00Z (TTL 600 s), in 300 s"
        );
        let e = explain(&job(Some(60), Some("2026-12-05T11:55:00Z")), now());
        assert!(e.actions[0].starts_with("delete Job pi"), "{:?}", e.actions);
    }

    #[test]
    fn an_unknown_finish_time_stalls_and_a_deleted_job_waits() {
        let mut j = job(Some(60), Some("2026-12-05T11:55:00Z"));
        if let Some(c) = j.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            c[0].last_transition_time = None;
        }
        let e = explain(&j, now());
        assert_eq!(
            (e.state, e.waiting_on[0].reason),
            (State::Stalled, "FinishTimeUnknown")
        );
        let mut j = job(Some(60), Some("2026-12-05T11:55:00Z"));
        j.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
        let e = explain(&j, now());
        assert_eq!(
            (e.state, e.waiting_on[0].reason),
            (State::Waiting, "Deleting")
        );
    }
}
