//! The elector's pure decisions: what an observed Lease means (valid, held by whom), whether to
//! acquire, renew or wait, and the records it writes.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::Instant;

/// client-go `JitterFactor`.
const JITTER_FACTOR: f64 = 1.2;

/// The Lease as we last read or wrote it, and the local time we observed its record change.
#[derive(Clone, Debug)]
pub(super) struct Observation {
    /// Whole object: its resourceVersion guards the next update, and fields we do not own
    /// (labels, strategy, preferredHolder) are written back unchanged.
    pub(super) lease: Lease,
    pub(super) at: Instant,
}

impl Observation {
    pub(super) fn record(&self) -> LeaseSpec {
        self.lease.spec.clone().unwrap_or_default()
    }
}

pub(super) fn holder(spec: &LeaseSpec) -> &str {
    spec.holder_identity.as_deref().unwrap_or("")
}

/// client-go `isLeaseValid`: the record's own duration counted from our observation.
/// `at + duration == now` is already expired (Go's `After` is strict).
pub(super) fn is_valid(record: &LeaseSpec, observed_at: Instant, now: Instant) -> bool {
    let secs = u64::try_from(record.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
    observed_at + Duration::from_secs(secs) > now
}

/// Keeps the observation time when the freshly read record equals the one we hold, resets
/// it to `now` otherwise (client-go compares the raw record bytes).
pub(super) fn observe(prev: Option<&Observation>, fetched: Lease, now: Instant) -> Observation {
    let at = match prev {
        Some(p) if p.lease.spec == fetched.spec => p.at,
        _ => now,
    };
    Observation { lease: fetched, at }
}

/// Outcome of comparing a freshly read record with our identity.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Decision {
    /// Someone else holds a lease that has not expired by our clock.
    HeldByOther { holder: String },
    /// Write this spec. `slow_path`: we already held the lease (a renewal that had to re-read).
    Write { spec: LeaseSpec, slow_path: bool },
}

/// client-go `tryAcquireOrRenew` steps 3–4, after the GET.
pub(super) fn decide(
    obs: &Observation,
    now: Instant,
    identity: &str,
    duration_secs: i32,
    wall: Timestamp,
) -> Decision {
    let current = obs.record();
    let current_holder = holder(&current);
    let we_hold = current_holder == identity;
    if !current_holder.is_empty() && !we_hold && is_valid(&current, obs.at, now) {
        return Decision::HeldByOther {
            holder: current_holder.to_owned(),
        };
    }
    let transitions = current.lease_transitions.unwrap_or(0);
    let mut spec = current.clone();
    spec.holder_identity = Some(identity.to_owned());
    spec.lease_duration_seconds = Some(duration_secs);
    spec.renew_time = Some(MicroTime(wall));
    if we_hold {
        spec.lease_transitions = Some(transitions);
    } else {
        spec.acquire_time = Some(MicroTime(wall));
        spec.lease_transitions = Some(transitions.saturating_add(1));
    }
    Decision::Write {
        spec,
        slow_path: we_hold,
    }
}

/// Fast-path renewal: only `renewTime` (and our holder/duration) change.
pub(super) fn renewed(
    record: &LeaseSpec,
    identity: &str,
    duration_secs: i32,
    wall: Timestamp,
) -> LeaseSpec {
    let mut spec = record.clone();
    spec.holder_identity = Some(identity.to_owned());
    spec.lease_duration_seconds = Some(duration_secs);
    spec.renew_time = Some(MicroTime(wall));
    spec.lease_transitions = Some(record.lease_transitions.unwrap_or(0));
    spec
}

/// client-go `release()`: holder cleared, duration 1 s, both times now, transitions kept, so
/// the next candidate takes over on its next try instead of waiting for expiry.
pub(super) fn released(record: &LeaseSpec, wall: Timestamp) -> LeaseSpec {
    let mut spec = record.clone();
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.acquire_time = Some(MicroTime(wall));
    spec.renew_time = Some(MicroTime(wall));
    spec.lease_transitions = Some(record.lease_transitions.unwrap_or(0));
    spec
}

/// Uniform in [retry, retry × (1 + JITTER_FACTOR)).
pub(super) fn jittered(retry: Duration) -> Duration {
    retry.mul_f64(1.0 + rand::random::<f64>() * JITTER_FACTOR)
}
