//! kubectl rollout parity for DaemonSets: one scripted `kubectl` session — `rollout status`,
//! `history` (and `--revision`), `undo` (and `--to-revision`), `restart` — runs twice at the
//! same time, once in a namespace managed by upstream kube-controller-manager and once in a
//! namespace managed by the rkcm binary (both with `--controllers=daemonset-controller`),
//! and the two normalised transcripts must be equal (see `rollout.rs` for the Deployment
//! session and the shared pieces).
//!
//! Both DaemonSets run on the same three kwok nodes of the test's own (a label unique to the
//! run, the same on both sides, so the pod templates are the same on both sides).
//! Normalised, because they legitimately differ: ControllerRevision hashes (upstream hashes
//! a Go-specific dump of the template, rkcm its own stable hash; each becomes `<R1>`, `<R2>`,
//! ... in order of first appearance, which the script makes deterministic), timestamps
//! (`rollout restart`), and the progress lines `rollout status` prints while it waits (how
//! many depends on timing: each must be one of kubectl's messages, and only the final line is
//! compared).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use rkcm_testkit::harness::pod_image;
use rkcm_testkit::{TestCluster, TestNamespace, wait_for};

use crate::rollout::{
    CHANGE_CAUSE, Kind, Kubectl, Out, Transcript, is_progress, run_side, sides_match, subject,
};

const CONTROLLERS: &str = "daemonset-controller";
const NODE_LABEL: &str = "rkcm.test/ds-rollout";
const TAINT: &str = "rkcm.test/no-schedule";
const HASH_LABEL: &str = "controller-revision-hash";
const NAME: &str = "agent";
/// Bound for one rollout of three pods.
const ROLLOUT: Duration = Duration::from_secs(60);

fn name(meta: &kube::core::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// The progress messages `kubectl rollout status` prints for a DaemonSet while it waits
/// (kubectl `polymorphichelpers/rollout_status.go`).
fn is_progress_line(line: &str) -> bool {
    is_progress(
        line,
        "Waiting for daemon set spec update to be observed...",
        &format!("Waiting for daemon set \"{NAME}\" rollout to finish: "),
        &[
            "# out of # new pods have been updated...",
            "# of # updated pods are available...",
        ],
    )
}

/// `rollout status` while things move.
fn record_status(t: &mut Transcript, step: &str, out: &Out) {
    t.record_status_with(step, out, str::to_owned, is_progress_line);
}

/// Names the hashes of revisions not seen before `<R1>`, `<R2>`, ... (oldest revision first).
fn learn(t: &mut Transcript, revs: &[ControllerRevision]) {
    let mut fresh: Vec<&ControllerRevision> = revs.iter().collect();
    fresh.sort_by_key(|r| r.revision);
    t.hashes
        .name_new(fresh.into_iter().filter_map(hash_of), "R");
}

fn hash_of(r: &ControllerRevision) -> Option<&str> {
    r.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(HASH_LABEL))
        .map(String::as_str)
}

/// The image in a revision's data (`spec.template.spec.containers[0].image`).
fn revision_image(r: &ControllerRevision) -> String {
    r.data.0["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn annotation<'a>(meta: &'a kube::core::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The DaemonSet, its revisions (by revision number) and pods, once the rollout is done:
/// status of the generation, every counter at the node count, one ready pod per node of the
/// template's image, no pod terminating.
async fn wait_settled(
    ns: &TestNamespace,
    nodes: i32,
) -> anyhow::Result<(DaemonSet, Vec<ControllerRevision>, Vec<Pod>)> {
    wait_for(
        &format!("daemon set {NAME} settled on {nodes} nodes"),
        ROLLOUT,
        || async {
            let d = ns.api::<DaemonSet>().get(NAME).await?;
            let st = d.status.clone().unwrap_or_default();
            let image = d
                .spec
                .template
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            let pods = ns.api::<Pod>().list(&ListParams::default()).await?.items;
            let settled = st.observed_generation == d.metadata.generation
                && st.desired_number_scheduled == nodes
                && st.updated_number_scheduled == Some(nodes)
                && st.number_available == Some(nodes)
                && st.number_ready == nodes
                && pods.len() == usize::try_from(nodes).unwrap_or(0)
                && pods
                    .iter()
                    .all(|p| p.metadata.deletion_timestamp.is_none() && pod_image(p) == image);
            if !settled {
                return Ok(None);
            }
            let mut revs = ns
                .api::<ControllerRevision>()
                .list(&ListParams::default())
                .await?
                .items;
            revs.sort_by_key(|r| r.revision);
            Ok(Some((d, revs, pods)))
        },
    )
    .await
}

/// What must be equal on both sides after each settled step.
/// A DaemonSet's status counters, as the DaemonSet tests compare them.
pub(crate) fn counters(st: &DaemonSetStatus) -> String {
    format!(
        "desired={} current={} updated={:?} ready={} available={:?} unavailable={:?} misscheduled={} collisionCount={:?}",
        st.desired_number_scheduled,
        st.current_number_scheduled,
        st.updated_number_scheduled,
        st.number_ready,
        st.number_available,
        st.number_unavailable,
        st.number_misscheduled,
        st.collision_count,
    )
}

fn describe(d: &DaemonSet, revs: &[ControllerRevision], pods: &[Pod]) -> String {
    let st = d.status.clone().unwrap_or_default();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "daemonset {}: generation={:?} observed={:?} template-generation={:?} change-cause={:?}",
        name(&d.metadata),
        d.metadata.generation,
        st.observed_generation,
        annotation(&d.metadata, "deprecated.daemonset.template.generation"),
        annotation(&d.metadata, CHANGE_CAUSE),
    );
    let _ = writeln!(s, "  status: {}", counters(&st));
    for r in revs {
        let _ = writeln!(
            s,
            "  revision {} revision={:?} hash={:?} image={} change-cause={:?}",
            name(&r.metadata),
            r.revision,
            hash_of(r),
            revision_image(r),
            annotation(&r.metadata, CHANGE_CAUSE),
        );
    }
    let mut by_image: BTreeMap<(String, Option<String>, Option<String>), usize> = BTreeMap::new();
    for p in pods {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        *by_image
            .entry((
                pod_image(p).to_owned(),
                labels.get(HASH_LABEL).cloned(),
                labels.get("pod-template-generation").cloned(),
            ))
            .or_default() += 1;
    }
    for ((image, hash, generation), n) in by_image {
        let _ = writeln!(
            s,
            "  {n} pods image={image} hash={hash:?} pod-template-generation={generation:?}"
        );
    }
    s
}

/// The scripted session against whatever manages `ns`.
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn session(
    ns: &TestNamespace,
    k: &Kubectl,
    kind: Kind,
    group: &str,
    nodes: i32,
) -> anyhow::Result<Transcript> {
    let mut t = Transcript::new(kind);
    let status = [
        "rollout",
        "status",
        &format!("daemonset/{NAME}"),
        "--timeout=90s",
    ]
    .map(str::to_owned);
    let status: Vec<&str> = status.iter().map(String::as_str).collect();
    let target = format!("daemonset/{NAME}");

    async fn settle(
        t: &mut Transcript,
        ns: &TestNamespace,
        nodes: i32,
        step: &str,
    ) -> anyhow::Result<()> {
        let (d, revs, pods) = wait_settled(ns, nodes)
            .await
            .with_context(|| format!("after step {step:?}"))?;
        learn(t, &revs);
        t.push(&format!("{step}: state"), describe(&d, &revs, &pods));
        Ok(())
    }

    let manifest = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": NAME, "annotations": {CHANGE_CAUSE: "create v1"}},
        "spec": {
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "nodeSelector": {NODE_LABEL: group},
                    "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": "registry.example/agent:v1"}],
                },
            },
        },
    });
    t.record(
        "create",
        &k.run(&["create", "-f", "-"], Some(&manifest.to_string()))
            .await?,
    );
    record_status(&mut t, "rollout status (v1)", &k.run(&status, None).await?);
    settle(&mut t, ns, nodes, "v1").await?;
    t.record(
        "history",
        &k.run(&["rollout", "history", &target], None).await?,
    );

    // Revisions 2 and 3: image and change cause in one patch.
    for v in ["v2", "v3"] {
        let patch = serde_json::json!({
            "metadata": {"annotations": {CHANGE_CAUSE: format!("image {v}")}},
            "spec": {"template": {"spec": {"containers": [
                {"name": "main", "image": format!("registry.example/agent:{v}")}]}}},
        });
        t.record(
            &format!("patch {v}"),
            &k.run(&["patch", &target, "-p", &patch.to_string()], None)
                .await?,
        );
        record_status(
            &mut t,
            &format!("rollout status ({v})"),
            &k.run(&status, None).await?,
        );
        settle(&mut t, ns, nodes, v).await?;
    }
    t.record(
        "history 1..3",
        &k.run(&["rollout", "history", &target], None).await?,
    );
    t.record(
        "history --revision=2",
        &k.run(&["rollout", "history", &target, "--revision=2"], None)
            .await?,
    );
    t.record(
        "history --revision=9 (none)",
        &k.run(&["rollout", "history", &target, "--revision=9"], None)
            .await?,
    );

    t.record("undo", &k.run(&["rollout", "undo", &target], None).await?);
    record_status(
        &mut t,
        "rollout status (undo)",
        &k.run(&status, None).await?,
    );
    settle(&mut t, ns, nodes, "undo").await?;
    t.record(
        "history after undo",
        &k.run(&["rollout", "history", &target], None).await?,
    );
    t.record(
        "undo --to-revision=1",
        &k.run(&["rollout", "undo", &target, "--to-revision=1"], None)
            .await?,
    );
    record_status(
        &mut t,
        "rollout status (undo to 1)",
        &k.run(&status, None).await?,
    );
    settle(&mut t, ns, nodes, "undo to 1").await?;
    t.record(
        "undo --to-revision=1 again (no change)",
        &k.run(&["rollout", "undo", &target, "--to-revision=1"], None)
            .await?,
    );
    t.record(
        "history after undo to 1",
        &k.run(&["rollout", "history", &target], None).await?,
    );

    t.record(
        "restart",
        &k.run(&["rollout", "restart", &target], None).await?,
    );
    record_status(
        &mut t,
        "rollout status (restart)",
        &k.run(&status, None).await?,
    );
    settle(&mut t, ns, nodes, "restart").await?;
    t.record(
        "history after restart",
        &k.run(&["rollout", "history", &target], None).await?,
    );
    Ok(t)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn kubectl_rollout_daemonset_session_matches_upstream() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let group = rkcm_testkit::unique_name("ds-rollout");
    let nodes_api: Api<Node> = Api::all(cluster.client());
    let mut nodes = Vec::new();
    for i in 0..3 {
        let n = format!("{group}-n{i}");
        let node: Node = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n, "labels": {NODE_LABEL: group, "kubernetes.io/hostname": n},
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]},
        }))?;
        nodes_api.create(&PostParams::default(), &node).await?;
        nodes.push(n);
    }
    let count = i32::try_from(nodes.len())?;
    let side = |kind: Kind, prefix: &'static str| {
        let (cluster, group) = (&cluster, &group);
        run_side(
            cluster,
            kind,
            prefix,
            CONTROLLERS,
            async move |ns: &TestNamespace, k: &Kubectl| {
                let result = session(ns, k, kind, group, count).await;
                // Pods bound to the test's nodes never finish terminating once the nodes are gone.
                let _ = ns
                    .api::<Pod>()
                    .delete_collection(
                        &DeleteParams::default().grace_period(0),
                        &ListParams::default(),
                    )
                    .await;
                result
            },
        )
    };
    let (reference, tested) = tokio::join!(
        side(Kind::Upstream, "ds-rollout-upstream"),
        side(subject(), "ds-rollout-subject"),
    );
    for n in &nodes {
        let _ = nodes_api.delete(n, &DeleteParams::default()).await;
    }
    sides_match(reference, tested)
}

#[test]
fn progress_lines_are_kubectls() {
    assert!(is_progress_line(
        "Waiting for daemon set \"agent\" rollout to finish: 1 out of 3 new pods have been updated..."
    ));
    assert!(is_progress_line(
        "Waiting for daemon set \"agent\" rollout to finish: 2 of 3 updated pods are available..."
    ));
    assert!(is_progress_line(
        "Waiting for daemon set spec update to be observed..."
    ));
    assert!(!is_progress_line(
        "Waiting for daemon set \"agent\" rollout to finish: x of 3 updated pods are available..."
    ));
    assert!(!is_progress_line(
        "daemon set \"agent\" successfully rolled out"
    ));
}
