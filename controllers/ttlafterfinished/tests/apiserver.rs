//! TTL-after-finished scenarios against the real local control plane (numbers refer to the
//! controller's acceptance scenarios). The tests finish Jobs by writing their status (no Job
//! controller runs for these namespaces); the plane's garbage collector completes the
//! Foreground deletion.
//!
//! Run with `make test`, or against a running cluster:
//! `RKCM_TEST_KUBECONFIG=... cargo test -p rkcm-ttlafterfinished --test apiserver -- --include-ignored`.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams, PostParams};
use rkcm_runtime::informer::InformerFactory;
use rkcm_runtime::{CancellationToken, ControllerContext};
use rkcm_testkit::{TestCluster, TestNamespace, holds_for, wait_for};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

const WITHIN: Duration = Duration::from_secs(20);

struct Controller {
    shutdown: CancellationToken,
    handle: Option<JoinHandle<Result<(), rkcm_ttlafterfinished::Error>>>,
}

impl Controller {
    fn start(cluster: &TestCluster, namespace: &str) -> Self {
        let shutdown = CancellationToken::new();
        let client = cluster.client();
        let informers = InformerFactory::namespaced(client.clone(), namespace);
        let ctx = ControllerContext {
            client,
            informers: informers.clone(),
            shutdown: shutdown.clone(),
            clock: rkcm_runtime::clock::system(),
        };
        let handle = tokio::spawn(rkcm_ttlafterfinished::start(
            ctx,
            rkcm_ttlafterfinished::Config::default(),
        ));
        informers.start(shutdown.clone());
        Self {
            shutdown,
            handle: Some(handle),
        }
    }

    async fn stop(mut self) -> Result<()> {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(10), h)
                .await
                .context("controller did not stop")?
                .context("controller panicked")?
                .context("controller failed")?;
        }
        Ok(())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

struct Env {
    cluster: TestCluster,
    ns: TestNamespace,
}

impl Env {
    async fn new(prefix: &str) -> Result<Self> {
        let cluster = TestCluster::connect().await?;
        let ns = cluster.namespace(prefix).await?;
        Ok(Self { cluster, ns })
    }

    fn jobs(&self) -> Api<Job> {
        self.ns.api()
    }

    fn start(&self) -> Controller {
        Controller::start(&self.cluster, self.ns.name())
    }

    async fn create(&self, name: &str, ttl: Option<i32>) -> Result<Job> {
        let mut spec = json!({
            "template": {"spec": {"restartPolicy": "Never", "schedulerName": "rkcm-test-no-scheduler",
                "containers": [{"name": "main", "image": "busybox"}]}}
        });
        if let Some(t) = ttl {
            spec["ttlSecondsAfterFinished"] = json!(t);
        }
        let job: Job = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))?;
        Ok(self.jobs().create(&PostParams::default(), &job).await?)
    }

    async fn patch_status(&self, name: &str, status: Value) -> Result<()> {
        self.jobs()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .with_context(|| format!("patching status of Job {name}"))?;
        Ok(())
    }

    /// Marks the Job Complete (with the interim condition) at `at`.
    async fn complete(&self, name: &str, at: jiff::Timestamp) -> Result<()> {
        let start = at - jiff::SignedDuration::from_secs(5);
        self.patch_status(
            name,
            json!({
                "startTime": start.to_string(), "succeeded": 1, "completionTime": at.to_string(),
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "m", "lastTransitionTime": at.to_string(), "lastProbeTime": at.to_string()},
                    {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "m", "lastTransitionTime": at.to_string(), "lastProbeTime": at.to_string()}
                ]
            }),
        )
        .await
    }

    async fn failure_target(
        &self,
        name: &str,
        at: jiff::Timestamp,
        with_failed: bool,
    ) -> Result<()> {
        let now = at.to_string();
        let mut conditions = vec![
            json!({"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": "m", "lastTransitionTime": now, "lastProbeTime": now}),
        ];
        if with_failed {
            conditions.push(json!({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "m", "lastTransitionTime": now, "lastProbeTime": now}));
        }
        let mut status = json!({"failed": 1, "conditions": conditions});
        if !with_failed {
            status["startTime"] = json!(now);
        }
        self.patch_status(name, status).await
    }

    async fn exists(&self, name: &str) -> Result<bool> {
        Ok(self.jobs().get_opt(name).await?.is_some())
    }

    async fn wait_gone(&self, name: &str, within: Duration) -> Result<()> {
        wait_for(&format!("Job {name} deleted"), within, || async {
            Ok((!self.exists(name).await?).then_some(()))
        })
        .await
    }

    async fn stays(&self, name: &str, period: Duration) -> Result<()> {
        holds_for(&format!("Job {name} kept"), period, || async {
            self.exists(name).await
        })
        .await
    }
}

fn deletions_count() -> u64 {
    rkcm_runtime::metrics::render()
        .lines()
        .find(|l| {
            l.starts_with("ttl_after_finished_controller_job_deletion_duration_seconds_count")
        })
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn deletes_finished_jobs_after_their_ttl() -> Result<()> {
    let env = Env::new("ttl-basic").await?;
    let ctrl = env.start();
    // Scenario 1: TTL 0.
    env.create("zero", Some(0)).await?;
    env.complete("zero", jiff::Timestamp::now()).await?;
    env.wait_gone("zero", WITHIN).await?;
    // Scenarios 2 and 15: TTL N, deleted on time, metric observed.
    let before = deletions_count();
    env.create("later", Some(5)).await?;
    let finished = Instant::now();
    env.complete("later", jiff::Timestamp::now()).await?;
    env.stays("later", Duration::from_secs(3)).await?;
    env.wait_gone("later", WITHIN).await?;
    let took = finished.elapsed();
    if took > Duration::from_secs(5 + 8) {
        bail!("deleted {took:?} after finishing with TTL 5");
    }
    if deletions_count() < before + 1 {
        bail!("deletion duration metric not observed");
    }
    // Scenario 4: no TTL.
    env.create("keep", None).await?;
    env.complete("keep", jiff::Timestamp::now()).await?;
    env.stays("keep", Duration::from_secs(3)).await?;
    ctrl.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn only_terminal_conditions_count() -> Result<()> {
    let env = Env::new("ttl-failed").await?;
    let ctrl = env.start();
    // Scenario 5: unfinished.
    env.create("running", Some(0)).await?;
    // Scenario 6: the interim condition is not finished.
    env.create("interim", Some(0)).await?;
    let at = jiff::Timestamp::now();
    env.failure_target("interim", at, false).await?;
    env.stays("interim", Duration::from_secs(3)).await?;
    if !env.exists("running").await? {
        bail!("an unfinished Job was deleted");
    }
    // Scenario 3: Failed Jobs too.
    env.failure_target("interim", at, true).await?;
    env.wait_gone("interim", WITHIN).await?;
    ctrl.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn ttl_edits_and_restart() -> Result<()> {
    let env = Env::new("ttl-edit").await?;
    // Scenario 13: finished while the controller was down.
    env.create("before", Some(0)).await?;
    env.complete("before", jiff::Timestamp::now()).await?;
    let ctrl = env.start();
    env.wait_gone("before", WITHIN).await?;
    // Scenario 7: extending the TTL before expiry postpones the deletion.
    env.create("extend", Some(3)).await?;
    env.complete("extend", jiff::Timestamp::now()).await?;
    env.jobs()
        .patch(
            "extend",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ttlSecondsAfterFinished": 3600}})),
        )
        .await?;
    env.stays("extend", Duration::from_secs(6)).await?;
    // Scenario 8: shortening it takes effect at once.
    env.jobs()
        .patch(
            "extend",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ttlSecondsAfterFinished": 1}})),
        )
        .await?;
    env.wait_gone("extend", WITHIN).await?;
    // Scenario 9: adding a TTL after finishing.
    env.create("add", None).await?;
    env.complete("add", jiff::Timestamp::now()).await?;
    env.jobs()
        .patch(
            "add",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ttlSecondsAfterFinished": 0}})),
        )
        .await?;
    env.wait_gone("add", WITHIN).await?;
    ctrl.stop().await
}
