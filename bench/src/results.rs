//! The raw numbers, as written to JSON by each scenario and merged by `report`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::audit::Counts;
use crate::manager::Manager;

/// How one manager's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Converged within the timeout and the result is correct.
    Ok,
    /// Converged, but the end state is wrong (see `correctness`).
    Incorrect,
    /// Did not converge within the timeout.
    Timeout,
    /// The manager process exited before converging.
    Exited,
    /// The manager does not implement the scenario's controller (yet).
    Unsupported,
    /// The manager binary is missing (e.g. the rkcm release build failed).
    NotBuilt,
    /// The bench itself failed (setup, API errors).
    Error,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Incorrect => "INCORRECT",
            Status::Timeout => "TIMEOUT",
            Status::Exited => "EXITED",
            Status::Unsupported => "not supported yet",
            Status::NotBuilt => "not built",
            Status::Error => "ERROR",
        }
    }

    /// Whether the bench as a whole should report failure for this run. A manager that
    /// does not (yet) have the controller is reported, not failed.
    pub fn is_failure(self) -> bool {
        !matches!(self, Status::Ok | Status::Unsupported | Status::NotBuilt)
    }
}

/// The scenario-specific correctness check of the end state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Correctness {
    pub ok: bool,
    pub detail: String,
}

/// A named moment of a run, in seconds after the manager was started.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Milestone {
    pub name: String,
    pub seconds: f64,
}

/// One manager, one scenario.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub manager: Manager,
    pub binary: String,
    pub version: String,
    pub args: Vec<String>,
    pub namespace: String,
    pub status: Status,
    /// Why the run did not succeed, or notes.
    pub message: String,
    /// Creating the scenario's objects (before the manager starts).
    pub setup_seconds: Option<f64>,
    /// Manager start to the scenario's convergence condition.
    pub converge_seconds: Option<f64>,
    pub milestones: Vec<Milestone>,
    /// Manager start to stop (convergence + settle + verification).
    pub run_seconds: Option<f64>,
    /// utime+stime of the manager from start to convergence.
    pub cpu_seconds_converge: Option<f64>,
    /// utime+stime of the manager over the whole run (until just before it was stopped).
    pub cpu_seconds_total: Option<f64>,
    /// VmHWM at the end of the run, just before stopping it.
    pub peak_rss_bytes: Option<u64>,
    /// The largest VmRSS sampled every 100 ms.
    pub max_sampled_rss_bytes: Option<u64>,
    /// Requests of the manager's user over the whole run (start to stop).
    pub requests: Option<Counts>,
    /// Requests completed between start and convergence.
    pub requests_converge: Option<Counts>,
    pub correctness: Option<Correctness>,
    /// CPU seconds the plane's processes (kube-apiserver, etcd) used while the manager ran.
    #[serde(default)]
    pub plane_cpu_seconds: Option<BTreeMap<String, f64>>,
    /// 1-minute load average of the host when the manager started (other work on the
    /// machine skews CPU and time).
    #[serde(default)]
    pub load_average_at_start: Option<f64>,
    pub log: String,
}

impl RunResult {
    pub fn new(manager: Manager, binary: String, namespace: String) -> Self {
        Self {
            manager,
            binary,
            version: String::new(),
            args: Vec::new(),
            namespace,
            status: Status::Error,
            message: String::new(),
            setup_seconds: None,
            converge_seconds: None,
            milestones: Vec::new(),
            run_seconds: None,
            cpu_seconds_converge: None,
            cpu_seconds_total: None,
            peak_rss_bytes: None,
            max_sampled_rss_bytes: None,
            requests: None,
            requests_converge: None,
            correctness: None,
            plane_cpu_seconds: None,
            load_average_at_start: None,
            log: String::new(),
        }
    }
}

/// One scenario for every manager, in the order they ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Short id (`podgc-terminated`).
    pub scenario: String,
    pub title: String,
    /// What is set up and what "converged" means.
    pub description: String,
    /// The canonical controller names both managers were started with.
    pub controllers: Vec<String>,
    /// Flags both managers got besides the common ones.
    pub manager_flags: Vec<String>,
    /// Scenario parameters (sizes, thresholds, ...).
    pub params: BTreeMap<String, String>,
    pub kube_api_qps: f32,
    pub kube_api_burst: u32,
    pub timeout_seconds: u64,
    pub settle_seconds: u64,
    pub started_at: String,
    pub finished_at: String,
    pub runs: Vec<RunResult>,
}
