//! Takeover without churn: upstream kube-controller-manager's ReplicaSet controller scales a
//! ReplicaSet, stops, and rkcm's controller takes over without creating or deleting a pod.
//!
//! Upstream's controller-manager cannot be limited to a namespace, and the plane is shared
//! with other tests. So it talks to the API server through the testkit's scoping proxy, which
//! turns its cluster-wide LIST/WATCH into the test namespace's and refuses writes elsewhere:
//! it never sees, and so never touches, another test's objects.

use std::time::Duration;

use anyhow::Result;
use rkcm_testkit::holds_for;

use crate::harness::*;

fn uids(pods: &[k8s_openapi::api::core::v1::Pod]) -> Vec<String> {
    let mut v: Vec<String> = pods.iter().map(uid_of).collect();
    v.sort();
    v
}

rkcm_testkit::scenario! {
    takes_over_from_upstream_without_churn, "rs-takeover", takeover
}

async fn takeover(env: &Env) -> Result<()> {
    let mut body = replicaset("web", 4, &[("app", "web")], &[("app", "web")]);
    body["spec"]["minReadySeconds"] = serde_json::json!(2);
    let rs = env.create_rs(body).await?;
    let uid = uid_of(&rs);
    let mut kcm = Manager::start(
        ManagerKind::Upstream,
        &env.cluster,
        env.name(),
        "replicaset-controller",
    )
    .await?;
    let pods = Manager::with_logs(env.wait_active(&uid, 4).await, &mut [&mut kcm])?;
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
    for name in names_of(&pods).iter().take(2) {
        env.set_ready(name, since).await?;
    }
    env.wait_rs(
        "web",
        "upstream wrote replicas=4 ready=2 available=2",
        |rs| rs_status(rs) == (4, 4, 2, 2) && observed(rs),
    )
    .await?;
    kcm.stop_scoped().await?;
    let before = uids(&env.owned(&uid).await?);

    let ctrl = env.start();
    holds_for(
        "pods unchanged after rkcm takes over",
        Duration::from_secs(8),
        || async { Ok(uids(&env.owned(&uid).await?) == before) },
    )
    .await?;
    let rs = env.replicasets().get("web").await?;
    ensure(
        rs_status(&rs) == (4, 4, 2, 2) && observed(&rs),
        format!("status after takeover: {:?}", rs.status),
    )?;
    // rkcm is really in charge: a scale-up is carried out by it.
    env.scale("web", 5).await?;
    let after = env.wait_active(&uid, 5).await?;
    ensure(
        before.iter().all(|u| uids(&after).contains(u)),
        "old pods kept",
    )?;
    ctrl.stop().await
}
