//! Status write pacing (`rkcm_runtime::queue::pacing`): while a Parallel set's pods start and turn
//! Ready in a burst, the status writes that only move counts are spaced at least
//! `STATUS_WRITE_INTERVAL` apart, and the set still settles with every pod counted.
//!
//! The controller's own requests are recorded ([`rkcm_testkit::recorder`]); the pacer times a
//! write from its answer, so the next one may be sent no sooner than the interval after it.
//! Nothing in this scenario changes a revision or the generation after the first write, so
//! every later write is of the paced kind.

use std::time::Duration;

use anyhow::Result;
use rkcm_runtime::queue::pacing::STATUS_WRITE_INTERVAL;
use rkcm_testkit::recorder::{Recorder, ensure_spaced};
use serde_json::json;

use crate::harness::*;

const REPLICAS: i32 = 20;
/// Clock slack between the recorder's timestamps and the pacer's.
const SLACK: Duration = Duration::from_millis(10);

rkcm_testkit::scenario! {
    status_writes_of_one_set_are_spaced_out, "sts-pacing", status_writes_of_one_set_are_spaced_out_in
}

async fn status_writes_of_one_set_are_spaced_out_in(base: &Base) -> Result<()> {
    let recorder = Recorder::new();
    let env = Env::recorded(base, &recorder);
    let r = async {
        env.create_set(merge(
            sts("paced", REPLICAS),
            json!({"spec": {"podManagementPolicy": "Parallel"}}),
        ))
        .await?;
        env.wait_settled("paced", REPLICAS).await?;
        let writes = recorder.matching(|c| {
            c.is_status_write("apps/v1", "statefulsets", env.name(), "paced") && c.code == 200
        });
        ensure_spaced(&writes, STATUS_WRITE_INTERVAL, SLACK)?;
        Ok(())
    }
    .await;
    env.finish(r).await
}
