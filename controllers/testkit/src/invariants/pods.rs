//! The checks on pods: identity (no two live pods of one StatefulSet ordinal), deletions, and the
//! pods each Job's status is compared with.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;

use super::Checker;
use super::objects::{controller_of, is_live, key_of, node_of, phase};
use super::{COMPLETION_INDEX_ANNOTATION, Invariant, Suspect};

impl Checker {
    pub(super) fn apply_pod(&mut self, at: Timestamp, p: Pod, listed: bool) {
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let new = !self.pods.contains_key(&uid);
        self.record_job_pod(&p, false);
        if !node_of(&p).is_empty() && !self.bound_at.contains_key(&uid) {
            // Listed already bound: bound long ago as far as the checks go.
            let since = if listed {
                at - SignedDuration::from_hours(1)
            } else {
                at
            };
            self.bound_at.insert(uid.clone(), since);
        }
        if p.metadata.deletion_timestamp.is_some() && !self.first_grace.contains_key(&uid) {
            // Listed already terminating: how it started is unknown; assume gracefully.
            let grace = if listed {
                1
            } else {
                p.metadata.deletion_grace_period_seconds.unwrap_or(0)
            };
            self.first_grace.insert(uid.clone(), grace);
        }
        self.pods.insert(uid, p.clone());
        if !self.listing_pods() {
            self.check_identity(at, &p);
        }
        if new
            && !listed
            && is_live(&p)
            && let Some(("ReplicaSet", _, rs_uid)) = controller_of(&p.metadata)
        {
            let rs_uid = rs_uid.to_owned();
            let counted: Vec<String> = self
                .pods
                .values()
                .filter(|q| is_live(q) && controller_of(&q.metadata).map(|c| c.2) == Some(&rs_uid))
                .map(|q| q.metadata.name.clone().unwrap_or_default())
                .collect();
            let live = counted.len();
            let rs = self
                .replicasets
                .get(&rs_uid)
                .map(|r| key_of(&r.metadata))
                .unwrap_or_else(|| {
                    let ns = p.metadata.namespace.clone().unwrap_or_default();
                    format!(
                        "{ns}/{}",
                        controller_of(&p.metadata).map(|c| c.1).unwrap_or_default()
                    )
                });
            self.suspects.push(Suspect::ReplicaSet {
                at,
                rs,
                key: rs_uid,
                live: i64::try_from(live).unwrap_or(i64::MAX),
                pod: key_of(&p.metadata),
                counted,
            });
        }
    }

    /// Two existing pod objects (terminating ones included) with one StatefulSet identity.
    pub(super) fn check_identity(&mut self, at: Timestamp, p: &Pod) {
        let Some(("StatefulSet", set, _)) = controller_of(&p.metadata) else {
            return;
        };
        let name = p.metadata.name.as_deref().unwrap_or_default();
        let Some(ordinal) = name.strip_prefix(set).and_then(|s| s.strip_prefix('-')) else {
            return;
        };
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        let uid = p.metadata.uid.as_deref().unwrap_or_default();
        let others: Vec<String> = self
            .pods
            .values()
            .filter(|q| {
                q.metadata.uid.as_deref() != Some(uid)
                    && q.metadata.namespace.as_deref() == Some(ns)
                    && controller_of(&q.metadata)
                        .is_some_and(|c| c.0 == "StatefulSet" && c.1 == set)
                    && q.metadata
                        .name
                        .as_deref()
                        .and_then(|n| n.strip_prefix(set))
                        .and_then(|s| s.strip_prefix('-'))
                        == Some(ordinal)
            })
            .map(|q| {
                format!(
                    "{} (uid {}{})",
                    q.metadata.name.as_deref().unwrap_or_default(),
                    q.metadata.uid.as_deref().unwrap_or_default(),
                    if q.metadata.deletion_timestamp.is_some() {
                        ", terminating"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        if !others.is_empty() {
            self.violate(
                at,
                Invariant::StatefulSetIdentityShared,
                &format!("{ns}/{set}"),
                format!(
                    "ordinal {ordinal}: pod {name} (uid {uid}) exists together with {others:?}"
                ),
            );
        }
    }

    pub(super) fn record_job_pod(&mut self, p: &Pod, deleted: bool) {
        let Some(("Job", _, job_uid)) = controller_of(&p.metadata) else {
            return;
        };
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let e = self.job_pods.entry(job_uid.to_owned()).or_default();
        if phase(p) == "Succeeded" {
            if deleted || p.metadata.deletion_timestamp.is_some() {
                // A Job that fails counts every pod it still sees running as failed and
                // deletes it (upstream `trackJobStatusAndRemoveFinalizers`); on a lagging pod
                // cache that may be a pod that has just succeeded.
                e.ended.insert(uid.clone());
            }
            e.succeeded.insert(uid);
            let ix = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(COMPLETION_INDEX_ANNOTATION))
                .and_then(|v| v.parse().ok());
            if let Some(ix) = ix {
                e.succeeded_indexes.insert(ix);
            }
        } else if phase(p) == "Failed" || deleted || p.metadata.deletion_timestamp.is_some() {
            // An upper bound of what the Job may count as failed: pods that failed, and
            // pods removed before they succeeded.
            e.ended.insert(uid);
        }
    }
}
