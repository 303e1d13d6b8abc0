//! Pods on a node nobody simulates, their status set by the test as a kubelet would
//! (§9 1 under full control, 8, 26): a deleted pod stays terminating until the test
//! finishes it.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube::api::{DeleteParams, ListParams};
use rkcm_testkit::{NodeBuilder, holds_for, unique_name, wait_for};
use serde_json::json;

use crate::harness::*;

/// `ready(p)`: Running with Ready=True.
async fn ready(env: &Env<'_>, pod: &str) -> Result<()> {
    wait_for(&format!("{pod} exists"), WITHIN, || async {
        Ok(env.pod(pod).await?.map(|_| ()))
    })
    .await?;
    env.cluster
        .set_pod_phase(env.name(), pod, "Running", true)
        .await?;
    Ok(())
}

/// `finish(p)`: the kubelet's final delete (grace 0); only the test does this.
async fn finish(env: &Env<'_>, pod: &str) -> Result<()> {
    match env
        .pods()
        .delete(
            pod,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Finishes every pod, so the namespace can go.
async fn finish_all(env: &Env<'_>) -> Result<()> {
    for p in env.pods().list(&ListParams::default()).await?.items {
        finish(env, p.metadata.name.as_deref().unwrap_or_default()).await?;
    }
    Ok(())
}

async fn existing(env: &Env<'_>, pod: &str) -> Result<bool> {
    Ok(env.pod(pod).await?.is_some())
}

rkcm_testkit::scenario! {
    hand_driven_pods_follow_the_ordering_rules, "sts-manual", hand_driven_pods_follow_the_ordering_rules_in
}

/// §9 1, 8, 26 on a hand-driven node.
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn hand_driven_pods_follow_the_ordering_rules_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let node = env
        .cluster
        .create_node(NodeBuilder::new(&unique_name("rkcm-sts-node")).ready(true))
        .await?;
    let r = async {
        env.create_set(merge(
            sts("web", 3),
            json!({"spec": {"template": {"spec": {
                "nodeName": node.name(),
                "terminationGracePeriodSeconds": 30,
                "tolerations": [{"operator": "Exists"}],
            }}}}),
        ))
        .await?;
        // §9 1: one at a time, each after its predecessor is ready.
        for k in 0..3 {
            let name = format!("web-{k}");
            wait_for(&format!("{name} created"), WITHIN, || async {
                Ok(env.pod(&name).await?.map(|_| ()))
            })
            .await?;
            if k < 2 {
                let next = format!("web-{}", k + 1);
                holds_for(
                    &format!("no {next} before {name} is ready"),
                    Duration::from_secs(2),
                    || async { Ok(!existing(&env, &next).await?) },
                )
                .await?;
            }
            ready(&env, &name).await?;
        }
        env.wait_settled("web", 3).await?;

        // §9 8: scale-down waits while web-0 is unready.
        env.cluster
            .set_pod_phase(env.name(), "web-0", "Running", false)
            .await?;
        env.wait_status("web", "web-0 unready in status", |_, st| {
            st.ready_replicas == Some(2)
        })
        .await?;
        env.scale("web", 2).await?;
        holds_for("web-2 kept while web-0 is unready", HOLDS, || async {
            Ok(env
                .pod("web-2")
                .await?
                .is_some_and(|p| p.metadata.deletion_timestamp.is_none()))
        })
        .await?;
        env.cluster
            .set_pod_phase(env.name(), "web-0", "Running", true)
            .await?;
        let p = wait_for("web-2 terminating", WITHIN, || async {
            Ok(env
                .pod("web-2")
                .await?
                .filter(|p| p.metadata.deletion_timestamp.is_some()))
        })
        .await?;
        ensure!(
            p.metadata.deletion_grace_period_seconds == Some(30),
            "web-2 grace {:?}",
            p.metadata.deletion_grace_period_seconds
        );
        finish(&env, "web-2").await?;
        env.wait_settled("web", 2).await?;

        // §9 26: a gracefully deleted web-0 keeps its slot until it is finished. web-1 is
        // unready while web-0 is deleted and the set scaled up, so web-2 waits on web-1
        // whatever the controller's pod cache shows yet; web-1's return to Ready comes after
        // web-0's deletion in the pod watch, so from then on only web-0 holds web-2 back.
        let hist = env.pod_history().await?;
        env.cluster
            .set_pod_phase(env.name(), "web-1", "Running", false)
            .await?;
        env.wait_status("web", "web-1 unready in status", |_, st| {
            st.ready_replicas == Some(1)
        })
        .await?;
        let old = env.pod("web-0").await?.context("web-0")?;
        env.pods().delete("web-0", &DeleteParams::default()).await?;
        env.scale("web", 3).await?;
        holds_for(
            "web-2 not created while web-1 is unready",
            HOLDS,
            || async { Ok(!existing(&env, "web-2").await?) },
        )
        .await?;
        env.cluster
            .set_pod_phase(env.name(), "web-1", "Running", true)
            .await?;
        holds_for(
            "web-0 stays terminating, web-2 is not created",
            HOLDS,
            || async {
                let p = env.pod("web-0").await?;
                Ok(p.is_some_and(|p| {
                    p.metadata.uid == old.metadata.uid
                        && p.metadata.deletion_grace_period_seconds == Some(30)
                }) && !existing(&env, "web-2").await?)
            },
        )
        .await?;
        finish(&env, "web-0").await?;
        wait_for("a new web-0", WITHIN, || async {
            Ok(env
                .pod("web-0")
                .await?
                .filter(|p| p.metadata.uid != old.metadata.uid)
                .map(|_| ()))
        })
        .await?;
        ready(&env, "web-0").await?;
        ready(&env, "web-2").await?;
        env.wait_settled("web", 3).await?;
        hist.assert_one_per_name()
    }
    .await;
    let r = match (r, finish_all(&env).await) {
        (Err(e), _) => Err(e),
        (Ok(()), c) => c,
    };
    let r = env.finish(r).await;
    node.delete().await?;
    r
}
