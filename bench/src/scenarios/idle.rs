//! Idle: what a manager costs when it only watches. A plane with N nodes and P running pods,
//! each manager started with every controller rkcm implements (the same `--controllers` for
//! both), left alone until its informers have synced, then measured over a fixed idle window.
//!
//! Setup: N kwok nodes of the run's own (label `rkcm-bench/idle=<namespace>`, not
//! `type: kwok`, so no other scenario's pods go there) and P bare pods (no owner: no controller
//! under test has anything to do with them) bound round-robin to those nodes by `nodeName`
//! (the scheduler is not involved); kwok runs them. The manager starts once all P pods are
//! Running.
//!
//! Converge: milestone *synced* when the manager's log has said "Caches are synced" (both
//! managers write that line per informer or controller) and has not added such a line for
//! [`SYNC_QUIET`]; then the *idle* phase: a fixed window ([`Args::idle_seconds`]) in which
//! nothing changes, its CPU and requests measured, `VmRSS` read at its end ("RSS settled").
//!
//! Correct: all P pods are still there, none deleted or being deleted (no controller may act
//! on them).
//!
//! Bytes per cached pod: the same scenario is run on an empty plane first (`--nodes 0 --pods
//! 0`, id `idle-empty`), and the full run is given that result (`--baseline`); each manager's
//! estimate is (its settled RSS − its settled RSS on the empty plane) / P. It includes the N
//! nodes' share (N is a tenth of P by default).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::harness::{Env, Probe, Scenario};
use crate::results::{Correctness, Metric, RunResult, ScenarioResult};
use crate::scenarios::podgc::group;
use crate::{k8s, nodes};

/// The label that puts a node in a run (value: the run's namespace).
pub const NODE_LABEL: &str = "rkcm-bench/idle";
/// Label of the run's pods.
const APP: &str = "rkcm-bench-idle";
/// The line both managers log when an informer (rkcm) or a controller (upstream) has synced.
const SYNCED_LINE: &str = "Caches are synced";
/// The manager counts as synced once no new [`SYNCED_LINE`] has appeared for this long.
pub const SYNC_QUIET: Duration = Duration::from_secs(5);
/// Name of the metric with the RSS at the end of the idle window.
const SETTLED: &str = "RSS settled";
const SETTLED_UNIT: &str = "MiB";

/// Every controller rkcm implements (upstream's canonical names).
pub const ALL_CONTROLLERS: [&str; 9] = [
    "pod-garbage-collector-controller",
    "replicaset-controller",
    "replicationcontroller-controller",
    "deployment-controller",
    "statefulset-controller",
    "daemonset-controller",
    "job-controller",
    "cronjob-controller",
    "ttl-after-finished-controller",
];

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Result id (`idle`, or `idle-empty` for the empty-plane baseline).
    #[arg(long, default_value = "idle")]
    pub id: String,
    /// Nodes of the run's own.
    #[arg(long, default_value_t = 1_000)]
    pub nodes: usize,
    /// Running bare pods, spread over the nodes.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Seconds of the idle window after the informers synced.
    #[arg(long, default_value_t = 60)]
    pub idle_seconds: u64,
    /// Result of the same scenario on an empty plane (`idle-empty.json`), for bytes per
    /// cached pod.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
}

pub struct Idle {
    pub args: Args,
    /// `args.id`, leaked once: scenario ids are `&'static str`.
    id: &'static str,
}

impl Idle {
    pub fn new(args: Args) -> Self {
        let id: &'static str = Box::leak(args.id.clone().into_boxed_str());
        Self { args, id }
    }

    fn empty(&self) -> bool {
        self.args.nodes == 0 && self.args.pods == 0
    }
}

pub struct State {
    ns: String,
    metrics: Vec<Metric>,
}

fn node_name(ns: &str, i: usize) -> String {
    format!("{ns}-n{i:05}")
}

/// `(pods seen, pods Running)` of a namespace, from a watch of the bench's own.
struct RunningWatch {
    rx: watch::Receiver<(usize, usize)>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningWatch {
    fn start(client: &Client, ns: &str) -> Self {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let (tx, rx) = watch::channel((0, 0));
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            let mut live: BTreeMap<String, bool> = BTreeMap::new();
            let mut pending: BTreeMap<String, bool> = BTreeMap::new();
            let running = |p: &Pod| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.metadata.deletion_timestamp.is_none()
            };
            while let Some(ev) = k8s::next_event(&mut stream, "pod").await {
                match ev {
                    watcher::Event::Init => pending.clear(),
                    watcher::Event::InitApply(p) => {
                        pending.insert(p.name_any(), running(&p));
                    }
                    watcher::Event::InitDone => live = std::mem::take(&mut pending),
                    watcher::Event::Apply(p) => {
                        live.insert(p.name_any(), running(&p));
                    }
                    watcher::Event::Delete(p) => {
                        live.remove(&p.name_any());
                    }
                }
                let now = (live.len(), live.values().filter(|&&r| r).count());
                tx.send_if_modified(|c| std::mem::replace(c, now) != now);
            }
        });
        Self { rx, task }
    }
}

impl Drop for RunningWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Scenario for Idle {
    type State = State;

    fn id(&self) -> &'static str {
        self.id
    }

    fn title(&self) -> String {
        if self.empty() {
            "Idle on an empty plane (baseline for bytes per cached object)".into()
        } else {
            format!(
                "Idle: every controller on a plane with {} nodes and {} running pods",
                group(self.args.nodes),
                group(self.args.pods)
            )
        }
    }

    fn description(&self) -> String {
        let what = if self.empty() {
            "No objects of the run's own (the plane's own kwok nodes only).".to_string()
        } else {
            format!(
                "{n} kwok nodes of the run's own and {p} bare pods (no owner, so no controller \
                 under test has work with them) bound round-robin to them by `nodeName`, all \
                 Running before the manager starts.",
                n = group(self.args.nodes),
                p = group(self.args.pods)
            )
        };
        format!(
            "{what} Each manager starts with every controller rkcm implements (the same \
             `--controllers` for both) and is left alone: milestone **synced** when its log \
             has said \"{SYNCED_LINE}\" and no such line has followed for {quiet} s; then an \
             **idle** window of {idle} s (its CPU and requests) at whose end `VmRSS` is read \
             (\"{SETTLED}\"). Peak RSS is `VmHWM` over the whole run (startup and initial \
             lists included). Correct: every pod is still there and none is being deleted. \
             Bytes per cached pod (full plane only): (settled RSS − the same manager's settled \
             RSS on the empty plane, scenario `idle-empty`) / pods; the nodes' share is \
             included.",
            quiet = SYNC_QUIET.as_secs(),
            idle = self.args.idle_seconds,
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("nodes".into(), self.args.nodes.to_string()),
            ("pods".into(), self.args.pods.to_string()),
            ("idle_seconds".into(), self.args.idle_seconds.to_string()),
        ])
    }

    fn controllers(&self) -> Vec<&'static str> {
        ALL_CONTROLLERS.to_vec()
    }

    fn rss_curve(&self) -> Option<Duration> {
        Some(Duration::from_secs(2))
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        let client = &env.client;
        anyhow::ensure!(
            self.args.pods == 0 || self.args.nodes > 0,
            "--pods needs --nodes to run on"
        );
        k8s::ensure_namespace(client, ns).await?;
        // A reused plane may still hold an earlier run's objects.
        remove(env, ns).await?;
        let nodes: Vec<String> = (0..self.args.nodes).map(|i| node_name(ns, i)).collect();
        if !nodes.is_empty() {
            let t = Instant::now();
            nodes::create_nodes(env, &nodes, |name| {
                nodes::kwok_node_with_room(name, NODE_LABEL, ns, 110)
            })
            .await?;
            nodes::wait_nodes_ready(env, NODE_LABEL, ns, nodes.len()).await?;
            say!(
                "{} nodes of {ns} Ready in {:.1} s",
                nodes.len(),
                t.elapsed().as_secs_f64()
            );
        }
        if self.args.pods > 0 {
            let mut running = RunningWatch::start(client, ns);
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            let pp = PostParams::default();
            let pods = (0..self.args.pods)
                .map(|i| pod(&format!("p-{i:05}"), &nodes[i % nodes.len()]))
                .collect::<anyhow::Result<Vec<_>>>()?;
            k8s::bounded(
                "pods created",
                pods.len(),
                env.concurrency,
                pods.len().div_ceil(10).max(1),
                pods.iter().map(|p| {
                    let (api, pp) = (&api, &pp);
                    async move {
                        let name = p.name_any();
                        match k8s::retry(|| api.create(pp, p)).await {
                            Ok(_) => Ok(()),
                            Err(e) if k8s::is_status(&e, 409) => Ok(()),
                            Err(e) => Err(e).with_context(|| format!("creating pod {ns}/{name}")),
                        }
                    }
                }),
            )
            .await?;
            let t = Instant::now();
            let want = self.args.pods;
            let mut last = 0;
            let deadline = Instant::now() + Duration::from_secs(900);
            loop {
                let (seen, up) = *running.rx.borrow_and_update();
                if up >= want {
                    break;
                }
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "only {up} of {want} pods of {ns} Running after 900 s ({seen} seen; is \
                     kwok running?)"
                );
                if up >= last + want / 10 {
                    say!("pods Running: {up}/{want}");
                    last = up;
                }
                let _ = tokio::time::timeout(Duration::from_secs(5), running.rx.changed()).await;
            }
            say!(
                "{want} pods of {ns} Running {:.1} s after their creation",
                t.elapsed().as_secs_f64()
            );
        }
        Ok(State {
            ns: ns.to_string(),
            metrics: Vec::new(),
        })
    }

    async fn converge(&self, _env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        // Synced: the log has the line and has not added one for SYNC_QUIET.
        let mut count = 0usize;
        let mut since = Instant::now();
        loop {
            let text = std::fs::read_to_string(probe.log()).unwrap_or_default();
            let now = text.matches(SYNCED_LINE).count();
            if now != count {
                count = now;
                since = Instant::now();
            }
            probe.progress(format!(
                "waiting for the informers to sync: {count} \"{SYNCED_LINE}\" lines so far"
            ));
            if count > 0 && since.elapsed() >= SYNC_QUIET {
                probe.mark_at("synced", since);
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let window = Duration::from_secs(self.args.idle_seconds);
        let idle = probe.begin(&format!("idle {} s", window.as_secs()));
        probe.progress(format!(
            "synced; idle window of {} s (nothing to wait for)",
            window.as_secs()
        ));
        let cpu_before = probe.manager_cpu_seconds();
        // The window is the measurement itself: nothing is waited for, time passes.
        tokio::time::sleep(window).await;
        let rss = probe.manager_rss_bytes();
        let cpu = match (cpu_before, probe.manager_cpu_seconds()) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        probe.end(idle, format!("{count} \"{SYNCED_LINE}\" lines"));
        if let Some(rss) = rss {
            state.metrics.push(Metric {
                name: SETTLED.into(),
                value: round2(rss as f64 / 1048576.0),
                unit: SETTLED_UNIT.into(),
            });
        }
        if let Some(cpu) = cpu {
            state.metrics.push(Metric {
                name: "CPU per idle minute".into(),
                value: round2(cpu * 60.0 / window.as_secs_f64().max(1.0)),
                unit: "s".into(),
            });
        }
        Ok(())
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let pods = k8s::list_pod_meta(&env.client, Some(&state.ns))
            .await
            .with_context(|| format!("listing the pods of {}", state.ns))?;
        let deleting = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count();
        let ok = pods.len() == self.args.pods && deleting == 0;
        Ok(Correctness {
            ok,
            detail: format!(
                "{} of {} pods present, {deleting} being deleted",
                pods.len(),
                self.args.pods
            ),
        })
    }

    fn metrics(&self, state: &State) -> Vec<Metric> {
        state.metrics.clone()
    }

    fn run_metrics(&self, run: &RunResult) -> Vec<Metric> {
        if self.args.pods == 0 {
            return Vec::new();
        }
        let Some(path) = &self.args.baseline else {
            return Vec::new();
        };
        let base = match std::fs::read_to_string(path)
            .map_err(anyhow::Error::from)
            .and_then(|t| Ok(serde_json::from_str::<ScenarioResult>(&t)?))
        {
            Ok(b) => b,
            Err(e) => {
                say!(
                    "WARNING: no baseline for bytes per cached pod ({}: {e:#})",
                    path.display()
                );
                return Vec::new();
            }
        };
        let Some(base_run) = base.runs.iter().find(|r| r.manager == run.manager) else {
            return Vec::new();
        };
        per_pod_metrics(run, base_run, self.args.pods)
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        remove(env, ns).await
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn settled_mib(run: &RunResult) -> Option<f64> {
    run.metrics
        .iter()
        .find(|m| m.name == SETTLED && m.unit == SETTLED_UNIT)
        .map(|m| m.value)
}

/// Bytes per cached pod against the empty-plane run of the same manager, from the settled
/// RSS and from the peak, in KiB.
fn per_pod_metrics(run: &RunResult, base: &RunResult, pods: usize) -> Vec<Metric> {
    let mut out = Vec::new();
    let pods = pods as f64;
    if let (Some(a), Some(b)) = (settled_mib(run), settled_mib(base)) {
        out.push(Metric {
            name: "Memory per cached pod, settled RSS − empty plane's".into(),
            value: round2((a - b) * 1024.0 / pods),
            unit: "KiB".into(),
        });
    }
    if let (Some(a), Some(b)) = (run.peak_rss_bytes, base.peak_rss_bytes) {
        out.push(Metric {
            name: "Memory per cached pod, peak RSS − empty plane's".into(),
            value: round2((a as f64 - b as f64) / 1024.0 / pods),
            unit: "KiB".into(),
        });
    }
    out
}

/// One bare pod bound to `node`.
fn pod(name: &str, node: &str) -> anyhow::Result<Pod> {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": APP}},
        "spec": k8s::pod_spec(k8s::PAUSE, json!({"nodeName": node}))
    }))
    .with_context(|| format!("building pod {name}"))
}

/// Deletes the run's pods (waiting until none is left) and its nodes.
async fn remove(env: &Env, ns: &str) -> anyhow::Result<()> {
    k8s::delete_all_pods(&env.client, ns, Duration::from_secs(600)).await?;
    nodes::delete_labelled_nodes(env, NODE_LABEL, ns).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::Manager;

    fn run(settled: f64, peak_mib: u64) -> RunResult {
        let mut r = RunResult::new(Manager::Rkcm, "bin".into(), "ns".into());
        r.metrics.push(Metric {
            name: SETTLED.into(),
            value: settled,
            unit: SETTLED_UNIT.into(),
        });
        r.peak_rss_bytes = Some(peak_mib << 20);
        r
    }

    #[test]
    fn bytes_per_pod_against_the_empty_plane() {
        // 10 000 pods raising the settled RSS from 20 MiB to 100 MiB: 8.19 KiB each.
        let m = per_pod_metrics(&run(100.0, 150), &run(20.0, 30), 10_000);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].value, 8.19);
        assert_eq!(m[0].unit, "KiB");
        assert_eq!(m[1].value, 12.29);
        // No settled number on one side: only the peak-based estimate.
        let mut bare = run(0.0, 30);
        bare.metrics.clear();
        assert_eq!(per_pod_metrics(&run(100.0, 150), &bare, 10_000).len(), 1);
    }
}
