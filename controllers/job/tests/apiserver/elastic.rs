//! Elastic Indexed scale-down (29) and the 500-entry cap of `uncountedTerminatedPods` with a
//! large batch of pods finishing at once (30).

use anyhow::Result;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::batch::v1::Job;
use kube::api::ListParams;
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    elastic_indexed_scale_down_drops_high_indexes, "job-elastic", elastic; start = start
}

async fn elastic(env: &Env) -> Result<()> {
    let uid = env.start_indexed("el", 4, json!({})).await?;
    for ix in [0, 3] {
        env.end_index(&uid, ix, 0).await?;
    }
    wait_job(env, "el", "indexes 0 and 3 counted", WITHIN, |j| {
        status(j).completed_indexes.as_deref() == Some("0,3") && status(j).succeeded == Some(2)
    })
    .await?;
    let p1 = env.wait_index(&uid, 1).await?;
    let p2 = env.wait_index(&uid, 2).await?;
    env.patch_job("el", json!({"spec": {"completions": 2, "parallelism": 2}}))
        .await?;
    // Index 3 leaves completedIndexes; the pod of index 2 is removed without being counted.
    let j = wait_job(env, "el", "scaled down to 2", WITHIN, |j| {
        let s = status(j);
        s.completed_indexes.as_deref() == Some("0")
            && s.succeeded == Some(1)
            && s.active == Some(1)
            && s.terminating.unwrap_or(0) == 0
    })
    .await?;
    ensure(
        status(&j).failed.unwrap_or(0) == 0,
        format!("removed pods are not failures: {:?}", status(&j)),
    )?;
    env.wait_gone(&name_of(&p2), WITHIN).await?;
    let active = env.active(&uid).await?;
    ensure(
        active.len() == 1 && name_of(&active[0]) == name_of(&p1),
        format!("only index 1 runs on: {:?}", names_of(&active)),
    )?;
    env.terminate(&name_of(&p1), 0).await?;
    let j = wait_condition(env, "el", "Complete").await?;
    let s = status(&j);
    ensure(
        s.completed_indexes.as_deref() == Some("0,1") && s.succeeded == Some(2),
        format!("{s:?}"),
    )?;
    Ok(())
}

rkcm_testkit::scenario! {
    large_batch_keeps_at_most_500_uncounted, "job-large", large_batch
}

/// 600 pods finish while no controller runs, so the first sync after the start sees all of
/// them: at most 500 go into `uncountedTerminatedPods` at once, yet all 600 are counted and
/// the Job completes once.
async fn large_batch(env: &Env) -> Result<()> {
    const N: usize = 600;
    let history = History::<Job>::start(env.jobs()).await?;
    let ctrl = env.start();
    let uid = env
        .start_job("big", json!({"completions": N, "parallelism": N}), true)
        .await?;
    let pods = env
        .wait_active_within(&uid, N, WITHIN * 4)
        .await
        .map_err(|e| e.context("creating 600 pods"));
    let stopped = ctrl.stop().await;
    let pods = pods?;
    stopped?;
    ensure(pods.len() == N, format!("{} pods", pods.len()))?;
    futures::stream::iter(pods.iter().map(name_of))
        .map(|name| async move { env.terminate(&name, 0).await })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    // The restarted controller lists pods from the API server's watch cache (resourceVersion
    // 0, as upstream's informers do), which can lag behind the writes above under load. The
    // cache only moves forward: once a list from it shows all 600 finished, so does the
    // controller's first list.
    wait_seen(
        "600 finished pods in the API server's watch cache",
        WITHIN,
        || async {
            let cached = env.pods().list(&ListParams::default().match_any()).await?;
            Ok(cached
                .items
                .iter()
                .filter(|p| controller_uid(*p) == Some(uid.as_str()))
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
                .count())
        },
        |n| *n == N,
        |n| format!("{n} finished"),
    )
    .await?;
    let ctrl = env.start();
    let done = wait_job(env, "big", "Complete", WITHIN * 4, |j| {
        has_condition(j, "Complete")
    })
    .await;
    ctrl.stop().await?;
    let j = done?;
    let s = status(&j);
    ensure(
        s.succeeded == Some(600) && s.failed.unwrap_or(0) == 0,
        format!("{s:?}"),
    )?;
    ensure_conditions(
        &j,
        &[
            "SuccessCriteriaMet=CompletionsReached",
            "Complete=CompletionsReached",
        ],
    )?;
    let mut most = 0;
    for seen in history.versions("big")? {
        let u = status(seen.object())
            .uncounted_terminated_pods
            .unwrap_or_default();
        let n = u.succeeded.unwrap_or_default().len() + u.failed.unwrap_or_default().len();
        most = most.max(n);
    }
    // The cap was reached (all 600 were there to record), never passed.
    ensure(
        most == 500,
        format!("at most {most} uncounted pods at once, want exactly the cap of 500"),
    )?;
    let left = env
        .owned(&uid)
        .await?
        .iter()
        .filter(|p| has_tracking(p))
        .count();
    ensure(
        left == 0,
        format!("{left} pods keep the tracking finalizer"),
    )?;
    Ok(())
}
