//! What every scenario needs: the controller running in-process on informers scoped to the
//! test's namespace, Jobs created and finished by writing `jobs/status` (no Job controller
//! runs), pods owned by a Job, a watch-based history of one Job name with the time each change
//! arrived, and waits that say what they last saw.

#![allow(dead_code)]

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
pub use rkcm_testkit::harness::Controllers;
pub use rkcm_testkit::harness::{Env as Base, HOLD, NO_SCHEDULER, sorted_names};
use rkcm_testkit::wait_for;
use serde_json::{Value, json};
use std::ops::Deref;
use tokio::task::JoinHandle;

/// The finalizer the API server adds for a Foreground delete.
pub const FOREGROUND: &str = "foregroundDeletion";
/// "Within T" for anything the controller (and the garbage collector) should do promptly.
pub const WITHIN: Duration = Duration::from_secs(20);
/// Slack allowed after an expiry: the deletion is seen (and, with no pods, completed) within.
pub const LATE: SignedDuration = SignedDuration::from_secs(5);
/// How long "stays so" is watched when the spec names no period.
pub const HOLDS: Duration = Duration::from_secs(5);

/// The histogram is process-wide and tests run in parallel: every test that may delete a Job
/// holds this shared; the metric test holds it exclusively so that its count is its own.
pub static DELETIONS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The testkit's [`Base`] environment with the namespace's Job and pod APIs at hand.
pub struct Env {
    base: Base,
    pub jobs: Api<Job>,
    pub pods: Api<Pod>,
}

impl Deref for Env {
    type Target = Base;
    fn deref(&self) -> &Base {
        &self.base
    }
}

impl Env {
    pub async fn new(prefix: &str) -> Result<Self> {
        let base = Base::new(prefix).await?;
        let (jobs, pods) = (base.api(), base.pods());
        Ok(Self { base, jobs, pods })
    }

    /// The controller on informers scoped to the namespace, as the process would run it.
    pub fn controller(&self) -> Controllers {
        Controllers::new(self.cluster.client(), &[self.ns.name()])
            .spawn("ttl-after-finished", |ctx| {
                rkcm_ttlafterfinished::start(ctx, rkcm_ttlafterfinished::Config::default())
            })
            .run()
    }

    /// [`Env::controller`] on a client whose requests `recorder` records (its informers read
    /// through the plain client).
    pub fn controller_recorded(&self, recorder: &rkcm_testkit::recorder::Recorder) -> Controllers {
        let client = self.cluster.client();
        Controllers::with_clients(recorder.wrap(client.clone()), client, &[self.ns.name()])
            .spawn("ttl-after-finished", |ctx| {
                rkcm_ttlafterfinished::start(ctx, rkcm_ttlafterfinished::Config::default())
            })
            .run()
    }

    /// Creates Job `name` with `ttl` (seconds, or none). Nothing runs it: its status is
    /// whatever the test writes.
    pub async fn create_job(&self, name: &str, ttl: Option<i32>) -> Result<Job> {
        let mut spec = json!({
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "schedulerName": NO_SCHEDULER,
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        });
        if let Some(ttl) = ttl {
            spec["ttlSecondsAfterFinished"] = json!(ttl);
        }
        let job: Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": spec,
        }))?;
        self.jobs
            .create(&PostParams::default(), &job)
            .await
            .with_context(|| format!("creating job {name}"))
    }

    /// Writes `status` through `jobs/status` (a merge patch: lists are replaced whole).
    pub async fn patch_status(&self, name: &str, status: Value) -> Result<Job> {
        self.status_patch(name, status).await
    }

    /// Marks the Job started at `at` and running (no terminal condition).
    pub async fn run(&self, name: &str, at: Timestamp) -> Result<Job> {
        self.patch_status(name, json!({"startTime": rfc3339(at), "active": 1}))
            .await
    }

    /// Finishes the Job as the Job controller would on success: `SuccessCriteriaMet` then
    /// `Complete`, both transitioned at `at`, with `completionTime` `at` (and `startTime` `at`
    /// unless it has one: it is immutable once set).
    pub async fn complete(&self, name: &str, at: Timestamp) -> Result<Job> {
        let t = rfc3339(at);
        let mut status = json!({
            "completionTime": t, "active": 0, "succeeded": 1,
            "conditions": [condition("SuccessCriteriaMet", &t), condition("Complete", &t)],
        });
        self.ensure_start_time(name, &mut status, &t).await?;
        self.patch_status(name, status).await
    }

    /// Finishes the Job as the Job controller would on failure: `FailureTarget` then
    /// `Failed`, both transitioned at `at` (and `startTime` `at` unless it has one).
    pub async fn fail(&self, name: &str, at: Timestamp) -> Result<Job> {
        let t = rfc3339(at);
        let mut status = json!({
            "active": 0, "failed": 1,
            "conditions": [condition("FailureTarget", &t), condition("Failed", &t)],
        });
        self.ensure_start_time(name, &mut status, &t).await?;
        self.patch_status(name, status).await
    }

    /// Adds `startTime` to `status` if the Job has none yet (the API requires one on a
    /// finished Job and refuses to change it).
    async fn ensure_start_time(&self, name: &str, status: &mut Value, at: &str) -> Result<()> {
        let job = self
            .jobs
            .get(name)
            .await
            .with_context(|| format!("reading job {name}"))?;
        if job.status.and_then(|s| s.start_time).is_none() {
            status["startTime"] = json!(at);
        }
        Ok(())
    }

    /// Sets `spec.ttlSecondsAfterFinished` (`None` removes it).
    pub async fn set_ttl(&self, name: &str, ttl: Option<i32>) -> Result<Job> {
        self.merge(name, json!({"spec": {"ttlSecondsAfterFinished": ttl}}))
            .await
            .with_context(|| format!("setting the TTL of job {name} to {ttl:?}"))
    }

    /// Creates pod `name` controlled by `job` (with `blockOwnerDeletion`, as the Job
    /// controller's pods), unbound; `finalizer` keeps it terminating once deleted.
    pub async fn create_pod(&self, job: &Job, name: &str, finalizer: Option<&str>) -> Result<Pod> {
        let finalizers: Vec<&str> = finalizer.into_iter().collect();
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "finalizers": finalizers,
                "ownerReferences": [{
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job.metadata.name,
                    "uid": job.metadata.uid,
                    "controller": true,
                    "blockOwnerDeletion": true,
                }],
            },
            "spec": {
                "schedulerName": NO_SCHEDULER,
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        }))?;
        self.pods
            .create(&PostParams::default(), &pod)
            .await
            .with_context(|| format!("creating pod {name}"))
    }

    /// Removes every finalizer of pod `name`.
    pub async fn clear_pod_finalizers(&self, name: &str) -> Result<()> {
        self.release::<Pod>(name).await
    }

    /// Removes every finalizer of Job `name` (cleanup of held Jobs).
    pub async fn clear_job_finalizers(&self, name: &str) -> Result<()> {
        self.release::<Job>(name).await
    }

    /// Deletes Job `name` with `propagationPolicy: Background` (the test's own delete).
    pub async fn delete_job(&self, name: &str) -> Result<()> {
        self.jobs
            .delete(name, &DeleteParams::background())
            .await
            .with_context(|| format!("deleting job {name}"))?;
        Ok(())
    }

    /// Names of the pods in the namespace, sorted.
    pub async fn pod_names(&self) -> Result<Vec<String>> {
        Ok(sorted_names(&self.list::<Pod>().await?))
    }
}

fn condition(type_: &str, at: &str) -> Value {
    json!({"type": type_, "status": "True", "lastTransitionTime": at})
}

/// RFC 3339 with whole seconds, as the API stores times.
pub fn rfc3339(t: Timestamp) -> String {
    whole_second(t).to_string()
}

/// `t` truncated to the second (API times have no fraction).
pub fn whole_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// Now, truncated to the second: a finish time the API stores exactly.
pub fn now_second() -> Timestamp {
    whole_second(Timestamp::now())
}

pub fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

/// Waits until the wall clock reaches `t` (a scenario step scheduled at a given time, not a
/// sleep to let things settle).
pub async fn until(t: Timestamp) {
    let left = t.duration_since(Timestamp::now());
    if left > SignedDuration::ZERO {
        tokio::time::sleep(left.unsigned_abs()).await;
    }
}

/// One change of the watched Job, with the time the test received it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Timestamp,
    pub deleted: bool,
    pub job: Job,
}

impl Seen {
    pub fn uid(&self) -> &str {
        self.job.metadata.uid.as_deref().unwrap_or_default()
    }

    pub fn deletion_timestamp(&self) -> Option<Timestamp> {
        self.job.metadata.deletion_timestamp.as_ref().map(|t| t.0)
    }

    pub fn finalizers(&self) -> Vec<String> {
        self.job.metadata.finalizers.clone().unwrap_or_default()
    }
}

/// Every version of Job `name` (all incarnations) from a watch started before the test acts:
/// "not before" and "never" claims are checked on the whole sequence, not on samples.
pub struct History {
    name: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl History {
    /// Starts watching Job `name` and returns once the initial list has been recorded.
    pub async fn start(env: &Env, name: &str) -> Result<Self> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let task = {
            let seen = seen.clone();
            let api = env.jobs.clone();
            tokio::spawn(async move {
                let mut tx = Some(tx);
                let mut stream = watcher(api, config).default_backoff().boxed();
                while let Some(ev) = stream.next().await {
                    let at = Timestamp::now();
                    match ev {
                        Ok(watcher::Event::Apply(job) | watcher::Event::InitApply(job)) => {
                            lock(&seen).push(Seen {
                                at,
                                deleted: false,
                                job,
                            });
                        }
                        Ok(watcher::Event::Delete(job)) => lock(&seen).push(Seen {
                            at,
                            deleted: true,
                            job,
                        }),
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        Ok(watcher::Event::Init) | Err(_) => {}
                    }
                }
            })
        };
        tokio::time::timeout(WITHIN, rx)
            .await
            .context("the job watch did not list within 20 s")?
            .context("the job watch ended")?;
        Ok(Self {
            name: name.to_string(),
            seen,
            task,
        })
    }

    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }

    /// The versions of the incarnation with `uid`.
    pub fn of(&self, uid: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.uid() == uid).collect()
    }

    /// The first version of incarnation `uid` that is being deleted: (received at,
    /// deletionTimestamp, finalizers).
    pub fn first_deleting(&self, uid: &str) -> Option<Seen> {
        self.of(uid)
            .into_iter()
            .find(|s| s.deletion_timestamp().is_some())
    }

    /// When the removal of incarnation `uid` was received.
    pub fn gone_at(&self, uid: &str) -> Option<Timestamp> {
        self.of(uid).into_iter().find(|s| s.deleted).map(|s| s.at)
    }

    /// Waits until incarnation `uid` is gone; returns when the removal was received.
    pub async fn wait_gone(&self, uid: &str, timeout: Duration) -> Result<Timestamp> {
        let what = format!("job {} ({uid}) to be gone", self.name);
        wait_for(&what, timeout, || async { Ok(self.gone_at(uid)) })
            .await
            .with_context(|| match self.of(uid).last() {
                Some(last) => format!(
                    "last seen: deletionTimestamp {:?}, finalizers {:?}",
                    last.deletion_timestamp(),
                    last.finalizers()
                ),
                None => "never seen".to_string(),
            })
    }

    /// Waits until incarnation `uid` is being deleted; returns that version.
    pub async fn wait_deleting(&self, uid: &str, timeout: Duration) -> Result<Seen> {
        let what = format!("job {} ({uid}) to get a deletionTimestamp", self.name);
        wait_for(&what, timeout, || async { Ok(self.first_deleting(uid)) }).await
    }

    /// Fails if incarnation `uid` got a deletionTimestamp (or vanished) in any version
    /// received so far.
    pub fn assert_never_deleted(&self, uid: &str, when: &str) -> Result<()> {
        if let Some(s) = self.of(uid).into_iter().find(|s| s.deleted) {
            bail!("{when}: job {} was removed at {}", self.name, s.at);
        }
        if let Some(s) = self.first_deleting(uid) {
            bail!(
                "{when}: job {} got deletionTimestamp {:?} (seen at {}, finalizers {:?})",
                self.name,
                s.deletion_timestamp(),
                s.at,
                s.finalizers()
            );
        }
        Ok(())
    }

    /// Asserts that the controller deleted incarnation `uid` not before `expire_at` and that
    /// it was gone by `expire_at + LATE`; waits for that. Returns the deletionTimestamp.
    pub async fn assert_deleted_on_time(
        &self,
        uid: &str,
        expire_at: Timestamp,
    ) -> Result<Timestamp> {
        let wait = expire_at
            .duration_since(Timestamp::now())
            .unsigned_abs()
            .saturating_add(WITHIN);
        let deleting = self.wait_deleting(uid, wait).await?;
        let deleted_at = deleting
            .deletion_timestamp()
            .context("deleting version has a deletionTimestamp")?;
        // The API server truncates deletionTimestamp to the second and `expire_at` is a whole
        // second: a delete even a fraction early shows as an earlier second.
        ensure!(
            deleted_at >= expire_at,
            "job {} deleted at {deleted_at}, before its TTL expired at {expire_at}",
            self.name
        );
        let gone = self.wait_gone(uid, WITHIN).await?;
        ensure!(
            gone <= expire_at + LATE,
            "job {} gone only at {gone}, TTL expired at {expire_at} (allowed {LATE:?})",
            self.name
        );
        Ok(deleted_at)
    }
}

impl Drop for History {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The uid of a Job the API returned.
pub fn uid(job: &Job) -> Result<String> {
    job.metadata.uid.clone().context("job has a uid")
}

/// `ttl_after_finished_controller_job_deletion_duration_seconds_count` in this process.
pub fn deletion_count() -> Result<u64> {
    let text = rkcm_runtime::metrics::render();
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("ttl_after_finished_controller_job_deletion_duration_seconds_count")
        })
        .with_context(|| format!("histogram not exported:\n{text}"))?;
    line.rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("unparsable count line {line:?}"))
}
