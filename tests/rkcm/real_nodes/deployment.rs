//! A Deployment's rolling update gated by a real HTTP readiness probe: the kubelet probes
//! busybox httpd in each pod, a new pod that fails its probe holds the rollout (surge used,
//! no old pod removed), and `kubectl rollout status` says so as it does with upstream.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::harness::{is_ready, pod_image, running_container};
use rkcm_testkit::{holds_for, wait_for};
use serde_json::json;

use super::{HTTPD, HTTPD_NEXT, START, Tier, pod_ip, real_template};
use crate::rollout::Kubectl;

fn httpd(image: &str, probe_path: &str) -> serde_json::Value {
    json!([{
        "name": "web", "image": image, "imagePullPolicy": "IfNotPresent",
        "ports": [{"containerPort": 80}],
        "readinessProbe": {
            "httpGet": {"path": probe_path, "port": 80},
            "periodSeconds": 1, "failureThreshold": 1, "successThreshold": 1, "timeoutSeconds": 1,
        },
    }])
}

fn deployment(image: &str, probe_path: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": real_template(json!({"app": "web"}), httpd(image, probe_path), json!({})),
        },
    })
}

/// `kubectl rollout status` with a timeout: (exit code, last line of stdout).
async fn rollout_status(k: &Kubectl, timeout: &str) -> anyhow::Result<(i32, String, String)> {
    let out = k
        .run(
            &[
                "rollout",
                "status",
                "deployment/web",
                &format!("--timeout={timeout}"),
            ],
            None,
        )
        .await?;
    let last = out.stdout.lines().last().unwrap_or_default().to_owned();
    Ok((out.code, last, out.stderr))
}

async fn pods(t: &Tier<impl Sized>) -> anyhow::Result<Vec<Pod>> {
    let pods: Vec<Pod> = t.env.list().await?;
    Ok(pods
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

async fn scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let k = Kubectl::new(&t.env.cluster, t.env.name())?;
    t.env
        .create::<Deployment>(deployment(HTTPD, "/index.html"))
        .await?;
    let (code, last, err) = rollout_status(&k, "90s").await?;
    ensure!(
        code == 0 && last == "deployment \"web\" successfully rolled out",
        "first rollout: exit {code}, last line {last:?}, stderr {err:?}"
    );
    let first = pods(t).await?;
    ensure!(
        first.len() == 2,
        "want 2 pods after the first rollout, have {}",
        first.len()
    );
    for p in &first {
        let (node, id) =
            running_container(p).context("a pod of the first rollout is not running")?;
        ensure!(
            is_ready(p),
            "pod {:?} not Ready after the rollout",
            p.metadata.name
        );
        ensure!(
            t.nodes.container_running(&node, &id).await?,
            "pod {:?}: no running container {id} on {node}",
            p.metadata.name
        );
        ensure!(
            pod_ip(p)?.starts_with("10.250."),
            "pod {:?} has IP {:?}, not one of the real nodes' pod networks",
            p.metadata.name,
            pod_ip(p)
        );
    }

    // A new template whose pods never pass their probe (the path does not exist: 404).
    t.env
        .strategic::<Deployment>(
            "web",
            json!({"spec": {"template": {"spec": {"containers": httpd(HTTPD_NEXT, "/missing.html")}}}}),
        )
        .await?;
    let bad = wait_for(
        "the new pod runs its container but is not Ready",
        START,
        || async {
            let ps = pods(t).await?;
            Ok(ps.into_iter().find(|p| {
                pod_image(p) == HTTPD_NEXT && running_container(p).is_some() && !is_ready(p)
            }))
        },
    )
    .await?;
    let bad_name = bad.metadata.name.clone().unwrap_or_default();
    // Enough probe periods for a kubelet to have marked it Ready if the probe passed.
    holds_for(
        "the rollout holds: two old pods Ready, one new pod not Ready, nothing more",
        Duration::from_secs(8),
        || async {
            let ps = pods(t).await?;
            let old_ready = ps
                .iter()
                .filter(|p| pod_image(p) == HTTPD && is_ready(p))
                .count();
            let new: Vec<&Pod> = ps.iter().filter(|p| pod_image(p) == HTTPD_NEXT).collect();
            Ok(old_ready == 2 && new.len() == 1 && !is_ready(new[0]))
        },
    )
    .await?;
    let d: Deployment = t.env.get("web").await?;
    let s = d.status.clone().unwrap_or_default();
    ensure!(
        s.updated_replicas == Some(1)
            && s.available_replicas == Some(2)
            && s.unavailable_replicas == Some(1)
            && s.replicas == Some(3),
        "held rollout status: {s:?}"
    );
    let (code, last, err) = rollout_status(&k, "3s").await?;
    ensure!(
        code != 0
            && last
                == "Waiting for deployment \"web\" rollout to finish: 1 out of 2 new replicas have been updated..."
            && err.contains("timed out waiting for the condition"),
        "held rollout: exit {code}, last line {last:?}, stderr {err:?}"
    );
    let bad_now: Pod = t.env.get(&bad_name).await?;
    ensure!(
        !is_ready(&bad_now),
        "the pod failing its probe became Ready: {:?}",
        bad_now.status
    );

    // Fixed forward: the probe's path exists again; the rollout finishes.
    t.env
        .strategic::<Deployment>(
            "web",
            json!({"spec": {"template": {"spec": {"containers": httpd(HTTPD_NEXT, "/index.html")}}}}),
        )
        .await?;
    let (code, last, err) = rollout_status(&k, "90s").await?;
    ensure!(
        code == 0 && last == "deployment \"web\" successfully rolled out",
        "rollout after the fix: exit {code}, last line {last:?}, stderr {err:?}"
    );
    let rss: Vec<ReplicaSet> = t.env.list().await?;
    let live: Vec<(String, i32)> = rss
        .iter()
        .filter(|rs| rs.spec.replicas.unwrap_or(0) > 0)
        .map(|rs| {
            (
                rs.metadata.name.clone().unwrap_or_default(),
                rs.status
                    .as_ref()
                    .and_then(|s| s.ready_replicas)
                    .unwrap_or(0),
            )
        })
        .collect();
    ensure!(
        live.len() == 1 && live[0].1 == 2 && rss.len() == 3,
        "after the fix: ReplicaSets with replicas {live:?} of {} (want one with 2 ready, of 3)",
        rss.len()
    );
    wait_for("only the fixed template's pods remain", START, || async {
        let ps = pods(t).await?;
        Ok(
            (ps.len() == 2 && ps.iter().all(|p| pod_image(p) == HTTPD_NEXT && is_ready(p)))
                .then_some(()),
        )
    })
    .await
}

real_node_test!(
    real_nodes_deployment_rollout_is_gated_by_http_readiness,
    "rn-deploy",
    "deployment-controller,replicaset-controller",
    scenario
);
