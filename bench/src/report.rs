//! Merges scenario result files into one JSON document and a Markdown report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::manager::Manager;
use crate::results::{Host, Origin, RunResult, ScenarioResult, Status};

mod cells;
pub mod plots;
mod runs;
mod shards;
mod sizes;
mod svg;
mod tables;
use cells::{
    APISERVER, cpu, manager_label, mean_of_orders, mib, ok_run, order_label, peak_rss, plane_cpu,
    ratio, secs, total_requests,
};
use runs::{write_rss_curves, write_run};
use tables::{write_metrics, write_orders, write_phases};

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
    /// Directory for the charts (SVG) [default: `plots` beside the Markdown report, or
    /// `<report name>-plots` for a report not named `latest.md`].
    #[arg(long)]
    pub plots: Option<PathBuf>,
}

/// Where the charts of the report `md` go by default.
fn default_plots_dir(md: &Path) -> PathBuf {
    let dir = md.parent().unwrap_or(Path::new(""));
    match md.file_stem().map(|s| s.to_string_lossy()) {
        Some(stem) if stem != "latest" => dir.join(format!("{stem}-plots")),
        _ => dir.join("plots"),
    }
}

/// A chart as the Markdown report links it: whose it is, its path from the report, title.
#[derive(Debug, Clone)]
pub struct ChartLink {
    /// The scenario id, or empty for a chart across scenarios.
    pub source: String,
    pub path: String,
    pub title: String,
}

/// Writes the charts of the report's scenarios into `dir`; their links from `md`.
fn write_charts(report: &Report, md: &Path, dir: &Path) -> anyhow::Result<Vec<ChartLink>> {
    let sources: Vec<plots::Source> = report
        .scenarios
        .iter()
        .map(|s| plots::Source {
            name: s.scenario.clone(),
            scenario: s.clone(),
        })
        .collect();
    let charts = plots::charts(&sources);
    plots::write(dir, &charts)?;
    let base = md.parent().unwrap_or(Path::new(""));
    let rel = dir.strip_prefix(base).unwrap_or(dir);
    Ok(charts
        .into_iter()
        .map(|c| ChartLink {
            source: c.source,
            path: rel.join(&c.file).to_string_lossy().into_owned(),
            title: c.title,
        })
        .collect())
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
/// tree's, marked when it has uncommitted changes outside `bench/reports`.
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
            // The bench's own reports do not count (a series of runs rewrites them).
            let dirty = run(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":!bench/reports",
            ])
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
    let plots_dir = args
        .plots
        .clone()
        .unwrap_or_else(|| default_plots_dir(&args.md));
    let charts = write_charts(&report, &args.md, &plots_dir)?;
    say!("charts: {} in {}", charts.len(), plots_dir.display());
    std::fs::write(
        &args.md,
        crate::results::without_home(&markdown(&report, &args.json, &charts)),
    )
    .with_context(|| format!("writing {}", args.md.display()))?;
    Ok(report
        .scenarios
        .iter()
        .flat_map(|s| &s.runs)
        .all(|r| !r.status.is_failure()))
}

pub fn markdown(r: &Report, json_path: &Path, charts: &[ChartLink]) -> String {
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
         flags. Each uses its own client certificate (users `kcm` and `rkcm`). The envelope \
         and the threshold run a manager of one process leader-elected, as it is deployed \
         (each section's flags say how), since sharded replicas renew member sessions."
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
    shards::write_shard_summary(&mut o, &r.scenarios);
    sizes::write_sizes(&mut o, &r.scenarios);
    write_charts_across(&mut o, charts);
    // A size's own runs are in the sizes section and its result file.
    for s in r.scenarios.iter().filter(|s| !sizes::is_size_run(s)) {
        write_scenario(&mut o, s, r, charts);
    }
    o
}

/// The charts of no one scenario (per-object cost against size), as images.
fn write_charts_across(o: &mut String, charts: &[ChartLink]) {
    let across: Vec<&ChartLink> = charts.iter().filter(|c| c.source.is_empty()).collect();
    if across.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "## Charts across scenarios
"
    );
    for c in across {
        let _ = writeln!(
            o,
            "![{}]({})
",
            c.title, c.path
        );
    }
}

/// The charts of one scenario, as images.
fn write_scenario_charts(o: &mut String, id: &str, charts: &[ChartLink]) {
    for c in charts.iter().filter(|c| c.source == id) {
        let _ = writeln!(
            o,
            "![{}]({})
",
            c.title, c.path
        );
    }
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

fn write_scenario(o: &mut String, s: &ScenarioResult, r: &Report, charts: &[ChartLink]) {
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
    write_comparisons(o, s);
    write_phases(o, s);
    write_scenario_charts(o, &s.scenario, charts);
    write_rss_curves(o, s);
    for run in &s.runs {
        write_run(o, run, "");
    }
    for run in &s.reversed {
        write_run(o, run, " (opposite order)");
    }
}

/// A sharded comparison's tables, or both orders and the metrics of upstream vs rkcm.
fn write_comparisons(o: &mut String, s: &ScenarioResult) {
    if shards::has_shards(s) {
        shards::write_shards(o, s);
    } else {
        write_orders(o, s);
        write_metrics(o, s);
    }
}

/// One row per scenario: rkcm / upstream for the numbers the targets name, the API
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
    for s in r.scenarios.iter().filter(|s| !shards::has_shards(s)) {
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

#[cfg(test)]
mod tests {
    use super::runs::rss_split_line;
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
        let md = markdown(&r, Path::new("latest.json"), &[]);
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
    fn the_report_shows_its_charts() {
        let r = Report {
            generated_at: "now".into(),
            command: "make bench".into(),
            commit: "def".into(),
            host: Host::probe(),
            plane: String::new(),
            order: vec![Manager::Upstream, Manager::Rkcm],
            scenarios: vec![scenario("rs", "now"), scenario("idle", "now")],
        };
        let link = |source: &str, path: &str| ChartLink {
            source: source.into(),
            path: path.into(),
            title: format!("chart {path}"),
        };
        let charts = [
            link("idle", "plots/idle-rss.svg"),
            link("", "plots/per-object-job.svg"),
        ];
        let md = markdown(&r, Path::new("latest.json"), &charts);
        let across = md.find("## Charts across scenarios").expect(&md);
        let per_object = md
            .find("![chart plots/per-object-job.svg](plots/per-object-job.svg)")
            .expect(&md);
        let rs = md.find("## title of rs").expect(&md);
        let idle = md.find("## title of idle").expect(&md);
        let idle_rss = md
            .find("![chart plots/idle-rss.svg](plots/idle-rss.svg)")
            .expect(&md);
        assert!(across < per_object && per_object < rs && rs < idle && idle < idle_rss);
        assert_eq!(md.matches("![").count(), 2);
        assert!(!markdown(&r, Path::new("latest.json"), &[]).contains("## Charts"));
    }

    #[test]
    fn charts_go_beside_the_report() {
        let cases = [
            ("bench/reports/latest.md", "bench/reports/plots"),
            ("bench/reports/quick.md", "bench/reports/quick-plots"),
            ("latest.md", "plots"),
        ];
        for (md, want) in cases {
            assert_eq!(default_plots_dir(Path::new(md)), Path::new(want), "{md}");
        }
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

    /// A run of `m` with steps (name, CPU seconds, peak MiB, requests).
    fn stepped_run(m: Manager, steps: &[(&str, f64, u64, u64)]) -> RunResult {
        let mut r = RunResult::new(m, "bin".into(), "ns".into());
        r.status = Status::Ok;
        r.converge_seconds = Some(10.0);
        r.cpu_seconds_total = Some(steps.iter().map(|s| s.1).sum());
        r.peak_rss_bytes = steps.iter().map(|s| s.2 << 20).max();
        for (name, cpu, mib, requests) in steps {
            r.phases.push(Phase {
                name: (*name).into(),
                start_seconds: 0.0,
                seconds: 1.0,
                cpu_seconds: Some(*cpu),
                peak_rss_bytes: Some(mib << 20),
                requests: Some(crate::audit::Counts {
                    total: *requests,
                    ..Default::default()
                }),
                note: String::new(),
            });
        }
        r
    }

    #[test]
    fn the_shard_summary_compares_the_steps_before_the_failover() {
        let mut s = scenario("threshold-shards", "now");
        s.runs = vec![
            stepped_run(
                Manager::Rkcm,
                &[
                    ("cold start", 4.0, 600, 2),
                    ("settled 120 s", 1.0, 600, 0),
                    ("failover", 0.0, 600, 50),
                ],
            ),
            stepped_run(
                Manager::RkcmShards,
                &[
                    ("cold start", 4.5, 250, 200),
                    ("settled 120 s", 0.5, 240, 100),
                    ("failover (shards)", 4.0, 500, 400),
                ],
            ),
        ];
        let mut o = String::new();
        shards::write_shard_summary(&mut o, &[s.clone()]);
        // Before the failover: 250 of 600 MiB, 5.0 of 5.0 s, 300 of 2 requests.
        assert!(
            o.contains(
                "| `threshold-shards` | rkcm sharded (server selector) | 0.42× | 1.00× | 150.00× |"
            ),
            "{o}"
        );
        // The whole run: 500 of 600 MiB, 9.0 of 5.0 s.
        assert!(
            o.contains("| `threshold-shards` | rkcm sharded (server selector) | 0.83× |"),
            "{o}"
        );
        assert!(o.contains("| 1.80× |"), "{o}");
        // Without a failover step, no such table.
        for r in &mut s.runs {
            r.phases.retain(|p| !p.name.starts_with("failover"));
        }
        let mut none = String::new();
        shards::write_shard_summary(&mut none, &[s]);
        assert!(!none.contains("Before the failover"), "{none}");
    }
}
