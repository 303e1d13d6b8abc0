//! Hash maps for keys that are looked up many times per sync (object keys, node names).
//!
//! The standard maps hash with SipHash, built to resist collision floods from untrusted
//! input; here every key is a name of a cluster object that only authorised clients can
//! create, and the cost of SipHash showed in profiles of syncs that look up a thousand
//! nodes or pods. These use foldhash, seeded once per process ([`State`]).
//!
//! The seed decides the iteration order of these maps (a cache lists its objects in it). The
//! deterministic simulation fixes it ([`fix_seed`]) so that a seed replays the same run.

use std::hash::BuildHasher;
use std::sync::OnceLock;

/// The per-process seed: random unless [`fix_seed`] set it first.
static SEED: OnceLock<u64> = OnceLock::new();

fn seed() -> u64 {
    *SEED.get_or_init(|| foldhash::fast::RandomState::default().hash_one(0u8))
}

/// Fixes the seed of every map of this process to `seed`, so that their iteration orders
/// replay; false when a map was already built with another seed (too late). For the
/// deterministic simulation only: call it before anything else.
pub fn fix_seed(seed: u64) -> bool {
    *SEED.get_or_init(|| seed) == seed
}

/// foldhash seeded with the process seed.
#[derive(Debug, Clone)]
pub struct State(foldhash::fast::FixedState);

impl Default for State {
    fn default() -> Self {
        Self(foldhash::fast::FixedState::with_seed(seed()))
    }
}

impl BuildHasher for State {
    type Hasher = foldhash::fast::FoldHasher<'static>;
    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

pub type HashMap<K, V> = std::collections::HashMap<K, V, State>;
pub type HashSet<K> = std::collections::HashSet<K, State>;
