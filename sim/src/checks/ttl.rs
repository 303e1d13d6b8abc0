//! `JobDeletedBeforeTtl`: the TTL-after-finished controller deletes only a finished Job
//! whose `ttlSecondsAfterFinished` has passed since it finished, judged on the Job the server
//! deleted (its TTL as stored then, not as the controller's cache showed it;
//! `pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`).

use jiff::Timestamp;
use serde_json::Value;

/// When the Job finished: the `lastTransitionTime` of its first `Complete` or `Failed`
/// condition that is `True` (upstream `jobFinishTime`).
fn finished_at(job: &Value) -> Option<Timestamp> {
    job["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")?["lastTransitionTime"]
        .as_str()?
        .parse()
        .ok()
}

/// Why deleting `job` at `at` broke the promise, if it did.
pub fn early(job: &Value, at: Timestamp) -> Option<String> {
    let Some(ttl) = job["spec"]["ttlSecondsAfterFinished"].as_i64() else {
        return Some("the Job has no ttlSecondsAfterFinished".into());
    };
    let Some(done) = finished_at(job) else {
        return Some("the Job has not finished".into());
    };
    let expires = done
        .checked_add(jiff::SignedDuration::from_secs(ttl))
        .ok()?;
    (at < expires).then(|| {
        format!(
            "deleted at {at}, finished at {done} with ttlSecondsAfterFinished {ttl}: {:.1} s early",
            (expires - at).total(jiff::Unit::Second).unwrap_or_default()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(ttl: Option<i64>, cond: Option<(&str, &str)>) -> Value {
        let mut j = json!({"spec": {}, "status": {}});
        if let Some(t) = ttl {
            j["spec"]["ttlSecondsAfterFinished"] = json!(t);
        }
        if let Some((t, at)) = cond {
            j["status"]["conditions"] =
                json!([{"type": t, "status": "True", "lastTransitionTime": at}]);
        }
        j
    }

    #[test]
    fn table() {
        let at: Timestamp = "2030-01-01T00:00:10Z".parse().unwrap();
        let cases = [
            (
                job(Some(5), Some(("Complete", "2030-01-01T00:00:05Z"))),
                false,
            ),
            (
                job(Some(6), Some(("Complete", "2030-01-01T00:00:05Z"))),
                true,
            ),
            (
                job(Some(0), Some(("Failed", "2030-01-01T00:00:10Z"))),
                false,
            ),
            (job(None, Some(("Complete", "2030-01-01T00:00:00Z"))), true),
            (
                job(Some(0), Some(("Suspended", "2030-01-01T00:00:00Z"))),
                true,
            ),
            (job(Some(0), None), true),
        ];
        for (j, broken) in cases {
            assert_eq!(early(&j, at).is_some(), broken, "{j}");
        }
    }
}
