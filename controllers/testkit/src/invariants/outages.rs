//! The outage scenarios of `make chaos` besides kills and watch delays (see
//! [`super::faults`]):
//!
//! - `apiserver-restart`: kube-apiserver stopped for [`Options::apiserver_down`] (30 s) and
//!   started again on the same etcd, under churn (the plane's `e2e/cluster.sh stop|start`).
//! - `watch-410`: during the first half, every [`Options::expire_every`] etcd is compacted
//!   and the manager's watches are ended and answered 410 Gone from older revisions (the
//!   proxy plays an API server without a watch cache), so informers relist under churn; in
//!   the second half the pod watch delivers [`Options::long_watch_delay`] (6 min) late,
//!   longer than the 5-minute expectations timeout.
//! - `reject-creates`: a ValidatingAdmissionPolicy bound to the namespace rejects every pod
//!   create for [`Options::reject_for`] (60 s), once under churn and once measured: the gap
//!   from the end of the rejection to the manager's first successful pod create (audit log).
//! - `partition`: two leader-elected replicas, each reaching the API server only through its
//!   own proxy (users `rkcm` and `kcm`); the leader's proxy is cut ([`Options::cuts`]: a
//!   60 s blackhole, then a 5-minute refusal) under churn. From the audit log: when the old
//!   leader stopped, the gap to the new leader's first write, and the old leader's writes
//!   after the Lease changed hands or after its renew deadline since its last renewal.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::faults::{
    CONTROLLERS, CutRecord, Options, Outcome, Rejection, Replica, Workload, audit_writes,
    close_run, is_lease_write, kwok_template, lease_writer, watched_namespace,
};
use crate::cluster::{TestCluster, TestNamespace};
use crate::harness::ManagerKind;
use crate::proxy::{Cut, ScopedProxy};
use crate::wait::wait_for;

/// Upstream's default renew deadline (`--leader-elect-renew-deadline`).
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);

// ---- the API server down -----------------------------------------------------------------

/// Stops the plane's kube-apiserver, waits [`Options::apiserver_down`], starts it again and
/// waits until it is ready (`e2e/cluster.sh stop|start kube-apiserver`).
pub async fn apiserver_outage(opts: &Options) -> Result<()> {
    let script = opts
        .cluster_script
        .as_ref()
        .context("apiserver-restart needs the plane's cluster script (--cluster-script)")?;
    let run = |verb: &'static str| {
        let script = script.clone();
        async move {
            let status = tokio::process::Command::new("bash")
                .arg(&script)
                .arg(verb)
                .arg("kube-apiserver")
                .status()
                .await
                .with_context(|| format!("running {} {verb}", script.display()))?;
            anyhow::ensure!(status.success(), "cluster script {verb}: {status}");
            anyhow::Ok(())
        }
    };
    run("stop").await?;
    tokio::time::sleep(opts.apiserver_down).await;
    run("start").await
}

// ---- the audit log --------------------------------------------------------------------------

/// The plane's audit log, read from where it ended when opened.
pub struct Audit {
    path: PathBuf,
    from: u64,
}

impl Audit {
    /// The audit log of the plane in `RKCM_CLUSTER_DIR`, if there is one.
    pub fn open() -> Option<Self> {
        let dir = PathBuf::from(std::env::var_os("RKCM_CLUSTER_DIR")?);
        let path = dir.join("logs/audit.log");
        let from = std::fs::metadata(&path).ok()?.len();
        Some(Self { path, from })
    }

    /// Everything written since it was opened.
    pub fn read(&self) -> Result<String> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(&self.path)?;
        f.seek(SeekFrom::Start(self.from))?;
        let mut s = String::new();
        f.read_to_string(&mut s)?;
        Ok(s)
    }
}

/// Successful pod creates in `namespace` (dry runs excepted), in log order.
pub fn pod_creates(log: &str, namespace: &str) -> Vec<jiff::Timestamp> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == "create"
                && e["objectRef"]["resource"] == "pods"
                && e["objectRef"]["namespace"] == namespace
                && e["objectRef"]["subresource"].is_null()
                && e["responseStatus"]["code"].as_i64() == Some(201)
                && !e["requestURI"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("dryRun")
        })
        .filter_map(|e| e["requestReceivedTimestamp"].as_str()?.parse().ok())
        .collect()
}

/// Successful Lease writes in `namespace`: (time, user).
pub fn lease_writes(log: &str, namespace: &str) -> Vec<(jiff::Timestamp, String)> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| is_lease_write(e, namespace))
        .filter_map(|e| {
            let at = e["requestReceivedTimestamp"].as_str()?.parse().ok()?;
            Some((at, e["user"]["username"].as_str()?.to_owned()))
        })
        .collect()
}

// ---- pod creates rejected ---------------------------------------------------------------------

/// A ValidatingAdmissionPolicy that denies every pod create, and its binding to one
/// namespace while the gate is closed.
pub struct AdmissionGate {
    policies: Api<DynamicObject>,
    bindings: Api<DynamicObject>,
    probe: Api<Pod>,
    name: String,
    namespace: String,
}

fn admission_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
        plural,
    )
}

impl AdmissionGate {
    /// Creates the policy (unbound: the gate is open).
    pub async fn install(cluster: &TestCluster, ns: &TestNamespace) -> Result<Self> {
        let client = cluster.client();
        let name = crate::cluster::unique_name("chaos-reject-pods");
        let policies = Api::all_with(
            client.clone(),
            &admission_resource("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
        );
        let bindings = Api::all_with(
            client,
            &admission_resource(
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
            ),
        );
        let policy: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["pods"]}]},
                "validations": [{"expression": "false",
                                 "message": "pod creates are rejected for a while (make chaos)"}],
            },
        }))?;
        policies
            .create(&PostParams::default(), &policy)
            .await
            .context("creating the ValidatingAdmissionPolicy")?;
        Ok(Self {
            policies,
            bindings,
            probe: ns.api::<Pod>(),
            name,
            namespace: ns.name().to_owned(),
        })
    }

    /// Whether a pod create would pass now (a dry run).
    async fn admits(&self) -> bool {
        let pod: Pod = match serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "admission-probe"},
            "spec": kwok_template("probe", "registry.example/app:v0")["spec"].clone(),
        })) {
            Ok(p) => p,
            Err(_) => return false,
        };
        let pp = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        self.probe.create(&pp, &pod).await.is_ok()
    }

    /// Binds the policy to the namespace and waits until creates are rejected.
    pub async fn close(&self) -> Result<()> {
        let binding: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": self.name},
            "spec": {
                "policyName": self.name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": self.namespace}}},
            },
        }))?;
        self.bindings
            .create(&PostParams::default(), &binding)
            .await
            .context("creating the ValidatingAdmissionPolicyBinding")?;
        wait_for(
            "pod creates to be rejected",
            Duration::from_secs(30),
            || async { Ok((!self.admits().await).then_some(())) },
        )
        .await
    }

    /// Deletes the binding and waits until creates pass again; returns when they did.
    pub async fn open(&self) -> Result<Instant> {
        self.bindings
            .delete(&self.name, &DeleteParams::default())
            .await
            .context("deleting the ValidatingAdmissionPolicyBinding")?;
        wait_for(
            "pod creates to pass again",
            Duration::from_secs(30),
            || async { Ok(self.admits().await.then_some(())) },
        )
        .await?;
        Ok(Instant::now())
    }

    /// Deletes the binding and the policy (best effort).
    pub async fn remove(self) {
        let _ = self
            .bindings
            .delete(&self.name, &DeleteParams::default())
            .await;
        let _ = self
            .policies
            .delete(&self.name, &DeleteParams::default())
            .await;
    }
}

/// How long `reject-creates` waits for every short ReplicaSet to create a pod again.
pub const RESUME_TIMEOUT: Duration = Duration::from_secs(150);

/// The ReplicaSets (uid, name) with fewer live pods than `spec.replicas`, and the uids of the
/// pods that exist now.
async fn short_replicasets(
    ns: &TestNamespace,
) -> Result<(Vec<(String, String)>, std::collections::BTreeSet<String>)> {
    let pods = ns.api::<Pod>().list(&ListParams::default()).await?.items;
    let existing = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    let short = ns
        .api::<k8s_openapi::api::apps::v1::ReplicaSet>()
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|rs| is_short(rs, &pods))
        .map(|rs| {
            (
                rs.metadata.uid.clone().unwrap_or_default(),
                rs.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    Ok((short, existing))
}

/// `rs` has fewer live (not terminating) pods than `spec.replicas`.
fn is_short(rs: &k8s_openapi::api::apps::v1::ReplicaSet, pods: &[Pod]) -> bool {
    let uid = rs.metadata.uid.as_deref().unwrap_or_default();
    let live = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid)
        })
        .count();
    usize::try_from(rs.spec.replicas.unwrap_or(1)).unwrap_or(0) > live
}

/// The rejection of `reject-creates`, up to the moment creates pass again.
pub(super) struct Lifted {
    closed: Instant,
    lift: Instant,
    lift_wall: jiff::Timestamp,
    /// When the gate was open again (convergence is timed from it).
    pub(super) opened: Instant,
    deleted: usize,
    /// (uid, name) of the ReplicaSets short of pods at the lift.
    short: Vec<(String, String)>,
    /// The pods that existed at the lift.
    existing: std::collections::BTreeSet<String>,
}

/// Closes the gate, makes the baseline's change and deletes one running pod of every
/// ReplicaSet, keeps the gate closed for [`Options::reject_for`] with no other change, then
/// opens it.
pub(super) async fn reject_then_lift(work: &Workload<'_>, gate: &AdmissionGate) -> Result<Lifted> {
    gate.close().await?;
    let closed = Instant::now();
    work.bump(1).await?;
    let pods = work.ns.api::<Pod>();
    let mut seen = std::collections::BTreeSet::new();
    let mut deleted = 0;
    for p in pods.list(&ListParams::default()).await? {
        let owner = p
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .map(|o| o.name.clone());
        let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if let (Some(owner), Some(name), true) = (owner, p.metadata.name.clone(), running)
            && p.metadata.deletion_timestamp.is_none()
            && seen.insert(owner)
            && pods.delete(&name, &DeleteParams::default()).await.is_ok()
        {
            deleted += 1;
        }
    }
    tokio::time::sleep_until((closed + work.opts.reject_for).into()).await;
    let (short, existing) = short_replicasets(work.ns).await?;
    let lift = Instant::now();
    let lift_wall = jiff::Timestamp::now();
    let opened = gate.open().await?;
    Ok(Lifted {
        closed,
        lift,
        lift_wall,
        opened,
        deleted,
        short,
        existing,
    })
}

/// After [`reject_then_lift`]: the gap to the manager's first pod create, and whether (and
/// when) every ReplicaSet short at the lift got a new pod or stopped being short.
pub(super) async fn watch_resume(
    work: &Workload<'_>,
    lifted: Lifted,
    audit: &Option<Audit>,
) -> Result<Rejection> {
    let Lifted {
        closed,
        lift,
        lift_wall,
        opened,
        deleted,
        short,
        existing,
    } = lifted;
    // Every short ReplicaSet's first new pod.
    let mut waiting: Vec<(String, String)> = short.clone();
    let mut all_resumed = None;
    while lift.elapsed() < RESUME_TIMEOUT {
        let pods = work
            .ns
            .api::<Pod>()
            .list(&ListParams::default())
            .await?
            .items;
        // A ReplicaSet its Deployment scaled down meanwhile is short no longer: nothing is
        // owed (its new pod may even have come and gone between two polls).
        let replica_sets = work
            .ns
            .api::<k8s_openapi::api::apps::v1::ReplicaSet>()
            .list(&ListParams::default())
            .await?
            .items;
        waiting.retain(|(uid, _)| {
            replica_sets
                .iter()
                .find(|rs| rs.metadata.uid.as_deref() == Some(uid.as_str()))
                .is_some_and(|rs| is_short(rs, &pods))
        });
        waiting.retain(|(uid, _)| {
            !pods.iter().any(|p| {
                p.metadata
                    .uid
                    .as_ref()
                    .is_some_and(|u| !existing.contains(u))
                    && p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| &o.uid == uid)
            })
        });
        if waiting.is_empty() {
            all_resumed = Some(lift.elapsed().as_secs_f64());
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let first = match audit {
        Some(audit) => wait_for(
            "the manager's first pod create",
            Duration::from_secs(120),
            || async {
                Ok(pod_creates(&audit.read()?, work.ns.name())
                    .into_iter()
                    .find(|t| *t >= lift_wall))
            },
        )
        .await
        .ok(),
        None => None,
    };
    Ok(Rejection {
        rejected_s: lift.duration_since(closed).as_secs_f64(),
        pods_deleted: deleted,
        admission_reopened_s: opened.duration_since(lift).as_secs_f64(),
        first_create_s: first.map(|t| t.duration_since(lift_wall).as_secs_f64()),
        short_replicasets: short.len(),
        all_resumed_s: all_resumed,
        stuck: waiting.into_iter().map(|(_, name)| name).collect(),
    })
}

// ---- partition --------------------------------------------------------------------------------

/// Measures one cut from workload writes and Lease writes (both `(time, user)`), counting
/// only what happened in `[at, until)`.
pub fn measure_cut(
    writes: &[(jiff::Timestamp, String)],
    leases: &[(jiff::Timestamp, String)],
    old: &str,
    at: jiff::Timestamp,
    until: jiff::Timestamp,
) -> CutRecord {
    let window = |t: &jiff::Timestamp| *t >= at && *t < until;
    let first_new = writes.iter().find(|(t, u)| window(t) && u != old);
    let lease_moved = leases.iter().find(|(t, u)| window(t) && u != old);
    let last_renew = leases
        .iter()
        .filter(|(t, u)| *t < at && u == old)
        .map(|(t, _)| *t)
        .next_back();
    let old_writes: Vec<jiff::Timestamp> = writes
        .iter()
        .filter(|(t, u)| window(t) && u == old)
        .map(|(t, _)| *t)
        .collect();
    let deadline = last_renew.and_then(|t| t.checked_add(RENEW_DEADLINE).ok());
    CutRecord {
        mode: String::new(),
        cut_s: 0.0,
        leader: old.to_owned(),
        stepped_down_s: None,
        new_leader: first_new.map(|(_, u)| u.clone()),
        failover_gap_s: first_new.map(|(t, _)| t.duration_since(at).as_secs_f64()),
        lease_moved_s: lease_moved.map(|(t, _)| t.duration_since(at).as_secs_f64()),
        old_writes_after_cut: old_writes.len(),
        writes_after_lease_lost: lease_moved
            .map_or(0, |(lt, _)| old_writes.iter().filter(|t| *t > lt).count()),
        writes_after_renew_deadline: deadline
            .map_or(0, |d| old_writes.iter().filter(|t| **t > d).count()),
        converge_after_heal_s: None,
    }
}

/// A partition replica's flags: its proxy's kubeconfig, leader election on the scenario's
/// Lease.
fn replica_args(proxy: &ScopedProxy, namespace: &str, opts: &Options) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", proxy.kubeconfig().display()),
        format!("--controllers={CONTROLLERS}"),
        "--leader-elect=true".into(),
        format!("--leader-elect-resource-namespace={namespace}"),
        "--leader-elect-resource-name=chaos".into(),
        "--secure-port=0".into(),
        "--v=2".into(),
        format!("--kube-api-qps={}", opts.qps),
        format!("--kube-api-burst={}", opts.qps * 2),
    ]
}

/// A namespace-scoping proxy for each of the users `rkcm` and `kcm`.
async fn user_proxies(
    dir: &std::path::Path,
    namespace: &str,
) -> Result<Vec<(&'static str, ScopedProxy)>> {
    let mut proxies = Vec::new();
    for user in ["rkcm", "kcm"] {
        let config = TestCluster::config_from(&dir.join(format!("kubeconfig-{user}"))).await?;
        let client = kube::Client::try_from(config).context("a client for the user")?;
        proxies.push((user, ScopedProxy::start_with(client, namespace).await?));
    }
    Ok(proxies)
}

/// After 20 s, the baseline's change and the cut of `leader`'s proxy for `length`, watching
/// whether the cut-off leader gives up (exits) meanwhile; then the cut heals. The cut's
/// start and how long after it the leader exited.
async fn cut_and_heal(
    work: &Workload<'_>,
    proxy: &ScopedProxy,
    mode: Cut,
    length: Duration,
    leader: &mut Replica,
) -> Result<(jiff::Timestamp, Option<f64>)> {
    tokio::time::sleep(Duration::from_secs(20)).await;
    work.bump(1).await?;
    let at = jiff::Timestamp::now();
    let cut_at = Instant::now();
    proxy.cut(mode);
    let heal_at = cut_at + length;
    let mut exited_after = None;
    while Instant::now() < heal_at {
        if exited_after.is_none() && leader.child.try_wait()?.is_some() {
            exited_after = Some(cut_at.elapsed().as_secs_f64());
        }
        let left = heal_at.saturating_duration_since(Instant::now());
        tokio::time::sleep(Duration::from_millis(200).min(left)).await;
    }
    proxy.cut(Cut::Open);
    Ok((at, exited_after))
}

/// The old leader exits when it loses the Lease; as its Deployment would, it is started again
/// (a standby now). The number of other replicas that exited (not asked for).
async fn restart_exited(replicas: &mut [Replica], leader_idx: usize) -> Result<u32> {
    let mut unexpected = 0;
    for (i, r) in replicas.iter_mut().enumerate() {
        if r.child.try_wait()?.is_some() {
            if i != leader_idx {
                unexpected += 1;
            }
            r.restart().await?;
        }
    }
    Ok(unexpected)
}

/// One cut: mode, length, leader, start, how long until the leader exited, and how long
/// after the heal the workload converged.
type CutRun = (
    String,
    Duration,
    String,
    jiff::Timestamp,
    Option<f64>,
    Option<f64>,
);

/// The cuts' records from the audit log `log` (each cut measured until the next one starts).
fn record_cuts(outcome: &mut Outcome, log: &str, namespace: &str, cuts: Vec<CutRun>) {
    let writes = audit_writes(log, namespace);
    let leases = lease_writes(log, namespace);
    let ends: Vec<jiff::Timestamp> = cuts
        .iter()
        .skip(1)
        .map(|c| c.3)
        .chain(std::iter::once(jiff::Timestamp::now()))
        .collect();
    for ((mode, length, leader, at, exited, converged), until) in cuts.into_iter().zip(ends) {
        let mut rec = measure_cut(&writes, &leases, &leader, at, until);
        rec.mode = mode;
        rec.cut_s = length.as_secs_f64();
        rec.converge_after_heal_s = converged;
        rec.stepped_down_s = exited;
        outcome.cuts.push(rec);
    }
}

/// The `partition` scenario for `kind`. Needs `RKCM_CLUSTER_DIR` (users' kubeconfigs and the
/// audit log).
pub async fn run_partition(
    cluster: &TestCluster,
    kind: ManagerKind,
    opts: &Options,
) -> Result<Outcome> {
    let dir =
        PathBuf::from(std::env::var_os("RKCM_CLUSTER_DIR").context("RKCM_CLUSTER_DIR is not set")?);
    let audit = Audit::open().context("no audit log in RKCM_CLUSTER_DIR")?;
    let (ns, watcher) = watched_namespace(cluster, "chaos-partition").await?;
    let bin = kind.binary()?;
    let proxies = user_proxies(&dir, ns.name()).await?;
    let args = |proxy: &ScopedProxy| replica_args(proxy, ns.name(), opts);
    let logs = std::env::temp_dir();
    let log_of = |user: &str| {
        logs.join(crate::cluster::unique_name(&format!(
            "{}-partition-{user}",
            kind.name()
        )))
        .with_extension("log")
    };
    let mut outcome = Outcome::empty("partition", kind, 0.0);
    let begun = Instant::now();
    let mut replicas: Vec<Replica> = Vec::new();
    let work = Workload {
        ns: &ns,
        opts,
        all: false,
    };
    let result = async {
        // "rkcm" leads first: the other replica starts once it holds the Lease.
        replicas.push(Replica::spawn(
            &bin,
            "rkcm",
            &args(&proxies[0].1),
            &log_of("rkcm"),
        )?);
        wait_for(
            "the first replica to lead",
            Duration::from_secs(60),
            || async { Ok(lease_writer(&audit.read()?, ns.name()).filter(|u| u == "rkcm")) },
        )
        .await?;
        replicas.push(Replica::spawn(
            &bin,
            "kcm",
            &args(&proxies[1].1),
            &log_of("kcm"),
        )?);
        outcome.undisturbed_converge_s = work.baseline(opts.converge_timeout).await?;
        let mut cuts = Vec::new();
        for (mode, length) in &opts.cuts {
            let leader = wait_for("a leader", Duration::from_secs(60), || async {
                Ok(lease_writer(&audit.read()?, ns.name()))
            })
            .await?;
            let proxy = &proxies
                .iter()
                .find(|(u, _)| *u == leader)
                .context("no proxy for the leader")?
                .1;
            // 20 s of churn under the leader, then the cut (with the baseline's change), the
            // churn going on until the cut heals.
            let churn_until = Instant::now() + Duration::from_secs(20) + *length;
            let proxy = &proxy;
            let leader_idx = replicas
                .iter()
                .position(|r| r.user == leader)
                .context("no replica for the leader")?;
            let heal = cut_and_heal(&work, proxy, *mode, *length, &mut replicas[leader_idx]);
            let ((deleted, changes), (at, exited_after)) =
                tokio::try_join!(work.churn(churn_until), heal)?;
            let healed = Instant::now();
            outcome.pod_deletions += deleted;
            outcome.spec_changes += changes;
            outcome.faults += 1;
            // The old leader exits when it loses the Lease; as its Deployment would, it is
            // started again (a standby now). Any other exit was not asked for.
            outcome.unexpected_exits += restart_exited(&mut replicas, leader_idx).await?;
            let converged = work.wait_settled(opts.converge_timeout).await.ok();
            cuts.push((
                format!("{mode:?}"),
                *length,
                leader,
                at,
                exited_after,
                converged.map(|_| healed.elapsed().as_secs_f64()),
            ));
            outcome.converge_after_fault_s = converged.map(|_| healed.elapsed().as_secs_f64());
        }
        record_cuts(&mut outcome, &audit.read()?, ns.name(), cuts);
        anyhow::Ok(())
    }
    .await;
    close_run(&mut outcome, result, begun, watcher, &mut replicas).await;
    for (_, p) in &proxies {
        p.stop();
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> jiff::Timestamp {
        format!("2026-01-01T00:00:{s}Z").parse().unwrap()
    }

    fn w(s: &str, user: &str) -> (jiff::Timestamp, String) {
        (at(s), user.to_owned())
    }

    #[test]
    fn a_cut_leader_that_stops_in_time_has_no_late_writes() {
        let leases = [
            w("00", "rkcm"),
            w("02", "rkcm"),
            w("20", "kcm"),
            w("22", "kcm"),
        ];
        let writes = [
            w("01", "rkcm"),
            w("03", "rkcm"),
            w("21", "kcm"),
            w("23", "kcm"),
        ];
        let c = measure_cut(&writes, &leases, "rkcm", at("03"), at("59"));
        assert_eq!(c.new_leader.as_deref(), Some("kcm"));
        assert_eq!(c.failover_gap_s, Some(18.0));
        assert_eq!(c.lease_moved_s, Some(17.0));
        assert_eq!(c.old_writes_after_cut, 1, "the write at the cut's instant");
        assert_eq!(c.writes_after_lease_lost, 0);
        assert_eq!(c.writes_after_renew_deadline, 0);
    }

    #[test]
    fn writes_after_the_lease_moved_or_the_renew_deadline_are_counted() {
        let leases = [w("02", "rkcm"), w("18", "kcm")];
        // Last renewal at 02: deadline 12. Writes at 13 (late) and 19 (after the move).
        let writes = [
            w("05", "rkcm"),
            w("13", "rkcm"),
            w("19", "rkcm"),
            w("20", "kcm"),
        ];
        let c = measure_cut(&writes, &leases, "rkcm", at("04"), at("59"));
        assert_eq!(c.old_writes_after_cut, 3);
        assert_eq!(c.writes_after_renew_deadline, 2);
        assert_eq!(c.writes_after_lease_lost, 1);
        // Outside the window nothing counts (the old leader may lead again later).
        let c = measure_cut(&writes, &leases, "rkcm", at("04"), at("10"));
        assert_eq!(c.old_writes_after_cut, 1);
        assert_eq!(c.writes_after_lease_lost, 0);
    }

    #[test]
    fn a_replica_set_is_short_while_its_live_pods_are_fewer_than_its_replicas() {
        let rs = |replicas: i32| -> k8s_openapi::api::apps::v1::ReplicaSet {
            serde_json::from_value(json!({
                "metadata": {"name": "d2-8fcf75f4d", "uid": "rs-uid"},
                "spec": {"replicas": replicas, "selector": {}},
            }))
            .expect("a ReplicaSet")
        };
        let pod = |name: &str, owner: &str, terminating: bool| -> Pod {
            let mut p: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "ownerReferences": [{"apiVersion": "apps/v1",
                    "kind": "ReplicaSet", "name": "x", "uid": owner, "controller": true}]},
            }))
            .expect("a Pod");
            if terminating {
                p.metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        jiff::Timestamp::UNIX_EPOCH,
                    ));
            }
            p
        };
        let pods = vec![
            pod("a", "rs-uid", false),
            pod("b", "rs-uid", true),
            pod("c", "other", false),
        ];
        assert!(is_short(&rs(2), &pods), "one live pod of two");
        assert!(!is_short(&rs(1), &pods));
        assert!(!is_short(&rs(0), &pods), "scaled to zero: nothing owed");
        assert!(is_short(&rs(1), &[]));
    }

    #[test]
    fn pod_creates_skip_dry_runs_failures_and_other_namespaces() {
        let line = |t: &str, ns: &str, code: i64, uri: &str| {
            json!({"stage": "ResponseComplete", "verb": "create",
                   "objectRef": {"resource": "pods", "namespace": ns},
                   "requestURI": uri, "responseStatus": {"code": code},
                   "requestReceivedTimestamp": format!("2026-01-01T00:00:{t}Z")})
            .to_string()
        };
        let log = [
            line("01", "ns", 422, "/api/v1/namespaces/ns/pods"),
            line("02", "ns", 201, "/api/v1/namespaces/ns/pods?dryRun=All"),
            line("03", "other", 201, "/api/v1/namespaces/other/pods"),
            line("04", "ns", 201, "/api/v1/namespaces/ns/pods"),
        ]
        .join("\n");
        assert_eq!(pod_creates(&log, "ns"), vec![at("04")]);
    }
}
