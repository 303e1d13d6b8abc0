//! Sharded mode's lease terms read from the audit log, and the writes judged against them
//! (the `rebalance` scenario). Pure functions over parsed audit records.
//!
//! A term is one holder identity's hold of one shard Lease (a range, or the global Lease),
//! read from the successful Lease writes in log order: it opens with the write that made the
//! identity holder and lasts until its last renewal (a write by the same identity) plus the
//! lease duration written with it, or until the write that released the Lease (holder
//! emptied) or gave it to another identity, whichever comes first. This is the definition of
//! the simulator's `ShardLeaseTermsOverlap` / `ShardWriteOutsideLeaseTerm` checks.
//!
//! Two findings:
//! - an overlap: a Lease write made another identity holder while the previous holder's term
//!   still ran (not released, last renewal plus duration not past);
//! - a write outside a term: a namespaced write by a replica's user that landed while that
//!   user's identity had no running term on the namespace's range.
//!
//! The writes of one Lease are taken in the order the server stored them: each update names
//! the resourceVersion it replaces (the request body's), and a successful update's is the
//! previous write's, so that version orders them even where the log's lines came out of
//! order (two answers finishing at nearly the same time).
//!
//! Member sessions: a range Lease written with a session (annotation `rkcm.io/shard-session`)
//! is not renewed itself. Its term lasts while that session runs: from the take, through the
//! session's renewals (writes of the holder's member Lease showing the session, each good for
//! the duration written with it) until the first gap between them, or the session's own
//! release of its member Lease, or the range's next write, whichever comes first. Another
//! replica clearing the member Lease (a fence) ends nothing early: the taker must have waited
//! the session out. Member Lease writes are read for that, not judged themselves.
//!
//! Every time is the audit event's `stageTimestamp` of its ResponseComplete stage (when the
//! server answered, after the write was stored): a renewal counts from its answer, and a
//! workload write from its answer too, so a write whose answer came after the term ended
//! landed after it.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The annotation naming a Lease's member session (rkcm's `ANNOTATION_SESSION`).
const SESSION: &str = "rkcm.io/shard-session";

/// A successful write of a shard Lease: who wrote it, which Lease, the holder and the
/// duration it set (holder empty: released).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseWrite {
    pub at: Timestamp,
    pub user: String,
    pub lease: String,
    pub holder: String,
    pub duration_s: i64,
    /// The resourceVersion the write replaced (0 for a create).
    pub replaces: u64,
    /// The member session the record names (annotation `rkcm.io/shard-session`), if any.
    pub session: Option<String>,
}

/// A successful write of a namespaced object by one of the replicas' users.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub at: Timestamp,
    pub user: String,
    pub verb: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

/// One identity's term on one Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub lease: String,
    pub identity: String,
    /// The user whose write opened the term (each replica runs as its own user).
    pub user: String,
    pub start: Timestamp,
    pub end: Timestamp,
}

/// Two identities' terms of one Lease that overlap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overlap {
    pub lease: String,
    pub earlier: String,
    pub later: String,
    /// When the later identity became holder.
    pub at: String,
    /// How long the earlier term still ran then.
    pub overlap_s: f64,
}

/// A replica's write that fell in no term of its identity on the namespace's range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outside {
    pub at: String,
    pub user: String,
    /// `verb resource namespace/name`.
    pub write: String,
    pub lease: String,
    /// The nearest term of the user on that Lease (`none` when it never held it).
    pub why: String,
}

/// What the audit log says about the shard Leases and the replicas' writes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TermCheck {
    /// Range Lease holders changing to another identity (directly or through a release).
    pub handovers: u64,
    pub terms: usize,
    pub lease_writes: usize,
    pub writes_checked: usize,
    /// Of them, Events.
    pub event_writes: usize,
    pub overlaps: Vec<Overlap>,
    pub outside: Vec<Outside>,
}

/// What [`parse`] read from an audit log.
#[derive(Debug, Default)]
pub struct Parsed {
    pub leases: Vec<LeaseWrite>,
    /// Writes of the ring's member Leases (`<prefix>-member-…`).
    pub members: Vec<LeaseWrite>,
    pub writes: Vec<Write>,
    /// Shard Lease writes logged without their body (the audit policy's level for them is
    /// below Request): their holder is unknown.
    pub bodiless: usize,
}

/// What to read from an audit log: the shard Leases of ring `prefix` in `lease_ns` (range
/// and global Leases, and apart from them the member Leases), and the namespaced writes of the users `users`
/// accepts everywhere else.
pub struct Filter<'a> {
    pub lease_ns: &'a str,
    pub prefix: &'a str,
    pub users: &'a dyn Fn(&str) -> bool,
}

/// The shard Lease writes and the replicas' writes of audit log `log` (see [`Filter`]).
pub fn parse(log: &str, filter: &Filter<'_>) -> Parsed {
    let mut parsed = Parsed::default();
    for line in log.lines() {
        parsed.feed(line, filter);
    }
    parsed
}

impl Parsed {
    /// Reads one line of the audit log: a successful write (not a dry run) is kept.
    pub fn feed(&mut self, line: &str, filter: &Filter<'_>) {
        // Most lines are reads: skip them before parsing.
        if [
            "\"verb\":\"get\"",
            "\"verb\":\"list\"",
            "\"verb\":\"watch\"",
        ]
        .iter()
        .any(|v| line.contains(v))
        {
            return;
        }
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            return;
        };
        if e["stage"] != "ResponseComplete"
            || !e["responseStatus"]["code"]
                .as_i64()
                .is_some_and(|c| (200..300).contains(&c))
            || !matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            )
            || e["requestURI"]
                .as_str()
                .is_some_and(|u| u.contains("dryRun"))
        {
            return;
        }
        let Some(at) = e["stageTimestamp"]
            .as_str()
            .or(e["requestReceivedTimestamp"].as_str())
            .and_then(|t| t.parse::<Timestamp>().ok())
        else {
            return;
        };
        let (Some(user), Some(ns)) = (
            e["user"]["username"].as_str(),
            e["objectRef"]["namespace"].as_str(),
        ) else {
            return;
        };
        let resource = e["objectRef"]["resource"].as_str().unwrap_or_default();
        let name = e["objectRef"]["name"].as_str().unwrap_or_default();
        if ns == filter.lease_ns && resource == "leases" {
            let Some(rest) = name
                .strip_prefix(filter.prefix)
                .and_then(|rest| rest.strip_prefix('-'))
            else {
                return;
            };
            if matches!(e["verb"].as_str(), Some("delete" | "deletecollection")) {
                return;
            }
            let spec = &e["requestObject"]["spec"];
            if spec.is_null() {
                self.bodiless += 1;
                return;
            }
            let into = if rest.starts_with("member-") {
                &mut self.members
            } else {
                &mut self.leases
            };
            into.push(LeaseWrite {
                at,
                user: user.to_owned(),
                lease: name.to_owned(),
                holder: spec["holderIdentity"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                duration_s: spec["leaseDurationSeconds"].as_i64().unwrap_or(0),
                replaces: e["requestObject"]["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                session: e["requestObject"]["metadata"]["annotations"][SESSION]
                    .as_str()
                    .map(str::to_owned),
            });
        } else if (filter.users)(user) {
            self.writes.push(Write {
                at,
                user: user.to_owned(),
                verb: e["verb"].as_str().unwrap_or_default().to_owned(),
                resource: resource.to_owned(),
                namespace: ns.to_owned(),
                name: name.to_owned(),
            });
        }
    }
}

/// One member session's renewals (answer, answer plus duration) in time order, and when its
/// own user released it.
#[derive(Debug, Default)]
struct Session {
    user: String,
    renewals: Vec<(Timestamp, Timestamp)>,
    released: Option<Timestamp>,
}

impl Session {
    /// Where a term this session opened at `start` ends by itself: the renewals carry it from
    /// the last one before `start` until the first gap after, or the release.
    fn end_from(&self, start: Timestamp) -> Timestamp {
        let mut end = self
            .renewals
            .iter()
            .filter(|(at, _)| *at <= start)
            .map(|(_, until)| *until)
            .max()
            .unwrap_or(start);
        for (at, until) in self.renewals.iter().filter(|(at, _)| *at > start) {
            if *at > end {
                break;
            }
            end = end.max(*until);
        }
        match self.released {
            Some(r) if r >= start => end.min(r),
            _ => end,
        }
    }
}

/// The member sessions of `members`, by (holder, session).
fn sessions(members: &[LeaseWrite]) -> BTreeMap<(String, String), Session> {
    let mut out: BTreeMap<(String, String), Session> = BTreeMap::new();
    // The session each member Lease showed last, to attribute a release to it.
    let mut on_lease: BTreeMap<&str, (String, String)> = BTreeMap::new();
    let mut ordered: Vec<&LeaseWrite> = members.iter().collect();
    ordered.sort_by_key(|w| w.at);
    for w in ordered {
        let Some(session) = &w.session else {
            continue;
        };
        if w.holder.is_empty() {
            if let Some(s) = on_lease.get(w.lease.as_str()).and_then(|k| out.get_mut(k))
                && s.user == w.user
            {
                s.released.get_or_insert(w.at);
            }
            continue;
        }
        let key = (w.holder.clone(), session.clone());
        let s = out.entry(key.clone()).or_default();
        if s.user.is_empty() {
            s.user = w.user.clone();
        }
        s.renewals
            .push((w.at, w.at + SignedDuration::from_secs(w.duration_s.max(0))));
        on_lease.insert(w.lease.as_str(), key);
    }
    out
}

/// The open term of one Lease while the writes are read.
struct Open {
    identity: String,
    session: Option<String>,
    user: String,
    start: Timestamp,
    /// Last renewal's answer plus the duration written with it.
    natural_end: Timestamp,
}

/// The terms of every Lease in `writes` (each Lease's writes in the order of the versions they
/// replaced, log order among equals), the overlaps among them, and the range handovers
/// (holder changing to another identity, through a release or not) of the Leases other than
/// `global`.
pub fn terms(
    writes: &[LeaseWrite],
    members: &[LeaseWrite],
    global: &str,
) -> (Vec<Term>, Vec<Overlap>, u64) {
    let sessions = sessions(members);
    let mut open: BTreeMap<&str, Open> = BTreeMap::new();
    let mut last_holder: BTreeMap<&str, &str> = BTreeMap::new();
    let (mut terms, mut overlaps, mut handovers) = (Vec::new(), Vec::new(), 0u64);
    let mut ordered: Vec<&LeaseWrite> = writes.iter().collect();
    ordered.sort_by_key(|w| (w.lease.as_str(), w.replaces));
    for w in ordered {
        let lease = w.lease.as_str();
        let until = match &w.session {
            // A session's take: held while the session runs (none it never renewed: nothing).
            Some(session) => sessions
                .get(&(w.holder.clone(), session.clone()))
                .map_or(w.at, |s| s.end_from(w.at)),
            None => w.at + SignedDuration::from_secs(w.duration_s.max(0)),
        };
        if let Some(o) = open.get_mut(lease)
            && !w.holder.is_empty()
            && o.identity == w.holder
            && o.session == w.session
        {
            // A renewal extends the term (never shortens it: an answer out of order); a
            // session writing its range again keeps it.
            o.natural_end = o.natural_end.max(until);
            continue;
        }
        // A release or another holder: the open term ends here, or earlier if it had run out.
        if let Some(o) = open.remove(lease) {
            if !w.holder.is_empty() && w.at < o.natural_end {
                overlaps.push(Overlap {
                    lease: w.lease.clone(),
                    earlier: o.identity.clone(),
                    later: w.holder.clone(),
                    at: w.at.to_string(),
                    overlap_s: o.natural_end.duration_since(w.at).as_secs_f64(),
                });
            }
            terms.push(Term {
                lease: w.lease.clone(),
                identity: o.identity,
                user: o.user,
                start: o.start,
                end: o.natural_end.min(w.at),
            });
        }
        if w.holder.is_empty() {
            continue;
        }
        if lease != global
            && last_holder
                .insert(lease, &w.holder)
                .is_some_and(|h| h != w.holder)
        {
            handovers += 1;
        }
        open.insert(
            lease,
            Open {
                identity: w.holder.clone(),
                session: w.session.clone(),
                user: w.user.clone(),
                start: w.at,
                natural_end: until,
            },
        );
    }
    for (lease, o) in open {
        terms.push(Term {
            lease: lease.to_owned(),
            identity: o.identity,
            user: o.user,
            start: o.start,
            end: o.natural_end,
        });
    }
    (terms, overlaps, handovers)
}

/// Judges every write against the terms: the write's namespace's range Lease
/// (`lease_of(namespace)`) must have a term of the write's user running when it landed.
pub fn check(
    lease_writes: &[LeaseWrite],
    members: &[LeaseWrite],
    writes: &[Write],
    global: &str,
    lease_of: &dyn Fn(&str) -> String,
) -> TermCheck {
    let (terms, overlaps, handovers) = terms(lease_writes, members, global);
    let mut by_lease_user: BTreeMap<(&str, &str), Vec<&Term>> = BTreeMap::new();
    for t in &terms {
        by_lease_user
            .entry((t.lease.as_str(), t.user.as_str()))
            .or_default()
            .push(t);
    }
    let mut outside = Vec::new();
    for w in writes {
        let lease = lease_of(&w.namespace);
        let own = by_lease_user
            .get(&(lease.as_str(), w.user.as_str()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        if own.iter().any(|t| t.start <= w.at && w.at <= t.end) {
            continue;
        }
        let why = own
            .iter()
            .min_by_key(|t| {
                if w.at < t.start {
                    t.start.duration_since(w.at)
                } else {
                    w.at.duration_since(t.end)
                }
            })
            .map_or("it never held the range".to_owned(), |t| {
                format!("nearest term of {}: {} to {}", t.identity, t.start, t.end)
            });
        outside.push(Outside {
            at: w.at.to_string(),
            user: w.user.clone(),
            write: format!("{} {} {}/{}", w.verb, w.resource, w.namespace, w.name),
            lease,
            why,
        });
    }
    TermCheck {
        handovers,
        terms: terms.len(),
        lease_writes: lease_writes.len(),
        writes_checked: writes.len(),
        event_writes: writes.iter().filter(|w| w.resource == "events").count(),
        overlaps,
        outside,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Seconds after a fixed origin.
    fn t(s: f64) -> Timestamp {
        let base: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        base + SignedDuration::from_secs_f64(s)
    }

    /// A Lease write whose replaced version follows its time (the usual order).
    fn lw(at: f64, user: &str, lease: &str, holder: &str, duration_s: i64) -> LeaseWrite {
        LeaseWrite {
            at: t(at),
            user: user.into(),
            lease: lease.into(),
            holder: holder.into(),
            duration_s,
            // Milliseconds: a distinct version per write time.
            replaces: (at * 1000.0) as u64,
            session: None,
        }
    }

    /// A write of a session's Lease (a range's take or a member Lease's renewal).
    fn sw(at: f64, user: &str, lease: &str, holder: &str, session: &str) -> LeaseWrite {
        LeaseWrite {
            session: Some(session.into()),
            ..lw(at, user, lease, holder, 4)
        }
    }

    fn w(at: f64, user: &str, ns: &str) -> Write {
        Write {
            at: t(at),
            user: user.into(),
            verb: "create".into(),
            resource: "pods".into(),
            namespace: ns.into(),
            name: "p".into(),
        }
    }

    /// Namespaces `a*` are in range 0, the others in range 1.
    fn lease_of(ns: &str) -> String {
        if ns.starts_with('a') {
            "s-0".into()
        } else {
            "s-1".into()
        }
    }

    fn run(leases: &[LeaseWrite], writes: &[Write]) -> TermCheck {
        check(leases, &[], writes, "s-global", &lease_of)
    }

    #[test]
    fn a_clean_handover_through_a_release_passes() {
        let leases = [
            lw(0.0, "u1", "s-0", "id1", 4),
            lw(1.0, "u1", "s-0", "id1", 4),
            lw(2.0, "u1", "s-0", "", 1),
            lw(2.5, "u2", "s-0", "id2", 4),
        ];
        let writes = [w(0.5, "u1", "a1"), w(1.9, "u1", "a1"), w(3.0, "u2", "a1")];
        let c = run(&leases, &writes);
        assert_eq!(c.handovers, 1);
        assert_eq!(c.terms, 2);
        assert_eq!(c.writes_checked, 3);
        assert!(c.overlaps.is_empty(), "{:?}", c.overlaps);
        assert!(c.outside.is_empty(), "{:?}", c.outside);
    }

    #[test]
    fn a_write_after_the_term_ended_is_reported() {
        // Last renewal at 1 s with 4 s: the term ends at 5 s.
        let leases = [
            lw(0.0, "u1", "s-0", "id1", 4),
            lw(1.0, "u1", "s-0", "id1", 4),
        ];
        let writes = [w(4.9, "u1", "a1"), w(5.2, "u1", "a1")];
        let c = run(&leases, &writes);
        assert_eq!(c.outside.len(), 1, "{:?}", c.outside);
        assert_eq!(c.outside[0].at, "2026-01-01T00:00:05.2Z");
        assert_eq!(c.outside[0].lease, "s-0");
        assert!(c.outside[0].why.contains("id1"), "{}", c.outside[0].why);
    }

    #[test]
    fn a_write_on_a_range_never_held_is_reported() {
        let leases = [lw(0.0, "u1", "s-0", "id1", 4)];
        let c = run(&leases, &[w(1.0, "u1", "b1"), w(1.0, "u2", "a1")]);
        assert_eq!(c.outside.len(), 2, "{:?}", c.outside);
        assert_eq!(c.outside[0].why, "it never held the range");
    }

    #[test]
    fn two_overlapping_terms_are_reported() {
        // id1 renewed at 1 s for 4 s (until 5 s); id2 takes over at 3 s.
        let leases = [
            lw(0.0, "u1", "s-0", "id1", 4),
            lw(1.0, "u1", "s-0", "id1", 4),
            lw(3.0, "u2", "s-0", "id2", 4),
        ];
        let c = run(&leases, &[]);
        assert_eq!(c.handovers, 1);
        assert_eq!(c.overlaps.len(), 1, "{:?}", c.overlaps);
        let o = &c.overlaps[0];
        assert_eq!((o.earlier.as_str(), o.later.as_str()), ("id1", "id2"));
        assert!((o.overlap_s - 2.0).abs() < 1e-6, "{}", o.overlap_s);
    }

    #[test]
    fn a_takeover_after_expiry_is_no_overlap_and_ends_the_old_term() {
        let leases = [
            lw(0.0, "u1", "s-0", "id1", 4),
            lw(5.0, "u2", "s-0", "id2", 4),
        ];
        // u1's write at 4.5 s is after its term (0 to 4 s) and before id2's.
        let c = run(&leases, &[w(3.9, "u1", "a1"), w(4.5, "u1", "a1")]);
        assert!(c.overlaps.is_empty(), "{:?}", c.overlaps);
        assert_eq!(c.outside.len(), 1, "{:?}", c.outside);
        assert_eq!(c.outside[0].at, "2026-01-01T00:00:04.5Z");
    }

    #[test]
    fn a_release_ends_the_term_early() {
        // Renewed at 1 s for 4 s, but released at 2 s: a write at 3 s is outside.
        let leases = [
            lw(0.0, "u1", "s-0", "id1", 4),
            lw(1.0, "u1", "s-0", "id1", 4),
            lw(2.0, "u1", "s-0", "", 1),
        ];
        let c = run(&leases, &[w(1.5, "u1", "a1"), w(3.0, "u1", "a1")]);
        assert_eq!(c.outside.len(), 1, "{:?}", c.outside);
        assert_eq!(c.outside[0].at, "2026-01-01T00:00:03Z");
        assert_eq!(c.handovers, 0);
    }

    #[test]
    fn renewals_extend_the_term() {
        // Without the renewals the term would end at 4 s; the last one (at 8 s) carries it to
        // 12 s.
        let leases = [
            lw(0.0, "u1", "s-0", "id1", 4),
            lw(3.0, "u1", "s-0", "id1", 4),
            lw(6.0, "u1", "s-0", "id1", 4),
            lw(8.0, "u1", "s-0", "id1", 4),
        ];
        let c = run(&leases, &[w(11.9, "u1", "a1"), w(12.1, "u1", "a2")]);
        assert_eq!(c.outside.len(), 1, "{:?}", c.outside);
        assert_eq!(c.outside[0].at, "2026-01-01T00:00:12.1Z");
        assert_eq!(c.terms, 1);
    }

    #[test]
    fn a_lease_s_writes_are_taken_in_version_order_not_log_order() {
        // The release's line came after the take's in the log, though the take replaced the
        // version the release wrote.
        let mut release = lw(2.0, "u1", "s-0", "", 1);
        release.replaces = 10;
        let mut take = lw(2.0, "u2", "s-0", "id2", 4);
        take.replaces = 11;
        let leases = [lw(0.0, "u1", "s-0", "id1", 4), take, release];
        let c = run(&leases, &[w(3.0, "u2", "a1")]);
        assert!(c.overlaps.is_empty(), "{:?}", c.overlaps);
        assert!(c.outside.is_empty(), "{:?}", c.outside);
        assert_eq!(c.handovers, 1);
    }

    #[test]
    fn handovers_count_holder_changes_of_ranges_only() {
        let leases = [
            lw(0.0, "u1", "s-0", "id1", 4),
            lw(0.0, "u1", "s-global", "id1", 4),
            lw(1.0, "u1", "s-0", "", 1),
            lw(1.5, "u1", "s-global", "", 1),
            // The same identity again after its release: no handover.
            lw(2.0, "u1", "s-0", "id1", 4),
            lw(2.0, "u2", "s-global", "id2", 4),
            lw(7.0, "u2", "s-0", "id2", 4),
            lw(12.0, "u3", "s-0", "id3", 4),
            lw(12.0, "u2", "s-1", "id2", 4),
        ];
        let c = run(&leases, &[]);
        assert_eq!(c.handovers, 2);
        assert!(c.overlaps.is_empty(), "{:?}", c.overlaps);
        assert_eq!(c.terms, 7);
    }

    #[test]
    fn parse_reads_lease_bodies_and_the_replicas_writes() {
        let ev = |user: &str, verb: &str, resource: &str, ns: &str, name: &str, code: i64| {
            json!({"stage": "ResponseComplete", "verb": verb, "user": {"username": user},
                   "objectRef": {"resource": resource, "namespace": ns, "name": name},
                   "requestReceivedTimestamp": "2026-01-01T00:00:01.000000Z",
                   "stageTimestamp": "2026-01-01T00:00:01.250000Z",
                   "responseStatus": {"code": code}})
        };
        let mut lease = ev("r0", "update", "leases", "shards", "s-3", 200);
        lease["requestObject"] = json!({"metadata": {"resourceVersion": "266"},
            "spec": {"holderIdentity": "id0", "leaseDurationSeconds": 4}});
        let log = [
            lease,
            ev("r0", "update", "leases", "shards", "s-4", 200),
            ev("r0", "update", "leases", "shards", "s-member-00ff", 200),
            ev("r0", "create", "pods", "a1", "p1", 201),
            ev("r0", "create", "pods", "a1", "p2", 409),
            ev("r0", "get", "pods", "a1", "p1", 200),
            ev("admin", "delete", "pods", "a1", "p1", 200),
            ev("r1", "create", "events", "a2", "e1", 201),
        ]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
        let users = |u: &str| u.starts_with('r');
        let filter = Filter {
            lease_ns: "shards",
            prefix: "s",
            users: &users,
        };
        let parsed = parse(&log, &filter);
        assert_eq!(parsed.bodiless, 2);
        assert_eq!(
            parsed.leases,
            vec![LeaseWrite {
                at: "2026-01-01T00:00:01.25Z".parse().unwrap(),
                user: "r0".into(),
                lease: "s-3".into(),
                holder: "id0".into(),
                duration_s: 4,
                replaces: 266,
                session: None,
            }]
        );
        let seen: Vec<(&str, &str, &str)> = parsed
            .writes
            .iter()
            .map(|w| (w.user.as_str(), w.resource.as_str(), w.name.as_str()))
            .collect();
        assert_eq!(seen, vec![("r0", "pods", "p1"), ("r1", "events", "e1")]);
    }

    /// A range taken by a session is held while the session's member Lease renews, until the
    /// first gap; a fence by another user ends nothing early, the session's own release does.
    #[test]
    fn session_terms_follow_the_member_lease() {
        let member = |at: f64| sw(at, "u1", "s-member-1", "id1", "x");
        let mut members: Vec<LeaseWrite> = (0..=5).map(|i| member(f64::from(i) * 2.0)).collect();
        // Renewed every 2 s until 10 s (good for 4 s each): the term runs to 14 s.
        let leases = [sw(1.0, "u1", "s-0", "id1", "x")];
        let writes = [w(13.9, "u1", "a1"), w(14.1, "u1", "a1")];
        let c = check(&leases, &members, &writes, "s-global", &lease_of);
        assert_eq!(c.outside.len(), 1, "{:?}", c.outside);
        assert_eq!(c.outside[0].at, "2026-01-01T00:00:14.1Z");
        // A gap: a renewal at 20 s does not carry the term over 14–20 s.
        members.push(member(20.0));
        let c = check(
            &leases,
            &members,
            &[w(21.0, "u1", "a1")],
            "s-global",
            &lease_of,
        );
        assert_eq!(c.outside.len(), 1, "{:?}", c.outside);
        // Another identity takes the range at 12 s, while the session ran to 14 s: an
        // overlap, fence or not.
        let mut fenced = members.clone();
        fenced.push(sw(11.0, "u2", "s-member-1", "", "x"));
        let taken = [
            sw(1.0, "u1", "s-0", "id1", "x"),
            sw(12.0, "u2", "s-0", "id2", "y"),
        ];
        let c = check(&taken, &fenced, &[], "s-global", &lease_of);
        assert_eq!(c.overlaps.len(), 1, "{:?}", c.overlaps);
        assert_eq!(c.handovers, 1);
        // The session's own release at 5 s ends it: a write at 6 s is outside, a take at 5.5 s
        // is no overlap.
        let mut left = members[..3].to_vec();
        left.push(sw(5.0, "u1", "s-member-1", "", "x"));
        let after = [
            sw(1.0, "u1", "s-0", "id1", "x"),
            sw(5.5, "u2", "s-0", "id2", "y"),
        ];
        let c = check(&after, &left, &[w(6.0, "u1", "a1")], "s-global", &lease_of);
        assert!(c.overlaps.is_empty(), "{:?}", c.overlaps);
        assert_eq!(c.outside.len(), 1, "{:?}", c.outside);
        // A session never seen renewing holds nothing.
        let c = check(
            &[sw(1.0, "u1", "s-0", "id1", "z")],
            &members,
            &[w(1.5, "u1", "a1")],
            "s-global",
            &lease_of,
        );
        assert_eq!(c.outside.len(), 1, "{:?}", c.outside);
    }
}
