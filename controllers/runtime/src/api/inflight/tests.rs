use super::*;
use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use tokio::sync::{mpsc, oneshot};
use tower::ServiceExt as _;

/// A response body that ends when its sender fires (or is dropped).
struct Held(oneshot::Receiver<()>);

impl HttpBody for Held {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.0).poll(cx).map(|_| None)
    }
}

/// An inner service that reports each request it is called with (its path) and answers
/// with a body the test ends.
struct Inner(mpsc::UnboundedSender<(String, oneshot::Sender<()>)>);

impl Service<Request<Body>> for Inner {
    type Response = Response<Held>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Held>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let (tx, rx) = oneshot::channel();
        let _ = self.0.send((req.uri().to_string(), tx));
        std::future::ready(Ok(Response::new(Held(rx))))
    }
}

fn inner(seen: mpsc::UnboundedSender<(String, oneshot::Sender<()>)>) -> Inner {
    Inner(seen)
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).expect("request")
}

/// Spawns a request through `svc`; resolves to its response.
fn spawn<S>(
    svc: &S,
    path: &str,
) -> tokio::task::JoinHandle<Result<Response<Permitted<Held>>, BoxError>>
where
    S: Service<
            Request<Body>,
            Response = Response<Permitted<Held>>,
            Error = BoxError,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static,
{
    let svc = svc.clone();
    let req = get(path);
    tokio::spawn(async move { svc.oneshot(req).await })
}

/// Nothing more reaches the inner service within a short while.
async fn nothing_more(seen: &mut mpsc::UnboundedReceiver<(String, oneshot::Sender<()>)>) {
    let more = tokio::time::timeout(Duration::from_millis(200), seen.recv()).await;
    assert!(
        more.is_err(),
        "a request past the bound reached the server: {:?}",
        more.ok().flatten().map(|(p, _)| p)
    );
}

async fn next(seen: &mut mpsc::UnboundedReceiver<(String, oneshot::Sender<()>)>) -> String {
    let (path, tx) = tokio::time::timeout(Duration::from_secs(5), seen.recv())
        .await
        .expect("a request reaches the server in time")
        .expect("server alive");
    // Its body ends at once (sender dropped): the test only needs to know it was sent.
    drop(tx);
    path
}

#[tokio::test]
async fn a_third_request_waits_until_a_body_is_read_to_the_end() {
    let (tx, mut seen) = mpsc::unbounded_channel();
    let svc = InflightLayer::new(2).layer(inner(tx));
    let a = spawn(&svc, "/a");
    let b = spawn(&svc, "/b");
    let (first, end_first) = seen.recv().await.expect("first request");
    let (second, _keep_second) = seen.recv().await.expect("second request");
    let mut paths = vec![first, second];
    paths.sort();
    assert_eq!(paths, ["/a", "/b"]);
    let c = spawn(&svc, "/c");
    nothing_more(&mut seen).await;

    // The first answer's headers arrived, but its body is still open: still two in flight.
    let a = a.await.expect("task").expect("answer a");
    nothing_more(&mut seen).await;

    // Read to the end: the permit goes back and /c is sent.
    end_first.send(()).expect("body a open");
    a.into_body().collect().await.expect("body a");
    assert_eq!(next(&mut seen).await, "/c");
    drop((b, c));
}

#[tokio::test]
async fn a_dropped_body_gives_its_permit_back() {
    let (tx, mut seen) = mpsc::unbounded_channel();
    let svc = InflightLayer::new(1).layer(inner(tx));
    let a = spawn(&svc, "/a");
    let (_, _keep_a) = seen.recv().await.expect("first request");
    let b = spawn(&svc, "/b");
    nothing_more(&mut seen).await;
    drop(a.await.expect("task").expect("answer a"));
    assert_eq!(next(&mut seen).await, "/b");
    drop(b);
}

#[tokio::test]
async fn watches_are_not_counted() {
    let (tx, mut seen) = mpsc::unbounded_channel();
    let svc = InflightLayer::new(1).layer(inner(tx));
    let _w1 = spawn(&svc, "/api/v1/pods?watch=true");
    let _w2 = spawn(&svc, "/api/v1/nodes?watch=true");
    let (_, _keep1) = seen.recv().await.expect("first watch");
    let (_, _keep2) = seen.recv().await.expect("second watch");
    // Both watches open and the one permit still free.
    let _g = spawn(&svc, "/api/v1/pods");
    assert_eq!(next(&mut seen).await, "/api/v1/pods");
}

#[tokio::test]
async fn zero_sets_no_bound() {
    let (tx, mut seen) = mpsc::unbounded_channel();
    let svc = InflightLayer::new(0).layer(inner(tx));
    let mut keep = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..20 {
        tasks.push(spawn(&svc, &format!("/{i}")));
    }
    for _ in 0..20 {
        keep.push(
            tokio::time::timeout(Duration::from_secs(5), seen.recv())
                .await
                .expect("every request sent at once")
                .expect("server alive"),
        );
    }
    assert_eq!(keep.len(), 20);
}
