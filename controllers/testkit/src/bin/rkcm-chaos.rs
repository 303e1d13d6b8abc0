//! `rkcm-chaos`: the fault scenarios of `make chaos` (see
//! `rkcm_testkit::invariants::faults`) for upstream kube-controller-manager and rkcm, one
//! after the other, on the cluster of `RKCM_TEST_KUBECONFIG` (a dedicated plane: see
//! `e2e/chaos.sh`). Writes a Markdown report and the raw outcomes as JSON; exits 1 when
//! rkcm broke an invariant, failed to converge or panicked.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use rkcm_testkit::TestCluster;
use rkcm_testkit::harness::ManagerKind;
use rkcm_testkit::invariants::faults::{self, Options, Outcome};
use rkcm_testkit::invariants::{outages, scenario};
use rkcm_testkit::proxy::Cut;

#[derive(Parser, Debug)]
#[command(name = "rkcm-chaos", about = "Fault scenarios for upstream and rkcm")]
struct Args {
    /// Comma-separated: upstream, rkcm (always run in that order).
    #[arg(long, default_value = "upstream,rkcm")]
    managers: String,
    /// Comma-separated: kill-churn, watch-gap, leader, apiserver-restart, partition,
    /// watch-410, reject-creates, soak, rebalance (rkcm only); `<scenario>-all` for every
    /// workload kind.
    #[arg(
        long,
        default_value = "kill-churn,watch-gap,leader,apiserver-restart,partition,watch-410,reject-creates,kill-churn-all,soak"
    )]
    scenarios: String,
    /// Churn and fault time of each run, in seconds.
    #[arg(long, default_value_t = 600)]
    duration: u64,
    /// Pod watch delay of watch-gap, in seconds.
    #[arg(long, default_value_t = 30)]
    watch_delay: u64,
    /// Pod deletions per second.
    #[arg(long, default_value_t = 10)]
    delete_rate: u32,
    /// API server downtime of apiserver-restart, in seconds.
    #[arg(long, default_value_t = 30)]
    apiserver_down: u64,
    /// The plane's e2e/cluster.sh (apiserver-restart stops and starts the API server with it).
    #[arg(long)]
    cluster_script: Option<PathBuf>,
    /// Pod watch delay of watch-410's second half, in seconds.
    #[arg(long, default_value_t = 360)]
    long_watch_delay: u64,
    /// Cuts of partition: comma-separated MODE:SECONDS, MODE blackhole or refuse.
    #[arg(long, default_value = "blackhole:60,refuse:300")]
    cuts: String,
    /// How long reject-creates rejects pod creates, in seconds.
    #[arg(long, default_value_t = 60)]
    reject_for: u64,
    /// How long the soak's churn lasts, in seconds.
    #[arg(long, default_value_t = 3600)]
    soak_duration: u64,
    /// The soak's warm-up (samples before it are not judged), in seconds.
    #[arg(long, default_value_t = 600)]
    soak_warmup: u64,
    /// Time between two RSS samples of the soak, in seconds.
    #[arg(long, default_value_t = 60)]
    rss_every: u64,
    /// Ranges of the ring in rebalance (`--rkcm-shards`).
    #[arg(long, default_value_t = 64)]
    shards: u32,
    /// Range handovers rebalance cycles replicas for.
    #[arg(long, default_value_t = 1000)]
    rebalances: u64,
    /// Lease duration, renew deadline and retry period of the shard Leases in rebalance, in
    /// seconds, comma separated.
    #[arg(long, default_value = "4,3,1")]
    shard_timings: String,
    /// Churned namespaces of rebalance (spread over the ring).
    #[arg(long, default_value_t = 6)]
    shard_namespaces: usize,
    /// The longest rebalance cycles replicas before it gives up, in seconds.
    #[arg(long, default_value_t = 1800)]
    rebalance_timeout: u64,
    #[arg(long)]
    md: PathBuf,
    #[arg(long)]
    json: PathBuf,
    /// Outcomes of an earlier run (its JSON) to keep, except the scenarios run now.
    #[arg(long)]
    merge: Option<PathBuf>,
    /// A line describing how the run was made (command, plane, host load).
    #[arg(long, default_value = "")]
    preamble: String,
}

async fn run(args: Args) -> Result<bool> {
    let scenarios: Vec<&str> = args
        .scenarios
        .split(',')
        .filter(|s| !s.is_empty())
        .collect();
    // Only re-rendering a report (`--scenarios '' --merge old.json`) needs no plane.
    let cluster = match scenarios.is_empty() {
        true => None,
        false => Some(TestCluster::connect().await?),
    };
    let opts = Options {
        duration: Duration::from_secs(args.duration),
        watch_delay: Duration::from_secs(args.watch_delay),
        delete_rate: args.delete_rate,
        apiserver_down: Duration::from_secs(args.apiserver_down),
        cluster_script: args.cluster_script.clone(),
        long_watch_delay: Duration::from_secs(args.long_watch_delay),
        cuts: parse_cuts(&args.cuts)?,
        reject_for: Duration::from_secs(args.reject_for),
        soak_duration: Duration::from_secs(args.soak_duration),
        soak_warmup: Duration::from_secs(args.soak_warmup),
        rss_every: Duration::from_secs(args.rss_every.max(1)),
        shards: args.shards,
        rebalances: args.rebalances,
        shard_timings: parse_timings(&args.shard_timings)?,
        shard_namespaces: args.shard_namespaces.max(1),
        rebalance_timeout: Duration::from_secs(args.rebalance_timeout),
        ..Options::default()
    };
    let mut outcomes = earlier_outcomes(&args)?;
    for scenario in scenarios.iter().copied() {
        let Some(cluster) = cluster.as_ref() else {
            break;
        };
        for (name, kind) in [
            ("upstream", ManagerKind::Upstream),
            ("rkcm", ManagerKind::Rkcm),
        ] {
            if !args.managers.split(',').any(|m| m == name) {
                continue;
            }
            match scenario {
                "rebalance" => eprintln!(
                    "rkcm-chaos: {scenario} / {name} until {} range handovers",
                    opts.rebalances
                ),
                _ => eprintln!(
                    "rkcm-chaos: {scenario} / {name} for {} s",
                    opts.churn_time(scenario).as_secs()
                ),
            }
            let o = match (scenario, kind) {
                ("rebalance", ManagerKind::Upstream) => {
                    eprintln!(
                        "rkcm-chaos: rebalance does not apply to upstream: kube-controller-manager has no sharded mode"
                    );
                    let mut o = Outcome::empty(scenario, kind, 0.0);
                    o.not_applicable = Some(
                        "upstream kube-controller-manager has no sharded mode".to_owned(),
                    );
                    Ok(o)
                }
                ("rebalance", _) => faults::run_rebalance(cluster, &opts).await,
                ("leader", _) => faults::run_leader(cluster, kind, &opts).await,
                ("partition", _) => outages::run_partition(cluster, kind, &opts).await,
                _ => scenario::run(cluster, kind, scenario, &opts).await,
            }
            .with_context(|| format!("{scenario} / {name}"))?;
            eprintln!(
                "rkcm-chaos: {scenario} / {name}: {} faults, {} violations, converged after the last fault in {:?} s, error {:?}",
                o.faults,
                o.violations.len(),
                o.converge_after_fault_s,
                o.error
            );
            outcomes.push(o);
            order(&mut outcomes);
            std::fs::write(&args.json, serde_json::to_string_pretty(&outcomes)?)
                .with_context(|| format!("writing {}", args.json.display()))?;
            std::fs::write(&args.md, faults::markdown(&outcomes, &args.preamble))
                .with_context(|| format!("writing {}", args.md.display()))?;
        }
    }
    // Also with no scenario to run (`--scenarios '' --merge old.json`): the report again.
    std::fs::write(&args.json, serde_json::to_string_pretty(&outcomes)?)
        .with_context(|| format!("writing {}", args.json.display()))?;
    std::fs::write(&args.md, faults::markdown(&outcomes, &args.preamble))
        .with_context(|| format!("writing {}", args.md.display()))?;
    Ok(outcomes
        .iter()
        .filter(|o| o.manager == ManagerKind::Rkcm.name())
        .all(|o| passed(o, args.rebalances)))
}

/// Whether an rkcm row passed: no violation, error or panic, converged, no overlapping
/// leader writes, no partitioned leader's write after its Lease moved or its renew deadline,
/// flat memory in the soak, and in rebalance the handovers reached (`rebalances`) with no
/// unexpected exit, no overlapping lease terms and no write outside a term.
fn passed(o: &Outcome, rebalances: u64) -> bool {
    o.violations.is_empty()
        && o.error.is_none()
        && o.panics == 0
        && o.converge_after_fault_s.is_some()
        && o.handovers.iter().all(|h| h.overlapping_writes == 0)
        && o.cuts.iter().all(|c| {
            c.writes_after_lease_lost == 0
                && c.writes_after_renew_deadline == 0
                && c.converge_after_heal_s.is_some()
        })
        && soak_flat(o)
        && o.rebalance.as_ref().is_none_or(|r| {
            o.unexpected_exits == 0
                && r.check.overlaps.is_empty()
                && r.outside_total == 0
                && r.bodiless_lease_writes == 0
                && r.watched_handovers >= rebalances
        })
}

/// The rows of `--merge` to keep: all but those of the scenarios and managers run now.
fn earlier_outcomes(args: &Args) -> Result<Vec<Outcome>> {
    let Some(path) = &args.merge else {
        return Ok(Vec::new());
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let earlier: Vec<Outcome> = serde_json::from_str(&text)?;
    let rerun: Vec<&str> = args.scenarios.split(',').collect();
    let managers: Vec<&str> = args
        .managers
        .split(',')
        .map(|m| match m {
            "upstream" => ManagerKind::Upstream.name(),
            _ => ManagerKind::Rkcm.name(),
        })
        .collect();
    Ok(earlier
        .into_iter()
        .filter(|o| {
            !(rerun.contains(&o.scenario.as_str()) && managers.contains(&o.manager.as_str()))
        })
        .collect())
}

/// A soak row's memory is flat after its warm-up (rows without samples, or too short to
/// judge, pass).
fn soak_flat(o: &Outcome) -> bool {
    use rkcm_testkit::invariants::soak::Growth;
    Growth::of(&o.rss, Duration::from_secs_f64(o.rss_warmup_s.max(0.0))).is_none_or(|g| g.is_flat())
}

/// Rows grouped by scenario (in first-seen order), upstream before rkcm.
fn order(outcomes: &mut [Outcome]) {
    let mut first: Vec<String> = Vec::new();
    for o in outcomes.iter() {
        if !first.contains(&o.scenario) {
            first.push(o.scenario.clone());
        }
    }
    outcomes.sort_by_key(|o| {
        (
            first.iter().position(|s| *s == o.scenario),
            o.manager != ManagerKind::Upstream.name(),
        )
    });
}

/// `4,3,1` → lease duration, renew deadline and retry period (seconds).
fn parse_timings(text: &str) -> Result<(Duration, Duration, Duration)> {
    let v: Vec<f64> = text
        .split(',')
        .map(|s| s.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("--shard-timings {text}: seconds, comma separated"))?;
    let [lease, renew, retry] = v[..] else {
        anyhow::bail!("--shard-timings {text}: three values (lease, renew deadline, retry)");
    };
    anyhow::ensure!(
        lease > renew && renew > retry && retry > 0.0,
        "--shard-timings {text}: lease duration > renew deadline > retry period > 0"
    );
    Ok((
        Duration::from_secs_f64(lease),
        Duration::from_secs_f64(renew),
        Duration::from_secs_f64(retry),
    ))
}

/// `blackhole:60,refuse:300` → the cuts of `partition`.
fn parse_cuts(text: &str) -> Result<Vec<(Cut, Duration)>> {
    text.split(',')
        .filter(|c| !c.is_empty())
        .map(|c| {
            let (mode, secs) = c.split_once(':').context("a cut is MODE:SECONDS")?;
            let mode = match mode {
                "blackhole" => Cut::Blackhole,
                "refuse" => Cut::Refuse,
                other => anyhow::bail!("unknown cut mode {other} (blackhole or refuse)"),
            };
            Ok((
                mode,
                Duration::from_secs(secs.parse().context("cut seconds")?),
            ))
        })
        .collect()
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("rkcm-chaos: {e:#}");
            ExitCode::from(2)
        }
    }
}
