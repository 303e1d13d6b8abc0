//! The queue and pacing: the work queue controllers drive their workers from ([`WorkQueue`],
//! client-go `util/workqueue`), the workers that sync its keys ([`run_workers`]), the token
//! bucket shared with the API clients ([`flowcontrol`]) and the pacing of syncs and status
//! writes ([`pacing`]).
//!
//! - `workqueue`: the queue itself: dedup, per-key exclusion, delays.
//! - `limiter`: how a failed key is delayed (per-key backoff, overall bucket).
//! - `metrics`: the upstream `workqueue_*` metrics.
//! - `workers`: the worker loop and its retry policy.

pub mod flowcontrol;
mod limiter;
mod metrics;
pub mod pacing;
mod workers;
mod workqueue;

#[cfg(test)]
mod tests;

pub use limiter::{
    DEFAULT_BUCKET_BURST, DEFAULT_BUCKET_QPS, DEFAULT_ITEM_BASE_DELAY, DEFAULT_ITEM_MAX_DELAY,
    RateLimiter, set_ignore_early_failures,
};
pub use workers::{RetryPolicy, run_workers, run_workers_with};
pub use workqueue::{QueueKey, WorkQueue};
