//! kube-prometheus's kube-controller-manager dashboard panels and alerts
//! (`tests/rkcm/kube_prometheus/queries.yaml`, copied from kube-prometheus's `manifests/`)
//! evaluated against upstream kube-controller-manager and against rkcm on the same plane.
//!
//! The same scenario runs once per manager, each behind the scoping proxy with the Deployment,
//! ReplicaSet and Job controllers, serving `/metrics` on its secure port and scraped by its own
//! Prometheus (`rkcm_testkit::prometheus`) as job `kube-controller-manager`, with a
//! ServiceAccount token as kube-prometheus's ServiceMonitor sends: a Deployment and a Job are
//! created, and every query is evaluated each second for [`OBSERVE`], and once more after the
//! manager is stopped and its target is seen down (the alerts' case). A query's series are
//! told apart by their labels other than `job`, `instance` and `cluster`. Every series one
//! manager returns and the other does not must be listed, with its reason, under
//! `differences` in the data file; the table goes to a temporary file, or to the path in
//! `RKCM_KUBE_PROMETHEUS_REPORT` (the committed one is `bench/reports/kube-prometheus.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use rkcm_testkit::harness::{Env, Manager, ManagerKind};
use rkcm_testkit::prometheus::{Prometheus, STARTUP, Target};
use rkcm_testkit::scrape::free_port;
use rkcm_testkit::{unique_name, wait_for};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::prometheus::scrape_token;
use crate::rollout::wait_default_service_account;
use crate::secure_serving::ClusterRbac;

/// The scrape job, as kube-prometheus's ServiceMonitor labels it (the queries select it).
const JOB: &str = "kube-controller-manager";
/// Scrape interval of each Prometheus.
const EVERY: Duration = Duration::from_secs(1);
/// The dashboard's `$__rate_interval` here: a few scrapes of [`EVERY`].
const WINDOW: &str = "20s";
/// How long the queries are evaluated once the workload is there.
const OBSERVE: Duration = Duration::from_secs(25);
/// The controllers each manager runs.
const CONTROLLERS: &str = "deployment-controller,replicaset-controller,job-controller";
/// Not a kube-prometheus query: the 4xx answers by code and method, shown under the table to
/// explain the `api-4xx` row.
const DETAIL_4XX: &str = "sum by (code, method) (rest_client_requests_total{code=~\"4..\"})";
/// Pods of this test land on no node.
const NO_NODE: &str = "rkcm.test/no-such-node";

#[derive(Debug, Deserialize)]
struct Data {
    queries: Vec<Query>,
    differences: Vec<Difference>,
}

#[derive(Debug, Deserialize)]
struct Query {
    id: String,
    /// The panel or alert it comes from.
    source: String,
    expr: String,
}

/// A series one manager returns for a query and the other does not, and why.
#[derive(Debug, Deserialize)]
struct Difference {
    query: String,
    /// The series' labels as [`series_key`] renders them.
    series: String,
    /// The manager that returns it: `upstream` or `rkcm`.
    only: String,
    why: String,
    /// A difference that depends on the run's timing: not an error when it does not occur.
    #[serde(default)]
    sometimes: bool,
}

fn data_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/rkcm/kube_prometheus/queries.yaml")
}

fn load() -> anyhow::Result<Data> {
    let path = data_file();
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// A query as Grafana sends it: one cluster without a `cluster` label (the hidden variable is
/// empty), every instance, a [`WINDOW`] rate interval.
fn concrete(expr: &str) -> String {
    expr.replace("$__rate_interval", WINDOW)
        .replace("$cluster", "")
        .replace("$instance", ".*")
}

/// A series' labels without those naming the target (`job`, `instance`, `cluster`), sorted:
/// `{}` when none is left.
fn series_key(labels: &serde_json::Map<String, Value>) -> String {
    let parts: BTreeSet<String> = labels
        .iter()
        .filter(|(k, _)| !["job", "instance", "cluster"].contains(&k.as_str()))
        .map(|(k, v)| format!("{k}=\"{}\"", v.as_str().unwrap_or("")))
        .collect();
    format!("{{{}}}", parts.into_iter().collect::<Vec<_>>().join(","))
}

/// The series keys each query returned at some point of a run, by query id.
type Seen = BTreeMap<String, BTreeSet<String>>;

/// One row of the table: the series of each manager and the differences between them.
#[derive(Debug, PartialEq)]
struct Row {
    query: String,
    upstream: Vec<String>,
    rkcm: Vec<String>,
    /// (series, only, explanation if the data file has one).
    differences: Vec<(String, &'static str, Option<String>)>,
}

/// Compares what the two runs returned, query by query.
fn compare(data: &Data, upstream: &Seen, rkcm: &Seen) -> Vec<Row> {
    let empty = BTreeSet::new();
    let why = |query: &str, series: &str, only: &str| {
        data.differences
            .iter()
            .find(|d| d.query == query && d.series == series && d.only == only)
            .map(|d| d.why.clone())
    };
    data.queries
        .iter()
        .map(|q| {
            let up = upstream.get(&q.id).unwrap_or(&empty);
            let rk = rkcm.get(&q.id).unwrap_or(&empty);
            let mut differences = Vec::new();
            for (mine, theirs, only) in [(up, rk, "upstream"), (rk, up, "rkcm")] {
                for s in mine.difference(theirs) {
                    differences.push((s.clone(), only, why(&q.id, s, only)));
                }
            }
            Row {
                query: q.id.clone(),
                upstream: up.iter().cloned().collect(),
                rkcm: rk.iter().cloned().collect(),
                differences,
            }
        })
        .collect()
}

/// Differences without an explanation, and explanations matching no difference.
fn unexplained(data: &Data, rows: &[Row]) -> (Vec<String>, Vec<String>) {
    let mut missing = Vec::new();
    let mut used = BTreeSet::new();
    for r in rows {
        for (series, only, why) in &r.differences {
            if why.is_some() {
                used.insert((r.query.clone(), series.clone(), *only));
            } else {
                missing.push(format!("{}: {series} only from {only}", r.query));
            }
        }
    }
    let stale = data
        .differences
        .iter()
        .filter(|d| {
            !d.sometimes && !used.contains(&(d.query.clone(), d.series.clone(), d.only.as_str()))
        })
        .map(|d| format!("{}: {} only from {}", d.query, d.series, d.only))
        .collect();
    (missing, stale)
}

fn cell(series: &[String]) -> String {
    if series.is_empty() {
        "none".to_owned()
    } else {
        series.join("<br>").replace('|', "\\|")
    }
}

/// The report: one row per query.
fn report(data: &Data, rows: &[Row], upstream: &Seen, rkcm: &Seen) -> String {
    let mut out = String::from(
        "# kube-prometheus's kube-controller-manager queries: upstream vs rkcm\n\n\
         Written by `tests/rkcm/kube_prometheus.rs` (the queries and the explained differences \
         are in `tests/rkcm/kube_prometheus/queries.yaml`). Each manager ran the Deployment, \
         ReplicaSet and Job controllers with a Deployment and a Job, scraped every second as \
         job `kube-controller-manager`; each query was evaluated every second for 25 s \
         (`$cluster` empty, `$instance` `.*`, `$__rate_interval` 20s), and once more after the \
         manager was stopped and Prometheus saw its target down. Series are shown by \
         their labels other than job, instance and cluster.\n\n\
         | query (panel/alert) | series for upstream | series for rkcm | note |\n|---|---|---|---|\n",
    );
    for (q, r) in data.queries.iter().zip(rows) {
        let note = if r.differences.is_empty() {
            "same".to_owned()
        } else {
            r.differences
                .iter()
                .map(|(s, only, why)| match why {
                    Some(why) => format!("{s} only from {only}: {why}"),
                    None => format!("{s} only from {only}: UNEXPLAINED"),
                })
                .collect::<Vec<_>>()
                .join("<br>")
                .replace('|', "\\|")
        };
        let _ = writeln!(
            out,
            "| `{}` ({}) | {} | {} | {note} |",
            q.id,
            q.source,
            cell(&r.upstream),
            cell(&r.rkcm)
        );
    }
    let empty = BTreeSet::new();
    let _ = writeln!(out, "\n`{DETAIL_4XX}` during the runs:\n");
    for (who, seen) in [("upstream", upstream), ("rkcm", rkcm)] {
        let series: Vec<String> = seen
            .get(DETAIL_4XX)
            .unwrap_or(&empty)
            .iter()
            .cloned()
            .collect();
        let _ = writeln!(out, "- {who}: {}", cell(&series).replace("<br>", ", "));
    }
    out
}

/// A Deployment of two pods and a Job of one, named after `tag`; returns once their pods
/// exist (they never run: no node matches).
async fn workload(env: &Env, tag: &str) -> anyhow::Result<()> {
    let pod = json!({
        "nodeSelector": {NO_NODE: "true"},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
    });
    let web = format!("{tag}-web");
    env.create::<Deployment>(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": web},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": web}},
            "template": {"metadata": {"labels": {"app": web}}, "spec": pod},
        },
    }))
    .await?;
    let job = format!("{tag}-job");
    let mut job_pod = pod.clone();
    job_pod["restartPolicy"] = json!("Never");
    env.create::<Job>(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job},
        "spec": {"template": {"spec": job_pod}},
    }))
    .await?;
    env.wait::<Deployment>(&web, "its two pods", |d| {
        d.status.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    env.wait::<Job>(&job, "its pod", |j| {
        j.status.as_ref().and_then(|s| s.active) == Some(1)
    })
    .await?;
    Ok(())
}

/// Runs `kind` serving `/metrics` on a port of its own, scraped by a Prometheus of its own,
/// with the workload; what every query returned during [`OBSERVE`] and once the manager is
/// stopped (its target down).
async fn observe(env: &Env, kind: ManagerKind, token: &str, data: &Data) -> anyhow::Result<Seen> {
    let port = free_port()?;
    let certs = std::env::temp_dir().join(unique_name("rkcm-kp-certs"));
    std::fs::create_dir_all(&certs).with_context(|| format!("creating {}", certs.display()))?;
    let kubeconfig = env.cluster.kubeconfig_path().display().to_string();
    let extra = [
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--cert-dir={}", certs.display()),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
    ];
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let mut manager = Manager::start_with(kind, &env.cluster, env.name(), CONTROLLERS, &extra)
        .await
        .with_context(|| format!("starting {}", kind.name()))?;
    let result = async {
        let target = Target {
            port,
            token: token.to_owned(),
        };
        let prom = Prometheus::start(JOB, &[target], "groups: []\n", EVERY).await?;
        prom.wait_up(1, STARTUP)
            .await
            .with_context(|| format!("Prometheus scraping {}", kind.name()))?;
        let tag = if kind == ManagerKind::Upstream {
            "up"
        } else {
            "rk"
        };
        workload(env, tag).await?;
        let mut seen = Seen::new();
        let until = Instant::now() + OBSERVE;
        while Instant::now() < until {
            evaluate(&prom, data, &mut seen, kind.name()).await?;
            manager.check_running()?;
            // A sampling interval, not a wait for a condition: the union over the period is
            // the result.
            tokio::time::sleep(EVERY).await;
        }
        Ok((seen, prom))
    }
    .await;
    let result = Manager::with_logs(result, &mut [&mut manager]);
    let stopped = manager.stop_scoped().await;
    let _ = std::fs::remove_dir_all(&certs);
    let (mut seen, prom) = result?;
    stopped?;
    // Stopped, but still a target: the instance-unreachable alert's expression must see it.
    let down = concrete(&format!("up{{job=\"{JOB}\"}} == 0"));
    wait_for(&format!("{} seen down", kind.name()), STARTUP, || async {
        Ok((!prom.query(&down).await?.is_empty()).then_some(()))
    })
    .await?;
    evaluate(&prom, data, &mut seen, &format!("{} stopped", kind.name())).await?;
    Ok(seen)
}

/// Evaluates every query once, adding the series each returns to `seen`.
async fn evaluate(
    prom: &Prometheus,
    data: &Data,
    seen: &mut Seen,
    when: &str,
) -> anyhow::Result<()> {
    for q in &data.queries {
        let samples = prom
            .query(&concrete(&q.expr))
            .await
            .with_context(|| format!("{when}: query {}", q.id))?;
        let keys = seen.entry(q.id.clone()).or_default();
        keys.extend(samples.iter().map(|s| series_key(&s.labels)));
    }
    let detail = prom.query(DETAIL_4XX).await?;
    let keys = seen.entry(DETAIL_4XX.to_owned()).or_default();
    keys.extend(detail.iter().map(|s| series_key(&s.labels)));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn kube_prometheus_queries_match_upstream() -> anyhow::Result<()> {
    let env = Env::new("rkcm-kp").await?;
    let client = env.cluster.client();
    let result = ClusterRbac::around(&client, async |rbac| scenario(&env, rbac).await).await;
    env.finish(result).await
}

async fn scenario(env: &Env, rbac: &mut ClusterRbac) -> anyhow::Result<()> {
    let data = load()?;
    wait_default_service_account(&env.ns).await?;
    let token = scrape_token(env, rbac).await?;
    let upstream = observe(env, ManagerKind::Upstream, &token, &data).await?;
    let rkcm = observe(env, ManagerKind::Rkcm, &token, &data).await?;
    let rows = compare(&data, &upstream, &rkcm);
    // `make test` leaves the tree as it found it: the committed table is rewritten only when
    // asked for (RKCM_KUBE_PROMETHEUS_REPORT=bench/reports/kube-prometheus.md).
    let path = std::env::var_os("RKCM_KUBE_PROMETHEUS_REPORT").map_or_else(
        || std::env::temp_dir().join(unique_name("kube-prometheus") + ".md"),
        PathBuf::from,
    );
    eprintln!("kube-prometheus comparison: {}", path.display());
    std::fs::write(&path, report(&data, &rows, &upstream, &rkcm))
        .with_context(|| format!("writing {}", path.display()))?;
    let (missing, stale) = unexplained(&data, &rows);
    ensure!(
        missing.is_empty(),
        "differences not explained in {}: {missing:#?}",
        data_file().display()
    );
    ensure!(
        stale.is_empty(),
        "explanations matching no difference: {stale:#?}"
    );
    Ok(())
}

/// Without a cluster: the data file parses, its explanations name known queries and a side,
/// and each query parses once its variables are substituted.
#[test]
fn data_file_is_consistent() -> anyhow::Result<()> {
    let data = load()?;
    let ids: BTreeSet<&str> = data.queries.iter().map(|q| q.id.as_str()).collect();
    ensure!(ids.len() == data.queries.len(), "duplicate query ids");
    for d in &data.differences {
        ensure!(ids.contains(d.query.as_str()), "unknown query {}", d.query);
        ensure!(
            ["upstream", "rkcm"].contains(&d.only.as_str()),
            "only: {}",
            d.only
        );
        ensure!(!d.why.trim().is_empty(), "{}: no reason", d.query);
    }
    for q in &data.queries {
        let e = concrete(&q.expr);
        ensure!(!e.contains('$'), "{}: a variable left in {e}", q.id);
    }
    Ok(())
}

#[test]
fn differences_are_explained_or_reported() {
    let data = Data {
        queries: vec![Query {
            id: "q".into(),
            source: "panel".into(),
            expr: "x".into(),
        }],
        differences: vec![
            Difference {
                query: "q".into(),
                series: "{name=\"a\"}".into(),
                only: "upstream".into(),
                why: "by design".into(),
                sometimes: false,
            },
            Difference {
                query: "q".into(),
                series: "{name=\"t\"}".into(),
                only: "rkcm".into(),
                why: "timing".into(),
                sometimes: true,
            },
        ],
    };
    let set = |v: &[&str]| -> Seen {
        BTreeMap::from([("q".to_owned(), v.iter().map(|s| (*s).to_owned()).collect())])
    };
    // (case, upstream's series, rkcm's, unexplained differences, stale explanations)
    type Case = (&'static str, Seen, Seen, Vec<String>, Vec<String>);
    let cases: [Case; 5] = [
        (
            "explained",
            set(&["{name=\"a\"}", "{}"]),
            set(&["{}"]),
            vec![],
            vec![],
        ),
        (
            "unexplained upstream-only",
            set(&["{name=\"a\"}", "{name=\"b\"}"]),
            set(&[]),
            vec!["q: {name=\"b\"} only from upstream".into()],
            vec![],
        ),
        (
            "rkcm-only and a stale explanation",
            set(&[]),
            set(&["{name=\"c\"}"]),
            vec!["q: {name=\"c\"} only from rkcm".into()],
            vec!["q: {name=\"a\"} only from upstream".into()],
        ),
        (
            "a difference that depends on timing, explained",
            set(&["{name=\"a\"}"]),
            set(&["{name=\"t\"}"]),
            vec![],
            vec![],
        ),
        (
            "same series",
            set(&["{}"]),
            set(&["{}"]),
            vec![],
            vec!["q: {name=\"a\"} only from upstream".into()],
        ),
    ];
    for (name, up, rk, missing, stale) in cases {
        let rows = compare(&data, &up, &rk);
        assert_eq!(unexplained(&data, &rows), (missing, stale), "{name}");
    }
}

#[test]
fn series_keys_drop_the_target_labels() {
    let labels =
        json!({"job": "j", "instance": "i", "name": "deployment", "cluster": "", "le": "1"});
    let labels = labels.as_object().cloned().unwrap_or_default();
    assert_eq!(series_key(&labels), "{le=\"1\",name=\"deployment\"}");
    assert_eq!(series_key(&serde_json::Map::new()), "{}");
}
