//! The bench's writes to the run's objects: creates, merge patches and deletions, retried
//! while the plane is busy; an object already there (create) or gone (delete) is fine.

use anyhow::Context;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::Value;

use super::mix::{Kind, Workload};
use crate::k8s;

/// Creates the object of `w` in `ns`.
pub async fn create(client: &Client, ns: &str, w: &Workload, obj: Value) -> anyhow::Result<()> {
    async fn post<K: k8s::Namespaced + serde::Serialize>(
        client: &Client,
        ns: &str,
        obj: Value,
    ) -> anyhow::Result<()> {
        let api: Api<K> = Api::namespaced(client.clone(), ns);
        let obj: K = serde_json::from_value(obj)?;
        let pp = PostParams::default();
        match k8s::retry(|| api.create(&pp, &obj)).await {
            Ok(_) => Ok(()),
            Err(e) if k8s::is_status(&e, 409) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
    match w.kind {
        Kind::Deployment => post::<Deployment>(client, ns, obj).await,
        Kind::StatefulSet => post::<StatefulSet>(client, ns, obj).await,
        Kind::DaemonSet => post::<DaemonSet>(client, ns, obj).await,
        Kind::Job => post::<Job>(client, ns, obj).await,
        Kind::CronJob => post::<CronJob>(client, ns, obj).await,
    }
    .with_context(|| format!("creating {:?} {ns}/{}", w.kind, w.name))
}

/// Merge-patches the object of `w` in `ns`.
pub async fn patch(client: &Client, ns: &str, w: &Workload, body: Value) -> anyhow::Result<()> {
    async fn merge<K: k8s::Namespaced + serde::Serialize>(
        client: &Client,
        ns: &str,
        name: &str,
        body: &Value,
    ) -> anyhow::Result<()> {
        let api: Api<K> = Api::namespaced(client.clone(), ns);
        let pp = PatchParams::default();
        let patch = Patch::Merge(body);
        k8s::retry(|| api.patch(name, &pp, &patch))
            .await
            .map(drop)
            .map_err(Into::into)
    }
    match w.kind {
        Kind::Deployment => merge::<Deployment>(client, ns, &w.name, &body).await,
        Kind::StatefulSet => merge::<StatefulSet>(client, ns, &w.name, &body).await,
        Kind::DaemonSet => merge::<DaemonSet>(client, ns, &w.name, &body).await,
        Kind::Job | Kind::CronJob => anyhow::bail!("the run does not patch {:?}s", w.kind),
    }
    .with_context(|| format!("patching {:?} {ns}/{}", w.kind, w.name))
}

/// Deletes the Job or CronJob of `w` (background propagation: no garbage collector runs).
pub async fn delete(client: &Client, ns: &str, w: &Workload) -> anyhow::Result<()> {
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    let r = match w.kind {
        Kind::Job => {
            let api: Api<Job> = Api::namespaced(client.clone(), ns);
            k8s::retry(|| api.delete(&w.name, &dp)).await.map(drop)
        }
        Kind::CronJob => {
            let api: Api<CronJob> = Api::namespaced(client.clone(), ns);
            k8s::retry(|| api.delete(&w.name, &dp)).await.map(drop)
        }
        _ => anyhow::bail!("the run does not delete {:?}s", w.kind),
    };
    match r {
        Ok(()) => Ok(()),
        Err(e) if k8s::is_status(&e, 404) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting {:?} {ns}/{}", w.kind, w.name)),
    }
}
