//! The Lease side of sharded mode: one task per replica keeps its member Lease, renews the
//! range Leases it holds, takes free ranges up to its share and hands the surplus over.
//!
//! Every range `i` is the Lease `<prefix>-<i>` in the shard namespace, held with the leader
//! election's semantics: a holder renews every retry period; another replica judges expiry on
//! its own clock from when it saw the record change, and takes a range only after a full lease
//! duration without change. A holder acts on a range only until its last renewal's send time
//! plus the renew deadline (shorter than the lease duration), so its window always closes
//! before anyone else's can open, whatever the network does to its requests.
//!
//! A range handed over leaves the held set first (new syncs of it stop at once), then the
//! holder waits for the syncs already running on it ([`Shards::begin`]) and releases the Lease
//! (holder cleared, duration 1 s, as the leader election releases), so the next holder starts
//! on its next round instead of waiting out the lease.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, ListParams, PostParams};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::balance::{self, RangeLease, View};
use super::ring::{Ring, fnv1a64};
use crate::cache::signal::Signal;
use crate::clock::SharedClock;

/// The label every Lease of one ring carries (its value: the ring's prefix).
pub const LABEL_RING: &str = "rkcm.io/shard-ring";
/// `range` or `member`.
pub const LABEL_ROLE: &str = "rkcm.io/shard-role";

/// What a replica's shard holder works with.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    pub ring: Ring,
    /// Where the Leases live (`kube-system`).
    pub namespace: String,
    /// The Leases' name prefix (`rkcm-shard`): ranges `<prefix>-<i>`, members
    /// `<prefix>-member-<hash of the identity>`.
    pub prefix: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl ShardConfig {
    pub fn range_lease(&self, range: u32) -> String {
        format!("{}-{range}", self.prefix)
    }

    pub fn member_lease(&self) -> String {
        format!("{}-member-{:016x}", self.prefix, fnv1a64(&self.identity))
    }
}

/// The ranges a replica may act on, each until the local instant its last renewal allows.
pub type Held = BTreeMap<u32, Instant>;

/// One replica's view of the ring, shared by its holder task and its workers.
pub struct Shards {
    cfg: ShardConfig,
    clock: SharedClock,
    held: Signal<Held>,
    in_flight: Mutex<HashMap<u32, usize>>,
    drained: Notify,
}

/// A sync running on one range; the holder waits for it before handing the range over.
pub struct InFlight {
    shards: Arc<Shards>,
    range: u32,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = self.shards.in_flight.lock();
        if let Some(n) = map.get_mut(&self.range) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.range);
            }
        }
        drop(map);
        self.shards.drained.notify_waiters();
    }
}

impl Shards {
    pub fn new(cfg: ShardConfig, clock: SharedClock) -> Arc<Self> {
        Arc::new(Self {
            cfg,
            clock,
            held: Signal::new(Held::new()),
            in_flight: Mutex::new(HashMap::new()),
            drained: Notify::new(),
        })
    }

    pub fn config(&self) -> &ShardConfig {
        &self.cfg
    }

    /// The ranges held now (their windows open).
    pub fn held(&self) -> BTreeSet<u32> {
        let now = self.clock.now();
        self.held
            .get()
            .into_iter()
            .filter(|(_, until)| *until > now)
            .map(|(r, _)| r)
            .collect()
    }

    /// The ranges held, windows open or not (what the caches keep until the holder drops
    /// a range).
    pub fn held_ranges(&self) -> BTreeSet<u32> {
        self.held.get().into_keys().collect()
    }

    /// Whether `range` is in the held set, window open or not (what the caches keep).
    pub fn keeps(&self, range: u32) -> bool {
        self.held.with(|h| h.contains_key(&range))
    }

    /// Whether this replica may act on an object of `namespace` now.
    pub fn owns(&self, namespace: &str) -> bool {
        let range = self.cfg.ring.range_of(namespace);
        let now = self.clock.now();
        // The mutant acts on a range as long as it is in the held set, its window closed
        // or not: a holder whose renewals stall keeps acting until its next round drops it.
        let ignore_window = crate::mutants::on("shard-range-without-lease");
        self.held.with(|h| {
            h.get(&range)
                .is_some_and(|until| ignore_window || *until > now)
        })
    }

    /// Marks a sync on `namespace`'s range as running, if the range is held now.
    pub fn begin(self: &Arc<Self>, namespace: &str) -> Option<InFlight> {
        if !self.owns(namespace) {
            return None;
        }
        let range = self.cfg.ring.range_of(namespace);
        *self.in_flight.lock().entry(range).or_default() += 1;
        Some(InFlight {
            shards: self.clone(),
            range,
        })
    }

    /// Syncs running on `range` now.
    pub fn in_flight_on(&self, range: u32) -> usize {
        self.in_flight.lock().get(&range).copied().unwrap_or(0)
    }

    /// Waits until the held set changes from `seen` (e.g. to restart caches with a new
    /// selector).
    pub async fn changed(&self, seen: &BTreeSet<u32>) {
        self.held
            .wait_for(|h| h.keys().copied().collect::<BTreeSet<u32>>() != *seen)
            .await;
    }

    pub(crate) fn set_held(&self, held: Held) {
        self.held.set(held);
    }

    /// Waits (at most `limit`) until no sync runs on `range`.
    async fn drain(&self, range: u32, limit: Duration) {
        let wait = async {
            loop {
                let notified = self.drained.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if !self.in_flight.lock().contains_key(&range) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(limit, wait).await.is_err() {
            tracing::warn!(
                range,
                "handing a shard range over with syncs still running on it"
            );
        }
    }

    /// Holds ranges until `cancel`, then hands every range over and releases the Leases.
    pub async fn run(self: Arc<Self>, client: kube::Client, cancel: CancellationToken) {
        let api: Api<Lease> = Api::namespaced(client, &self.cfg.namespace);
        let mut round = Round::default();
        loop {
            self.round(&api, &mut round).await;
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
        let held: Vec<u32> = self.held.get().keys().copied().collect();
        self.set_held(Held::new());
        for range in held {
            self.drain(range, self.cfg.renew_deadline).await;
            self.release(&api, &self.cfg.range_lease(range), &round)
                .await;
        }
        self.release(&api, &self.cfg.member_lease(), &round).await;
    }

    /// One round: read the ring's Leases, renew, take, hand over.
    async fn round(&self, api: &Api<Lease>, round: &mut Round) {
        let params = ListParams::default().labels(&format!("{LABEL_RING}={}", self.cfg.prefix));
        let listed = api.list(&params).await;
        // Another holder's lease is judged from when its record was seen, which is when the
        // answer came: a record sent late may carry a renewal made after the request left
        // (timing it from the request would make a valid lease look expired).
        let now = self.clock.now();
        match listed {
            Ok(list) => round.observe(list.items, now),
            Err(error) => {
                tracing::debug!(%error, "listing the shard leases failed");
                self.expire(now);
                return;
            }
        }
        self.renew_member(api, round).await;
        let mut held = self.held.get();
        self.renew_ranges(api, round, &mut held).await;
        held.retain(|_, until| *until > self.clock.now());
        self.set_held(held.clone());

        let (members, leases) = round.view(&self.cfg, self.clock.now());
        let plan = balance::plan(&View {
            ranges: self.cfg.ring.len(),
            me: &self.cfg.identity,
            members: &members,
            leases: &leases,
        });
        for range in plan.take {
            let sent = self.clock.now();
            if self.acquire(api, range, round).await {
                held.insert(range, sent + self.cfg.renew_deadline);
                self.set_held(held.clone());
                tracing::info!(range, identity = %self.cfg.identity, "took a shard range");
            }
        }
        for range in plan.hand_over {
            held.remove(&range);
            self.set_held(held.clone());
            self.drain(range, self.cfg.renew_deadline).await;
            self.release(api, &self.cfg.range_lease(range), round).await;
            tracing::info!(range, identity = %self.cfg.identity, "handed a shard range over");
        }
    }

    /// Drops ranges whose window closed.
    fn expire(&self, now: Instant) {
        let mut held = self.held.get();
        held.retain(|_, until| *until > now);
        self.set_held(held);
    }

    async fn renew_member(&self, api: &Api<Lease>, round: &mut Round) {
        let name = self.cfg.member_lease();
        let spec = self.spec(round.spec(&name), true);
        let _ = self.write(api, &name, "member", spec, round).await;
    }

    async fn renew_ranges(&self, api: &Api<Lease>, round: &mut Round, held: &mut Held) {
        for (range, until) in held.iter_mut() {
            let name = self.cfg.range_lease(*range);
            let current = round.spec(&name);
            let holder = current
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default();
            if holder != self.cfg.identity {
                // Taken over or released by someone else: the window closes now.
                *until = self.clock.now();
                continue;
            }
            let sent = self.clock.now();
            if self
                .write(api, &name, "range", self.spec(current, true), round)
                .await
            {
                *until = sent + self.cfg.renew_deadline;
            }
        }
    }

    /// Takes a free range: a create when its Lease is missing, else an update on the version
    /// read this round (a conflict means someone else was faster).
    async fn acquire(&self, api: &Api<Lease>, range: u32, round: &mut Round) -> bool {
        let name = self.cfg.range_lease(range);
        let spec = self.spec(round.spec(&name), false);
        self.write(api, &name, "range", spec, round).await
    }

    /// The record to write: ours, renewed now; `renew`: we already hold it.
    fn spec(&self, current: Option<LeaseSpec>, renew: bool) -> LeaseSpec {
        let wall = MicroTime(self.clock.wall());
        let mut spec = current.unwrap_or_default();
        let ours = spec.holder_identity.as_deref() == Some(self.cfg.identity.as_str());
        if !(renew && ours) {
            spec.acquire_time = Some(wall.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.cfg.identity.clone());
        spec.lease_duration_seconds =
            Some(i32::try_from(self.cfg.lease_duration.as_secs()).unwrap_or(i32::MAX));
        spec.renew_time = Some(wall);
        spec
    }

    /// Creates or updates Lease `name` with `spec`; keeps what the server answered.
    async fn write(
        &self,
        api: &Api<Lease>,
        name: &str,
        role: &str,
        spec: LeaseSpec,
        round: &mut Round,
    ) -> bool {
        let result = match round.leases.get(name) {
            Some(seen) => {
                let mut lease = seen.lease.clone();
                lease.spec = Some(spec);
                api.replace(name, &PostParams::default(), &lease).await
            }
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.to_owned()),
                        namespace: Some(self.cfg.namespace.clone()),
                        labels: Some(
                            [
                                (LABEL_RING.to_owned(), self.cfg.prefix.clone()),
                                (LABEL_ROLE.to_owned(), role.to_owned()),
                            ]
                            .into(),
                        ),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                api.create(&PostParams::default(), &lease).await
            }
        };
        match result {
            Ok(lease) => {
                round.observe_one(lease, self.clock.now());
                true
            }
            Err(error) => {
                tracing::debug!(lease = name, %error, "writing a shard lease failed");
                false
            }
        }
    }

    /// Clears the holder of Lease `name` if it is still ours (duration 1 s).
    async fn release(&self, api: &Api<Lease>, name: &str, round: &Round) {
        let Some(seen) = round.leases.get(name) else {
            return;
        };
        let mut lease = seen.lease.clone();
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        let wall = MicroTime(self.clock.wall());
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(wall.clone());
        spec.acquire_time = Some(wall);
        if let Err(error) = api.replace(name, &PostParams::default(), &lease).await {
            tracing::debug!(lease = name, %error, "releasing a shard lease failed");
        }
    }
}

/// A Lease as last seen, and when its record was seen to change.
struct Seen {
    lease: Lease,
    at: Instant,
}

/// What the holder knows of the ring's Leases between rounds.
#[derive(Default)]
struct Round {
    leases: HashMap<String, Seen>,
}

impl Round {
    fn observe(&mut self, leases: Vec<Lease>, now: Instant) {
        let names: BTreeSet<String> = leases
            .iter()
            .filter_map(|l| l.metadata.name.clone())
            .collect();
        self.leases.retain(|name, _| names.contains(name));
        for lease in leases {
            self.observe_one(lease, now);
        }
    }

    /// Keeps the observation time while the record is unchanged (the leader election's
    /// `observedTime`).
    fn observe_one(&mut self, lease: Lease, now: Instant) {
        let Some(name) = lease.metadata.name.clone() else {
            return;
        };
        let at = match self.leases.get(&name) {
            Some(seen) if seen.lease.spec == lease.spec => seen.at,
            _ => now,
        };
        self.leases.insert(name, Seen { lease, at });
    }

    fn spec(&self, name: &str) -> Option<LeaseSpec> {
        self.leases.get(name).and_then(|s| s.lease.spec.clone())
    }

    /// The live members and the ranges' Leases, judged at `now`.
    fn view(&self, cfg: &ShardConfig, now: Instant) -> (Vec<String>, Vec<RangeLease>) {
        let mut members = Vec::new();
        let mut ranges = Vec::new();
        for (name, seen) in &self.leases {
            let spec = seen.lease.spec.clone().unwrap_or_default();
            let holder = spec.holder_identity.clone().unwrap_or_default();
            let secs = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
            let valid = seen.at + Duration::from_secs(secs) > now;
            let role = seen
                .lease
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_ROLE))
                .map(String::as_str);
            if role == Some("member") {
                if valid && !holder.is_empty() {
                    members.push(holder);
                }
            } else if let Some(range) = name
                .strip_prefix(&format!("{}-", cfg.prefix))
                .and_then(|i| i.parse::<u32>().ok())
            {
                ranges.push(RangeLease {
                    range,
                    holder,
                    valid,
                });
            }
        }
        (members, ranges)
    }
}

#[cfg(test)]
mod tests;
