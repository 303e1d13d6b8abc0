//! Watch-based observation: [`History`] for "never" and "before" claims, [`Readier`] to
//! play the kubelet.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::task::JoinHandle;

use super::checks::ensure;
use super::env::{Env, Object};
use super::objects::{
    WITHIN, controller_uid, is_active, is_ready, name_of, pod_image, ready_status, uid_of,
};
use super::seen::lock;

/// One change a [`History`] saw, in watch order.
#[derive(Clone, Debug)]
pub enum Seen<K> {
    Applied(K),
    Deleted(K),
}

impl<K> Seen<K> {
    /// The object as it was at this change.
    pub fn object(&self) -> &K {
        match self {
            Seen::Applied(o) | Seen::Deleted(o) => o,
        }
    }

    /// Whether this change is the object's deletion.
    pub fn is_deleted(&self) -> bool {
        matches!(self, Seen::Deleted(_))
    }
}

/// Every version of every object of one kind in the namespace, from a watch started before
/// the test acts: "never more than N" and "X before Y" are checked on the whole sequence,
/// not on samples. A single watch delivers changes in the order the API server made them.
/// The watch stops when the history is dropped.
pub struct History<K> {
    seen: Arc<Mutex<Vec<Seen<K>>>>,
    relisted: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl<K: Object> History<K> {
    /// Starts watching and returns once the initial list has been recorded.
    pub async fn start(api: Api<K>) -> Result<Self> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let relisted = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = {
            let (seen, relisted) = (seen.clone(), relisted.clone());
            tokio::spawn(async move {
                let mut tx = Some(tx);
                let mut inits = 0;
                let mut stream = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(ev) = stream.next().await {
                    match ev {
                        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                            lock(&seen).push(Seen::Applied(o));
                        }
                        Ok(watcher::Event::Delete(o)) => lock(&seen).push(Seen::Deleted(o)),
                        Ok(watcher::Event::Init) => {
                            inits += 1;
                            if inits > 1 {
                                relisted.store(true, Ordering::SeqCst);
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        Err(_) => {}
                    }
                }
            })
        };
        tokio::time::timeout(WITHIN, rx)
            .await
            .with_context(|| format!("watch did not list within {WITHIN:?}"))?
            .context("watch task ended")?;
        Ok(Self {
            seen,
            relisted,
            task,
        })
    }

    /// Everything seen so far; fails if the watch had to relist (the sequence has a gap).
    pub fn seen(&self) -> Result<Vec<Seen<K>>> {
        ensure(
            !self.relisted.load(Ordering::SeqCst),
            "the watch relisted: the observed history has a gap",
        )?;
        Ok(lock(&self.seen).clone())
    }

    /// Every version of the object named `name`, in order (deleted ones last).
    pub fn versions(&self, name: &str) -> Result<Vec<Seen<K>>> {
        Ok(self
            .seen()?
            .into_iter()
            .filter(|s| s.object().meta().name.as_deref() == Some(name))
            .collect())
    }

    /// The index of the first change satisfying `f`.
    pub fn position(&self, f: impl Fn(&Seen<K>) -> bool) -> Result<Option<usize>> {
        Ok(self.seen()?.iter().position(f))
    }

    /// The index of the first version of an object named `name`.
    pub fn first_seen(&self, name: &str) -> Result<Option<usize>> {
        self.position(|s| s.object().meta().name.as_deref() == Some(name))
    }

    /// The index of the first change where an object named `name` is terminating or deleted.
    pub fn terminating_at(&self, name: &str) -> Result<Option<usize>> {
        self.position(|s| {
            s.object().meta().name.as_deref() == Some(name)
                && (s.is_deleted() || s.object().meta().deletion_timestamp.is_some())
        })
    }

    /// Names in the order their objects (told apart by UID) first appeared; a name comes
    /// twice if it was recreated.
    pub fn creation_order(&self) -> Result<Vec<String>> {
        let mut uids = BTreeSet::new();
        let mut names = Vec::new();
        for s in self.seen()? {
            if uids.insert(uid_of(s.object())) {
                names.push(name_of(s.object()));
            }
        }
        Ok(names)
    }

    /// Fails if two objects of one name (different UIDs) ever existed at once: a new UID
    /// appeared before the deletion of the previous one was seen (e.g. a StatefulSet pod
    /// recreated while its predecessor still terminates).
    pub fn assert_one_per_name(&self) -> Result<()> {
        one_per_name(&self.seen()?)
    }

    /// Names of every object that existed during the history, sorted.
    pub fn names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self.seen()?.iter().map(|s| name_of(s.object())).collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// The most objects that existed at once (terminating ones included).
    pub fn max_existing(&self) -> Result<usize> {
        let mut now = BTreeSet::new();
        let mut max = 0;
        for s in self.seen()? {
            match s {
                Seen::Applied(o) => {
                    now.insert(name_of(&o));
                }
                Seen::Deleted(o) => {
                    now.remove(&name_of(&o));
                }
            }
            max = max.max(now.len());
        }
        Ok(max)
    }
}

/// Fails if, in `seen`, an object appeared while another of its name (another UID) still
/// existed.
fn one_per_name<K: Object>(seen: &[Seen<K>]) -> Result<()> {
    let mut live: BTreeMap<String, String> = BTreeMap::new();
    for s in seen {
        let (name, uid) = (name_of(s.object()), uid_of(s.object()));
        if s.is_deleted() {
            if live.get(&name) == Some(&uid) {
                live.remove(&name);
            }
            continue;
        }
        if let Some(other) = live.get(&name) {
            ensure(
                *other == uid,
                format!(
                    "two objects named {name} at once: uid {other} still there when {uid} appeared"
                ),
            )?;
        }
        live.insert(name, uid);
    }
    Ok(())
}

impl<K> Drop for History<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Plays the kubelet for pods matching a predicate: marks each one Running and Ready (with
/// conditions and transition times) as soon as it appears, through a watch. Stops when
/// dropped.
pub struct Readier {
    task: JoinHandle<()>,
}

impl Readier {
    /// Makes every pod of the namespace ready as it appears.
    pub async fn all(env: &Env) -> Result<Self> {
        Self::start(env, |_| true).await
    }

    /// Makes every pod running `image` ready as it appears.
    pub async fn image(env: &Env, image: &'static str) -> Result<Self> {
        Self::start(env, move |p| pod_image(p) == image).await
    }

    /// Makes every pod controlled by `uid` ready as it appears.
    pub async fn controlled_by(env: &Env, uid: &str) -> Result<Self> {
        let uid = uid.to_owned();
        Self::start(env, move |p| controller_uid(p) == Some(uid.as_str())).await
    }

    /// Makes every active pod of the namespace that `which` selects ready as it appears;
    /// returns once the watch has listed.
    pub async fn start(env: &Env, which: impl Fn(&Pod) -> bool + Send + 'static) -> Result<Self> {
        let pods = env.pods();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut stream = applied_pods(pods.clone(), tx).boxed();
            while let Some(pod) = stream.next().await {
                if !is_active(&pod) || is_ready(&pod) || !which(&pod) {
                    continue;
                }
                let patch = Patch::Merge(json!({
                    "status": ready_status(jiff::Timestamp::now())
                }));
                for _ in 0..3 {
                    match pods
                        .patch_status(&name_of(&pod), &PatchParams::default(), &patch)
                        .await
                    {
                        Ok(_) => break,
                        Err(kube::Error::Api(s)) if s.code == 404 => break,
                        Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
            }
        });
        tokio::time::timeout(WITHIN, rx)
            .await
            .with_context(|| format!("pod watch did not list within {WITHIN:?}"))?
            .context("readier task ended")?;
        Ok(Self { task })
    }
}

/// The pods of `pods` as its watch applies them (the listed ones first); `listed` is told
/// once the watch has listed.
pub(super) fn applied_pods(
    pods: Api<Pod>,
    listed: tokio::sync::oneshot::Sender<()>,
) -> impl futures::Stream<Item = Pod> + Send + 'static {
    let mut listed = Some(listed);
    watcher(pods, watcher::Config::default())
        .default_backoff()
        .filter_map(move |ev| {
            let pod = match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => Some(p),
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                    None
                }
                _ => None,
            };
            std::future::ready(pod)
        })
}

impl Drop for Readier {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "uid": uid}})).expect("pod")
    }

    #[test]
    fn one_per_name_allows_replacement_after_deletion_only() {
        let (a1, a2) = (pod("a", "1"), pod("a", "2"));
        let replaced = [
            Seen::Applied(a1.clone()),
            Seen::Applied(a1.clone()),
            Seen::Deleted(a1.clone()),
            Seen::Applied(a2.clone()),
        ];
        assert!(one_per_name(&replaced).is_ok());
        let overlapping = [Seen::Applied(a1), Seen::Applied(a2)];
        let err = one_per_name(&overlapping).expect_err("two at once");
        assert!(err.to_string().contains("two objects named a"), "{err}");
    }
}
