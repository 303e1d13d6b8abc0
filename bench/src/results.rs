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

impl Correctness {
    /// Correct, said by `ok()`, when nothing is `wrong`; otherwise incorrect, with every wrong
    /// thing.
    pub fn unless(wrong: Vec<String>, ok: impl FnOnce() -> String) -> Self {
        if wrong.is_empty() {
            Correctness {
                ok: true,
                detail: ok(),
            }
        } else {
            Correctness {
                ok: false,
                detail: wrong.join("; "),
            }
        }
    }
}

/// A named moment of a run, in seconds after the manager was started.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Milestone {
    pub name: String,
    pub seconds: f64,
}

/// One timed step of a driven scenario (e.g. "scale up 0 → 1000"): from the bench's
/// request that starts it to its condition, with the manager's CPU and requests in between.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    /// When the step began, in seconds after the manager was started.
    pub start_seconds: f64,
    /// Wall time from the bench's request to the step's condition.
    pub seconds: f64,
    /// utime+stime of the manager during the step.
    pub cpu_seconds: Option<f64>,
    /// VmHWM of the manager at the end of the step (the peak so far).
    pub peak_rss_bytes: Option<u64>,
    /// The manager's requests completed during the step (from the audit log).
    pub requests: Option<Counts>,
    /// What the scenario observed (e.g. the most pods the ReplicaSet ever owned).
    #[serde(default)]
    pub note: String,
}

/// A scenario-specific number of a run (e.g. "Job lateness p99"), compared across managers
/// in the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub value: f64,
    /// Unit shown after the name ("s"), empty for counts.
    #[serde(default)]
    pub unit: String,
}

/// A manager's resident memory and CPU time over its run, one sample per `interval_seconds`:
/// sample `i` covers the stretch up to `(i + 1) × interval_seconds` after the start, with the
/// largest `VmRSS` seen in it (sampled every 100 ms) and the CPU used from the start to its
/// end. The interval doubles (neighbouring samples merged) whenever a run would need more
/// than [`Usage::MAX_SAMPLES`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub interval_seconds: f64,
    pub rss_bytes: Vec<u64>,
    pub cpu_seconds: Vec<f64>,
}

impl Usage {
    pub const MAX_SAMPLES: usize = 1200;

    pub fn new(interval_seconds: f64) -> Self {
        Self {
            interval_seconds,
            ..Self::default()
        }
    }

    /// Seconds after the start at which the next sample ends.
    pub fn next_end(&self) -> f64 {
        (self.rss_bytes.len() + 1) as f64 * self.interval_seconds
    }

    /// Adds a sample (the largest RSS of its stretch, the CPU at its end); merges
    /// neighbouring pairs into one sample of twice the interval once there are
    /// [`Usage::MAX_SAMPLES`].
    pub fn push(&mut self, rss_bytes: u64, cpu_seconds: f64) {
        self.rss_bytes.push(rss_bytes);
        self.cpu_seconds.push(cpu_seconds);
        if self.rss_bytes.len() >= Self::MAX_SAMPLES {
            self.rss_bytes = self
                .rss_bytes
                .chunks(2)
                .map(|c| c.iter().copied().max().unwrap_or(0))
                .collect();
            self.cpu_seconds = self
                .cpu_seconds
                .chunks(2)
                .filter_map(|c| c.last().copied())
                .collect();
            self.interval_seconds *= 2.0;
        }
    }

    /// (seconds after the start, value) of each sample.
    pub fn points<T: Copy>(&self, values: &[T]) -> Vec<(f64, T)> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| ((i + 1) as f64 * self.interval_seconds, v))
            .collect()
    }
}

/// Every sample of one measure of a run, ascending (e.g. "reaction (load)" in ms).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    pub name: String,
    #[serde(default)]
    pub unit: String,
    pub values: Vec<f64>,
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
    /// Timed steps of a driven scenario (scale up, scale down), each measured on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
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
    /// A sharded run's replicas, each: `VmHWM` at the end (or just before a kill on purpose);
    /// `peak_rss_bytes` is the largest of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_peak_rss_bytes: Vec<u64>,
    /// A sharded run's replicas, each: CPU seconds over the run; `cpu_seconds_total` is
    /// their sum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_cpu_seconds: Vec<f64>,
    /// `RssAnon` of `/proc/<pid>/status` just before the manager was stopped: its heap and
    /// stacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_anon_bytes: Option<u64>,
    /// `RssFile` at the same moment: the file pages it maps, mostly its own binary's code
    /// (shared with the page cache; counted in VmRSS and VmHWM all the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_file_bytes: Option<u64>,
    /// VmRSS over the run, for scenarios that report it: the largest sample of each
    /// `rss_curve_seconds` since the manager's start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rss_curve: Vec<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_curve_seconds: Option<f64>,
    /// RSS and CPU over the whole run at a fixed interval (every run; the charts' source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Samples of a measure kept whole for the charts (e.g. every reaction latency), each
    /// sorted ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distributions: Vec<Distribution>,
    /// Requests of the manager's user over the whole run (start to stop).
    pub requests: Option<Counts>,
    /// Requests completed between start and convergence.
    pub requests_converge: Option<Counts>,
    pub correctness: Option<Correctness>,
    /// Scenario-specific numbers (see [`Metric`]), from the end-state check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<Metric>,
    /// CPU seconds the plane's processes (kube-apiserver, etcd) used while the manager ran.
    #[serde(default)]
    pub plane_cpu_seconds: Option<BTreeMap<String, f64>>,
    /// 1-minute load average of the host when the manager started (other work on the
    /// machine skews CPU and time).
    #[serde(default)]
    pub load_average_at_start: Option<f64>,
    /// Seconds the bench waited for a quiet host before starting the manager, and the busy
    /// share of the host's CPU (all cores, 0 to 1) over the last 5 s of that wait.
    #[serde(default)]
    pub quiet_wait: Option<(f64, f64)>,
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
            phases: Vec::new(),
            run_seconds: None,
            cpu_seconds_converge: None,
            cpu_seconds_total: None,
            peak_rss_bytes: None,
            max_sampled_rss_bytes: None,
            replica_peak_rss_bytes: Vec::new(),
            replica_cpu_seconds: Vec::new(),
            rss_anon_bytes: None,
            rss_file_bytes: None,
            rss_curve: Vec::new(),
            rss_curve_seconds: None,
            usage: None,
            distributions: Vec::new(),
            requests: None,
            requests_converge: None,
            correctness: None,
            metrics: Vec::new(),
            plane_cpu_seconds: None,
            load_average_at_start: None,
            quiet_wait: None,
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
    /// Where the result comes from (command, commit, host, plane); set by the scenario
    /// subcommand, so a report merging results of different runs can say so per scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    pub runs: Vec<RunResult>,
    /// The same runs once more in the opposite order (`--both-orders`). The plane's own CPU
    /// drifts through a bench (etcd's history, the API server's caches and heap grow), so
    /// the run that comes second tends to be charged more; the mean of both orders compares
    /// the managers on equal terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reversed: Vec<RunResult>,
}

#[cfg(test)]
impl ScenarioResult {
    /// A result of scenario `id` with no runs, for report tests.
    pub fn for_test(id: &str, params: &[(&str, &str)], commit: Option<&str>) -> Self {
        ScenarioResult {
            scenario: id.into(),
            title: format!("title of {id}"),
            description: String::new(),
            controllers: Vec::new(),
            manager_flags: Vec::new(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            kube_api_qps: 100.0,
            kube_api_burst: 200,
            timeout_seconds: 900,
            settle_seconds: 5,
            started_at: "2026-01-01 00:00:00 UTC".into(),
            finished_at: "2026-01-01 00:00:00 UTC".into(),
            origin: commit.map(|c| Origin {
                command: "make bench".into(),
                commit: c.into(),
                host: Host {
                    cpu: "test".into(),
                    cpus: 2,
                    memory_gib: 1.0,
                    kernel: "test".into(),
                },
                plane: String::new(),
            }),
            runs: Vec::new(),
            reversed: Vec::new(),
        }
    }
}

/// The circumstances of one scenario run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Origin {
    /// The command that ran it (`make bench`, `BENCH_SCENARIOS=replicaset make bench`).
    pub command: String,
    /// `git rev-parse --short=12 HEAD`, marked when the tree had uncommitted changes.
    pub commit: String,
    pub host: Host,
    /// One line describing the control plane (versions, nodes).
    pub plane: String,
}

/// Reports are committed, so they name no directory of the machine that ran them: the home
/// directory is written `~` and the temporary directory (planes, logs) `$TMPDIR`.
pub fn without_home(text: &str) -> String {
    let mut out = text.to_string();
    if let Ok(home) = std::env::var("HOME")
        && home.len() > 1
    {
        out = out.replace(&format!("{}/", home.trim_end_matches('/')), "~/");
    }
    let tmp = std::env::temp_dir();
    let tmp = tmp.to_string_lossy();
    let tmp = tmp.trim_end_matches('/');
    if !tmp.is_empty() {
        out = out.replace(&format!("{tmp}/"), "$TMPDIR/");
    }
    out
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub cpu: String,
    pub cpus: usize,
    pub memory_gib: f64,
    pub kernel: String,
}

impl Host {
    pub fn probe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kb: f64 = meminfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("MemTotal:")?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0.0);
        Self {
            cpu,
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_gib: (mem_kb / 1048576.0 * 10.0).round() / 10.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
        }
    }
}

#[cfg(test)]
mod usage_tests {
    use super::Usage;

    #[test]
    fn samples_end_one_interval_apart() {
        let mut u = Usage::new(1.0);
        assert_eq!(u.next_end(), 1.0);
        u.push(10, 0.5);
        u.push(30, 0.75);
        assert_eq!(u.next_end(), 3.0);
        assert_eq!(u.points(&u.rss_bytes), [(1.0, 10), (2.0, 30)]);
        assert_eq!(u.points(&u.cpu_seconds), [(1.0, 0.5), (2.0, 0.75)]);
    }

    #[test]
    fn a_long_run_doubles_the_interval_keeping_peaks_and_cpu_at_each_end() {
        let mut u = Usage::new(1.0);
        for i in 0..Usage::MAX_SAMPLES as u64 - 1 {
            // The RSS peaks in odd seconds, the CPU grows by 1 s a second.
            u.push(if i % 2 == 1 { 100 + i } else { 1 }, (i + 1) as f64);
        }
        assert_eq!(u.rss_bytes.len(), Usage::MAX_SAMPLES - 1);
        assert_eq!(u.interval_seconds, 1.0);
        u.push(1, Usage::MAX_SAMPLES as f64);
        assert_eq!(u.rss_bytes.len(), Usage::MAX_SAMPLES / 2);
        assert_eq!(u.interval_seconds, 2.0);
        // Sample i now ends at 2(i + 1) s: the CPU then, the larger RSS of its two seconds.
        assert_eq!(u.points(&u.cpu_seconds)[..2], [(2.0, 2.0), (4.0, 4.0)]);
        assert_eq!(u.rss_bytes[..2], [101, 103]);
        assert_eq!(u.next_end(), Usage::MAX_SAMPLES as f64 + 2.0);
    }
}

#[cfg(test)]
mod home_tests {
    #[test]
    fn home_is_written_as_tilde() {
        let Ok(home) = std::env::var("HOME") else {
            return;
        };
        if home.len() <= 1 {
            return;
        }
        let text = format!("\"binary\": \"{home}/.cache/rkcm/target/release/rkcm\"");
        assert_eq!(
            super::without_home(&text),
            "\"binary\": \"~/.cache/rkcm/target/release/rkcm\""
        );
    }

    #[test]
    fn the_temporary_directory_is_written_tmpdir() {
        let path = std::env::temp_dir()
            .join("rkcm-bench-0")
            .join("kubeconfig-kcm");
        let text = format!("--kubeconfig={}", path.display());
        assert_eq!(
            super::without_home(&text),
            "--kubeconfig=$TMPDIR/rkcm-bench-0/kubeconfig-kcm"
        );
    }
}
