//! The chart's Grafana dashboard (`charts/rkcm/dashboards/rkcm.json`) and alerts
//! (`charts/rkcm/rules/rkcm.rules.yaml`, the PrometheusRule's one source) against a real
//! Prometheus (the distribution's package, `e2e/prometheus.sh`) that scrapes rkcm over HTTPS
//! with a ServiceAccount token RBAC allows to `get /metrics`, as the chart's ServiceMonitor has
//! the Prometheus Operator do.
//!
//! One run on the local plane, with the chart's rules rendered with short test values (every
//! `for` 2 s, rate windows 20 s, thresholds a test can reach): a healthy rollout during which
//! no alert fires; a stuck rollout (pods never available) that fires
//! `RkcmObjectsWaitingTooLong` and clears once the pods are ready; an admission policy refusing
//! pod creates that fires `RkcmSyncsFailing` (and shows as `AdmissionDenied` waits) and clears
//! when removed; the leader killed, which fires `RkcmNoLeader` until a second replica leads; a
//! burst of ReplicaSets under a small client QPS, which fires `RkcmWorkQueueBackingUp` until
//! the queue drains. Every dashboard expression must parse and return series at some point of
//! the run, and every rule expression parses. `promtool test rules` runs the rules' unit tests.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use rkcm_testkit::harness::{DenyPolicy, Env};
use rkcm_testkit::prometheus::{Prometheus, Target, promtool};
use rkcm_testkit::scrape::free_port;
use rkcm_testkit::{unique_name, wait_for};
use serde_json::{Value, json};

use crate::packaging::{helm_or_skip, render};
use crate::rollout::wait_default_service_account;
use crate::secure_serving::{ClusterRbac, service_account_token, wait_allowed};
use crate::serve::{Rkcm, election_args};

/// Scrape and rule evaluation interval of the test's Prometheus.
const EVERY: Duration = Duration::from_secs(1);
/// The rate window of the rules and of the dashboard's `$__rate_interval` in this test.
const WINDOW: &str = "20s";
/// How long an alert may take to fire or clear once its cause is there or gone.
const ALERT: Duration = Duration::from_secs(90);
/// The scrape job of the test's Prometheus (the dashboard's `$job`).
const JOB: &str = "rkcm";
/// Pods of this test land on no node: only the test makes them Ready.
const NO_NODE: &str = "rkcm.test/no-such-node";

/// The chart values of the test: alerts that fire within seconds of their cause.
fn test_values(lease: &str) -> Vec<String> {
    let mut v = vec![
        "dashboard.enabled=true".to_owned(),
        "prometheusRule.enabled=true".to_owned(),
        format!("prometheusRule.rateWindow={WINDOW}"),
        format!("leaderElection.resourceName={lease}"),
        "prometheusRule.alerts.RkcmWorkQueueBackingUp.threshold=5".to_owned(),
        "prometheusRule.alerts.RkcmObjectsWaitingTooLong.threshold=15".to_owned(),
    ];
    for alert in ALERTS {
        v.push(format!("prometheusRule.alerts.{alert}.for=2s"));
    }
    v
}

const ALERTS: [&str; 4] = [
    "RkcmNoLeader",
    "RkcmSyncsFailing",
    "RkcmWorkQueueBackingUp",
    "RkcmObjectsWaitingTooLong",
];

/// The chart's rules and dashboard as `helm template` renders them with `sets`.
struct Rendered {
    /// A Prometheus rule file: the PrometheusRule's `spec`.
    rules: String,
    /// (alert, expression) of every rule.
    rule_exprs: Vec<(String, String)>,
    /// Every target expression of the dashboard, as written (with `$job`, `$__rate_interval`).
    dashboard: Vec<String>,
}

fn render_chart(sets: &[String]) -> anyhow::Result<Option<Rendered>> {
    let Some(helm) = helm_or_skip("the dashboard and rules test")? else {
        return Ok(None);
    };
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let docs = render(&helm, "rkcm", "rkcm", &sets)?;
    let rule = docs.one("PrometheusRule")?;
    let spec = rule.get("spec").context("PrometheusRule without spec")?;
    let rules = serde_yaml::to_string(spec)?;
    let groups: Value = serde_yaml::from_value(spec.clone())?;
    let rule_exprs = groups["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("");
            (name.to_owned(), r["expr"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    let cm = docs.one("ConfigMap")?;
    let json = cm
        .get("data")
        .and_then(|d| d.get("rkcm.json"))
        .and_then(serde_yaml::Value::as_str)
        .context("dashboard ConfigMap without data.rkcm.json")?;
    let dashboard = dashboard_exprs(&serde_json::from_str(json)?);
    Ok(Some(Rendered {
        rules,
        rule_exprs,
        dashboard,
    }))
}

/// Every `targets[].expr` of every panel, rows' nested panels included.
fn dashboard_exprs(d: &Value) -> Vec<String> {
    fn walk(panels: &Value, out: &mut Vec<String>) {
        for p in panels.as_array().into_iter().flatten() {
            walk(&p["panels"], out);
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push(e.to_owned());
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    out
}

/// A dashboard expression as Grafana sends it for job [`JOB`] and a [`WINDOW`] rate interval.
fn concrete(expr: &str) -> String {
    expr.replace("$__rate_interval", WINDOW)
        .replace("$job", JOB)
}

fn chart_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Without a cluster: the default PrometheusRule is the rule file itself, and the dashboard
/// has the panels the issue asks for, every selector scoped to `$job`.
#[test]
fn chart_rules_are_the_rule_file_and_the_dashboard_is_complete() -> anyhow::Result<()> {
    let Some(r) = render_chart(&[
        "prometheusRule.enabled=true".into(),
        "dashboard.enabled=true".into(),
    ])?
    else {
        return Ok(());
    };
    let file: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(chart_file(
        "charts/rkcm/rules/rkcm.rules.yaml",
    ))?)?;
    let rendered: serde_yaml::Value = serde_yaml::from_str(&r.rules)?;
    ensure!(
        file == rendered,
        "PrometheusRule with default values differs from the rule file:\n{}",
        r.rules
    );
    let names: Vec<&str> = r.rule_exprs.iter().map(|(n, _)| n.as_str()).collect();
    ensure!(names == ALERTS, "alerts {names:?}");
    for metric in [
        "rkcm_syncs_total",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "workqueue_work_duration_seconds_bucket",
        "rest_client_requests_total",
        "rest_client_rate_limiter_duration_seconds_bucket",
        "leader_election_master_status",
        "rkcm_leader_election_renewals_total",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "rkcm_objects_waiting",
        "rkcm_objects_waiting_oldest_seconds",
    ] {
        ensure!(
            r.dashboard
                .iter()
                .any(|e| e.contains(&format!("{metric}{{"))),
            "no dashboard panel reads {metric}"
        );
    }
    for e in &r.dashboard {
        let selectors = e.matches('{').count();
        ensure!(
            e.matches("job=~\"$job\"").count() == selectors,
            "a selector of {e} is not scoped to $job"
        );
    }
    Ok(())
}

#[test]
#[ignore = "needs the prometheus package (installed by e2e/prometheus.sh): make test"]
fn promtool_unit_tests_of_the_rules_pass() -> anyhow::Result<()> {
    let rules = chart_file("charts/rkcm/rules/rkcm.rules.yaml");
    let tests = chart_file("charts/rkcm/rules/rkcm.rules_test.yaml");
    let out = promtool(&["check", "rules", &rules.display().to_string()])?;
    ensure!(out.contains("SUCCESS: 4 rules found"), "{out}");
    let out = promtool(&["test", "rules", &tests.display().to_string()])?;
    ensure!(out.contains("SUCCESS"), "{out}");
    Ok(())
}

/// The run: one Prometheus, the test's rkcm replicas as its targets, the dashboard
/// expressions seen returning series so far.
struct Run<'a> {
    env: &'a Env,
    prom: Prometheus,
    exprs: Vec<String>,
    seen: BTreeSet<String>,
}

impl Run<'_> {
    /// Evaluates every dashboard expression (each must parse) and notes which return series.
    async fn check_exprs(&mut self, when: &str) -> anyhow::Result<()> {
        for e in &self.exprs {
            let samples = self
                .prom
                .query(e)
                .await
                .with_context(|| format!("{when}: dashboard expression {e}"))?;
            if !samples.is_empty() {
                self.seen.insert(e.clone());
            }
        }
        Ok(())
    }

    /// Alerts that fired at any time in the last `since`.
    async fn fired_since(&self, since: Instant) -> anyhow::Result<Vec<String>> {
        let secs = since.elapsed().as_secs().max(1);
        let q =
            format!("max by (alertname) (max_over_time(ALERTS{{alertstate=\"firing\"}}[{secs}s]))");
        Ok(self
            .prom
            .query(&q)
            .await?
            .iter()
            .map(|s| s.label("alertname").to_owned())
            .collect())
    }

    /// Waits until `alert` fires with `labels` among its labels and evaluates the dashboard
    /// while it does; returns the alert's labels.
    async fn fires(
        &mut self,
        alert: &str,
        labels: &[(&str, &str)],
    ) -> anyhow::Result<serde_json::Map<String, Value>> {
        let got = self.prom.wait_firing(alert, labels, ALERT).await?;
        self.check_exprs(&format!("while {alert} fires")).await?;
        Ok(got)
    }

    /// Waits until query `expr` returns exactly one sample, equal to `want`.
    async fn wait_value(&self, expr: &str, want: f64) -> anyhow::Result<()> {
        wait_for(&format!("{expr} = {want}"), ALERT, || async {
            let got = self.prom.query(expr).await?;
            Ok((got.len() == 1 && (got[0].value - want).abs() < 1e-9).then_some(()))
        })
        .await
    }
}

fn deployment(name: &str, replicas: i32, progress_deadline: i32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "progressDeadlineSeconds": progress_deadline,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {NO_NODE: "true"},
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    })
}

/// A ReplicaSet of `replicas` pods labelled `app: <name>` and `extra`.
fn replica_set(name: &str, replicas: i32, extra: &[(&str, &str)]) -> Value {
    let mut labels = json!({"app": name});
    for (k, v) in extra {
        labels[*k] = json!(v);
    }
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {NO_NODE: "true"},
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    })
}

/// The ReplicaSet of Deployment `name` (its first one), once the controller made it.
async fn replica_set_of(env: &Env, name: &str) -> anyhow::Result<ReplicaSet> {
    wait_for(&format!("a ReplicaSet of {name}"), ALERT, || async {
        let all: Vec<ReplicaSet> = env.list().await?;
        Ok(all.into_iter().find(|rs| {
            rs.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "Deployment" && o.name == name)
        }))
    })
    .await
}

/// Makes the `n` pods of Deployment `name` Ready and waits until it is available.
async fn roll_out(env: &Env, name: &str, n: usize) -> anyhow::Result<()> {
    let rs = replica_set_of(env, name).await?;
    env.make_ready(rs.metadata.uid.as_deref().unwrap_or(""), n)
        .await?;
    let want = i32::try_from(n)?;
    env.wait::<Deployment>(name, "available", |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.available_replicas == Some(want) && s.updated_replicas == Some(want))
    })
    .await?;
    Ok(())
}

/// A ServiceAccount token RBAC allows to `get /metrics`, as kube-prometheus grants its
/// Prometheus (the chart's ServiceMonitor sends Prometheus's own token).
pub(crate) async fn scrape_token(env: &Env, rbac: &mut ClusterRbac) -> anyhow::Result<String> {
    let client = env.cluster.client();
    let token = service_account_token(&client, env.name(), "prometheus").await?;
    let role = unique_name("rkcm-prom-metrics");
    let rule = json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]);
    rbac.role(&client, &role, rule).await?;
    let subject =
        json!([{"kind": "ServiceAccount", "name": "prometheus", "namespace": env.name()}]);
    rbac.binding(&client, &role, &role, subject).await?;
    let user = format!("system:serviceaccount:{}:prometheus", env.name());
    let groups = ["system:serviceaccounts", "system:authenticated"];
    wait_allowed(&client, &user, &groups, "/metrics").await?;
    Ok(token)
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn dashboard_and_alerts_against_a_real_prometheus() -> anyhow::Result<()> {
    let env = Env::new("rkcm-prom").await?;
    let client = env.cluster.client();
    let result = ClusterRbac::around(&client, async |rbac| scenario(&env, rbac).await).await;
    env.finish(result).await
}

async fn scenario(env: &Env, rbac: &mut ClusterRbac) -> anyhow::Result<()> {
    wait_default_service_account(&env.ns).await?;
    let lease = unique_name("rkcm-prom");
    let rendered = render_chart(&test_values(&lease))?.context("helm is needed")?;
    let token = scrape_token(env, rbac).await?;
    let controllers = "deployment-controller,replicaset-controller";
    let mut args = election_args(env.name(), &lease, Some(controllers));
    let kubeconfig = env.cluster.kubeconfig_path().display().to_string();
    args.push(format!("--authentication-kubeconfig={kubeconfig}"));
    args.push(format!("--authorization-kubeconfig={kubeconfig}"));
    let a = Rkcm::spawn_scoped("prom-a", &env.cluster, env.name(), &args).await?;
    a.wait_serving().await?;
    // The second replica's port, scraped (and down) from the start.
    let b_port = free_port()?;
    let targets = [a.port, b_port].map(|port| Target {
        port,
        token: token.clone(),
    });
    let prom = Prometheus::start(JOB, &targets, &rendered.rules, EVERY).await?;
    for (alert, e) in &rendered.rule_exprs {
        prom.query(e)
            .await
            .with_context(|| format!("the expression of {alert}"))?;
    }
    prom.wait_up(1, ALERT).await?;
    // Before the first scrape nothing leads as far as Prometheus knows: RkcmNoLeader may be
    // pending or firing for a moment after the start.
    let leading = format!("leader_election_master_status{{name=\"{lease}\"}} == 1");
    wait_for("Prometheus to see the leader", ALERT, || async {
        Ok((!prom.query(&leading).await?.is_empty()).then_some(()))
    })
    .await?;
    prom.wait_cleared("RkcmNoLeader", ALERT).await?;
    let exprs = rendered.dashboard.iter().map(|e| concrete(e)).collect();
    let mut run = Run {
        env,
        prom,
        exprs,
        seen: BTreeSet::new(),
    };
    healthy(&mut run).await?;
    stuck_rollout(&mut run).await?;
    refused_creates(&mut run).await?;
    let b_args = [
        args.clone(),
        vec![
            format!("--secure-port={b_port}"),
            "--kube-api-qps=2".to_owned(),
            "--kube-api-burst=2".to_owned(),
        ],
    ]
    .concat();
    let _b = leader_killed(&mut run, a, &b_args).await?;
    queue_backing_up(&mut run).await?;
    let missing: Vec<&String> = run
        .exprs
        .iter()
        .filter(|e| !run.seen.contains(*e))
        .collect();
    ensure!(
        missing.is_empty(),
        "dashboard expressions that never returned a series: {missing:#?}"
    );
    Ok(())
}

/// A rollout that completes: no alert fires, during it or for a while after.
async fn healthy(run: &mut Run<'_>) -> anyhow::Result<()> {
    let start = Instant::now();
    run.env
        .create::<Deployment>(deployment("web", 2, 600))
        .await?;
    roll_out(run.env, "web", 2).await?;
    // Longer than the rate window, so an alert whose cause a healthy run has would fire.
    let quiet = Duration::from_secs(25);
    rkcm_testkit::holds_for("no alert firing in a healthy run", quiet, || async {
        Ok(run.prom.firing().await?.is_empty())
    })
    .await?;
    run.check_exprs("after a healthy rollout").await?;
    let fired = run.fired_since(start).await?;
    ensure!(fired.is_empty(), "alerts fired in a healthy run: {fired:?}");
    Ok(())
}

/// A Deployment whose pod never becomes available: its wait shows by reason and age, fires
/// RkcmObjectsWaitingTooLong, and ends (series gone, alert cleared) once the pod is Ready.
async fn stuck_rollout(run: &mut Run<'_>) -> anyhow::Result<()> {
    run.env
        .create::<Deployment>(deployment("stuck", 1, 5))
        .await?;
    let deployments = [("controller", "deployment-controller")];
    let got = run.fires("RkcmObjectsWaitingTooLong", &deployments).await?;
    let reason = got.get("reason").and_then(Value::as_str).unwrap_or("");
    ensure!(
        ["NewPodsUnavailable", "ProgressDeadlineExceeded"].contains(&reason),
        "the stuck rollout waits on {reason}"
    );
    let labels = format!("controller=\"deployment-controller\",reason=\"{reason}\"");
    run.wait_value(&format!("rkcm_objects_waiting{{{labels}}}"), 1.0)
        .await?;
    let oldest = run
        .prom
        .query(&format!(
            "rkcm_objects_waiting_oldest_seconds{{{labels}}} >= 15"
        ))
        .await?;
    ensure!(
        oldest.len() == 1,
        "the oldest wait is not past the threshold: {oldest:?}"
    );
    roll_out(run.env, "stuck", 1).await?;
    run.prom
        .wait_cleared("RkcmObjectsWaitingTooLong", ALERT)
        .await?;
    run.wait_value("count(rkcm_objects_waiting) or vector(0)", 0.0)
        .await
}

/// Pods carrying this label are refused by the admission policy of [`refused_creates`].
const REFUSED: &str = "rkcm.test/refused";

/// An admission policy refusing the pods of five ReplicaSets: their syncs fail, which fires
/// RkcmSyncsFailing and shows as AdmissionDenied waits; without the policy the alert clears.
async fn refused_creates(run: &mut Run<'_>) -> anyhow::Result<()> {
    let rule = json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]});
    let expression =
        format!("!has(object.metadata.labels) || !('{REFUSED}' in object.metadata.labels)");
    let policy = DenyPolicy::install(
        run.env,
        "rkcm-prom-deny",
        rule,
        &expression,
        "refused by the test",
    )
    .await?;
    let result = async {
        wait_refusing(run.env).await?;
        for i in 0..5 {
            let rs = replica_set(&format!("refused-{i}"), 2, &[(REFUSED, "yes")]);
            run.env.create::<ReplicaSet>(rs).await?;
        }
        let replica_sets = [("controller", "replicaset-controller")];
        run.fires("RkcmSyncsFailing", &replica_sets).await?;
        let denied =
            "rkcm_objects_waiting{controller=\"replicaset-controller\",reason=\"AdmissionDenied\"}";
        run.wait_value(denied, 5.0).await
    }
    .await;
    let removed = policy.remove().await;
    result?;
    removed?;
    run.prom.wait_cleared("RkcmSyncsFailing", ALERT).await
}

/// Waits until the policy refuses a labelled pod (the API server applies it a moment late).
async fn wait_refusing(env: &Env) -> anyhow::Result<()> {
    let name = "refusal-probe";
    wait_for("the admission policy to refuse", ALERT, || async {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {REFUSED: "yes"}},
            "spec": {
                "nodeSelector": {NO_NODE: "true"},
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        });
        match env.create::<k8s_openapi::api::core::v1::Pod>(pod).await {
            Ok(_) => {
                env.pods()
                    .delete(name, &kube::api::DeleteParams::background().grace_period(0))
                    .await?;
                env.wait_gone(name, ALERT).await?;
                Ok(None)
            }
            Err(e) if format!("{e:#}").contains("refused by the test") => Ok(Some(())),
            Err(e) => Err(e),
        }
    })
    .await
}

/// The leader killed: RkcmNoLeader fires, and clears once a second replica (`b_args`, its
/// client throttled for [`queue_backing_up`]) leads.
async fn leader_killed(run: &mut Run<'_>, mut a: Rkcm, b_args: &[String]) -> anyhow::Result<Rkcm> {
    a.signal(9)?;
    a.wait_exit(Duration::from_secs(10)).await?;
    run.fires("RkcmNoLeader", &[]).await?;
    let b = Rkcm::spawn_scoped("prom-b", &run.env.cluster, run.env.name(), b_args).await?;
    // Its own port is in its flags (the Rkcm handle knows none): a is gone, so an `up`
    // target is b.
    run.prom.wait_up(1, ALERT).await?;
    run.prom.wait_cleared("RkcmNoLeader", ALERT).await?;
    Ok(b)
}

/// Thirty ReplicaSets at once for a replica whose client makes 2 requests a second: the
/// ReplicaSet queue backs up and fires RkcmWorkQueueBackingUp, which clears as it drains.
async fn queue_backing_up(run: &mut Run<'_>) -> anyhow::Result<()> {
    for i in 0..30 {
        run.env
            .create::<ReplicaSet>(replica_set(&format!("burst-{i}"), 1, &[]))
            .await?;
    }
    run.fires("RkcmWorkQueueBackingUp", &[("name", "replicaset")])
        .await?;
    run.prom
        .wait_cleared("RkcmWorkQueueBackingUp", ALERT)
        .await?;
    // The pods of these ReplicaSets (and of the refused ones) never become Ready, so they
    // rightly wait on PodsUnavailable past the test's 15 s threshold by now.
    let fired = run.prom.firing().await?;
    ensure!(
        fired.iter().all(|a| a == "RkcmObjectsWaitingTooLong"),
        "alerts still firing at the end: {fired:?}"
    );
    Ok(())
}
