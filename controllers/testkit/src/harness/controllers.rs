//! [`Controllers`]: in-process controllers on one informer factory of their own.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use rkcm_runtime::cache::{InformerFactory, Scope};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::queue::flowcontrol::RateLimiter;
use rkcm_runtime::{CancellationToken, ControllerContext};
use tokio::task::JoinHandle;

/// How long a controller may take to end after shutdown.
pub const STOP_WITHIN: Duration = Duration::from_secs(10);

/// A set of controllers running in the test process on one informer factory of their own,
/// as the rkcm binary runs them. Build it with [`Controllers::new`] (or
/// [`Controllers::with_clients`]), add controllers with [`Controllers::spawn`], then
/// [`Controllers::run`] starts the informers. Stopped when dropped; [`Controllers::stop`]
/// also checks that each controller ended cleanly and promptly.
///
/// The informers are scoped to the test's namespaces (cluster-scoped kinds such as nodes stay
/// cluster-wide), so the controllers never see, and never act on, other tests' objects.
pub struct Controllers {
    ctx: ControllerContext,
    informers: InformerFactory,
    handles: Vec<(String, JoinHandle<Result<(), String>>)>,
}

impl Controllers {
    /// Controllers writing with `client` and watching with it too, on informers scoped to
    /// `namespaces`.
    pub fn new(client: kube::Client, namespaces: &[&str]) -> Self {
        Self::with_clients(client.clone(), client, namespaces)
    }

    /// Controllers writing with `client` and whose informers list and watch with
    /// `informer_client` (e.g. one that delays watch events), scoped to `namespaces`.
    pub fn with_clients(
        client: kube::Client,
        informer_client: kube::Client,
        namespaces: &[&str],
    ) -> Self {
        let informers = InformerFactory::scoped(informer_client, Scope::namespaces(namespaces));
        let ctx = ControllerContext::new(client, informers.clone(), CancellationToken::new());
        Self {
            ctx,
            informers,
            handles: Vec::new(),
        }
    }

    /// The context controllers get (client, informers, shutdown, clock).
    pub fn context(&self) -> ControllerContext {
        self.ctx.clone()
    }

    /// Controllers added from now on read time from `clock` (e.g. an
    /// [`OffsetClock`](super::OffsetClock)) instead of the system clock.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.ctx.clock = clock;
        self
    }

    /// Controllers added from now on see `budget` as their client's token bucket
    /// ([`ControllerContext::budget`]), e.g. a drained one to put their status pacers under
    /// pressure. Their requests are not throttled by it.
    pub fn with_budget(mut self, budget: Arc<RateLimiter>) -> Self {
        self.ctx.budget = Some(budget);
        self
    }

    /// Starts controller `name`: `start` gets the context and returns its run future.
    pub fn spawn<F, Fut, E>(mut self, name: &str, start: F) -> Self
    where
        F: FnOnce(ControllerContext) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        let mut run = Box::pin(start(self.ctx.clone()));
        // The binary declares every controller's informers (and the fields each keeps) before
        // it starts the factory. A controller declares them before its first await, so one
        // poll here does the same before `run`: without it the factory could start first and
        // relist once the declaration arrives, which the binary never does. A spawned task is
        // polled again at once, so the waker of this first poll is not needed.
        let first = run
            .as_mut()
            .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        let handle = match first {
            Poll::Ready(done) => {
                let done = done.map_err(|e| e.to_string());
                tokio::spawn(async move { done })
            }
            Poll::Pending => tokio::spawn(async move { run.await.map_err(|e| e.to_string()) }),
        };
        self.handles.push((name.to_owned(), handle));
        self
    }

    /// Starts the informers every controller asked for.
    pub fn run(self) -> Self {
        self.informers.start(self.ctx.shutdown.clone());
        self
    }

    /// Stops every controller and checks that each ended cleanly within [`STOP_WITHIN`].
    pub async fn stop(mut self) -> Result<()> {
        self.ctx.shutdown.cancel();
        for (name, handle) in self.handles.drain(..) {
            tokio::time::timeout(STOP_WITHIN, handle)
                .await
                .with_context(|| format!("{name} did not stop within {STOP_WITHIN:?} of shutdown"))?
                .with_context(|| format!("{name} panicked"))?
                .map_err(|e| anyhow!("{name} returned an error: {e}"))?;
        }
        Ok(())
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        self.ctx.shutdown.cancel();
    }
}
