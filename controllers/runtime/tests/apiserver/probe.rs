//! A tower layer between a kube client and the API server that counts list, watch and write
//! requests per path and can hold or fail the next watch request of a path, so tests can
//! prove "one watch per type" and force an informer through a watch gap and a 410 relist.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tower::{Layer, Service};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    List,
    Watch,
    /// Any request but a GET (create, update, patch, delete).
    Write,
}

/// What to do to the next watch request of one path.
#[derive(Debug, Clone, Copy, Default)]
struct Trap {
    /// Hold the request until [`Probe::release`].
    park: bool,
    /// Answer it with HTTP 410 Gone instead of opening the watch.
    gone: bool,
}

/// Requests counted per verb and path.
type Counts = Mutex<HashMap<(Verb, String), usize>>;

fn read(counts: &Counts, verb: Verb, path: &str) -> usize {
    counts
        .lock()
        .get(&(verb, path.to_string()))
        .copied()
        .unwrap_or(0)
}

fn bump(counts: &Counts, verb: Verb, path: &str) {
    *counts.lock().entry((verb, path.to_string())).or_default() += 1;
}

/// Whether the request's header `name` names protobuf.
fn names_protobuf(req: &Request<Body>, name: http::header::HeaderName) -> bool {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("protobuf"))
}

struct ProbeState {
    counts: Counts,
    /// The same, for requests that asked for protobuf.
    protobuf: Counts,
    /// The same, for requests whose body is protobuf.
    protobuf_bodies: Counts,
    /// Server-side `timeoutSeconds` forced onto every watch, so watches end (and the
    /// informer re-watches) within seconds.
    watch_timeout: Mutex<Option<u32>>,
    traps: Mutex<HashMap<String, Trap>>,
    parked: AtomicUsize,
    release: Semaphore,
}

impl Default for ProbeState {
    fn default() -> Self {
        Self {
            counts: Mutex::default(),
            protobuf: Mutex::default(),
            protobuf_bodies: Mutex::default(),
            watch_timeout: Mutex::default(),
            traps: Mutex::default(),
            parked: AtomicUsize::new(0),
            release: Semaphore::new(0),
        }
    }
}

/// Shared handle: the layer given to the client and the test's remote control.
#[derive(Clone, Default)]
pub struct Probe {
    state: Arc<ProbeState>,
}

impl Probe {
    pub fn new() -> Self {
        Self::default()
    }

    /// A client to the cluster whose every request goes through this probe.
    pub async fn client(
        &self,
        cluster: &rkcm_testkit::TestCluster,
    ) -> anyhow::Result<kube::Client> {
        let config = rkcm_testkit::TestCluster::config_from(cluster.kubeconfig_path()).await?;
        Ok(kube::client::ClientBuilder::try_from(config)?
            .with_layer(self)
            .build())
    }

    /// Requests of `verb` on exactly `path` (e.g. `/api/v1/pods`) so far.
    pub fn count(&self, verb: Verb, path: &str) -> usize {
        read(&self.state.counts, verb, path)
    }

    /// Requests of `verb` on exactly `path` that asked for protobuf.
    pub fn protobuf_count(&self, verb: Verb, path: &str) -> usize {
        read(&self.state.protobuf, verb, path)
    }

    /// Requests of `verb` on exactly `path` whose body was protobuf.
    pub fn protobuf_body_count(&self, verb: Verb, path: &str) -> usize {
        read(&self.state.protobuf_bodies, verb, path)
    }

    /// Makes every later watch request ask the server to end it after `seconds`.
    pub fn short_watches(&self, seconds: u32) {
        *self.state.watch_timeout.lock() = Some(seconds);
    }

    /// Holds the next watch request of `path` until [`Probe::release`]; with `gone`, it is
    /// then answered with HTTP 410 instead of reaching the server's watch.
    pub fn trap_next_watch(&self, path: &str, gone: bool) {
        self.state
            .traps
            .lock()
            .insert(path.to_string(), Trap { park: true, gone });
    }

    /// Watch requests currently held.
    pub fn parked(&self) -> usize {
        self.state.parked.load(Ordering::SeqCst)
    }

    /// Lets one held request go on.
    pub fn release(&self) {
        self.state.release.add_permits(1);
    }

    /// Records the request, rewrites it as configured, and says what to do with it.
    fn intercept(&self, req: &mut Request<Body>) -> Trap {
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or_default().to_string();
        let params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
        let watch = params.contains(&"watch=true");
        // A list is a GET of a collection: the path names no single object.
        let is_collection = path.ends_with('s') && !params.is_empty();
        let verb = if req.method() != http::Method::GET {
            Verb::Write
        } else if watch {
            Verb::Watch
        } else if is_collection {
            Verb::List
        } else {
            return Trap::default();
        };
        bump(&self.state.counts, verb, &path);
        if names_protobuf(req, http::header::ACCEPT) {
            bump(&self.state.protobuf, verb, &path);
        }
        if names_protobuf(req, http::header::CONTENT_TYPE) {
            bump(&self.state.protobuf_bodies, verb, &path);
        }
        if verb != Verb::Watch {
            return Trap::default();
        }
        let trap = self.state.traps.lock().remove(&path).unwrap_or_default();
        let timeout = *self.state.watch_timeout.lock();
        let uri = if trap.gone {
            // An error body that is not a JSON Status makes kube report the HTTP code, so
            // borrow a plain-text answer from /healthz and turn its 200 into a 410.
            "/healthz".to_string()
        } else if let Some(seconds) = timeout {
            let rewritten: Vec<String> = params
                .iter()
                .map(|p| {
                    if p.starts_with("timeoutSeconds=") {
                        format!("timeoutSeconds={seconds}")
                    } else {
                        p.to_string()
                    }
                })
                .collect();
            format!("{path}?{}", rewritten.join("&"))
        } else {
            return trap;
        };
        if let Ok(uri) = uri.parse() {
            *req.uri_mut() = uri;
        }
        trap
    }
}

impl<S> Layer<S> for Probe {
    type Service = ProbeService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ProbeService {
            inner,
            probe: self.clone(),
        }
    }
}

pub struct ProbeService<S> {
    inner: S,
    probe: Probe,
}

impl<S, B> Service<Request<Body>> for ProbeService<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        let trap = self.probe.intercept(&mut req);
        // Futures are lazy: the request reaches the server only when this is polled, which
        // is after the park below.
        let response = self.inner.call(req);
        let state = self.probe.state.clone();
        Box::pin(async move {
            if trap.park {
                state.parked.fetch_add(1, Ordering::SeqCst);
                if let Ok(permit) = state.release.acquire().await {
                    permit.forget();
                }
                state.parked.fetch_sub(1, Ordering::SeqCst);
            }
            let mut response = response.await?;
            if trap.gone {
                *response.status_mut() = StatusCode::GONE;
            }
            Ok(response)
        })
    }
}
