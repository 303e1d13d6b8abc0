//! Kube watches feeding a [`Checker`]: one watch per kind and namespace (or one per kind for
//! the whole cluster), plus Nodes. Every change is stamped with its receive time and handed
//! over in the order the watch delivered it; a ticker judges cross-kind suspicions.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Checker, Config, Gap, Kind, Object, Observation, Violation};

/// Which namespaces to watch.
#[derive(Debug, Clone)]
pub enum Scope {
    All,
    Namespaces(Vec<String>),
}

type Feed = mpsc::UnboundedSender<(Timestamp, Observation)>;

fn lock(m: &Mutex<Checker>) -> MutexGuard<'_, Checker> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a finished watcher saw.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub started: Timestamp,
    pub finished: Timestamp,
    pub observed: u64,
    pub violations: Vec<Violation>,
    pub gaps: Vec<Gap>,
    /// Suspicions not judged: the watch their bound comes from was down around them.
    pub unjudged: u64,
}

impl Report {
    /// A human-readable report: one line per violation and gap.
    pub fn text(&self) -> String {
        let mut out = format!(
            "invariant check {} .. {}: {} changes observed, {} violations, {} watch gaps, {} unjudged\n",
            self.started,
            self.finished,
            self.observed,
            self.violations.len(),
            self.gaps.len(),
            self.unjudged
        );
        for v in &self.violations {
            out.push_str(&format!("VIOLATION {v}\n"));
        }
        for g in &self.gaps {
            out.push_str(&format!("gap: {:?} watch relisted at {}\n", g.kind, g.at));
        }
        out
    }
}

/// A running invariant watcher. Its watches stop when it is dropped.
pub struct InvariantWatcher {
    checker: Arc<Mutex<Checker>>,
    tasks: Vec<JoinHandle<()>>,
    started: Timestamp,
    grace: Duration,
}

fn spawn_watch<K>(
    api: Api<K>,
    ns: Option<String>,
    kind: Kind,
    wrap: fn(K) -> Object,
    feed: Feed,
    listed: mpsc::UnboundedSender<()>,
) -> JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    tokio::spawn(async move {
        let mut first = true;
        // The managers' informers come back within seconds of an API server outage; the
        // checker's watches must not lag them by a longer backoff of their own.
        let mut stream = watcher(api, watcher::Config::default())
            .backoff(rkcm_runtime::cache::retry_backoff())
            .boxed();
        while let Some(ev) = stream.next().await {
            let now = Timestamp::now();
            let obs = match ev {
                Ok(watcher::Event::Init) => Observation::ListStart(kind, ns.clone()),
                Ok(watcher::Event::InitApply(o)) => Observation::Listed(wrap(o)),
                Ok(watcher::Event::InitDone) => {
                    if first {
                        first = false;
                        let _ = listed.send(());
                    }
                    Observation::ListDone(kind, ns.clone())
                }
                Ok(watcher::Event::Apply(o)) => Observation::Applied(wrap(o)),
                Ok(watcher::Event::Delete(o)) => Observation::Deleted(wrap(o)),
                Err(e) => {
                    tracing::debug!(?kind, error = %e, "invariant watch error");
                    Observation::WatchLost(kind, ns.clone())
                }
            };
            if feed.send((now, obs)).is_err() {
                return;
            }
        }
    })
}

impl InvariantWatcher {
    /// Starts the watches and returns once every one of them has listed.
    pub async fn start(client: Client, scope: Scope, config: Config) -> Result<Self> {
        let checker = Arc::new(Mutex::new(Checker::new(config)));
        let (feed, mut rx) = mpsc::unbounded_channel();
        let (listed_tx, mut listed_rx) = mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        let namespaces: Vec<Option<String>> = match &scope {
            Scope::All => vec![None],
            Scope::Namespaces(n) => n.iter().cloned().map(Some).collect(),
        };
        for ns in &namespaces {
            macro_rules! watch {
                ($k:ty, $kind:expr, $wrap:expr) => {{
                    let api: Api<$k> = match ns {
                        Some(n) => Api::namespaced(client.clone(), n),
                        None => Api::all(client.clone()),
                    };
                    tasks.push(spawn_watch(
                        api,
                        ns.clone(),
                        $kind,
                        $wrap,
                        feed.clone(),
                        listed_tx.clone(),
                    ));
                }};
            }
            watch!(Pod, Kind::Pod, |o| Object::Pod(Box::new(o)));
            watch!(ReplicaSet, Kind::ReplicaSet, |o| Object::ReplicaSet(
                Box::new(o)
            ));
            watch!(Deployment, Kind::Deployment, |o| Object::Deployment(
                Box::new(o)
            ));
            watch!(Job, Kind::Job, |o| Object::Job(Box::new(o)));
        }
        tasks.push(spawn_watch(
            Api::<Node>::all(client.clone()),
            None,
            Kind::Node,
            |o| Object::Node(Box::new(o)),
            feed.clone(),
            listed_tx.clone(),
        ));
        let watches = tasks.len();
        drop(feed);

        let grace = config.grace.unsigned_abs();
        {
            let checker = checker.clone();
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(500));
                loop {
                    tokio::select! {
                        got = rx.recv() => match got {
                            Some((at, obs)) => lock(&checker).observe(at, obs),
                            None => return,
                        },
                        _ = tick.tick() => lock(&checker).tick(Timestamp::now()),
                    }
                }
            }));
        }
        let wait_lists = async {
            for _ in 0..watches {
                listed_rx.recv().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait_lists)
            .await
            .context("invariant watches did not list within 60s")?;
        Ok(Self {
            checker,
            tasks,
            started: Timestamp::now(),
            grace,
        })
    }

    /// Violations found so far.
    pub fn violations(&self) -> Vec<Violation> {
        lock(&self.checker).violations().to_vec()
    }

    /// Stops watching once every suspicion older than now has been judged (at most two
    /// grace periods from now), and reports.
    pub async fn finish(self) -> Report {
        let deadline = tokio::time::Instant::now() + self.grace * 2;
        let until =
            Timestamp::now() + jiff::SignedDuration::try_from(self.grace).unwrap_or_default();
        loop {
            {
                let mut c = lock(&self.checker);
                c.tick(Timestamp::now());
                if Timestamp::now() >= until && !c.pending() {
                    break;
                }
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        for t in &self.tasks {
            t.abort();
        }
        let c = lock(&self.checker);
        Report {
            started: self.started,
            finished: Timestamp::now(),
            observed: c.observed(),
            violations: c.violations().to_vec(),
            gaps: c.gaps().to_vec(),
            unjudged: c.unjudged(),
        }
    }
}

impl Drop for InvariantWatcher {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
