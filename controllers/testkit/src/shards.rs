//! Shard views for tests of sharded work, without a holder task or Leases.

use std::sync::Arc;
use std::time::Duration;

use rkcm_runtime::shard::{GLOBAL, Ring, ShardConfig, Shards};

/// A replica that holds, for an hour from now, the ranges of `namespaces` on a ring of
/// `ranges`, and the global Lease when `global`.
///
/// # Panics
/// When `ranges` is 0.
pub fn holding(ranges: u32, namespaces: &[&str], global: bool) -> Arc<Shards> {
    let ring = Ring::new(ranges).expect("a ring of at least one range");
    let until = tokio::time::Instant::now() + Duration::from_secs(3600);
    let mut held: std::collections::BTreeMap<u32, tokio::time::Instant> = namespaces
        .iter()
        .map(|ns| (ring.range_of(ns), until))
        .collect();
    if global {
        held.insert(GLOBAL, until);
    }
    let shards = Shards::new(
        ShardConfig::with_defaults(ring, "kube-system", "test"),
        rkcm_runtime::clock::system(),
    );
    shards.assume_held(held);
    shards
}

/// A namespace of `candidates` whose range on a ring of `ranges` differs from `of`'s.
///
/// # Panics
/// When every candidate shares `of`'s range.
pub fn other_range(ranges: u32, of: &str, candidates: &[&'static str]) -> &'static str {
    let ring = Ring::new(ranges).expect("a ring of at least one range");
    candidates
        .iter()
        .copied()
        .find(|ns| ring.range_of(ns) != ring.range_of(of))
        .expect("a namespace in another range")
}
