//! Fault drivers of `make chaos` (the `rkcm-chaos` binary): a controller-manager (rkcm or
//! upstream kube-controller-manager, the same controllers) confined to one namespace of a
//! dedicated plane, a workload under churn, faults, and the invariant watcher running from
//! before the first object to after convergence.
//!
//! Scenarios:
//! - `kill-churn`: SIGKILL and restart every 30–90 s (random) for the duration, while
//!   Deployments are scaled and rolled, ReplicaSets scaled and pods deleted ~10/s.
//! - `watch-gap`: the manager's pod watch delivers every event late ([`Options::watch_delay`],
//!   30 s by default) for half of the duration, under the same churn.
//!
//! - `leader`: two leader-elected replicas (users `rkcm` and `kcm` of the plane, so the
//!   audit log tells their writes apart), upstream's default timings (lease 15 s, renew
//!   10 s, retry 2 s), under churn: the leader is SIGKILLed, restarted as a standby, and the
//!   next leader SIGTERMed. From the audit log: the gap from each fault to the new leader's
//!   first write, the old leader's writes after the fault, and writes of the old leader
//!   after the new one's first (overlapping windows).
//!
//! - `rebalance` (rkcm only: sharded mode): replicas with `--rkcm-shards` started, SIGKILLed
//!   and SIGTERMed (1, 3, then 2 and 3 in turn) under churn in namespaces spread over the
//!   ring, until the range Leases changed hands the target number of times; from the audit
//!   log: every identity's term of every range (no two overlapping) and every write of a
//!   replica inside its term of the namespace's range (see [`terms`]).
//!
//! Each reports the violations; the convergence time of a baseline change without faults
//! (every Deployment rolled, every ReplicaSet scaled) and of the same change made with the
//! last fault when the churn stops (a kill right after it, or the pod watch delay lifted
//! right after it); the faults injected and the panics in the manager's log.

mod leader;
mod outcome;
mod rebalance;
mod report;
pub mod terms;
mod workload;

pub(crate) use leader::{Replica, audit_writes, close_run, is_lease_write, lease_writer};
pub use leader::{handover, run_leader};
pub use outcome::{
    ALL_CONTROLLERS, CONTROLLERS, CutRecord, Handover, Options, Outcome, Rebalance, Rejection,
};
pub use rebalance::{LEASE_NAMESPACE, USER_PREFIX, run_rebalance};
pub(crate) use report::count_panics;
pub use report::{NOT_COVERED, markdown};
pub(crate) use workload::{Workload, kwok_template, watched_namespace};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn line(at: &str, user: &str, verb: &str, resource: &str, ns: &str) -> String {
        json!({"stage": "ResponseComplete", "verb": verb, "user": {"username": user},
               "objectRef": {"resource": resource, "namespace": ns},
               "requestReceivedTimestamp": at, "responseStatus": {"code": 200}})
        .to_string()
    }

    #[test]
    fn handover_measures_gap_and_overlap_from_the_audit_log() {
        let log = [
            line("2026-01-01T00:00:01Z", "rkcm", "create", "pods", "ns"),
            line("2026-01-01T00:00:02Z", "rkcm", "update", "leases", "ns"),
            line("2026-01-01T00:00:03Z", "admin", "delete", "pods", "ns"),
            line("2026-01-01T00:00:04Z", "kcm", "create", "pods", "other"),
            line("2026-01-01T00:00:05Z", "rkcm", "patch", "replicasets", "ns"),
            line("2026-01-01T00:00:09Z", "kcm", "create", "pods", "ns"),
            line("2026-01-01T00:00:10Z", "rkcm", "create", "pods", "ns"),
            line("2026-01-01T00:00:11Z", "kcm", "update", "leases", "ns"),
        ]
        .join("\n");
        assert_eq!(lease_writer(&log, "ns").as_deref(), Some("kcm"));
        let writes = audit_writes(&log, "ns");
        assert_eq!(writes.len(), 4, "{writes:?}");
        let at: jiff::Timestamp = "2026-01-01T00:00:04Z".parse().unwrap();
        let h = handover(
            &writes,
            "SIGTERM",
            "rkcm",
            at,
            "2026-01-01T00:01:00Z".parse().unwrap(),
        );
        assert_eq!(h.new_leader.as_deref(), Some("kcm"));
        assert_eq!(h.gap_s, Some(5.0));
        assert_eq!(h.old_writes_after_fault, 2);
        assert_eq!(h.overlapping_writes, 1);
    }
}
