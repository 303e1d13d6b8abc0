//! Sharded mode's safety, judged at the server: no two managers write for one namespace in
//! overlapping lease terms.
//!
//! A term is read from the range's Lease as the server stored it, write by write, in commit
//! order: a manager incarnation's term on a range opens with the write that made it holder
//! and lasts until its last renewal (a write of the same record by the same incarnation) plus
//! the lease duration written with it, or until the write that released the range (holder
//! cleared) or gave it to someone else, whichever comes first. Two findings:
//!
//! - `ShardLeaseTermsOverlap`: a Lease write made another incarnation holder while the
//!   previous holder's term still ran (not released, last renewal plus duration not past).
//! - `ShardWriteOutsideLeaseTerm`: a manager's write of a namespaced object landed while its
//!   incarnation had no running term on the namespace's range.
//!
//! What is allowed: a holder acts only until its last renewal's send time plus the renew
//! deadline, but a write of a sync begun inside that window may land later; the term runs to
//! the renewal's landing plus the whole lease duration, so the margin (lease duration minus
//! renew deadline, 5 s at upstream's 15 s / 10 s) is what such a write may use. A write that
//! lands later, or in another's term, breaks the invariant; so does any write for a range the
//! incarnation never held. Events (the recorder's, written after the fact) and Leases are not
//! judged.
//!
//! Member sessions: a range Lease written with a session (the annotation
//! `rkcm.io/shard-session`) is not renewed itself; its holder's term on it lasts until that
//! session's last renewal (a write of the member Lease `<prefix>-member-…` showing the session)
//! plus the duration written with it, or until the session's own incarnation released its
//! member Lease, or until the range's Lease was released or given to someone else. A fence
//! (another incarnation clearing the member Lease) shortens nothing: the taker must have waited
//! the session out. A range Lease without a session is judged by its own renewals, as above.
//!
//! The global Lease (`<prefix>-global`) has terms of its own, judged the same way (no two
//! holders at once). PodGC's cluster-wide pass (the terminated-pod threshold) runs in the
//! holder of the global Lease and deletes pods of any namespace, so a write of PodGC
//! ([`CLUSTER_WIDE_AGENTS`]) may fall in its incarnation's term on the namespace's range or in
//! its term on the global Lease; every other writer's, only in the former.

use std::collections::BTreeMap;

use rkcm_runtime::shard::Ring;
use rkcm_testkit::sim::server::Change;
use serde_json::Value;

/// Writers whose writes may also fall in a term on the global Lease: PodGC, whose
/// terminated-pod threshold runs in the global Lease's holder over every namespace.
pub const CLUSTER_WIDE_AGENTS: &[&str] = &["pod-garbage-collector"];

/// The global Lease's key in the terms ([`rkcm_runtime::shard::GLOBAL`]).
const GLOBAL: u32 = rkcm_runtime::shard::GLOBAL;

/// A term on one range: the holding incarnation, from when, its last renewal and duration
/// (of the range Lease's own record, or of its member session's when it names one).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    epoch: u64,
    holder: String,
    session: Option<String>,
    start_ms: u64,
    last_ms: u64,
    duration_ms: u64,
}

/// A member session as the server stored it: the incarnation that started it, its last
/// renewal and duration, and when that incarnation released it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    epoch: u64,
    last_ms: u64,
    duration_ms: u64,
    released_ms: Option<u64>,
}

impl Session {
    fn end_ms(&self) -> u64 {
        (self.last_ms + self.duration_ms).min(self.released_ms.unwrap_or(u64::MAX))
    }
}

/// One finding: when, which invariant, on what, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub at_ms: u64,
    pub invariant: &'static str,
    pub object: String,
    pub detail: String,
}

/// The running terms of a ring's ranges, fed every committed change in order.
#[derive(Debug)]
pub struct Terms {
    ring: Ring,
    /// `<namespace>/<prefix>-`: the range Leases' keys before the range number.
    lease_key: String,
    /// `<namespace>/<prefix>-member-`: the member Leases' keys before the identity's hash.
    member_key: String,
    open: BTreeMap<u32, Term>,
    sessions: BTreeMap<String, Session>,
    /// The session each member Lease showed last.
    on_member: BTreeMap<String, String>,
}

impl Terms {
    pub fn new(ring: Ring, namespace: &str, prefix: &str) -> Self {
        Self {
            ring,
            lease_key: format!("{namespace}/{prefix}-"),
            member_key: format!("{namespace}/{prefix}-member-"),
            open: BTreeMap::new(),
            sessions: BTreeMap::new(),
            on_member: BTreeMap::new(),
        }
    }

    /// Where `t` ends: its session's end, or its own last renewal plus duration.
    fn end_ms(&self, t: &Term) -> u64 {
        match &t.session {
            Some(s) => self.sessions.get(s).map_or(t.start_ms, Session::end_ms),
            None => t.last_ms + t.duration_ms,
        }
    }

    /// A write of a member Lease by incarnation `epoch` at `at_ms`.
    fn member(&mut self, key: &str, at_ms: u64, epoch: u64, record: Record) {
        match (record.holder.is_empty(), record.session) {
            (false, Some(session)) => {
                let session = format!("{}/{session}", record.holder);
                let s = self.sessions.entry(session.clone()).or_insert(Session {
                    epoch,
                    last_ms: at_ms,
                    duration_ms: record.duration_ms,
                    released_ms: None,
                });
                s.last_ms = s.last_ms.max(at_ms);
                s.duration_ms = record.duration_ms;
                self.on_member.insert(key.to_owned(), session);
            }
            (true, _) => {
                // Released by the session's own incarnation: its terms end here. Cleared by
                // another (a fence): nothing ends earlier than the session's lease.
                if let Some(s) = self
                    .on_member
                    .get(key)
                    .and_then(|session| self.sessions.get_mut(session))
                    && s.epoch == epoch
                {
                    s.released_ms.get_or_insert(at_ms);
                }
            }
            (false, None) => {}
        }
    }

    /// Judges the changes committed since the last step, in commit order.
    pub fn step(&mut self, changes: &[Change]) -> Vec<Finding> {
        let mut out = Vec::new();
        for c in changes {
            if c.epoch == 0 || c.resource == "events" {
                continue;
            }
            if c.resource == "leases" {
                let record = if c.kind == "DELETED" {
                    Record::default()
                } else {
                    lease_record(&c.obj)
                };
                if c.key.starts_with(&self.member_key) {
                    self.member(&c.key, c.at_ms, c.epoch, record);
                    continue;
                }
                let Some(range) = c.key.strip_prefix(&self.lease_key).and_then(|r| {
                    if r == "global" {
                        Some(GLOBAL)
                    } else {
                        r.parse::<u32>().ok()
                    }
                }) else {
                    continue;
                };
                out.extend(self.lease(range, c.at_ms, c.epoch, record));
                continue;
            }
            let Some((ns, _)) = c.key.split_once('/') else {
                continue;
            };
            let what = format!("{} {} {} {}", c.agent, c.kind, c.resource, c.key);
            let global = CLUSTER_WIDE_AGENTS.contains(&c.agent.as_str());
            out.extend(self.write(ns, c.at_ms, c.epoch, global, &what));
        }
        out
    }

    /// A write of range `range`'s Lease by incarnation `epoch` at `at_ms`, leaving `record`
    /// (holder `""`: released).
    fn lease(&mut self, range: u32, at_ms: u64, epoch: u64, record: Record) -> Option<Finding> {
        let Record {
            holder,
            duration_ms,
            session,
        } = record;
        // Sessions are an identity's: two replicas may start theirs in one microsecond.
        let session = session.map(|s| format!("{holder}/{s}"));
        let mut finding = None;
        if let Some(t) = self.open.get(&range) {
            let end = self.end_ms(t);
            if t.epoch == epoch && !holder.is_empty() && t.session == session && at_ms <= end {
                // A renewal (a record without a session), or a session writing its range
                // again (a take whose answer was lost).
                if let Some(t) = self.open.get_mut(&range) {
                    t.last_ms = at_ms;
                    t.duration_ms = duration_ms;
                }
                return None;
            }
            if !holder.is_empty() && (t.epoch != epoch || t.session != session) && at_ms < end {
                finding = Some(Finding {
                    at_ms,
                    invariant: "ShardLeaseTermsOverlap",
                    object: if range == GLOBAL {
                        "global lease".to_owned()
                    } else {
                        format!("range {range}")
                    },
                    detail: format!(
                        "epoch {epoch} ({holder}) took the range while the term of epoch {} ({}{}) ran: from {} ms, until {} ms",
                        t.epoch,
                        t.holder,
                        t.session
                            .as_ref()
                            .map_or_else(String::new, |s| format!(", session {s}")),
                        t.start_ms,
                        end
                    ),
                });
            }
            self.open.remove(&range);
        }
        if !holder.is_empty() {
            self.open.insert(
                range,
                Term {
                    epoch,
                    holder,
                    session,
                    start_ms: at_ms,
                    last_ms: at_ms,
                    duration_ms,
                },
            );
        }
        finding
    }

    /// Whether incarnation `epoch` has a running term on `range` at `at_ms`.
    fn in_term(&self, range: u32, epoch: u64, at_ms: u64) -> bool {
        self.open
            .get(&range)
            .is_some_and(|t| t.epoch == epoch && at_ms <= self.end_ms(t))
    }

    /// A write by incarnation `epoch` for an object of namespace `ns`, landed at `at_ms`;
    /// `global`: a cluster-wide writer, which may also write in a term on the global Lease.
    fn write(&self, ns: &str, at_ms: u64, epoch: u64, global: bool, what: &str) -> Option<Finding> {
        let range = self.ring.range_of(ns);
        if self.in_term(range, epoch, at_ms) || (global && self.in_term(GLOBAL, epoch, at_ms)) {
            return None;
        }
        let term = self.open.get(&range);
        let held = match term {
            Some(t) => format!(
                "the range's term is epoch {}'s ({}), from {} ms, until {} ms",
                t.epoch,
                t.holder,
                t.start_ms,
                self.end_ms(t)
            ),
            None => "no term runs on the range".to_owned(),
        };
        Some(Finding {
            at_ms,
            invariant: "ShardWriteOutsideLeaseTerm",
            object: format!("epoch {epoch} namespace {ns}"),
            detail: format!("{what} (range {range}): {held}"),
        })
    }
}

/// A Lease's record as stored: holder, duration and member session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Record {
    holder: String,
    duration_ms: u64,
    session: Option<String>,
}

fn lease_record(obj: &Value) -> Record {
    let spec = &obj["spec"];
    Record {
        holder: spec["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        duration_ms: spec["leaseDurationSeconds"].as_u64().unwrap_or(0) * 1000,
        session: obj["metadata"]["annotations"][rkcm_runtime::shard::holder::ANNOTATION_SESSION]
            .as_str()
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(holder: &str, secs: u64, session: Option<&str>) -> Record {
        Record {
            holder: holder.to_owned(),
            duration_ms: secs * 1000,
            session: session.map(str::to_owned),
        }
    }

    fn terms() -> Terms {
        Terms::new(Ring::new(2).expect("ring"), "kube-system", "rkcm-shard")
    }

    /// A namespace of range `r` of a ring of 2.
    fn ns_of(r: u32) -> &'static str {
        let ring = Ring::new(2).expect("ring");
        ["papa", "alpha", "echo", "bravo"]
            .into_iter()
            .find(|n| ring.range_of(n) == r)
            .expect("a namespace in the range")
    }

    enum Ev {
        /// (at, epoch, holder, duration s) on range 0.
        Lease(u64, u64, &'static str, u64),
        /// (at, epoch) for a namespace of range 0.
        Write(u64, u64),
    }

    /// The invariants broken by a sequence of events on range 0.
    fn judge(events: &[Ev]) -> Vec<&'static str> {
        let mut t = terms();
        let mut out = Vec::new();
        for e in events {
            let f = match e {
                Ev::Lease(at, epoch, holder, secs) => {
                    t.lease(0, *at, *epoch, rec(holder, *secs, None))
                }
                Ev::Write(at, epoch) => t.write(ns_of(0), *at, *epoch, false, "write"),
            };
            out.extend(f.map(|f| f.invariant));
        }
        out
    }

    #[test]
    fn terms_and_writes() {
        use Ev::{Lease, Write};
        const OUTSIDE: &str = "ShardWriteOutsideLeaseTerm";
        const OVERLAP: &str = "ShardLeaseTermsOverlap";
        let cases: Vec<(&str, Vec<Ev>, Vec<&str>)> = vec![
            (
                "writes inside the term, renewals extend it",
                vec![
                    Lease(0, 1, "a", 15),
                    Write(1_000, 1),
                    Lease(10_000, 1, "a", 15),
                    Write(24_000, 1),
                ],
                vec![],
            ),
            (
                "a write landing in the margin (renewal plus duration) passes, one after fails",
                vec![Lease(0, 1, "a", 15), Write(15_000, 1), Write(15_001, 1)],
                vec![OUTSIDE],
            ),
            ("a write with no term", vec![Write(5, 1)], vec![OUTSIDE]),
            (
                "a write in another's term",
                vec![Lease(0, 1, "a", 15), Write(10, 2)],
                vec![OUTSIDE],
            ),
            (
                "a write after the release",
                vec![
                    Lease(0, 1, "a", 15),
                    Lease(5_000, 1, "", 1),
                    Write(5_001, 1),
                ],
                vec![OUTSIDE],
            ),
            (
                "a take after the release, or after the term lapsed, is no overlap",
                vec![
                    Lease(0, 1, "a", 15),
                    Lease(5_000, 1, "", 1),
                    Lease(5_500, 2, "b", 15),
                    Write(6_000, 2),
                    Lease(21_000, 3, "c", 15),
                    Write(21_000, 3),
                ],
                vec![],
            ),
            (
                "a take while the holder's term runs overlaps; the old holder's writes then fail",
                vec![
                    Lease(0, 1, "a", 15),
                    Lease(14_999, 2, "b", 15),
                    Write(15_000, 1),
                ],
                vec![OVERLAP, OUTSIDE],
            ),
            (
                "a restarted replica of the same identity takes over only after the lease",
                vec![Lease(0, 1, "a", 15), Lease(3_000, 2, "a", 15)],
                vec![OVERLAP],
            ),
            (
                "a renewal landing after its own term lapsed opens a new term",
                vec![
                    Lease(0, 1, "a", 15),
                    Lease(20_000, 1, "a", 15),
                    Write(21_000, 1),
                ],
                vec![],
            ),
        ];
        for (what, events, want) in cases {
            assert_eq!(judge(&events), want, "{what}");
        }
    }

    #[test]
    fn a_gap_between_two_terms_of_one_holder_is_outside() {
        let mut t = terms();
        assert!(t.lease(0, 0, 1, rec("a", 15, None)).is_none());
        assert!(t.lease(0, 20_000, 1, rec("a", 15, None)).is_none());
        // Between the lapse (15 s) and the new term (20 s) nothing was held; judged in
        // commit order, a write landing then meets the lapsed term.
        let mut gap = terms();
        assert!(gap.lease(0, 0, 1, rec("a", 15, None)).is_none());
        assert!(gap.write(ns_of(0), 17_000, 1, false, "w").is_some());
        assert!(
            t.write(ns_of(1), 1, 1, false, "w").is_some(),
            "another range"
        );
    }

    #[test]
    fn a_cluster_wide_writer_may_write_in_its_global_term() {
        let mut t = terms();
        assert!(t.lease(GLOBAL, 0, 1, rec("a", 15, None)).is_none());
        assert!(t.lease(0, 0, 2, rec("b", 15, None)).is_none());
        // PodGC of epoch 1 deletes in range 0 (epoch 2's) under the global Lease.
        assert!(t.write(ns_of(0), 1_000, 1, true, "w").is_none());
        // Any other writer of epoch 1 may not; nor PodGC once the global term is over.
        assert!(t.write(ns_of(0), 1_000, 1, false, "w").is_some());
        assert!(t.write(ns_of(0), 15_001, 1, true, "w").is_some());
        // Two holders of the global Lease at once overlap.
        let taken = t.lease(GLOBAL, 5_000, 3, rec("c", 15, None));
        assert_eq!(taken.map(|f| f.object), Some("global lease".to_owned()));
    }

    /// Member sessions: a range Lease written once for a session is held as long as the
    /// session's member Lease renews; a fence ends nothing early, a release does.
    #[test]
    fn session_terms_follow_the_member_lease() {
        const M_A: &str = "kube-system/rkcm-shard-member-a";
        const M_B: &str = "kube-system/rkcm-shard-member-b";
        let a = |at: u64| (at, rec("a", 15, Some("s1")));
        let mut t = terms();
        t.member(M_A, 0, 1, a(0).1);
        assert!(t.lease(0, 100, 1, rec("a", 15, Some("s1"))).is_none());
        // Renewals of the session carry the range's term: a write at 40 s is inside.
        for at in (2_000..=30_000).step_by(2_000) {
            t.member(M_A, at, 1, a(at).1);
        }
        assert!(t.write(ns_of(0), 40_000, 1, false, "w").is_none());
        // No renewal after 30 s: the term ends at 45 s.
        assert!(t.write(ns_of(0), 45_001, 1, false, "w").is_some());
        // b fences a's session at 46 s and takes the range at once: no overlap.
        t.member(M_A, 46_000, 2, rec("", 15, Some("s1")));
        // (Its session has the same token as a's: sessions are per identity.)
        t.member(M_B, 46_000, 2, rec("b", 15, Some("s1")));
        assert!(t.lease(0, 46_100, 2, rec("b", 15, Some("s1"))).is_none());
        assert!(t.write(ns_of(0), 47_000, 2, false, "w").is_none());
        // A fence before the session ran out: the take overlaps.
        let mut early = terms();
        early.member(M_A, 0, 1, a(0).1);
        assert!(early.lease(0, 100, 1, rec("a", 15, Some("s1"))).is_none());
        early.member(M_A, 10_000, 2, rec("", 15, Some("s1")));
        let f = early.lease(0, 10_100, 2, rec("b", 15, Some("s2")));
        assert_eq!(f.map(|f| f.invariant), Some("ShardLeaseTermsOverlap"));
        // A release by the session's own incarnation ends its terms at once.
        let mut left = terms();
        left.member(M_A, 0, 1, a(0).1);
        assert!(left.lease(0, 100, 1, rec("a", 15, Some("s1"))).is_none());
        left.member(M_A, 5_000, 1, rec("", 1, Some("s1")));
        assert!(left.write(ns_of(0), 5_001, 1, false, "w").is_some());
        assert!(left.lease(0, 5_100, 2, rec("b", 15, Some("s2"))).is_none());
        // A late renewal after someone took the range does not give it back.
        let mut late = terms();
        late.member(M_A, 0, 1, a(0).1);
        assert!(late.lease(0, 100, 1, rec("a", 15, Some("s1"))).is_none());
        assert!(late.lease(0, 16_000, 2, rec("b", 15, Some("s2"))).is_none());
        late.member(M_A, 17_000, 1, a(17_000).1);
        let f = late.write(ns_of(0), 18_000, 1, false, "w");
        assert_eq!(f.map(|f| f.invariant), Some("ShardWriteOutsideLeaseTerm"));
        // A session the check never saw start holds nothing.
        let mut unknown = terms();
        assert!(unknown.lease(0, 0, 1, rec("a", 15, Some("s9"))).is_none());
        assert!(unknown.write(ns_of(0), 1, 1, false, "w").is_some());
    }
}
