//! A client that records every request the controllers send and how the API server answered
//! (method, path, status code, the body of error answers, when it was sent and answered): an
//! audit log of the controllers' own traffic, without configuring the API server's.

use std::sync::{Arc, Mutex};

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
