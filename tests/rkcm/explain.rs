//! `rkcm explain` on the local plane: golden tests of the reason codes. Each session creates
//! objects that get stuck in one known way, in a namespace of its own, with a
//! controller-manager confined to that namespace driving them, and waits until explain names
//! the right reason (within about one sync of the manager plus margin); each also checks that
//! explain says `settled` with nothing to do once the object has settled.
//!
//! explain only reads, and runs rkcm's plan over the live state, so its reasons must be the
//! same whichever manager drives the object: most sessions run once under rkcm and once
//! under upstream kube-controller-manager.
//!
//! One file per controller group under `explain/`.

/// The two tests of one scenario: `$rkcm` runs it under rkcm, `$upstream` under upstream
/// kube-controller-manager, each in a [`session`] of its own running `$controllers`.
macro_rules! under_both {
    ($rkcm:ident, $upstream:ident, $prefix:literal, $controllers:expr, $scenario:path) => {
        #[tokio::test]
        #[ignore = "needs apiserver: make test"]
        async fn $rkcm() -> anyhow::Result<()> {
            super::session(
                rkcm_testkit::harness::ManagerKind::Rkcm,
                $prefix,
                $controllers,
                $scenario,
            )
            .await
        }

        #[tokio::test]
        #[ignore = "needs apiserver: make test"]
        async fn $upstream() -> anyhow::Result<()> {
            super::session(
                rkcm_testkit::harness::ManagerKind::Upstream,
                $prefix,
                $controllers,
                $scenario,
            )
            .await
        }
    };
}

#[path = "explain/cronjob.rs"]
mod cronjob;
#[path = "explain/daemonset.rs"]
mod daemonset;
#[path = "explain/decided.rs"]
mod decided;
#[path = "explain/deployment.rs"]
mod deployment;
#[path = "explain/job.rs"]
mod job;
#[path = "explain/live.rs"]
mod live;
#[path = "explain/manners.rs"]
mod manners;
#[path = "explain/planning.rs"]
mod planning;
#[path = "explain/podgc.rs"]
mod podgc;
#[path = "explain/refused.rs"]
mod refused;
#[path = "explain/replicaset.rs"]
mod replicaset;
#[path = "explain/statefulset.rs"]
mod statefulset;

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, PostParams};
use rkcm_testkit::harness::{Env, Manager, ManagerKind};
use rkcm_testkit::{TestCluster, wait_for_every};
use serde_json::{Value, json};

use crate::rollout::wait_default_service_account;
use crate::serve::rkcm_bin;

/// One sync of either manager after a change, with margin for a busy plane.
pub(crate) const REACT: Duration = Duration::from_secs(60);
/// How often a wait runs explain again (each run is a process and a few API reads).
const EVERY: Duration = Duration::from_millis(500);
/// The taint every node of these tests carries, so no other test's pod lands there.
pub(crate) const TEST_TAINT: &str = "rkcm.test/explain";

/// `rkcm explain TARGET -o json [extra...]`, parsed.
pub(crate) async fn explain(
    cluster: &TestCluster,
    target: &str,
    extra: &[&str],
) -> anyhow::Result<Value> {
    let mut args = vec![target, "-o", "json"];
    args.extend_from_slice(extra);
    let out = run_explain(cluster, &args).await?;
    serde_json::from_str(&out).context("parsing rkcm explain -o json")
}

/// `rkcm explain ARGS... --kubeconfig=<the cluster's>`; its standard output.
pub(crate) async fn run_explain(cluster: &TestCluster, args: &[&str]) -> anyhow::Result<String> {
    let out = tokio::process::Command::new(rkcm_bin())
        .arg("explain")
        .args(args)
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .context("running rkcm explain")?;
    if !out.status.success() {
        bail!(
            "rkcm explain {args:?} failed ({:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The reason codes of an explanation, in its order.
pub(crate) fn reasons(e: &Value) -> Vec<String> {
    e["waitingOn"]
        .as_array()
        .map(|ws| {
            ws.iter()
                .filter_map(|w| w["reason"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The first `waitingOn` entry with `reason` (JSON null if there is none).
pub(crate) fn entry<'a>(e: &'a Value, reason: &str) -> &'a Value {
    e["waitingOn"]
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["reason"] == reason))
        .unwrap_or(&Value::Null)
}

/// The `message` of the first entry with `reason` ("" if none).
pub(crate) fn message<'a>(e: &'a Value, reason: &str) -> &'a str {
    entry(e, reason)["message"].as_str().unwrap_or_default()
}

/// The `objects` of the first entry with `reason`.
pub(crate) fn objects(e: &Value, reason: &str) -> Vec<String> {
    entry(e, reason)["objects"]
        .as_array()
        .map(|os| {
            os.iter()
                .filter_map(|o| o.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether some remedy contains `text`.
pub(crate) fn has_remedy(e: &Value, text: &str) -> bool {
    e["remedies"].as_array().is_some_and(|rs| {
        rs.iter()
            .any(|r| r.as_str().is_some_and(|r| r.contains(text)))
    })
}

/// The state, reasons and actions, for a failure message.
fn summary(e: &Value) -> String {
    format!(
        "explain says {} {:?}, actions {}",
        e["state"],
        reasons(e),
        e["actions"]
    )
}

/// Runs explain on `target` until `check` accepts the explanation, at most `timeout`; on
/// timeout the error shows the last explanation seen (or the last error).
pub(crate) async fn wait_until(
    cluster: &TestCluster,
    target: &str,
    extra: &[&str],
    what: &str,
    timeout: Duration,
    check: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let what = format!("explain {target}: {what}");
    wait_for_every(&what, timeout, EVERY, || async {
        let e = explain(cluster, target, extra).await?;
        if check(&e) {
            Ok(Some(e))
        } else {
            // Remembered as the last error, so a timeout shows the last explanation.
            Err(anyhow::anyhow!("{}\n{e:#}", summary(&e)))
        }
    })
    .await
}

/// Waits (up to [`REACT`]) until explain on `target` says `state` with exactly `want` as
/// its reason codes, in order.
pub(crate) async fn wait_explained(
    cluster: &TestCluster,
    target: &str,
    state: &str,
    want: &[&str],
) -> anyhow::Result<Value> {
    wait_until(
        cluster,
        target,
        &[],
        &format!("{state} {want:?}"),
        REACT,
        |e| e["state"] == state && reasons(e) == want,
    )
    .await
}

/// Waits until explain on `target` says `settled` with no reason and nothing to do.
pub(crate) async fn wait_settled(cluster: &TestCluster, target: &str) -> anyhow::Result<Value> {
    let e = wait_explained(cluster, target, "settled", &[]).await?;
    if e["actions"] != json!([]) || e["remedies"] != json!([]) {
        bail!("settled, yet with actions or remedies: {e:#}");
    }
    Ok(e)
}

/// Runs `body` in a namespace of its own (`<prefix>-<random>`) while a manager of `kind`
/// runs `controllers` confined to it; the manager's log is attached to a failure, and the
/// namespace's objects are released and its pods removed afterwards.
pub(crate) async fn session(
    kind: ManagerKind,
    prefix: &str,
    controllers: &str,
    body: impl AsyncFnOnce(&Env) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let env = Env::new(prefix).await?;
    let result = async {
        wait_default_service_account(&env.ns).await?;
        let mut manager = Manager::start(kind, &env.cluster, env.name(), controllers).await?;
        let result = body(&env).await;
        Manager::with_logs(result, &mut [&mut manager])
    }
    .await;
    env.finish(result).await
}

/// `KIND/NAMESPACE/NAME` for explain.
pub(crate) fn target(env: &Env, kind: &str, name: &str) -> String {
    format!("{kind}/{}/{name}", env.name())
}

/// Nodes a test creates (kwok runs them: Ready, and pods bound there run and become
/// Ready); each carries [`TEST_TAINT`]. Delete them with [`Nodes::delete_all`] once the
/// test's pods are gone.
pub(crate) struct Nodes {
    api: Api<Node>,
    names: Vec<String>,
}

impl Nodes {
    pub(crate) fn new(env: &Env) -> Self {
        Self {
            api: Api::all(env.cluster.client()),
            names: Vec::new(),
        }
    }

    /// Creates node `<namespace>-<suffix>` with `labels` and, beside [`TEST_TAINT`],
    /// `taints` (key, value, effect); returns its name.
    pub(crate) async fn create(
        &mut self,
        env: &Env,
        suffix: &str,
        labels: &[(&str, &str)],
        taints: &[(&str, &str, &str)],
    ) -> anyhow::Result<String> {
        let name = format!("{}-{suffix}", env.name());
        let mut l = serde_json::Map::new();
        l.insert("kubernetes.io/hostname".into(), json!(name));
        for (k, v) in labels {
            l.insert((*k).into(), json!(v));
        }
        let mut t = vec![json!({"key": TEST_TAINT, "value": env.name(), "effect": "NoSchedule"})];
        for (k, v, e) in taints {
            t.push(json!({"key": k, "value": v, "effect": e}));
        }
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": l,
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": t},
        }))?;
        self.api
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("creating node {name}"))?;
        self.names.push(name.clone());
        Ok(name)
    }

    /// Deletes node `name` now.
    pub(crate) async fn delete(&self, name: &str) -> anyhow::Result<()> {
        match self.api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting node {name}")),
        }
    }

    /// Deletes every node this created (those already gone are fine); the first error wins.
    pub(crate) async fn delete_all(&self) -> anyhow::Result<()> {
        let mut first = Ok(());
        for n in &self.names {
            if let Err(e) = self.delete(n).await
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }
}

/// Tolerates [`TEST_TAINT`].
pub(crate) fn test_toleration() -> Value {
    json!({"key": TEST_TAINT, "operator": "Exists", "effect": "NoSchedule"})
}

#[tokio::test]
async fn explain_refuses_a_bad_target_with_usage() -> anyhow::Result<()> {
    let out = tokio::process::Command::new(rkcm_bin())
        .args(["explain", "widget/ns/x"])
        .output()
        .await?;
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(2) || !err.contains("usage: rkcm explain") {
        bail!("exit {:?}: {err}", out.status.code());
    }
    Ok(())
}
