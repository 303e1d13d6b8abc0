//! Job pods under the test's control, for pods no simulated kubelet runs (the Job's template
//! names [`NO_SCHEDULER`](super::NO_SCHEDULER)): [`Env::terminate_at`] finishes one pod with a
//! chosen finish time, [`JobPodRunner`] plays the kubelet for every Job pod of the namespace
//! (running for a while, then exiting with a code the test picks per pod, or running on), and
//! [`index_overlaps`] checks a pod [`History`](super::History) for two live pods of one
//! completion index.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::env::Env;
use super::history::{Seen, applied_pods};
use super::objects::{WITHIN, is_active, name_of, ready_status, uid_of};
use crate::cluster::terminated;

/// The annotation (and label) holding an Indexed Job pod's completion index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The completion index of an Indexed Job's pod.
pub fn completion_index(p: &Pod) -> Option<i32> {
    p.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX)?
        .parse()
        .ok()
}

/// Whether the Job has the `Complete=True` condition.
pub fn job_complete(j: &Job) -> bool {
    j.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Complete" && c.status == "True")
}

/// Whether the pod is controlled by a Job.
pub fn job_controlled(p: &Pod) -> bool {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.kind == "Job")
}

/// The status a kubelet reports for a pod whose containers all exited with `exit_code` at
/// `finished_at`: Succeeded for 0, Failed otherwise.
pub fn terminated_status(pod: &Pod, exit_code: i32, finished_at: jiff::Timestamp) -> Value {
    let at = finished_at.to_string();
    let (phase, statuses) = terminated(pod, exit_code, &at);
    json!({
        "phase": phase,
        "containerStatuses": statuses,
        "conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": at},
            {"type": "ContainersReady", "status": "False", "lastTransitionTime": at},
        ],
    })
}

impl Env {
    /// Finishes pod `name` as its kubelet would, with every container terminated with
    /// `exit_code` at `finished_at` (which may lie in the past, e.g. to shorten a
    /// recreation backoff that is measured from the finish time).
    pub async fn terminate_at(
        &self,
        name: &str,
        exit_code: i32,
        finished_at: jiff::Timestamp,
    ) -> Result<Pod> {
        let pods = self.pods();
        let pod = pods
            .get(name)
            .await
            .with_context(|| format!("reading pod {name}"))?;
        let status = terminated_status(&pod, exit_code, finished_at);
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .with_context(|| format!("finishing pod {name}"))
    }
}

/// Plays the kubelet for the Job pods of a namespace that no simulated node runs: each active
/// pod controlled by a Job is marked Running and Ready as soon as it appears, and `run_for`
/// later its containers exit with the code `fate` picks for it (`None`: it keeps running).
/// A pod deleted or finished meanwhile is left alone. Stops when dropped.
pub struct JobPodRunner {
    task: JoinHandle<()>,
    finished: Arc<AtomicUsize>,
}

impl JobPodRunner {
    /// Starts the runner; returns once its watch has listed the namespace's pods.
    pub async fn start(
        env: &Env,
        run_for: Duration,
        fate: impl Fn(&Pod) -> Option<i32> + Send + Sync + 'static,
    ) -> Result<Self> {
        let pods = env.pods();
        let finished = Arc::new(AtomicUsize::new(0));
        let fate = Arc::new(fate);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = {
            let finished = finished.clone();
            tokio::spawn(async move {
                let mut taken: BTreeSet<String> = BTreeSet::new();
                let mut runs = tokio::task::JoinSet::new();
                let mut stream = applied_pods(pods.clone(), tx).boxed();
                while let Some(pod) = stream.next().await {
                    if !is_active(&pod) || !job_controlled(&pod) || !taken.insert(uid_of(&pod)) {
                        continue;
                    }
                    let (pods, fate, finished) = (pods.clone(), fate.clone(), finished.clone());
                    runs.spawn(async move {
                        run_pod(&pods, &pod, run_for, &*fate, &finished).await;
                    });
                    while runs.try_join_next().is_some() {}
                }
            })
        };
        tokio::time::timeout(WITHIN, rx)
            .await
            .with_context(|| format!("pod watch did not list within {WITHIN:?}"))?
            .context("job pod runner ended")?;
        Ok(Self { task, finished })
    }

    /// How many pods the runner has finished so far.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }
}

impl Drop for JobPodRunner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Patches a pod's status, retrying transient errors a few times; false if the pod is gone.
async fn patch_status(pods: &Api<Pod>, name: &str, status: &Value) -> bool {
    let patch = Patch::Merge(json!({ "status": status }));
    for _ in 0..5 {
        match pods
            .patch_status(name, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => return true,
            Err(kube::Error::Api(s)) if s.code == 404 => return false,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    false
}

async fn run_pod(
    pods: &Api<Pod>,
    pod: &Pod,
    run_for: Duration,
    fate: &(dyn Fn(&Pod) -> Option<i32> + Send + Sync),
    finished: &AtomicUsize,
) {
    let name = name_of(pod);
    if !patch_status(pods, &name, &ready_status(jiff::Timestamp::now())).await {
        return;
    }
    let Some(code) = fate(pod) else {
        return;
    };
    // The pod's run time: what the test measures against, not a wait for anything.
    tokio::time::sleep(run_for).await;
    let current = match pods.get(&name).await {
        Ok(p) if p.metadata.uid == pod.metadata.uid && is_active(&p) => p,
        _ => return,
    };
    let status = terminated_status(&current, code, jiff::Timestamp::now());
    if patch_status(pods, &name, &status).await {
        finished.fetch_add(1, Ordering::SeqCst);
    }
}

/// Two live pods of one completion index at once, as found by [`index_overlaps`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexOverlap {
    pub index: i32,
    /// The pods alive together, the newcomer last.
    pub pods: Vec<String>,
}

/// Every moment in a pod history where a completion index got a second live pod (neither
/// finished nor being deleted) while another was still live. Upstream documents that this
/// can happen only after node failures, kubelet restarts or evictions; a controller restart
/// or a lagging watch must never cause it.
pub fn index_overlaps(seen: &[Seen<Pod>]) -> Vec<IndexOverlap> {
    let mut live: BTreeMap<i32, BTreeMap<String, String>> = BTreeMap::new();
    let mut out = Vec::new();
    for s in seen {
        let pod = s.object();
        let Some(ix) = completion_index(pod) else {
            continue;
        };
        let uid = uid_of(pod);
        let pods = live.entry(ix).or_default();
        if s.is_deleted() || !is_active(pod) {
            pods.remove(&uid);
            continue;
        }
        if pods.insert(uid, name_of(pod)).is_none() && pods.len() > 1 {
            let mut names: Vec<String> = pods
                .iter()
                .filter(|(u, _)| **u != uid_of(pod))
                .map(|(_, n)| n.clone())
                .collect();
            names.push(name_of(pod));
            out.push(IndexOverlap {
                index: ix,
                pods: names,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str, ix: i32, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": uid,
                "annotations": {COMPLETION_INDEX: ix.to_string()}},
            "status": {"phase": phase}
        }))
        .expect("pod")
    }

    #[test]
    fn overlaps_need_two_live_pods_of_one_index() {
        let a = pod("a", "1", 0, "Running");
        let b = pod("b", "2", 0, "Running");
        let c = pod("c", "3", 1, "Running");
        let sequential = [
            Seen::Applied(a.clone()),
            Seen::Applied(c.clone()),
            Seen::Applied(pod("a", "1", 0, "Failed")),
            Seen::Applied(b.clone()),
            Seen::Deleted(pod("a", "1", 0, "Failed")),
        ];
        assert!(index_overlaps(&sequential).is_empty());
        let overlapping = [Seen::Applied(a), Seen::Applied(c), Seen::Applied(b)];
        assert_eq!(
            index_overlaps(&overlapping),
            vec![IndexOverlap {
                index: 0,
                pods: vec!["a".to_owned(), "b".to_owned()]
            }]
        );
    }

    #[test]
    fn terminated_status_sets_phase_and_finish_time() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main", "image": "img"}]}
        }))
        .expect("pod");
        let s = terminated_status(&p, 3, jiff::Timestamp::UNIX_EPOCH);
        assert_eq!(s["phase"], "Failed");
        assert_eq!(
            s["containerStatuses"][0]["state"]["terminated"]["finishedAt"],
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            terminated_status(&p, 0, jiff::Timestamp::UNIX_EPOCH)["phase"],
            "Succeeded"
        );
    }
}
