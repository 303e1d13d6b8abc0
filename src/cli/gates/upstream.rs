//! The gate table of the minor of the kube-controller-manager under test checked against that
//! binary itself, so that no minor's table can drift from its manager: `--help` lists every
//! alpha and beta gate with its default, and its `/metrics` (`kubernetes_feature_enabled`,
//! component-base `featuregate.AddMetrics`) every gate with its stage and default. The binary
//! comes from `RKCM_E2E_BIN` (`eval "$(bash e2e/cluster.sh env)"`; `K8S_VERSION=v1.34` for
//! another minor's plane) and says its version (`--version`); without it these tests fail,
//! they do not skip.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use rkcm_testkit::harness::e2e_bin;
use rkcm_testkit::scrape::{AcceptAnyCert, free_port, https_get};
use rkcm_testkit::wait_for;

use super::{Registry, Stage, registry};

/// `name -> (stage label, default)`, as upstream prints them.
type Gates = BTreeMap<String, (String, bool)>;

/// The table's gates, restricted to `keep` stages, in upstream's spelling.
fn table(registry: &Registry, keep: impl Fn(Stage) -> bool) -> Gates {
    registry
        .gates
        .iter()
        .filter(|g| keep(g.stage))
        .map(|g| (g.name.to_owned(), (g.stage.label().to_owned(), g.default)))
        .collect()
}

/// The minor of `Kubernetes v1.34.4`, `--version`'s answer.
fn parse_version(text: &str) -> Option<u32> {
    let v = text.trim().strip_prefix("Kubernetes v1.")?;
    v.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The registry of the minor of the binary `bin`.
fn registry_of(bin: &std::path::Path) -> anyhow::Result<&'static Registry> {
    let out = std::process::Command::new(bin)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let minor = parse_version(&text)
        .with_context(|| format!("no version in {}'s --version: {text:?}", bin.display()))?;
    registry(minor).with_context(|| format!("{}: v1.{minor} has no gate table", bin.display()))
}

/// The `kube:Name=true|false (STAGE - default=VALUE)` lines of `--help`'s `--feature-gates`.
fn parse_help(help: &str) -> anyhow::Result<Gates> {
    let mut out = Gates::new();
    for line in help.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("kube:") else {
            continue;
        };
        let (name, rest) = rest
            .split_once("=true|false (")
            .with_context(|| format!("gate line {line:?}"))?;
        let (stage, default) = rest
            .trim_end_matches(')')
            .split_once(" - default=")
            .with_context(|| format!("gate line {line:?}"))?;
        out.insert(name.to_owned(), (stage.to_owned(), default == "true"));
    }
    Ok(out)
}

/// The `kubernetes_feature_enabled{name="..",stage=".."} V` samples of a `/metrics` text.
fn parse_metrics(text: &str) -> anyhow::Result<Gates> {
    let mut out = Gates::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("kubernetes_feature_enabled{") else {
            continue;
        };
        let (labels, value) = rest
            .split_once("} ")
            .with_context(|| format!("sample {line:?}"))?;
        let label = |key: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .map(|v| v.trim_matches('"').to_owned())
        };
        let name = label("name").with_context(|| format!("no name in {line:?}"))?;
        let stage = label("stage").unwrap_or_default();
        out.insert(name, (stage, value.trim() == "1"));
    }
    Ok(out)
}

/// Lines naming each gate that differs between `ours` and `theirs`.
fn differences(ours: &Gates, theirs: &Gates) -> Vec<String> {
    let mut out = Vec::new();
    for (name, want) in theirs {
        match ours.get(name) {
            None => out.push(format!("{name}: upstream has {want:?}, the table lacks it")),
            Some(have) if have != want => {
                out.push(format!("{name}: upstream {want:?}, the table {have:?}"));
            }
            Some(_) => {}
        }
    }
    for name in ours.keys().filter(|n| !theirs.contains_key(*n)) {
        out.push(format!("{name}: in the table, unknown upstream"));
    }
    out
}

#[test]
fn parsers_read_upstreams_lines() {
    let help = "  --feature-gates x  Options are:\n      \
                kube:AtomicFIFO=true|false (BETA - default=true)\n      \
                kube:AllAlpha=true|false (ALPHA - default=false)\n  --flagz-other y\n";
    let parsed = parse_help(help).expect("parses");
    assert_eq!(parsed.len(), 2);
    assert_eq!(parsed["AtomicFIFO"], ("BETA".to_owned(), true));
    let metrics = "# TYPE kubernetes_feature_enabled gauge\n\
                   kubernetes_feature_enabled{name=\"JobManagedBy\",stage=\"\"} 1\n\
                   kubernetes_feature_enabled{name=\"AllAlpha\",stage=\"ALPHA\"} 0\n";
    let parsed = parse_metrics(metrics).expect("parses");
    assert_eq!(parsed["JobManagedBy"], (String::new(), true));
    assert_eq!(parsed["AllAlpha"], ("ALPHA".to_owned(), false));
    let mut theirs = parsed.clone();
    theirs.insert("NewGate".to_owned(), ("ALPHA".to_owned(), false));
    theirs.insert("AllAlpha".to_owned(), ("BETA".to_owned(), false));
    let diff = differences(&parsed, &theirs);
    assert_eq!(diff.len(), 2, "{diff:?}");
    assert_eq!(parse_version("Kubernetes v1.34.4\n"), Some(34));
    assert_eq!(parse_version("Kubernetes v1.37.1-rc.0"), Some(37));
    assert_eq!(parse_version("v1.37.1"), None);
}

#[test]
#[ignore = "needs the pinned kube-controller-manager (RKCM_E2E_BIN): make test"]
fn table_matches_upstream_help() -> anyhow::Result<()> {
    let bin = e2e_bin("kube-controller-manager")?;
    let registry = registry_of(&bin)?;
    let out = std::process::Command::new(&bin)
        .arg("--help")
        .output()
        .with_context(|| format!("running {} --help", bin.display()))?;
    let help = String::from_utf8_lossy(&out.stdout);
    let theirs = parse_help(&help)?;
    // `--help` hides GA and deprecated gates (component-base `KnownFeatures`).
    let ours = table(registry, |s| matches!(s, Stage::Alpha | Stage::Beta));
    assert!(
        theirs.len() > 100,
        "too few gates in --help: {}",
        theirs.len()
    );
    let diff = differences(&ours, &theirs);
    assert!(
        diff.is_empty(),
        "the gate table of {} drifted:\n{}",
        registry.version,
        diff.join("\n")
    );
    Ok(())
}

/// Upstream serves `/metrics` before it reaches an API server, so it runs here against an
/// address where none listens: nothing touches the shared plane.
#[tokio::test]
#[ignore = "needs the pinned kube-controller-manager (RKCM_E2E_BIN): make test"]
async fn table_matches_upstream_metrics() -> anyhow::Result<()> {
    let bin = e2e_bin("kube-controller-manager")?;
    let registry = registry_of(&bin)?;
    let dir = std::env::temp_dir().join(rkcm_testkit::unique_name("gates-kcm"));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, UNREACHABLE_KUBECONFIG)?;
    let port = free_port()?;
    let mut child = tokio::process::Command::new(&bin)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--cert-dir={}", dir.display()))
        .arg(format!("--secure-port={port}"))
        .args([
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--controllers=ttl-after-finished-controller",
            "--authorization-always-allow-paths=/metrics",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let scraped = wait_for("upstream's /metrics", Duration::from_secs(60), || {
        let exited = child.try_wait();
        async move {
            if let Some(status) = exited? {
                bail!("kube-controller-manager exited: {status}");
            }
            let r = https_get(port, "/metrics", Arc::new(AcceptAnyCert::new())).await?;
            let gates = parse_metrics(&r.body)?;
            Ok((r.status == 200 && !gates.is_empty()).then_some(gates))
        }
    })
    .await;
    child.kill().await.ok();
    std::fs::remove_dir_all(&dir).ok();
    let theirs = scraped?;
    assert_eq!(
        theirs.len(),
        registry.gates.len(),
        "gate count of {}",
        registry.version
    );
    let diff = differences(&table(registry, |_| true), &theirs);
    assert!(
        diff.is_empty(),
        "the gate table of {} drifted:\n{}",
        registry.version,
        diff.join("\n")
    );
    Ok(())
}

const UNREACHABLE_KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: none
  cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}
users:
- name: none
  user: {token: none}
contexts:
- name: none
  context: {cluster: none, user: none}
current-context: none
";
