//! kube's watcher, speaking protobuf: the same events in the same order for the same
//! requests (paginated LIST then WATCH, or one streaming WATCH with `sendInitialEvents`),
//! with the objects decoded by [`super`] instead of serde.
//!
//! Kept to kube-runtime's state machine (`watcher::step_trampolined`): `Init`, `InitApply`
//! for every listed object, `InitDone`, then `Apply`/`Delete`; a watch resumes from the last
//! resourceVersion seen (bookmarks included) when the server ends it or it stays silent past
//! its timeout; 410 Gone starts over with a fresh list (kube-rs does that only for a 410
//! inside the stream; client-go, and rkcm's JSON informers, for both). Errors are reported as
//! kube's `watcher::Error`s, so the informer's backoff and logging treat both paths alike.
//!
//! The same machine speaks JSON ([`watch_json`]) for the types without a protobuf reader, so
//! every informer sees each list's own resourceVersion and each bookmark's, which kube's
//! watcher keeps to itself ([`Item::Version`]).

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use http_body_util::BodyExt;
use kube::core::WatchEvent;
use kube::runtime::watcher::{Error, Event, Result};
use serde::de::DeserializeOwned;

use crate::cache::item::Item;

use super::envelope::{
    Frames, ListMeta, bookmark, envelope, error_status, list, status, watch_event,
};
use super::wire::{DecodeError, MEDIA_TYPE, WATCH_MEDIA_TYPE};
use crate::error::is_gone;

/// Decodes one object message (without envelope).
pub type Decode<K> = fn(&[u8]) -> std::result::Result<K, DecodeError>;

/// Parses one JSON list: its metadata and items.
type JsonListParse<K> = fn(&[u8]) -> serde_json::Result<(ListMeta, Vec<K>)>;
/// Parses one JSON watch event (one line).
type JsonEventParse<K> = fn(&[u8]) -> serde_json::Result<WatchEvent<K>>;

/// How a stream's lists and watch events are encoded.
enum Wire<K> {
    /// Protobuf, objects read by `Decode`.
    Protobuf(Decode<K>),
    /// JSON (serde), for any type.
    Json {
        list: JsonListParse<K>,
        event: JsonEventParse<K>,
    },
}

impl<K> Wire<K> {
    fn list_media(&self) -> &'static str {
        match self {
            Wire::Protobuf(_) => MEDIA_TYPE,
            Wire::Json { .. } => JSON,
        }
    }

    fn watch_media(&self) -> &'static str {
        match self {
            Wire::Protobuf(_) => WATCH_MEDIA_TYPE,
            Wire::Json { .. } => JSON,
        }
    }

    fn frames(&self) -> Frames {
        match self {
            Wire::Protobuf(_) => Frames::default(),
            Wire::Json { .. } => Frames::lines(),
        }
    }
}

const JSON: &str = "application/json";

/// A JSON list's metadata and items.
#[derive(serde::Deserialize)]
struct JsonList<K> {
    #[serde(default)]
    metadata: JsonListMeta,
    #[serde(default = "Option::default")]
    items: Option<Vec<K>>,
}

#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

fn json_list<K: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<(ListMeta, Vec<K>)> {
    let list: JsonList<K> = serde_json::from_slice(bytes)?;
    let meta = ListMeta {
        resource_version: list.metadata.resource_version.unwrap_or_default(),
        continue_: list.metadata.continue_.filter(|c| !c.is_empty()),
    };
    Ok((meta, list.items.unwrap_or_default()))
}

fn json_event<K: DeserializeOwned>(frame: &[u8]) -> serde_json::Result<WatchEvent<K>> {
    serde_json::from_slice(frame)
}

/// What to list and watch, and how.
#[derive(Debug, Clone)]
pub struct Params {
    /// Collection path, e.g. `/api/v1/pods`.
    pub path: String,
    /// The object kind (`Pod`) and its list kind (`PodList`).
    pub kind: &'static str,
    pub list_kind: &'static str,
    pub field_selector: Option<String>,
    /// The API server's shard selector (`shardSelector`, KEP-5866): sharded mode's held
    /// ranges. A server that does not apply it lists everything; the informer filters anyway.
    pub shard_selector: Option<String>,
    pub page_size: u32,
    /// Server-side watch timeout, in seconds.
    pub timeout: u32,
    /// One streaming WATCH (`sendInitialEvents=true`) instead of LIST pages.
    pub streaming: bool,
}

/// A client reports an idle watch as dead this long after its server-side timeout.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

enum Phase {
    /// Nothing known: list (or start a streaming watch) from scratch.
    Empty,
    /// Paginated list under way.
    Listing { continue_: Option<String> },
    /// Listed up to `rv`; no watch open.
    Listed { rv: String },
    /// A watch is open. `initial`: a streaming list still sending its initial events.
    Watching {
        rv: String,
        body: kube::client::Body,
        frames: Frames,
        initial: bool,
    },
}

struct Machine<K> {
    client: kube::Client,
    params: Params,
    wire: Wire<K>,
    phase: Phase,
    out: VecDeque<Result<Item<K>>>,
}

/// The event stream of `params`: never ends; errors are items (back off on them). Besides
/// kube's events it gives the resourceVersion of each complete list (after its `InitDone`)
/// and of each bookmark of a running watch ([`Item::Version`]), as client-go's reflector
/// records them.
pub fn watch<K: kube::Resource + Send + 'static>(
    client: kube::Client,
    params: Params,
    decode: Decode<K>,
) -> impl Stream<Item = Result<Item<K>>> + Send {
    run(Machine {
        client,
        params,
        wire: Wire::Protobuf(decode),
        phase: Phase::Empty,
        out: VecDeque::new(),
    })
}

/// [`watch`] in JSON, for any type (`params.kind` and `params.list_kind` are not used).
pub fn watch_json<K: kube::Resource + DeserializeOwned + Send + 'static>(
    client: kube::Client,
    params: Params,
) -> impl Stream<Item = Result<Item<K>>> + Send {
    run(Machine {
        client,
        params,
        wire: Wire::Json {
            list: json_list::<K>,
            event: json_event::<K>,
        },
        phase: Phase::Empty,
        out: VecDeque::new(),
    })
}

fn run<K: kube::Resource + Send + 'static>(
    machine: Machine<K>,
) -> impl Stream<Item = Result<Item<K>>> + Send {
    futures::stream::unfold(machine, |mut m| async move {
        loop {
            if let Some(item) = m.out.pop_front() {
                return Some((item, m));
            }
            m.step().await;
        }
    })
}

fn service_error(e: impl std::error::Error + Send + Sync + 'static) -> kube::Error {
    kube::Error::Service(Box::new(e))
}

/// A URL query value, percent-encoded (selectors and continue tokens).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl<K: kube::Resource + Send + 'static> Machine<K> {
    async fn step(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Empty) {
            Phase::Empty if self.params.streaming => {
                let accept = self.wire.watch_media();
                match open_watch(&self.client, &self.params, "", true, accept).await {
                    Ok(body) => {
                        self.out.push_back(Ok(Event::Init.into()));
                        self.phase = Phase::Watching {
                            rv: String::new(),
                            body,
                            frames: self.wire.frames(),
                            initial: true,
                        };
                    }
                    Err(e) => self.out.push_back(Err(Error::WatchStartFailed(e))),
                }
            }
            Phase::Empty => {
                self.out.push_back(Ok(Event::Init.into()));
                self.phase = Phase::Listing { continue_: None };
            }
            Phase::Listing { continue_ } => self.list_page(continue_).await,
            Phase::Listed { rv } => {
                let accept = self.wire.watch_media();
                match open_watch(&self.client, &self.params, &rv, false, accept).await {
                    Ok(body) => {
                        self.phase = Phase::Watching {
                            rv,
                            body,
                            frames: self.wire.frames(),
                            initial: false,
                        }
                    }
                    Err(e) => {
                        let gone = matches!(&e, kube::Error::Api(s) if is_gone(s));
                        self.out.push_back(Err(Error::WatchStartFailed(e)));
                        if !gone {
                            self.phase = Phase::Listed { rv };
                        }
                    }
                }
            }
            Phase::Watching {
                rv,
                body,
                frames,
                initial,
            } => self.read(rv, body, frames, initial).await,
        }
    }

    async fn list_page(&mut self, continue_: Option<String>) {
        let query = list_query(&self.params, continue_.as_deref());
        let sent = send(
            &self.client,
            &self.params.path,
            query,
            self.wire.list_media(),
        )
        .await;
        let body = match sent {
            Ok(response) => response.into_body().collect_bytes().await,
            Err(e) => Err(e),
        };
        let decoded = body.and_then(|bytes| match &self.wire {
            Wire::Protobuf(decode) => {
                list(&bytes, self.params.list_kind, decode).map_err(service_error)
            }
            Wire::Json { list, .. } => list(&bytes).map_err(service_error),
        });
        match decoded {
            Ok((meta, items)) => {
                self.out.extend(
                    items
                        .into_iter()
                        .map(|obj| Ok(Event::InitApply(obj).into())),
                );
                match meta.continue_ {
                    Some(token) => {
                        self.phase = Phase::Listing {
                            continue_: Some(token),
                        }
                    }
                    None if meta.resource_version.is_empty() => {
                        self.out.push_back(Err(Error::NoResourceVersion));
                    }
                    None => {
                        self.out.push_back(Ok(Event::InitDone.into()));
                        self.out
                            .push_back(Ok(Item::Version(meta.resource_version.clone())));
                        self.phase = Phase::Listed {
                            rv: meta.resource_version,
                        };
                    }
                }
            }
            // Start over (kube does the same): an expired continue token needs a new list.
            Err(e) => self.out.push_back(Err(Error::InitialListFailed(e))),
        }
    }

    /// Reads from an open watch until it yields events, ends or fails.
    async fn read(
        &mut self,
        mut rv: String,
        mut body: kube::client::Body,
        mut frames: Frames,
        mut initial: bool,
    ) {
        let idle = Duration::from_secs(u64::from(self.params.timeout)) + IDLE_MARGIN;
        let chunk = match tokio::time::timeout(idle, body.frame()).await {
            Ok(Some(Ok(frame))) => frame.into_data().unwrap_or_else(|_| Bytes::new()),
            Ok(Some(Err(e))) => {
                self.out.push_back(Err(Error::WatchFailed(e)));
                self.resume(rv, initial);
                return;
            }
            // Ended by the server, or silent past its timeout: watch again from `rv`.
            Ok(None) | Err(_) => {
                self.resume(rv, initial);
                return;
            }
        };
        frames.push(&chunk);
        loop {
            let frame = match frames.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    self.out
                        .push_back(Err(Error::WatchFailed(service_error(e))));
                    return; // Phase::Empty: a broken stream is not resumed.
                }
            };
            let was_initial = initial;
            let decoded = match &self.wire {
                Wire::Protobuf(decode) => {
                    event(self.params.kind, *decode, &frame, &mut rv, &mut initial)
                }
                Wire::Json { event, .. } => from_json(*event, &frame, &mut rv, &mut initial),
            };
            match decoded {
                // The end of a streaming list: the cache reflects the bookmark's version.
                Ok(Some(Event::InitDone)) => {
                    self.out.push_back(Ok(Event::InitDone.into()));
                    self.out.push_back(Ok(Item::Version(rv.clone())));
                }
                Ok(Some(event)) => self.out.push_back(Ok(event.into())),
                // A bookmark of a running watch (one inside a streaming list's initial events
                // marks a state the cache does not show until the list is complete).
                Ok(None) if !was_initial && !rv.is_empty() => {
                    self.out.push_back(Ok(Item::Version(rv.clone())));
                }
                Ok(None) => {}
                Err(Stop::Gone(status)) => {
                    self.out.push_back(Err(Error::WatchError(status)));
                    return;
                }
                Err(Stop::Status(status)) => {
                    self.out.push_back(Err(Error::WatchError(status)));
                    self.resume(rv, initial);
                    return;
                }
                Err(Stop::Broken(e)) => {
                    self.out
                        .push_back(Err(Error::WatchFailed(service_error(e))));
                    return;
                }
            }
        }
        self.phase = Phase::Watching {
            rv,
            body,
            frames,
            initial,
        };
    }

    /// After a watch ended: watch again from `rv`, or start over when a streaming list had
    /// not finished its initial events (kube does the same).
    fn resume(&mut self, rv: String, initial: bool) {
        self.phase = if initial || rv.is_empty() {
            Phase::Empty
        } else {
            Phase::Listed { rv }
        };
    }
}

/// The query of one LIST page: the first page of every list, the first list of a manager
/// included, is a consistent read (no resourceVersion), as kube's watcher sends it with a page
/// size (kube-core drops `resourceVersion=0` when a limit is set); later pages follow their
/// continue token. Never `resourceVersion=0`: a lagging watch cache may answer it with a state
/// older than the one the cache, or a manager before this one, already acted on (a restarted
/// manager then re-creates pods its predecessor created).
fn list_query(params: &Params, continue_: Option<&str>) -> String {
    let mut query = format!("limit={}{}", params.page_size, selector(params));
    if let Some(token) = continue_ {
        query.push_str(&format!("&continue={}", encode(token)));
    }
    query
}

/// The query of a WATCH from `rv`; `initial`: a streaming list (`sendInitialEvents`). A
/// streaming list starts from no resourceVersion, as client-go's reflector sends its first:
/// the server then reads the current version from etcd and sends the state at least that
/// new (a consistent read). `resourceVersion=0` would let a lagging watch cache answer with
/// an older state, the hazard the paged lists avoid ([`list_query`]).
fn watch_query(params: &Params, rv: &str, initial: bool) -> String {
    let mut query = format!(
        "watch=true&allowWatchBookmarks=true&timeoutSeconds={}",
        params.timeout
    );
    if !rv.is_empty() {
        query.push_str(&format!("&resourceVersion={}", encode(rv)));
    }
    query.push_str(&selector(params));
    if initial {
        query.push_str("&sendInitialEvents=true&resourceVersionMatch=NotOlderThan");
    }
    query
}

/// Opens a watch from `rv` (see [`watch_query`]).
async fn open_watch(
    client: &kube::Client,
    params: &Params,
    rv: &str,
    initial: bool,
    accept: &str,
) -> kube::Result<kube::client::Body> {
    let query = watch_query(params, rv, initial);
    Ok(send(client, &params.path, query, accept).await?.into_body())
}

fn selector(params: &Params) -> String {
    let field = params
        .field_selector
        .as_deref()
        .map(|f| format!("&fieldSelector={}", encode(f)))
        .unwrap_or_default();
    let shard = params
        .shard_selector
        .as_deref()
        .map(|s| format!("&shardSelector={}", encode(s)))
        .unwrap_or_default();
    field + &shard
}

/// GET `path?query` with `accept`; an error status is decoded whatever its encoding.
async fn send(
    client: &kube::Client,
    path: &str,
    query: String,
    accept: &str,
) -> kube::Result<http::Response<kube::client::Body>> {
    let request = http::Request::get(format!("{path}?{query}"))
        .header(http::header::ACCEPT, accept)
        // Watch streams are not compressed: see kube's `request_events`.
        .header(http::header::ACCEPT_ENCODING, "identity")
        .body(kube::client::Body::empty())
        .map_err(kube::Error::HttpError)?;
    let response = client.send(request).await?;
    let code = response.status();
    if code.is_success() {
        return Ok(response);
    }
    let bytes = response.into_body().collect_bytes().await?;
    Err(kube::Error::Api(Box::new(error_status(
        code.as_u16(),
        &bytes,
    ))))
}

/// One watch frame: the event to deliver, if any; `rv` follows every object and bookmark.
fn event<K: kube::Resource>(
    kind: &str,
    decode: Decode<K>,
    frame: &[u8],
    rv: &mut String,
    initial: &mut bool,
) -> std::result::Result<Option<Event<K>>, Stop> {
    let (type_, object) = watch_event(frame).map_err(Stop::Broken)?;
    let env = envelope(object).map_err(Stop::Broken)?;
    if type_ == "ERROR" || env.kind == "Status" {
        let status = Box::new(status(env.raw).map_err(Stop::Broken)?);
        return Err(if is_gone(&status) {
            Stop::Gone(status)
        } else {
            Stop::Status(status)
        });
    }
    if env.kind != kind {
        return Err(Stop::Broken(DecodeError::new(format!(
            "expected a {kind} in the watch, got {:?}",
            env.kind
        ))));
    }
    if type_ == "BOOKMARK" {
        let meta = bookmark(env.raw).map_err(Stop::Broken)?;
        if !meta.resource_version.is_empty() {
            *rv = meta.resource_version;
        }
        if *initial && meta.initial_events_end {
            *initial = false;
            return Ok(Some(Event::InitDone));
        }
        return Ok(None);
    }
    let obj = decode(env.raw).map_err(Stop::Broken)?;
    match obj.meta().resource_version.as_deref() {
        Some(object_rv) if !object_rv.is_empty() => *rv = object_rv.to_owned(),
        _ => {
            return Err(Stop::Broken(DecodeError::new(
                "a watch event without metadata.resourceVersion",
            )));
        }
    }
    Ok(Some(match (type_.as_str(), *initial) {
        ("ADDED" | "MODIFIED", true) => Event::InitApply(obj),
        ("ADDED" | "MODIFIED", false) => Event::Apply(obj),
        ("DELETED", _) => Event::Delete(obj),
        (other, _) => {
            return Err(Stop::Broken(DecodeError::new(format!(
                "unknown watch event type {other:?}"
            ))));
        }
    }))
}

/// [`event`] for a JSON watch frame (one line), parsed by `parse`.
fn from_json<K: kube::Resource>(
    parse: JsonEventParse<K>,
    frame: &[u8],
    rv: &mut String,
    initial: &mut bool,
) -> std::result::Result<Option<Event<K>>, Stop> {
    if frame.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let broken = |e: serde_json::Error| Stop::Broken(DecodeError::new(e.to_string()));
    let applied = |obj: K, rv: &mut String| match obj.meta().resource_version.as_deref() {
        Some(object_rv) if !object_rv.is_empty() => {
            *rv = object_rv.to_owned();
            Ok(obj)
        }
        _ => Err(Stop::Broken(DecodeError::new(
            "a watch event without metadata.resourceVersion",
        ))),
    };
    Ok(Some(match parse(frame).map_err(broken)? {
        WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
            let obj = applied(obj, rv)?;
            if *initial {
                Event::InitApply(obj)
            } else {
                Event::Apply(obj)
            }
        }
        WatchEvent::Deleted(obj) => Event::Delete(applied(obj, rv)?),
        WatchEvent::Bookmark(mark) => {
            if !mark.metadata.resource_version.is_empty() {
                *rv = mark.metadata.resource_version;
            }
            let ends_initial = mark
                .metadata
                .annotations
                .get("k8s.io/initial-events-end")
                .is_some_and(|v| v == "true");
            if !(*initial && ends_initial) {
                return Ok(None);
            }
            *initial = false;
            Event::InitDone
        }
        WatchEvent::Error(status) if is_gone(&status) => return Err(Stop::Gone(status)),
        WatchEvent::Error(status) => return Err(Stop::Status(status)),
    }))
}

/// Why a watch stops.
enum Stop {
    /// 410: the resourceVersion is gone; list again.
    Gone(Box<kube::core::Status>),
    /// Another error status: watch again from the last resourceVersion.
    Status(Box<kube::core::Status>),
    /// Undecodable: list again.
    Broken(DecodeError),
}

#[cfg(test)]
#[path = "watcher_tests.rs"]
mod tests;
