//! Scenario 21: the burst cap. One sync creates at most 500 pods, in slow-start batches
//! (1, 2, 4, …, each batch only after the previous one answered); the rest follow in a later
//! sync, once the first 500 are observed.
//!
//! The controllers' own requests are recorded ([`rkcm_testkit::recorder`]), and their pod watch lags
//! 2 s: a sync that follows the first must wait for the 500th pod to show up in the cache, so
//! the creates of different syncs are separated by a gap of at least the lag, and a sync's
//! creates can be told apart from the next sync's without an audit log.

use std::time::Duration;

use anyhow::Result;
use rkcm_testkit::wait_for;

use crate::harness::*;
use rkcm_testkit::recorder::{Call, Recorder};

const REPLICAS: usize = 600;
const LAG: Duration = Duration::from_secs(2);

rkcm_testkit::scenario! {
    burst_cap_limits_creates_per_sync_to_500, "rs-burst", burst
}

/// Splits calls (ordered by sending time) where nothing was in flight for longer than `gap`.
fn syncs(calls: &[Call], gap: Duration) -> Vec<Vec<Call>> {
    let mut groups: Vec<Vec<Call>> = Vec::new();
    let mut last_answer = None;
    for call in calls {
        let new_group = last_answer.is_none_or(|t| call.sent.saturating_duration_since(t) > gap);
        if new_group {
            groups.push(Vec::new());
        }
        if let Some(group) = groups.last_mut() {
            group.push(call.clone());
        }
        last_answer = Some(
            last_answer.map_or(call.answered, |t: tokio::time::Instant| {
                t.max(call.answered)
            }),
        );
    }
    groups
}

/// The slow start of one sync: the first request of batch k (0-based index 2^k − 1) is sent
/// only after every earlier request of the sync was answered.
fn check_slow_start(calls: &[Call], which: &str) -> Result<()> {
    let mut batch_start = 1;
    while batch_start < calls.len() {
        let before = &calls[..batch_start];
        let done = before.iter().map(|c| c.answered).max();
        let next = &calls[batch_start];
        ensure(
            done.is_some_and(|done| next.sent >= done),
            format!(
                "{which}: create #{} was sent before the {} earlier creates were all answered",
                batch_start + 1,
                before.len()
            ),
        )?;
        batch_start = batch_start * 2 + 1;
    }
    Ok(())
}

async fn burst(env: &Env) -> Result<()> {
    let recorder = Recorder::new();
    let ctrl = start_recorded(env, env.config(), LAG, Some(&recorder));
    let rs = env
        .create_rs(replicaset(
            "big",
            REPLICAS as i32,
            &[("app", "big")],
            &[("app", "big")],
        ))
        .await?;
    let uid = uid_of(&rs);
    wait_for(
        &format!("{REPLICAS} active pods"),
        Duration::from_secs(180),
        || async { Ok((env.active(&uid).await?.len() == REPLICAS).then_some(())) },
    )
    .await?;
    env.wait_rs("big", "replicas=600", |rs| {
        rs_status(rs).0 == REPLICAS as i32
    })
    .await?;

    let ns = env.name();
    let creates = recorder.matching(|c| c.is_pod_create(ns));
    ensure(
        creates.iter().all(|c| c.code == 201),
        "every create succeeded (no quota in this namespace)",
    )?;
    ensure(
        creates.len() == REPLICAS,
        format!("{REPLICAS} creates in all, got {}", creates.len()),
    )?;
    let syncs = syncs(&creates, LAG / 2);
    let sizes: Vec<usize> = syncs.iter().map(Vec::len).collect();
    ensure(
        sizes == [500, 100],
        format!("creates per sync: want [500, 100] (burst cap 500), got {sizes:?}"),
    )?;
    check_slow_start(&syncs[0], "first sync")?;
    check_slow_start(&syncs[1], "second sync")?;
    ctrl.stop().await
}
