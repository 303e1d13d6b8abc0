//! What wraps the objects: the envelope (magic + `runtime.Unknown`), lists, watch events and
//! their frames, bookmarks, `Status` errors, and the identity of the object in a write's answer.

use super::objects::{object_meta, time};
use super::wire::{DecodeError, Fields, MAGIC, Result, bytes, int32, non_empty, string};
use crate::api::written::Written;

/// An object as sent: its kind and the message.
#[derive(Debug, PartialEq, Eq)]
pub struct Envelope<'a> {
    pub api_version: String,
    pub kind: String,
    pub raw: &'a [u8],
}

/// Opens the `k8s\0` + `runtime.Unknown` envelope.
pub fn envelope(buf: &[u8]) -> Result<Envelope<'_>> {
    let body = buf
        .strip_prefix(MAGIC)
        .ok_or_else(|| DecodeError::new("missing the k8s protobuf magic prefix"))?;
    let mut env = Envelope {
        api_version: String::new(),
        kind: String::new(),
        raw: &[],
    };
    let mut f = Fields::new(body);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => {
                let mut t = Fields::new(bytes(v, "typeMeta")?);
                while let Some((n, v)) = t.next()? {
                    match n {
                        1 => env.api_version = string(v, "typeMeta.apiVersion")?,
                        2 => env.kind = string(v, "typeMeta.kind")?,
                        _ => {}
                    }
                }
            }
            2 => env.raw = bytes(v, "raw")?,
            3 | 4 => {
                // contentEncoding / contentType: empty for the API server's own encoding.
                let s = string(v, "content")?;
                if !s.is_empty() {
                    return Err(DecodeError::new(format!(
                        "unsupported inner encoding {s:?}"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(env)
}

/// `metav1.ListMeta`, the parts a list reader needs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ListMeta {
    pub resource_version: String,
    pub continue_: Option<String>,
}

fn list_meta(buf: &[u8]) -> Result<ListMeta> {
    let mut m = ListMeta::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            2 => m.resource_version = string(v, "listMeta.resourceVersion")?,
            3 => m.continue_ = non_empty(string(v, "listMeta.continue")?),
            _ => {}
        }
    }
    Ok(m)
}

/// A list (`PodList`, `NodeList`: `metadata` = 1, `items` = 2) of `kind`, each item decoded
/// with `item`.
pub fn list<K>(
    buf: &[u8],
    kind: &str,
    item: impl Fn(&[u8]) -> Result<K>,
) -> Result<(ListMeta, Vec<K>)> {
    let env = envelope(buf)?;
    if env.kind != kind {
        return Err(DecodeError::new(format!(
            "expected a {kind}, got {:?}",
            env.kind
        )));
    }
    let mut meta = ListMeta::default();
    let mut items = Vec::new();
    let mut f = Fields::new(env.raw);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => meta = list_meta(bytes(v, "list.metadata")?)?,
            2 => items.push(item(bytes(v, "list.items")?)?),
            _ => {}
        }
    }
    Ok((meta, items))
}

/// `metav1.WatchEvent`: its type and its object, still in its envelope.
pub fn watch_event(buf: &[u8]) -> Result<(String, &[u8])> {
    let mut type_ = String::new();
    let mut object: &[u8] = &[];
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => type_ = string(v, "watchEvent.type")?,
            2 => {
                let mut raw = Fields::new(bytes(v, "watchEvent.object")?);
                while let Some((n, v)) = raw.next()? {
                    if n == 1 {
                        object = bytes(v, "watchEvent.object.raw")?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok((type_, object))
}

/// Splits a watch stream into frames (4-byte big-endian length, then the message; or, made
/// with [`Frames::lines`], one JSON event per line). Feed it the body as it arrives; take the
/// complete frames.
#[derive(Debug, Default)]
pub struct Frames {
    buf: Vec<u8>,
    start: usize,
    lines: bool,
}

/// The largest frame accepted (the API server's own limit on an object is far below).
const MAX_FRAME: usize = 256 << 20;

impl Frames {
    pub fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// A splitter of a JSON watch stream: newline-delimited events.
    pub fn lines() -> Self {
        Self {
            lines: true,
            ..Self::default()
        }
    }

    /// The next complete frame, if one has arrived.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>> {
        let pending = &self.buf[self.start..];
        let (frame, used) = if self.lines {
            let Some(end) = pending.iter().position(|b| *b == b'\n') else {
                if pending.len() > MAX_FRAME {
                    return Err(DecodeError::new("watch line too long"));
                }
                return Ok(None);
            };
            (&pending[..end], end + 1)
        } else {
            let Some(head) = pending.get(..4) else {
                return Ok(None);
            };
            let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
            if len > MAX_FRAME {
                return Err(DecodeError::new(format!("watch frame of {len} bytes")));
            }
            let Some(frame) = pending.get(4..4 + len) else {
                return Ok(None);
            };
            (frame, 4 + len)
        };
        let frame = frame.to_vec();
        self.start += used;
        if self.start > self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(frame))
    }

    /// Bytes received but not yet a whole frame.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

/// What a bookmark tells: the resourceVersion reached, and whether it ends the initial
/// events of a streaming list.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Bookmark {
    pub resource_version: String,
    pub initial_events_end: bool,
}

/// The bookmark object of a watch (any kind: `metadata` is field 1 of every object).
pub fn bookmark(raw: &[u8]) -> Result<Bookmark> {
    let mut b = Bookmark::default();
    let mut f = Fields::new(raw);
    while let Some((n, v)) = f.next()? {
        if n == 1 {
            let meta = object_meta(bytes(v, "bookmark.metadata")?)?;
            b.resource_version = meta.resource_version.unwrap_or_default();
            b.initial_events_end = meta
                .annotations
                .is_some_and(|a| a.get(INITIAL_EVENTS_END).is_some_and(|v| v == "true"));
        }
    }
    Ok(b)
}

/// The bookmark annotation that ends the initial events of a streaming list.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// `metav1.Status` (an error response, or an `ERROR` watch event), as kube reports it.
pub fn status(raw: &[u8]) -> Result<kube::core::Status> {
    let mut st = kube::core::Status::default();
    let mut f = Fields::new(raw);
    while let Some((n, v)) = f.next()? {
        match n {
            2 => {
                st.status = match string(v, "status.status")?.as_str() {
                    "Success" => Some(kube::core::response::StatusSummary::Success),
                    "Failure" => Some(kube::core::response::StatusSummary::Failure),
                    _ => None,
                }
            }
            3 => st.message = string(v, "status.message")?,
            4 => st.reason = string(v, "status.reason")?,
            5 => st.details = Some(status_details(bytes(v, "status.details")?)?),
            6 => st.code = u16::try_from(int32(v, "status.code")?).unwrap_or(0),
            _ => {}
        }
    }
    Ok(st)
}

/// `metav1.StatusDetails`: callers read its causes (a create refused with cause
/// `NamespaceTerminating` is not retried).
fn status_details(raw: &[u8]) -> Result<kube::core::response::StatusDetails> {
    let mut d = kube::core::response::StatusDetails {
        name: String::new(),
        group: String::new(),
        kind: String::new(),
        uid: String::new(),
        causes: Vec::new(),
        retry_after_seconds: 0,
    };
    let mut f = Fields::new(raw);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => d.name = string(v, "status.details.name")?,
            2 => d.group = string(v, "status.details.group")?,
            3 => d.kind = string(v, "status.details.kind")?,
            4 => {
                let mut cause = kube::core::response::StatusCause {
                    reason: String::new(),
                    message: String::new(),
                    field: String::new(),
                };
                let mut c = Fields::new(bytes(v, "status.details.causes")?);
                while let Some((n, v)) = c.next()? {
                    match n {
                        1 => cause.reason = string(v, "status.details.causes.reason")?,
                        2 => cause.message = string(v, "status.details.causes.message")?,
                        3 => cause.field = string(v, "status.details.causes.field")?,
                        _ => {}
                    }
                }
                d.causes.push(cause);
            }
            5 => {
                let after = int32(v, "status.details.retryAfterSeconds")?;
                d.retry_after_seconds = u32::try_from(after).unwrap_or(0);
            }
            6 => d.uid = string(v, "status.details.uid")?,
            _ => {}
        }
    }
    Ok(d)
}

/// The `Status` of an error response: protobuf, JSON, or else a status built from the code
/// and the text (as kube does for a body that is no `Status`).
pub(crate) fn error_status(code: u16, body: &[u8]) -> kube::core::Status {
    if let Ok(env) = envelope(body)
        && env.kind == "Status"
        && let Ok(mut st) = status(env.raw)
    {
        if st.code == 0 {
            st.code = code;
        }
        return st;
    }
    if let Ok(st) = serde_json::from_slice::<kube::core::Status>(body) {
        return st;
    }
    let text = String::from_utf8_lossy(body);
    kube::core::Status::failure(text.trim(), "Failed to parse error data").with_code(code)
}

/// The identity of the object in a write's answer (an enveloped object of any kind): the
/// name, namespace, UID, resourceVersion and creation time of its `metadata` (field 1 of
/// every top-level object); every other field is skipped unread.
pub fn identity(buf: &[u8]) -> Result<Written> {
    let env = envelope(buf)?;
    let mut w = Written::default();
    let mut f = Fields::new(env.raw);
    while let Some((n, v)) = f.next()? {
        if n != 1 {
            continue;
        }
        let mut m = Fields::new(bytes(v, "metadata")?);
        while let Some((n, v)) = m.next()? {
            match n {
                1 => w.name = non_empty(string(v, "metadata.name")?),
                3 => w.namespace = non_empty(string(v, "metadata.namespace")?),
                5 => w.uid = non_empty(string(v, "metadata.uid")?),
                6 => w.resource_version = non_empty(string(v, "metadata.resourceVersion")?),
                8 => w.creation_timestamp = time(v, "metadata.creationTimestamp")?,
                _ => {}
            }
        }
    }
    Ok(w)
}
