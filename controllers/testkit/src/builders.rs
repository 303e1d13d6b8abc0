//! Builders for the objects tests create. Plain JSON under the hood, so a test states only
//! what matters to it.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

/// A pod with one container, no node, in `namespace`.
pub fn pod(namespace: &str, name: &str) -> PodBuilder {
    PodBuilder {
        value: json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {}},
            "spec": {
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                "terminationGracePeriodSeconds": 30,
            },
        }),
    }
}

pub struct PodBuilder {
    value: Value,
}

impl PodBuilder {
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.value["metadata"]["labels"][key] = json!(value);
        self
    }
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.value["metadata"]["annotations"][key] = json!(value);
        self
    }
    pub fn node(mut self, node: &str) -> Self {
        self.value["spec"]["nodeName"] = json!(node);
        self
    }
    /// A controller owner reference (controller: true).
    pub fn owner(mut self, api_version: &str, kind: &str, name: &str, uid: &str) -> Self {
        self.value["metadata"]["ownerReferences"] = json!([{
            "apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
            "controller": true, "blockOwnerDeletion": true,
        }]);
        self
    }
    pub fn finalizer(mut self, f: &str) -> Self {
        let list = self.value["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut list = list;
        list.push(json!(f));
        self.value["metadata"]["finalizers"] = Value::Array(list);
        self
    }
    pub fn grace_period(mut self, seconds: i64) -> Self {
        self.value["spec"]["terminationGracePeriodSeconds"] = json!(seconds);
        self
    }
    /// Keeps the scheduler away: the pod names a scheduler that does not exist.
    pub fn unschedulable(mut self) -> Self {
        self.value["spec"]["schedulerName"] = json!("rkcm-test-no-scheduler");
        self
    }
    pub fn build(self) -> Pod {
        serde_json::from_value(self.value).expect("pod builder produces a valid Pod")
    }
}

/// A node no simulator manages, for tests that need control over node state.
///
/// By default it carries a `NoSchedule` taint so kube-scheduler does not place other
/// tests' pods on it, and no status (no conditions at all) until [`NodeBuilder::ready`].
#[derive(Clone)]
pub struct NodeBuilder {
    name: String,
    labels: Vec<(String, String)>,
    taints: Vec<(String, String, String)>,
    ready: Option<bool>,
}

impl NodeBuilder {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            labels: Vec::new(),
            taints: vec![(
                "rkcm.test/no-schedule".into(),
                "true".into(),
                "NoSchedule".into(),
            )],
            ready: None,
        }
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push((key.into(), value.into(), effect.into()));
        self
    }
    /// Sets the Ready condition to True or False.
    pub fn ready(mut self, ready: bool) -> Self {
        self.ready = Some(ready);
        self
    }

    /// The Node to create, and the status to set on it afterwards (the create call does not
    /// keep status).
    pub fn build(self) -> (Node, Option<Value>) {
        let labels: serde_json::Map<String, Value> = self
            .labels
            .into_iter()
            .map(|(k, v)| (k, json!(v)))
            .collect();
        let taints: Vec<Value> = self
            .taints
            .into_iter()
            .map(|(k, v, e)| json!({"key": k, "value": v, "effect": e}))
            .collect();
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {"taints": taints},
        }))
        .expect("node builder produces a valid Node");
        let status = self.ready.map(|r| {
            let now = jiff::Timestamp::now().to_string();
            json!({"conditions": [{
                "type": "Ready", "status": if r { "True" } else { "False" },
                "reason": if r { "KubeletReady" } else { "KubeletNotReady" },
                "message": "set by test", "lastHeartbeatTime": now, "lastTransitionTime": now,
            }]})
        });
        (node, status)
    }
}

/// A StatefulSet `name` of `replicas`: service `name`, selector and pod labels `app=<name>`,
/// terminationGracePeriodSeconds 1, one container `container` of `image`. Tests merge what
/// else they need (`harness::merge_json`).
pub fn statefulset(name: &str, replicas: i32, container: &str, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": container, "image": image}],
                },
            },
        },
    })
}

/// An API error answer (`code`, `reason`), as the client returns it.
pub fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure("refused", reason)
            .with_code(code)
            .boxed(),
    )
}

/// The stale-cache guard's refusal: the cache of `group`/`resource` at `observed`, behind the
/// controller's write at `written`.
pub fn stale(
    group: &str,
    resource: &str,
    written: &str,
    observed: &str,
) -> rkcm_runtime::consistency::Stale {
    rkcm_runtime::consistency::Stale {
        resource: rkcm_runtime::consistency::GroupResource {
            group: group.into(),
            resource: resource.into(),
        },
        written: written.into(),
        observed: observed.into(),
    }
}
