//! The one engine serves two kinds: `apps/v1` ReplicaSet and `core/v1` ReplicationController.
//!
//! Upstream converts each RC into a ReplicaSet on the way in and back on the way out
//! (`pkg/controller/replication/conversion.go`). rkcm instead reads both through
//! [`ReplicaOwner`], which exposes exactly what the engine uses, and a kind-neutral
//! [`ReplicaStatus`] that converts to and from each kind's status. The differences that
//! matter are constants of the trait: the queue name, event source, controller name, and
//! whether `status.terminatingReplicas` exists (never for RCs).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{
    PodTemplateSpec, ReplicationController, ReplicationControllerCondition,
    ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rkcm_runtime::cache::Informable;
use serde::Serialize;

use crate::consts;
use rkcm_runtime::workload::selector::{Selector, SelectorError};

/// A status condition in kind-neutral form (RS and RC conditions have the same fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition_time: Option<jiff::Timestamp>,
}

/// The status fields both kinds share, with Go's zero values for absent fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub replicas: i32,
    pub fully_labeled_replicas: i32,
    pub ready_replicas: i32,
    pub available_replicas: i32,
    /// Always `None` for RCs.
    pub terminating_replicas: Option<i32>,
    pub observed_generation: i64,
    pub conditions: Vec<Condition>,
}

/// What the engine reads from and writes to an owner of replicas.
pub trait ReplicaOwner:
    Informable + Serialize + kube::Resource<Scope = kube::core::NamespaceResourceScope>
{
    /// `--controllers` name.
    const CONTROLLER_NAME: &'static str;
    /// The kind in lower case, as error messages name it.
    const KIND: &'static str;
    /// Work queue name (metric label).
    const QUEUE_NAME: &'static str;
    /// `source.component` of events.
    const EVENT_COMPONENT: &'static str;
    /// Whether the kind has `status.terminatingReplicas` (ReplicaSet only).
    const HAS_TERMINATING_REPLICAS: bool;
    /// Whether the stale-cache guard applies (gate `StaleControllerConsistencyReplicaSet`
    /// names the ReplicaSet controller only; the RC controller never has it).
    const HAS_STALE_CACHE_GUARD: bool;

    /// The pod selector; an error makes the owner unusable until its spec changes.
    fn selector(&self) -> Result<Selector, SelectorError>;
    /// `spec.replicas` (API default 1).
    fn desired_replicas(&self) -> i32;
    fn min_ready_seconds(&self) -> i32;
    fn template(&self) -> Option<&PodTemplateSpec>;
    fn replica_status(&self) -> ReplicaStatus;
    /// A copy of `self` with its status replaced by `status`.
    fn with_status(&self, status: &ReplicaStatus) -> Self;

    /// `spec.template.metadata.labels`.
    fn template_labels(&self) -> Option<&BTreeMap<String, String>> {
        self.template()
            .and_then(rkcm_runtime::workload::pod::template_labels)
    }
}

fn to_time(t: Option<&Time>) -> Option<jiff::Timestamp> {
    t.map(|t| t.0)
}

impl ReplicaOwner for ReplicaSet {
    const CONTROLLER_NAME: &'static str = consts::RS_CONTROLLER_NAME;
    const KIND: &'static str = "replicaset";
    const QUEUE_NAME: &'static str = consts::RS_QUEUE_NAME;
    const EVENT_COMPONENT: &'static str = consts::RS_EVENT_COMPONENT;
    const HAS_TERMINATING_REPLICAS: bool = true;
    const HAS_STALE_CACHE_GUARD: bool = true;

    fn selector(&self) -> Result<Selector, SelectorError> {
        Selector::from_label_selector(&self.spec.selector)
    }
    fn desired_replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec.min_ready_seconds.unwrap_or(0)
    }
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.template.as_ref()
    }
    fn replica_status(&self) -> ReplicaStatus {
        let Some(s) = &self.status else {
            return ReplicaStatus::default();
        };
        ReplicaStatus {
            replicas: s.replicas,
            fully_labeled_replicas: s.fully_labeled_replicas.unwrap_or(0),
            ready_replicas: s.ready_replicas.unwrap_or(0),
            available_replicas: s.available_replicas.unwrap_or(0),
            terminating_replicas: s.terminating_replicas,
            observed_generation: s.observed_generation.unwrap_or(0),
            conditions: s
                .conditions
                .iter()
                .flatten()
                .map(|c| Condition {
                    type_: c.type_.clone().unwrap_or_default(),
                    status: c.status.clone().unwrap_or_default(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    last_transition_time: to_time(c.last_transition_time.as_ref()),
                })
                .collect(),
        }
    }
    fn with_status(&self, st: &ReplicaStatus) -> Self {
        let mut rs = self.clone();
        rs.status = Some(ReplicaSetStatus {
            replicas: st.replicas,
            fully_labeled_replicas: Some(st.fully_labeled_replicas),
            ready_replicas: Some(st.ready_replicas),
            available_replicas: Some(st.available_replicas),
            terminating_replicas: st.terminating_replicas,
            observed_generation: Some(st.observed_generation),
            conditions: (!st.conditions.is_empty()).then(|| {
                st.conditions
                    .iter()
                    .map(|c| ReplicaSetCondition {
                        type_: Some(c.type_.clone()),
                        status: Some(c.status.clone()),
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                        last_transition_time: c.last_transition_time.map(Time),
                    })
                    .collect()
            }),
        });
        rs
    }
}

impl ReplicaOwner for ReplicationController {
    const CONTROLLER_NAME: &'static str = consts::RC_CONTROLLER_NAME;
    const KIND: &'static str = "replicationcontroller";
    const QUEUE_NAME: &'static str = consts::RC_QUEUE_NAME;
    const EVENT_COMPONENT: &'static str = consts::RC_EVENT_COMPONENT;
    const HAS_TERMINATING_REPLICAS: bool = false;
    const HAS_STALE_CACHE_GUARD: bool = false;

    fn selector(&self) -> Result<Selector, SelectorError> {
        Ok(Selector::from_map(
            self.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .unwrap_or(&BTreeMap::new()),
        ))
    }
    fn desired_replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }
    fn replica_status(&self) -> ReplicaStatus {
        let Some(s) = &self.status else {
            return ReplicaStatus::default();
        };
        ReplicaStatus {
            replicas: s.replicas,
            fully_labeled_replicas: s.fully_labeled_replicas.unwrap_or(0),
            ready_replicas: s.ready_replicas.unwrap_or(0),
            available_replicas: s.available_replicas.unwrap_or(0),
            terminating_replicas: None,
            observed_generation: s.observed_generation.unwrap_or(0),
            conditions: s
                .conditions
                .iter()
                .flatten()
                .map(|c| Condition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    last_transition_time: to_time(c.last_transition_time.as_ref()),
                })
                .collect(),
        }
    }
    fn with_status(&self, st: &ReplicaStatus) -> Self {
        let mut rc = self.clone();
        rc.status = Some(ReplicationControllerStatus {
            replicas: st.replicas,
            fully_labeled_replicas: Some(st.fully_labeled_replicas),
            ready_replicas: Some(st.ready_replicas),
            available_replicas: Some(st.available_replicas),
            observed_generation: Some(st.observed_generation),
            conditions: (!st.conditions.is_empty()).then(|| {
                st.conditions
                    .iter()
                    .map(|c| ReplicationControllerCondition {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                        last_transition_time: c.last_transition_time.map(Time),
                    })
                    .collect()
            }),
        });
        rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::ReplicationControllerSpec;

    fn status() -> ReplicaStatus {
        ReplicaStatus {
            replicas: 3,
            fully_labeled_replicas: 2,
            ready_replicas: 1,
            available_replicas: 1,
            terminating_replicas: Some(2),
            observed_generation: 7,
            conditions: vec![Condition {
                type_: consts::CONDITION_REPLICA_FAILURE.into(),
                status: consts::CONDITION_TRUE.into(),
                reason: Some(consts::REASON_FAILED_CREATE.into()),
                message: Some("quota".into()),
                last_transition_time: Some(jiff::Timestamp::UNIX_EPOCH),
            }],
        }
    }

    #[test]
    fn replicaset_status_round_trips() {
        let rs = ReplicaSet::default().with_status(&status());
        assert_eq!(rs.replica_status(), status());
        assert_eq!(rs.desired_replicas(), 1, "API default");
    }

    #[test]
    fn rc_status_round_trips_without_terminating() {
        let rc = ReplicationController::default().with_status(&status());
        let back = rc.replica_status();
        assert_eq!(back.terminating_replicas, None);
        assert_eq!(
            back,
            ReplicaStatus {
                terminating_replicas: None,
                ..status()
            }
        );
        let json = serde_json::to_value(&rc).expect("serialises");
        assert!(json["status"].get("terminatingReplicas").is_none());
    }

    #[test]
    fn spec_accessors() {
        let rs = ReplicaSet {
            spec: ReplicaSetSpec {
                replicas: Some(4),
                min_ready_seconds: Some(10),
                ..ReplicaSetSpec::default()
            },
            ..ReplicaSet::default()
        };
        assert_eq!((rs.desired_replicas(), rs.min_ready_seconds()), (4, 10));
        let rc = ReplicationController {
            spec: Some(ReplicationControllerSpec {
                replicas: Some(0),
                selector: Some(BTreeMap::from([("app".into(), "rc".into())])),
                ..ReplicationControllerSpec::default()
            }),
            ..ReplicationController::default()
        };
        assert_eq!(rc.desired_replicas(), 0);
        let sel = rc.selector().expect("maps are always valid");
        assert!(sel.matches(Some(&BTreeMap::from([("app".into(), "rc".into())]))));
    }
}
