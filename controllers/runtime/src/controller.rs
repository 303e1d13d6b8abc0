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

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::context::ControllerContext;
use crate::informer::{Informable, Informer};
use crate::workqueue::{QueueKey, RetryPolicy, WorkQueue, run_workers_with};

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

/// Runs a queue-driven controller until `ctx.shutdown`: logs the start, waits for the caches of
/// `spec.wait_for` (returns at once, with the queue shut down, on shutdown before they sync),
/// runs `spec.workers` workers calling `sync` for each key with `spec.policy`, and on shutdown
/// shuts the queue down, waits for the workers to finish their current key and logs the stop.
/// Subscribe the event handlers before calling it.
pub async fn run_controller<K, E, F, Fut>(ctx: &ControllerContext, spec: RunSpec<K, E>, sync: F)
where
    K: QueueKey,
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
    tracing::info!(controller = name, workers, "starting controller");
    if !wait_for_caches(name, &ctx.shutdown, &wait_for).await {
        queue.shut_down();
        return;
    }
    let run = run_workers_with(queue.clone(), workers, policy, sync);
    tokio::pin!(run);
    tokio::select! {
        () = &mut run => {}
        () = ctx.shutdown.cancelled() => {
            queue.shut_down();
            run.await;
        }
    }
    tracing::info!(controller = name, "shutting down controller");
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
    use crate::informer::InformerFactory;
    use crate::workqueue::RateLimiter;

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
}
