//! DaemonSet takeover both ways with the real binaries: DaemonSets run by upstream
//! kube-controller-manager are taken over by rkcm (upstream stopped, rkcm started), then
//! handed back, each manager with only `daemonset-controller` behind its own
//! namespace-scoping proxy. Neither handover creates or deletes a pod or a
//! ControllerRevision (UIDs compared before and after, and a watch on both sees nothing),
//! and the DaemonSets' status stays as it was.
//!
//! Two DaemonSets on three kwok nodes of the test's own: `steady`, settled, and `surge`
//! (`maxSurge: 1, maxUnavailable: 0`) stopped in the middle of a rolling update: its new
//! template carries a scheduling gate, so the surge pod the manager creates beside an old one
//! stays Pending and the rollout waits on it. Each manager then proves it synced (a
//! `revisionHistoryLimit` edit bumps the generation, and it writes `observedGeneration`),
//! nothing changes for a while, and the test lifts the gates one pod at a time: the new
//! manager carries the same rollout (no new revision) to the end, one surge pod at a time,
//! as upstream does. Before handing back, rkcm starts the next rollout (a revision it
//! creates) and stops midway the same way, and upstream finishes it.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rkcm_testkit::harness::{Manager, ManagerKind, pod_image};
use rkcm_testkit::{TestCluster, TestNamespace, holds_for, wait_for};
use serde_json::json;

use crate::rollout_daemonset::counters;
use crate::takeover::{Churn, handed_over};

const CONTROLLERS: &str = "daemonset-controller";
/// The label that puts a node in this test (value: the namespace).
const NODE_LABEL: &str = "rkcm.test/ds-takeover";
const TAINT: &str = "rkcm.test/no-schedule";
const GATE: &str = "rkcm.test/gate";
const HASH_LABEL: &str = "controller-revision-hash";
/// Bound for one step (a rollout of three pods, a status write).
const STEP: Duration = Duration::from_secs(60);
/// How long nothing may change after the new manager has synced.
const QUIET: Duration = Duration::from_secs(3);

fn name(meta: &kube::core::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn app(p: &Pod) -> &str {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app"))
        .map_or("", String::as_str)
}

fn gated(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Pod and ControllerRevision additions and deletions in the namespace, from the moment
/// it starts.
async fn churn(ns: &TestNamespace) -> anyhow::Result<Churn> {
    let mut churn = Churn::default();
    churn.follow(ns.api::<Pod>(), "pod").await?;
    churn
        .follow(ns.api::<ControllerRevision>(), "revision")
        .await?;
    Ok(churn)
}

/// What a handover must leave exactly as it was: every pod (name, UID, node, revision,
/// gate, readiness), every ControllerRevision (name, UID, revision number), and each
/// DaemonSet's status counters.
async fn view(ns: &TestNamespace) -> anyhow::Result<String> {
    let mut s = String::new();
    for d in ns
        .api::<DaemonSet>()
        .list(&ListParams::default())
        .await?
        .items
    {
        let st = d.status.clone().unwrap_or_default();
        let _ = writeln!(s, "ds {}: {}", name(&d.metadata), counters(&st));
    }
    let mut pods = ns.api::<Pod>().list(&ListParams::default()).await?.items;
    pods.sort_by(|a, b| name(&a.metadata).cmp(name(&b.metadata)));
    for p in &pods {
        let _ = writeln!(
            s,
            "pod {} uid={:?} node={:?} hash={:?} image={} gated={} ready={} deleting={}",
            name(&p.metadata),
            p.metadata.uid,
            p.spec.as_ref().and_then(|s| s.node_name.clone()),
            p.metadata.labels.as_ref().and_then(|l| l.get(HASH_LABEL)),
            pod_image(p),
            gated(p),
            ready(p),
            p.metadata.deletion_timestamp.is_some(),
        );
    }
    let mut revs = ns
        .api::<ControllerRevision>()
        .list(&ListParams::default())
        .await?
        .items;
    revs.sort_by(|a, b| name(&a.metadata).cmp(name(&b.metadata)));
    for r in &revs {
        let _ = writeln!(
            s,
            "revision {} uid={:?} revision={:?}",
            name(&r.metadata),
            r.metadata.uid,
            r.revision
        );
    }
    Ok(s)
}

/// The test's three kwok nodes (deleted, after the namespace's pods, by [`cleanup`]).
async fn create_nodes(cluster: &TestCluster, ns: &TestNamespace) -> anyhow::Result<Vec<String>> {
    let api: Api<Node> = Api::all(cluster.client());
    let mut names = Vec::new();
    for i in 0..3 {
        let n = format!("{}-n{i}", ns.name());
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n, "labels": {NODE_LABEL: ns.name(), "kubernetes.io/hostname": n},
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]},
        }))?;
        api.create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("creating node {n}"))?;
        names.push(n);
    }
    Ok(names)
}

/// Pods bound to the test's nodes never finish terminating once the nodes are gone: remove
/// them as the kubelet would (grace period 0), then the nodes.
async fn cleanup(cluster: &TestCluster, ns: &TestNamespace, nodes: &[String]) {
    ns.force_delete_pods().await;
    let api: Api<Node> = Api::all(cluster.client());
    for n in nodes {
        let _ = api.delete(n, &DeleteParams::default()).await;
    }
}

fn daemonset(ds: &str, group: &str, strategy: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": ds},
        "spec": {
            "selector": {"matchLabels": {"app": ds}},
            "updateStrategy": strategy,
            "template": {
                "metadata": {"labels": {"app": ds}},
                "spec": {
                    "nodeSelector": {NODE_LABEL: group},
                    "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": format!("registry.example/{ds}:v1")}],
                },
            },
        },
    })
}

/// A new image for `ds`, its pods gated: the rollout stops at its first surge pod.
async fn start_gated_rollout(ns: &TestNamespace, ds: &str, version: &str) -> anyhow::Result<()> {
    let patch = json!({"spec": {"template": {"spec": {
        "schedulingGates": [{"name": GATE}],
        "containers": [{"name": "main", "image": format!("registry.example/{ds}:{version}")}],
    }}}});
    ns.api::<DaemonSet>()
        .patch(ds, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("rolling {ds} out to {version}"))?;
    Ok(())
}

/// Waits until the DaemonSet's status is of its generation and its live pods are `old` ready
/// pods of image `old_image` plus `new_gated` gated pods of image `new_image` (and nothing
/// else), then until the view holds still.
async fn wait_shape(
    ns: &TestNamespace,
    ds: &str,
    old_image: &str,
    old: usize,
    new_image: &str,
    new_gated: usize,
) -> anyhow::Result<()> {
    let want = format!("{ds}: {old} ready {old_image} pods and {new_gated} gated {new_image} pods");
    wait_for(&want, STEP, || async {
        let d = ns.api::<DaemonSet>().get(ds).await?;
        let observed = d.status.as_ref().and_then(|s| s.observed_generation);
        let pods: Vec<Pod> = ns
            .api::<Pod>()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|p| app(p) == ds)
            .collect();
        let live: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let olds = live
            .iter()
            .filter(|p| pod_image(p) == old_image && ready(p))
            .count();
        let news = live
            .iter()
            .filter(|p| pod_image(p) == new_image && gated(p))
            .count();
        let settled = observed == d.metadata.generation
            && pods.len() == live.len()
            && live.len() == old + new_gated
            && olds == old
            && news == new_gated
            && d.status
                .as_ref()
                .is_some_and(|s| s.number_ready == i32::try_from(old).unwrap_or(0));
        Ok(settled.then_some(()))
    })
    .await?;
    Ok(())
}

/// Bumps every DaemonSet's generation (`revisionHistoryLimit`) and waits until the manager
/// in charge wrote `observedGeneration` for it.
async fn prove_synced(ns: &TestNamespace, limit: i32) -> anyhow::Result<()> {
    let api = ns.api::<DaemonSet>();
    for ds in ["steady", "surge"] {
        let patch = json!({"spec": {"revisionHistoryLimit": limit}});
        api.patch(ds, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    for ds in ["steady", "surge"] {
        wait_for(
            &format!("{ds}: the new manager observing generation (revisionHistoryLimit {limit})"),
            STEP,
            || async {
                let d = api.get(ds).await?;
                let observed = d.status.as_ref().and_then(|s| s.observed_generation);
                Ok((observed == d.metadata.generation).then_some(()))
            },
        )
        .await?;
    }
    Ok(())
}

/// Lifts the gate of `ds`'s pods as they come, until every live pod runs `image` and is
/// ready on each of `nodes` and no other pod is left; the ControllerRevisions stay as they
/// were (no revision is created for a rollout already begun).
async fn finish_rollout(
    ns: &TestNamespace,
    ds: &str,
    image_want: &str,
    nodes: usize,
) -> anyhow::Result<()> {
    let pods = ns.api::<Pod>();
    let revisions = |v: Vec<ControllerRevision>| {
        let mut n: Vec<String> = v.iter().map(|r| name(&r.metadata).to_owned()).collect();
        n.sort();
        n
    };
    let before = revisions(
        ns.api::<ControllerRevision>()
            .list(&ListParams::default())
            .await?
            .items,
    );
    let most = Arc::new(Mutex::new(0usize));
    wait_for(
        &format!("{ds}: the rollout to {image_want} finished"),
        STEP,
        || async {
            let list = pods.list(&ListParams::default()).await?.items;
            let mine: Vec<&Pod> = list.iter().filter(|p| app(p) == ds).collect();
            let surging = mine
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_image(p) == image_want)
                .filter(|p| !ready(p))
                .count();
            if let Ok(mut m) = most.lock() {
                *m = (*m).max(surging);
            }
            for p in mine.iter().filter(|p| gated(p)) {
                let patch = json!({"spec": {"schedulingGates": null}});
                pods.patch(
                    name(&p.metadata),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            }
            let done = mine.len() == nodes
                && mine.iter().all(|p| {
                    pod_image(p) == image_want
                        && ready(p)
                        && p.metadata.deletion_timestamp.is_none()
                });
            Ok(done.then_some(()))
        },
    )
    .await?;
    let after = revisions(
        ns.api::<ControllerRevision>()
            .list(&ListParams::default())
            .await?
            .items,
    );
    if before != after {
        bail!("ControllerRevisions changed while {ds} rolled on: {before:?} -> {after:?}");
    }
    let most = most.lock().map(|m| *m).unwrap_or(0);
    if most > 1 {
        bail!("{ds}: {most} new pods not ready at once, maxSurge is 1");
    }
    Ok(())
}

/// Stops `from`, starts a manager of kind `to`, and checks that the handover creates and
/// deletes nothing and leaves everything as it was.
async fn hand_over(
    cluster: &TestCluster,
    ns: &TestNamespace,
    from: Manager,
    to: ManagerKind,
    limit: i32,
) -> anyhow::Result<Manager> {
    let before = view(ns).await?;
    let churn = churn(ns).await?;
    from.stop_scoped().await?;
    let manager = Manager::start(to, cluster, ns.name(), CONTROLLERS).await?;
    let result = async {
        prove_synced(ns, limit).await?;
        holds_for(
            &format!(
                "no pod or ControllerRevision churn after {} took over",
                to.name()
            ),
            QUIET,
            || async { Ok(churn.seen().is_empty()) },
        )
        .await
        .with_context(|| format!("churn: {:#?}", churn.seen()))?;
        let after = view(ns).await?;
        if before != after {
            bail!(
                "the handover to {} changed things:\n--- before\n{before}+++ after\n{after}",
                to.name()
            );
        }
        Ok(())
    }
    .await;
    handed_over(manager, result)
}

async fn run(cluster: &TestCluster, ns: &TestNamespace, nodes: &[String]) -> anyhow::Result<()> {
    let api = ns.api::<DaemonSet>();
    let mut upstream =
        Manager::start(ManagerKind::Upstream, cluster, ns.name(), CONTROLLERS).await?;
    let setup = async {
        let steady = daemonset("steady", ns.name(), json!({"type": "RollingUpdate"}));
        let surge = daemonset(
            "surge",
            ns.name(),
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
        );
        for d in [steady, surge] {
            api.create(&PostParams::default(), &serde_json::from_value(d)?)
                .await?;
        }
        wait_shape(ns, "steady", "registry.example/steady:v1", 3, "-", 0).await?;
        wait_shape(ns, "surge", "registry.example/surge:v1", 3, "-", 0).await?;
        start_gated_rollout(ns, "surge", "v2").await?;
        wait_shape(
            ns,
            "surge",
            "registry.example/surge:v1",
            3,
            "registry.example/surge:v2",
            1,
        )
        .await
    }
    .await;
    Manager::with_logs(setup, &mut [&mut upstream])
        .context("setting up under upstream kube-controller-manager")?;

    // Upstream -> rkcm, then rkcm finishes upstream's rollout and stops midway in its own.
    let mut rkcm = hand_over(cluster, ns, upstream, ManagerKind::Rkcm, 9).await?;
    let rolled = async {
        finish_rollout(ns, "surge", "registry.example/surge:v2", nodes.len()).await?;
        start_gated_rollout(ns, "surge", "v3").await?;
        wait_shape(
            ns,
            "surge",
            "registry.example/surge:v2",
            3,
            "registry.example/surge:v3",
            1,
        )
        .await
    }
    .await;
    Manager::with_logs(rolled, &mut [&mut rkcm]).context("rkcm carrying the rollout on")?;

    // rkcm -> upstream, which finishes rkcm's rollout.
    let mut upstream = hand_over(cluster, ns, rkcm, ManagerKind::Upstream, 8).await?;
    let finished = finish_rollout(ns, "surge", "registry.example/surge:v3", nodes.len()).await;
    Manager::with_logs(finished, &mut [&mut upstream]).context("upstream finishing the rollout")?;
    upstream.stop_scoped().await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn daemonsets_change_hands_without_churn_steady_and_mid_surge() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("ds-takeover").await?;
    crate::rollout::wait_default_service_account(&ns).await?;
    let nodes = create_nodes(&cluster, &ns).await?;
    let result = run(&cluster, &ns, &nodes).await;
    cleanup(&cluster, &ns, &nodes).await;
    result
}
