//! The CronJob controller's configuration: upstream's defaults and rkcm's two switches.

use jiff::tz::TimeZone;

/// Upstream default of `--concurrent-cron-job-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// Configuration. `Default` equals upstream. The flag (`--concurrent-cron-job-syncs`) is
/// defined once in the binary's command line, which builds this.
#[derive(Debug, Clone)]
pub struct Config {
    /// Worker tasks (`--concurrent-cron-job-syncs`).
    pub workers: usize,
    /// The zone schedules without `spec.timeZone` are evaluated in. Upstream uses the
    /// process's local zone (`TZ`, `/etc/localtime`); so does the default. Not a flag.
    pub local_time_zone: TimeZone,
    /// rkcm's own (`--rkcm-cronjob-defer-status-writes`, off as upstream): a sync's status
    /// write waits until no sync runs (at most [`crate::deferred::MAX_DEFER`]) instead of
    /// ending the sync, as upstream's does ([`crate::deferred`]). A throughput gain for many
    /// CronJobs firing at once, at the cost the README gives.
    pub defer_status_writes: bool,
    /// rkcm's own (`--rkcm-cronjob-adopt-forgotten-runs`, on): an unfinished Job this
    /// controller created for a scheduled time that `status` forgot (a crash between the
    /// create and the status write) joins `status.active` and records its time
    /// ([`crate::plan::forgotten_start`]). Off: only upstream's `UnexpectedJob` Warning, for
    /// strict parity runs.
    pub adopt_forgotten_runs: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            local_time_zone: TimeZone::system(),
            defer_status_writes: false,
            adopt_forgotten_runs: true,
        }
    }
}
