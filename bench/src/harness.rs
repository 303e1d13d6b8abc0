//! The measurement loop every scenario shares. For each manager, in a fixed order
//! (upstream, then rkcm): the scenario sets up its objects in a namespace of that run, the
//! manager is started as a child process, the scenario drives and waits for convergence
//! (bounded by the timeout, cut short if the manager exits or says it lacks the
//! controller), the end state is verified while the manager still runs, CPU and memory are
//! read from /proc, the manager is stopped, its requests are counted from the audit log,
//! and the scenario cleans up so the next manager starts from the same cluster state.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use kube::Client;

use crate::audit;
use crate::manager::{self, Manager, Replicas, Running, Sharding};
use crate::procfs::{self, RssSampler};
use crate::results::{
    Correctness, Distribution, Metric, Milestone, Phase, RunResult, ScenarioResult, Status,
};

/// Everything a scenario run needs to know about the plane and the managers.
pub struct Env {
    /// Admin client of the plane (the bench's own requests; not counted for any manager).
    pub client: Client,
    pub cluster_dir: PathBuf,
    pub audit_log: PathBuf,
    pub bins: BTreeMap<Manager, PathBuf>,
    /// Managers to run, sorted: upstream first, then rkcm.
    pub managers: Vec<Manager>,
    /// Managers reported as not built (with the reason) instead of being run.
    pub not_built: BTreeMap<Manager, String>,
    pub qps: f32,
    pub burst: u32,
    /// Requests the bench keeps in flight while setting up and cleaning up.
    pub concurrency: usize,
    pub timeout: Duration,
    pub settle: Duration,
    pub logs_dir: PathBuf,
    /// Run the managers a second time in the opposite order (`ScenarioResult::reversed`).
    pub both_orders: bool,
    /// Replicas and ranges of the sharded rkcm variants.
    pub sharding: Sharding,
}

/// Handed to [`Scenario::converge`]: records milestones, timed phases and what is left to
/// do (for the timeout message), relative to the manager's start.
#[derive(Clone)]
pub struct Probe {
    started: Instant,
    manager: Manager,
    /// The manager's processes: one, or the replicas of a sharded run.
    pids: Vec<u32>,
    logs: Vec<PathBuf>,
    /// Replicas SIGKILLed on purpose ([`Probe::kill_replica`]); their exit does not end the run.
    killed: Arc<Mutex<BTreeSet<u32>>>,
    /// CPU seconds and `VmHWM` of each such replica just before its kill.
    gone: Arc<Mutex<BTreeMap<u32, Reading>>>,
    /// CPU seconds of processes a scenario ran in the manager's place ([`Probe::charge_cpu`]).
    charged: Arc<Mutex<f64>>,
    audit_log: PathBuf,
    milestones: Arc<Mutex<Vec<Milestone>>>,
    phases: Arc<Mutex<Vec<PhaseRecord>>>,
    progress: Arc<Mutex<String>>,
}

/// A process's CPU seconds and `VmHWM`.
type Reading = (Option<f64>, Option<u64>);

/// A phase begun with [`Probe::begin`]; hand it back to [`Probe::end`].
pub struct PhaseStart {
    name: String,
    at: Instant,
    cpu: Option<f64>,
    audit: Option<u64>,
}

/// A finished phase; its requests are counted from the audit log once the manager stopped.
struct PhaseRecord {
    phase: Phase,
    audit: Option<(u64, u64)>,
}

impl Probe {
    fn new(
        started: Instant,
        manager: Manager,
        pids: Vec<u32>,
        logs: Vec<PathBuf>,
        audit_log: PathBuf,
    ) -> Self {
        Self {
            started,
            manager,
            pids,
            logs,
            killed: Arc::default(),
            gone: Arc::default(),
            charged: Arc::default(),
            audit_log,
            milestones: Arc::default(),
            phases: Arc::default(),
            progress: Arc::default(),
        }
    }

    /// Records a milestone at `at` (e.g. when a watch saw the first deletion).
    pub fn mark_at(&self, name: &str, at: Instant) {
        let seconds = at.saturating_duration_since(self.started).as_secs_f64();
        say!("  {name} at {seconds:.1} s");
        self.milestones
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Milestone {
                name: name.to_string(),
                seconds,
            });
    }

    /// Records a milestone now (driven scenarios: "synced").
    pub fn mark(&self, name: &str) {
        self.mark_at(name, Instant::now());
    }

    /// Starts a timed phase now: call it just before the request that starts the step
    /// (e.g. the scale patch). The manager's CPU and the audit log position are noted.
    pub fn begin(&self, name: &str) -> PhaseStart {
        say!("  {name}: begins");
        PhaseStart {
            name: name.to_string(),
            at: Instant::now(),
            cpu: self.manager_cpu_seconds(),
            audit: audit::offset(&self.audit_log).ok(),
        }
    }

    /// Ends a phase now, when its condition has been observed; `note` says what the
    /// scenario saw (kept in the results).
    pub fn end(&self, start: PhaseStart, note: impl Into<String>) {
        let now = Instant::now();
        let cpu = self.manager_cpu_seconds();
        let audit_to = audit::offset(&self.audit_log).ok();
        let phase = Phase {
            name: start.name,
            start_seconds: start
                .at
                .saturating_duration_since(self.started)
                .as_secs_f64(),
            seconds: now.saturating_duration_since(start.at).as_secs_f64(),
            cpu_seconds: match (start.cpu, cpu) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            },
            peak_rss_bytes: self.manager_peak_rss_bytes(),
            requests: None,
            note: note.into(),
        };
        say!(
            "  {}: {:.1} s, cpu {:.2} s{}",
            phase.name,
            phase.seconds,
            phase.cpu_seconds.unwrap_or(f64::NAN),
            if phase.note.is_empty() {
                String::new()
            } else {
                format!(" ({})", phase.note)
            }
        );
        self.phases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(PhaseRecord {
                phase,
                audit: start.audit.zip(audit_to),
            });
    }

    /// What the scenario is waiting for now ("9 500 pods left").
    pub fn progress(&self, what: impl Into<String>) {
        *self
            .progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = what.into();
    }

    fn milestones(&self) -> Vec<Milestone> {
        self.milestones
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn take_phases(&self) -> Vec<PhaseRecord> {
        std::mem::take(
            &mut *self
                .phases
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn last_progress(&self) -> String {
        self.progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The manager's CPU time so far (utime+stime; a sharded run's: every replica's together,
    /// a replica killed on purpose counted until its kill; plus what was charged to it with
    /// [`Probe::charge_cpu`]), for scenario metrics of a window.
    pub fn manager_cpu_seconds(&self) -> Option<f64> {
        let own: Option<f64> = self.pids.iter().map(|&p| self.replica_reading(p).0).sum();
        own.map(|cpu| cpu + self.charged_cpu_seconds())
    }

    /// Charges `seconds` of CPU spent by a process the scenario ran in the manager's place to
    /// the manager: the phase in progress and the run's total count it. One rkcm's failover is
    /// a standby taking over, which lists everything again; the sharded failover's survivors
    /// list what they take, in the replicas' own CPU.
    pub fn charge_cpu(&self, seconds: f64) {
        *self
            .charged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) += seconds.max(0.0);
    }

    fn charged_cpu_seconds(&self) -> f64 {
        *self
            .charged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// CPU seconds and `VmHWM` of replica `pid`: now, or just before its kill.
    fn replica_reading(&self, pid: u32) -> Reading {
        let gone = self
            .gone
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&pid)
            .copied();
        gone.unwrap_or_else(|| (procfs::cpu_seconds(pid), procfs::status_bytes(pid, "VmHWM")))
    }

    /// The largest `VmHWM` of the manager's processes (per replica, not their sum).
    pub fn manager_peak_rss_bytes(&self) -> Option<u64> {
        self.pids
            .iter()
            .filter_map(|&p| self.replica_reading(p).1)
            .max()
    }

    /// The manager's processes (one, or a sharded run's replicas).
    pub fn manager_pids(&self) -> &[u32] {
        &self.pids
    }

    /// Which manager runs.
    pub fn manager(&self) -> Manager {
        self.manager
    }

    /// The logs of the manager's processes, in the order of [`Probe::manager_pids`].
    pub fn logs(&self) -> &[PathBuf] {
        &self.logs
    }

    /// SIGKILLs replica `pid` of a sharded run on purpose (the run goes on); its CPU and peak
    /// RSS until then still count.
    pub fn kill_replica(&self, pid: u32) {
        let reading = (procfs::cpu_seconds(pid), procfs::status_bytes(pid, "VmHWM"));
        self.gone
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(pid, reading);
        self.killed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(pid);
        manager::signal(pid, libc::SIGKILL);
    }

    /// The sum of the live processes' `VmRSS` (a sharded run's replicas together).
    pub fn manager_rss_sum_bytes(&self) -> Option<u64> {
        self.pids
            .iter()
            .filter_map(|&p| procfs::status_bytes(p, "VmRSS"))
            .reduce(|a, b| a + b)
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The manager's log (stdout and stderr; a sharded run's first replica's), e.g. to wait
    /// for a line it writes.
    pub fn log(&self) -> &Path {
        &self.logs[0]
    }

    /// The user name the manager's requests carry in the audit log.
    pub fn manager_user(&self) -> &'static str {
        self.manager.user()
    }

    /// The manager's process id (a sharded run's first replica's; e.g. to pause it while
    /// other replicas run).
    pub fn manager_pid(&self) -> u32 {
        self.pids[0]
    }

    /// The manager's resident memory now (`VmRSS`; a sharded run's: the largest replica's).
    pub fn manager_rss_bytes(&self) -> Option<u64> {
        self.pids
            .iter()
            .filter_map(|&p| procfs::status_bytes(p, "VmRSS"))
            .max()
    }
}

/// One benchmark scenario. The harness calls, per manager: `setup` → (manager starts) →
/// `converge` → (settle) → `verify` → (manager stops) → `cleanup`.
pub trait Scenario {
    /// Per-run data from setup to verify (expected end state, open watches ...).
    type State;

    /// Short id, also used in namespace and file names (`podgc-terminated`).
    fn id(&self) -> &'static str;
    fn title(&self) -> String;
    /// What is set up and what "converged" means, for the report.
    fn description(&self) -> String;
    fn params(&self) -> BTreeMap<String, String>;
    /// Canonical controller names for `--controllers` of both managers.
    fn controllers(&self) -> Vec<&'static str>;
    /// Scenario flags for both managers (`--terminated-pod-gc-threshold=5000`); none unless
    /// the scenario says.
    fn manager_flags(&self) -> Vec<String> {
        Vec::new()
    }
    /// Flags for a manager that runs as one process (after [`Scenario::manager_flags`]; a
    /// sharded run's replicas take their own), e.g. leader election as such a manager is
    /// deployed; none unless the scenario says.
    fn single_flags(&self) -> Vec<String> {
        Vec::new()
    }

    /// Creates the objects in `ns` (a namespace of this run) and arms observers, so that the
    /// manager can be started the moment this returns.
    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<Self::State>;
    /// Runs once the manager has started: drives the scenario (if it has steps) and returns
    /// when it has converged.
    async fn converge(
        &self,
        env: &Env,
        state: &mut Self::State,
        probe: &Probe,
    ) -> anyhow::Result<()>;
    /// Checks the end state (the manager still runs).
    async fn verify(&self, env: &Env, state: &mut Self::State) -> anyhow::Result<Correctness>;
    /// Scenario-specific numbers of the run, read after `verify` (e.g. Job lateness).
    fn metrics(&self, _state: &Self::State) -> Vec<Metric> {
        Vec::new()
    }
    /// Samples kept whole for the report's charts (e.g. every reaction latency), read after
    /// `metrics`.
    fn distributions(&self, _state: &Self::State) -> Vec<Distribution> {
        Vec::new()
    }
    /// Numbers derived from the run's own measurements (RSS, CPU) once they are read, just
    /// before the manager stops (e.g. bytes per cached object against a baseline run).
    fn run_metrics(&self, _run: &RunResult) -> Vec<Metric> {
        Vec::new()
    }
    /// When set, the run keeps its RSS curve: the largest `VmRSS` sample of each such
    /// stretch of time (reported as a table and a sparkline).
    fn rss_curve(&self) -> Option<Duration> {
        None
    }
    /// Removes what the run left in `ns` (also after a failed setup), so the next manager
    /// starts from the same cluster state. The run's `State` has been dropped already.
    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()>;
}

/// Waits until `check` of the model returns `Ok`, checking again on every change signalled on
/// `changed`; `Err(progress)` says what is still missing and goes to `probe`.
pub async fn wait_model<M, T>(
    model: &Mutex<M>,
    changed: &mut tokio::sync::watch::Receiver<u64>,
    probe: &Probe,
    mut check: impl FnMut(&M) -> Result<T, String>,
) -> anyhow::Result<T> {
    loop {
        changed.mark_unchanged();
        let r = check(
            &model
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        match r {
            Ok(v) => return Ok(v),
            Err(progress) => probe.progress(progress),
        }
        changed
            .changed()
            .await
            .context("the watches of the scenario ended")?;
    }
}

/// Waits (120 s at most) until `synced` holds of the model the watches of namespace `ns` keep,
/// checking on every change signalled on `changed`.
pub async fn wait_model_synced<M: Send + 'static>(
    model: Arc<Mutex<M>>,
    changed: &mut tokio::sync::watch::Receiver<u64>,
    ns: &str,
    synced: impl Fn(&M) -> bool,
) -> anyhow::Result<()> {
    let synced = tokio::time::timeout(
        Duration::from_secs(120),
        changed.wait_for(move |_| {
            synced(
                &model
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            )
        }),
    )
    .await
    .map(|r| r.is_ok());
    match synced {
        Ok(true) => Ok(()),
        Ok(false) => anyhow::bail!("the watches of {ns} ended before they synced"),
        Err(_) => anyhow::bail!("the watches of {ns} did not sync within 120 s"),
    }
}

/// Runs `scenario` for every manager of `env` in order, and with `env.both_orders` once
/// more in the opposite order.
pub async fn run<S: Scenario>(scenario: &S, env: &Env) -> ScenarioResult {
    let started_at = now();
    let mut runs = Vec::new();
    for &m in &env.managers {
        runs.push(run_logged(scenario, env, m, "").await);
    }
    let mut reversed = Vec::new();
    if env.both_orders && env.managers.len() > 1 {
        for &m in env.managers.iter().rev() {
            reversed.push(run_logged(scenario, env, m, " (opposite order)").await);
        }
    }
    ScenarioResult {
        scenario: scenario.id().to_string(),
        title: scenario.title(),
        description: scenario.description(),
        controllers: scenario
            .controllers()
            .iter()
            .map(|s| s.to_string())
            .collect(),
        manager_flags: scenario.manager_flags(),
        params: scenario.params(),
        kube_api_qps: env.qps,
        kube_api_burst: env.burst,
        timeout_seconds: env.timeout.as_secs(),
        settle_seconds: env.settle.as_secs(),
        started_at,
        finished_at: now(),
        origin: None,
        runs,
        reversed,
    }
}

async fn run_logged<S: Scenario>(scenario: &S, env: &Env, m: Manager, pass: &str) -> RunResult {
    say!("== {} / {}{pass}", scenario.id(), m.name());
    let r = run_one(scenario, env, m).await;
    say!(
        "== {} / {}{pass}: {}{}",
        scenario.id(),
        m.name(),
        r.status.label(),
        if r.message.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.message.lines().next().unwrap_or(""))
        }
    );
    r
}

enum Outcome {
    Converged,
    Failed(anyhow::Error),
    Timeout,
    Exited(u32, std::process::ExitStatus),
    Unsupported(&'static str),
}

/// A manager starts once the host's CPU has been at most this busy (all cores together) over
/// [`QUIET_WINDOW`], after the scenario's setup and the previous run's cleanup, waiting at most
/// [`QUIET_WAIT_LIMIT`].
const QUIET_HOST_SHARE: f64 = 0.25;
const QUIET_WINDOW: Duration = Duration::from_secs(5);
const QUIET_WAIT_LIMIT: Duration = Duration::from_secs(180);

async fn run_one<S: Scenario>(scenario: &S, env: &Env, m: Manager) -> RunResult {
    let bin = env.bins[&m].clone();
    let ns = format!("bench-{}-{}", scenario.id(), m.name());
    let mut r = RunResult::new(m, bin.display().to_string(), ns.clone());
    if let Some(why) = env.not_built.get(&m) {
        r.status = Status::NotBuilt;
        r.message = why.clone();
        return r;
    }
    if !bin.is_file() {
        r.status = Status::NotBuilt;
        r.message = format!("binary {} not found", bin.display());
        return r;
    }
    r.version = manager::version(&bin);

    say!("setup in namespace {ns}");
    let t = Instant::now();
    match scenario.setup(env, &ns).await {
        Ok(mut state) => {
            r.setup_seconds = Some(t.elapsed().as_secs_f64());
            measure(scenario, env, m, &bin, &mut state, &mut r).await;
        }
        Err(e) => r.message = format!("setup failed: {e:#}"),
    }

    say!("cleanup of {ns}");
    if let Err(e) = scenario.cleanup(env, &ns).await {
        // The next manager would start from a different state: say so, loudly.
        say!("WARNING: cleanup of {ns} failed: {e:#}");
        r.message = format!("{}\ncleanup failed: {e:#}", r.message)
            .trim()
            .to_string();
    }
    r
}

/// Waits for the scenario's convergence, the deadline, the manager's exit, or a log line
/// saying the manager does not run the controllers, reporting progress every 10 s.
async fn run_until_converged<S: Scenario>(
    scenario: &S,
    env: &Env,
    m: Manager,
    state: &mut S::State,
    probe: &Probe,
    proc: &mut Replicas,
) -> Outcome {
    let converge = scenario.converge(env, state, probe);
    tokio::pin!(converge);
    let deadline = tokio::time::sleep(env.timeout);
    tokio::pin!(deadline);
    let mut check = tokio::time::interval(Duration::from_secs(1));
    let mut report = tokio::time::interval(Duration::from_secs(10));
    report.tick().await;
    let markers = m.unsupported_markers();
    let log_path = proc.log().to_path_buf();
    loop {
        tokio::select! {
            res = &mut converge => break match res {
                Ok(()) => Outcome::Converged,
                Err(e) => Outcome::Failed(e),
            },
            _ = &mut deadline => break Outcome::Timeout,
            (pid, st) = proc.wait(&probe.killed) => break Outcome::Exited(pid, st),
            _ = check.tick() => {
                if let Some(marker) = log_has(&log_path, markers) {
                    break Outcome::Unsupported(marker);
                }
            }
            _ = report.tick() => {
                say!("  {:.0} s: {}", probe.elapsed().as_secs_f64(), probe.last_progress());
            }
        }
    }
}

/// The run's status and message from the outcome (timings and CPU when it converged);
/// the audit log's offset at convergence.
#[allow(clippy::too_many_arguments, reason = "the pieces of one run, all read")]
fn record_outcome<S: Scenario>(
    scenario: &S,
    env: &Env,
    m: Manager,
    outcome: &Outcome,
    converged_at: Duration,
    probe: &Probe,
    proc: &Replicas,
    r: &mut RunResult,
) -> Option<u64> {
    let mut audit_converge = None;
    match outcome {
        Outcome::Converged => {
            r.converge_seconds = Some(converged_at.as_secs_f64());
            r.cpu_seconds_converge = probe.manager_cpu_seconds();
            audit_converge = audit::offset(&env.audit_log).ok();
            say!(
                "converged in {:.1} s (cpu {:.1} s)",
                converged_at.as_secs_f64(),
                r.cpu_seconds_converge.unwrap_or(f64::NAN)
            );
        }
        Outcome::Failed(e) => {
            r.status = Status::Error;
            r.message = format!("{e:#}");
        }
        Outcome::Timeout => {
            r.status = Status::Timeout;
            r.message = format!(
                "not converged after {} s: {}",
                env.timeout.as_secs(),
                probe.last_progress()
            );
        }
        Outcome::Exited(pid, st) => {
            r.status = Status::Exited;
            r.message = format!(
                "{} (pid {pid}) exited ({st}) after {:.1} s; log tail:\n{}",
                m.name(),
                converged_at.as_secs_f64(),
                proc.log_tail(*pid, 8)
            );
        }
        Outcome::Unsupported(marker) => {
            r.status = Status::Unsupported;
            r.message = format!(
                "{} does not run {} (log: \"{marker}\")",
                m.name(),
                scenario.controllers().join(",")
            );
        }
    }
    audit_converge
}

/// After convergence and the settle time: the scenario's correctness check and metrics.
async fn verify_run<S: Scenario>(scenario: &S, env: &Env, state: &mut S::State, r: &mut RunResult) {
    // Let the manager keep running a little: a manager that over-deletes or keeps
    // working after the condition first holds is caught by verify and the counters.
    tokio::time::sleep(env.settle).await;
    match scenario.verify(env, state).await {
        Ok(c) => {
            say!(
                "correctness: {} ({})",
                if c.ok { "ok" } else { "WRONG" },
                c.detail
            );
            r.status = if c.ok { Status::Ok } else { Status::Incorrect };
            r.correctness = Some(c);
            r.metrics = scenario.metrics(state);
            r.distributions = scenario.distributions(state);
            for m in &r.metrics {
                say!("  {}: {} {}", m.name, m.value, m.unit);
            }
        }
        Err(e) => {
            r.status = Status::Error;
            r.message = format!("verification failed: {e:#}");
        }
    }
}

/// The run's requests from the audit log (over the run, by convergence, and per phase).
fn record_requests(
    env: &Env,
    m: Manager,
    audit_from: u64,
    audit_converge: Option<u64>,
    phases: Vec<PhaseRecord>,
    r: &mut RunResult,
) {
    match count_requests(&env.audit_log, m.user(), audit_from, audit_converge) {
        Ok((total, conv)) => {
            say!(
                "{} requests: {} ({})",
                m.name(),
                total.total,
                total
                    .by_request
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            r.requests = Some(total);
            r.requests_converge = conv;
        }
        Err(e) => say!("WARNING: counting requests failed: {e:#}"),
    }
    for PhaseRecord { mut phase, audit } in phases {
        if let Some((from, to)) = audit {
            match audit::count(&env.audit_log, m.user(), from, Some(to)) {
                Ok((c, _)) => {
                    say!(
                        "  {}: {} requests ({})",
                        phase.name,
                        c.total,
                        c.by_request
                            .iter()
                            .map(|(k, v)| format!("{k}: {v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    phase.requests = Some(c);
                }
                Err(e) => say!("WARNING: counting the requests of {}: {e:#}", phase.name),
            }
        }
        r.phases.push(phase);
    }
}

/// Waits for a quiet host before a manager starts: seconds waited and the share busy. The
/// limit is [`QUIET_WAIT_LIMIT`] unless `RKCM_BENCH_QUIET_WAIT` gives seconds (validation
/// runs on a shared machine).
async fn wait_for_quiet_host() -> (f64, f64) {
    let limit = std::env::var("RKCM_BENCH_QUIET_WAIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(QUIET_WAIT_LIMIT, Duration::from_secs);
    let (waited, busy) = procfs::wait_for_quiet_host(QUIET_HOST_SHARE, QUIET_WINDOW, limit).await;
    if waited > QUIET_WINDOW * 2 {
        say!(
            "waited {:.0} s for a quiet host ({:.0}% busy over the last {} s)",
            waited.as_secs_f64(),
            busy * 100.0,
            QUIET_WINDOW.as_secs()
        );
    }
    (waited.as_secs_f64(), busy)
}

/// Leader election over Lease `kube-system/<lease>` with the default timings: how a manager of
/// one process runs where the scenario compares it with sharded replicas
/// ([`Scenario::single_flags`]).
pub fn leader_elected(lease: &str) -> Vec<String> {
    vec![
        "--leader-elect=true".into(),
        format!("--leader-elect-resource-name={lease}"),
        "--leader-elect-resource-namespace=kube-system".into(),
    ]
}

async fn measure<S: Scenario>(
    scenario: &S,
    env: &Env,
    m: Manager,
    bin: &Path,
    state: &mut S::State,
    r: &mut RunResult,
) {
    let extra = m.extra_flags(
        scenario.manager_flags(),
        scenario.single_flags(),
        env.sharding,
    );
    r.args = m.args(
        &m.kubeconfig(&env.cluster_dir),
        &scenario.controllers(),
        env.qps,
        env.burst,
        &extra,
    );
    let logs = log_paths(env, scenario.id(), m);
    r.log = logs
        .iter()
        .map(|l| l.display().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let audit_from = match audit::offset(&env.audit_log) {
        Ok(o) => o,
        Err(e) => {
            r.message = format!("{e:#}");
            return;
        }
    };
    if m.is_sharded()
        && let Err(e) = clear_shard_leases(env).await
    {
        r.message = format!("{e:#}");
        return;
    }

    r.quiet_wait = Some(wait_for_quiet_host().await);
    let plane = plane_pids(&env.cluster_dir);
    let plane_cpu_before = plane_cpu(&plane);
    r.load_average_at_start = procfs::load_average();
    say!("starting {} (log {})", m.name(), r.log);
    let started = Instant::now();
    let mut proc = match spawn_replicas(bin, &r.args, &logs) {
        Ok(p) => p,
        Err(e) => {
            r.message = format!("{e:#}");
            return;
        }
    };
    let pids = proc.pids();
    let curve_bucket = scenario.rss_curve();
    let samplers: Vec<RssSampler> = pids
        .iter()
        .map(|&pid| RssSampler::start_with_curve(pid, Duration::from_millis(100), curve_bucket))
        .collect();
    let probe = Probe::new(started, m, pids, logs, env.audit_log.clone());

    let outcome = run_until_converged(scenario, env, m, state, &probe, &mut proc).await;
    let converged_at = started.elapsed();
    let audit_converge = record_outcome(scenario, env, m, &outcome, converged_at, &probe, &proc, r);
    r.milestones = probe.milestones();
    let phases = probe.take_phases();

    if matches!(outcome, Outcome::Converged) {
        verify_run(scenario, env, state, r).await;
    }

    read_usage(samplers, curve_bucket, &probe, &mut proc, r).await;
    if matches!(r.status, Status::Ok | Status::Incorrect) {
        let more = scenario.run_metrics(r);
        for x in &more {
            say!("  {}: {} {}", x.name, x.value, x.unit);
        }
        r.metrics.extend(more);
    }
    r.run_seconds = Some(started.elapsed().as_secs_f64());
    let plane_cpu_after = plane_cpu(&plane);
    r.plane_cpu_seconds = Some(
        plane_cpu_after
            .iter()
            .filter_map(|(k, after)| Some((k.clone(), after - plane_cpu_before.get(k)?)))
            .collect(),
    )
    .filter(|m: &BTreeMap<String, f64>| !m.is_empty());
    proc.stop(Duration::from_secs(10)).await;
    // Open watches reach ResponseComplete once the apiserver sees the connection close.
    tokio::time::sleep(Duration::from_secs(2)).await;
    record_requests(env, m, audit_from, audit_converge, phases, r);
    if let (Some(cpu), Some(hwm)) = (r.cpu_seconds_total, r.peak_rss_bytes) {
        say!(
            "{}: cpu {cpu:.2} s, peak rss {:.1} MiB{}",
            m.name(),
            hwm as f64 / 1048576.0,
            if r.replica_peak_rss_bytes.is_empty() {
                String::new()
            } else {
                format!(
                    " (largest of {} replicas; sum {:.1} MiB)",
                    r.replica_peak_rss_bytes.len(),
                    r.replica_peak_rss_bytes.iter().sum::<u64>() as f64 / 1048576.0
                )
            }
        );
    }
}

/// The log of each process of a run: `<scenario>-<manager>.log`, for several replicas
/// `<scenario>-<manager>-<i>.log`.
fn log_paths(env: &Env, id: &str, m: Manager) -> Vec<PathBuf> {
    let n = m.replicas(env.sharding);
    (0..n)
        .map(|i| {
            let name = if n == 1 {
                format!("{id}-{}.log", m.name())
            } else {
                format!("{id}-{}-{i}.log", m.name())
            };
            env.logs_dir.join(name)
        })
        .collect()
}

/// Starts one process per log, each with [`replica_args`].
fn spawn_replicas(bin: &Path, args: &[String], logs: &[PathBuf]) -> anyhow::Result<Replicas> {
    let mut procs = Vec::new();
    for (i, log) in logs.iter().enumerate() {
        procs.push(
            Running::spawn(bin, &replica_args(args, i), log)
                .with_context(|| format!("starting replica {i}"))?,
        );
    }
    Ok(Replicas { procs })
}

/// The run's RSS and CPU once it is over, before the manager stops: the samplers' usage and
/// curve (of the replica with the largest sample), `VmHWM` (the largest replica's), CPU (every
/// replica's together) and, for several replicas, each one's peak and CPU.
async fn read_usage(
    samplers: Vec<RssSampler>,
    curve_bucket: Option<Duration>,
    probe: &Probe,
    proc: &mut Replicas,
    r: &mut RunResult,
) {
    let largest = samplers
        .iter()
        .enumerate()
        .max_by_key(|(_, s)| s.max())
        .map_or(0, |(i, _)| i);
    if let Some(s) = samplers.get(largest) {
        r.usage = Some(s.usage()).filter(|u| !u.rss_bytes.is_empty());
        if let Some(b) = curve_bucket {
            r.rss_curve = s.curve();
            r.rss_curve_seconds = Some(b.as_secs_f64());
        }
    }
    let mut max_sampled = 0;
    for s in samplers {
        max_sampled = max_sampled.max(s.stop().await);
    }
    r.max_sampled_rss_bytes = Some(max_sampled).filter(|&b| b > 0);
    let killed = probe
        .killed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    if proc.exited(&killed).is_some() {
        return;
    }
    let readings: Vec<Reading> = probe
        .manager_pids()
        .iter()
        .map(|&p| probe.replica_reading(p))
        .collect();
    r.cpu_seconds_total = readings
        .iter()
        .map(|x| x.0)
        .sum::<Option<f64>>()
        .map(|cpu| cpu + probe.charged_cpu_seconds());
    r.peak_rss_bytes = readings.iter().filter_map(|x| x.1).max();
    let pids = probe.manager_pids();
    if pids.len() > 1 {
        r.replica_peak_rss_bytes = readings.iter().map(|x| x.1.unwrap_or(0)).collect();
        r.replica_cpu_seconds = readings.iter().map(|x| x.0.unwrap_or(0.0)).collect();
    }
    let biggest = readings
        .iter()
        .enumerate()
        .filter(|(i, _)| !killed.contains(&pids[*i]))
        .max_by_key(|(_, x)| x.1)
        .map_or(pids[0], |(i, _)| pids[i]);
    r.rss_anon_bytes = procfs::status_bytes(biggest, "RssAnon");
    r.rss_file_bytes = procfs::status_bytes(biggest, "RssFile");
}

/// Replica `i`'s command line: replica 0 runs `args`; another serves on its own port
/// (`--secure-port` plus `i`, when one is served) with its own `--cert-dir`, so that several
/// run side by side on one host.
pub fn replica_args(args: &[String], i: usize) -> Vec<String> {
    if i == 0 {
        return args.to_vec();
    }
    args.iter()
        .map(|a| {
            if let Some(port) = a
                .strip_prefix("--secure-port=")
                .and_then(|p| p.parse::<usize>().ok())
                .filter(|&p| p != 0)
            {
                format!("--secure-port={}", port + i)
            } else if let Some(dir) = a.strip_prefix("--cert-dir=") {
                format!("--cert-dir={dir}-{i}")
            } else {
                a.clone()
            }
        })
        .collect()
}

/// Deletes the shard Leases a previous sharded run left (released or expired ones, and
/// member Leases), so that every sharded run starts from an empty ring.
async fn clear_shard_leases(env: &Env) -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    let api: kube::Api<Lease> = kube::Api::namespaced(env.client.clone(), manager::SHARD_NAMESPACE);
    let lp = kube::api::ListParams::default().labels("rkcm.io/shard-ring");
    api.delete_collection(&kube::api::DeleteParams::default(), &lp)
        .await
        .with_context(|| {
            format!(
                "deleting the shard Leases left in {} (label rkcm.io/shard-ring)",
                manager::SHARD_NAMESPACE
            )
        })?;
    Ok(())
}

/// The plane's own processes (pid files of e2e/cluster.sh) whose CPU a run reports (the
/// scheduler and kwok too: the envelope shows whether they kept up).
pub fn plane_pids(cluster_dir: &Path) -> Vec<(String, u32)> {
    ["kube-apiserver", "etcd", "kube-scheduler", "kwok"]
        .iter()
        .filter_map(|name| {
            let text =
                std::fs::read_to_string(cluster_dir.join(format!("pids/{name}.pid"))).ok()?;
            Some((name.to_string(), text.trim().parse().ok()?))
        })
        .collect()
}

fn plane_cpu(pids: &[(String, u32)]) -> BTreeMap<String, f64> {
    pids.iter()
        .filter_map(|(name, pid)| Some((name.clone(), procfs::cpu_seconds(*pid)?)))
        .collect()
}

fn log_has(path: &Path, markers: &[&'static str]) -> Option<&'static str> {
    if markers.is_empty() {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    markers.iter().copied().find(|m| text.contains(m))
}

type Requests = (audit::Counts, Option<audit::Counts>);

fn count_requests(
    log: &Path,
    user: &str,
    from: u64,
    converge: Option<u64>,
) -> anyhow::Result<Requests> {
    let (total, _) = audit::count(log, user, from, None).context("reading the audit log")?;
    let conv = match converge {
        Some(to) => Some(audit::count(log, user, from, Some(to))?.0),
        None => None,
    };
    Ok((total, conv))
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M:%S UTC")
        .to_string()
}

#[cfg(test)]
mod replica_tests {
    use super::replica_args;

    #[test]
    fn replicas_after_the_first_serve_on_their_own_port_and_cert_dir() {
        let args: Vec<String> = [
            "--secure-port=10461",
            "--cert-dir=/tmp/certs",
            "--kube-api-qps=100",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(replica_args(&args, 0), args);
        assert_eq!(
            replica_args(&args, 2),
            [
                "--secure-port=10463",
                "--cert-dir=/tmp/certs-2",
                "--kube-api-qps=100"
            ]
        );
        let off = vec!["--secure-port=0".to_string()];
        assert_eq!(replica_args(&off, 1), off, "no port served: none to move");
    }
}

#[cfg(test)]
mod charge_tests {
    use std::time::Instant;

    use super::Probe;
    use crate::manager::Manager;

    /// CPU charged for a process run in the manager's place counts in the phase that was in
    /// progress and in the manager's CPU from then on, and only once.
    #[test]
    fn charged_cpu_counts_in_the_phase_and_the_total() {
        let probe = Probe::new(
            Instant::now(),
            Manager::Rkcm,
            vec![std::process::id()],
            Vec::new(),
            std::env::temp_dir().join("rkcm-bench-no-audit.log"),
        );
        let before = probe.manager_cpu_seconds().expect("own CPU readable");
        let phase = probe.begin("failover");
        probe.charge_cpu(2.5);
        probe.charge_cpu(-1.0);
        let during = probe.manager_cpu_seconds().expect("own CPU readable");
        assert!(
            (2.5..2.6).contains(&(during - before)),
            "{before} → {during}"
        );
        probe.end(phase, "");
        let phases = probe.take_phases();
        let cpu = phases[0].phase.cpu_seconds.expect("phase CPU");
        assert!((2.5..2.6).contains(&cpu), "phase cpu {cpu}");
        let later = probe.begin("after");
        probe.end(later, "");
        let cpu = probe.take_phases()[0].phase.cpu_seconds.expect("phase CPU");
        assert!(cpu < 0.1, "charged again: {cpu}");
    }
}
