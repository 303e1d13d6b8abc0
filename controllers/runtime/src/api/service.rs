//! Small pieces the client's tower layers share ([`super::client`], [`super::inflight`]).

use http::{Request, Response};
use kube::client::Body;
use parking_lot::Mutex;
use std::task::Poll;
use tower::{BoxError, Service};

/// Calls the inner service once, holding its lock only while polling readiness and calling.
pub(super) async fn call_inner<S, B>(
    inner: &Mutex<S>,
    req: Request<Body>,
) -> Result<Response<B>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    let mut req = Some(req);
    let fut = std::future::poll_fn(|cx| {
        let mut svc = inner.lock();
        match svc.poll_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(err)) => Poll::Ready(Err(err.into())),
            Poll::Ready(Ok(())) => match req.take() {
                Some(req) => Poll::Ready(Ok(svc.call(req))),
                None => Poll::Ready(Err(BoxError::from("request already sent"))),
            },
        }
    })
    .await?;
    fut.await.map_err(Into::into)
}

/// True for watch requests: kube puts `watch=true` in the query.
pub fn is_watch(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}
