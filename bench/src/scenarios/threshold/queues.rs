//! The work queues both managers export under upstream's names: `/metrics` scraped over
//! HTTPS (the managers serve it on a port of the run's, the path allowed without
//! credentials), the queues' depth and adds for "is the manager idle", and the
//! `workqueue_queue_duration_seconds` / `workqueue_work_duration_seconds` histograms,
//! differenced between two scrapes, for reaction percentiles. Parsing and the arithmetic are
//! pure.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;

pub const QUEUE_DURATION: &str = "workqueue_queue_duration_seconds";
pub const WORK_DURATION: &str = "workqueue_work_duration_seconds";

/// One histogram: cumulative counts per upper bound (ascending, `+Inf` last), count, sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, f64)>,
    pub count: f64,
    pub sum: f64,
}

/// What one scrape says about the queues.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// `(metric, queue name)` → histogram.
    pub histograms: BTreeMap<(String, String), Histogram>,
    /// Items waiting, over every queue.
    pub depth: f64,
    /// Items ever added, over every queue.
    pub adds: f64,
}

/// `name{labels} value` → (name, labels, value); `None` for comments and other lines.
fn sample(line: &str) -> Option<(&str, BTreeMap<&str, &str>, f64)> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((n, rest)) => (n, rest.trim_end().strip_suffix('}')?),
        None => (head, ""),
    };
    let mut map = BTreeMap::new();
    for pair in labels.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=')?;
        map.insert(k.trim(), v.trim().trim_matches('"'));
    }
    Some((name.trim(), map, value))
}

/// Reads the work-queue series of a `/metrics` text.
pub fn parse(text: &str) -> Scrape {
    let mut out = Scrape::default();
    for line in text.lines() {
        let Some((name, labels, v)) = sample(line) else {
            continue;
        };
        let queue = labels.get("name").copied().unwrap_or_default().to_string();
        match name {
            "workqueue_depth" => out.depth += v,
            "workqueue_adds_total" => out.adds += v,
            _ => {
                for metric in [QUEUE_DURATION, WORK_DURATION] {
                    let Some(part) = name.strip_prefix(metric) else {
                        continue;
                    };
                    let h = out
                        .histograms
                        .entry((metric.to_string(), queue.clone()))
                        .or_default();
                    match part {
                        "_bucket" => {
                            let le = labels.get("le").copied().unwrap_or("+Inf");
                            let le = if le == "+Inf" {
                                f64::INFINITY
                            } else {
                                le.parse().unwrap_or(f64::INFINITY)
                            };
                            h.buckets.push((le, v));
                        }
                        "_count" => h.count = v,
                        "_sum" => h.sum = v,
                        _ => {}
                    }
                }
            }
        }
    }
    for h in out.histograms.values_mut() {
        h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// `after − before`, bucket by bucket (a queue missing before counts from zero).
pub fn diff(after: &Histogram, before: Option<&Histogram>) -> Histogram {
    let prior = |le: f64| {
        before
            .and_then(|b| b.buckets.iter().find(|(l, _)| *l == le))
            .map_or(0.0, |(_, c)| *c)
    };
    Histogram {
        buckets: after
            .buckets
            .iter()
            .map(|&(le, c)| (le, (c - prior(le)).max(0.0)))
            .collect(),
        count: (after.count - before.map_or(0.0, |b| b.count)).max(0.0),
        sum: (after.sum - before.map_or(0.0, |b| b.sum)).max(0.0),
    }
}

/// The sum of histograms with the same buckets (every queue of one metric).
pub fn merge<'a>(hs: impl IntoIterator<Item = &'a Histogram>) -> Histogram {
    let mut out = Histogram::default();
    for h in hs {
        if out.buckets.is_empty() {
            out.buckets = h.buckets.iter().map(|&(le, _)| (le, 0.0)).collect();
        }
        for (le, c) in &h.buckets {
            if let Some(b) = out.buckets.iter_mut().find(|(l, _)| l == le) {
                b.1 += c;
            }
        }
        out.count += h.count;
        out.sum += h.sum;
    }
    out
}

/// Prometheus' `histogram_quantile`: linear within the bucket holding rank `q × count`
/// (from the bucket below's bound, 0 for the first); the largest finite bound when the rank
/// falls in `+Inf`. `None` for an empty histogram.
pub fn quantile(h: &Histogram, q: f64) -> Option<f64> {
    let total = h.buckets.last().map_or(h.count, |b| b.1.max(h.count));
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, c) in &h.buckets {
        if c >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let inside = c - lower.1;
            let frac = if inside > 0.0 {
                (rank - lower.1) / inside
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * frac);
        }
        lower = (le, c);
    }
    Some(lower.0)
}

/// `/metrics` of the manager serving on `127.0.0.1:port` (self-signed certificate).
pub async fn scrape(port: u16) -> anyhow::Result<String> {
    let out = tokio::process::Command::new("curl")
        .args(["-sk", "--max-time", "10", "--fail"])
        .arg(format!("https://127.0.0.1:{port}/metrics"))
        .output()
        .await
        .context("running curl")?;
    anyhow::ensure!(
        out.status.success(),
        "scraping https://127.0.0.1:{port}/metrics: curl {}",
        out.status
    );
    String::from_utf8(out.stdout).context("metrics are not UTF-8")
}

/// The work queues of every manager process serving on `ports` (a sharded run's replicas)
/// as one scrape: depths and adds summed, each process's histograms kept apart (queue name
/// `<name>#<i>` for the `i`th port after the first), so that differencing and merging work as
/// for one process.
pub async fn scrape_all(ports: &[u16]) -> anyhow::Result<Scrape> {
    let mut out = Scrape::default();
    for (i, &port) in ports.iter().enumerate() {
        let one = parse(&scrape(port).await?);
        out.depth += one.depth;
        out.adds += one.adds;
        for ((metric, queue), h) in one.histograms {
            let queue = if i == 0 {
                queue
            } else {
                format!("{queue}#{i}")
            };
            out.histograms.insert((metric, queue), h);
        }
    }
    Ok(out)
}

/// Polls `/metrics` of every port until every queue is empty and no item was added over one
/// `step` (checked twice in a row), at most `timeout`. Returns the scrape that closed the
/// quiet stretch and when its first scrape was taken.
pub async fn wait_quiet(
    ports: &[u16],
    step: Duration,
    timeout: Duration,
) -> anyhow::Result<(Scrape, std::time::Instant)> {
    let deadline = std::time::Instant::now() + timeout;
    let mut last: Option<(Scrape, std::time::Instant)> = None;
    loop {
        let at = std::time::Instant::now();
        match scrape_all(ports).await {
            Ok(now) => {
                if let Some((prev, since)) = &last
                    && prev.depth == 0.0
                    && now.depth == 0.0
                    && now.adds == prev.adds
                    && now.adds > 0.0
                {
                    return Ok((now, *since));
                }
                last = Some((now, at));
            }
            Err(e) => tracing::debug!(error = %e, "metrics not served yet"),
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the work queues did not go quiet within {} s (last: {})",
            timeout.as_secs(),
            last.map_or("no scrape".into(), |(s, _)| format!(
                "depth {}, adds {}",
                s.depth, s.adds
            ))
        );
        tokio::time::sleep(step).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# HELP x\n\
        workqueue_depth{name=\"a\"} 0\n\
        workqueue_adds_total{name=\"a\"} 10\n\
        workqueue_queue_duration_seconds_bucket{name=\"a\",le=\"0.001\"} 5\n\
        workqueue_queue_duration_seconds_bucket{name=\"a\",le=\"0.01\"} 10\n\
        workqueue_queue_duration_seconds_bucket{name=\"a\",le=\"+Inf\"} 10\n\
        workqueue_queue_duration_seconds_count{name=\"a\"} 10\n\
        workqueue_queue_duration_seconds_sum{name=\"a\"} 0.05\n";
    // Upstream writes the bounds in exponent form and `le` before `name` in some versions.
    const AFTER: &str = "workqueue_depth{name=\"a\"} 2\n\
        workqueue_depth{name=\"b\"} 1\n\
        workqueue_adds_total{name=\"a\"} 110\n\
        workqueue_queue_duration_seconds_bucket{le=\"1e-03\",name=\"a\"} 5\n\
        workqueue_queue_duration_seconds_bucket{le=\"1e-02\",name=\"a\"} 60\n\
        workqueue_queue_duration_seconds_bucket{le=\"+Inf\",name=\"a\"} 110\n\
        workqueue_queue_duration_seconds_count{name=\"a\"} 110\n\
        workqueue_queue_duration_seconds_sum{name=\"a\"} 9\n\
        workqueue_work_duration_seconds_bucket{name=\"b\",le=\"0.1\"} 1\n\
        workqueue_work_duration_seconds_bucket{name=\"b\",le=\"+Inf\"} 1\n";

    #[test]
    fn scrapes_sum_depth_and_adds_and_keep_each_queues_histograms() {
        let s = parse(AFTER);
        assert_eq!((s.depth, s.adds), (3.0, 110.0));
        let h = &s.histograms[&(QUEUE_DURATION.to_string(), "a".to_string())];
        assert_eq!(
            h.buckets,
            vec![(0.001, 5.0), (0.01, 60.0), (f64::INFINITY, 110.0)]
        );
        assert!(
            s.histograms
                .contains_key(&(WORK_DURATION.to_string(), "b".to_string()))
        );
    }

    #[test]
    fn differenced_histograms_give_the_percentiles_of_the_window_only() {
        let key = (QUEUE_DURATION.to_string(), "a".to_string());
        let (b, a) = (parse(BEFORE), parse(AFTER));
        let d = diff(&a.histograms[&key], b.histograms.get(&key));
        // The window added 0 below 1 ms, 50 below 10 ms and 50 above.
        assert_eq!(
            d.buckets,
            vec![(0.001, 0.0), (0.01, 50.0), (f64::INFINITY, 100.0)]
        );
        assert_eq!(d.count, 100.0);
        // p50: the 50th of 100 is the top of the 1–10 ms bucket.
        assert!((quantile(&d, 0.5).unwrap() - 0.01).abs() < 1e-12);
        // p25: halfway into that bucket.
        assert!((quantile(&d, 0.25).unwrap() - 0.0055).abs() < 1e-12);
        // p99 falls in +Inf: the largest finite bound.
        assert_eq!(quantile(&d, 0.99), Some(0.01));
        // Before alone: rank 9.9 of 10 lies 4.9/5 into the 1–10 ms bucket.
        let before = &b.histograms[&key];
        assert!((quantile(before, 0.99).unwrap() - 0.00982).abs() < 1e-9);
        assert_eq!(quantile(&Histogram::default(), 0.99), None);
    }

    #[test]
    fn merged_queues_add_bucket_by_bucket() {
        let h = |c: f64| Histogram {
            buckets: vec![(0.1, c), (f64::INFINITY, c)],
            count: c,
            sum: c,
        };
        let m = merge([&h(1.0), &h(2.0)]);
        assert_eq!(m.buckets, vec![(0.1, 3.0), (f64::INFINITY, 3.0)]);
        assert_eq!(m.count, 3.0);
    }
}
