//! Shared informers: one LIST+WATCH per resource type for the whole process (in sharded mode,
//! one per set of ranges taken together: [`Informer::follow_ranges`]), an indexed in-memory
//! cache, and ordered `(old, new)` change delivery to every subscriber.
//!
//! Mirrors client-go `tools/cache`: the reflector (list, then watch from the list's
//! resourceVersion, relist on `410 Gone`), `shared_informer.go` (one informer per type, one
//! buffer per listener, synthetic adds for late listeners, `WaitForCacheSync`) and the
//! `DeltaFIFO.Replace` semantics of a relist (new keys are adds, known keys are updates,
//! vanished keys are deletes with `DeletedFinalStateUnknown`).
//!
//! Guarantees:
//! - [`InformerFactory::informer`] returns the same informer for the same type, so a type is
//!   listed and watched once no matter how many controllers read it.
//! - The engine is `crate::api::protobuf::watcher`, kube's watcher state machine in protobuf
//!   (pods, nodes) or JSON (every other type): paged LIST of 500, every list a consistent read
//!   (never `resourceVersion=0`, which a lagging watch cache may answer with an old state), or
//!   a streaming list; bookmarks, re-watch from the last resourceVersion, relist on a 410
//!   inside the stream or answering the watch request (kube-rs would retry the expired
//!   resourceVersion forever). Retried with a
//!   backoff of 0.8 s doubling to 4 s (kube's and client-go's go up to 30 s, which delays
//!   recovery after an API server outage). Errors are logged and retried until shutdown; they
//!   never end the informer.
//! - A relist replaces the cache atomically and delivers the difference, so a delete missed
//!   while the watch was down still reaches every subscriber, as a tombstone
//!   (`final_state_unknown: true`) carrying the last state the cache knew.
//! - Each subscriber has its own unbounded buffer and task, so a slow subscriber never holds
//!   up the watch or another subscriber. Every subscriber sees every change exactly once and
//!   in order; one that subscribes late first gets `Added` for everything already cached.
//! - Stored objects never carry `metadata.managedFields`, and once a controller declares the
//!   fields it reads ([`Informer::keep`], see [`crate::cache::projection`]) they carry only the
//!   fields some declaring controller reads. A declaration that widens the projection of a
//!   started informer relists it, and `has_synced` is false until that relist is complete.
//! - `has_synced` turns true once the first complete list is in the cache and its changes are
//!   queued to every subscriber registered by then.
//! - [`Store::last_synced_resource_version`] is the newest resourceVersion the cache reflects
//!   (client-go `LastStoreSyncResourceVersion`), advanced in the same critical section that
//!   applies the change; [`Informer::wait_for_resource_version`] waits for it. As client-go's,
//!   it follows the objects the cache applies, each complete list's own resourceVersion and
//!   each watch bookmark's ([`crate::cache::item::Item::Version`]), so an empty cache, or one
//!   whose newest write left no object, is current at its list's or bookmark's version.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{self, AtomicBool};
use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use parking_lot::{Mutex, RwLock};
use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::api::protobuf::watcher as list_watch;
use crate::cache::item::Item;
use crate::cache::projection::{Fields, Projectable};
use crate::cache::signal::Signal;
use crate::cache::source::{ContentType, ListMode, Source, is_namespaced};
use crate::cache::store::{
    Change, IndexFn, Informable, Inner, ONE_STREAM, State, Store, compare_resource_versions,
};
use crate::cache::watch::{
    ErrorLog, PAGE_SIZE, RESTART_DELAY, WATCH_TIMEOUT_SECS, in_scope, retry_backoff,
};
use crate::metrics::{get_or_register, register};

struct Metrics {
    lists: IntCounterVec,
    events: IntCounterVec,
    objects: IntGaugeVec,
}

impl Metrics {
    fn build() -> prometheus::Result<Self> {
        Ok(Self {
            lists: register(IntCounterVec::new(
                Opts::new(
                    "rkcm_informer_lists_total",
                    "Full LISTs (initial list and relists) started by the shared informer of a resource.",
                ),
                &["resource"],
            )?),
            events: register(IntCounterVec::new(
                Opts::new(
                    "rkcm_informer_events_total",
                    "Changes delivered by the shared informer of a resource, by type (added, updated, deleted).",
                ),
                &["resource", "type"],
            )?),
            objects: register(IntGaugeVec::new(
                Opts::new(
                    "rkcm_informer_objects",
                    "Objects in the cache of the shared informer of a resource.",
                ),
                &["resource"],
            )?),
        })
    }
}

fn metrics() -> Option<&'static Metrics> {
    static METRICS: OnceLock<Option<Metrics>> = OnceLock::new();
    get_or_register(&METRICS, "informer", Metrics::build)
}

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A handle on one shared informer. Cheap to clone.
pub struct Informer<K> {
    pub(super) shared: Arc<Shared<K>>,
}
impl<K> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

pub(super) struct Shared<K> {
    resource: String,
    inner: Arc<RwLock<Inner<K>>>,
    synced: Signal<bool>,
    /// Complete lists applied so far (initial list and every relist).
    lists: Signal<u64>,
    started: AtomicBool,
    /// The list+watch streams that feed the cache.
    streams: RwLock<Streams>,
    /// Bumped whenever a stream starts, stops or completes a list.
    coverage: Signal<u64>,
    /// Subscriber tasks created where no runtime was available; spawned on start.
    pending_tasks: Mutex<Vec<BoxFuture>>,
}

impl<K: Informable> Informer<K> {
    /// An informer no factory owns or starts; feed it with [`Informer::feed`]. For tests
    /// and fakes: code under test reads and subscribes exactly as with a shared informer.
    pub fn detached() -> Self {
        Self {
            shared: Arc::new(Shared {
                resource: K::plural(&()).into_owned(),
                inner: Arc::new(RwLock::new(Inner {
                    state: State::new(),
                    subscribers: Vec::new(),
                    synced_version: Arc::new(Signal::new(None)),
                })),
                synced: Signal::new(false),
                lists: Signal::new(0),
                started: AtomicBool::new(false),
                streams: RwLock::new(Streams::default()),
                coverage: Signal::new(0),
                pending_tasks: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The resource's plural name (e.g. `pods`), for logs and metric labels.
    pub fn resource_name(&self) -> &str {
        &self.shared.resource
    }

    pub fn store(&self) -> Store<K> {
        Store {
            inner: self.shared.inner.clone(),
        }
    }

    /// Declares that a controller reads the optional field groups `fields` of `K` (and the
    /// base, see [`crate::cache::projection`]): from the first declaration on, the cache keeps only
    /// the base and the declared groups. Call it before the informer starts (in the crate's
    /// `informers`); a later declaration that widens the projection relists.
    pub fn keep(&self, fields: Fields)
    where
        K: Projectable,
    {
        let widened = self.shared.inner.write().state.declare(K::project, fields);
        if widened {
            info!(resource = %self.shared.resource, "Projection widened; relisting");
            self.shared.synced.set(false);
            self.restart();
        }
    }

    /// [`Informer::keep`] with a trim of the caller's own: every object is cached as `apply`
    /// leaves it. Only for an informer no other controller reads (one of a factory of the
    /// caller's own): the first declaration's `apply` is the one kept, a later one only
    /// widens `fields`.
    pub fn keep_with(&self, apply: fn(&mut K, Fields), fields: Fields) {
        let widened = self.shared.inner.write().state.declare(apply, fields);
        if widened {
            info!(resource = %self.shared.resource, "Projection widened; relisting");
            self.shared.synced.set(false);
            self.restart();
        }
    }

    /// Lists everything again in one new list+watch (a started informer; one not started yet
    /// lists with what is declared when it starts). The relist delivers the difference.
    fn restart(&self) {
        let mut streams = self.shared.streams.write();
        let Some(run) = streams.run.clone() else {
            return;
        };
        let ranges = run.sharded_ranges::<K>();
        self.stop_streams(&mut streams, |_| true);
        self.start_stream(&mut streams, &run, ranges, true);
    }

    /// Sharded mode: makes the cache follow the held ranges `held`. The objects of ranges
    /// handed over leave the cache at once (tombstones, as a relist that no longer finds them
    /// would deliver) and their events are dropped from then on; the ranges taken are listed
    /// and watched by a stream of their own, so that the ranges kept are neither listed again
    /// nor delivered again. Past [`MAX_STREAMS`] streams, one new stream lists every held
    /// range instead; under the client filter (no shard selector), where a stream of a few
    /// ranges would still list and watch every namespace, always. Nothing for a
    /// cluster-scoped type or an informer that is not sharded.
    pub(crate) fn follow_ranges(&self, held: &BTreeSet<u32>) {
        let mut streams = self.shared.streams.write();
        let Some(run) = streams.run.clone() else {
            return;
        };
        if run.sharded_ranges::<K>().is_none() {
            return;
        }
        let covered: BTreeSet<u32> = streams
            .live
            .iter()
            .filter_map(|s| s.ranges.as_ref())
            .flatten()
            .copied()
            .collect();
        let dropped: BTreeSet<u32> = covered.difference(held).copied().collect();
        let taken: BTreeSet<u32> = held.difference(&covered).copied().collect();
        if dropped.is_empty() && taken.is_empty() {
            // (A stream started while nothing was held keeps running until ranges are taken:
            // its list, of nothing, is what syncs the informer.)
            return;
        }
        if let (false, Some(ring)) = (dropped.is_empty(), run.ring()) {
            let mut inner = self.shared.inner.write();
            for stream in &mut streams.live {
                if let Some(ranges) = stream.ranges.as_mut() {
                    ranges.retain(|r| !dropped.contains(r));
                    inner.state.route(ring, stream.id, Some(ranges));
                }
            }
        }
        // A stream left with no range has nothing to watch.
        self.stop_streams(&mut streams, |s| {
            s.ranges.as_ref().is_some_and(BTreeSet::is_empty)
        });
        if let (false, Some(ring)) = (dropped.is_empty(), run.ring()) {
            let drops = |ns: &str| dropped.contains(&ring.range_of(ns));
            let mut inner = self.shared.inner.write();
            let changes = inner.state.purge(&drops);
            debug!(resource = %self.shared.resource, ranges = ?dropped, objects = changes.len(), "Dropped the ranges handed over");
            self.deliver(&mut inner, &changes);
        }
        if !taken.is_empty() {
            // Under the client filter every stream lists and watches every namespace: a
            // second stream would decode each object once more, so the one stream is
            // restarted over everything held.
            let most = if run.source.scope.shard_selector_for::<K>(&taken).is_some() {
                MAX_STREAMS
            } else {
                1
            };
            if streams.live.len() >= most {
                self.stop_streams(&mut streams, |_| true);
            }
            // With no other stream left, the new one holds everything held.
            let whole = streams.live.is_empty();
            let ranges = if whole { held.clone() } else { taken };
            self.start_stream(&mut streams, &run, Some(ranges), whole);
        }
    }

    /// Whether the cache holds every range of `ranges`: a stream that holds it completed a
    /// list. For a cluster-scoped type or an informer that is not sharded: whether it synced.
    pub(crate) fn covers(&self, ranges: &BTreeSet<u32>) -> bool {
        let streams = self.shared.streams.read();
        let sharded = streams
            .run
            .as_ref()
            .is_some_and(|run| run.sharded_ranges::<K>().is_some());
        if !sharded {
            return self.has_synced();
        }
        let listed: BTreeSet<u32> = streams
            .live
            .iter()
            .filter(|s| s.listed.load(atomic::Ordering::SeqCst))
            .filter_map(|s| s.ranges.as_ref())
            .flatten()
            .copied()
            .collect();
        ranges.is_subset(&listed)
    }

    /// The list+watch streams running.
    #[cfg(test)]
    pub(super) fn stream_count(&self) -> usize {
        self.shared.streams.read().live.len()
    }

    /// Waits until [`Informer::covers`] `ranges`.
    pub(crate) async fn wait_covering(&self, ranges: &BTreeSet<u32>) {
        loop {
            let seen = self.shared.coverage.get();
            if self.covers(ranges) {
                return;
            }
            self.shared.coverage.wait_for(|now| *now != seen).await;
        }
    }

    /// Stops the streams `which` picks: their events are dropped from now on (checked under
    /// the streams lock) and a list they had in progress is forgotten.
    fn stop_streams(&self, streams: &mut Streams, which: impl Fn(&Stream) -> bool) {
        let mut inner = None;
        let ring = streams.run.as_ref().and_then(Run::ring);
        streams.live.retain(|s| {
            if !which(s) {
                return true;
            }
            s.stop.cancel();
            let state = &mut inner.get_or_insert_with(|| self.shared.inner.write()).state;
            state.abort_list(s.id);
            if let Some(ring) = ring {
                state.route(ring, s.id, None);
            }
            false
        });
        drop(inner);
        self.bump_coverage();
    }

    /// Starts a list+watch stream over `ranges` (`None`: everything the scope admits).
    fn start_stream(
        &self,
        streams: &mut Streams,
        run: &Run,
        ranges: Option<BTreeSet<u32>>,
        whole: bool,
    ) {
        streams.next += 1;
        let id = streams.next;
        let stop = run.shutdown.child_token();
        let shard_selector = ranges
            .as_ref()
            .and_then(|r| run.source.scope.shard_selector_for::<K>(r));
        if let (Some(ranges), Some(ring)) = (ranges.as_ref(), run.ring()) {
            self.shared
                .inner
                .write()
                .state
                .route(ring, id, Some(ranges));
        }
        streams.live.push(Stream {
            id,
            ranges,
            whole,
            stop: stop.clone(),
            listed: AtomicBool::new(false),
        });
        self.bump_coverage();
        let informer = self.clone();
        let run = run.clone();
        run.runtime.clone().spawn(async move {
            informer.run_stream(run, id, shard_selector, stop).await;
        });
    }

    fn bump_coverage(&self) {
        self.shared.coverage.modify(|n| *n = n.wrapping_add(1));
    }

    /// Registers a secondary index; registering the same name twice is a no-op.
    pub fn add_index(&self, name: &'static str, f: IndexFn<K>) {
        self.shared.inner.write().state.add_index(name, f);
    }

    /// [`Informer::subscribe`] with a handler that is a method of a shared controller, e.g.
    /// `pods.subscribe_with(&controller, Controller::on_pod)`.
    pub fn subscribe_with<C: Send + Sync + 'static>(
        &self,
        controller: &Arc<C>,
        handler: impl Fn(&C, Change<K>) + Send + Sync + 'static,
    ) {
        let controller = controller.clone();
        self.subscribe(move |change| handler(&controller, change));
    }

    /// Every change, in order. A subscriber added after sync first gets `Added` for every
    /// cached object. The handler must be cheap (compute keys, enqueue): no API calls.
    pub fn subscribe(&self, handler: impl Fn(Change<K>) + Send + Sync + 'static) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut inner = self.shared.inner.write();
            for obj in inner.state.objects.values() {
                // The receiver is alive: it is in this scope.
                let _ = tx.send(Change::Added(obj.clone()));
            }
            inner.subscribers.push(tx);
        }
        let resource = self.shared.resource.clone();
        let task: BoxFuture = Box::pin(async move {
            while let Some(change) = rx.recv().await {
                // A panicking handler loses this change but must not silently stop all
                // later deliveries to its controller.
                if std::panic::catch_unwind(AssertUnwindSafe(|| handler(change))).is_err() {
                    error!(resource = %resource, "Informer event handler panicked");
                }
            }
        });
        match Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(task);
            }
            Err(_) => self.shared.pending_tasks.lock().push(task),
        }
    }

    pub fn has_synced(&self) -> bool {
        self.shared.synced.get()
    }

    /// Complete lists applied so far (the initial list and every relist).
    pub fn lists_done(&self) -> u64 {
        self.shared.lists.get()
    }

    /// Waits until more than `n` complete lists were applied.
    pub async fn wait_lists_past(&self, n: u64) {
        self.shared.lists.wait_for(|done| *done > n).await;
    }

    /// Waits until synced; false if `shutdown` fired first.
    pub async fn wait_synced(&self, shutdown: &CancellationToken) -> bool {
        let resource = self.resource_name();
        info!(resource, "Waiting for caches to sync");
        let done = tokio::select! {
            biased;
            () = self.shared.synced.wait_for(|synced| *synced) => true,
            () = shutdown.cancelled() => false,
        };
        if done {
            info!(resource, "Caches are synced");
        } else {
            info!(
                resource,
                "Stopped waiting for caches to sync: shutting down"
            );
        }
        done
    }

    /// Applies one watcher event as if it came from the API server and delivers the
    /// resulting changes. The informer's own watch uses this; tests and fakes may too.
    pub fn feed(&self, event: watcher::Event<K>) {
        self.feed_in(ONE_STREAM, &|_| true, true, event);
    }

    /// [`Informer::feed`] from one of several streams (see [`State::apply_in`]).
    fn feed_in(
        &self,
        stream: u64,
        covers: &dyn Fn(Option<&str>) -> bool,
        whole: bool,
        event: watcher::Event<K>,
    ) {
        let metrics = metrics();
        let resource = self.shared.resource.as_str();
        if let Some(m) = metrics
            && matches!(event, watcher::Event::Init)
        {
            m.lists.with_label_values(&[resource]).inc();
        }
        let list_done = matches!(event, watcher::Event::InitDone);
        let mut inner = self.shared.inner.write();
        let changes = inner.state.apply_in(stream, covers, whole, event);
        self.deliver(&mut inner, &changes);
        // Still under the lock: a waiter woken by a version finds the cache at least there.
        let version = inner.state.last_synced_resource_version();
        inner.synced_version.set(version.map(str::to_owned));
        // Still under the lock: once synced is visible, the initial adds are queued.
        if inner.state.has_synced() {
            self.shared.synced.set(true);
        }
        if list_done {
            self.shared.lists.set(self.shared.lists.get() + 1);
        }
        drop(inner);
        if tracing::enabled!(tracing::Level::TRACE) {
            // The moment a change reached the cache, for latency profiles (`-v=5`); logged
            // after the lock, which every reader of the cache waits on.
            for change in &changes {
                let meta = change.object().meta();
                tracing::trace!(
                    resource,
                    change = change.kind(),
                    namespace = meta.namespace.as_deref().unwrap_or(""),
                    name = meta.name.as_deref().unwrap_or(""),
                    "informer change"
                );
            }
        }
    }

    /// Counts and queues `changes` to every subscriber (under the cache's lock, so that they
    /// arrive in the order they were applied).
    fn deliver(&self, inner: &mut Inner<K>, changes: &[Change<K>]) {
        let resource = self.shared.resource.as_str();
        let metrics = metrics();
        if let Some(m) = metrics {
            for change in changes {
                m.events.with_label_values(&[resource, change.kind()]).inc();
            }
        }
        if !changes.is_empty() {
            // A closed channel means the subscriber's task is gone (runtime shut down).
            inner
                .subscribers
                .retain(|tx| changes.iter().all(|change| tx.send(change.clone()).is_ok()));
        }
        if let Some(m) = metrics {
            m.objects
                .with_label_values(&[resource])
                .set(i64::try_from(inner.state.len()).unwrap_or(i64::MAX));
        }
    }

    /// Records that the cache, with everything fed so far, reflects resourceVersion `rv` though
    /// no object carries it: a complete list's own version or a watch bookmark's, which
    /// client-go's reflector records too (`LastSyncResourceVersion`). Ignored while a relist is
    /// in progress (the cache still shows the state before it); never moves the version back.
    pub fn feed_version(&self, rv: &str) {
        self.feed_version_in(ONE_STREAM, rv);
    }

    /// [`Informer::feed_version`] from one of several streams.
    fn feed_version_in(&self, stream: u64, rv: &str) {
        let mut inner = self.shared.inner.write();
        inner.state.observe_list_version_in(stream, rv);
        let version = inner.state.last_synced_resource_version();
        inner.synced_version.set(version.map(str::to_owned));
    }

    /// The newest resourceVersion the cache reflects (see [`Store::last_synced_resource_version`]).
    pub fn last_synced_resource_version(&self) -> Option<String> {
        self.store().last_synced_resource_version()
    }

    /// Waits until the cache reflects resourceVersion `rv` or newer: true then, and at once
    /// when `rv` cannot be compared with the cache's version (nothing to wait for); false if
    /// `shutdown` fired first.
    pub async fn wait_for_resource_version(&self, rv: &str, shutdown: &CancellationToken) -> bool {
        let versions = self.shared.inner.read().synced_version.clone();
        let caught_up = |seen: &Option<String>| {
            seen.as_deref()
                .is_some_and(|seen| compare_resource_versions(seen, rv) != Some(Ordering::Less))
        };
        tokio::select! {
            biased;
            () = versions.wait_for(caught_up) => true,
            () = shutdown.cancelled() => false,
        }
    }

    pub(super) fn start_on(
        &self,
        client: kube::Client,
        source: Source,
        shutdown: CancellationToken,
        runtime: &Handle,
    ) {
        if self.shared.started.swap(true, atomic::Ordering::SeqCst) {
            return;
        }
        for task in self.shared.pending_tasks.lock().drain(..) {
            runtime.spawn(task);
        }
        let run = Run {
            client,
            source,
            shutdown: shutdown.clone(),
            runtime: runtime.clone(),
        };
        {
            let mut streams = self.shared.streams.write();
            streams.run = Some(run.clone());
            let ranges = run.sharded_ranges::<K>();
            self.start_stream(&mut streams, &run, ranges, true);
        }
        let informer = self.clone();
        runtime.spawn(async move {
            shutdown.cancelled().await;
            // Closing the channels lets every subscriber task drain its buffer and end.
            informer.shared.inner.write().subscribers.clear();
            debug!(resource = %informer.shared.resource, "Informer stopped");
        });
    }

    /// One list+watch stream: lists, watches, relists after a 410, until `stop` (the stream
    /// was replaced, or shutdown). Its events are applied while it is live and only for the
    /// namespaces it holds.
    async fn run_stream(
        self,
        run: Run,
        id: u64,
        shard_selector: Option<String>,
        stop: CancellationToken,
    ) {
        let resource = self.shared.resource.clone();
        let timeout = crate::jitter::in_range(WATCH_TIMEOUT_SECS);
        let codec = match run.source.content_type {
            ContentType::Protobuf => crate::api::protobuf::codec::<K>(),
            ContentType::Json => None,
        };
        debug!(resource = %resource, stream = id, protobuf = codec.is_some(), "Starting informer stream");
        let mut errors = ErrorLog::default();
        let scope = &run.source.scope;
        let ring = scope.shards().map(|s| s.config().ring);
        while !stop.is_cancelled() {
            let params = list_watch::Params {
                path: K::url_path(&(), None),
                kind: codec.as_ref().map_or("", |c| c.kind),
                list_kind: codec.as_ref().map_or("", |c| c.list_kind),
                field_selector: scope.field_selector::<K>(),
                shard_selector: shard_selector.clone(),
                page_size: PAGE_SIZE,
                timeout,
                streaming: run.source.list_mode == ListMode::Streaming,
            };
            let events: BoxStream<'static, watcher::Result<Item<K>>> = match &codec {
                Some(codec) => list_watch::watch(run.client.clone(), params, codec.decode).boxed(),
                None => list_watch::watch_json::<K>(run.client.clone(), params).boxed(),
            };
            let mut stream = Box::pin(events.backoff(retry_backoff()));
            loop {
                let item = tokio::select! {
                    biased;
                    () = stop.cancelled() => break,
                    item = stream.next() => item,
                };
                match item {
                    Some(Ok(Item::Event(event))) => {
                        errors.clear();
                        // Under the streams' lock: a stream stopped, or a range dropped, is
                        // never fed after the fact.
                        let streams = self.shared.streams.read();
                        let Some(me) = streams.live.iter().find(|s| s.id == id) else {
                            break;
                        };
                        let holds = |ns: Option<&str>| {
                            scope.holds(ns, me.ranges.as_ref().zip(ring.as_ref()))
                        };
                        let list_done = matches!(event, watcher::Event::InitDone);
                        if let Some(event) = in_scope(&holds, event) {
                            self.feed_in(id, &holds, me.whole, event);
                        }
                        if list_done && !me.listed.swap(true, atomic::Ordering::SeqCst) {
                            self.bump_coverage();
                        }
                    }
                    Some(Ok(Item::Version(rv))) => self.feed_version_in(id, &rv),
                    Some(Err(err)) => errors.report(&resource, &err),
                    None => {
                        // The stream and its backoff never end; should that change, rebuild
                        // rather than stop informing.
                        warn!(resource = %resource, "Informer list/watch stream ended; restarting");
                        tokio::select! {
                            biased;
                            () = stop.cancelled() => {}
                            () = tokio::time::sleep(RESTART_DELAY) => {}
                        }
                        break;
                    }
                }
            }
        }
        debug!(resource = %resource, stream = id, "Informer stream stopped");
    }
}

/// At most this many list+watch streams per sharded informer: past it, taking ranges lists
/// every held range in one new stream (each stream is a watch the API server matches every
/// event against).
pub(crate) const MAX_STREAMS: usize = 4;

/// The streams of one informer.
#[derive(Default)]
struct Streams {
    /// The id of the last stream started.
    next: u64,
    live: Vec<Stream>,
    /// Where streams run; set when the informer starts.
    run: Option<Run>,
}

/// One list+watch stream of an informer.
struct Stream {
    id: u64,
    /// The ranges whose objects it holds, for a sharded informer of a namespaced type (the
    /// ranges it was started for, minus those dropped since); `None`: everything in scope.
    ranges: Option<BTreeSet<u32>>,
    /// Its lists cover everything the cache holds (it was started for all of it).
    whole: bool,
    stop: CancellationToken,
    /// It completed a list.
    listed: AtomicBool,
}

/// What an informer's streams run with.
#[derive(Clone)]
struct Run {
    client: kube::Client,
    source: Source,
    shutdown: CancellationToken,
    runtime: Handle,
}

impl Run {
    /// The held ranges, for a namespaced type in sharded mode: what a stream started now
    /// holds. `None` otherwise.
    fn sharded_ranges<K: kube::Resource>(&self) -> Option<BTreeSet<u32>> {
        let shards = self.source.scope.shards()?;
        is_namespaced::<K>().then(|| shards.held_ranges())
    }

    /// The ring of a sharded informer.
    fn ring(&self) -> Option<crate::shard::Ring> {
        self.source.scope.shards().map(|s| s.config().ring)
    }
}
