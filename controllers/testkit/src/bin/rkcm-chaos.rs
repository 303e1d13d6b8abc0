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
    /// watch-410, reject-creates, soak; `<scenario>-all` for every workload kind.
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
            eprintln!(
                "rkcm-chaos: {scenario} / {name} for {} s",
                opts.churn_time(scenario).as_secs()
            );
            let o = match scenario {
                "leader" => faults::run_leader(cluster, kind, &opts).await,
                "partition" => outages::run_partition(cluster, kind, &opts).await,
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
        .all(|o| {
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
        }))
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
