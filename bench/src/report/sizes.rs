//! The threshold at several sizes (`threshold-size-*` results, kept apart by
//! `BENCH_RESULT_TAG`): settled RSS, peak RSS and cold start against the pods loaded, and per
//! manager the straight line through them (least squares): what one more pod costs, what the
//! manager costs with none, and what the line gives at upstream's threshold of 150 000 pods.

use std::fmt::Write as _;

use super::cells::{mean_of_orders, metric, ok_run, ratio};
use crate::manager::Manager;
use crate::results::{RunResult, ScenarioResult};

/// Upstream's scalability threshold: the size the lines are carried to.
const THRESHOLD_PODS: f64 = 150_000.0;

/// A result of the threshold at one of several sizes.
pub(super) fn is_size_run(s: &ScenarioResult) -> bool {
    s.scenario.starts_with("threshold-size-")
}

/// `value = fixed + per_unit × units`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Line {
    pub fixed: f64,
    pub per_unit: f64,
}

impl Line {
    pub fn at(&self, units: f64) -> f64 {
        self.fixed + self.per_unit * units
    }
}

/// The least-squares line through `points` (units, value); `None` unless two sizes differ.
pub(super) fn fit(points: &[(f64, f64)]) -> Option<Line> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= f64::EPSILON {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let per_unit = sxy / sxx;
    Some(Line {
        fixed: my - per_unit * mx,
        per_unit,
    })
}

/// One measure of the table: its name, how a run gives it, and how a line's slope reads.
struct Measure {
    name: &'static str,
    of: fn(&RunResult) -> Option<f64>,
    unit: &'static str,
    /// The slope's unit and the factor from `unit` per pod to it.
    per: (&'static str, f64),
}

const MEASURES: [Measure; 3] = [
    Measure {
        name: "settled RSS",
        of: |r| metric(r, "RSS settled"),
        unit: "MiB",
        per: ("KiB per pod", 1024.0),
    },
    Measure {
        name: "peak RSS",
        of: |r| metric(r, "peak RSS by the first pass"),
        unit: "MiB",
        per: ("KiB per pod", 1024.0),
    },
    Measure {
        name: "cold start",
        of: |r| metric(r, "cold start"),
        unit: "s",
        per: ("s per 10 000 pods", 10_000.0),
    },
];

const MANAGERS: [Manager; 2] = [Manager::Rkcm, Manager::Upstream];

/// `m`'s figure in `s`: the mean of both orders where it ran in both, else its one run's.
fn measured(s: &ScenarioResult, m: Manager, f: fn(&RunResult) -> Option<f64>) -> Option<f64> {
    mean_of_orders(s, m, f).or_else(|| f(ok_run(&s.runs, m)?))
}

fn pods(s: &ScenarioResult) -> Option<f64> {
    s.params.get("pods")?.parse().ok()
}

fn num(v: Option<f64>, decimals: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.decimals$}"))
}

/// The section, when some size ran; nothing otherwise.
pub(super) fn write_sizes(o: &mut String, scenarios: &[ScenarioResult]) {
    let mut runs: Vec<(&ScenarioResult, f64)> = scenarios
        .iter()
        .filter(|s| is_size_run(s))
        .filter_map(|s| Some((s, pods(s)?)))
        .collect();
    if runs.is_empty() {
        return;
    }
    runs.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut commits: Vec<&str> = runs
        .iter()
        .filter_map(|(s, _)| s.origin.as_ref().map(|o| o.commit.as_str()))
        .collect();
    commits.dedup();
    let _ = writeln!(o, "## Threshold at several sizes: the per-pod line\n");
    let _ = writeln!(
        o,
        "The threshold scenario loaded at each size on a fresh plane (`BENCH_RESULT_TAG=size-<n>k \
         BENCH_SCENARIOS=threshold THRESHOLD_PODS=… THRESHOLD_NODES=… make bench`; about 30 \
         pods a node, the same mix), {}. Each figure is the mean of both orders where a size ran \
         in both. Then, per manager, the least-squares line through the sizes: what each pod \
         adds, what is left at no pods, and the line at upstream's threshold of 150 000 pods.\n",
        match commits.as_slice() {
            [one] => format!("every size at commit `{one}`"),
            many => format!(
                "**not one commit**: `{}` (the line mixes builds)",
                many.join("`, `")
            ),
        }
    );
    let _ = writeln!(
        o,
        "| pods | nodes | settled RSS rkcm / upstream (MiB) | ratio | peak RSS rkcm / upstream (MiB) | ratio | cold start rkcm / upstream (s) | ratio |"
    );
    let _ = writeln!(o, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (s, n) in &runs {
        let mut row = format!(
            "| {n:.0} | {} |",
            s.params.get("nodes").map_or("–", String::as_str)
        );
        for m in &MEASURES {
            let k = measured(s, Manager::Rkcm, m.of);
            let u = measured(s, Manager::Upstream, m.of);
            let d = if m.unit == "s" { 1 } else { 0 };
            let _ = write!(row, " {} / {} | {} |", num(k, d), num(u, d), ratio(k, u));
        }
        let _ = writeln!(o, "{row}");
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "| measure | manager | per pod | at no pods | at 150 000 pods | rkcm / upstream at 150 000 |"
    );
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|");
    for m in &MEASURES {
        let lines: Vec<Option<Line>> = MANAGERS
            .iter()
            .map(|mgr| {
                let pts: Vec<(f64, f64)> = runs
                    .iter()
                    .filter_map(|(s, n)| Some((*n, measured(s, *mgr, m.of)?)))
                    .collect();
                fit(&pts)
            })
            .collect();
        let at = |l: &Option<Line>| l.map(|l| l.at(THRESHOLD_PODS));
        for (i, (mgr, line)) in MANAGERS.iter().zip(&lines).enumerate() {
            let last = if i == 0 {
                ratio(at(&lines[0]), at(&lines[1]))
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} {} | {} {} | {} {} | {last} |",
                m.name,
                mgr.name(),
                num(line.map(|l| l.per_unit * m.per.1), 2),
                m.per.0,
                num(line.map(|l| l.fixed), 1),
                m.unit,
                num(at(line), 1),
                m.unit,
            );
        }
    }
    let _ = writeln!(o);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Metric, Status};

    #[test]
    fn the_line_through_points_on_a_line_is_that_line() {
        let l = fit(&[(10.0, 25.0), (50.0, 105.0), (100.0, 205.0)]).expect("a line");
        assert!((l.per_unit - 2.0).abs() < 1e-9, "{l:?}");
        assert!((l.fixed - 5.0).abs() < 1e-9, "{l:?}");
        // Off the line: (0,0), (1,1), (2,3) → slope 1.5, intercept -1/6.
        let l = fit(&[(0.0, 0.0), (1.0, 1.0), (2.0, 3.0)]).expect("a line");
        assert!((l.per_unit - 1.5).abs() < 1e-9, "{l:?}");
        assert!((l.fixed + 1.0 / 6.0).abs() < 1e-9, "{l:?}");
        assert_eq!(fit(&[(10.0, 1.0)]), None);
        assert_eq!(fit(&[(10.0, 1.0), (10.0, 2.0)]), None);
    }

    fn run(m: Manager, settled: f64, peak: f64, cold: f64) -> RunResult {
        let metric = |name: &str, value: f64, unit: &str| Metric {
            name: name.into(),
            value,
            unit: unit.into(),
        };
        let mut r = RunResult::new(m, "bin".into(), "ns".into());
        r.status = Status::Ok;
        r.metrics = vec![
            metric("RSS settled", settled, "MiB"),
            metric("peak RSS by the first pass", peak, "MiB"),
            metric("cold start", cold, "s"),
        ];
        r
    }

    fn size(pods: u32, commit: &str, runs: Vec<RunResult>) -> ScenarioResult {
        let (p, n) = (pods.to_string(), (pods / 30).to_string());
        let mut s = ScenarioResult::for_test(
            &format!("threshold-size-{}k", pods / 1000),
            &[("pods", &p), ("nodes", &n)],
            Some(commit),
        );
        s.runs = runs;
        s
    }

    #[test]
    fn the_section_gives_each_size_and_each_managers_line_carried_to_150_000_pods() {
        // rkcm settles at 60 MiB + 5 KiB a pod, upstream at 200 MiB + 10 KiB a pod; peaks are
        // 10 % above; cold start 1 s + 0.5 s per 10 000 pods against 2 s + 1 s.
        let kib = 1.0 / 1024.0;
        let at = |fixed: f64, per_pod_kib: f64, pods: f64| fixed + per_pod_kib * kib * pods;
        let sizes: Vec<ScenarioResult> = [10_000u32, 50_000, 100_000]
            .iter()
            .map(|&p| {
                let n = f64::from(p);
                size(
                    p,
                    "abc",
                    vec![
                        run(
                            Manager::Upstream,
                            at(200.0, 10.0, n),
                            1.1 * at(200.0, 10.0, n),
                            2.0 + n / 10_000.0,
                        ),
                        run(
                            Manager::Rkcm,
                            at(60.0, 5.0, n),
                            1.1 * at(60.0, 5.0, n),
                            1.0 + n / 20_000.0,
                        ),
                    ],
                )
            })
            .collect();
        let mut o = String::new();
        write_sizes(&mut o, &sizes);
        assert!(o.contains("every size at commit `abc`"), "{o}");
        // 10 000 pods: rkcm 60 + 48.8 = 108.8 MiB, upstream 200 + 97.7 = 297.7: 0.37×.
        assert!(o.contains("| 10000 | 333 | 109 / 298 | 0.37× |"), "{o}");
        // Settled at 150 000 pods: rkcm 60 + 732.4 = 792.4, upstream 200 + 1464.8 = 1664.8.
        assert!(
            o.contains("| settled RSS | rkcm | 5.00 KiB per pod | 60.0 MiB | 792.4 MiB | 0.48× |"),
            "{o}"
        );
        assert!(
            o.contains(
                "| settled RSS | upstream | 10.00 KiB per pod | 200.0 MiB | 1664.8 MiB |  |"
            ),
            "{o}"
        );
        // Cold start: 1 + 7.5 = 8.5 s against 2 + 15 = 17 s.
        assert!(
            o.contains("| cold start | rkcm | 0.50 s per 10 000 pods | 1.0 s | 8.5 s | 0.50× |"),
            "{o}"
        );
        // Sizes from two builds are named as such.
        let mut mixed = sizes.clone();
        mixed[2].origin = ScenarioResult::for_test("x", &[], Some("def")).origin;
        let mut o = String::new();
        write_sizes(&mut o, &mixed);
        assert!(o.contains("**not one commit**: `abc`, `def`"), "{o}");
        // No size ran: no section.
        let mut o = String::new();
        write_sizes(&mut o, &[]);
        assert!(o.is_empty());
    }
}
