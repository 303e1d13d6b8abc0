//! The write fence of sharded mode: a client layer that sends a write for a namespaced
//! object only while this replica's window on the namespace's range is open.
//!
//! The workers check the range when a sync begins ([`Shards::begin`]), but a sync may outlive
//! the window: a request held up for longer than the renew deadline (a partition that ends,
//! a stalled process) returns an error, and the sync's next request, a retry or its next
//! write, would go out after the lease ran out and another replica took the range. The fence
//! judges every write when it is sent: refused, it fails like a broken connection (nothing
//! reached the server), the sync fails and its key is requeued, and the next attempt stops
//! at [`Shards::begin`]. A write sent inside the window may still land after it closes; the
//! lease duration's margin over the renew deadline is for that.
//!
//! Reads pass, and so do writes of cluster-scoped objects. A controller that writes across
//! namespaces on purpose (PodGC's cluster-wide pass) is not fenced.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request};
use tower::{BoxError, Layer, Service};

use super::Shards;

/// The namespace a request writes in: `Some` for a create, update, patch or delete of a
/// namespaced resource (`/api/v1/namespaces/{ns}/{plural}...` or
/// `/apis/{group}/{version}/namespaces/{ns}/{plural}...`), `None` for reads and for
/// cluster-scoped objects (a Namespace itself included).
pub fn write_namespace<'a>(method: &Method, path: &'a str) -> Option<&'a str> {
    let writes = [Method::POST, Method::PUT, Method::PATCH, Method::DELETE];
    if !writes.contains(method) {
        return None;
    }
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segs.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => return None,
    };
    match rest {
        // A Namespace's own subresources.
        ["namespaces", _, "status" | "finalize"] => None,
        ["namespaces", ns, _plural, ..] if !ns.is_empty() => Some(ns),
        _ => None,
    }
}

/// A write refused by the fence.
#[derive(Debug)]
pub struct NotHeld {
    pub namespace: String,
}

impl std::fmt::Display for NotHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not sent: the shard range of namespace {} is not held by this replica now",
            self.namespace
        )
    }
}

impl std::error::Error for NotHeld {}

/// The fence as a tower layer over a client's service.
#[derive(Clone)]
pub struct FenceLayer {
    shards: Arc<Shards>,
}

impl FenceLayer {
    pub fn new(shards: Arc<Shards>) -> Self {
        Self { shards }
    }
}

impl<S> Layer<S> for FenceLayer {
    type Service = Fence<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Fence {
            inner,
            shards: self.shards.clone(),
        }
    }
}

/// A client service behind the fence.
#[derive(Clone)]
pub struct Fence<S> {
    inner: S,
    shards: Arc<Shards>,
}

type Answer<R> = Pin<Box<dyn Future<Output = Result<R, BoxError>> + Send>>;

impl<S, B> Service<Request<B>> for Fence<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Answer<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if let Some(ns) = write_namespace(req.method(), req.uri().path())
            && !self.shards.owns(ns)
        {
            let refused = NotHeld {
                namespace: ns.to_owned(),
            };
            tracing::debug!(%refused, method = %req.method(), path = req.uri().path(), "write fenced");
            return Box::pin(async move { Err(Box::new(refused) as BoxError) });
        }
        let answer = self.inner.call(req);
        Box::pin(async move { answer.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tower::ServiceExt as _;

    use super::*;
    use crate::shard::{Ring, ShardConfig};

    /// The layer refuses a write for a namespace whose range is not held now (held with its
    /// window closed included) without calling the service beneath; reads, cluster-scoped
    /// writes and writes of a held range go through.
    #[tokio::test(start_paused = true)]
    async fn the_layer_sends_only_writes_of_open_windows() {
        let ring = Ring::new(8).expect("ring");
        let shards = Shards::new(
            ShardConfig::with_defaults(ring, "kube-system", "me"),
            crate::clock::system(),
        );
        // papa: range 0, open; echo: range 1, held with its window closed; alpha: range 4,
        // not held.
        let now = tokio::time::Instant::now();
        shards.assume_held([(0, now + Duration::from_secs(10)), (1, now)].into());
        let sent = Arc::new(AtomicUsize::new(0));
        let counter = sent.clone();
        let inner = tower::service_fn(move |_req: Request<()>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, std::io::Error>(()) }
        });
        let fenced = FenceLayer::new(shards).layer(inner);
        let cases = [
            (Method::POST, "/api/v1/namespaces/papa/pods", true),
            (
                Method::PUT,
                "/apis/apps/v1/namespaces/echo/replicasets/r",
                false,
            ),
            (Method::DELETE, "/api/v1/namespaces/alpha/pods/p", false),
            (Method::GET, "/api/v1/namespaces/alpha/pods/p", true),
            (Method::PATCH, "/api/v1/nodes/n", true),
        ];
        for (method, path, passes) in cases {
            let before = sent.load(Ordering::SeqCst);
            let req = Request::builder()
                .method(method.clone())
                .uri(path)
                .body(())
                .expect("request");
            let answer = fenced.clone().oneshot(req).await;
            assert_eq!(answer.is_ok(), passes, "{method} {path}");
            let called = sent.load(Ordering::SeqCst) > before;
            assert_eq!(called, passes, "{method} {path}: sent");
            if let Err(e) = answer {
                assert!(e.is::<NotHeld>(), "{method} {path}: {e}");
            }
        }
    }

    #[test]
    fn writes_name_their_namespace() {
        let cases = [
            (Method::POST, "/api/v1/namespaces/a/pods", Some("a")),
            (
                Method::PUT,
                "/apis/apps/v1/namespaces/b/replicasets/x/status",
                Some("b"),
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/c/deployments/d",
                Some("c"),
            ),
            (Method::DELETE, "/api/v1/namespaces/d/pods/p", Some("d")),
            (Method::GET, "/api/v1/namespaces/a/pods/p", None),
            (Method::GET, "/apis/apps/v1/replicasets", None),
            (Method::PUT, "/api/v1/nodes/n", None),
            (Method::DELETE, "/api/v1/namespaces/a", None),
            (Method::PATCH, "/api/v1/namespaces/a/status", None),
            (Method::POST, "/version", None),
        ];
        for (method, path, want) in cases {
            assert_eq!(write_namespace(&method, path), want, "{method} {path}");
        }
    }
}
