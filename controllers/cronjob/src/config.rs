//! The CronJob controller's configuration: upstream's defaults, rkcm's one opt-out.

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
    /// rkcm's own (`--rkcm-cronjob-defer-status-writes`, on): a sync's status write waits
    /// until no sync runs (at most [`crate::deferred::MAX_DEFER`]) instead of ending the sync, as
    /// upstream's does ([`crate::deferred`]). A kept difference: the README gives its cost.
    pub defer_status_writes: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            local_time_zone: TimeZone::system(),
            defer_status_writes: true,
        }
    }
}
