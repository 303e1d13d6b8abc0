//! The Jobs of the run's namespace as one watch last saw them.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use crate::harness::Probe;
use crate::k8s;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobSeen {
    pub uid: String,
    /// `type=reason` of the True conditions, in order.
    pub conditions: Vec<String>,
    pub succeeded: i32,
    pub failed: i32,
    pub completed_indexes: String,
    pub uncounted: usize,
    /// It has a deletionTimestamp (the TTL controller deletes in the foreground, so without a
    /// garbage collector the Job stays, with the `foregroundDeletion` finalizer).
    pub deleting: bool,
}

impl JobSeen {
    pub fn of(j: &Job) -> Self {
        let s = j.status.clone().unwrap_or_default();
        let u = s.uncounted_terminated_pods.unwrap_or_default();
        Self {
            uid: j.uid().unwrap_or_default(),
            conditions: s
                .conditions
                .iter()
                .flatten()
                .filter(|c| c.status == "True")
                .map(|c| format!("{}={}", c.type_, c.reason.clone().unwrap_or_default()))
                .collect(),
            succeeded: s.succeeded.unwrap_or(0),
            failed: s.failed.unwrap_or(0),
            completed_indexes: s.completed_indexes.unwrap_or_default(),
            uncounted: u.succeeded.unwrap_or_default().len() + u.failed.unwrap_or_default().len(),
            deleting: j.metadata.deletion_timestamp.is_some(),
        }
    }

    pub fn has(&self, type_: &str) -> bool {
        self.conditions
            .iter()
            .any(|c| c.split('=').next() == Some(type_))
    }
}

/// Every Job of the namespace, live and deleted, from one watch.
#[derive(Clone, Debug, Default)]
pub struct JobsSeen {
    pub synced: bool,
    pub live: BTreeMap<String, JobSeen>,
    /// Deleted Jobs as last seen before their deletion.
    pub deleted: BTreeMap<String, JobSeen>,
    /// The most `uncountedTerminatedPods` entries any Job had at once.
    pub max_uncounted: usize,
}

impl JobsSeen {
    /// The Job as last seen if it is deleted or being deleted.
    pub fn deleted_or_deleting(&self, name: &str) -> Option<&JobSeen> {
        self.deleted
            .get(name)
            .or_else(|| self.live.get(name).filter(|j| j.deleting))
    }
}

pub struct JobWatch {
    pub(super) rx: watch::Receiver<JobsSeen>,
    task: tokio::task::JoinHandle<()>,
}

impl JobWatch {
    pub fn start(client: &Client, ns: &str) -> Self {
        let api: Api<Job> = Api::namespaced(client.clone(), ns);
        let (tx, rx) = watch::channel(JobsSeen::default());
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            let mut pending = BTreeMap::new();
            while let Some(ev) = k8s::next_event(&mut stream, "job").await {
                match ev {
                    watcher::Event::Init => pending.clear(),
                    watcher::Event::InitApply(j) => {
                        pending.insert(j.name_any(), JobSeen::of(&j));
                    }
                    watcher::Event::InitDone => {
                        let live = std::mem::take(&mut pending);
                        tx.send_modify(|s| {
                            s.live = live;
                            s.synced = true;
                        });
                    }
                    watcher::Event::Apply(j) => {
                        let seen = JobSeen::of(&j);
                        tx.send_modify(|s| {
                            s.max_uncounted = s.max_uncounted.max(seen.uncounted);
                            s.live.insert(j.name_any(), seen);
                        });
                    }
                    watcher::Event::Delete(j) => {
                        let seen = JobSeen::of(&j);
                        tx.send_modify(|s| {
                            s.live.remove(&j.name_any());
                            s.deleted.insert(j.name_any(), seen);
                        });
                    }
                }
            }
        });
        Self { rx, task }
    }

    pub fn current(&self) -> JobsSeen {
        self.rx.borrow().clone()
    }

    /// Waits until `done` holds (re-checked on every change); `progress` describes the state
    /// for the timeout message. A Job that failed ends the wait with an error.
    pub async fn wait(
        &mut self,
        probe: &Probe,
        done: impl Fn(&JobsSeen) -> bool,
        progress: impl Fn(&JobsSeen) -> String,
    ) -> anyhow::Result<JobsSeen> {
        loop {
            {
                let s = self.rx.borrow_and_update();
                probe.progress(progress(&s));
                if let Some((name, _)) = s.live.iter().find(|(_, j)| j.has("Failed")) {
                    anyhow::bail!("Job {name} failed: {:?}", s.live[name]);
                }
                if done(&s) {
                    return Ok(s.clone());
                }
            }
            self.rx.changed().await.context("job watch ended")?;
        }
    }
}

impl Drop for JobWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
