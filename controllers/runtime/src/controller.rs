//! The start loop every controller shares, and the declaration of the informers it reads.
//!
//! Mirrors the `Run` method of upstream's workload controllers (e.g.
//! `pkg/controller/replicaset/replica_set.go`, `pkg/controller/deployment/deployment_controller.go`):
//! log the start, `cache.WaitForNamedCacheSync` on the informers the controller declared,
//! start `workers` workers on the queue, and on shutdown stop the queue, let the workers finish
//! their current key and log the stop.
//!
//! A controller crate declares its informers once, as
//! `pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe>`; the process calls it before
//! starting the factory (so one start covers every type) and for its readiness report, and the
//! crate's `start` passes the same list to [`run_controller`] as the caches to wait for.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::cache::{Informable, Informer, InformerFactory};
use crate::context::ControllerContext;
use crate::explain::decisions;
use crate::keys::split_key;
use crate::queue::{QueueKey, RetryPolicy, WorkQueue, run_workers_with};
use crate::shard::Shards;

/// Whether one informer has completed its initial list, and a way to wait for it.
pub struct SyncProbe {
    /// The resource's plural name, for progress logs.
    pub resource: String,
    /// True once the informer's first list is in its cache.
    pub synced: Box<dyn Fn() -> bool + Send + Sync>,
    wait: Box<dyn Fn(CancellationToken) -> BoxFuture<'static, bool> + Send + Sync>,
}

impl SyncProbe {
    pub fn of<K: Informable>(informer: Informer<K>) -> Self {
        let probe = informer.clone();
        Self {
            resource: informer.resource_name().to_string(),
            synced: Box::new(move || probe.has_synced()),
            wait: Box::new(move |shutdown| {
                let informer = informer.clone();
                Box::pin(async move { informer.wait_synced(&shutdown).await })
            }),
        }
    }

    pub fn has_synced(&self) -> bool {
        (self.synced)()
    }

    /// Waits until synced; false if `shutdown` fired first.
    pub async fn wait_synced(&self, shutdown: &CancellationToken) -> bool {
        (self.wait)(shutdown.clone()).await
    }
}

impl fmt::Debug for SyncProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncProbe")
            .field("resource", &self.resource)
            .field("synced", &self.has_synced())
            .finish_non_exhaustive()
    }
}

/// Waits until every informer in `probes` has synced (`WaitForNamedCacheSync`); false, after
/// logging it, if `shutdown` fired first.
pub async fn wait_for_caches(
    controller: &str,
    shutdown: &CancellationToken,
    probes: &[SyncProbe],
) -> bool {
    for probe in probes {
        if !probe.wait_synced(shutdown).await {
            tracing::info!(controller, "shutting down controller before caches synced");
            return false;
        }
    }
    true
}

/// The informers of a tuple of resource types, as probes: a crate's `informers` is
/// `probes::<(Deployment, ReplicaSet, Pod)>(factory)`.
pub trait InformerSet {
    fn probes(factory: &InformerFactory) -> Vec<SyncProbe>;
}

macro_rules! informer_set {
    ($($k:ident),+) => {
        impl<$($k: Informable),+> InformerSet for ($($k,)+) {
            fn probes(factory: &InformerFactory) -> Vec<SyncProbe> {
                vec![$(SyncProbe::of(factory.informer::<$k>())),+]
            }
        }
    };
}

informer_set!(A);
informer_set!(A, B);
informer_set!(A, B, C);
informer_set!(A, B, C, D);
informer_set!(A, B, C, D, E);

/// The informers of `T` (a tuple of resource types) requested from `factory`, in order.
pub fn probes<T: InformerSet>(factory: &InformerFactory) -> Vec<SyncProbe> {
    T::probes(factory)
}

/// Compile-time check a crate's tests make on its `start` future, which the process spawns on
/// a multi-threaded runtime: `const _: fn(ControllerContext) = |ctx| assert_send(&start(ctx,
/// Config::default()));`.
pub fn assert_send<T: Send>(_: &T) {}

/// The configuration of a controller whose one setting is how many workers sync its keys;
/// `DEFAULT` is upstream's default of the flag that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workers<const DEFAULT: usize> {
    pub workers: usize,
}

impl<const DEFAULT: usize> Default for Workers<DEFAULT> {
    fn default() -> Self {
        Self { workers: DEFAULT }
    }
}

/// A controller whose main queue holds `namespace/name` keys, each synced by one method.
/// [`Run::main`] starts its workers; extra queues (DaemonSet's nodes, Job's orphan pods) are
/// added with [`Run::queue`].
pub trait Reconcile: Send + Sync + 'static {
    /// What a failed sync returns.
    type Error: fmt::Display + Send + 'static;

    /// How failed syncs of the main queue are retried (upstream's `handleErr`). Default:
    /// with backoff, for ever.
    fn retry_policy() -> RetryPolicy<Self::Error> {
        RetryPolicy::default()
    }

    /// Brings the object of `key` to its wanted state (upstream's `syncHandler`).
    fn sync(&self, key: String) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// The workers of one queue, not yet started.
struct QueueWorkers {
    workers: usize,
    shut_down: Box<dyn Fn() + Send + Sync>,
    run: BoxFuture<'static, ()>,
}

/// One controller's run: the caches it waits for and the work queues its workers drain.
/// Built in the crate's `start` after the event handlers are subscribed, e.g.
///
/// ```ignore
/// Run::main(NAME, informers(&ctx.informers), &controller, queue, cfg.workers)
///     .queue(other_queue, 1, RetryPolicy::default(), |c, key| async move { c.other(key).await })
///     .run(&ctx)
///     .await
/// ```
///
/// [`Run::run`] logs the start, waits for every cache (on shutdown before they sync it shuts
/// the queues down and returns), runs every queue's workers, and on shutdown shuts every queue
/// down, lets the workers finish their current key and logs the stop: upstream's `Run`
/// (`cache.WaitForNamedCacheSync`, `wait.UntilWithContext` per worker, `queue.ShutDown`).
#[must_use = "a Run does nothing until `run` is awaited"]
pub struct Run<C> {
    name: &'static str,
    wait_for: Vec<SyncProbe>,
    controller: Arc<C>,
    queues: Vec<QueueWorkers>,
    /// Sharded mode's ring, set from the context when the run starts.
    gate: Arc<OnceLock<Arc<Shards>>>,
}

impl<C: Send + Sync + 'static> Run<C> {
    /// A run of the controller `name` (its canonical name, for logs) that waits for the
    /// caches of `wait_for`, usually the crate's `informers(&ctx.informers)`, and whose queues
    /// are synced by methods of `controller`.
    pub fn new(name: &'static str, wait_for: Vec<SyncProbe>, controller: &Arc<C>) -> Self {
        Self {
            name,
            wait_for,
            controller: controller.clone(),
            queues: Vec::new(),
            gate: Arc::new(OnceLock::new()),
        }
    }

    /// Adds `workers` workers on `queue`, each key synced by `sync(controller, key)` and its
    /// failures handled by `policy` (upstream's `handleErr`). Each sync's duration is logged
    /// at debug (upstream's deferred "Finished syncing" log).
    pub fn queue<K, E, F, Fut>(
        self,
        queue: WorkQueue<K>,
        workers: usize,
        policy: RetryPolicy<E>,
        sync: F,
    ) -> Self
    where
        K: QueueKey + fmt::Display,
        F: Fn(Arc<C>, K) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        self.add_queue(queue, workers, policy, sync, false)
    }

    /// [`Run::queue`]; with `record`, each sync's outcome and notes become the key's last
    /// decision ([`decisions`]).
    fn add_queue<K, E, F, Fut>(
        mut self,
        queue: WorkQueue<K>,
        workers: usize,
        policy: RetryPolicy<E>,
        sync: F,
        record: bool,
    ) -> Self
    where
        K: QueueKey + fmt::Display,
        F: Fn(Arc<C>, K) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        let (controller, name, gate) = (self.controller.clone(), self.name, self.gate.clone());
        let requeue = queue.clone();
        let each = move |key: K| {
            let sync = sync(controller.clone(), key.clone());
            let gate = gate.clone();
            let requeue = requeue.clone();
            async move {
                // Sharded mode: a namespaced key only while its range is held here, and the
                // range is not handed over while its sync runs. Cluster-scoped keys pass.
                // A key of a range still held whose window closed (a renewal late) waits for
                // the window to open again, a retry period later: nothing else brings it
                // back (the caches relist only when the held ranges change). A key of a
                // range not held is dropped; taking the range relists and requeues it.
                let _in_flight = match gate.get() {
                    Some(shards) => {
                        let text = key.to_string();
                        match split_key(&text).0 {
                            Some(ns) => match shards.begin_when_cached(ns).await {
                                Some(flight) => Some(flight),
                                None => {
                                    let range = shards.config().ring.range_of(ns);
                                    if shards.keeps(range) {
                                        tracing::debug!(controller = name, key = %text, "shard range's window closed; later");
                                        requeue.add_after(key, shards.config().retry_period);
                                    } else {
                                        tracing::debug!(controller = name, key = %text, "not in a shard range this replica holds");
                                    }
                                    return Ok(());
                                }
                            },
                            None => None,
                        }
                    }
                    None => None,
                };
                let started = tokio::time::Instant::now();
                let result = if record {
                    let (result, mut note) = decisions::noting(sync).await;
                    let outcome = match &result {
                        Ok(()) => decisions::Outcome::Synced,
                        Err(e) => {
                            let error = e.to_string();
                            crate::explain::refused::note_refusal(&mut note, &error);
                            decisions::Outcome::Failed { error }
                        }
                    };
                    let at = jiff::Timestamp::now().to_string();
                    decisions::global().record(name, &key.to_string(), outcome, note, at);
                    result
                } else {
                    sync.await
                };
                tracing::debug!(
                    controller = name,
                    %key,
                    elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "finished syncing"
                );
                result
            }
        };
        let stop = queue.clone();
        self.queues.push(QueueWorkers {
            workers,
            shut_down: Box::new(move || stop.shut_down()),
            run: Box::pin(run_workers_with(queue, workers, policy, each)),
        });
        self
    }

    /// Runs until `ctx.shutdown` (see [`Run`]). Always `Ok(())`: sync errors are retried
    /// and never end a controller; the result type is the crate's `start` signature.
    pub async fn run<E>(self, ctx: &ControllerContext) -> Result<(), E> {
        let Run {
            name,
            wait_for,
            queues,
            gate,
            ..
        } = self;
        if let Some(shards) = &ctx.shards {
            let _ = gate.set(shards.clone());
        }
        let workers = queues.first().map_or(0, |q| q.workers);
        tracing::info!(controller = name, workers, "starting controller");
        let (stops, runs): (Vec<_>, Vec<_>) =
            queues.into_iter().map(|q| (q.shut_down, q.run)).unzip();
        let shut_down = || stops.iter().for_each(|stop| stop());
        if !wait_for_caches(name, &ctx.shutdown, &wait_for).await {
            shut_down();
            return Ok(());
        }
        let all = futures::future::join_all(runs);
        tokio::pin!(all);
        tokio::select! {
            biased;
            _ = &mut all => {}
            () = ctx.shutdown.cancelled() => {
                shut_down();
                all.await;
            }
        }
        tracing::info!(controller = name, "shutting down controller");
        Ok(())
    }
}

impl<C: Reconcile> Run<C> {
    /// A run of `controller` (see [`Run::new`]) with its main queue: `workers` workers, each
    /// key synced by [`Reconcile::sync`] and retried per [`Reconcile::retry_policy`]. Each
    /// sync's outcome and notes are the key's last decision ([`decisions`]).
    pub fn main(
        name: &'static str,
        wait_for: Vec<SyncProbe>,
        controller: &Arc<C>,
        queue: WorkQueue<String>,
        workers: usize,
    ) -> Self {
        Self::new(name, wait_for, controller).add_queue(
            queue,
            workers,
            C::retry_policy(),
            |c: Arc<C>, key| async move { c.sync(key).await },
            true,
        )
    }
}

/// What [`run_controller`] runs.
pub struct RunSpec<K, E> {
    /// The controller's canonical name, for logs.
    pub name: &'static str,
    /// The controller's work queue; the event handlers feed it.
    pub queue: WorkQueue<K>,
    /// Worker tasks (`--concurrent-*-syncs`).
    pub workers: usize,
    /// How failed syncs are retried (upstream's `handleErr`).
    pub policy: RetryPolicy<E>,
    /// The informers the controller reads: usually the crate's `informers(&ctx.informers)`.
    pub wait_for: Vec<SyncProbe>,
}

/// A [`Run`] of one queue whose sync is a closure of the key alone. Subscribe the event
/// handlers before calling it.
pub async fn run_controller<K, E, F, Fut>(ctx: &ControllerContext, spec: RunSpec<K, E>, sync: F)
where
    K: QueueKey + fmt::Display,
    F: Fn(K) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    let RunSpec {
        name,
        queue,
        workers,
        policy,
        wait_for,
    } = spec;
    let sync = Arc::new(sync);
    let _: Result<(), std::convert::Infallible> = Run::new(name, wait_for, &sync)
        .queue(queue, workers, policy, |f: Arc<F>, key| f(key))
        .run(ctx)
        .await;
}

/// For a controller without a work queue (PodGC's periodic sweeps): logs the start, waits for
/// the caches of `wait_for` (returns at once on shutdown before they sync), then runs `body`,
/// which must end on `ctx.shutdown`, and logs the stop.
pub async fn run_when_synced<Fut>(
    ctx: &ControllerContext,
    name: &'static str,
    wait_for: Vec<SyncProbe>,
    body: impl FnOnce() -> Fut,
) where
    Fut: Future<Output = ()>,
{
    tracing::info!(controller = name, "starting controller");
    if !wait_for_caches(name, &ctx.shutdown, &wait_for).await {
        return;
    }
    body().await;
    tracing::info!(controller = name, "shutting down controller");
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::runtime::watcher;

    use super::*;
    use crate::cache::InformerFactory;
    use crate::queue::RateLimiter;

    fn offline_client() -> kube::Client {
        kube::Client::new(
            tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("no server"))
            }),
            "default",
        )
    }

    fn ctx() -> ControllerContext {
        let client = offline_client();
        ControllerContext::new(
            client.clone(),
            InformerFactory::new(client),
            CancellationToken::new(),
        )
    }

    fn synced<K: Informable>(informer: &Informer<K>) {
        informer.feed(watcher::Event::Init);
        informer.feed(watcher::Event::InitDone);
    }

    #[tokio::test]
    async fn probes_report_and_wait() {
        let informer = Informer::<ConfigMap>::detached();
        let probe = SyncProbe::of(informer.clone());
        assert_eq!(probe.resource, "configmaps");
        assert!(!probe.has_synced());
        let stop = CancellationToken::new();
        stop.cancel();
        assert!(!probe.wait_synced(&stop).await);
        synced(&informer);
        assert!(probe.has_synced() && (probe.synced)());
        assert!(probe.wait_synced(&CancellationToken::new()).await);
        assert!(format!("{probe:?}").contains("configmaps"));
    }

    #[tokio::test]
    async fn shutdown_before_sync_returns_without_syncing() {
        let ctx = ctx();
        let pods = Informer::<Pod>::detached();
        let queue = WorkQueue::<String>::new("test-unsynced", RateLimiter::Default);
        queue.add("ns/a".into());
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let run = run_controller(
            &ctx,
            RunSpec {
                name: "test-controller",
                queue: queue.clone(),
                workers: 2,
                policy: RetryPolicy::<String>::default(),
                wait_for: vec![SyncProbe::of(pods)],
            },
            move |_key: String| {
                let c = c.clone();
                async move {
                    c.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }
            },
        );
        ctx.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .expect("returns on shutdown");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert!(queue.is_shutting_down());
    }

    #[tokio::test]
    async fn runs_workers_after_sync_until_shutdown() {
        let ctx = ctx();
        let pods = Informer::<Pod>::detached();
        let maps = Informer::<ConfigMap>::detached();
        let queue = WorkQueue::<String>::new("test-synced", RateLimiter::Default);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let spec = RunSpec {
            name: "test-controller",
            queue: queue.clone(),
            workers: 2,
            policy: RetryPolicy::<String>::default(),
            wait_for: vec![SyncProbe::of(pods.clone()), SyncProbe::of(maps.clone())],
        };
        let task = {
            let ctx = ctx.clone();
            tokio::spawn(async move {
                run_controller(&ctx, spec, move |key: String| {
                    let tx = tx.clone();
                    async move {
                        let _ = tx.send(key);
                        Ok(())
                    }
                })
                .await;
            })
        };
        queue.add("ns/a".into());
        synced(&pods);
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "no sync before every cache synced");
        synced(&maps);
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert_eq!(got.ok().flatten().as_deref(), Some("ns/a"));
        ctx.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("stops on shutdown")
            .expect("no panic");
        assert!(queue.is_shutting_down());
    }

    #[tokio::test]
    async fn run_when_synced_runs_the_body_only_after_sync() {
        let ctx = ctx();
        let pods = Informer::<Pod>::detached();
        let ran = Arc::new(AtomicUsize::new(0));
        let stop = ctx.clone();
        stop.shutdown.cancel();
        let r = ran.clone();
        run_when_synced(
            &stop,
            "test",
            vec![SyncProbe::of(pods.clone())],
            || async move {
                r.fetch_add(1, Ordering::SeqCst);
            },
        )
        .await;
        assert_eq!(ran.load(Ordering::SeqCst), 0, "shut down before sync");

        let ctx = ControllerContext {
            shutdown: CancellationToken::new(),
            ..ctx
        };
        synced(&pods);
        let r = ran.clone();
        run_when_synced(&ctx, "test", vec![SyncProbe::of(pods)], || async move {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .await;
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn probes_list_the_tuple_in_order() {
        let factory = InformerFactory::new(offline_client());
        let both = probes::<(Pod, ConfigMap)>(&factory);
        let names: Vec<&str> = both.iter().map(|p| p.resource.as_str()).collect();
        assert_eq!(names, ["pods", "configmaps"]);
        assert_eq!(probes::<(ConfigMap,)>(&factory).len(), 1);
    }

    /// Sharded mode: a key of a range still held whose window closed (a renewal late) is
    /// not lost: it syncs once the window opens again. Without the requeue it waits for an
    /// event that may never come (found by the simulator, sharded-2 seed 14).
    #[tokio::test(start_paused = true)]
    async fn a_key_waits_out_a_closed_window_of_a_held_range() {
        use crate::shard::{Ring, ShardConfig, Shards};
        let ring = Ring::new(4).expect("ring");
        let shards = Shards::new(
            ShardConfig::with_defaults(ring, "kube-system", "me"),
            crate::clock::system(),
        );
        let range = ring.range_of("default");
        // Held (and cached), window closed.
        shards.set_held([(range, tokio::time::Instant::now())].into());
        shards.set_cached([range].into());
        let ctx = ControllerContext {
            shards: Some(shards.clone()),
            ..ctx()
        };
        let queue = WorkQueue::<String>::new("test-run-window", RateLimiter::Default);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let run = Run::new("test-controller", vec![], &Arc::new(tx)).queue(
            queue.clone(),
            1,
            RetryPolicy::default(),
            |tx, key: String| async move {
                let _ = tx.send(key);
                Ok::<(), String>(())
            },
        );
        let task = {
            let ctx = ctx.clone();
            tokio::spawn(async move { run.run::<String>(&ctx).await })
        };
        queue.add("default/a".into());
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(rx.try_recv().is_err(), "no sync while the window is closed");
        let reopened = tokio::time::Instant::now() + Duration::from_secs(60);
        shards.set_held([(range, reopened)].into());
        let synced = tokio::time::timeout(Duration::from_secs(3), rx.recv()).await;
        assert_eq!(synced.ok().flatten().as_deref(), Some("default/a"));
        ctx.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }

    /// Sharded mode: a namespaced key syncs only while its range is held, a cluster-scoped
    /// key always, and a held range counts its running sync (the handover waits for it).
    #[tokio::test]
    async fn sharded_workers_sync_only_their_ranges() {
        use crate::shard::{Ring, ShardConfig, Shards};
        let ring = Ring::new(4).expect("ring");
        // Two namespaces in different ranges (names that differ only in their last
        // characters mostly share a range: FNV-1a's high bits barely move with them).
        let mine = "default".to_owned();
        let other = ["kube-system", "payments", "search", "billing", "web"]
            .into_iter()
            .map(str::to_owned)
            .find(|ns| ring.range_of(ns) != ring.range_of(&mine))
            .expect("a namespace in another range");
        let shards = Shards::new(
            ShardConfig::with_defaults(ring, "kube-system", "me"),
            crate::clock::system(),
        );
        let until = tokio::time::Instant::now() + Duration::from_secs(3600);
        shards.assume_held([(ring.range_of(&mine), until)].into());
        let ctx = ControllerContext {
            shards: Some(shards.clone()),
            ..ctx()
        };
        let queue = WorkQueue::<String>::new("test-run-sharded", RateLimiter::Default);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, bool)>();
        let probe = (Arc::new(tx), shards.clone(), mine.clone());
        let run = Run::new("test-controller", vec![], &Arc::new(probe)).queue(
            queue.clone(),
            1,
            RetryPolicy::default(),
            |p, key: String| async move {
                let (tx, shards, mine) = &*p;
                // While this sync runs, its range must count it as in flight.
                let counted = shards.in_flight_on(shards.config().ring.range_of(mine)) > 0;
                let _ = tx.send((key, counted));
                Ok::<(), String>(())
            },
        );
        let task = {
            let ctx = ctx.clone();
            tokio::spawn(async move { run.run::<String>(&ctx).await })
        };
        queue.add(format!("{other}/b"));
        queue.add(format!("{mine}/a"));
        queue.add("node-1".into());
        let mut got = Vec::new();
        for _ in 0..2 {
            let next = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
            got.push(next.ok().flatten().unwrap_or_default());
        }
        got.sort();
        assert_eq!(
            got,
            [(format!("{mine}/a"), true), ("node-1".to_owned(), false)]
        );
        assert!(
            rx.try_recv().is_err(),
            "the other range's key is not synced"
        );
        assert_eq!(
            shards.in_flight_on(ring.range_of(&mine)),
            0,
            "done syncs leave"
        );
        ctx.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }

    #[tokio::test]
    async fn a_run_drains_every_queue_with_its_own_sync_and_stops_them_all() {
        let ctx = ctx();
        let pods = Informer::<Pod>::detached();
        let main = WorkQueue::<String>::new("test-run-main", RateLimiter::Default);
        let side = WorkQueue::<String>::new("test-run-side", RateLimiter::Default);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let tx = Arc::new(tx);
        let run = Run::new("test-controller", vec![SyncProbe::of(pods.clone())], &tx)
            .queue(
                main.clone(),
                2,
                RetryPolicy::default(),
                |tx, key: String| async move {
                    let _ = tx.send(format!("main {key}"));
                    Ok::<(), String>(())
                },
            )
            .queue(
                side.clone(),
                1,
                RetryPolicy::default(),
                |tx, key: String| async move {
                    let _ = tx.send(format!("side {key}"));
                    Ok::<(), String>(())
                },
            );
        let task = {
            let ctx = ctx.clone();
            tokio::spawn(async move { run.run::<String>(&ctx).await })
        };
        main.add("ns/a".into());
        side.add("node-1".into());
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "no sync before the caches synced");
        synced(&pods);
        let mut got = Vec::new();
        for _ in 0..2 {
            let next = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
            got.push(next.ok().flatten().unwrap_or_default());
        }
        got.sort();
        assert_eq!(got, ["main ns/a", "side node-1"]);
        ctx.shutdown.cancel();
        let done = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("stops on shutdown")
            .expect("no panic");
        assert_eq!(done, Ok(()));
        assert!(main.is_shutting_down() && side.is_shutting_down());
    }

    /// Counts syncs per key; "ns/gone" fails with an error its policy gives up on, "ns/retry"
    /// with one it retries.
    #[derive(Default)]
    struct Recorder(std::sync::Mutex<std::collections::BTreeMap<String, usize>>);

    impl Recorder {
        fn count(&self, key: &str) -> usize {
            self.0
                .lock()
                .map(|m| m.get(key).copied().unwrap_or(0))
                .unwrap_or(0)
        }
    }

    impl Reconcile for Recorder {
        type Error = String;

        fn retry_policy() -> RetryPolicy<String> {
            RetryPolicy::default().give_up_on(|e: &String| e == "gone")
        }

        async fn sync(&self, key: String) -> Result<(), String> {
            if let Ok(mut m) = self.0.lock() {
                *m.entry(key.clone()).or_default() += 1;
            }
            match key.as_str() {
                "ns/gone" => Err("gone".into()),
                "ns/retry" => Err("again".into()),
                _ => Ok(()),
            }
        }
    }

    #[tokio::test]
    async fn a_main_run_syncs_through_reconcile_and_retries_per_its_policy() {
        let ctx = ctx();
        let pods = Informer::<Pod>::detached();
        let queue = WorkQueue::<String>::new("test-run-reconcile", RateLimiter::Default);
        let rec = Arc::new(Recorder::default());
        let run = Run::main(
            "test-controller",
            vec![SyncProbe::of(pods.clone())],
            &rec,
            queue.clone(),
            1,
        );
        let task = {
            let ctx = ctx.clone();
            tokio::spawn(async move { run.run::<String>(&ctx).await })
        };
        synced(&pods);
        for key in ["ns/gone", "ns/retry", "ns/ok"] {
            queue.add(key.into());
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while rec.count("ns/retry") < 3 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            rec.count("ns/retry") >= 3,
            "a retried error is synced again"
        );
        assert_eq!(rec.count("ns/gone"), 1, "the policy gives this error up");
        assert_eq!(rec.count("ns/ok"), 1);
        ctx.shutdown.cancel();
        let done = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(matches!(done, Ok(Ok(Ok(())))));
    }

    #[tokio::test]
    async fn a_run_shut_down_before_sync_shuts_every_queue_down() {
        let ctx = ctx();
        let pods = Informer::<Pod>::detached();
        let main = WorkQueue::<String>::new("test-run-unsynced-a", RateLimiter::Default);
        let side = WorkQueue::<String>::new("test-run-unsynced-b", RateLimiter::Default);
        let unit = Arc::new(());
        let never = |_: Arc<()>, _key: String| async { Err::<(), String>("synced".into()) };
        let run = Run::new("test-controller", vec![SyncProbe::of(pods)], &unit)
            .queue(main.clone(), 1, RetryPolicy::default(), never)
            .queue(side.clone(), 1, RetryPolicy::default(), never);
        ctx.shutdown.cancel();
        let done = tokio::time::timeout(Duration::from_secs(5), run.run::<String>(&ctx)).await;
        assert_eq!(done, Ok(Ok(())));
        assert!(main.is_shutting_down() && side.is_shutting_down());
    }

    #[tokio::test]
    async fn subscribe_with_calls_the_method_of_the_shared_controller() {
        struct Counter(AtomicUsize);
        impl Counter {
            fn on_map(&self, _change: crate::cache::Change<ConfigMap>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let maps = Informer::<ConfigMap>::detached();
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        maps.subscribe_with(&counter, Counter::on_map);
        maps.feed(watcher::Event::Init);
        maps.feed(watcher::Event::InitApply(ConfigMap::default()));
        maps.feed(watcher::Event::InitDone);
        let seen = tokio::time::timeout(Duration::from_secs(5), async {
            while counter.0.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(seen.is_ok(), "the handler saw the added object");
    }
}
