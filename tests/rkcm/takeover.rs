//! Takeover without churn, both ways: Deployments rolled out by upstream
//! kube-controller-manager are taken over by rkcm (upstream stopped, rkcm started), then
//! handed back to upstream, and neither handover creates or deletes a pod or a ReplicaSet or
//! changes a ReplicaSet's size.
//!
//! The Deployments cover what a handover can trip on: a settled one, one with several
//! revisions of history, one stuck mid-rollout with two active ReplicaSets (its new pods can
//! never be scheduled), and one paused in that state. Before handing back, rkcm rolls one
//! Deployment out itself, so upstream must adopt a new ReplicaSet that carries rkcm's
//! pod-template-hash (found by template equality) and create nothing.
//!
//! Pods and ReplicaSets of the namespace are watched from before the old manager stops
//! until the new one has demonstrably synced: every Deployment got a harmless annotation edit
//! (a generation bump) and the new manager observed it and copied the annotation to the
//! Deployment's new ReplicaSet; a bare ReplicaSet's template edit was observed by its
//! ReplicaSet controller; then nothing changes for a while longer. Each manager runs behind
//! its own namespace-scoping proxy (see `rollout.rs`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use rkcm_testkit::{TestCluster, TestNamespace, holds_for, wait_for};

use crate::rollout::{
    DESIRED, HASH_LABEL, Kind, Kubectl, MAX, Manager, REVISION, REVISION_HISTORY, ROLLOUT,
    annotation, deployment_manifest, read_state, start_manager, strip_hash, subject,
    wait_default_service_account, wait_observed, wait_settled,
};

/// The annotation the handover edits to prove the new manager synced.
const HANDOVER: &str = "rkcm.test/handover";
/// How long nothing may change after the new manager has synced.
const QUIET: Duration = Duration::from_secs(3);

/// Changes recorded from watches of one namespace (additions, deletions, deletions marked,
/// and what a test adds), from the moment each watch starts.
#[derive(Default)]
pub(crate) struct Churn {
    seen: Arc<Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Churn {
    /// Records the `what`s of `api` added, deleted or marked for deletion.
    pub(crate) async fn follow<K>(&mut self, api: Api<K>, what: &'static str) -> anyhow::Result<()>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        let list = api.list(&ListParams::default()).await?;
        let rv = list.metadata.resource_version.unwrap_or_default();
        let mut stream = api
            .watch(&WatchParams::default().timeout(290), &rv)
            .await?
            .boxed();
        let log = self.log();
        self.spawn(async move {
            loop {
                let line = match stream.try_next().await {
                    Ok(Some(WatchEvent::Added(o))) => format!("{what} {} ADDED", name(o.meta())),
                    Ok(Some(WatchEvent::Deleted(o))) => {
                        format!("{what} {} DELETED", name(o.meta()))
                    }
                    Ok(Some(WatchEvent::Modified(o))) if o.meta().deletion_timestamp.is_some() => {
                        format!("{what} {} marked for deletion", name(o.meta()))
                    }
                    Ok(Some(WatchEvent::Modified(_) | WatchEvent::Bookmark(_))) => continue,
                    Ok(Some(WatchEvent::Error(e))) => format!("{what} watch error: {e:?}"),
                    Ok(None) => format!("{what} watch ended"),
                    Err(e) => format!("{what} watch failed: {e}"),
                };
                let end = line.contains(" watch ");
                if let Ok(mut s) = log.lock() {
                    s.push(line);
                }
                if end {
                    return;
                }
            }
        });
        Ok(())
    }

    /// Where a recording task adds its lines.
    pub(crate) fn log(&self) -> Arc<Mutex<Vec<String>>> {
        self.seen.clone()
    }

    /// Runs a recording task until the churn is dropped.
    pub(crate) fn spawn(&mut self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.push(tokio::spawn(task));
    }

    pub(crate) fn seen(&self) -> Vec<String> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The outcome of a handover to `manager`: `result`, unless the manager has exited or tried
/// to write outside its namespace; a failure carries the manager's log and writes.
pub(crate) fn handed_over(
    mut manager: Manager,
    result: anyhow::Result<()>,
) -> anyhow::Result<Manager> {
    let result = result.and_then(|()| manager.check_running_in_namespace());
    let writes = manager.proxy().writes();
    let to = manager.kind();
    Manager::with_logs(result, &mut [&mut manager])
        .with_context(|| format!("handover to {} (its writes: {writes:#?})", to.name()))?;
    Ok(manager)
}

/// Records pod and ReplicaSet churn in one namespace: pods added, deleted or marked for
/// deletion; ReplicaSets added, deleted, marked for deletion or resized.
async fn churn_watch(ns: &TestNamespace) -> anyhow::Result<Churn> {
    let mut churn = Churn::default();
    churn.follow(ns.api::<Pod>(), "pod").await?;
    let rss = ns.api::<ReplicaSet>();
    let list = rss.list(&ListParams::default()).await?;
    let sizes: BTreeMap<String, Option<i32>> = list
        .items
        .iter()
        .map(|rs| {
            (
                rs.metadata.name.clone().unwrap_or_default(),
                rs.spec.replicas,
            )
        })
        .collect();
    let rv = list.metadata.resource_version.unwrap_or_default();
    let rs_stream = rss
        .watch(&WatchParams::default().timeout(290), &rv)
        .await?
        .boxed();

    let log = churn.log();
    churn.spawn(async move {
        let mut stream = rs_stream;
        let mut sizes = sizes;
        loop {
            let line = match stream.try_next().await {
                Ok(Some(WatchEvent::Added(rs))) => format!(
                    "rs {} ADDED (replicas {:?})",
                    name(&rs.metadata),
                    rs.spec.replicas
                ),
                Ok(Some(WatchEvent::Deleted(rs))) => {
                    format!("rs {} DELETED", name(&rs.metadata))
                }
                Ok(Some(WatchEvent::Modified(rs))) => {
                    let n = name(&rs.metadata).to_owned();
                    let before = sizes.insert(n.clone(), rs.spec.replicas).flatten();
                    if rs.metadata.deletion_timestamp.is_some() {
                        format!("rs {n} marked for deletion")
                    } else if before != rs.spec.replicas {
                        format!("rs {n} spec.replicas {before:?} -> {:?}", rs.spec.replicas)
                    } else {
                        continue;
                    }
                }
                Ok(Some(WatchEvent::Bookmark(_))) => continue,
                Ok(Some(WatchEvent::Error(e))) => format!("rs watch error: {e:?}"),
                Ok(None) => "rs watch ended".to_owned(),
                Err(e) => format!("rs watch failed: {e}"),
            };
            let end = line.starts_with("rs watch");
            if let Ok(mut s) = log.lock() {
                s.push(line);
            }
            if end {
                return;
            }
        }
    });
    Ok(churn)
}

fn name(meta: &kube::core::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// Why the Deployment is not quiet yet: the manager observed its generation, each
/// ReplicaSet has the pods it wants (running or not) and reports its generation, sizes are
/// as `sizes` (by revision order), and the Deployment's status adds up. Unlike a settled
/// rollout, pods need not be available (the stuck Deployments' new pods never schedule).
fn unquiet(d: &Deployment, rss: &[ReplicaSet], sizes: &[i32]) -> Option<String> {
    let st = d.status.clone().unwrap_or_default();
    if st.observed_generation < d.metadata.generation {
        return Some("observedGeneration behind".into());
    }
    let have: Vec<i32> = rss.iter().map(|rs| rs.spec.replicas.unwrap_or(1)).collect();
    if have != sizes {
        return Some(format!("rs sizes {have:?}, want {sizes:?}"));
    }
    let (mut replicas, mut available) = (0, 0);
    for rs in rss {
        let rst = rs.status.clone().unwrap_or_default();
        if rst.observed_generation < rs.metadata.generation
            || Some(rst.replicas) != rs.spec.replicas
            || rst.terminating_replicas.unwrap_or(0) != 0
        {
            return Some(format!("rs {} status {rst:?}", name(&rs.metadata)));
        }
        replicas += rst.replicas;
        available += rst.available_replicas.unwrap_or(0);
    }
    if st.replicas.unwrap_or(0) != replicas || st.available_replicas.unwrap_or(0) != available {
        return Some(format!("deployment status {st:?}"));
    }
    None
}

async fn wait_quiet(
    ns: &TestNamespace,
    name: &str,
    sizes: &[i32],
) -> anyhow::Result<(Deployment, Vec<ReplicaSet>)> {
    wait_for(
        &format!("deployment {name} to be quiet at {sizes:?}"),
        ROLLOUT,
        || async {
            let (d, rss) = read_state(ns, name).await?;
            match unquiet(&d, &rss, sizes) {
                None => Ok(Some((d, rss))),
                Some(why) => Err(anyhow::anyhow!(why)),
            }
        },
    )
    .await
}

/// What a handover must leave exactly as it was, per Deployment: its ReplicaSets (by name
/// and UID), their sizes and revision bookkeeping, and the Deployment's status and
/// conditions (without times).
fn view(d: &Deployment, rss: &[ReplicaSet]) -> String {
    let st = d.status.clone().unwrap_or_default();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "deployment {} paused={} revision={:?} replicas={:?} updated={:?} ready={:?} available={:?} unavailable={:?} collisionCount={:?}",
        name(&d.metadata),
        d.spec.paused.unwrap_or(false),
        annotation(&d.metadata, REVISION),
        st.replicas,
        st.updated_replicas,
        st.ready_replicas,
        st.available_replicas,
        st.unavailable_replicas,
        st.collision_count,
    );
    for c in st.conditions.iter().flatten() {
        let _ = writeln!(
            s,
            "  condition {:?} {:?} {:?} {:?}",
            c.type_, c.status, c.reason, c.message
        );
    }
    for rs in rss {
        let rst = rs.status.clone().unwrap_or_default();
        let _ = writeln!(
            s,
            "  rs {} uid={:?} hash={:?} spec.replicas={:?} replicas={} available={:?} revision={:?} history={:?} desired={:?} max={:?}",
            name(&rs.metadata),
            rs.metadata.uid,
            rs.metadata.labels.as_ref().and_then(|l| l.get(HASH_LABEL)),
            rs.spec.replicas,
            rst.replicas,
            rst.available_replicas,
            annotation(&rs.metadata, REVISION),
            annotation(&rs.metadata, REVISION_HISTORY),
            annotation(&rs.metadata, DESIRED),
            annotation(&rs.metadata, MAX),
        );
    }
    s
}

/// The Deployments of the test and the ReplicaSet sizes each settles at.
struct Fleet {
    names: Vec<(&'static str, Vec<i32>)>,
}

impl Fleet {
    async fn views(&self, ns: &TestNamespace) -> anyhow::Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for (n, sizes) in &self.names {
            let (d, rss) = wait_quiet(ns, n, sizes).await?;
            out.insert((*n).to_owned(), view(&d, &rss));
        }
        Ok(out)
    }
}

/// A bare ReplicaSet with no pods: editing its template annotation bumps its generation,
/// and a live ReplicaSet controller answers with `status.observedGeneration`.
const SENTINEL: &str = "sentinel";

async fn create_sentinel(k: &Kubectl) -> anyhow::Result<()> {
    let rs = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": SENTINEL},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": SENTINEL}},
            "template": {
                "metadata": {"labels": {"app": SENTINEL}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/sentinel:v1"}]},
            },
        },
    });
    k.run(&["create", "-f", "-"], Some(&rs.to_string()))
        .await
        .and_then(|o| {
            if o.code == 0 {
                Ok(())
            } else {
                bail!("creating the sentinel ReplicaSet: {}", o.stderr)
            }
        })
}

/// Waits until the sentinel's generation is observed.
async fn wait_sentinel(ns: &TestNamespace) -> anyhow::Result<()> {
    let api = ns.api::<ReplicaSet>();
    wait_for(
        "the ReplicaSet controller to observe the sentinel's generation",
        ROLLOUT,
        || async {
            let rs = api.get(SENTINEL).await?;
            let observed = rs.status.as_ref().and_then(|s| s.observed_generation);
            Ok((observed == rs.metadata.generation).then_some(()))
        },
    )
    .await
}

/// Proves the manager now in charge has synced: each Deployment's annotation edit is
/// observed and copied to its new ReplicaSet (and to no old one), and the sentinel's
/// template edit is observed.
async fn prove_synced(
    ns: &TestNamespace,
    k: &Kubectl,
    fleet: &Fleet,
    round: &str,
) -> anyhow::Result<()> {
    let value = format!("{HANDOVER}={round}");
    for (n, _) in &fleet.names {
        k.ok(&[
            "annotate",
            &format!("deployment/{n}"),
            &value,
            "--overwrite",
        ])
        .await?;
    }
    let patch =
        serde_json::json!({"spec": {"template": {"metadata": {"annotations": {HANDOVER: round}}}}});
    k.ok(&["patch", "rs", SENTINEL, "-p", &patch.to_string()])
        .await?;
    for (n, _) in &fleet.names {
        wait_observed(ns, n).await?;
        wait_for(
            &format!("{n}: the {HANDOVER} annotation on its new ReplicaSet only"),
            ROLLOUT,
            || async {
                let (d, rss) = read_state(ns, n).await?;
                let template = strip_hash(serde_json::to_value(&d.spec.template)?);
                let mut ok = true;
                for rs in &rss {
                    let is_new =
                        strip_hash(serde_json::to_value(rs.spec.template.as_ref())?) == template;
                    let has = annotation(&rs.metadata, HANDOVER) == Some(round);
                    ok &= has == is_new;
                }
                Ok(ok.then_some(()))
            },
        )
        .await?;
    }
    wait_sentinel(ns).await
}

/// Stops `from`, starts a manager of kind `to`, and checks that the handover causes no
/// churn and leaves every Deployment exactly as it was.
async fn hand_over(
    cluster: &TestCluster,
    ns: &TestNamespace,
    k: &Kubectl,
    fleet: &Fleet,
    from: Manager,
    to: Kind,
    round: &str,
) -> anyhow::Result<Manager> {
    let before = fleet.views(ns).await?;
    let churn = churn_watch(ns).await?;
    from.stop().await?;
    let manager = start_manager(to, cluster, ns.name()).await?;
    let result = async {
        prove_synced(ns, k, fleet, round).await?;
        holds_for(
            &format!("no pod or ReplicaSet churn after {} took over", to.name()),
            QUIET,
            || async { Ok(churn.seen().is_empty()) },
        )
        .await
        .with_context(|| format!("churn: {:#?}", churn.seen()))?;
        let after = fleet.views(ns).await?;
        if std::env::var_os("RKCM_PARITY_PRINT").is_some() {
            for v in after.values() {
                eprint!("after handover to {}:\n{v}", to.name());
            }
        }
        let mut diff = String::new();
        for (n, b) in &before {
            let a = after.get(n).map_or("<missing>", String::as_str);
            if a != b {
                let _ = writeln!(diff, "--- before\n{b}+++ after\n{a}");
            }
        }
        let churn_seen = churn.seen();
        if !churn_seen.is_empty() {
            bail!(
                "churn during the handover to {}: {churn_seen:#?}",
                to.name()
            );
        }
        if !diff.is_empty() {
            bail!("the handover to {} changed Deployments:\n{diff}", to.name());
        }
        Ok(())
    }
    .await;
    handed_over(manager, result)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn deployments_change_hands_without_churn() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("deploy-takeover").await?;
    wait_default_service_account(&ns).await?;
    let k = Kubectl::new(&cluster, ns.name())?;
    let mut upstream = start_manager(Kind::Upstream, &cluster, ns.name()).await?;
    let setup = Manager::with_logs(setup(&ns, &k).await, &mut [&mut upstream])
        .context("setting up under upstream kube-controller-manager")?;

    // Upstream -> rkcm.
    let fleet = setup;
    let mut rkcm = hand_over(&cluster, &ns, &k, &fleet, upstream, subject(), "1").await?;

    // rkcm in charge: it rolls `steady` out to v2 (a new RS with rkcm's hash).
    let rolled = async {
        k.ok(&[
            "set",
            "image",
            "deployment/steady",
            "app=registry.example/steady:v2",
        ])
        .await?;
        let (_, rss) = wait_settled(&ns, "steady").await?;
        let sizes: Vec<i32> = rss.iter().map(|rs| rs.spec.replicas.unwrap_or(1)).collect();
        if sizes != [0, 3] {
            bail!("steady after rkcm's rollout: sizes {sizes:?}");
        }
        Ok(())
    }
    .await;
    Manager::with_logs(rolled, &mut [&mut rkcm]).context("rkcm rolling out steady v2")?;
    let mut fleet = fleet;
    for (n, sizes) in &mut fleet.names {
        if *n == "steady" {
            *sizes = vec![0, 3];
        }
    }

    // rkcm -> upstream.
    let mut upstream = hand_over(&cluster, &ns, &k, &fleet, rkcm, Kind::Upstream, "2").await?;

    // Upstream really is in charge again, and keeps rkcm's ReplicaSet as the new one.
    // The churn watch, which saw nothing during the handovers, sees this scale-up: exactly
    // one resize and one new pod.
    let scaled = async {
        let (_, before) = read_state(&ns, "steady").await?;
        let churn = churn_watch(&ns).await?;
        k.ok(&["scale", "deployment/steady", "--replicas=4"])
            .await?;
        let (_, after) = wait_settled(&ns, "steady").await?;
        let names = |rss: &[ReplicaSet]| -> Vec<String> {
            rss.iter().map(|rs| name(&rs.metadata).to_owned()).collect()
        };
        if names(&before) != names(&after) {
            bail!(
                "upstream replaced ReplicaSets: {:?} -> {:?}",
                names(&before),
                names(&after)
            );
        }
        let new_rs = names(&after).pop().unwrap_or_default();
        let seen = churn.seen();
        let resized = format!("rs {new_rs} spec.replicas Some(3) -> Some(4)");
        let added = seen
            .iter()
            .filter(|l| l.starts_with("pod ") && l.ends_with(" ADDED"));
        if seen.iter().filter(|l| **l == resized).count() != 1
            || added.count() != 1
            || seen.len() != 2
        {
            bail!("scale 3 -> 4 of steady: expected `{resized}` and one pod ADDED, saw {seen:#?}");
        }
        Ok(())
    }
    .await;
    Manager::with_logs(scaled, &mut [&mut upstream])
        .context("upstream scaling steady after handback")?;
    // Each manager ran alone: rkcm never saw the other's writes as made beside it.
    let events = crate::handover::other_manager_events(&ns).await?;
    anyhow::ensure!(
        events.is_empty(),
        "OtherControllerManager events: {events:#?}"
    );
    Ok(())
}

/// Under upstream: the four Deployments and the sentinel, each waited for.
async fn setup(ns: &TestNamespace, k: &Kubectl) -> anyhow::Result<Fleet> {
    let create = |name: &str, replicas: i32, extra: serde_json::Value| {
        let m = deployment_manifest(
            name,
            replicas,
            &format!("registry.example/{name}:v1"),
            extra,
        );
        let k = k.clone();
        async move {
            let o = k.run(&["create", "-f", "-"], Some(&m.to_string())).await?;
            if o.code != 0 {
                bail!("creating a deployment: {}", o.stderr);
            }
            anyhow::Ok(())
        }
    };
    let stuck_strategy = serde_json::json!({
        "strategy": {"type": "RollingUpdate",
                     "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
    });
    create("steady", 3, serde_json::json!({})).await?;
    create("history", 2, serde_json::json!({})).await?;
    create("midway", 4, stuck_strategy.clone()).await?;
    create("paused", 4, stuck_strategy).await?;
    create_sentinel(k).await?;
    for n in ["steady", "history", "midway", "paused"] {
        wait_settled(ns, n).await?;
    }
    for v in ["v2", "v3"] {
        k.ok(&[
            "set",
            "image",
            "deployment/history",
            &format!("app=registry.example/history:{v}"),
        ])
        .await?;
        wait_settled(ns, "history").await?;
    }
    // v2 of these can never be scheduled: the rollout stops at old 3 / new 2
    // (maxSurge 1, maxUnavailable 1 of 4).
    let unschedulable = serde_json::json!({"spec": {"template": {"spec": {
        "nodeSelector": {"type": "nowhere"},
        "containers": [{"name": "app", "image": "registry.example/stuck:v2"}],
    }}}});
    for n in ["midway", "paused"] {
        k.ok(&[
            "patch",
            &format!("deployment/{n}"),
            "-p",
            &unschedulable.to_string(),
        ])
        .await?;
    }
    for n in ["midway", "paused"] {
        wait_quiet(ns, n, &[3, 2]).await?;
    }
    k.ok(&["rollout", "pause", "deployment/paused"]).await?;
    wait_observed(ns, "paused").await?;
    wait_sentinel(ns).await?;
    let fleet = Fleet {
        names: vec![
            ("steady", vec![3]),
            ("history", vec![0, 0, 2]),
            ("midway", vec![3, 2]),
            ("paused", vec![3, 2]),
        ],
    };
    // The paused one reports it before anything is handed over.
    let d = ns.api::<Deployment>().get("paused").await?;
    let reason = d
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_.as_deref() == Some("Progressing"))
        .and_then(|c| c.reason.clone());
    if reason.as_deref() != Some("DeploymentPaused") {
        bail!("paused deployment's Progressing reason: {reason:?}");
    }
    Ok(fleet)
}
