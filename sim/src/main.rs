//! `rkcm-sim`: runs the deterministic simulation over a range of seeds, or replays one seed
//! with its trace. Exits non-zero when a seed breaks an invariant, printing the seed and
//! the command that replays it.

use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use rkcm_sim::{Ctl, run};

#[derive(Parser, Debug)]
#[command(about = "Deterministic simulation of rkcm's controllers")]
struct Args {
    /// Controllers to run (`all`, or a comma-separated list of replicaset, deployment,
    /// statefulset, daemonset, job, cronjob, podgc, ttlafterfinished).
    #[arg(long, default_value = "all")]
    controller: String,
    /// How many seeds per controller, starting at `--first`.
    #[arg(long, default_value_t = 20)]
    seeds: u64,
    /// The first seed of the range.
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Replay this one seed (ignores `--seeds` and `--first`).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the step-by-step trace of each run.
    #[arg(long)]
    trace: bool,
    /// Print every object at the end of each run.
    #[arg(long)]
    dump: bool,
    /// Stop at the first failing seed of each controller.
    #[arg(long)]
    fail_fast: bool,
    /// Log the controllers' own tracing output (RUST_LOG filter, e.g. `info`).
    #[arg(long)]
    log: Option<String>,
    /// Switch on one deliberate bug of `rkcm_runtime::mutants` (the mutation check,
    /// `sim/mutants.sh`).
    #[arg(long)]
    mutant: Option<String>,
    /// Count a seed as failed only when this invariant broke (others are printed as notes):
    /// the mutation check's proof that a mutant is caught by the check named for it.
    #[arg(long)]
    expect: Option<String>,
    /// Internal: run the one `--seed` and end with a `SUMMARY` line for the parent process
    /// that runs a range.
    #[arg(long, hide = true)]
    summary: bool,
}

/// What the parent needs from one seed's run.
struct Summary {
    virtual_ms: u64,
    requests: u64,
    crashes: u64,
    passed: bool,
}

/// Runs one seed in a fresh process (this binary with `--seed`), forwarding its output.
/// Every seed of a range gets its own process: state a run leaves in the process (thread
/// locals, hash keys, the paused clock's origin) then cannot reach the next run, so any seed
/// of a range replays alone with `--seed` exactly as it ran.
fn run_in_child(args: &Args, ctl: Ctl, seed: u64) -> anyhow::Result<Summary> {
    let exe = std::env::current_exe().context("locating the rkcm-sim binary")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args([
        "--controller",
        ctl.name(),
        "--seed",
        &seed.to_string(),
        "--summary",
    ]);
    if args.trace {
        cmd.arg("--trace");
    }
    if args.dump {
        cmd.arg("--dump");
    }
    if let Some(filter) = &args.log {
        cmd.args(["--log", filter]);
    }
    if let Some(m) = &args.mutant {
        cmd.args(["--mutant", m]);
    }
    if let Some(e) = &args.expect {
        cmd.args(["--expect", e]);
    }
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running seed {seed} of {}", ctl.name()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut summary = None;
    for line in stdout.lines() {
        match line.strip_prefix("SUMMARY ") {
            Some(rest) => {
                let n: Vec<u64> = rest.split(' ').filter_map(|x| x.parse().ok()).collect();
                if let [virtual_ms, requests, crashes, passed] = n[..] {
                    summary = Some(Summary {
                        virtual_ms,
                        requests,
                        crashes,
                        passed: passed == 1,
                    });
                }
            }
            None if line.starts_with("ok controller ") => {}
            None => println!("{line}"),
        }
    }
    summary.with_context(|| {
        format!(
            "seed {seed} of {} ended without a summary ({})",
            ctl.name(),
            out.status
        )
    })
}

/// The replay command of one seed.
fn replay(args: &Args, ctl: Ctl, seed: u64) -> String {
    let mut cmd = format!(
        "cargo run -p rkcm-sim --release -- --controller {} --seed {seed} --trace",
        ctl.name()
    );
    if let Some(m) = &args.mutant {
        cmd += &format!(" --mutant {m}");
    }
    cmd
}

/// Prints one seed's run (trace, dump, findings); whether it passed. With `--expect`, a run
/// fails only when that invariant broke; it is then printed first.
fn report(args: &Args, ctl: Ctl, seed: u64, out: &rkcm_sim::Outcome) -> bool {
    if args.trace {
        for line in &out.trace {
            println!("{line}");
        }
    }
    if args.dump {
        for line in &out.dump {
            println!("{line}");
        }
    }
    let mut broken: Vec<&rkcm_sim::checks::Broken> = out.broken.iter().collect();
    if let Some(expect) = &args.expect {
        broken.sort_by_key(|b| b.invariant != *expect);
        if broken.first().is_none_or(|b| b.invariant != *expect) {
            for b in &broken {
                println!(
                    "note controller {} seed {seed}, not {expect}: {b}",
                    ctl.name()
                );
            }
            broken.clear();
        }
    }
    if broken.is_empty() {
        if !args.summary {
            println!(
                "ok controller {} seed {seed}: settled {:?} ms after faults, {} requests, {} crashes, {} restarts",
                ctl.name(),
                out.settled_ms,
                out.requests,
                out.crashes,
                out.restarts
            );
        }
        return true;
    }
    println!("FAIL controller {} seed {seed}:", ctl.name());
    for b in broken {
        println!("  {b}");
    }
    println!("  replay: {}", replay(args, ctl, seed));
    false
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(m) = &args.mutant {
        rkcm_runtime::mutants::select(m).map_err(anyhow::Error::msg)?;
    }
    if let Some(filter) = &args.log {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .without_time()
            .init();
    }
    let ctls: Vec<Ctl> = if args.controller == "all" {
        Ctl::ALL.to_vec()
    } else {
        args.controller
            .split(',')
            .map(|c| Ctl::parse(c.trim()).with_context(|| format!("unknown controller {c}")))
            .collect::<anyhow::Result<_>>()?
    };
    let seeds: Vec<u64> = match args.seed {
        Some(s) => vec![s],
        None => (args.first..args.first + args.seeds).collect(),
    };
    let mut failed = Vec::new();
    for ctl in ctls {
        let started = Instant::now();
        let (mut runs, mut virtual_ms, mut requests, mut crashes) = (0u64, 0u64, 0u64, 0u64);
        for &seed in &seeds {
            if args.seed.is_none() {
                let child = run_in_child(&args, ctl, seed)?;
                runs += 1;
                virtual_ms += child.virtual_ms;
                requests += child.requests;
                crashes += child.crashes;
                if !child.passed {
                    failed.push((ctl, seed));
                    if args.fail_fast {
                        break;
                    }
                }
                continue;
            }
            let out = run(ctl, seed)?;
            runs += 1;
            virtual_ms += out.virtual_ms;
            requests += out.requests;
            crashes += u64::from(out.crashes);
            if !report(&args, ctl, seed, &out) {
                failed.push((ctl, seed));
                if args.fail_fast {
                    break;
                }
            }
        }
        if args.summary {
            println!(
                "SUMMARY {virtual_ms} {requests} {crashes} {}",
                u8::from(failed.is_empty())
            );
            return Ok(());
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{}: {runs} seeds in {secs:.1} s ({:.2} seeds/s), {:.0} virtual s, {requests} requests, {crashes} crashes, {} failed",
            ctl.name(),
            runs as f64 / secs.max(1e-9),
            virtual_ms as f64 / 1000.0,
            failed.iter().filter(|(c, _)| *c == ctl).count()
        );
    }
    if !failed.is_empty() {
        bail!("{} seed(s) failed: {failed:?}", failed.len());
    }
    Ok(())
}
