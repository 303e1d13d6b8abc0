//! Updates: RollingUpdate with maxUnavailable and maxSurge, OnDelete, rollback, history
//! limit, failed pods (scenarios 14, 15, 16, 17, 18, 22, 23).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use crate::harness::{Env, HOLDS, WITHIN, is_ready, label, pod_hash, target_node};

const HOLD: &str = "rkcm.test/hold";
const V1: &str = "registry.k8s.io/pause:3.9";
const V2: &str = "registry.k8s.io/pause:3.10";
const V3: &str = "registry.k8s.io/pause:3.10.1";

/// The hash of the DaemonSet's current revision (the one whose data is the live template).
async fn current_hash(env: &Env, name: &str) -> Result<String> {
    wait_for(
        &format!("the current revision of {name}"),
        WITHIN,
        || async {
            let ds = env.daemonsets().get(name).await?;
            let patch = rkcm_daemonset::revision::patch_bytes(&ds);
            Ok(env
                .owned_revisions(name)
                .await?
                .into_iter()
                .find(|r| rkcm_runtime::workload::history::go_json_bytes(&r.data.0) == patch)
                .map(|r| rkcm_daemonset::revision::revision_hash(&r).to_owned()))
        },
    )
    .await
}

/// Nodes (of `nodes`) without a ready, non-terminating pod; and nodes with two live pods.
fn shape(pods: &[Pod], nodes: &[&str]) -> (usize, usize) {
    let mut live: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    for p in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let e = live.entry(target_node(p).unwrap_or_default()).or_default();
        e.0 += 1;
        e.1 |= is_ready(p);
    }
    let missing = nodes
        .iter()
        .filter(|n| !live.get(**n).is_some_and(|(_, ready)| *ready))
        .count();
    let doubled = live.values().filter(|(n, _)| *n > 1).count();
    (missing, doubled)
}

/// Waits for the rollout to `hash` on `nodes`, checking at every poll that at most
/// `max_missing` nodes lack a ready pod and at most `max_doubled` nodes have two pods.
async fn watch_rollout(
    env: &Env,
    name: &str,
    nodes: &[&str],
    hash: &str,
    max_missing: usize,
    max_doubled: usize,
) -> Result<()> {
    let worst = std::sync::Arc::new(std::sync::Mutex::new((0, 0)));
    let seen = worst.clone();
    wait_for(&format!("{name} rolled out to {hash}"), WITHIN * 2, || {
        let seen = seen.clone();
        async move {
            let pods = env.all_pods(name).await?;
            let (missing, doubled) = shape(&pods, nodes);
            if let Ok(mut w) = seen.lock() {
                *w = (w.0.max(missing), w.1.max(doubled));
            }
            let done = pods.len() == nodes.len()
                && pods.iter().all(|p| {
                    pod_hash(p) == hash && is_ready(p) && p.metadata.deletion_timestamp.is_none()
                })
                && shape(&pods, nodes) == (0, 0);
            Ok(done.then_some(()))
        }
    })
    .await
    .with_context(|| format!("worst seen: {worst:?}"))?;
    // Every poll counted: one sample over the budget fails the rollout.
    let worst = worst.lock().map(|w| *w).unwrap_or((usize::MAX, usize::MAX));
    anyhow::ensure!(
        worst.0 <= max_missing && worst.1 <= max_doubled,
        "budget exceeded during the rollout: {} nodes without a ready pod, {} with two pods",
        worst.0,
        worst.1
    );
    Ok(())
}

/// One line per pod: name, node, hash, ready, terminating; for failure messages.
fn describe(pods: &[Pod]) -> String {
    pods.iter()
        .map(|p| {
            format!(
                "{} node={} hash={} ready={} terminating={}",
                p.metadata.name.as_deref().unwrap_or_default(),
                target_node(p).unwrap_or_default(),
                pod_hash(p),
                is_ready(p),
                p.metadata.deletion_timestamp.is_some()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Puts the test finalizer on a pod, so that its deletion stays visible until released.
async fn hold(env: &Env, pod: &str) -> Result<()> {
    env.pods()
        .patch(
            pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [HOLD]}})),
        )
        .await?;
    Ok(())
}

async fn release(env: &Env, pod: &str) -> Result<()> {
    env.pods()
        .patch(
            pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    Ok(())
}

fn terminating(pods: &[Pod]) -> Vec<Pod> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .cloned()
        .collect()
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn rolling_update_max_unavailable_one() -> Result<()> {
    // Scenario 14. Old pods are held by a finalizer, so each deletion is visible.
    let env = Env::new("ds-roll").await?;
    let (a, b, c) = (
        env.node("a", &[], &[]).await?,
        env.node("b", &[], &[]).await?,
        env.node("c", &[], &[]).await?,
    );
    let nodes = [a.name(), b.name(), c.name()];
    let ctrl = env.start();
    env.create(&env.daemonset("ds", V1, json!({}))).await?;
    let first = current_hash(&env, "ds").await?;
    let old = env.wait_one_per_node("ds", &nodes, Some(&first)).await?;
    for p in old.values() {
        hold(&env, p.metadata.name.as_deref().unwrap_or_default()).await?;
    }
    env.set_image("ds", V2).await?;
    let second = current_hash(&env, "ds").await?;
    assert_ne!(first, second);
    for step in 0..3 {
        let victim = wait_for(
            &format!("step {step}: exactly one old pod terminating"),
            WITHIN,
            || async {
                let t = terminating(&env.all_pods("ds").await?);
                Ok((t.len() == 1).then(|| t[0].clone()))
            },
        )
        .await?;
        let node = target_node(&victim).unwrap_or_default();
        holds_for(
            "no second old pod deleted, no replacement beside the terminating one",
            HOLDS,
            || async {
                let pods = env.all_pods("ds").await?;
                let on_node = pods
                    .iter()
                    .filter(|p| target_node(p).as_deref() == Some(node.as_str()))
                    .count();
                Ok(terminating(&pods).len() == 1 && on_node == 1)
            },
        )
        .await?;
        release(&env, victim.metadata.name.as_deref().unwrap_or_default()).await?;
        wait_for("the new pod on that node is ready", WITHIN, || async {
            let pods = env.live_pods("ds").await?;
            Ok(pods
                .iter()
                .any(|p| {
                    target_node(p).as_deref() == Some(node.as_str())
                        && pod_hash(p) == second
                        && is_ready(p)
                })
                .then_some(()))
        })
        .await?;
    }
    watch_rollout(&env, "ds", &nodes, &second, 1, 1).await?;
    assert_eq!(env.owned_revisions("ds").await?.len(), 2);
    env.wait_status("ds", "updatedNumberScheduled 3", |d| {
        d.status.as_ref().is_some_and(|s| {
            s.updated_number_scheduled == Some(3)
                && s.number_available == Some(3)
                && s.observed_generation == d.metadata.generation
        })
    })
    .await?;
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn max_unavailable_percent_deletes_two_of_four_at_once() -> Result<()> {
    // Scenario 15. The controller is stopped after the first step so its size can be seen.
    let env = Env::new("ds-pct").await?;
    let mut guards = Vec::new();
    for s in ["a", "b", "c", "d"] {
        guards.push(env.node(s, &[], &[]).await?);
    }
    let nodes: Vec<&str> = guards.iter().map(|n| n.name()).collect();
    let ctrl = env.start();
    env.create(&env.daemonset("ds", V1, json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}}}}))).await?;
    let first = current_hash(&env, "ds").await?;
    let before = env.wait_one_per_node("ds", &nodes, Some(&first)).await?;
    // Hold the old pods' deletion with a finalizer so the first step stays visible.
    for p in before.values() {
        let name = p.metadata.name.clone().unwrap_or_default();
        env.pods()
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"metadata": {"finalizers": ["rkcm.test/hold"]}})),
            )
            .await?;
    }
    env.set_image("ds", V2).await?;
    wait_for("two old pods terminating", WITHIN, || async {
        let pods = env.all_pods("ds").await?;
        let n = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count();
        Ok((n == 2).then_some(()))
    })
    .await?;
    holds_for(
        "no third old pod is deleted while two are unavailable",
        HOLDS,
        || async {
            let pods = env.all_pods("ds").await?;
            Ok(pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some())
                .count()
                == 2)
        },
    )
    .await?;
    ctrl.stop().await?;
    for p in env.all_pods("ds").await? {
        let name = p.metadata.name.clone().unwrap_or_default();
        let _ = env
            .pods()
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await;
    }
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn surge_keeps_every_node_available() -> Result<()> {
    // Scenario 16. Old pods are held by a finalizer so each deletion is visible; an old pod
    // may only be deleted once the new pod beside it has been ready for minReadySeconds.
    const MIN_READY: i64 = 4;
    let env = Env::new("ds-surge").await?;
    let (a, b, c) = (
        env.node("a", &[], &[]).await?,
        env.node("b", &[], &[]).await?,
        env.node("c", &[], &[]).await?,
    );
    let nodes = [a.name(), b.name(), c.name()];
    let ctrl = env.start();
    env.create(&env.daemonset(
        "ds",
        V1,
        json!({"spec": {"minReadySeconds": MIN_READY, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}),
    ))
    .await?;
    let first = current_hash(&env, "ds").await?;
    let old = env.wait_one_per_node("ds", &nodes, Some(&first)).await?;
    // Old pods not yet available would be replaced at once, without using the surge budget.
    env.wait_status("ds", "all old pods available", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.number_available == Some(3))
    })
    .await?;
    for p in old.values() {
        hold(&env, p.metadata.name.as_deref().unwrap_or_default()).await?;
    }
    env.set_image("ds", V2).await?;
    let second = current_hash(&env, "ds").await?;
    // Each old pod, once deleted, is checked against its replacement and released. (With
    // old pods held, surging goes on on other nodes: several may be terminating at once.)
    let checked = std::sync::Arc::new(std::sync::Mutex::new(
        std::collections::BTreeSet::<String>::new(),
    ));
    let violation = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let violated = |v: &std::sync::Mutex<Option<String>>, what: String| {
        if let Ok(mut v) = v.lock() {
            v.get_or_insert(what);
        }
    };
    let last_seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    wait_for("every old pod deleted after its replacement was available", WITHIN * 2, || {
        let checked = checked.clone();
        let violation = violation.clone();
        let last_seen = last_seen.clone();
        let (env, nodes, second) = (&env, &nodes, &second);
        async move {
            let pods = env.all_pods("ds").await?;
            if let Ok(mut l) = last_seen.lock() {
                *l = describe(&pods);
            }
            let (missing, doubled) = shape(&pods, nodes);
            if missing > 0 || doubled > 1 {
                violated(&violation, format!("{missing} nodes without a ready pod, {doubled} with two live pods"));
            }
            for victim in terminating(&pods) {
                let name = victim.metadata.name.clone().unwrap_or_default();
                if checked.lock().map(|c| c.contains(&name)).unwrap_or(true) {
                    continue;
                }
                let node = target_node(&victim).unwrap_or_default();
                let new = pods
                    .iter()
                    .find(|p| target_node(p).as_deref() == Some(node.as_str()) && pod_hash(p) == *second)
                    .context("a new pod beside the deleted old one")?;
                let ready_since = rkcm_runtime::workload::pod::ready_since(&rkcm_runtime::cache::cached::Pod::from(new)).context("the new pod is ready")?;
                // deletionTimestamp = time of the delete + the 1 s grace period; timestamps
                // have 1 s resolution.
                let deleted = victim.metadata.deletion_timestamp.as_ref().map(|t| t.0).context("deleting")?;
                let waited = deleted.duration_since(ready_since).as_secs();
                if waited < MIN_READY {
                    violated(&violation, format!("old pod {name} deleted {waited} s after its replacement became ready (minReadySeconds {MIN_READY})"));
                }
                release(env, &name).await?;
                if let Ok(mut c) = checked.lock() {
                    c.insert(name);
                }
            }
            Ok(checked.lock().map(|c| c.len() == 3).unwrap_or(false).then_some(()))
        }
    })
    .await
    .with_context(|| format!("pods last seen: {}", last_seen.lock().map(|l| l.clone()).unwrap_or_default()))?;
    if let Some(v) = violation.lock().ok().and_then(|v| v.clone()) {
        anyhow::bail!("surge budget violated: {v}");
    }
    watch_rollout(&env, "ds", &nodes, &second, 0, 1).await?;
    env.wait_status("ds", "updatedNumberScheduled 3", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.updated_number_scheduled == Some(3))
    })
    .await?;
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn on_delete_replaces_only_deleted_pods() -> Result<()> {
    // Scenario 17.
    let env = Env::new("ds-ondelete").await?;
    let (a, b) = (
        env.node("a", &[], &[]).await?,
        env.node("b", &[], &[]).await?,
    );
    let nodes = [a.name(), b.name()];
    let ctrl = env.start();
    env.create(&env.daemonset(
        "ds",
        V1,
        json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}),
    ))
    .await?;
    let first = current_hash(&env, "ds").await?;
    let pods = env.wait_one_per_node("ds", &nodes, Some(&first)).await?;
    let updated = env.set_image("ds", V2).await?;
    let second = current_hash(&env, "ds").await?;
    env.wait_status("ds", "observed the new generation, nothing updated", |d| {
        d.status.as_ref().is_some_and(|s| {
            s.observed_generation == updated.metadata.generation
                && s.updated_number_scheduled.unwrap_or(0) == 0
        })
    })
    .await?;
    holds_for("no pod is deleted", HOLDS, || async {
        Ok(env
            .all_pods("ds")
            .await?
            .iter()
            .all(|p| p.metadata.deletion_timestamp.is_none() && pod_hash(p) == first))
    })
    .await?;
    let victim = pods
        .get(a.name())
        .and_then(|p| p.metadata.name.clone())
        .unwrap_or_default();
    env.pods().delete(&victim, &DeleteParams::default()).await?;
    let after = wait_for(
        "a replacement with the new hash on node-a",
        WITHIN,
        || async {
            let pods = env.live_pods("ds").await?;
            let on_a: Vec<&Pod> = pods
                .iter()
                .filter(|p| target_node(p).as_deref() == Some(a.name()))
                .collect();
            Ok((on_a.len() == 1
                && pod_hash(on_a[0]) == second
                && on_a[0].metadata.name.as_deref() != Some(victim.as_str()))
            .then_some(pods.clone()))
        },
    )
    .await?;
    assert!(
        after
            .iter()
            .any(|p| target_node(p).as_deref() == Some(b.name()) && pod_hash(p) == first)
    );
    env.wait_status("ds", "updatedNumberScheduled 1", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.updated_number_scheduled == Some(1))
    })
    .await?;
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn rollback_reuses_the_revision_and_history_is_limited() -> Result<()> {
    // Scenarios 22 and 23.
    let env = Env::new("ds-history").await?;
    let (a, b) = (
        env.node("a", &[], &[]).await?,
        env.node("b", &[], &[]).await?,
    );
    let nodes = [a.name(), b.name()];
    let ctrl = env.start();
    env.create(&env.daemonset("ds", V1, json!({"spec": {"revisionHistoryLimit": 1}})))
        .await?;
    let ha = current_hash(&env, "ds").await?;
    env.wait_one_per_node("ds", &nodes, Some(&ha)).await?;
    env.set_image("ds", V2).await?;
    let hb = current_hash(&env, "ds").await?;
    env.wait_one_per_node("ds", &nodes, Some(&hb)).await?;
    env.set_image("ds", V1).await?;
    let back = current_hash(&env, "ds").await?;
    assert_eq!(back, ha, "rollback finds A's revision");
    let pods = env.wait_one_per_node("ds", &nodes, Some(&ha)).await?;
    for p in pods.values() {
        assert_eq!(label(p, "pod-template-generation"), Some("3"));
    }
    let revs = wait_for(
        "A's revision renumbered 3, two revisions",
        WITHIN,
        || async {
            let revs = env.owned_revisions("ds").await?;
            let a_rev = revs
                .iter()
                .find(|r| rkcm_daemonset::revision::revision_hash(r) == ha);
            Ok((revs.len() == 2 && a_rev.is_some_and(|r| r.revision == Some(3))).then_some(revs))
        },
    )
    .await?;
    assert!(
        revs.iter()
            .any(|r| rkcm_daemonset::revision::revision_hash(r) == hb && r.revision == Some(2))
    );
    // A third template: with the limit of 1 the oldest unused revision goes.
    env.set_image("ds", V3).await?;
    let hc = current_hash(&env, "ds").await?;
    env.wait_one_per_node("ds", &nodes, Some(&hc)).await?;
    wait_for("current + one old revision", WITHIN, || async {
        let revs = env.owned_revisions("ds").await?;
        let hashes: Vec<String> = revs
            .iter()
            .map(|r| rkcm_daemonset::revision::revision_hash(r).to_owned())
            .collect();
        Ok((revs.len() == 2 && hashes.contains(&hc)).then_some(()))
    })
    .await?;
    ctrl.stop().await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn failed_pod_is_replaced_with_an_event() -> Result<()> {
    // Scenario 18.
    crate::lifecycle::terminated_pod_is_replaced(
        "ds-failed",
        1,
        "FailedDaemonPod",
        "will try to kill it",
    )
    .await
}
