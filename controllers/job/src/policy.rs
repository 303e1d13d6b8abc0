//! Pod failure policy and success policy matching. Pure.
//!
//! Mirrors upstream `pkg/controller/job/pod_failure_policy.go` and `success_policy.go`.

use k8s_openapi::api::batch::v1::{
    PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, SuccessPolicy,
};
use rkcm_runtime::cache::cached::{ContainerStatus, Pod, PodCondition};

use crate::consts::{message, policy as p};
use crate::indexes::Intervals;

/// The action of the rule a failed pod matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    FailJob,
    FailIndex,
    Ignore,
    Count,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::FailJob => p::FAIL_JOB,
            Action::FailIndex => p::FAIL_INDEX,
            Action::Ignore => p::IGNORE,
            Action::Count => p::COUNT,
        }
    }
}

/// What matching a failed pod against the policy gives (upstream `matchPodFailurePolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// The Job failure message when a `FailJob` rule matched.
    pub fail_job_message: Option<String>,
    /// Whether the failure counts towards `backoffLimit` / `backoffLimitPerIndex`.
    pub count_failed: bool,
    /// The matched rule's action; `None` when no rule matched.
    pub action: Option<Action>,
}

impl Match {
    const NONE: Match = Match {
        fail_job_message: None,
        count_failed: true,
        action: None,
    };
}

/// Matches a failed pod against `policy`: rules in order, first match wins; an unknown action
/// skips the rule; no match means "count".
pub fn match_pod_failure_policy(policy: Option<&PodFailurePolicy>, pod: &Pod) -> Match {
    let Some(policy) = policy else {
        return Match::NONE;
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched_message = if let Some(req) = &rule.on_exit_codes {
            match_on_exit_codes(pod, req).map(|cs| {
                let code = cs
                    .state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .map_or(0, |t| t.exit_code);
                format!(
                    "Container {} for pod {namespace}/{name} failed with exit code {code} matching {} rule at index {index}",
                    cs.name, rule.action
                )
            })
        } else if let Some(patterns) = &rule.on_pod_conditions {
            match_on_pod_conditions(pod, patterns).map(|c| {
                format!(
                    "Pod {namespace}/{name} has condition {} matching {} rule at index {index}",
                    c.type_, rule.action
                )
            })
        } else {
            None
        };
        let Some(msg) = matched_message else {
            continue;
        };
        match rule.action.as_str() {
            p::IGNORE => {
                return Match {
                    fail_job_message: None,
                    count_failed: false,
                    action: Some(Action::Ignore),
                };
            }
            p::FAIL_INDEX => {
                return Match {
                    fail_job_message: None,
                    count_failed: true,
                    action: Some(Action::FailIndex),
                };
            }
            p::COUNT => {
                return Match {
                    fail_job_message: None,
                    count_failed: true,
                    action: Some(Action::Count),
                };
            }
            p::FAIL_JOB => {
                return Match {
                    fail_job_message: Some(msg),
                    count_failed: true,
                    action: Some(Action::FailJob),
                };
            }
            _ => {}
        }
    }
    Match::NONE
}

fn match_on_exit_codes<'a>(
    pod: &'a Pod,
    req: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    let from = |list: Option<&'a Vec<ContainerStatus>>| {
        list.into_iter().flatten().find(|cs| {
            let Some(t) = cs.state.as_ref().and_then(|s| s.terminated.as_ref()) else {
                return false;
            };
            if req.container_name.as_ref().is_some_and(|n| *n != cs.name) {
                return false;
            }
            t.exit_code != 0 && exit_code_matches(t.exit_code, req)
        })
    };
    from(status.container_statuses.as_ref())
        .or_else(|| from(status.init_container_statuses.as_ref()))
}

fn exit_code_matches(code: i32, req: &PodFailurePolicyOnExitCodesRequirement) -> bool {
    match req.operator.as_str() {
        p::OP_IN => req.values.contains(&code),
        p::OP_NOT_IN => !req.values.contains(&code),
        _ => false,
    }
}

fn match_on_pod_conditions<'a>(
    pod: &'a Pod,
    patterns: &[PodFailurePolicyOnPodConditionsPattern],
) -> Option<&'a PodCondition> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| {
        patterns.iter().any(|pat| {
            // The API defaults the pattern status to True.
            c.type_ == pat.type_ && c.status == pat.status.as_deref().unwrap_or("True")
        })
    })
}

/// Evaluates the success policy against the succeeded indexes: `Some(message)` for the first
/// matching rule (`Matched rules at index <i>`).
pub fn match_success_policy(
    policy: Option<&SuccessPolicy>,
    completions: i32,
    succeeded: &Intervals,
) -> Option<String> {
    let policy = policy?;
    if succeeded.is_empty() {
        return None;
    }
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = if let Some(s) = &rule.succeeded_indexes {
            let required = Intervals::parse(s, completions);
            if required.is_empty() {
                continue;
            }
            let contained = overlap(&required, succeeded);
            contained == required.total()
                || rule
                    .succeeded_count
                    .is_some_and(|c| contained >= usize::try_from(c).unwrap_or(usize::MAX))
        } else if let Some(c) = rule.succeeded_count {
            succeeded.total() >= usize::try_from(c).unwrap_or(usize::MAX)
        } else {
            false
        };
        if matched {
            return Some(format!("{} {index}", message::SUCCESS_POLICY_PREFIX));
        }
    }
    None
}

/// Number of indexes in both lists.
fn overlap(a: &Intervals, b: &Intervals) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0usize);
    while i < a.0.len() && j < b.0.len() {
        let (x, y) = (a.0[i], b.0[j]);
        let o = i64::from(x.last.min(y.last)) - i64::from(x.first.max(y.first)) + 1;
        if o > 0 {
            n += usize::try_from(o).unwrap_or(0);
        }
        match y.last.cmp(&x.last) {
            std::cmp::Ordering::Less => j += 1,
            std::cmp::Ordering::Greater => i += 1,
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
    n
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({ "rules": rules })).unwrap()
    }

    fn failed_pod(
        containers: serde_json::Value,
        init: serde_json::Value,
        conditions: serde_json::Value,
    ) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "p"},
            "status": {"phase": "Failed", "containerStatuses": containers, "initContainerStatuses": init, "conditions": conditions}
        }))
        .unwrap()
    }

    fn exited(name: &str, code: i32) -> serde_json::Value {
        json!({"name": name, "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": code}}})
    }

    #[test]
    fn pod_failure_policy_table() {
        let main42 = failed_pod(json!([exited("main", 42)]), json!([]), json!([]));
        let side5 = failed_pod(
            json!([exited("main", 0), exited("side", 5)]),
            json!([]),
            json!([]),
        );
        let init3 = failed_pod(json!([]), json!([exited("init", 3)]), json!([]));
        let disrupted = failed_pod(
            json!([exited("main", 137)]),
            json!([]),
            json!([{"type": "DisruptionTarget", "status": "True"}]),
        );
        let zero = failed_pod(json!([exited("main", 0)]), json!([]), json!([]));
        // (policy, pod, expected action, counts, message)
        let cases: Vec<(serde_json::Value, &Pod, Option<Action>, bool, Option<&str>)> = vec![
            (
                json!([{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]),
                &main42,
                Some(Action::FailJob),
                true,
                Some(
                    "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 0",
                ),
            ),
            (
                json!([{"action": "FailJob", "onExitCodes": {"containerName": "other", "operator": "In", "values": [42]}}]),
                &main42,
                None,
                true,
                None,
            ),
            (
                json!([{"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}}]),
                &side5,
                Some(Action::Ignore),
                false,
                None,
            ),
            (
                json!([{"action": "Count", "onExitCodes": {"operator": "In", "values": [3]}}]),
                &init3,
                Some(Action::Count),
                true,
                None,
            ),
            (
                json!([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]),
                &disrupted,
                Some(Action::Ignore),
                false,
                None,
            ),
            (
                json!([{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]),
                &disrupted,
                Some(Action::FailJob),
                true,
                Some("Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0"),
            ),
            (
                json!([{"action": "Unknown", "onExitCodes": {"operator": "In", "values": [42]}}, {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}}]),
                &main42,
                Some(Action::FailIndex),
                true,
                None,
            ),
            // Exit code 0 never matches, not even NotIn.
            (
                json!([{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [1]}}]),
                &zero,
                None,
                true,
                None,
            ),
            (
                json!([{"action": "FailJob", "onExitCodes": {"operator": "Bogus", "values": [42]}}]),
                &main42,
                None,
                true,
                None,
            ),
            // First match wins.
            (
                json!([{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [42]}}, {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]),
                &main42,
                Some(Action::Ignore),
                false,
                None,
            ),
        ];
        for (i, (rules, pod, action, counts, msg)) in cases.into_iter().enumerate() {
            let m = match_pod_failure_policy(Some(&policy(rules)), pod);
            assert_eq!(m.action, action, "case {i}");
            assert_eq!(m.count_failed, counts, "case {i}");
            assert_eq!(m.fail_job_message.as_deref(), msg, "case {i}");
        }
        assert_eq!(match_pod_failure_policy(None, &main42), Match::NONE);
    }

    #[test]
    fn success_policy_table() {
        let sp = |rules: serde_json::Value| -> SuccessPolicy {
            serde_json::from_value(json!({ "rules": rules })).unwrap()
        };
        // (rules, completions, succeeded, expected)
        let cases: Vec<(serde_json::Value, i32, &str, Option<&str>)> = vec![
            (
                json!([{"succeededIndexes": "0"}]),
                3,
                "0",
                Some("Matched rules at index 0"),
            ),
            (json!([{"succeededIndexes": "0-2"}]), 3, "0,1", None),
            (
                json!([{"succeededIndexes": "0,2-3", "succeededCount": 1}]),
                5,
                "2",
                Some("Matched rules at index 0"),
            ),
            (
                json!([{"succeededCount": 2}]),
                5,
                "1,4",
                Some("Matched rules at index 0"),
            ),
            (json!([{"succeededCount": 3}]), 5, "1,4", None),
            (
                json!([{"succeededIndexes": "9"}, {"succeededCount": 1}]),
                5,
                "1",
                Some("Matched rules at index 1"),
            ),
            (json!([{"succeededCount": 1}]), 5, "", None),
            (
                json!([{"succeededIndexes": "1-3,5"}]),
                6,
                "0-5",
                Some("Matched rules at index 0"),
            ),
        ];
        for (i, (rules, completions, succeeded, want)) in cases.into_iter().enumerate() {
            let got = match_success_policy(
                Some(&sp(rules)),
                completions,
                &Intervals::parse(succeeded, completions),
            );
            assert_eq!(got.as_deref(), want, "case {i}");
        }
    }
}
