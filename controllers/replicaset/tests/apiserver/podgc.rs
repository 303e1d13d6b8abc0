//! Scenario 18, second half: with PodGC enabled, the terminating Pods a scale-down leaves
//! behind (held by a template finalizer) are forced to `Failed` within ~20 s, and
//! `terminatingReplicas` drops to 0 while the objects still exist.
//!
//! The pods stay unbound (the template names a scheduler that does not exist), so PodGC's
//! *unscheduled-terminating* sweep applies (upstream `pkg/controller/podgc/gc_controller.go`):
//! it runs right after its caches sync and every 20 s after each sweep, moves a terminating
//! pod without `nodeName` to `Failed` and force-deletes it; the finalizer keeps the object. (A
//! pod bound to a deleted Node would go through the orphan sweep instead: 40 s quarantine,
//! ≈40–60 s, not the ~20 s this scenario expects.)
//!
//! The ReplicaSet controller runs in-process as everywhere in this suite. PodGC runs as the
//! rkcm binary (`--controllers=podgc`) behind the testkit's namespace-scoping proxy, so it
//! only ever sees and writes this test's pods. The binary is the `rkcm` next to this test's
//! executable (`<target>/<profile>/rkcm`; `RKCM_TEST_BIN` overrides): `cargo test --workspace`
//! (what `make test` runs) builds it; with `cargo test -p rkcm-replicaset` run
//! `cargo build -p rkcm` first.
//!
//! Timing is deterministic: a sentinel pod, already terminating when PodGC starts, turns
//! `Failed` at PodGC's first sweep; the scale-down follows at once, so `terminatingReplicas=2`
//! is observed well before the next sweep (20 s later), which must fail the two pods.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kube::api::DeleteParams;
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use crate::harness::*;

/// "Within ~20 s": one PodGC period plus slack for the apiserver and the poll.
const PODGC_WITHIN: Duration = Duration::from_secs(30);
/// PodGC's first sweep: process start, informer sync, sweep.
const PODGC_STARTUP: Duration = Duration::from_secs(30);

/// The rkcm binary running only PodGC, scoped to the test namespace.
async fn start_podgc(env: &Env) -> Result<Manager> {
    Manager::start(ManagerKind::Rkcm, &env.cluster, env.name(), "podgc").await
}

/// Writes of PodGC that went through the proxy, as "METHOD path".
fn writes(podgc: &Manager) -> Vec<String> {
    podgc
        .writes()
        .iter()
        .map(|w| format!("{} {}", w.method, w.path))
        .collect()
}

fn terminating_replicas(rs: &k8s_openapi::api::apps::v1::ReplicaSet) -> Option<i32> {
    rs.status.as_ref().and_then(|s| s.terminating_replicas)
}

/// `status.terminatingReplicas` of `n` terminating pods, where the server keeps the field.
fn reported(env: &Env, n: i32) -> Option<i32> {
    env.cluster.keeps_terminating_replicas().then_some(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver and the rkcm binary: make test"]
async fn podgc_fails_terminating_replicas_while_finalizers_hold_them() -> Result<()> {
    let env = Env::new("rs-podgc").await?;
    let result = with_podgc(&env).await;
    env.finish(result).await
}

async fn with_podgc(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let (uid, _) = web_with_pods(env, 3, true).await?;

    // Terminating and unbound before PodGC starts: its first sweep fails it.
    let mut sentinel = bare_pod("sentinel", &[("app", "sentinel")]);
    sentinel["metadata"]["finalizers"] = json!([HOLD]);
    env.create_pod(sentinel).await?;
    env.pods()
        .delete("sentinel", &DeleteParams::default())
        .await
        .context("deleting the sentinel pod")?;

    let mut podgc = start_podgc(env).await?;
    let result = scale_down_under_podgc(env, &uid, &mut podgc).await;
    let result = Manager::with_logs(result, &mut [&mut podgc]);
    let stopped = podgc.stop_scoped().await;
    result?;
    stopped?;
    ctrl.stop().await
}

#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn scale_down_under_podgc(env: &Env, uid: &str, podgc: &mut Manager) -> Result<()> {
    wait_for(
        "PodGC's first sweep fails the sentinel",
        PODGC_STARTUP,
        || {
            let running = podgc.check_running();
            async move {
                running?;
                let p = env.pods().get("sentinel").await?;
                Ok((phase(&p) == "Failed").then_some(()))
            }
        },
    )
    .await?;

    // The next sweep is ~20 s away.
    env.scale("web", 1).await?;
    let survivors = names_of(&env.wait_active(uid, 1).await?);
    let deleted_at = Instant::now();
    env.wait_rs("web", "replicas=1 terminating=2", |rs| {
        rs_status(rs).0 == 1 && terminating_replicas(rs) == reported(env, 2)
    })
    .await?;
    let mut doomed: Vec<String> = names_of(
        &env.owned(uid)
            .await?
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .collect::<Vec<_>>(),
    );
    doomed.sort();
    ensure(
        doomed.len() == 2,
        format!("2 terminating pods after the scale-down, got {doomed:?}"),
    )?;

    // PodGC: phase Failed, the objects kept by the finalizer.
    wait_for(
        &format!("PodGC fails {doomed:?} while their finalizer holds them"),
        PODGC_WITHIN.saturating_sub(deleted_at.elapsed()),
        || async {
            let mut failed = 0;
            for name in &doomed {
                let Some(p) = env.pods().get_opt(name).await? else {
                    anyhow::bail!("pod {name} is gone although its finalizer should hold it");
                };
                if phase(&p) == "Failed" {
                    failed += 1;
                }
            }
            Ok((failed == doomed.len()).then_some(()))
        },
    )
    .await?;
    let took = deleted_at.elapsed();

    env.wait_rs("web", "replicas=1 terminating=0", |rs| {
        rs_status(rs).0 == 1 && terminating_replicas(rs) == reported(env, 0)
    })
    .await?;
    for name in &doomed {
        let p = env
            .pods()
            .get_opt(name)
            .await?
            .with_context(|| format!("pod {name} still exists at terminating=0"))?;
        ensure(
            p.metadata.deletion_timestamp.is_some()
                && phase(&p) == "Failed"
                && p.metadata.finalizers.iter().flatten().any(|f| f == HOLD),
            format!(
                "pod {name}: terminating, Failed, finalizer kept; got {:?} {:?} {:?}",
                p.metadata.deletion_timestamp,
                phase(&p),
                p.metadata.finalizers
            ),
        )?;
    }

    // It was PodGC: it wrote each pod's status, then force-deleted it (the delete may still
    // be in flight when the phase shows).
    let want: Vec<String> = doomed
        .iter()
        .flat_map(|name| {
            let pod = format!("/api/v1/namespaces/{}/pods/{name}", env.name());
            [format!("PATCH {pod}/status"), format!("DELETE {pod}")]
        })
        .collect();
    let check = wait_for(
        "PodGC's status patch and delete of each",
        WITHIN,
        || async {
            let writes = writes(podgc);
            Ok(want.iter().all(|w| writes.contains(w)).then_some(()))
        },
    )
    .await;
    check.with_context(|| format!("PodGC's writes: {:?}", writes(podgc)))?;

    // Failed pods are not replaced; replicas stays 1, terminating stays 0, nothing vanishes.
    holds_for(
        "no replacement, replicas=1 terminating=0, the failed pods kept",
        HOLDS,
        || async {
            let mut active = names_of(&env.active(uid).await?);
            active.sort();
            let owned = env.owned(uid).await?.len();
            let rs = env.replicasets().get("web").await?;
            Ok(active == survivors
                && owned == 3
                && rs_status(&rs).0 == 1
                && terminating_replicas(&rs) == reported(env, 0))
        },
    )
    .await?;
    eprintln!("PodGC failed the terminating pods {took:?} after the scale-down");
    Ok(())
}
