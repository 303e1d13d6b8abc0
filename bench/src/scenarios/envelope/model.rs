//! What the envelope watches (reflector stores of the run's objects and pods) and when a phase
//! has converged: a pure check of the stores' snapshot against what the phase asked for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use super::mix::{Kind, Workload};
use super::objects::RUN_LABEL;

/// The finalizer the Job controller keeps on the pods it has not counted yet.
pub const JOB_TRACKING: &str = "batch.kubernetes.io/job-tracking";

/// What a phase asks of one object: its pods (replicas; completions of a Job; nodes of the
/// DaemonSet, 0 once moved nowhere) and whether it is still there (a deleted Job is not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    pub kind: Kind,
    pub pods: usize,
    pub present: bool,
}

impl Want {
    /// What the create phase asks of `w`: its pods, present.
    pub fn of(w: &Workload) -> Self {
        Self {
            kind: w.kind,
            pods: w.pods,
            present: true,
        }
    }
}

/// Key of an object: (namespace, name).
pub type Key = (String, String);

/// The run's objects as the bench's watches see them.
#[derive(Default)]
pub struct Snapshot {
    pub deployments: Vec<Arc<Deployment>>,
    pub statefulsets: Vec<Arc<StatefulSet>>,
    pub daemonsets: Vec<Arc<DaemonSet>>,
    pub jobs: Vec<Arc<Job>>,
    pub replicasets: Vec<Arc<ReplicaSet>>,
    pub pods: Vec<Arc<Pod>>,
}

fn key<K: kube::Resource>(o: &K) -> Key {
    (o.namespace().unwrap_or_default(), o.name_any())
}

fn n(v: Option<i32>) -> usize {
    v.map_or(0, |v| v.max(0) as usize)
}

fn generation_seen(meta_gen: Option<i64>, observed: Option<i64>) -> bool {
    observed.unwrap_or(0) >= meta_gen.unwrap_or(0)
}

/// Whether an object has done what was asked of it (`pods`), and if not, a line saying
/// where it stands.
type Verdict = Box<dyn Fn(usize) -> Option<String>>;

fn deployment_verdict(d: &Deployment) -> Verdict {
    let s = d.status.clone().unwrap_or_default();
    let seen = generation_seen(d.metadata.generation, s.observed_generation);
    let name = d.name_any();
    Box::new(move |w| {
        let (r, u, a) = (
            n(s.replicas),
            n(s.updated_replicas),
            n(s.available_replicas),
        );
        (!(seen && r == w && u == w && a == w))
            .then(|| format!("deployment {name}: {r}/{u}/{a} of {w} (replicas/updated/available)"))
    })
}

fn statefulset_verdict(st: &StatefulSet) -> Verdict {
    let s = st.status.clone().unwrap_or_default();
    let seen = generation_seen(st.metadata.generation, s.observed_generation)
        && s.current_revision == s.update_revision;
    let name = st.name_any();
    Box::new(move |w| {
        let (r, ready, u) = (
            n(Some(s.replicas)),
            n(s.ready_replicas),
            n(s.updated_replicas),
        );
        (!(seen && r == w && ready == w && u == w))
            .then(|| format!("statefulset {name}: {r}/{ready}/{u} of {w} (replicas/ready/updated)"))
    })
}

fn daemonset_verdict(ds: &DaemonSet) -> Verdict {
    let s = ds.status.clone().unwrap_or_default();
    let seen = generation_seen(ds.metadata.generation, s.observed_generation)
        && s.number_misscheduled == 0;
    let name = ds.name_any();
    Box::new(move |w| {
        let desired = n(Some(s.desired_number_scheduled));
        let current = n(Some(s.current_number_scheduled));
        let (u, a) = (n(s.updated_number_scheduled), n(s.number_available));
        (!(seen && desired == w && current == w && u == w && a == w)).then(|| {
            format!("daemonset {name}: {current}/{u}/{a} of {w} (scheduled/updated/available)")
        })
    })
}

fn job_verdict(j: &Job) -> Verdict {
    let s = j.status.clone().unwrap_or_default();
    let complete = s
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Complete" && c.status == "True");
    let name = j.name_any();
    Box::new(move |w| {
        let done = n(s.succeeded);
        (!(complete && done == w)).then(|| format!("job {name}: {done} of {w} succeeded"))
    })
}

/// Pods the delete phase waits for: those of ReplicaSets, StatefulSets and DaemonSets (with
/// `no_owned_pods`), and a deleted Job's pods that still carry its tracking finalizer.
fn leftover_pods(
    want: &BTreeMap<Key, Want>,
    pods: &[Arc<Pod>],
    no_owned_pods: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if no_owned_pods {
        let owned = pods
            .iter()
            .filter(|p| {
                p.owner_references()
                    .iter()
                    .any(|o| matches!(o.kind.as_str(), "ReplicaSet" | "StatefulSet" | "DaemonSet"))
            })
            .count();
        if owned > 0 {
            out.push(format!(
                "{owned} pods of ReplicaSets, StatefulSets and the DaemonSet left"
            ));
        }
    }
    let tracked = pods
        .iter()
        .filter(|p| p.finalizers().iter().any(|f| f == JOB_TRACKING))
        .filter(|p| {
            p.owner_references().iter().any(|o| {
                o.kind == "Job"
                    && want
                        .get(&(p.namespace().unwrap_or_default(), o.name.clone()))
                        .is_some_and(|w| !w.present)
            })
        })
        .count();
    if tracked > 0 {
        out.push(format!(
            "{tracked} pods of deleted Jobs keep {JOB_TRACKING}"
        ));
    }
    out
}

/// What still differs from `want` (one line per object, at most `limit`, and the count):
/// empty when the phase has converged. With `no_owned_pods`, pods of ReplicaSets,
/// StatefulSets and DaemonSets must be gone too (the delete phase).
pub fn lagging(
    want: &BTreeMap<Key, Want>,
    snap: &Snapshot,
    no_owned_pods: bool,
    limit: usize,
) -> (usize, Vec<String>) {
    let verdicts = snap
        .deployments
        .iter()
        .map(|o| (key(o.as_ref()), deployment_verdict(o)))
        .chain(
            snap.statefulsets
                .iter()
                .map(|o| (key(o.as_ref()), statefulset_verdict(o))),
        )
        .chain(
            snap.daemonsets
                .iter()
                .map(|o| (key(o.as_ref()), daemonset_verdict(o))),
        )
        .chain(snap.jobs.iter().map(|o| (key(o.as_ref()), job_verdict(o))));
    let mut seen: BTreeMap<&Key, ()> = BTreeMap::new();
    let mut lines = Vec::new();
    for (k, verdict) in verdicts {
        let Some((wk, w)) = want.get_key_value(&k) else {
            continue;
        };
        seen.insert(wk, ());
        if !w.present {
            lines.push(format!("{}/{} still present", k.0, k.1));
        } else if let Some(line) = verdict(w.pods) {
            lines.push(line);
        }
    }
    for (k, w) in want {
        if w.present && !seen.contains_key(k) {
            lines.push(format!("{}/{} not seen yet", k.0, k.1));
        }
    }
    lines.extend(leftover_pods(want, &snap.pods, no_owned_pods));
    let count = lines.len();
    lines.truncate(limit);
    (count, lines)
}

/// The Jobs of `jobs` (key and completions) whose pods in `pods` are not exactly their
/// completions (a Job that ran a pod twice, or lost one), one line each.
pub fn jobs_not_run_exactly(
    jobs: impl IntoIterator<Item = (Key, usize)>,
    pods: &[Arc<Pod>],
) -> Vec<String> {
    let mut per_job: BTreeMap<Key, usize> = BTreeMap::new();
    for p in pods {
        for o in p.owner_references().iter().filter(|o| o.kind == "Job") {
            *per_job
                .entry((p.namespace().unwrap_or_default(), o.name.clone()))
                .or_default() += 1;
        }
    }
    jobs.into_iter()
        .filter_map(|(k, completions)| {
            let made = per_job.get(&k).copied().unwrap_or(0);
            (made != completions).then(|| {
                format!(
                    "job {}/{}: {made} pods for {completions} completions",
                    k.0, k.1
                )
            })
        })
        .collect()
}

/// Reflector stores of the run's objects and pods (label [`RUN_LABEL`] = run, every
/// namespace), fed by watches until dropped.
pub struct Stores {
    deployments: Store<Deployment>,
    statefulsets: Store<StatefulSet>,
    daemonsets: Store<DaemonSet>,
    jobs: Store<Job>,
    replicasets: Store<ReplicaSet>,
    pods: Store<Pod>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn follow<K>(
    client: &Client,
    run: &str,
    what: &'static str,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let api: Api<K> = Api::all(client.clone());
    let cfg = watcher::Config::default().labels(&format!("{RUN_LABEL}={run}"));
    let (reader, writer) = reflector::store();
    tasks.push(tokio::spawn(async move {
        let stream = watcher(api, cfg)
            .default_backoff()
            .reflect(writer)
            .applied_objects();
        futures::pin_mut!(stream);
        loop {
            match futures::TryStreamExt::try_next(&mut stream).await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => tracing::warn!(error = %e, kind = what, "watch error (retrying)"),
            }
        }
    }));
    reader
}

impl Stores {
    pub async fn start(client: &Client, run: &str) -> anyhow::Result<Self> {
        let mut tasks = Vec::new();
        let s = Self {
            deployments: follow(client, run, "deployments", &mut tasks),
            statefulsets: follow(client, run, "statefulsets", &mut tasks),
            daemonsets: follow(client, run, "daemonsets", &mut tasks),
            jobs: follow(client, run, "jobs", &mut tasks),
            replicasets: follow(client, run, "replicasets", &mut tasks),
            pods: follow(client, run, "pods", &mut tasks),
            tasks,
        };
        let ready = async {
            s.deployments.wait_until_ready().await?;
            s.statefulsets.wait_until_ready().await?;
            s.daemonsets.wait_until_ready().await?;
            s.jobs.wait_until_ready().await?;
            s.replicasets.wait_until_ready().await?;
            s.pods.wait_until_ready().await
        };
        tokio::time::timeout(Duration::from_secs(120), ready)
            .await
            .context("the watches of the run did not sync within 120 s")?
            .context("a watch of the run ended before it synced")?;
        Ok(s)
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            deployments: self.deployments.state(),
            statefulsets: self.statefulsets.state(),
            daemonsets: self.daemonsets.state(),
            jobs: self.jobs.state(),
            replicasets: self.replicasets.state(),
            pods: self.pods.state(),
        }
    }

    /// The pod store, for a task of its own.
    pub fn pod_store(&self) -> Store<Pod> {
        self.pods.clone()
    }
}

impl Drop for Stores {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn want(kind: Kind, pods: usize) -> Want {
        Want {
            kind,
            pods,
            present: true,
        }
    }

    fn deploy(name: &str, gen_: i64, observed: i64, r: i32, up: i32, av: i32) -> Arc<Deployment> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "n", "generation": gen_},
                "status": {"observedGeneration": observed, "replicas": r,
                    "updatedReplicas": up, "availableReplicas": av}
            }))
            .unwrap(),
        )
    }

    fn job(name: &str, succeeded: i32, complete: bool) -> Arc<Job> {
        let conds = if complete {
            json!([{"type": "Complete", "status": "True"}])
        } else {
            json!([])
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "n"},
                "status": {"succeeded": succeeded, "conditions": conds}
            }))
            .unwrap(),
        )
    }

    fn pod(name: &str, owner_kind: &str, owner: &str, finalizer: bool) -> Arc<Pod> {
        let mut meta = json!({"name": name, "namespace": "n",
            "ownerReferences": [{"apiVersion": "v1", "kind": owner_kind, "name": owner,
                "uid": "u", "controller": true}]});
        if finalizer {
            meta["finalizers"] = json!([JOB_TRACKING]);
        }
        Arc::new(serde_json::from_value(json!({"metadata": meta})).unwrap())
    }

    fn k(name: &str) -> Key {
        ("n".to_string(), name.to_string())
    }

    #[test]
    fn converged_only_when_every_object_matches_what_was_asked() {
        let want = BTreeMap::from([
            (k("deploy-a"), want(Kind::Deployment, 5)),
            (k("job-a"), want(Kind::Job, 3)),
        ]);
        let done = Snapshot {
            deployments: vec![deploy("deploy-a", 2, 2, 5, 5, 5)],
            jobs: vec![job("job-a", 3, true)],
            ..Snapshot::default()
        };
        assert_eq!(lagging(&want, &done, false, 10).0, 0);

        let cases = [
            // The new generation not seen yet.
            (deploy("deploy-a", 3, 2, 5, 5, 5), job("job-a", 3, true)),
            // An old pod still counted.
            (deploy("deploy-a", 2, 2, 6, 5, 5), job("job-a", 3, true)),
            // One pod not available.
            (deploy("deploy-a", 2, 2, 5, 5, 4), job("job-a", 3, true)),
            // The Job not complete.
            (deploy("deploy-a", 2, 2, 5, 5, 5), job("job-a", 3, false)),
            (deploy("deploy-a", 2, 2, 5, 5, 5), job("job-a", 2, true)),
        ];
        for (d, j) in cases {
            let snap = Snapshot {
                deployments: vec![d],
                jobs: vec![j],
                ..Snapshot::default()
            };
            let (count, lines) = lagging(&want, &snap, false, 10);
            assert_eq!(count, 1, "{lines:?}");
        }
        let missing = Snapshot {
            deployments: vec![deploy("deploy-a", 2, 2, 5, 5, 5)],
            ..Snapshot::default()
        };
        let (count, lines) = lagging(&want, &missing, false, 10);
        assert_eq!((count, lines[0].as_str()), (1, "n/job-a not seen yet"));
    }

    #[test]
    fn jobs_are_judged_by_the_pods_they_ran() {
        let pods = vec![
            pod("job-a-1", "Job", "job-a", false),
            pod("job-a-2", "Job", "job-a", false),
            pod("job-b-1", "Job", "job-b", false),
            pod("job-b-2", "Job", "job-b", false),
            pod("job-b-3", "Job", "job-b", false),
            pod("deploy-x-1-y", "ReplicaSet", "job-c", false),
        ];
        let jobs = [(k("job-a"), 2), (k("job-b"), 2), (k("job-c"), 1)];
        assert_eq!(
            jobs_not_run_exactly(jobs, &pods),
            [
                "job n/job-b: 3 pods for 2 completions",
                "job n/job-c: 0 pods for 1 completions"
            ]
        );
    }

    #[test]
    fn the_delete_phase_waits_for_owned_pods_and_finalizers_of_deleted_jobs() {
        let want = BTreeMap::from([(
            k("job-a"),
            Want {
                kind: Kind::Job,
                pods: 3,
                present: false,
            },
        )]);
        let snap = |pods: Vec<Arc<Pod>>, jobs: Vec<Arc<Job>>| Snapshot {
            pods,
            jobs,
            ..Snapshot::default()
        };
        assert_eq!(lagging(&want, &snap(vec![], vec![]), true, 10).0, 0);
        // A finished Job's pod without the finalizer, and a CronJob's Job pod, may stay.
        let fine = vec![
            pod("job-a-x", "Job", "job-a", false),
            pod("cron-0-1-y", "Job", "cron-0-1", true),
        ];
        assert_eq!(lagging(&want, &snap(fine, vec![]), true, 10).0, 0);
        let (c, lines) = lagging(
            &want,
            &snap(vec![pod("job-a-x", "Job", "job-a", true)], vec![]),
            true,
            10,
        );
        assert_eq!(c, 1, "{lines:?}");
        let (c, _) = lagging(
            &want,
            &snap(
                vec![pod("deploy-a-1-z", "ReplicaSet", "deploy-a-1", false)],
                vec![],
            ),
            true,
            10,
        );
        assert_eq!(c, 1);
        // Without the delete phase's rule, ReplicaSet pods are expected.
        let (c, _) = lagging(
            &want,
            &snap(
                vec![pod("deploy-a-1-z", "ReplicaSet", "deploy-a-1", false)],
                vec![],
            ),
            false,
            10,
        );
        assert_eq!(c, 0);
        // The deleted Job still there.
        let (c, lines) = lagging(&want, &snap(vec![], vec![job("job-a", 3, true)]), true, 10);
        assert_eq!((c, lines[0].as_str()), (1, "n/job-a still present"));
    }
}
