//! A CronJob running real containers: `* * * * *` with `concurrencyPolicy: Forbid` and a
//! job whose container runs 75 s. At the next minute the first job's container still runs:
//! no second Job, a `JobAlreadyActive` event. When the container ends and its Job
//! completes, the skipped minute runs at once (upstream's late start), not a minute later.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::harness::controller_uid;
use rkcm_testkit::wait_for;
use serde_json::json;

use super::{BUSYBOX, START, Tier, real_template, shell, wait_running};

fn cronjob() -> serde_json::Value {
    json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {
                "backoffLimit": 0,
                "template": real_template(
                    json!({"app": "tick"}),
                    json!([shell("main", BUSYBOX, "sleep 75")]),
                    json!({"restartPolicy": "Never"}),
                ),
            }},
        },
    })
}

/// The scheduled minute a CronJob's Job is named for (`<cronjob>-<minutes since epoch>`).
fn minute_of(job: &Job) -> anyhow::Result<i64> {
    let name = job.metadata.name.as_deref().unwrap_or_default();
    name.rsplit('-')
        .next()
        .and_then(|m| m.parse().ok())
        .with_context(|| format!("job name {name} has no scheduled minute"))
}

fn completed_at(job: &Job) -> Option<jiff::Timestamp> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Complete" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

async fn scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let env = &t.env;
    env.create::<CronJob>(cronjob()).await?;
    let first = wait_for("the first Job", Duration::from_secs(90), || async {
        let jobs: Vec<Job> = env.list().await?;
        Ok(jobs.into_iter().next())
    })
    .await?;
    let first_minute = minute_of(&first)?;
    let first_uid = first.metadata.uid.clone().unwrap_or_default();
    let pod = wait_for("the first Job's pod", START, || async {
        let pods: Vec<Pod> = env.list().await?;
        Ok(pods
            .into_iter()
            .find(|p| controller_uid(p) == Some(first_uid.as_str())))
    })
    .await?;
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let (_, node, id) = wait_running(env, &t.nodes, &pod_name, false).await?;

    // The next minute comes while the container runs: Forbid holds.
    let held = wait_for(
        "a JobAlreadyActive event",
        Duration::from_secs(90),
        || async {
            let events = env
                .events_by_reason("CronJob", "tick", "cronjob-controller", "JobAlreadyActive")
                .await?;
            Ok(events.into_iter().next())
        },
    )
    .await?;
    ensure!(
        held.message.as_deref()
            == Some(
                "Not starting job because prior execution is running and concurrency policy is Forbid"
            ),
        "JobAlreadyActive message: {:?}",
        held.message
    );
    let jobs: Vec<Job> = env.list().await?;
    ensure!(
        jobs.len() == 1 && t.nodes.container_running(&node, &id).await?,
        "at the next minute: {} Jobs (want 1), first container running: {}",
        jobs.len(),
        t.nodes.container_running(&node, &id).await?
    );

    // The container ends (75 s), the Job completes, and the skipped minute runs late.
    let second = wait_for("a second Job", Duration::from_secs(120), || async {
        let jobs: Vec<Job> = env.list().await?;
        Ok(jobs
            .into_iter()
            .find(|j| j.metadata.uid.as_deref() != Some(first_uid.as_str())))
    })
    .await?;
    let first_now: Job = env
        .get(first.metadata.name.as_deref().unwrap_or_default())
        .await?;
    let done =
        completed_at(&first_now).context("the second Job came before the first completed")?;
    let created = second
        .metadata
        .creation_timestamp
        .as_ref()
        .context("second Job without creationTimestamp")?
        .0;
    ensure!(
        created >= done,
        "the second Job was created at {created}, before the first completed at {done}"
    );
    let second_minute = minute_of(&second)?;
    ensure!(
        second_minute == first_minute + 1,
        "the second Job is for minute {second_minute}, want the skipped minute {}",
        first_minute + 1
    );
    ensure!(
        !t.nodes.container_running(&node, &id).await?,
        "the first container still runs after its Job completed"
    );
    let cj: CronJob = env.get("tick").await?;
    let s = cj.status.unwrap_or_default();
    ensure!(
        s.last_successful_time.is_some()
            && s.active
                .as_ref()
                .is_some_and(|a| a.len() == 1 && a[0].uid == second.metadata.uid),
        "CronJob status after the late start: {s:?}"
    );
    Ok(())
}

real_node_test!(
    real_nodes_cronjob_forbid_holds_while_a_container_runs,
    "rn-cron",
    "cronjob-controller,job-controller",
    scenario
);
