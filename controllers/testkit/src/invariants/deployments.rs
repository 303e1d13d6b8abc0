//! The checks on ReplicaSets and Deployments: surge bounds within the grace window.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::Checker;
use super::Suspect;
use super::objects::{controller_of, key_of, max_surge};

impl Checker {
    pub(super) fn apply_rs(&mut self, at: Timestamp, rs: ReplicaSet) {
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let replicas = i64::from(rs.spec.replicas.unwrap_or(1));
        let hist = self.rs_replicas.entry(uid.clone()).or_default();
        let before = hist.last().map(|(_, v)| *v);
        if before != Some(replicas) {
            hist.push((at, replicas));
        }
        // Only a scale-up (or a new ReplicaSet) can break the bound: a Deployment scaled down
        // is above it until its controller acts, which may take a while (a failover).
        let raised = replicas > before.unwrap_or(0);
        let owner = controller_of(&rs.metadata)
            .filter(|c| c.0 == "Deployment")
            .map(|c| c.2.to_owned());
        self.replicasets.insert(uid, rs);
        if let Some(d) = owner.filter(|_| raised) {
            self.check_deployment(at, &d);
        }
    }

    pub(super) fn apply_deployment(&mut self, at: Timestamp, d: Deployment) {
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let replicas = i64::from(d.spec.replicas.unwrap_or(1));
        let bound = replicas + max_surge(&d);
        let hist = self.deploy_bound.entry(uid.clone()).or_default();
        if hist.last().map(|(_, v)| *v) != Some(bound) {
            hist.push((at, bound));
        }
        self.deployments.insert(uid, d);
    }

    fn check_deployment(&mut self, at: Timestamp, uid: &str) {
        let sum: i64 = self
            .replicasets
            .values()
            .filter(|rs| controller_of(&rs.metadata).map(|c| c.2) == Some(uid))
            .map(|rs| i64::from(rs.spec.replicas.unwrap_or(1)))
            .sum();
        let name = self
            .deployments
            .get(uid)
            .map(|d| key_of(&d.metadata))
            .unwrap_or_default();
        self.suspects.push(Suspect::Deployment {
            at,
            deployment: name,
            key: uid.to_owned(),
            sum,
        });
    }
}
