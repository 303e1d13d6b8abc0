//! The Lease side of sharded mode: one task per replica keeps its member Lease, renews the
//! range Leases it holds, takes free ranges up to its share and hands the surplus over.
//!
//! Every range `i` is the Lease `<prefix>-<i>` in the shard namespace, held with the leader
//! election's semantics: another replica judges expiry on its own clock from when it saw the
//! record change, and takes a range only after a full lease duration without change. A holder
//! acts on a range only until its last renewal's send time plus the renew deadline (shorter
//! than the lease duration), so its window always closes before anyone else's can open,
//! whatever the network does to its requests.
//!
//! That argument does not depend on how often a holder renews, only on when its last
//! renewal left. The single leader renews its one Lease every retry period; a replica holding
//! dozens of ranges would write dozens of Leases every retry period, so it renews a range
//! only once its window has [`ShardConfig::renew_margin`] left or less (6 s of the default
//! 10 s: about every other round), which still leaves three rounds to get a renewal through
//! before the window closes. The renewals of one round go out together, a few at a time.
//!
//! A range handed over leaves the held set first (new syncs of it stop at once), then the
//! holder waits for the syncs already running on it ([`Shards::begin`]) and releases the Lease
//! (holder cleared, duration 1 s, as the leader election releases), so the next holder starts
//! on its next round instead of waiting out the lease.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
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
/// The shard Leases' name prefix of `--rkcm-shards`: ranges `rkcm-shard-<i>`,
/// `rkcm-shard-global`, members `rkcm-shard-member-<hash of the identity>`.
pub const LEASE_PREFIX: &str = "rkcm-shard";

/// `range`, `member` or `global`.
pub const LABEL_ROLE: &str = "rkcm.io/shard-role";

/// The key of the global Lease (`<prefix>-global`) in the held set: work that is cluster-wide
/// by upstream's definition (PodGC's terminated-pod threshold) runs in the one replica that
/// holds it. Any replica takes it when it is free or expired; it is held, renewed and released
/// like a range, but it is not a range: the caches and the per-namespace gates ignore it.
pub const GLOBAL: u32 = u32::MAX;

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
    /// Whether the informers send the API server the held ranges as a shard selector
    /// (`--rkcm-shard-selector`, on by default). Off, they list and watch every namespace and
    /// keep only the held ranges' objects: for a server without gate ShardedListAndWatch, or
    /// to compare the two.
    pub server_selector: bool,
}

impl ShardConfig {
    /// A ring's config with the Lease prefix `rkcm-shard` and upstream's leader-election
    /// timings (lease 15 s, renew deadline 10 s, retry 2 s), the flags' defaults.
    pub fn with_defaults(ring: Ring, namespace: &str, identity: &str) -> Self {
        Self {
            ring,
            namespace: namespace.to_owned(),
            prefix: LEASE_PREFIX.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            server_selector: true,
        }
    }

    /// The Lease of `range` ([`GLOBAL`]: `<prefix>-global`).
    pub fn range_lease(&self, range: u32) -> String {
        if range == GLOBAL {
            format!("{}-global", self.prefix)
        } else {
            format!("{}-{range}", self.prefix)
        }
    }

    /// A held range is renewed once its window has this much left or less: the renew
    /// deadline less two retry periods, so a renewal is tried in three rounds before the
    /// window closes; every round when that leaves less than two retry periods (short
    /// deadlines), as the single leader renews.
    pub fn renew_margin(&self) -> Duration {
        let margin = self.renew_deadline.saturating_sub(2 * self.retry_period);
        if margin >= 2 * self.retry_period {
            margin
        } else {
            self.renew_deadline
        }
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
    /// Held ranges the caches cover (set by the sharded informer factory once every
    /// informer completed a list with them; a range leaves it when it leaves the held set).
    cached: Mutex<BTreeSet<u32>>,
    /// Woken when the held or the cached set changes.
    moved: Notify,
    in_flight: Mutex<HashMap<u32, usize>>,
    drained: Notify,
    /// Rounds the holder task finished.
    rounds: Signal<u64>,
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
            cached: Mutex::new(BTreeSet::new()),
            moved: Notify::new(),
            in_flight: Mutex::new(HashMap::new()),
            drained: Notify::new(),
            rounds: Signal::new(0),
        })
    }

    pub fn config(&self) -> &ShardConfig {
        &self.cfg
    }

    /// The ranges held now (their windows open); not [`GLOBAL`].
    pub fn held(&self) -> BTreeSet<u32> {
        let now = self.clock.now();
        self.held
            .get()
            .into_iter()
            .filter(|(r, until)| *until > now && *r != GLOBAL)
            .map(|(r, _)| r)
            .collect()
    }

    /// The ranges held, windows open or not (what the caches keep until the holder drops
    /// a range); not [`GLOBAL`].
    pub fn held_ranges(&self) -> BTreeSet<u32> {
        ranges_of(&self.held.get())
    }

    /// Whether `range` is in the held set, window open or not (what the caches keep).
    pub fn keeps(&self, range: u32) -> bool {
        range != GLOBAL && self.held.with(|h| h.contains_key(&range))
    }

    /// Whether this replica holds the global Lease now (its window open).
    pub fn owns_global(&self) -> bool {
        let now = self.clock.now();
        self.held
            .with(|h| h.get(&GLOBAL).is_some_and(|until| *until > now))
    }

    /// Marks cluster-wide work as running, if the global Lease is held now.
    pub fn begin_global(self: &Arc<Self>) -> Option<InFlight> {
        if !self.owns_global() {
            return None;
        }
        *self.in_flight.lock().entry(GLOBAL).or_default() += 1;
        Some(InFlight {
            shards: self.clone(),
            range: GLOBAL,
        })
    }

    /// Whether this replica may act on an object of `namespace` now: its range is held, the
    /// window open, and the caches hold the range's objects.
    pub fn owns(&self, namespace: &str) -> bool {
        let range = self.cfg.ring.range_of(namespace);
        let now = self.clock.now();
        // The mutant acts on a range as long as it is in the held set, its window closed
        // or not: a holder whose renewals stall keeps acting until its next round drops it.
        let ignore_window = crate::mutants::on("shard-range-without-lease");
        self.held.with(|h| {
            h.get(&range)
                .is_some_and(|until| ignore_window || *until > now)
        }) && self.cached.lock().contains(&range)
    }

    /// The caches cover `ranges` (those of them still held): the sharded informer factory
    /// calls this once every informer completed a list of them.
    pub fn set_cached(&self, ranges: BTreeSet<u32>) {
        let held = self.held_ranges();
        *self.cached.lock() = ranges.intersection(&held).copied().collect();
        self.moved.notify_waiters();
    }

    /// Held ranges the caches cover.
    pub fn cached(&self) -> BTreeSet<u32> {
        self.cached.lock().clone()
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

    /// [`Shards::begin`], waiting (at most the renew deadline) while `namespace`'s range is
    /// in the held set but not usable yet: its objects not cached yet (just taken, the
    /// caches relisting: the events of that relist queue the keys this replica must now
    /// sync, and a key dropped for that short wait would not come back), or its window
    /// closed until a late renewal lands. `None` when the range is not held here.
    pub async fn begin_when_cached(self: &Arc<Self>, namespace: &str) -> Option<InFlight> {
        let range = self.cfg.ring.range_of(namespace);
        let deadline = self.clock.now() + self.cfg.renew_deadline;
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if let Some(flight) = self.begin(namespace) {
                return Some(flight);
            }
            // Held but not usable yet: not cached, or its window closed for a moment (a
            // late renewal; the next round renews it or drops it, and a dropped range's
            // objects come back through the relist when it is taken again).
            let now = self.clock.now();
            if !self.held.with(|h| h.contains_key(&range)) || now >= deadline {
                return None;
            }
            tokio::select! {
                biased;
                () = moved => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Syncs running on `range` now.
    pub fn in_flight_on(&self, range: u32) -> usize {
        self.in_flight.lock().get(&range).copied().unwrap_or(0)
    }

    /// Waits until the holder task has finished `n` rounds (read the Leases, renewed, took
    /// and handed over).
    pub async fn rounds(&self, n: u64) {
        self.rounds.wait_for(|done| *done >= n).await;
    }

    /// Waits until the held ranges change from `seen` (e.g. to restart caches with a new
    /// selector); the global Lease does not count.
    pub async fn changed(&self, seen: &BTreeSet<u32>) {
        self.held.wait_for(|h| ranges_of(h) != *seen).await;
    }

    /// Waits until the global Lease is taken or lost (`held`: whether it was held).
    pub async fn global_changed(&self, held: bool) {
        self.held
            .wait_for(|h| h.contains_key(&GLOBAL) != held)
            .await;
    }

    pub(crate) fn set_held(&self, held: Held) {
        // A range that leaves the held set leaves the cached set with it: taken again, it
        // waits for a new list.
        self.cached.lock().retain(|r| held.contains_key(r));
        super::metrics::held(ranges_of(&held).len(), held.contains_key(&GLOBAL));
        self.held.set(held);
        self.moved.notify_waiters();
    }

    /// Sets the held set as the holder task would, every range cached, for tests and
    /// harnesses that play the holder and the caches themselves ([`GLOBAL`] for the global
    /// Lease).
    pub fn assume_held(&self, held: Held) {
        let ranges = ranges_of(&held);
        self.set_held(held);
        *self.cached.lock() = ranges;
        self.moved.notify_waiters();
    }

    /// Waits (at most `limit`) until no sync runs on any of `ranges`.
    async fn drain(&self, ranges: &[u32], limit: Duration) {
        let busy = || {
            let map = self.in_flight.lock();
            ranges.iter().any(|r| map.contains_key(r))
        };
        let wait = async {
            loop {
                let notified = self.drained.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if !busy() {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(limit, wait).await.is_err() {
            tracing::warn!(
                ?ranges,
                "handing shard ranges over with syncs still running on them"
            );
        }
    }

    /// Holds ranges until `cancel`, then hands every range over and releases the Leases. The
    /// first round only announces the replica (its member Lease) and takes nothing.
    pub async fn run(self: Arc<Self>, client: kube::Client, cancel: CancellationToken) {
        let api: Api<Lease> = Api::namespaced(client, &self.cfg.namespace);
        let mut round = Round::default();
        loop {
            self.round(&api, &mut round).await;
            self.rounds.set(self.rounds.get() + 1);
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
        let held: Vec<u32> = self.held.get().keys().copied().collect();
        self.set_held(Held::new());
        self.drain(&held, self.cfg.renew_deadline).await;
        for range in held {
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

        round.count += 1;
        if round.count == 1 {
            // The first round only announces this replica: replicas that start together
            // (a rollout, a scale-up) then see each other before taking ranges, and take
            // their fair shares of the free ones instead of the first taking everything and
            // handing most of it over again.
            return;
        }
        let (members, leases) = round.view(&self.cfg, self.clock.now());
        let plan = balance::plan(&View {
            ranges: self.cfg.ring.len(),
            me: &self.cfg.identity,
            members: &members,
            leases: &leases,
        });
        // Taken ranges join the held set together, handed-over ones leave it together: each
        // change of the set relists every cache.
        let mut took = Vec::new();
        for range in plan.take {
            let sent = self.clock.now();
            if self.acquire(api, range, round).await {
                held.insert(range, sent + self.cfg.renew_deadline);
                took.push(range);
            }
        }
        if !took.is_empty() {
            self.set_held(held.clone());
            super::metrics::moved("took", took.len());
            tracing::info!(ranges = ?took, identity = %self.cfg.identity, "took shard ranges");
        }
        if !held.contains_key(&GLOBAL) && round.global_free(&self.cfg, self.clock.now()) {
            let sent = self.clock.now();
            if self.acquire(api, GLOBAL, round).await {
                held.insert(GLOBAL, sent + self.cfg.renew_deadline);
                self.set_held(held.clone());
                tracing::info!(identity = %self.cfg.identity, "took the global shard lease");
            }
        }
        if !plan.hand_over.is_empty() {
            for range in &plan.hand_over {
                held.remove(range);
            }
            self.set_held(held.clone());
            self.drain(&plan.hand_over, self.cfg.renew_deadline).await;
            for range in &plan.hand_over {
                self.release(api, &self.cfg.range_lease(*range), round)
                    .await;
            }
            super::metrics::moved("handed_over", plan.hand_over.len());
            tracing::info!(ranges = ?plan.hand_over, identity = %self.cfg.identity, "handed shard ranges over");
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

    /// Renews the held ranges whose window is short ([`ShardConfig::renew_margin`]), a few
    /// at a time; closes the window of a range someone else holds now.
    async fn renew_ranges(&self, api: &Api<Lease>, round: &mut Round, held: &mut Held) {
        let now = self.clock.now();
        let margin = self.cfg.renew_margin();
        let mut due = Vec::new();
        for (range, until) in held.iter_mut() {
            let name = self.cfg.range_lease(*range);
            let Some(seen) = round.leases.get(&name) else {
                // Gone (deleted by someone): the window closes now.
                *until = now;
                continue;
            };
            let current = seen.lease.spec.clone();
            let holder = current
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default();
            if holder != self.cfg.identity {
                // Taken over or released by someone else: the window closes now.
                *until = now;
                continue;
            }
            if !renewal_due(*until, now, margin) {
                continue;
            }
            let mut lease = seen.lease.clone();
            lease.spec = Some(self.spec(current, true));
            due.push((*range, name, lease));
        }
        // Sent no earlier than this: the windows count from here.
        let sent = self.clock.now();
        let answers: Vec<_> =
            futures::stream::iter(due.into_iter().map(|(range, name, lease)| async move {
                let answer = api.replace(&name, &PostParams::default(), &lease).await;
                (range, name, answer)
            }))
            .buffer_unordered(RENEWALS_IN_FLIGHT)
            .collect()
            .await;
        for (range, name, answer) in answers {
            match answer {
                Ok(lease) => {
                    round.observe_one(lease, self.clock.now());
                    held.insert(range, sent + self.cfg.renew_deadline);
                }
                Err(error) => {
                    tracing::debug!(lease = %name, %error, "renewing a shard lease failed");
                }
            }
        }
    }

    /// Takes a free range: a create when its Lease is missing, else an update on the version
    /// read this round (a conflict means someone else was faster).
    async fn acquire(&self, api: &Api<Lease>, range: u32, round: &mut Round) -> bool {
        let name = self.cfg.range_lease(range);
        let spec = self.spec(round.spec(&name), false);
        self.write(api, &name, role_of(range), spec, round).await
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

/// Range renewals of one round in flight at once.
const RENEWALS_IN_FLIGHT: usize = 8;

/// Whether a held range whose window closes at `until` is renewed at `now`: once at most
/// `margin` is left.
fn renewal_due(until: Instant, now: Instant, margin: Duration) -> bool {
    until.saturating_duration_since(now) <= margin
}

/// The held ranges without [`GLOBAL`].
fn ranges_of(held: &Held) -> BTreeSet<u32> {
    held.keys().copied().filter(|r| *r != GLOBAL).collect()
}

/// The role label of the Lease of `range`.
fn role_of(range: u32) -> &'static str {
    if range == GLOBAL { "global" } else { "range" }
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
    /// Rounds begun.
    count: u64,
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

    /// Whether the global Lease may be taken: missing, released, or not renewed for its
    /// duration.
    fn global_free(&self, cfg: &ShardConfig, now: Instant) -> bool {
        let Some(seen) = self.leases.get(&cfg.range_lease(GLOBAL)) else {
            return true;
        };
        let spec = seen.lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.unwrap_or_default();
        let secs = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
        holder.is_empty() || seen.at + Duration::from_secs(secs) <= now
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
