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

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use http_body_util::BodyExt;
use kube::runtime::watcher::{Error, Event, Result};

use crate::cache::item::Item;

use super::envelope::{Frames, bookmark, envelope, error_status, list, status, watch_event};
use super::wire::{DecodeError, MEDIA_TYPE, WATCH_MEDIA_TYPE};
use crate::error::is_gone;

/// Decodes one object message (without envelope).
pub type Decode<K> = fn(&[u8]) -> std::result::Result<K, DecodeError>;

/// What to list and watch, and how.
#[derive(Debug, Clone)]
pub struct Params {
    /// Collection path, e.g. `/api/v1/pods`.
    pub path: String,
    /// The object kind (`Pod`) and its list kind (`PodList`).
    pub kind: &'static str,
    pub list_kind: &'static str,
    pub field_selector: Option<String>,
    pub page_size: u32,
    /// Server-side watch timeout, in seconds.
    pub timeout: u32,
    /// One streaming WATCH (`sendInitialEvents=true`) instead of LIST pages.
    pub streaming: bool,
    /// The cache already holds a complete list: every LIST is a consistent read (no
    /// resourceVersion), never `resourceVersion=0`, which a lagging watch cache may answer
    /// with a state older than the one the cache already shows.
    pub listed: bool,
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
    decode: Decode<K>,
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
    let machine = Machine {
        client,
        params,
        decode,
        phase: Phase::Empty,
        out: VecDeque::new(),
    };
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
                match open_watch(&self.client, &self.params, "0", true).await {
                    Ok(body) => {
                        self.out.push_back(Ok(Event::Init.into()));
                        self.phase = Phase::Watching {
                            rv: String::new(),
                            body,
                            frames: Frames::default(),
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
                match open_watch(&self.client, &self.params, &rv, false).await {
                    Ok(body) => {
                        self.phase = Phase::Watching {
                            rv,
                            body,
                            frames: Frames::default(),
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
        let mut query = format!("limit={}{}", self.params.page_size, selector(&self.params));
        match &continue_ {
            Some(token) => query.push_str(&format!("&continue={}", encode(token))),
            // The first list from the watch cache, as kube's `ListSemantic::Any`; a relist
            // must not go back behind what the cache already showed, so it reads consistently
            // (client-go relists at its last resourceVersion for the same reason).
            None if !self.params.listed => {
                query.push_str("&resourceVersion=0&resourceVersionMatch=NotOlderThan");
            }
            None => {}
        }
        let sent = send(&self.client, &self.params.path, query, MEDIA_TYPE).await;
        let body = match sent {
            Ok(response) => response.into_body().collect_bytes().await,
            Err(e) => Err(e),
        };
        let decoded = body.and_then(|bytes| {
            list(&bytes, self.params.list_kind, self.decode).map_err(service_error)
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
                        self.params.listed = true;
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
            match event(self.params.kind, self.decode, &frame, &mut rv, &mut initial) {
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

/// Opens a watch from `rv`; `initial`: a streaming list (`sendInitialEvents`).
async fn open_watch(
    client: &kube::Client,
    params: &Params,
    rv: &str,
    initial: bool,
) -> kube::Result<kube::client::Body> {
    let mut query = format!(
        "watch=true&allowWatchBookmarks=true&timeoutSeconds={}&resourceVersion={}{}",
        params.timeout,
        encode(rv),
        selector(params)
    );
    if initial {
        query.push_str("&sendInitialEvents=true&resourceVersionMatch=NotOlderThan");
    }
    Ok(send(client, &params.path, query, WATCH_MEDIA_TYPE)
        .await?
        .into_body())
}

fn selector(params: &Params) -> String {
    params
        .field_selector
        .as_deref()
        .map(|f| format!("&fieldSelector={}", encode(f)))
        .unwrap_or_default()
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
