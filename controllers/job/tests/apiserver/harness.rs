//! What every scenario needs: the controller running in-process and scoped to the test's
//! namespace, Job builders, polling helpers, and a cleanup that always runs.

#![allow(dead_code)]

use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rkcm_runtime::informer::InformerFactory;
use rkcm_runtime::{CancellationToken, ControllerContext};
use rkcm_testkit::{TestCluster, TestNamespace, wait_for};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

pub const TRACKING: &str = "batch.kubernetes.io/job-tracking";
pub const WITHIN: Duration = Duration::from_secs(30);
pub const HOLDS: Duration = Duration::from_secs(4);
/// A scheduler that does not exist: pods stay unbound and only the test drives them.
pub const NO_SCHEDULER: &str = "rkcm-test-no-scheduler";
pub const KWOK_FAIL: &str = "pod-container-running-failed.stage.kwok.x-k8s.io";
pub const KWOK_EXIT_CODE: &str = "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code";

/// The Job controller on informers of its own; stopped when dropped.
pub struct Controller {
    shutdown: CancellationToken,
    handle: Option<JoinHandle<Result<(), rkcm_job::Error>>>,
}

impl Controller {
    pub fn start(cluster: &TestCluster, namespace: &str) -> Self {
        let shutdown = CancellationToken::new();
        let client = cluster.client();
        let informers = InformerFactory::namespaced(client.clone(), namespace);
        let ctx = ControllerContext {
            client,
            informers: informers.clone(),
            shutdown: shutdown.clone(),
            clock: rkcm_runtime::clock::system(),
        };
        let handle = tokio::spawn(rkcm_job::start(ctx, rkcm_job::Config::default()));
        informers.start(shutdown.clone());
        Self {
            shutdown,
            handle: Some(handle),
        }
    }

    /// Stops the controller and checks that it ended cleanly and promptly.
    pub async fn stop(mut self) -> Result<()> {
        self.shutdown.cancel();
        if let Some(handle) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(10), handle)
                .await
                .context("controller did not stop within 10 s")?
                .context("controller task panicked")?
                .context("controller returned an error")?;
        }
        Ok(())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub struct Env {
    pub cluster: TestCluster,
    pub ns: TestNamespace,
}

impl Env {
    pub async fn new(prefix: &str) -> Result<Self> {
        let cluster = TestCluster::connect().await?;
        let ns = cluster.namespace(prefix).await?;
        Ok(Self { cluster, ns })
    }

    pub fn name(&self) -> &str {
        self.ns.name()
    }

    pub fn start(&self) -> Controller {
        Controller::start(&self.cluster, self.name())
    }

    pub fn pods(&self) -> Api<Pod> {
        self.ns.api()
    }

    pub fn jobs(&self) -> Api<Job> {
        self.ns.api()
    }

    /// Returns `result` after removing every finalizer and pod, so the namespace can go.
    pub async fn finish(self, result: Result<()>) -> Result<()> {
        let cleanup = self.cleanup().await;
        result?;
        cleanup
    }

    async fn cleanup(&self) -> Result<()> {
        let unhold = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        let pp = PatchParams::default();
        for pod in self.pods().list(&ListParams::default()).await?.items {
            if pod
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                let name = pod.metadata.name.unwrap_or_default();
                match self.pods().patch(&name, &pp, &unhold).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        // Test cleanup only: controllers never force-delete.
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        self.pods()
            .delete_collection(&now, &ListParams::default())
            .await
            .context("removing the test's pods")?;
        Ok(())
    }

    pub async fn create_job(&self, job: Value) -> Result<Job> {
        let job: Job = serde_json::from_value(job)?;
        self.jobs()
            .create(&PostParams::default(), &job)
            .await
            .context("creating Job")
    }

    pub async fn patch_job(&self, name: &str, patch: Value) -> Result<Job> {
        self.jobs()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .with_context(|| format!("patching Job {name}"))
    }

    /// Every pod controlled by the Job `uid`.
    pub async fn owned(&self, uid: &str) -> Result<Vec<Pod>> {
        Ok(self
            .pods()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|p| {
                p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.controller == Some(true) && r.uid == uid)
            })
            .collect())
    }

    /// Pods of the Job that are neither terminating nor terminal.
    pub async fn active(&self, uid: &str) -> Result<Vec<Pod>> {
        Ok(self
            .owned(uid)
            .await?
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && !is_terminal(p))
            .collect())
    }

    pub async fn wait_active(&self, uid: &str, n: usize) -> Result<Vec<Pod>> {
        wait_for(&format!("{n} active pods"), WITHIN, || async {
            let a = self.active(uid).await?;
            Ok((a.len() == n).then_some(a))
        })
        .await
    }

    /// Waits until the Job satisfies `check`; returns it.
    pub async fn wait_job(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Job) -> bool,
    ) -> Result<Job> {
        wait_for(what, timeout, || async {
            let j = self.jobs().get(name).await?;
            Ok(check(&j).then_some(j))
        })
        .await
        .with_context(|| format!("Job {name}"))
    }

    /// Marks a pod's containers terminated with `code` (Succeeded for 0, else Failed).
    pub async fn terminate(&self, pod: &str, code: i32) -> Result<()> {
        self.cluster.terminate_pod(self.name(), pod, code).await?;
        Ok(())
    }

    /// Events on the Job `name` with `reason`.
    pub async fn events(&self, name: &str, reason: &str) -> Result<Vec<Event>> {
        Ok(self
            .ns
            .api::<Event>()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.involved_object.name.as_deref() == Some(name)
                    && e.reason.as_deref() == Some(reason)
            })
            .collect())
    }

    pub async fn wait_event(&self, name: &str, reason: &str) -> Result<Event> {
        wait_for(&format!("event {reason}"), WITHIN, || async {
            Ok(self.events(name, reason).await?.into_iter().next())
        })
        .await
    }
}

pub fn is_terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

pub fn has_tracking(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING)
}

pub fn uid_of(j: &Job) -> String {
    j.metadata.uid.clone().unwrap_or_default()
}

pub fn status(j: &Job) -> k8s_openapi::api::batch::v1::JobStatus {
    j.status.clone().unwrap_or_default()
}

/// `type=reason` of every condition, in order.
pub fn conditions(j: &Job) -> Vec<String> {
    status(j)
        .conditions
        .unwrap_or_default()
        .into_iter()
        .map(|c| format!("{}={}", c.type_, c.reason.unwrap_or_default()))
        .collect()
}

pub fn has_condition(j: &Job, type_: &str) -> bool {
    status(j)
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

pub fn finished(j: &Job) -> bool {
    has_condition(j, "Complete") || has_condition(j, "Failed")
}

/// A Job; `spec` fields override the defaults. `driven` pods stay unbound (the test sets
/// their status); otherwise kwok runs them.
pub fn job(name: &str, spec: Value, driven: bool) -> Value {
    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "main", "image": "busybox"}]
    });
    if driven {
        pod_spec["schedulerName"] = json!(NO_SCHEDULER);
    }
    let mut s = json!({
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
    });
    for (k, v) in spec.as_object().cloned().unwrap_or_default() {
        if k == "template" {
            merge(&mut s["template"], &v);
        } else {
            s[k] = v;
        }
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": s})
}

fn merge(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

/// Fails unless `ok`, with `what` as the message.
pub fn ensure(ok: bool, what: impl std::fmt::Display) -> Result<()> {
    if !ok {
        bail!("{what}");
    }
    Ok(())
}

/// The completion index of a pod.
pub fn index_of(p: &Pod) -> Option<i32> {
    p.metadata
        .annotations
        .as_ref()?
        .get("batch.kubernetes.io/job-completion-index")?
        .parse()
        .ok()
}

impl Env {
    /// Waits for the active pod of index `ix`.
    pub async fn wait_index(&self, uid: &str, ix: i32) -> Result<Pod> {
        wait_for(&format!("active pod of index {ix}"), WITHIN, || async {
            Ok(self
                .active(uid)
                .await?
                .into_iter()
                .find(|p| index_of(p) == Some(ix)))
        })
        .await
    }
}
