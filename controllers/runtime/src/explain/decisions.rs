//! The last decision of the running manager for each object: what its controller's latest sync
//! of the key did, and when. The manager serves these at `/debug/rkcm/decisions` (behind the
//! same authentication and authorization as `/metrics`), so `rkcm explain --manager` can show
//! what the live controller last decided beside what it would decide now.
//!
//! Every sync of a controller's main queue is recorded by [`crate::controller::Run::main`]:
//! its outcome (synced, or the error), and what the sync noted while it ran: the writes it made
//! ([`note_action`]) and why it waits ([`note_wait`]). A sync that finds its object gone calls
//! [`note_gone`] and the record is forgotten. The store is bounded: past its capacity the
//! oldest record goes first.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

/// How many records the process keeps at most.
pub const CAPACITY: usize = 10_000;

/// How a sync ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum Outcome {
    /// The sync returned without error.
    Synced,
    /// The sync failed and the key is retried with backoff.
    Failed { error: String },
}

/// One controller's last decision for one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decided {
    /// The controller's canonical name (`--controllers`).
    pub controller: String,
    /// `namespace/name`.
    pub key: String,
    /// When the sync ended, RFC 3339.
    pub at: String,
    pub outcome: Outcome,
    /// The writes the sync made, in words.
    pub actions: Vec<String>,
    /// Why it waits: `Reason: message`, the explain reason codes where the controller has them.
    pub waiting: Vec<String>,
}

/// What a sync noted while it ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Note {
    pub actions: Vec<String>,
    pub waiting: Vec<String>,
    /// The sync found its object deleted.
    pub gone: bool,
}

tokio::task_local! {
    static NOTE: RefCell<Note>;
}

/// Adds a write the current sync makes (no-op outside a recorded sync).
pub fn note_action(action: impl Into<String>) {
    let _ = NOTE.try_with(|n| n.borrow_mut().actions.push(action.into()));
}

/// Adds a reason the current sync waits (no-op outside a recorded sync).
pub fn note_wait(reason: &str, message: impl std::fmt::Display) {
    let _ = NOTE.try_with(|n| n.borrow_mut().waiting.push(format!("{reason}: {message}")));
}

/// Adds the waits of an explanation the current sync computed (no-op outside a recorded sync).
pub fn note_waits(waiting: &[super::Waiting]) {
    for w in waiting {
        note_wait(w.reason, &w.message);
    }
}

/// Whether the current task runs a recorded sync (the API client notes writes only then).
pub fn recording() -> bool {
    NOTE.try_with(|_| ()).is_ok()
}

/// `METHOD PATH` of a request that writes, when the current task runs a recorded sync.
pub fn write_of(method: &http::Method, uri: &http::Uri) -> Option<String> {
    let reads = [http::Method::GET, http::Method::HEAD, http::Method::OPTIONS];
    (!reads.contains(method) && recording()).then(|| format!("{method} {}", uri.path()))
}

/// The current sync found its object deleted: its record is forgotten.
pub fn note_gone() {
    let _ = NOTE.try_with(|n| n.borrow_mut().gone = true);
}

/// Runs `fut` (one sync) with a fresh note and returns its output with what it noted.
pub async fn noting<F: Future>(fut: F) -> (F::Output, Note) {
    NOTE.scope(RefCell::new(Note::default()), async {
        let out = fut.await;
        let note = NOTE.with(|n| std::mem::take(&mut *n.borrow_mut()));
        (out, note)
    })
    .await
}

#[derive(Debug, Default)]
struct Inner {
    seq: u64,
    by_key: HashMap<(String, String), (u64, Decided)>,
    /// Insertion order of the live records, oldest first.
    order: BTreeMap<u64, (String, String)>,
    /// The waits and sync counts the metrics read ([`super::waiting_metrics`]).
    waits: super::waiting_metrics::Tracker,
}

/// The bounded store of last decisions.
#[derive(Debug)]
pub struct Decisions {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl Decisions {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves whole records only: keep serving them.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records one sync's decision: replaces the key's last one, or forgets it when the sync
    /// found the object gone.
    pub fn record(&self, controller: &str, key: &str, outcome: Outcome, note: Note, at: String) {
        let id = (controller.to_owned(), key.to_owned());
        let mut inner = self.lock();
        let failed = matches!(outcome, Outcome::Failed { .. });
        inner.waits.count_sync(&id.0, failed);
        if let Some((seq, _)) = inner.by_key.remove(&id) {
            inner.order.remove(&seq);
        }
        if note.gone {
            inner.waits.forget(&id.0, &id.1);
            return;
        }
        let now = std::time::SystemTime::now();
        inner.waits.observe(&id.0, &id.1, &note.waiting, now);
        inner.seq += 1;
        let seq = inner.seq;
        let decided = Decided {
            controller: id.0.clone(),
            key: id.1.clone(),
            at,
            outcome,
            actions: note.actions,
            waiting: note.waiting,
        };
        inner.order.insert(seq, id.clone());
        inner.by_key.insert(id, (seq, decided));
        while inner.by_key.len() > self.capacity {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            inner.waits.forget(&oldest.0, &oldest.1);
            inner.by_key.remove(&oldest);
        }
    }

    /// The last decision of `controller` for `key`.
    pub fn get(&self, controller: &str, key: &str) -> Option<Decided> {
        self.lock()
            .by_key
            .get(&(controller.to_owned(), key.to_owned()))
            .map(|(_, d)| d.clone())
    }

    /// Every record of `controller` (all controllers when `None`), oldest first.
    pub fn list(&self, controller: Option<&str>) -> Vec<Decided> {
        let inner = self.lock();
        inner
            .order
            .values()
            .filter(|(c, _)| controller.is_none_or(|want| want == c))
            .filter_map(|id| inner.by_key.get(id).map(|(_, d)| d.clone()))
            .collect()
    }

    /// Lends the waits and sync counts to `f` (the metrics collector, at a scrape).
    pub fn with_tracker(&self, f: &mut dyn FnMut(&super::waiting_metrics::Tracker)) {
        f(&self.lock().waits);
    }

    pub fn len(&self) -> usize {
        self.lock().by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The process's store: the controllers record into it, the debug endpoint reads it.
pub fn global() -> &'static Decisions {
    static STORE: OnceLock<Decisions> = OnceLock::new();
    let store = STORE.get_or_init(|| Decisions::new(CAPACITY));
    super::waiting_metrics::register_once(move |f| store.with_tracker(f));
    store
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(actions: &[&str]) -> Note {
        Note {
            actions: actions.iter().map(|s| (*s).to_owned()).collect(),
            ..Note::default()
        }
    }

    #[test]
    fn keeps_the_last_decision_per_key_and_forgets_a_gone_object() {
        let d = Decisions::new(10);
        d.record(
            "c",
            "ns/a",
            Outcome::Synced,
            note(&["create 1 pod"]),
            "t1".into(),
        );
        d.record("c", "ns/a", Outcome::Synced, note(&[]), "t2".into());
        d.record("other", "ns/a", Outcome::Synced, note(&["x"]), "t3".into());
        let a = d.get("c", "ns/a").expect("recorded");
        assert_eq!((a.at.as_str(), a.actions.len()), ("t2", 0));
        assert_eq!(
            d.get("other", "ns/a").map(|x| x.actions),
            Some(vec!["x".into()])
        );
        let gone = Note {
            gone: true,
            ..Note::default()
        };
        d.record("c", "ns/a", Outcome::Synced, gone, "t4".into());
        assert_eq!(d.get("c", "ns/a"), None);
        assert_eq!(d.len(), 1);
        assert_eq!(d.list(Some("c")), vec![]);
    }

    #[test]
    fn drops_the_oldest_past_capacity() {
        let d = Decisions::new(2);
        for key in ["ns/a", "ns/b", "ns/c"] {
            d.record("c", key, Outcome::Synced, Note::default(), "t".into());
        }
        // Rewriting b makes it the newest: a and then c go before it.
        d.record("c", "ns/b", Outcome::Synced, Note::default(), "t".into());
        d.record("c", "ns/d", Outcome::Synced, Note::default(), "t".into());
        let keys: Vec<String> = d.list(None).into_iter().map(|x| x.key).collect();
        assert_eq!(keys, ["ns/b", "ns/d"]);
    }

    #[tokio::test]
    async fn a_sync_notes_its_writes_and_waits_only_inside_its_scope() {
        note_action("outside");
        let ((), n) = noting(async {
            note_action("scale web-1 to 3");
            tokio::task::yield_now().await;
            note_wait("PodsUnavailable", "1 of 3");
        })
        .await;
        assert_eq!(n.actions, ["scale web-1 to 3"]);
        assert_eq!(n.waiting, ["PodsUnavailable: 1 of 3"]);
        assert!(!n.gone);
        let (_, n) = noting(async { note_gone() }).await;
        assert!(n.gone);
    }

    #[tokio::test]
    async fn names_writes_only_inside_a_recorded_sync() {
        let uri: http::Uri = "/api/v1/namespaces/ns/pods?dryRun=All"
            .parse()
            .expect("uri");
        assert_eq!(write_of(&http::Method::POST, &uri), None);
        let (got, _) = noting(async {
            [http::Method::POST, http::Method::GET, http::Method::DELETE]
                .map(|m| write_of(&m, &uri))
        })
        .await;
        assert_eq!(
            got,
            [
                Some("POST /api/v1/namespaces/ns/pods".to_owned()),
                None,
                Some("DELETE /api/v1/namespaces/ns/pods".to_owned())
            ]
        );
    }
}
