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

/// A term on one range: the holding incarnation, from when, its last renewal and duration.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    epoch: u64,
    holder: String,
    start_ms: u64,
    last_ms: u64,
    duration_ms: u64,
}

impl Term {
    fn end_ms(&self) -> u64 {
        self.last_ms + self.duration_ms
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
    open: BTreeMap<u32, Term>,
}

impl Terms {
    pub fn new(ring: Ring, namespace: &str, prefix: &str) -> Self {
        Self {
            ring,
            lease_key: format!("{namespace}/{prefix}-"),
            open: BTreeMap::new(),
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
                let Some(range) = c.key.strip_prefix(&self.lease_key).and_then(|r| {
                    if r == "global" {
                        Some(GLOBAL)
                    } else {
                        r.parse::<u32>().ok()
                    }
                }) else {
                    continue;
                };
                let (holder, duration_ms) = if c.kind == "DELETED" {
                    (String::new(), 0)
                } else {
                    lease_record(&c.obj)
                };
                out.extend(self.lease(range, c.at_ms, c.epoch, holder, duration_ms));
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

    /// A write of range `range`'s Lease by incarnation `epoch` at `at_ms`, leaving `holder`
    /// (`""`: released) for `duration_ms`.
    fn lease(
        &mut self,
        range: u32,
        at_ms: u64,
        epoch: u64,
        holder: String,
        duration_ms: u64,
    ) -> Option<Finding> {
        let mut finding = None;
        match self.open.get_mut(&range) {
            Some(t) if t.epoch == epoch && !holder.is_empty() && at_ms <= t.end_ms() => {
                t.last_ms = at_ms;
                t.duration_ms = duration_ms;
                return None;
            }
            Some(t) => {
                if !holder.is_empty() && t.epoch != epoch && at_ms < t.end_ms() {
                    finding = Some(Finding {
                        at_ms,
                        invariant: "ShardLeaseTermsOverlap",
                        object: if range == GLOBAL {
                            "global lease".to_owned()
                        } else {
                            format!("range {range}")
                        },
                        detail: format!(
                            "epoch {epoch} ({holder}) took the range while the term of epoch {} ({}) ran: from {} ms, renewed at {} ms, until {} ms",
                            t.epoch,
                            t.holder,
                            t.start_ms,
                            t.last_ms,
                            t.end_ms()
                        ),
                    });
                }
                self.open.remove(&range);
            }
            None => {}
        }
        if !holder.is_empty() {
            self.open.insert(
                range,
                Term {
                    epoch,
                    holder,
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
            .is_some_and(|t| t.epoch == epoch && at_ms <= t.end_ms())
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
                "the range's term is epoch {}'s ({}), from {} ms, renewed at {} ms, until {} ms",
                t.epoch,
                t.holder,
                t.start_ms,
                t.last_ms,
                t.end_ms()
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

/// A Lease's holder and duration as stored.
fn lease_record(obj: &Value) -> (String, u64) {
    let spec = &obj["spec"];
    let holder = spec["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let secs = spec["leaseDurationSeconds"].as_u64().unwrap_or(0);
    (holder, secs * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                    t.lease(0, *at, *epoch, (*holder).to_owned(), secs * 1000)
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
        assert!(t.lease(0, 0, 1, "a".into(), 15_000).is_none());
        assert!(t.lease(0, 20_000, 1, "a".into(), 15_000).is_none());
        // Between the lapse (15 s) and the new term (20 s) nothing was held; judged in
        // commit order, a write landing then meets the lapsed term.
        let mut gap = terms();
        assert!(gap.lease(0, 0, 1, "a".into(), 15_000).is_none());
        assert!(gap.write(ns_of(0), 17_000, 1, false, "w").is_some());
        assert!(
            t.write(ns_of(1), 1, 1, false, "w").is_some(),
            "another range"
        );
    }

    #[test]
    fn a_cluster_wide_writer_may_write_in_its_global_term() {
        let mut t = terms();
        assert!(t.lease(GLOBAL, 0, 1, "a".into(), 15_000).is_none());
        assert!(t.lease(0, 0, 2, "b".into(), 15_000).is_none());
        // PodGC of epoch 1 deletes in range 0 (epoch 2's) under the global Lease.
        assert!(t.write(ns_of(0), 1_000, 1, true, "w").is_none());
        // Any other writer of epoch 1 may not; nor PodGC once the global term is over.
        assert!(t.write(ns_of(0), 1_000, 1, false, "w").is_some());
        assert!(t.write(ns_of(0), 15_001, 1, true, "w").is_some());
        // Two holders of the global Lease at once overlap.
        let taken = t.lease(GLOBAL, 5_000, 3, "c".into(), 15_000);
        assert_eq!(taken.map(|f| f.object), Some("global lease".to_owned()));
    }
}
