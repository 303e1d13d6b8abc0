//! `leader_election_master_status` and `leader_election_slowpath_total` (upstream's), and
//! `rkcm_leader_election_renewals_total{name,result}`: each renewal attempt of a leader
//! (`success`, or `error` when the write failed or someone else held the Lease); upstream has no
//! such counter, dashboards read renewals from it.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use rkcm_runtime::metrics::{get_or_register, register};

pub(super) struct Metrics {
    pub(super) master_status: IntGaugeVec,
    pub(super) slowpath: IntCounterVec,
    pub(super) renewals: IntCounterVec,
}

impl Metrics {
    fn build() -> prometheus::Result<Self> {
        Ok(Self {
            master_status: register(IntGaugeVec::new(
                Opts::new(
                    "leader_election_master_status",
                    "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
                     backup, 1 indicates master. 'name' is the string used to identify the lease. \
                     Please make sure to group by name.",
                ),
                &["name"],
            )?),
            slowpath: register(IntCounterVec::new(
                Opts::new(
                    "leader_election_slowpath_total",
                    "Total number of slow path exercised in renewing leader leases. 'name' is the \
                     string used to identify the lease. Please make sure to group by name.",
                ),
                &["name"],
            )?),
            renewals: register(IntCounterVec::new(
                Opts::new(
                    "rkcm_leader_election_renewals_total",
                    "Lease renewal attempts of the leader by result (success or error).",
                ),
                &["name", "result"],
            )?),
        })
    }
}

pub(super) fn metrics() -> Option<&'static Metrics> {
    static METRICS: OnceLock<Option<Metrics>> = OnceLock::new();
    get_or_register(&METRICS, "leader_election", Metrics::build)
}

/// `leader_election_master_status{name}`: 1 while leading the lease, 0 otherwise. The first
/// call (at construction) also creates the lease's slow-path and renewal counters at 0, so a
/// dashboard finds their series before the first increment.
pub(super) fn set_master_status(name: &str, leading: bool) {
    if let Some(m) = metrics() {
        m.slowpath.with_label_values(&[name]);
        for result in ["success", "error"] {
            m.renewals.with_label_values(&[name, result]);
        }
        m.master_status
            .with_label_values(&[name])
            .set(i64::from(leading));
    }
}

/// `rkcm_leader_election_renewals_total{name,result}`: one renewal attempt of the leader.
pub(super) fn count_renewal(name: &str, ok: bool) {
    if let Some(m) = metrics() {
        let result = if ok { "success" } else { "error" };
        m.renewals.with_label_values(&[name, result]).inc();
    }
}
