//! rkcm against the API server's minor (v1.34 to v1.37): it reads `/version`, exports it
//! (`rkcm_apiserver_version_info`), takes that minor's feature gates, and so writes no status
//! field the server does not keep. Run against each minor's plane by `make skew`
//! (`K8S_VERSION=v1.34 make cluster-up` for one).
//!
//! The write check: against v1.34, whose `DeploymentReplicaSetTerminatingReplicas` is alpha
//! and off, the API server drops `status.terminatingReplicas`; a manager that still computes it
//! sees its cache without the field at every sync and writes the status again, for nothing.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use rkcm_testkit::harness::kwok_template;
use rkcm_testkit::{TestCluster, holds_for, wait_for};
use serde_json::json;

use crate::rollout::wait_default_service_account;
use crate::serve::{Rkcm, STARTUP, sample};

const SETTLE: Duration = Duration::from_secs(60);
/// Three times the longest status pacing (`TERMINATING_WRITE_INTERVAL`, 1 s).
const PACED: Duration = Duration::from_secs(3);

/// The value of the first sample whose series starts with `prefix`.
fn sample_starting(metrics: &str, prefix: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let rest = l.strip_prefix(prefix)?;
        let (_, value) = rest.rsplit_once(' ')?;
        value.trim().parse().ok()
    })
}

/// `kubernetes_feature_enabled` of `gate`, whatever its stage label.
fn gate_metric(metrics: &str, gate: &str) -> Option<f64> {
    sample_starting(
        metrics,
        &format!("kubernetes_feature_enabled{{name=\"{gate}\","),
    )
}

#[test]
fn samples_are_found_by_prefix() {
    let m = "kubernetes_feature_enabled{name=\"A\",stage=\"ALPHA\"} 0\n\
             kubernetes_feature_enabled{name=\"AB\",stage=\"BETA\"} 1\n";
    assert_eq!(gate_metric(m, "A"), Some(0.0));
    assert_eq!(gate_metric(m, "AB"), Some(1.0));
    assert_eq!(gate_metric(m, "B"), None);
}

/// The processed-item count of rkcm's ReplicaSet queue.
fn rs_syncs(metrics: &str) -> f64 {
    sample(
        metrics,
        "workqueue_work_duration_seconds_count{name=\"replicaset\"}",
    )
    .unwrap_or(0.0)
}

/// The plane's minor (34 to 37).
pub(crate) async fn server_minor(cluster: &TestCluster) -> anyhow::Result<u32> {
    Ok(server_version(cluster).await?.1)
}

/// The plane's `/version` and its minor.
async fn server_version(
    cluster: &TestCluster,
) -> anyhow::Result<(k8s_openapi::apimachinery::pkg::version::Info, u32)> {
    let info = cluster.client().apiserver_version().await?;
    let minor: u32 = info
        .minor
        .trim_end_matches('+')
        .parse()
        .with_context(|| format!("the server's minor {:?}", info.minor))?;
    ensure!(
        (34..=37).contains(&minor),
        "the plane runs v1.{minor}, outside v1.34 to v1.37"
    );
    Ok((info, minor))
}

/// Waits until `rkcm` exports `rkcm_apiserver_version_info` for `git_version` and `minor`;
/// its metrics then.
async fn wait_version_metric(rkcm: &Rkcm, git_version: &str, minor: u32) -> anyhow::Result<String> {
    let series =
        format!("rkcm_apiserver_version_info{{git_version=\"{git_version}\",minor=\"{minor}\"}}");
    wait_for(
        &format!("{}'s API server version metric ({git_version})", rkcm.name),
        STARTUP,
        || async {
            let m = rkcm.metrics().await.ok();
            Ok(m.filter(|m| sample(m, &series) == Some(1.0)))
        },
    )
    .await
}

/// How a minor's kube-controller-manager answers one `--feature-gates` entry.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Accepted,
    Unknown,
    /// Locked to the opposite of the value asked for.
    Locked,
}

/// `--feature-gates` is answered as the server's minor's kube-controller-manager answers it.
/// Four entries whose answers differ between any two supported minors, from upstream's gate
/// registries (`pkg/features`, k8s.io/kubernetes v1.34.4, v1.35.4, v1.36.3, v1.37.1), written
/// here by hand, not read from rkcm's tables: `CronJobsScheduledAnnotation` is GA at v1.34 and
/// removed at v1.35; `HPAConfigurableTolerance` beta until v1.36 and GA (locked) at v1.37;
/// `ImageVolume` beta until v1.35 and GA at v1.36; `ControllerManagerReleaseLeaderElectionLockOnExit`
/// new (alpha) at v1.36.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn feature_gates_are_answered_as_the_servers_minor() -> anyhow::Result<()> {
    use Answer::{Accepted, Locked, Unknown};
    let cluster = TestCluster::connect().await?;
    let (info, minor) = server_version(&cluster).await?;
    let ns = cluster.namespace("rkcm-skew-gates").await?;
    // Answers at v1.34, v1.35, v1.36, v1.37.
    let probes: [(&str, bool, [Answer; 4]); 4] = [
        (
            "CronJobsScheduledAnnotation",
            true,
            [Accepted, Unknown, Unknown, Unknown],
        ),
        (
            "HPAConfigurableTolerance",
            false,
            [Accepted, Accepted, Accepted, Locked],
        ),
        ("ImageVolume", false, [Accepted, Accepted, Locked, Locked]),
        (
            "ControllerManagerReleaseLeaderElectionLockOnExit",
            true,
            [Unknown, Unknown, Accepted, Accepted],
        ),
    ];
    let index = usize::try_from(minor - 34)?;
    for (gate, value, answers) in probes {
        let want = answers[index];
        let mut rkcm = Rkcm::spawn_scoped(
            "skew-gates",
            &cluster,
            ns.name(),
            &[
                "--leader-elect=false".to_owned(),
                "--controllers=ttl-after-finished-controller".to_owned(),
                format!("--feature-gates={gate}={value}"),
            ],
        )
        .await?;
        let result = async {
            wait_for("rkcm to read the server's version", STARTUP, || async {
                Ok(rkcm.log().contains("API server version").then_some(()))
            })
            .await?;
            match want {
                Accepted => {
                    // A refusal follows the version at once; an accepted entry keeps it running.
                    holds_for("rkcm running", Duration::from_secs(3), || {
                        let exited = rkcm.has_exited();
                        async move { Ok(!exited?) }
                    })
                    .await
                    .with_context(|| format!("{gate}={value} refused at {}", info.git_version))?;
                }
                Unknown | Locked => {
                    let status = rkcm.wait_exit(STARTUP).await?;
                    ensure!(status.code() == Some(1), "{gate}={value}: exit {status}");
                    let text = match want {
                        Unknown => format!("unrecognized feature gate: {gate}"),
                        _ => format!(
                            "cannot set feature gate {gate} to {value}, feature is locked to {}",
                            !value
                        ),
                    };
                    ensure!(
                        rkcm.log().contains(&text),
                        "{gate}={value} at {}: no {text:?}",
                        info.git_version
                    );
                }
            }
            anyhow::Ok(())
        }
        .await;
        result.map_err(|e| e.context(format!("{want:?} expected\n{}", rkcm.log())))?;
    }
    Ok(())
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn rkcm_follows_the_servers_minor() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let (info, minor) = server_version(&cluster).await?;
    let ns = cluster.namespace("rkcm-skew").await?;
    wait_default_service_account(&ns).await?;
    let rkcm = Rkcm::spawn_scoped(
        "skew",
        &cluster,
        ns.name(),
        &[
            "--leader-elect=false".to_owned(),
            "--controllers=replicaset-controller".to_owned(),
        ],
    )
    .await?;
    let result = async {
        let metrics = wait_version_metric(&rkcm, &info.git_version, minor).await?;
        // Alpha and off at v1.34, beta and on from v1.35.
        let gate = gate_metric(&metrics, "DeploymentReplicaSetTerminatingReplicas");
        ensure!(
            gate == Some(if minor >= 35 { 1.0 } else { 0.0 }),
            "DeploymentReplicaSetTerminatingReplicas at v1.{minor}: {gate:?}"
        );
        // Unknown to v1.34's manager: not listed.
        let taints = gate_metric(&metrics, "TaintTolerationComparisonOperators");
        ensure!(
            taints.is_some() == (minor >= 35),
            "TaintTolerationComparisonOperators at v1.{minor}: {taints:?}"
        );
        no_status_write_for_nothing(&rkcm, &ns).await
    }
    .await;
    result.map_err(|e| e.context(rkcm.log()))
}

/// A settled ReplicaSet whose pods change only in their metadata gets no status write.
async fn no_status_write_for_nothing(
    rkcm: &Rkcm,
    ns: &rkcm_testkit::TestNamespace,
) -> anyhow::Result<()> {
    let rss = ns.api::<ReplicaSet>();
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": kwok_template("web", "registry.example/web:v1"),
        },
    }))?;
    rss.create(&PostParams::default(), &rs).await?;
    wait_for("ReplicaSet web settled", SETTLE, || async {
        let rs = rss.get("web").await?;
        let s = rs.status.unwrap_or_default();
        let settled = s.available_replicas == Some(2)
            && s.ready_replicas == Some(2)
            && s.observed_generation == rs.metadata.generation;
        Ok(settled.then_some(()))
    })
    .await?;
    let proxy = rkcm.proxy().context("rkcm runs behind its proxy")?;
    let status_writes = |from: usize| -> Vec<String> {
        proxy
            .writes()
            .into_iter()
            .skip(from)
            .filter(|w| w.path.ends_with("/replicasets/web/status"))
            .map(|w| format!("{} {} -> {}", w.method, w.path, w.status))
            .collect()
    };
    // Whatever sync the settling left in flight has run when the queue is empty.
    wait_for("rkcm's ReplicaSet queue empty", SETTLE, || async {
        let m = rkcm.metrics().await?;
        Ok((sample(&m, "workqueue_depth{name=\"replicaset\"}") == Some(0.0)).then_some(()))
    })
    .await?;
    let from = proxy.writes().len();
    let pods = ns.api::<Pod>();
    let names: Vec<String> = pods
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    for (i, name) in names.iter().enumerate() {
        let before = rs_syncs(&rkcm.metrics().await?);
        pods.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"rkcm.test/touch": i.to_string()}}})),
        )
        .await?;
        // Each pod change syncs its ReplicaSet once more.
        wait_for(
            "rkcm synced the ReplicaSet after a pod change",
            SETTLE,
            || async {
                let m = rkcm.metrics().await?;
                let idle = sample(&m, "workqueue_depth{name=\"replicaset\"}") == Some(0.0);
                Ok((idle && rs_syncs(&m) > before).then_some(()))
            },
        )
        .await?;
    }
    // A write held back by the status pacing comes within a second.
    let held = holds_for(
        "no status write of the settled ReplicaSet",
        PACED,
        || async { Ok(status_writes(from).is_empty()) },
    )
    .await;
    let writes = status_writes(from);
    ensure!(
        held.is_ok() && writes.is_empty(),
        "rkcm wrote the status of a settled ReplicaSet after changes of its pods' metadata only \
         ({} syncs): {writes:?}",
        names.len()
    );
    Ok(())
}

/// A `version.Info` of `v1.<minor>.0`, as a server of that release answers `/version`.
fn version_info(minor: u32) -> serde_json::Value {
    json!({
        "major": "1", "minor": minor.to_string(),
        "gitVersion": format!("v1.{minor}.0"), "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0", "compiler": "gc", "platform": "linux/amd64",
    })
}

/// An upgrade (or a rollback) of the API server to another minor while rkcm runs: rkcm reads
/// `/version` again (`--rkcm-apiserver-version-recheck-period`), drains and exits 1 naming the
/// change, and started again it takes the new minor's gates. The proxy in front of the plane
/// answers `/version` as the other release would.
#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn another_minor_after_an_upgrade_restarts_rkcm_with_its_gates() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let (info, minor) = server_version(&cluster).await?;
    let other = if minor > 34 { minor - 1 } else { minor + 1 };
    let ns = cluster.namespace("rkcm-skew-upgrade").await?;
    let args = [
        "--leader-elect=false".to_owned(),
        "--controllers=replicaset-controller".to_owned(),
        "--rkcm-apiserver-version-recheck-period=1s".to_owned(),
    ];
    let mut first = Rkcm::spawn_scoped("skew-upgrade", &cluster, ns.name(), &args).await?;
    let result = async {
        wait_version_metric(&first, &info.git_version, minor).await?;
        // Still the same minor a few rechecks later: rkcm keeps running.
        holds_for(
            "rkcm running on the same minor",
            Duration::from_secs(3),
            || {
                let exited = first.has_exited();
                async move { Ok(!exited?) }
            },
        )
        .await?;
        first
            .proxy()
            .context("rkcm runs behind its proxy")?
            .report_version(Some(version_info(other)));
        let status = first.wait_exit(STARTUP).await?;
        ensure!(
            status.code() == Some(1),
            "exit {status} after the minor changed"
        );
        ensure!(
            first
                .log()
                .contains("the API server's minor changed: restarting"),
            "no word of the minor's change"
        );
        // Its restart, against the same (upgraded) server.
        let kubeconfig = first
            .proxy()
            .context("rkcm runs behind its proxy")?
            .kubeconfig()
            .to_path_buf();
        let second = Rkcm::spawn_with("skew-upgrade-restart", &kubeconfig, &args, None)?;
        let restarted = async {
            let gates_of = wait_for("the restart to read the version", STARTUP, || async {
                Ok(second.log_lines().iter().find_map(|l| {
                    (l.get("message").and_then(|m| m.as_str()) == Some("API server version"))
                        .then(|| {
                            l.get("gates_of")
                                .and_then(|g| g.as_str())
                                .map(str::to_owned)
                        })
                        .flatten()
                }))
            })
            .await?;
            ensure!(
                gates_of.starts_with(&format!("v1.{other}.")),
                "the restart took the gates of {gates_of}, not v1.{other}"
            );
            wait_version_metric(&second, &format!("v1.{other}.0"), other).await?;
            anyhow::Ok(())
        }
        .await;
        restarted.map_err(|e| e.context(second.log()))
    }
    .await;
    result.map_err(|e| e.context(first.log()))
}
