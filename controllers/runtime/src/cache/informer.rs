//! Shared informers: one LIST+WATCH per resource type for the whole process, an indexed
//! in-memory cache, and ordered `(old, new)` change delivery to every subscriber.
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
use crate::cache::source::{ContentType, ListMode, Source};
use crate::cache::store::{
    Change, IndexFn, Informable, Inner, State, Store, compare_resource_versions,
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
    /// Asks the running list/watch to start over with a fresh list.
    relist: tokio::sync::Notify,
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
                relist: tokio::sync::Notify::new(),
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
        let mut inner = self.shared.inner.write();
        if inner.state.declare(K::project, fields) {
            info!(resource = %self.shared.resource, "Projection widened; relisting");
            self.shared.synced.set(false);
            self.shared.relist.notify_one();
        }
    }

    /// Lists again (a new list and watch with the source's selectors as they are now): for
    /// sharded mode, when the held ranges changed. The relist delivers the difference.
    pub(crate) fn relist(&self) {
        self.shared.relist.notify_one();
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
        let metrics = metrics();
        let resource = self.shared.resource.as_str();
        if let Some(m) = metrics
            && matches!(event, watcher::Event::Init)
        {
            m.lists.with_label_values(&[resource]).inc();
        }
        let list_done = matches!(event, watcher::Event::InitDone);
        let mut inner = self.shared.inner.write();
        let changes = inner.state.apply(event);
        if let Some(m) = metrics {
            for change in &changes {
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

    /// Records that the cache, with everything fed so far, reflects resourceVersion `rv` though
    /// no object carries it: a complete list's own version or a watch bookmark's, which
    /// client-go's reflector records too (`LastSyncResourceVersion`). Ignored while a relist is
    /// in progress (the cache still shows the state before it); never moves the version back.
    pub fn feed_version(&self, rv: &str) {
        let mut inner = self.shared.inner.write();
        inner.state.observe_list_version(rv);
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
        let informer = self.clone();
        runtime.spawn(async move { informer.run(client, source, shutdown).await });
    }

    async fn run(self, client: kube::Client, source: Source, shutdown: CancellationToken) {
        let resource = self.shared.resource.clone();
        let timeout = crate::jitter::in_range(WATCH_TIMEOUT_SECS);
        let codec = match source.content_type {
            ContentType::Protobuf => crate::api::protobuf::codec::<K>(),
            ContentType::Json => None,
        };
        debug!(resource = %resource, protobuf = codec.is_some(), "Starting informer");
        let mut errors = ErrorLog::default();
        while !shutdown.is_cancelled() {
            let params = list_watch::Params {
                path: K::url_path(&(), None),
                kind: codec.as_ref().map_or("", |c| c.kind),
                list_kind: codec.as_ref().map_or("", |c| c.list_kind),
                field_selector: source.scope.field_selector::<K>(),
                shard_selector: source.scope.shard_selector::<K>(),
                page_size: PAGE_SIZE,
                timeout,
                streaming: source.list_mode == ListMode::Streaming,
            };
            let events: BoxStream<'static, watcher::Result<Item<K>>> = match &codec {
                Some(codec) => list_watch::watch(client.clone(), params, codec.decode).boxed(),
                None => list_watch::watch_json::<K>(client.clone(), params).boxed(),
            };
            let mut stream = Box::pin(events.backoff(retry_backoff()));
            loop {
                let item = tokio::select! {
                    biased;
                    () = shutdown.cancelled() => break,
                    () = self.shared.relist.notified() => break,
                    item = stream.next() => item,
                };
                match item {
                    Some(Ok(Item::Event(event))) => {
                        errors.clear();
                        if let Some(event) = in_scope(&source.scope, event) {
                            self.feed(event);
                        }
                    }
                    Some(Ok(Item::Version(rv))) => self.feed_version(&rv),
                    Some(Err(err)) => errors.report(&resource, &err),
                    None => {
                        // The stream and its backoff never end; should that change, rebuild
                        // rather than stop informing.
                        warn!(resource = %resource, "Informer list/watch stream ended; restarting");
                        tokio::select! {
                            biased;
                            () = shutdown.cancelled() => {}
                            () = tokio::time::sleep(RESTART_DELAY) => {}
                        }
                        break;
                    }
                }
            }
        }
        // Closing the channels lets every subscriber task drain its buffer and end.
        self.shared.inner.write().subscribers.clear();
        debug!(resource = %resource, "Informer stopped");
    }
}
