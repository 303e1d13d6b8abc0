//! Black-box tests of leader election (client-go `tools/leaderelection`): rkcm
//! processes contending for a Lease of their own in a test namespace, with short timings
//! (lease 4 s, renew deadline 3 s, retry 500 ms).
//!
//! Timing facts the bounds below rest on: a standby polls every [retry, 2.2 × retry), i.e.
//! 0.5–1.1 s; it may take over only after a full lease duration (4 s) of *its own* time since
//! it last saw the record change; the leader renews every retry period.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use rkcm_testkit::{TestCluster, holds_for, unique_name, wait_for};

use crate::serve::{Rkcm, STARTUP, election_args, sample, wait_master_status};

const LEASE_DURATION: Duration = Duration::from_secs(4);
const RETRY: Duration = Duration::from_millis(500);
/// Scheduling, request latency and process start-up noise on a loaded 2-core CI box.
const SLACK: Duration = Duration::from_secs(5);

fn holder(l: &Lease) -> Option<&str> {
    l.spec.as_ref()?.holder_identity.as_deref()
}

async fn current_holder(leases: &Api<Lease>, name: &str) -> anyhow::Result<Option<String>> {
    Ok(leases
        .get_opt(name)
        .await?
        .as_ref()
        .and_then(holder)
        .map(str::to_owned))
}

/// Waits until the Lease names `identity`.
async fn wait_holder(leases: &Api<Lease>, name: &str, identity: &str) -> anyhow::Result<Lease> {
    wait_for(
        &format!("lease {name} to be held by {identity}"),
        STARTUP,
        || async {
            let l = leases.get_opt(name).await?;
            Ok(l.filter(|l| holder(l) == Some(identity)))
        },
    )
    .await
}

/// Methods of the requests a process has sent, from `rest_client_requests_total`.
fn request_methods(metrics: &str) -> HashSet<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{"))
        .filter_map(|l| {
            let rest = l.split("method=\"").nth(1)?;
            Some(rest.split('"').next()?.to_owned())
        })
        .collect()
}

/// Total requests a process has sent.
fn request_count(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Requests other than GET a process has sent (attempted writes, successful or not).
fn write_count(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{") && !l.contains("method=\"GET\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

type LeaseStream = futures::stream::BoxStream<'static, kube::Result<WatchEvent<Lease>>>;

/// A watch on one Lease, started at its current resourceVersion, so every later write is
/// seen in order (a poll could miss the short-lived released state).
async fn watch_lease(leases: &Api<Lease>, name: &str) -> anyhow::Result<LeaseStream> {
    let current = leases.get(name).await?;
    let rv = current.metadata.resource_version.unwrap_or_default();
    let wp = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(290);
    Ok(leases.watch(&wp, &rv).await?.boxed())
}

/// Next modification of the watched Lease, with its local arrival time.
async fn next_lease(
    stream: &mut LeaseStream,
    timeout: Duration,
) -> anyhow::Result<(Lease, Instant)> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.try_next())
            .await
            .map_err(|_| anyhow::anyhow!("no lease update within {timeout:?}"))??;
        match ev {
            Some(WatchEvent::Modified(l)) | Some(WatchEvent::Added(l)) => {
                return Ok((l, Instant::now()));
            }
            Some(WatchEvent::Deleted(_)) => anyhow::bail!("lease deleted"),
            Some(WatchEvent::Bookmark(_)) => {}
            Some(WatchEvent::Error(e)) => anyhow::bail!("watch error: {e:?}"),
            None => anyhow::bail!("watch ended"),
        }
    }
}

fn transitions(l: &Lease) -> i32 {
    l.spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0)
}

fn acquire_time(l: &Lease) -> Option<jiff::Timestamp> {
    l.spec.as_ref()?.acquire_time.as_ref().map(|t| t.0)
}

/// Starts `a` and waits until it leads, then starts `b` and waits until it is a settled
/// standby (identity known, master status 0).
async fn leader_and_standby(
    cluster: &TestCluster,
    args: &[String],
    leases: &Api<Lease>,
    lease: &str,
) -> anyhow::Result<(Rkcm, String, Rkcm, String)> {
    let a = Rkcm::spawn("a", cluster, args)?;
    let id_a = a.identity().await?;
    wait_holder(leases, lease, &id_a).await?;
    wait_master_status(&a, lease, 1.0).await?;
    let b = Rkcm::spawn("b", cluster, args)?;
    let id_b = b.identity().await?;
    b.wait_serving().await?;
    wait_master_status(&b, lease, 0.0).await?;
    Ok((a, id_a, b, id_b))
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn two_processes_elect_exactly_one_leader() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-leader").await?;
    let lease = unique_name("elect");
    // Both run PodGC, so the standby has something it must not start; each is confined to
    // the test namespace (an unscoped PodGC fails other tests' unscheduled terminating pods).
    let controller = "pod-garbage-collector-controller";
    let args = election_args(ns.name(), &lease, Some(controller));
    let a = Rkcm::spawn_scoped("a", &cluster, ns.name(), &args).await?;
    let b = Rkcm::spawn_scoped("b", &cluster, ns.name(), &args).await?;
    let (id_a, id_b) = (a.identity().await?, b.identity().await?);
    assert_ne!(id_a, id_b);
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    for id in [&id_a, &id_b] {
        let uuid = id.strip_prefix(&format!("{host}_")).unwrap_or("");
        assert!(
            uuid::Uuid::parse_str(uuid).is_ok(),
            "identity {id} is not <hostname>_<uuid>"
        );
    }

    let leases = ns.api::<Lease>();
    let leader_id = wait_for("one of them to hold the lease", STARTUP, || async {
        let h = current_holder(&leases, &lease).await?;
        Ok(h.filter(|h| *h == id_a || *h == id_b))
    })
    .await?;
    let (leader, standby) = if leader_id == id_a {
        (&a, &b)
    } else {
        (&b, &a)
    };
    wait_master_status(leader, &lease, 1.0).await?;
    wait_master_status(standby, &lease, 0.0).await?;

    // Lease shape (scenario 10).
    let l = leases.get(&lease).await?;
    let spec = l.spec.clone().unwrap_or_default();
    assert_eq!(spec.lease_duration_seconds, Some(4));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
    let first_renew = spec.renew_time.map(|t| t.0);
    wait_for("renewTime to advance", STARTUP, || async {
        let l = leases.get(&lease).await?;
        let renew = l.spec.and_then(|s| s.renew_time).map(|t| t.0);
        Ok((renew > first_renew).then_some(()))
    })
    .await?;

    // The Normal LeaderElection event on the Lease.
    let events = ns.api::<Event>();
    let message = format!("{leader_id} became leader");
    let ev = wait_for("the LeaderElection event", STARTUP, || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(|e| e.message.as_deref() == Some(message.as_str())))
    })
    .await?;
    assert_eq!(ev.reason.as_deref(), Some("LeaderElection"));
    assert_eq!(ev.type_.as_deref(), Some("Normal"));
    assert_eq!(ev.involved_object.kind.as_deref(), Some("Lease"));
    assert_eq!(ev.involved_object.name.as_deref(), Some(lease.as_str()));
    assert_eq!(
        ev.source.and_then(|s| s.component).as_deref(),
        Some("kube-controller-manager")
    );

    // The leader runs the controller; the standby does not, and only ever reads the Lease
    // (scenario 11): GETs only, no more than one per retry period, healthy and ready.
    let running = format!(
        "running_managed_controllers{{manager=\"kube-controller-manager\",name=\"{controller}\"}}"
    );
    wait_for("the leader to run the controller", STARTUP, || async {
        Ok((sample(&leader.metrics().await?, &running) == Some(1.0)).then_some(()))
    })
    .await?;
    // Both started at once, so the standby may have tried (and failed) to create the Lease;
    // from now on it must only read.
    let m = standby.metrics().await?;
    let (before, writes_before) = (request_count(&m), write_count(&m));
    let window = Instant::now();
    holds_for(
        "a single leader and a passive standby",
        Duration::from_secs(3),
        || async {
            let m = standby.metrics().await?;
            let holder = current_holder(&leases, &lease).await?;
            anyhow::ensure!(
                holder.as_deref() == Some(leader_id.as_str()),
                "holder changed to {holder:?}"
            );
            anyhow::ensure!(sample(&m, &running).is_none(), "standby runs {controller}");
            anyhow::ensure!(
                !m.contains("workqueue_adds_total{"),
                "standby has work queues"
            );
            anyhow::ensure!(
                write_count(&m) == writes_before,
                "standby wrote: {:?}",
                request_methods(&m)
            );
            Ok(true)
        },
    )
    .await?;
    let polls = request_count(&standby.metrics().await?) - before;
    let max_polls = window.elapsed().as_secs_f64() / RETRY.as_secs_f64() + 2.0;
    assert!(
        polls <= max_polls,
        "standby sent {polls} requests in {:?}",
        window.elapsed()
    );
    assert_eq!(standby.get("/healthz").await?.status, 200);
    assert_eq!(standby.get("/readyz").await?.status, 200);
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn sigkill_of_leader_fails_over_after_lease_expiry() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-leader").await?;
    let lease = unique_name("kill");
    let args = election_args(ns.name(), &lease, None);
    let leases = ns.api::<Lease>();
    let (mut a, _id_a, b, id_b) = leader_and_standby(&cluster, &args, &leases, &lease).await?;
    // The standby has written nothing while standing by.
    let methods = request_methods(&b.metrics().await?);
    assert!(
        methods.iter().all(|m| m == "GET"),
        "standby requests: {methods:?}"
    );

    let before = leases.get(&lease).await?;
    let mut stream = watch_lease(&leases, &lease).await?;
    a.signal(libc::SIGKILL)?;
    let killed = Instant::now();
    let killed_wall = jiff::Timestamp::now();
    a.wait_exit(Duration::from_secs(10)).await?;

    let bound = LEASE_DURATION + RETRY.mul_f64(2.0 * 2.2) + SLACK;
    let (taken, at) = loop {
        let (l, at) = next_lease(&mut stream, bound).await?;
        if holder(&l) == Some(id_b.as_str()) {
            break (l, at);
        }
    };
    let waited = at - killed;
    eprintln!("standby took over {waited:?} after SIGKILL of the leader");
    // A renewed at most one retry period (+ latency) before the kill, so B's clock cannot
    // expire the lease less than ~3.5 s after it; allow 0.5 s for our own measurement.
    assert!(
        waited >= Duration::from_secs(3),
        "took over after only {waited:?}"
    );
    assert!(waited <= bound, "took over after {waited:?}");
    assert_eq!(transitions(&taken), transitions(&before) + 1);
    assert!(
        acquire_time(&taken) > Some(killed_wall),
        "acquireTime predates the crash"
    );
    wait_master_status(&b, &lease, 1.0).await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn sigterm_of_leader_releases_the_lease_with_the_gate() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-leader").await?;
    let lease = unique_name("term");
    let mut args = election_args(ns.name(), &lease, None);
    args.push("--feature-gates=ControllerManagerReleaseLeaderElectionLockOnExit=true".to_owned());
    // The gate is new in v1.36: the manager of an older minor refuses it at start, and so
    // does rkcm against such a server.
    let minor = crate::skew::server_minor(&cluster).await?;
    if minor < 36 {
        // Scoped: were the gate accepted by mistake, its controllers stay in the namespace.
        let mut a = Rkcm::spawn_scoped("leader-gate-unknown", &cluster, ns.name(), &args).await?;
        let status = a.wait_exit(STARTUP).await?;
        anyhow::ensure!(
            status.code() == Some(1)
                && a.log().contains(
                    "unrecognized feature gate: ControllerManagerReleaseLeaderElectionLockOnExit"
                ),
            "v1.{minor}: the gate was not refused ({status}): {}",
            a.log()
        );
        return Ok(());
    }
    let leases = ns.api::<Lease>();
    let (mut a, id_a, b, id_b) = leader_and_standby(&cluster, &args, &leases, &lease).await?;

    let before = leases.get(&lease).await?;
    let mut stream = watch_lease(&leases, &lease).await?;
    a.signal(libc::SIGTERM)?;
    let status = a.wait_exit(Duration::from_secs(25)).await?;
    assert_eq!(status.code(), Some(0), "graceful shutdown exits 0");
    assert!(a.log().contains("released lease"), "{}", a.log());

    // Every write after the signal, in order: A's renewals, A's release, then B's takeover.
    let mut released = None;
    let taken = loop {
        let (l, at) = next_lease(&mut stream, LEASE_DURATION + SLACK).await?;
        match holder(&l) {
            Some(h) if h == id_a => assert!(released.is_none(), "renewal after the release"),
            Some("") | None => {
                let spec = l.spec.clone().unwrap_or_default();
                assert_eq!(spec.lease_duration_seconds, Some(1));
                assert_eq!(
                    spec.lease_transitions,
                    before.spec.as_ref().and_then(|s| s.lease_transitions)
                );
                assert_eq!(spec.acquire_time, spec.renew_time);
                released = Some((l, at));
            }
            Some(h) if h == id_b => break (l, at),
            Some(h) => anyhow::bail!("unexpected holder {h}"),
        }
    };
    let (released, released_at) =
        released.ok_or_else(|| anyhow::anyhow!("B took over without a release"))?;
    // B reacts on its next poll instead of waiting out the 4 s lease duration.
    let delay = taken.1 - released_at;
    eprintln!("standby took over {delay:?} after the release");
    assert!(delay <= Duration::from_secs(5), "standby needed {delay:?}");
    assert_eq!(transitions(&taken.0), transitions(&released) + 1);
    assert!(acquire_time(&taken.0) >= acquire_time(&released));
    wait_master_status(&b, &lease, 1.0).await?;
    Ok(())
}

/// Gate `ControllerManagerReleaseLeaderElectionLockOnExit` off (upstream's v1.37 default): the
/// leader exits without touching its Lease, and the standby takes over only once the lease
/// duration has passed since the last renewal, as with upstream.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn sigterm_of_leader_leaves_the_lease_to_expire_by_default() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-leader").await?;
    let lease = unique_name("expire");
    let args = election_args(ns.name(), &lease, None);
    let leases = ns.api::<Lease>();
    let (mut a, id_a, b, id_b) = leader_and_standby(&cluster, &args, &leases, &lease).await?;

    let mut stream = watch_lease(&leases, &lease).await?;
    a.signal(libc::SIGTERM)?;
    let status = a.wait_exit(Duration::from_secs(25)).await?;
    assert_eq!(status.code(), Some(0), "graceful shutdown exits 0");
    assert!(!a.log().contains("released lease"), "{}", a.log());
    // A's last renewal, as the Lease records it once A is gone.
    let after_exit = leases.get(&lease).await?;
    let renewed = after_exit
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0);

    // Every write after the signal: A's renewals (none after it exited), then B's takeover;
    // never a release (an empty holder).
    let taken = loop {
        let (l, _) = next_lease(&mut stream, LEASE_DURATION + SLACK).await?;
        match holder(&l) {
            Some(h) if h == id_a => {}
            Some(h) if h == id_b => break l,
            other => anyhow::bail!("unexpected holder {other:?}: the lease was released"),
        }
    };
    let (Some(renewed), Some(acquired)) = (renewed, acquire_time(&taken)) else {
        anyhow::bail!("lease times missing: {after_exit:?} / {taken:?}");
    };
    let waited = renewed.duration_until(acquired);
    eprintln!("standby took over {waited:?} after the old leader's last renewal");
    assert!(
        waited >= jiff::SignedDuration::from_secs(3),
        "took over {waited:?} after the last renewal: the lease cannot have expired"
    );
    wait_master_status(&b, &lease, 1.0).await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn overwritten_lease_makes_the_leader_exit_1() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-leader").await?;
    let lease = unique_name("lost");
    let leases = ns.api::<Lease>();
    let mut a = Rkcm::spawn("a", &cluster, &election_args(ns.name(), &lease, None))?;
    let id = a.identity().await?;
    wait_holder(&leases, &lease, &id).await?;

    // Hand over to someone else with an ordinary conditional update, retrying conflicts with
    // A's renewals.
    wait_for("the lease to be overwritten", STARTUP, || async {
        let mut l = leases.get(&lease).await?;
        if let Some(spec) = l.spec.as_mut() {
            spec.holder_identity = Some("intruder".to_owned());
            spec.lease_duration_seconds = Some(60);
        }
        Ok(leases
            .replace(&lease, &PostParams::default(), &l)
            .await
            .ok()
            .map(|_| ()))
    })
    .await?;
    let overwritten = Instant::now();
    let status = a.wait_exit(Duration::from_secs(3) + RETRY + SLACK).await?;
    assert_eq!(status.code(), Some(1));
    assert!(overwritten.elapsed() <= Duration::from_secs(3) + RETRY + SLACK);
    assert!(
        a.log_lines()
            .iter()
            .any(|l| l.get("message").and_then(|m| m.as_str()) == Some("leaderelection lost")),
        "{}",
        a.log()
    );
    assert_eq!(
        current_holder(&leases, &lease).await?.as_deref(),
        Some("intruder")
    );
    Ok(())
}
