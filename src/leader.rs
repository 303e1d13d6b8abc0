//! Lease-based leader election with client-go semantics (`tools/leaderelection/leaderelection.go`).
//!
//! Mirrors client-go `tools/leaderelection/leaderelection.go` with the `leases` lock
//! (`resourcelock/leaselock.go`), so rkcm and a Go kube-controller-manager can contend for
//! the same Lease during a migration:
//! - Every write is a GET-then-UPDATE carrying the observed `resourceVersion` (or a CREATE
//!   when the Lease is missing); two candidates can never both win one transition.
//! - Expiry is judged on the local monotonic clock from when *we* last saw the record change
//!   (`observedTime`), never from `renewTime`, so clock skew between nodes does not matter.
//! - Acquire: try every retry period with jitter, delay uniform in [retry, 2.2 × retry).
//!   Renew: the fast path updates with the cached resourceVersion; on failure the slow path
//!   re-reads (`leader_election_slowpath_total`). Each renewal window polls every retry
//!   period until success or until the renew deadline elapses → leadership lost.
//! - `leader_election_master_status{name}` is 1 while leading, 0 otherwise (also 0 from
//!   construction, so a standby exports the series).
//! - Events: Normal `LeaderElection` `<identity> became leader` / `<identity> stopped
//!   leading` on the Lease, best effort.
//! - Health: after every observation the elector tells [`Health`] whether the observed holder
//!   is us and when the record was observed; `leaderElection` fails for a leader that has not
//!   renewed for lease duration + 20 s.
//!
//! Deliberate differences from client-go, all in the safe direction:
//! - A renewal that reads a *valid* Lease held by someone else declares leadership lost at
//!   once instead of polling until the renew deadline.
//! - [`Leading::release`] (graceful shutdown, §2.6 step 3) re-reads and retries on conflict
//!   (bounded by the renew deadline) but never releases a Lease someone else now holds, and
//!   leaves `spec.strategy`/`spec.preferredHolder` untouched.
//! - The per-request timeout (the renew deadline, client-go's HTTP client timeout for the
//!   elector) is enforced here around each request rather than in the client, so the caller
//!   may pass any `kube::Client` (ideally its own, with its own rate limiter and a
//!   `leader-election` User-Agent suffix, §2.1).
//! - Cancelling [`LeaderElector::run_until_leading`] aborts an in-flight request; if that
//!   request had already acquired the Lease on the server it simply expires (upstream never
//!   releases at all).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::Api;
use rkcm_runtime::CancellationToken;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::serve::Health;

mod decision;
mod lease;
mod metrics;

use decision::{
    Decision, Observation, decide, holder, is_valid, jittered, observe, released, renewed,
};
use lease::{KubeBackend, LeaseBackend};
use metrics::{count_renewal, metrics, set_master_status};

/// `source.component` of our leader-election events: upstream's, because tooling selects
/// KCM's election events by it (client-go `tools/leaderelection/resourcelock`).
pub const EVENT_COMPONENT: &str = "kube-controller-manager";
/// Event reason upstream uses for election events.
pub const EVENT_REASON: &str = "LeaderElection";
/// Bound on writing the "stopped leading" event, which is awaited (the process is about to
/// exit and would otherwise drop it).
const STOP_EVENT_BUDGET: Duration = Duration::from_secs(2);

/// Election timing and lock location. Validation (`lease_duration > renew_deadline >
/// 1.2 × retry_period > 0`) is the CLI's job (§1.4); the elector assumes it.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// Lease name (`--leader-elect-resource-name`); also the `name` label of the metrics.
    pub name: String,
    pub namespace: String,
    /// Unique per process start; see [`default_identity`].
    pub identity: String,
}

impl LeaderConfig {
    /// Whole seconds, as client-go writes `leaseDurationSeconds`.
    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// `<hostname>_<random UUID v4>`: two processes on one host never share an identity.
pub fn default_identity() -> String {
    format!(
        "{}_{}",
        gethostname::gethostname().to_string_lossy(),
        uuid::Uuid::new_v4()
    )
}

/// A request to the apiserver failed or did not answer within the renew deadline.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl RequestError {
    fn is_conflict(&self) -> bool {
        matches!(self, RequestError::Api(kube::Error::Api(s)) if s.is_conflict())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("leader election for lease {lease} cancelled before acquiring it")]
    Cancelled { lease: String },
    #[error("lease {lease} not released: leadership was already lost")]
    Lost { lease: String },
    #[error("releasing lease {lease}: {source}")]
    Release {
        lease: String,
        #[source]
        source: RequestError,
    },
    #[error("renewal task of lease {lease} failed: {reason}")]
    RenewTask { lease: String, reason: String },
}

// ---------------------------------------------------------------------------------------------
// The elector
// ---------------------------------------------------------------------------------------------

struct Core {
    backend: Box<dyn LeaseBackend>,
    cfg: LeaderConfig,
    health: Health,
    /// `namespace/name`, for logs and errors.
    lease: String,
}

/// Mutable election state, owned by whichever loop is running (acquire, then renew, then
/// release), so it needs no lock.
#[derive(Default)]
struct Tracker {
    observed: Option<Observation>,
    /// Last holder we logged (client-go `reportedLeader`).
    reported_holder: Option<String>,
}

/// Result of one `try_acquire_or_renew`.
#[derive(Debug, PartialEq)]
enum Attempt {
    Leading,
    HeldBy(String),
    Failed,
}

/// Campaigns for the Lease. Build one per process; see the module docs for semantics.
pub struct LeaderElector {
    core: Arc<Core>,
}

impl LeaderElector {
    /// Registers the `leaderElection` health check (standby) and exports
    /// `leader_election_master_status{name} 0`. No request is made until
    /// [`LeaderElector::run_until_leading`].
    pub fn new(client: kube::Client, cfg: LeaderConfig, health: Health) -> Self {
        let backend = KubeBackend {
            leases: Api::namespaced(client.clone(), &cfg.namespace),
            events: Api::namespaced(client, &cfg.namespace),
            name: cfg.name.clone(),
        };
        Self::with_backend(Box::new(backend), cfg, health)
    }

    fn with_backend(backend: Box<dyn LeaseBackend>, cfg: LeaderConfig, health: Health) -> Self {
        health.enable_leader_election(cfg.lease_duration);
        set_master_status(&cfg.name, false);
        let lease = format!("{}/{}", cfg.namespace, cfg.name);
        Self {
            core: Arc::new(Core {
                backend,
                cfg,
                health,
                lease,
            }),
        }
    }

    pub fn identity(&self) -> &str {
        &self.core.cfg.identity
    }

    /// Tries to acquire the Lease until it succeeds (→ [`Leading`], renewing in the
    /// background) or `shutdown` fires (→ [`LeaderError::Cancelled`]). A standby only reads
    /// the Lease; it writes only once the Lease is free or expired by its own clock.
    pub async fn run_until_leading(
        &self,
        shutdown: &CancellationToken,
    ) -> Result<Leading, LeaderError> {
        let core = &self.core;
        tracing::info!(lease = %core.lease, identity = %core.cfg.identity, "attempting to acquire leader lease");
        let mut tracker = Tracker::default();
        loop {
            let attempt = tokio::select! {
                biased;
                _ = shutdown.cancelled() => None,
                a = core.try_acquire_or_renew(&mut tracker) => Some(a),
            };
            match attempt {
                None => {
                    return Err(LeaderError::Cancelled {
                        lease: core.lease.clone(),
                    });
                }
                Some(Attempt::Leading) => break,
                Some(_) => tracing::debug!(lease = %core.lease, "failed to acquire lease"),
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => {
                    return Err(LeaderError::Cancelled { lease: core.lease.clone() });
                }
                _ = tokio::time::sleep(jittered(core.cfg.retry_period)) => {}
            }
        }
        set_master_status(&core.cfg.name, true);
        tracing::info!(lease = %core.lease, identity = %core.cfg.identity, "successfully acquired lease");
        if let Some(obs) = &tracker.observed {
            // Acquiring must not wait for the event.
            let core = Arc::clone(core);
            let lease = obs.lease.clone();
            tokio::spawn(async move { core.record_event(&lease, "became leader").await });
        }
        let stop = CancellationToken::new();
        let lost = CancellationToken::new();
        let task = tokio::spawn(Arc::clone(core).renew_loop(tracker, stop.clone(), lost.clone()));
        Ok(Leading {
            core: Arc::clone(core),
            stop,
            lost,
            task: Some(task),
        })
    }
}

/// Proof of leadership. Renewal runs in the background until [`Leading::release`].
///
/// Dropping a `Leading` does NOT stop renewing: stopping renewals while controllers might
/// still write would let another process lead concurrently. The renewal task then lives
/// until leadership is lost or the runtime shuts down.
pub struct Leading {
    core: Arc<Core>,
    stop: CancellationToken,
    lost: CancellationToken,
    task: Option<JoinHandle<Tracker>>,
}

impl Leading {
    /// Resolves once leadership is lost: the renew deadline passed without a successful
    /// renewal, or a renewal found the Lease validly held by someone else. The caller must
    /// then exit (status 1) without further writes (§2.6).
    pub async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// A token cancelled when leadership is lost (same condition as [`Leading::lost`]), for
    /// callers that want to select on it or hand it to other tasks.
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Stops renewing, then releases the Lease (§2.6 step 3): UPDATE with holder cleared,
    /// `leaseDurationSeconds: 1`, `acquireTime = renewTime = now`, transitions unchanged;
    /// on conflict re-reads and retries, all within the renew deadline. Call only after every
    /// controller write has finished. `Err(Lost)` if leadership was already lost or the
    /// Lease now belongs to someone else (nothing is written then).
    pub async fn release(mut self) -> Result<(), LeaderError> {
        self.stop.cancel();
        let lease = self.core.lease.clone();
        let task = self.task.take();
        let tracker = match task {
            Some(task) => task.await.map_err(|e| LeaderError::RenewTask {
                lease: lease.clone(),
                reason: e.to_string(),
            })?,
            None => return Err(LeaderError::Lost { lease }),
        };
        set_master_status(&self.core.cfg.name, false);
        if self.lost.is_cancelled() {
            return Err(LeaderError::Lost { lease });
        }
        self.core.release(tracker).await
    }
}

impl Core {
    /// Runs one API call with the renew deadline as timeout (client-go's elector client
    /// timeout), so a hung connection cannot stall the loops.
    async fn request<T>(
        &self,
        fut: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, RequestError> {
        let limit = self.cfg.renew_deadline;
        match tokio::time::timeout(limit, fut).await {
            Ok(r) => r.map_err(RequestError::Api),
            Err(_) => Err(RequestError::Timeout(limit)),
        }
    }

    fn identity(&self) -> &str {
        &self.cfg.identity
    }

    /// Stores an observation and passes "observed holder is us" to the health check.
    fn set_observed(&self, t: &mut Tracker, obs: Observation) {
        let holder_now = holder(&obs.record()).to_owned();
        self.health
            .set_leader_observation(holder_now == self.identity(), obs.at);
        t.observed = Some(obs);
        if t.reported_holder.as_deref() != Some(holder_now.as_str()) {
            tracing::info!(lease = %self.lease, holder = %holder_now, "new lease holder observed");
            t.reported_holder = Some(holder_now);
        }
    }

    /// client-go `tryAcquireOrRenew`.
    async fn try_acquire_or_renew(&self, t: &mut Tracker) -> Attempt {
        let duration_secs = self.cfg.lease_duration_seconds();
        // 1. Fast path: we lead and our view is still valid → update with the cached
        //    resourceVersion.
        if let Some(obs) = &t.observed {
            let record = obs.record();
            if holder(&record) == self.identity() && is_valid(&record, obs.at, Instant::now()) {
                let mut lease = obs.lease.clone();
                lease.spec = Some(renewed(
                    &record,
                    self.identity(),
                    duration_secs,
                    Timestamp::now(),
                ));
                match self.request(self.backend.replace(lease)).await {
                    Ok(updated) => {
                        let obs = Observation {
                            lease: updated,
                            at: Instant::now(),
                        };
                        self.set_observed(t, obs);
                        return Attempt::Leading;
                    }
                    Err(error) => {
                        tracing::debug!(lease = %self.lease, %error, "optimistic lease update failed, falling back to slow path");
                    }
                }
            }
        }

        // 2. Read, or create when missing.
        let current = match self.request(self.backend.get()).await {
            Ok(Some(lease)) => lease,
            Ok(None) => return self.create(t, duration_secs).await,
            Err(error) => {
                tracing::error!(lease = %self.lease, verb = "get", %error, "error retrieving resource lock");
                return Attempt::Failed;
            }
        };

        // 3. Note changes, then decide.
        let now = Instant::now();
        let obs = observe(t.observed.as_ref(), current, now);
        let base = obs.lease.clone();
        self.set_observed(t, obs);
        let Some(obs) = t.observed.as_ref() else {
            return Attempt::Failed;
        };
        match decide(obs, now, self.identity(), duration_secs, Timestamp::now()) {
            Decision::HeldByOther { holder } => {
                tracing::debug!(lease = %self.lease, %holder, "lock is held by another candidate and has not yet expired");
                Attempt::HeldBy(holder)
            }
            Decision::Write { spec, slow_path } => {
                if slow_path && let Some(m) = metrics() {
                    m.slowpath.with_label_values(&[&self.cfg.name]).inc();
                }
                let mut lease = base;
                lease.spec = Some(spec);
                let result = self.request(self.backend.replace(lease)).await;
                self.written(t, result, "update")
            }
        }
    }

    async fn create(&self, t: &mut Tracker, duration_secs: i32) -> Attempt {
        let wall = Timestamp::now();
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.cfg.name.clone()),
                namespace: Some(self.cfg.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity().to_owned()),
                lease_duration_seconds: Some(duration_secs),
                acquire_time: Some(MicroTime(wall)),
                renew_time: Some(MicroTime(wall)),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        let result = self.request(self.backend.create(lease)).await;
        self.written(t, result, "create")
    }

    /// After a create or update of the Lease: on success we lead and observe what we wrote.
    fn written(
        &self,
        t: &mut Tracker,
        result: Result<Lease, RequestError>,
        verb: &'static str,
    ) -> Attempt {
        match result {
            Ok(lease) => {
                let obs = Observation {
                    lease,
                    at: Instant::now(),
                };
                self.set_observed(t, obs);
                Attempt::Leading
            }
            Err(error) => {
                tracing::error!(lease = %self.lease, verb, %error, "failed to write the leader election record");
                Attempt::Failed
            }
        }
    }

    /// client-go `renew`: every retry period open a window of `renew_deadline`, polling
    /// every retry period until one renewal succeeds. Returns the tracker when stopped (for
    /// the release) or when leadership is lost (after cancelling `lost`).
    async fn renew_loop(
        self: Arc<Self>,
        mut t: Tracker,
        stop: CancellationToken,
        lost: CancellationToken,
    ) -> Tracker {
        let retry = self.cfg.retry_period;
        let reason = loop {
            let window_end = Instant::now() + self.cfg.renew_deadline;
            let window = tokio::time::timeout_at(window_end, async {
                loop {
                    let attempt = self.try_acquire_or_renew(&mut t).await;
                    count_renewal(&self.cfg.name, matches!(attempt, Attempt::Leading));
                    match attempt {
                        Attempt::Leading => return Ok(()),
                        Attempt::HeldBy(holder) => return Err(holder),
                        Attempt::Failed => {
                            tokio::time::sleep_until(window_end.min(Instant::now() + retry)).await;
                        }
                    }
                }
            });
            let outcome = tokio::select! {
                biased;
                _ = stop.cancelled() => None,
                r = window => Some(r),
            };
            match outcome {
                None => return t,
                Some(Ok(Ok(()))) => {
                    tracing::trace!(lease = %self.lease, "successfully renewed lease")
                }
                Some(Ok(Err(holder))) => break format!("lease taken by {holder}"),
                Some(Err(_)) => break "renew deadline exceeded".to_owned(),
            }
            tokio::select! {
                biased;
                _ = stop.cancelled() => return t,
                _ = tokio::time::sleep(retry) => {}
            }
        };
        set_master_status(&self.cfg.name, false);
        // Signal first: the owner must stop writing as soon as possible; the event is cosmetic.
        lost.cancel();
        tracing::error!(lease = %self.lease, identity = %self.cfg.identity, %reason, "leaderelection lost");
        if let Some(obs) = &t.observed {
            let lease = obs.lease.clone();
            let _ = tokio::time::timeout(
                STOP_EVENT_BUDGET,
                self.record_event(&lease, "stopped leading"),
            )
            .await;
        }
        t
    }

    async fn release(&self, mut t: Tracker) -> Result<(), LeaderError> {
        let deadline = Instant::now() + self.cfg.renew_deadline;
        let lease_label = self.lease.clone();
        let lost = || LeaderError::Lost {
            lease: lease_label.clone(),
        };
        let mut obs = t.observed.take().ok_or_else(lost)?;
        loop {
            if holder(&obs.record()) != self.identity() {
                tracing::warn!(lease = %self.lease, holder = %holder(&obs.record()), "not releasing lease held by another candidate");
                return Err(lost());
            }
            let mut lease = obs.lease.clone();
            lease.spec = Some(released(&obs.record(), Timestamp::now()));
            let remaining = deadline.saturating_duration_since(Instant::now());
            let error = match tokio::time::timeout(remaining, self.backend.replace(lease)).await {
                Ok(Ok(updated)) => {
                    let at = Instant::now();
                    self.health.set_leader_observation(false, at);
                    tracing::info!(lease = %self.lease, identity = %self.cfg.identity, "released lease");
                    let _ = tokio::time::timeout(
                        STOP_EVENT_BUDGET,
                        self.record_event(&updated, "stopped leading"),
                    )
                    .await;
                    return Ok(());
                }
                Ok(Err(e)) => RequestError::Api(e),
                Err(_) => RequestError::Timeout(self.cfg.renew_deadline),
            };
            if Instant::now() >= deadline {
                return Err(LeaderError::Release {
                    lease: self.lease.clone(),
                    source: error,
                });
            }
            if error.is_conflict() {
                // Someone wrote since our last renewal (or a renewal we abandoned landed):
                // re-read and release only if we still hold it.
                let remaining = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(remaining, self.backend.get()).await {
                    Ok(Ok(Some(fresh))) => {
                        obs = observe(Some(&obs), fresh, Instant::now());
                        continue;
                    }
                    Ok(Ok(None)) => return Err(lost()),
                    Ok(Err(e)) => {
                        tracing::warn!(lease = %self.lease, error = %e, "re-reading lease for release failed");
                    }
                    Err(_) => {
                        return Err(LeaderError::Release {
                            lease: self.lease.clone(),
                            source: RequestError::Timeout(self.cfg.renew_deadline),
                        });
                    }
                }
            } else {
                tracing::warn!(lease = %self.lease, %error, "releasing lease failed, retrying");
            }
            tokio::time::sleep_until(deadline.min(Instant::now() + self.cfg.retry_period)).await;
        }
    }

    /// Normal `LeaderElection` event on the Lease; failures are logged, never returned.
    async fn record_event(&self, lease: &Lease, action: &str) {
        let message = format!("{} {}", self.cfg.identity, action);
        tracing::info!(
            lease = %self.lease,
            reason = EVENT_REASON,
            event_message = %message,
            "recording leader election event"
        );
        let event = leader_event(lease, &self.cfg, &message, Timestamp::now());
        if let Err(error) = self.request(self.backend.create_event(event)).await {
            tracing::warn!(lease = %self.lease, %error, "recording leader election event failed");
        }
    }
}

/// A core/v1 Event shaped like client-go's recorder output.
fn leader_event(lease: &Lease, cfg: &LeaderConfig, message: &str, now: Timestamp) -> Event {
    let nanos = now.as_nanosecond();
    Event {
        metadata: ObjectMeta {
            // client-go: `<involved name>.<hex unix nanos>`.
            name: Some(format!("{}.{:x}", cfg.name, nanos)),
            namespace: Some(cfg.namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("coordination.k8s.io/v1".to_owned()),
            kind: Some("Lease".to_owned()),
            name: Some(cfg.name.clone()),
            namespace: Some(cfg.namespace.clone()),
            uid: lease.metadata.uid.clone(),
            resource_version: lease.metadata.resource_version.clone(),
            field_path: None,
        },
        reason: Some(EVENT_REASON.to_owned()),
        message: Some(message.to_owned()),
        type_: Some("Normal".to_owned()),
        source: Some(EventSource {
            component: Some(EVENT_COMPONENT.to_owned()),
            host: None,
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        reporting_component: Some(EVENT_COMPONENT.to_owned()),
        reporting_instance: Some(String::new()),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::lease::BoxFut;
    use super::*;
    use kube::core::Status;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    const ME: &str = "host_me";
    const OTHER: &str = "host_other";

    fn spec(holder: &str, secs: i32, transitions: i32) -> LeaseSpec {
        let t = Timestamp::from_second(1_000).unwrap_or(Timestamp::UNIX_EPOCH);
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(secs),
            acquire_time: Some(MicroTime(t)),
            renew_time: Some(MicroTime(t)),
            lease_transitions: Some(transitions),
            strategy: Some("Keep".to_owned()),
            ..LeaseSpec::default()
        }
    }

    fn obs(spec: LeaseSpec, at: Instant) -> Observation {
        Observation {
            lease: Lease {
                metadata: ObjectMeta::default(),
                spec: Some(spec),
            },
            at,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn validity_is_local_time_since_observation() {
        let t0 = Instant::now();
        let s = spec(OTHER, 15, 0);
        assert!(is_valid(&s, t0, t0 + Duration::from_millis(14_999)));
        assert!(
            !is_valid(&s, t0, t0 + Duration::from_secs(15)),
            "Go's After is strict"
        );
        let none = LeaseSpec::default();
        assert!(!is_valid(&none, t0, t0), "no duration means expired");
    }

    #[tokio::test(start_paused = true)]
    async fn unchanged_record_keeps_observation_time() {
        let t0 = Instant::now();
        let first = obs(spec(OTHER, 15, 3), t0);
        tokio::time::advance(Duration::from_secs(10)).await;
        let now = Instant::now();
        let same = observe(Some(&first), first.lease.clone(), now);
        assert_eq!(same.at, t0);
        let mut changed = first.lease.clone();
        if let Some(s) = changed.spec.as_mut() {
            s.renew_time = Some(MicroTime(Timestamp::UNIX_EPOCH));
        }
        assert_eq!(observe(Some(&first), changed, now).at, now);
        assert_eq!(observe(None, first.lease.clone(), now).at, now);
    }

    #[tokio::test(start_paused = true)]
    async fn valid_foreign_lease_is_respected_until_it_expires() {
        let t0 = Instant::now();
        let o = obs(spec(OTHER, 15, 3), t0);
        let wall = Timestamp::UNIX_EPOCH;
        assert_eq!(
            decide(&o, t0 + Duration::from_secs(14), ME, 15, wall),
            Decision::HeldByOther {
                holder: OTHER.to_owned()
            }
        );
        let Decision::Write { spec, slow_path } =
            decide(&o, t0 + Duration::from_secs(15), ME, 15, wall)
        else {
            panic!("expired lease must be taken");
        };
        assert!(!slow_path);
        assert_eq!(spec.holder_identity.as_deref(), Some(ME));
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(spec.acquire_time, Some(MicroTime(wall)));
        assert_eq!(spec.renew_time, Some(MicroTime(wall)));
        assert_eq!(
            spec.strategy.as_deref(),
            Some("Keep"),
            "fields we do not own stay"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn released_lease_is_taken_at_once() {
        let t0 = Instant::now();
        let o = obs(released(&spec(OTHER, 15, 3), Timestamp::UNIX_EPOCH), t0);
        let Decision::Write { spec, .. } = decide(&o, t0, ME, 15, Timestamp::UNIX_EPOCH) else {
            panic!("released lease must be taken");
        };
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(spec.lease_duration_seconds, Some(15));
    }

    #[tokio::test(start_paused = true)]
    async fn own_lease_is_renewed_on_the_slow_path() {
        let t0 = Instant::now();
        let mine = spec(ME, 15, 7);
        let o = obs(mine.clone(), t0);
        let wall = Timestamp::UNIX_EPOCH;
        let Decision::Write { spec, slow_path } = decide(&o, t0, ME, 15, wall) else {
            panic!("own lease must be renewed");
        };
        assert!(slow_path);
        assert_eq!(spec.acquire_time, mine.acquire_time, "acquireTime kept");
        assert_eq!(spec.lease_transitions, Some(7), "transitions kept");
        assert_eq!(spec.renew_time, Some(MicroTime(wall)));
        assert_eq!(renewed(&mine, ME, 15, wall), spec);
    }

    #[test]
    fn release_record() {
        let r = released(&spec(ME, 15, 2), Timestamp::UNIX_EPOCH);
        assert_eq!(r.holder_identity.as_deref(), Some(""));
        assert_eq!(r.lease_duration_seconds, Some(1));
        assert_eq!(r.lease_transitions, Some(2));
        assert_eq!(r.acquire_time, r.renew_time);
        assert_eq!(r.strategy.as_deref(), Some("Keep"));
    }

    #[test]
    fn jitter_range() {
        let retry = Duration::from_secs(2);
        for _ in 0..1000 {
            let d = jittered(retry);
            assert!(d >= retry && d < retry.mul_f64(2.2), "{d:?}");
        }
    }

    #[test]
    fn identity_shape() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap_or(("", ""));
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        assert_ne!(default_identity(), id);
    }

    #[test]
    fn event_shape() {
        let cfg = config("lock", ME);
        let mut lease = Lease::default();
        lease.metadata.uid = Some("u1".into());
        let now = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let e = leader_event(&lease, &cfg, "host_me became leader", now);
        assert_eq!(e.metadata.name.as_deref(), Some("lock.17979cfe362a0000"));
        assert_eq!(e.involved_object.kind.as_deref(), Some("Lease"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("u1"));
        assert_eq!(e.reason.as_deref(), Some("LeaderElection"));
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(
            e.source.and_then(|s| s.component).as_deref(),
            Some(EVENT_COMPONENT)
        );
    }

    // ---- the loops, against an in-memory apiserver with paused time --------------------

    #[derive(Default)]
    struct FakeState {
        lease: Option<Lease>,
        rv: u64,
        writes: Vec<LeaseSpec>,
        events: Vec<String>,
    }

    /// One Lease with resourceVersion checks; `down` makes every call fail like a dead
    /// apiserver.
    #[derive(Clone, Default)]
    struct Fake {
        state: Arc<Mutex<FakeState>>,
        down: Arc<AtomicBool>,
    }

    fn status(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure(reason, reason).with_code(code).boxed())
    }

    impl Fake {
        fn st(&self) -> std::sync::MutexGuard<'_, FakeState> {
            self.state.lock().unwrap_or_else(|e| e.into_inner())
        }
        fn check(&self) -> kube::Result<()> {
            if self.down.load(Ordering::SeqCst) {
                Err(status(503, "ServiceUnavailable"))
            } else {
                Ok(())
            }
        }
        fn holder(&self) -> Option<String> {
            self.st()
                .lease
                .as_ref()
                .and_then(|l| l.spec.as_ref())
                .and_then(|s| s.holder_identity.clone())
        }
        fn spec(&self) -> LeaseSpec {
            self.st()
                .lease
                .as_ref()
                .and_then(|l| l.spec.clone())
                .unwrap_or_default()
        }
        fn store(&self, mut lease: Lease) -> Lease {
            let mut st = self.st();
            st.rv += 1;
            lease.metadata.resource_version = Some(st.rv.to_string());
            st.writes.push(lease.spec.clone().unwrap_or_default());
            st.lease = Some(lease.clone());
            lease
        }
        /// A hand edit (e.g. kubectl) of the holder.
        fn overwrite_holder(&self, holder: &str) {
            let mut lease = self.st().lease.clone().unwrap_or_default();
            if let Some(s) = lease.spec.as_mut() {
                s.holder_identity = Some(holder.to_owned());
            }
            self.store(lease);
        }
    }

    impl LeaseBackend for Fake {
        fn get(&self) -> BoxFut<'_, kube::Result<Option<Lease>>> {
            Box::pin(async move {
                self.check()?;
                Ok(self.st().lease.clone())
            })
        }
        fn create(&self, lease: Lease) -> BoxFut<'_, kube::Result<Lease>> {
            Box::pin(async move {
                self.check()?;
                if self.st().lease.is_some() {
                    return Err(status(409, "AlreadyExists"));
                }
                Ok(self.store(lease))
            })
        }
        fn replace(&self, lease: Lease) -> BoxFut<'_, kube::Result<Lease>> {
            Box::pin(async move {
                self.check()?;
                let current_rv = self
                    .st()
                    .lease
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.clone());
                if current_rv.is_none() {
                    return Err(status(404, "NotFound"));
                }
                if lease.metadata.resource_version != current_rv {
                    return Err(status(409, "Conflict"));
                }
                Ok(self.store(lease))
            })
        }
        fn create_event(&self, event: Event) -> BoxFut<'_, kube::Result<()>> {
            Box::pin(async move {
                self.check()?;
                self.st().events.push(event.message.unwrap_or_default());
                Ok(())
            })
        }
    }

    fn config(name: &str, identity: &str) -> LeaderConfig {
        LeaderConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            name: name.to_owned(),
            namespace: "kube-system".to_owned(),
            identity: identity.to_owned(),
        }
    }

    fn elector(fake: &Fake, name: &str, identity: &str, health: Health) -> LeaderElector {
        LeaderElector::with_backend(Box::new(fake.clone()), config(name, identity), health)
    }

    fn renewals(name: &str, result: &str) -> u64 {
        metrics()
            .expect("valid definitions")
            .renewals
            .with_label_values(&[name, result])
            .get()
    }

    fn master(name: &str) -> i64 {
        metrics()
            .expect("valid definitions")
            .master_status
            .with_label_values(&[name])
            .get()
    }

    #[tokio::test(start_paused = true)]
    async fn creates_missing_lease_and_renews() {
        let fake = Fake::default();
        let health = Health::new();
        let e = elector(&fake, "t-create", ME, health.clone());
        assert_eq!(master("t-create"), 0);
        let leading = e
            .run_until_leading(&CancellationToken::new())
            .await
            .expect("acquires");
        assert_eq!(master("t-create"), 1);
        assert!(health.is_leading());
        let s = fake.spec();
        assert_eq!(s.holder_identity.as_deref(), Some(ME));
        assert_eq!(s.lease_transitions, Some(0));
        assert_eq!(s.lease_duration_seconds, Some(15));
        tokio::time::sleep(Duration::from_secs(9)).await;
        // Renewals every ~2 s on the fast path: create + ~4 renewals.
        let writes = fake.st().writes.len();
        assert!((4..=6).contains(&writes), "{writes} writes");
        let ok = renewals("t-create", "success");
        let renewed = u64::try_from(writes - 1).expect("small");
        assert_eq!((ok, renewals("t-create", "error")), (renewed, 0));
        assert_eq!(fake.spec().acquire_time, s.acquire_time);
        assert!(fake.st().events.contains(&format!("{ME} became leader")));
        assert!(
            tokio::time::timeout(Duration::ZERO, leading.lost())
                .await
                .is_err()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn standby_waits_for_expiry_without_writing() {
        let fake = Fake::default();
        let a = elector(&fake, "t-standby", "a", Health::new());
        let leading_a = a
            .run_until_leading(&CancellationToken::new())
            .await
            .expect("a leads");
        let b = elector(&fake, "t-standby", "b", Health::new());
        let start = Instant::now();
        let shutdown = CancellationToken::new();
        let b_task =
            tokio::spawn(
                async move { b.run_until_leading(&shutdown).await.map(|_| Instant::now()) },
            );
        // While a renews, b never gets it; count only b's writes (holder b).
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!b_task.is_finished());
        assert!(
            fake.st()
                .writes
                .iter()
                .all(|w| w.holder_identity.as_deref() == Some("a"))
        );
        // a's apiserver view dies: a stops renewing (simulate by dropping renewals only for
        // a: stop its task without releasing, like SIGKILL).
        leading_a.stop.cancel();
        let killed = Instant::now();
        let acquired = b_task.await.expect("join").expect("b leads");
        let waited = acquired - killed;
        // b must wait at least the lease duration after the last change it saw, and at most
        // duration + two jittered retries (one to observe the last change, one to retry).
        assert!(waited >= Duration::from_secs(13), "{waited:?}");
        assert!(
            waited <= Duration::from_secs(15) + Duration::from_millis(8800),
            "{waited:?}"
        );
        assert!(acquired - start > Duration::from_secs(60));
        let s = fake.spec();
        assert_eq!(s.holder_identity.as_deref(), Some("b"));
        assert_eq!(s.lease_transitions, Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn release_lets_standby_take_over_quickly() {
        let fake = Fake::default();
        let a = elector(&fake, "t-release", "a", Health::new());
        let leading_a = a
            .run_until_leading(&CancellationToken::new())
            .await
            .expect("a leads");
        let b = elector(&fake, "t-release", "b", Health::new());
        let b_task = tokio::spawn(async move {
            b.run_until_leading(&CancellationToken::new())
                .await
                .map(|_| Instant::now())
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        leading_a.release().await.expect("released");
        let released_at = Instant::now();
        let s = fake.spec();
        assert_eq!(s.holder_identity.as_deref(), Some(""));
        assert_eq!(s.lease_duration_seconds, Some(1));
        assert_eq!(s.lease_transitions, Some(0));
        assert_eq!(master("t-release"), 0);
        let acquired = b_task.await.expect("join").expect("b leads");
        assert!(acquired - released_at <= Duration::from_millis(4400));
        assert_eq!(fake.spec().lease_transitions, Some(1));
        assert!(fake.st().events.contains(&"a stopped leading".to_owned()));
    }

    #[tokio::test(start_paused = true)]
    async fn renew_failures_past_deadline_lose_leadership() {
        let fake = Fake::default();
        let health = Health::new();
        let a = elector(&fake, "t-lost", "a", health.clone());
        let leading = a
            .run_until_leading(&CancellationToken::new())
            .await
            .expect("a leads");
        tokio::time::sleep(Duration::from_secs(3)).await;
        fake.down.store(true, Ordering::SeqCst);
        let down_at = Instant::now();
        leading.lost().await;
        let after = Instant::now() - down_at;
        // Last success ≤ 2 s before the outage; the window then runs 10 s.
        assert!(
            after >= Duration::from_secs(8) && after <= Duration::from_secs(12),
            "{after:?}"
        );
        assert_eq!(master("t-lost"), 0);
        // Every attempt in the 10 s window failed and was counted, none as a success.
        let ok = renewals("t-lost", "success");
        let failed = renewals("t-lost", "error");
        assert!(failed >= 4, "{failed} failed renewals");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(renewals("t-lost", "success"), ok);
        // A leader that cannot renew turns unhealthy after 15 + 20 s since its last renewal.
        assert!(health.live_checks(Instant::now())[0].1.is_ok());
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(health.live_checks(Instant::now())[0].1.is_err());
        assert!(matches!(
            leading.release().await,
            Err(LeaderError::Lost { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn overwritten_holder_loses_leadership_at_once() {
        let fake = Fake::default();
        let a = elector(&fake, "t-taken", "a", Health::new());
        let leading = a
            .run_until_leading(&CancellationToken::new())
            .await
            .expect("a leads");
        fake.overwrite_holder("intruder");
        let t = Instant::now();
        leading.lost().await;
        // Next renewal: fast path conflicts, slow path reads the intruder → lost.
        assert!(Instant::now() - t <= Duration::from_secs(3));
        assert_eq!(fake.holder().as_deref(), Some("intruder"));
        assert!(matches!(
            leading.release().await,
            Err(LeaderError::Lost { .. })
        ));
        assert_eq!(
            fake.holder().as_deref(),
            Some("intruder"),
            "release never clobbers"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_before_leading() {
        let fake = Fake::default();
        let _a = elector(&fake, "t-cancel", "a", Health::new())
            .run_until_leading(&CancellationToken::new())
            .await
            .expect("a leads");
        let b = elector(&fake, "t-cancel", "b", Health::new());
        let shutdown = CancellationToken::new();
        let s2 = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            s2.cancel();
        });
        assert!(matches!(
            b.run_until_leading(&shutdown).await,
            Err(LeaderError::Cancelled { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn release_retries_after_conflict() {
        let fake = Fake::default();
        let a = elector(&fake, "t-conflict", "a", Health::new());
        let leading = a
            .run_until_leading(&CancellationToken::new())
            .await
            .expect("a leads");
        // Bump the resourceVersion behind a's back without changing the holder.
        let lease = fake.st().lease.clone().unwrap_or_default();
        fake.store(lease);
        leading.release().await.expect("released after re-read");
        assert_eq!(fake.holder().as_deref(), Some(""));
    }

    #[tokio::test(start_paused = true)]
    async fn slow_path_counts() {
        let fake = Fake::default();
        let a = elector(&fake, "t-slow", "a", Health::new());
        let _leading = a
            .run_until_leading(&CancellationToken::new())
            .await
            .expect("a leads");
        let before = metrics()
            .expect("valid definitions")
            .slowpath
            .with_label_values(&["t-slow"])
            .get();
        let lease = fake.st().lease.clone().unwrap_or_default();
        fake.store(lease);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            metrics()
                .expect("valid definitions")
                .slowpath
                .with_label_values(&["t-slow"])
                .get(),
            before + 1
        );
        assert_eq!(fake.holder().as_deref(), Some("a"));
    }
}
