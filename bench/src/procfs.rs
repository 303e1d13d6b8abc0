//! What the kernel says about the manager under test: CPU time from `/proc/<pid>/stat`,
//! resident memory from `/proc/<pid>/status`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::results::Usage;

/// Clock ticks per second of `utime`/`stime` (`getconf CLK_TCK`); 100 if unknown.
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    #[allow(unsafe_code)] // std does not expose CLK_TCK
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// User plus system CPU seconds the process has used so far (threads included).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / clock_ticks() as f64)
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in bytes.
pub fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let value = line.strip_prefix(field)?.strip_prefix(':')?;
        let kb: u64 = value.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb * 1024)
    })
}

/// Busy and total jiffies of the whole host so far (`cpu` line of `/proc/stat`; idle and
/// iowait count as not busy).
pub fn host_cpu_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = values.iter().sum();
    let idle = values.get(3).copied().unwrap_or(0) + values.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// The share of the host's CPU (0 to 1, all cores together) that was busy between two
/// [`host_cpu_jiffies`] readings.
pub fn busy_share(before: (u64, u64), after: (u64, u64)) -> f64 {
    let busy = after.0.saturating_sub(before.0);
    let total = after.1.saturating_sub(before.1);
    if total == 0 {
        0.0
    } else {
        busy as f64 / total as f64
    }
}

/// The 1-minute load average of the host.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Waits until the host has been quiet (at most `quiet` of its CPU busy) over a whole
/// `window`, or until `limit` has passed. Returns the time waited and the busy share of the
/// last window. The cleanup of a large scenario leaves the plane working for a while (etcd,
/// the API server's caches, kwok); a manager started into that would be measured on a
/// slower plane than the one before it.
pub async fn wait_for_quiet_host(quiet: f64, window: Duration, limit: Duration) -> (Duration, f64) {
    let start = Instant::now();
    let mut busy = 1.0;
    while let Some(before) = host_cpu_jiffies() {
        tokio::time::sleep(window).await;
        let Some(after) = host_cpu_jiffies() else {
            break;
        };
        busy = busy_share(before, after);
        if busy <= quiet || start.elapsed() >= limit {
            break;
        }
    }
    (start.elapsed(), busy)
}

/// Seconds between the samples of a run's [`Usage`] (RSS and CPU over time), at its start.
pub const USAGE_INTERVAL: Duration = Duration::from_secs(1);

/// Samples `VmRSS` in the background and keeps the maximum seen, the run's [`Usage`] (RSS
/// and CPU every [`USAGE_INTERVAL`]), and, when asked for, the curve: the largest sample of
/// each `bucket` of time since the start.
pub struct RssSampler {
    max: Arc<AtomicU64>,
    curve: Arc<Mutex<Vec<u64>>>,
    usage: Arc<Mutex<Usage>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    /// Samples every `every`; with `bucket`, also keeps the largest sample of each bucket of
    /// time (see [`RssSampler::curve`]).
    pub fn start_with_curve(pid: u32, every: Duration, bucket: Option<Duration>) -> Self {
        let max = Arc::new(AtomicU64::new(0));
        let curve = Arc::new(Mutex::new(Vec::new()));
        let usage = Arc::new(Mutex::new(Usage::new(USAGE_INTERVAL.as_secs_f64())));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (max, curve, usage, stop) =
                (max.clone(), curve.clone(), usage.clone(), stop.clone());
            async move {
                let started = Instant::now();
                let mut tick = tokio::time::interval(every);
                let mut stretch_max = 0;
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    let Some(rss) = status_bytes(pid, "VmRSS") else {
                        break; // the process is gone
                    };
                    max.fetch_max(rss, Ordering::Relaxed);
                    let elapsed = started.elapsed().as_secs_f64();
                    if let Some(b) = bucket.filter(|b| !b.is_zero()) {
                        let i = (elapsed / b.as_secs_f64()) as usize;
                        let mut c = curve.lock().unwrap_or_else(PoisonError::into_inner);
                        if c.len() <= i {
                            c.resize(i + 1, 0);
                        }
                        c[i] = c[i].max(rss);
                    }
                    stretch_max = stretch_max.max(rss);
                    let mut u = usage.lock().unwrap_or_else(PoisonError::into_inner);
                    if elapsed >= u.next_end() {
                        let cpu = cpu_seconds(pid)
                            .or_else(|| u.cpu_seconds.last().copied())
                            .unwrap_or(0.0);
                        u.push(stretch_max, cpu);
                        stretch_max = 0;
                    }
                }
            }
        });
        Self {
            max,
            curve,
            usage,
            stop,
            task,
        }
    }

    /// RSS and CPU over the run so far.
    pub fn usage(&self) -> Usage {
        self.usage
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The largest sample of each bucket so far, from the start (0 for a bucket without a
    /// sample).
    pub fn curve(&self) -> Vec<u64> {
        self.curve
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Largest `VmRSS` sampled so far, in bytes.
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    pub async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.abort();
        let max = self.max();
        let _ = self.task.await;
        max.max(self.max.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_share_of_two_readings() {
        // (before, after) as (busy, total) jiffies → share
        let cases = [
            ((100, 1_000), (150, 1_100), 0.5),
            ((100, 1_000), (100, 1_200), 0.0),
            ((100, 1_000), (300, 1_200), 1.0),
            // No time passed, or a counter that went backwards: nothing busy.
            ((100, 1_000), (100, 1_000), 0.0),
            ((100, 1_000), (90, 900), 0.0),
        ];
        for (before, after, want) in cases {
            assert_eq!(busy_share(before, after), want, "{before:?} -> {after:?}");
        }
        let (busy, total) = host_cpu_jiffies().expect("/proc/stat is readable");
        assert!(busy <= total && total > 0);
    }

    #[tokio::test]
    async fn the_sampler_keeps_rss_and_cpu_over_time() {
        let pid = std::process::id();
        let sampler = RssSampler::start_with_curve(pid, Duration::from_millis(20), None);
        let deadline = Instant::now() + Duration::from_secs(10);
        while sampler.usage().rss_bytes.len() < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let u = sampler.usage();
        sampler.stop().await;
        assert_eq!(u.interval_seconds, USAGE_INTERVAL.as_secs_f64());
        assert!(u.rss_bytes.len() >= 2, "{u:?}");
        assert_eq!(u.rss_bytes.len(), u.cpu_seconds.len());
        assert!(u.rss_bytes.iter().all(|&b| b > 0), "{u:?}");
        assert!(u.cpu_seconds.windows(2).all(|w| w[0] <= w[1]), "{u:?}");
    }

    #[test]
    fn reads_own_process() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).is_some());
        assert!(status_bytes(pid, "VmRSS").unwrap() > 0);
        assert!(status_bytes(pid, "VmHWM").unwrap() > 0);
        assert!(status_bytes(pid, "NoSuchField").is_none());
        assert!(load_average().is_some());
    }
}
