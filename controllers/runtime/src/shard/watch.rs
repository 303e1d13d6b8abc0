//! The ring's Leases as one watch shows them, so that a holder's round reads them from memory
//! instead of listing them every retry period.
//!
//! A list of the ring every round decoded every range's Lease in every replica every two
//! seconds, and made the API server serve it; a watch delivers only what changes (mostly the
//! members' renewals). The round reads the watched Leases while the watch runs and falls back
//! to a list while it does not (before its first list, after an error until it delivers again).
//!
//! A watch may lag where a list would not. Nothing the holder decides from what it sees is
//! unsafe on an older view: every write it makes is an update on the version it saw (a lagging
//! view makes it fail, and a failed fence reads the member Lease again), and a session judged
//! from an older record only looks live longer. What must not happen is the view going
//! *back*: the holder's own writes are newer than what the watch delivered so far, so the
//! round keeps a Lease it wrote until the watch shows that version or a newer one
//! ([`Snapshot::newest`]).

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::cache::{compare_resource_versions, retry_backoff};

/// What a round reads: the Leases the watch shows and the newest resourceVersion it applied.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    /// Shared with the watched state: a round every retry period copies no Lease.
    pub leases: Vec<Arc<Lease>>,
    /// The newest resourceVersion among the Leases and deletions applied since the last list
    /// (`None` when none was comparable): a Lease the round holds at a newer version than this
    /// is one the watch has not delivered yet.
    pub newest: Option<String>,
}

/// The watched state, shared by the watch task and the holder's rounds.
#[derive(Debug, Default)]
pub(super) struct Watched {
    leases: HashMap<String, Arc<Lease>>,
    newest: Option<String>,
    /// A relist in progress: the Leases listed so far.
    listing: Option<HashMap<String, Arc<Lease>>>,
    /// Listed and delivering: false before the first list completes and after an error,
    /// until the watch delivers again.
    live: bool,
}

impl Watched {
    /// The Leases as the watch shows them, while it runs.
    pub(super) fn snapshot(&self) -> Option<Snapshot> {
        self.live.then(|| Snapshot {
            leases: self.leases.values().cloned().collect(),
            newest: self.newest.clone(),
        })
    }

    fn newer(&mut self, lease: &Lease) {
        let Some(rv) = lease.metadata.resource_version.as_deref() else {
            return;
        };
        let newer = match self.newest.as_deref() {
            None => compare_resource_versions(rv, rv).is_some(),
            Some(current) => {
                compare_resource_versions(rv, current) == Some(std::cmp::Ordering::Greater)
            }
        };
        if newer {
            self.newest = Some(rv.to_owned());
        }
    }

    /// Applies one event of the watch.
    pub(super) fn apply(&mut self, event: Event<Lease>) {
        match event {
            // A relist follows a watch that could not resume: events may be missing.
            Event::Init => {
                self.listing = Some(HashMap::new());
                self.live = false;
            }
            Event::InitApply(lease) => {
                if let (Some(listing), Some(name)) =
                    (self.listing.as_mut(), lease.metadata.name.clone())
                {
                    listing.insert(name, kept(lease));
                }
            }
            Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                self.newest = None;
                for lease in listed.values() {
                    self.newer(lease);
                }
                self.leases = listed;
                self.live = true;
            }
            Event::Apply(lease) => {
                self.newer(&lease);
                if let Some(name) = lease.metadata.name.clone() {
                    self.leases.insert(name, kept(lease));
                }
                self.live = self.listing.is_none();
            }
            Event::Delete(lease) => {
                self.newer(&lease);
                if let Some(name) = &lease.metadata.name {
                    self.leases.remove(name);
                }
                self.live = self.listing.is_none();
            }
        }
    }

    /// The watch failed: rounds list until it delivers again.
    pub(super) fn failed(&mut self) {
        self.live = false;
    }
}

/// A Lease as the watched state keeps it: without its managed fields, which nothing reads
/// (the rounds would otherwise hold them, and compare them, in every copy).
fn kept(mut lease: Lease) -> Arc<Lease> {
    lease.metadata.managed_fields = None;
    Arc::new(lease)
}

/// Watches the ring's Leases (label `selector`) into `watched` until `cancel`.
pub(super) async fn run(
    api: Api<Lease>,
    selector: String,
    watched: Arc<Mutex<Watched>>,
    cancel: CancellationToken,
) {
    let config = watcher::Config::default().labels(&selector);
    let mut events = Box::pin(watcher(api, config).backoff(retry_backoff()));
    loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            next = events.next() => next,
        };
        match next {
            Some(Ok(event)) => watched.lock().apply(event),
            Some(Err(error)) => {
                tracing::debug!(%error, "watching the shard leases failed");
                watched.lock().failed();
            }
            None => {
                watched.lock().failed();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn lease(name: &str, rv: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                resource_version: Some(rv.to_owned()),
                ..ObjectMeta::default()
            },
            spec: None,
        }
    }

    fn names(s: &Snapshot) -> Vec<String> {
        let mut names: Vec<String> = s
            .leases
            .iter()
            .filter_map(|l| l.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_snapshot_exists_only_while_the_watch_delivers() {
        let mut w = Watched::default();
        assert!(w.snapshot().is_none(), "nothing listed yet");
        w.apply(Event::Init);
        w.apply(Event::InitApply(lease("a", "5")));
        assert!(w.snapshot().is_none(), "the list is not complete");
        w.apply(Event::InitApply(lease("b", "9")));
        w.apply(Event::InitDone);
        let s = w.snapshot().expect("listed");
        assert_eq!(names(&s), ["a", "b"]);
        assert_eq!(s.newest.as_deref(), Some("9"));

        w.apply(Event::Apply(lease("c", "12")));
        w.apply(Event::Delete(lease("a", "13")));
        let s = w.snapshot().expect("watching");
        assert_eq!(names(&s), ["b", "c"]);
        assert_eq!(s.newest.as_deref(), Some("13"), "a deletion is newer too");

        w.failed();
        assert!(w.snapshot().is_none(), "after an error rounds list");
        w.apply(Event::Apply(lease("b", "14")));
        assert!(w.snapshot().is_some(), "delivering again");

        // A relist replaces everything and starts the newest version over from what it listed.
        w.apply(Event::Init);
        assert!(w.snapshot().is_none(), "relisting");
        w.apply(Event::Apply(lease("d", "20")));
        assert!(
            w.snapshot().is_none(),
            "an event during a relist does not end it"
        );
        w.apply(Event::InitApply(lease("e", "18")));
        w.apply(Event::InitDone);
        let s = w.snapshot().expect("relisted");
        assert_eq!(names(&s), ["e"]);
        assert_eq!(s.newest.as_deref(), Some("18"));
    }
}
