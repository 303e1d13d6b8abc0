//! Each run's section of the report: the RSS curve, the requests the manager made, its phases.

use std::fmt::Write as _;
use std::path::Path;

use super::cells::{cpu, manager_label, mib};
use crate::results::{RunResult, ScenarioResult};

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
pub(super) fn write_rss_curves(o: &mut String, s: &ScenarioResult) {
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
pub(super) fn rss_split_line(run: &RunResult) -> Option<String> {
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

pub(super) fn write_run(o: &mut String, run: &RunResult, pass: &str) {
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
