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

/// A pod with a value of most kinds a pod spec holds (volumes of several sources, probes of
/// every handler, env from every source, quantities, int-or-strings, affinities, a sidecar),
/// for tests of how a pod is written and read. A scheduling gate keeps it off every node; it
/// has no namespace and no owner.
pub fn rich_pod() -> Value {
    const RICH_POD: &str = r#"{"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-",
            "labels": {"app": "web", "empty": ""},
            "annotations": {"a/b": "c"}},
        "spec": {
            "restartPolicy": "OnFailure",
            "terminationGracePeriodSeconds": 30,
            "activeDeadlineSeconds": 600,
            "automountServiceAccountToken": false,
            "nodeSelector": {"disk": "ssd"},
            "hostname": "web-0", "subdomain": "web",
            "securityContext": {"runAsUser": 1000, "fsGroup": 2000,
                "supplementalGroups": [1, 2], "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}],
                "seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 30}],
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name",
                        "operator": "In", "values": ["n1"]}]}]}},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "web"},
                            "matchExpressions": [{"key": "tier", "operator": "NotIn",
                                "values": ["db"]}]}}}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}}}],
            "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]},
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a", "b"]}],
            "readinessGates": [{"conditionType": "example.com/ready"}],
            "schedulingGates": [{"name": "example.com/hold"}],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0", "readOnly": true}},
                {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420,
                    "items": [{"key": "k", "path": "p", "mode": 256}], "optional": false}},
                {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                {"name": "proj", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                    {"downwardAPI": {"items": [{"path": "labels",
                        "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                    "metadata": {"labels": {"k": "v"}},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}}}
            ],
            "initContainers": [{"name": "sidecar", "image": "busybox", "restartPolicy": "Always",
                "command": ["sh", "-c", "sleep 1d"]}],
            "containers": [{"name": "app", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                "args": ["--port", "8080"], "workingDir": "/srv",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"},
                    {"name": "IDX", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                    {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                        "divisor": "1Mi"}}},
                    {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k",
                        "optional": true}}}],
                "envFrom": [{"prefix": "X_", "configMapRef": {"name": "cfg"}}],
                "resources": {"limits": {"cpu": "1", "memory": "128Mi"},
                    "requests": {"cpu": "100m"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true,
                    "subPath": "x"}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http",
                    "httpHeaders": [{"name": "X", "value": "y"}]},
                    "initialDelaySeconds": 3, "periodSeconds": 5, "failureThreshold": 2},
                "readinessProbe": {"exec": {"command": ["true"]}},
                "startupProbe": {"grpc": {"port": 9000}},
                "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "stdin": false, "tty": false}]}}"#;
    serde_json::from_str(RICH_POD).unwrap_or(Value::Null)
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
) -> rkcm_runtime::workload::consistency::Stale {
    rkcm_runtime::workload::consistency::Stale {
        resource: rkcm_runtime::workload::consistency::GroupResource {
            group: group.into(),
            resource: resource.into(),
        },
        written: written.into(),
        observed: observed.into(),
    }
}
