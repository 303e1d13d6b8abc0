//! What the manager hands each controller when it starts it.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::cache::InformerFactory;
use crate::clock::SharedClock;
use crate::queue::flowcontrol::RateLimiter;
use crate::shard::Shards;

/// Everything a controller needs from the process.
#[derive(Clone)]
pub struct ControllerContext {
    /// An API client of this controller's own, with its own QPS/burst token bucket and a
    /// user agent naming the controller.
    pub client: kube::Client,
    /// The token bucket of `client` (`None`: unlimited). Controllers pace routine status
    /// writes by it ([`crate::queue::pacing::StatusPacer::with_budget`]); they never take from it.
    pub budget: Option<Arc<RateLimiter>>,
    /// The process-wide informers: ask for a type here, never open a watch yourself. Tests
    /// pass a factory scoped to their namespace ([`InformerFactory::namespaced`]).
    pub informers: InformerFactory,
    /// Cancelled when the process shuts down: stop taking keys and return.
    pub shutdown: CancellationToken,
    pub clock: SharedClock,
    /// Sharded mode's view of the ring (`None`: one replica does everything): the workers
    /// sync a namespaced key only while this replica holds its namespace's range.
    pub shards: Option<Arc<Shards>>,
}

impl ControllerContext {
    /// A context on the system clock.
    pub fn new(
        client: kube::Client,
        informers: InformerFactory,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            client,
            budget: None,
            informers,
            shutdown,
            clock: crate::clock::system(),
            shards: None,
        }
    }
}
