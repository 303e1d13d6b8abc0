//! The real-node tier (DESIGN.md testing tier 4): the controllers drive real containers on
//! real kubelets (`REAL_NODES=N e2e/cluster.sh up`: a kubelet and a containerd per node,
//! local images built from distribution packages), and each scenario checks upstream's
//! behaviour where a kubelet decides what happens: readiness from HTTP probes, graceful
//! termination with preStop hooks, real exit codes and container restarts, a node cut off
//! with its container still running, PodGC of terminated pods.
//!
//! Every scenario runs the rkcm binary confined to its namespace (the testkit's
//! [`Manager`]); `RKCM_REAL_NODES_MANAGER=upstream` runs upstream kube-controller-manager
//! instead, with the same controllers and flags, to compare the two on the same scenario.
//!
//! A plane without Ready real nodes fails these tests with the reason and the fix; they are
//! left out only when `RKCM_SKIP_REAL_NODES=1` is set (`e2e/test.sh` then skips them by name
//! and says so).

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::harness::{Env, Manager, ManagerKind, RealNodes, on_real_nodes};
use rkcm_testkit::wait_for;
use serde_json::{Value, json};
use tokio::sync::RwLockReadGuard;

use crate::rollout::wait_default_service_account;

/// Declares a real-node test: `body(&tier)` runs on a shared [`Tier`] (one real node at
/// least, the manager running `controllers`), which is finished whatever the outcome.
macro_rules! real_node_test {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $controllers:literal, $body:path) => {
        $(#[$doc])*
        #[tokio::test(flavor = "multi_thread")]
        #[ignore = "needs real nodes: make test"]
        async fn $name() -> anyhow::Result<()> {
            let t = $crate::real_nodes::Tier::shared($prefix, 1, $controllers, &[]).await?;
            let result = $body(&t).await;
            t.finish(result).await
        }
    };
}

#[path = "real_nodes/cronjob.rs"]
mod cronjob;
#[path = "real_nodes/daemonset.rs"]
mod daemonset;
#[path = "real_nodes/deployment.rs"]
mod deployment;
#[path = "real_nodes/deployment_rollback.rs"]
mod deployment_rollback;
#[path = "real_nodes/in_pod.rs"]
mod in_pod;
#[path = "real_nodes/job.rs"]
mod job;
#[path = "real_nodes/podgc.rs"]
mod podgc;
#[path = "real_nodes/statefulset.rs"]
mod statefulset;
#[path = "real_nodes/statefulset_recovery.rs"]
mod statefulset_recovery;
#[path = "real_nodes/termination.rs"]
mod termination;

/// The shell image: busybox applets, `sh` as its command.
pub(crate) const BUSYBOX: &str = "busybox";
/// The same content under another name, for a rollout that changes the image.
pub(crate) const BUSYBOX_NEXT: &str = "busybox:1.36";
/// busybox httpd serving `/usr/local/apache2/htdocs` on port 80.
pub(crate) const HTTPD: &str = "httpd:2.4";
pub(crate) const HTTPD_NEXT: &str = "httpd:latest";

/// Bound for a pod on a real node to be created, started and (if probed) Ready.
pub(crate) const START: Duration = Duration::from_secs(60);

/// Which manager runs the scenarios: rkcm, or upstream for the comparison run.
pub(crate) fn subject() -> ManagerKind {
    match std::env::var("RKCM_REAL_NODES_MANAGER").as_deref() {
        Ok("upstream") => ManagerKind::Upstream,
        _ => ManagerKind::Rkcm,
    }
}

/// One scenario's namespace, real nodes, manager and its hold on the nodes.
pub(crate) struct Tier<G> {
    pub env: Env,
    pub nodes: RealNodes,
    pub manager: Manager,
    _hold: G,
}

impl Tier<RwLockReadGuard<'static, ()>> {
    /// A scenario that runs pods on real nodes beside others (the nodes keep answering).
    pub(crate) async fn shared(
        prefix: &str,
        nodes: usize,
        controllers: &str,
        flags: &[&str],
    ) -> anyhow::Result<Self> {
        let hold = RealNodes::shared().await;
        Self::start(prefix, nodes, controllers, flags, hold).await
    }
}

impl<G> Tier<G> {
    /// Waits for the real nodes, creates the namespace and starts the manager in it.
    pub(crate) async fn start(
        prefix: &str,
        nodes: usize,
        controllers: &str,
        flags: &[&str],
        hold: G,
    ) -> anyhow::Result<Self> {
        let env = Env::new(prefix).await?;
        let setup = async {
            let nodes = RealNodes::get(&env.cluster, nodes).await?;
            wait_default_service_account(&env.ns).await?;
            let manager =
                Manager::start_with(subject(), &env.cluster, env.name(), controllers, flags)
                    .await?;
            anyhow::Ok((nodes, manager))
        }
        .await;
        match setup {
            Ok((nodes, manager)) => Ok(Self {
                env,
                nodes,
                manager,
                _hold: hold,
            }),
            Err(e) => Err(env.finish(Err(e)).await.unwrap_err()),
        }
    }

    /// A scenario whose manager was started by the test itself.
    pub(crate) fn adopt(env: Env, nodes: RealNodes, manager: Manager, hold: G) -> Self {
        Self {
            env,
            nodes,
            manager,
            _hold: hold,
        }
    }

    /// Ends the scenario: the manager's log joins a failure; the namespace goes.
    pub(crate) async fn finish(mut self, result: anyhow::Result<()>) -> anyhow::Result<()> {
        let result = Manager::with_logs(result, &mut [&mut self.manager]);
        let result = match result {
            Ok(()) => self.manager.check_running(),
            Err(e) => Err(e),
        };
        let _ = self.manager.stop().await;
        self.env.finish(result).await
    }
}

/// A busybox container running `script` under `sh -c`.
pub(crate) fn shell(name: &str, image: &str, script: &str) -> Value {
    json!({
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", script],
    })
}

/// A container that runs until it is told to stop, and then stops at once.
pub(crate) fn sleeper(image: &str) -> Value {
    shell(
        "main",
        image,
        "trap 'exit 0' TERM; while :; do sleep 1; done",
    )
}

/// A pod template on the real nodes with `labels` and `containers`, and more spec fields.
pub(crate) fn real_template(labels: Value, containers: Value, extra_spec: Value) -> Value {
    let mut spec = json!({"containers": containers, "terminationGracePeriodSeconds": 30});
    rkcm_testkit::harness::merge_json(&mut spec, &extra_spec);
    on_real_nodes(&mut spec);
    json!({"metadata": {"labels": labels}, "spec": spec})
}

/// Waits until pod `name` runs a real container that is Ready (when `ready`) and returns
/// the pod with its node and container id.
pub(crate) async fn wait_running(
    tier_env: &Env,
    nodes: &RealNodes,
    name: &str,
    ready: bool,
) -> anyhow::Result<(Pod, String, String)> {
    let (pod, node, id) = wait_for(
        &format!("pod {name} running on a real node"),
        START,
        || async {
            let pod: Option<Pod> = tier_env.get_opt(name).await?;
            Ok(pod.and_then(|p| {
                let ok = !ready || rkcm_testkit::harness::is_ready(&p);
                let (node, id) = rkcm_testkit::harness::running_container(&p)?;
                (ok && p.metadata.deletion_timestamp.is_none()).then_some((p, node, id))
            }))
        },
    )
    .await?;
    anyhow::ensure!(
        nodes.names().contains(&node),
        "pod {name} runs on {node}, not on a real node ({:?})",
        nodes.names()
    );
    anyhow::ensure!(
        nodes.container_running(&node, &id).await?,
        "pod {name} reports container {id} running on {node}, but {node}'s containerd has no such running task"
    );
    Ok((pod, node, id))
}

/// The pods labelled `job=<job>` (the real-node Job scenarios label their templates so).
pub(crate) fn of_job<'a>(pods: &'a [Pod], job: &str) -> Vec<&'a Pod> {
    pods.iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("job"))
                .is_some_and(|j| j == job)
        })
        .collect()
}

/// The pod's IP, which a real node's CNI gave it.
pub(crate) fn pod_ip(p: &Pod) -> anyhow::Result<&str> {
    p.status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .with_context(|| format!("pod {:?} has no IP", p.metadata.name))
}
