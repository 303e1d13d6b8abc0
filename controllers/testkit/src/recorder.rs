//! A client that records every request the controllers send and how the API server answered
//! (method, path, status code, the body of error answers, when it was sent and answered): an
//! audit log of the controllers' own traffic, without configuring the API server's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt;
use kube::client::Body;
use tokio::time::Instant;

/// One request and its answer.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub code: u16,
    /// The body of a non-2xx answer (a `Status`), empty otherwise.
    pub error_body: String,
    pub sent: Instant,
    /// When the response headers arrived.
    pub answered: Instant,
}

impl Call {
    /// A `POST` of a pod in `namespace`.
    pub fn is_pod_create(&self, namespace: &str) -> bool {
        self.method == "POST" && self.path == format!("/api/v1/namespaces/{namespace}/pods")
    }

    /// A `PUT` of the status of ReplicaSet `name` in `namespace`.
    pub fn is_rs_status_write(&self, namespace: &str, name: &str) -> bool {
        self.is_status_write("apps/v1", "replicasets", namespace, name)
    }

    /// A `PUT` of the status of object `name` of `resource` (plural) in API group/version
    /// `group_version` (`apps/v1`, `batch/v1`) in `namespace`.
    pub fn is_status_write(
        &self,
        group_version: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> bool {
        self.method == "PUT"
            && self.path
                == format!("/apis/{group_version}/namespaces/{namespace}/{resource}/{name}/status")
    }

    /// A `PATCH` of pod `name` in `namespace`.
    pub fn is_pod_patch(&self, namespace: &str, name: &str) -> bool {
        self.method == "PATCH" && self.path == format!("/api/v1/namespaces/{namespace}/pods/{name}")
    }
}

/// Checks that each of `calls` (ordered by sending time) was sent at least `least` after the
/// previous one was answered, less `slack` for the clock difference between this log and the
/// sender's own timing, and that there are at least two to compare (status write pacing).
pub fn ensure_spaced(calls: &[Call], least: Duration, slack: Duration) -> anyhow::Result<()> {
    anyhow::ensure!(
        calls.len() >= 2,
        "at least two calls to compare, got {}",
        calls.len()
    );
    for (n, pair) in calls.windows(2).enumerate() {
        let gap = pair[1].sent.saturating_duration_since(pair[0].answered);
        anyhow::ensure!(
            gap + slack >= least,
            "call #{} was sent {gap:?} after #{} was answered (least {least:?}); {} calls in all",
            n + 2,
            n + 1,
            calls.len()
        );
    }
    Ok(())
}

/// The log; cheap to clone.
#[derive(Clone, Default)]
pub struct Recorder {
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every answered call so far, in the order the answers arrived.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The answered calls matching `filter`, ordered by when they were sent.
    pub fn matching(&self, filter: impl Fn(&Call) -> bool) -> Vec<Call> {
        let mut calls: Vec<Call> = self.calls().into_iter().filter(|c| filter(c)).collect();
        calls.sort_by_key(|c| c.sent);
        calls
    }

    /// `client`, recording into this log.
    pub fn wrap(&self, client: kube::Client) -> kube::Client {
        let calls = self.calls.clone();
        let svc = tower::service_fn(move |req: http::Request<Body>| {
            let client = client.clone();
            let calls = calls.clone();
            async move {
                let method = req.method().to_string();
                let path = req.uri().path().to_owned();
                let sent = Instant::now();
                let resp = client.send(req).await?;
                let answered = Instant::now();
                let code = resp.status().as_u16();
                let (parts, body) = resp.into_parts();
                let (body, error_body) = if parts.status.is_success() {
                    (body.boxed_unsync(), String::new())
                } else {
                    // Error answers are small Status objects: keep a copy and pass it on.
                    let bytes = body.collect().await?.to_bytes();
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    (
                        http_body_util::Full::new(bytes)
                            .map_err(|never| match never {})
                            .boxed_unsync(),
                        text,
                    )
                };
                if let Ok(mut calls) = calls.lock() {
                    calls.push(Call {
                        method,
                        path,
                        code,
                        error_body,
                        sent,
                        answered,
                    });
                }
                Ok::<_, kube::Error>(http::Response::from_parts(parts, body))
            }
        });
        kube::Client::new(svc, "default")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(sent_ms: u64, answered_ms: u64, at: Instant) -> Call {
        Call {
            method: "PUT".into(),
            path: "/x/status".into(),
            code: 200,
            error_body: String::new(),
            sent: at + Duration::from_millis(sent_ms),
            answered: at + Duration::from_millis(answered_ms),
        }
    }

    #[test]
    fn calls_are_spaced_from_the_previous_answer() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let spaced = [call(0, 10, t), call(210, 215, t), call(420, 430, t)];
        assert!(ensure_spaced(&spaced, ms(200), ms(0)).is_ok());
        // 195 ms after the answer: too close, unless the slack covers it.
        let close = [call(0, 10, t), call(205, 210, t)];
        let err = ensure_spaced(&close, ms(200), ms(0)).expect_err("too close");
        assert!(err.to_string().contains("call #2"), "{err}");
        assert!(ensure_spaced(&close, ms(200), ms(10)).is_ok());
        assert!(
            ensure_spaced(&spaced[..1], ms(200), ms(0)).is_err(),
            "one call proves nothing"
        );
    }
}
