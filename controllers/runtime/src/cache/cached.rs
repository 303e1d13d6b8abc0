//! The types the shared caches hold for pods and nodes: the fields some controller of this
//! process reads, and nothing else.
//!
//! k8s-openapi's `Pod` and `Node` hold every optional field of every nested struct inline (a
//! `Container` alone is more than a kilobyte before any of its strings), so trimming a decoded
//! `Pod` still leaves most of its weight in the cache. These types keep the shape of the
//! k8s-openapi ones — same names, same field names, same leaf types — so reading code is the
//! same, but a field no controller reads does not exist here: decoding skips it without
//! building it (no allocation for `managedFields`, images, env, probes, resources, node
//! images or heartbeats), and a controller that starts reading a new field fails to compile
//! until the field is added here.
//!
//! Optional groups of these fields (container statuses, claim volumes, affinity) are kept
//! only when a controller declares them (see [`crate::cache::projection`]).
//!
//! These are read models: nothing writes them back to the API server.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer, Serialize};

/// A pod as the shared cache keeps it (`core/v1` `Pod`, read fields only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pod {
    #[serde(deserialize_with = "metadata")]
    pub metadata: ObjectMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
}

/// `PodSpec`, read fields only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    pub containers: Vec<Container>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<Container>>,
    /// Only with [`crate::cache::projection::pod::VOLUME_CLAIMS`], and then only claim volumes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    /// Only with [`crate::cache::projection::pod::AFFINITY`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<core::Affinity>>,
}

/// A container: its name and restart policy (sidecar detection).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Container {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// A volume: its name and, for a claim volume, the claim.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<core::PersistentVolumeClaimVolumeSource>,
}

/// `PodStatus`, read fields only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PodCondition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// Only with [`crate::cache::projection::pod::CONTAINER_STATUSES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_statuses: Option<Vec<ContainerStatus>>,
    /// Only with [`crate::cache::projection::pod::CONTAINER_STATUSES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_container_statuses: Option<Vec<ContainerStatus>>,
}

/// A pod condition: its type and status, when it last changed and why (no probe time or
/// observed generation: nothing reads them, and a condition is a tenth of a cached pod).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A container's status: name, restarts and how it terminated (no image, IDs, readiness or
/// resources).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerStatus {
    pub name: String,
    pub restart_count: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<ContainerState>,
}

/// A container's current state: only whether and how it terminated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerState {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminated: Option<ContainerStateTerminated>,
}

/// A terminated container's exit code and finish time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerStateTerminated {
    pub exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

/// A node as the shared cache keeps it (`core/v1` `Node`, read fields only: of its status
/// only each condition's type and status, so a heartbeat that changes nothing else leaves the
/// cached node equal but for its resourceVersion).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Node {
    /// Without annotations: no controller reads a node's, and on real nodes they are often
    /// the largest part of the metadata (network plugins, CSI, kubeadm).
    #[serde(deserialize_with = "node_metadata")]
    pub metadata: ObjectMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<NodeSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeStatus>,
}

/// `NodeStatus`: the conditions only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<NodeCondition>>,
}

/// A node condition's type and status (no heartbeat or transition times, reason or message).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

/// `NodeSpec`, read fields only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<core::Taint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<bool>,
}

/// `ObjectMeta` decoded without `managedFields` (skipped unread: it is the largest part of
/// most objects and nothing reads it).
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MetaWire {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    uid: Option<String>,
}

fn metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let w = MetaWire::deserialize(d)?;
    Ok(ObjectMeta {
        annotations: w.annotations,
        creation_timestamp: w.creation_timestamp,
        deletion_grace_period_seconds: w.deletion_grace_period_seconds,
        deletion_timestamp: w.deletion_timestamp,
        finalizers: w.finalizers,
        generate_name: w.generate_name,
        generation: w.generation,
        labels: w.labels,
        managed_fields: None,
        name: w.name,
        namespace: w.namespace,
        owner_references: w.owner_references,
        resource_version: w.resource_version,
        self_link: None,
        uid: w.uid,
    })
}

/// [`metadata`] without annotations (a node's: see [`Node`]).
fn node_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let mut meta = metadata(d)?;
    meta.annotations = None;
    Ok(meta)
}

macro_rules! resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = "v1";
            const GROUP: &'static str = "";
            const KIND: &'static str = $kind;
            const VERSION: &'static str = "v1";
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(Pod, "Pod", "pods", k8s_openapi::NamespaceResourceScope);
resource!(Node, "Node", "nodes", k8s_openapi::ClusterResourceScope);

/// `obj` decoded from its JSON as type `K`: a k8s-openapi object read as the cache would
/// read it off the wire (test fixtures).
pub fn from_full<T: Serialize, K: serde::de::DeserializeOwned>(
    obj: &T,
) -> Result<K, serde_json::Error> {
    serde_json::from_value(serde_json::to_value(obj)?)
}

impl From<&core::Container> for Container {
    fn from(c: &core::Container) -> Self {
        Container {
            name: c.name.clone(),
            restart_policy: c.restart_policy.clone(),
        }
    }
}

impl From<&core::ContainerStatus> for ContainerStatus {
    fn from(s: &core::ContainerStatus) -> Self {
        ContainerStatus {
            name: s.name.clone(),
            restart_count: s.restart_count,
            state: s.state.as_ref().map(|st| ContainerState {
                terminated: st.terminated.as_ref().map(|t| ContainerStateTerminated {
                    exit_code: t.exit_code,
                    finished_at: t.finished_at.clone(),
                }),
            }),
        }
    }
}

fn statuses(list: Option<&Vec<core::ContainerStatus>>) -> Option<Vec<ContainerStatus>> {
    list.map(|l| l.iter().map(ContainerStatus::from).collect())
}

/// The cached form of a whole pod (what decoding the pod's JSON into [`Pod`] gives): for
/// pods built in process, such as the pod a controller is about to create, and test fixtures.
impl From<&core::Pod> for Pod {
    fn from(pod: &core::Pod) -> Self {
        let mut metadata = pod.metadata.clone();
        metadata.managed_fields = None;
        metadata.self_link = None;
        Pod {
            metadata,
            spec: pod.spec.as_ref().map(|s| PodSpec {
                node_name: s.node_name.clone(),
                hostname: s.hostname.clone(),
                subdomain: s.subdomain.clone(),
                restart_policy: s.restart_policy.clone(),
                containers: s.containers.iter().map(Container::from).collect(),
                init_containers: s
                    .init_containers
                    .as_ref()
                    .map(|l| l.iter().map(Container::from).collect()),
                volumes: s.volumes.as_ref().map(|l| {
                    l.iter()
                        .map(|v| Volume {
                            name: v.name.clone(),
                            persistent_volume_claim: v.persistent_volume_claim.clone(),
                        })
                        .collect()
                }),
                affinity: s.affinity.clone().map(Box::new),
            }),
            status: pod.status.as_ref().map(|s| PodStatus {
                phase: s.phase.clone(),
                reason: s.reason.clone(),
                conditions: s.conditions.as_ref().map(|l| {
                    l.iter()
                        .map(|c| PodCondition {
                            type_: c.type_.clone(),
                            status: c.status.clone(),
                            last_transition_time: c.last_transition_time.clone(),
                            reason: c.reason.clone(),
                            message: c.message.clone(),
                        })
                        .collect()
                }),
                start_time: s.start_time.clone(),
                container_statuses: statuses(s.container_statuses.as_ref()),
                init_container_statuses: statuses(s.init_container_statuses.as_ref()),
            }),
        }
    }
}

impl From<core::Pod> for Pod {
    fn from(pod: core::Pod) -> Self {
        Pod::from(&pod)
    }
}

/// The cached form of a whole node.
impl From<&core::Node> for Node {
    fn from(node: &core::Node) -> Self {
        let mut metadata = node.metadata.clone();
        metadata.managed_fields = None;
        metadata.self_link = None;
        metadata.annotations = None;
        Node {
            metadata,
            spec: node.spec.as_ref().map(|s| NodeSpec {
                taints: s.taints.clone(),
                unschedulable: s.unschedulable,
            }),
            status: node.status.as_ref().map(|s| NodeStatus {
                conditions: s.conditions.as_ref().map(|l| {
                    l.iter()
                        .map(|c| NodeCondition {
                            type_: c.type_.clone(),
                            status: c.status.clone(),
                        })
                        .collect()
                }),
            }),
        }
    }
}

impl From<core::Node> for Node {
    fn from(node: core::Node) -> Self {
        Node::from(&node)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A pod as the API server sends it, with fields of every kind the cache drops.
    pub(crate) fn wire_pod() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"a": "b"}, "annotations": {"x": "y"}, "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "rs", "uid": "rs-uid", "controller": true}],
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {
                "nodeName": "n1", "hostname": "h", "subdomain": "s", "restartPolicy": "Never",
                "affinity": {"nodeAffinity": {}},
                "initContainers": [{"name": "side", "image": "i", "restartPolicy": "Always",
                    "env": [{"name": "E", "value": "v"}]}],
                "containers": [{"name": "c", "image": "i", "command": ["x"],
                    "ports": [{"containerPort": 80}]}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-p"}},
                    {"name": "tok", "projected": {"sources": []}}
                ]
            },
            "status": {
                "phase": "Failed", "reason": "Evicted", "podIP": "10.0.0.1",
                "startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "id",
                    "containerID": "cid", "ready": true, "restartCount": 3,
                    "state": {"terminated": {"exitCode": 2, "reason": "Error",
                        "finishedAt": "2026-01-01T00:00:05Z"}}}]
            }
        })
    }

    #[test]
    fn decodes_what_is_read_and_skips_the_rest() {
        let pod: Pod = serde_json::from_value(wire_pod()).expect("decodes");
        let meta = &pod.metadata;
        assert_eq!(meta.name.as_deref(), Some("p"));
        assert_eq!(meta.namespace.as_deref(), Some("ns"));
        assert_eq!(meta.uid.as_deref(), Some("u1"));
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(meta.finalizers, Some(vec!["f".to_string()]));
        assert_eq!(meta.annotations.as_ref().map(BTreeMap::len), Some(1));
        assert_eq!(meta.labels.as_ref().map(BTreeMap::len), Some(1));
        assert_eq!(
            meta.owner_references.as_ref().map(|r| r[0].uid.as_str()),
            Some("rs-uid")
        );
        assert!(meta.deletion_timestamp.is_some());
        assert_eq!(meta.managed_fields, None);
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(spec.hostname.as_deref(), Some("h"));
        assert_eq!(spec.subdomain.as_deref(), Some("s"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(
            spec.containers,
            vec![Container {
                name: "c".into(),
                restart_policy: None
            }]
        );
        let init = spec.init_containers.as_ref().expect("init containers");
        assert_eq!(init[0].restart_policy.as_deref(), Some("Always"));
        assert!(spec.affinity.is_some());
        assert_eq!(spec.volumes.as_ref().map(Vec::len), Some(2));
        let status = pod.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(status.reason.as_deref(), Some("Evicted"));
        assert!(status.start_time.is_some());
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
        let cs = &status.container_statuses.as_ref().expect("statuses")[0];
        assert_eq!((cs.name.as_str(), cs.restart_count), ("c", 3));
        let terminated = cs
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!(terminated.exit_code, 2);
        assert!(terminated.finished_at.is_some());
    }

    #[test]
    fn a_fixture_reads_as_the_wire_form_does() {
        let full: core::Pod = serde_json::from_value(wire_pod()).expect("full pod");
        let from_wire: Pod = serde_json::from_value(wire_pod()).expect("cached pod");
        assert_eq!(Pod::from(&full), from_wire);
    }

    #[test]
    fn a_whole_node_converts_as_the_wire_form_decodes() {
        let wire = serde_json::json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}, "resourceVersion": "9",
                "annotations": {"a": "b"}},
            "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "r"}]}
        });
        let full: core::Node = serde_json::from_value(wire.clone()).expect("full node");
        let from_wire: Node = serde_json::from_value(wire).expect("cached node");
        assert_eq!(Node::from(&full), from_wire);
    }

    #[test]
    fn a_node_keeps_labels_and_scheduling_only() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}, "resourceVersion": "9",
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"unschedulable": true,
                "taints": [{"key": "k", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z"}], "images": [{"names": ["a"]}]}
        }))
        .expect("decodes");
        assert_eq!(node.metadata.name.as_deref(), Some("n1"));
        assert_eq!(node.metadata.annotations, None, "annotations are not kept");
        assert_eq!(
            node.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("zone"))
                .map(String::as_str),
            Some("a")
        );
        let spec = node.spec.as_ref().expect("spec");
        assert_eq!(spec.unschedulable, Some(true));
        assert_eq!(spec.taints.as_ref().map(|t| t[0].key.as_str()), Some("k"));
        let conditions = node.status.and_then(|s| s.conditions).expect("conditions");
        assert_eq!(
            conditions,
            [NodeCondition {
                type_: "Ready".into(),
                status: "True".into()
            }]
        );
    }

    #[test]
    fn a_heartbeat_leaves_the_cached_node_equal() {
        let node = |rv: &str, beat: &str| -> Node {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "n1", "resourceVersion": rv},
                "status": {"conditions": [{"type": "Ready", "status": "True",
                    "lastHeartbeatTime": beat}]}
            }))
            .expect("decodes")
        };
        let mut a = node("1", "2026-01-01T00:00:00Z");
        let b = node("2", "2026-01-01T00:00:40Z");
        a.metadata.resource_version = b.metadata.resource_version.clone();
        assert_eq!(a, b);
    }

    /// Every cached pod carries its type's inline size whatever it holds (a cached pod is an
    /// `Arc` of it): a field that makes it grow should be boxed or dropped.
    #[test]
    fn a_cached_pod_is_small_inline() {
        use std::mem::size_of;
        let sizes = [
            ("Pod", size_of::<Pod>(), 680),
            ("PodSpec", size_of::<PodSpec>(), 176),
            ("PodStatus", size_of::<PodStatus>(), 144),
            ("PodCondition", size_of::<PodCondition>(), 120),
        ];
        for (name, size, budget) in sizes {
            assert!(
                size <= budget,
                "{name} is {size} bytes inline, over {budget}"
            );
        }
    }

    #[test]
    fn the_resource_is_the_core_one() {
        use kube::Resource;
        assert_eq!(Pod::kind(&()), "Pod");
        assert_eq!(Pod::plural(&()), "pods");
        assert_eq!(Pod::url_path(&(), Some("ns")), "/api/v1/namespaces/ns/pods");
        assert_eq!(Node::url_path(&(), None), "/api/v1/nodes");
    }
}
