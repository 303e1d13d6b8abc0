//! Figures taken from runs (plane CPU, peak RSS, requests, means over both orders) and how one
//! table cell shows them.

use crate::manager::Manager;
use crate::results::{RunResult, ScenarioResult, Status};

/// A measure's value: whole numbers without decimals, others with two; "–" when missing.
pub(super) fn measure(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| {
        if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    })
}

pub(super) fn mib(b: Option<u64>) -> String {
    b.map_or("–".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

pub(super) fn secs(s: Option<f64>) -> String {
    s.map_or("–".into(), |s| format!("{s:.1}"))
}

pub(super) fn cpu(s: Option<f64>) -> String {
    s.map_or("–".into(), |s| format!("{s:.2}"))
}

pub(super) fn manager_label(m: Manager) -> &'static str {
    match m {
        Manager::Upstream => "upstream kube-controller-manager",
        Manager::Rkcm => "rkcm",
        Manager::RkcmShards => "rkcm sharded (server selector)",
        Manager::RkcmShardsClient => "rkcm sharded (client filter)",
    }
}

/// `rkcm / upstream` as a factor, when both numbers exist.
pub(super) fn ratio(rkcm: Option<f64>, upstream: Option<f64>) -> String {
    match (rkcm, upstream) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "–".into(),
    }
}

/// The plane process whose CPU the issue compares ("the API server's CPU while serving").
pub(super) const APISERVER: &str = "kube-apiserver";

/// CPU seconds `process` of the plane used while the run's manager ran.
pub(super) fn plane_cpu(run: &RunResult, process: &str) -> Option<f64> {
    run.plane_cpu_seconds.as_ref()?.get(process).copied()
}

/// Peak RSS in bytes, as a number for [`ratio`].
pub(super) fn peak_rss(run: &RunResult) -> Option<f64> {
    run.peak_rss_bytes.map(|b| b as f64)
}

/// The manager's requests over the whole run, as a number for [`ratio`].
pub(super) fn total_requests(run: &RunResult) -> Option<f64> {
    run.requests.as_ref().map(|c| c.total as f64)
}

/// The value of the run's scenario metric `name`.
pub(super) fn metric(r: &RunResult, name: &str) -> Option<f64> {
    r.metrics.iter().find(|m| m.name == name).map(|m| m.value)
}

/// The successful run of `m` among `runs`.
pub(super) fn ok_run(runs: &[RunResult], m: Manager) -> Option<&RunResult> {
    runs.iter()
        .find(|r| r.manager == m && r.status == Status::Ok)
}

/// The mean of `f` over `m`'s successful runs in both orders; `None` unless both have one.
pub(super) fn mean_of_orders(
    s: &ScenarioResult,
    m: Manager,
    f: impl Fn(&RunResult) -> Option<f64>,
) -> Option<f64> {
    Some((f(ok_run(&s.runs, m)?)? + f(ok_run(&s.reversed, m)?)?) / 2.0)
}

/// Who ran first in `runs`, for a row label.
pub(super) fn order_label(runs: &[RunResult]) -> String {
    runs.first()
        .map_or_else(String::new, |r| format!("{} first", r.manager.name()))
}
