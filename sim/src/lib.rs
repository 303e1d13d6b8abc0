//! rkcm-sim: the deterministic simulation of rkcm's controllers (testing tier 2).
//!
//! Every controller crate runs unchanged (same informers, work queues, expectations, plans
//! and writes) against the simulated API server and node model of
//! [`rkcm_testkit::sim`], on a paused current-thread tokio runtime: one seed fixes every
//! choice (watch delays, dropped and expired watches, stale lists, conflicts, crashes of the
//! manager between any two writes, leader changes, the user's operations and node failures),
//! so a failing seed replays byte for byte. Invariants are checked after every step
//! ([`checks`]); once faults stop, every object must converge within [`run::SETTLE`].
//!
//! `cargo run -p rkcm-sim --release -- --controller C --seeds N` runs seeds `0..N`;
//! `--seed S --trace` replays one with its step-by-step trace.

pub mod checks;
mod common;
pub mod manager;
pub mod run;
pub mod scenario;
pub mod sharded;

pub use manager::Ctl;
pub use run::{Outcome, run};
