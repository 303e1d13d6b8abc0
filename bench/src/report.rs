//! Merges scenario result files into one JSON document and a Markdown report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::manager::Manager;
use crate::results::{RunResult, ScenarioResult, Status};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Scenario result files written by the scenario subcommands (`--out`).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Markdown report to write.
    #[arg(long, default_value = "bench/reports/latest.md")]
    pub md: PathBuf,
    /// Merged raw numbers to write.
    #[arg(long, default_value = "bench/reports/latest.json")]
    pub json: PathBuf,
    /// The command that produced the results, quoted in the report.
    #[arg(long, default_value = "make bench")]
    pub command: String,
    /// One line describing the control plane (versions, nodes).
    #[arg(long, default_value = "")]
    pub plane: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    pub generated_at: String,
    pub command: String,
    pub commit: String,
    pub host: Host,
    pub plane: String,
    pub order: Vec<Manager>,
    pub scenarios: Vec<ScenarioResult>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Host {
    pub cpu: String,
    pub cpus: usize,
    pub memory_gib: f64,
    pub kernel: String,
}

impl Host {
    fn probe() -> Self {
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

fn git_commit() -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match run(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c} (with uncommitted changes)")
            } else {
                c
            }
        }
        None => "unknown".into(),
    }
}

/// Writes both files; returns whether every run succeeded (or was merely unsupported).
pub fn write(args: &Args) -> anyhow::Result<bool> {
    let mut scenarios = Vec::new();
    for p in &args.inputs {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let s: ScenarioResult =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
        scenarios.push(s);
    }
    let report = Report {
        generated_at: jiff::Timestamp::now()
            .strftime("%Y-%m-%d %H:%M:%S UTC")
            .to_string(),
        command: args.command.clone(),
        commit: git_commit(),
        host: Host::probe(),
        plane: args.plane.clone(),
        order: vec![Manager::Upstream, Manager::Rkcm],
        scenarios,
    };
    for p in [&args.md, &args.json] {
        if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)?;
        }
    }
    std::fs::write(&args.json, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", args.json.display()))?;
    std::fs::write(&args.md, markdown(&report, &args.json))
        .with_context(|| format!("writing {}", args.md.display()))?;
    Ok(report
        .scenarios
        .iter()
        .flat_map(|s| &s.runs)
        .all(|r| !r.status.is_failure()))
}

fn mib(b: Option<u64>) -> String {
    b.map_or("–".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

fn secs(s: Option<f64>) -> String {
    s.map_or("–".into(), |s| format!("{s:.1}"))
}

fn cpu(s: Option<f64>) -> String {
    s.map_or("–".into(), |s| format!("{s:.2}"))
}

fn manager_label(m: Manager) -> &'static str {
    match m {
        Manager::Upstream => "upstream kube-controller-manager",
        Manager::Rkcm => "rkcm",
    }
}

/// `rkcm / upstream` as a factor, when both numbers exist.
fn ratio(rkcm: Option<f64>, upstream: Option<f64>) -> String {
    match (rkcm, upstream) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "–".into(),
    }
}

pub fn markdown(r: &Report, json_path: &Path) -> String {
    let mut o = String::new();
    let json_name = json_path.file_name().map_or_else(
        || json_path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let _ = writeln!(o, "# rkcm benchmark report\n");
    let _ = writeln!(
        o,
        "Generated {} by `{}` at commit `{}`. Raw numbers: [`{json_name}`]({json_name}).\n",
        r.generated_at, r.command, r.commit
    );
    let _ = writeln!(o, "## How it was measured\n");
    let _ = writeln!(
        o,
        "- **Run it:** `make bench` (runs `e2e/bench.sh`). Sizes and limits are environment \
         settings, e.g. `PODGC_PODS=20000 PODGC_THRESHOLD=5000 BENCH_QPS=100 BENCH_BURST=200 \
         make bench`; `bash e2e/bench.sh --quick` runs small sizes into `bench/reports/quick.md`. \
         See the header of `e2e/bench.sh`."
    );
    let _ = writeln!(
        o,
        "- **Host:** {} ({} CPUs, {} GiB, Linux {}). The plane, the bench client and the \
         manager under test share these CPUs.",
        r.host.cpu, r.host.cpus, r.host.memory_gib, r.host.kernel
    );
    if !r.plane.is_empty() {
        let _ = writeln!(o, "- **Plane:** {}", r.plane);
    }
    let _ = writeln!(
        o,
        "- **Order:** for each scenario, upstream kube-controller-manager runs first, then \
         rkcm, on the same plane. Each run sets the scenario up from scratch in its own \
         namespace, and its objects are deleted afterwards, so both start from the same \
         cluster state."
    );
    let _ = writeln!(
        o,
        "- **Both managers** get the same command line apart from the binary and kubeconfig: \
         only the scenario's controller(s) in `--controllers`, `--leader-elect=false \
         --secure-port=0`, the same `--kube-api-qps`/`--kube-api-burst`, and the scenario \
         flags. Each uses its own client certificate (users `kcm` and `rkcm`)."
    );
    let _ = writeln!(
        o,
        "- **Converge:** manager process start to the scenario's condition (startup, informer \
         sync and the work itself). **CPU:** utime+stime from `/proc/<pid>/stat` (to \
         convergence / over the whole run, which adds the settle time and the final check). \
         **Peak RSS:** `VmHWM` from `/proc/<pid>/status` just before the manager is stopped. \
         **API requests:** lines of the apiserver audit log with the manager's user name and \
         stage `ResponseComplete`, from its start until after its stop (watches included).\n"
    );

    for s in &r.scenarios {
        write_scenario(&mut o, s);
    }
    o
}

fn write_scenario(o: &mut String, s: &ScenarioResult) {
    let _ = writeln!(o, "## {}\n", s.title);
    let _ = writeln!(o, "{}\n", s.description);
    let _ = writeln!(
        o,
        "Controllers: `{}`; scenario flags: `{}`; `--kube-api-qps={} --kube-api-burst={}`; \
         timeout {} s; settle {} s before the check. Ran {} – {}.\n",
        s.controllers.join(","),
        s.manager_flags.join(" "),
        s.kube_api_qps,
        s.kube_api_burst,
        s.timeout_seconds,
        s.settle_seconds,
        s.started_at,
        s.finished_at
    );
    let _ = writeln!(
        o,
        "| Manager | Result | Converge (s) | CPU to converge (s) | CPU whole run (s) | Peak RSS (MiB) | API requests | Correct |"
    );
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---|");
    for run in &s.runs {
        let correct = match &run.correctness {
            Some(c) => format!("{} {}", if c.ok { "yes:" } else { "**NO:**" }, c.detail),
            None => "–".into(),
        };
        let result = match run.status {
            Status::Ok => "ok".to_string(),
            st => format!("**{}**", st.label()),
        };
        // Numbers of a run that did not converge are not comparable: only in the details.
        let converged = matches!(run.status, Status::Ok | Status::Incorrect);
        let num = |v: String| if converged { v } else { "–".into() };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            manager_label(run.manager),
            result,
            num(secs(run.converge_seconds)),
            num(cpu(run.cpu_seconds_converge)),
            num(cpu(run.cpu_seconds_total)),
            num(mib(run.peak_rss_bytes)),
            num(run
                .requests
                .as_ref()
                .map_or("–".into(), |c| c.total.to_string())),
            correct
        );
    }
    let find = |m| {
        s.runs
            .iter()
            .find(|r| r.manager == m && r.status == Status::Ok)
    };
    if let (Some(u), Some(k)) = (find(Manager::Upstream), find(Manager::Rkcm)) {
        let _ = writeln!(
            o,
            "| *rkcm / upstream* | | {} | {} | {} | {} | {} | |",
            ratio(k.converge_seconds, u.converge_seconds),
            ratio(k.cpu_seconds_converge, u.cpu_seconds_converge),
            ratio(k.cpu_seconds_total, u.cpu_seconds_total),
            ratio(
                k.peak_rss_bytes.map(|b| b as f64),
                u.peak_rss_bytes.map(|b| b as f64)
            ),
            ratio(
                k.requests.as_ref().map(|c| c.total as f64),
                u.requests.as_ref().map(|c| c.total as f64)
            ),
        );
    }
    let _ = writeln!(o);
    for run in &s.runs {
        write_run(o, run);
    }
}

fn write_run(o: &mut String, run: &RunResult) {
    let _ = writeln!(
        o,
        "### {} — {}\n",
        manager_label(run.manager),
        run.status.label()
    );
    if !run.version.is_empty() {
        let _ = writeln!(o, "- Version: `{}`", run.version);
    }
    if !run.args.is_empty() {
        let bin = Path::new(&run.binary)
            .file_name()
            .map_or_else(|| run.binary.clone(), |n| n.to_string_lossy().into_owned());
        let _ = writeln!(o, "- Command: `{bin} {}`", run.args.join(" "));
    } else {
        let _ = writeln!(o, "- Binary: `{}`", run.binary);
    }
    if !run.message.is_empty() {
        let msg = run.message.replace('\n', "\n  ");
        let _ = writeln!(o, "- Note:\n  ```\n  {msg}\n  ```");
    }
    if let Some(t) = run.setup_seconds {
        let _ = writeln!(
            o,
            "- Setup (bench creating the objects, manager not running): {t:.1} s"
        );
    }
    if !run.milestones.is_empty() {
        let ms: Vec<String> = run
            .milestones
            .iter()
            .map(|m| format!("{} {:.1} s", m.name, m.seconds))
            .collect();
        let _ = writeln!(o, "- Milestones after start: {}", ms.join(", "));
    }
    if let Some(t) = run.cpu_seconds_total {
        let _ = writeln!(o, "- CPU over the run: {t:.2} s");
    }
    if let Some(b) = run.peak_rss_bytes {
        let _ = writeln!(o, "- Peak RSS (VmHWM): {} MiB", mib(Some(b)));
    }
    if let Some(b) = run.max_sampled_rss_bytes {
        let _ = writeln!(
            o,
            "- Largest sampled VmRSS (every 100 ms): {} MiB",
            mib(Some(b))
        );
    }
    if let Some(t) = run.run_seconds {
        let _ = writeln!(o, "- Manager ran {t:.1} s in total");
    }
    if let Some(c) = &run.requests {
        let by: Vec<String> = c
            .by_request
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            o,
            "- Requests: {} ({} errors, {} throttled with 429){}",
            c.total,
            c.errors,
            c.throttled,
            if by.is_empty() {
                String::new()
            } else {
                format!(": {}", by.join(", "))
            }
        );
    }
    if let Some(p) = &run.plane_cpu_seconds {
        let parts: Vec<String> = p.iter().map(|(k, v)| format!("{k} {v:.1} s")).collect();
        let _ = writeln!(
            o,
            "- CPU of the plane while the manager ran (includes the bench's own watch): {}",
            parts.join(", ")
        );
    }
    if let Some(l) = run.load_average_at_start {
        let _ = writeln!(
            o,
            "- Host load average (1 min, so it includes the bench's own setup) when the manager started: {l:.2}"
        );
    }
    if let Some(c) = &run.requests_converge {
        let _ = writeln!(o, "- Requests completed by convergence: {}", c.total);
    }
    if !run.log.is_empty() {
        let _ = writeln!(o, "- Manager log: `{}`", run.log);
    }
    let _ = writeln!(o);
}
