//! Handover between upstream kube-controller-manager and rkcm without churn: the same
//! ControllerRevision names and data, so neither side creates a revision or replaces a pod
//! (the lib docs' takeover guarantee; upstream
//! `pkg/controller/history/controller_history.go` names revisions by hash).
//!
//! Upstream runs as the testkit's [`Manager`], confined to the test's namespace.

use anyhow::{Result, ensure};
use rkcm_testkit::holds_for;
use serde_json::json;

use crate::harness::*;

/// Upstream kube-controller-manager running only the StatefulSet controller, confined to
/// the test namespace.
async fn start_upstream(env: &Env<'_>) -> Result<Manager> {
    Manager::start(
        ManagerKind::Upstream,
        &env.cluster,
        env.name(),
        "statefulset-controller",
    )
    .await
}

async fn snapshot(env: &Env<'_>) -> Result<(Vec<(String, i64)>, Vec<Option<String>>)> {
    let revs = env
        .revision_list()
        .await?
        .into_iter()
        .map(|r| (r.metadata.name.unwrap_or_default(), r.revision.unwrap_or(0)))
        .collect();
    let mut pods: Vec<_> = env
        .pods()
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .map(|p| p.metadata.uid)
        .collect();
    pods.sort();
    Ok((revs, pods))
}

rkcm_testkit::scenario! {
    handover_with_upstream_creates_no_revision, "sts-takeover", handover
}

/// Upstream builds a set (with HTML characters in an annotation, which Go escapes in the
/// revision data); rkcm takes over and creates nothing; rkcm rolls a new image; upstream takes
/// back and creates nothing either.
async fn handover(base: &Base) -> Result<()> {
    if std::env::var_os(E2E_BIN_ENV).is_none() {
        eprintln!(
            "skipped: needs the local plane's upstream kube-controller-manager ({E2E_BIN_ENV})"
        );
        return Ok(());
    }
    let mut env = Env::new(base);
    env.stop_controller().await?;
    let r = async {
        let upstream = start_upstream(&env).await?;
        env.create_set(merge(
            sts("web", 3),
            json!({"spec": {"template": {"metadata": {"annotations": {"note": "a<b>&c \"q\""}}}}}),
        ))
        .await?;
        let by_upstream = env.wait_settled("web", 3).await?;
        let before = snapshot(&env).await?;
        ensure!(before.0.len() == 1, "upstream made {:?}", before.0);
        upstream.stop().await?;

        env.start_controller();
        holds_for("rkcm keeps upstream's revision and pods", HOLDS, || async {
            Ok(snapshot(&env).await? == before)
        })
        .await?;
        let st = env.status("web").await?;
        ensure!(st.update_revision == by_upstream.update_revision, "{st:?}");

        env.set_image("web", V2).await?;
        let by_rkcm = env
            .wait_status("web", "rkcm rolled V2", |s, st| {
                st.observed_generation == s.metadata.generation
                    && st.update_revision != by_upstream.update_revision
                    && st.current_revision == st.update_revision
                    && st.ready_replicas == Some(3)
            })
            .await?;
        let after_rkcm = snapshot(&env).await?;
        env.stop_controller().await?;

        let upstream = start_upstream(&env).await?;
        holds_for(
            "upstream keeps rkcm's revisions and pods",
            HOLDS,
            || async { Ok(snapshot(&env).await? == after_rkcm) },
        )
        .await?;
        let st = env.status("web").await?;
        ensure!(
            st.update_revision == by_rkcm.update_revision,
            "{st:?} vs {by_rkcm:?}"
        );
        upstream.stop().await?;
        Ok(())
    }
    .await;
    env.finish(r).await
}
