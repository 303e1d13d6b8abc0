//! Status write pacing (`rkcm_runtime::queue::pacing`): while a DaemonSet's pods start and turn
//! Ready on its nodes in a burst, the status writes that only move counts are spaced at least
//! `STATUS_WRITE_INTERVAL` apart, and the status still ends with every pod counted.
//!
//! The controller's own requests are recorded ([`rkcm_testkit::recorder`]); the pacer times a
//! write from its answer, so the next one may be sent no sooner than the interval after it.
//! Nothing here changes the generation after the first write records it, so every later
//! write is of the paced kind. While the controller's client is short of its QPS budget the
//! least spacing is `TERMINATING_WRITE_INTERVAL` instead.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use rkcm_runtime::queue::flowcontrol::RateLimiter;
use rkcm_runtime::queue::pacing::{STATUS_WRITE_INTERVAL, TERMINATING_WRITE_INTERVAL};
use rkcm_testkit::recorder::{Recorder, ensure_spaced};
use serde_json::json;

use crate::harness::Env;

const NODES: usize = 8;
/// Clock slack between the recorder's timestamps and the pacer's.
const SLACK: Duration = Duration::from_millis(10);

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn status_writes_of_one_daemonset_are_spaced_out() -> Result<()> {
    spaced_writes("ds-pacing", None, STATUS_WRITE_INTERVAL).await
}

/// While the controller's client is short of its QPS budget, routine status writes wait the
/// longer interval (`StatusPacer::with_budget`): here the budget is drained for good.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn status_writes_wait_longer_while_the_client_is_short_of_budget() -> Result<()> {
    let budget = Arc::new(RateLimiter::new(1e-6, 4));
    for _ in 0..4 {
        budget.reserve();
    }
    spaced_writes("ds-budget", Some(budget), TERMINATING_WRITE_INTERVAL).await
}

async fn spaced_writes(
    prefix: &str,
    budget: Option<Arc<RateLimiter>>,
    least: Duration,
) -> Result<()> {
    let env = Env::new(prefix).await?;
    let mut nodes = Vec::new();
    for i in 0..NODES {
        nodes.push(env.node(&format!("n{i}"), &[], &[]).await?);
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.name()).collect();
    let recorder = Recorder::new();
    let ctrl = env.start_recorded_on(&recorder, budget);
    let want = i32::try_from(NODES)?;
    let r = async {
        env.create(&env.daemonset("paced", "registry.k8s.io/pause:3.10", json!({})))
            .await?;
        env.wait_one_per_node("paced", &names, None).await?;
        env.wait_status("paced", "every pod counted ready and available", |ds| {
            ds.status.as_ref().is_some_and(|s| {
                s.number_ready == want
                    && s.number_available == Some(want)
                    && s.updated_number_scheduled == Some(want)
                    && s.observed_generation == ds.metadata.generation
            })
        })
        .await?;
        let writes = recorder.matching(|c| {
            c.is_status_write("apps/v1", "daemonsets", env.name(), "paced") && c.code == 200
        });
        ensure_spaced(&writes, least, SLACK)?;
        Ok(())
    }
    .await;
    ctrl.stop().await?;
    r
}
