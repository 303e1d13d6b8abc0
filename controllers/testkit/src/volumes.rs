//! [`TestVolumes`]: pre-created `PersistentVolume`s for tests whose claims must bind
//! (StatefulSet volume claim templates).
//!
//! The plane runs no provisioner, but upstream kube-controller-manager's PV binder runs:
//! a claim naming a storage class binds to an available volume of that class. Each
//! [`TestVolumes`] uses a storage class of its own (`rkcm-test-<random>`), so its volumes
//! only ever bind claims of the test that asked for them. No `StorageClass` object is
//! needed: without one, binding is immediate. The volumes (cluster-scoped) are deleted when
//! the guard drops.

use std::path::PathBuf;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::cluster::{TestCluster, delete_blocking, keep, unique_name};

/// A set of volumes of one unique storage class; deleted when dropped.
pub struct TestVolumes {
    class: String,
    names: Vec<String>,
    client: kube::Client,
    kubeconfig: PathBuf,
}

impl TestVolumes {
    /// Creates `count` volumes of `size` (a quantity such as `"1Gi"`), `ReadWriteOnce`,
    /// `Retain`, all of one new storage class.
    pub async fn create(cluster: &TestCluster, count: usize, size: &str) -> Result<Self> {
        let class = unique_name("rkcm-test");
        let mut volumes = Self {
            class: class.clone(),
            names: Vec::new(),
            client: cluster.client(),
            kubeconfig: cluster.kubeconfig_path().to_path_buf(),
        };
        for i in 0..count {
            volumes.add(&format!("{class}-{i}"), size).await?;
        }
        Ok(volumes)
    }

    async fn add(&mut self, name: &str, size: &str) -> Result<()> {
        let pv: PersistentVolume = serde_json::from_value(volume(name, &self.class, size))?;
        Api::<PersistentVolume>::all(self.client.clone())
            .create(&PostParams::default(), &pv)
            .await
            .with_context(|| format!("creating PersistentVolume {name}"))?;
        self.names.push(name.to_owned());
        Ok(())
    }

    /// The storage class to name in claims (`spec.storageClassName`).
    pub fn storage_class(&self) -> &str {
        &self.class
    }

    /// The volumes' names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// A claim template for a StatefulSet's `volumeClaimTemplates`: `name`, `ReadWriteOnce`,
    /// requesting `size` of this storage class.
    pub fn claim_template(&self, name: &str, size: &str) -> Value {
        json!({
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": self.class,
                "resources": {"requests": {"storage": size}},
            },
        })
    }
}

/// A hostPath volume (never mounted: no kubelet) of `class`.
fn volume(name: &str, class: &str, size: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"rkcm.test/volume": "true"}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": class,
            "hostPath": {"path": format!("/tmp/rkcm-test-volumes/{name}")},
        },
    })
}

impl Drop for TestVolumes {
    fn drop(&mut self) {
        if keep() {
            return;
        }
        for name in &self.names {
            delete_blocking(name, &self.kubeconfig, |client, name| async move {
                Api::<PersistentVolume>::all(client)
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map(|_| ())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_are_of_their_class() {
        let pv: PersistentVolume =
            serde_json::from_value(volume("v-0", "rkcm-test-abc", "1Gi")).expect("valid PV");
        let spec = pv.spec.expect("spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("rkcm-test-abc"));
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
    }
}
