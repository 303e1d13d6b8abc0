//! The real-plane harness every controller suite shares.
//!
//! - [`Env`]: one test's cluster connection and namespace, generic object helpers (create,
//!   read, patch, waits that say what they last saw), pod helpers (the ones a kubelet or
//!   the scheduler would do: Running+Ready with conditions and timestamps, binding, phases,
//!   termination), events lookup, and [`Env::finish`], a cleanup that releases every
//!   finalizer a test put on and removes the pods, so the namespace can go.
//! - [`Controllers`]: a set of in-process controllers on one informer factory of their own;
//!   started, stopped (checking they end cleanly), stopped when dropped.
//! - [`Manager`]: a controller-manager process (the rkcm binary or upstream's) confined to
//!   the test namespace by a [`ScopedProxy`](crate::ScopedProxy).
//! - [`RealNodes`]: the real nodes (kubelets with containerd) of the local plane: placing
//!   pods there ([`on_real_nodes`]), asking a node's containerd whether a container runs,
//!   freezing a kubelet to cut its node off.
//! - [`OffsetClock`]: a controller clock running at real speed from an instant the test sets.
//! - [`History`]: every version of every object of one kind from a watch, for "never" and
//!   "before" claims; [`Readier`]: plays the kubelet for pods as they appear.
//! - [`JobPodRunner`]: plays the kubelet for Job pods (run, then exit with a chosen code, or
//!   keep running); [`Env::terminate_at`] finishes one pod at a chosen time;
//!   [`index_overlaps`]: two live pods of one completion index in a pod history.
//! - Free functions: object accessors, small JSON builders, `ensure`-style assertions.

mod admission;
mod checks;
mod clock;
mod controllers;
mod env;
mod history;
mod job_pods;
mod manager;
mod objects;
mod real_nodes;
mod seen;

pub use admission::DenyPolicy;
pub use checks::*;
pub use clock::OffsetClock;
pub use controllers::Controllers;
pub use env::*;
pub use history::{History, Readier, Seen};
pub use job_pods::{
    COMPLETION_INDEX, IndexOverlap, JobPodRunner, completion_index, index_overlaps, job_complete,
    job_controlled, terminated_status,
};
pub use manager::{E2E_BIN_ENV, Manager, ManagerKind, RKCM_BIN_ENV, e2e_bin, rkcm_binary};
pub use objects::*;
pub use real_nodes::{
    FrozenKubelet, OUT_OF_SERVICE, REAL_NODE_LABEL, REAL_NODE_TAINT, RealNodes, SKIP_ENV,
    kwok_or_real_affinity, on_real_nodes, running_container,
};
pub use seen::*;

/// Declares a real-plane scenario test: `body(&env)` runs in a fresh [`Env`] whose namespace
/// is named after `prefix`, and [`Env::finish`] cleans up after it whatever the outcome.
/// The test is ignored unless run with `--include-ignored` (it needs the plane). It runs on
/// two worker threads; with `; all_threads` after `body`, on tokio's default (one per core).
///
/// With `; start = start_fn` after `body`, `start_fn(&env)` (returning [`Controllers`]) runs
/// before the body and the controllers are stopped after it ([`Controllers::stop`]: a
/// controller that does not end cleanly fails the test, after the body's own error).
///
/// ```ignore
/// rkcm_testkit::scenario! {
///     /// What the scenario shows.
///     scales_up, "rs-scale-up", scale_up
/// }
/// rkcm_testkit::scenario! {
///     completes, "job-basic", complete_three; start = crate::harness::start
/// }
/// ```
#[macro_export]
macro_rules! scenario {
    (@test ($($how:tt)*) $(#[$meta:meta])* $name:ident, $prefix:literal, $body:path) => {
        $(#[$meta])*
        #[tokio::test($($how)*)]
        #[ignore = "needs apiserver: make test"]
        async fn $name() -> ::anyhow::Result<()> {
            let env = $crate::harness::Env::new($prefix).await?;
            let result = $body(&env).await;
            env.finish(result).await
        }
    };
    (@test ($($how:tt)*) $(#[$meta:meta])* $name:ident, $prefix:literal, $body:path,
        $start:path) => {
        $(#[$meta])*
        #[tokio::test($($how)*)]
        #[ignore = "needs apiserver: make test"]
        async fn $name() -> ::anyhow::Result<()> {
            let env = $crate::harness::Env::new($prefix).await?;
            let controllers: $crate::harness::Controllers = $start(&env);
            let result = $body(&env).await;
            let stopped = controllers.stop().await;
            env.finish(result.and(stopped)).await
        }
    };
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $body:path; start = $start:path) => {
        $crate::scenario!(
            @test (flavor = "multi_thread", worker_threads = 2) $(#[$meta])* $name, $prefix, $body,
            $start
        );
    };
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $body:path; all_threads) => {
        $crate::scenario!(@test (flavor = "multi_thread") $(#[$meta])* $name, $prefix, $body);
    };
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $body:path) => {
        $crate::scenario!(
            @test (flavor = "multi_thread", worker_threads = 2) $(#[$meta])* $name, $prefix, $body
        );
    };
}

#[cfg(test)]
mod tests;
