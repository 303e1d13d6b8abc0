//! What a fault run is given (sizes, timings, the controllers both managers run) and what it
//! reports (violations, convergence, faults, handovers, cuts, rejected creates).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::harness::ManagerKind;
use crate::invariants::Violation;

/// The controllers both managers run in these scenarios.
pub const CONTROLLERS: &str = "replicaset-controller,deployment-controller";

/// The controllers of the `-all` variants (`kill-churn-all`, ...): every workload controller
/// rkcm runs.
pub const ALL_CONTROLLERS: &str = "replicaset-controller,deployment-controller,statefulset-controller,daemonset-controller,job-controller,cronjob-controller";

/// Sizes and timings of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long the churn and faults last.
    pub duration: Duration,
    /// Range of the time between two kills.
    pub kill_every: (Duration, Duration),
    /// Pod deletions per second.
    pub delete_rate: u32,
    pub deployments: usize,
    pub replicasets: usize,
    pub replicas: i32,
    /// How late the pod watch delivers in `watch-gap`.
    pub watch_delay: Duration,
    /// How long convergence may take after the last fault.
    pub converge_timeout: Duration,
    /// Client rate limits of the manager.
    pub qps: u32,
    /// `apiserver-restart`: how long the API server stays down.
    pub apiserver_down: Duration,
    /// `apiserver-restart`: the plane's `e2e/cluster.sh` (its `stop`/`start` commands).
    pub cluster_script: Option<std::path::PathBuf>,
    /// `watch-410`: the pod watch delay of its second half (longer than the 5-minute
    /// expectations timeout).
    pub long_watch_delay: Duration,
    /// `watch-410`: time between two forced expiries (etcd compaction + 410) in its first half.
    pub expire_every: Duration,
    /// `partition`: the cuts, in order (each cuts the current leader off).
    pub cuts: Vec<(crate::proxy::Cut, Duration)>,
    /// `reject-creates`: how long pod creates are rejected.
    pub reject_for: Duration,
    /// `soak`: how long the steady churn lasts (instead of `duration`).
    pub soak_duration: Duration,
    /// `soak`: time between two RSS samples of the manager.
    pub rss_every: Duration,
    /// `rebalance`: ranges of the ring.
    pub shards: u32,
    /// `rebalance`: range handovers to reach before the last fault.
    pub rebalances: u64,
    /// `rebalance`: lease duration, renew deadline and retry period of the shard Leases.
    pub shard_timings: (Duration, Duration, Duration),
    /// `rebalance`: churned namespaces (spread over the ring).
    pub shard_namespaces: usize,
    /// `rebalance`: the longest the replica cycling may take before it gives up.
    pub rebalance_timeout: Duration,
    /// `soak`: samples before this are the warm-up, left out of the growth verdict.
    pub soak_warmup: Duration,
}

impl Options {
    /// How long `scenario` churns: the soak's own duration, or [`Self::duration`].
    pub fn churn_time(&self, scenario: &str) -> Duration {
        if scenario.starts_with("soak") {
            self.soak_duration
        } else {
            self.duration
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(600),
            kill_every: (Duration::from_secs(30), Duration::from_secs(90)),
            delete_rate: 10,
            deployments: 3,
            replicasets: 2,
            replicas: 5,
            watch_delay: Duration::from_secs(30),
            converge_timeout: Duration::from_secs(300),
            qps: 100,
            apiserver_down: Duration::from_secs(30),
            cluster_script: None,
            long_watch_delay: Duration::from_secs(360),
            expire_every: Duration::from_secs(15),
            cuts: vec![
                (crate::proxy::Cut::Blackhole, Duration::from_secs(60)),
                (crate::proxy::Cut::Refuse, Duration::from_secs(300)),
            ],
            reject_for: Duration::from_secs(60),
            soak_duration: Duration::from_secs(3600),
            rss_every: Duration::from_secs(60),
            soak_warmup: Duration::from_secs(600),
            shards: 64,
            rebalances: 1000,
            shard_timings: (
                Duration::from_secs(4),
                Duration::from_secs(3),
                Duration::from_secs(1),
            ),
            shard_namespaces: 6,
            rebalance_timeout: Duration::from_secs(1800),
        }
    }
}

/// One scenario's outcome for one manager.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Outcome {
    pub scenario: String,
    pub manager: String,
    pub duration_s: f64,
    /// Faults injected (kills; or watch-delay windows).
    pub faults: u32,
    pub pod_deletions: u64,
    pub spec_changes: u64,
    pub violations: Vec<Violation>,
    /// Suspicions the checker could not judge: the watch their bound comes from was down
    /// around them (see `invariants::Checker::unjudged`).
    #[serde(default)]
    pub unjudged: u64,
    pub watch_gaps: usize,
    pub changes_observed: u64,
    /// The baseline change to settled, no fault.
    pub undisturbed_converge_s: f64,
    /// The same change with the last fault to settled; `None` if it did not converge.
    pub converge_after_fault_s: Option<f64>,
    /// Panics in the manager's log, and exits it did not ask for.
    pub panics: usize,
    pub unexpected_exits: u32,
    pub error: Option<String>,
    /// `leader` only: one entry per handover.
    pub handovers: Vec<Handover>,
    /// `partition` only: one entry per cut.
    #[serde(default)]
    pub cuts: Vec<CutRecord>,
    /// `reject-creates` only: the last rejection window, measured.
    #[serde(default)]
    pub rejection: Option<Rejection>,
    /// Where the manager's log was kept (a row with a violation or an error).
    #[serde(default)]
    pub kept_log: Option<String>,
    /// `watch-410`: the manager's watch requests answered 410 Gone (each one a relist).
    #[serde(default)]
    pub gone_answers: u64,
    /// `soak`: the manager's `VmRSS` sampled every [`Options::rss_every`].
    #[serde(default)]
    pub rss: Vec<crate::invariants::soak::RssSample>,
    /// `soak`: samples before this many seconds are the warm-up.
    #[serde(default)]
    pub rss_warmup_s: f64,
    /// `rebalance`: the replicas, the handovers and the audit log's lease terms.
    #[serde(default)]
    pub rebalance: Option<Rebalance>,
    /// Why the scenario does not apply to this manager (nothing was run).
    #[serde(default)]
    pub not_applicable: Option<String>,
}

/// What `rebalance` did and what the audit log says about its shard Lease terms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rebalance {
    /// Ranges of the ring (`--rkcm-shards`).
    pub shards: u32,
    /// `--leader-elect-lease-duration/renew-deadline/retry-period` of every replica.
    pub timings: String,
    /// The churned namespaces and their ranges.
    pub namespaces: Vec<(String, u32)>,
    pub started: u32,
    pub killed: u32,
    pub terminated: u32,
    /// Replica count changes (each start, kill and stop), each waited for until the ring was
    /// balanced again.
    pub transitions: u32,
    /// Range handovers seen by the scenario's own Lease watch.
    pub watched_handovers: u64,
    /// Balanced rings seen (one after each replica change), and of them those where every
    /// replica held the range of at least one churned namespace.
    #[serde(default)]
    pub balanced: u32,
    #[serde(default)]
    pub spread: u32,
    /// The audit log's terms and the writes judged against them; `outside` keeps the first
    /// few, `outside_total` counts them all.
    pub check: super::terms::TermCheck,
    pub outside_total: usize,
    /// Of them, Events.
    #[serde(default)]
    pub outside_events: usize,
    /// Shard Lease writes logged without their body (the plane's audit policy must log them
    /// at Request level); non-zero makes the check incomplete.
    pub bodiless_lease_writes: usize,
}

/// The measured rejection window of `reject-creates`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rejection {
    pub rejected_s: f64,
    /// Pods deleted when the window opened (one per ReplicaSet).
    pub pods_deleted: usize,
    /// The binding's deletion to the first dry-run create that passed.
    pub admission_reopened_s: f64,
    /// The binding's deletion to the manager's first successful pod create; `None` if none
    /// within 120 s.
    pub first_create_s: Option<f64>,
    /// ReplicaSets short of pods when the rejection ended.
    #[serde(default)]
    pub short_replicasets: usize,
    /// The binding's deletion until every one of them had a new pod or was no longer short
    /// (scaled down by its Deployment; seen by polling the API every 250 ms); `None` if one
    /// had neither within [`RESUME_TIMEOUT`](crate::invariants::outages::RESUME_TIMEOUT).
    #[serde(default)]
    pub all_resumed_s: Option<f64>,
    /// The ReplicaSets that created no pod within [`RESUME_TIMEOUT`](crate::invariants::outages::RESUME_TIMEOUT).
    #[serde(default)]
    pub stuck: Vec<String>,
}

/// One cut of `partition`, measured from the audit log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CutRecord {
    /// `Blackhole` or `Refuse`.
    pub mode: String,
    pub cut_s: f64,
    pub leader: String,
    /// When the cut-off leader's process exited (it lost the lease), after the cut began.
    pub stepped_down_s: Option<f64>,
    pub new_leader: Option<String>,
    /// Cut to the new leader's first workload write.
    pub failover_gap_s: Option<f64>,
    /// Cut to the new holder's first Lease write.
    pub lease_moved_s: Option<f64>,
    /// The old leader's workload writes after the cut began.
    pub old_writes_after_cut: usize,
    /// The old leader's workload writes after the Lease changed hands.
    pub writes_after_lease_lost: usize,
    /// The old leader's workload writes later than its renew deadline after its last renewal.
    pub writes_after_renew_deadline: usize,
    /// Heal to settled.
    pub converge_after_heal_s: Option<f64>,
}

impl Outcome {
    /// What the invariant watcher saw: violations, gaps, unjudged suspicions, changes.
    pub fn record(&mut self, report: crate::invariants::watch::Report) {
        self.violations = report.violations;
        self.watch_gaps = report.gaps.len();
        self.unjudged = report.unjudged;
        self.changes_observed = report.observed;
    }

    /// The outcome of `scenario` for manager `kind`, nothing measured yet.
    pub fn empty(scenario: &str, kind: ManagerKind, duration_s: f64) -> Self {
        Outcome {
            scenario: scenario.to_owned(),
            manager: kind.name().to_owned(),
            duration_s,
            faults: 0,
            pod_deletions: 0,
            spec_changes: 0,
            violations: Vec::new(),
            unjudged: 0,
            watch_gaps: 0,
            changes_observed: 0,
            undisturbed_converge_s: 0.0,
            converge_after_fault_s: None,
            panics: 0,
            unexpected_exits: 0,
            error: None,
            handovers: Vec::new(),
            cuts: Vec::new(),
            rejection: None,
            kept_log: None,
            gone_answers: 0,
            rss: Vec::new(),
            rss_warmup_s: 0.0,
            rebalance: None,
            not_applicable: None,
        }
    }
}

/// One leader handover measured from the audit log.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Handover {
    /// `SIGKILL` or `SIGTERM`.
    pub signal: String,
    pub old_leader: String,
    pub new_leader: Option<String>,
    /// Fault to the new leader's first write of a workload object.
    pub gap_s: Option<f64>,
    /// The old leader's workload writes after the fault.
    pub old_writes_after_fault: usize,
    /// The old leader's workload writes after the new leader's first one.
    pub overlapping_writes: usize,
}
