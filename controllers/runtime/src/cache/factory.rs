//! The process-wide set of informers: one per type, started together.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::cache::informer::Informer;
use crate::cache::source::{ContentType, ListMode, Scope, Source};
use crate::cache::store::Informable;
use crate::shard::Shards;

/// The process-wide set of informers.
#[derive(Clone)]
pub struct InformerFactory {
    inner: Arc<FactoryInner>,
}

struct FactoryInner {
    client: kube::Client,
    source: Source,
    state: Mutex<FactoryState>,
}

#[derive(Default)]
struct FactoryState {
    /// In the order requested, so that they start in that order (a start order that varied
    /// from run to run would keep the deterministic simulation from replaying a seed).
    informers: Vec<(TypeId, Arc<dyn ErasedInformer>)>,
    /// Set by `start`: later informers start at once with this token on this runtime.
    started: Option<(CancellationToken, Handle)>,
}

/// An informer of any type, as the factory keeps it.
trait ErasedInformer: Send + Sync {
    fn start(
        &self,
        client: &kube::Client,
        source: &Source,
        shutdown: &CancellationToken,
        runtime: &Handle,
    );
    fn as_any(&self) -> &dyn Any;
    fn follow_ranges(&self, held: &BTreeSet<u32>);
    fn wait_covering(&self, ranges: BTreeSet<u32>) -> futures::future::BoxFuture<'static, ()>;
    fn count_by_namespace(&self) -> Vec<(String, usize)>;
}

impl<K: Informable> ErasedInformer for Informer<K> {
    fn start(
        &self,
        client: &kube::Client,
        source: &Source,
        shutdown: &CancellationToken,
        runtime: &Handle,
    ) {
        self.start_on(client.clone(), source.clone(), shutdown.clone(), runtime);
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn follow_ranges(&self, held: &BTreeSet<u32>) {
        Informer::follow_ranges(self, held);
    }
    fn wait_covering(&self, ranges: BTreeSet<u32>) -> futures::future::BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move { informer.wait_covering(&ranges).await })
    }
    fn count_by_namespace(&self) -> Vec<(String, usize)> {
        self.store().count_by_namespace()
    }
}

impl InformerFactory {
    pub fn new(client: kube::Client) -> Self {
        Self::with_list_mode(client, ListMode::default())
    }

    /// A factory whose informers list the given way.
    pub fn with_list_mode(client: kube::Client, list_mode: ListMode) -> Self {
        Self::with_options(client, list_mode, ContentType::default())
    }

    /// A factory whose informers list the given way, asking for `content_type`.
    pub fn with_options(
        client: kube::Client,
        list_mode: ListMode,
        content_type: ContentType,
    ) -> Self {
        Self::scoped_with(client, Scope::Cluster, list_mode, content_type)
    }

    /// A factory whose informers hold only objects of namespace `ns` (and every object of a
    /// cluster-scoped type). For tests sharing a cluster.
    pub fn namespaced(client: kube::Client, ns: &str) -> Self {
        Self::scoped(client, Scope::namespace(ns))
    }

    /// A factory whose informers hold only the objects `scope` admits.
    pub fn scoped(client: kube::Client, scope: Scope) -> Self {
        Self::scoped_with(client, scope, ListMode::default(), ContentType::default())
    }

    /// [`InformerFactory::scoped`], listing the given way and asking for `content_type`.
    pub fn scoped_with(
        client: kube::Client,
        scope: Scope,
        list_mode: ListMode,
        content_type: ContentType,
    ) -> Self {
        Self::build(
            client,
            Source {
                list_mode,
                scope,
                content_type,
            },
        )
    }

    fn build(client: kube::Client, source: Source) -> Self {
        Self {
            inner: Arc::new(FactoryInner {
                client,
                source,
                state: Mutex::new(FactoryState::default()),
            }),
        }
    }

    /// A new factory on the same client, listing and decoding the same way, whose informers
    /// hold only what `scope` admits.
    pub fn rescoped(&self, scope: Scope) -> Self {
        Self::build(
            self.inner.client.clone(),
            Source {
                scope,
                ..self.inner.source.clone()
            },
        )
    }

    /// Which objects this factory's informers hold.
    pub fn scope(&self) -> &Scope {
        &self.inner.source.scope
    }

    /// The informer for `K` (every object the factory's [`Scope`] admits), created on first
    /// request.
    pub fn informer<K: Informable>(&self) -> Informer<K> {
        let mut state = self.inner.state.lock();
        let type_id = TypeId::of::<K>();
        if let Some(existing) = state
            .informers
            .iter()
            .find(|(id, _)| *id == type_id)
            .and_then(|(_, erased)| erased.as_any().downcast_ref::<Informer<K>>())
        {
            return existing.clone();
        }
        let informer = Informer::<K>::detached();
        if let Some((shutdown, runtime)) = &state.started {
            informer.start_on(
                self.inner.client.clone(),
                self.inner.source.clone(),
                shutdown.clone(),
                runtime,
            );
        }
        state.informers.push((type_id, Arc::new(informer.clone())));
        informer
    }

    /// Starts every informer requested so far; later requests start at once.
    ///
    /// Informers run on the Tokio runtime this is called from until `shutdown` is cancelled.
    /// Calling it again starts nothing new: the first token and runtime stay in force.
    ///
    /// # Panics
    /// When called outside a Tokio runtime.
    pub fn start(&self, shutdown: CancellationToken) {
        let mut state = self.inner.state.lock();
        let (shutdown, runtime) = state
            .started
            .get_or_insert_with(|| (shutdown, Handle::current()))
            .clone();
        for (_, informer) in &state.informers {
            informer.start(&self.inner.client, &self.inner.source, &shutdown, &runtime);
        }
        if let Some(shards) = self.inner.source.scope.shards() {
            runtime.spawn(
                self.clone()
                    .relist_on_handover(shards.clone(), shutdown.clone()),
            );
            runtime.spawn(self.clone().count_objects(shards.clone(), shutdown));
        }
    }

    /// Sharded mode: the informers follow the held ranges (each drops the ranges handed over
    /// and lists only the ranges taken, see [`Informer::follow_ranges`]). A range counts as
    /// cached ([`Shards::set_cached`]; only then does the replica act on it) once every
    /// informer completed a list that covers it: a replica that just took a range must not
    /// sync its objects on a cache that does not hold them yet.
    async fn relist_on_handover(self, shards: Arc<Shards>, shutdown: CancellationToken) {
        loop {
            let held = shards.held_ranges();
            let informers = self.informers();
            for informer in &informers {
                informer.follow_ranges(&held);
            }
            let covered =
                futures::future::join_all(informers.iter().map(|i| i.wait_covering(held.clone())));
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                () = shards.changed(&held) => {}
                _ = covered => {
                    shards.set_cached(held.clone());
                    tokio::select! {
                        biased;
                        () = shutdown.cancelled() => return,
                        () = shards.moved_from(&held) => {}
                    }
                }
            }
            tracing::info!(ranges = ?shards.held_ranges(), "held shard ranges changed");
        }
    }

    /// Sharded mode: counts the cached objects of every cached range each lease duration,
    /// for the holder to publish on its member Lease (the ring balances by them).
    async fn count_objects(self, shards: Arc<Shards>, shutdown: CancellationToken) {
        let every = shards.config().lease_duration;
        loop {
            shards.set_objects(self.objects_by_range(&shards));
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    }

    /// The objects every informer caches, by cached range.
    fn objects_by_range(&self, shards: &Shards) -> BTreeMap<u32, u64> {
        let cached = shards.cached();
        let ring = shards.config().ring;
        let mut objects: BTreeMap<u32, u64> = cached.iter().map(|r| (*r, 0)).collect();
        for informer in self.informers() {
            for (namespace, n) in informer.count_by_namespace() {
                if let Some(count) = objects.get_mut(&ring.range_of(&namespace)) {
                    *count += u64::try_from(n).unwrap_or(u64::MAX);
                }
            }
        }
        objects
    }

    fn informers(&self) -> Vec<Arc<dyn ErasedInformer>> {
        self.inner
            .state
            .lock()
            .informers
            .iter()
            .map(|(_, i)| i.clone())
            .collect()
    }
}
