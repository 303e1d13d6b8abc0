//! Exact strings and numbers the Deployment controller shares with upstream
//! (`pkg/controller/deployment/util/deployment_util.go`, `sync.go`, `rollback.go`,
//! `progress.go`, `deployment_controller.go`; `k8s.io/api/apps/v1` constants). `kubectl
//! rollout`, dashboards and alerting select on them: changing one breaks compatibility.

use std::time::Duration;

/// `source.component` of the events this controller records.
pub const EVENT_COMPONENT: &str = "deployment-controller";
/// Work queue name (the `name` label of `workqueue_*` metrics).
pub const QUEUE_NAME: &str = "deployment";

/// A key that failed this many times in a row is dropped until the next event.
pub const MAX_RETRIES: u32 = 15;
/// `deployment.kubernetes.io/revision-history` never grows beyond this many characters.
pub const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;
/// Added to the progress re-check delay against millisecond skew of the delayed queue.
pub const PROGRESS_CHECK_PAD: Duration = Duration::from_secs(1);
/// `progressDeadlineSeconds` / `revisionHistoryLimit` equal to this mean "not set" (the
/// value extensions/v1beta1 defaulted them to).
pub const UNSET_INT32: i32 = i32::MAX;

/// The label that keeps ReplicaSets (and their pods) of one Deployment apart.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// Annotations (`deployment_util.go`, `apps/v1`, `core/v1`).
pub mod annotations {
    pub const REVISION: &str = "deployment.kubernetes.io/revision";
    pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
    pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
    pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
    pub const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
    pub const LAST_APPLIED_CONFIG: &str = "kubectl.kubernetes.io/last-applied-configuration";

    /// Annotations never copied from a Deployment to its ReplicaSets, nor back on rollback.
    pub const SKIP_COPY: [&str; 6] = [
        LAST_APPLIED_CONFIG,
        REVISION,
        REVISION_HISTORY,
        DESIRED_REPLICAS,
        MAX_REPLICAS,
        ROLLBACK_TO,
    ];
}

/// Deployment strategy types.
pub mod strategy {
    pub const ROLLING_UPDATE: &str = "RollingUpdate";
    pub const RECREATE: &str = "Recreate";
}

/// Condition types and statuses.
pub mod conditions {
    pub const AVAILABLE: &str = "Available";
    pub const PROGRESSING: &str = "Progressing";
    pub const REPLICA_FAILURE: &str = "ReplicaFailure";
    pub const TRUE: &str = "True";
    pub const FALSE: &str = "False";
    pub const UNKNOWN: &str = "Unknown";
}

/// Condition reasons (`deployment_util.go`).
pub mod reasons {
    pub const REPLICA_SET_UPDATED: &str = "ReplicaSetUpdated";
    pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
    pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
    pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
    pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
    pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
    pub const PAUSED: &str = "DeploymentPaused";
    pub const RESUMED: &str = "DeploymentResumed";
    pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
    pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
}

/// Event reasons.
pub mod events {
    pub const SCALING_REPLICA_SET: &str = "ScalingReplicaSet";
    pub const SELECTING_ALL: &str = "SelectingAll";
    pub const ROLLBACK_DONE: &str = "DeploymentRollback";
    pub const ROLLBACK_REVISION_NOT_FOUND: &str = "DeploymentRollbackRevisionNotFound";
    pub const ROLLBACK_TEMPLATE_UNCHANGED: &str = "DeploymentRollbackTemplateUnchanged";
    /// Same text as the condition reason.
    pub const FAILED_RS_CREATE: &str = super::reasons::FAILED_RS_CREATE;
}

/// Message texts. Names are quoted the way Go's `%q` does.
pub mod messages {
    use super::quote;

    pub const MINIMUM_AVAILABLE: &str = "Deployment has minimum availability.";
    pub const MINIMUM_UNAVAILABLE: &str = "Deployment does not have minimum availability.";
    pub const PAUSED: &str = "Deployment is paused";
    pub const RESUMED: &str = "Deployment is resumed";
    pub const SELECTING_ALL: &str =
        "This deployment is selecting all pods. A non-empty selector is required.";
    pub const LAST_REVISION_NOT_FOUND: &str = "Unable to find last revision.";
    pub const REVISION_NOT_FOUND: &str = "Unable to find the revision to rollback to.";

    pub fn created_new_rs(rs: &str) -> String {
        format!("Created new replica set {}", quote(rs))
    }
    pub fn found_new_rs(rs: &str) -> String {
        format!("Found new replica set {}", quote(rs))
    }
    pub fn failed_rs_create(rs: &str, error: &str) -> String {
        format!("Failed to create new replica set {}: {error}", quote(rs))
    }
    /// `ReplicaSet "<rs>" is progressing.`, or about the Deployment without a new RS.
    pub fn progressing(new_rs: Option<&str>, deployment: &str) -> String {
        match new_rs {
            Some(rs) => format!("ReplicaSet {} is progressing.", quote(rs)),
            None => format!("Deployment {} is progressing.", quote(deployment)),
        }
    }
    pub fn progressed(new_rs: Option<&str>, deployment: &str) -> String {
        match new_rs {
            Some(rs) => format!("ReplicaSet {} has successfully progressed.", quote(rs)),
            None => format!(
                "Deployment {} has successfully progressed.",
                quote(deployment)
            ),
        }
    }
    pub fn timed_out(new_rs: Option<&str>, deployment: &str) -> String {
        match new_rs {
            Some(rs) => format!("ReplicaSet {} has timed out progressing.", quote(rs)),
            None => format!(
                "Deployment {} has timed out progressing.",
                quote(deployment)
            ),
        }
    }
    /// `ScalingReplicaSet` message (up when `from < to`).
    pub fn scaled(rs: &str, from: i32, to: i32) -> String {
        let direction = if from < to { "up" } else { "down" };
        format!("Scaled {direction} replica set {rs} from {from} to {to}")
    }
    pub fn rolled_back(deployment: &str, revision: i64) -> String {
        format!(
            "Rolled back deployment {} to revision {revision}",
            quote(deployment)
        )
    }
    pub fn rollback_template_unchanged(deployment: &str) -> String {
        format!(
            "The rollback revision contains the same template as current deployment {}",
            quote(deployment)
        )
    }
}

/// Go's `strconv.Quote` (what `%q` prints for a string): double quotes, `\"` and `\\`, the
/// short escapes `\a \b \f \n \r \t \v`, `\xNN` for other ASCII control bytes, `\uNNNN` /
/// `\UNNNNNNNN` for other non-printable characters.
pub fn quote(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                if (c as u32) <= 0xffff {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// rkcm's own remedy, not upstream: the rollback of a Deployment whose rollout passed its
/// progress deadline (`crate::plan::deadline`). Opted in per Deployment or for all.
pub mod remedy {
    use super::quote;

    /// `"true"` opts one Deployment in, `"false"` out; otherwise the manager's flag
    /// (`--rkcm-deployment-rollback-on-progress-deadline`, off) decides.
    pub const OPT_IN: &str = "rkcm.io/deployment-rollback-on-progress-deadline";
    /// The revision rkcm rolled back from: that revision is never rolled back again, and
    /// neither is the revision the rollback itself became.
    pub const ROLLED_BACK_FROM: &str = "rkcm.io/rolled-back-from-revision";
    /// The Deployment's own annotations prefix that a rollback keeps (not the revision's).
    pub const PREFIX: &str = "rkcm.io/";
    /// Event reason (a Warning: the rollout failed).
    pub const EVENT_REASON: &str = "RolledBackOnProgressDeadline";
    /// The field manager of the rollback's `PUT deployments`.
    pub const FIELD_MANAGER: &str = "rkcm-deployment-rollback";

    /// The event's message.
    pub fn rolled_back(
        deployment: &str,
        from: i64,
        to: i64,
        target: &str,
        deadline: i32,
    ) -> String {
        format!(
            "Rolled back deployment {} from revision {from} to revision {to} (ReplicaSet {}): \
             revision {from} made no progress for {deadline}s (progressDeadlineSeconds)",
            quote(deployment),
            quote(target)
        )
    }

    /// The `Progressing` condition's message after the rollback: upstream's timed-out
    /// message, then what rkcm did.
    pub fn condition(timed_out: &str, to: i64, target: &str) -> String {
        format!(
            "{timed_out} rkcm rolled back to revision {to} (ReplicaSet {}) as {OPT_IN} asks.",
            quote(target)
        )
    }
}

/// Metric names. The Deployment controller has no stale-cache guard upstream; rkcm's counts
/// its skips under the name the other guarded controllers use.
pub mod metrics {
    pub const SUBSYSTEM: &str = "deployment_controller";
    pub const STALE_SYNC_SKIPS_HELP: &str =
        "Total number of Deployment syncs skipped due to a stale watch cache (rkcm only).";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quoting() {
        assert_eq!(quote("web-6b7f9c"), "\"web-6b7f9c\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote("x\ny\t\u{1}"), "\"x\\ny\\t\\x01\"");
        assert_eq!(quote("é"), "\"é\"");
        assert_eq!(quote("\u{85}"), "\"\\u0085\"");
    }

    #[test]
    fn messages_match_upstream() {
        assert_eq!(
            messages::created_new_rs("web-abc"),
            "Created new replica set \"web-abc\""
        );
        assert_eq!(
            messages::found_new_rs("web-abc"),
            "Found new replica set \"web-abc\""
        );
        assert_eq!(
            messages::failed_rs_create("web-abc", "boom"),
            "Failed to create new replica set \"web-abc\": boom"
        );
        assert_eq!(
            messages::progressing(Some("web-abc"), "web"),
            "ReplicaSet \"web-abc\" is progressing."
        );
        assert_eq!(
            messages::progressing(None, "web"),
            "Deployment \"web\" is progressing."
        );
        assert_eq!(
            messages::progressed(Some("web-abc"), "web"),
            "ReplicaSet \"web-abc\" has successfully progressed."
        );
        assert_eq!(
            messages::progressed(None, "web"),
            "Deployment \"web\" has successfully progressed."
        );
        assert_eq!(
            messages::timed_out(Some("web-abc"), "web"),
            "ReplicaSet \"web-abc\" has timed out progressing."
        );
        assert_eq!(
            messages::timed_out(None, "web"),
            "Deployment \"web\" has timed out progressing."
        );
        assert_eq!(
            messages::scaled("web-abc", 0, 3),
            "Scaled up replica set web-abc from 0 to 3"
        );
        assert_eq!(
            messages::scaled("web-abc", 8, 4),
            "Scaled down replica set web-abc from 8 to 4"
        );
        assert_eq!(
            messages::rolled_back("web", 1),
            "Rolled back deployment \"web\" to revision 1"
        );
        assert_eq!(
            messages::rollback_template_unchanged("web"),
            "The rollback revision contains the same template as current deployment \"web\""
        );
    }
}
