//! [`Controllers`]: in-process controllers on one informer factory of their own.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use rkcm_runtime::cache::{InformerFactory, Scope, ShardScope};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::queue::flowcontrol::RateLimiter;
use rkcm_runtime::shard::{Ring, ShardConfig, Shards};
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
///
/// With `RKCM_TEST_SHARD_REPLICAS=R` (R ≥ 1) every controller runs as R sharded replicas, as
/// `--rkcm-shards` runs them: each replica has its own shard holder over real Leases in the
/// test's first namespace (a ring of `RKCM_TEST_SHARD_RANGES` ranges, 8 by default, short
/// lease timings), its own informers over the held ranges of the test's namespaces, and the
/// shard view in its context. A suite then passes only if the replicas hand its namespaces
/// over between them correctly.
pub struct Controllers {
    replicas: Vec<Replica>,
    handles: Vec<(String, JoinHandle<Result<(), String>>)>,
}

/// One replica: its context, its informers and, sharded, its holder task.
struct Replica {
    ctx: ControllerContext,
    informers: InformerFactory,
    holder: Option<(CancellationToken, JoinHandle<()>)>,
}

/// The sharded replicas' lease timings: short, so that the split settles within a test's
/// first seconds (upstream's leader election keeps the same proportions, 15 s / 10 s / 2 s).
const SHARD_LEASE: Duration = Duration::from_secs(6);
const SHARD_RENEW: Duration = Duration::from_secs(4);
const SHARD_RETRY: Duration = Duration::from_millis(800);

/// `RKCM_TEST_SHARD_REPLICAS` and `RKCM_TEST_SHARD_RANGES`: `None` when unset or 0.
fn shard_setting() -> Option<(usize, u32)> {
    let replicas: usize = std::env::var("RKCM_TEST_SHARD_REPLICAS")
        .ok()?
        .parse()
        .ok()
        .filter(|r| *r > 0)?;
    let ranges = std::env::var("RKCM_TEST_SHARD_RANGES")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(8);
    Some((replicas, ranges))
}

impl Controllers {
    /// Controllers writing with `client` and watching with it too, on informers scoped to
    /// `namespaces`.
    pub fn new(client: kube::Client, namespaces: &[&str]) -> Self {
        Self::with_clients(client.clone(), client, namespaces)
    }

    /// Controllers writing with `client` and whose informers list and watch with
    /// `informer_client` (e.g. one that delays watch events), scoped to `namespaces`.
    ///
    /// # Panics
    /// Sharded (`RKCM_TEST_SHARD_REPLICAS`), when `namespaces` is empty or
    /// `RKCM_TEST_SHARD_RANGES` is out of 1..=1024.
    pub fn with_clients(
        client: kube::Client,
        informer_client: kube::Client,
        namespaces: &[&str],
    ) -> Self {
        let shutdown = CancellationToken::new();
        let Some((count, ranges)) = shard_setting() else {
            let informers = InformerFactory::scoped(informer_client, Scope::namespaces(namespaces));
            let ctx = ControllerContext::new(client, informers.clone(), shutdown);
            return Self {
                replicas: vec![Replica {
                    ctx,
                    informers,
                    holder: None,
                }],
                handles: Vec::new(),
            };
        };
        Self::sharded(vec![client; count], informer_client, namespaces, ranges)
    }

    /// Sharded replicas, one per client of `clients` (each writes with its own), on a ring of
    /// `ranges` ranges over real Leases in the first of `namespaces`; each replica's informers
    /// hold the objects of `namespaces` in the ranges it holds.
    ///
    /// # Panics
    /// When `namespaces` is empty or `ranges` is out of 1..=1024.
    pub fn sharded(
        clients: Vec<kube::Client>,
        informer_client: kube::Client,
        namespaces: &[&str],
        ranges: u32,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let ring = Ring::new(ranges).expect("a ring of 1 to 1024 ranges");
        let lease_namespace = namespaces
            .first()
            .expect("sharded test controllers need a namespace for their leases");
        let replicas = clients
            .into_iter()
            .enumerate()
            .map(|(i, client)| {
                let shards = Shards::new(
                    ShardConfig {
                        lease_duration: SHARD_LEASE,
                        renew_deadline: SHARD_RENEW,
                        retry_period: SHARD_RETRY,
                        ..ShardConfig::with_defaults(ring, lease_namespace, &format!("replica-{i}"))
                    },
                    rkcm_runtime::clock::system(),
                );
                let stop = CancellationToken::new();
                let task = tokio::spawn(shards.clone().run(client.clone(), stop.clone()));
                let informers = InformerFactory::scoped(
                    informer_client.clone(),
                    Scope::ShardsIn(
                        ShardScope(shards.clone()),
                        namespaces.iter().map(|n| (*n).to_owned()).collect(),
                    ),
                );
                let mut ctx = ControllerContext::new(client, informers.clone(), shutdown.clone());
                ctx.shards = Some(shards);
                Replica {
                    ctx,
                    informers,
                    holder: Some((stop, task)),
                }
            })
            .collect();
        Self {
            replicas,
            handles: Vec::new(),
        }
    }

    /// Each replica's shard view (empty when not sharded).
    pub fn shards(&self) -> Vec<Arc<Shards>> {
        self.replicas
            .iter()
            .filter_map(|r| r.ctx.shards.clone())
            .collect()
    }

    /// The context controllers get (client, informers, shutdown, clock): the first replica's.
    pub fn context(&self) -> ControllerContext {
        self.replicas[0].ctx.clone()
    }

    /// Controllers added from now on read time from `clock` (e.g. an
    /// [`OffsetClock`](super::OffsetClock)) instead of the system clock.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        for r in &mut self.replicas {
            r.ctx.clock = clock.clone();
        }
        self
    }

    /// Controllers added from now on see `budget` as their client's token bucket
    /// ([`ControllerContext::budget`]), e.g. a drained one to put their status pacers under
    /// pressure. Their requests are not throttled by it.
    pub fn with_budget(mut self, budget: Arc<RateLimiter>) -> Self {
        for r in &mut self.replicas {
            r.ctx.budget = Some(budget.clone());
        }
        self
    }

    /// Starts controller `name` (in every replica): `start` gets the context and returns its
    /// run future.
    pub fn spawn<F, Fut, E>(mut self, name: &str, start: F) -> Self
    where
        F: Fn(ControllerContext) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        for (i, replica) in self.replicas.iter().enumerate() {
            let mut run = Box::pin(start(replica.ctx.clone()));
            // The binary declares every controller's informers (and the fields each keeps)
            // before it starts the factory. A controller declares them before its first
            // await, so one poll here does the same before `run`: without it the factory
            // could start first and relist once the declaration arrives, which the binary
            // never does. A spawned task is polled again at once, so the waker of this first
            // poll is not needed.
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
            let label = if self.replicas.len() > 1 {
                format!("{name} (replica {i})")
            } else {
                name.to_owned()
            };
            self.handles.push((label, handle));
        }
        self
    }

    /// Starts the informers every controller asked for.
    pub fn run(self) -> Self {
        for r in &self.replicas {
            r.informers.start(r.ctx.shutdown.clone());
        }
        self
    }

    /// Stops every controller and checks that each ended cleanly within [`STOP_WITHIN`];
    /// sharded, then hands the ranges over.
    pub async fn stop(mut self) -> Result<()> {
        self.context().shutdown.cancel();
        for (name, handle) in self.handles.drain(..) {
            tokio::time::timeout(STOP_WITHIN, handle)
                .await
                .with_context(|| format!("{name} did not stop within {STOP_WITHIN:?} of shutdown"))?
                .with_context(|| format!("{name} panicked"))?
                .map_err(|e| anyhow!("{name} returned an error: {e}"))?;
        }
        for r in &mut self.replicas {
            if let Some((stop, task)) = r.holder.take() {
                stop.cancel();
                tokio::time::timeout(STOP_WITHIN, task)
                    .await
                    .context("a shard holder did not hand its ranges over in time")?
                    .context("a shard holder panicked")?;
            }
        }
        Ok(())
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        for r in &self.replicas {
            r.ctx.shutdown.cancel();
            if let Some((stop, _)) = &r.holder {
                stop.cancel();
            }
        }
    }
}
