//! A bound on the requests one client has in flight (`--rkcm-kube-api-concurrency`).
//!
//! kube's client speaks HTTP/1.1 through hyper's connection pool: every request in flight
//! holds a connection of its own, with its read and write buffers and TLS session, and the
//! pool keeps each one for 90 s after its last use. A burst of writes (a ReplicaSet's
//! slow-start batch, a DaemonSet's rollout) therefore opened as many connections as it had
//! requests at once, and they were the largest part of the heap at the envelope's peak. With
//! at most `limit` requests of a client in flight, the client never holds more than `limit`
//! connections besides its watches. client-go multiplexes a client's requests over one
//! HTTP/2 connection instead.
//!
//! A request holds its permit until its response body has been read to the end or dropped:
//! hyper hands the connection back to the pool only then. Watches are not counted (each is
//! a long-lived connection of its own by design, opened once per informer).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use kube::client::Body;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{BoxError, Layer, Service};

use super::service::{call_inner, is_watch};

/// Requests a client has in flight at most, by default: no bound (0).
pub const DEFAULT_CONCURRENCY: usize = 0;

/// The bound [`InflightLayer::configured`] uses; 0 means none.
static CONCURRENCY: AtomicUsize = AtomicUsize::new(DEFAULT_CONCURRENCY);

/// Sets the bound for every client built from now on (`--rkcm-kube-api-concurrency`; 0: no
/// bound).
pub fn set_concurrency(limit: usize) {
    CONCURRENCY.store(limit, Ordering::Relaxed);
}

/// The bound clients are built with now.
pub fn concurrency() -> usize {
    CONCURRENCY.load(Ordering::Relaxed)
}

/// Bounds the requests in flight through one client (see the module's documentation).
#[derive(Clone)]
pub struct InflightLayer {
    permits: Option<Arc<Semaphore>>,
}

impl InflightLayer {
    /// At most `limit` requests in flight (0: no bound).
    pub fn new(limit: usize) -> Self {
        Self {
            permits: (limit > 0).then(|| Arc::new(Semaphore::new(limit))),
        }
    }

    /// The process-wide bound ([`set_concurrency`]).
    pub fn configured() -> Self {
        Self::new(concurrency())
    }
}

impl<S> Layer<S> for InflightLayer {
    type Service = InflightService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        InflightService {
            inner: Arc::new(Mutex::new(inner)),
            permits: self.permits.clone(),
        }
    }
}

/// The service of [`InflightLayer`]. The inner service sits behind a mutex (kube's stack is
/// not `Clone`) held only for `poll_ready` + `call`.
pub struct InflightService<S> {
    inner: Arc<Mutex<S>>,
    permits: Option<Arc<Semaphore>>,
}

impl<S> Clone for InflightService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            permits: self.permits.clone(),
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl<S, B> Service<Request<Body>> for InflightService<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    type Response = Response<Permitted<B>>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The inner service's readiness is awaited inside the future, after the permit.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let permits = self.permits.clone().filter(|_| !is_watch(req.uri()));
        Box::pin(async move {
            let permit = match permits {
                Some(p) => Some(
                    p.acquire_owned()
                        .await
                        .map_err(|e| BoxError::from(format!("client request bound: {e}")))?,
                ),
                None => None,
            };
            let resp = call_inner(&inner, req).await?;
            Ok(resp.map(|body| Permitted { body, permit }))
        })
    }
}

/// A response body that gives its request's permit back once read to the end (or dropped).
pub struct Permitted<B> {
    body: B,
    permit: Option<OwnedSemaphorePermit>,
}

impl<B> HttpBody for Permitted<B>
where
    B: HttpBody + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            this.permit = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests;
