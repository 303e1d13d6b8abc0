//! Sharded rkcm (several replicas, `--rkcm-shards`) against one rkcm of the same run: the
//! ratios issue 54 sets targets for (peak RSS per replica, total CPU, API requests and the API
//! server's CPU, reaction p99), per order and as the mean of both orders.

use std::fmt::Write as _;

use super::cells::{
    APISERVER, cpu, manager_label, measure as show, metric, mib, ok_run, order_label, plane_cpu,
    ratio, total_requests,
};
use crate::manager::Manager;
use crate::results::{Phase, RunResult, ScenarioResult};

const SHARDED: [Manager; 2] = [Manager::RkcmShards, Manager::RkcmShardsClient];

/// Whether the scenario ran a sharded manager.
pub(super) fn has_shards(s: &ScenarioResult) -> bool {
    s.runs.iter().any(|r| r.manager.is_sharded())
}

fn peak(r: &RunResult) -> Option<f64> {
    r.peak_rss_bytes.map(|b| b as f64)
}

fn peak_sum(r: &RunResult) -> Option<f64> {
    if r.replica_peak_rss_bytes.is_empty() {
        peak(r)
    } else {
        Some(r.replica_peak_rss_bytes.iter().sum::<u64>() as f64)
    }
}

/// The largest replica's RSS once the scenario settled (threshold: after its idle window;
/// envelope: every pod cached), before any failover.
fn settled(r: &RunResult) -> Option<f64> {
    metric(r, "RSS settled").or_else(|| metric(r, "RSS settled (all pods cached)"))
}

fn api(r: &RunResult) -> Option<f64> {
    plane_cpu(r, APISERVER)
}

/// The steps of a run before its failover (the threshold's last step, where a replica is
/// killed and the survivors take its ranges, or one rkcm's standby takes over); `None`
/// without a failover step.
fn before_failover(r: &RunResult) -> Option<Vec<&Phase>> {
    let failover = |p: &&Phase| p.name.starts_with("failover");
    r.phases
        .iter()
        .any(|p| failover(&p))
        .then(|| r.phases.iter().take_while(|p| !failover(p)).collect())
}

/// The largest replica's `VmHWM` at the end of the last step before the failover: the peak
/// while every replica ran.
fn peak_before_failover(r: &RunResult) -> Option<f64> {
    before_failover(r)?
        .iter()
        .filter_map(|p| p.peak_rss_bytes)
        .max()
        .map(|b| b as f64)
}

/// The CPU of every replica over the steps before the failover.
fn cpu_before_failover(r: &RunResult) -> Option<f64> {
    let steps = before_failover(r)?;
    (!steps.is_empty())
        .then(|| steps.iter().map(|p| p.cpu_seconds).sum::<Option<f64>>())
        .flatten()
}

/// The API requests of every replica over the steps before the failover.
fn requests_before_failover(r: &RunResult) -> Option<f64> {
    let steps = before_failover(r)?;
    (!steps.is_empty())
        .then(|| {
            steps
                .iter()
                .map(|p| p.requests.as_ref().map(|c| c.total as f64))
                .sum::<Option<f64>>()
        })
        .flatten()
}

/// `f` of `m`'s successful run in `runs`, or the mean over both orders when `runs` is `None`.
fn value(
    s: &ScenarioResult,
    runs: Option<&[RunResult]>,
    m: Manager,
    f: &dyn Fn(&RunResult) -> Option<f64>,
) -> Option<f64> {
    match runs {
        Some(runs) => f(ok_run(runs, m)?),
        None => Some((f(ok_run(&s.runs, m)?)? + f(ok_run(&s.reversed, m)?)?) / 2.0),
    }
}

/// The runs a summary reads: the one order's, or `None` for the mean of both orders.
fn summary_runs(s: &ScenarioResult) -> Option<&[RunResult]> {
    s.reversed.is_empty().then_some(s.runs.as_slice())
}

/// The passes: each order's runs, and the mean of both when there are two.
fn passes(s: &ScenarioResult) -> Vec<(String, Option<&[RunResult]>)> {
    let mut out = vec![(order_label(&s.runs), Some(s.runs.as_slice()))];
    if !s.reversed.is_empty() {
        out.push((order_label(&s.reversed), Some(s.reversed.as_slice())));
        out.push(("mean of both".to_string(), None));
    }
    out
}

/// Where a p99 measure comes from, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum P99Source {
    /// The audit log's reaction latency (`reaction ... p99 ...`): timestamps of the change
    /// and of the manager's first write, exact.
    Audit,
    /// The work queues' histograms (`workqueue ... p99 ...`): upstream's decade buckets, so a
    /// p99 is known only within its bucket (interpolated), and two measures either side of a
    /// bucket's bound (98 and 101 ms) read as about 10× apart.
    Queues,
}

impl P99Source {
    fn has(self, name: &str) -> bool {
        name.contains(" p99 ")
            && match self {
                P99Source::Audit => name.starts_with("reaction "),
                P99Source::Queues => name.starts_with("workqueue "),
            }
    }
}

/// Of `(name, sharded, single)` p99 values, the one whose ratio is the largest (a single
/// value of 0 has no ratio).
fn largest_ratio<'a>(values: &[(&'a str, f64, f64)]) -> Option<(f64, &'a str, f64, f64)> {
    values
        .iter()
        .filter(|(_, _, b)| *b > 0.0)
        .map(|&(name, a, b)| (a / b, name, a, b))
        .fold(None, |worst, x| match worst {
            Some(w) if w.0 >= x.0 => Some(w),
            _ => Some(x),
        })
}

/// The p99 measure of `source` whose sharded/single ratio is the largest, over the measures
/// both have, as `ratio (measure: sharded vs single)`.
fn worst_p99(
    s: &ScenarioResult,
    runs: Option<&[RunResult]>,
    m: Manager,
    source: P99Source,
) -> String {
    let mut names: Vec<&str> = s
        .runs
        .iter()
        .flat_map(|r| &r.metrics)
        .map(|x| x.name.as_str())
        .filter(|name| source.has(name))
        .collect();
    names.sort_unstable();
    names.dedup();
    let values: Vec<(&str, f64, f64)> = names
        .into_iter()
        .filter_map(|name| {
            let f = |r: &RunResult| metric(r, name);
            Some((
                name,
                value(s, runs, m, &f)?,
                value(s, runs, Manager::Rkcm, &f)?,
            ))
        })
        .collect();
    largest_ratio(&values).map_or("–".into(), |(w, name, a, b)| {
        format!("{w:.2}× ({name}: {a:.2} vs {b:.2} ms)")
    })
}

/// The per-scenario tables: every pass's sharded runs against its single rkcm, then every
/// scenario metric of each manager with the ratio.
pub(super) fn write_shards(o: &mut String, s: &ScenarioResult) {
    let _ = writeln!(
        o,
        "Sharded against one rkcm of the same pass (targets of issue 54: peak RSS per replica \
         ≤ 0.4×, CPU of all replicas ≤ 1.1×, API requests and API server CPU ≤ 1.1×, reaction \
         p99 unchanged). Peak RSS per replica: the largest replica's `VmHWM` at the end of the \
         run; sum: every replica's `VmHWM` added (an upper bound of their RSS at one moment).\n"
    );
    let _ = writeln!(
        o,
        "| Pass | Manager | Replicas | Peak RSS per replica (MiB) | × | Sum of peaks (MiB) | × | CPU all replicas (s) | × | API requests | × | API server CPU (s) | × | Worst reaction p99 × (audit log) | Worst work-queue p99 × (decade buckets) |"
    );
    let _ = writeln!(
        o,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    );
    for (label, runs) in passes(s) {
        for m in [Manager::Rkcm, SHARDED[0], SHARDED[1]] {
            let v = |f: &dyn Fn(&RunResult) -> Option<f64>| value(s, runs, m, f);
            let x = |f: &dyn Fn(&RunResult) -> Option<f64>| {
                if m == Manager::Rkcm {
                    String::new()
                } else {
                    ratio(v(f), value(s, runs, Manager::Rkcm, f))
                }
            };
            if v(&|r| Some(r.converge_seconds.unwrap_or(0.0))).is_none() {
                continue;
            }
            let worst = |source| {
                if m == Manager::Rkcm {
                    String::new()
                } else {
                    worst_p99(s, runs, m, source)
                }
            };
            let replicas = runs
                .and_then(|r| ok_run(r, m))
                .or_else(|| ok_run(&s.runs, m))
                .map_or(1, |r| r.replica_peak_rss_bytes.len().max(1));
            let _ = writeln!(
                o,
                "| {label} | {} | {replicas} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                manager_label(m),
                mib(v(&peak).map(|b| b as u64)),
                x(&peak),
                mib(v(&peak_sum).map(|b| b as u64)),
                x(&peak_sum),
                cpu(v(&|r| r.cpu_seconds_total)),
                x(&|r| r.cpu_seconds_total),
                v(&total_requests).map_or("–".into(), |n| format!("{n:.0}")),
                x(&total_requests),
                cpu(v(&api)),
                x(&api),
                worst(P99Source::Audit),
                worst(P99Source::Queues),
            );
        }
    }
    let _ = writeln!(o);
    write_shard_metrics(o, s);
}

/// Every scenario metric: one rkcm, each sharded variant and its ratio; the mean of both
/// orders where there are two.
fn write_shard_metrics(o: &mut String, s: &ScenarioResult) {
    let mut names: Vec<(&str, &str)> = Vec::new();
    for m in s.runs.iter().flat_map(|r| &r.metrics) {
        if !names.iter().any(|(n, _)| *n == m.name) {
            names.push((&m.name, &m.unit));
        }
    }
    if names.is_empty() {
        return;
    }
    let runs = summary_runs(s);
    let _ = writeln!(
        o,
        "Measures of the scenario ({}):\n",
        if runs.is_some() {
            "one order"
        } else {
            "means of both orders"
        }
    );
    let _ = writeln!(
        o,
        "| Measure | {} | {} | × | {} | × |",
        manager_label(Manager::Rkcm),
        manager_label(SHARDED[0]),
        manager_label(SHARDED[1])
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|");
    for (name, unit) in names {
        let f = |r: &RunResult| metric(r, name);
        let one = value(s, runs, Manager::Rkcm, &f);
        let a = value(s, runs, SHARDED[0], &f);
        let b = value(s, runs, SHARDED[1], &f);
        let label = if unit.is_empty() {
            name.to_string()
        } else {
            format!("{name} ({unit})")
        };
        let _ = writeln!(
            o,
            "| {label} | {} | {} | {} | {} | {} |",
            show(one),
            show(a),
            ratio(a, one),
            show(b),
            ratio(b, one)
        );
    }
    let _ = writeln!(o);
}

/// One row per sharded scenario and variant: the ratios to one rkcm (means of both orders
/// where there are two) and the failover.
pub(super) fn write_shard_summary(o: &mut String, scenarios: &[ScenarioResult]) {
    let with: Vec<&ScenarioResult> = scenarios.iter().filter(|s| has_shards(s)).collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(o, "## Summary: sharded rkcm / one rkcm\n");
    let _ = writeln!(
        o,
        "Issue 54's targets: peak RSS per replica ≤ 0.4×, CPU of all replicas ≤ 1.1×, API \
         requests and API server CPU ≤ 1.1×, a killed replica's ranges held again within the \
         lease duration + 5 s (20 s), reaction p99 unchanged. Means of both orders where the \
         scenario ran in both. Peak RSS per replica: the largest replica's `VmHWM` at the end \
         of the run (in the threshold after its failover, where the survivors took the killed \
         replica's ranges); settled: the largest replica's RSS once settled, before any \
         failover. Worst p99: of the audit log's reaction latencies (exact) and, apart, of \
         the work-queue histograms, the p99 measure whose ratio is the largest, with both \
         values. The histograms have upstream's decade buckets: a p99 is known only within \
         its bucket, so two values either side of a bound (98 and 101 ms) read as about 10× \
         apart.\n"
    );
    let _ = writeln!(
        o,
        "| Scenario | Manager | Peak RSS per replica | Settled RSS per replica | CPU all replicas | API requests | API server CPU | Worst reaction p99 (audit log) | Worst work-queue p99 (decade buckets) | Ranges held again (s) | First write after the kill (s) |"
    );
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|");
    for s in with.iter().copied() {
        let runs = summary_runs(s);
        for m in SHARDED {
            if ok_run(&s.runs, m).is_none() {
                continue;
            }
            let x = |f: &dyn Fn(&RunResult) -> Option<f64>| {
                ratio(value(s, runs, m, f), value(s, runs, Manager::Rkcm, f))
            };
            let failover = |name: &str| {
                [&s.runs, &s.reversed]
                    .iter()
                    .filter_map(|r| ok_run(r, m).and_then(|r| metric(r, name)))
                    .map(|v| format!("{v:.1}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                s.scenario,
                manager_label(m),
                x(&peak),
                x(&settled),
                x(&|r| r.cpu_seconds_total),
                x(&total_requests),
                x(&api),
                worst_p99(s, runs, m, P99Source::Audit),
                worst_p99(s, runs, m, P99Source::Queues),
                failover("failover: ranges held again"),
                failover("failover: first write"),
            );
        }
    }
    let _ = writeln!(o);
    write_before_failover(o, &with);
}

/// The summary's figures over the steps before the failover, for scenarios with one: the
/// end of a run has two replicas holding what three held (the killed one's ranges), and the
/// survivors' relists are in its CPU and requests; one rkcm's failover is charged its
/// standby's takeover (a cold start: a standby opens no watch).
fn write_before_failover(o: &mut String, scenarios: &[&ScenarioResult]) {
    let with: Vec<&&ScenarioResult> = scenarios
        .iter()
        .filter(|s| {
            ok_run(&s.runs, Manager::Rkcm)
                .and_then(before_failover)
                .is_some()
        })
        .collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "Before the failover (every step up to it: cold start, settled, reaction; the \
         failover leaves two replicas holding the killed one's ranges, and the whole run's CPU \
         holds their relists against one rkcm's standby taking over, since the bench charges \
         one rkcm that standby's CPU from the kill to its first write):\n"
    );
    let _ = writeln!(
        o,
        "| Scenario | Manager | Peak RSS per replica | CPU all replicas | API requests |"
    );
    let _ = writeln!(o, "|---|---|---:|---:|---:|");
    for s in with {
        let runs = summary_runs(s);
        for m in SHARDED {
            if ok_run(&s.runs, m).is_none() {
                continue;
            }
            let x = |f: &dyn Fn(&RunResult) -> Option<f64>| {
                ratio(value(s, runs, m, f), value(s, runs, Manager::Rkcm, f))
            };
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} | {} |",
                s.scenario,
                manager_label(m),
                x(&peak_before_failover),
                x(&cpu_before_failover),
                x(&requests_before_failover),
            );
        }
    }
    let _ = writeln!(o);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_measures_split_by_source() {
        let cases = [
            ("reaction deployment p99 (idle)", Some(P99Source::Audit)),
            ("reaction job p99 (load)", Some(P99Source::Audit)),
            ("workqueue work p99 of job (burst)", Some(P99Source::Queues)),
            ("workqueue queue p99 (idle)", Some(P99Source::Queues)),
            ("reaction deployment p50 (idle)", None),
            ("workqueue work p50 of job (burst)", None),
            ("RSS settled", None),
            // A p99 of neither source is in neither column.
            ("queue wait p99 (idle)", None),
        ];
        for (name, want) in cases {
            let got = [P99Source::Audit, P99Source::Queues]
                .into_iter()
                .filter(|s| s.has(name))
                .collect::<Vec<_>>();
            assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "{name}");
        }
    }

    #[test]
    fn the_largest_ratio_wins_and_a_zero_has_none() {
        let values = [
            ("a", 2.0, 1.0),
            ("b", 9.9, 1.0),
            ("c", 5.0, 0.0),
            ("d", 3.0, 1.5),
        ];
        assert_eq!(largest_ratio(&values), Some((9.9, "b", 9.9, 1.0)));
        assert_eq!(largest_ratio(&[("c", 5.0, 0.0)]), None);
        assert_eq!(largest_ratio(&[]), None);
        // A tie keeps the first.
        assert_eq!(
            largest_ratio(&[("x", 2.0, 1.0), ("y", 4.0, 2.0)]),
            Some((2.0, "x", 2.0, 1.0))
        );
    }
}
