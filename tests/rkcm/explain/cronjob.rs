//! CronJob: a CronJob of every minute with `concurrencyPolicy: Forbid`, whose Jobs never
//! finish (their pods fit no node). Before its first run and between runs it is settled with
//! the next schedule time (`NextScheduledRun`, naming the active Job once there is one); at
//! the next minute the due run is skipped (`ConcurrencyForbid`, naming the active Job, with
//! the run after it);
//! suspended, it is stalled (`Suspended`). Under rkcm and under upstream
//! kube-controller-manager. Up to two minutes: the first run waits for a minute to begin,
//! the skip for the next one.

use std::time::Duration;

use anyhow::bail;
use k8s_openapi::api::batch::v1::CronJob;
use rkcm_testkit::harness::{Env, kwok_template};
use rkcm_testkit::wait_for;
use serde_json::{Value, json};

use super::{has_remedy, message, objects, reasons, target, wait_explained, wait_until};

const CONTROLLERS: &str = "cronjob-controller,job-controller";
/// Up to one minute to the next run, and one sync after it.
const NEXT_MINUTE: Duration = Duration::from_secs(90);

/// The time of the next run in a `NextScheduledRun` message (`next run at T (in Ns), ...`).
fn next_run(e: &Value) -> Option<jiff::Timestamp> {
    message(e, "NextScheduledRun")
        .strip_prefix("next run at ")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Settled, with only the next run, `active` Jobs named.
fn between_runs(e: &Value, active: usize) -> bool {
    e["state"] == "settled"
        && e["actions"] == json!([])
        && reasons(e) == ["NextScheduledRun"]
        && objects(e, "NextScheduledRun").len() == active
}

async fn scenario(env: &Env) -> anyhow::Result<()> {
    // Created in the first 50 seconds of a minute, so that explain sees it before its
    // first run.
    wait_for("the first 50 seconds of a minute", NEXT_MINUTE, || async {
        Ok((jiff::Timestamp::now().as_second() % 60 < 50).then_some(()))
    })
    .await?;
    let mut template = kwok_template("tick", "registry.example/tick:v1");
    template["spec"]["nodeSelector"]["rkcm.test/no-such-node"] = json!("x");
    template["spec"]["restartPolicy"] = json!("Never");
    env.create::<CronJob>(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {"template": template}},
        },
    }))
    .await?;
    let cj = target(env, "cronjob", "tick");

    // Before the first run: settled, the next run at the start of a minute, within one.
    let e = wait_until(
        &env.cluster,
        &cj,
        &[],
        "settled before the first run",
        super::REACT,
        |e| between_runs(e, 0),
    )
    .await?;
    let now = jiff::Timestamp::now();
    let next = next_run(&e);
    let n = now.as_second();
    if !next.is_some_and(|t| {
        t.as_second() % 60 == 0 && t.as_second() + 2 > n && t.as_second() <= n + 60
    }) {
        bail!("next run of a CronJob of every minute: {e:#}");
    }

    // The first run: a Job that stays active.
    let e = wait_until(
        &env.cluster,
        &cj,
        &[],
        "settled with one active Job",
        NEXT_MINUTE,
        |e| between_runs(e, 1),
    )
    .await?;
    let job = objects(&e, "NextScheduledRun")
        .into_iter()
        .next()
        .unwrap_or_default();
    if !job.starts_with("Job/tick-") {
        bail!("the active Job: {e:#}");
    }

    // The next minute's run is skipped: the Job is still active.
    let e = wait_until(
        &env.cluster,
        &cj,
        &[],
        "waiting [\"ConcurrencyForbid\", \"NextScheduledRun\"]",
        NEXT_MINUTE,
        |e| e["state"] == "waiting" && reasons(e) == ["ConcurrencyForbid", "NextScheduledRun"],
    )
    .await?;
    let job_name = job.trim_start_matches("Job/");
    if objects(&e, "ConcurrencyForbid") != [job.clone()]
        || !message(&e, "ConcurrencyForbid").contains(&format!("{job} is still active"))
        || !has_remedy(
            &e,
            &format!("kubectl delete job -n {} {job_name}", env.name()),
        )
    {
        bail!("ConcurrencyForbid: {e:#}");
    }

    // Suspended: stalled, the active Job still named.
    env.merge::<CronJob>("tick", json!({"spec": {"suspend": true}}))
        .await?;
    let e = wait_explained(&env.cluster, &cj, "stalled", &["Suspended"]).await?;
    if objects(&e, "Suspended") != [job]
        || !has_remedy(
            &e,
            &format!("resume: kubectl patch cronjob tick -n {}", env.name()),
        )
    {
        bail!("Suspended: {e:#}");
    }
    Ok(())
}

under_both!(
    explain_cronjob_next_run_forbid_and_suspend_under_rkcm,
    explain_cronjob_next_run_forbid_and_suspend_under_upstream,
    "rkcm-explain-cj",
    CONTROLLERS,
    scenario
);
