//! PURE: writes the API server refuses, as reasons to wait. A controller that wants to create a
//! pod the namespace's ResourceQuota forbids plans the same create at every sync; the plan
//! alone says "acting", which is not the truth a person needs. The refusals are read from the
//! object's recent Warning events (`FailedCreate` and kin, whose message carries the server's
//! answer) and from the running manager's last decision (its failed sync's error), classified
//! by the server's message, and each becomes one waiting reason with that message and a
//! remedy.
//!
//! Reason codes:
//! - `QuotaExceeded`: a ResourceQuota refuses the write (`exceeded quota`, `failed quota`,
//!   `status unknown for quota`: the quota is newer than its first count).
//! - `WriteForbidden`: the controller's identity may not make the write (RBAC).
//! - `AdmissionDenied`: an admission policy, webhook or plugin refuses it (PodSecurity,
//!   LimitRanger, a ValidatingAdmissionPolicy, a webhook that denied the request).
//! - `WriteConflict`: the object changed between the controller's read and write, again and
//!   again (a single conflict is retried and is no reason).
//! - `WriteInvalid`: the server finds the written object invalid (usually the template).
//!
//! Upstream has no such summary; its controllers record the refusal in events
//! (`pkg/controller/controller_utils.go`, `FailedCreate`), which is what this reads.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Event;

use super::decisions::{Decided, Note, Outcome};
use super::{Explanation, State, Waiting};

/// How far back an event still counts: beyond the work queue's longest per-key backoff
/// (1000 s), so a refusal retried at that pace is still seen.
pub const RECENT: std::time::Duration = std::time::Duration::from_secs(20 * 60);

/// Conflicts seen at least this often are a reason; fewer are the ordinary retry.
const CONFLICTS_THAT_KEEP_COMING: u32 = 2;

/// What kind of refusal a server message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    Quota,
    Forbidden,
    Admission,
    Conflict,
    Invalid,
}

impl Refusal {
    /// The reason code.
    pub fn code(self) -> &'static str {
        match self {
            Self::Quota => "QuotaExceeded",
            Self::Forbidden => "WriteForbidden",
            Self::Admission => "AdmissionDenied",
            Self::Conflict => "WriteConflict",
            Self::Invalid => "WriteInvalid",
        }
    }

    /// The refusal of reason code `code`, if it is one.
    pub fn of_code(code: &str) -> Option<Self> {
        [
            Self::Quota,
            Self::Forbidden,
            Self::Admission,
            Self::Conflict,
            Self::Invalid,
        ]
        .into_iter()
        .find(|r| r.code() == code)
    }

    /// Whether only a person's change ends it (a conflict ends when the other writer stops).
    fn stalls(self) -> bool {
        self != Self::Conflict
    }

    /// What a person can do about it, for the object `kind/name` in `ns`.
    pub fn remedy(self, ns: &str, kind: &str, name: &str) -> String {
        let kind = kind.to_lowercase();
        match self {
            Self::Quota => format!(
                "raise the namespace's ResourceQuota or free room under it (kubectl -n {ns} describe resourcequota); the controller retries by itself"
            ),
            Self::Forbidden => format!(
                "grant the controller's identity this write in its RBAC role (kubectl -n {ns} auth can-i create pods --as=<the manager's user>); the controller retries by itself"
            ),
            Self::Admission => format!(
                "change the {kind}'s template to satisfy the admission policy or webhook named in the message, or ask its owner (kubectl get validatingadmissionpolicies,validatingwebhookconfigurations); the events say more: kubectl -n {ns} describe {kind} {name}"
            ),
            Self::Conflict => format!(
                "another writer keeps changing the object: find it in the managed fields (kubectl -n {ns} get {kind} {name} -o yaml --show-managed-fields) and stop it"
            ),
            Self::Invalid => format!(
                "fix what the server finds invalid (usually the {kind}'s template); the events say more: kubectl -n {ns} describe {kind} {name}"
            ),
        }
    }
}

/// The refusal a server's message (or an error carrying it) states, if any.
pub fn classify(message: &str) -> Option<Refusal> {
    let m = message.to_ascii_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| m.contains(w));
    if any(&["exceeded quota", "failed quota", "status unknown for quota"]) {
        Some(Refusal::Quota)
    } else if m.contains("forbidden") && m.contains("user \"") && m.contains(" cannot ") {
        Some(Refusal::Forbidden)
    } else if any(&[
        "admission webhook",
        "validatingadmissionpolicy",
        "denied request",
        "denied the request",
        "violates podsecurity",
        "is forbidden",
    ]) {
        Some(Refusal::Admission)
    } else if any(&[
        "the object has been modified",
        "operation cannot be fulfilled",
    ]) {
        Some(Refusal::Conflict)
    } else if m.contains(" is invalid") {
        Some(Refusal::Invalid)
    } else {
        None
    }
}

/// Refusals of one kind, gathered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub refusal: Refusal,
    /// The newest server message.
    pub message: String,
    /// How many refused writes are behind it.
    pub count: u32,
    /// When the first of them was seen, RFC 3339, when known.
    pub since: Option<jiff::Timestamp>,
    /// When the newest was seen, when known.
    pub last: Option<jiff::Timestamp>,
}

fn ts(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> jiff::Timestamp {
    t.0
}

/// When an event was last seen: its series, its `lastTimestamp`, its `eventTime`.
fn last_seen(e: &Event) -> Option<jiff::Timestamp> {
    e.series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
        .or_else(|| e.last_timestamp.as_ref().map(ts))
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(ts))
}

fn times_seen(e: &Event) -> u32 {
    let n = e
        .series
        .as_ref()
        .and_then(|s| s.count)
        .or(e.count)
        .unwrap_or(1);
    u32::try_from(n).unwrap_or(0).max(1)
}

/// Gathers refusals by kind: counts add up, the newest message wins, the earliest start holds.
fn gather(items: impl IntoIterator<Item = Refused>) -> Vec<Refused> {
    let mut by: BTreeMap<Refusal, Refused> = BTreeMap::new();
    for r in items {
        match by.get_mut(&r.refusal) {
            None => {
                by.insert(r.refusal, r);
            }
            Some(acc) => {
                acc.count = acc.count.saturating_add(r.count);
                if r.last >= acc.last {
                    acc.message = r.message;
                    acc.last = r.last;
                }
                acc.since = match (acc.since, r.since) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
    }
    by.into_values()
        .filter(|r| r.refusal != Refusal::Conflict || r.count >= CONFLICTS_THAT_KEEP_COMING)
        .collect()
}

/// The refusals in an object's Warning events last seen within [`RECENT`] of `now`.
pub fn from_events(events: &[Event], now: jiff::Timestamp) -> Vec<Refused> {
    let oldest = now.checked_sub(RECENT).unwrap_or(now);
    gather(events.iter().filter_map(|e| {
        if e.type_.as_deref() != Some("Warning") {
            return None;
        }
        let last = last_seen(e)?;
        if last < oldest {
            return None;
        }
        let message = e.message.clone().unwrap_or_default();
        Some(Refused {
            refusal: classify(&message)?,
            message,
            count: times_seen(e),
            since: e.first_timestamp.as_ref().map(ts).or(Some(last)),
            last: Some(last),
        })
    }))
}

/// The refusals of the running manager's last decision: the waits it noted with a refusal's
/// code, and its failed sync's error.
pub fn from_decision(d: &Decided) -> Vec<Refused> {
    let at = d.at.parse::<jiff::Timestamp>().ok();
    let noted = d.waiting.iter().filter_map(|w| {
        let (code, message) = w.split_once(": ")?;
        Some((Refusal::of_code(code)?, message.to_owned()))
    });
    let failed = match &d.outcome {
        Outcome::Failed { error } => classify(error).map(|r| (r, error.clone())),
        Outcome::Synced => None,
    };
    let mut seen: Vec<(Refusal, String)> = noted.collect();
    if let Some((r, m)) = failed
        && !seen.iter().any(|(s, _)| *s == r)
    {
        seen.push((r, m));
    }
    gather(seen.into_iter().map(|(refusal, message)| Refused {
        refusal,
        message,
        // One decision is all the manager keeps; a conflict there is taken as lasting.
        count: CONFLICTS_THAT_KEEP_COMING,
        since: None,
        last: at,
    }))
}

/// A failed sync whose error is a refused write: the refusal is one of its waits
/// (`QuotaExceeded: <the server's message>`), so the last decision says why the object does
/// not progress, for every controller.
pub fn note_refusal(note: &mut Note, error: &str) {
    if let Some(r) = classify(error) {
        let code = r.code();
        if !note.waiting.iter().any(|w| w.starts_with(code)) {
            note.waiting.push(format!("{code}: {error}"));
        }
    }
}

/// Wait reasons that already report a refused write from the object's own status.
const ALREADY_REPORTED: [&str; 2] = ["PodCreateFailed", "ReplicaSetCreateFailed"];

/// Adds the refusals to an explanation that is not settled: one waiting reason each, with the
/// server's message and a remedy; the state becomes stalled (waiting for a conflict). A
/// settled object's refusals are history and are left out, as is a refusal the object's own
/// status already reports.
pub fn apply(e: &mut Explanation, refused: Vec<Refused>) {
    if e.state == State::Settled {
        return;
    }
    let reported = e
        .waiting_on
        .iter()
        .any(|w| ALREADY_REPORTED.contains(&w.reason));
    let already: Vec<&'static str> = e.waiting_on.iter().map(|w| w.reason).collect();
    for r in refused {
        let code = r.refusal.code();
        if already.contains(&code) || (reported && r.refusal != Refusal::Conflict) {
            continue;
        }
        let times = if r.count == 1 {
            "1 write".to_owned()
        } else {
            format!("{} writes", r.count)
        };
        e.waiting_on.push(Waiting {
            reason: code,
            message: format!(
                "the API server refused {times} of the controller: {}",
                r.message
            ),
            objects: Vec::new(),
            since: r.since.map(|t| t.to_string()),
        });
        let o = &e.object;
        let remedy = r.refusal.remedy(&o.namespace, &o.kind, &o.name);
        if !e.remedies.contains(&remedy) {
            e.remedies.insert(0, remedy);
        }
        e.state = match (r.refusal.stalls(), e.state) {
            (true, _) | (false, State::Stalled) => State::Stalled,
            (false, _) => State::Waiting,
        };
    }
}

#[cfg(test)]
#[path = "refused_tests.rs"]
mod tests;
