//! The cached pod and node types ([`crate::cache::cached`]) read from their messages.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::wire::{
    DecodeError, Fields, Result, Value, boolean, bytes, int32, int64, non_empty, non_empty_vec,
    string,
};
use crate::cache::cached;

/// `metav1.Time`: whole seconds; empty (Go's zero time) is absent.
pub(super) fn time(v: Value<'_>, field: &str) -> Result<Option<Time>> {
    let b = bytes(v, field)?;
    if b.is_empty() {
        return Ok(None);
    }
    let mut seconds = 0i64;
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next()? {
        if n == 1 {
            seconds = int64(v, field)?;
        }
    }
    jiff::Timestamp::from_second(seconds)
        .map(|t| Some(Time(t)))
        .map_err(|e| DecodeError::new(format!("{field}: {e}")))
}

/// A `map<string, string>` entry (`key` = 1, `value` = 2).
fn map_entry(v: Value<'_>, field: &str, into: &mut BTreeMap<String, String>) -> Result<()> {
    let mut key = String::new();
    let mut value = String::new();
    let mut f = Fields::new(bytes(v, field)?);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => key = string(v, field)?,
            2 => value = string(v, field)?,
            _ => {}
        }
    }
    into.insert(key, value);
    Ok(())
}

fn owner_reference(buf: &[u8]) -> Result<OwnerReference> {
    let mut r = OwnerReference::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => r.kind = string(v, "ownerReference.kind")?,
            3 => r.name = string(v, "ownerReference.name")?,
            4 => r.uid = string(v, "ownerReference.uid")?,
            5 => r.api_version = string(v, "ownerReference.apiVersion")?,
            6 => r.controller = Some(boolean(v, "ownerReference.controller")?),
            7 => r.block_owner_deletion = Some(boolean(v, "ownerReference.blockOwnerDeletion")?),
            _ => {}
        }
    }
    Ok(r)
}

/// `metav1.ObjectMeta` without `managedFields` and `selfLink` (as the JSON decoder of
/// [`crate::cache::cached`]).
pub(super) fn object_meta(buf: &[u8]) -> Result<ObjectMeta> {
    let mut m = ObjectMeta::default();
    let mut labels = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    let mut owners = Vec::new();
    let mut finalizers = Vec::new();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => m.name = non_empty(string(v, "metadata.name")?),
            2 => m.generate_name = non_empty(string(v, "metadata.generateName")?),
            3 => m.namespace = non_empty(string(v, "metadata.namespace")?),
            5 => m.uid = non_empty(string(v, "metadata.uid")?),
            6 => m.resource_version = non_empty(string(v, "metadata.resourceVersion")?),
            7 => m.generation = Some(int64(v, "metadata.generation")?).filter(|g| *g != 0),
            8 => m.creation_timestamp = time(v, "metadata.creationTimestamp")?,
            9 => m.deletion_timestamp = time(v, "metadata.deletionTimestamp")?,
            10 => {
                m.deletion_grace_period_seconds =
                    Some(int64(v, "metadata.deletionGracePeriodSeconds")?)
            }
            11 => map_entry(v, "metadata.labels", &mut labels)?,
            12 => map_entry(v, "metadata.annotations", &mut annotations)?,
            13 => owners.push(owner_reference(bytes(v, "metadata.ownerReferences")?)?),
            14 => finalizers.push(string(v, "metadata.finalizers")?),
            _ => {}
        }
    }
    m.labels = (!labels.is_empty()).then_some(labels);
    m.annotations = (!annotations.is_empty()).then_some(annotations);
    m.owner_references = non_empty_vec(owners);
    m.finalizers = non_empty_vec(finalizers);
    Ok(m)
}

fn container(buf: &[u8]) -> Result<cached::Container> {
    let mut c = cached::Container::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => c.name = string(v, "container.name")?,
            24 => c.restart_policy = Some(string(v, "container.restartPolicy")?),
            _ => {}
        }
    }
    Ok(c)
}

fn volume(buf: &[u8]) -> Result<cached::Volume> {
    let mut vol = cached::Volume::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => vol.name = string(v, "volume.name")?,
            2 => vol.persistent_volume_claim = volume_source(bytes(v, "volume.volumeSource")?)?,
            _ => {}
        }
    }
    Ok(vol)
}

/// `VolumeSource`: its claim only.
fn volume_source(buf: &[u8]) -> Result<Option<core::PersistentVolumeClaimVolumeSource>> {
    let mut claim = None;
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        if n == 10 {
            claim = Some(claim_source(bytes(v, "volume.persistentVolumeClaim")?)?);
        }
    }
    Ok(claim)
}

fn claim_source(buf: &[u8]) -> Result<core::PersistentVolumeClaimVolumeSource> {
    let mut claim = core::PersistentVolumeClaimVolumeSource::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => claim.claim_name = string(v, "claim.claimName")?,
            2 => claim.read_only = Some(boolean(v, "claim.readOnly")?).filter(|r| *r),
            _ => {}
        }
    }
    Ok(claim)
}

fn node_selector_requirement(buf: &[u8]) -> Result<core::NodeSelectorRequirement> {
    let mut r = core::NodeSelectorRequirement::default();
    let mut values = Vec::new();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => r.key = string(v, "requirement.key")?,
            2 => r.operator = string(v, "requirement.operator")?,
            3 => values.push(string(v, "requirement.values")?),
            _ => {}
        }
    }
    r.values = non_empty_vec(values);
    Ok(r)
}

fn node_selector_term(buf: &[u8]) -> Result<core::NodeSelectorTerm> {
    let mut expressions = Vec::new();
    let mut fields = Vec::new();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => expressions.push(node_selector_requirement(bytes(
                v,
                "term.matchExpressions",
            )?)?),
            2 => fields.push(node_selector_requirement(bytes(v, "term.matchFields")?)?),
            _ => {}
        }
    }
    Ok(core::NodeSelectorTerm {
        match_expressions: non_empty_vec(expressions),
        match_fields: non_empty_vec(fields),
    })
}

/// `Affinity`: its node affinity only (the cache keeps nothing else of it, see
/// [`crate::cache::projection::pod::AFFINITY`]).
fn affinity(buf: &[u8]) -> Result<core::Affinity> {
    let mut a = core::Affinity::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        if n == 1 {
            a.node_affinity = Some(node_affinity(bytes(v, "affinity.nodeAffinity")?)?);
        }
    }
    Ok(a)
}

fn node_affinity(buf: &[u8]) -> Result<core::NodeAffinity> {
    let mut na = core::NodeAffinity::default();
    let mut preferred = Vec::new();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => {
                na.required_during_scheduling_ignored_during_execution =
                    Some(node_selector(bytes(v, "nodeAffinity.required")?)?)
            }
            2 => preferred.push(preferred_term(bytes(v, "nodeAffinity.preferred")?)?),
            _ => {}
        }
    }
    na.preferred_during_scheduling_ignored_during_execution = non_empty_vec(preferred);
    Ok(na)
}

fn node_selector(buf: &[u8]) -> Result<core::NodeSelector> {
    let mut terms = Vec::new();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        if n == 1 {
            terms.push(node_selector_term(bytes(v, "nodeSelector.terms")?)?);
        }
    }
    Ok(core::NodeSelector {
        node_selector_terms: terms,
    })
}

fn preferred_term(buf: &[u8]) -> Result<core::PreferredSchedulingTerm> {
    let mut p = core::PreferredSchedulingTerm::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => p.weight = int32(v, "preferred.weight")?,
            2 => p.preference = node_selector_term(bytes(v, "preferred.preference")?)?,
            _ => {}
        }
    }
    Ok(p)
}

fn pod_spec(buf: &[u8]) -> Result<cached::PodSpec> {
    let mut s = cached::PodSpec::default();
    let mut volumes = Vec::new();
    let mut init = Vec::new();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => volumes.push(volume(bytes(v, "spec.volumes")?)?),
            2 => s.containers.push(container(bytes(v, "spec.containers")?)?),
            3 => s.restart_policy = non_empty(string(v, "spec.restartPolicy")?),
            10 => s.node_name = non_empty(string(v, "spec.nodeName")?),
            16 => s.hostname = non_empty(string(v, "spec.hostname")?),
            17 => s.subdomain = non_empty(string(v, "spec.subdomain")?),
            18 => s.affinity = Some(Box::new(affinity(bytes(v, "spec.affinity")?)?)),
            20 => init.push(container(bytes(v, "spec.initContainers")?)?),
            _ => {}
        }
    }
    s.containers.shrink_to_fit();
    s.volumes = non_empty_vec(volumes);
    s.init_containers = non_empty_vec(init);
    Ok(s)
}

fn pod_condition(buf: &[u8]) -> Result<cached::PodCondition> {
    let mut c = cached::PodCondition::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => c.type_ = string(v, "condition.type")?,
            2 => c.status = string(v, "condition.status")?,
            4 => c.last_transition_time = time(v, "condition.lastTransitionTime")?,
            5 => c.reason = non_empty(string(v, "condition.reason")?),
            6 => c.message = non_empty(string(v, "condition.message")?),
            _ => {}
        }
    }
    Ok(c)
}

fn container_status(buf: &[u8]) -> Result<cached::ContainerStatus> {
    let mut c = cached::ContainerStatus::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => c.name = string(v, "containerStatus.name")?,
            2 => c.state = Some(container_state(bytes(v, "containerStatus.state")?)?),
            5 => c.restart_count = int32(v, "containerStatus.restartCount")?,
            _ => {}
        }
    }
    Ok(c)
}

/// `ContainerState`: whether and how it terminated.
fn container_state(buf: &[u8]) -> Result<cached::ContainerState> {
    let mut state = cached::ContainerState::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        if n == 3 {
            state.terminated = Some(terminated(bytes(v, "state.terminated")?)?);
        }
    }
    Ok(state)
}

fn terminated(buf: &[u8]) -> Result<cached::ContainerStateTerminated> {
    let mut t = cached::ContainerStateTerminated::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => t.exit_code = int32(v, "terminated.exitCode")?,
            6 => t.finished_at = time(v, "terminated.finishedAt")?,
            _ => {}
        }
    }
    Ok(t)
}

fn pod_status(buf: &[u8]) -> Result<cached::PodStatus> {
    let mut s = cached::PodStatus::default();
    let mut conditions = Vec::new();
    let mut statuses = Vec::new();
    let mut init = Vec::new();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => s.phase = non_empty(string(v, "status.phase")?),
            2 => conditions.push(pod_condition(bytes(v, "status.conditions")?)?),
            4 => s.reason = non_empty(string(v, "status.reason")?),
            7 => s.start_time = time(v, "status.startTime")?,
            8 => statuses.push(container_status(bytes(v, "status.containerStatuses")?)?),
            10 => init.push(container_status(bytes(v, "status.initContainerStatuses")?)?),
            _ => {}
        }
    }
    s.conditions = non_empty_vec(conditions);
    s.container_statuses = non_empty_vec(statuses);
    s.init_container_statuses = non_empty_vec(init);
    Ok(s)
}

/// A `core/v1` `Pod` message (without envelope) as the cache keeps it.
pub fn pod(buf: &[u8]) -> Result<cached::Pod> {
    let mut p = cached::Pod::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => p.metadata = object_meta(bytes(v, "pod.metadata")?)?,
            2 => p.spec = Some(pod_spec(bytes(v, "pod.spec")?)?),
            3 => p.status = Some(pod_status(bytes(v, "pod.status")?)?),
            _ => {}
        }
    }
    Ok(p)
}

fn taint(buf: &[u8]) -> Result<core::Taint> {
    let mut t = core::Taint::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => t.key = string(v, "taint.key")?,
            2 => t.value = non_empty(string(v, "taint.value")?),
            3 => t.effect = string(v, "taint.effect")?,
            4 => t.time_added = time(v, "taint.timeAdded")?,
            _ => {}
        }
    }
    Ok(t)
}

/// A `core/v1` `Node` message (without envelope) as the cache keeps it.
pub fn node(buf: &[u8]) -> Result<cached::Node> {
    let mut node = cached::Node::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => {
                node.metadata = object_meta(bytes(v, "node.metadata")?)?;
                // As the JSON decoder: a node's annotations are not kept (`cached::Node`).
                node.metadata.annotations = None;
            }
            2 => node.spec = Some(node_spec(bytes(v, "node.spec")?)?),
            3 => node.status = Some(node_status(bytes(v, "node.status")?)?),
            _ => {}
        }
    }
    Ok(node)
}

fn node_spec(buf: &[u8]) -> Result<cached::NodeSpec> {
    let mut spec = cached::NodeSpec::default();
    let mut taints = Vec::new();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            4 => spec.unschedulable = Some(boolean(v, "spec.unschedulable")?).filter(|u| *u),
            5 => taints.push(taint(bytes(v, "spec.taints")?)?),
            _ => {}
        }
    }
    spec.taints = non_empty_vec(taints);
    Ok(spec)
}

fn node_status(buf: &[u8]) -> Result<cached::NodeStatus> {
    let mut conditions = Vec::new();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        if n == 4 {
            conditions.push(node_condition(bytes(v, "status.conditions")?)?);
        }
    }
    Ok(cached::NodeStatus {
        conditions: non_empty_vec(conditions),
    })
}

fn node_condition(buf: &[u8]) -> Result<cached::NodeCondition> {
    let mut c = cached::NodeCondition::default();
    let mut f = Fields::new(buf);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => c.type_ = string(v, "condition.type")?,
            2 => c.status = string(v, "condition.status")?,
            _ => {}
        }
    }
    Ok(c)
}
