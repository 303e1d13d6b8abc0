//! What every scenario needs: the controller in-process on a test clock, CronJob and Job
//! builders, Job status written as a Job controller would, event and status accessors.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use rkcm_runtime::clock::Clock;
use rkcm_runtime::informer::InformerFactory;
use rkcm_runtime::{CancellationToken, ControllerContext};
use rkcm_testkit::{TestCluster, TestNamespace, wait_for};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// "Within T" for anything the controller should do promptly.
pub const WITHIN: Duration = Duration::from_secs(20);
/// How long "stays so" / "never happens" is watched.
pub const HOLDS: Duration = Duration::from_secs(4);
pub const COMPONENT: &str = "cronjob-controller";
pub const SCHEDULED_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// A wall clock running at real speed from an adjustable offset.
#[derive(Default)]
pub struct TestClock {
    offset: Mutex<SignedDuration>,
}

impl TestClock {
    /// From now on the clock reads `t` (and moves on with real time).
    pub fn set(&self, t: Timestamp) {
        let offset = t.duration_since(Timestamp::now());
        *self.offset.lock().expect("clock lock") = offset;
    }
    pub fn now(&self) -> Timestamp {
        self.wall()
    }
}

impl Clock for TestClock {
    fn wall(&self) -> Timestamp {
        let offset = *self.offset.lock().expect("clock lock");
        Timestamp::now() + offset
    }
}

/// The controller running in-process; stopped when dropped.
pub struct Running {
    shutdown: CancellationToken,
    handle: Option<JoinHandle<Result<(), String>>>,
}

impl Running {
    /// Stops the controller and checks that it ended cleanly and promptly.
    pub async fn stop(mut self) -> Result<()> {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(10), h)
                .await
                .context("controller did not stop within 10 s")?
                .context("controller panicked")?
                .map_err(|e| anyhow::anyhow!("controller returned an error: {e}"))?;
        }
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// One test's cluster connection, namespace and clock.
pub struct Env {
    pub cluster: TestCluster,
    pub ns: TestNamespace,
    pub clock: Arc<TestClock>,
}

/// The start of the minute `t` is in.
pub fn minute_of(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second().div_euclid(60) * 60).expect("minute")
}

pub fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

impl Env {
    pub async fn new(prefix: &str) -> Result<Self> {
        let cluster = TestCluster::connect().await?;
        let ns = cluster.namespace(prefix).await?;
        Ok(Self {
            cluster,
            ns,
            clock: Arc::new(TestClock::default()),
        })
    }

    pub fn name(&self) -> &str {
        self.ns.name()
    }

    /// The controller with upstream defaults (local zone UTC), on this namespace only.
    pub fn start(&self) -> Running {
        let shutdown = CancellationToken::new();
        let client = self.cluster.client();
        let informers = InformerFactory::namespaced(client.clone(), self.name());
        let ctx = ControllerContext {
            client,
            informers: informers.clone(),
            shutdown: shutdown.clone(),
            clock: self.clock.clone(),
        };
        let cfg = rkcm_cronjob::Config {
            local_time_zone: jiff::tz::TimeZone::UTC,
            ..rkcm_cronjob::Config::default()
        };
        let handle = tokio::spawn(async move {
            rkcm_cronjob::start(ctx, cfg)
                .await
                .map_err(|e| e.to_string())
        });
        informers.start(shutdown.clone());
        Running {
            shutdown,
            handle: Some(handle),
        }
    }

    pub fn cronjobs(&self) -> Api<CronJob> {
        Api::namespaced(self.cluster.client(), self.name())
    }
    pub fn jobs_api(&self) -> Api<Job> {
        Api::namespaced(self.cluster.client(), self.name())
    }

    /// A CronJob with a Job template carrying a label and an annotation.
    pub fn cronjob(&self, name: &str, schedule: &str, extra_spec: Value) -> CronJob {
        let mut spec = json!({
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"app": "cj-test"}, "annotations": {"note": "copied"}},
                "spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]
                }}}
            }
        });
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
            for (k, v) in extra {
                s.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": self.name()},
            "spec": spec
        }))
        .expect("cronjob")
    }

    pub async fn create(&self, cj: &CronJob) -> Result<CronJob> {
        self.cronjobs()
            .create(&PostParams::default(), cj)
            .await
            .context("creating cronjob")
    }

    /// Creates `cj` suspended, writes `lastScheduleTime = last`, then applies `suspend` (which
    /// also wakes the controller).
    pub async fn create_with_last(
        &self,
        cj: &CronJob,
        last: Timestamp,
        suspend: bool,
    ) -> Result<CronJob> {
        let mut cj = cj.clone();
        cj.spec.suspend = Some(true);
        let created = self.create(&cj).await?;
        let name = created.metadata.name.clone().unwrap_or_default();
        self.patch_status(&name, json!({"lastScheduleTime": last.to_string()}))
            .await?;
        self.patch_spec(&name, json!({"suspend": suspend})).await
    }

    pub async fn get(&self, name: &str) -> Result<CronJob> {
        self.cronjobs().get(name).await.context("getting cronjob")
    }

    pub async fn patch_spec(&self, name: &str, spec: Value) -> Result<CronJob> {
        self.cronjobs()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": spec})),
            )
            .await
            .context("patching cronjob spec")
    }

    pub async fn patch_status(&self, name: &str, status: Value) -> Result<CronJob> {
        self.cronjobs()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .context("patching cronjob status")
    }

    /// Touches an annotation: an update that is not a schedule change makes the controller
    /// sync the CronJob now.
    pub async fn poke(&self, name: &str) -> Result<()> {
        let v = Timestamp::now().as_nanosecond().to_string();
        self.cronjobs()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"rkcm.test/poke": v}}})),
            )
            .await
            .context("poking cronjob")?;
        Ok(())
    }

    pub async fn jobs(&self) -> Result<Vec<Job>> {
        Ok(self.jobs_api().list(&ListParams::default()).await?.items)
    }

    pub async fn job_names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .jobs()
            .await?
            .into_iter()
            .filter(|j| j.metadata.deletion_timestamp.is_none())
            .filter_map(|j| j.metadata.name)
            .collect();
        names.sort();
        Ok(names)
    }

    /// Waits until a Job named `name` exists.
    pub async fn wait_job(&self, name: &str, timeout: Duration) -> Result<Job> {
        wait_for(&format!("job {name}"), timeout, || async {
            Ok(self.jobs_api().get_opt(name).await?)
        })
        .await
    }

    /// A Job the test creates itself, controlled by `owner` (kind, name, uid), unfinished.
    pub async fn create_child(
        &self,
        name: &str,
        kind: &str,
        owner: &str,
        uid: &str,
    ) -> Result<Job> {
        let job: Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": self.name(), "ownerReferences": [{
                "apiVersion": if kind == "CronJob" { "batch/v1" } else { "v1" },
                "kind": kind, "name": owner, "uid": uid, "controller": true
            }]},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]
            }}}
        }))?;
        self.jobs_api()
            .create(&PostParams::default(), &job)
            .await
            .context("creating job")
    }

    /// Writes what a Job controller would on success: start, then SuccessCriteriaMet +
    /// Complete + completionTime.
    pub async fn complete_job(&self, name: &str, start: Timestamp, done: Timestamp) -> Result<Job> {
        self.job_status(name, json!({"startTime": start.to_string()}))
            .await?;
        let cond = |t: &str, reason: &str| {
            json!({
                "type": t, "status": "True", "reason": reason, "message": "test",
                "lastProbeTime": done.to_string(), "lastTransitionTime": done.to_string()
            })
        };
        self.job_status(
            name,
            json!({
                "succeeded": 1,
                "completionTime": done.to_string(),
                "conditions": [cond("SuccessCriteriaMet", "CompletionsReached"), cond("Complete", "CompletionsReached")]
            }),
        )
        .await
    }

    /// Writes what a Job controller would on failure: start, then FailureTarget + Failed.
    pub async fn fail_job(&self, name: &str, start: Timestamp, done: Timestamp) -> Result<Job> {
        self.job_status(name, json!({"startTime": start.to_string()}))
            .await?;
        let cond = |t: &str| {
            json!({
                "type": t, "status": "True", "reason": "BackoffLimitExceeded", "message": "test",
                "lastProbeTime": done.to_string(), "lastTransitionTime": done.to_string()
            })
        };
        self.job_status(
            name,
            json!({"failed": 1, "conditions": [cond("FailureTarget"), cond("Failed")]}),
        )
        .await
    }

    async fn job_status(&self, name: &str, status: Value) -> Result<Job> {
        self.jobs_api()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .with_context(|| format!("writing status of job {name}"))
    }

    /// Events of the controller about CronJob `name`.
    pub async fn events(&self, name: &str) -> Result<Vec<Event>> {
        let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
        let events: Api<Event> = Api::namespaced(self.cluster.client(), self.name());
        Ok(events
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(COMPONENT))
            .collect())
    }

    /// Events with `reason`, as (message, count).
    pub async fn events_with(&self, name: &str, reason: &str) -> Result<Vec<(String, i32)>> {
        Ok(self
            .events(name)
            .await?
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .map(|e| (e.message.unwrap_or_default(), e.count.unwrap_or(1)))
            .collect())
    }

    /// Waits until an event with `reason` whose message contains `needle` exists.
    pub async fn wait_event(&self, name: &str, reason: &str, needle: &str) -> Result<String> {
        wait_for(
            &format!("{reason} event containing {needle:?}"),
            WITHIN,
            || async {
                Ok(self
                    .events_with(name, reason)
                    .await?
                    .into_iter()
                    .map(|(m, _)| m)
                    .find(|m| m.contains(needle)))
            },
        )
        .await
    }
}

pub fn status_of(cj: &CronJob) -> k8s_openapi::api::batch::v1::CronJobStatus {
    cj.status.clone().unwrap_or_default()
}

pub fn active_names(cj: &CronJob) -> Vec<String> {
    let mut v: Vec<String> = status_of(cj)
        .active
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| r.name)
        .collect();
    v.sort();
    v
}

pub fn last_schedule(cj: &CronJob) -> Option<Timestamp> {
    status_of(cj).last_schedule_time.map(|t| t.0)
}

/// `<cronjob>-<minutes>` for the instant `t`.
pub fn job_name(cj: &str, t: Timestamp) -> String {
    format!("{cj}-{}", t.as_second() / 60)
}
