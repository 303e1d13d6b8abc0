//! What only the Job suite needs on top of the testkit's harness: the controller
//! in-process, Job helpers on [`Env`] ([`JobEnv`]), builders and status accessors.

#![allow(dead_code)]

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::Api;
pub use rkcm_testkit::harness::*;
use rkcm_testkit::wait_for;
use serde_json::{Value, json};

pub const TRACKING: &str = "batch.kubernetes.io/job-tracking";
/// "Within T" for the Job controller and kwok (longer than the testkit's default).
pub const WITHIN: Duration = Duration::from_secs(30);
pub const HOLDS: Duration = Duration::from_secs(4);
pub const KWOK_FAIL: &str = "pod-container-running-failed.stage.kwok.x-k8s.io";
pub const KWOK_EXIT_CODE: &str = "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code";

/// The Job controller on informers of its own, scoped to the test's namespace; stopped
/// when dropped.
pub fn start(env: &Env) -> Controllers {
    env.controllers()
        .spawn("job", |ctx| {
            rkcm_job::start(ctx, rkcm_job::Config::default())
        })
        .run()
}

/// Waits for the pod replacing `failed` (a pod of Job `uid` that failed at `failed_at`) and
/// checks it came after the 10 s recreation backoff (8 s: the failure's own timestamps are
/// whole seconds); returns the Job's active pods.
pub async fn wait_replacement_after_backoff(
    env: &Env,
    uid: &str,
    failed: &str,
    failed_at: std::time::Instant,
) -> Result<Vec<Pod>> {
    let active = env.wait_active_within(uid, 1, WITHIN).await?;
    let elapsed = failed_at.elapsed();
    ensure(
        active[0].metadata.name.as_deref() != Some(failed),
        "a replacement",
    )?;
    ensure(
        elapsed >= Duration::from_secs(8),
        format!("replacement {elapsed:?} after the failure, want the 10 s backoff"),
    )?;
    Ok(active)
}

/// Waits up to `timeout` until Job `name` satisfies `check`; returns it (on timeout the
/// error shows its status as last seen).
pub async fn wait_job(
    env: &Env,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Job) -> bool,
) -> Result<Job> {
    env.wait_object(name, what, timeout, check, describe_status)
        .await
}

/// Waits until Job `name` has condition `type_` true; returns it.
pub async fn wait_condition(env: &Env, name: &str, type_: &str) -> Result<Job> {
    wait_job(env, name, type_, WITHIN, |j| has_condition(j, type_)).await
}

/// Job helpers on the testkit's [`Env`].
#[allow(async_fn_in_trait)]
pub trait JobEnv {
    fn start(&self) -> Controllers;
    fn jobs(&self) -> Api<Job>;
    async fn create_job(&self, job: Value) -> Result<Job>;
    /// Creates the Job [`job`]`(name, spec, driven)` and returns its UID.
    async fn start_job(&self, name: &str, spec: Value, driven: bool) -> Result<String>;
    async fn patch_job(&self, name: &str, patch: Value) -> Result<Job>;
    /// Marks a pod's containers terminated with `code` (Succeeded for 0, else Failed).
    async fn terminate(&self, pod: &str, code: i32) -> Result<()>;
    /// Events on the Job `name` with `reason`.
    async fn events(&self, name: &str, reason: &str) -> Result<Vec<Event>>;
    async fn wait_event(&self, name: &str, reason: &str) -> Result<Event>;
    /// Starts the driven Indexed Job `name` of `n` completions, all in parallel, with the
    /// spec fields of `extra` on top, and waits for its `n` active pods; returns its UID.
    async fn start_indexed(&self, name: &str, n: i32, extra: Value) -> Result<String>;
    /// Waits for the active pod of index `ix`.
    async fn wait_index(&self, uid: &str, ix: i32) -> Result<Pod>;
    /// Waits for the active pod of index `ix` and terminates it with `code`.
    async fn end_index(&self, uid: &str, ix: i32, code: i32) -> Result<()>;
    /// Waits until the Job `uid` has no active pod left (`what` says why it should not).
    async fn wait_none_active(&self, uid: &str, what: &str) -> Result<()>;
}

impl JobEnv for Env {
    fn start(&self) -> Controllers {
        start(self)
    }

    fn jobs(&self) -> Api<Job> {
        self.api()
    }

    async fn create_job(&self, job: Value) -> Result<Job> {
        self.create(job).await
    }

    async fn start_job(&self, name: &str, spec: Value, driven: bool) -> Result<String> {
        Ok(uid_of(&self.create_job(job(name, spec, driven)).await?))
    }

    async fn patch_job(&self, name: &str, patch: Value) -> Result<Job> {
        self.merge(name, patch).await
    }

    async fn terminate(&self, pod: &str, code: i32) -> Result<()> {
        self.cluster.terminate_pod(self.name(), pod, code).await?;
        Ok(())
    }

    async fn events(&self, name: &str, reason: &str) -> Result<Vec<Event>> {
        Ok(self
            .events_for(name)
            .await?
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect())
    }

    async fn wait_event(&self, name: &str, reason: &str) -> Result<Event> {
        wait_for(&format!("event {reason}"), WITHIN, || async {
            Ok(self.events(name, reason).await?.into_iter().next())
        })
        .await
    }

    async fn start_indexed(&self, name: &str, n: i32, extra: Value) -> Result<String> {
        let mut spec = json!({"completionMode": "Indexed", "completions": n, "parallelism": n});
        if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
            spec.extend(extra);
        }
        let uid = self.start_job(name, spec, true).await?;
        self.wait_active_within(&uid, usize::try_from(n)?, WITHIN)
            .await?;
        Ok(uid)
    }

    async fn end_index(&self, uid: &str, ix: i32, code: i32) -> Result<()> {
        let pod = self.wait_index(uid, ix).await?;
        self.terminate(&name_of(&pod), code).await
    }

    async fn wait_index(&self, uid: &str, ix: i32) -> Result<Pod> {
        wait_for(&format!("active pod of index {ix}"), WITHIN, || async {
            Ok(self
                .active(uid)
                .await?
                .into_iter()
                .find(|p| index_of(p) == Some(ix)))
        })
        .await
        .context("waiting for an indexed pod")
    }

    async fn wait_none_active(&self, uid: &str, what: &str) -> Result<()> {
        wait_for(what, WITHIN, || async {
            Ok(self.active(uid).await?.is_empty().then_some(()))
        })
        .await
    }
}

pub fn has_tracking(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING)
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

/// The Job's conditions (`type=reason`, in order) are exactly `want`.
pub fn ensure_conditions(j: &Job, want: &[&str]) -> Result<()> {
    let got = conditions(j);
    ensure(got == want, format!("{got:?}"))
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
            merge_json(&mut s["template"], &v);
        } else {
            s[k] = v;
        }
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": s})
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
