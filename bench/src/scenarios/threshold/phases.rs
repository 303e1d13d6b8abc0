//! The measured phases of one manager's run: cold start, settled, reaction.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::objects;
use super::queues::{self, QUEUE_DURATION, Scrape, WORK_DURATION};
use super::shared::{State, Threshold, job_runs, metric, mib, node_name, ns_of};
use crate::harness::{self, Env, Probe};
use crate::scenarios::envelope::mix::{self, Kind, Workload};
use crate::scenarios::idle::SYNC_QUIET;
use crate::{audit, latency, procfs};

/// The line both managers log when an informer (rkcm) or a controller (upstream) synced.
pub const SYNCED_LINE: &str = "Caches are synced";
/// How long the cold start may take.
const COLD_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long the queues may take to go quiet after a probe.
const QUIET_TIMEOUT: Duration = Duration::from_secs(300);

fn plane_cpu(env: &Env) -> BTreeMap<String, f64> {
    harness::plane_pids(&env.cluster_dir)
        .into_iter()
        .filter_map(|(name, pid)| Some((name, procfs::cpu_seconds(pid)?)))
        .collect()
}

/// Waits until `log` has said [`SYNCED_LINE`] and then nothing like it for [`SYNC_QUIET`];
/// the time of the last such line (as the poll saw it). `sample` runs at every poll.
pub async fn wait_synced(
    log: &std::path::Path,
    timeout: Duration,
    mut sample: impl FnMut(),
) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + timeout;
    let (mut count, mut since) = (0usize, Instant::now());
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let now = text.matches(SYNCED_LINE).count();
        if now != count {
            (count, since) = (now, Instant::now());
        }
        sample();
        if count > 0 && since.elapsed() >= SYNC_QUIET {
            return Ok(since);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{}: not synced after {} s ({count} \"{SYNCED_LINE}\" lines)",
            log.display(),
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Polls the log and `/metrics` together until the informers synced (the last
/// [`SYNCED_LINE`], none for [`SYNC_QUIET`] after it) and the queues are quiet (every queue
/// empty, no add, over two scrapes a second apart). Returns when the last sync line was seen
/// and when the first pass was done: the later of that and the start of the trailing stretch
/// of quiet scrapes.
async fn first_pass(
    logs: &[std::path::PathBuf],
    ports: &[u16],
    mut sample: impl FnMut(),
) -> anyhow::Result<(Instant, Instant)> {
    let deadline = Instant::now() + COLD_TIMEOUT;
    let (mut count, mut synced) = (0usize, Instant::now());
    // (adds at the start of the quiet stretch, its start), of the latest scrapes.
    let mut quiet: Option<(f64, Instant)> = None;
    let mut quiet_scrapes = 0usize;
    loop {
        let at = Instant::now();
        // A sharded run's replicas: every one has synced, the count is over all of them.
        let counts: Vec<usize> = logs
            .iter()
            .map(|l| {
                std::fs::read_to_string(l)
                    .unwrap_or_default()
                    .matches(SYNCED_LINE)
                    .count()
            })
            .collect();
        let now = if counts.contains(&0) {
            0
        } else {
            counts.iter().sum()
        };
        if now != count {
            (count, synced) = (now, at);
        }
        sample();
        if let Ok(s) = queues::scrape_all(ports).await {
            match quiet {
                Some((adds, _)) if s.depth == 0.0 && s.adds == adds => quiet_scrapes += 1,
                _ if s.depth == 0.0 && s.adds > 0.0 => {
                    quiet = Some((s.adds, at));
                    quiet_scrapes = 1;
                }
                _ => {
                    quiet = None;
                    quiet_scrapes = 0;
                }
            }
        }
        if count > 0 && synced.elapsed() >= SYNC_QUIET && quiet_scrapes >= 2 {
            let since = quiet.map_or(at, |(_, t)| t);
            return Ok((synced, since.max(synced)));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{}: no first pass after {} s ({count} \"{SYNCED_LINE}\" lines, {quiet_scrapes} quiet scrapes)",
            logs.iter()
                .map(|l| l.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            COLD_TIMEOUT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Cold start: synced, then the first pass over every object done.
pub async fn cold_start(
    t: &Threshold,
    env: &Env,
    state: &mut State,
    probe: &Probe,
) -> anyhow::Result<()> {
    let phase = probe.begin("cold start");
    let cpu0 = plane_cpu(env);
    let audit0 = audit::offset(&env.audit_log)?;
    let mut peak: BTreeMap<String, u64> = BTreeMap::new();
    let cluster = env.cluster_dir.clone();
    let mut sample = || {
        for (name, b) in crate::scenarios::envelope::plane_rss(&cluster) {
            let p = peak.entry(name).or_default();
            *p = (*p).max(b);
        }
    };
    probe.progress("cold start: waiting for the informers to sync and the queues to drain");
    let (synced, done) = first_pass(probe.logs(), &ports(t, probe), &mut sample).await?;
    probe.mark_at("synced", synced);
    probe.mark_at("first pass done", done);
    let cold = probe.elapsed().saturating_sub(done.elapsed());
    let writes = audit::count(&env.audit_log, probe.manager_user(), audit0, None)?.0;
    let w: u64 = ["create", "update", "patch", "delete", "deletecollection"]
        .iter()
        .filter_map(|v| writes.by_verb.get(*v))
        .sum();
    let what: Vec<String> = writes
        .by_request
        .iter()
        .filter(|(k, _)| !k.starts_with("list") && !k.starts_with("watch") && !k.starts_with("get"))
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    probe.end(phase, format!("{w} writes ({})", what.join(", ")));
    state.cold_writes = w;
    state
        .metrics
        .push(metric("cold start", cold.as_secs_f64(), "s"));
    state
        .metrics
        .push(metric("writes during cold start", w as f64, ""));
    if let Some(b) = probe.manager_peak_rss_bytes() {
        state
            .metrics
            .push(metric("peak RSS by the first pass", mib(b), "MiB"));
    }
    if probe.manager_pids().len() > 1 {
        let sum: u64 = probe
            .manager_pids()
            .iter()
            .filter_map(|&p| procfs::status_bytes(p, "VmHWM"))
            .sum();
        state.metrics.push(metric(
            "peak RSS by the first pass, sum of replicas",
            mib(sum),
            "MiB",
        ));
    }
    let cpu1 = plane_cpu(env);
    for (name, after) in cpu1 {
        if let Some(before) = cpu0.get(&name) {
            state.metrics.push(metric(
                format!("{name} CPU during cold start"),
                after - before,
                "s",
            ));
        }
    }
    for (name, b) in peak {
        state.metrics.push(metric(
            format!("{name} peak RSS during cold start"),
            mib(b),
            "MiB",
        ));
    }
    Ok(())
}

/// Settled: RSS and CPU over an idle window.
pub async fn settled(t: &Threshold, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
    let window = Duration::from_secs(t.args.settled_seconds);
    let phase = probe.begin(&format!("settled {} s", window.as_secs()));
    probe.progress("settled: idle window (nothing to wait for)");
    let cpu0 = probe.manager_cpu_seconds();
    // The window is the measurement itself: nothing is waited for, time passes.
    tokio::time::sleep(window).await;
    let rss = probe.manager_rss_bytes();
    let cpu1 = probe.manager_cpu_seconds();
    probe.end(phase, "");
    if probe.manager_pids().len() > 1
        && let Some(sum) = probe.manager_rss_sum_bytes()
    {
        state
            .metrics
            .push(metric("RSS settled, sum of replicas", mib(sum), "MiB"));
    }
    if let Some(b) = rss {
        state.metrics.push(metric("RSS settled", mib(b), "MiB"));
        state.metrics.push(metric(
            "RSS settled per pod",
            b as f64 / 1024.0 / t.plan.pods().max(1) as f64,
            "KiB",
        ));
    }
    if let (Some(a), Some(b)) = (cpu0, cpu1) {
        state.metrics.push(metric(
            "CPU per settled minute",
            (b - a) * 60.0 / window.as_secs_f64().max(1.0),
            "s",
        ));
    }
    Ok(())
}

/// The `n`th workload of `kind` (in turn).
fn nth(t: &Threshold, kind: Kind, n: usize, pick: impl Fn(&Workload) -> bool) -> Option<&Workload> {
    let of: Vec<&Workload> = t
        .plan
        .workloads
        .iter()
        .filter(|w| w.kind == kind && pick(w))
        .collect();
    (!of.is_empty()).then(|| of[n % of.len()])
}

/// One change of kind `k` (0: scale a Deployment, 1: delete a StatefulSet's pod, 2: finish a
/// running Job's pod, 3: delete a node), its target chosen by `n`; the node deleted, if any.
async fn change(t: &Threshold, env: &Env, k: usize, n: usize) -> anyhow::Result<Option<String>> {
    let c = &env.client;
    match k % 4 {
        0 => {
            let w =
                nth(t, Kind::Deployment, n, |w| w.pods <= mix::MEDIUM).context("no Deployment")?;
            let api: Api<Deployment> = Api::namespaced(c.clone(), &ns_of(w.ns));
            let d = api
                .get(&w.name)
                .await
                .with_context(|| format!("reading deployment {}", w.name))?;
            let r = d.spec.replicas.unwrap_or(1) + 1;
            let patch = json!({"spec": {"replicas": r}});
            api.patch(&w.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("scaling deployment {} to {r}", w.name))?;
        }
        1 => {
            let w = nth(t, Kind::StatefulSet, n, |_| true).context("no StatefulSet")?;
            let api: Api<Pod> = Api::namespaced(c.clone(), &ns_of(w.ns));
            let name = format!("{}-{}", w.name, n % w.pods.max(1));
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            };
            match api.delete(&name, &dp).await {
                Ok(_) => {}
                Err(e) if crate::k8s::is_status(&e, 404) => {}
                Err(e) => return Err(e).with_context(|| format!("deleting pod {name}")),
            }
        }
        2 => {
            let w = nth(t, Kind::Job, n, job_runs).context("no running Job")?;
            let jobs = t
                .plan
                .workloads
                .iter()
                .filter(|x| job_runs(x))
                .count()
                .max(1);
            let i = (n / jobs) % w.pods.max(1);
            let api: Api<Pod> = Api::namespaced(c.clone(), &ns_of(w.ns));
            let name = format!("{}-{}", w.name, objects::suffix(i));
            let shape =
                json!({"spec": {"containers": [{"name": "main", "image": crate::k8s::PAUSE}]}});
            let status = objects::succeeded_status(&shape, &jiff::Timestamp::now().to_string());
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
            {
                Ok(_) => {}
                Err(e) if crate::k8s::is_status(&e, 404) => {}
                Err(e) => return Err(e).with_context(|| format!("finishing pod {name}")),
            }
        }
        _ => {
            let api: Api<Node> = Api::all(c.clone());
            let name = node_name(t.plan.nodes.saturating_sub(1 + n % t.plan.nodes.max(1)));
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => return Ok(Some(name)),
                Err(e) if crate::k8s::is_status(&e, 404) => {}
                Err(e) => return Err(e).with_context(|| format!("deleting node {name}")),
            }
        }
    }
    Ok(None)
}

/// p50/p99 of each work-queue metric over all queues between two scrapes, in ms, and the p99
/// of each queue that had items (which controller's syncs make the tail).
fn queue_metrics(before: &Scrape, after: &Scrape, tag: &str) -> Vec<crate::results::Metric> {
    let mut out = Vec::new();
    for m in [QUEUE_DURATION, WORK_DURATION] {
        let diffs: Vec<(&str, queues::Histogram)> = after
            .histograms
            .iter()
            .filter(|((metric, _), _)| metric == m)
            .map(|(k, h)| (k.1.as_str(), queues::diff(h, before.histograms.get(k))))
            .collect();
        let all = queues::merge(diffs.iter().map(|(_, h)| h));
        let short = if m == QUEUE_DURATION { "queue" } else { "work" };
        for (queue, h) in diffs.iter().filter(|(_, h)| h.count > 0.0) {
            if let Some(v) = queues::quantile(h, 0.99) {
                out.push(metric(
                    format!("workqueue {short} p99 of {queue} ({tag})"),
                    v * 1000.0,
                    "ms",
                ));
            }
        }
        for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
            if let Some(v) = queues::quantile(&all, q) {
                out.push(metric(
                    format!("workqueue {short} {name} ({tag})"),
                    v * 1000.0,
                    "ms",
                ));
            }
        }
        out.push(metric(
            format!("workqueue {short} items ({tag})"),
            all.count,
            "",
        ));
    }
    out
}

/// Reaction: single changes on a quiet manager, then a burst.
pub async fn reaction(
    t: &Threshold,
    env: &Env,
    state: &mut State,
    probe: &Probe,
) -> anyhow::Result<()> {
    let ports = ports(t, probe);
    let audit0 = audit::offset(&env.audit_log)?;
    let before = queues::scrape_all(&ports).await?;
    let phase = probe.begin("reaction idle");
    let idle_from = jiff::Timestamp::now();
    let mut deleted = Vec::new();
    for r in 0..t.args.probes {
        probe.progress(format!("idle probe {}/{}", r + 1, t.args.probes));
        deleted.extend(change(t, env, r, t.next_cursor()).await?);
        queues::wait_quiet(&ports, Duration::from_millis(500), QUIET_TIMEOUT).await?;
    }
    let idle_to = jiff::Timestamp::now();
    probe.end(phase, format!("{} changes", t.args.probes));
    let mid = queues::scrape_all(&ports).await?;
    let phase = probe.begin("reaction burst");
    let n = t.args.burst_changes;
    let changes = (0..4 * n).map(|i| {
        let cursor = t.next_cursor();
        async move { change(t, env, i % 4, cursor).await }
    });
    deleted.extend(
        futures::future::try_join_all(changes)
            .await?
            .into_iter()
            .flatten(),
    );
    probe.progress("burst: waiting for the queues to go quiet");
    queues::wait_quiet(&ports, Duration::from_millis(500), QUIET_TIMEOUT).await?;
    probe.end(phase, format!("{} changes", 4 * n));
    let after = queues::scrape_all(&ports).await?;
    probe.progress(format!(
        "restoring the {} nodes the probes deleted",
        deleted.len()
    ));
    super::load::restore_nodes(env, &t.plan, &deleted).await?;
    queues::wait_quiet(&ports, Duration::from_millis(500), QUIET_TIMEOUT).await?;
    state.metrics.extend(queue_metrics(&before, &mid, "idle"));
    state.metrics.extend(queue_metrics(&mid, &after, "burst"));
    // The audit log's reaction latency, as in the envelope.
    let records = latency::read(&env.audit_log, audit0, None)?;
    let samples = latency::reactions(&records, probe.manager_user(), mix::classify_owner);
    let (idle, burst): (Vec<_>, Vec<_>) = samples
        .into_iter()
        .partition(|s| s.at >= idle_from && s.at <= idle_to);
    for (tag, set) in [("idle", idle), ("burst", burst)] {
        for (controller, s) in latency::summarize(&set) {
            for (stat, v) in [("p50", s.p50), ("p99", s.p99), ("max", s.max)] {
                state.metrics.push(metric(
                    format!("reaction {controller} {stat} ({tag})"),
                    v * 1000.0,
                    "ms",
                ));
            }
            if s.unanswered > 0 {
                state.metrics.push(metric(
                    format!("reaction {controller} unanswered ({tag})"),
                    s.unanswered as f64,
                    "",
                ));
            }
        }
    }
    Ok(())
}

/// The ports the manager's processes serve `/metrics` on: the scenario's, and for a sharded
/// run's replica `i` that plus `i` (see `harness::replica_args`).
pub fn ports(t: &Threshold, probe: &Probe) -> Vec<u16> {
    (0..probe.manager_pids().len())
        .map(|i| t.args.metrics_port + i as u16)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue-wait histogram of `queue`: cumulative counts at 1 ms, 10 ms and `+Inf`.
    fn queue(queue: &str, [ms1, ms10, all]: [u32; 3]) -> String {
        let m = QUEUE_DURATION;
        format!(
            "{m}_bucket{{name=\"{queue}\",le=\"0.001\"}} {ms1}\n\
             {m}_bucket{{name=\"{queue}\",le=\"0.01\"}} {ms10}\n\
             {m}_bucket{{name=\"{queue}\",le=\"+Inf\"}} {all}\n\
             {m}_count{{name=\"{queue}\"}} {all}\n"
        )
    }

    #[test]
    fn each_queue_with_items_in_the_window_gets_its_own_p99() {
        // Queue a: 50 items in (1 ms, 10 ms] and 50 above in the window; queue b: none.
        let before = queue("a", [5, 10, 10]) + &queue("b", [3, 3, 3]);
        let after = queue("a", [5, 60, 110]) + &queue("b", [3, 3, 3]);
        let m = queue_metrics(&queues::parse(&before), &queues::parse(&after), "idle");
        let named: Vec<(&str, f64)> = m.iter().map(|m| (m.name.as_str(), m.value)).collect();
        assert!(
            named.contains(&("workqueue queue p99 of a (idle)", 10.0)),
            "{named:?}"
        );
        assert!(
            !named.iter().any(|(n, _)| n.contains(" of b ")),
            "a queue without items in the window has no p99: {named:?}"
        );
        assert!(
            named.contains(&("workqueue queue items (idle)", 100.0)),
            "{named:?}"
        );
    }
}
