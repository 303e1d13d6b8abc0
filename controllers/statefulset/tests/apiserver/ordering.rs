//! Ordered and parallel creation and scale-down, identity, status, the first revision and
//! events (§9 1, 2, 3, 4, 5, 7, 9, 10, 27).

use anyhow::{Result, ensure};
use serde_json::json;

use crate::harness::*;

rkcm_testkit::scenario! {
    ordered_creation_identity_status_and_revision, "sts-order", ordered_creation_identity_status_and_revision_in
}

/// §9 1, 2, 3, 4, 27: OrderedReady creates web-0, web-1, web-2 in order, each only after its
/// predecessor is Running and Ready; identities, status, the one revision, the create event.
#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn ordered_creation_identity_status_and_revision_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        let hist = env.pod_history().await?;
        let set = env.create_set(sts("web", 3)).await?;
        let pods = env.wait_ready_pods(&["web-0", "web-1", "web-2"]).await?;
        let st = env.wait_settled("web", 3).await?;

        // 1: order, and every predecessor ready when its successor first appeared.
        ensure!(
            hist.creation_order()? == ["web-0", "web-1", "web-2"],
            "order {:?}",
            hist.creation_order()?
        );
        let all = hist.seen()?;
        for k in 1..3 {
            let at = hist.first_seen(&format!("web-{k}"))?.unwrap_or(0);
            let prev = format!("web-{}", k - 1);
            let before = all[..at]
                .iter()
                .rev()
                .find(|s| s.object().metadata.name.as_deref() == Some(prev.as_str()));
            ensure!(
                before.is_some_and(|s| is_ready(s.object())),
                "{prev} was not ready when web-{k} appeared"
            );
        }
        hist.assert_one_per_name()?;

        // 2: identity.
        for p in &pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            let ord = name.trim_start_matches("web-");
            let spec = p.spec.clone().unwrap_or_default();
            ensure!(
                spec.hostname.as_deref() == Some(name.as_str()),
                "hostname of {name}"
            );
            ensure!(
                spec.subdomain.as_deref() == Some("web"),
                "subdomain of {name}"
            );
            let l = p.metadata.labels.clone().unwrap_or_default();
            ensure!(
                l.get("statefulset.kubernetes.io/pod-name") == Some(&name),
                "pod-name label of {name}"
            );
            ensure!(
                l.get("apps.kubernetes.io/pod-index").map(String::as_str) == Some(ord),
                "pod-index of {name}"
            );
            ensure!(
                l.get(REVISION_LABEL) == st.update_revision.as_ref(),
                "revision label of {name}"
            );
            ensure!(
                p.metadata.generate_name.as_deref() == Some("web-"),
                "generateName of {name}"
            );
            let refs = p.metadata.owner_references.clone().unwrap_or_default();
            ensure!(refs.len() == 1, "owner refs of {name}: {refs:?}");
            ensure!(
                refs[0].kind == "StatefulSet"
                    && refs[0].uid == set.metadata.uid.clone().unwrap_or_default()
                    && refs[0].controller == Some(true)
                    && refs[0].block_owner_deletion == Some(true),
                "owner ref of {name}: {refs:?}"
            );
        }

        // 3: status.
        ensure!(st.available_replicas == Some(3), "{st:?}");
        ensure!(st.collision_count == Some(0), "{st:?}");

        // 4: exactly one revision of upstream's shape.
        let revs = env.revision_list().await?;
        ensure!(revs.len() == 1, "revisions: {}", revs.len());
        let rev = &revs[0];
        let rname = rev.metadata.name.clone().unwrap_or_default();
        ensure!(
            Some(&rname) == st.update_revision.as_ref(),
            "{rname} vs {st:?}"
        );
        let hash = rname.trim_start_matches("web-");
        let l = rev.metadata.labels.clone().unwrap_or_default();
        ensure!(
            l.get("controller.kubernetes.io/hash").map(String::as_str) == Some(hash),
            "{l:?}"
        );
        ensure!(l.get("app").map(String::as_str) == Some("web"), "{l:?}");
        ensure!(rev.revision == Some(1));
        let refs = rev.metadata.owner_references.clone().unwrap_or_default();
        ensure!(
            refs.len() == 1 && refs[0].name == "web" && refs[0].controller == Some(true),
            "{refs:?}"
        );
        ensure!(
            rev.data.0["spec"]["template"]["$patch"] == "replace",
            "{:?}",
            rev.data.0
        );
        ensure!(rev.data.0["spec"]["template"]["spec"]["containers"][0]["image"] == V1);

        // 27: events.
        env.wait_event(
            "web",
            "SuccessfulCreate",
            "create Pod web-0 in StatefulSet web successful",
        )
        .await?;
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    ordered_scale_down_from_the_highest_ordinal, "sts-down", ordered_scale_down_from_the_highest_ordinal_in
}

/// §9 7: scale 3 -> 1 deletes web-2 first and web-1 only once web-2 is gone.
async fn ordered_scale_down_from_the_highest_ordinal_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(sts("web", 3)).await?;
        env.wait_settled("web", 3).await?;
        let hist = env.pod_history().await?;
        env.scale("web", 1).await?;
        env.wait_ready_pods(&["web-0"]).await?;
        env.wait_settled("web", 1).await?;
        let gone2 = hist
            .position(|s| s.is_deleted() && s.object().metadata.name.as_deref() == Some("web-2"))?;
        let term2 = hist.terminating_at("web-2")?;
        let term1 = hist.terminating_at("web-1")?;
        ensure!(
            term2.is_some() && gone2.is_some() && term1.is_some(),
            "{term2:?} {gone2:?} {term1:?}"
        );
        ensure!(term1 > gone2, "web-1 was deleted before web-2 was gone");
        ensure!(hist.terminating_at("web-0")?.is_none(), "web-0 touched");
        // The controller's deletes are graceful: the first terminating state still carries
        // the pod's own grace period (kwok, as a kubelet, finishes with 0 afterwards).
        for name in ["web-2", "web-1"] {
            let first = hist.seen()?.into_iter().find(|s| {
                s.object().metadata.name.as_deref() == Some(name)
                    && s.object().metadata.deletion_timestamp.is_some()
            });
            let grace = first.and_then(|s| s.object().metadata.deletion_grace_period_seconds);
            ensure!(grace == Some(1), "{name} deleted with grace {grace:?}");
        }
        hist.assert_one_per_name()
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    parallel_creates_and_deletes_without_waiting, "sts-par", parallel_creates_and_deletes_without_waiting_in
}

/// §9 5, 9: pods that never get scheduled stay Pending: Parallel creates all three anyway
/// and deletes all at once on scale to 0; OrderedReady stops at web-0.
async fn parallel_creates_and_deletes_without_waiting_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        let unschedulable =
            json!({"spec": {"template": {"spec": {"nodeSelector": {"rkcm.test/none": "none"}}}}});
        env.create_set(merge(
            merge(
                sts("par", 3),
                json!({"spec": {"podManagementPolicy": "Parallel"}}),
            ),
            unschedulable.clone(),
        ))
        .await?;
        env.create_set(merge(sts("ord", 3), unschedulable)).await?;
        rkcm_testkit::wait_for("three pending parallel pods", WITHIN, || async {
            let names = env.pod_names().await?;
            Ok(["par-0", "par-1", "par-2"]
                .iter()
                .all(|n| names.iter().any(|x| x == n))
                .then_some(()))
        })
        .await?;
        rkcm_testkit::wait_for("ord-0 created", WITHIN, || async {
            Ok(env
                .pod_names()
                .await?
                .iter()
                .any(|n| n == "ord-0")
                .then_some(()))
        })
        .await?;
        rkcm_testkit::holds_for("OrderedReady stops at its unready ord-0", HOLDS, || async {
            let names = env.pod_names().await?;
            Ok(!names.iter().any(|n| n == "ord-1" || n == "ord-2"))
        })
        .await?;
        env.wait_status("par", "parallel status replicas 3", |_, st| {
            st.replicas == 3 && st.ready_replicas.unwrap_or(0) == 0
        })
        .await?;
        env.scale("par", 0).await?;
        rkcm_testkit::wait_for("all parallel pods gone", WITHIN, || async {
            Ok((!env.pod_names().await?.iter().any(|n| n.starts_with("par-"))).then_some(()))
        })
        .await?;
        env.wait_status("par", "parallel status replicas 0", |_, st| {
            st.replicas == 0
        })
        .await?;
        Ok(())
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    start_ordinal_moves_the_pods, "sts-start", start_ordinal_moves_the_pods_in
}

/// §9 10: ordinals.start 5 gives web-5, web-6; moving to 0 creates web-0, web-1 then removes
/// web-6 and web-5.
async fn start_ordinal_moves_the_pods_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(merge(
            sts("web", 2),
            json!({"spec": {"ordinals": {"start": 5}}}),
        ))
        .await?;
        env.wait_ready_pods(&["web-5", "web-6"]).await?;
        env.wait_settled("web", 2).await?;
        let hist = env.pod_history().await?;
        env.patch_set("web", json!({"spec": {"ordinals": {"start": 0}}}))
            .await?;
        env.wait_ready_pods(&["web-0", "web-1"]).await?;
        ensure!(
            hist.first_seen("web-0")? < hist.first_seen("web-1")?,
            "{:?}",
            hist.creation_order()?
        );
        let (t6, t5) = (hist.terminating_at("web-6")?, hist.terminating_at("web-5")?);
        ensure!(t6.is_some() && t5 > t6, "web-6 {t6:?} before web-5 {t5:?}");
        ensure!(
            hist.terminating_at("web-6")? > hist.first_seen("web-1")?,
            "old pods went before the new ones"
        );
        hist.assert_one_per_name()
    }
    .await;
    env.finish(r).await
}

rkcm_testkit::scenario! {
    min_ready_seconds_delays_availability, "sts-mrs", min_ready_seconds_delays_availability_in
}

/// §9 6: with minReadySeconds 10, ready pods count as available only later, with no further
/// API change by the test (the controller requeues itself).
async fn min_ready_seconds_delays_availability_in(base: &Base) -> Result<()> {
    let env = Env::new(base);
    let r = async {
        env.create_set(merge(
            sts("web", 3),
            json!({"spec": {"podManagementPolicy": "Parallel", "minReadySeconds": 10}}),
        ))
        .await?;
        let st = env
            .wait_status("web", "three ready, none available", |_, st| {
                st.ready_replicas == Some(3) && st.available_replicas.unwrap_or(0) == 0
            })
            .await?;
        ensure!(st.replicas == 3, "{st:?}");
        let started = tokio::time::Instant::now();
        env.wait_status("web", "three available", |_, st| {
            st.available_replicas == Some(3)
        })
        .await?;
        let took = started.elapsed();
        ensure!(
            took <= std::time::Duration::from_secs(14),
            "available only after {took:?}"
        );
        Ok(())
    }
    .await;
    env.finish(r).await
}
