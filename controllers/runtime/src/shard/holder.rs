//! The Lease side of sharded mode: one task per replica keeps its member session, takes free
//! ranges up to its share and hands the surplus over.
//!
//! Every replica runs a *member session*: its member Lease (`<prefix>-member-<hash>`), held
//! with the leader election's semantics and renewed every half renew deadline
//! ([`ShardConfig::renew_interval`]), carries the session in an annotation. Every range `i` is the Lease `<prefix>-<i>` in the shard namespace; a
//! replica takes a range by writing that Lease with its identity and its session, and does
//! not write it again while it holds the range. A range is held for as long as the session
//! that took it runs, so the ring costs one write per replica every 5 s, however many ranges
//! it has (renewing each range Lease cost dozens). A round reads the ring's Leases from a
//! watch (`super::watch`), not from a list of them every round.
//!
//! Safety is the leader election's argument, applied to the session, plus a fence:
//! - A holder acts on its ranges only until its last successful session renewal's send time
//!   plus the renew deadline (shorter than the lease duration).
//! - Another replica judges a session on its own clock from when it saw the member record
//!   change, and takes a range of a session that ran a whole lease duration without change
//!   only after *fencing* it: an update of the member Lease on the version it saw, clearing
//!   the holder. A renewal that landed meanwhile makes the fence fail; a fence that landed
//!   makes every later renewal fail (they update on the version they listed, and only while
//!   the record is still the session's). So the holder's window closed before the fence, and
//!   no renewal can reopen it.
//! - A member Lease leaves a session only through such a fence, a release (the holder
//!   leaving, after its syncs drained) or a new session, which starts only on a released or
//!   fenced record, on one unchanged for a lease duration (the update is the fence), or on a
//!   missing one missing for a lease duration. So a range naming a session its member Lease
//!   no longer shows is free at once.
//!
//! A range handed over leaves the held set first (new syncs of it stop at once), then the
//! holder waits for the syncs already running on it ([`Shards::begin`]) and releases the Lease
//! (holder cleared, duration 1 s, as the leader election releases), so the next holder starts
//! on its next round instead of waiting out the lease.
//!
//! A range Lease without a session (written by a version before member sessions, which
//! renewed each range) is judged as before: held until its record has not changed for its
//! duration.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, ListParams, PostParams};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::balance::{
    self, ANNOTATION_NAMESPACES, ANNOTATION_NEXT, ANNOTATION_OBJECTS, RangeLease, View,
    format_objects,
};
use super::ring::{Ring, fnv1a64};
use super::watch::Watched;
use crate::cache::compare_resource_versions;
use crate::cache::signal::Signal;
use crate::clock::SharedClock;

/// The label every Lease of one ring carries (its value: the ring's prefix).
pub const LABEL_RING: &str = "rkcm.io/shard-ring";
/// The shard Leases' name prefix of `--rkcm-shards`: ranges `rkcm-shard-<i>`,
/// `rkcm-shard-global`, members `rkcm-shard-member-<hash of the identity>`.
pub const LEASE_PREFIX: &str = "rkcm-shard";

/// `range`, `member` or `global`.
pub const LABEL_ROLE: &str = "rkcm.io/shard-role";

/// The member session a Lease belongs to: on a member Lease, the session its holder runs; on
/// a range's (or the global) Lease, the session of the holder that took it.
pub const ANNOTATION_SESSION: &str = "rkcm.io/shard-session";

/// On a fenced member Lease: the replica that fenced it.
pub const ANNOTATION_FENCED_BY: &str = "rkcm.io/shard-fenced-by";

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

    /// How often a running member session is renewed: every half renew deadline, and at most
    /// every retry period (a failed renewal is retried every round, every retry period). The
    /// held ranges' windows close a renew deadline after the last renewal that succeeded, so
    /// a renewal that fails is retried before they close; other replicas judge a member by its record
    /// changing within a lease duration, which a renewal every half renew deadline does with
    /// room to spare. Renewing every retry period, as a single leader does, made three
    /// replicas write their member Leases (and every replica decode them) five times in ten
    /// seconds instead of two.
    pub fn renew_interval(&self) -> Duration {
        (self.renew_deadline / 2).max(self.retry_period)
    }

    /// This replica's member Lease.
    pub fn member_lease(&self) -> String {
        self.member_lease_of(&self.identity)
    }

    /// The member Lease of replica `identity`.
    pub fn member_lease_of(&self, identity: &str) -> String {
        member_lease_name(&self.prefix, identity)
    }
}

/// The member Lease of replica `identity` in the ring of Lease prefix `prefix`.
pub fn member_lease_name(prefix: &str, identity: &str) -> String {
    format!("{prefix}-member-{:016x}", fnv1a64(identity))
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
    /// The cached objects of each cached range, as the sharded informer factory last counted
    /// them: published on the member Lease, the ring balances by them.
    objects: Mutex<BTreeMap<u32, u64>>,
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
            objects: Mutex::new(BTreeMap::new()),
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

    /// The cached objects of each cached range (the sharded informer factory counts them
    /// each lease duration).
    pub fn set_objects(&self, objects: BTreeMap<u32, u64>) {
        *self.objects.lock() = objects;
    }

    /// The objects of each held range as this replica publishes them: counted where its
    /// caches cover the range, else the count seen on the ring when it took the range; a
    /// range counted by neither is left out (the balance estimates it by its namespaces).
    fn objects_of_held(&self, known: &HashMap<u32, u64>) -> BTreeMap<u32, u64> {
        let counted = self.objects.lock().clone();
        ranges_of(&self.held.get())
            .into_iter()
            .filter_map(|r| Some((r, counted.get(&r).or_else(|| known.get(&r)).copied()?)))
            .collect()
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

    /// The rounds the holder task has finished so far.
    pub fn rounds_done(&self) -> u64 {
        self.rounds.get()
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

    /// Waits until the held ranges change from `seen`, or the cached set lacks one of them (a
    /// range left the held set and came back before the caches followed: it must be cached
    /// again).
    pub async fn moved_from(&self, seen: &BTreeSet<u32>) {
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if self.held_ranges() != *seen || !seen.is_subset(&self.cached.lock()) {
                return;
            }
            moved.await;
        }
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

    /// Holds ranges until `cancel`, then drains every held range and releases the member
    /// Lease, which frees them all. The first round only starts the replica's member session
    /// and takes nothing.
    pub async fn run(self: Arc<Self>, client: kube::Client, cancel: CancellationToken) {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let api: Api<Lease> = Api::namespaced(client, &self.cfg.namespace);
        let mut round = Round::default();
        // The ring's Leases come from a watch; it stops with this task, also when the task
        // is dropped unfinished.
        let watched = Arc::new(Mutex::new(Watched::default()));
        let stop_watch = CancellationToken::new();
        let _stop_watch = stop_watch.clone().drop_guard();
        tokio::spawn(super::watch::run(
            api.clone(),
            self.ring_selector(),
            watched.clone(),
            stop_watch,
        ));
        loop {
            self.round(&api, &mut round, &watched).await;
            if round.count == 1 && !round.namespaces_asked {
                round.namespaces_asked = true;
                self.list_namespaces(&namespaces, &mut round).await;
            }
            self.rounds.set(self.rounds.get() + 1);
            let next = round.next_round(&self.cfg, self.clock.now());
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = tokio::time::sleep_until(next) => {}
            }
        }
        let held: Vec<u32> = self.held.get().keys().copied().collect();
        self.set_held(Held::new());
        self.drain(&held, self.cfg.renew_deadline).await;
        // One write frees every range: a range naming a session its member Lease no longer
        // shows is free at once (`Round::claim`), and the member Lease keeps the counts it
        // published for the next holders' balance. Releasing each range Lease too cost one
        // write per range (64 for a ring of 64 stopping) and gave the takers nothing more.
        self.release(&api, &self.cfg.member_lease(), None, None, &mut round)
            .await;
    }

    /// After the first round (which only announces this replica, before any take): where
    /// the ring has ranges nobody has counted (its first start), lists the namespaces once,
    /// so the first takes split them instead of splitting the ranges by number
    /// ([`balance::estimates`]). A replica that may not list them balances by counts alone.
    async fn list_namespaces(&self, api: &Api<Namespace>, round: &mut Round) {
        let now = self.clock.now();
        let (_, leases) = round.view(&self.cfg, now, &self.held.get());
        if !balance::any_uncounted(self.cfg.ring.len(), &leases) {
            return;
        }
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                round.namespaces = namespaces_per_range(
                    &self.cfg.ring,
                    list.items.iter().filter_map(|n| n.metadata.name.as_deref()),
                );
                tracing::info!(
                    namespaces = list.items.len(),
                    ranges = round.namespaces.len(),
                    "listed the namespaces for the first takes of a ring not counted yet"
                );
            }
            Err(error) => tracing::warn!(
                %error,
                "listing the namespaces failed: the first takes split the shard ranges by number"
            ),
        }
    }

    /// The label selector of the ring's Leases.
    fn ring_selector(&self) -> String {
        format!("{LABEL_RING}={}", self.cfg.prefix)
    }

    /// Reads the ring into `round`: what the watch shows, or a list while the watch does not
    /// run. False when the list failed (the held ranges have expired then).
    async fn read_ring(
        &self,
        api: &Api<Lease>,
        round: &mut Round,
        watched: &Mutex<Watched>,
    ) -> bool {
        let snapshot = watched.lock().snapshot();
        if let Some(snapshot) = snapshot {
            let now = self.clock.now();
            round.observe(
                &self.cfg,
                snapshot.leases,
                Source::Watch(snapshot.newest.as_deref()),
                now,
            );
            return true;
        }
        let params = ListParams::default().labels(&self.ring_selector());
        let listed = api.list(&params).await;
        // Another replica's session is judged from when its record was seen, which is when
        // the answer came: a record sent late may carry a renewal made after the request left
        // (timing it from the request would make a live session look expired).
        let now = self.clock.now();
        match listed {
            Ok(list) => {
                let leases = list.items.into_iter().map(Arc::new).collect();
                round.observe(&self.cfg, leases, Source::List, now);
                true
            }
            Err(error) => {
                tracing::debug!(%error, "listing the shard leases failed");
                self.expire(now);
                false
            }
        }
    }

    /// One round: read the ring's Leases (as the watch shows them, or a list while the watch
    /// does not run), keep the member session, take, hand over.
    async fn round(&self, api: &Api<Lease>, round: &mut Round, watched: &Mutex<Watched>) {
        if !self.read_ring(api, round, watched).await {
            return;
        }
        self.keep_session(api, round).await;
        let mut held = self.held.get();
        match round.until {
            Some(until) => held.values_mut().for_each(|u| *u = until),
            None => held.clear(),
        }
        // A range whose Lease no longer names this session (released or taken by hand; a
        // replica takes one only after this session ended) closes now.
        let now = self.clock.now();
        held.retain(|range, until| {
            *until > now && round.names_session(&self.cfg.range_lease(*range), &self.cfg)
        });
        self.set_held(held.clone());
        round.known.retain(|range, _| held.contains_key(range));

        round.count += 1;
        if round.count == 1 || round.until.is_none_or(|until| until <= now) {
            // The first round only announces this replica: replicas that start together
            // (a rollout, a scale-up) then see each other before taking ranges, and take
            // their fair shares of the free ones instead of the first taking everything and
            // handing most of it over again. Without an open session nothing is taken.
            return;
        }
        let (members, leases) = round.view(&self.cfg, now, &held);
        // The namespaces a member published (the first by identity), else this replica's own
        // list: its first takes may come before any member Lease carries one.
        let namespaces = round
            .ring_namespaces(now)
            .unwrap_or_else(|| round.namespaces.clone());
        let plan = balance::plan(&View {
            ranges: self.cfg.ring.len(),
            me: &self.cfg.identity,
            members: &members,
            leases: &leases,
            namespaces: &namespaces,
        });
        // Taken ranges join the held set together, handed-over ones leave it together: each
        // change of the set relists every cache.
        let mut took = Vec::new();
        for range in plan.take {
            if self.acquire(api, range, round).await
                && let Some(until) = round.until
            {
                held.insert(range, until);
                took.push(range);
                if let Some(n) = leases
                    .iter()
                    .find(|l| l.range == range)
                    .and_then(|l| l.objects)
                {
                    round.known.insert(range, n);
                }
            }
        }
        if !took.is_empty() {
            self.set_held(held.clone());
            super::metrics::moved("took", took.len());
            tracing::info!(ranges = ?took, identity = %self.cfg.identity, "took shard ranges");
        }
        let global = self.cfg.range_lease(GLOBAL);
        if !held.contains_key(&GLOBAL)
            && round.claim(&self.cfg, &global, self.clock.now(), &held) != Claim::Held
            && self.acquire(api, GLOBAL, round).await
            && let Some(until) = round.until
        {
            held.insert(GLOBAL, until);
            self.set_held(held.clone());
            tracing::info!(identity = %self.cfg.identity, "took the global shard lease");
        }
        // Ranges this session took but does not hold (a release or a take that failed): free
        // them, or nobody else ever would while the session runs. Nothing acts on them.
        let stray: Vec<u32> = (0..self.cfg.ring.len())
            .filter(|r| {
                !held.contains_key(r) && round.names_session(&self.cfg.range_lease(*r), &self.cfg)
            })
            .collect();
        for range in stray {
            self.release(api, &self.cfg.range_lease(range), None, None, round)
                .await;
        }
        if !plan.hand_over.is_empty() {
            let objects = self.objects_of_held(&round.known);
            for range in &plan.hand_over {
                held.remove(range);
            }
            self.set_held(held.clone());
            self.drain(&plan.hand_over, self.cfg.renew_deadline).await;
            for range in &plan.hand_over {
                let name = self.cfg.range_lease(*range);
                let next = plan.next.get(range).map(String::as_str);
                self.release(api, &name, objects.get(range).copied(), next, round)
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

    /// Renews this replica's member session, or starts one where the member Lease allows it.
    ///
    /// A renewal is an update on the version listed this round, sent only while that record
    /// is still this session's: it never overwrites a fence, and a fence landing after the
    /// list makes it fail. A renewal that succeeds opens the window of every held range until
    /// its send time plus the renew deadline. The session ends when the member Lease shows
    /// anything else (fenced by a taker, released, deleted): every range goes at once.
    ///
    /// A new session starts on a member Lease that is missing, released or fenced (holder
    /// empty), or whose record nobody changed for a whole lease duration (a previous process
    /// of this identity: the update on the version seen is its fence).
    async fn keep_session(&self, api: &Api<Lease>, round: &mut Round) {
        let name = self.cfg.member_lease();
        if let Some(session) = round.session.clone() {
            if round.names_session(&name, &self.cfg) {
                let due = round
                    .renewed
                    .is_none_or(|at| at + self.cfg.renew_interval() <= self.clock.now());
                if !due {
                    return;
                }
                let mut spec = round.spec(&name).unwrap_or_default();
                spec.renew_time = Some(MicroTime(self.clock.wall()));
                let sent = self.clock.now();
                if self
                    .write(api, &name, "member", spec, &session, round)
                    .await
                {
                    round.until = Some(sent + self.cfg.renew_deadline);
                    round.renewed = Some(sent);
                }
                return;
            }
            tracing::info!(identity = %self.cfg.identity, session = %session, "the shard member session ended (its Lease was fenced, released or replaced)");
            round.session = None;
            round.until = None;
            round.renewed = None;
        }
        let now = self.clock.now();
        let may_start = match round.leases.get(&name) {
            // Missing: at once unless some range Lease names this identity (then a process
            // of it may have had a session there until the Lease went, so only after a
            // lease duration of it missing, as others judge it).
            None => round
                .missing
                .get(&name)
                .is_none_or(|since| *since + self.cfg.lease_duration <= now),
            Some(seen) => {
                let spec = seen.lease.spec.clone().unwrap_or_default();
                spec.holder_identity
                    .as_deref()
                    .unwrap_or_default()
                    .is_empty()
                    || seen.at + self.cfg.lease_duration <= now
            }
        };
        if !may_start {
            return;
        }
        // The member Lease's transitions (counting this session) and the wall clock: unique
        // per identity, also where two sessions start in one microsecond of a frozen clock.
        let spec = self.spec(round.spec(&name), false);
        let session = format!(
            "{}-{}",
            spec.lease_transitions.unwrap_or(0),
            self.clock.wall().as_microsecond()
        );
        let sent = self.clock.now();
        if self
            .write(api, &name, "member", spec, &session, round)
            .await
        {
            tracing::info!(identity = %self.cfg.identity, session = %session, "started a shard member session");
            round.session = Some(session);
            round.until = Some(sent + self.cfg.renew_deadline);
            round.renewed = Some(sent);
        }
    }

    /// Takes a free range: fences the previous holder's member Lease first when its session
    /// expired without ending, then writes the range's Lease for this session (a create when
    /// it is missing, else an update on the version read: a conflict means someone else was
    /// faster).
    async fn acquire(&self, api: &Api<Lease>, range: u32, round: &mut Round) -> bool {
        let Some(session) = round.session.clone() else {
            return false;
        };
        let name = self.cfg.range_lease(range);
        let now = self.clock.now();
        match round.claim(&self.cfg, &name, now, &self.held.get()) {
            Claim::Free => {}
            Claim::Fence(member) => {
                // The mutant takes the range without fencing the expired session: a holder
                // whose renewals were only late renews after the take and acts on.
                if !crate::mutants::on("shard-take-without-fence")
                    && !self.fence(api, &member, round).await
                {
                    // Another survivor may have fenced the session first: then the range is
                    // free now, and waiting for the next round's list would only cost a
                    // retry period. A renewal that landed keeps it held.
                    self.reread(api, &member, round).await;
                    if round.claim(&self.cfg, &name, self.clock.now(), &self.held.get())
                        != Claim::Free
                    {
                        return false;
                    }
                }
            }
            Claim::Held => return false,
        }
        let spec = self.spec(round.spec(&name), false);
        self.write(api, &name, role_of(range), spec, &session, round)
            .await
    }

    /// Ends another replica's expired session: an update of its member Lease on the version
    /// this replica saw unchanged for a lease duration, clearing the holder. It fails if the
    /// session renewed meanwhile; once it succeeds, no renewal of that session can.
    async fn fence(&self, api: &Api<Lease>, member: &str, round: &mut Round) -> bool {
        let Some(seen) = round.leases.get(member) else {
            return false;
        };
        let mut lease = Lease::clone(&seen.lease);
        let Some(spec) = lease.spec.as_mut() else {
            return false;
        };
        let wall = MicroTime(self.clock.wall());
        spec.holder_identity = Some(String::new());
        spec.renew_time = Some(wall);
        lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION_FENCED_BY.to_owned(), self.cfg.identity.clone());
        match api.replace(member, &PostParams::default(), &lease).await {
            Ok(lease) => {
                tracing::info!(lease = member, identity = %self.cfg.identity, "fenced an expired shard member session");
                round.observe_one(lease, self.clock.now());
                true
            }
            Err(error) => {
                tracing::debug!(lease = member, %error, "fencing a shard member session failed");
                false
            }
        }
    }

    /// Reads Lease `name` again (after a write of it failed), so the rest of the round
    /// judges what it shows now.
    async fn reread(&self, api: &Api<Lease>, name: &str, round: &mut Round) {
        match api.get_opt(name).await {
            Ok(Some(lease)) => round.observe_one(lease, self.clock.now()),
            Ok(None) => {}
            Err(error) => {
                tracing::debug!(lease = name, %error, "reading a shard lease again failed");
            }
        }
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

    /// Creates or updates Lease `name` with `spec`, for member session `session`; keeps
    /// what the server answered.
    async fn write(
        &self,
        api: &Api<Lease>,
        name: &str,
        role: &str,
        spec: LeaseSpec,
        session: &str,
        round: &mut Round,
    ) -> bool {
        // A member Lease carries the objects of the ranges this replica holds, and the
        // namespaces it listed (if it did).
        let objects =
            (role == "member").then(|| format_objects(&self.objects_of_held(&round.known)));
        let namespaces = (role == "member" && !round.namespaces.is_empty())
            .then(|| format_objects(&round.namespaces));
        let result = match round.leases.get(name) {
            Some(seen) => {
                let mut lease = Lease::clone(&seen.lease);
                lease.spec = Some(spec);
                let annotations = lease
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default);
                annotations.insert(ANNOTATION_SESSION.to_owned(), session.to_owned());
                annotations.remove(ANNOTATION_FENCED_BY);
                annotations.remove(ANNOTATION_NEXT);
                if let Some(objects) = &objects {
                    annotations.insert(ANNOTATION_OBJECTS.to_owned(), objects.clone());
                }
                if let Some(namespaces) = &namespaces {
                    annotations.insert(ANNOTATION_NAMESPACES.to_owned(), namespaces.clone());
                }
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
                        annotations: Some(
                            [(ANNOTATION_SESSION.to_owned(), session.to_owned())]
                                .into_iter()
                                .chain(objects.map(|o| (ANNOTATION_OBJECTS.to_owned(), o)))
                                .chain(namespaces.map(|n| (ANNOTATION_NAMESPACES.to_owned(), n)))
                                .collect(),
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
                if crate::error::is_conflict(&error) {
                    // Written meanwhile (or created): the next try must start from what
                    // the server has, not from a view the watch may not have updated yet.
                    self.reread(api, name, round).await;
                }
                false
            }
        }
    }

    /// Clears the holder of Lease `name` if it still names this replica's running session
    /// (duration 1 s). Never another session's, even of this identity: a previous process's
    /// session is over only once it lapsed or was fenced. A range's Lease keeps `objects`,
    /// the count of its objects, for the balance of the next holder's choice, and names
    /// `next`, the member a move hands it to.
    async fn release(
        &self,
        api: &Api<Lease>,
        name: &str,
        objects: Option<u64>,
        next: Option<&str>,
        round: &mut Round,
    ) {
        if !round.names_session(name, &self.cfg) {
            return;
        }
        let Some(seen) = round.leases.get(name) else {
            return;
        };
        let mut lease = Lease::clone(&seen.lease);
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        let wall = MicroTime(self.clock.wall());
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(wall.clone());
        spec.acquire_time = Some(wall);
        let annotations = lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        if let Some(objects) = objects {
            annotations.insert(ANNOTATION_OBJECTS.to_owned(), objects.to_string());
        }
        match next {
            Some(next) => annotations.insert(ANNOTATION_NEXT.to_owned(), next.to_owned()),
            None => annotations.remove(ANNOTATION_NEXT),
        };
        match api.replace(name, &PostParams::default(), &lease).await {
            Ok(lease) => round.observe_one(lease, self.clock.now()),
            Err(error) => {
                tracing::debug!(lease = name, %error, "releasing a shard lease failed");
                if crate::error::is_conflict(&error) {
                    self.reread(api, name, round).await;
                }
            }
        }
    }
}

/// How many of `names` fall into each range of `ring`.
fn namespaces_per_range<'a>(
    ring: &Ring,
    names: impl Iterator<Item = &'a str>,
) -> BTreeMap<u32, u64> {
    let mut per = BTreeMap::new();
    for name in names {
        *per.entry(ring.range_of(name)).or_default() += 1;
    }
    per
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
    lease: Arc<Lease>,
    at: Instant,
}

impl Seen {
    fn holder(&self) -> &str {
        self.lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .unwrap_or_default()
    }

    fn session(&self) -> Option<&str> {
        self.lease
            .metadata
            .annotations
            .as_ref()?
            .get(ANNOTATION_SESSION)
            .map(String::as_str)
    }

    /// Its resourceVersion.
    fn version(&self) -> Option<&str> {
        self.lease.metadata.resource_version.as_deref()
    }

    /// Its role label: `range`, `member` or `global`.
    fn role(&self) -> Option<&str> {
        self.lease
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_ROLE))
            .map(String::as_str)
    }

    /// Whether the record has not changed for the duration it carries.
    fn lapsed(&self, now: Instant) -> bool {
        let secs = self
            .lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(0);
        self.at + Duration::from_secs(secs) <= now
    }
}

/// What taking a range's (or the global) Lease needs, as this replica sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Claim {
    /// Held by a session that runs (this replica's own included), or by an older replica
    /// renewing the range Lease itself whose renewals have not lapsed.
    Held,
    /// Released, missing, named by a session that ended (its member Lease fenced, released,
    /// replaced by a new session, or missing for a lease duration), or this session's own
    /// but not in its held set (a take whose answer was lost): written at once.
    Free,
    /// Named by a session whose member Lease nobody changed for a lease duration: fence that
    /// member Lease (this name) first.
    Fence(String),
}

/// What the holder knows of the ring's Leases between rounds.
#[derive(Default)]
struct Round {
    leases: HashMap<String, Seen>,
    /// Member Leases that range Leases name but the list did not hold, since when.
    missing: HashMap<String, Instant>,
    /// Rounds begun.
    count: u64,
    /// This replica's member session (the member Lease's session annotation) while one runs.
    session: Option<String>,
    /// Where the windows of the held ranges close: the last successful renewal's send time
    /// plus the renew deadline. `None` without a session.
    until: Option<Instant>,
    /// When the last successful write of the member Lease was sent (the session's start or a
    /// renewal). `None` without a session.
    renewed: Option<Instant>,
    /// The objects of each held range as the ring showed them when it was taken: published
    /// until the caches have counted the range themselves.
    known: HashMap<u32, u64>,
    /// The namespaces of each range, listed once when the ring had ranges nobody counted
    /// (empty otherwise, or when the list failed): the balance's estimate for those ranges.
    namespaces: BTreeMap<u32, u64>,
    /// Whether the namespaces were asked for (once a replica's life).
    namespaces_asked: bool,
}

/// Where a round's view of the ring came from.
#[derive(Debug, Clone, Copy)]
enum Source<'a> {
    /// A list: every Lease there is, as of the answer.
    List,
    /// The watch, which may not have delivered this replica's latest writes yet: the newest
    /// resourceVersion it applied.
    Watch(Option<&'a str>),
}

/// Whether resourceVersion `a` is newer than `b` (`b` missing: `a` is a version at all).
fn newer_version(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => compare_resource_versions(a, b) == Some(Ordering::Greater),
        (Some(a), None) => compare_resource_versions(a, a).is_some(),
        (None, _) => false,
    }
}

impl Round {
    fn observe(
        &mut self,
        cfg: &ShardConfig,
        leases: Vec<Arc<Lease>>,
        source: Source,
        now: Instant,
    ) {
        let names: BTreeSet<String> = leases
            .iter()
            .filter_map(|l| l.metadata.name.clone())
            .collect();
        match source {
            Source::List => self.leases.retain(|name, _| names.contains(name)),
            // A Lease the watch does not show is gone, unless this replica wrote it at a
            // version the watch has not reached.
            Source::Watch(newest) => self
                .leases
                .retain(|name, seen| names.contains(name) || newer_version(seen.version(), newest)),
        }
        for lease in leases {
            if let Source::Watch(_) = source
                && let Some(seen) = lease
                    .metadata
                    .name
                    .as_ref()
                    .and_then(|n| self.leases.get(n))
                && newer_version(seen.version(), lease.metadata.resource_version.as_deref())
            {
                // Written by this replica since: the watch has not delivered it yet.
                continue;
            }
            self.observe_one(lease, now);
        }
        let named: BTreeSet<String> = self
            .leases
            .values()
            .filter(|s| s.session().is_some() && !s.holder().is_empty())
            .map(|s| cfg.member_lease_of(s.holder()))
            .filter(|m| !self.leases.contains_key(m))
            .collect();
        self.missing.retain(|m, _| named.contains(m));
        for m in named {
            self.missing.entry(m).or_insert(now);
        }
    }

    /// Keeps the observation time while the record is unchanged (the leader election's
    /// `observedTime`). The managed fields are dropped: nothing here reads them, and an
    /// update that carries none keeps the server's.
    fn observe_one(&mut self, lease: impl Into<Arc<Lease>>, now: Instant) {
        let mut lease = lease.into();
        if lease.metadata.managed_fields.is_some() {
            Arc::make_mut(&mut lease).metadata.managed_fields = None;
        }
        let Some(name) = lease.metadata.name.clone() else {
            return;
        };
        let at = match self.leases.get(&name) {
            Some(seen)
                if seen.lease.spec == lease.spec
                    && seen.lease.metadata.annotations == lease.metadata.annotations =>
            {
                seen.at
            }
            _ => now,
        };
        self.leases.insert(name, Seen { lease, at });
    }

    /// When the round after one ending at `now` runs: a retry period later, or sooner where
    /// another member's session lapses before that (its ranges are taken when it lapses, not
    /// up to a retry period after) or where this replica's session is due for renewal. Never
    /// at once: a renewal that failed is retried a retry period later.
    fn next_round(&self, cfg: &ShardConfig, now: Instant) -> Instant {
        let mut next = now + cfg.retry_period;
        if let Some(lapse) = self.next_lapse(cfg, now) {
            next = next.min(lapse);
        }
        if let Some(due) = self.renewed.map(|at| at + cfg.renew_interval())
            && due > now
        {
            next = next.min(due);
        }
        next
    }

    /// The first moment after `now` at which the session of another member that holds a
    /// range (or the global Lease) will have run a lease duration unchanged, as this replica
    /// saw it: where its ranges may be taken.
    fn next_lapse(&self, cfg: &ShardConfig, now: Instant) -> Option<Instant> {
        self.leases
            .values()
            .filter(|s| !s.holder().is_empty() && s.holder() != cfg.identity)
            .filter(|s| s.session().is_some() && s.role() != Some("member"))
            .filter_map(|range| {
                let member = self.leases.get(&cfg.member_lease_of(range.holder()))?;
                (member.holder() == range.holder() && member.session() == range.session())
                    .then_some(member.at + cfg.lease_duration)
            })
            .filter(|lapse| *lapse > now)
            .min()
    }

    fn spec(&self, name: &str) -> Option<LeaseSpec> {
        self.leases.get(name).and_then(|s| s.lease.spec.clone())
    }

    /// Whether Lease `name` names this replica's running session.
    fn names_session(&self, name: &str, cfg: &ShardConfig) -> bool {
        let Some(session) = &self.session else {
            return false;
        };
        self.leases
            .get(name)
            .is_some_and(|s| s.holder() == cfg.identity && s.session() == Some(session))
    }

    /// What taking Lease `name` (a range's or the global one) needs at `now`.
    fn claim(&self, cfg: &ShardConfig, name: &str, now: Instant, held: &Held) -> Claim {
        let Some(seen) = self.leases.get(name) else {
            return Claim::Free;
        };
        let holder = seen.holder();
        if holder.is_empty() {
            return Claim::Free;
        }
        let Some(session) = seen.session() else {
            // A record renewed by its holder (a replica of a version before member sessions).
            return if seen.lapsed(now) {
                Claim::Free
            } else {
                Claim::Held
            };
        };
        if holder == cfg.identity && self.session.as_deref() == Some(session) {
            let range = match name.strip_prefix(&format!("{}-", cfg.prefix)) {
                Some("global") => Some(GLOBAL),
                Some(i) => i.parse::<u32>().ok(),
                None => None,
            };
            return if range.is_some_and(|r| held.contains_key(&r)) {
                Claim::Held
            } else {
                Claim::Free
            };
        }
        let member = cfg.member_lease_of(holder);
        match self.leases.get(&member) {
            None => {
                let since = self.missing.get(&member).copied().unwrap_or(now);
                if since + cfg.lease_duration <= now {
                    Claim::Free
                } else {
                    Claim::Held
                }
            }
            Some(m) if m.holder() == holder && m.session() == Some(session) => {
                if m.at + cfg.lease_duration <= now {
                    Claim::Fence(member)
                } else {
                    Claim::Held
                }
            }
            // Fenced, released or a newer session: a member Lease leaves a session only
            // through a fence or a release (a new session starts on a record whose holder
            // is empty, or on one unchanged for a lease duration, which fences it). Only if
            // that record is newer than the range's, though: the view mixes the watch's
            // records with Leases read again after a conflict, and a range read after its
            // holder's member Lease was last seen may name a session that member Lease
            // started since (a consistent list never shows that: a session's member Lease
            // is written before any range it takes).
            Some(m) if newer_version(m.version(), seen.version()) => Claim::Free,
            Some(_) => Claim::Held,
        }
    }

    /// The namespaces per range the ring weighs by ([`balance::ring_namespaces`] over the
    /// live member Leases).
    fn ring_namespaces(&self, now: Instant) -> Option<BTreeMap<u32, u64>> {
        balance::ring_namespaces(
            self.leases
                .values()
                .filter(|seen| {
                    seen.role() == Some("member") && !seen.lapsed(now) && !seen.holder().is_empty()
                })
                .map(|seen| (seen.holder(), &*seen.lease)),
        )
    }

    /// The live members and the ranges' Leases, judged at `now`.
    fn view(&self, cfg: &ShardConfig, now: Instant, held: &Held) -> (Vec<String>, Vec<RangeLease>) {
        let mut members = Vec::new();
        let mut ranges = Vec::new();
        // Each holder's published counts, parsed once for all its ranges.
        let mut counts: HashMap<&str, Option<BTreeMap<u32, u64>>> = HashMap::new();
        let prefix = format!("{}-", cfg.prefix);
        for (name, seen) in &self.leases {
            if seen.role() == Some("member") {
                if !seen.lapsed(now) && !seen.holder().is_empty() {
                    members.push(seen.holder().to_owned());
                }
            } else if let Some(range) = name
                .strip_prefix(&prefix)
                .and_then(|i| i.parse::<u32>().ok())
            {
                let valid = self.claim(cfg, name, now, held) == Claim::Held;
                ranges.push(RangeLease {
                    range,
                    holder: if valid {
                        seen.holder().to_owned()
                    } else {
                        String::new()
                    },
                    valid,
                    next: if seen.holder().is_empty() {
                        balance::lease_next(&seen.lease)
                    } else {
                        String::new()
                    },
                    objects: balance::range_objects(
                        range,
                        &seen.lease,
                        counts
                            .entry(seen.holder())
                            .or_insert_with(|| {
                                (!seen.holder().is_empty())
                                    .then(|| self.leases.get(&cfg.member_lease_of(seen.holder())))
                                    .flatten()
                                    .and_then(|m| balance::member_objects(&m.lease))
                            })
                            .as_ref(),
                    ),
                });
            }
        }
        (members, ranges)
    }
}

#[cfg(test)]
mod tests;
