//! One chaos scenario for one manager: the namespace, the invariant watcher from before the
//! first object, the manager, the workload under churn, the faults of the scenario (kills and
//! watch delays from [`super::faults`], outages from [`super::outages`]), and the outcome.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use rand::Rng;

use super::faults::{
    ALL_CONTROLLERS, CONTROLLERS, Options, Outcome, Workload, count_panics, watched_namespace,
};
use super::outages;
use crate::cluster::TestCluster;
use crate::harness::{Manager, ManagerKind};

/// Runs `scenario` (`kill-churn` or `watch-gap`) for `kind` in a new namespace.
pub async fn run(
    cluster: &TestCluster,
    kind: ManagerKind,
    scenario: &str,
    opts: &Options,
) -> Result<Outcome> {
    let (ns, watcher) = watched_namespace(cluster, &format!("chaos-{scenario}")).await?;
    let qps = format!("--kube-api-qps={}", opts.qps);
    let burst = format!("--kube-api-burst={}", opts.qps * 2);
    // `<scenario>-all`: the same faults, every workload controller and kind.
    let full_name = scenario;
    let all = scenario.ends_with("-all");
    let scenario = scenario.strip_suffix("-all").unwrap_or(scenario);
    let controllers = if all { ALL_CONTROLLERS } else { CONTROLLERS };
    let (metrics_port, serving) = soak_serving(scenario, kind)?;
    let mut flags: Vec<&str> = vec![&qps, &burst];
    flags.extend(serving.iter().map(String::as_str));
    let mut manager = Manager::start_with(kind, cluster, ns.name(), controllers, &flags).await?;
    let work = Workload { ns: &ns, opts, all };
    let gate = if scenario == "reject-creates" {
        Some(outages::AdmissionGate::install(cluster, &ns).await?)
    } else {
        None
    };
    let audit = outages::Audit::open();
    let mut outcome = Outcome::empty(full_name, kind, opts.churn_time(scenario).as_secs_f64());
    let result = async {
        outcome.undisturbed_converge_s = work.baseline(opts.converge_timeout).await?;

        let churn_start = Instant::now();
        let until = churn_start + opts.churn_time(scenario);
        let faults = inject_faults(
            Fault {
                scenario,
                opts,
                cluster,
                gate: gate.as_ref(),
                metrics_port,
                churn_start,
                until,
            },
            &mut manager,
        );
        let ((deleted, changes), (n, exits, rss)) =
            tokio::try_join!(work.churn_with(until, scenario == "soak"), faults)?;
        outcome.rss = rss;
        outcome.rss_warmup_s = opts.soak_warmup.as_secs_f64();
        outcome.pod_deletions = deleted;
        outcome.spec_changes = changes;
        outcome.faults = n;
        outcome.unexpected_exits = exits;
        // The last fault comes with the same change as the baseline: a kill right after
        // it, or the end of the watch delay (events already held back still arrive late).
        let (start, settled_already) = last_fault(
            Fault {
                scenario,
                opts,
                cluster,
                gate: gate.as_ref(),
                metrics_port,
                churn_start,
                until,
            },
            &mut manager,
            &work,
            &audit,
            &mut outcome,
        )
        .await?;
        let timeout = last_fault_timeout(scenario, opts);
        let converged = match settled_already {
            Some(settled) => settled,
            None => work.wait_settled(timeout).await.map(|_| start.elapsed()),
        };
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
    if let Some(gate) = gate {
        gate.remove().await;
    }
    outcome.record(watcher.finish().await);
    outcome.panics = count_panics(&manager.log_tail(usize::MAX));
    outcome.gone_answers = manager.proxy().gone_answers();
    let stuck = outcome
        .rejection
        .as_ref()
        .is_some_and(|r| !r.stuck.is_empty());
    if !outcome.violations.is_empty() || outcome.error.is_some() || stuck {
        // "<name> log: <path> (last lines:)": the file's name only (it is in $TMPDIR).
        outcome.kept_log = kept_log_name(&manager.keep_log());
    }
    manager.stop().await.context("stopping the manager")?;
    Ok(outcome)
}

/// What the fault steps of a scenario need.
struct Fault<'a> {
    scenario: &'a str,
    opts: &'a Options,
    cluster: &'a TestCluster,
    gate: Option<&'a outages::AdmissionGate>,
    metrics_port: Option<u16>,
    churn_start: Instant,
    until: Instant,
}

/// rkcm in the soak serves `/metrics` on a port of its own, for its per-object maps
/// (`rkcm_tracked_entries`) beside each RSS sample: the port and the flags.
fn soak_serving(scenario: &str, kind: ManagerKind) -> Result<(Option<u16>, Vec<String>)> {
    let metrics_port = if scenario == "soak" && kind == ManagerKind::Rkcm {
        Some(crate::scrape::free_port()?)
    } else {
        None
    };
    let serving = metrics_port
        .map(|port| {
            vec![
                format!("--secure-port={port}"),
                "--bind-address=127.0.0.1".to_owned(),
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned(),
            ]
        })
        .unwrap_or_default();
    Ok((metrics_port, serving))
}

/// The scenario's faults during the churn: how many, the manager's unexpected exits, and
/// (soak) the RSS samples.
async fn inject_faults(
    f: Fault<'_>,
    manager: &mut Manager,
) -> Result<(u32, u32, Vec<super::soak::RssSample>)> {
    let Fault {
        scenario,
        opts,
        cluster,
        gate,
        metrics_port,
        churn_start,
        until,
    } = f;
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
            tokio::time::sleep(opts.duration / 2).await;
            manager.proxy().delay_watches("pods", opts.watch_delay);
            n += 1;
        }
        "apiserver-restart" => {
            tokio::time::sleep(opts.duration / 2).await;
            outages::apiserver_outage(opts).await?;
            n += 1;
        }
        "watch-410" => {
            let half = Instant::now() + opts.duration / 2;
            while Instant::now() + opts.expire_every < half {
                tokio::time::sleep(opts.expire_every).await;
                let rev = cluster.compact_etcd().await?;
                manager.proxy().expire_watches(rev);
                n += 1;
            }
            tokio::time::sleep_until(half.into()).await;
            manager.proxy().delay_watches("pods", opts.long_watch_delay);
            n += 1;
        }
        "reject-creates" => {
            tokio::time::sleep(opts.duration / 3).await;
            let gate = gate.as_ref().context("no admission gate")?;
            gate.close().await?;
            tokio::time::sleep(opts.reject_for).await;
            gate.open().await?;
            n += 1;
        }
        "soak" => {
            // No fault: the manager's memory sampled through steady churn.
            let pid = manager.pid().context("the manager has no process id")?;
            let mut rss = Vec::new();
            loop {
                let at = churn_start.elapsed();
                let tracked = match metrics_port {
                    Some(port) => super::soak::tracked(port).await,
                    None => None,
                };
                match super::soak::rss_mib(pid) {
                    Some(mib) => rss.push(super::soak::RssSample {
                        at_s: at.as_secs_f64(),
                        mib,
                        tracked,
                    }),
                    None => exits += 1,
                }
                if Instant::now() + opts.rss_every > until {
                    break;
                }
                tokio::time::sleep(opts.rss_every).await;
            }
            return anyhow::Ok((n, exits, rss));
        }
        other => anyhow::bail!("unknown scenario {other}"),
    }
    anyhow::Ok((n, exits, Vec::new()))
}

/// How long convergence after the last fault may take: the watch-410 scenario adds its long
/// delay (events already held back still arrive up to that long after).
fn last_fault_timeout(scenario: &str, opts: &Options) -> Duration {
    match scenario {
        "watch-410" => opts.converge_timeout + opts.long_watch_delay,
        _ => opts.converge_timeout,
    }
}

/// The last fault, with the same change as the baseline: a kill right after it, or the end
/// of the watch delay (events already held back still arrive late). Returns when the
/// convergence is timed from and, for a scenario that waited for it alongside its last
/// fault's measurement, the convergence already measured.
async fn last_fault(
    f: Fault<'_>,
    manager: &mut Manager,
    work: &Workload<'_>,
    audit: &Option<outages::Audit>,
    outcome: &mut Outcome,
) -> Result<(Instant, Option<Result<Duration>>)> {
    let Fault {
        scenario,
        opts,
        cluster,
        gate,
        ..
    } = f;
    let mut start = Instant::now();
    let timeout = last_fault_timeout(scenario, opts);
    // A scenario that waited for convergence alongside its last fault's measurement.
    let mut settled_already = None;
    match scenario {
        "kill-churn" => {
            work.bump(1).await?;
            manager.kill_and_restart().await?;
            outcome.faults += 1;
        }
        "apiserver-restart" => {
            // The change is made, the API server goes down at once; timed from its
            // return.
            work.bump(1).await?;
            outages::apiserver_outage(opts).await?;
            outcome.faults += 1;
            start = Instant::now();
        }
        "watch-410" => {
            // The long delay is lifted with the change (events already held back still
            // arrive up to that long after), and the watches are expired once more.
            work.bump(1).await?;
            manager.proxy().delay_watches("pods", Duration::ZERO);
            let rev = cluster.compact_etcd().await?;
            manager.proxy().expire_watches(rev);
            outcome.faults += 1;
        }
        "reject-creates" => {
            let gate = gate.context("no admission gate")?;
            let lifted = outages::reject_then_lift(work, gate).await?;
            start = lifted.opened;
            // Timed from the lift on its own: the resume watch may wait longer (for a
            // ReplicaSet that never gets its pod), which is its own finding.
            let (rejection, settled) =
                tokio::join!(outages::watch_resume(work, lifted, audit), async {
                    work.wait_settled(timeout).await.map(|_| start.elapsed())
                },);
            outcome.rejection = Some(rejection?);
            settled_already = Some(settled);
            outcome.faults += 1;
        }
        _ => {
            work.bump(1).await?;
            manager.proxy().delay_watches("pods", Duration::ZERO);
        }
    }
    Ok((start, settled_already))
}

/// The kept log's file name ("<name> log: <path> (last lines:)"), as `$TMPDIR/<file>`.
fn kept_log_name(kept: &str) -> Option<String> {
    kept.lines()
        .next()
        .and_then(|l| l.split(" log: ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|p| std::path::Path::new(p).file_name())
        .map(|f| format!("$TMPDIR/{}", f.to_string_lossy()))
}
