//! Nothing keyed by a deleted object stays behind. The rkcm binary, with every controller on,
//! runs a workload of every kind (a Deployment rolled once, a ReplicaSet, a
//! ReplicationController, a StatefulSet, a DaemonSet, an Indexed Job, a Job that fails once, a
//! Job with `ttlSecondsAfterFinished: 0`, a CronJob that runs a Job); then the test deletes them
//! all and reads `rkcm_tracked_entries` from `/metrics` until every map that forgets with its
//! objects (`bound="object"`: expectations, last status written, status pacing, stale-cache
//! records, backoff records, work-queue retries, ...) is empty again. A map that kept one
//! entry per deleted object would grow for as long as the process runs.
//!
//! The maps that forget by time (delayed work-queue keys, the DaemonSet's failed-pod backoff)
//! or by capacity (the event correlation caches) are printed, not judged.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::{DeleteParams, ListParams};
use rkcm_testkit::harness::{
    Env, JobPodRunner, Object, describe_status, job_complete, kwok_template, merge_json,
};
use rkcm_testkit::scrape::{tracked_entries as tracked, tracked_nonzero as nonzero};
use rkcm_testkit::wait_for;
use serde_json::json;

use crate::job_takeover::job_manifest;
use crate::rollout::{deployment_manifest, wait_default_service_account};
use crate::serve::Rkcm;
use crate::statefulset_takeover::sts_manifest;

fn daemonset(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": kwok_template(name, "registry.example/agent:v1"),
        },
    })
}

fn replicated(kind: &str, api_version: &str, name: &str, replicas: i32) -> serde_json::Value {
    let mut d = deployment_manifest(name, replicas, "registry.example/web:v1", json!({}));
    d["apiVersion"] = json!(api_version);
    d["kind"] = json!(kind);
    if kind == "ReplicationController" {
        d["spec"]["selector"] = json!({"app": name});
    }
    d
}

/// Waits until `what` holds for object `name`, up to a minute.
async fn settled<K: Object>(
    env: &Env,
    name: &str,
    what: &str,
    check: impl Fn(&K) -> bool,
) -> anyhow::Result<()> {
    env.wait_object(name, what, Duration::from_secs(60), check, describe_status)
        .await
        .map(|_| ())
}

async fn run_workloads(env: &Env) -> anyhow::Result<()> {
    // Deployment: created, available, then rolled once (two ReplicaSets, pods of both).
    env.create::<Deployment>(deployment_manifest(
        "web",
        3,
        "registry.example/web:v1",
        json!({}),
    ))
    .await?;
    env.create::<ReplicaSet>(replicated("ReplicaSet", "apps/v1", "rs", 2))
        .await?;
    env.create::<ReplicationController>(replicated("ReplicationController", "v1", "rc", 1))
        .await?;
    env.create::<StatefulSet>(sts_manifest(
        "db",
        2,
        "registry.example/db:v1",
        json!({"podManagementPolicy": "Parallel"}),
    ))
    .await?;
    env.create::<DaemonSet>(daemonset("agent")).await?;
    env.create::<Job>(job_manifest("idx", true, 4, 2)).await?;
    env.create::<Job>(job_manifest("flaky", false, 1, 1))
        .await?;
    let mut ttl = job_manifest("ttl", false, 1, 1);
    merge_json(&mut ttl, &json!({"spec": {"ttlSecondsAfterFinished": 0}}));
    env.create::<Job>(ttl).await?;
    // A CronJob due at once: created suspended, its last schedule set five minutes back,
    // then resumed, so the missed minute runs now instead of at the next minute's start.
    let mut template = job_manifest("unused", false, 1, 1);
    let job_spec = template["spec"].take();
    env.create::<CronJob>(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "*/1 * * * *",
            "suspend": true,
            "jobTemplate": {"spec": job_spec},
        },
    }))
    .await?;
    let back = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(300);
    env.status_patch::<CronJob>(
        "tick",
        json!({"lastScheduleTime": back.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}),
    )
    .await?;
    env.merge::<CronJob>("tick", json!({"spec": {"suspend": false}}))
        .await?;

    settled::<Deployment>(env, "web", "available", |d| {
        d.status.as_ref().and_then(|s| s.available_replicas) == Some(3)
    })
    .await?;
    env.strategic::<Deployment>(
        "web",
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "registry.example/web:v2"}]}}}}),
    )
    .await?;
    settled::<Deployment>(env, "web", "rolled out", |d| {
        let s = d.status.clone().unwrap_or_default();
        s.observed_generation == d.metadata.generation
            && s.updated_replicas == Some(3)
            && s.available_replicas == Some(3)
            && s.replicas == Some(3)
    })
    .await?;
    settled::<ReplicaSet>(env, "rs", "ready", |r| {
        r.status.as_ref().and_then(|s| s.ready_replicas) == Some(2)
    })
    .await?;
    settled::<ReplicationController>(env, "rc", "ready", |r| {
        r.status.as_ref().and_then(|s| s.ready_replicas) == Some(1)
    })
    .await?;
    settled::<StatefulSet>(env, "db", "ready", |s| {
        s.status.as_ref().and_then(|s| s.ready_replicas) == Some(2)
    })
    .await?;
    settled::<DaemonSet>(env, "agent", "every node ready", |d| {
        d.status.as_ref().is_some_and(|s| {
            s.desired_number_scheduled > 0 && s.number_ready == s.desired_number_scheduled
        })
    })
    .await?;
    for name in ["idx", "flaky"] {
        settled::<Job>(env, name, "complete", job_complete).await?;
    }
    settled::<CronJob>(env, "tick", "a successful run", |c| {
        c.status
            .as_ref()
            .is_some_and(|s| s.last_successful_time.is_some())
    })
    .await?;
    wait_for(
        "the finished ttl Job deleted",
        Duration::from_secs(60),
        || async { Ok(env.get_opt::<Job>("ttl").await?.is_none().then_some(())) },
    )
    .await?;
    Ok(())
}

/// Deletes every workload object of the namespace (their pods go with them: background
/// propagation, the plane's garbage collector).
async fn delete_workloads(env: &Env) -> anyhow::Result<()> {
    let dp = DeleteParams::background();
    let lp = ListParams::default();
    env.api::<CronJob>().delete_collection(&dp, &lp).await?;
    env.api::<Deployment>().delete_collection(&dp, &lp).await?;
    env.api::<ReplicaSet>().delete_collection(&dp, &lp).await?;
    env.api::<ReplicationController>()
        .delete_collection(&dp, &lp)
        .await?;
    env.api::<StatefulSet>().delete_collection(&dp, &lp).await?;
    env.api::<DaemonSet>().delete_collection(&dp, &lp).await?;
    env.api::<Job>().delete_collection(&dp, &lp).await?;
    Ok(())
}

async fn run(env: &Env, rkcm: &Rkcm) -> anyhow::Result<()> {
    run_workloads(env).await.context("running the workloads")?;

    // The maps hold the live objects now (a test that deletes nothing from them proves
    // nothing).
    let before = tracked(&rkcm.metrics().await?);
    let held = nonzero(&before, "object");
    println!("tracked maps with the workloads running: {held:?}");
    for (controller, map) in [
        ("replicaset-controller", "expectations"),
        ("replicationcontroller-controller", "expectations"),
        ("statefulset-controller", "expectations"),
        ("daemonset-controller", "expectations"),
        ("job-controller", "expectations"),
        ("deployment-controller", "status_pacing"),
    ] {
        let key = (controller.to_owned(), map.to_owned(), "object".to_owned());
        let n = before.get(&key).copied().unwrap_or_default();
        anyhow::ensure!(
            n > 0.0,
            "{controller}/{map} holds no entry while its objects exist: {held:?}"
        );
    }

    delete_workloads(env).await?;
    wait_for("no workload pod left", Duration::from_secs(60), || async {
        Ok(env.list::<Pod>().await?.is_empty().then_some(()))
    })
    .await?;
    wait_for(
        "every map keyed by objects empty once they are deleted",
        Duration::from_secs(60),
        || async {
            let left = nonzero(&tracked(&rkcm.metrics().await?), "object");
            if left.is_empty() {
                Ok(Some(()))
            } else {
                Err(anyhow!("still held: {left:?}"))
            }
        },
    )
    .await?;
    let after = tracked(&rkcm.metrics().await?);
    println!(
        "after the deletions: by time {:?}, by capacity {:?}",
        nonzero(&after, "time"),
        nonzero(&after, "capacity")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn maps_keyed_by_objects_empty_once_the_objects_are_deleted() -> anyhow::Result<()> {
    let env = Env::new("rkcm-forget").await?;
    let result = async {
        wait_default_service_account(&env.ns).await?;
        // The test plays the kubelet for Job pods; the first pod of `flaky` fails.
        let failed_once = Arc::new(AtomicBool::new(false));
        let _runner = JobPodRunner::start(&env, Duration::from_secs(1), move |pod: &Pod| {
            let flaky = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .is_some_and(|a| a == "flaky");
            Some(i32::from(
                flaky && !failed_once.swap(true, Ordering::SeqCst),
            ))
        })
        .await?;
        let rkcm = Rkcm::spawn_scoped(
            "forget",
            &env.cluster,
            env.name(),
            &["--leader-elect=false".to_owned()],
        )
        .await?;
        rkcm.wait_serving().await?;
        run(&env, &rkcm).await
    }
    .await;
    env.finish(result).await
}
