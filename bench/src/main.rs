//! rkcm-bench: the Kubernetes-side work of `make bench` (e2e/bench.sh).
//!
//! Each scenario subcommand runs one scenario against an already running local control
//! plane (`e2e/cluster.sh`, `AUDIT=1`, `KCM=0`) for each manager in a fixed order (upstream
//! kube-controller-manager first, then rkcm): it creates the scenario's objects quickly with
//! bounded concurrency, starts the manager as a child process with the scenario's
//! controllers and flags, measures convergence time, CPU, peak RSS and API requests (from the
//! audit log), checks the end state, stops the manager and cleans up. The results go to a
//! JSON file (stamped with the command, commit, host and plane); `report` merges such files,
//! each possibly from a different run, into the Markdown report.

// First, so that `say!` is in scope in every module after it.
#[macro_use]
mod say;

mod audit;
mod harness;
mod k8s;
mod latency;
mod manager;
mod memory;
mod nodes;
mod procfs;
mod report;
mod results;
mod scenarios;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::harness::{Env, Scenario};
use crate::manager::Manager;

// Counts the live heap for `memory`; otherwise the system allocator.
#[global_allocator]
static GLOBAL: memory::Counting = memory::Counting;

#[derive(Parser)]
#[command(
    name = "rkcm-bench",
    version,
    about = "Benchmarks rkcm against upstream kube-controller-manager"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// PodGC: N terminated pods over the terminated-pod threshold; time to trim to T.
    Podgc {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::podgc::Args,
    },
    /// ReplicaSet: scale 0 → N → 0 with pods on kwok nodes; each step timed.
    Replicaset {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::replicaset::Args,
    },
    /// Deployment: N Deployments × R replicas created, then a rolling update of all; each
    /// phase timed.
    Deployment {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::deployment::Args,
    },
    /// CronJob: N CronJobs on `*/1` for M minutes; lateness of each Job creation.
    Cronjob {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::cronjob::Args,
    },
    /// DaemonSet: N simulated nodes; create, rolling update with maxSurge, node adds and
    /// deletes, idle heartbeats; each phase timed.
    Daemonset {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::daemonset::Args,
    },
    /// StatefulSet: `Parallel` 0 → P, `OrderedReady` 0 → O, then a rolling update of the P;
    /// each phase timed.
    Statefulset {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::statefulset::Args,
    },
    /// Job: one Indexed Job of N completions at parallelism P run to completion on kwok
    /// nodes; pods per second and requests per pod.
    Job {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::job::Args,
    },
    /// Job + TTL-after-finished: N one-pod Jobs with `ttlSecondsAfterFinished: 0` run and
    /// deleted.
    JobTtl {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::job::TtlArgs,
    },
    /// Mass rollout (upstream issue #117123): N Deployments × R replicas in one namespace,
    /// created and available, then all updated at once; RSS curve kept.
    MassRollout {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::mass_rollout::Args,
    },
    /// Scale envelope: the load test's mix of workloads on kwok nodes of the run's own,
    /// created, scaled, rolled, probed and deleted at a fixed pod throughput; reaction latency.
    Envelope {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::envelope::Args,
    },
    /// Idle: every implemented controller on a plane with N nodes and P running pods, until
    /// synced plus an idle window; RSS settled and per cached pod.
    Idle {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::idle::Args,
    },
    /// Threshold: the plane loaded converged with the load test's mix at the size it holds;
    /// per manager cold start, settled RSS, reaction (work-queue histograms, audit log) and
    /// failover.
    Threshold {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::threshold::Args,
    },
    /// The threshold plane loaded with no manager: load time, the plane's RSS, etcd's size
    /// (sizing the threshold run); metrics to `--out`.
    ThresholdLoad {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: scenarios::threshold::Args,
    },
    /// Memory per cached object, per type and projection (in process, no plane needed).
    Memory(memory::Args),
    /// Merge scenario result files into the Markdown report and one JSON file.
    Report(report::Args),
    /// Charts (SVG) of scenario result files or reports, e.g. the committed
    /// `bench/reports/*.json`.
    Plot(report::plots::Args),
}

/// What every scenario subcommand takes.
#[derive(clap::Args, Debug)]
struct Common {
    /// State directory of the running plane (kubeconfig, kubeconfig-kcm, kubeconfig-rkcm,
    /// logs/audit.log).
    #[arg(long, env = "RKCM_CLUSTER_DIR")]
    cluster_dir: PathBuf,
    /// Upstream kube-controller-manager [default: $RKCM_E2E_BIN/kube-controller-manager].
    #[arg(long)]
    upstream_bin: Option<PathBuf>,
    /// rkcm binary [default: $CARGO_TARGET_DIR/release/rkcm].
    #[arg(long)]
    rkcm_bin: Option<PathBuf>,
    /// Managers to run, one after the other in this order (a repeated name runs once).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "upstream,rkcm"
    )]
    managers: Vec<Manager>,
    /// Run the managers once more in the opposite order; the report compares the means of
    /// both orders (the plane's CPU drifts through a bench).
    #[arg(long)]
    both_orders: bool,
    /// Replicas of the sharded rkcm managers (rkcm-shards, rkcm-shards-client), each its
    /// own process with the same client limits.
    #[arg(long, default_value_t = 3)]
    shard_replicas: usize,
    /// --rkcm-shards of the sharded rkcm managers (ranges of the ring).
    #[arg(long, default_value_t = 64)]
    shards: u32,
    /// The id the result is recorded under [default: the scenario's], e.g. `envelope-shards`
    /// for a sharded comparison kept beside the scenario's upstream-vs-rkcm result.
    #[arg(long)]
    result_id: Option<String>,
    /// --kube-api-qps of both managers.
    #[arg(long, default_value_t = 100.0)]
    qps: f32,
    /// --kube-api-burst of both managers.
    #[arg(long, default_value_t = 200)]
    burst: u32,
    /// Requests the bench keeps in flight while creating and deleting objects.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Seconds a manager may take to converge before the run fails.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// Seconds the manager keeps running after convergence before the end state is checked.
    #[arg(long, default_value_t = 5)]
    settle: u64,
    /// Report rkcm as not built, with this reason, instead of running it (the release
    /// build failed; an older binary may still be on disk and must not be measured).
    #[arg(long, value_name = "REASON")]
    rkcm_not_built: Option<String>,
    /// Where manager logs go [default: $TMPDIR/rkcm-bench-logs-$UID].
    #[arg(long)]
    logs_dir: Option<PathBuf>,
    /// Result file (JSON) to write.
    #[arg(long)]
    out: PathBuf,
    /// The command that runs the scenario, recorded with the result (the report quotes it).
    #[arg(long, default_value = "rkcm-bench")]
    command: String,
    /// One line describing the control plane (versions, nodes), recorded with the result.
    #[arg(long, default_value = "")]
    plane: String,
}

/// The managers in the order given, each once (its first place counts).
fn run_order(given: &[Manager]) -> Vec<Manager> {
    let mut order = Vec::new();
    for &m in given {
        if !order.contains(&m) {
            order.push(m);
        }
    }
    order
}

impl Common {
    async fn env(&self) -> anyhow::Result<Env> {
        let dir = self.cluster_dir.clone();
        let client = k8s::client(&dir.join("kubeconfig")).await?;
        let upstream = match &self.upstream_bin {
            Some(p) => p.clone(),
            None => PathBuf::from(
                std::env::var_os("RKCM_E2E_BIN")
                    .context("set RKCM_E2E_BIN (source the plane's env.sh) or --upstream-bin")?,
            )
            .join("kube-controller-manager"),
        };
        let rkcm = match &self.rkcm_bin {
            Some(p) => p.clone(),
            None => {
                let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
                    || {
                        PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                            .join(".cache/rkcm/target")
                    },
                    PathBuf::from,
                );
                target.join("release/rkcm")
            }
        };
        let managers = run_order(&self.managers);
        let logs_dir = self.logs_dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("rkcm-bench-logs-{}", unsafe_uid()))
        });
        Ok(Env {
            client,
            audit_log: dir.join("logs/audit.log"),
            cluster_dir: dir,
            bins: BTreeMap::from([
                (Manager::Upstream, upstream),
                (Manager::Rkcm, rkcm.clone()),
                (Manager::RkcmShards, rkcm.clone()),
                (Manager::RkcmShardsClient, rkcm),
            ]),
            managers,
            not_built: self
                .rkcm_not_built
                .iter()
                .flat_map(|why| {
                    [
                        Manager::Rkcm,
                        Manager::RkcmShards,
                        Manager::RkcmShardsClient,
                    ]
                    .map(|m| (m, why.clone()))
                })
                .collect(),
            qps: self.qps,
            burst: self.burst,
            concurrency: self.concurrency,
            timeout: Duration::from_secs(self.timeout),
            settle: Duration::from_secs(self.settle),
            logs_dir,
            both_orders: self.both_orders,
            sharding: manager::Sharding {
                replicas: self.shard_replicas,
                ranges: self.shards,
            },
        })
    }
}

#[allow(unsafe_code)] // std has no getuid
fn unsafe_uid() -> u32 {
    // SAFETY: getuid cannot fail and has no preconditions.
    unsafe { libc::getuid() }
}

async fn run_scenario<S: Scenario>(scenario: S, common: &Common) -> anyhow::Result<bool> {
    let env = common.env().await?;
    audit::offset(&env.audit_log)?;
    let mut result = harness::run(&scenario, &env).await;
    result.origin = Some(report::origin(&common.command, &common.plane));
    if let Some(id) = &common.result_id {
        result.scenario = id.clone();
    }
    let ok = result.runs.iter().all(|r| !r.status.is_failure());
    if let Some(d) = common.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(
        &common.out,
        results::without_home(&serde_json::to_string_pretty(&result)?) + "\n",
    )
    .with_context(|| format!("writing {}", common.out.display()))?;
    say!("results: {}", common.out.display());
    Ok(ok)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RKCM_BENCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let work = async {
        match cli.command {
            Command::Podgc { common, args } => {
                run_scenario(scenarios::podgc::PodGc { args }, &common).await
            }
            Command::Replicaset { common, args } => {
                run_scenario(scenarios::replicaset::ReplicaSetScale { args }, &common).await
            }
            Command::Deployment { common, args } => {
                run_scenario(scenarios::deployment::DeploymentRollout { args }, &common).await
            }
            Command::Cronjob { common, args } => {
                run_scenario(scenarios::cronjob::CronJobSchedule { args }, &common).await
            }
            Command::Daemonset { common, args } => {
                run_scenario(scenarios::daemonset::DaemonSetNodes { args }, &common).await
            }
            Command::Statefulset { common, args } => {
                run_scenario(scenarios::statefulset::StatefulSetScale { args }, &common).await
            }
            Command::Job { common, args } => {
                run_scenario(scenarios::job::IndexedJob::new(args), &common).await
            }
            Command::JobTtl { common, args } => {
                run_scenario(scenarios::job::TtlJobs { args }, &common).await
            }
            Command::MassRollout { common, args } => {
                run_scenario(scenarios::mass_rollout::MassRollout::new(args), &common).await
            }
            Command::Envelope { common, args } => {
                run_scenario(scenarios::envelope::Envelope::new(args), &common).await
            }
            Command::Idle { common, args } => {
                run_scenario(scenarios::idle::Idle::new(args), &common).await
            }
            Command::Threshold { common, args } => {
                run_scenario(scenarios::threshold::Threshold::new(args), &common).await
            }
            Command::ThresholdLoad { common, args } => {
                let env = common.env().await?;
                let metrics = scenarios::threshold::load_only(&env, &args).await?;
                std::fs::write(&common.out, serde_json::to_string_pretty(&metrics)? + "\n")?;
                say!("results: {}", common.out.display());
                Ok(true)
            }
            Command::Memory(args) => {
                memory::run(&args)?;
                say!("memory report: {}", args.out.display());
                Ok(true)
            }
            Command::Plot(args) => {
                let n = report::plots::run(&args)?;
                say!("charts: {n} in {}", args.out.display());
                Ok(true)
            }
            Command::Report(args) => {
                let ok = report::write(&args)?;
                say!(
                    "report: {} (raw: {})",
                    args.md.display(),
                    args.json.display()
                );
                Ok(ok)
            }
        }
    };
    // Ctrl-C drops the work, and with it the manager child (kill_on_drop).
    let res = tokio::select! {
        r = work => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    match res {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => {
            say!("some runs failed (see the report)");
            std::process::ExitCode::from(3)
        }
        Err(e) => {
            say!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managers_run_in_the_order_given_each_once() {
        use Manager::{Rkcm, Upstream};
        assert_eq!(run_order(&[Upstream, Rkcm]), [Upstream, Rkcm]);
        assert_eq!(run_order(&[Rkcm, Upstream]), [Rkcm, Upstream]);
        assert_eq!(run_order(&[Rkcm, Upstream, Rkcm]), [Rkcm, Upstream]);
        assert_eq!(run_order(&[Upstream]), [Upstream]);
    }
}
