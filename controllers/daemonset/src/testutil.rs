//! Object builders for the unit tests.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use rkcm_runtime::cache::cached::{Node, Pod};
pub use rkcm_testkit::harness::merge_patch as merge;
use serde_json::{Value, json};

pub fn ts(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
}

pub fn rfc(s: i64) -> String {
    ts(s).to_string()
}

/// A DaemonSet `ds` in `ns` selecting `app=ds`, generation 1, default strategy.
pub fn ds_json() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {
            "name": "ds", "namespace": "ns", "uid": "ds-uid", "generation": 1,
            "annotations": {"deprecated.daemonset.template.generation": "1"}
        },
        "spec": {
            "selector": {"matchLabels": {"app": "ds"}},
            "template": {
                "metadata": {"labels": {"app": "ds"}},
                "spec": {"containers": [{"name": "c", "image": "img:1", "resources": {}}]}
            },
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "revisionHistoryLimit": 10
        },
        "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}
    })
}

pub fn ds_from(v: Value) -> DaemonSet {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("bad DaemonSet: {e}"))
}

pub fn ds() -> DaemonSet {
    ds_from(ds_json())
}

/// Merges `patch` into the default DaemonSet JSON (JSON merge patch semantics).
pub fn ds_with(patch: Value) -> DaemonSet {
    let mut v = ds_json();
    merge(&mut v, &patch);
    ds_from(v)
}

pub fn node(name: &str) -> Node {
    node_from(json!({"metadata": {"name": name}}))
}

pub fn node_from(v: Value) -> Node {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("bad Node: {e}"))
}

pub fn nodes(names: &[&str]) -> Vec<Arc<Node>> {
    names.iter().map(|n| Arc::new(node(n))).collect()
}

/// A pod of `ds` aimed at `node` by affinity, created at `created`, hash `hash`.
pub struct PodSpec {
    pub v: Value,
}

pub fn pod(name: &str, node: &str, hash: &str, created: i64) -> PodSpec {
    PodSpec {
        v: json!({
            "metadata": {
                "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "creationTimestamp": rfc(created),
                "labels": {"app": "ds", "controller-revision-hash": hash},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-uid", "controller": true}]
            },
            "spec": {
                "containers": [{"name": "c", "image": "img"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
                }}}
            },
            "status": {"phase": "Pending"}
        }),
    }
}

impl PodSpec {
    pub fn bound(mut self, node: &str) -> Self {
        self.v["spec"]["nodeName"] = json!(node);
        self
    }
    pub fn phase(mut self, phase: &str) -> Self {
        self.v["status"]["phase"] = json!(phase);
        self
    }
    /// Running and Ready since `since`.
    pub fn ready(mut self, since: i64) -> Self {
        self.v["status"]["phase"] = json!("Running");
        self.v["status"]["conditions"] =
            json!([{"type": "Ready", "status": "True", "lastTransitionTime": rfc(since)}]);
        self
    }
    pub fn deleting(mut self) -> Self {
        self.v["metadata"]["deletionTimestamp"] = json!(rfc(0));
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.v["metadata"]["labels"][k] = json!(v);
        self
    }
    /// The pod as the controller's projected pod cache holds it.
    pub fn build(self) -> Arc<Pod> {
        let pod: Pod = serde_json::from_value(self.v).unwrap_or_else(|e| panic!("bad Pod: {e}"));
        Arc::new(
            rkcm_runtime::cache::projection::projected(&pod, crate::POD_FIELDS)
                .expect("a fixture reads as the cache reads it"),
        )
    }
}

pub fn names(pods: &[Arc<Pod>]) -> Vec<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}
