//! A simulated API server and node model for the deterministic simulation (testing tier 2).
//!
//! [`SimApi`] is an in-process, deterministic stand-in for kube-apiserver: it hands out real
//! [`kube::Client`]s ([`SimApi::client`]) whose requests never leave the process, so the
//! controllers under test are the real crates on the real runtime (informers, work queues,
//! expectations, writes), and tokio's paused clock drives all time. It serves JSON only: the
//! simulation configures the informers and writes for JSON (`ContentType::Json`,
//! `accept_protobuf(false)`, upstream's `--kube-api-content-type=application/json`).
//!
//! Modelled ([`server`]): objects with resourceVersions (one counter for all resources, as
//! etcd's revision), `generation` counting spec changes, UIDs, `generateName`, status
//! subresources, optimistic concurrency (409 on a stale resourceVersion), UID and
//! resourceVersion preconditions on deletes, graceful pod deletion (the grace period can
//! only shorten; unbound and terminal pods go at once), finalizers, list and watch with
//! per-resource ordering, bookmarks and 410 after compaction, the Job defaulting controllers
//! depend on (generated selector); strategic merge, merge and apply patches ([`patch`]).
//! Faults ([`server::Faults`]): watch event delivery delays, stale lists from a lagging
//! watch cache, concurrent writes (409), crashes of a manager before or after any of its
//! writes (its requests fail from then on), admission rejections of pod creates, 500s and
//! 504s after a write landed; a running manager cut off for a while ([`World::cut_off`]:
//! its requests refused, or hanging and then failing, or only its Lease requests held back
//! and landing late). [`nodes`] is the node, scheduler and kubelet model.
//!
//! Not modelled: a garbage collector (deleting an owner leaves its dependents), field
//! ownership of server-side apply, admission webhooks and quotas beyond the injected
//! refusals, pagination (a list answers everything at once), protobuf, namespaces as objects,
//! volumes and their binding, the scheduler's scoring (a pod goes to a random fitting node).

pub mod nodes;
pub mod patch;
pub mod select;
pub mod server;

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use http_body_util::StreamBody;
use hyper::body::Frame;
use serde_json::Value;

pub use server::{Caller, Change, Cut, Deletion, Faults, Query, Reply, World};

/// A handle on the simulated API server. Cheap to clone.
#[derive(Clone)]
pub struct SimApi {
    world: Arc<Mutex<World>>,
}

impl SimApi {
    /// A server whose random choices follow `seed`, with wall-clock time `base` at the
    /// current tokio instant. Must be called inside the (paused) runtime that runs the
    /// simulation.
    pub fn new(seed: u64, base: jiff::Timestamp) -> Self {
        Self {
            world: Arc::new(Mutex::new(World::new(seed, base))),
        }
    }

    /// The server's state, for the driver (lock it briefly; never across an await).
    pub fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A client of manager incarnation `epoch` (0: the simulation itself, never fenced)
    /// with user agent `agent`.
    pub fn client(&self, epoch: u64, agent: &str) -> kube::Client {
        self.client_fenced(epoch, agent, None)
    }

    /// [`SimApi::client`], behind sharded mode's write fence when `fence` is given
    /// ([`rkcm_runtime::shard::fence`]: a namespaced write goes out only while its range is
    /// held).
    pub fn client_fenced(
        &self,
        epoch: u64,
        agent: &str,
        fence: Option<std::sync::Arc<rkcm_runtime::shard::Shards>>,
    ) -> kube::Client {
        let api = self.clone();
        let caller = Caller {
            epoch,
            agent: agent.to_owned(),
        };
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let api = api.clone();
            let caller = caller.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = body.collect_bytes().await.unwrap_or_default();
                let leases =
                    parts.uri.path().ends_with("/leases") || parts.uri.path().contains("/leases/");
                let cut = api.world().cut_of(caller.epoch, leases);
                if let Some(cut) = cut {
                    match cut.how {
                        server::Cut::Refused => {
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::ConnectionRefused,
                                "connection refused (cut off)",
                            ));
                        }
                        server::Cut::Hang => {
                            tokio::time::sleep_until(cut.until).await;
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                "connection timed out (cut off)",
                            ));
                        }
                        server::Cut::SlowLeases => tokio::time::sleep_until(cut.until).await,
                    }
                }
                let reply = api.handle(&caller, &parts, &bytes);
                respond(reply)
            }
        });
        match fence {
            None => kube::Client::new(svc, "default"),
            Some(shards) => {
                use tower::Layer as _;
                let fenced = rkcm_runtime::shard::FenceLayer::new(shards).layer(svc);
                kube::Client::new(fenced, "default")
            }
        }
    }

    fn handle(&self, caller: &Caller, parts: &http::request::Parts, body: &[u8]) -> Reply {
        let mut world = self.world();
        world.requests += 1;
        if world.is_dead(caller.epoch) {
            return Reply::Fail("connection refused".into());
        }
        let Some(route) = Route::parse(parts.uri.path()) else {
            return Reply::Json(
                404,
                crate::fake_api::status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ),
            );
        };
        let Some(r) = server::resource(&route.plural) else {
            return Reply::Json(
                404,
                crate::fake_api::status(
                    404,
                    "NotFound",
                    &format!("unknown resource {}", route.plural),
                ),
            );
        };
        let query = Query::parse(parts.uri.query().unwrap_or_default());
        let ns = route.namespace.as_deref().unwrap_or_default();
        let body: Value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(body).unwrap_or(Value::Null)
        };
        let name = route.name.as_deref();
        let sub = route.subresource.as_deref();
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let describe = format!(
            "{} {}{}{}",
            parts.method,
            r.plural,
            name.map(|n| format!(" {}", server::key_of(ns, n)))
                .unwrap_or_default(),
            sub.map(|s| format!("/{s}")).unwrap_or_default()
        );
        match (&parts.method, name) {
            (&http::Method::GET, None) if query.watch => {
                world.watch_reply(caller, r, route.namespace.as_deref(), &query)
            }
            (&http::Method::GET, None) => {
                world.list_reply(caller, r, route.namespace.as_deref(), &query)
            }
            (&http::Method::GET, Some(n)) => world.read(caller, r, ns, n),
            (&http::Method::POST, None) => {
                world.write(caller, &describe, |w| w.create(caller, r, ns, body))
            }
            (&http::Method::PUT, Some(n)) => world.write(caller, &describe, |w| {
                w.update(caller, r, ns, n, sub == Some("status"), body, None)
            }),
            (&http::Method::PATCH, Some(n)) => {
                let Some(kind) = patch::PatchKind::from_content_type(content_type) else {
                    return Reply::Json(
                        415,
                        crate::fake_api::status(415, "UnsupportedMediaType", content_type),
                    );
                };
                world.write(caller, &describe, |w| {
                    w.update(caller, r, ns, n, sub == Some("status"), body, Some(kind))
                })
            }
            (&http::Method::DELETE, Some(n)) => {
                world.write(caller, &describe, |w| w.delete(caller, r, ns, n, &body))
            }
            _ => Reply::Json(
                405,
                crate::fake_api::status(405, "MethodNotAllowed", &describe),
            ),
        }
    }
}

type WatchBody =
    StreamBody<futures::stream::BoxStream<'static, Result<Frame<bytes::Bytes>, Infallible>>>;

fn respond(reply: Reply) -> Result<http::Response<WatchBody>, std::io::Error> {
    use futures::StreamExt;
    let (code, stream) = match reply {
        Reply::Fail(message) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                message,
            ));
        }
        Reply::Json(code, body) => {
            let bytes = bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
            (
                code,
                futures::stream::once(async move { Ok(Frame::data(bytes)) }).boxed(),
            )
        }
        Reply::Watch(rx) => (
            200,
            futures::stream::unfold(rx, |mut rx| async move {
                let item = rx.recv().await?;
                tokio::time::sleep_until(item.at).await;
                Some((Ok(Frame::data(item.line)), rx))
            })
            .boxed(),
        ),
    };
    let mut resp = http::Response::new(StreamBody::new(stream));
    *resp.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// The parts of a resource path: `/api/v1[/namespaces/{ns}]/{plural}[/{name}[/{sub}]]` or
/// `/apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/{sub}]]`.
#[derive(Debug, PartialEq)]
struct Route {
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
    subresource: Option<String>,
}

impl Route {
    fn parse(path: &str) -> Option<Self> {
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let rest = match segs.as_slice() {
            ["api", _, rest @ ..] => rest,
            ["apis", _, _, rest @ ..] => rest,
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
            _ => (None, rest),
        };
        let (plural, rest) = rest.split_first()?;
        Some(Self {
            namespace,
            plural: (*plural).to_owned(),
            name: rest.first().map(|s| (*s).to_owned()),
            subresource: rest.get(1).map(|s| (*s).to_owned()),
        })
    }
}

#[cfg(test)]
mod tests;
