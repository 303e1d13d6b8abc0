//! Sharded mode's metrics: what a replica holds and how often ranges move.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGauge, Opts};

use crate::metrics::{get_or_register, register};

struct Metrics {
    ranges: IntGauge,
    global: IntGauge,
    moves: IntCounterVec,
}

fn get() -> Option<&'static Metrics> {
    static CELL: OnceLock<Option<Metrics>> = OnceLock::new();
    get_or_register(&CELL, "shard", || {
        Ok(Metrics {
            ranges: register(IntGauge::new(
                "rkcm_shard_ranges_held",
                "Shard ranges this replica holds (--rkcm-shards).",
            )?),
            global: register(IntGauge::new(
                "rkcm_shard_global_held",
                "1 while this replica holds the global shard Lease (cluster-wide work).",
            )?),
            moves: register(IntCounterVec::new(
                Opts::new(
                    "rkcm_shard_range_moves_total",
                    "Shard ranges this replica took or handed over.",
                ),
                &["direction"],
            )?),
        })
    })
}

/// The held set now: `ranges` ranges, the global Lease or not.
pub(super) fn held(ranges: usize, global: bool) {
    if let Some(m) = get() {
        m.ranges.set(i64::try_from(ranges).unwrap_or(i64::MAX));
        m.global.set(i64::from(global));
    }
}

/// `n` ranges moved: `took` or `handed_over`.
pub(super) fn moved(direction: &str, n: usize) {
    if let Some(m) = get() {
        m.moves
            .with_label_values(&[direction])
            .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
    }
}
