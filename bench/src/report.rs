//! Merges scenario result files into one JSON document and a Markdown report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::manager::Manager;
use crate::results::{Host, Origin, RunResult, ScenarioResult, Status};

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

/// The commit results are stamped with: `BENCH_COMMIT` when set (the commit an rkcm binary
/// given with `BENCH_RKCM_BIN` was built from, which the tree's need not be), else the
/// tree's, marked when it has uncommitted changes.
fn git_commit() -> String {
    if let Some(c) = std::env::var("BENCH_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        return c.trim().to_owned();
    }
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

/// The circumstances of a scenario run happening now in this working tree.
pub fn origin(command: &str, plane: &str) -> Origin {
    Origin {
        command: command.to_string(),
        commit: git_commit(),
        host: Host::probe(),
        plane: plane.to_string(),
    }
}

/// Keeps one result per scenario id, the one that finished last (timestamps compare as
/// text: `YYYY-MM-DD HH:MM:SS UTC`), in the order the ids first appear.
fn newest_per_scenario(all: Vec<ScenarioResult>) -> Vec<ScenarioResult> {
    let mut out: Vec<ScenarioResult> = Vec::new();
    for s in all {
        match out.iter_mut().find(|o| o.scenario == s.scenario) {
            Some(o) if s.finished_at >= o.finished_at => *o = s,
            Some(_) => {}
            None => out.push(s),
        }
    }
    out
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
    let scenarios = newest_per_scenario(scenarios);
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
    std::fs::write(
        &args.json,
        crate::results::without_home(&serde_json::to_string_pretty(&report)?) + "\n",
    )
    .with_context(|| format!("writing {}", args.json.display()))?;
    std::fs::write(
        &args.md,
        crate::results::without_home(&markdown(&report, &args.json)),
    )
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
        "Generated {} by `{}` at commit `{}` from the newest result of each scenario: a \
         scenario can be re-run on its own (`BENCH_SCENARIOS=replicaset make bench`), so each \
         section says when, by which command and at which commit it ran. Raw numbers: \
         [`{json_name}`]({json_name}).\n",
        r.generated_at, r.command, r.commit
    );
    let _ = writeln!(o, "## How it was measured\n");
    let _ = writeln!(
        o,
        "- **Run it:** `make bench` (runs `e2e/bench.sh`; every scenario) or \
         `BENCH_SCENARIOS=replicaset make bench` (only that one; the other sections are kept). \
         Sizes and limits are environment settings, e.g. `PODGC_PODS=20000 \
         PODGC_THRESHOLD=5000 RS_REPLICAS=1000 DEPLOY_COUNT=100 DEPLOY_REPLICAS=20 \
         CRONJOB_COUNT=500 CRONJOB_MINUTES=5 BENCH_QPS=100 BENCH_BURST=200 make bench`; \
         `bash e2e/bench.sh --quick` runs small sizes into `bench/reports/quick.md`. See the \
         header of `e2e/bench.sh`."
    );
    let _ = writeln!(
        o,
        "- **Host:** {}. The plane, the bench client and the manager under test share these \
         CPUs.",
        host_line(&r.host)
    );
    let _ = writeln!(
        o,
        "- **Order:** for each scenario, upstream kube-controller-manager runs first, then \
         rkcm, on the same plane, unless the scenario says otherwise; with \
         `BENCH_ORDERS=both` both run once more in the opposite order, and the scenario gives \
         the means of both orders as well. Each run sets the scenario up from scratch in its \
         own namespace, and its objects are deleted afterwards, so both start from the same \
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

    write_summary(&mut o, r);
    for s in &r.scenarios {
        write_scenario(&mut o, s, r);
    }
    o
}

fn host_line(h: &Host) -> String {
    format!(
        "{} ({} CPUs, {} GiB, Linux {})",
        h.cpu, h.cpus, h.memory_gib, h.kernel
    )
}

/// The run order, when it is not the usual upstream first (`BENCH_MANAGERS=rkcm,upstream`).
fn swapped_order(s: &ScenarioResult) -> Option<String> {
    let first = s.runs.first()?;
    if first.manager == Manager::Upstream || s.runs.len() < 2 {
        return None;
    }
    let names: Vec<&str> = s.runs.iter().map(|r| manager_label(r.manager)).collect();
    Some(format!(
        "{} first, then {}",
        names[0],
        names[1..].join(", then ")
    ))
}

fn write_scenario(o: &mut String, s: &ScenarioResult, r: &Report) {
    let _ = writeln!(o, "## {}\n", s.title);
    let _ = writeln!(o, "{}\n", s.description);
    match &s.origin {
        Some(origin) => {
            let _ = write!(
                o,
                "Ran {} – {} by `{}` at commit `{}`",
                s.started_at, s.finished_at, origin.command, origin.commit
            );
            if origin.host != r.host {
                let _ = write!(o, " on {}", host_line(&origin.host));
            }
            let _ = writeln!(o, ".");
            if !origin.plane.is_empty() {
                let _ = writeln!(o, "Plane: {}.", origin.plane.trim_end_matches('.'));
            }
        }
        None => {
            let _ = writeln!(o, "Ran {} – {}.", s.started_at, s.finished_at);
        }
    }
    if let Some(order) = swapped_order(s) {
        let _ = writeln!(o, "Run order: {order}.");
    }
    let _ = writeln!(
        o,
        "Controllers: `{}`; scenario flags: `{}`; `--kube-api-qps={} --kube-api-burst={}`; \
         timeout {} s; settle {} s before the check.\n",
        s.controllers.join(","),
        if s.manager_flags.is_empty() {
            "none".to_string()
        } else {
            s.manager_flags.join(" ")
        },
        s.kube_api_qps,
        s.kube_api_burst,
        s.timeout_seconds,
        s.settle_seconds,
    );
    let _ = writeln!(
        o,
        "| Manager | Result | Converge (s) | CPU to converge (s) | CPU whole run (s) | Peak RSS (MiB) | API requests | API server CPU (s) | Correct |"
    );
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|---|");
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
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
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
            num(secs(plane_cpu(run, APISERVER))),
            correct
        );
    }
    if let (Some(u), Some(k)) = (
        ok_run(&s.runs, Manager::Upstream),
        ok_run(&s.runs, Manager::Rkcm),
    ) {
        let _ = writeln!(
            o,
            "| *rkcm / upstream* | | {} | {} | {} | {} | {} | {} | |",
            ratio(k.converge_seconds, u.converge_seconds),
            ratio(k.cpu_seconds_converge, u.cpu_seconds_converge),
            ratio(k.cpu_seconds_total, u.cpu_seconds_total),
            ratio(peak_rss(k), peak_rss(u)),
            ratio(total_requests(k), total_requests(u)),
            ratio(plane_cpu(k, APISERVER), plane_cpu(u, APISERVER)),
        );
    }
    let _ = writeln!(o);
    write_orders(o, s);
    write_metrics(o, s);
    write_phases(o, s);
    write_rss_curves(o, s);
    for run in &s.runs {
        write_run(o, run, "");
    }
    for run in &s.reversed {
        write_run(o, run, " (opposite order)");
    }
}

/// The plane process whose CPU the issue compares ("the API server's CPU while serving").
const APISERVER: &str = "kube-apiserver";

/// CPU seconds `process` of the plane used while the run's manager ran.
fn plane_cpu(run: &RunResult, process: &str) -> Option<f64> {
    run.plane_cpu_seconds.as_ref()?.get(process).copied()
}

/// Peak RSS in bytes, as a number for [`ratio`].
fn peak_rss(run: &RunResult) -> Option<f64> {
    run.peak_rss_bytes.map(|b| b as f64)
}

/// The manager's requests over the whole run, as a number for [`ratio`].
fn total_requests(run: &RunResult) -> Option<f64> {
    run.requests.as_ref().map(|c| c.total as f64)
}

/// The successful run of `m` among `runs`.
fn ok_run(runs: &[RunResult], m: Manager) -> Option<&RunResult> {
    runs.iter()
        .find(|r| r.manager == m && r.status == Status::Ok)
}

/// The mean of `f` over `m`'s successful runs in both orders; `None` unless both have one.
fn mean_of_orders(
    s: &ScenarioResult,
    m: Manager,
    f: impl Fn(&RunResult) -> Option<f64>,
) -> Option<f64> {
    Some((f(ok_run(&s.runs, m)?)? + f(ok_run(&s.reversed, m)?)?) / 2.0)
}

/// Who ran first in `runs`, for a row label.
fn order_label(runs: &[RunResult]) -> String {
    runs.first().map_or_else(String::new, |r| {
        format!(
            "{} first",
            match r.manager {
                Manager::Upstream => "upstream",
                Manager::Rkcm => "rkcm",
            }
        )
    })
}

/// Both orders side by side (`--both-orders`): each pass's numbers, and the means.
fn write_orders(o: &mut String, s: &ScenarioResult) {
    if s.reversed.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "Both orders: the plane's own CPU drifts through a bench, so the runs were made again \
         in the opposite order and each manager's numbers are also given as the mean of its \
         two runs.\n"
    );
    let _ = writeln!(
        o,
        "| Pass | Manager | Converge (s) | CPU whole run (s) | Peak RSS (MiB) | API requests | API server CPU (s) | etcd CPU (s) |"
    );
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|");
    for runs in [&s.runs, &s.reversed] {
        let pass = order_label(runs);
        for run in runs.iter() {
            let _ = writeln!(
                o,
                "| {pass} | {} | {} | {} | {} | {} | {} | {} |",
                manager_label(run.manager),
                secs(run.converge_seconds),
                cpu(run.cpu_seconds_total),
                mib(run.peak_rss_bytes),
                run.requests
                    .as_ref()
                    .map_or("–".into(), |c| c.total.to_string()),
                secs(plane_cpu(run, APISERVER)),
                secs(plane_cpu(run, "etcd")),
            );
        }
    }
    let converge = |r: &RunResult| r.converge_seconds;
    let cpu_total = |r: &RunResult| r.cpu_seconds_total;
    let rss = peak_rss;
    let requests = total_requests;
    let api = |r: &RunResult| plane_cpu(r, APISERVER);
    let etcd = |r: &RunResult| plane_cpu(r, "etcd");
    for m in [Manager::Upstream, Manager::Rkcm] {
        let _ = writeln!(
            o,
            "| mean of both | {} | {} | {} | {} | {} | {} | {} |",
            manager_label(m),
            secs(mean_of_orders(s, m, converge)),
            cpu(mean_of_orders(s, m, cpu_total)),
            mib(mean_of_orders(s, m, rss).map(|b| b as u64)),
            mean_of_orders(s, m, requests).map_or("–".into(), |n| format!("{n:.0}")),
            secs(mean_of_orders(s, m, api)),
            secs(mean_of_orders(s, m, etcd)),
        );
    }
    let both = |f: &dyn Fn(&RunResult) -> Option<f64>| {
        ratio(
            mean_of_orders(s, Manager::Rkcm, f),
            mean_of_orders(s, Manager::Upstream, f),
        )
    };
    let _ = writeln!(
        o,
        "| *rkcm / upstream, means* | | {} | {} | {} | {} | {} | {} |\n",
        both(&converge),
        both(&cpu_total),
        both(&rss),
        both(&requests),
        both(&api),
        both(&etcd),
    );
}

/// One row per scenario: rkcm / upstream for the numbers the issue's targets name, the API
/// server's CPU also as the mean of both orders where the scenario ran in both.
fn write_summary(o: &mut String, r: &Report) {
    let _ = writeln!(o, "## Summary: rkcm / upstream\n");
    let _ = writeln!(
        o,
        "Ratios of each scenario's successful runs (below 1: rkcm used less). API server CPU: \
         the kube-apiserver's CPU while the manager ran (kwok and the bench's watch included); \
         where a scenario ran in both orders, the ratio of the means of both orders, then each \
         order's own.\n"
    );
    let _ = writeln!(
        o,
        "| Scenario | Converge | CPU whole run | Peak RSS | API requests | API server CPU |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|");
    for s in &r.scenarios {
        let (Some(u), Some(k)) = (
            ok_run(&s.runs, Manager::Upstream),
            ok_run(&s.runs, Manager::Rkcm),
        ) else {
            let _ = writeln!(o, "| `{}` | – | – | – | – | – |", s.scenario);
            continue;
        };
        let api = |r: &RunResult| plane_cpu(r, APISERVER);
        let api_ratio = if s.reversed.is_empty() {
            ratio(api(k), api(u))
        } else {
            let pass = |runs: &[RunResult]| {
                let first = order_label(runs);
                let v = match (ok_run(runs, Manager::Rkcm), ok_run(runs, Manager::Upstream)) {
                    (Some(k), Some(u)) => ratio(api(k), api(u)),
                    _ => "–".into(),
                };
                format!("{v} {first}")
            };
            format!(
                "{} (both orders; {}, {})",
                ratio(
                    mean_of_orders(s, Manager::Rkcm, api),
                    mean_of_orders(s, Manager::Upstream, api)
                ),
                pass(&s.runs),
                pass(&s.reversed)
            )
        };
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {} | {} | {} |",
            s.scenario,
            ratio(k.converge_seconds, u.converge_seconds),
            ratio(k.cpu_seconds_total, u.cpu_seconds_total),
            ratio(peak_rss(k), peak_rss(u)),
            ratio(total_requests(k), total_requests(u)),
            api_ratio,
        );
    }
    let _ = writeln!(o);
}

/// Scenario-specific numbers (e.g. Job lateness), one row each, one column per manager.
fn write_metrics(o: &mut String, s: &ScenarioResult) {
    let mut names: Vec<(&str, &str)> = Vec::new();
    for m in s.runs.iter().flat_map(|r| &r.metrics) {
        if !names.iter().any(|(n, _)| *n == m.name) {
            names.push((&m.name, &m.unit));
        }
    }
    if names.is_empty() {
        return;
    }
    let value = |m: Manager, name: &str| {
        s.runs
            .iter()
            .find(|r| r.manager == m)
            .and_then(|r| r.metrics.iter().find(|x| x.name == name))
            .map(|x| x.value)
    };
    let _ = writeln!(
        o,
        "| Measure | {} | {} | rkcm / upstream |",
        manager_label(Manager::Upstream),
        manager_label(Manager::Rkcm)
    );
    let _ = writeln!(o, "|---|---:|---:|---:|");
    let show = |v: Option<f64>| {
        v.map_or("–".into(), |v| {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        })
    };
    for (name, unit) in names {
        let (u, k) = (value(Manager::Upstream, name), value(Manager::Rkcm, name));
        let label = if unit.is_empty() {
            name.to_string()
        } else {
            format!("{name} ({unit})")
        };
        let _ = writeln!(
            o,
            "| {label} | {} | {} | {} |",
            show(u),
            show(k),
            ratio(k, u)
        );
    }
    let _ = writeln!(o);
}

/// The timed steps of driven scenarios, one row per manager and step, with ratios.
fn write_phases(o: &mut String, s: &ScenarioResult) {
    if s.runs.iter().all(|r| r.phases.is_empty()) {
        return;
    }
    let _ = writeln!(
        o,
        "Each step, from the bench's request to its condition (CPU and requests: the \
         manager's during the step; peak RSS: `VmHWM` at its end):\n"
    );
    let _ = writeln!(
        o,
        "| Manager | Step | Wall (s) | CPU (s) | API requests | Peak RSS (MiB) | Observed |"
    );
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---|");
    for run in &s.runs {
        for p in &run.phases {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} |",
                manager_label(run.manager),
                p.name,
                secs(Some(p.seconds)),
                cpu(p.cpu_seconds),
                p.requests
                    .as_ref()
                    .map_or("–".into(), |c| c.total.to_string()),
                mib(p.peak_rss_bytes),
                p.note
            );
        }
    }
    // A step that ended has met its condition, so steps compare even when a later one of
    // the same run failed (its note says what was observed).
    let find = |m| s.runs.iter().find(|r| r.manager == m);
    if let (Some(u), Some(k)) = (find(Manager::Upstream), find(Manager::Rkcm)) {
        for kp in &k.phases {
            let Some(up) = u.phases.iter().find(|p| p.name == kp.name) else {
                continue;
            };
            let _ = writeln!(
                o,
                "| *rkcm / upstream* | {} | {} | {} | {} | {} | |",
                kp.name,
                ratio(Some(kp.seconds), Some(up.seconds)),
                ratio(kp.cpu_seconds, up.cpu_seconds),
                ratio(
                    kp.requests.as_ref().map(|c| c.total as f64),
                    up.requests.as_ref().map(|c| c.total as f64)
                ),
                ratio(
                    kp.peak_rss_bytes.map(|b| b as f64),
                    up.peak_rss_bytes.map(|b| b as f64)
                ),
            );
        }
    }
    let _ = writeln!(o);
}

/// Characters of the RSS sparkline of the longest run.
const SPARK_WIDTH: usize = 60;
/// Rows of the RSS table (at most).
const CURVE_ROWS: usize = 20;

/// The largest value of each of `n` consecutive groups of `curve`, groups of `per` items.
fn regroup(curve: &[u64], per: usize) -> Vec<u64> {
    curve
        .chunks(per.max(1))
        .map(|c| c.iter().copied().max().unwrap_or(0))
        .collect()
}

/// One character per value, ▁ to █ on the scale 0 ..= `top` (a space for no sample).
fn sparkline(values: &[u64], top: u64) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    values
        .iter()
        .map(|&v| {
            if v == 0 || top == 0 {
                ' '
            } else {
                let i = (v as f64 / top as f64 * 8.0).ceil() as usize;
                BARS[i.clamp(1, 8) - 1]
            }
        })
        .collect()
}

/// The RSS curve of each run that kept one: a sparkline on one time and memory scale for
/// both managers, and a table of the largest `VmRSS` per stretch of time.
fn write_rss_curves(o: &mut String, s: &ScenarioResult) {
    let runs: Vec<(&RunResult, f64)> = s
        .runs
        .iter()
        .filter_map(|r| Some((r, r.rss_curve_seconds?)).filter(|_| !r.rss_curve.is_empty()))
        .collect();
    let Some(&(_, bucket)) = runs.first() else {
        return;
    };
    if runs.iter().any(|(_, b)| (b - bucket).abs() > 1e-9) {
        return; // not on one time scale; the raw curves are in the JSON
    }
    let longest = runs
        .iter()
        .map(|(r, _)| r.rss_curve.len())
        .max()
        .unwrap_or(0);
    let top = runs
        .iter()
        .flat_map(|(r, _)| r.rss_curve.iter().copied())
        .max()
        .unwrap_or(0);
    let per_char = longest.div_ceil(SPARK_WIDTH).max(1);
    let _ = writeln!(
        o,
        "Resident memory over the run (`VmRSS` sampled every 100 ms; each character is the \
         largest sample of {:.0} s, one scale for both managers, █ = {} MiB):\n",
        per_char as f64 * bucket,
        mib(Some(top))
    );
    let _ = writeln!(o, "```");
    for (r, _) in &runs {
        let _ = writeln!(
            o,
            "{:<9} {}  peak {} MiB",
            r.manager.name(),
            sparkline(&regroup(&r.rss_curve, per_char), top),
            mib(r.rss_curve.iter().copied().max())
        );
    }
    let _ = writeln!(o, "```\n");
    let per_row = longest.div_ceil(CURVE_ROWS).max(1);
    let _ = write!(o, "| Seconds after start |");
    for (r, _) in &runs {
        let _ = write!(o, " {} RSS (MiB) |", manager_label(r.manager));
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "|---:|{}", "---:|".repeat(runs.len()));
    let rows: Vec<Vec<u64>> = runs
        .iter()
        .map(|(r, _)| regroup(&r.rss_curve, per_row))
        .collect();
    for i in 0..longest.div_ceil(per_row) {
        let from = i * per_row;
        let to = ((i + 1) * per_row).min(longest);
        let _ = write!(
            o,
            "| {:.0}–{:.0} |",
            from as f64 * bucket,
            to as f64 * bucket
        );
        for row in &rows {
            let v = row.get(i).copied().filter(|&v| v > 0);
            let _ = write!(o, " {} |", mib(v));
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o);
}

/// `15003 requests (0 errors, 0 throttled with 429): delete pods 15000, ...`
fn requests_line(c: &crate::audit::Counts) -> String {
    let by: Vec<String> = c
        .by_request
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    format!(
        "{} requests ({} errors, {} throttled with 429){}",
        c.total,
        c.errors,
        c.throttled,
        if by.is_empty() {
            String::new()
        } else {
            format!(": {}", by.join(", "))
        }
    )
}

/// What the resident memory at the end of a run was made of: the manager's own memory and
/// the file pages it maps (mostly its binary's code, which both managers' VmHWM include).
fn rss_split_line(run: &RunResult) -> Option<String> {
    let (anon, file) = (run.rss_anon_bytes?, run.rss_file_bytes?);
    Some(format!(
        "- Resident at the end: anonymous (heap, stacks) {} MiB, file-backed (mapped binary and libraries) {} MiB",
        mib(Some(anon)),
        mib(Some(file))
    ))
}

/// One line per phase of a run.
fn write_run_phases(o: &mut String, run: &RunResult) {
    for p in &run.phases {
        let _ = writeln!(
            o,
            "- {} (began {:.1} s after start): {:.1} s, CPU {} s{}{}",
            p.name,
            p.start_seconds,
            p.seconds,
            cpu(p.cpu_seconds),
            match &p.requests {
                Some(c) => format!(", {}", requests_line(c)),
                None => String::new(),
            },
            if p.note.is_empty() {
                String::new()
            } else {
                format!("; {}", p.note)
            }
        );
    }
}

fn write_run(o: &mut String, run: &RunResult, pass: &str) {
    let _ = writeln!(
        o,
        "### {}{pass} — {}\n",
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
    write_run_phases(o, run);
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
    if let Some(line) = rss_split_line(run) {
        let _ = writeln!(o, "{line}");
    }
    if let Some(t) = run.run_seconds {
        let _ = writeln!(o, "- Manager ran {t:.1} s in total");
    }
    if let Some(c) = &run.requests {
        let _ = writeln!(o, "- Requests over the run: {}", requests_line(c));
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
    if let Some((waited, busy)) = run.quiet_wait {
        let _ = writeln!(
            o,
            "- Waited {waited:.0} s for a quiet host before starting the manager; host CPU {:.0}% busy over the last 5 s of the wait",
            busy * 100.0
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Phase;

    #[test]
    fn the_end_of_run_rss_is_split_into_anonymous_and_file_backed() {
        let mut run = RunResult::new(Manager::Rkcm, "bin".into(), "ns".into());
        assert_eq!(rss_split_line(&run), None, "older results have neither");
        run.rss_anon_bytes = Some(4_718_592);
        assert_eq!(
            rss_split_line(&run),
            None,
            "one without the other is not shown"
        );
        run.rss_file_bytes = Some(27_262_976);
        assert_eq!(
            rss_split_line(&run).as_deref(),
            Some(
                "- Resident at the end: anonymous (heap, stacks) 4.5 MiB, file-backed (mapped binary and libraries) 26.0 MiB"
            )
        );
        let mut o = String::new();
        write_run(&mut o, &run, "");
        assert!(o.contains("anonymous (heap, stacks) 4.5 MiB"), "{o}");
    }

    fn scenario(id: &str, finished_at: &str) -> ScenarioResult {
        ScenarioResult {
            scenario: id.into(),
            title: format!("title of {id}"),
            description: String::new(),
            controllers: vec!["replicaset-controller".into()],
            manager_flags: Vec::new(),
            params: Default::default(),
            kube_api_qps: 100.0,
            kube_api_burst: 200,
            timeout_seconds: 900,
            settle_seconds: 5,
            started_at: "2026-01-01 00:00:00 UTC".into(),
            finished_at: finished_at.into(),
            origin: None,
            runs: Vec::new(),
            reversed: Vec::new(),
        }
    }

    fn phased_run(m: Manager, seconds: f64, requests: u64) -> RunResult {
        let mut r = RunResult::new(m, "bin".into(), "ns".into());
        r.status = Status::Ok;
        r.phases.push(Phase {
            name: "scale up 0 → 1 000".into(),
            start_seconds: 1.0,
            seconds,
            cpu_seconds: Some(seconds / 10.0),
            peak_rss_bytes: Some(64 << 20),
            requests: Some(crate::audit::Counts {
                total: requests,
                ..Default::default()
            }),
            note: "1000 pods owned".into(),
        });
        r
    }

    fn run_with_plane(m: Manager, apiserver: f64, etcd: f64) -> RunResult {
        let mut r = RunResult::new(m, "bin".into(), "ns".into());
        r.status = Status::Ok;
        r.converge_seconds = Some(10.0);
        r.cpu_seconds_total = Some(1.0);
        r.plane_cpu_seconds = Some(
            [
                ("kube-apiserver".to_string(), apiserver),
                ("etcd".to_string(), etcd),
            ]
            .into_iter()
            .collect(),
        );
        r
    }

    #[test]
    fn both_orders_compare_the_means_of_the_api_servers_cpu() {
        let mut s = scenario("daemonset", "2026-01-01 00:05:00 UTC");
        // Upstream first: rkcm, second, is charged more; rkcm first: the other way round.
        s.runs = vec![
            run_with_plane(Manager::Upstream, 10.0, 4.0),
            run_with_plane(Manager::Rkcm, 12.0, 5.0),
        ];
        s.reversed = vec![
            run_with_plane(Manager::Rkcm, 8.0, 3.0),
            run_with_plane(Manager::Upstream, 14.0, 6.0),
        ];
        let mut o = String::new();
        write_orders(&mut o, &s);
        assert!(
            o.contains("| upstream first | rkcm | 10.0 | 1.00 | – | – | 12.0 | 5.0 |"),
            "{o}"
        );
        assert!(o.contains("| rkcm first | upstream kube-controller-manager | 10.0 | 1.00 | – | – | 14.0 | 6.0 |"), "{o}");
        assert!(o.contains("| mean of both | upstream kube-controller-manager | 10.0 | 1.00 | – | – | 12.0 | 5.0 |"), "{o}");
        assert!(
            o.contains("| mean of both | rkcm | 10.0 | 1.00 | – | – | 10.0 | 4.0 |"),
            "{o}"
        );
        // 10 / 12 for the API server, 4 / 5 for etcd.
        assert!(
            o.contains("| *rkcm / upstream, means* | | 1.00× | 1.00× | – | – | 0.83× | 0.80× |"),
            "{o}"
        );

        let report = Report {
            generated_at: String::new(),
            command: String::new(),
            commit: String::new(),
            host: Host::probe(),
            plane: String::new(),
            order: vec![Manager::Upstream, Manager::Rkcm],
            scenarios: vec![s.clone()],
        };
        let mut o = String::new();
        write_summary(&mut o, &report);
        assert!(
            o.contains("| `daemonset` | 1.00× | 1.00× | – | – | 0.83× (both orders; 1.20× upstream first, 0.57× rkcm first) |"),
            "{o}"
        );
        // One order only: the single pair's ratio, no opposite-order table.
        s.reversed.clear();
        let mut o = String::new();
        write_orders(&mut o, &s);
        assert_eq!(o, "");
        let report = Report {
            scenarios: vec![s],
            ..report
        };
        let mut o = String::new();
        write_summary(&mut o, &report);
        assert!(
            o.contains("| `daemonset` | 1.00× | 1.00× | – | – | 1.20× |"),
            "{o}"
        );
    }

    #[test]
    fn names_the_run_order_only_when_rkcm_ran_first() {
        let run = |m| RunResult::new(m, "bin".into(), "ns".into());
        let mut s = scenario("mass-rollout", "2026-01-01 00:05:00 UTC");
        s.runs = vec![run(Manager::Upstream), run(Manager::Rkcm)];
        assert_eq!(swapped_order(&s), None);
        s.runs = vec![run(Manager::Rkcm)];
        assert_eq!(swapped_order(&s), None);
        s.runs = vec![run(Manager::Rkcm), run(Manager::Upstream)];
        assert_eq!(
            swapped_order(&s).as_deref(),
            Some("rkcm first, then upstream kube-controller-manager")
        );
    }

    #[test]
    fn keeps_the_newest_result_of_each_scenario() {
        let all = vec![
            scenario("podgc", "2026-01-01 00:10:00 UTC"),
            scenario("rs", "2026-01-01 00:05:00 UTC"),
            scenario("podgc", "2026-01-02 00:00:00 UTC"),
            scenario("rs", "2026-01-01 00:01:00 UTC"),
        ];
        let kept = newest_per_scenario(all);
        let got: Vec<(&str, &str)> = kept
            .iter()
            .map(|s| (s.scenario.as_str(), s.finished_at.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("podgc", "2026-01-02 00:00:00 UTC"),
                ("rs", "2026-01-01 00:05:00 UTC")
            ]
        );
    }

    #[test]
    fn renders_phases_with_ratios_and_origin() {
        let mut s = scenario("rs", "2026-01-01 00:05:00 UTC");
        s.runs = vec![
            phased_run(Manager::Upstream, 40.0, 1000),
            phased_run(Manager::Rkcm, 20.0, 1100),
        ];
        let host = Host::probe();
        s.origin = Some(Origin {
            command: "BENCH_SCENARIOS=replicaset make bench".into(),
            commit: "abc".into(),
            host: host.clone(),
            plane: "a plane".into(),
        });
        let r = Report {
            generated_at: "now".into(),
            command: "make bench".into(),
            commit: "def".into(),
            host,
            plane: String::new(),
            order: vec![Manager::Upstream, Manager::Rkcm],
            scenarios: vec![s],
        };
        let md = markdown(&r, Path::new("latest.json"));
        assert!(md.contains("by `BENCH_SCENARIOS=replicaset make bench` at commit `abc`."));
        assert!(md.contains("Plane: a plane."));
        assert!(md.contains(
            "| rkcm | scale up 0 → 1 000 | 20.0 | 2.00 | 1100 | 64.0 | 1000 pods owned |"
        ));
        assert!(md.contains(
            "| *rkcm / upstream* | scale up 0 → 1 000 | 0.50× | 0.50× | 1.10× | 1.00× | |"
        ));
    }

    #[test]
    fn renders_rss_curves_on_one_scale() {
        let mut s = scenario("mass-rollout", "now");
        let run = |m, curve: Vec<u64>| {
            let mut r = RunResult::new(m, "bin".into(), "ns".into());
            r.status = Status::Ok;
            r.rss_curve = curve.into_iter().map(|v| v << 20).collect();
            r.rss_curve_seconds = Some(5.0);
            r
        };
        s.runs = vec![
            run(Manager::Upstream, vec![10, 40, 80, 80]),
            run(Manager::Rkcm, vec![10, 20]),
        ];
        let mut o = String::new();
        write_rss_curves(&mut o, &s);
        assert!(o.contains("█ = 80.0 MiB"), "{o}");
        assert!(o.contains("upstream  ▁▄██  peak 80.0 MiB"), "{o}");
        assert!(o.contains("rkcm      ▁▂  peak 20.0 MiB"), "{o}");
        assert!(o.contains("| 0–5 | 10.0 | 10.0 |"), "{o}");
        assert!(o.contains("| 15–20 | 80.0 | – |"), "{o}");
        let mut none = String::new();
        write_rss_curves(&mut none, &scenario("rs", "now"));
        assert!(none.is_empty());
    }

    #[test]
    fn renders_scenario_metrics_with_ratios() {
        let mut s = scenario("cronjob-schedule", "2026-01-01 00:05:00 UTC");
        let run = |m, late: f64, dup: f64| {
            let mut r = RunResult::new(m, "bin".into(), "ns".into());
            r.status = Status::Ok;
            r.metrics = vec![
                crate::results::Metric {
                    name: "Job lateness p99".into(),
                    value: late,
                    unit: "s".into(),
                },
                crate::results::Metric {
                    name: "Duplicate Jobs".into(),
                    value: dup,
                    unit: String::new(),
                },
            ];
            r
        };
        s.runs = vec![
            run(Manager::Upstream, 2.0, 0.0),
            run(Manager::Rkcm, 1.5, 0.0),
        ];
        let mut o = String::new();
        write_metrics(&mut o, &s);
        assert_eq!(
            o,
            "| Measure | upstream kube-controller-manager | rkcm | rkcm / upstream |\n\
             |---|---:|---:|---:|\n\
             | Job lateness p99 (s) | 2 | 1.50 | 0.75× |\n\
             | Duplicate Jobs | 0 | 0 | – |\n\n"
        );
        let mut none = String::new();
        write_metrics(&mut none, &scenario("rs", "now"));
        assert!(none.is_empty());
    }
}
