//! Status write pacing (`rkcm_runtime::pacing`): a burst of pod changes of one ReplicaSet
//! (every pod turning Ready within a moment) is counted in status writes spaced at least
//! `STATUS_WRITE_INTERVAL` apart, and the last write still counts every pod.
//!
//! The controllers' own requests are recorded ([`rkcm_testkit::recorder`]); the pacer times a write
//! from its answer, so the next one may be sent no sooner than the interval after it.
//!
//! While the controller's client is short of its QPS budget, the status writes of all
//! ReplicaSets together take turns at `PRESSED_SHARE` of its QPS.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use rkcm_runtime::flowcontrol::RateLimiter;
use rkcm_runtime::pacing::{STATUS_WRITE_INTERVAL, turn_spacing};

use crate::harness::*;
use rkcm_testkit::recorder::{Recorder, ensure_sent_apart, ensure_spaced};

const REPLICAS: usize = 30;
/// Clock slack between the recorder's timestamps and the pacer's.
const SLACK: Duration = Duration::from_millis(10);

rkcm_testkit::scenario! {
    status_writes_of_one_replicaset_are_spaced_out, "rs-pacing", pacing
}

async fn pacing(env: &Env) -> Result<()> {
    let recorder = Recorder::new();
    let ctrl = start_recorded(env, env.config(), Duration::ZERO, Some(&recorder));
    let rs = env
        .create_rs(replicaset(
            "paced",
            REPLICAS as i32,
            &[("app", "paced")],
            &[("app", "paced")],
        ))
        .await?;
    // Every pod Ready, one status patch after another: a burst of pod updates.
    env.make_ready(&uid_of(&rs), REPLICAS).await?;
    env.wait_rs("paced", "every pod counted ready and available", |rs| {
        let (replicas, _, ready, available) = rs_status(rs);
        (replicas, ready, available) == (REPLICAS as i32, REPLICAS as i32, REPLICAS as i32)
    })
    .await?;

    let ns = env.name();
    let writes = recorder.matching(|c| c.is_rs_status_write(ns, "paced") && c.code == 200);
    ensure_spaced(&writes, STATUS_WRITE_INTERVAL, SLACK)?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    status_writes_of_many_replicasets_take_turns_while_short_of_budget, "rs-turns", turns
}

/// ReplicaSets created at once.
const SETS: usize = 4;
/// Replicas of each.
const SET_REPLICAS: usize = 2;

async fn turns(env: &Env) -> Result<()> {
    // 5 requests per second, burst 4, and ten minutes of requests owed: pressed throughout.
    // Its requests are not throttled by it; only the pacer reads it.
    let qps = 5.0;
    let budget = Arc::new(RateLimiter::new(qps, 4));
    for _ in 0..(4 + 5 * 600) {
        budget.reserve();
    }
    let recorder = Recorder::new();
    let ctrl = start_recorded_on(
        env,
        env.config(),
        Duration::ZERO,
        Some(&recorder),
        Some(budget),
    );
    let mut uids = Vec::new();
    for i in 0..SETS {
        let name = format!("turn-{i}");
        let rs = env
            .create_rs(replicaset(
                &name,
                SET_REPLICAS as i32,
                &[("app", name.as_str())],
                &[("app", name.as_str())],
            ))
            .await?;
        uids.push(uid_of(&rs));
    }
    for uid in &uids {
        env.make_ready(uid, SET_REPLICAS).await?;
    }
    for i in 0..SETS {
        env.wait_rs(
            &format!("turn-{i}"),
            "every pod counted ready and available",
            |rs| {
                let (replicas, _, ready, available) = rs_status(rs);
                let n = SET_REPLICAS as i32;
                (replicas, ready, available) == (n, n, n)
            },
        )
        .await?;
    }

    let ns = env.name();
    let writes = recorder.matching(|c| {
        c.code == 200 && (0..SETS).any(|i| c.is_rs_status_write(ns, &format!("turn-{i}")))
    });
    // One write per turn, whichever ReplicaSet it is for.
    ensure_sent_apart(&writes, turn_spacing(qps), SLACK)?;
    ctrl.stop().await
}
