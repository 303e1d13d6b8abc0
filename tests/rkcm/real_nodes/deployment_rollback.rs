//! rkcm's opt-in rollback on progress deadline on real nodes: two Deployments rolled to a
//! container that really crashes (busybox `exit 1`, its HTTP readiness probe failing too).
//! The one annotated `rkcm.io/deployment-rollback-on-progress-deadline: "true"` returns to
//! its previous revision after its 15 s deadline, as `kubectl rollout undo` would (revision
//! 3, the old ReplicaSet reused, `revision-history` 1), with the event, once; then a
//! person's next rollout, whose pods run but fail their readiness probe, is a new revision
//! and is rolled back once more. The other one stays as upstream leaves it: timed out, on
//! the crashing template. With `RKCM_REAL_NODES_MANAGER=upstream` both stay.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Event;
use rkcm_testkit::harness::ManagerKind;
use rkcm_testkit::{holds_for, wait_for};
use serde_json::{Value, json};

use super::{BUSYBOX, HTTPD, HTTPD_NEXT, START, Tier, real_template, subject};
use crate::rollout::Kubectl;

const OPT_IN: &str = "rkcm.io/deployment-rollback-on-progress-deadline";
const ROLLED_BACK_FROM: &str = "rkcm.io/rolled-back-from-revision";
const REVISION: &str = "deployment.kubernetes.io/revision";
const DEADLINE_S: u64 = 15;

fn probe(path: &str) -> Value {
    json!({"httpGet": {"path": path, "port": 80},
        "periodSeconds": 1, "failureThreshold": 1, "successThreshold": 1, "timeoutSeconds": 1})
}

fn httpd(image: &str, probe_path: &str) -> Value {
    json!([{
        "name": "web", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": null, "ports": [{"containerPort": 80}], "readinessProbe": probe(probe_path),
    }])
}

/// A container that exits 1 at once (the kubelet restarts it: CrashLoopBackOff); its
/// readiness probe has nothing to reach.
fn crashing() -> Value {
    json!([{
        "name": "web", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", "exit 1"], "readinessProbe": probe("/index.html"),
    }])
}

fn deployment(name: &str, opt_in: bool) -> Value {
    let mut annotations = json!({"kubernetes.io/change-cause": "httpd"});
    if opt_in {
        annotations[OPT_IN] = json!("true");
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 2,
            "progressDeadlineSeconds": DEADLINE_S,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": real_template(json!({"app": name}), httpd(HTTPD, "/index.html"), json!({})),
        },
    })
}

fn annotation<'a>(d: &'a Deployment, key: &str) -> Option<&'a str> {
    d.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn image(d: &Deployment) -> &str {
    d.spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

fn timed_out(d: &Deployment) -> bool {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_.as_deref() == Some("Progressing")
                && c.status.as_deref() == Some("False")
                && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
        })
}

async fn rolled_out(k: &Kubectl, name: &str) -> anyhow::Result<()> {
    let out = k
        .run(
            &[
                "rollout",
                "status",
                &format!("deployment/{name}"),
                "--timeout=120s",
            ],
            None,
        )
        .await?;
    let last = out.stdout.lines().last().unwrap_or_default();
    ensure!(
        out.code == 0 && last == format!("deployment \"{name}\" successfully rolled out"),
        "rollout of {name}: exit {}, last line {last:?}, stderr {:?}",
        out.code,
        out.stderr
    );
    Ok(())
}

async fn set_containers(t: &Tier<impl Sized>, name: &str, containers: Value) -> anyhow::Result<()> {
    t.env
        .strategic::<Deployment>(
            name,
            json!({"spec": {"template": {"spec": {"containers": containers}}}}),
        )
        .await
        .with_context(|| format!("changing the template of {name}"))?;
    Ok(())
}

/// Waits until `name` was rolled back from revision `from` and is back on `image` under
/// revision `to`, rolled out.
async fn wait_rolled_back(
    t: &Tier<impl Sized>,
    k: &Kubectl,
    name: &str,
    (from, to, image_back): (&str, &str, &str),
) -> anyhow::Result<Deployment> {
    let d = wait_for(
        &format!("{name} rolled back from revision {from} to {image_back} as revision {to}"),
        START + Duration::from_secs(DEADLINE_S * 2),
        || async {
            let d: Deployment = t.env.get(name).await?;
            let ok = annotation(&d, ROLLED_BACK_FROM) == Some(from)
                && annotation(&d, REVISION) == Some(to)
                && image(&d) == image_back;
            Ok(ok.then_some(d))
        },
    )
    .await?;
    rolled_out(k, name).await?;
    Ok(d)
}

/// The `RolledBackOnProgressDeadline` events about `name`.
async fn rollback_events(t: &Tier<impl Sized>, name: &str) -> anyhow::Result<Vec<String>> {
    let events: Vec<Event> = t.env.list().await?;
    let mut out: Vec<String> = events
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("RolledBackOnProgressDeadline")
                && e.involved_object.name.as_deref() == Some(name)
        })
        .map(|e| e.message.unwrap_or_default())
        .collect();
    out.sort();
    Ok(out)
}

/// `name` stays timed out on its crashing template, revision 2, for `period`.
async fn stays_stalled(t: &Tier<impl Sized>, name: &str, period: Duration) -> anyhow::Result<()> {
    wait_for(
        &format!("{name} past its progress deadline"),
        START + Duration::from_secs(DEADLINE_S * 2),
        || async {
            let d: Deployment = t.env.get(name).await?;
            Ok(timed_out(&d).then_some(()))
        },
    )
    .await?;
    holds_for(
        &format!("{name} stays on its crashing revision 2, timed out, not rolled back"),
        period,
        || async {
            let d: Deployment = t.env.get(name).await?;
            Ok(timed_out(&d)
                && image(&d) == BUSYBOX
                && annotation(&d, REVISION) == Some("2")
                && annotation(&d, ROLLED_BACK_FROM).is_none())
        },
    )
    .await?;
    ensure!(
        rollback_events(t, name).await?.is_empty(),
        "{name} got a rollback event"
    );
    Ok(())
}

#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn scenario(t: &Tier<impl Sized>) -> anyhow::Result<()> {
    let k = Kubectl::new(&t.env.cluster, t.env.name())?;
    for (name, opt_in) in [("web", true), ("plain", false)] {
        t.env.create::<Deployment>(deployment(name, opt_in)).await?;
    }
    for name in ["web", "plain"] {
        rolled_out(&k, name).await?;
        set_containers(t, name, crashing()).await?;
    }
    if subject() == ManagerKind::Upstream {
        // Upstream has no such remedy: both stay where the deadline left them.
        for name in ["web", "plain"] {
            stays_stalled(t, name, Duration::from_secs(DEADLINE_S)).await?;
        }
        return Ok(());
    }

    // Opted in: back to revision 1's template, which becomes revision 3.
    let d = wait_rolled_back(t, &k, "web", ("2", "3", HTTPD)).await?;
    ensure!(
        annotation(&d, "kubernetes.io/change-cause") == Some("httpd")
            && annotation(&d, OPT_IN) == Some("true"),
        "annotations after the rollback: {:?}",
        d.metadata.annotations
    );
    let rss: Vec<ReplicaSet> = t.env.list().await?;
    let reused = rss
        .iter()
        .find(|rs| {
            rs.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.get(REVISION).map(String::as_str) == Some("3"))
        })
        .context("no ReplicaSet of revision 3")?;
    let history = reused
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("deployment.kubernetes.io/revision-history"))
        .cloned();
    ensure!(
        history.as_deref() == Some("1")
            && rss
                .iter()
                .filter(|rs| rs
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("app"))
                    .map(String::as_str)
                    == Some("web"))
                .count()
                == 2,
        "the rollback reuses revision 1's ReplicaSet (history {history:?}); ReplicaSets: {:?}",
        rss.iter()
            .map(|rs| (&rs.metadata.name, &rs.metadata.annotations))
            .collect::<Vec<_>>()
    );
    let events = rollback_events(t, "web").await?;
    ensure!(
        events.len() == 1
            && events[0].starts_with(
                "Rolled back deployment \"web\" from revision 2 to revision 1 (ReplicaSet \"web-"
            ),
        "rollback events: {events:?}"
    );

    // Not opted in: as upstream, it stays on the crashing revision.
    stays_stalled(t, "plain", Duration::from_secs(5)).await?;

    // Once per bad revision: revision 3 stays (no second rollback, no loop).
    holds_for(
        "web stays on revision 3 after its rollback",
        Duration::from_secs(DEADLINE_S + 5),
        || async {
            let d: Deployment = t.env.get("web").await?;
            Ok(annotation(&d, REVISION) == Some("3") && image(&d) == HTTPD)
        },
    )
    .await?;

    // A person's next rollout: pods that run but never pass their readiness probe. A new
    // revision (4), so it is rolled back once more, to revision 3's template (now 5).
    set_containers(t, "web", httpd(HTTPD_NEXT, "/missing.html")).await?;
    wait_rolled_back(t, &k, "web", ("4", "5", HTTPD)).await?;
    let events = rollback_events(t, "web").await?;
    ensure!(
        events.len() == 2
            && events.iter().any(|e| e.starts_with(
                "Rolled back deployment \"web\" from revision 4 to revision 3 (ReplicaSet \"web-"
            )),
        "rollback events: {events:?}"
    );
    stays_stalled(t, "plain", Duration::from_secs(2)).await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs real nodes: make test"]
async fn real_nodes_deployment_rolls_back_on_progress_deadline_only_when_opted_in()
-> anyhow::Result<()> {
    let t = Tier::shared(
        "rn-rollback",
        1,
        "deployment-controller,replicaset-controller",
        &[],
    )
    .await?;
    let result = scenario(&t).await;
    t.finish(result).await
}
