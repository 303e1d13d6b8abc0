//! StatefulSet takeover both ways with the real binaries: upstream kube-controller-manager
//! runs a set, the rkcm binary takes over, upstream takes it back (each with only
//! `statefulset-controller`, behind its own namespace-scoping proxy), once with the set
//! settled and once in the middle of a rolling update held by a partition.
//!
//! A handover must create, delete and update no pod, no PersistentVolumeClaim and no
//! ControllerRevision: checked both on the objects (UIDs and resourceVersions before and
//! after) and on the new manager's own writes through its proxy. Each new manager first
//! proves it synced the set: a spec edit outside the template (a generation bump) that it
//! must report as `status.observedGeneration`; then nothing changes for [`QUIET`].
//!
//! The pod template carries `<`, `>` and `&` (Go escapes them in the revision data, so a
//! revision rkcm wrote with other bytes would not be upstream's), and the pods have a claim
//! each, bound by the plane's PersistentVolume binder to test volumes. In the rollout case
//! the partition is lowered after each handover and the rollout must continue exactly as
//! upstream's would: ordinals from the highest down to the partition, one at a time, the
//! pods below the partition untouched, the current revision promoted only at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::ensure;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use rkcm_testkit::harness::{Env, History, Manager, ManagerKind, describe_status};
use rkcm_testkit::{TestVolumes, holds_for, wait_for};
use serde_json::{Value, json};

use crate::rollout::wait_default_service_account;

/// What both managers run.
pub(crate) const STS_CONTROLLERS: &str = "statefulset-controller";
/// An annotation of the pod template that Go's `encoding/json` escapes.
pub(crate) const HTML_NOTE: &str = "a<b>&c \"q\"";
/// Bound for a rollout step or a scale on the kwok nodes.
pub(crate) const STS_WITHIN: Duration = Duration::from_secs(60);
/// How long nothing may change after a new manager has synced.
const QUIET: Duration = Duration::from_secs(3);

pub(crate) const IMAGE_V1: &str = "registry.example/web:v1";
pub(crate) const IMAGE_V2: &str = "registry.example/web:v2";

/// A StatefulSet `name` whose pods land on the kwok nodes (which make them Running and
/// Ready and finish their deletions), one container `app` of `image`, selector and labels
/// `app=<name>`, the [`HTML_NOTE`] annotation in its template, `extra_spec` merged into the
/// spec.
pub(crate) fn sts_manifest(name: &str, replicas: i32, image: &str, extra_spec: Value) -> Value {
    let mut s = rkcm_testkit::builders::statefulset(name, replicas, "app", image);
    rkcm_testkit::harness::merge_json(
        &mut s,
        &json!({"spec": {"template": {
            "metadata": {"annotations": {"note": HTML_NOTE}},
            "spec": {
                "nodeSelector": {"type": "kwok"},
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists",
                                 "effect": "NoSchedule"}],
            },
        }}}),
    );
    if let (Some(spec), Some(extra)) = (s["spec"].as_object_mut(), extra_spec.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    s
}

/// Waits until the set's status satisfies `check`; on timeout the error shows the status.
pub(crate) async fn wait_sts(
    env: &Env,
    name: &str,
    what: &str,
    check: impl Fn(&StatefulSet, &StatefulSetStatus) -> bool,
) -> anyhow::Result<StatefulSet> {
    env.wait_object(
        name,
        what,
        STS_WITHIN,
        |s: &StatefulSet| {
            let st = s.status.clone().unwrap_or_default();
            st.observed_generation == s.metadata.generation && check(s, &st)
        },
        describe_status,
    )
    .await
}

/// Waits until the set has observed its generation and all `replicas` pods are ready and on
/// one revision, which is both the current and the update revision.
pub(crate) async fn wait_sts_settled(
    env: &Env,
    name: &str,
    replicas: i32,
) -> anyhow::Result<StatefulSet> {
    wait_sts(env, name, &format!("settled at {replicas}"), |_, st| {
        st.replicas == replicas
            && st.ready_replicas == Some(replicas)
            && st.available_replicas == Some(replicas)
            && st.updated_replicas == Some(replicas)
            && st.current_replicas == Some(replicas)
            && st.current_revision == st.update_revision
    })
    .await
}

/// Every pod, claim and revision of the namespace: kind and name → (UID, resourceVersion).
type Objects = BTreeMap<String, (String, String)>;

async fn objects(env: &Env) -> anyhow::Result<Objects> {
    fn add<K: kube::Resource>(out: &mut Objects, kind: &str, items: Vec<K>) {
        for o in items {
            let m = o.meta();
            out.insert(
                format!("{kind} {}", m.name.clone().unwrap_or_default()),
                (
                    m.uid.clone().unwrap_or_default(),
                    m.resource_version.clone().unwrap_or_default(),
                ),
            );
        }
    }
    let mut out = Objects::new();
    add(&mut out, "pod", env.list::<Pod>().await?);
    add(
        &mut out,
        "claim",
        env.list::<PersistentVolumeClaim>().await?,
    );
    add(
        &mut out,
        "revision",
        env.list::<ControllerRevision>().await?,
    );
    Ok(out)
}

/// What changed between two [`objects`] snapshots, one line each.
fn changes(before: &Objects, after: &Objects) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in before {
        match after.get(k) {
            None => out.push(format!("{k}: deleted")),
            Some(w) if w.0 != v.0 => out.push(format!("{k}: replaced")),
            Some(w) if w != v => out.push(format!("{k}: updated (rv {} -> {})", v.1, w.1)),
            Some(_) => {}
        }
    }
    for k in after.keys().filter(|k| !before.contains_key(*k)) {
        out.push(format!("{k}: created"));
    }
    out
}

/// The manager's writes through its proxy to pods, claims and revisions, from index `from`
/// of its journal on.
pub(crate) fn object_writes(m: &Manager, from: usize) -> Vec<String> {
    m.writes()
        .into_iter()
        .skip(from)
        .filter(|w| {
            ["/pods", "/persistentvolumeclaims", "/controllerrevisions"]
                .iter()
                .any(|r| w.path.contains(r))
        })
        .map(|w| format!("{} {} -> {}", w.method, w.path, w.status))
        .collect()
}

/// Waits until every claim of the namespace is bound (the binder's writes are over).
async fn wait_claims_bound(env: &Env, n: usize) -> anyhow::Result<()> {
    wait_for(&format!("{n} claims bound"), STS_WITHIN, || async {
        let claims = env.list::<PersistentVolumeClaim>().await?;
        let bound = claims
            .iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
            .count();
        Ok((claims.len() == n && bound == n).then_some(()))
    })
    .await
}

/// Starts `kind` on the namespace, proves it synced the set (it reports a new generation
/// made by editing `minReadySeconds`), and fails if it created, deleted or updated a pod,
/// claim or revision by then or within [`QUIET`] after.
async fn take_over(env: &Env, kind: ManagerKind, set: &str) -> anyhow::Result<Manager> {
    let before = objects(env).await?;
    let mut m = Manager::start(kind, &env.cluster, env.name(), STS_CONTROLLERS).await?;
    let result = async {
        let s: StatefulSet = env.get(set).await?;
        let mrs = s.spec.min_ready_seconds.unwrap_or(0);
        env.merge::<StatefulSet>(set, json!({"spec": {"minReadySeconds": 1 - mrs.min(1)}}))
            .await?;
        wait_sts(
            env,
            set,
            &format!("{} observed the edit", kind.name()),
            |_, _| true,
        )
        .await?;
        holds_for(
            &format!("{} changes no pod, claim or revision", kind.name()),
            QUIET,
            || async {
                let now = objects(env).await?;
                let changed = changes(&before, &now);
                ensure!(changed.is_empty(), "after the handover: {changed:?}");
                Ok(true)
            },
        )
        .await?;
        let writes = object_writes(&m, 0);
        ensure!(
            writes.is_empty(),
            "{} wrote pods, claims or revisions on taking over: {writes:?}",
            kind.name()
        );
        m.check_running()
    }
    .await;
    Manager::with_logs(result, &mut [&mut m])?;
    Ok(m)
}

fn pod_uids(pods: &[Pod]) -> BTreeMap<String, String> {
    pods.iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap_or_default(),
                p.metadata.uid.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn revision_label(p: &Pod) -> &str {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("controller-revision-hash"))
        .map_or("", String::as_str)
}

/// The set's pods by name: their revision label, sorted.
async fn pod_revisions(env: &Env) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(env
        .list::<Pod>()
        .await?
        .iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap_or_default(),
                revision_label(p).to_owned(),
            )
        })
        .collect())
}

/// Names of the pods `hist` saw appear with a UID other than the one in `known` (new or
/// recreated), in creation order.
fn recreated_after(
    hist: &History<Pod>,
    known: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<String>> {
    let mut seen: BTreeMap<String, String> = known.clone();
    let mut out = Vec::new();
    for s in hist.seen()? {
        if s.is_deleted() {
            continue;
        }
        let p = s.object();
        let name = p.metadata.name.clone().unwrap_or_default();
        let uid = p.metadata.uid.clone().unwrap_or_default();
        if seen.get(&name) != Some(&uid) {
            seen.insert(name.clone(), uid);
            out.push(name);
        }
    }
    Ok(out)
}

/// Settled handover, both ways.
async fn steady(env: &Env) -> anyhow::Result<()> {
    let volumes = TestVolumes::create(&env.cluster, 3, "1Gi").await?;
    let mut up = Manager::start(
        ManagerKind::Upstream,
        &env.cluster,
        env.name(),
        STS_CONTROLLERS,
    )
    .await?;
    let built = async {
        env.create::<StatefulSet>(sts_manifest(
            "web",
            3,
            IMAGE_V1,
            json!({"volumeClaimTemplates": [volumes.claim_template("data", "1Gi")]}),
        ))
        .await?;
        wait_sts_settled(env, "web", 3).await?;
        wait_claims_bound(env, 3).await
    }
    .await;
    Manager::with_logs(built, &mut [&mut up])?;
    let by_upstream: StatefulSet = env.get("web").await?;
    up.stop_scoped().await?;

    let rkcm = take_over(env, ManagerKind::Rkcm, "web").await?;
    let st = env
        .get::<StatefulSet>("web")
        .await?
        .status
        .unwrap_or_default();
    let was = by_upstream.status.unwrap_or_default();
    ensure!(
        (
            st.current_revision.as_ref(),
            st.update_revision.as_ref(),
            st.collision_count
        ) == (
            was.current_revision.as_ref(),
            was.update_revision.as_ref(),
            was.collision_count
        ),
        "rkcm's status {st:?} names other revisions than upstream's {was:?}"
    );
    rkcm.stop_scoped().await?;

    let up = take_over(env, ManagerKind::Upstream, "web").await?;
    up.stop_scoped().await
}

/// Handover in the middle of a partitioned rolling update, both ways; the rollout continues
/// after each.
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn mid_rollout(env: &Env) -> anyhow::Result<()> {
    let volumes = TestVolumes::create(&env.cluster, 5, "1Gi").await?;
    let partition = |p: i32| json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": p}}});
    let mut up = Manager::start(
        ManagerKind::Upstream,
        &env.cluster,
        env.name(),
        STS_CONTROLLERS,
    )
    .await?;
    let mut spec = partition(3);
    spec["volumeClaimTemplates"] = json!([volumes.claim_template("data", "1Gi")]);
    let built = async {
        env.create::<StatefulSet>(sts_manifest("db", 5, IMAGE_V1, spec))
            .await?;
        wait_sts_settled(env, "db", 5).await?;
        wait_claims_bound(env, 5).await?;
        env.merge::<StatefulSet>(
            "db",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": IMAGE_V2}]}}}}),
        )
        .await?;
        wait_sts(env, "db", "upstream updated ordinals 4 and 3", |_, st| {
            st.updated_replicas == Some(2)
                && st.current_replicas == Some(3)
                && st.ready_replicas == Some(5)
                && st.current_revision != st.update_revision
        })
        .await
    }
    .await;
    let held = Manager::with_logs(built, &mut [&mut up])?;
    let held = held.status.unwrap_or_default();
    up.stop_scoped().await?;
    let revs = pod_revisions(env).await?;
    let (v1, v2) = (
        revs.get("db-0").cloned().unwrap_or_default(),
        revs.get("db-4").cloned().unwrap_or_default(),
    );
    ensure!(
        v1 != v2 && revs.get("db-3") == Some(&v2) && revs.get("db-2") == Some(&v1),
        "pod revisions under partition 3: {revs:?}"
    );

    // rkcm takes over the held rollout, then lowers the partition to 1: ordinals 2 then 1.
    let rkcm = take_over(env, ManagerKind::Rkcm, "db").await?;
    let hist = History::start(env.api::<Pod>()).await?;
    let known = pod_uids(&env.list::<Pod>().await?);
    env.merge::<StatefulSet>("db", json!({"spec": partition(1)}))
        .await?;
    let mid = wait_sts(env, "db", "rkcm updated ordinals 2 and 1", |_, st| {
        st.updated_replicas == Some(4)
            && st.current_replicas == Some(1)
            && st.ready_replicas == Some(5)
    })
    .await?
    .status
    .unwrap_or_default();
    ensure!(
        (mid.current_revision.as_ref(), mid.update_revision.as_ref())
            == (
                held.current_revision.as_ref(),
                held.update_revision.as_ref()
            ),
        "rkcm changed the revisions of a partitioned rollout: {mid:?} (upstream: {held:?})"
    );
    let order = recreated_after(&hist, &known)?;
    ensure!(
        order == ["db-2", "db-1"],
        "rkcm recreated {order:?}, want db-2 then db-1"
    );
    hist.assert_one_per_name()?;
    let revs = pod_revisions(env).await?;
    ensure!(
        revs.get("db-0") == Some(&v1)
            && ["db-1", "db-2", "db-3", "db-4"]
                .iter()
                .all(|n| revs.get(*n) == Some(&v2)),
        "pod revisions under partition 1: {revs:?}"
    );
    rkcm.stop_scoped().await?;

    // Upstream takes the rollout back and finishes it (partition 0).
    let up = take_over(env, ManagerKind::Upstream, "db").await?;
    let hist = History::start(env.api::<Pod>()).await?;
    let known = pod_uids(&env.list::<Pod>().await?);
    env.merge::<StatefulSet>("db", json!({"spec": partition(0)}))
        .await?;
    let done = wait_sts_settled(env, "db", 5)
        .await?
        .status
        .unwrap_or_default();
    ensure!(
        done.current_revision == held.update_revision,
        "upstream promoted {:?}, want {:?}",
        done.current_revision,
        held.update_revision
    );
    let order = recreated_after(&hist, &known)?;
    ensure!(order == ["db-0"], "upstream recreated {order:?}, want db-0");
    let revisions = env.list::<ControllerRevision>().await?;
    ensure!(
        revisions.len() == 2 && done.collision_count.unwrap_or(0) == 0,
        "revisions after the rollout: {:?}, collisionCount {:?}",
        revisions
            .iter()
            .map(|r| r.metadata.name.clone())
            .collect::<Vec<_>>(),
        done.collision_count
    );
    up.stop_scoped().await
}

async fn run(
    prefix: &str,
    body: impl AsyncFnOnce(&Env) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let env = Env::new(prefix).await?;
    let result = async {
        wait_default_service_account(&env.ns).await?;
        body(&env).await
    }
    .await;
    env.finish(result).await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn statefulset_changes_hands_without_churn() -> anyhow::Result<()> {
    run("sts-takeover", steady).await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn statefulset_rollout_with_partition_continues_across_handovers() -> anyhow::Result<()> {
    run("sts-takeover-roll", mid_rollout).await
}

#[test]
fn changes_name_what_happened() {
    let before: Objects = [
        ("pod a".to_string(), ("1".to_string(), "10".to_string())),
        ("pod b".to_string(), ("2".to_string(), "11".to_string())),
        ("pod c".to_string(), ("3".to_string(), "12".to_string())),
    ]
    .into();
    let mut after = before.clone();
    after.remove("pod a");
    after.insert("pod b".into(), ("9".into(), "20".into()));
    after.insert("pod c".into(), ("3".into(), "13".into()));
    after.insert("pod d".into(), ("4".into(), "14".into()));
    assert_eq!(
        changes(&before, &after),
        vec![
            "pod a: deleted",
            "pod b: replaced",
            "pod c: updated (rv 12 -> 13)",
            "pod d: created"
        ]
    );
    assert!(changes(&before, &before).is_empty());
}
