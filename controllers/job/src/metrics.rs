//! Job controller metrics with upstream names (`pkg/controller/job/metrics/metrics.go`),
//! registered once in the process registry. A metric that cannot be built is logged and
//! skipped; it never stops the controller.

use std::sync::OnceLock;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use rkcm_runtime::metrics::{get_or_register, register};
use rkcm_runtime::workload::consistency::StaleGuard;

use crate::consts::metrics as m;

pub(crate) struct Metrics {
    pub sync_duration: HistogramVec,
    pub syncs: IntCounterVec,
    pub finished: IntCounterVec,
    pub by_external: IntCounterVec,
    pub pods_finished: IntCounterVec,
    pub policy_actions: IntCounterVec,
    pub tracking_finalizer: IntCounterVec,
    pub finished_indexes: IntCounterVec,
    pub pods_creation: IntCounterVec,
}

fn counter(name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec, prometheus::Error> {
    IntCounterVec::new(Opts::new(name, help).subsystem(m::SUBSYSTEM), labels).map(register)
}

fn build() -> Result<Metrics, prometheus::Error> {
    let buckets = prometheus::exponential_buckets(0.004, 2.0, 15)?;
    let mode = ["completion_mode", "result", "action"];
    let metrics = Metrics {
        sync_duration: register(HistogramVec::new(
            HistogramOpts::new(m::SYNC_DURATION, "The time it took to sync a job")
                .subsystem(m::SUBSYSTEM)
                .buckets(buckets),
            &mode,
        )?),
        syncs: counter(m::SYNCS, "The number of job syncs", &mode)?,
        finished: counter(
            m::FINISHED,
            "The number of finished jobs",
            &["completion_mode", "result", "reason"],
        )?,
        by_external: counter(
            m::BY_EXTERNAL,
            "The number of Jobs managed by an external controller",
            &["controller_name"],
        )?,
        pods_finished: counter(
            m::PODS_FINISHED,
            "The number of finished Pods that are fully tracked",
            &["completion_mode", "result"],
        )?,
        policy_actions: counter(
            m::POLICY_ACTIONS,
            "The number of failed Pods handled by failure policy with respect to the failure policy action applied based on the matched rule.",
            &["action"],
        )?,
        tracking_finalizer: counter(
            m::TRACKING_FINALIZER,
            "The number of terminated pods (phase=Failed|Succeeded) that have the finalizer batch.kubernetes.io/job-tracking. The event label can be \"add\" or \"delete\".",
            &["event"],
        )?,
        finished_indexes: counter(
            m::FINISHED_INDEXES,
            "The number of finished indexes.",
            &["status", "backoffLimit"],
        )?,
        pods_creation: counter(
            m::PODS_CREATION,
            "The number of Pods created by the Job controller labelled with a reason for the Pod creation.",
            &["reason", "status"],
        )?,
    };
    Ok(metrics)
}

/// The stale-cache guard (gate `StaleControllerConsistencyJob`); its skips are counted in
/// `job_controller_stale_sync_skips_total`.
pub(crate) fn stale_guard() -> StaleGuard {
    StaleGuard::new(crate::config::NAME, m::SUBSYSTEM, m::STALE_SYNC_SKIPS_HELP)
}

/// The metrics, built and registered on first use.
pub(crate) fn get() -> Option<&'static Metrics> {
    static METRICS: OnceLock<Option<Metrics>> = OnceLock::new();
    get_or_register(&METRICS, "job", build)
}

pub(crate) fn inc(vec: impl Fn(&Metrics) -> &IntCounterVec, labels: &[&str], by: u64) {
    if by == 0 {
        return;
    }
    if let Some(m) = get() {
        vec(m).with_label_values(labels).inc_by(by);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_render_as_upstream() {
        inc(
            |m| &m.finished,
            &["NonIndexed", "succeeded", "CompletionsReached"],
            1,
        );
        inc(|m| &m.policy_actions, &["Ignore"], 1);
        inc(|m| &m.tracking_finalizer, &["add"], 1);
        if let Some(m) = get() {
            m.sync_duration
                .with_label_values(&["Indexed", "success", "tracking"])
                .observe(0.01);
        }
        let text = rkcm_runtime::metrics::render();
        for want in [
            "job_controller_jobs_finished_total{completion_mode=\"NonIndexed\",reason=\"CompletionsReached\",result=\"succeeded\"} 1",
            "job_controller_pod_failures_handled_by_failure_policy_total{action=\"Ignore\"} 1",
            "job_controller_terminated_pods_tracking_finalizer_total{event=\"add\"} 1",
            "job_controller_job_sync_duration_seconds_bucket{action=\"tracking\",completion_mode=\"Indexed\",result=\"success\",le=\"0.004\"}",
        ] {
            assert!(text.contains(want), "missing {want} in {text}");
        }
    }
}
