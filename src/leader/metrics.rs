//! `leader_election_master_status` and `leader_election_slowpath_total`.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use rkcm_runtime::metrics::{get_or_register, register};

pub(super) struct Metrics {
    pub(super) master_status: IntGaugeVec,
    pub(super) slowpath: IntCounterVec,
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
        })
    }
}

pub(super) fn metrics() -> Option<&'static Metrics> {
    static METRICS: OnceLock<Option<Metrics>> = OnceLock::new();
    get_or_register(&METRICS, "leader_election", Metrics::build)
}

/// `leader_election_master_status{name}`: 1 while leading the lease, 0 otherwise.
pub(super) fn set_master_status(name: &str, leading: bool) {
    if let Some(m) = metrics() {
        m.master_status
            .with_label_values(&[name])
            .set(i64::from(leading));
    }
}
