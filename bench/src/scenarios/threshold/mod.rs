//! Upstream's threshold on one machine: a plane loaded with as many objects as it holds
//! (the load test's mix at ~30 pods a node, every child owned and every status set as the
//! controllers would have them, so a manager finds a converged cluster), and per manager:
//! - **cold start**: from process start until every informer synced ("Caches are synced"
//!   lines, then none for 5 s) and the first pass over every object done (every work queue
//!   empty and nothing added over a second, from `/metrics`); peak RSS, CPU, requests and the
//!   writes it made (a converged cluster asks for none), the plane's CPU and peak RSS;
//! - **settled**: RSS and CPU over an idle window, RSS per cached pod;
//! - **reaction**: single changes on a quiet manager (idle), then a burst of them (a
//!   Deployment scaled, a StatefulSet's pod deleted, a running Job's pod finished, a node
//!   deleted), each until the queues are quiet again (the deleted nodes are created again
//!   afterwards, so the next run finds the cluster this one found); percentiles of the work-queue
//!   histograms differenced over each window (both managers export upstream's names), and of
//!   the audit log's reaction latency as in the envelope;
//! - **failover**: the measured manager paused, two replicas with leader election started
//!   (the second once the first leads and has synced), the leader SIGKILLed, a Deployment
//!   scaled right after; time from the kill to the standby's first write for it. A sharded
//!   run's (several replicas, `--rkcm-shards`): the replica holding the Deployment's range
//!   SIGKILLed instead; time until its ranges are held again, and to the first write.
//!
//! The plane is loaded once (a marker ConfigMap records the size) and shared by every run;
//! the last run removes it unless `--keep-loaded`.

mod failover;
mod load;
mod objects;
mod phases;
mod queues;
pub(crate) mod shard_failover;
mod shared;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};

use crate::harness::{self, Env, Probe, Scenario};
use crate::k8s;
use crate::results::{Correctness, Metric};
use crate::scenarios::envelope::mix::Kind;
use crate::scenarios::idle::ALL_CONTROLLERS;
use crate::scenarios::podgc::group;

use shared::*;
pub use shared::{Args, Plan, Threshold};

impl Scenario for Threshold {
    type State = State;

    fn id(&self) -> &'static str {
        "threshold"
    }

    fn title(&self) -> String {
        format!(
            "Threshold: {} pods on {} kwok nodes, loaded converged: cold start, settled, reaction, failover",
            group(self.plan.pods()),
            group(self.plan.nodes)
        )
    }

    fn description(&self) -> String {
        let count = |k: Kind| self.plan.workloads.iter().filter(|w| w.kind == k).count();
        format!(
            "The plane loaded directly by the bench (as fast as it takes it) with the load \
             test's mix in {ns} namespaces: {d} Deployments with their ReplicaSets, {s} \
             StatefulSets with their revisions and claims, {j} Jobs (half finished, half \
             running on {st} static nodes kwok does not run), {c} CronJobs (scheduled once a \
             year) and one DaemonSet on each of {nodes} kwok nodes, {pods} pods, every child \
             owned and every status set as the controllers would have them. Per manager, \
             every controller running, one process leader-elected as deployed (renewing its \
             Lease every 2 s; a long lease duration keeps it through the failover's pause): \
             **cold start** (from the process's start until every \
             informer synced and then every work queue empty with nothing added over a second: \
             the time a new leader needs before it is useful; the writes it made), **settled** \
             ({settled} s idle), **reaction** ({probes} single changes on a quiet manager, \
             then a burst of {burst} of each kind: a Deployment scaled by one, a StatefulSet's \
             pod deleted, a running Job's pod finished, a node deleted; percentiles of the \
             work-queue histograms over each window and of the audit log's reaction latency; \
             the deleted nodes created again afterwards) \
             and **failover** (the manager paused, two replicas with leader election, the \
             leader SIGKILLed once both synced, a Deployment scaled right after: time to the \
             standby's first write for it, whose CPU from the kill is charged to the manager).",
            ns = self.plan.namespaces,
            d = group(count(Kind::Deployment)),
            s = group(count(Kind::StatefulSet)),
            j = group(count(Kind::Job)),
            st = self.plan.static_nodes,
            c = group(count(Kind::CronJob)),
            nodes = group(self.plan.nodes),
            pods = group(self.plan.pods()),
            settled = self.args.settled_seconds,
            probes = self.args.probes,
            burst = self.args.burst_changes,
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        let mut p = self.plan.size();
        p.insert(
            "settled_seconds".into(),
            self.args.settled_seconds.to_string(),
        );
        p.insert("probes".into(), self.args.probes.to_string());
        p.insert("burst".into(), self.args.burst_changes.to_string());
        p.insert("static_nodes".into(), self.plan.static_nodes.to_string());
        p
    }

    fn controllers(&self) -> Vec<&'static str> {
        ALL_CONTROLLERS.to_vec()
    }

    fn manager_flags(&self) -> Vec<String> {
        let certs = std::env::temp_dir().join(format!(
            "rkcm-bench-threshold-certs-{}",
            self.args.metrics_port
        ));
        vec![
            format!("--secure-port={}", self.args.metrics_port),
            "--bind-address=127.0.0.1".into(),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".into(),
            format!("--cert-dir={}", certs.display()),
        ]
    }

    /// One manager runs leader-elected, as it is deployed: it renews its Lease every retry
    /// period (2 s, the default), which a sharded run's member sessions stand against. The
    /// Lease's duration and renew deadline are long so that the failover step's pause of the
    /// measured manager (SIGSTOP, up to a minute) does not cost it its Lease; neither changes
    /// how often it renews. `setup` deletes the Lease, so that a run never waits out the
    /// previous run's holder.
    fn single_flags(&self) -> Vec<String> {
        let mut flags = harness::leader_elected(MEASURED_LEASE);
        flags.extend([
            "--leader-elect-lease-duration=3600s".into(),
            "--leader-elect-renew-deadline=3500s".into(),
        ]);
        flags
    }

    fn rss_curve(&self) -> Option<Duration> {
        Some(Duration::from_secs(5))
    }

    async fn setup(&self, env: &Env, _ns: &str) -> anyhow::Result<State> {
        k8s::delete_lease(&env.client, MEASURED_LEASE).await?;
        let want = self.plan.size();
        let have = load::loaded_size(&env.client).await?;
        let mut metrics = Vec::new();
        if have.as_ref() == Some(&want) {
            say!(
                "the plane holds the run's objects already ({} pods)",
                self.plan.pods()
            );
        } else {
            if have.is_some() {
                say!("the plane holds another size ({have:?}): removing it");
            }
            remove(env, &self.plan).await?;
            let loaded = load::load(env, &self.plan).await?;
            say!(
                "loaded {} pods and {} workloads in {:.1} s",
                loaded.pods,
                loaded.objects,
                loaded.seconds
            );
            metrics.push(metric("load time", loaded.seconds, "s"));
            metrics.push(metric(
                "load rate",
                loaded.pods as f64 / loaded.seconds.max(0.001),
                "pods/s",
            ));
            load::wait_settled(&env.client, &self.plan, Duration::from_secs(600)).await?;
            for (name, b) in crate::scenarios::envelope::plane_rss(&env.cluster_dir) {
                metrics.push(metric(
                    format!("{name} RSS loaded (no manager)"),
                    mib(b),
                    "MiB",
                ));
            }
            *self
                .loaded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(metrics.clone());
        }
        Ok(State {
            metrics,
            problems: Vec::new(),
            cold_writes: 0,
        })
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        phases::cold_start(self, env, state, probe).await?;
        phases::settled(self, state, probe).await?;
        phases::reaction(self, env, state, probe).await?;
        if self.args.no_failover {
        } else if probe.manager().is_sharded() {
            let m = shard_failover::run(self, env, probe, env.sharding.ranges).await?;
            state
                .metrics
                .push(metric("failover: ranges held again", m.reowned, "s"));
            state
                .metrics
                .push(metric("failover: first write", m.first_write, "s"));
            state.metrics.push(metric(
                "failover: ranges of the killed replica",
                m.ranges as f64,
                "",
            ));
        } else {
            let secs = failover::run(self, env, probe).await?;
            state.metrics.push(metric("failover", secs, "s"));
        }
        Ok(())
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let mut wrong = state.problems.clone();
        for i in 0..self.plan.namespaces {
            let ns = ns_of(i);
            let ds: Vec<Deployment> = k8s::list_all(&env.client, &ns, "deployments").await?;
            for d in &ds {
                let want = d.spec.replicas.unwrap_or(1);
                let st = d.status.clone().unwrap_or_default();
                if st.updated_replicas != Some(want)
                    || st.observed_generation != d.metadata.generation
                {
                    wrong.push(format!(
                        "deployment {ns}/{}: {:?} updated of {want}",
                        d.metadata.name.as_deref().unwrap_or_default(),
                        st.updated_replicas
                    ));
                }
            }
            let ss: Vec<StatefulSet> = k8s::list_all(&env.client, &ns, "statefulsets").await?;
            for s in &ss {
                let want = s.spec.replicas.unwrap_or(1);
                let st = s.status.clone().unwrap_or_default();
                if st.replicas != want {
                    wrong.push(format!(
                        "statefulset {ns}/{}: {} of {want} replicas",
                        s.metadata.name.as_deref().unwrap_or_default(),
                        st.replicas
                    ));
                }
            }
        }
        wrong.truncate(10);
        Ok(Correctness::unless(wrong, || {
            format!(
                "every Deployment and StatefulSet at its replicas after the run; {} writes during cold start",
                state.cold_writes
            )
        }))
    }

    fn metrics(&self, state: &State) -> Vec<Metric> {
        let mut out = state.metrics.clone();
        if !out.iter().any(|m| m.name == "load time")
            && let Some(l) = self
                .loaded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_ref()
        {
            out.extend(l.iter().cloned());
        }
        out
    }

    async fn cleanup(&self, env: &Env, _ns: &str) -> anyhow::Result<()> {
        let runs = env.managers.len()
            * if env.both_orders && env.managers.len() > 1 {
                2
            } else {
                1
            };
        let done = self.runs_done.fetch_add(1, Ordering::SeqCst) + 1;
        if done >= runs && !self.args.keep_loaded {
            say!("removing the loaded plane");
            remove(env, &self.plan).await?;
        }
        Ok(())
    }
}

/// `etcd_mvcc_db_total_size_in_bytes` of the plane's etcd (`RKCM_TEST_ETCD_ENDPOINT`).
async fn etcd_db_bytes() -> Option<f64> {
    let endpoint = std::env::var("RKCM_TEST_ETCD_ENDPOINT").ok()?;
    let out = tokio::process::Command::new("curl")
        .args(["-s", "--max-time", "10"])
        .arg(format!("{endpoint}/metrics"))
        .output()
        .await
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("etcd_mvcc_db_total_size_in_bytes "))
        .and_then(|v| v.trim().parse().ok())
}

/// Loads the plane at the size of `args` with no manager (removing another size first) and
/// measures what the plane holds: load time and rate, the plane's processes' RSS, etcd's
/// database size.
pub async fn load_only(env: &Env, args: &Args) -> anyhow::Result<Vec<Metric>> {
    let plan = Plan::of(args);
    remove(env, &plan).await?;
    let loaded = load::load(env, &plan).await?;
    load::wait_settled(&env.client, &plan, Duration::from_secs(1800)).await?;
    let mut out = vec![
        metric("pods", loaded.pods as f64, ""),
        metric("nodes", plan.nodes as f64, ""),
        metric("workloads", loaded.objects as f64, ""),
        metric("load time", loaded.seconds, "s"),
        metric(
            "load rate",
            loaded.pods as f64 / loaded.seconds.max(0.001),
            "pods/s",
        ),
    ];
    for (name, b) in crate::scenarios::envelope::plane_rss(&env.cluster_dir) {
        out.push(metric(format!("{name} RSS loaded"), mib(b), "MiB"));
    }
    if let Some(b) = etcd_db_bytes().await {
        out.push(metric("etcd database", b / 1_048_576.0, "MiB"));
    }
    for m in &out {
        say!("  {}: {} {}", m.name, m.value, m.unit);
    }
    if !args.keep_loaded {
        remove(env, &plan).await?;
    }
    Ok(out)
}
