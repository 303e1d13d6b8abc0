//! The envelope's objects as JSON: every one labelled with the run, its pods placed on the
//! run's own nodes.

use serde_json::{Value, json};

use super::mix::{Kind, Workload};
use crate::k8s;

/// Label of every object, pod and node of a run (value: the run's namespace).
pub const RUN_LABEL: &str = "rkcm-bench/envelope";
/// Pod template annotation changed by the roll phase.
pub const VERSION_ANN: &str = "rkcm-bench/version";
/// A node label no node has: the delete phase moves the DaemonSet there.
pub const NOWHERE: &str = "rkcm-bench/nowhere";

/// The pod template of `w` in run `run`, at template version `version`.
pub fn template(run: &str, w: &Workload, version: &str) -> Value {
    let mut extra = json!({"nodeSelector": {RUN_LABEL: run}});
    if matches!(w.kind, Kind::Job | Kind::CronJob) {
        extra["restartPolicy"] = json!("Never");
    }
    json!({
        "metadata": {
            "labels": {"app": w.name, RUN_LABEL: run},
            "annotations": {VERSION_ANN: version}
        },
        "spec": k8s::pod_spec(k8s::PAUSE, extra)
    })
}

/// The object of `w` (apiVersion, kind, metadata, spec) as created by the create phase.
pub fn object(run: &str, w: &Workload) -> Value {
    let meta = json!({"name": w.name, "labels": {RUN_LABEL: run, "app": w.name}});
    let selector = json!({"matchLabels": {"app": w.name}});
    let template = template(run, w, "v1");
    match w.kind {
        Kind::Deployment => json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": w.pods, "selector": selector, "template": template}
        }),
        Kind::StatefulSet => json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
            "spec": {
                "replicas": w.pods, "selector": selector, "template": template,
                "serviceName": w.name, "podManagementPolicy": "Parallel"
            }
        }),
        Kind::DaemonSet => json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
            "spec": {
                "selector": selector, "template": template,
                "updateStrategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "10%"}}
            }
        }),
        Kind::Job => json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"completions": w.pods, "parallelism": w.pods, "template": template}
        }),
        Kind::CronJob => json!({
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
            "spec": {
                "schedule": "*/1 * * * *",
                "concurrencyPolicy": "Forbid",
                "jobTemplate": {"spec": {
                    "completions": 1, "parallelism": 1, "ttlSecondsAfterFinished": 30,
                    "template": template
                }}
            }
        }),
    }
}

/// The merge patch that sets the replicas of a Deployment or StatefulSet.
pub fn scale_patch(replicas: usize) -> Value {
    json!({"spec": {"replicas": replicas}})
}

/// The merge patch that moves a pod template to `version`.
pub fn roll_patch(version: &str) -> Value {
    json!({"spec": {"template": {"metadata": {"annotations": {VERSION_ANN: version}}}}})
}

/// The merge patch that puts a DaemonSet on no node.
pub fn nowhere_patch() -> Value {
    json!({"spec": {"template": {"spec": {"nodeSelector": {NOWHERE: "true"}}}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(kind: Kind, pods: usize) -> Workload {
        Workload {
            kind,
            ns: 0,
            name: format!("{}-x", kind.prefix()),
            pods,
        }
    }

    #[test]
    fn objects_decode_as_their_types_and_place_pods_on_the_runs_nodes() {
        use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
        use k8s_openapi::api::batch::v1::{CronJob, Job};
        let d: Deployment = serde_json::from_value(object("r", &w(Kind::Deployment, 5))).unwrap();
        let spec = d.spec;
        assert_eq!(spec.replicas, Some(5));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.node_selector.unwrap()[RUN_LABEL], "r");
        let s: StatefulSet =
            serde_json::from_value(object("r", &w(Kind::StatefulSet, 30))).unwrap();
        assert_eq!(s.spec.pod_management_policy.as_deref(), Some("Parallel"));
        let _: DaemonSet = serde_json::from_value(object("r", &w(Kind::DaemonSet, 9))).unwrap();
        let j: Job = serde_json::from_value(object("r", &w(Kind::Job, 30))).unwrap();
        let js = j.spec.unwrap();
        assert_eq!((js.completions, js.parallelism), (Some(30), Some(30)));
        assert_eq!(
            js.template.spec.unwrap().restart_policy.as_deref(),
            Some("Never")
        );
        let c: CronJob = serde_json::from_value(object("r", &w(Kind::CronJob, 1))).unwrap();
        assert_eq!(c.spec.concurrency_policy.as_deref(), Some("Forbid"));
    }
}
