//! The report's charts (SVG, beside the Markdown): per scenario RSS and CPU of every run over
//! time, reaction-latency distributions, and per-object cost against the number of objects
//! where results of several sizes exist. `report` writes them for the scenarios it merges;
//! `rkcm-bench plot` writes them from any result or report files (committed ones included).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::svg::{Axis, Chart, Marker, Series, Style};
use crate::manager::Manager;
use crate::results::{RunResult, ScenarioResult, Status};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Scenario result files (`--out` of a scenario) or merged reports (`latest.json`); other
    /// JSON files are skipped.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Directory to write the charts (SVG) and their index (`README.md`) to.
    #[arg(long, default_value = "bench/reports/plots")]
    pub out: PathBuf,
}

/// A scenario's result and the name its charts are written under.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    pub scenario: ScenarioResult,
}

/// One chart: its file name, what it shows, whose it is, and the SVG.
#[derive(Debug, Clone)]
pub struct ChartFile {
    /// The source's name, or empty for a chart across scenarios.
    pub source: String,
    pub file: String,
    pub title: String,
    pub svg: String,
}

fn color(m: Manager) -> &'static str {
    match m {
        Manager::Upstream => "#e66101",
        Manager::Rkcm => "#5e3c99",
        Manager::RkcmShards => "#1b9e77",
        Manager::RkcmShardsClient => "#7570b3",
    }
}

/// Every run of the scenario with its legend label: the first order solid, the opposite
/// order (`BENCH_ORDERS=both`) dashed.
fn labelled_runs(s: &ScenarioResult) -> Vec<(&RunResult, String, bool)> {
    let mut out: Vec<(&RunResult, String, bool)> = s
        .runs
        .iter()
        .map(|r| (r, r.manager.name().to_string(), false))
        .collect();
    out.extend(
        s.reversed
            .iter()
            .map(|r| (r, format!("{} (opposite order)", r.manager.name()), true)),
    );
    out
}

const MIB: f64 = 1_048_576.0;

/// The phases of the scenario's first run, as named stretches of its time axis (the other
/// runs' phases start within seconds of these).
fn phase_bands(s: &ScenarioResult) -> Vec<(f64, f64, String)> {
    s.runs.first().map_or_else(Vec::new, |r| {
        r.phases
            .iter()
            .map(|p| (p.start_seconds, p.start_seconds + p.seconds, p.name.clone()))
            .collect()
    })
}

/// A run's RSS over time in MiB, and how it was sampled: the fixed-interval usage samples
/// when the run has them, else the RSS curve of the scenarios that kept one.
fn rss_points(r: &RunResult) -> Option<(Vec<(f64, f64)>, String)> {
    if let Some(u) = r.usage.as_ref().filter(|u| !u.rss_bytes.is_empty()) {
        let pts = u
            .points(&u.rss_bytes)
            .into_iter()
            .map(|(t, b)| (t, b as f64 / MIB))
            .collect();
        let how = format!(
            "largest VmRSS of each {} s (sampled every 100 ms)",
            super::svg::number(u.interval_seconds)
        );
        return Some((pts, how));
    }
    let b = r.rss_curve_seconds.filter(|_| !r.rss_curve.is_empty())?;
    let pts = r
        .rss_curve
        .iter()
        .enumerate()
        .filter(|(_, v)| **v > 0)
        .map(|(i, v)| ((i + 1) as f64 * b, *v as f64 / MIB))
        .collect();
    let how = format!(
        "largest VmRSS of each {} s (sampled every 100 ms)",
        super::svg::number(b)
    );
    Some((pts, how))
}

fn rss_chart(src: &Source) -> Option<ChartFile> {
    let mut series = Vec::new();
    let mut how = String::new();
    for (r, label, dashed) in labelled_runs(&src.scenario) {
        if let Some((pts, h)) = rss_points(r) {
            how = h;
            series.push(Series::new(label, color(r.manager), pts).dashed(dashed));
        }
    }
    if series.is_empty() {
        return None;
    }
    let title = format!("{}: resident memory (RSS) over the run", src.name);
    let chart = Chart {
        title: title.clone(),
        subtitle: format!("{how}; {}", src.scenario.title),
        x: Axis::linear("seconds since the manager started"),
        y: Axis::linear("RSS (MiB)"),
        series,
        bands: phase_bands(&src.scenario),
    };
    Some(ChartFile {
        source: src.name.clone(),
        file: format!("{}-rss.svg", src.name),
        title,
        svg: chart.render(),
    })
}

fn cpu_chart(src: &Source) -> Option<ChartFile> {
    let mut series = Vec::new();
    let mut interval = 0.0;
    for (r, label, dashed) in labelled_runs(&src.scenario) {
        let Some(u) = r.usage.as_ref().filter(|u| !u.cpu_seconds.is_empty()) else {
            continue;
        };
        interval = u.interval_seconds;
        let mut pts = vec![(0.0, 0.0)];
        pts.extend(u.points(&u.cpu_seconds));
        series.push(Series::new(label, color(r.manager), pts).dashed(dashed));
    }
    if series.is_empty() {
        return None;
    }
    let title = format!("{}: CPU time over the run", src.name);
    let chart = Chart {
        title: title.clone(),
        subtitle: format!(
            "utime + stime from /proc/<pid>/stat, every {} s (the slope is the cores busy); {}",
            super::svg::number(interval),
            src.scenario.title
        ),
        x: Axis::linear("seconds since the manager started"),
        y: Axis::linear("CPU seconds since the start"),
        series,
        bands: phase_bands(&src.scenario),
    };
    Some(ChartFile {
        source: src.name.clone(),
        file: format!("{}-cpu.svg", src.name),
        title,
        svg: chart.render(),
    })
}

/// The CDF of a sorted sample: (value, share of samples at most that value), starting at 0.
pub fn cdf(sorted: &[f64]) -> Vec<(f64, f64)> {
    let n = sorted.len() as f64;
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(sorted.len() + 1);
    if let Some(&first) = sorted.first() {
        out.push((first, 0.0));
    }
    for (i, &v) in sorted.iter().enumerate() {
        let share = (i + 1) as f64 / n;
        match out.last_mut() {
            // Equal values: one step up to the last of them.
            Some(last) if last.0 == v && i > 0 => last.1 = share,
            _ => out.push((v, share)),
        }
    }
    out
}

/// The CDF of every reaction latency of the runs (`tag`: load or idle), when they kept them.
fn latency_cdf_chart(src: &Source, tag: &str) -> Option<ChartFile> {
    let name = format!("reaction ({tag})");
    let mut series = Vec::new();
    for (r, label, dashed) in labelled_runs(&src.scenario) {
        let Some(d) = r.distributions.iter().find(|d| d.name == name) else {
            continue;
        };
        let label = format!("{label} ({} changes)", d.values.len());
        series.push(
            Series::new(label, color(r.manager), cdf(&d.values))
                .style(Style::Step)
                .dashed(dashed),
        );
    }
    if series.is_empty() {
        return None;
    }
    let title = format!(
        "{}: reaction latency {}, every controller",
        src.name,
        if tag == "load" { "under load" } else { "idle" }
    );
    let chart = Chart {
        title: title.clone(),
        subtitle: "from a change's completion to the manager's first write for it (audit log); 0 ms at the left edge".into(),
        x: Axis::log("milliseconds (log scale)"),
        y: Axis::linear("share of changes answered within").with_max(1.0),
        series,
        bands: Vec::new(),
    };
    Some(ChartFile {
        source: src.name.clone(),
        file: format!("{}-latency-{tag}.svg", src.name),
        title,
        svg: chart.render(),
    })
}

/// The `reaction <controller> <stat> (<tag>)` metrics of a run: controller → stat → ms.
fn reaction_quantiles(r: &RunResult, tag: &str) -> BTreeMap<String, BTreeMap<String, f64>> {
    let suffix = format!(" ({tag})");
    let mut out: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for m in &r.metrics {
        let Some(rest) = m
            .name
            .strip_prefix("reaction ")
            .and_then(|n| n.strip_suffix(suffix.as_str()))
        else {
            continue;
        };
        if let Some((controller, stat)) = rest.rsplit_once(' ')
            && ["p50", "p99", "max"].contains(&stat)
        {
            out.entry(controller.to_string())
                .or_default()
                .insert(stat.to_string(), m.value);
        }
    }
    out
}

/// p50, p99 and max of each controller's reaction latency, side by side for the managers
/// (from the metrics every envelope result has).
fn latency_quantile_chart(src: &Source, tag: &str) -> Option<ChartFile> {
    let runs: Vec<_> = labelled_runs(&src.scenario)
        .into_iter()
        .map(|(r, label, dashed)| (r, label, dashed, reaction_quantiles(r, tag)))
        .filter(|(.., q)| !q.is_empty())
        .collect();
    let controllers: Vec<String> = runs
        .iter()
        .flat_map(|(.., q)| q.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if controllers.is_empty() {
        return None;
    }
    let n = runs.len() as f64;
    // The legend: a colour per manager, a marker per statistic (entries without points).
    let mut series: Vec<Series> = [Manager::Upstream, Manager::Rkcm]
        .into_iter()
        .filter(|m| runs.iter().any(|(r, ..)| r.manager == *m))
        .map(|m| {
            Series::new(m.name(), color(m), Vec::new())
                .style(Style::Markers)
                .marker(Marker::Square)
        })
        .collect();
    for (stat, marker) in [
        ("p50", Marker::Circle),
        ("p99", Marker::Square),
        ("max", Marker::Triangle),
    ] {
        series.push(
            Series::new(stat, "#555555", Vec::new())
                .style(Style::Markers)
                .marker(marker),
        );
    }
    for (k, (r, _, _, q)) in runs.iter().enumerate() {
        // Each run's markers a little apart, so that equal values stay visible.
        let dx = (k as f64 - (n - 1.0) / 2.0) * 0.5 / n.max(1.0);
        for (stat, marker) in [
            ("p50", Marker::Circle),
            ("p99", Marker::Square),
            ("max", Marker::Triangle),
        ] {
            let pts = controllers
                .iter()
                .enumerate()
                .filter_map(|(i, c)| Some((i as f64 + dx, *q.get(c)?.get(stat)?)))
                .collect();
            series.push(
                Series::new("", color(r.manager), pts)
                    .style(Style::Markers)
                    .marker(marker),
            );
        }
    }
    let title = format!(
        "{}: reaction latency {}, per controller",
        src.name,
        if tag == "load" { "under load" } else { "idle" }
    );
    let order = if src.scenario.reversed.is_empty() {
        ""
    } else {
        "; both orders side by side"
    };
    let chart = Chart {
        title: title.clone(),
        subtitle: format!(
            "from a change's completion to the manager's first write for it (audit log){order}"
        ),
        x: Axis::categories("controller", controllers),
        y: Axis::log("milliseconds (log scale)"),
        series,
        bands: Vec::new(),
    };
    Some(ChartFile {
        source: src.name.clone(),
        file: format!("{}-latency-quantiles-{tag}.svg", src.name),
        title,
        svg: chart.render(),
    })
}

/// The scenario's kind of cost line and its number of objects, for the per-object charts.
fn objects(s: &ScenarioResult, r: &RunResult) -> Option<(&'static str, &'static str, f64)> {
    let param = |k: &str| s.params.get(k)?.parse::<f64>().ok().filter(|v| *v > 0.0);
    let id = s.scenario.as_str();
    let (family, what, n) = if id.starts_with("job-") && s.params.contains_key("completions") {
        ("job", "Indexed Job: pods", param("completions")?)
    } else if id == "envelope" {
        let cached = r.metrics.iter().find(|m| m.name == "pods cached");
        let n = cached.map(|m| m.value).or_else(|| param("pods"))?;
        ("envelope", "scale envelope: pods cached", n)
    } else if id.starts_with("idle") {
        ("idle", "idle: running pods", param("pods")?)
    } else if id.starts_with("threshold") {
        ("threshold", "threshold: pods loaded", param("pods")?)
    } else if id.starts_with("replicaset") {
        ("replicaset", "ReplicaSet: replicas", param("replicas")?)
    } else if id.starts_with("podgc") {
        ("podgc", "PodGC: terminated pods", param("pods")?)
    } else if id.starts_with("daemonset") {
        ("daemonset", "DaemonSet: nodes", param("nodes")?)
    } else if id.starts_with("cronjob") {
        ("cronjob", "CronJob: CronJobs", param("cronjobs")?)
    } else {
        return None;
    };
    Some((family, what, n))
}

/// Per family, per manager: objects → (peak RSS bytes per object, when the run started).
type Costs =
    BTreeMap<(&'static str, &'static str), BTreeMap<Manager, BTreeMap<u64, (f64, String)>>>;

/// Peak RSS per object of every successful run, per kind of scenario and size (a size run
/// twice: its newest run).
fn per_object_costs(sources: &[Source]) -> Costs {
    let mut costs: Costs = BTreeMap::new();
    for src in sources {
        let s = &src.scenario;
        for r in s.runs.iter().filter(|r| r.status == Status::Ok) {
            let (Some((family, what, n)), Some(peak)) = (objects(s, r), r.peak_rss_bytes) else {
                continue;
            };
            let at = costs
                .entry((family, what))
                .or_default()
                .entry(r.manager)
                .or_default()
                .entry(n as u64)
                .or_insert((0.0, String::new()));
            if s.started_at >= at.1 {
                *at = (peak as f64 / n, s.started_at.clone());
            }
        }
    }
    costs
}

/// Peak RSS per object against the number of objects, one chart per kind of scenario that
/// ran at two sizes or more.
fn per_object_charts(sources: &[Source]) -> Vec<ChartFile> {
    let mut out = Vec::new();
    for ((family, what), by_manager) in per_object_costs(sources) {
        if by_manager.values().all(|sizes| sizes.len() < 2) {
            continue;
        }
        let series = by_manager
            .iter()
            .map(|(m, sizes)| {
                let pts = sizes
                    .iter()
                    .map(|(n, (b, _))| (*n as f64, b / 1024.0))
                    .collect();
                Series::new(m.name(), color(*m), pts).marker(Marker::Circle)
            })
            .collect();
        let title = format!("Peak RSS per object, {what}");
        let chart = Chart {
            bands: Vec::new(),
            title: title.clone(),
            subtitle: "VmHWM at the end of the run / the scenario's objects, newest run of each size; the fixed part shrinks as they grow".into(),
            x: Axis::log(&format!("{what} (log scale)")),
            y: Axis::linear("KiB per object"),
            series,
        };
        out.push(ChartFile {
            source: String::new(),
            file: format!("per-object-{family}.svg"),
            title,
            svg: chart.render(),
        });
    }
    out
}

/// Every chart of the sources: per source RSS, CPU and latency, then the per-object ones.
pub fn charts(sources: &[Source]) -> Vec<ChartFile> {
    let mut out = Vec::new();
    for src in sources {
        out.extend(rss_chart(src));
        out.extend(cpu_chart(src));
        for tag in ["load", "idle"] {
            out.extend(latency_cdf_chart(src, tag));
            out.extend(latency_quantile_chart(src, tag));
        }
    }
    out.extend(per_object_charts(sources));
    out
}

/// Writes the charts into `dir` with an index (`README.md`) linking each, and the charts
/// already there from other result files.
pub fn write(dir: &Path, charts: &[ChartFile]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for c in charts {
        let path = dir.join(&c.file);
        std::fs::write(&path, &c.svg).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut others: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|f| f.ends_with(".svg") && !charts.iter().any(|c| c.file == *f))
        .collect();
    others.sort();
    let path = dir.join("README.md");
    std::fs::write(&path, index(charts, &others))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The index of a chart directory: the charts just written, then the others there.
fn index(charts: &[ChartFile], others: &[String]) -> String {
    let mut o = String::from(
        "# Benchmark charts\n\nWritten by `make bench` (from the report's scenarios) and by \
         `rkcm-bench plot <result or report files>` (e.g. the committed \
         `bench/reports/*.json`).\n\n",
    );
    for c in charts {
        o.push_str(&format!("- [{}]({})\n", c.title, c.file));
    }
    if !others.is_empty() {
        o.push_str("\nWritten earlier, from other result files:\n\n");
        for f in others {
            o.push_str(&format!("- [{f}]({f})\n"));
        }
    }
    o
}

/// What a plot reads of a merged report (`latest.json` and the like): its scenarios, and the
/// field that tells a report from other JSON. Not `super::Report`: the report module writes
/// the charts, so the charts do not depend on it.
#[derive(serde::Deserialize)]
struct ReportFile {
    #[allow(dead_code)]
    generated_at: String,
    scenarios: Vec<ScenarioResult>,
}

/// A loaded input: its file stem, whether it is a bench's own newest result (a scenario
/// file, or `latest.json`), and its scenarios.
fn load(path: &Path) -> anyhow::Result<Option<(String, bool, Vec<ScenarioResult>)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let stem = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    if let Ok(s) = serde_json::from_str::<ScenarioResult>(&text) {
        return Ok(Some((stem, true, vec![s])));
    }
    if let Ok(r) = serde_json::from_str::<ReportFile>(&text) {
        let canonical = stem == "latest";
        return Ok(Some((stem, canonical, r.scenarios)));
    }
    Ok(None)
}

/// Names the scenarios of the inputs, each run once (the same run may be in a scenario file
/// and in `latest.json`): a bench's own newest result by its id, one of another report (a
/// sized run kept for comparison, `envelope-1500.json`) by the report's name.
pub fn sources(inputs: Vec<(String, bool, Vec<ScenarioResult>)>) -> Vec<Source> {
    let mut all: Vec<(bool, String, ScenarioResult)> = inputs
        .into_iter()
        .flat_map(|(stem, canonical, ss)| ss.into_iter().map(move |s| (canonical, stem.clone(), s)))
        .collect();
    // Canonical first, so that a run in both keeps the plain name.
    all.sort_by_key(|(canonical, ..)| !*canonical);
    let mut out: Vec<Source> = Vec::new();
    for (canonical, stem, s) in all {
        if out
            .iter()
            .any(|o| o.scenario.scenario == s.scenario && o.scenario.started_at == s.started_at)
        {
            continue;
        }
        let mut name = if canonical {
            s.scenario.clone()
        } else if stem.starts_with(&s.scenario) {
            stem
        } else {
            format!("{stem}-{}", s.scenario)
        };
        let base = name.clone();
        let mut k = 2;
        while out.iter().any(|o| o.name == name) {
            name = format!("{base}-{k}");
            k += 1;
        }
        out.push(Source { name, scenario: s });
    }
    out
}

/// `rkcm-bench plot`: charts of the given files into `--out`.
pub fn run(args: &Args) -> anyhow::Result<usize> {
    let mut inputs = Vec::new();
    for p in &args.inputs {
        match load(p)? {
            Some(i) => inputs.push(i),
            None => say!(
                "skipping {}: neither a scenario result nor a report",
                p.display()
            ),
        }
    }
    let charts = charts(&sources(inputs));
    write(&args.out, &charts)?;
    Ok(charts.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Distribution, Metric, Usage};

    fn scenario(id: &str, started_at: &str, params: &[(&str, &str)]) -> ScenarioResult {
        let mut s = ScenarioResult::for_test(id, params, None);
        s.started_at = started_at.into();
        s.finished_at = started_at.into();
        s
    }

    fn run(m: Manager, peak_mib: u64) -> RunResult {
        let mut r = RunResult::new(m, "bin".into(), "ns".into());
        r.status = Status::Ok;
        r.peak_rss_bytes = Some(peak_mib << 20);
        r
    }

    #[test]
    fn the_cdf_rises_by_one_share_per_sample_and_once_per_value() {
        type Case<'a> = (&'a [f64], Vec<(f64, f64)>);
        let cases: [Case; 4] = [
            (&[], vec![]),
            (&[5.0], vec![(5.0, 0.0), (5.0, 1.0)]),
            (
                &[0.0, 1.0, 1.0, 4.0],
                vec![(0.0, 0.0), (0.0, 0.25), (1.0, 0.75), (4.0, 1.0)],
            ),
            (&[2.0, 2.0], vec![(2.0, 0.0), (2.0, 1.0)]),
        ];
        for (sorted, want) in cases {
            assert_eq!(cdf(sorted), want, "{sorted:?}");
        }
    }

    #[test]
    fn rss_over_time_comes_from_the_usage_samples_or_else_the_curve() {
        let mut r = run(Manager::Rkcm, 10);
        assert_eq!(rss_points(&r), None);
        r.rss_curve = vec![1 << 20, 0, 3 << 20];
        r.rss_curve_seconds = Some(5.0);
        let (pts, how) = rss_points(&r).unwrap();
        // Bucket i ends at (i + 1) × 5 s; an empty bucket is left out.
        assert_eq!(pts, [(5.0, 1.0), (15.0, 3.0)]);
        assert!(how.contains("each 5 s"), "{how}");
        let mut u = Usage::new(1.0);
        u.push(2 << 20, 0.5);
        u.push(4 << 20, 0.7);
        r.usage = Some(u);
        let (pts, how) = rss_points(&r).unwrap();
        assert_eq!(pts, [(1.0, 2.0), (2.0, 4.0)]);
        assert!(how.contains("each 1 s"), "{how}");
    }

    #[test]
    fn a_scenario_with_usage_gets_rss_and_cpu_charts_that_are_well_formed() {
        let mut s = scenario("idle-empty", "t", &[]);
        for m in [Manager::Upstream, Manager::Rkcm] {
            let mut r = run(m, 10);
            let mut u = Usage::new(1.0);
            for i in 1..=5u64 {
                u.push(i << 20, i as f64 / 10.0);
            }
            r.usage = Some(u);
            s.runs.push(r);
        }
        s.reversed.push(run(Manager::Rkcm, 10));
        let src = Source {
            name: "idle-empty".into(),
            scenario: s,
        };
        let charts = charts(std::slice::from_ref(&src));
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(files, ["idle-empty-rss.svg", "idle-empty-cpu.svg"]);
        for c in &charts {
            crate::report::svg::tests::check_xml(&c.svg).unwrap_or_else(|e| panic!("{e}"));
            assert!(c.svg.contains(">upstream</text>") && c.svg.contains(">rkcm</text>"));
            assert_eq!(c.source, "idle-empty");
        }
        // The CPU line starts at 0 s with no CPU used.
        assert_eq!(charts[1].svg.matches("<polyline").count(), 2);
    }

    #[test]
    fn reaction_latency_charts_come_from_the_distributions_and_the_metrics() {
        let mut s = scenario("envelope", "t", &[]);
        for (m, p50) in [(Manager::Upstream, 3.0), (Manager::Rkcm, 2.0)] {
            let mut r = run(m, 10);
            r.distributions.push(Distribution {
                name: "reaction (load)".into(),
                unit: "ms".into(),
                values: vec![0.0, 1.0, p50, 40.0],
            });
            for (stat, v) in [("p50", p50), ("p99", 30.0), ("max", 40.0)] {
                r.metrics.push(Metric {
                    name: format!("reaction deployment {stat} (load)"),
                    value: v,
                    unit: "ms".into(),
                });
            }
            r.metrics.push(Metric {
                name: "reaction deployment changes (load)".into(),
                value: 4.0,
                unit: String::new(),
            });
            s.runs.push(r);
        }
        let q = reaction_quantiles(&s.runs[1], "load");
        assert_eq!(q["deployment"]["p50"], 2.0);
        assert_eq!(q["deployment"].len(), 3, "changes is no quantile: {q:?}");
        assert!(reaction_quantiles(&s.runs[1], "idle").is_empty());
        let src = Source {
            name: "envelope".into(),
            scenario: s,
        };
        let files: Vec<String> = charts(&[src]).into_iter().map(|c| c.file).collect();
        assert_eq!(
            files,
            [
                "envelope-latency-load.svg",
                "envelope-latency-quantiles-load.svg"
            ]
        );
    }

    #[test]
    fn per_object_cost_is_charted_where_a_kind_ran_at_two_sizes() {
        let mut small = scenario("job-1k", "2026-01-01", &[("completions", "1000")]);
        small.runs = vec![run(Manager::Upstream, 100), run(Manager::Rkcm, 40)];
        // The same size again, older: the newer one counts.
        let mut older = scenario("job-1k", "2025-01-01", &[("completions", "1000")]);
        older.runs = vec![run(Manager::Rkcm, 80)];
        let mut large = scenario("job-10k", "2026-01-02", &[("completions", "10000")]);
        large.runs = vec![run(Manager::Upstream, 200), run(Manager::Rkcm, 80)];
        // One size only: no chart.
        let mut idle = scenario("idle", "2026-01-01", &[("pods", "10000")]);
        idle.runs = vec![run(Manager::Rkcm, 70)];
        let sources: Vec<Source> = [small, older, large, idle]
            .into_iter()
            .enumerate()
            .map(|(i, s)| Source {
                name: format!("s{i}"),
                scenario: s,
            })
            .collect();
        let costs = per_object_costs(&sources);
        let kib = |family: &str, m: Manager| -> Vec<(u64, f64)> {
            let (_, by) = costs.iter().find(|((f, _), _)| *f == family).unwrap();
            by[&m].iter().map(|(n, (b, _))| (*n, b / 1024.0)).collect()
        };
        // 40 MiB / 1000 pods = 40.96 KiB a pod (not the older run's 80 MiB).
        assert_eq!(kib("job", Manager::Rkcm), [(1000, 40.96), (10000, 8.192)]);
        assert_eq!(
            kib("job", Manager::Upstream),
            [(1000, 102.4), (10000, 20.48)]
        );
        assert_eq!(kib("idle", Manager::Rkcm), [(10000, 7.168)]);
        let charts = per_object_charts(&sources);
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(files, ["per-object-job.svg"]);
        crate::report::svg::tests::check_xml(&charts[0].svg).unwrap_or_else(|e| panic!("{e}"));
        assert!(charts[0].title.contains("Indexed Job"));
    }

    #[test]
    fn the_index_lists_the_new_charts_then_the_earlier_ones() {
        let c = ChartFile {
            source: "idle".into(),
            file: "idle-rss.svg".into(),
            title: "idle: RSS".into(),
            svg: String::new(),
        };
        let text = index(std::slice::from_ref(&c), &["old.svg".to_string()]);
        let new = text.find("- [idle: RSS](idle-rss.svg)").expect(&text);
        let old = text.find("- [old.svg](old.svg)").expect(&text);
        assert!(new < old, "{text}");
        assert!(!index(&[c], &[]).contains("earlier"));
    }

    #[test]
    fn inputs_are_named_once_each() {
        let env = scenario("envelope", "2026-11-29 10:39", &[]);
        let env_1500 = scenario("envelope", "2026-11-29 04:39", &[]);
        let podgc = scenario("podgc-terminated", "2026-11-28", &[]);
        let quick_podgc = scenario("podgc-terminated", "2026-11-24", &[]);
        let inputs = vec![
            ("envelope-1500".to_string(), false, vec![env_1500]),
            ("envelope".to_string(), true, vec![env.clone()]),
            ("latest".to_string(), true, vec![env.clone(), podgc.clone()]),
            ("podgc".to_string(), true, vec![podgc]),
            ("quick-lean".to_string(), false, vec![quick_podgc]),
        ];
        let got: Vec<(String, String)> = sources(inputs)
            .into_iter()
            .map(|s| (s.name, s.scenario.started_at))
            .collect();
        assert_eq!(
            got,
            [
                ("envelope".to_string(), "2026-11-29 10:39".to_string()),
                ("podgc-terminated".to_string(), "2026-11-28".to_string()),
                ("envelope-1500".to_string(), "2026-11-29 04:39".to_string()),
                (
                    "quick-lean-podgc-terminated".to_string(),
                    "2026-11-24".to_string()
                ),
            ]
        );
    }
}
