//! Creating, becoming available, scaling a settled Deployment, zero replicas and
//! overlapping selectors: scenarios 1, 2, 11, 32 and 33.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::json;

use crate::harness::*;

/// Scenario 1 asks for everything "within 10 s" of the create.
const TEN_S: Duration = Duration::from_secs(10);

rkcm_testkit::scenario! {
    /// Scenarios 1 (create) and 2 (become available).
    s01_s02_create_then_become_available, "dep-create", create_then_available; all_threads
}

#[allow(
    clippy::too_many_lines,
    reason = "a test that reads top to bottom as its steps"
)]
async fn create_then_available(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let created = env.create_deployment(deployment("web", 3)).await?;
    let start = tokio::time::Instant::now();
    let left = || TEN_S.saturating_sub(start.elapsed());
    let d_uid = uid_of(&created);

    // Scenario 1: the ReplicaSet.
    let rss = env
        .wait_rss_for(&d_uid, "one RS of 3 at revision 1", left(), |rss| {
            rss.len() == 1 && spec_replicas(&rss[0]) == 3 && ann(&rss[0], REVISION) == Some("1")
        })
        .await?;
    let rs = &rss[0];
    let rs_name = name_of(rs);
    ensure_eq(
        env.all_rss().await?.len(),
        1,
        "ReplicaSets in the namespace",
    )?;
    let hash = label(rs, HASH)
        .context("RS has no pod-template-hash label")?
        .to_owned();
    ensure(
        !hash.is_empty() && hash.len() <= 10 && hash.chars().all(|c| "456789bcdf".contains(c)),
        format!("hash {hash:?} is 1-10 chars of [4-9bcdf]"),
    )?;
    ensure_eq(rs_name.clone(), format!("web-{hash}"), "RS name")?;
    let want_labels = labels(&[("app", "web"), (HASH, &hash)]);
    ensure_eq(
        serde_json::to_value(&rs.metadata.labels)?,
        want_labels.clone(),
        "RS labels",
    )?;
    let spec = rs.spec.clone();
    ensure_eq(
        serde_json::to_value(&spec.selector)?,
        json!({"matchLabels": want_labels.clone()}),
        "RS selector",
    )?;
    let rs_template = serde_json::to_value(&spec.template)?;
    ensure_eq(
        rs_template["metadata"]["labels"].clone(),
        want_labels,
        "RS template labels",
    )?;
    ensure_eq(
        template_without_hash(rs)?,
        template_of(&created)?,
        "RS template (without the hash label) equals the Deployment's",
    )?;
    ensure_eq(spec.min_ready_seconds.unwrap_or(0), 0, "RS minReadySeconds")?;
    ensure_controlled_by_web(rs, &d_uid)?;
    ensure_eq(
        annotations(rs),
        [(REVISION, "1"), (DESIRED, "3"), (MAX, "4")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        "RS annotations",
    )?;

    // Scenario 1: the Deployment's annotation, conditions and counts.
    let d = env
        .wait_deployment_for(
            "web",
            "revision 1, Available=False, Progressing=True, unavailable 3",
            left(),
            |d| {
                ann(d, REVISION) == Some("1")
                    && has_condition(d, "Available", "False", "MinimumReplicasUnavailable")
                    && (has_condition(d, "Progressing", "True", "NewReplicaSetCreated")
                        || has_condition(d, "Progressing", "True", "ReplicaSetUpdated"))
                    && counts(d)[4] == 3
            },
        )
        .await?;
    ensure_eq(cond_triple(&d, "Available"), available_false(), "Available")?;
    let progressing = condition(&d, "Progressing").context("no Progressing")?;
    let want_message = match progressing.reason.as_deref() {
        Some("NewReplicaSetCreated") => format!("Created new replica set \"{rs_name}\""),
        _ => format!("ReplicaSet \"{rs_name}\" is progressing."),
    };
    ensure_eq(
        progressing.message.unwrap_or_default(),
        want_message,
        "Progressing message",
    )?;
    let event = format!("Scaled up replica set {rs_name} from 0 to 3");
    env.wait_event("web", "Normal", "ScalingReplicaSet", &event)
        .await?;
    ensure(
        start.elapsed() <= TEN_S,
        format!("scenario 1 took {:?}, more than 10 s", start.elapsed()),
    )?;

    // Scenario 2: make the pods ready.
    env.make_ready(&uid_of(rs), 3).await?;
    let d = env
        .wait_deployment("web", "3 of 3 available and progressed", |d| {
            counts(d) == [3, 3, 3, 3, 0]
                && has_condition(d, "Available", "True", "MinimumReplicasAvailable")
                && has_condition(d, "Progressing", "True", "NewReplicaSetAvailable")
                && observed(d)
        })
        .await?;
    ensure_eq(cond_triple(&d, "Available"), available_true(), "Available")?;
    ensure_progressed(&d, &rs_name)?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 11: a settled Deployment's only ReplicaSet is scaled directly.
    s11_single_active_replicaset_scales_directly, "dep-scale", single_active; all_threads
}

async fn single_active(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let _ready = Readier::all(env).await?;
    let d = env.create_deployment(deployment("web", 3)).await?;
    env.wait_complete("web").await?;
    let d_uid = uid_of(&d);
    let rs_name = name_of(&env.rss_of(&d_uid).await?[0]);
    let history = History::<ReplicaSet>::start(env.replicasets()).await?;

    env.scale("web", 7).await?;
    let rss = env
        .wait_rss(&d_uid, "the only RS at 7 with desired 7, max 9", |rss| {
            rss.len() == 1
                && spec_replicas(&rss[0]) == 7
                && ann(&rss[0], DESIRED) == Some("7")
                && ann(&rss[0], MAX) == Some("9")
        })
        .await?;
    ensure_eq(name_of(&rss[0]), rs_name.clone(), "the same RS")?;
    env.wait_event(
        "web",
        "Normal",
        "ScalingReplicaSet",
        &format!("Scaled up replica set {rs_name} from 3 to 7"),
    )
    .await?;
    env.wait_complete("web").await?;
    env.rss_hold(&d_uid, "no new RS", Duration::from_secs(2), |rss| {
        rss.len() == 1
    })
    .await?;
    ensure_eq(
        history.sizes(&rs_name)?,
        vec![3, 7],
        "RS sizes (3 to 7 directly)",
    )?;
    ensure_eq(history.names()?, vec![rs_name], "ReplicaSets ever seen")?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 32: zero replicas.
    s32_zero_replicas, "dep-zero", zero_replicas; all_threads
}

async fn zero_replicas(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let d = env.create_deployment(deployment("web", 0)).await?;
    let rss = env
        .wait_rss(&uid_of(&d), "one RS of 0 at revision 1", |rss| {
            rss.len() == 1 && spec_replicas(&rss[0]) == 0 && ann(&rss[0], REVISION) == Some("1")
        })
        .await?;
    let rs_name = name_of(&rss[0]);
    let d = env
        .wait_deployment(
            "web",
            "Available=True, Progressing=NewReplicaSetAvailable",
            |d| {
                observed(d)
                    && has_condition(d, "Available", "True", "MinimumReplicasAvailable")
                    && has_condition(d, "Progressing", "True", "NewReplicaSetAvailable")
            },
        )
        .await?;
    ensure_eq(counts(&d), [0; 5], "status counts")?;
    ensure_progressed(&d, &rs_name)?;
    rkcm_testkit::holds_for(
        "no ScalingReplicaSet event",
        Duration::from_secs(3),
        || async { Ok(env.scaling_messages("web").await?.is_empty()) },
    )
    .await?;
    ctrl.stop().await
}

rkcm_testkit::scenario! {
    /// Scenario 33: two Deployments with the same selector each keep to their own ReplicaSet
    /// and pods.
    s33_overlapping_selectors, "dep-overlap", overlapping; all_threads
}

async fn overlapping(env: &Env) -> Result<()> {
    let ctrl = env.start();
    let mut a = deployment("xa", 2);
    a["spec"]["selector"] = json!({"matchLabels": {"app": "x"}});
    a["spec"]["template"] = template(&[("app", "x")], V1);
    let mut b = deployment("xb", 3);
    b["spec"]["selector"] = json!({"matchLabels": {"app": "x"}});
    b["spec"]["template"] = template(&[("app", "x")], V2);
    let a = env.create_deployment(a).await?;
    let b = env.create_deployment(b).await?;
    let (a_uid, b_uid) = (uid_of(&a), uid_of(&b));

    let one = |image: &'static str, n: i32| {
        move |rss: &[ReplicaSet]| {
            rss.len() == 1 && image_of(&rss[0]) == image && settled(rss, image, n)
        }
    };
    let a_rs = env.wait_rss(&a_uid, "one V1 RS of 2", one(V1, 2)).await?;
    let b_rs = env.wait_rss(&b_uid, "one V2 RS of 3", one(V2, 3)).await?;
    let (a_rs, b_rs) = (a_rs[0].clone(), b_rs[0].clone());
    let _ready = Readier::all(env).await?;
    let a_d = env.wait_complete("xa").await?;
    let b_d = env.wait_complete("xb").await?;
    ensure_eq(counts(&a_d), [2, 2, 2, 2, 0], "xa status counts")?;
    ensure_eq(counts(&b_d), [3, 3, 3, 3, 0], "xb status counts")?;

    let mut a_pods = names_of(&env.active(&uid_of(&a_rs)).await?);
    let mut b_pods = names_of(&env.active(&uid_of(&b_rs)).await?);
    a_pods.sort();
    b_pods.sort();
    ensure_eq((a_pods.len(), b_pods.len()), (2, 3), "pods per RS")?;
    rkcm_testkit::holds_for(
        "each Deployment owns exactly its one RS, each RS its own pods",
        HOLDS,
        || async {
            let all = env.all_rss().await?;
            let owners: Vec<(String, Option<String>)> = all
                .iter()
                .map(|rs| (name_of(rs), controller_uid(rs).map(str::to_owned)))
                .collect();
            let want = {
                let mut w = vec![
                    (name_of(&a_rs), Some(a_uid.clone())),
                    (name_of(&b_rs), Some(b_uid.clone())),
                ];
                w.sort();
                w
            };
            let mut owners = owners;
            owners.sort();
            let mut pa = names_of(&env.active(&uid_of(&a_rs)).await?);
            let mut pb = names_of(&env.active(&uid_of(&b_rs)).await?);
            pa.sort();
            pb.sort();
            let pods = env.pods().list(&Default::default()).await?.items.len();
            Ok(owners == want && pa == a_pods && pb == b_pods && pods == 5)
        },
    )
    .await?;
    ctrl.stop().await
}
