//! rkcm-runtime: the machinery every rkcm controller shares, and no controller policy.
//!
//! Mirrors the parts of client-go and `k8s.io/kubernetes/pkg/controller` that upstream
//! kube-controller-manager controllers stand on. It is laid out in rooms, each a folder:
//! - [`cache`]: one list+watch per resource type for the whole process, indexed stores,
//!   `(old, new)` change delivery, tombstones on relist (client-go `tools/cache`); the slim
//!   cached types ([`cache::cached`]) and the projections of what controllers read
//!   ([`cache::projection`]). Namespace scoping for tests: [`cache::Scope`].
//! - [`queue`]: the work queue (dedup, per-key exclusion, delays and rate limits, client-go
//!   `util/workqueue`) and its workers; the one token bucket ([`queue::flowcontrol`], client-go
//!   `util/flowcontrol`, `golang.org/x/time/rate`) and the pacing of syncs and status writes
//!   ([`queue::pacing`]).
//! - [`api`]: the API client per controller with a QPS/burst token bucket (client-go `rest`),
//!   the writes ([`api::write`]) and the protobuf encoding ([`api::protobuf`]).
//! - [`workload`]: the workload helpers (upstream `pkg/controller/controller_utils.go`,
//!   `history` and `util/`): label selectors, pod predicates, pod control, controller refs,
//!   ControllerRevision history, expectations, the stale-cache guard
//!   ([`workload::consistency`]) and the mapping of child changes to owner keys.
//! - [`events`]: core/v1 Event recording with client-go's correlation and spam filter.
//!
//! On the ground floor, what every room uses: [`error`], [`clock`], [`keys`] (object keys),
//! [`metrics`] (the process-wide Prometheus registry with upstream metric names),
//! [`tracked`] (the sizes of the maps controllers keep per object, exported as
//! `rkcm_tracked_entries`, so a map that keeps entries of deleted objects shows),
//! [`duration`], [`fasthash`] and [`jitter`] (seedable randomness), [`mutants`] (the
//! simulator's deliberate bugs, compiled in only with the `sim-mutants` feature). On top: [`context`] (what a controller is started with) and
//! [`controller`] (the one start loop, and the [`controller::SyncProbe`] declaration of the
//! informers a controller reads).

pub mod api;
pub mod cache;
pub mod clock;
pub mod context;
pub mod controller;
pub mod duration;
pub mod error;
pub mod events;
pub mod explain;
pub mod fasthash;
pub mod handover;
pub mod jitter;
pub mod keys;
pub mod metrics;
pub mod mutants;
pub mod queue;
pub mod shard;
#[cfg(test)]
mod test_log;
pub mod tracked;
pub mod workload;

pub use context::ControllerContext;
pub use error::Error;
pub use tokio_util::sync::CancellationToken;
