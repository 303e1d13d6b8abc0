//! The `soak` scenario's memory record: the manager's resident set size sampled at a fixed
//! interval through a long run of steady churn, and whether it stays flat once warm.
//!
//! "Flat" is judged on the samples after the warm-up: the least-squares slope of RSS over
//! time, in MiB per hour, and the growth from the first warm sample to the last. A map keyed
//! by objects that were deleted (an expectation, a remembered write, a backoff entry kept
//! after its object is gone) grows with every object the churn creates and deletes, so it
//! shows as a steady slope; allocator noise does not.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One sample of the manager's resident memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RssSample {
    /// Seconds since the churn began.
    pub at_s: f64,
    /// `VmRSS` in MiB.
    pub mib: f64,
    /// rkcm's per-object maps at the same time (`None` for kube-controller-manager, and for
    /// runs recorded before they were sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracked: Option<Tracked>,
}

/// The entries of rkcm's per-object maps (`rkcm_tracked_entries`), summed by how they forget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tracked {
    /// Maps that forget with their objects: they follow the live objects of the churn.
    pub object: f64,
    /// Maps that forget when a delay is over.
    pub time: f64,
    /// Maps of fixed capacity (the event correlation caches).
    pub capacity: f64,
}

/// The manager's per-object maps from its `/metrics` on `port`; `None` if it does not answer.
pub async fn tracked(port: u16) -> Option<Tracked> {
    let text = crate::scrape::metrics(port).await.ok()?;
    let samples = crate::scrape::tracked_entries(&text);
    if samples.is_empty() {
        return None;
    }
    Some(Tracked {
        object: crate::scrape::tracked_total(&samples, "object"),
        time: crate::scrape::tracked_total(&samples, "time"),
        capacity: crate::scrape::tracked_total(&samples, "capacity"),
    })
}

/// `VmRSS` of process `pid` in MiB, from `/proc/<pid>/status`.
pub fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&status)
}

/// The `VmRSS:` line of a `/proc/<pid>/status` text, in MiB.
fn parse_vm_rss(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Growth figures of a run's samples after `warmup`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Growth {
    /// Samples taken after the warm-up.
    pub warm_samples: usize,
    /// RSS of the first sample after the warm-up, and of the last sample.
    pub first_warm_mib: f64,
    pub last_mib: f64,
    /// Largest sample over the whole run.
    pub max_mib: f64,
    /// Least-squares slope over the warm samples, MiB per hour.
    pub slope_mib_per_hour: f64,
}

impl Growth {
    /// `None` with fewer than two samples after the warm-up.
    pub fn of(samples: &[RssSample], warmup: Duration) -> Option<Self> {
        let warm: Vec<RssSample> = samples
            .iter()
            .copied()
            .filter(|s| s.at_s >= warmup.as_secs_f64())
            .collect();
        if warm.len() < 2 {
            return None;
        }
        let n = warm.len() as f64;
        let mean_t = warm.iter().map(|s| s.at_s).sum::<f64>() / n;
        let mean_m = warm.iter().map(|s| s.mib).sum::<f64>() / n;
        let (mut cov, mut var) = (0.0, 0.0);
        for s in &warm {
            cov += (s.at_s - mean_t) * (s.mib - mean_m);
            var += (s.at_s - mean_t).powi(2);
        }
        let slope_per_s = if var > 0.0 { cov / var } else { 0.0 };
        Some(Self {
            warm_samples: warm.len(),
            first_warm_mib: warm[0].mib,
            last_mib: warm[warm.len() - 1].mib,
            max_mib: samples.iter().map(|s| s.mib).fold(0.0, f64::max),
            slope_mib_per_hour: slope_per_s * 3600.0,
        })
    }

    /// Growth from the first warm sample to the last, as a fraction of the first.
    pub fn growth(&self) -> f64 {
        if self.first_warm_mib > 0.0 {
            (self.last_mib - self.first_warm_mib) / self.first_warm_mib
        } else {
            0.0
        }
    }

    /// Flat: the fitted slope adds at most [`FLAT_PER_HOUR`] of the first warm sample per
    /// hour.
    pub fn is_flat(&self) -> bool {
        self.slope_mib_per_hour <= FLAT_PER_HOUR * self.first_warm_mib
    }
}

/// The largest slope still called flat, as a fraction of the warm RSS per hour.
pub const FLAT_PER_HOUR: f64 = 0.05;

/// One soak run of the report.
pub struct Run<'a> {
    pub scenario: &'a str,
    pub manager: &'a str,
    pub samples: &'a [RssSample],
    pub warmup: Duration,
}

/// The report's soak section: one row per run, then the samples side by side (about 30 rows).
pub fn markdown(runs: &[Run<'_>]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n## Soak: resident memory\n\n`VmRSS` of the manager sampled through the churn; growth and slope over the \
         samples after the warm-up (flat: the fitted slope adds at most {:.0}% of the first warm \
         sample per hour).\n\n\
         | scenario | manager | samples | warm-up | first warm (MiB) | last (MiB) | max (MiB) | growth | slope (MiB/h) | flat |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        FLAT_PER_HOUR * 100.0
    );
    for Run {
        scenario,
        manager,
        samples,
        warmup,
    } in runs
    {
        let warm = format!("{} min", warmup.as_secs() / 60);
        match Growth::of(samples, *warmup) {
            Some(g) => out.push_str(&format!(
                "| {scenario} | {manager} | {} | {warm} | {:.1} | {:.1} | {:.1} | {:+.1}% | {:+.2} | {} |\n",
                samples.len(),
                g.first_warm_mib,
                g.last_mib,
                g.max_mib,
                g.growth() * 100.0,
                g.slope_mib_per_hour,
                if g.is_flat() { "yes" } else { "**no**" },
            )),
            None => out.push_str(&format!(
                "| {scenario} | {manager} | {} | {warm} | - | - | - | - | - | too short to judge |\n",
                samples.len()
            )),
        }
    }
    // rkcm's per-object maps join the table when they were sampled.
    let tracked_runs: Vec<&Run<'_>> = runs
        .iter()
        .filter(|r| r.samples.iter().any(|s| s.tracked.is_some()))
        .collect();
    for r in &tracked_runs {
        out.push_str(&maps_summary(r));
    }
    out.push_str("\n| minute |");
    for r in runs {
        out.push_str(&format!(" {} / {} (MiB) |", r.scenario, r.manager));
    }
    for r in &tracked_runs {
        out.push_str(&format!(
            " {} / {}: map entries by object / time / capacity |",
            r.scenario, r.manager
        ));
    }
    out.push_str("\n|---:|");
    for _ in 0..runs.len() + tracked_runs.len() {
        out.push_str("---:|");
    }
    out.push('\n');
    let longest = runs.iter().map(|r| r.samples.len()).max().unwrap_or(0);
    // At most about 30 rows: every k-th sample.
    let step = longest.div_ceil(30).max(1);
    for i in (0..longest).step_by(step) {
        let minute = runs
            .iter()
            .find_map(|r| r.samples.get(i))
            .map_or(0.0, |s| s.at_s / 60.0);
        out.push_str(&format!("| {minute:.1} |"));
        for r in runs {
            match r.samples.get(i) {
                Some(s) => out.push_str(&format!(" {:.1} |", s.mib)),
                None => out.push_str(" – |"),
            }
        }
        for r in &tracked_runs {
            match r.samples.get(i).and_then(|s| s.tracked) {
                Some(t) => out.push_str(&format!(
                    " {:.0} / {:.0} / {:.0} |",
                    t.object, t.time, t.capacity
                )),
                None => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
    out
}

/// One sentence on a run's sampled maps after the warm-up: those keyed by objects (which
/// must follow the live objects, not the objects ever seen) and those of fixed capacity.
fn maps_summary(r: &Run<'_>) -> String {
    let warm: Vec<(f64, Tracked)> = r
        .samples
        .iter()
        .filter(|s| s.at_s >= r.warmup.as_secs_f64())
        .filter_map(|s| s.tracked.map(|t| (s.at_s, t)))
        .collect();
    let (Some((_, first)), Some((_, last))) = (warm.first(), warm.last()) else {
        return String::new();
    };
    let object_max = warm.iter().map(|(_, t)| t.object).fold(0.0, f64::max);
    let as_rss: Vec<RssSample> = warm
        .iter()
        .map(|&(at_s, t)| RssSample {
            at_s,
            mib: t.object,
            tracked: None,
        })
        .collect();
    let slope = Growth::of(&as_rss, Duration::ZERO).map_or(0.0, |g| g.slope_mib_per_hour);
    format!(
        "\n{} / {}: after the warm-up, the maps keyed by objects held {:.0} entries at the first \
         sample and {:.0} at the last (at most {:.0}; fitted slope {:+.0} entries per hour); the \
         maps of fixed capacity (event correlation caches, 4 096 entries per cache and \
         recorder) went from {:.0} to {:.0} entries.\n",
        r.scenario,
        r.manager,
        first.object,
        last.object,
        object_max,
        slope,
        first.capacity,
        last.capacity
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(points: &[(f64, f64)]) -> Vec<RssSample> {
        points
            .iter()
            .map(|&(at_s, mib)| RssSample {
                at_s,
                mib,
                tracked: None,
            })
            .collect()
    }

    fn run<'a>(manager: &'a str, samples: &'a [RssSample]) -> Run<'a> {
        Run {
            scenario: "soak",
            manager,
            samples,
            warmup: Duration::from_secs(600),
        }
    }

    #[test]
    fn reads_vm_rss_in_mib() {
        let status = "Name:\trkcm\nVmPeak:\t  300000 kB\nVmRSS:\t   51200 kB\nThreads:\t5\n";
        assert_eq!(parse_vm_rss(status), Some(50.0));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
        assert_eq!(parse_vm_rss("VmRSS:\tlots kB\n"), None);
    }

    #[test]
    fn a_steady_climb_is_not_flat() {
        // 40 MiB at warm-up, +1 MiB every 10 minutes: 6 MiB per hour, 15% of 40.
        let s = samples(&[
            (0.0, 10.0),
            (600.0, 40.0),
            (1200.0, 41.0),
            (1800.0, 42.0),
            (2400.0, 43.0),
            (3000.0, 44.0),
            (3600.0, 45.0),
        ]);
        let g = Growth::of(&s, Duration::from_secs(600)).expect("enough samples");
        assert_eq!(g.warm_samples, 6);
        assert_eq!(
            (g.first_warm_mib, g.last_mib, g.max_mib),
            (40.0, 45.0, 45.0)
        );
        assert!((g.slope_mib_per_hour - 6.0).abs() < 1e-9, "{g:?}");
        assert!((g.growth() - 0.125).abs() < 1e-9);
        assert!(!g.is_flat());
    }

    #[test]
    fn noise_around_a_plateau_is_flat_and_the_warm_up_is_left_out() {
        let s = samples(&[
            (0.0, 5.0),
            (300.0, 30.0),
            (600.0, 41.0),
            (1200.0, 39.0),
            (1800.0, 41.0),
            (2400.0, 39.0),
            (3000.0, 41.0),
            (3600.0, 40.0),
        ]);
        let g = Growth::of(&s, Duration::from_secs(600)).expect("enough samples");
        assert_eq!(g.first_warm_mib, 41.0);
        assert!(g.slope_mib_per_hour.abs() < 1.0, "{g:?}");
        assert!(g.is_flat());
    }

    #[test]
    fn too_few_warm_samples_give_no_verdict() {
        let s = samples(&[(0.0, 5.0), (700.0, 30.0)]);
        assert_eq!(Growth::of(&s, Duration::from_secs(600)), None);
        let md = markdown(&[run("rkcm", &s)]);
        assert!(md.contains("too short to judge"), "{md}");
    }

    #[test]
    fn the_report_names_a_growing_run() {
        let flat = samples(&[(600.0, 40.0), (1200.0, 40.0), (1800.0, 40.0)]);
        let growing = samples(&[(600.0, 40.0), (1200.0, 50.0), (1800.0, 60.0)]);
        let md = markdown(&[run("kube-controller-manager", &flat), run("rkcm", &growing)]);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| soak |")).collect();
        assert_eq!(rows.len(), 2, "{md}");
        assert!(rows[0].ends_with("| yes |"), "{}", rows[0]);
        assert!(
            rows[1].contains("+50.0%") && rows[1].ends_with("| **no** |"),
            "{}",
            rows[1]
        );
        assert!(md.contains("| 10.0 | 40.0 | 40.0 |"), "{md}");
        assert!(!md.contains("map entries"), "no maps sampled: {md}");
    }

    #[test]
    fn sampled_maps_join_the_table_and_old_records_still_read() {
        let mut with_maps = samples(&[(600.0, 40.0), (1200.0, 41.0)]);
        with_maps[1].tracked = Some(Tracked {
            object: 120.0,
            time: 3.0,
            capacity: 4096.0,
        });
        let without = samples(&[(600.0, 80.0), (1200.0, 80.0)]);
        let md = markdown(&[
            run("kube-controller-manager", &without),
            run("rkcm", &with_maps),
        ]);
        assert!(
            md.contains(
                "| soak / rkcm: map entries by object / time / capacity |\n|---:|---:|---:|---:|\n"
            ),
            "{md}"
        );
        assert!(md.contains("| 10.0 | 80.0 | 40.0 | – |"), "{md}");
        assert!(
            md.contains("| 20.0 | 80.0 | 41.0 | 120 / 3 / 4096 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "soak / rkcm: after the warm-up, the maps keyed by objects held 120 entries at \
                 the first sample and 120 at the last"
            ),
            "{md}"
        );
        assert!(md.contains("went from 4096 to 4096 entries"), "{md}");
        assert!(
            !md.contains("kube-controller-manager: after the warm-up"),
            "{md}"
        );
        // A record written before the maps were sampled has no `tracked`.
        let old: RssSample = serde_json::from_str(r#"{"at_s": 60.0, "mib": 42.5}"#).expect("json");
        assert_eq!(old.tracked, None);
    }
}
