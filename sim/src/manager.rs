//! One incarnation of the controller-manager under test: the real controller crates started
//! as `src/main.rs` starts them (one informer factory, one client per controller, the
//! controllers' default configuration), on clients of the simulated API server that carry
//! the incarnation's epoch, so that a crash fences everything it still has in flight.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use rkcm_runtime::cache::{ContentType, InformerFactory, ListMode, Scope, ShardScope};
use rkcm_runtime::clock::{Clock, SharedClock};
use rkcm_runtime::shard::{ShardConfig, Shards};
use rkcm_runtime::{CancellationToken, ControllerContext};
use rkcm_testkit::sim::SimApi;

/// Each controller the simulator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ctl {
    ReplicaSet,
    Deployment,
    /// The Deployment controller with rkcm's opt-in rollback on progress deadline: broken
    /// templates (`bad:N` images, never Ready) on an opted-in Deployment and on one that is
    /// not.
    DeploymentRollback,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    PodGc,
    TtlAfterFinished,
    /// Two replicas of a sharded manager (`--rkcm-shards`) running the Deployment and
    /// ReplicaSet controllers (and PodGC) over a workload spread across namespaces, with
    /// crashes, cut-offs, stalled lease renewals, joins and leaves of single replicas.
    Sharded2,
    /// The same with three replicas.
    Sharded3,
}

impl Ctl {
    pub const ALL: [Ctl; 9] = [
        Ctl::ReplicaSet,
        Ctl::Deployment,
        Ctl::DeploymentRollback,
        Ctl::StatefulSet,
        Ctl::DaemonSet,
        Ctl::Job,
        Ctl::CronJob,
        Ctl::PodGc,
        Ctl::TtlAfterFinished,
    ];

    /// The short name of the command line (`--controller`).
    pub fn name(self) -> &'static str {
        match self {
            Ctl::ReplicaSet => "replicaset",
            Ctl::Deployment => "deployment",
            Ctl::DeploymentRollback => "deployment-rollback",
            Ctl::StatefulSet => "statefulset",
            Ctl::DaemonSet => "daemonset",
            Ctl::Job => "job",
            Ctl::CronJob => "cronjob",
            Ctl::PodGc => "podgc",
            Ctl::TtlAfterFinished => "ttlafterfinished",
            Ctl::Sharded2 => "sharded-2",
            Ctl::Sharded3 => "sharded-3",
        }
    }

    /// How many sharded replicas the scenario runs (1: one unsharded manager).
    pub fn replicas(self) -> usize {
        match self {
            Ctl::Sharded2 => 2,
            Ctl::Sharded3 => 3,
            _ => 1,
        }
    }

    /// Whether the scenario runs sharded replicas.
    pub fn is_sharded(self) -> bool {
        self.replicas() > 1
    }

    /// Scenarios run only when named (`--controller NAME`), not by `all` nor by the fixed
    /// seeds of `make test`: the sharded scenarios (`make test` runs a few of their seeds).
    pub const NAMED_ONLY: [Ctl; 2] = [Ctl::Sharded2, Ctl::Sharded3];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::NAMED_ONLY)
            .find(|c| c.name() == s)
    }

    /// The user agent its client carries, as the audit log names it.
    pub fn agent(self) -> &'static str {
        match self {
            Ctl::ReplicaSet => "replicaset-controller",
            Ctl::Deployment | Ctl::DeploymentRollback => "deployment-controller",
            Ctl::StatefulSet => "statefulset-controller",
            Ctl::DaemonSet => "daemonset-controller",
            Ctl::Job => "job-controller",
            Ctl::CronJob => "cronjob-controller",
            Ctl::PodGc => "pod-garbage-collector",
            Ctl::TtlAfterFinished => "ttl-after-finished-controller",
            Ctl::Sharded2 | Ctl::Sharded3 => "rkcm",
        }
    }

    /// The controllers a scenario of this one runs: itself, those that make its workload
    /// move (a Deployment needs the ReplicaSet controller, a CronJob and the TTL controller
    /// the Job controller), and PodGC, which removes the pods of deleted nodes.
    pub fn with_helpers(self) -> Vec<Ctl> {
        let mut out = match self {
            Ctl::Deployment => vec![Ctl::Deployment, Ctl::ReplicaSet],
            Ctl::DeploymentRollback => vec![Ctl::DeploymentRollback, Ctl::ReplicaSet],
            Ctl::CronJob => vec![Ctl::CronJob, Ctl::Job],
            Ctl::TtlAfterFinished => vec![Ctl::TtlAfterFinished, Ctl::Job],
            Ctl::PodGc => vec![Ctl::PodGc, Ctl::ReplicaSet],
            Ctl::Sharded2 | Ctl::Sharded3 => vec![Ctl::Deployment, Ctl::ReplicaSet],
            c => vec![c],
        };
        if !out.contains(&Ctl::PodGc) {
            out.push(Ctl::PodGc);
        }
        out
    }
}

/// Wall-clock time of the simulation: a fixed start plus tokio's (paused) time since it.
#[derive(Debug, Clone)]
pub struct SimClock {
    pub start: tokio::time::Instant,
    pub base: jiff::Timestamp,
}

/// What a controller's own work costs in the simulation ([`Clock::work_time`]): the
/// DaemonSet controller spaces its syncs by 40 times its decision time, which measured for
/// real made a seed replay differently from one run to the next. About what a decision on a
/// few nodes takes, so the spacing still holds syncs back (by 4 ms).
pub const WORK_TIME: std::time::Duration = std::time::Duration::from_micros(100);

impl Clock for SimClock {
    fn wall(&self) -> jiff::Timestamp {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.start);
        let span = jiff::SignedDuration::try_from(elapsed).unwrap_or(jiff::SignedDuration::MAX);
        self.base.checked_add(span).unwrap_or(self.base)
    }

    fn work_time(&self, _started: std::time::Instant) -> std::time::Duration {
        WORK_TIME
    }
}

/// A running incarnation.
pub struct Manager {
    pub epoch: u64,
    pub shutdown: CancellationToken,
    /// Sharded mode: its view of the ring and the task holding its range Leases (which, on
    /// `shutdown`, hands every range over and ends).
    pub shards: Option<Holder>,
}

/// A replica's view of the ring and the task holding its range Leases.
pub type Holder = (Arc<Shards>, tokio::task::JoinHandle<()>);

/// The terminated-pod threshold of PodGC in its own scenario.
const PODGC_SCENARIO_THRESHOLD: i32 = 3;

/// The pause between two sweeps of PodGC in its own scenario (upstream's is 20 s). A sweep
/// decides on its caches as they are, and the fault model lets a watch lag at most 10 s: with
/// sweeps 20 s apart, the deletion of a pod PodGC just removed is nearly always cached before
/// the next sweep, so a pod re-created under the same name is never judged by the old pod's
/// entry. With a sweep every second, several sweeps fall inside one lag window, which is what
/// the UID preconditions of PodGC's writes are for.
const PODGC_SCENARIO_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

/// Starts the controllers `ctls` as incarnation `epoch`.
pub fn start(api: &SimApi, clock: &SharedClock, ctls: &[Ctl], epoch: u64) -> Manager {
    start_with(api, clock, ctls, epoch, None)
}

/// The shard holder (started) and the informer factory of incarnation `epoch`: the whole
/// cluster, or with `shards` only the held ranges' namespaces.
fn holder_and_informers(
    api: &SimApi,
    clock: &SharedClock,
    epoch: u64,
    shards: Option<ShardConfig>,
    shutdown: &CancellationToken,
) -> (Option<Holder>, InformerFactory) {
    let shards = shards.map(|cfg| {
        let shards = Shards::new(cfg, clock.clone());
        let holder = tokio::spawn(
            shards
                .clone()
                .run(api.client(epoch, "rkcm-shards"), shutdown.clone()),
        );
        (shards, holder)
    });
    let factory = match &shards {
        None => InformerFactory::with_options(
            api.client(epoch, "informers"),
            ListMode::Paged,
            ContentType::Json,
        ),
        Some((s, _)) => InformerFactory::scoped_with(
            api.client(epoch, "informers"),
            Scope::Shards(ShardScope(s.clone())),
            ListMode::Paged,
            ContentType::Json,
        ),
    };
    (shards, factory)
}

/// Starts the controllers `ctls` as incarnation `epoch`; with `shards`, as one replica of a
/// sharded manager (`--rkcm-shards`): its shard holder on its own client, informers that
/// keep only the held ranges' namespaces, and workers that sync only those.
pub fn start_with(
    api: &SimApi,
    clock: &SharedClock,
    ctls: &[Ctl],
    epoch: u64,
    shards: Option<ShardConfig>,
) -> Manager {
    let shutdown = CancellationToken::new();
    let (shards, factory) = holder_and_informers(api, clock, epoch, shards, &shutdown);
    let view = shards.as_ref().map(|(s, _)| s.clone());
    let sharded = view.is_some();
    // Sharded: every controller's writes go through the fence but PodGC's, whose
    // terminated-pod threshold writes across namespaces under the global Lease (it gates
    // each write itself: the pod's range, or the global Lease).
    let ctx = |c: Ctl| ControllerContext {
        client: api.client_fenced(epoch, c.agent(), view.clone().filter(|_| c != Ctl::PodGc)),
        budget: None,
        informers: factory.clone(),
        shutdown: shutdown.clone(),
        clock: clock.clone(),
        shards: view.clone(),
    };
    for &c in ctls {
        let ctx = ctx(c);
        match c {
            Ctl::ReplicaSet => {
                rkcm_replicaset::informers::<ReplicaSet>(&factory);
                tokio::spawn(async move {
                    // The no-expectations mutant runs with the stale-cache guard's gate off
                    // (`StaleControllerConsistencyReplicaSet=false`, a supported setting):
                    // with it on, the guard also holds syncs until the controller's own pod
                    // creates are cached, and expectations are a second line.
                    let cfg = rkcm_replicaset::Config {
                        stale_cache_guard: !rkcm_runtime::mutants::on("no-expectations"),
                        ..Default::default()
                    };
                    let _ = rkcm_replicaset::start_replicaset(ctx, cfg).await;
                });
            }
            Ctl::Deployment | Ctl::DeploymentRollback => {
                rkcm_deployment::informers(&factory);
                tokio::spawn(async move {
                    let _ = rkcm_deployment::start(ctx, Default::default()).await;
                });
            }
            Ctl::StatefulSet => {
                rkcm_statefulset::informers(&factory);
                tokio::spawn(async move {
                    // The stuck-rollout recovery's time shortened so that it can act within
                    // a run (the scenario's set `queue` opts in).
                    let cfg = rkcm_statefulset::Config {
                        recover_stuck_after: std::time::Duration::from_secs(20),
                        ..Default::default()
                    };
                    let _ = rkcm_statefulset::start(ctx, cfg).await;
                });
            }
            Ctl::DaemonSet => {
                rkcm_daemonset::informers(&factory);
                tokio::spawn(async move {
                    let _ = rkcm_daemonset::start(ctx, Default::default()).await;
                });
            }
            Ctl::Job => {
                rkcm_job::informers(&factory);
                tokio::spawn(async move {
                    let _ = rkcm_job::start(ctx, Default::default()).await;
                });
            }
            Ctl::CronJob => {
                rkcm_cronjob::informers(&factory);
                let cfg = rkcm_cronjob::Config {
                    local_time_zone: jiff::tz::TimeZone::UTC,
                    ..Default::default()
                };
                tokio::spawn(async move {
                    let _ = rkcm_cronjob::start(ctx, cfg).await;
                });
            }
            Ctl::PodGc => {
                rkcm_podgc::informers(&factory);
                // In its own scenario PodGC also keeps terminated pods to a handful
                // (`--terminated-pod-gc-threshold`), a rule that deletes without quarantine,
                // and sweeps every second; as every other scenario's helper it keeps
                // upstream's defaults.
                // The sharded scenarios keep a handful too, so that the threshold pass of the
                // global Lease's holder runs.
                let cfg = if ctls.first() == Some(&Ctl::PodGc) {
                    rkcm_podgc::Config {
                        terminated_pod_gc_threshold: PODGC_SCENARIO_THRESHOLD,
                        gc_check_period: PODGC_SCENARIO_PERIOD,
                        ..Default::default()
                    }
                } else if sharded {
                    rkcm_podgc::Config {
                        terminated_pod_gc_threshold: PODGC_SCENARIO_THRESHOLD,
                        ..Default::default()
                    }
                } else {
                    rkcm_podgc::Config::default()
                };
                tokio::spawn(async move {
                    let _ = rkcm_podgc::start(ctx, cfg).await;
                });
            }
            Ctl::TtlAfterFinished => {
                rkcm_ttlafterfinished::informers(&factory);
                tokio::spawn(async move {
                    let _ = rkcm_ttlafterfinished::start(ctx, Default::default()).await;
                });
            }
            // A scenario name, not a controller: its controllers are its helpers.
            Ctl::Sharded2 | Ctl::Sharded3 => {}
        }
    }
    factory.start(shutdown.clone());
    Manager {
        epoch,
        shutdown,
        shards,
    }
}

/// The shared clock of a run.
pub fn clock(start: tokio::time::Instant, base: jiff::Timestamp) -> SharedClock {
    Arc::new(SimClock { start, base })
}
