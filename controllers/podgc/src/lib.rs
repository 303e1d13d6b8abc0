//! PodGC: force-deletes the pods nothing else will ever clean up.
//!
//! Mirrors upstream `pkg/controller/podgc/gc_controller.go` (Kubernetes v1.37). Every 20 s
//! (sliding) it sweeps a snapshot of the shared pod and node caches:
//!
//! 1. **terminated** — when more than `--terminated-pod-gc-threshold` pods (cluster-wide) are
//!    in a phase other than `Pending`/`Running`/`Unknown`, the excess is deleted: evicted pods
//!    first, then oldest `creationTimestamp`, ties by name. A threshold ≤ 0 disables only this
//!    sweep.
//! 2. **out-of-service** — terminating pods on a node that is not Ready and carries the
//!    `node.kubernetes.io/out-of-service` taint (any value, any effect).
//! 3. **orphaned** — pods bound to a node the cache does not know, once the name has been in
//!    quarantine for 40 s *and* a live `GET` of the node answered 404.
//! 4. **unscheduled** — terminating pods never bound to a node.
//!
//! # Guarantees
//! - Force deletion (grace period 0) happens only for the pods above; PodGC never deletes a
//!   running pod because of the threshold, never a terminating pod on a Ready node, never a
//!   non-terminating pod on an existing node. It is the only rkcm controller that
//!   force-deletes (SAFE-01, SAFE-05; a unit test scans the workspace for others).
//! - A pod whose node is merely missing from a lagging cache is never deleted: the orphan
//!   path needs both the quarantine and an authoritative 404. Errors from that `GET` never
//!   cause a deletion, and a restart only restarts the quarantine.
//! - A non-terminal pod is first moved to `Failed` by a server-side apply (field manager
//!   `PodGC`), orphans also get `DisruptionTarget`/`DeletionByPodGC`; if that write fails the
//!   pod is not deleted. Both the write and the delete are UID-guarded, so a pod re-created
//!   under the same name is never touched.
//! - One failing pod never stops a sweep; failures are logged with the pod and counted in
//!   `pod_gc_collector_force_delete_pod_errors_total{namespace,reason}`.
//!
//! # Watches and writes
//! Reads the shared Pod and Node informers (no event handlers) and `GET nodes/{name}`.
//! Writes `pods/status` (apply) and `DELETE pods` (grace period 0). Emits no Events.
//! RBAC: pods list/watch/delete, pods/status patch, nodes get/list.

mod config;
pub mod consts;
mod error;
pub mod explain;
mod metrics;
pub mod plan;
mod reconcile;
mod sharded;
pub mod status;

#[cfg(test)]
mod force_delete_scan;

use rkcm_runtime::ControllerContext;
use rkcm_runtime::cache::InformerFactory;
use rkcm_runtime::cache::cached::{Node, Pod};
use rkcm_runtime::cache::projection;
use rkcm_runtime::controller::{SyncProbe, probes, run_when_synced};

pub use config::{
    Config, DEFAULT_DELETE_CONCURRENCY, DEFAULT_GC_CHECK_PERIOD, DEFAULT_QUARANTINE,
    DEFAULT_TERMINATED_POD_GC_THRESHOLD, NAME, Options,
};
pub use error::Error;
pub use plan::Reason;

/// What this controller reads of a cached pod beyond the base fields (see
/// `rkcm_runtime::cache::projection`): nothing; node name, phase, deletion and conditions are base
/// fields.
pub const POD_FIELDS: projection::Fields = projection::Fields::BASE;

/// The informers PodGC reads (pods and nodes), requested from `factory`. The process
/// requests them before starting its informers; [`start`] waits for the same list.
pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe> {
    factory.informer::<Pod>().keep(POD_FIELDS);
    probes::<(Pod, Node)>(factory)
}

/// Runs PodGC until `ctx.shutdown` is cancelled: waits for the pod and node caches, then
/// sweeps at once and every `cfg.gc_check_period` after each sweep ends. Returns `Ok(())` on
/// shutdown (also when shut down before the caches synced); per-pod errors never end it.
///
/// Sweeps see every pod of `ctx.informers`: a factory scoped to some namespaces (tests sharing
/// a cluster) limits PodGC, and its terminated threshold, to those namespaces. In sharded mode
/// (`ctx.shards`) a replica sweeps the namespaces of its ranges, and the threshold runs in
/// the replica holding the global shard Lease, over the whole cluster ([`sharded`]).
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    // Register the counters before the first sweep so a scrape sees them early.
    metrics::get();
    let wait_for = informers(&ctx.informers);
    let pod_store = ctx.informers.informer::<Pod>().store();
    let node_store = ctx.informers.informer::<Node>().store();
    run_when_synced(&ctx, NAME, wait_for, || async {
        let period = cfg.gc_check_period;
        let mut sweeper = reconcile::Sweeper::new(
            reconcile::KubeApi::new(ctx.client.clone()),
            cfg,
            ctx.clock.clone(),
        );
        let mut sharded = ctx
            .shards
            .clone()
            .map(|shards| sharded::Sharded::new(shards, ctx.informers.clone(), POD_FIELDS));
        if let Some(sharded) = &sharded {
            sweeper = sweeper.with_shards(sharded.shards().clone());
        }
        let snapshot = move || match sharded.as_mut() {
            None => reconcile::Snapshot::from((pod_store.list(), node_store.list())),
            Some(sharded) => reconcile::Snapshot {
                pods: sharded.owned(pod_store.list()),
                nodes: node_store.list(),
                terminated: sharded.terminated(),
            },
        };
        reconcile::run_sweeps(sweeper, snapshot, period, ctx.shutdown.cancelled()).await;
    })
    .await;
    Ok(())
}

/// The single write step of every sweep, exported so that harnesses can drive it with a
/// deliberately stale pod (for example to prove the UID guards): marks `pod` `Failed` unless
/// it is terminal (plus `DisruptionTarget` for [`Reason::Orphaned`]), then deletes it with
/// grace period 0 and a UID precondition. Counts nothing.
pub async fn mark_failed_and_delete(
    client: &kube::Client,
    pod: &Pod,
    reason: Reason,
    now: jiff::Timestamp,
) -> Result<(), Error> {
    reconcile::mark_failed_and_delete(&reconcile::KubeApi::new(client.clone()), pod, reason, now)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::Duration;

    /// Compile-time check: the process spawns `start` on a multi-threaded runtime.
    #[allow(dead_code)]
    fn start_future_is_send(ctx: ControllerContext) {
        fn assert_send<T: Send>(_: &T) {}
        assert_send(&start(ctx, Config::default()));
    }

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        podgc: Options,
    }

    #[test]
    fn defaults_are_upstream() {
        let cfg = Config::default();
        assert_eq!(cfg.terminated_pod_gc_threshold, 12500);
        assert_eq!(cfg.gc_check_period, Duration::from_secs(20));
        assert_eq!(cfg.quarantine, Duration::from_secs(40));
        assert!(cfg.delete_concurrency > 0);
        assert_eq!(NAME, "pod-garbage-collector-controller");
        assert_eq!(Config::from(&Options::default()), cfg);
    }

    #[test]
    fn flag_parses_like_upstream() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("rkcm").chain(args.iter().copied()))
                .map(|c| c.podgc)
        };
        assert_eq!(
            parse(&[]).expect("defaults").terminated_pod_gc_threshold,
            12500
        );
        assert_eq!(
            parse(&["--terminated-pod-gc-threshold=3"])
                .expect("=")
                .terminated_pod_gc_threshold,
            3
        );
        assert_eq!(
            parse(&["--terminated-pod-gc-threshold", "0"])
                .expect("0")
                .terminated_pod_gc_threshold,
            0
        );
        assert_eq!(
            parse(&["--terminated-pod-gc-threshold", "-1"])
                .expect("negative")
                .terminated_pod_gc_threshold,
            -1
        );
        assert!(parse(&["--terminated-pod-gc-threshold=x"]).is_err());
        assert!(
            parse(&["--terminated-pod-gc-threshold=3000000000"]).is_err(),
            "int32 range"
        );
        let cfg = Config::from(&parse(&["--terminated-pod-gc-threshold=7"]).expect("7"));
        assert_eq!(
            cfg,
            Config {
                terminated_pod_gc_threshold: 7,
                ..Config::default()
            }
        );
    }
}
