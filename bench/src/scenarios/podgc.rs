//! PodGC: N terminated pods over a threshold T (the terminated sweep of upstream
//! `pkg/controller/podgc/gc_controller.go`).
//!
//! Setup: a static Node (`bench-node`, Ready, tainted, no simulator) and N pods bound to it
//! by `spec.nodeName`, each set terminated through the status subresource (even indexes
//! `Succeeded`, odd `Failed`), with container statuses like a kubelet would leave. Nothing
//! changes them afterwards. Then the manager is started with
//! `--terminated-pod-gc-threshold=T`; converged = at most T pods left in the namespace
//! (counted by a metadata watch). Correct = the survivors are exactly the T newest by
//! (creationTimestamp, name), the order in which PodGC deletes oldest first.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::harness::{Env, Probe, Scenario};
use crate::k8s::{self, PodWatch};
use crate::results::Correctness;

pub const NODE: &str = "bench-node";

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Terminated pods to create.
    #[arg(long, default_value_t = 20_000)]
    pub pods: usize,
    /// `--terminated-pod-gc-threshold` of both managers.
    #[arg(long, default_value_t = 5_000)]
    pub threshold: usize,
}

pub struct PodGc {
    pub args: Args,
}

pub struct State {
    ns: String,
    watch: PodWatch,
    /// The names PodGC must keep: the `threshold` newest by (creationTimestamp, name).
    expected: HashSet<String>,
}

impl Scenario for PodGc {
    type State = State;

    fn id(&self) -> &'static str {
        "podgc-terminated"
    }

    fn title(&self) -> String {
        format!(
            "PodGC: {} terminated pods over threshold {}",
            group(self.args.pods),
            group(self.args.threshold)
        )
    }

    fn description(&self) -> String {
        format!(
            "{} pods bound to a static Ready node `{NODE}` (no kubelet, no simulator), \
             all terminated (half `Succeeded`, half `Failed`) before the manager starts with \
             `--terminated-pod-gc-threshold={}`. Converged: at most {} pods left in the \
             namespace (metadata watch). Correct: the survivors are exactly the {} newest \
             by (creationTimestamp, name), since PodGC deletes the oldest first.",
            group(self.args.pods),
            self.args.threshold,
            group(self.args.threshold),
            group(self.args.threshold),
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("pods".to_string(), self.args.pods.to_string()),
            ("threshold".to_string(), self.args.threshold.to_string()),
        ])
    }

    fn controllers(&self) -> Vec<&'static str> {
        vec!["pod-garbage-collector-controller"]
    }

    fn manager_flags(&self) -> Vec<String> {
        vec![format!(
            "--terminated-pod-gc-threshold={}",
            self.args.threshold
        )]
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        let client = &env.client;
        k8s::ensure_static_node(client, NODE).await?;
        k8s::ensure_namespace(client, ns).await?;
        k8s::delete_all_pods(client, ns, Duration::from_secs(600)).await?;
        // The threshold is cluster-wide: other terminated pods would change what is deleted.
        let others = k8s::list_pod_meta(client, None).await?.len();
        if others > 0 {
            say!("WARNING: {others} pods exist elsewhere in the cluster; PodGC counts them too");
        }

        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let n = self.args.pods;
        let width = n.saturating_sub(1).to_string().len().max(5);
        k8s::bounded(
            "pods created and terminated",
            n,
            env.concurrency,
            1000,
            (0..n).map(|i| create_terminated(&api, format!("pod-{i:0width$}"), i)),
        )
        .await?;

        // What PodGC must keep, from the timestamps the apiserver actually gave (1 s
        // resolution, so many pods share one; the name breaks ties).
        let mut metas: Vec<(jiff::Timestamp, String)> = k8s::list_pod_meta(client, Some(ns))
            .await?
            .into_iter()
            .map(|p| {
                let ts = p
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .unwrap_or_default();
                (ts, p.name_any())
            })
            .collect();
        anyhow::ensure!(
            metas.len() == n,
            "expected {n} pods in {ns}, found {}",
            metas.len()
        );
        metas.sort();
        let keep = self.args.threshold.min(n);
        let expected = metas[n - keep..]
            .iter()
            .map(|(_, name)| name.clone())
            .collect();

        let mut watch = PodWatch::start(client, ns);
        tokio::time::timeout(
            Duration::from_secs(120),
            watch.wait_for(|c| c.count.is_some()),
        )
        .await
        .context("the pod watch did not sync within 120 s")??;
        let c = watch.current();
        anyhow::ensure!(
            c.count == Some(n),
            "watch sees {:?} pods, expected {n}",
            c.count
        );
        Ok(State {
            ns: ns.to_string(),
            watch,
            expected,
        })
    }

    async fn converge(&self, _env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        let threshold = self.args.threshold;
        let mut first_seen = false;
        loop {
            let c = state.watch.latest();
            if let (false, Some(at)) = (first_seen, c.first_delete) {
                first_seen = true;
                probe.mark_at("first pod deleted", at);
            }
            let left = c.count.unwrap_or(usize::MAX);
            probe.progress(format!("{left} pods left (target <= {threshold})"));
            if left <= threshold {
                if let Some(at) = c.last_delete {
                    probe.mark_at("last pod deleted", at);
                }
                return Ok(());
            }
            state.watch.changed().await?;
        }
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let left: HashSet<String> = k8s::list_pod_meta(&env.client, Some(&state.ns))
            .await?
            .into_iter()
            .map(|p| p.name_any())
            .collect();
        Ok(judge(&state.expected, &left))
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        k8s::delete_all_pods(&env.client, ns, Duration::from_secs(600)).await
    }
}

/// Creates one pod bound to the static node and gives it the status a kubelet leaves on a
/// finished pod: `Succeeded` (exit 0) for even `i`, `Failed` (exit 1) for odd `i`.
async fn create_terminated(api: &Api<Pod>, name: String, i: usize) -> anyhow::Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"app": "rkcm-bench-podgc", "batch": format!("b{}", i / 1000)},
            "annotations": {"rkcm-bench/index": i.to_string()}
        },
        "spec": {
            "nodeName": NODE,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "tolerations": [{"key": "rkcm-bench/static", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{
                "name": "main",
                "image": "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
                "command": ["/bin/sh", "-c", "exit 0"],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
            }]
        }
    }))?;
    let pp = PostParams::default();
    match k8s::retry(|| api.create(&pp, &pod)).await {
        Ok(_) => {}
        Err(e) if k8s::is_status(&e, 409) => {} // a retried create that had succeeded
        Err(e) => return Err(e).with_context(|| format!("creating pod {name}")),
    }
    let ok = i.is_multiple_of(2);
    let now = jiff::Timestamp::now().to_string();
    let cond = |t: &str, s: &str, reason: Option<&str>| {
        let mut c = json!({"type": t, "status": s, "lastTransitionTime": now});
        if let Some(r) = reason {
            c["reason"] = json!(r);
        }
        c
    };
    let ip = format!("10.{}.{}.{}", 200 + i / 65536, (i / 256) % 256, i % 256);
    let status = json!({"status": {
        "phase": if ok { "Succeeded" } else { "Failed" },
        "conditions": [
            cond("PodReadyToStartContainers", "False", None),
            cond("Initialized", "True", Some("PodCompleted")),
            cond("Ready", "False", Some("PodCompleted")),
            cond("ContainersReady", "False", Some("PodCompleted")),
            cond("PodScheduled", "True", None),
        ],
        "hostIP": "10.255.0.1",
        "hostIPs": [{"ip": "10.255.0.1"}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "qosClass": "Burstable",
        "containerStatuses": [{
            "name": "main",
            "image": "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
            "imageID": "registry.k8s.io/e2e-test-images/busybox@sha256:a9155b13325b2abef48e71de77bb8ac015412a566829f621d06bfae5c699b1b9",
            "containerID": format!("containerd://{:064x}", i),
            "ready": false,
            "started": false,
            "restartCount": 0,
            "state": {"terminated": {
                "exitCode": if ok { 0 } else { 1 },
                "reason": if ok { "Completed" } else { "Error" },
                "startedAt": now,
                "finishedAt": now,
                "containerID": format!("containerd://{:064x}", i)
            }}
        }]
    }});
    let (params, patch) = (PatchParams::default(), Patch::Merge(&status));
    k8s::retry(|| api.patch_status(&name, &params, &patch))
        .await
        .with_context(|| format!("setting pod {name} terminated"))?;
    Ok(())
}

/// Compares the survivors with the newest pods.
fn judge(expected: &HashSet<String>, left: &HashSet<String>) -> Correctness {
    let wrongly_kept = left.difference(expected).count();
    let wrongly_deleted = expected.difference(left).count();
    if wrongly_kept == 0 && wrongly_deleted == 0 {
        Correctness {
            ok: true,
            detail: format!("kept exactly the {} newest", group(expected.len())),
        }
    } else {
        Correctness {
            ok: false,
            detail: format!(
                "{} left: {} older pods kept, {} of the {} newest deleted",
                group(left.len()),
                group(wrongly_kept),
                group(wrongly_deleted),
                group(expected.len())
            ),
        }
    }
}

/// `20000` → `20 000`.
pub fn group(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn judges_survivors() {
        let expected = set(&["c", "d"]);
        assert!(judge(&expected, &set(&["c", "d"])).ok);
        let wrong = judge(&expected, &set(&["b", "d"]));
        assert!(!wrong.ok);
        assert_eq!(
            wrong.detail,
            "2 left: 1 older pods kept, 1 of the 2 newest deleted"
        );
        assert!(!judge(&expected, &set(&["d"])).ok);
    }

    #[test]
    fn groups_digits() {
        assert_eq!(group(0), "0");
        assert_eq!(group(500), "500");
        assert_eq!(group(5000), "5 000");
        assert_eq!(group(20000), "20 000");
        assert_eq!(group(1234567), "1 234 567");
    }
}
