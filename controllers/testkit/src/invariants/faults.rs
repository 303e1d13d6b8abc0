//! Fault drivers of `make chaos` (the `rkcm-chaos` binary): a controller-manager (rkcm or
//! upstream kube-controller-manager, the same controllers) confined to one namespace of a
//! dedicated plane, a workload under churn, faults, and the invariant watcher running from
//! before the first object to after convergence.
//!
//! Scenarios:
//! - `kill-churn`: SIGKILL and restart every 30–90 s (random) for the duration, while
//!   Deployments are scaled and rolled, ReplicaSets scaled and pods deleted ~10/s.
//! - `watch-gap`: the manager's pod watch delivers every event late ([`Options::watch_delay`],
//!   30 s by default) for half of the duration, under the same churn.
//!
//! Each reports the violations, the convergence time of the undisturbed start (creation to
//! settled), the convergence time after the last fault (churn stopped, delays lifted), the
//! faults injected and the panics in the manager's log.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rand::Rng;
use serde::Serialize;
use serde_json::{Value, json};

use super::watch::{InvariantWatcher, Scope};
use super::{Config, Violation};
use crate::harness::{Manager, ManagerKind};
use crate::{TestCluster, TestNamespace, wait_for};

/// The controllers both managers run in these scenarios.
pub const CONTROLLERS: &str = "replicaset-controller,deployment-controller";

/// Sizes and timings of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long the churn and faults last.
    pub duration: Duration,
    /// Range of the time between two kills.
    pub kill_every: (Duration, Duration),
    /// Pod deletions per second.
    pub delete_rate: u32,
    pub deployments: usize,
    pub replicasets: usize,
    pub replicas: i32,
    /// How late the pod watch delivers in `watch-gap`.
    pub watch_delay: Duration,
    /// How long convergence may take after the last fault.
    pub converge_timeout: Duration,
    /// Client rate limits of the manager.
    pub qps: u32,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(600),
            kill_every: (Duration::from_secs(30), Duration::from_secs(90)),
            delete_rate: 10,
            deployments: 3,
            replicasets: 2,
            replicas: 5,
            watch_delay: Duration::from_secs(30),
            converge_timeout: Duration::from_secs(300),
            qps: 100,
        }
    }
}

/// One scenario's outcome for one manager.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub scenario: String,
    pub manager: String,
    pub duration_s: f64,
    /// Faults injected (kills; or watch-delay windows).
    pub faults: u32,
    pub pod_deletions: u64,
    pub spec_changes: u64,
    pub violations: Vec<Violation>,
    pub watch_gaps: usize,
    pub changes_observed: u64,
    /// Creation to settled, before any fault.
    pub undisturbed_converge_s: f64,
    /// Last fault (and end of churn) to settled; `None` if it did not converge in time.
    pub converge_after_fault_s: Option<f64>,
    /// Panics in the manager's log, and exits it did not ask for.
    pub panics: usize,
    pub unexpected_exits: u32,
    pub error: Option<String>,
}

fn kwok_template(app: &str, image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {
            "nodeSelector": {"type": "kwok"},
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": image}],
        },
    })
}

/// The churned workload of one namespace.
struct Workload<'a> {
    ns: &'a TestNamespace,
    opts: &'a Options,
}

impl Workload<'_> {
    fn deploy_name(i: usize) -> String {
        format!("d{i}")
    }

    fn rs_name(i: usize) -> String {
        format!("r{i}")
    }

    async fn create(&self) -> Result<()> {
        let pp = PostParams::default();
        for i in 0..self.opts.deployments {
            let name = Self::deploy_name(i);
            let d: Deployment = serde_json::from_value(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name},
                "spec": {"replicas": self.opts.replicas,
                         "selector": {"matchLabels": {"app": name}},
                         "template": kwok_template(&name, "registry.example/app:v0")},
            }))?;
            self.ns.api::<Deployment>().create(&pp, &d).await?;
        }
        for i in 0..self.opts.replicasets {
            let name = Self::rs_name(i);
            let rs: ReplicaSet = serde_json::from_value(json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": name},
                "spec": {"replicas": self.opts.replicas,
                         "selector": {"matchLabels": {"app": name}},
                         "template": kwok_template(&name, "registry.example/app:v0")},
            }))?;
            self.ns.api::<ReplicaSet>().create(&pp, &rs).await?;
        }
        Ok(())
    }

    /// Why the namespace is not settled, or `None`.
    async fn unsettled(&self) -> Result<Option<String>> {
        for d in self
            .ns
            .api::<Deployment>()
            .list(&ListParams::default())
            .await?
        {
            let want = d.spec.replicas.unwrap_or(1);
            let s = d.status.clone().unwrap_or_default();
            if s.observed_generation != d.metadata.generation
                || s.updated_replicas != Some(want)
                || s.replicas != Some(want)
                || s.available_replicas != Some(want)
            {
                return Ok(Some(format!(
                    "deployment {:?}: want {want}, status {s:?}",
                    d.metadata.name
                )));
            }
        }
        for rs in self
            .ns
            .api::<ReplicaSet>()
            .list(&ListParams::default())
            .await?
        {
            let want = rs.spec.replicas.unwrap_or(1);
            let s = rs.status.clone().unwrap_or_default();
            if s.replicas != want || s.ready_replicas.unwrap_or(0) != want {
                return Ok(Some(format!(
                    "replicaset {:?}: want {want}, status {s:?}",
                    rs.metadata.name
                )));
            }
        }
        Ok(None)
    }

    async fn wait_settled(&self, timeout: Duration) -> Result<Duration> {
        let start = Instant::now();
        wait_for("the namespace to settle", timeout, || async {
            Ok(self.unsettled().await?.is_none().then_some(()))
        })
        .await?;
        Ok(start.elapsed())
    }

    /// Churns until `until`: pods deleted at the configured rate (gracefully), a spec change
    /// every 10 s. Returns (pod deletions, spec changes).
    async fn churn(&self, until: Instant) -> Result<(u64, u64)> {
        let pods = self.ns.api::<Pod>();
        let (mut deleted, mut changes) = (0u64, 0u64);
        let mut last_change = Instant::now();
        let rate = self.opts.delete_rate.max(1);
        while Instant::now() < until {
            let round = Instant::now();
            let list = pods.list(&ListParams::default()).await;
            let live: Vec<String> = list
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| p.metadata.name)
                .collect();
            let victims: Vec<String> = {
                let mut rng = rand::rng();
                (0..rate.min(u32::try_from(live.len()).unwrap_or(0)))
                    .map(|_| live[rng.random_range(0..live.len())].clone())
                    .collect()
            };
            for v in victims {
                if pods.delete(&v, &DeleteParams::default()).await.is_ok() {
                    deleted += 1;
                }
                tokio::time::sleep(Duration::from_millis(1000 / u64::from(rate))).await;
            }
            if last_change.elapsed() >= Duration::from_secs(10) {
                last_change = Instant::now();
                changes += 1;
                let (d, r, n, flip) = {
                    let mut rng = rand::rng();
                    (
                        rng.random_range(0..self.opts.deployments.max(1)),
                        rng.random_range(0..self.opts.replicasets.max(1)),
                        rng.random_range(1..=self.opts.replicas * 2),
                        rng.random_bool(0.5),
                    )
                };
                let pp = PatchParams::default();
                let body = if flip {
                    json!({"spec": {"replicas": n}})
                } else {
                    json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": format!("registry.example/app:v{changes}")}]}}}})
                };
                if self.opts.deployments > 0 {
                    let _ = self
                        .ns
                        .api::<Deployment>()
                        .patch(&Self::deploy_name(d), &pp, &Patch::Strategic(body))
                        .await;
                }
                if self.opts.replicasets > 0 {
                    let _ = self
                        .ns
                        .api::<ReplicaSet>()
                        .patch(
                            &Self::rs_name(r),
                            &pp,
                            &Patch::Merge(json!({"spec": {"replicas": n}})),
                        )
                        .await;
                }
            }
            if round.elapsed() < Duration::from_millis(200) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok((deleted, changes))
    }
}

fn count_panics(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("panicked at") || l.starts_with("panic:"))
        .count()
}

/// Runs `scenario` (`kill-churn` or `watch-gap`) for `kind` in a new namespace.
pub async fn run(
    cluster: &TestCluster,
    kind: ManagerKind,
    scenario: &str,
    opts: &Options,
) -> Result<Outcome> {
    let ns = cluster.namespace(&format!("chaos-{scenario}")).await?;
    let sa = ns.api::<ServiceAccount>();
    wait_for(
        "the default ServiceAccount",
        Duration::from_secs(60),
        || async { Ok(sa.get_opt("default").await?.map(|_| ())) },
    )
    .await?;
    let watcher = InvariantWatcher::start(
        cluster.client(),
        Scope::Namespaces(vec![ns.name().to_owned()]),
        Config::default(),
    )
    .await?;
    let qps = format!("--kube-api-qps={}", opts.qps);
    let burst = format!("--kube-api-burst={}", opts.qps * 2);
    let mut manager =
        Manager::start_with(kind, cluster, ns.name(), CONTROLLERS, &[&qps, &burst]).await?;
    let work = Workload { ns: &ns, opts };
    let mut outcome = Outcome {
        scenario: scenario.to_owned(),
        manager: kind.name().to_owned(),
        duration_s: opts.duration.as_secs_f64(),
        faults: 0,
        pod_deletions: 0,
        spec_changes: 0,
        violations: Vec::new(),
        watch_gaps: 0,
        changes_observed: 0,
        undisturbed_converge_s: 0.0,
        converge_after_fault_s: None,
        panics: 0,
        unexpected_exits: 0,
        error: None,
    };
    let result = async {
        let start = Instant::now();
        work.create().await?;
        work.wait_settled(opts.converge_timeout).await?;
        outcome.undisturbed_converge_s = start.elapsed().as_secs_f64();

        let until = Instant::now() + opts.duration;
        let faults = async {
            let mut n = 0u32;
            let mut exits = 0u32;
            match scenario {
                "kill-churn" => loop {
                    let wait = {
                        let (lo, hi) = opts.kill_every;
                        let mut rng = rand::rng();
                        Duration::from_millis(
                            rng.random_range(lo.as_millis()..=hi.as_millis().max(lo.as_millis()))
                                .try_into()
                                .unwrap_or(u64::MAX),
                        )
                    };
                    if Instant::now() + wait >= until {
                        break;
                    }
                    tokio::time::sleep(wait).await;
                    if manager.check_running().is_err() {
                        exits += 1;
                    }
                    manager.kill_and_restart().await?;
                    n += 1;
                },
                "watch-gap" => {
                    let quarter = opts.duration / 4;
                    tokio::time::sleep(quarter).await;
                    manager.proxy().delay_watches("pods", opts.watch_delay);
                    n += 1;
                    tokio::time::sleep(quarter * 2).await;
                    manager.proxy().delay_watches("pods", Duration::ZERO);
                }
                other => anyhow::bail!("unknown scenario {other}"),
            }
            anyhow::Ok((n, exits))
        };
        let ((deleted, changes), (n, exits)) = tokio::try_join!(work.churn(until), faults)?;
        outcome.pod_deletions = deleted;
        outcome.spec_changes = changes;
        outcome.faults = n;
        outcome.unexpected_exits = exits;
        let converged = work.wait_settled(opts.converge_timeout).await;
        match converged {
            Ok(t) => outcome.converge_after_fault_s = Some(t.as_secs_f64()),
            Err(e) => {
                let last = work.unsettled().await.ok().flatten().unwrap_or_default();
                outcome.error = Some(format!("{e:#}; last seen: {last}"));
            }
        }
        if manager.check_running().is_err() {
            outcome.unexpected_exits += 1;
        }
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = result {
        outcome.error = Some(format!("{e:#}"));
    }
    let report = watcher.finish().await;
    outcome.violations = report.violations;
    outcome.watch_gaps = report.gaps.len();
    outcome.changes_observed = report.observed;
    outcome.panics = count_panics(&manager.log_tail(usize::MAX));
    manager.stop().await.context("stopping the manager")?;
    Ok(outcome)
}

fn secs(s: Option<f64>) -> String {
    s.map_or("did not converge".to_owned(), |s| format!("{s:.1} s"))
}

/// The Markdown report of a set of outcomes.
pub fn markdown(outcomes: &[Outcome], preamble: &str) -> String {
    let mut out = String::from("# Fault suite (`make chaos`)\n\n");
    out.push_str(preamble);
    out.push_str(
        "\n| scenario | manager | duration | faults | pod deletions | spec changes | violations | watch gaps | undisturbed converge | converge after last fault | ratio | panics | unexpected exits |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        let ratio = o.converge_after_fault_s.map_or("-".to_owned(), |c| {
            format!("{:.2}", c / o.undisturbed_converge_s.max(0.001))
        });
        out.push_str(&format!(
            "| {} | {} | {:.0} s | {} | {} | {} | {} | {} | {:.1} s | {} | {} | {} | {} |\n",
            o.scenario,
            o.manager,
            o.duration_s,
            o.faults,
            o.pod_deletions,
            o.spec_changes,
            o.violations.len(),
            o.watch_gaps,
            o.undisturbed_converge_s,
            secs(o.converge_after_fault_s),
            ratio,
            o.panics,
            o.unexpected_exits,
        ));
    }
    for o in outcomes {
        if o.violations.is_empty() && o.error.is_none() {
            continue;
        }
        out.push_str(&format!("\n## {} / {}\n\n", o.scenario, o.manager));
        if let Some(e) = &o.error {
            out.push_str(&format!("Error: {e}\n\n"));
        }
        for v in &o.violations {
            out.push_str(&format!("- {v}\n"));
        }
    }
    out
}
