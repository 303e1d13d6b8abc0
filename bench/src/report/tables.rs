//! The per-scenario tables: both orders side by side, scenario-specific metrics and timed phases.

use std::fmt::Write as _;

use super::cells::{
    APISERVER, cpu, manager_label, mean_of_orders, measure as show, mib, order_label, peak_rss,
    plane_cpu, ratio, secs, total_requests,
};
use crate::manager::Manager;
use crate::results::{RunResult, ScenarioResult};

/// Both orders side by side (`--both-orders`): each pass's numbers, and the means.
pub(super) fn write_orders(o: &mut String, s: &ScenarioResult) {
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

/// Scenario-specific numbers (e.g. Job lateness), one row each, one column per manager.
pub(super) fn write_metrics(o: &mut String, s: &ScenarioResult) {
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
pub(super) fn write_phases(o: &mut String, s: &ScenarioResult) {
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
