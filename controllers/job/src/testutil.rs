//! Builders shared by the table tests.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::cache::cached::Pod;
use serde_json::{Value, json};

pub const NOW: &str = "2026-01-01T01:00:00Z";

pub fn now() -> jiff::Timestamp {
    NOW.parse().unwrap()
}

pub fn ts(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

/// A Job `ns/pi` with the given spec fields (template filled in) and status.
pub fn job(spec: Value, status: Value) -> Job {
    let mut s = json!({
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid"}},
        "template": {
            "metadata": {"labels": {"batch.kubernetes.io/controller-uid": "job-uid"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
        },
        "backoffLimit": 6,
        "parallelism": 1,
        "completions": 1
    });
    if let (Some(base), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": "pi", "namespace": "ns", "uid": "job-uid", "generation": 1, "resourceVersion": "10"},
        "spec": s,
        "status": status
    }))
    .unwrap()
}

/// A pod of the Job named `name` (also its UID) in `phase`, with the tracking finalizer.
pub fn pod(name: &str, phase: &str) -> PodB {
    PodB(json!({
        "metadata": {
            "name": name, "namespace": "ns", "uid": name,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "labels": {"batch.kubernetes.io/controller-uid": "job-uid"},
            "annotations": {},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "job-uid", "controller": true}]
        },
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": phase}
    }))
}

pub struct PodB(pub Value);

impl PodB {
    pub fn index(mut self, ix: i32) -> Self {
        self.0["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] =
            json!(ix.to_string());
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0["metadata"]["annotations"][k] = json!(v);
        self
    }
    pub fn no_finalizer(mut self) -> Self {
        self.0["metadata"]["finalizers"] = json!([]);
        self
    }
    pub fn deleting(mut self) -> Self {
        self.0["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:30:00Z");
        self
    }
    pub fn ready(mut self) -> Self {
        self.0["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:10:00Z"}]);
        self
    }
    pub fn node(mut self, n: &str) -> Self {
        self.0["spec"]["nodeName"] = json!(n);
        self
    }
    pub fn exit(mut self, container: &str, code: i32, finished: &str) -> Self {
        self.0["status"]["containerStatuses"] = json!([{
            "name": container, "image": "", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "finishedAt": finished}}
        }]);
        self
    }
    pub fn restarts(mut self, n: i32) -> Self {
        self.0["status"]["containerStatuses"] = json!([{
            "name": "main", "image": "", "imageID": "", "ready": false, "restartCount": n,
            "state": {"running": {}}
        }]);
        self
    }
    pub fn condition(mut self, t: &str) -> Self {
        self.0["status"]["conditions"] = json!([{"type": t, "status": "True"}]);
        self
    }
    /// The pod as the job controller's projected pod cache holds it.
    pub fn build(self) -> Arc<Pod> {
        let pod: Pod = serde_json::from_value(self.0).unwrap();
        Arc::new(
            rkcm_runtime::cache::projection::projected(&pod, crate::POD_FIELDS)
                .expect("a fixture reads as the cache reads it"),
        )
    }
}
