//! Reads: GET of one object, LIST (with `resourceVersion=0` perhaps from a lagging watch
//! cache) and WATCH (per-watch delivery delay, bookmarks, dropped and expired watches, 410
//! after compaction).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::resources::{RESOURCES, ResourceInfo, key_of, meta_str, resource};
use super::store::{Caller, Change, Delivery, Reply, Watch, World, not_found};
use crate::fake_api::status;
use crate::sim::select::Selector;

impl World {
    pub(super) fn watch_delay(&mut self) -> Duration {
        let (lo, hi) = self.faults.watch_delay_ms;
        let ms = if hi > lo {
            self.rng.random_range(lo..=hi)
        } else {
            lo
        };
        Duration::from_millis(ms)
    }

    pub(super) fn deliver(&mut self, change: &Change) {
        let now = tokio::time::Instant::now();
        let mut targets = Vec::new();
        for (i, w) in self.watches.iter().enumerate() {
            if w.resource == change.resource && watch_admits(w, &change.obj) {
                targets.push(i);
            }
        }
        for i in targets {
            let delay = self.watch_delay();
            let line = event_line(change.kind, &change.obj);
            let w = &mut self.watches[i];
            let at = (now + delay).max(w.last_at);
            w.last_at = at;
            let epoch = w.epoch;
            let ok = w.tx.send(Delivery { at, line }).is_ok();
            if ok {
                self.mark_seen(epoch, &change.obj);
            }
        }
        self.watches.retain(|w| !w.tx.is_closed());
    }

    /// Sends a bookmark with the current resourceVersion to every watch that asked for them.
    pub fn bookmarks(&mut self) {
        let rv = self.rv;
        let now = tokio::time::Instant::now();
        for w in &mut self.watches {
            if !w.bookmarks {
                continue;
            }
            let r = resource(w.resource).map(|r| (r.kind, r.api_version()));
            let (kind, api_version) = r.unwrap_or(("", String::new()));
            let obj = json!({"kind": kind, "apiVersion": api_version,
                "metadata": {"resourceVersion": rv.to_string()}});
            let at = now.max(w.last_at);
            w.last_at = at;
            let _ = w.tx.send(Delivery {
                at,
                line: event_line("BOOKMARK", &obj),
            });
        }
    }

    /// Ends every watch of `resource` (all when `None`): the clients re-watch from their last
    /// version. With `expire`, the history is compacted first and the watches get a 410
    /// `Expired` event, so they relist.
    pub fn drop_watches(&mut self, resource: Option<&str>, expire: bool) {
        let now = tokio::time::Instant::now();
        let rv = self.rv;
        let hit = |w: &Watch| resource.is_none_or(|r| r == w.resource);
        if expire {
            for r in RESOURCES {
                if resource.is_none_or(|x| x == r.plural) {
                    self.compacted.insert(r.plural, rv);
                    self.log.remove(r.plural);
                }
            }
            for w in self.watches.iter_mut().filter(|w| hit(w)) {
                let st = status(
                    410,
                    "Expired",
                    "The resourceVersion for the provided watch is too old.",
                );
                let at = now.max(w.last_at);
                let _ = w.tx.send(Delivery {
                    at,
                    line: event_line("ERROR", &st),
                });
            }
        }
        self.watches.retain(|w| !hit(w));
        self.note(format!(
            "sim {} watches of {}",
            if expire { "expire" } else { "drop" },
            resource.unwrap_or("every resource")
        ));
    }

    /// The object with `key`, for a GET.
    pub fn read(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: &str,
        name: &str,
    ) -> Reply {
        match self.get(r.plural, &key_of(ns, name)) {
            Some(obj) => {
                self.mark_seen(caller.epoch, &obj);
                Reply::Json(200, (*obj).clone())
            }
            None => not_found(r, name),
        }
    }

    /// The state of `resource` as of version `at` (undoing later changes from the log).
    fn state_at(&self, r: &'static ResourceInfo, at: u64) -> BTreeMap<String, Arc<Value>> {
        let mut state: BTreeMap<String, Arc<Value>> = self
            .objects
            .range((r.plural, String::new())..)
            .take_while(|((res, _), _)| *res == r.plural)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        if let Some(log) = self.log.get(r.plural) {
            for c in log.iter().rev().take_while(|c| c.rv > at) {
                match &c.prev {
                    Some(p) => {
                        state.insert(c.key.clone(), p.clone());
                    }
                    None => {
                        state.remove(&c.key);
                    }
                }
            }
        }
        state
    }

    /// A LIST. With `resourceVersion=0` it may be served from a lagging cache (fault
    /// `stale_list`).
    pub fn list_reply(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        query: &Query,
    ) -> Reply {
        let mut at = self.rv;
        if query.resource_version.as_deref() == Some("0")
            && caller.epoch != 0
            && self.faults.stale_list > 0.0
            && self.rng.random_bool(self.faults.stale_list.min(1.0))
        {
            let window = u64::try_from(self.faults.stale_window.as_millis()).unwrap_or(0);
            let since = self.now_ms().saturating_sub(window);
            let floor = self.compacted.get(r.plural).copied().unwrap_or(0);
            let candidates: Vec<u64> = self
                .log
                .get(r.plural)
                .into_iter()
                .flatten()
                .filter(|c| c.at_ms >= since && c.rv > floor)
                .map(|c| c.rv - 1)
                .filter(|rv| *rv >= floor)
                .collect();
            if !candidates.is_empty() {
                at = candidates[self.rng.random_range(0..candidates.len())];
                let behind = self.rv - at;
                self.note(format!(
                    "sim stale list of {} for {} at rv={at} ({behind} behind)",
                    r.plural, caller.agent
                ));
            }
        }
        let items: Vec<Value> = self
            .state_at(r, at)
            .into_values()
            .filter(|o| ns.is_none_or(|n| meta_str(o, "namespace") == n))
            .filter(|o| query.labels.matches_labels(o) && query.fields.matches_fields(o))
            .map(|o| (*o).clone())
            .collect();
        for o in &items {
            self.mark_seen(caller.epoch, o);
        }
        Reply::Json(
            200,
            json!({"kind": format!("{}List", r.kind), "apiVersion": r.api_version(),
                "metadata": {"resourceVersion": at.to_string()}, "items": items}),
        )
    }

    /// A WATCH from `query.resource_version`.
    pub fn watch_reply(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        query: &Query,
    ) -> Reply {
        let from: u64 = match query.resource_version.as_deref() {
            None | Some("") | Some("0") => self.rv,
            Some(v) => match v.parse() {
                Ok(v) => v,
                Err(_) => {
                    return Reply::Json(
                        400,
                        status(400, "BadRequest", &format!("invalid resourceVersion {v}")),
                    );
                }
            },
        };
        let floor = self.compacted.get(r.plural).copied().unwrap_or(0);
        if from < floor {
            return Reply::Json(
                410,
                status(
                    410,
                    "Expired",
                    &format!("too old resource version: {from} ({floor})"),
                ),
            );
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let watch = Watch {
            epoch: caller.epoch,
            resource: r.plural,
            namespace: ns.map(str::to_owned),
            labels: query.labels.clone(),
            fields: query.fields.clone(),
            bookmarks: query.bookmarks,
            tx,
            last_at: tokio::time::Instant::now(),
        };
        let backlog: Vec<Change> = self
            .log
            .get(r.plural)
            .into_iter()
            .flatten()
            .filter(|c| c.rv > from && watch_admits(&watch, &c.obj))
            .cloned()
            .collect();
        self.watches.push(watch);
        let idx = self.watches.len() - 1;
        let now = tokio::time::Instant::now();
        for c in backlog {
            let delay = self.watch_delay();
            let w = &mut self.watches[idx];
            let at = (now + delay).max(w.last_at);
            w.last_at = at;
            let _ = w.tx.send(Delivery {
                at,
                line: event_line(c.kind, &c.obj),
            });
            self.mark_seen(caller.epoch, &c.obj);
        }
        Reply::Watch(rx)
    }
}

pub(super) fn watch_admits(w: &Watch, obj: &Value) -> bool {
    w.namespace
        .as_deref()
        .is_none_or(|ns| meta_str(obj, "namespace") == ns)
        && w.labels.matches_labels(obj)
        && w.fields.matches_fields(obj)
}

pub(super) fn event_line(kind: &str, obj: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// The query parameters of a list or watch.
#[derive(Debug, Default)]
pub struct Query {
    pub watch: bool,
    pub resource_version: Option<String>,
    pub labels: Selector,
    pub fields: Selector,
    pub bookmarks: bool,
}

impl Query {
    pub fn parse(q: &str) -> Self {
        let mut out = Query::default();
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            match &*k {
                "watch" => out.watch = v == "true" || v == "1",
                "resourceVersion" => out.resource_version = Some(v.into_owned()),
                "labelSelector" => out.labels = Selector::parse(&v),
                "fieldSelector" => out.fields = Selector::parse(&v),
                "allowWatchBookmarks" => out.bookmarks = v == "true",
                _ => {}
            }
        }
        out
    }
}
