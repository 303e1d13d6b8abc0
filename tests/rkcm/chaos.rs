//! The short fault suite (issue 16; the long one is `make chaos`): the rkcm binary, scoped to
//! one namespace, runs the ReplicaSet, Deployment, StatefulSet and Job controllers under
//! churn (a Deployment scaled and rolled, a ReplicaSet scaled, pods deleted a few times a
//! second, an Indexed Job running on the kwok nodes) while it is SIGKILLed and restarted
//! three times and its pod watch lags for a while; a fourth kill comes right after a last
//! rollout and scale, and everything must converge after it. The testkit's invariant watcher
//! (`rkcm_testkit::invariants`) runs from before the first object to after convergence:
//! no violation may appear, and everything converges after the last fault.
//!
//! A third test rejects pod creates by admission while the ReplicaSet keeps changing, and
//! requires creates to resume soon after the rejection ends (no backoff inflation).
//!
//! A second test injects violations (no controller running: the test itself creates a pod
//! too many for a ReplicaSet and force-deletes a running pod) and requires the watcher to
//! report both: the suite can fail.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use rkcm_testkit::harness::{Env, Manager, ManagerKind, is_active, name_of};
use rkcm_testkit::invariants::watch::{InvariantWatcher, Report, Scope};
use rkcm_testkit::invariants::{Config, Invariant};
use rkcm_testkit::wait_for;
use serde_json::{Value, json};

use crate::rollout::{deployment_manifest, wait_default_service_account};
use crate::statefulset_takeover::sts_manifest;

const CONTROLLERS: &str =
    "replicaset-controller,deployment-controller,statefulset-controller,job-controller";
/// How long the churn (and the faults within it) lasts.
const CHURN: Duration = Duration::from_secs(32);
/// Kill and restart rkcm at these offsets into the churn.
const KILLS: [Duration; 3] = [
    Duration::from_secs(6),
    Duration::from_secs(14),
    Duration::from_secs(24),
];
/// rkcm's pod watch lags by [`LAG`] between these offsets.
const LAG_FROM: Duration = Duration::from_secs(10);
const LAG_UNTIL: Duration = Duration::from_secs(22);
const LAG: Duration = Duration::from_secs(3);
/// Convergence after the last fault.
const CONVERGE: Duration = Duration::from_secs(45);
/// How far one watch may lag another in the invariant watcher.
const GRACE: jiff::SignedDuration = jiff::SignedDuration::from_secs(2);
/// How long pod creates are rejected in the rejection test, and the ReplicaSet's updates
/// (one every [`TICK`]) during it.
const REJECTED: Duration = Duration::from_secs(12);
const TICK: Duration = Duration::from_millis(200);
/// How soon creates must resume once they pass again: about the rejection's length with a
/// backoff that doubles in time; client-go's, which counts every failed sync, is at its
/// 1000 s cap by then.
const RESUME: Duration = Duration::from_secs(30);

fn kwok_placement() -> Value {
    json!({
        "nodeSelector": {"type": "kwok"},
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 1,
    })
}

fn replicaset_manifest(name: &str, replicas: i32) -> Value {
    let mut spec = kwok_placement();
    spec["containers"] = json!([{"name": "app", "image": "registry.example/r:v1"}]);
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    })
}

/// An Indexed Job whose pods kwok runs and completes.
fn job_manifest(name: &str, completions: i32, parallelism: i32) -> Value {
    let mut spec = kwok_placement();
    spec["restartPolicy"] = json!("Never");
    spec["containers"] = json!([{"name": "main", "image": "registry.example/job:v1"}]);
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": 100,
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    })
}

/// Why the namespace has not converged yet, or `None` when it has.
async fn unsettled(env: &Env) -> anyhow::Result<Option<String>> {
    let d: Deployment = env.get("d").await?;
    if let Some(why) = rkcm_testkit::invariants::deployment_unsettled(&d) {
        return Ok(Some(why));
    }
    let r: ReplicaSet = env.get("r").await?;
    let want = r.spec.replicas.unwrap_or(1);
    let s = r.status.clone().unwrap_or_default();
    if s.replicas != want || s.ready_replicas != Some(want) {
        return Ok(Some(format!("replicaset r: want {want}, status {s:?}")));
    }
    let w: StatefulSet = env.get("web").await?;
    let want = w.spec.replicas.unwrap_or(1);
    let s = w.status.clone().unwrap_or_default();
    if s.replicas != want || s.ready_replicas != Some(want) {
        return Ok(Some(format!("statefulset web: want {want}, status {s:?}")));
    }
    let j: Job = env.get("idx").await?;
    if !rkcm_testkit::harness::job_complete(&j) {
        return Ok(Some(format!("job idx: status {:?}", j.status)));
    }
    Ok(None)
}

/// Deletes one live pod of the churned workloads (round robin), gracefully.
async fn delete_one(env: &Env, turn: usize) -> anyhow::Result<()> {
    let pods = env.pods().list(&ListParams::default()).await?.items;
    let apps = ["d", "r", "web"];
    let app = apps[turn % apps.len()];
    let live: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            // Running pods only: a delete that reads a pod just before it is bound removes
            // it at once, which the watcher does not judge but is not churn either.
            is_active(p)
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                && p.metadata.deletion_timestamp.is_none()
                && p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("app"))
                    .map(String::as_str)
                    == Some(app)
        })
        .collect();
    if let Some(p) = live.get(turn / apps.len() % live.len().max(1)) {
        match env
            .pods()
            .delete(&name_of(*p), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e).context("deleting a pod"),
        }
    }
    Ok(())
}

/// The churn: pods deleted about four times a second; every few seconds the Deployment is
/// scaled or rolled and the ReplicaSet scaled.
async fn churn(env: &Env, until: Instant) -> anyhow::Result<usize> {
    let mut turn = 0;
    let mut last_change = Instant::now();
    let mut change = 0;
    while Instant::now() < until {
        delete_one(env, turn).await?;
        turn += 1;
        if last_change.elapsed() >= Duration::from_secs(4) {
            last_change = Instant::now();
            change += 1;
            match change % 4 {
                0 => drop(env.set_replicas::<Deployment>("d", 4).await?),
                1 => drop(env.set_replicas::<Deployment>("d", 6).await?),
                2 => {
                    let image = format!("registry.example/d:v{change}");
                    env.strategic::<Deployment>(
                        "d",
                        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}),
                    )
                    .await?;
                }
                _ => {}
            }
            // The ReplicaSet is scaled up once and down once: its bound stays tight (the
            // watcher allows the larger bound for GRACE either side of a scale).
            match change {
                2 => drop(env.set_replicas::<ReplicaSet>("r", 5).await?),
                6 => drop(env.set_replicas::<ReplicaSet>("r", 3).await?),
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(turn)
}

async fn scenario(env: &Env, rkcm: &mut Manager, watcher: &InvariantWatcher) -> anyhow::Result<()> {
    env.create::<Deployment>(deployment_manifest(
        "d",
        4,
        "registry.example/d:v0",
        json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}}),
    ))
    .await?;
    env.create::<ReplicaSet>(replicaset_manifest("r", 3))
        .await?;
    env.create::<StatefulSet>(sts_manifest("web", 3, "registry.example/web:v1", json!({})))
        .await?;
    env.create::<Job>(job_manifest("idx", 30, 4)).await?;

    let start = Instant::now();
    let faults = async {
        let mut lagging = false;
        let mut kills = KILLS.iter().peekable();
        while start.elapsed() < CHURN {
            if !lagging && start.elapsed() >= LAG_FROM && start.elapsed() < LAG_UNTIL {
                rkcm.proxy().delay_watches("pods", LAG);
                lagging = true;
            }
            if lagging && start.elapsed() >= LAG_UNTIL {
                rkcm.proxy().delay_watches("pods", Duration::ZERO);
                lagging = false;
            }
            if kills.peek().is_some_and(|k| start.elapsed() >= **k) {
                kills.next();
                rkcm.kill_and_restart().await?;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        rkcm.proxy().delay_watches("pods", Duration::ZERO);
        anyhow::Ok(())
    };
    let (deleted, ()) = tokio::try_join!(churn(env, start + CHURN), faults)?;
    // The last fault: a rollout and a scale, and a kill right after them.
    env.strategic::<Deployment>(
        "d",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/d:final"}]}}}}),
    )
    .await?;
    env.set_replicas::<ReplicaSet>("r", 4).await?;
    rkcm.kill_and_restart().await?;
    let last_fault = Instant::now();
    let early = watcher.violations();
    anyhow::ensure!(
        early.is_empty(),
        "invariants broke during the churn: {early:#?}"
    );

    let last = std::sync::Mutex::new(String::new());
    let converged = wait_for(
        "the namespace to converge after the last fault",
        CONVERGE,
        || async {
            let u = unsettled(env).await?;
            if let (Some(u), Ok(mut l)) = (&u, last.lock()) {
                *l = u.clone();
            }
            Ok(u.is_none().then_some(()))
        },
    )
    .await
    .with_context(|| {
        format!(
            "last seen: {}",
            last.lock().map(|l| l.clone()).unwrap_or_default()
        )
    });
    converged?;
    rkcm.check_running()?;
    let creates = rkcm
        .writes()
        .iter()
        .filter(|w| w.method == "POST" && w.path.ends_with("/pods"))
        .count();
    println!(
        "chaos: {} kills, {deleted} pod deletions by the test, {creates} pod creations by rkcm, \
         converged {:?} after the last kill (with a rollout and a scale)",
        KILLS.len() + 1,
        last_fault.elapsed()
    );
    Ok(())
}

fn judge(report: &Report) -> anyhow::Result<()> {
    println!("{}", report.text());
    anyhow::ensure!(
        report.violations.is_empty(),
        "invariants broke: {:#?}",
        report.violations
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn rkcm_keeps_invariants_under_kills_watch_lag_and_churn() -> anyhow::Result<()> {
    let env = Env::new("chaos").await?;
    let result = async {
        wait_default_service_account(&env.ns).await?;
        let watcher = InvariantWatcher::start(
            env.cluster.client(),
            Scope::Namespaces(vec![env.name().to_owned()]),
            Config { grace: GRACE },
        )
        .await?;
        let mut rkcm =
            Manager::start(ManagerKind::Rkcm, &env.cluster, env.name(), CONTROLLERS).await?;
        let r = scenario(&env, &mut rkcm, &watcher).await;
        let r = Manager::with_logs(r, &mut [&mut rkcm]);
        let report = watcher.finish().await;
        r?;
        judge(&report)?;
        rkcm.stop_scoped().await
    }
    .await;
    env.finish(result).await
}

/// Pod creates rejected by a ValidatingAdmissionPolicy for [`REJECTED`], while the
/// ReplicaSet is annotated every [`TICK`] (each update a sync that fails again): with rkcm's
/// default `--rkcm-retry-ignores-early-failures` (on), once creates pass its pods appear within
/// [`RESUME`] (kubernetes/kubernetes#132805; with the flag off every failure counts, as
/// upstream's).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn rkcm_resumes_pod_creates_soon_after_admission_rejected_them() -> anyhow::Result<()> {
    use kube::api::{Patch, PatchParams};
    use rkcm_testkit::invariants::outages::AdmissionGate;
    let env = Env::new("chaos-reject").await?;
    let result = async {
        wait_default_service_account(&env.ns).await?;
        let gate = AdmissionGate::install(&env.cluster, &env.ns).await?;
        let r = async {
            let mut rkcm = Manager::start(
                ManagerKind::Rkcm,
                &env.cluster,
                env.name(),
                "replicaset-controller",
            )
            .await?;
            let r = async {
                gate.close().await?;
                let rs: ReplicaSet = env.create(replicaset_manifest("r", 2)).await?;
                let uid = rs.metadata.uid.clone().unwrap_or_default();
                let api = env.ns.api::<ReplicaSet>();
                let until = Instant::now() + REJECTED;
                let mut tick = 0u32;
                while Instant::now() < until {
                    tick += 1;
                    api.patch(
                        "r",
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"annotations": {"chaos/tick": tick.to_string()}}})),
                    )
                    .await?;
                    tokio::time::sleep(TICK).await;
                }
                let pods = env.ns.api::<Pod>();
                let none = pods.list(&ListParams::default()).await?.items.len();
                anyhow::ensure!(none == 0, "{none} pods were created while creates were rejected");
                let opened = gate.open().await?;
                wait_for("the ReplicaSet's two pods", RESUME, || async {
                    let owned = pods
                        .list(&ListParams::default())
                        .await?
                        .items
                        .into_iter()
                        .filter(|p| {
                            p.metadata.owner_references.iter().flatten().any(|o| o.uid == uid)
                        })
                        .count();
                    Ok((owned == 2).then_some(()))
                })
                .await?;
                println!(
                    "creates resumed {:?} after admission passed again ({tick} updates during the rejection)",
                    opened.elapsed()
                );
                anyhow::Ok(())
            }
            .await;
            let r = Manager::with_logs(r, &mut [&mut rkcm]);
            rkcm.stop_scoped().await?;
            r
        }
        .await;
        gate.remove().await;
        r
    }
    .await;
    env.finish(result).await
}

/// A pod of the test's own making, owned by ReplicaSet `rs` (controller reference).
fn owned_pod(name: &str, rs: &ReplicaSet) -> Value {
    let mut spec = kwok_placement();
    spec["containers"] = json!([{"name": "app", "image": "registry.example/r:v1"}]);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "r"}, "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name_of(rs),
            "uid": rs.metadata.uid.clone().unwrap_or_default(), "controller": true}]},
        "spec": spec,
    })
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn invariant_watcher_catches_injected_violations() -> anyhow::Result<()> {
    let env = Env::new("chaos-inject").await?;
    let result = async {
        wait_default_service_account(&env.ns).await?;
        let watcher = InvariantWatcher::start(
            env.cluster.client(),
            Scope::Namespaces(vec![env.name().to_owned()]),
            Config { grace: GRACE },
        )
        .await?;
        // No controller runs: the test plays a broken ReplicaSet controller.
        let rs: ReplicaSet = env.create(replicaset_manifest("r", 1)).await?;
        env.create::<Pod>(owned_pod("r-a", &rs)).await?;
        env.create::<Pod>(owned_pod("r-b", &rs)).await?;
        // ... and a force delete of a running pod whose node exists.
        // Bound for a few seconds: the watcher leaves alone deletes right at binding time.
        wait_for(
            "r-a running on a node for 3 s",
            Duration::from_secs(30),
            || async {
                let p: Pod = env.get("r-a").await?;
                let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
                let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                let scheduled = p
                    .status
                    .iter()
                    .flat_map(|s| s.conditions.iter().flatten())
                    .find(|c| c.type_ == "PodScheduled" && c.status == "True")
                    .and_then(|c| c.last_transition_time.as_ref())
                    .map(|t| t.0);
                let old_enough = scheduled
                    .is_some_and(|t| jiff::Timestamp::now().duration_since(t).as_secs() >= 3);
                Ok((bound && running && old_enough).then_some(()))
            },
        )
        .await?;
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        env.pods().delete("r-a", &now).await?;
        let report = watcher.finish().await;
        println!("{}", report.text());
        let found: Vec<Invariant> = report.violations.iter().map(|v| v.invariant).collect();
        anyhow::ensure!(
            found.contains(&Invariant::ReplicaSetAboveReplicas)
                && found.contains(&Invariant::ForceDeleteOnLiveNode),
            "the watcher missed injected violations; it found {found:?}"
        );
        Ok(())
    }
    .await;
    env.finish(result).await
}
