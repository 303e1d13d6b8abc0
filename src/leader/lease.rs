//! Lease storage: the four calls the elector makes, behind a trait so the algorithm can be
//! tested against an in-memory apiserver with paused time.

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};

pub(super) type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The four calls the elector makes, so the algorithm can be tested against an in-memory
/// apiserver with paused time.
pub(super) trait LeaseBackend: Send + Sync + 'static {
    fn get(&self) -> BoxFut<'_, kube::Result<Option<Lease>>>;
    fn create(&self, lease: Lease) -> BoxFut<'_, kube::Result<Lease>>;
    /// PUT; the object's resourceVersion makes it conditional.
    fn replace(&self, lease: Lease) -> BoxFut<'_, kube::Result<Lease>>;
    fn create_event(&self, event: Event) -> BoxFut<'_, kube::Result<()>>;
}

pub(super) struct KubeBackend {
    pub(super) leases: Api<Lease>,
    pub(super) events: Api<Event>,
    pub(super) name: String,
}

impl LeaseBackend for KubeBackend {
    fn get(&self) -> BoxFut<'_, kube::Result<Option<Lease>>> {
        Box::pin(self.leases.get_opt(&self.name))
    }
    fn create(&self, lease: Lease) -> BoxFut<'_, kube::Result<Lease>> {
        Box::pin(async move { self.leases.create(&PostParams::default(), &lease).await })
    }
    fn replace(&self, lease: Lease) -> BoxFut<'_, kube::Result<Lease>> {
        Box::pin(async move {
            self.leases
                .replace(&self.name, &PostParams::default(), &lease)
                .await
        })
    }
    fn create_event(&self, event: Event) -> BoxFut<'_, kube::Result<()>> {
        Box::pin(async move {
            self.events
                .create(&PostParams::default(), &event)
                .await
                .map(|_| ())
        })
    }
}
