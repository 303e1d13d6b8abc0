//! The resources the simulated server serves, how each behaves (status subresource,
//! generation), object keys, and what defaulting adds to a new object.

use serde_json::{Value, json};

/// How one resource behaves.
#[derive(Debug, Clone, Copy)]
pub struct ResourceInfo {
    pub plural: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Has a status subresource: updates of the object keep the stored status, status
    /// updates keep everything else.
    pub status: bool,
    /// `metadata.generation` counts spec changes.
    pub generation: bool,
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

const fn info(
    plural: &'static str,
    group: &'static str,
    kind: &'static str,
    namespaced: bool,
    status: bool,
    generation: bool,
) -> ResourceInfo {
    ResourceInfo {
        plural,
        group,
        version: "v1",
        kind,
        namespaced,
        status,
        generation,
    }
}

/// Every resource the simulated server serves.
pub const RESOURCES: &[ResourceInfo] = &[
    info("pods", "", "Pod", true, true, false),
    info("nodes", "", "Node", false, true, false),
    info("namespaces", "", "Namespace", false, false, false),
    info("events", "", "Event", true, false, false),
    info(
        "persistentvolumeclaims",
        "",
        "PersistentVolumeClaim",
        true,
        true,
        false,
    ),
    info(
        "replicationcontrollers",
        "",
        "ReplicationController",
        true,
        true,
        true,
    ),
    info("replicasets", "apps", "ReplicaSet", true, true, true),
    info("deployments", "apps", "Deployment", true, true, true),
    info("statefulsets", "apps", "StatefulSet", true, true, true),
    info("daemonsets", "apps", "DaemonSet", true, true, true),
    info(
        "controllerrevisions",
        "apps",
        "ControllerRevision",
        true,
        false,
        false,
    ),
    info("jobs", "batch", "Job", true, true, true),
    info("cronjobs", "batch", "CronJob", true, true, true),
    info("leases", "coordination.k8s.io", "Lease", true, false, false),
];

/// The resource with this plural name.
pub fn resource(plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES.iter().find(|r| r.plural == plural)
}

/// `namespace/name` (`name` for cluster-scoped objects).
pub fn key_of(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_owned()
    } else {
        format!("{ns}/{name}")
    }
}

/// A string field of an object's metadata (empty when unset).
pub(super) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or_default()
}

/// What the API server's defaulting and `PrepareForCreate` add to a new object, for the
/// fields controllers read: a pod starts `Pending` with the default grace period; a Job gets
/// its generated selector and labels (`pkg/registry/batch/job/strategy.go`,
/// `generateSelector`) and the defaults of `pkg/apis/batch/v1/defaults.go`.
pub(super) fn default_on_create(r: &ResourceInfo, obj: &mut Value, uid: &str) {
    match r.plural {
        "pods" => {
            let spec = &mut obj["spec"];
            if spec["terminationGracePeriodSeconds"].is_null() {
                spec["terminationGracePeriodSeconds"] = json!(30);
            }
            if spec["restartPolicy"].is_null() {
                spec["restartPolicy"] = json!("Always");
            }
            let mut st = json!({"phase": "Pending", "qosClass": "BestEffort"});
            if !obj["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
            {
                st["conditions"] = json!([{"type": "PodScheduled", "status": "True"}]);
            }
            obj["status"] = st;
        }
        "jobs" => {
            let manual = obj["spec"]["manualSelector"].as_bool() == Some(true);
            if !manual && obj["spec"]["selector"].is_null() {
                obj["spec"]["selector"] =
                    json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
                let name = meta_str(obj, "name").to_owned();
                let labels = &mut obj["spec"]["template"]["metadata"]["labels"];
                if !labels.is_object() {
                    *labels = json!({});
                }
                for (k, v) in [
                    ("batch.kubernetes.io/controller-uid", uid),
                    ("controller-uid", uid),
                    ("batch.kubernetes.io/job-name", name.as_str()),
                    ("job-name", name.as_str()),
                ] {
                    labels[k] = json!(v);
                }
            }
            let spec = &mut obj["spec"];
            if spec["completions"].is_null() && spec["parallelism"].is_null() {
                spec["completions"] = json!(1);
            }
            if spec["parallelism"].is_null() {
                spec["parallelism"] = json!(1);
            }
            if spec["backoffLimit"].is_null() {
                spec["backoffLimit"] = json!(6);
            }
            if spec["completionMode"].is_null() {
                spec["completionMode"] = json!("NonIndexed");
            }
            if spec["suspend"].is_null() {
                spec["suspend"] = json!(false);
            }
            if spec["podReplacementPolicy"].is_null() {
                spec["podReplacementPolicy"] = json!("TerminatingOrFailed");
            }
            if spec["manualSelector"].is_null() {
                spec["manualSelector"] = json!(false);
            }
            obj["status"] = json!({});
        }
        _ => {
            if r.status {
                obj["status"] = json!({});
            }
        }
    }
}
