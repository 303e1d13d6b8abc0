//! The stale-cache guard: a sync of an owner waits until the informer caches reflect every
//! write the controller made for that owner (children created or adopted, its own status), so
//! no decision is taken on a cache that does not yet show the controller's own last step.
//!
//! Mirrors upstream `pkg/controller/util/consistency/consistency.go` (the consistency store
//! behind the `StaleControllerConsistency*` gates; the ReplicaSet controller's gate
//! `StaleControllerConsistencyReplicaSet` is beta and on since v1.36). Generic over the owner
//! kind: records are keyed by the owner's `namespace/name` and UID and by the group-resource
//! written, so a StatefulSet, DaemonSet or Job controller keeps one store of its own.
//! Expectations already prevent duplicate creates and deletes; the guard removes the rest of
//! the churn a lagging cache causes (repeated adoption patches, status writes computed from an
//! outdated child list).
//!
//! A hold is bounded ([`MAX_HOLD`]): a cache can fail to reach a written version for good (the
//! written object was deleted while the watch was down, so no event of it ever comes, and no
//! other object of the resource changes), and a key held until its retries run out would never
//! sync again. Past the bound the sync goes through on the cache as it is, logged and counted
//! in `rkcm_stale_cache_guard_released_total`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use prometheus::{IntCounterVec, Opts};
use tokio::time::Instant;

use crate::cache::{Informable, Informer, Store, compare_resource_versions};
use crate::metrics::register;

/// An API group and resource, as metric labels name them (`""`/`pods`, `apps`/`replicasets`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        Self {
            group: K::group(&()).into_owned(),
            resource: K::plural(&()).into_owned(),
        }
    }
}

impl std::fmt::Display for GroupResource {
    /// Upstream's `schema.GroupResource.String()`: `resource.group`, or `resource` for core.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// A sync that must wait: the cache of `resource` has not yet seen the controller's write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "read version: {observed} is not as new as written version: {written} for group resource {resource}"
)]
pub struct Stale {
    pub resource: GroupResource,
    pub written: String,
    pub observed: String,
}

/// The longest the guard holds one owner's syncs back, from the first sync it held.
///
/// Why a time and this one: a live watch delivers the controller's own write within a second
/// even under load, and a watch that was cut comes back within its retry backoff (at most 4 s)
/// and relists, so a hold longer than a few seconds means the cache will not reach the written
/// version by itself (the written object vanished before the cache saw it, and nothing else of
/// the resource moved). A held sync is retried with its queue's backoff (5 ms doubling): the
/// retries reach 30 s after about 13 of them, before the Deployment queue's limit of 15 drops
/// the key, and the Job queue's (1 s doubling to 60 s) within a handful. A count of holds would
/// depend on how many unrelated events re-queued the key; the time does not.
pub const MAX_HOLD: Duration = Duration::from_secs(30);

/// A sync the guard let through although a cache had not caught up: it had held the owner's
/// syncs for `held` (at least [`MAX_HOLD`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub stale: Stale,
    pub held: Duration,
}

/// What the controller wrote for one owner (identified by UID, so a re-created owner of the
/// same name starts clean): the newest resourceVersion per group-resource, and since when the
/// guard has held the owner's syncs back (`None`: not held yet).
#[derive(Debug)]
struct Record {
    owner_uid: String,
    versions: BTreeMap<GroupResource, String>,
    held_since: Option<Instant>,
}

/// A sync the guard lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// Every cache shows what the controller wrote (or nothing was recorded).
    CaughtUp,
    /// A cache is still behind, but the hold has reached [`MAX_HOLD`].
    Released(Released),
}

/// The first resource whose cache has not seen the version written (see
/// [`ConsistencyStore::ensure_ready_at`] for what holds a sync and what does not).
fn first_lagging(
    versions: &BTreeMap<GroupResource, String>,
    observed: impl Fn(&GroupResource) -> Option<String>,
) -> Option<Stale> {
    versions.iter().find_map(|(resource, written)| {
        let seen = observed(resource)?;
        let behind = seen.is_empty()
            || compare_resource_versions(written, &seen) == Some(std::cmp::Ordering::Greater);
        behind.then(|| Stale {
            resource: resource.clone(),
            written: written.clone(),
            observed: seen,
        })
    })
}

/// Written resourceVersions per owner key (`namespace/name`).
#[derive(Debug, Default)]
pub struct ConsistencyStore {
    records: Mutex<HashMap<String, Record>>,
}

impl ConsistencyStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        // The map is consistent after every statement; a panic elsewhere cannot tear it.
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that the controller wrote `resource` at `rv` on behalf of `owner`. Keeps the
    /// newest version per resource; an incomparable one replaces the record's (upstream).
    pub fn wrote_at(&self, owner: &str, owner_uid: &str, resource: GroupResource, rv: &str) {
        if rv.is_empty() {
            return;
        }
        let mut records = self.records();
        let record = records.entry(owner.to_owned()).or_insert_with(|| Record {
            owner_uid: owner_uid.to_owned(),
            versions: BTreeMap::new(),
            held_since: None,
        });
        if record.owner_uid != owner_uid {
            *record = Record {
                owner_uid: owner_uid.to_owned(),
                versions: BTreeMap::new(),
                held_since: None,
            };
        }
        let keep = record.versions.get(&resource).is_some_and(|known| {
            compare_resource_versions(known, rv).is_some_and(std::cmp::Ordering::is_ge)
        });
        if !keep {
            record.versions.insert(resource, rv.to_owned());
        }
    }

    /// Forgets `owner`: only the record of `owner_uid` when given, any record otherwise.
    pub fn clear(&self, owner: &str, owner_uid: Option<&str>) {
        let mut records = self.records();
        if records
            .get(owner)
            .is_some_and(|r| owner_uid.is_none_or(|uid| uid == r.owner_uid))
        {
            records.remove(owner);
        }
    }

    /// `Ok` when every cache has seen what was written for `owner` (and then forgets the
    /// record); the first lagging resource otherwise. `observed` gives a cache's last synced
    /// resourceVersion: `None` for a resource no cache was given for, and a pair of versions
    /// that cannot be compared, do not hold the sync up (upstream fails open); an empty one
    /// (a synced cache that has applied no object and no list or bookmark version of the
    /// resource yet, so not the write either) does.
    ///
    /// `now` bounds the hold: the first lagging answer starts the owner's hold; once it has
    /// lasted [`MAX_HOLD`] the sync goes through ([`Ready::Released`]) and the record is
    /// forgotten, as if caught up.
    pub fn ensure_ready_at(
        &self,
        owner: &str,
        observed: impl Fn(&GroupResource) -> Option<String>,
        now: Instant,
    ) -> Result<Ready, Stale> {
        let mut records = self.records();
        let Some(record) = records.get_mut(owner) else {
            return Ok(Ready::CaughtUp);
        };
        let Some(stale) = first_lagging(&record.versions, observed) else {
            records.remove(owner);
            return Ok(Ready::CaughtUp);
        };
        let since = *record.held_since.get_or_insert(now);
        let held = now.saturating_duration_since(since);
        if held < MAX_HOLD {
            return Err(stale);
        }
        records.remove(owner);
        Ok(Ready::Released(Released { stale, held }))
    }

    /// [`ConsistencyStore::ensure_ready_at`] now (tokio's clock).
    pub fn ensure_ready(
        &self,
        owner: &str,
        observed: impl Fn(&GroupResource) -> Option<String>,
    ) -> Result<Ready, Stale> {
        self.ensure_ready_at(owner, observed, Instant::now())
    }

    /// Owners with writes the caches have not yet been seen to reflect.
    pub fn len(&self) -> usize {
        self.records().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A cache the guard checks: its group-resource and the newest resourceVersion its objects
/// of a namespace reflect (a sharded cache's streams each have their own).
pub trait ObservedCache: Sync {
    fn group_resource(&self) -> GroupResource;
    fn last_synced_in(&self, namespace: &str) -> Option<String>;
}

impl<K: Informable> ObservedCache for Informer<K> {
    fn group_resource(&self) -> GroupResource {
        GroupResource::of::<K>()
    }

    fn last_synced_in(&self, namespace: &str) -> Option<String> {
        self.store().last_synced_resource_version_in(namespace)
    }
}

impl<K: Informable> ObservedCache for Store<K> {
    fn group_resource(&self) -> GroupResource {
        GroupResource::of::<K>()
    }

    fn last_synced_in(&self, namespace: &str) -> Option<String> {
        self.last_synced_resource_version_in(namespace)
    }
}

/// Labels of every controller's `<subsystem>_stale_sync_skips_total` counter.
const SKIP_LABELS: &[&str] = &["group", "resource"];

/// The counter `<subsystem>_stale_sync_skips_total{group,resource}`, registered once per
/// subsystem in the process registry. `None` if it could not be built (a name that is not a
/// valid metric name); losing a metric never stops a controller.
pub fn stale_sync_skips(subsystem: &'static str, help: &'static str) -> Option<IntCounterVec> {
    static COUNTERS: OnceLock<Mutex<HashMap<&'static str, IntCounterVec>>> = OnceLock::new();
    let mut counters = COUNTERS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(counter) = counters.get(subsystem) {
        return Some(counter.clone());
    }
    let opts = Opts::new("stale_sync_skips_total", help).subsystem(subsystem);
    match IntCounterVec::new(opts, SKIP_LABELS) {
        Ok(counter) => {
            let counter = register(counter);
            counters.insert(subsystem, counter.clone());
            Some(counter)
        }
        Err(error) => {
            tracing::error!(subsystem, %error, "cannot build stale sync skip counter");
            None
        }
    }
}

/// One controller's stale-cache guard: the [`ConsistencyStore`] of its writes and the counter
/// of the syncs it held back (upstream's `EnsureReady` call at the top of a sync, with the
/// controller's `stale_sync_skips_total` metric).
///
/// Every controller holds one and calls it the same way: [`StaleGuard::ensure_caught_up`]
/// first in a sync, [`StaleGuard::wrote`] after each write the sync's cache must show,
/// [`StaleGuard::clear`] when the owner is gone. A guard built with its gate off
/// ([`StaleGuard::enabled`]) records nothing and never holds a sync back, so callers need no
/// check of their own.
#[derive(Debug)]
pub struct StaleGuard {
    store: ConsistencyStore,
    controller: &'static str,
    skips: Option<IntCounterVec>,
    enabled: bool,
}

impl StaleGuard {
    /// The guard of `controller` (for logs); skips are counted in
    /// `<subsystem>_stale_sync_skips_total`, registered now so a scrape sees it early.
    pub fn new(controller: &'static str, subsystem: &'static str, help: &'static str) -> Self {
        Self {
            store: ConsistencyStore::new(),
            controller,
            skips: stale_sync_skips(subsystem, help),
            enabled: true,
        }
    }

    /// The guard with its gate (`StaleControllerConsistency<Kind>`) on or off.
    #[must_use]
    pub fn enabled(mut self, on: bool) -> Self {
        self.enabled = on;
        self
    }

    /// Whether the gate is on (a caller may skip work only the guard's records need).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The writes recorded so far.
    pub fn store(&self) -> &ConsistencyStore {
        &self.store
    }

    /// Records that the controller wrote `resource` at `rv` for the owner `key` (UID
    /// `owner_uid`); a write without a resourceVersion records nothing.
    pub fn wrote(&self, key: &str, owner_uid: &str, resource: GroupResource, rv: Option<&str>) {
        if !self.enabled {
            return;
        }
        if let Some(rv) = rv {
            self.store.wrote_at(key, owner_uid, resource, rv);
        }
    }

    /// Forgets `key` (see [`ConsistencyStore::clear`]).
    pub fn clear(&self, key: &str, owner_uid: Option<&str>) {
        self.store.clear(key, owner_uid);
    }

    /// `Ok` when each of `caches` has seen what the controller wrote for `key`, or the guard
    /// has held `key` for [`MAX_HOLD`] (then logged and counted in
    /// `rkcm_stale_cache_guard_released_total`); otherwise the first lagging resource, counted
    /// and logged at debug (an expected requeue, not a failure).
    pub fn ensure_caught_up(&self, key: &str, caches: &[&dyn ObservedCache]) -> Result<(), Stale> {
        // Mutant (sim only): the guard never holds a sync back.
        if !self.enabled || crate::mutants::on("no-stale-guard") {
            return Ok(());
        }
        // A given cache without a version has applied nothing yet: "" (holds the sync).
        // The owner's namespace: in sharded mode a cache's streams have versions of their own.
        let namespace = key.split_once('/').map_or("", |(ns, _)| ns);
        let observed = |gr: &GroupResource| {
            caches
                .iter()
                .find(|c| c.group_resource() == *gr)
                .map(|c| c.last_synced_in(namespace).unwrap_or_default())
        };
        match self.store.ensure_ready(key, observed) {
            Ok(Ready::CaughtUp) => Ok(()),
            Ok(Ready::Released(released)) => {
                self.released(key, &released);
                Ok(())
            }
            Err(stale) => {
                if let Some(skips) = &self.skips {
                    skips
                        .with_label_values(&[&stale.resource.group, &stale.resource.resource])
                        .inc();
                }
                tracing::debug!(
                    controller = self.controller,
                    key,
                    resource = %stale.resource,
                    written = %stale.written,
                    observed = %stale.observed,
                    "cache older than the controller's own writes; skipping sync"
                );
                Err(stale)
            }
        }
    }

    fn released(&self, key: &str, released: &Released) {
        let stale = &released.stale;
        if let Some(counter) = released_counter() {
            counter
                .with_label_values(&[
                    self.controller,
                    &stale.resource.group,
                    &stale.resource.resource,
                ])
                .inc();
        }
        tracing::info!(
            controller = self.controller,
            key,
            resource = %stale.resource,
            written = %stale.written,
            observed = %stale.observed,
            held_seconds = released.held.as_secs_f64(),
            "cache still older than the controller's own writes after the longest hold; syncing on it"
        );
    }
}

/// `rkcm_stale_cache_guard_released_total{controller,group,resource}`: syncs the guard let
/// through after [`MAX_HOLD`] although a cache was still behind the controller's writes.
fn released_counter() -> Option<&'static IntCounterVec> {
    static COUNTER: OnceLock<Option<IntCounterVec>> = OnceLock::new();
    COUNTER
        .get_or_init(|| {
            let opts = Opts::new(
                "rkcm_stale_cache_guard_released_total",
                "Syncs the stale-cache guard let through after its longest hold although a cache \
                 was still behind the controller's own writes.",
            );
            match IntCounterVec::new(opts, &["controller", "group", "resource"]) {
                Ok(counter) => Some(register(counter)),
                Err(error) => {
                    tracing::error!(%error, "cannot build stale-cache guard release counter");
                    None
                }
            }
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;

    fn pods() -> GroupResource {
        GroupResource::of::<Pod>()
    }
    fn replicasets() -> GroupResource {
        GroupResource::of::<ReplicaSet>()
    }

    /// Caches at fixed versions.
    fn caches(
        pods_rv: Option<&str>,
        rs_rv: Option<&str>,
    ) -> impl Fn(&GroupResource) -> Option<String> {
        let (p, r) = (pods_rv.map(str::to_owned), rs_rv.map(str::to_owned));
        move |gr| {
            if *gr == pods() {
                p.clone()
            } else if *gr == replicasets() {
                r.clone()
            } else {
                None
            }
        }
    }

    #[test]
    fn group_resources_print_as_upstream() {
        assert_eq!(pods().to_string(), "pods");
        assert_eq!(replicasets().to_string(), "replicasets.apps");
        assert_eq!(
            (pods().group.as_str(), pods().resource.as_str()),
            ("", "pods")
        );
        assert_eq!(replicasets().group, "apps");
    }

    #[test]
    fn no_record_is_ready() {
        let store = ConsistencyStore::new();
        assert_eq!(
            store.ensure_ready("ns/web", caches(None, None)),
            Ok(Ready::CaughtUp)
        );
    }

    #[test]
    fn waits_until_every_cache_caught_up_then_forgets() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/web", "u1", pods(), "105");
        store.wrote_at("ns/web", "u1", pods(), "103");
        store.wrote_at("ns/web", "u1", replicasets(), "110");

        let err = store.ensure_ready("ns/web", caches(Some("104"), Some("200")));
        assert_eq!(
            err,
            Err(Stale {
                resource: pods(),
                written: "105".into(),
                observed: "104".into()
            }),
            "the newest pod write counts, not the last recorded"
        );
        assert_eq!(
            err.map_err(|e| e.to_string()),
            Err(
                "read version: 104 is not as new as written version: 105 for group resource pods"
                    .into()
            )
        );
        let err = store.ensure_ready("ns/web", caches(Some("105"), Some("109")));
        assert_eq!(err.map_err(|e| e.resource), Err(replicasets()));
        assert_eq!(store.len(), 1, "kept while stale");

        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("105"), Some("110"))),
            Ok(Ready::CaughtUp)
        );
        assert_eq!(store.len(), 0, "dropped once caught up");
        // Nothing left to wait for, even if a cache were to go back.
        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("1"), Some("1"))),
            Ok(Ready::CaughtUp)
        );
    }

    #[test]
    fn unknown_or_incomparable_versions_do_not_block() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/web", "u1", pods(), "105");
        assert_eq!(
            store.ensure_ready("ns/web", caches(None, None)),
            Ok(Ready::CaughtUp)
        );

        store.wrote_at("ns/web", "u1", pods(), "105");
        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("opaque"), None)),
            Ok(Ready::CaughtUp)
        );

        store.wrote_at("ns/web", "u1", pods(), "opaque");
        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("1"), None)),
            Ok(Ready::CaughtUp)
        );

        store.wrote_at("ns/web", "u1", pods(), "");
        assert_eq!(store.len(), 0, "an empty version is not recorded");
    }

    /// A cache that has applied no object of the resource has not seen the write either
    /// (found by the simulator: a Deployment's new ReplicaSet whose ADDED event was still on
    /// its way left the ReplicaSet cache empty, and the sync created a second one).
    #[test]
    fn a_cache_that_has_seen_nothing_holds_the_sync() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/web", "u1", replicasets(), "110");
        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("200"), Some(""))),
            Err(Stale {
                resource: replicasets(),
                written: "110".into(),
                observed: String::new()
            })
        );
        assert_eq!(store.len(), 1);
        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("200"), Some("110"))),
            Ok(Ready::CaughtUp)
        );
    }

    /// The hold is bounded: the first lagging answer starts it, a sync goes through once it has
    /// lasted [`MAX_HOLD`] (also on an empty cache, and however many times it was held), and the
    /// next write's hold starts over; a hold that ends by catching up does not carry over.
    #[test]
    fn a_hold_ends_after_the_longest_hold() {
        enum Op {
            Write(GroupResource, &'static str),
            /// At `secs` after the start, with the pods and ReplicaSets caches at these versions.
            Check(f64, Option<&'static str>, Option<&'static str>, Want),
        }
        #[derive(Debug, PartialEq)]
        enum Want {
            Held,
            CaughtUp,
            /// Let through, held for this many seconds.
            Released(f64),
        }
        use Op::{Check, Write};
        let at = |secs: f64| Duration::from_secs_f64(secs);
        let cases: Vec<(&str, Vec<Op>)> = vec![
            (
                "held until the bound, then through",
                vec![
                    Write(pods(), "105"),
                    Check(0.0, Some("104"), None, Want::Held),
                    Check(1.0, Some("104"), None, Want::Held),
                    Check(29.9, Some("104"), None, Want::Held),
                    Check(30.0, Some("104"), None, Want::Released(30.0)),
                    // Forgotten: nothing left to hold.
                    Check(31.0, Some("104"), None, Want::CaughtUp),
                ],
            ),
            (
                "the bound counts from the first hold, not the write",
                vec![
                    Write(pods(), "105"),
                    Check(100.0, Some("104"), None, Want::Held),
                    Check(129.0, Some("104"), None, Want::Held),
                    Check(130.5, Some("104"), None, Want::Released(30.5)),
                ],
            ),
            (
                "an empty cache is held, and let through at the bound",
                vec![
                    Write(replicasets(), "110"),
                    Check(0.0, Some("200"), Some(""), Want::Held),
                    Check(30.0, Some("200"), Some(""), Want::Released(30.0)),
                ],
            ),
            (
                "a hold that caught up does not shorten the next one",
                vec![
                    Write(pods(), "105"),
                    Check(0.0, Some("104"), None, Want::Held),
                    Check(20.0, Some("105"), None, Want::CaughtUp),
                    Write(pods(), "107"),
                    Check(25.0, Some("106"), None, Want::Held),
                    Check(54.0, Some("106"), None, Want::Held),
                    Check(55.0, Some("106"), None, Want::Released(30.0)),
                ],
            ),
            (
                "one hold across resources: another lagging one does not restart it",
                vec![
                    Write(pods(), "105"),
                    Write(replicasets(), "110"),
                    Check(0.0, Some("104"), Some("110"), Want::Held),
                    Check(20.0, Some("105"), Some("109"), Want::Held),
                    Check(30.0, Some("105"), Some("109"), Want::Released(30.0)),
                ],
            ),
        ];
        for (name, ops) in cases {
            let store = ConsistencyStore::new();
            let start = Instant::now();
            for (step, op) in ops.into_iter().enumerate() {
                match op {
                    Write(resource, rv) => store.wrote_at("ns/web", "u1", resource, rv),
                    Check(secs, p, r, want) => {
                        let got =
                            match store.ensure_ready_at("ns/web", caches(p, r), start + at(secs)) {
                                Err(_) => Want::Held,
                                Ok(Ready::CaughtUp) => Want::CaughtUp,
                                Ok(Ready::Released(released)) => {
                                    Want::Released(released.held.as_secs_f64())
                                }
                            };
                        assert_eq!(got, want, "{name}, step {step}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_guard_counts_and_logs_a_release() {
        let guard = StaleGuard::new("release-test", "guard_release_test", "help");
        guard.wrote("ns/rs", "uid-1", pods(), Some("7"));
        // The hold started long ago (the store's clock is tokio's; a record can be aged).
        let long_ago = Instant::now()
            .checked_sub(MAX_HOLD + Duration::from_secs(1))
            .expect("a monotonic clock that has run for a while");
        assert!(
            guard
                .store()
                .ensure_ready_at("ns/rs", |_| Some("5".into()), long_ago)
                .is_err()
        );
        let pods_informer = crate::cache::Informer::<Pod>::detached();
        assert_eq!(
            guard.ensure_caught_up("ns/rs", &[&pods_informer.store()]),
            Ok(()),
            "held past the bound: through"
        );
        assert!(guard.store().is_empty());
        let text = crate::metrics::render();
        assert!(
            text.contains(
                "rkcm_stale_cache_guard_released_total{controller=\"release-test\",group=\"\",resource=\"pods\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn owners_are_separate_and_a_new_uid_starts_clean() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/a", "ua", pods(), "50");
        store.wrote_at("ns/b", "ub", pods(), "10");
        assert_eq!(
            store.ensure_ready("ns/b", caches(Some("20"), None)),
            Ok(Ready::CaughtUp)
        );
        assert!(
            store
                .ensure_ready("ns/a", caches(Some("20"), None))
                .is_err()
        );

        // Re-created under the same name: the old object's writes no longer matter.
        store.wrote_at("ns/a", "ua2", replicasets(), "30");
        assert_eq!(
            store.ensure_ready("ns/a", caches(Some("20"), Some("30"))),
            Ok(Ready::CaughtUp)
        );
    }

    #[test]
    fn clear_respects_the_uid() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/a", "ua", pods(), "50");
        store.clear("ns/a", Some("other"));
        assert_eq!(
            store.len(),
            1,
            "a delete of another object of that name keeps it"
        );
        store.clear("ns/a", Some("ua"));
        assert_eq!(store.len(), 0);
        store.wrote_at("ns/a", "ua", pods(), "50");
        store.clear("ns/a", None);
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn the_guard_holds_a_lagging_sync_counts_it_and_lets_it_through_once_caught_up() {
        use crate::cache::Informer;
        use kube::runtime::watcher;
        let guard = StaleGuard::new("test-controller", "guard_test", "Skips in a test.");
        let pods_informer = Informer::<Pod>::detached();
        let pod = |rv: &str| {
            let mut p = Pod::default();
            p.metadata.name = Some("p".into());
            p.metadata.namespace = Some("ns".into());
            p.metadata.resource_version = Some(rv.into());
            p
        };
        pods_informer.feed(watcher::Event::Init);
        pods_informer.feed(watcher::Event::InitApply(pod("5")));
        pods_informer.feed(watcher::Event::InitDone);
        let pods_store = pods_informer.store();
        guard.wrote("ns/rs", "uid-1", pods(), None);
        assert!(guard.store().is_empty(), "no version, no record");
        guard.wrote("ns/rs", "uid-1", pods(), Some("7"));
        let stale = guard
            .ensure_caught_up("ns/rs", &[&pods_store])
            .expect_err("lags");
        assert_eq!(
            (stale.written.as_str(), stale.observed.as_str()),
            ("7", "5")
        );
        let text = crate::metrics::render();
        assert!(
            text.contains("guard_test_stale_sync_skips_total{group=\"\",resource=\"pods\"} 1"),
            "{text}"
        );
        assert!(
            stale_sync_skips("guard_test", "again").is_some(),
            "registered once"
        );
        pods_informer.feed(watcher::Event::Apply(pod("7")));
        assert_eq!(guard.ensure_caught_up("ns/rs", &[&pods_store]), Ok(()));
        assert!(guard.store().is_empty(), "forgotten once seen");
        guard.wrote("ns/rs", "uid-1", replicasets(), Some("9"));
        assert_eq!(
            guard.ensure_caught_up("ns/rs", &[&pods_store]),
            Ok(()),
            "a cache the guard is not given does not hold the sync"
        );
        guard.wrote("ns/rs", "uid-1", pods(), Some("9"));
        guard.clear("ns/rs", Some("uid-1"));
        assert!(guard.store().is_empty());
    }

    #[test]
    fn a_guard_with_its_gate_off_records_nothing_and_holds_nothing_back() {
        use crate::cache::Informer;
        use kube::runtime::watcher;

        let guard = StaleGuard::new("off-test", "guard_off_test", "help").enabled(false);
        assert!(!guard.is_enabled());
        let pods_informer = Informer::<Pod>::detached();
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.name = Some("p".into());
        pod.metadata.resource_version = Some("5".into());
        pods_informer.feed(watcher::Event::Init);
        pods_informer.feed(watcher::Event::InitApply(pod));
        pods_informer.feed(watcher::Event::InitDone);
        guard.wrote("ns/rs", "uid-1", pods(), Some("7"));
        assert!(guard.store().is_empty());
        // Even a record made behind its back does not hold a sync.
        guard.store().wrote_at("ns/rs", "uid-1", pods(), "7");
        assert_eq!(
            guard.ensure_caught_up("ns/rs", &[&pods_informer.store()]),
            Ok(())
        );
        assert!(StaleGuard::new("on-test", "guard_off_test", "help").is_enabled());
    }
}
