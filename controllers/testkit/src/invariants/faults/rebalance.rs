//! The `rebalance` scenario (rkcm's sharded mode only): replicas of rkcm with
//! `--rkcm-shards` come and go under churn in several namespaces spread over the ring, until
//! the range Leases changed hands [`Options::rebalances`] times. One replica first, then
//! three, then a cycle: one SIGKILLed (two left), one started (three), one SIGTERMed (two),
//! one started (three), each change waited for until the ring is balanced again. Every
//! replica runs as its own plane user (`rkcm-r<i>`, never reused), so the audit log tells
//! its writes apart; afterwards the audit log's shard Lease terms and the replicas' writes
//! are judged by [`terms::check`](super::terms::check).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use rand::Rng;
use rkcm_runtime::shard::balance::{self, RangeLease, View};
use rkcm_runtime::shard::{LEASE_PREFIX, Ring};

use super::leader::{Replica, close_run};
use super::outcome::{CONTROLLERS, Options, Outcome, Rebalance};
use super::terms::{self, Filter, Parsed};
use super::workload::Workload;
use crate::cluster::{TestCluster, TestNamespace, unique_name};
use crate::harness::ManagerKind;
use crate::invariants::Config;
use crate::invariants::watch::{InvariantWatcher, Scope};
use crate::wait::wait_for;

/// The namespace of the shard Leases: the plane's audit policy logs Lease writes here with
/// their body (`e2e/chaos.sh` brings the plane up with `AUDIT_LEASE_NAMESPACES` naming it).
pub const LEASE_NAMESPACE: &str = "rkcm-chaos-shards";

/// The replicas' plane users: `rkcm-r0`, `rkcm-r1`, ... (`EXTRA_USERS` of `e2e/cluster.sh`).
pub const USER_PREFIX: &str = "rkcm-r";

/// How many writes outside a term the outcome keeps, half of workload objects, half Events
/// (all are counted).
const KEEP_OUTSIDE: usize = 20;

/// How long one replica change may take to end in a balanced ring.
const BALANCE_TIMEOUT: Duration = Duration::from_secs(120);

/// `count` namespace names, the k-th in the k-th equal slice of `ring`, so the ranges that
/// hold them are spread over the ring.
fn spread_names(ring: Ring, count: usize) -> Result<Vec<String>> {
    let n = ring.len() as usize;
    (0..count)
        .map(|k| {
            (0..100_000)
                .map(|_| unique_name("chaos-rebalance"))
                .find(|name| ring.range_of(name) as usize * count / n == k)
                .with_context(|| format!("no namespace name in slice {k} of {count} of the ring"))
        })
        .collect()
}

/// A ring Lease's role label (`range`, `member`, `global`); a Lease without one is taken for
/// a range.
fn role(l: &Lease) -> &str {
    l.metadata
        .labels
        .as_ref()
        .and_then(|m| m.get("rkcm.io/shard-role"))
        .map_or("range", String::as_str)
}

/// The member session a Lease names (annotation `rkcm.io/shard-session`).
fn session(l: &Lease) -> Option<&str> {
    l.metadata
        .annotations
        .as_ref()?
        .get("rkcm.io/shard-session")
        .map(String::as_str)
}

/// Where a Lease's record runs out: its renewal plus its duration.
fn runs_until(l: &Lease) -> Option<jiff::Timestamp> {
    let spec = l.spec.as_ref()?;
    let renewed = spec.renew_time.as_ref()?.0;
    Some(renewed + jiff::SignedDuration::from_secs(spec.lease_duration_seconds?.into()))
}

/// The holders of the range Leases among the ring's `leases` that run now (holder set, and
/// the holder's member session running: its member Lease names the session the range Lease
/// names, renewal plus duration not past; a range Lease without a session runs on its own
/// renewals), with the number of ranges each holds; `None` while a range has no running
/// holder.
fn holders(leases: &[Lease], now: jiff::Timestamp) -> Option<BTreeMap<String, u32>> {
    let mut per = BTreeMap::new();
    for l in leases.iter().filter(|l| role(l) == "range") {
        let spec = l.spec.as_ref()?;
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
        let until = match session(l) {
            Some(s) => leases
                .iter()
                .filter(|m| role(m) == "member")
                .find(|m| {
                    session(m) == Some(s)
                        && m.spec.as_ref().and_then(|m| m.holder_identity.as_deref())
                            == Some(holder)
                })
                .and_then(runs_until)?,
            None => runs_until(l)?,
        };
        if until <= now {
            return None;
        }
        *per.entry(holder.to_owned()).or_insert(0) += 1;
    }
    Some(per)
}

/// Whether `ranges` Leases are held by exactly `replicas` identities and the ring's balance
/// ([`balance::target`], the function every replica plans with, fed the objects their member
/// Leases publish) would move none of them.
fn balanced(leases: &[Lease], ranges: u32, replicas: u32, now: jiff::Timestamp) -> bool {
    let Some(per) = holders(leases, now) else {
        return false;
    };
    let range_leases: Vec<(u32, &Lease)> = leases
        .iter()
        .filter(|l| role(l) == "range")
        .filter_map(|l| {
            let name = l.metadata.name.as_deref()?;
            let range = name
                .strip_prefix(LEASE_PREFIX)?
                .strip_prefix('-')?
                .parse()
                .ok()?;
            Some((range, l))
        })
        .collect();
    if range_leases.len() != ranges as usize || per.len() != replicas as usize {
        return false;
    }
    let holder_of = |l: &Lease| {
        l.spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default()
    };
    let member_of = |holder: &str| {
        leases.iter().find(|m| {
            role(m) == "member"
                && m.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(holder)
        })
    };
    let view: Vec<RangeLease> = range_leases
        .iter()
        .map(|(range, l)| {
            let holder = holder_of(l);
            RangeLease {
                range: *range,
                objects: balance::lease_objects(*range, l, member_of(&holder)),
                valid: true,
                holder,
                next: String::new(),
            }
        })
        .collect();
    let members: Vec<String> = per.keys().cloned().collect();
    let Some(me) = members.first() else {
        return false;
    };
    let target = balance::target(&View {
        ranges,
        me,
        members: &members,
        leases: &view,
        namespaces: &std::collections::BTreeMap::new(),
    });
    view.iter()
        .all(|l| target.get(&l.range).is_some_and(|h| *h == l.holder))
}

/// Whether every holder of the range Leases `leases` holds the range of at least one of the
/// churned namespaces (`ranges`), so every replica has work under the churn.
fn every_holder_owns_a_namespace(leases: &[Lease], ranges: &[u32]) -> bool {
    let mut owns: BTreeMap<&str, bool> = BTreeMap::new();
    for l in leases.iter().filter(|l| role(l) == "range") {
        let (Some(name), Some(holder)) = (
            l.metadata.name.as_deref(),
            l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()),
        ) else {
            continue;
        };
        let range = name
            .strip_prefix(LEASE_PREFIX)
            .and_then(|r| r.strip_prefix('-'))
            .and_then(|r| r.parse::<u32>().ok());
        let churned = range.is_some_and(|r| ranges.contains(&r));
        *owns.entry(holder).or_insert(false) |= churned;
    }
    owns.values().all(|o| *o)
}

/// Counts range handovers from a watch of the range Leases: a Lease's holder becoming
/// another identity than its last non-empty one.
fn watch_handovers(api: Api<Lease>) -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let count = Arc::new(AtomicU64::new(0));
    let counter = count.clone();
    let task = tokio::spawn(async move {
        let cfg = watcher::Config::default().labels("rkcm.io/shard-role=range");
        let mut last: BTreeMap<String, String> = BTreeMap::new();
        let mut stream = watcher(api, cfg).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            let lease = match event {
                Ok(watcher::Event::Apply(l) | watcher::Event::InitApply(l)) => l,
                _ => continue,
            };
            let (Some(name), Some(holder)) = (
                lease.metadata.name.clone(),
                lease.spec.and_then(|s| s.holder_identity),
            ) else {
                continue;
            };
            if holder.is_empty() {
                continue;
            }
            if last
                .insert(name, holder.clone())
                .is_some_and(|h| h != holder)
            {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    (count, task)
}

/// The replicas of the run: the running ones, the ones gone, and the users still unused.
struct Fleet {
    bin: PathBuf,
    dir: PathBuf,
    args: Vec<String>,
    running: Vec<Replica>,
    gone: Vec<Replica>,
    next_user: usize,
    started: u32,
    killed: u32,
    terminated: u32,
    unexpected_exits: u32,
    transitions: u32,
}

impl Fleet {
    /// Starts a replica as the next unused user.
    fn start(&mut self) -> Result<()> {
        let user = format!("{USER_PREFIX}{}", self.next_user);
        let kubeconfig = self.dir.join(format!("kubeconfig-{user}"));
        anyhow::ensure!(
            kubeconfig.exists(),
            "starting replica {}: no {} (e2e/chaos.sh brings the plane up with EXTRA_USERS; raise CHAOS_REBALANCE_USERS)",
            self.started + 1,
            kubeconfig.display()
        );
        let mut args = vec![format!("--kubeconfig={}", kubeconfig.display())];
        args.extend(self.args.iter().cloned());
        let log = std::env::temp_dir()
            .join(unique_name(&format!("rebalance-{user}")))
            .with_extension("log");
        self.running
            .push(Replica::spawn(&self.bin, &user, &args, &log)?);
        self.next_user += 1;
        self.started += 1;
        Ok(())
    }

    /// Moves replicas that exited on their own to the gone ones, counting them.
    fn reap(&mut self) {
        let mut i = 0;
        while i < self.running.len() {
            if let Ok(Some(status)) = self.running[i].child.try_wait() {
                eprintln!(
                    "rkcm-chaos: rebalance: replica {} exited on its own: {status}",
                    self.running[i].user
                );
                self.unexpected_exits += 1;
                self.gone.push(self.running.remove(i));
            } else {
                i += 1;
            }
        }
    }

    /// Sends `sig` (`KILL` or `TERM`) to a random running replica and waits for its exit;
    /// a SIGTERMed one must exit with success.
    async fn stop_one(&mut self, sig: &str, limit: Duration) -> Result<()> {
        anyhow::ensure!(!self.running.is_empty(), "no replica to stop");
        let i = rand::rng().random_range(0..self.running.len());
        let mut r = self.running.remove(i);
        r.signal(sig)
            .with_context(|| format!("SIG{sig} to replica {}", r.user))?;
        let status = tokio::time::timeout(limit, r.child.wait())
            .await
            .with_context(|| format!("replica {} still runs {limit:?} after SIG{sig}", r.user))?
            .with_context(|| format!("waiting for replica {}", r.user))?;
        if sig == "KILL" {
            self.killed += 1;
        } else {
            self.terminated += 1;
            if !status.success() {
                eprintln!(
                    "rkcm-chaos: rebalance: replica {} exited {status} after SIGTERM",
                    r.user
                );
                self.unexpected_exits += 1;
            }
        }
        self.gone.push(r);
        Ok(())
    }

    /// Every replica, running or gone (their logs are read for panics).
    fn all(&mut self) -> Vec<Replica> {
        let mut all = std::mem::take(&mut self.gone);
        all.append(&mut self.running);
        all
    }
}

/// The scenario's state shared by its steps.
struct Run<'a> {
    opts: &'a Options,
    ring: Ring,
    leases: Api<Lease>,
    handovers: Arc<AtomicU64>,
    /// The churned namespaces' ranges.
    churned: Vec<u32>,
    /// Balanced rings seen, and of them those where every replica held a churned namespace.
    balanced: AtomicU32,
    spread: AtomicU32,
}

impl Run<'_> {
    /// Waits until the running replicas hold the ring as its balance would leave it.
    async fn wait_balanced(&self, replicas: usize, step: &str) -> Result<()> {
        // The ring's Leases: the ranges and the member sessions that hold them.
        let params = ListParams::default().labels(&format!("rkcm.io/shard-ring={LEASE_PREFIX}"));
        let replicas = u32::try_from(replicas).context("replica count")?;
        let leases = wait_for(
            &format!("the ring balanced over {replicas} replicas after {step}"),
            BALANCE_TIMEOUT,
            || async {
                let list = self.leases.list(&params).await?;
                let now = jiff::Timestamp::now();
                Ok(balanced(&list.items, self.ring.len(), replicas, now).then_some(list.items))
            },
        )
        .await?;
        self.balanced.fetch_add(1, Ordering::Relaxed);
        if every_holder_owns_a_namespace(&leases, &self.churned) {
            self.spread.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// One replica change, then the wait for the ring to be balanced and a short random
    /// pause (the fault schedule's pacing).
    async fn transition(&self, fleet: &mut Fleet, change: &str) -> Result<()> {
        fleet.reap();
        let stop_limit = self.opts.shard_timings.1 + Duration::from_secs(20);
        match change {
            "KILL" | "TERM" => fleet.stop_one(change, stop_limit).await?,
            _ => fleet.start()?,
        }
        fleet.transitions += 1;
        let step = format!(
            "change {} ({change}, handovers so far {})",
            fleet.transitions,
            self.handovers.load(Ordering::Relaxed)
        );
        self.wait_balanced(fleet.running.len(), &step).await?;
        let pause = rand::rng().random_range(500..2500);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        Ok(())
    }

    /// The cycle KILL, start, TERM, start from three replicas until the handovers reach the
    /// target (or the time limit: an error).
    async fn cycle(&self, fleet: &mut Fleet) -> Result<()> {
        let begun = Instant::now();
        let cycle = ["KILL", "START", "TERM", "START"];
        let mut i = 0;
        while self.handovers.load(Ordering::Relaxed) < self.opts.rebalances {
            anyhow::ensure!(
                begun.elapsed() < self.opts.rebalance_timeout,
                "only {} handovers of {} after {:?}",
                self.handovers.load(Ordering::Relaxed),
                self.opts.rebalances,
                self.opts.rebalance_timeout
            );
            self.transition(fleet, cycle[i % cycle.len()]).await?;
            i += 1;
        }
        // End on three replicas.
        while fleet.running.len() < 3 {
            self.transition(fleet, "START").await?;
        }
        Ok(())
    }
}

/// Creates the Lease namespace if missing and deletes any shard Lease left in it.
async fn fresh_lease_namespace(cluster: &TestCluster) -> Result<Api<Lease>> {
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    if namespaces.get_opt(LEASE_NAMESPACE).await?.is_none() {
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NAMESPACE}}))?;
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {LEASE_NAMESPACE}"))?;
    }
    let leases: Api<Lease> = Api::namespaced(cluster.client(), LEASE_NAMESPACE);
    leases
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&format!("rkcm.io/shard-ring={LEASE_PREFIX}")),
        )
        .await
        .with_context(|| format!("deleting old shard Leases in {LEASE_NAMESPACE}"))?;
    Ok(leases)
}

/// The churned namespaces (spread over the ring), once each has its default
/// ServiceAccount, and one invariant watcher over all of them.
async fn spread_namespaces(
    cluster: &TestCluster,
    ring: Ring,
    count: usize,
) -> Result<(Vec<TestNamespace>, InvariantWatcher)> {
    let mut namespaces = Vec::new();
    for name in spread_names(ring, count)? {
        let ns = cluster.namespace_named(name).await?;
        let sa = ns.api::<ServiceAccount>();
        wait_for(
            &format!("the default ServiceAccount of {}", ns.name()),
            Duration::from_secs(60),
            || async { Ok(sa.get_opt("default").await?.map(|_| ())) },
        )
        .await?;
        namespaces.push(ns);
    }
    let watcher = InvariantWatcher::start(
        cluster.client(),
        Scope::Namespaces(namespaces.iter().map(|n| n.name().to_owned()).collect()),
        Config::default(),
    )
    .await?;
    Ok((namespaces, watcher))
}

/// Every replica's arguments but its kubeconfig.
fn replica_args(opts: &Options) -> Vec<String> {
    let (lease, renew, retry) = opts.shard_timings;
    vec![
        format!("--controllers={CONTROLLERS}"),
        "--leader-elect=true".into(),
        format!("--rkcm-shards={}", opts.shards),
        format!("--leader-elect-resource-namespace={LEASE_NAMESPACE}"),
        format!("--leader-elect-lease-duration={}ms", lease.as_millis()),
        format!("--leader-elect-renew-deadline={}ms", renew.as_millis()),
        format!("--leader-elect-retry-period={}ms", retry.as_millis()),
        "--secure-port=0".into(),
        "--v=2".into(),
        format!("--kube-api-qps={}", opts.qps),
        format!("--kube-api-burst={}", opts.qps * 2),
    ]
}

/// Churns every workload in rounds until `stop`: (pod deletions, spec changes).
async fn churn_until(works: &[Workload<'_>], stop: &AtomicBool) -> Result<(u64, u64)> {
    let mut total = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        let until = Instant::now() + Duration::from_secs(10);
        for r in futures::future::join_all(works.iter().map(|w| w.churn(until))).await {
            let (d, c) = r?;
            total.0 += d;
            total.1 += c;
        }
    }
    Ok(total)
}

/// Runs `futures` at once; the longest time one returned.
async fn longest<Fut>(futures: impl IntoIterator<Item = Fut>) -> Result<f64>
where
    Fut: std::future::Future<Output = Result<f64>>,
{
    let mut longest = 0f64;
    for r in futures::future::join_all(futures).await {
        longest = longest.max(r?);
    }
    Ok(longest)
}

/// The audit log's terms and the replicas' writes since `audit` was opened, judged.
fn judge_audit(audit: &Path, from: u64, ring: Ring) -> Result<(terms::TermCheck, usize)> {
    use std::io::{BufRead, Seek, SeekFrom};
    let mut f = std::fs::File::open(audit)
        .with_context(|| format!("opening the audit log {}", audit.display()))?;
    f.seek(SeekFrom::Start(from))?;
    let users = |u: &str| u.starts_with(USER_PREFIX);
    let filter = Filter {
        lease_ns: LEASE_NAMESPACE,
        prefix: LEASE_PREFIX,
        users: &users,
    };
    let mut parsed = Parsed::default();
    for line in std::io::BufReader::new(f).lines() {
        parsed.feed(&line.context("reading the audit log")?, &filter);
    }
    let lease_of = |ns: &str| format!("{LEASE_PREFIX}-{}", ring.range_of(ns));
    let global = format!("{LEASE_PREFIX}-global");
    Ok((
        terms::check(
            &parsed.leases,
            &parsed.members,
            &parsed.writes,
            &global,
            &lease_of,
        ),
        parsed.bodiless,
    ))
}

/// The `rebalance` scenario for rkcm. Needs `RKCM_CLUSTER_DIR` (the plane's directory: the
/// replicas' kubeconfigs and the audit log).
pub async fn run_rebalance(cluster: &TestCluster, opts: &Options) -> Result<Outcome> {
    let kind = ManagerKind::Rkcm;
    let dir =
        PathBuf::from(std::env::var_os("RKCM_CLUSTER_DIR").context("RKCM_CLUSTER_DIR is not set")?);
    let audit = dir.join("logs/audit.log");
    let audit_from = std::fs::metadata(&audit)
        .with_context(|| format!("no audit log at {}", audit.display()))?
        .len();
    let ring = Ring::new(opts.shards).map_err(|e| anyhow::anyhow!("--shards: {e}"))?;
    let leases = fresh_lease_namespace(cluster).await?;
    let (namespaces, watcher) = spread_namespaces(cluster, ring, opts.shard_namespaces).await?;
    // The total delete rate spread over the namespaces.
    let per_ns = Options {
        delete_rate: (opts.delete_rate / u32::try_from(namespaces.len()).unwrap_or(1)).max(1),
        ..opts.clone()
    };
    let works: Vec<Workload<'_>> = namespaces
        .iter()
        .map(|ns| Workload {
            ns,
            opts: &per_ns,
            all: false,
        })
        .collect();
    let (handovers, handover_task) = watch_handovers(leases.clone());
    let run = Run {
        opts,
        ring,
        leases,
        handovers,
        churned: namespaces.iter().map(|n| ring.range_of(n.name())).collect(),
        balanced: AtomicU32::new(0),
        spread: AtomicU32::new(0),
    };
    let mut fleet = Fleet {
        bin: kind.binary()?,
        dir,
        args: replica_args(opts),
        running: Vec::new(),
        gone: Vec::new(),
        next_user: 0,
        started: 0,
        killed: 0,
        terminated: 0,
        unexpected_exits: 0,
        transitions: 0,
    };
    let mut outcome = Outcome::empty("rebalance", kind, 0.0);
    let begun = Instant::now();
    let result = drive(&run, &mut fleet, &works, &mut outcome).await;
    let result = result.and_then(|()| {
        let (check, bodiless) = judge_audit(&audit, audit_from, ring)?;
        outcome.rebalance = Some(record(
            opts,
            &namespaces,
            ring,
            &fleet,
            &run,
            check,
            bodiless,
        ));
        Ok(())
    });
    handover_task.abort();
    outcome.faults = fleet.killed + fleet.terminated;
    outcome.unexpected_exits = fleet.unexpected_exits;
    let mut all = fleet.all();
    close_run(&mut outcome, result, begun, watcher, &mut all).await;
    if outcome.error.is_some() || !outcome.violations.is_empty() {
        outcome.kept_log = all.first().map(|r| {
            format!(
                "{} (and the other replicas' logs beside it: rebalance-{USER_PREFIX}*)",
                r.log.display()
            )
        });
    }
    Ok(outcome)
}

/// The run's steps: one replica and the baseline, three replicas, the cycle under churn, and
/// the last change with a kill, to settled.
async fn drive(
    run: &Run<'_>,
    fleet: &mut Fleet,
    works: &[Workload<'_>],
    outcome: &mut Outcome,
) -> Result<()> {
    let timeout = run.opts.converge_timeout;
    run.transition(fleet, "START").await?;
    outcome.undisturbed_converge_s = longest(works.iter().map(|w| w.baseline(timeout))).await?;
    run.transition(fleet, "START").await?;
    run.transition(fleet, "START").await?;
    let stop = AtomicBool::new(false);
    let faults = async {
        let r = run.cycle(fleet).await;
        stop.store(true, Ordering::Relaxed);
        r
    };
    let (churned, cycled) = tokio::join!(churn_until(works, &stop), faults);
    let (deleted, changes) = churned?;
    cycled?;
    outcome.pod_deletions = deleted;
    outcome.spec_changes = changes;
    // The last change, a replica killed right after it and another started: to settled.
    let start = Instant::now();
    longest(
        works
            .iter()
            .map(|w| async move { w.bump(1).await.map(|()| 0.0) }),
    )
    .await?;
    run.transition(fleet, "KILL").await?;
    run.transition(fleet, "START").await?;
    longest(
        works
            .iter()
            .map(|w| async move { Ok(w.wait_settled(timeout).await?.as_secs_f64()) }),
    )
    .await?;
    outcome.converge_after_fault_s = Some(start.elapsed().as_secs_f64());
    fleet.reap();
    Ok(())
}

fn record(
    opts: &Options,
    namespaces: &[TestNamespace],
    ring: Ring,
    fleet: &Fleet,
    run: &Run<'_>,
    mut check: terms::TermCheck,
    bodiless: usize,
) -> Rebalance {
    let (lease, renew, retry) = opts.shard_timings;
    let outside_total = check.outside.len();
    // The first few of each: writes of workload objects, then Events.
    let (events, objects): (Vec<_>, Vec<_>) = std::mem::take(&mut check.outside)
        .into_iter()
        .partition(|o| o.write.split(' ').nth(1) == Some("events"));
    let outside_events = events.len();
    check.outside = objects.into_iter().take(KEEP_OUTSIDE / 2).collect();
    check
        .outside
        .extend(events.into_iter().take(KEEP_OUTSIDE / 2));
    Rebalance {
        shards: opts.shards,
        timings: format!(
            "lease {:?}, renew deadline {:?}, retry {:?}",
            lease, renew, retry
        ),
        namespaces: namespaces
            .iter()
            .map(|n| (n.name().to_owned(), ring.range_of(n.name())))
            .collect(),
        started: fleet.started,
        killed: fleet.killed,
        terminated: fleet.terminated,
        transitions: fleet.transitions,
        watched_handovers: run.handovers.load(Ordering::Relaxed),
        balanced: run.balanced.load(Ordering::Relaxed),
        spread: run.spread.load(Ordering::Relaxed),
        check,
        outside_total,
        outside_events,
        bodiless_lease_writes: bodiless,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use serde_json::json;

    use super::*;

    fn lease(holder: &str, renewed: &str, duration: i32) -> Lease {
        let mut l: Lease = serde_json::from_value(json!({
            "metadata": {"name": "x"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration}
        }))
        .unwrap();
        if let Some(s) = l.spec.as_mut() {
            s.renew_time = Some(MicroTime(renewed.parse().unwrap()));
        }
        l
    }

    /// `l` as the Lease of range `i`.
    fn named(mut l: Lease, i: usize) -> Lease {
        l.metadata.name = Some(format!("{LEASE_PREFIX}-{i}"));
        l
    }

    #[test]
    fn the_ring_is_balanced_when_every_range_runs_in_fair_shares() {
        let now: jiff::Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let fresh = "2026-01-01T00:00:09Z";
        let stale = "2026-01-01T00:00:05Z";
        let ring = |holders: &[(&str, &str)]| -> Vec<Lease> {
            holders
                .iter()
                .enumerate()
                .map(|(i, (h, t))| named(lease(h, t, 4), i))
                .collect()
        };
        // 5 ranges over 2 replicas: 3 + 2.
        let good = ring(&[
            ("a", fresh),
            ("a", fresh),
            ("a", fresh),
            ("b", fresh),
            ("b", fresh),
        ]);
        assert!(balanced(&good, 5, 2, now));
        // 4 + 1 is not fair.
        let skewed = ring(&[
            ("a", fresh),
            ("a", fresh),
            ("a", fresh),
            ("a", fresh),
            ("b", fresh),
        ]);
        assert!(!balanced(&skewed, 5, 2, now));
        // A range released or run out has no holder.
        let released = ring(&[
            ("a", fresh),
            ("a", fresh),
            ("", fresh),
            ("b", fresh),
            ("b", fresh),
        ]);
        assert!(!balanced(&released, 5, 2, now));
        let expired = ring(&[
            ("a", fresh),
            ("a", fresh),
            ("a", stale),
            ("b", fresh),
            ("b", fresh),
        ]);
        assert!(!balanced(&expired, 5, 2, now));
        // A third holder (a killed replica's ranges not yet run out).
        let three = ring(&[
            ("a", fresh),
            ("a", fresh),
            ("c", fresh),
            ("b", fresh),
            ("b", fresh),
        ]);
        assert!(!balanced(&three, 5, 2, now));
        // A Lease missing.
        assert!(!balanced(&good[..4], 5, 2, now));
    }

    /// Range Leases of member sessions run while the holder's member Lease shows that session
    /// and has not run out; their own renewal time does not count.
    #[test]
    fn a_session_s_ranges_run_while_its_member_lease_does() {
        let now: jiff::Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let (fresh, stale) = ("2026-01-01T00:00:09Z", "2026-01-01T00:00:05Z");
        let with = |mut l: Lease, role: &str, session: &str| {
            l.metadata.labels = Some([("rkcm.io/shard-role".into(), role.into())].into());
            l.metadata.annotations =
                Some([("rkcm.io/shard-session".into(), session.into())].into());
            l
        };
        // Taken long ago (renewTime stale), held by sessions a/1 and b/1.
        let ranges = |a: &str| -> Vec<Lease> {
            vec![
                named(with(lease("a", stale, 4), "range", a), 0),
                named(with(lease("a", stale, 4), "range", a), 1),
                named(with(lease("b", stale, 4), "range", "1"), 2),
            ]
        };
        let members = |a_renewed: &str| {
            vec![
                with(lease("a", a_renewed, 4), "member", "1"),
                with(lease("b", fresh, 4), "member", "1"),
                with(lease("b", fresh, 4), "global", "1"),
            ]
        };
        let ring = |a: &str, a_renewed: &str| [ranges(a), members(a_renewed)].concat();
        assert!(balanced(&ring("1", fresh), 3, 2, now));
        assert!(
            !balanced(&ring("1", stale), 3, 2, now),
            "a's session ran out"
        );
        assert!(
            !balanced(&ring("0", fresh), 3, 2, now),
            "a's ranges name a session its member Lease does not run"
        );
    }

    /// The balance counts the objects the member Leases publish: an even split of the ranges
    /// with the objects on one side is not balanced.
    #[test]
    fn a_ring_split_by_count_with_the_objects_on_one_side_is_not_balanced() {
        let now: jiff::Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let fresh = "2026-01-01T00:00:09Z";
        let member = |holder: &str, objects: &str| {
            let mut l = lease(holder, fresh, 4);
            l.metadata.labels = Some([("rkcm.io/shard-role".into(), "member".into())].into());
            l.metadata.annotations =
                Some([("rkcm.io/shard-objects".into(), objects.into())].into());
            l
        };
        let ranges: Vec<Lease> = ["a", "a", "b", "b"]
            .iter()
            .enumerate()
            .map(|(i, h)| named(lease(h, fresh, 4), i))
            .collect();
        let with_members =
            |a: &str, b: &str| [ranges.clone(), vec![member("a", a), member("b", b)]].concat();
        assert!(balanced(&with_members("0=0,1=0", "2=0,3=0"), 4, 2, now));
        assert!(balanced(
            &with_members("0=5000,1=0", "2=5000,3=0"),
            4,
            2,
            now
        ));
        assert!(
            !balanced(&with_members("0=5000,1=5000", "2=0,3=0"), 4, 2, now),
            "both heavy ranges on a"
        );
    }

    #[test]
    fn every_holder_must_hold_a_churned_namespace_s_range() {
        let at = "2026-01-01T00:00:09Z";
        let named = |i: u32, holder: &str| {
            let mut l = lease(holder, at, 4);
            l.metadata.name = Some(format!("{LEASE_PREFIX}-{i}"));
            l
        };
        let leases = [named(0, "a"), named(1, "a"), named(2, "b"), named(3, "b")];
        assert!(every_holder_owns_a_namespace(&leases, &[1, 2]));
        assert!(!every_holder_owns_a_namespace(&leases, &[0, 1]));
        assert!(!every_holder_owns_a_namespace(&leases, &[]));
    }

    #[test]
    fn spread_names_fall_in_successive_slices_of_the_ring() {
        let ring = Ring::new(64).unwrap();
        let names = spread_names(ring, 6).unwrap();
        let slices: Vec<usize> = names
            .iter()
            .map(|n| ring.range_of(n) as usize * 6 / 64)
            .collect();
        assert_eq!(slices, vec![0, 1, 2, 3, 4, 5]);
    }
}
