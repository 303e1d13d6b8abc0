//! Building the objects tests create, and reading the ones they get back.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use serde::Serialize;
use serde_json::{Value, json};

/// The finalizer tests put on objects to observe them terminating; [`Env::finish`](super::Env::finish)
/// removes it (and any other finalizer) before the namespace goes.
pub const HOLD: &str = "rkcm.test/hold";
/// "Within T" for anything a controller should do promptly.
pub const WITHIN: Duration = Duration::from_secs(20);
/// A scheduler that does not exist: pods naming it stay unbound unless a test binds them.
pub const NO_SCHEDULER: &str = "rkcm-test-no-scheduler";
/// The image of test pods (nothing pulls it without a kubelet).
pub const PAUSE: &str = "registry.k8s.io/pause:3.10";

/// Labels as a JSON object.
pub fn labels(pairs: &[(&str, &str)]) -> Value {
    let map: BTreeMap<&str, &str> = pairs.iter().copied().collect();
    json!(map)
}

/// A pod template: one container running `image`, never scheduled by kube-scheduler.
pub fn template(labels_: &[(&str, &str)], image: &str) -> Value {
    json!({
        "metadata": {"labels": labels(labels_)},
        "spec": {
            "schedulerName": NO_SCHEDULER,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": image}],
        },
    })
}

/// A pod template for kwok's nodes: labelled `app=<app>`, one container `app` running `image`,
/// placed on and tolerating kwok nodes (`type=kwok`, taint `kwok.x-k8s.io/node`).
pub fn kwok_template(app: &str, image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {
            "nodeSelector": {"type": "kwok"},
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [{"name": "app", "image": image}],
        },
    })
}

/// The tolerations (key, effect) upstream gives every daemon pod; a host-network pod also gets
/// `node.kubernetes.io/network-unavailable`.
pub const DAEMON_TOLERATIONS: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];

/// A bare pod (no owner) that the scheduler leaves alone.
pub fn bare_pod(name: &str, labels_: &[(&str, &str)]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels(labels_)},
        "spec": {
            "schedulerName": NO_SCHEDULER,
            "containers": [{"name": "main", "image": PAUSE}],
        },
    })
}

/// Merges `patch` into `base`, for tweaking a builder's output: nested objects merge key by
/// key; anything else (arrays, and `null` too, unlike a JSON merge patch) replaces.
pub fn merge_json(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge_json(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// Applies `patch` to `target` as a JSON merge patch (RFC 7386): nested objects merge key by
/// key, `null` removes the key, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// A True Job condition of `type_` with `reason`, probed and changed at `at`.
pub fn job_condition(type_: &str, reason: &str, at: jiff::Timestamp) -> Value {
    json!({
        "type": type_, "status": "True", "reason": reason, "message": "test",
        "lastProbeTime": at.to_string(), "lastTransitionTime": at.to_string(),
    })
}

/// A pod status: Running, and Ready and ContainersReady since `since`.
pub fn ready_status(since: jiff::Timestamp) -> Value {
    let t = since.to_string();
    json!({"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": t},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": t},
    ]})
}

// ---- Accessors -------------------------------------------------------------------------------

/// `metadata.name`, or `""`.
pub fn name_of<K: kube::Resource>(obj: &K) -> String {
    obj.meta().name.clone().unwrap_or_default()
}

/// `metadata.uid`, or `""`.
pub fn uid_of<K: kube::Resource>(obj: &K) -> String {
    obj.meta().uid.clone().unwrap_or_default()
}

/// The names of `objs`, in order.
pub fn names_of<K: kube::Resource>(objs: &[K]) -> Vec<String> {
    objs.iter().map(name_of).collect()
}

/// Names, sorted: for comparing sets of objects whose order does not matter.
pub fn sorted_names<K: kube::Resource>(objs: &[K]) -> Vec<String> {
    let mut names = names_of(objs);
    names.sort();
    names
}

/// The UID of the object's controller owner reference.
pub fn controller_uid<K: kube::Resource>(obj: &K) -> Option<&str> {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

/// Annotation `key` of the object.
pub fn ann<'a, K: kube::Resource>(obj: &'a K, key: &str) -> Option<&'a str> {
    obj.meta()
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Label `key` of the object.
pub fn label<'a, K: kube::Resource>(obj: &'a K, key: &str) -> Option<&'a str> {
    obj.meta().labels.as_ref()?.get(key).map(String::as_str)
}

/// Whether the object has any finalizer.
pub fn has_finalizers<K: kube::Resource>(obj: &K) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| !f.is_empty())
}

/// The resourceVersion as a number. On the local plane it is the etcd revision, which
/// orders changes across kinds (the API only promises that within one watch).
pub fn rv<K: kube::Resource>(obj: &K) -> Result<u64> {
    let rv = obj.meta().resource_version.clone().unwrap_or_default();
    rv.parse()
        .with_context(|| format!("resourceVersion {rv:?} is not an integer"))
}

/// The pod's phase, or `""`.
pub fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// `Succeeded` or `Failed`.
pub fn is_terminal(p: &Pod) -> bool {
    matches!(phase(p), "Succeeded" | "Failed")
}

/// Neither terminating nor terminal.
pub fn is_active(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none() && !is_terminal(p)
}

/// The Ready condition is True.
pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The image of the pod's first container.
pub fn pod_image(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

/// `spec.replicas` (the API's default 1 when absent).
pub fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

/// `(status.replicas, readyReplicas, availableReplicas)`.
pub fn rs_counts(rs: &ReplicaSet) -> (i32, i32, i32) {
    let s = rs.status.clone().unwrap_or_default();
    (
        s.replicas,
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
    )
}

/// The image of the ReplicaSet's pod template.
pub fn image_of(rs: &ReplicaSet) -> &str {
    rs.spec
        .template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

/// One line per ReplicaSet for failure messages (with the Deployment controller's
/// annotations, absent on other ReplicaSets).
pub fn describe_rss(rss: &[ReplicaSet]) -> String {
    let lines: Vec<String> = rss
        .iter()
        .map(|rs| {
            format!(
                "{} image={} spec={} (replicas,ready,available)={:?} terminating={:?} \
                 observed={:?}/{:?} revision={:?} history={:?} desired={:?} max={:?} owner={:?}",
                name_of(rs),
                image_of(rs),
                spec_replicas(rs),
                rs_counts(rs),
                rs.status.as_ref().and_then(|s| s.terminating_replicas),
                rs.status.as_ref().and_then(|s| s.observed_generation),
                rs.metadata.generation,
                ann(rs, "deployment.kubernetes.io/revision"),
                ann(rs, "deployment.kubernetes.io/revision-history"),
                ann(rs, "deployment.kubernetes.io/desired-replicas"),
                ann(rs, "deployment.kubernetes.io/max-replicas"),
                controller_uid(rs),
            )
        })
        .collect();
    format!("[{}]", lines.join("; "))
}

/// One line about a pod for failure messages.
pub fn describe_pod(p: &Pod) -> String {
    format!(
        "{} phase={:?} ready={} deleting={} grace={:?} node={:?} finalizers={:?}",
        name_of(p),
        phase(p),
        is_ready(p),
        p.metadata.deletion_timestamp.is_some(),
        p.metadata.deletion_grace_period_seconds,
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        p.metadata.finalizers,
    )
}

/// The object's `metadata.generation` and `status`, as compact JSON, for failure messages.
pub fn describe_status<K: Serialize>(obj: &K) -> String {
    let v = serde_json::to_value(obj).unwrap_or_default();
    format!(
        "generation={} status={}",
        v["metadata"]["generation"], v["status"]
    )
}

/// `type/reason: message` of an event.
pub fn describe_event(e: &Event) -> String {
    format!(
        "{}/{}: {}",
        e.type_.as_deref().unwrap_or_default(),
        e.reason.as_deref().unwrap_or_default(),
        e.message.as_deref().unwrap_or_default()
    )
}
