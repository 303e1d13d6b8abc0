//! The running manager's last decision per object (`/debug/rkcm/decisions`) on the local
//! plane: a Job controller sync that creates a pod is recorded with that write, `rkcm explain
//! --manager` shows it beside what it would decide now, the path needs an authorized identity,
//! and the record is forgotten when the Job is deleted.

use anyhow::{Context as _, ensure};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, PostParams};
use rkcm_testkit::{TestCluster, wait_for};
use serde_json::json;

use crate::job_takeover::job_manifest;
use crate::secure_serving::{As, ClusterRbac, get_as, service_account_token, wait_allowed};
use crate::serve::Rkcm;

use super::{REACT, run_explain};

/// `rkcm explain TARGET --manager <rkcm on port> [extra...]`; its standard output.
async fn explain(
    cluster: &TestCluster,
    target: &str,
    port: u16,
    extra: &[&str],
) -> anyhow::Result<String> {
    let manager = format!("--manager=https://127.0.0.1:{port}");
    let mut args = vec![target, &manager, "--manager-insecure-skip-tls-verify"];
    args.extend_from_slice(extra);
    run_explain(cluster, &args).await
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn explain_shows_the_running_managers_last_decision() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-explain-live").await?;
    let client = cluster.client();
    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    // Two identities: one may read the decisions, one may not. The reader's grant exists
    // before its first request, so rkcm never caches a denial for it.
    let reader_token = service_account_token(&client, ns.name(), "reader").await?;
    let stranger_token = service_account_token(&client, ns.name(), "stranger").await?;
    let reader = format!("system:serviceaccount:{}:reader", ns.name());
    let mut rbac = ClusterRbac::default();
    let role = format!("{}-decisions", ns.name());
    rbac.role(
        &client,
        &role,
        json!([{"nonResourceURLs": ["/debug/rkcm/decisions", "/debug/rkcm/decisions/*"],
                "verbs": ["get"]}]),
    )
    .await?;
    rbac.binding(
        &client,
        &role,
        &role,
        json!([{"kind": "ServiceAccount", "name": "reader", "namespace": ns.name()}]),
    )
    .await?;
    let result = async {
        wait_allowed(
            &client,
            &reader,
            &["system:serviceaccounts"],
            "/debug/rkcm/decisions",
        )
        .await?;
        let rkcm = Rkcm::spawn_scoped(
            "explain-live",
            &cluster,
            ns.name(),
            &[
                "--leader-elect=false".to_owned(),
                "--controllers=job-controller".to_owned(),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
            ],
        )
        .await?;
        rkcm.wait_serving().await?;

        let jobs: Api<Job> = Api::namespaced(client.clone(), ns.name());
        let job: Job = serde_json::from_value(job_manifest("pi", false, 1, 1))?;
        jobs.create(&PostParams::default(), &job)
            .await
            .context("creating Job pi")?;

        // The sync that created the pod is the Job's last decision, with that write.
        let target = format!("job/{}/pi", ns.name());
        let pod_create = format!("POST /api/v1/namespaces/{}/pods: 201", ns.name());
        let report: serde_json::Value = wait_for(
            "the last decision to name the pod create",
            REACT,
            || async {
                let out = explain(&cluster, &target, rkcm.port, &["-o", "json"]).await?;
                let v: serde_json::Value = serde_json::from_str(&out).context("parsing explain")?;
                let last = &v["lastDecision"];
                let wrote = last["actions"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(pod_create.as_str())));
                Ok((last["controller"] == "job-controller" && wrote).then_some(v))
            },
        )
        .await?;
        assert_eq!(report["lastDecision"]["key"], format!("{}/pi", ns.name()));
        assert_eq!(report["lastDecision"]["outcome"]["result"], "synced");
        // What it would do now is there too: one pod active (pending), no create left.
        assert_eq!(report["object"]["kind"], "Job", "{report}");
        let text = explain(&cluster, &target, rkcm.port, &[]).await?;
        ensure!(
            text.contains("Last decision of the running manager (job-controller, at "),
            "text output without the last decision:\n{text}"
        );

        // The path is authorized like /metrics: a stranger is refused, the reader is not.
        let path = format!("/debug/rkcm/decisions/job-controller/{}/pi", ns.name());
        let refused = get_as(rkcm.port, &path, &As::Token(stranger_token.clone())).await?;
        assert_eq!(refused.status, 403, "{}", refused.body);
        let read = get_as(rkcm.port, &path, &As::Token(reader_token.clone())).await?;
        assert_eq!(read.status, 200, "{}", read.body);
        let one: serde_json::Value = serde_json::from_str(&read.body)?;
        assert_eq!(one["controller"], "job-controller");

        // Deleting the Job forgets its record.
        jobs.delete("pi", &DeleteParams::background())
            .await
            .context("deleting Job pi")?;
        wait_for("the Job's record to be forgotten", REACT, || async {
            let r = get_as(rkcm.port, &path, &As::Token(reader_token.clone())).await?;
            Ok((r.status == 404).then_some(()))
        })
        .await?;
        let all = get_as(
            rkcm.port,
            "/debug/rkcm/decisions?controller=job-controller",
            &As::Token(reader_token.clone()),
        )
        .await?;
        assert_eq!(all.status, 200, "{}", all.body);
        let all: serde_json::Value = serde_json::from_str(&all.body)?;
        ensure!(
            all.as_array()
                .is_some_and(|a| a.iter().all(|d| d["key"] != format!("{}/pi", ns.name()))),
            "the deleted Job is still listed: {all}"
        );
        anyhow::Ok(())
    }
    .await;
    rbac.delete(&client).await;
    result
}
