//! The scale envelope: clusterloader2's load test, shrunk to what this plane holds. Every
//! workload controller runs; kwok nodes of the run's own (30 pods each on average, room for
//! 110) hold namespaces of Deployments, StatefulSets, Jobs and CronJobs in the load test's mix
//! (`mix.rs`) and one DaemonSet over every node. Once the manager runs, the bench drives five
//! phases, each paced at a fixed pod throughput and timed until it has converged:
//! - **create**: every object created (in a shuffled order), until every Deployment is
//!   available, every StatefulSet ready, the DaemonSet on every node and every Job complete;
//! - **scale**: every Deployment and StatefulSet scaled to between half and one and a half
//!   times its size;
//! - **roll**: every Deployment, StatefulSet and the DaemonSet given a new pod template;
//!   while these three run, churn (`churn.rs`): every second, in turn, a pod of a ReplicaSet,
//!   of a StatefulSet and of the DaemonSet deleted and a one-pod Job created;
//! - **idle probes**: single changes a few seconds apart on a quiet manager (a Deployment and
//!   a StatefulSet scaled by one, a ReplicaSet's pod and a daemon pod deleted, a one-pod Job
//!   created), each round until converged;
//! - **delete**: Deployments and StatefulSets scaled to 0, the DaemonSet moved to no node,
//!   the CronJobs and Jobs deleted (the plane runs no garbage collector: these are the parts
//!   of a deletion the workload controllers do), until no pod of theirs is left and no
//!   deleted Job's pod keeps its tracking finalizer.
//!
//! Besides the harness's numbers (CPU, RSS, requests, the plane's CPU, each phase), the run
//! reports reaction latency from the audit log (`crate::latency`: from each change to the
//! manager's first write for it, split into the idle probes and the load around them), the
//! manager's settled RSS with all pods cached, and what the plane's processes held at the
//! peak.

mod churn;
pub(crate) mod mix;
mod model;
mod objects;
mod phases;
mod writes;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::ResourceExt;

use self::mix::{Kind, Workload};
use self::model::{Key, Stores, Want};
use self::objects::RUN_LABEL;
use crate::harness::{self, Env, Probe, Scenario};
use crate::results::{Correctness, Distribution, Metric};
use crate::scenarios::idle::ALL_CONTROLLERS;
use crate::scenarios::podgc::group;
use crate::{audit, k8s, latency, nodes, procfs};

/// Room of each node of the run (the load test's nodes average 30 pods).
const PODS_PER_NODE_ROOM: usize = 110;
/// Seconds between two rounds of idle probes (the manager is quiet between them).
const PROBE_GAP: Duration = Duration::from_secs(2);
/// The Lease a manager that runs as one process elects over (kube-system).
const MEASURED_LEASE: &str = "rkcm-bench-envelope-measured";

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Namespaces of the run (the load test: one per 100 nodes).
    #[arg(long, default_value_t = 1)]
    pub namespaces: usize,
    /// Pods of each namespace (the load test: 3 000).
    #[arg(long, default_value_t = 3_000)]
    pub pods_per_namespace: usize,
    /// Nodes per namespace (the load test: 100, 30 pods each).
    #[arg(long, default_value_t = 100)]
    pub nodes_per_namespace: usize,
    /// Pods a second the create, scale, roll and delete phases hand out.
    #[arg(long, default_value_t = 20.0)]
    pub throughput: f64,
    /// Disruptions a second while the create, scale and roll phases run (in turn: a
    /// ReplicaSet's pod, a StatefulSet's pod and a daemon pod deleted, a one-pod Job
    /// created): the changes whose reaction is measured under load.
    #[arg(long, default_value_t = 1.0)]
    pub churn: f64,
    /// Rounds of idle probes.
    #[arg(long, default_value_t = 20)]
    pub probes: usize,
    /// Seconds per point of the RSS curve.
    #[arg(long, default_value_t = 10)]
    pub curve_seconds: u64,
}

pub struct Envelope {
    args: Args,
    plan: Vec<Workload>,
}

impl Envelope {
    pub fn new(args: Args) -> Self {
        let plan = mix::plan(args.namespaces, args.pods_per_namespace, args.nodes());
        Self { args, plan }
    }
}

impl Args {
    fn nodes(&self) -> usize {
        self.namespaces * self.nodes_per_namespace
    }
}

pub struct State {
    run: String,
    audit_log: std::path::PathBuf,
    stores: Stores,
    want: BTreeMap<Key, Want>,
    manager_user: &'static str,
    audit_from: Option<u64>,
    idle: Option<(jiff::Timestamp, jiff::Timestamp)>,
    settled_rss: Option<u64>,
    cached_pods: usize,
    plane_rss: BTreeMap<String, u64>,
    problems: Vec<String>,
    cron_jobs_seen: usize,
    /// The reaction samples (under load, idle), read from the audit log once for the metrics
    /// and the distributions.
    reactions: std::sync::OnceLock<Option<Reactions>>,
}

/// Reaction samples under load and in the idle probes phase.
type Reactions = (Vec<latency::Sample>, Vec<latency::Sample>);

/// The index first: names that differ only in their last characters hash into one range of
/// a sharded ring (the API server's FNV-1a spreads the last bytes into the low bits only), and
/// sharded runs need their namespaces spread over the ring.
fn ns_of(run: &str, i: usize) -> String {
    format!("{i}-{run}")
}

fn node_name(run: &str, i: usize) -> String {
    format!("{run}-n{i:04}")
}

/// `VmRSS` of the plane's processes now.
pub(crate) fn plane_rss(cluster_dir: &std::path::Path) -> BTreeMap<String, u64> {
    harness::plane_pids(cluster_dir)
        .into_iter()
        .filter_map(|(name, pid)| Some((name, procfs::status_bytes(pid, "VmRSS")?)))
        .collect()
}

/// The run's reaction samples, read from the audit log on first use.
fn reactions(state: &State) -> Option<&Reactions> {
    state
        .reactions
        .get_or_init(|| {
            let from = state.audit_from?;
            let records = match latency::read(&state.audit_log, from, None) {
                Ok(r) => r,
                Err(e) => {
                    say!("WARNING: reading the audit log for reaction latency: {e:#}");
                    return None;
                }
            };
            let mut samples = latency::reactions(&records, state.manager_user, mix::classify_owner);
            samples.extend(latency::cron_runs(&records, state.manager_user, |n| {
                n.starts_with(Kind::CronJob.prefix())
            }));
            let idle =
                |s: &latency::Sample| state.idle.is_some_and(|(a, b)| s.at >= a && s.at <= b);
            let (quiet, busy): (Vec<_>, Vec<_>) = samples.into_iter().partition(idle);
            Some((busy, quiet))
        })
        .as_ref()
}

/// Every answered change's latency in ms, per controller and all together (`reaction
/// (load)`, `reaction deployment (load)`), ascending.
fn latency_distributions(samples: &[latency::Sample], tag: &str) -> Vec<Distribution> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for s in samples {
        let Some(l) = s.latency else { continue };
        let ms = (l * 1e6).round() / 1e3;
        by.entry(format!("reaction ({tag})")).or_default().push(ms);
        by.entry(format!("reaction {} ({tag})", s.controller))
            .or_default()
            .push(ms);
    }
    by.into_iter()
        .map(|(name, mut values)| {
            values.sort_unstable_by(f64::total_cmp);
            Distribution {
                name,
                unit: "ms".into(),
                values,
            }
        })
        .collect()
}

fn mib(b: u64) -> f64 {
    b as f64 / 1_048_576.0
}

impl Scenario for Envelope {
    type State = State;

    fn id(&self) -> &'static str {
        "envelope"
    }

    fn title(&self) -> String {
        format!(
            "Scale envelope: {} nodes, {} namespaces of {} pods (the load test's mix), created, scaled, rolled, probed and deleted",
            group(self.args.nodes()),
            self.args.namespaces,
            group(self.args.pods_per_namespace)
        )
    }

    fn description(&self) -> String {
        let count = |k: Kind| self.plan.iter().filter(|w| w.kind == k).count();
        format!(
            "clusterloader2's load test at the size this plane holds: {nodes} kwok nodes of the \
             run's own (room for 110 pods each) and {ns} namespaces, each with a quarter of its \
             {ppn} pods in big ({big}), medium ({med}) and small ({small}) Deployments, a tenth \
             in StatefulSets and a tenth in Jobs (medium and small), two CronJobs every minute \
             (one-pod Jobs, `ttlSecondsAfterFinished: 30`), and one DaemonSet on every node: \
             {d} Deployments, {s} StatefulSets, {j} Jobs, {c} CronJobs, {pods} pods in all. \
             Every workload controller runs. Phases, each paced at {tp} pods a second and timed \
             until converged: **create**, **scale** (each Deployment and StatefulSet to between \
             half and one and a half times its size), **roll** (new pod templates, the \
             DaemonSet's too; while these three run, churn at {churn} a second: in turn a \
             ReplicaSet's, a StatefulSet's and a daemon pod deleted and a one-pod Job created), \
             **idle probes** ({probes} rounds, {gap} s apart: a Deployment \
             and a StatefulSet scaled by one, a ReplicaSet's pod and a daemon pod deleted, a \
             one-pod Job created) and **delete** (Deployments and StatefulSets scaled to 0, \
             the DaemonSet moved to no node, Jobs and CronJobs deleted; no garbage collector \
             runs). Reaction latency: from each change (its audit-log completion) to the \
             manager's first write for it (request received; 0 when it came before the \
             change's response was complete), per controller, in the idle \
             probes and under load (every other phase). Correct: every phase converges, every \
             Job ran exactly its completions' pods, no pod of a ReplicaSet, StatefulSet or the \
             DaemonSet is left, no deleted Job's pod keeps its tracking finalizer.",
            nodes = group(self.args.nodes()),
            ns = self.args.namespaces,
            ppn = group(self.args.pods_per_namespace),
            big = mix::BIG,
            med = mix::MEDIUM,
            small = mix::SMALL,
            d = group(count(Kind::Deployment)),
            s = group(count(Kind::StatefulSet)),
            j = group(count(Kind::Job)),
            c = group(count(Kind::CronJob)),
            pods = group(mix::steady_pods(&self.plan)),
            tp = self.args.throughput,
            churn = self.args.churn,
            probes = self.args.probes,
            gap = PROBE_GAP.as_secs(),
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("namespaces".into(), self.args.namespaces.to_string()),
            (
                "pods_per_namespace".into(),
                self.args.pods_per_namespace.to_string(),
            ),
            ("nodes".into(), self.args.nodes().to_string()),
            ("pods".into(), mix::steady_pods(&self.plan).to_string()),
            ("objects".into(), self.plan.len().to_string()),
            ("throughput".into(), self.args.throughput.to_string()),
            ("probes".into(), self.args.probes.to_string()),
            ("churn_per_second".into(), self.args.churn.to_string()),
        ])
    }

    fn controllers(&self) -> Vec<&'static str> {
        ALL_CONTROLLERS.to_vec()
    }

    /// One manager runs leader-elected with the default lease timings, as it is deployed:
    /// it renews its Lease every retry period (2 s), which a sharded run's member sessions
    /// stand against. `setup` deletes the Lease, so that a run never waits out the previous
    /// run's holder.
    fn single_flags(&self) -> Vec<String> {
        harness::leader_elected(MEASURED_LEASE)
    }

    fn rss_curve(&self) -> Option<Duration> {
        Some(Duration::from_secs(self.args.curve_seconds.max(1)))
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        anyhow::ensure!(
            self.args.namespaces > 0 && self.args.nodes_per_namespace > 0,
            "--namespaces and --nodes-per-namespace must be positive"
        );
        let peak = mix::steady_pods(&self.plan) * 3;
        anyhow::ensure!(
            self.args.nodes() * PODS_PER_NODE_ROOM >= peak,
            "{} nodes hold {} pods, fewer than three times the run's {} (scale up by half, \
             surge and terminating pods at once)",
            self.args.nodes(),
            self.args.nodes() * PODS_PER_NODE_ROOM,
            mix::steady_pods(&self.plan)
        );
        // A reused plane may still hold an interrupted run's objects.
        self.cleanup(env, ns).await?;
        k8s::delete_lease(&env.client, MEASURED_LEASE).await?;
        k8s::ensure_namespace(&env.client, ns).await?;
        for i in 0..self.args.namespaces {
            k8s::ensure_namespace(&env.client, &ns_of(ns, i)).await?;
        }
        let names: Vec<String> = (0..self.args.nodes()).map(|i| node_name(ns, i)).collect();
        let t = Instant::now();
        nodes::create_nodes(env, &names, |name| {
            nodes::kwok_node_with_room(name, RUN_LABEL, ns, PODS_PER_NODE_ROOM)
        })
        .await?;
        nodes::wait_nodes_ready(env, RUN_LABEL, ns, names.len()).await?;
        say!(
            "{} nodes of {ns} Ready in {:.1} s",
            names.len(),
            t.elapsed().as_secs_f64()
        );
        let stores = Stores::start(&env.client, ns).await?;
        Ok(State {
            run: ns.to_string(),
            audit_log: env.audit_log.clone(),
            stores,
            want: BTreeMap::new(),
            manager_user: "",
            audit_from: None,
            idle: None,
            settled_rss: None,
            cached_pods: 0,
            plane_rss: BTreeMap::new(),
            problems: Vec::new(),
            cron_jobs_seen: 0,
            reactions: std::sync::OnceLock::new(),
        })
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        state.manager_user = probe.manager_user();
        // Sharded replicas own nothing until their second round: the load's first changes
        // would wait for that and count it as reaction time, which one rkcm (leader election
        // off here) never pays. The wait is reported; the load starts once the ring is held.
        if probe.manager().is_sharded() {
            let took = crate::scenarios::threshold::shard_failover::wait_ring_held(
                env,
                probe,
                env.sharding.ranges,
            )
            .await?;
            say!("every shard range held {took:.1} s into the run; the load starts");
        }
        state.audit_from = audit::offset(&env.audit_log).ok();
        let churn = churn::Churn::start(
            env.client.clone(),
            state.stores.pod_store(),
            state.run.clone(),
            ns_of(&state.run, 0),
            Duration::from_secs_f64(1.0 / self.args.churn.max(0.001)),
        );
        let load = async {
            self.phase_create(env, state, probe).await?;
            self.phase_scale(env, state, probe).await?;
            self.phase_roll(env, state, probe).await
        }
        .await;
        // The churn's Jobs must complete like the others before the idle probes.
        let jobs = churn.stop().await;
        load?;
        for job in jobs? {
            state
                .want
                .insert((ns_of(&state.run, 0), job.name.clone()), Want::of(&job));
        }
        self.converged(state, probe, "churn Jobs", false).await?;
        self.phase_probes(env, state, probe).await?;
        self.phase_delete(env, state, probe).await
    }

    async fn verify(&self, _env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let snap = state.stores.snapshot();
        let mut wrong = state.problems.clone();
        let (count, lines) = model::lagging(&state.want, &snap, true, 5);
        if count > 0 {
            wrong.push(format!(
                "{count} objects off after the run: {}",
                lines.join("; ")
            ));
        }
        for rs in &snap.replicasets {
            let spec = rs.spec.replicas.unwrap_or(0);
            let status = rs.status.as_ref().map_or(0, |s| s.replicas);
            if spec != 0 || status != 0 {
                wrong.push(format!(
                    "replicaset {}: spec {spec}, status {status} after scaling to 0",
                    rs.name_any()
                ));
            }
        }
        let crons = self.plan.iter().filter(|w| w.kind == Kind::CronJob).count();
        Ok(Correctness::unless(wrong, || {
            format!(
                "every phase converged; {} Jobs each ran exactly its completions; {} ReplicaSets at 0; \
                 {} Jobs of {crons} CronJobs left for TTL",
                self.plan.iter().filter(|w| w.kind == Kind::Job).count(),
                snap.replicasets.len(),
                state.cron_jobs_seen
            )
        }))
    }

    fn metrics(&self, state: &State) -> Vec<Metric> {
        let mut out = Vec::new();
        let metric = |name: String, value: f64, unit: &str| Metric {
            name,
            value,
            unit: unit.to_string(),
        };
        if let Some(b) = state.settled_rss {
            out.push(metric(
                "RSS settled (all pods cached)".into(),
                mib(b),
                "MiB",
            ));
            out.push(metric("pods cached".into(), state.cached_pods as f64, ""));
        }
        for (name, b) in &state.plane_rss {
            out.push(metric(format!("{name} RSS at the peak"), mib(*b), "MiB"));
        }
        if let Some((busy, quiet)) = reactions(state) {
            for (tag, set) in [("load", busy), ("idle", quiet)] {
                for (controller, s) in latency::summarize(set) {
                    for (stat, v) in [("p50", s.p50), ("p99", s.p99), ("max", s.max)] {
                        out.push(metric(
                            format!("reaction {controller} {stat} ({tag})"),
                            (v * 1e6).round() / 1e3,
                            "ms",
                        ));
                    }
                    out.push(metric(
                        format!("reaction {controller} changes ({tag})"),
                        s.changes as f64,
                        "",
                    ));
                    if s.unanswered > 0 {
                        out.push(metric(
                            format!("reaction {controller} unanswered ({tag})"),
                            s.unanswered as f64,
                            "",
                        ));
                    }
                }
            }
        }
        out
    }

    fn distributions(&self, state: &State) -> Vec<Distribution> {
        let Some((busy, quiet)) = reactions(state) else {
            return Vec::new();
        };
        [("load", busy), ("idle", quiet)]
            .into_iter()
            .flat_map(|(tag, set)| latency_distributions(set, tag))
            .collect()
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        let c = &env.client;
        let mut result = Ok(());
        for i in 0..self.args.namespaces {
            let ns = ns_of(ns, i);
            let r = async {
                k8s::delete_workload_objects(c, &ns).await?;
                k8s::delete_all_pods(c, &ns, Duration::from_secs(600)).await
            }
            .await;
            if let Err(e) = r {
                say!("WARNING: cleanup of {ns}: {e:#}");
                result = Err(e);
            }
        }
        let nodes = nodes::delete_labelled_nodes(env, RUN_LABEL, ns).await;
        result.and(nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_distributions_keep_every_answered_change_in_ms() {
        let at = jiff::Timestamp::UNIX_EPOCH;
        let sample = |controller, latency| latency::Sample {
            controller,
            at,
            latency,
        };
        let samples = [
            sample("job", Some(0.0123456)),
            sample("deployment", Some(0.002)),
            sample("job", None), // never answered: not in the distribution
            sample("job", Some(0.001)),
        ];
        let got: Vec<(String, String, Vec<f64>)> = latency_distributions(&samples, "load")
            .into_iter()
            .map(|d| (d.name, d.unit, d.values))
            .collect();
        let want = [
            ("reaction (load)", vec![1.0, 2.0, 12.346]),
            ("reaction deployment (load)", vec![2.0]),
            ("reaction job (load)", vec![1.0, 12.346]),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((name, unit, values), (want_name, want_values)) in got.iter().zip(want) {
            assert_eq!((name.as_str(), unit.as_str()), (want_name, "ms"));
            assert_eq!(values, &want_values, "{name}");
        }
        assert!(latency_distributions(&[], "idle").is_empty());
    }
}
