//! Progress deadline, pause and resume: scenarios 15, 16, 17 and 18.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use crate::harness::*;

fn update_time(d: &Deployment) -> Option<jiff::Timestamp> {
    condition(d, "Progressing").and_then(|c| c.last_update_time.map(|t| t.0))
}

fn transition_time(d: &Deployment) -> Option<jiff::Timestamp> {
    condition(d, "Progressing").and_then(|c| c.last_transition_time.map(|t| t.0))
}

rkcm_testkit::scenario! {
    /// Scenarios 15 (progress deadline exceeded, then recovered) and 18 (pausing or resuming a
    /// timed-out Deployment does not hide the timeout).
    s15_s18_progress_deadline_exceeded_survives_pause, "dep-deadline", deadline; all_threads
}

async fn deadline(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let history = History::<Deployment>::start(env.deployments()).await?;
    let mut body = deployment("web", 1);
    body["spec"]["progressDeadlineSeconds"] = json!(10);
    let d = env.create_deployment(body).await?;
    let rss = env
        .wait_rss(
            &d.metadata.uid.clone().unwrap_or_default(),
            "one RS with its pod",
            |rss| rss.len() == 1 && settled(rss, V1, 1),
        )
        .await?;
    let rs_name = name_of(&rss[0]);

    // Scenario 15: nothing but time passes.
    let timed_out = env
        .wait_deployment_for(
            "web",
            "Progressing=False/ProgressDeadlineExceeded",
            Duration::from_secs(30),
            |d| has_condition(d, "Progressing", "False", "ProgressDeadlineExceeded"),
        )
        .await?;
    ensure_eq(
        cond_triple(&timed_out, "Progressing"),
        triple(
            "False",
            "ProgressDeadlineExceeded",
            &format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
        ),
        "Progressing",
    )?;
    let seen = history.seen()?;
    let first_false = seen
        .iter()
        .position(|s| {
            has_condition(
                s.object(),
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
            )
        })
        .context("timeout not in the watch history")?;
    let last_progress = seen[..first_false]
        .iter()
        .rev()
        .find_map(|s| update_time(s.object()))
        .context("no Progressing condition before the timeout")?;
    let at = transition_time(seen[first_false].object()).context("no transition time")?;
    let after = at.duration_since(last_progress);
    ensure(
        after >= jiff::SignedDuration::from_secs(10)
            && after <= jiff::SignedDuration::from_secs(13),
        format!("timed out {after} after the last progress ({last_progress}), want 10-13 s"),
    )?;

    // Scenario 18: pause, then resume; the timeout stays.
    for paused in [true, false] {
        let d = env.set_paused("web", paused).await?;
        let generation = d.metadata.generation;
        env.wait_deployment("web", &format!("paused={paused} observed"), |d| {
            d.status.as_ref().and_then(|s| s.observed_generation) == generation
        })
        .await?;
        env.deployment_holds(
            "web",
            "Progressing stays False/ProgressDeadlineExceeded",
            Duration::from_secs(3),
            |d| {
                cond_triple(d, "Progressing")
                    == triple(
                        "False",
                        "ProgressDeadlineExceeded",
                        &format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
                    )
            },
        )
        .await?;
    }
    ensure(
        history
            .position(|s| {
                condition(s.object(), "Progressing").is_some_and(|c| {
                    matches!(
                        c.reason.as_deref(),
                        Some("DeploymentPaused" | "DeploymentResumed")
                    )
                })
            })?
            .is_none(),
        "a paused/resumed condition replaced the timeout",
    )?;

    // Scenario 15: progress after the timeout completes the rollout.
    env.make_ready(&uid_of(&rss[0]), 1).await?;
    let d = env.wait_complete("web").await?;
    ensure_progressed(&d, &rs_name)?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 16: every bit of progress resets the deadline clock.
    s16_deadline_clock_resets_on_progress, "dep-reset", clock_resets; all_threads
}

async fn clock_resets(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let history = History::<Deployment>::start(env.deployments()).await?;
    let mut body = deployment("web", 4);
    body["spec"]["progressDeadlineSeconds"] = json!(20);
    let d = env.create_deployment(body).await?;
    let rss = env
        .wait_rss(&uid_of(&d), "one RS", |rss| rss.len() == 1)
        .await?;
    let pods = env.wait_active(&uid_of(&rss[0]), 4).await?;
    let first = env
        .wait_deployment("web", "Progressing=True", |d| {
            condition(d, "Progressing").is_some_and(|c| c.status.as_deref() == Some("True"))
        })
        .await?;
    let since = transition_time(&first).context("no lastTransitionTime")?;
    let mut last_update: Option<jiff::Timestamp> = None;
    // Pod i becomes ready at about 15·i s: each gap is shorter than the 20 s deadline, the
    // whole rollout (45 s) much longer.
    for (i, pod) in pods.iter().enumerate() {
        env.set_ready(&name_of(pod), jiff::Timestamp::now()).await?;
        let n = i32::try_from(i)? + 1;
        let d = env
            .wait_deployment(
                "web",
                &format!("{n} ready, Progressing=True updated"),
                |d| {
                    counts(d)[2] == n
                        && condition(d, "Progressing")
                            .is_some_and(|c| c.status.as_deref() == Some("True"))
                        && update_time(d) > last_update
                },
            )
            .await?;
        ensure_eq(
            transition_time(&d),
            Some(since),
            "Progressing lastTransitionTime",
        )?;
        last_update = update_time(&d);
        if n < 4 {
            env.deployment_holds(
                "web",
                "Progressing never turns False",
                Duration::from_secs(15),
                |d| {
                    condition(d, "Progressing").is_some_and(|c| c.status.as_deref() == Some("True"))
                },
            )
            .await?;
        }
    }
    let d = env.wait_complete("web").await?;
    ensure_eq(
        transition_time(&d),
        Some(since),
        "Progressing lastTransitionTime at completion",
    )?;
    for s in history.seen()? {
        ensure(
            condition(s.object(), "Progressing")
                .is_none_or(|c| c.status.as_deref() == Some("True")),
            format!("Progressing left True: {}", describe_deployment(s.object())),
        )?;
    }
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 17: pause and resume.
    s17_pause_and_resume, "dep-pause", pause_resume; all_threads
}

async fn pause_resume(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let d = env.create_deployment(deployment("web", 3)).await?;
    let d_uid = uid_of(&d);
    env.wait_complete("web").await?;
    let v1 = name_of(&env.rss_of(&d_uid).await?[0]);

    env.set_paused("web", true).await?;
    let d = env
        .wait_deployment("web", "Progressing=Unknown/DeploymentPaused", |d| {
            observed(d) && has_condition(d, "Progressing", "Unknown", "DeploymentPaused")
        })
        .await?;
    ensure_eq(
        cond_triple(&d, "Progressing"),
        triple("Unknown", "DeploymentPaused", "Deployment is paused"),
        "Progressing",
    )?;

    let changed = env.set_image("web", V2).await?;
    let generation = changed.metadata.generation;
    env.wait_deployment("web", "observedGeneration advances while paused", |d| {
        d.status.as_ref().and_then(|s| s.observed_generation) == generation
    })
    .await?;
    env.rss_hold(
        &d_uid,
        "no new RS while paused",
        Duration::from_secs(15),
        |rss| rss.len() == 1,
    )
    .await?;

    env.scale("web", 5).await?;
    env.wait_rss(&d_uid, "the current RS scaled to 5 while paused", |rss| {
        rss.len() == 1 && spec_replicas(&rss[0]) == 5 && ann(&rss[0], DESIRED) == Some("5")
    })
    .await?;
    env.wait_deployment("web", "observed, still paused", |d| {
        observed(d) && has_condition(d, "Progressing", "Unknown", "DeploymentPaused")
    })
    .await?;

    let history = History::<Deployment>::start(env.deployments()).await?;
    env.set_paused("web", false).await?;
    let rss = env
        .wait_rss(&d_uid, "a V2 RS after resume", |rss| {
            rss.len() == 2 && with_image(rss, V2).is_some()
        })
        .await?;
    let v2 = name_of(with_image(&rss, V2).context("no V2 RS")?);
    let d = env.wait_complete_at("web", "2").await?;
    ensure_eq(counts(&d), [5, 5, 5, 5, 0], "status counts")?;
    env.wait_rss(&d_uid, "old 0 / new 5", |rss| {
        settled(rss, V1, 0) && settled(rss, V2, 5)
    })
    .await?;
    let resumed = history.position(|s| {
        cond_triple(s.object(), "Progressing")
            == triple("Unknown", "DeploymentResumed", "Deployment is resumed")
    })?;
    let created = history
        .position(|s| has_condition(s.object(), "Progressing", "True", "NewReplicaSetCreated"))?;
    ensure(
        matches!((resumed, created), (Some(r), Some(c)) if r < c),
        format!(
            "Unknown/DeploymentResumed (change #{resumed:?}) before NewReplicaSetCreated (#{created:?})"
        ),
    )?;
    ensure(v1 != v2, "a new RS")?;
    ctrl.stop().await
}
