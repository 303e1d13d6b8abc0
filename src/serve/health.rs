//! Health state and the health endpoints' bodies: the checks registered by the manager, the
//! elector's last observation, and upstream's `[+]name ok` rendering with `?verbose` and `?exclude`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::StatusCode;
use tokio::time::Instant;

/// Name of the leader-election health check (upstream `leaderElection`).
pub const LEADER_ELECTION_CHECK: &str = "leaderElection";
/// Name of the readiness check that waits for informer caches.
pub const INFORMER_SYNC_CHECK: &str = "informer-sync";
/// Check shown when nothing else is registered (upstream `healthz.PingHealthz`).
pub const PING_CHECK: &str = "ping";
/// How long past the lease duration a leader may go without renewing before
/// `leaderElection` fails (upstream `NewLeaderHealthzAdaptor(20 * time.Second)`).
pub const LEADER_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

type CheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What the elector last told us (see [`Health::set_leader_observation`]).
#[derive(Clone, Copy, Debug)]
struct LeaderState {
    leading: bool,
    /// Local monotonic time the elector last observed the lease record change
    /// (client-go `observedTime`); for a leader this is its last successful renewal.
    observed_at: Instant,
    /// lease duration + [`LEADER_HEALTH_TOLERANCE`].
    tolerance: Duration,
}

#[derive(Default)]
struct HealthInner {
    ready: AtomicBool,
    /// `None` while leader election is not in use (`--leader-elect=false`, or before the
    /// elector is built).
    leader: Mutex<Option<LeaderState>>,
    checks: Mutex<Vec<(String, CheckFn)>>,
}

/// Shared health state behind `/healthz`, `/livez`, `/readyz`. Cheap to clone.
#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<HealthInner>,
}

/// The result of one check: `Err` carries the reason (logged, never served).
pub type CheckResult = (String, Result<(), String>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the data half-written (every
    // critical section is a single assignment or push), so poisoning carries no meaning.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Health {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records whether every informer used by an enabled controller has synced. Feeds the
    /// `informer-sync` readiness check.
    pub fn set_ready(&self, ready: bool) {
        self.inner.ready.store(ready, Ordering::Relaxed);
    }

    /// Registers a ping check named after a started controller (upstream
    /// `NamedPingChecker`). Re-registering a name replaces the earlier check.
    pub fn add_check(&self, name: impl Into<String>) {
        self.add_check_fn(name, || Ok(()));
    }

    /// Registers a real check; `Err(reason)` fails it (the reason is only logged).
    pub fn add_check_fn(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        let name = name.into();
        let mut checks = lock(&self.inner.checks);
        checks.retain(|(n, _)| *n != name);
        checks.push((name, Arc::new(check)));
    }

    /// Turns on the `leaderElection` check, initially as standby. Called by the elector.
    pub fn enable_leader_election(&self, lease_duration: Duration) {
        *lock(&self.inner.leader) = Some(LeaderState {
            leading: false,
            observed_at: Instant::now(),
            tolerance: lease_duration + LEADER_HEALTH_TOLERANCE,
        });
    }

    /// Called by the elector after every observation of the lease: whether the observed
    /// holder is us, and when the record was last observed to change. No-op unless
    /// [`Health::enable_leader_election`] was called.
    pub fn set_leader_observation(&self, leading: bool, observed_at: Instant) {
        if let Some(state) = lock(&self.inner.leader).as_mut() {
            state.leading = leading;
            state.observed_at = observed_at;
        }
    }

    /// True when leader election is off, or on and this process holds the lease.
    pub fn is_leading(&self) -> bool {
        lock(&self.inner.leader).is_none_or(|s| s.leading)
    }

    /// Runs the `/healthz` and `/livez` checks, in registration order.
    pub fn live_checks(&self, now: Instant) -> Vec<CheckResult> {
        let mut out = Vec::new();
        if let Some(state) = *lock(&self.inner.leader) {
            out.push((LEADER_ELECTION_CHECK.to_owned(), leader_check(state, now)));
        }
        // Clone the list so a slow check never runs under the lock.
        let checks: Vec<(String, CheckFn)> = lock(&self.inner.checks).clone();
        out.extend(checks.into_iter().map(|(name, check)| (name, check())));
        if out.is_empty() {
            out.push((PING_CHECK.to_owned(), Ok(())));
        }
        out
    }

    /// Runs the `/readyz` checks: the live checks plus `informer-sync`.
    pub fn ready_checks(&self, now: Instant) -> Vec<CheckResult> {
        let mut out = self.live_checks(now);
        let sync = if !self.is_leading() || self.inner.ready.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("informers not synced".to_owned())
        };
        out.push((INFORMER_SYNC_CHECK.to_owned(), sync));
        out
    }
}

/// Upstream `LeaderElector.Check`: only a leader that has gone without renewing for longer
/// than the lease duration plus the tolerance is unhealthy (it should have exited already,
/// so something is wedged). A standby always passes.
fn leader_check(state: LeaderState, now: Instant) -> Result<(), String> {
    if state.leading && now.saturating_duration_since(state.observed_at) > state.tolerance {
        Err("failed election to renew leadership on lease".to_owned())
    } else {
        Ok(())
    }
}

/// Options of a health request, from its query string.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct HealthQuery {
    pub verbose: bool,
    pub exclude: Vec<String>,
}

impl HealthQuery {
    pub fn parse(query: Option<&str>) -> Self {
        let mut out = Self::default();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match percent_decode(key).as_str() {
                "verbose" => out.verbose = true,
                "exclude" => out.exclude.push(percent_decode(value)),
                _ => {}
            }
        }
        out
    }
}

pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len()
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit() =>
            {
                // Both are ASCII hex digits, so the slice is on char boundaries and parses.
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Renders a health endpoint exactly like k8s.io/apiserver `healthz.handleRootHealth`.
/// `endpoint` is `healthz`, `livez` or `readyz`. Returns the status and the body; failing
/// checks' reasons are returned separately for the log.
pub fn render_health(
    endpoint: &str,
    checks: &[CheckResult],
    query: &HealthQuery,
) -> (StatusCode, String, Vec<(String, String)>) {
    let mut excluded: Vec<&str> = query.exclude.iter().map(String::as_str).collect();
    let mut lines = String::new();
    let mut failed = Vec::new();
    for (name, result) in checks {
        if let Some(pos) = excluded.iter().position(|e| e == name) {
            excluded.remove(pos);
            lines.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match result {
            Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                failed.push((name.clone(), reason.clone()));
            }
        }
    }
    let unmatched: HashSet<&str> = excluded.into_iter().collect();
    if !unmatched.is_empty() {
        let mut names: Vec<&str> = unmatched.into_iter().collect();
        names.sort_unstable();
        let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        lines.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            quoted.join(",")
        ));
    }
    if !failed.is_empty() {
        // Go's http.Error appends a newline.
        let body = format!("{lines}{endpoint} check failed\n");
        return (StatusCode::INTERNAL_SERVER_ERROR, body, failed);
    }
    if !query.verbose {
        return (StatusCode::OK, "ok".to_owned(), failed);
    }
    (
        StatusCode::OK,
        format!("{lines}{endpoint} check passed\n"),
        failed,
    )
}
