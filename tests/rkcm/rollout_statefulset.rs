//! kubectl rollout parity for StatefulSets (the suite of `rollout.rs`, for
//! `statefulset-controller`): one scripted `kubectl` session — `rollout status` (RollingUpdate,
//! a partition, OnDelete), `history` (and `--revision`), `undo` (and `--to-revision`),
//! `restart`, `scale` — runs twice at the same time, once in a namespace managed by upstream
//! kube-controller-manager and once in one managed by the rkcm binary, and the two normalised
//! transcripts must be equal.
//!
//! Normalised only where the two sides legitimately differ: timestamps, the namespace's name,
//! and the names of the revisions made by `rollout restart` (their template carries the restart time, so their
//! hash differs). Every other revision name is compared as it is: rkcm names revisions by the
//! same hash of the same bytes as upstream. The progress lines `rollout status` prints while
//! it waits are checked to be kubectl's messages, then dropped (how many depends on timing).
//! After every settled step the set's status, its revisions (number, change cause) and its
//! pods' revisions are part of the transcript.
//!
//! `RKCM_PARITY_SUBJECT=upstream` runs upstream on both sides (a dry run of the comparison).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use rkcm_testkit::{TestCluster, TestNamespace};

use crate::rollout::{
    CHANGE_CAUSE, Hashes, Kind, Kubectl, Out, Side, Transcript, annotation, is_progress, run_side,
    sides_match, subject,
};
use crate::statefulset_takeover::{STS_CONTROLLERS, STS_WITHIN, sts_manifest};

const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
const STATUS: [&str; 4] = ["rollout", "status", "statefulset/web", "--timeout=60s"];

/// The progress messages `kubectl rollout status` prints for a StatefulSet while it waits
/// (kubectl `polymorphichelpers/rollout_status.go`, `StatefulSetStatusViewer`).
fn is_sts_progress_line(line: &str) -> bool {
    is_progress(
        line,
        "Waiting for statefulset spec update to be observed...",
        "",
        &[
            "Waiting for # pods to be ready...",
            "Waiting for partitioned roll out to finish: # out of # new pods have been updated...",
            "waiting for statefulset rolling update to complete # pods at revision *...",
        ],
    )
}

/// `rollout status` while things move: progress lines are checked, then dropped.
fn record_status(t: &mut Transcript, step: &str, out: &Out) {
    record_status_within(t, step, out, None);
}

/// The final line of `rollout status` after a scale-down: kubectl reports
/// `status.updatedReplicas` of the first status that observed the new generation, and how
/// many condemned pods are already gone by then depends on when kubectl's first list lands
/// (for either manager). A count within `lo..=hi` (new and old replicas) is replaced by
/// `<lo..hi>`; anything else stays as printed, so it shows up in the diff.
fn normalize_updated_count(last: &str, lo: i32, hi: i32) -> String {
    const HEAD: &str = "partitioned roll out complete: ";
    const TAIL: &str = " new pods have been updated...";
    let Some(n) = last
        .strip_prefix(HEAD)
        .and_then(|r| r.strip_suffix(TAIL))
        .and_then(|n| n.parse::<i32>().ok())
    else {
        return last.to_owned();
    };
    if (lo..=hi).contains(&n) {
        format!("{HEAD}<{lo}..{hi}>{TAIL}")
    } else {
        last.to_owned()
    }
}

fn record_status_within(t: &mut Transcript, step: &str, out: &Out, range: Option<(i32, i32)>) {
    let last = |last: &str| match range {
        Some((lo, hi)) => normalize_updated_count(last, lo, hi),
        None => last.to_owned(),
    };
    t.record_status_with(step, out, last, is_sts_progress_line);
}

/// Names of revisions whose template carries a restart time, `<restart N>` in order of
/// `.revision`; applied to every transcript entry before comparing.
type Restarts = Hashes;

fn learn_restarts(restarts: &mut Restarts, revisions: &[ControllerRevision]) {
    for r in revisions {
        let name = r.metadata.name.clone().unwrap_or_default();
        let restarted = r.data.0.to_string().contains(RESTARTED_AT);
        if restarted && !restarts.contains(&name) {
            let n = restarts.len() / 2 + 1;
            // The hash label is the name without `web-`.
            if let Some(hash) = name.strip_prefix("web-") {
                restarts.name(hash.to_owned(), format!("<restart {n} hash>"));
            }
            restarts.name(name, format!("<restart {n}>"));
        }
    }
}

/// The set's revisions, by `.revision`.
async fn revisions(ns: &TestNamespace) -> anyhow::Result<Vec<ControllerRevision>> {
    let mut r = ns
        .api::<ControllerRevision>()
        .list(&ListParams::default())
        .await?
        .items;
    r.sort_by_key(|r| r.revision);
    Ok(r)
}

/// The state that must be equal on both sides: the set's spec and status, its revisions and
/// its pods' revisions.
fn describe(s: &StatefulSet, revs: &[ControllerRevision], pods: &[Pod]) -> String {
    let st = s.status.clone().unwrap_or_default();
    let image = s
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let strategy = s.spec.update_strategy.clone().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "statefulset web: generation={:?} replicas={:?} image={image} strategy={:?} partition={:?}",
        s.metadata.generation,
        s.spec.replicas,
        strategy.type_,
        strategy.rolling_update.and_then(|r| r.partition),
    );
    let _ = writeln!(
        out,
        "  status: observed={:?} replicas={} ready={:?} available={:?} current={:?} updated={:?} currentRevision={:?} updateRevision={:?} collisionCount={:?}",
        st.observed_generation,
        st.replicas,
        st.ready_replicas,
        st.available_replicas,
        st.current_replicas,
        st.updated_replicas,
        st.current_revision,
        st.update_revision,
        st.collision_count,
    );
    for r in revs {
        let _ = writeln!(
            out,
            "  revision {} number={:?} change-cause={:?} hash-label={:?}",
            r.metadata.name.as_deref().unwrap_or(""),
            r.revision,
            annotation(&r.metadata, CHANGE_CAUSE),
            r.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("controller.kubernetes.io/hash")),
        );
    }
    let mut pods: Vec<String> = pods
        .iter()
        .map(|p| {
            format!(
                "  pod {} revision={:?}",
                p.metadata.name.as_deref().unwrap_or(""),
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("controller-revision-hash")),
            )
        })
        .collect();
    pods.sort();
    for p in pods {
        let _ = writeln!(out, "{p}");
    }
    out
}

/// Waits until the set has settled as its controller leaves it: generation observed, every
/// pod that should exist Ready, a rolling update done down to the partition, revision
/// history truncated; then records the state.
async fn settle(
    t: &mut Transcript,
    restarts: &mut Restarts,
    ns: &TestNamespace,
    step: &str,
) -> anyhow::Result<()> {
    let state = rkcm_testkit::wait_for(
        &format!("statefulset web to settle after {step:?}"),
        STS_WITHIN,
        || async {
            let s = ns.api::<StatefulSet>().get("web").await?;
            let st = s.status.clone().unwrap_or_default();
            let want = s.spec.replicas.unwrap_or(1);
            let strategy = s.spec.update_strategy.clone().unwrap_or_default();
            let partition = strategy
                .rolling_update
                .as_ref()
                .and_then(|r| r.partition)
                .unwrap_or(0);
            let rolling = strategy.type_.as_deref() != Some("OnDelete");
            let pods: Vec<Pod> = ns.api::<Pod>().list(&ListParams::default()).await?.items;
            let revs = revisions(ns).await?;
            let limit = usize::try_from(s.spec.revision_history_limit.unwrap_or(10)).unwrap_or(0);
            // Revision history is truncated to `limit` revisions besides the live ones.
            let mut live: BTreeSet<String> = pods
                .iter()
                .filter_map(|p| {
                    p.metadata
                        .labels
                        .as_ref()?
                        .get("controller-revision-hash")
                        .cloned()
                })
                .collect();
            live.extend(st.current_revision.clone());
            live.extend(st.update_revision.clone());
            let history = revs
                .iter()
                .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or("")))
                .count();
            let at = |rev: &Option<String>| {
                pods.iter()
                    .filter(|p| {
                        p.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get("controller-revision-hash"))
                            == rev.as_ref()
                    })
                    .count()
            };
            // The status counts what the pods show (not a status from before the last step).
            let counted = usize::try_from(st.current_replicas.unwrap_or(0)).ok()
                == Some(at(&st.current_revision))
                && usize::try_from(st.updated_replicas.unwrap_or(0)).ok()
                    == Some(at(&st.update_revision));
            let settled = counted
                && st.observed_generation == s.metadata.generation
                && st.replicas == want
                && st.ready_replicas == Some(want)
                && st.available_replicas == Some(want)
                && usize::try_from(want).ok() == Some(pods.len())
                && pods.iter().all(|p| p.metadata.deletion_timestamp.is_none())
                && (!rolling || st.updated_replicas.unwrap_or(0) >= want - partition.min(want))
                && (!rolling || partition > 0 || st.current_revision == st.update_revision)
                && history <= limit;
            Ok(settled.then_some((s, revs, pods)))
        },
    )
    .await?;
    let (s, revs, pods) = state;
    learn_restarts(restarts, &revs);
    t.push(&format!("{step}: state"), describe(&s, &revs, &pods));
    Ok(())
}

/// The scripted session on one side.
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn session(ns: &TestNamespace, k: &Kubectl) -> anyhow::Result<(Transcript, Restarts)> {
    let mut t = Transcript::new(Kind::Upstream);
    let mut r = Restarts::default();
    let manifest = sts_manifest(
        "web",
        3,
        "registry.example/web:v1",
        serde_json::json!({"revisionHistoryLimit": 4}),
    );
    t.record(
        "create",
        &k.run(&["create", "-f", "-"], Some(&manifest.to_string()))
            .await?,
    );
    let out = k.run(&STATUS, None).await?;
    record_status(&mut t, "rollout status (v1)", &out);
    settle(&mut t, &mut r, ns, "v1").await?;

    // v2 and v3, each with a change cause (copied into the revision when it is created).
    for v in ["v2", "v3"] {
        let cause = format!("{CHANGE_CAUSE}=set image {v}");
        t.record(
            &format!("annotate {v}"),
            &k.run(
                &["annotate", "statefulset/web", &cause, "--overwrite"],
                None,
            )
            .await?,
        );
        let image = format!("app=registry.example/web:{v}");
        t.record(
            &format!("set image {v}"),
            &k.run(&["set", "image", "statefulset/web", &image], None)
                .await?,
        );
        let out = k.run(&STATUS, None).await?;
        record_status(&mut t, &format!("rollout status ({v})"), &out);
        settle(&mut t, &mut r, ns, v).await?;
    }
    for (step, args) in [
        (
            "history 1..3",
            vec!["rollout", "history", "statefulset/web"],
        ),
        (
            "history --revision=1",
            vec!["rollout", "history", "statefulset/web", "--revision=1"],
        ),
        (
            "history --revision=99",
            vec!["rollout", "history", "statefulset/web", "--revision=99"],
        ),
    ] {
        t.record(step, &k.run(&args, None).await?);
    }

    // undo: back to v2 (its revision renumbered 4), then --to-revision=1 (v1 again, 5).
    t.record(
        "undo",
        &k.run(&["rollout", "undo", "statefulset/web"], None).await?,
    );
    let out = k.run(&STATUS, None).await?;
    record_status(&mut t, "rollout status (undo)", &out);
    settle(&mut t, &mut r, ns, "undo").await?;
    t.record(
        "undo --to-revision=1",
        &k.run(
            &["rollout", "undo", "statefulset/web", "--to-revision=1"],
            None,
        )
        .await?,
    );
    let out = k.run(&STATUS, None).await?;
    record_status(&mut t, "rollout status (undo to 1)", &out);
    settle(&mut t, &mut r, ns, "undo to 1").await?;
    for (step, args) in [
        (
            "history after undo",
            vec!["rollout", "history", "statefulset/web"],
        ),
        (
            "undo --to-revision=5 (current)",
            vec!["rollout", "undo", "statefulset/web", "--to-revision=5"],
        ),
        (
            "undo --to-revision=99",
            vec!["rollout", "undo", "statefulset/web", "--to-revision=99"],
        ),
    ] {
        t.record(step, &k.run(&args, None).await?);
    }

    // restart: a new template annotation, a new revision (its name normalised).
    t.record(
        "restart",
        &k.run(&["rollout", "restart", "statefulset/web"], None)
            .await?,
    );
    let out = k.run(&STATUS, None).await?;
    record_status(&mut t, "rollout status (restart)", &out);
    settle(&mut t, &mut r, ns, "restart").await?;
    t.record(
        "history after restart",
        &k.run(&["rollout", "history", "statefulset/web"], None)
            .await?,
    );

    // A partition: only the ordinals from 2 up take v4; status says the partitioned roll
    // out is complete; lowering the partition to 0 finishes it.
    t.record(
        "partition 2",
        &k.run(
            &[
                "patch",
                "statefulset/web",
                "-p",
                r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}}}}"#,
            ],
            None,
        )
        .await?,
    );
    t.record(
        "set image v4 (partition 2)",
        &k.run(
            &[
                "set",
                "image",
                "statefulset/web",
                "app=registry.example/web:v4",
            ],
            None,
        )
        .await?,
    );
    let out = k.run(&STATUS, None).await?;
    record_status(&mut t, "rollout status (partition 2)", &out);
    settle(&mut t, &mut r, ns, "partition 2").await?;
    t.record(
        "status --watch=false (partition 2)",
        &k.run(
            &["rollout", "status", "statefulset/web", "--watch=false"],
            None,
        )
        .await?,
    );
    t.record(
        "partition 0",
        &k.run(
            &[
                "patch",
                "statefulset/web",
                "-p",
                r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#,
            ],
            None,
        )
        .await?,
    );
    let out = k.run(&STATUS, None).await?;
    record_status(&mut t, "rollout status (partition 0)", &out);
    settle(&mut t, &mut r, ns, "partition 0").await?;

    // scale: up, down, a wrong precondition.
    t.record(
        "scale --current-replicas=7 (wrong)",
        &k.run(
            &[
                "scale",
                "statefulset/web",
                "--current-replicas=7",
                "--replicas=2",
            ],
            None,
        )
        .await?,
    );
    // Scale-up waits for every pod, so its count is exact; a scale-down's count is
    // anywhere between the new and the old replicas (see `normalize_updated_count`).
    for (n, range) in [("5", None), ("2", Some((2, 5)))] {
        t.record(
            &format!("scale {n}"),
            &k.run(
                &["scale", "statefulset/web", &format!("--replicas={n}")],
                None,
            )
            .await?,
        );
        let out = k.run(&STATUS, None).await?;
        record_status_within(&mut t, &format!("rollout status (scale {n})"), &out, range);
        settle(&mut t, &mut r, ns, &format!("scale {n}")).await?;
    }

    // OnDelete: rollout status refuses; a template change rolls nothing until a pod is
    // deleted.
    t.record(
        "OnDelete",
        &k.run(
            &[
                "patch",
                "statefulset/web",
                "--type=json",
                "-p",
                r#"[{"op":"replace","path":"/spec/updateStrategy","value":{"type":"OnDelete"}}]"#,
            ],
            None,
        )
        .await?,
    );
    t.record(
        "set image v5 (OnDelete)",
        &k.run(
            &[
                "set",
                "image",
                "statefulset/web",
                "app=registry.example/web:v5",
            ],
            None,
        )
        .await?,
    );
    t.record("rollout status (OnDelete)", &k.run(&STATUS, None).await?);
    settle(&mut t, &mut r, ns, "OnDelete, v5").await?;
    // Not `--wait=true`: kubectl before v1.36 waits until no pod of that name exists, and the
    // StatefulSet controller creates web-1 again at once; wait for the replacement instead.
    let pods = ns.api::<Pod>();
    let old_uid = pods.get("web-1").await?.metadata.uid;
    t.record(
        "delete pod web-1",
        &k.run(&["delete", "pod", "web-1", "--wait=false"], None)
            .await?,
    );
    rkcm_testkit::wait_for("web-1 replaced", STS_WITHIN, || async {
        let p = pods.get_opt("web-1").await?;
        Ok(
            p.filter(|p| p.metadata.uid != old_uid && p.metadata.deletion_timestamp.is_none())
                .map(|_| ()),
        )
    })
    .await?;
    settle(&mut t, &mut r, ns, "OnDelete, web-1 deleted").await?;
    t.record(
        "history final",
        &k.run(&["rollout", "history", "statefulset/web"], None)
            .await?,
    );

    // Which events the set got (kinds only: how many of each depends on timing).
    t.record_event_kinds(ns, "StatefulSet", "statefulset event kinds")
        .await?;
    Ok((t, r))
}

/// One side: its transcript normalised (as a fresh [`Transcript`] of the side's kind).
async fn run_sts_side(cluster: &TestCluster, kind: Kind, prefix: &str) -> anyhow::Result<Side> {
    run_side(
        cluster,
        kind,
        prefix,
        STS_CONTROLLERS,
        async |ns: &TestNamespace, k: &Kubectl| {
            let (raw, restarts) = session(ns, k).await?;
            // Revision names made by restarts differ between the sides: name them by order; the
            // namespaces differ too.
            let mut t = Transcript::new(kind);
            for e in raw.entries() {
                t.push(
                    &e.step,
                    restarts.apply(&e.text).replace(ns.name(), "<namespace>"),
                );
            }
            Ok(t)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn kubectl_rollout_statefulset_session_matches_upstream() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let (reference, tested) = tokio::join!(
        run_sts_side(&cluster, Kind::Upstream, "sts-rollout-upstream"),
        run_sts_side(&cluster, subject(), "sts-rollout-subject"),
    );
    sides_match(reference, tested)
}

#[test]
fn statefulset_progress_lines() {
    for l in [
        "Waiting for statefulset spec update to be observed...",
        "Waiting for 2 pods to be ready...",
        "Waiting for partitioned roll out to finish: 1 out of 3 new pods have been updated...",
        "waiting for statefulset rolling update to complete 2 pods at revision web-5d9f8b...",
    ] {
        assert!(is_sts_progress_line(l), "{l}");
    }
    assert!(!is_sts_progress_line(
        "partitioned roll out complete: 3 new pods have been updated..."
    ));
    let mut r = Restarts::default();
    r.name("web-abc".into(), "<restart 1>".into());
    assert_eq!(
        r.apply("revision web-abc and web-abd"),
        "revision <restart 1> and web-abd"
    );
}

#[test]
fn scale_down_count_is_normalized_only_within_range() {
    let line =
        |n: &str| format!("partitioned roll out complete: {n} new pods have been updated...");
    for n in ["2", "4", "5"] {
        assert_eq!(
            normalize_updated_count(&line(n), 2, 5),
            line("<2..5>"),
            "count {n}"
        );
    }
    for n in ["1", "6"] {
        assert_eq!(
            normalize_updated_count(&line(n), 2, 5),
            line(n),
            "count {n}"
        );
    }
    let other = "Waiting for 2 pods to be ready...";
    assert_eq!(normalize_updated_count(other, 2, 5), other);
}
