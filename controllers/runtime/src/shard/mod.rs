//! Sharded mode (`--rkcm-shards=N`): replicas of one rkcm split a fixed ring of N
//! namespace-hash ranges, each range held through a Lease with leader-election semantics.
//!
//! - [`ring`]: the ranges, the hash (the API server's 64-bit FNV-1a of the namespace) and the
//!   shard selector the server filters lists and watches with.
//! - [`balance`]: which ranges a replica takes and hands over, from what the Leases say.
//! - [`holder`]: the task that holds the range Leases and the held set workers consult.
//! - [`fence`]: a client layer that sends a namespaced write only while its range is held.
//! - `watch`: the ring's Leases as a watch shows them, read by the holder's rounds.

pub mod balance;
pub mod fence;
pub mod holder;
mod metrics;
pub mod ring;
mod watch;

pub use fence::FenceLayer;
pub use holder::{GLOBAL, LEASE_PREFIX, ShardConfig, Shards};
pub use ring::{Ring, fnv1a64};
