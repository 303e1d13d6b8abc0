//! Projections: what the shared caches keep of an object.
//!
//! A cached object is read by every controller that uses its informer and by nothing else,
//! so the cache keeps only the fields some of those controllers read. Each type that can be
//! trimmed ([`Projectable`]) splits its fields into:
//! - a base every projection keeps (all of `metadata` but `managedFields`, and the fields any
//!   controller of this process reads or may read);
//! - optional groups ([`Fields`]), kept only when a controller declares that it reads them
//!   ([`crate::cache::Informer::keep`]); the cache keeps the union of the declarations;
//! - the rest, which no controller reads and which is always dropped.
//!
//! An informer nobody declared anything for keeps whole objects, so a controller that uses a
//! type without declaring sees everything. A controller that declares must declare every
//! group it reads; each crate's tests run its decisions on projected fixtures to prove it.
//!
//! Objects from a projected cache must never be written back whole (PUT): the dropped
//! fields would be lost on the server. Writers patch, or re-read the object first.

use std::ops::BitOr;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::cached::Pod;

/// A set of optional field groups of one type (the groups are the type's constants, e.g.
/// [`pod::CONTAINER_STATUSES`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fields(u32);

impl Fields {
    /// The base fields only.
    pub const BASE: Fields = Fields(0);

    /// Whether every group of `other` is in `self`.
    pub const fn contains(self, other: Fields) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets.
    pub const fn union(self, other: Fields) -> Fields {
        Fields(self.0 | other.0)
    }
}

impl BitOr for Fields {
    type Output = Fields;
    fn bitor(self, rhs: Fields) -> Fields {
        self.union(rhs)
    }
}

/// A type the shared cache can trim.
pub trait Projectable {
    /// Drops everything but the base fields and the groups in `keep`.
    fn project(&mut self, keep: Fields);
}

/// `obj` (a k8s-openapi object, or the cached type itself) as a cache keeping the groups
/// `keep` holds it: decoded from its JSON into the cached type `K`, then trimmed. Controller
/// crates run their decision tables on such copies, with the groups they declare, so a
/// decision that reads a field the projection drops fails its table.
pub fn projected<K: Projectable + DeserializeOwned>(
    obj: &impl Serialize,
    keep: Fields,
) -> Result<K, serde_json::Error> {
    let mut copy: K = crate::cache::cached::from_full(obj)?;
    copy.project(keep);
    Ok(copy)
}

/// Pod field groups of [`crate::cache::cached::Pod`]. The base is every field of that type but the
/// groups (fields that type does not have are never decoded).
pub mod pod {
    use super::Fields;

    /// `status.{initContainer,container,ephemeralContainer}Statuses`, each with `name`,
    /// `ready`, `started`, `restartCount`, `state` and `lastState` (no image, IDs, resources,
    /// mounts or user). Read by the Job controller (pod failure policy, restart counts) and
    /// ReplicaSet ranking (restart counts).
    pub const CONTAINER_STATUSES: Fields = Fields(1);
    /// `spec.volumes` that use a claim, each with its `name` and `persistentVolumeClaim`
    /// only. Read by the StatefulSet controller (storage checks, to which a volume of
    /// another kind counts as no volume).
    pub const VOLUME_CLAIMS: Fields = Fields(1 << 1);
    /// `spec.affinity.nodeAffinity` (pod affinities are never kept). Read by the DaemonSet
    /// controller (the node a daemon pod targets).
    pub const AFFINITY: Fields = Fields(1 << 2);
    /// Every group.
    pub const ALL: Fields = CONTAINER_STATUSES.union(VOLUME_CLAIMS).union(AFFINITY);
}

/// Job field groups. The base is the whole Job (no `managedFields`) but `spec.template`.
pub mod job {
    use super::Fields;

    /// `spec.template`. Read by the Job controller (it creates the pods, and writes the Job's
    /// status back whole); the CronJob and TTL-after-finished controllers do not read it.
    pub const TEMPLATE: Fields = Fields(1);
}

impl Projectable for Job {
    fn project(&mut self, keep: Fields) {
        self.metadata.managed_fields = None;
        if !keep.contains(job::TEMPLATE)
            && let Some(spec) = self.spec.as_mut()
        {
            spec.template = PodTemplateSpec::default();
        }
    }
}

impl Projectable for Pod {
    fn project(&mut self, keep: Fields) {
        self.metadata.managed_fields = None;
        if let Some(spec) = self.spec.as_mut() {
            // Only claim volumes stay (another kind of volume decodes to a name alone).
            spec.volumes = match spec.volumes.take() {
                Some(volumes) if keep.contains(pod::VOLUME_CLAIMS) => {
                    let claims: Vec<_> = volumes
                        .into_iter()
                        .filter(|v| v.persistent_volume_claim.is_some())
                        .collect();
                    (!claims.is_empty()).then_some(claims)
                }
                _ => None,
            };
            // Of the affinity, only the node affinity is read.
            if let Some(affinity) = spec.affinity.as_mut() {
                affinity.pod_affinity = None;
                affinity.pod_anti_affinity = None;
            }
            if !keep.contains(pod::AFFINITY)
                || spec
                    .affinity
                    .as_ref()
                    .is_some_and(|a| a.node_affinity.is_none())
            {
                spec.affinity = None;
            }
        }
        if let Some(status) = self.status.as_mut()
            && !keep.contains(pod::CONTAINER_STATUSES)
        {
            status.container_statuses = None;
            status.init_container_statuses = None;
        }
        shrink(self);
    }
}

/// Frees the spare capacity of `pod`'s lists: a list decoded from JSON grew by doubling, and
/// the cache keeps it as long as the pod.
fn shrink(pod: &mut Pod) {
    fn fit<T>(list: &mut Option<Vec<T>>) {
        if let Some(l) = list.as_mut() {
            l.shrink_to_fit();
        }
    }
    fit(&mut pod.metadata.owner_references);
    fit(&mut pod.metadata.finalizers);
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.shrink_to_fit();
        fit(&mut spec.init_containers);
        fit(&mut spec.volumes);
    }
    if let Some(status) = pod.status.as_mut() {
        fit(&mut status.conditions);
        fit(&mut status.container_statuses);
        fit(&mut status.init_container_statuses);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::cached::Container;

    fn pod() -> Pod {
        serde_json::from_value(crate::cache::cached::tests::wire_pod()).expect("valid pod")
    }

    #[test]
    fn base_keeps_metadata_scheduling_and_phase() {
        let mut p = pod();
        p.project(Fields::BASE);
        assert_eq!(p.metadata.managed_fields, None);
        assert_eq!(p.metadata.labels.as_ref().map(|l| l.len()), Some(1));
        let spec = p.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(
            spec.containers,
            vec![Container {
                name: "c".into(),
                ..Container::default()
            }]
        );
        let init = spec.init_containers.as_ref().expect("init containers");
        assert_eq!(init[0].restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.volumes, None);
        assert_eq!(spec.affinity, None);
        let status = p.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
        assert_eq!(status.container_statuses, None);
    }

    #[test]
    fn groups_keep_what_they_name() {
        let mut p = pod();
        p.project(pod::ALL);
        let spec = p.spec.as_ref().expect("spec");
        assert!(spec.affinity.is_some());
        let volumes = spec.volumes.as_ref().expect("volumes");
        assert_eq!(volumes.len(), 1, "claim volumes only");
        assert_eq!(volumes[0].name, "data");
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("data-p")
        );
        let statuses = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .expect("statuses");
        assert_eq!(statuses[0].restart_count, 3);
        let terminated = statuses[0]
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!(terminated.exit_code, 2);
    }

    #[test]
    fn a_projected_pod_keeps_no_spare_list_capacity() {
        let conditions: Vec<_> = [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        ]
        .iter()
        .map(|t| serde_json::json!({"type": t, "status": "True"}))
        .collect();
        // Decoded from bytes, as a watch's are (a `Value` would tell the decoder each length).
        let wire = serde_json::json!({
            "metadata": {"name": "p", "finalizers": ["a", "b", "c"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "o", "uid": "u"}]},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
            "status": {"conditions": conditions,
                "containerStatuses": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
        });
        let mut p: Pod = serde_json::from_str(&wire.to_string()).expect("valid pod");
        p.project(pod::ALL);
        let fits = |len: usize, cap: usize| (len, cap);
        let meta = &p.metadata;
        let owners = meta.owner_references.as_ref().expect("owners");
        let finalizers = meta.finalizers.as_ref().expect("finalizers");
        let containers = &p.spec.as_ref().expect("spec").containers;
        let status = p.status.as_ref().expect("status");
        let conds = status.conditions.as_ref().expect("conditions");
        let statuses = status.container_statuses.as_ref().expect("statuses");
        assert_eq!(fits(owners.len(), owners.capacity()), (1, 1));
        assert_eq!(fits(finalizers.len(), finalizers.capacity()), (3, 3));
        assert_eq!(fits(containers.len(), containers.capacity()), (3, 3));
        assert_eq!(fits(conds.len(), conds.capacity()), (5, 5));
        assert_eq!(fits(statuses.len(), statuses.capacity()), (3, 3));
    }

    #[test]
    fn job_base_drops_only_the_template() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"ttlSecondsAfterFinished": 5, "template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"succeeded": 1}
        }))
        .expect("valid job");
        let base: Job = projected(&job, Fields::BASE).expect("a job reads back");
        let spec = base.spec.as_ref().expect("spec");
        assert_eq!(spec.template, PodTemplateSpec::default());
        assert_eq!(spec.ttl_seconds_after_finished, Some(5));
        assert_eq!(base.status, job.status);
        assert_eq!(
            projected::<Job>(&job, job::TEMPLATE).expect("a job reads back"),
            job
        );
    }

    #[test]
    fn fields_form_a_set() {
        assert!(pod::ALL.contains(pod::AFFINITY));
        assert!(!pod::CONTAINER_STATUSES.contains(pod::AFFINITY));
        assert!(Fields::BASE.contains(Fields::BASE));
        assert_eq!(
            pod::CONTAINER_STATUSES | pod::VOLUME_CLAIMS | pod::AFFINITY,
            pod::ALL
        );
    }
}
