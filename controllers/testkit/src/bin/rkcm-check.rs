//! `rkcm-check`: watches a cluster and reports every broken controller invariant (see
//! `rkcm_testkit::invariants`): a ReplicaSet creating pods above `replicas`, a Deployment's
//! ReplicaSets above `replicas + maxSurge`, two pods with one StatefulSet identity, Job
//! counts that decrease or exceed the pods seen, wrong `completedIndexes`, tracking
//! finalizers left on finished Jobs' pods, two Jobs for one CronJob scheduled time, a
//! running pod whose node exists deleted with grace 0.
//!
//! Prints each violation when found (with the time it was seen), writes a report at the
//! end (`--report`: text, or JSON when the name ends in `.json`), and exits 1 when any
//! invariant broke (2 on an error of its own).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use kube::Client;
use rkcm_testkit::TestCluster;
use rkcm_testkit::invariants::Config;
use rkcm_testkit::invariants::watch::{InvariantWatcher, Scope};

#[derive(Parser, Debug)]
#[command(
    name = "rkcm-check",
    about = "Checks controller invariants of a cluster continuously"
)]
struct Args {
    /// Kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Namespace to watch; repeatable. Without it, all namespaces.
    #[arg(long = "namespace", short = 'n')]
    namespaces: Vec<String>,
    /// How long to watch (e.g. 90s, 10m, 1h). Without it, until SIGINT or SIGTERM.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Where to write the report (JSON when the name ends in .json, text otherwise).
    #[arg(long)]
    report: Option<PathBuf>,
    /// How far one kind's watch may lag another's before a cross-kind check counts.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    grace: Duration,
}

/// `90s`, `10m`, `1h`, `500ms`, or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| s.split_at(i));
    let n: u64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    Ok(match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => return Err(format!("bad duration unit in {s:?} (ms, s, m, h)")),
    })
}

async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = term => {},
    }
}

async fn run(args: Args) -> Result<bool> {
    let client = match &args.kubeconfig {
        Some(path) => {
            Client::try_from(TestCluster::config_from(path).await?).context("building a client")?
        }
        None => Client::try_default()
            .await
            .context("building a client from the default kubeconfig")?,
    };
    let scope = if args.namespaces.is_empty() {
        Scope::All
    } else {
        Scope::Namespaces(args.namespaces.clone())
    };
    let grace = jiff::SignedDuration::try_from(args.grace).context("grace out of range")?;
    let watcher = InvariantWatcher::start(client, scope, Config { grace }).await?;
    eprintln!("rkcm-check: watching ({:?})", args.namespaces);
    let until = async {
        match args.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until);
    let stop = stop_signal();
    tokio::pin!(stop);
    let mut printed = 0;
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            () = &mut until => break,
            () = &mut stop => break,
            _ = every.tick() => {
                let v = watcher.violations();
                for v in &v[printed.min(v.len())..] {
                    println!("VIOLATION {v}");
                }
                printed = v.len();
            }
        }
    }
    let report = watcher.finish().await;
    for v in &report.violations[printed.min(report.violations.len())..] {
        println!("VIOLATION {v}");
    }
    let text = report.text();
    print!("{text}");
    if let Some(path) = &args.report {
        let body = if path.extension().is_some_and(|e| e == "json") {
            serde_json::to_string_pretty(&report)?
        } else {
            text
        };
        std::fs::write(path, body).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(report.violations.is_empty())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("rkcm-check: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("5d").is_err());
    }
}
