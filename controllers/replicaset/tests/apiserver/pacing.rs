//! Status write pacing (`rkcm_runtime::queue::pacing`): a burst of pod changes of one ReplicaSet
//! (every pod turning Ready within a moment) is counted in status writes spaced at least
//! `STATUS_WRITE_INTERVAL` apart, and the last write still counts every pod.
//!
//! The controllers' own requests are recorded ([`rkcm_testkit::recorder`]); the pacer times a write
//! from its answer, so the next one may be sent no sooner than the interval after it.

use std::time::Duration;

use anyhow::Result;
use rkcm_runtime::queue::pacing::STATUS_WRITE_INTERVAL;

use crate::harness::*;
use rkcm_testkit::recorder::{Recorder, ensure_spaced};

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
