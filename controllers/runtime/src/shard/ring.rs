//! The ring of namespace-hash ranges (`--rkcm-shards=N`) and the API server's shard selector.
//!
//! The 64-bit FNV-1a hash of an object's namespace falls in one of N equal ranges of
//! `[0, 2^64)`: range `i` is `[ceil(i·2^64/N), ceil((i+1)·2^64/N))`. The API server's
//! sharded list and watch (KEP-5866, gate `ShardedListAndWatch`, apimachinery `pkg/sharding`)
//! hashes the same way and keeps an object when its hash is in one of the selector's
//! `shardRange(object.metadata.namespace, '0x<start>', '0x<end>')` terms (start inclusive, end
//! exclusive, joined by `||`, 16 lowercase hex digits, the end of the ring written as
//! `0x10000000000000000`), so a replica's cache holds exactly its ranges whichever side
//! filters.
//!
//! Equal ranges balance namespaces only when their names differ early: FNV-1a's high bits
//! barely move with the last characters of a short name (`team-a` to `team-z` all fall in one
//! range of 64). Split points that follow the namespaces present are still to come.

use std::collections::BTreeSet;
use std::fmt;

/// The field every range is taken over: a namespace keeps an owner with its children.
pub const SHARD_FIELD: &str = "object.metadata.namespace";

/// The most ranges a ring may have: every replica keeps (and relists after a broken watch) every
/// range's Lease, and a selector of every other range must stay a reasonable query parameter.
pub const MAX_RANGES: u32 = 1024;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a of `value`'s bytes (Go's `hash/fnv` `New64a`, as the API server hashes).
pub fn fnv1a64(value: &str) -> u64 {
    value.bytes().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// A ring of `ranges` equal namespace-hash ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    ranges: u32,
}

/// A ring size out of bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRing(pub u32);

impl fmt::Display for BadRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a shard ring needs 1 to {MAX_RANGES} ranges, got {}",
            self.0
        )
    }
}

impl std::error::Error for BadRing {}

impl Ring {
    pub fn new(ranges: u32) -> Result<Self, BadRing> {
        if ranges == 0 || ranges > MAX_RANGES {
            return Err(BadRing(ranges));
        }
        Ok(Self { ranges })
    }

    pub fn len(&self) -> u32 {
        self.ranges
    }

    /// Never true: a ring has at least one range (for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The range of a hash: `floor(hash · N / 2^64)`.
    pub fn range_of_hash(&self, hash: u64) -> u32 {
        let i = (u128::from(hash) * u128::from(self.ranges)) >> 64;
        // Below N by construction: hash < 2^64.
        u32::try_from(i).unwrap_or(self.ranges - 1)
    }

    /// The range of a namespace (`""` for cluster-scoped objects, hashed as the server does).
    pub fn range_of(&self, namespace: &str) -> u32 {
        self.range_of_hash(fnv1a64(namespace))
    }

    /// Range `i`'s bounds `[start, end)` as numbers (the end of the last is 2^64).
    pub fn bounds(&self, i: u32) -> (u128, u128) {
        (self.edge(i), self.edge(i + 1))
    }

    /// `ceil(i · 2^64 / N)`.
    fn edge(&self, i: u32) -> u128 {
        let n = u128::from(self.ranges);
        (u128::from(i) << 64).div_ceil(n)
    }

    /// The API server's shard selector for the ranges `held` (adjacent ranges merged into one
    /// term); `None` when `held` is the whole ring (no selector: everything) or empty (nothing
    /// to list; the caller lists nothing).
    pub fn selector(&self, held: &BTreeSet<u32>) -> Option<String> {
        let held: Vec<u32> = held.iter().copied().filter(|i| *i < self.ranges).collect();
        if held.is_empty() || held.len() == self.ranges as usize {
            return None;
        }
        let mut terms = Vec::new();
        let mut span: Option<(u32, u32)> = None;
        for i in held {
            span = match span {
                Some((first, last)) if last + 1 == i => Some((first, i)),
                Some((first, last)) => {
                    terms.push(self.term(first, last));
                    Some((i, i))
                }
                None => Some((i, i)),
            };
        }
        if let Some((first, last)) = span {
            terms.push(self.term(first, last));
        }
        Some(terms.join(" || "))
    }

    fn term(&self, first: u32, last: u32) -> String {
        let (start, _) = self.bounds(first);
        let (_, end) = self.bounds(last);
        format!(
            "shardRange({SHARD_FIELD}, '{}', '{}')",
            hex(start),
            hex(end)
        )
    }
}

/// `0x` and 16 lowercase hex digits; 2^64 as `0x10000000000000000`.
fn hex(v: u128) -> String {
    format!("0x{v:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_vectors() {
        // The FNV reference vectors (draft-eastlake-fnv, 64-bit FNV-1a).
        assert_eq!(fnv1a64(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn ring_size_is_bounded() {
        assert_eq!(Ring::new(0), Err(BadRing(0)));
        assert_eq!(Ring::new(MAX_RANGES + 1), Err(BadRing(MAX_RANGES + 1)));
        assert!(Ring::new(1).is_ok());
        assert!(Ring::new(MAX_RANGES).is_ok());
    }

    #[test]
    fn ranges_cover_the_hash_space_without_gaps() {
        for n in [1, 2, 3, 7, 16, 1000] {
            let ring = Ring::new(n).expect("ring");
            assert_eq!(ring.bounds(0).0, 0);
            assert_eq!(ring.bounds(n - 1).1, 1u128 << 64);
            for i in 1..n {
                assert_eq!(ring.bounds(i - 1).1, ring.bounds(i).0, "n={n} i={i}");
            }
        }
    }

    #[test]
    fn a_hash_falls_in_the_range_whose_bounds_hold_it() {
        let ring = Ring::new(3).expect("ring");
        // 2^64 / 3 = 6148914691236517205.33…: range 1 starts at …206; 2 · 2^64 / 3 =
        // 12297829382473034410.67…: range 2 at …411.
        assert_eq!(ring.bounds(1).0, 6_148_914_691_236_517_206);
        for (hash, range) in [
            (0, 0),
            (6_148_914_691_236_517_205, 0),
            (6_148_914_691_236_517_206, 1),
            (12_297_829_382_473_034_410, 1),
            (12_297_829_382_473_034_411, 2),
            (u64::MAX, 2),
        ] {
            assert_eq!(ring.range_of_hash(hash), range, "hash {hash}");
            let (start, end) = ring.bounds(range);
            assert!(start <= u128::from(hash) && u128::from(hash) < end);
        }
    }

    #[test]
    fn selector_merges_adjacent_ranges() {
        let ring = Ring::new(4).expect("ring");
        let held = |v: &[u32]| v.iter().copied().collect::<BTreeSet<u32>>();
        assert_eq!(ring.selector(&held(&[])), None);
        assert_eq!(ring.selector(&held(&[0, 1, 2, 3])), None);
        assert_eq!(
            ring.selector(&held(&[0, 1])).as_deref(),
            Some(
                "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"
            )
        );
        assert_eq!(
            ring.selector(&held(&[0, 2, 3])).as_deref(),
            Some(
                "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || \
                 shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
            )
        );
    }
}
