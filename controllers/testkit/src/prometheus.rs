//! A real Prometheus for tests of rkcm's dashboard and alerts: the distribution's `prometheus`
//! package (installed by `e2e/prometheus.sh`), started with a config in a temporary directory
//! that scrapes rkcm's `/metrics` the way the chart's ServiceMonitor has the Prometheus
//! Operator do it (HTTPS, the serving certificate not verified, a ServiceAccount's bearer token
//! from a file), evaluates a rule file, and answers queries over its HTTP API.
//!
//! [`promtool`] runs the package's `promtool` (rule checks and `promtool test rules`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::scrape::free_port;
use crate::{unique_name, wait_for};

/// How long Prometheus may take to start and answer `/-/ready`.
pub const STARTUP: Duration = Duration::from_secs(60);

/// The directory holding `prometheus` and `promtool`, installing the package first if needed
/// (`e2e/prometheus.sh`, idempotent). Once per process: the tests of one binary run at the same
/// time, and two `apt-get install`s at once would fail on dpkg's lock on a fresh machine.
pub fn binary_dir() -> anyhow::Result<PathBuf> {
    static DIR: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);
    let mut dir = DIR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(d) = dir.as_ref() {
        return Ok(d.clone());
    }
    let found = install()?;
    *dir = Some(found.clone());
    Ok(found)
}

fn install() -> anyhow::Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/prometheus.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed: {}", script.display(), out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout
        .lines()
        .last()
        .context("e2e/prometheus.sh printed no directory")?;
    Ok(PathBuf::from(dir.trim()))
}

/// Runs `promtool` with `args`; its combined output, or an error with it when it fails.
pub fn promtool(args: &[&str]) -> anyhow::Result<String> {
    let bin = binary_dir()?.join("promtool");
    let out = Command::new(&bin)
        .args(args)
        .output()
        .with_context(|| format!("running {} {args:?}", bin.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        bail!("promtool {args:?} failed ({}):\n{text}", out.status);
    }
    Ok(text)
}

/// One rkcm process to scrape: `https://127.0.0.1:<port>/metrics` with `token`.
#[derive(Debug, Clone)]
pub struct Target {
    pub port: u16,
    /// A bearer token RBAC allows to `get` the non-resource URL `/metrics`.
    pub token: String,
}

/// One sample of an instant query: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: serde_json::Map<String, Value>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).and_then(Value::as_str).unwrap_or("")
    }
}

/// One alert as `/api/v1/alerts` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    pub name: String,
    /// `pending` or `firing`.
    pub state: String,
    pub labels: serde_json::Map<String, Value>,
}

/// A running Prometheus; stopped (and its directory removed) when dropped.
#[derive(Debug)]
pub struct Prometheus {
    child: Child,
    pub port: u16,
    dir: PathBuf,
    /// The scrape job of the targets.
    pub job: String,
}

/// The configuration: every target in one job, scraped and evaluated every `every`.
fn config(job: &str, targets: &[(u16, PathBuf)], every: Duration, rules: &Path) -> String {
    let secs = every.as_secs_f64();
    let mut text = format!(
        "global:\n  scrape_interval: {secs}s\n  scrape_timeout: {secs}s\n  evaluation_interval: {secs}s\n\
         rule_files:\n  - {rules}\nscrape_configs:\n",
        rules = rules.display()
    );
    for (i, (port, token_file)) in targets.iter().enumerate() {
        // One scrape config per target, as each has its own token file; one job label.
        text.push_str(&format!(
            "  - job_name: {job}-{i}\n    scheme: https\n    metrics_path: /metrics\n\
             \x20   authorization:\n      type: Bearer\n      credentials_file: {token}\n\
             \x20   tls_config:\n      insecure_skip_verify: true\n\
             \x20   relabel_configs:\n      - target_label: job\n        replacement: {job}\n\
             \x20   static_configs:\n      - targets: ['127.0.0.1:{port}']\n",
            token = token_file.display()
        ));
    }
    text
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` as job `job` and evaluating `rules` (the text of a
    /// rule file), scraping and evaluating every `every`; returns once it is ready.
    pub async fn start(
        job: &str,
        targets: &[Target],
        rules: &str,
        every: Duration,
    ) -> anyhow::Result<Self> {
        let bin = binary_dir()?.join("prometheus");
        let dir = std::env::temp_dir().join(unique_name("rkcm-prometheus"));
        std::fs::create_dir_all(dir.join("data"))
            .with_context(|| format!("creating {}", dir.display()))?;
        let mut files = Vec::new();
        for (i, t) in targets.iter().enumerate() {
            let file = dir.join(format!("token-{i}"));
            std::fs::write(&file, &t.token)
                .with_context(|| format!("writing {}", file.display()))?;
            files.push((t.port, file));
        }
        let rule_file = dir.join("rules.yaml");
        std::fs::write(&rule_file, rules)
            .with_context(|| format!("writing {}", rule_file.display()))?;
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config(job, &files, every, &rule_file))
            .with_context(|| format!("writing {}", config_file.display()))?;
        let port = free_port()?;
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let child = Command::new(&bin)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let this = Self {
            child,
            port,
            dir,
            job: job.to_owned(),
        };
        wait_for("Prometheus to be ready", STARTUP, || async {
            Ok(this.get("/-/ready").await.ok().filter(|(s, _)| *s == 200))
        })
        .await
        .with_context(|| this.log())?;
        Ok(this)
    }

    /// Its log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// One HTTP/1.0 GET of `path_and_query`: status and body (HTTP/1.0 so the body is plain,
    /// never chunked, and ends with the connection).
    async fn get(&self, path_and_query: &str) -> anyhow::Result<(u16, String)> {
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        let request = format!("GET {path_and_query} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        conn.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        conn.read_to_end(&mut raw).await?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .context("response without a header end")?;
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("no status in {head:?}"))?;
        Ok((status, body.to_owned()))
    }

    /// The `data` of a successful API answer, else an error with Prometheus's message.
    async fn api(&self, path: &str, params: &[(&str, &str)]) -> anyhow::Result<Value> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        let (status, body) = self.get(&format!("{path}?{query}")).await?;
        let answer: Value = serde_json::from_str(&body)
            .with_context(|| format!("{path} answered {status} with no JSON: {body}"))?;
        if answer["status"] != "success" {
            bail!(
                "{path} {params:?}: {status} {}: {}",
                answer["errorType"],
                answer["error"]
            );
        }
        Ok(answer["data"].clone())
    }

    /// An instant query: its samples (an error when the expression does not parse).
    pub async fn query(&self, expr: &str) -> anyhow::Result<Vec<Sample>> {
        let data = self.api("/api/v1/query", &[("query", expr)]).await?;
        let result = data["result"].as_array().cloned().unwrap_or_default();
        result
            .iter()
            .map(|r| {
                let value = r["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .with_context(|| format!("sample without a value: {r}"))?;
                let labels = r["metric"].as_object().cloned().unwrap_or_default();
                Ok(Sample { labels, value })
            })
            .collect()
    }

    /// The alerts now pending or firing.
    pub async fn alerts(&self) -> anyhow::Result<Vec<Alert>> {
        let data = self.api("/api/v1/alerts", &[]).await?;
        let list = data["alerts"].as_array().cloned().unwrap_or_default();
        Ok(list
            .iter()
            .map(|a| {
                let labels = a["labels"].as_object().cloned().unwrap_or_default();
                Alert {
                    name: labels
                        .get("alertname")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    state: a["state"].as_str().unwrap_or("").to_owned(),
                    labels,
                }
            })
            .collect())
    }

    /// The names of the firing alerts.
    pub async fn firing(&self) -> anyhow::Result<Vec<String>> {
        let mut names: Vec<String> = self
            .alerts()
            .await?
            .into_iter()
            .filter(|a| a.state == "firing")
            .map(|a| a.name)
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Waits until every target of the job has been scraped successfully (`up == 1`).
    pub async fn wait_up(&self, targets: usize, timeout: Duration) -> anyhow::Result<()> {
        let expr = format!("up{{job=\"{}\"}} == 1", self.job);
        wait_for(&format!("{targets} targets up"), timeout, || async {
            let up = self.query(&expr).await?;
            Ok((up.len() >= targets).then_some(()))
        })
        .await
    }

    /// Waits until alert `name` is firing with `labels` among its labels; returns all its
    /// labels.
    pub async fn wait_firing(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        timeout: Duration,
    ) -> anyhow::Result<serde_json::Map<String, Value>> {
        let has = |a: &Alert| {
            labels
                .iter()
                .all(|(k, v)| a.labels.get(*k).and_then(Value::as_str) == Some(*v))
        };
        wait_for(
            &format!("alert {name} {labels:?} to fire"),
            timeout,
            || async {
                let alerts = self.alerts().await?;
                Ok(alerts
                    .into_iter()
                    .find(|a| a.name == name && a.state == "firing" && has(a))
                    .map(|a| a.labels))
            },
        )
        .await
    }

    /// Waits until alert `name` is neither firing nor pending.
    pub async fn wait_cleared(&self, name: &str, timeout: Duration) -> anyhow::Result<()> {
        wait_for(&format!("alert {name} to clear"), timeout, || async {
            let alerts = self.alerts().await?;
            Ok((!alerts.iter().any(|a| a.name == name)).then_some(()))
        })
        .await
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "---- Prometheus log ({}) ----\n{}",
                self.dir.display(),
                self.log()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_scrapes_each_target_with_its_token_as_one_job() {
        let text = config(
            "rkcm",
            &[
                (10257, PathBuf::from("/t/token-0")),
                (10258, PathBuf::from("/t/token-1")),
            ],
            Duration::from_secs(1),
            Path::new("/t/rules.yaml"),
        );
        for want in [
            "scrape_interval: 1s",
            "evaluation_interval: 1s",
            "  - /t/rules.yaml",
            "job_name: rkcm-0",
            "job_name: rkcm-1",
            "credentials_file: /t/token-1",
            "insecure_skip_verify: true",
            "replacement: rkcm",
            "targets: ['127.0.0.1:10258']",
            "scheme: https",
        ] {
            assert!(text.contains(want), "{want} in\n{text}");
        }
    }
}
