//! Deleting a Job through `batch/v1` without a propagation policy (27): the API server's
//! default for Jobs is to orphan the pods, the plane's garbage collector (upstream's, it runs
//! on the local plane) takes the owner references off, and the Job controller then removes the
//! tracking finalizer from the pods that survive.

use anyhow::Result;
use kube::api::DeleteParams;
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    orphan_default_deletion_releases_surviving_pods, "job-orphaning", orphaning; start = start
}

async fn orphaning(env: &Env) -> Result<()> {
    let uid = env
        .start_job("orph", json!({"completions": 2, "parallelism": 2}), true)
        .await?;
    let pods = env.wait_active_within(&uid, 2, WITHIN).await?;
    for p in &pods {
        env.cluster
            .set_pod_phase(env.name(), &name_of(p), "Running", true)
            .await?;
    }
    wait_job(env, "orph", "active=2 ready=2", WITHIN, |j| {
        status(j).active == Some(2) && status(j).ready == Some(2)
    })
    .await?;
    // No propagation policy: batch/v1 Jobs default to orphaning their pods.
    env.jobs().delete("orph", &DeleteParams::default()).await?;
    rkcm_testkit::wait_for("the Job gone", WITHIN, || async {
        Ok(env.jobs().get_opt("orph").await?.is_none().then_some(()))
    })
    .await?;
    for p in &pods {
        let name = name_of(p);
        env.wait_pod(
            &name,
            "orphaned without the tracking finalizer",
            WITHIN,
            |p| {
                p.is_some_and(|p| {
                    p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .next()
                        .is_none()
                        && !has_tracking(p)
                        && is_active(p)
                })
            },
        )
        .await?;
    }
    Ok(())
}
