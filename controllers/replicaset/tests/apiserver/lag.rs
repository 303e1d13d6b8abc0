//! A client whose pod watches lag: every chunk of a `watch=true` response on pods is held
//! back for a fixed time after it arrived. Informers built on it see pod changes late, as
//! a slow or overloaded watch cache would show them; other requests are untouched.

use std::time::Duration;

use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use kube::client::Body;

fn is_pod_watch(uri: &http::Uri) -> bool {
    uri.path().ends_with("/pods")
        && uri
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true"))
}

/// `client`, except that pod watch events arrive `lag` late.
pub fn lagging(client: kube::Client, lag: Duration) -> kube::Client {
    let svc = tower::service_fn(move |req: http::Request<Body>| {
        let client = client.clone();
        async move {
            let watch = is_pod_watch(req.uri());
            let resp = client.send(req).await?;
            if !watch {
                return Ok::<_, kube::Error>(resp.map(|b| b.boxed_unsync()));
            }
            let (parts, body) = resp.into_parts();
            // Timestamp chunks as they arrive and release each `lag` later, so the delay
            // stays constant instead of accumulating.
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move {
                let mut chunks = body.into_data_stream();
                while let Some(chunk) = chunks.next().await {
                    if tx.send((tokio::time::Instant::now() + lag, chunk)).is_err() {
                        return;
                    }
                }
            });
            let delayed = tokio_stream_from(rx).then(|(due, chunk)| async move {
                tokio::time::sleep_until(due).await;
                chunk.map(Frame::data)
            });
            Ok(http::Response::from_parts(
                parts,
                StreamBody::new(Box::pin(delayed)).boxed_unsync(),
            ))
        }
    });
    kube::Client::new(svc, "default")
}

fn tokio_stream_from<T>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
