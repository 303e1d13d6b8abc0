//! Scenario 22: a terminating namespace. Creates there are rejected with cause
//! `NamespaceTerminating`; the controller counts them as done (upstream): no `ReplicaFailure`
//! condition, no error backoff, and — the matching creations never being observed — no
//! further create for that ReplicaSet until the 5-minute expectation TTL, however often it is
//! touched.
//!
//! This plane runs upstream's namespace controller, which would delete the ReplicaSet along
//! with the namespace's other contents. A ValidatingAdmissionPolicy bound to the test's
//! namespace denies deleting ReplicaSets there, so the namespace stays `Terminating` with the
//! ReplicaSet in it while the namespace controller removes the pods: the controller's
//! replacements are then rejected by the API server itself.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use rkcm_testkit::{holds_for, wait_for};

use serde_json::{Value, json};

use crate::harness::*;
use rkcm_testkit::recorder::Recorder;

const DENIED: &str = "rkcm test: ReplicaSets in this namespace are kept";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs apiserver: make test"]
async fn namespace_terminating_creates_are_not_retried() -> Result<()> {
    let env = Env::new("rs-nsterm").await?;
    let policy = format!("rkcm-test-keep-rs-{}", env.name());
    let result = match keep_replicasets(&env, &policy).await {
        Ok(()) => terminating(&env).await,
        Err(e) => Err(e),
    };
    let unkept = remove_policy(&env, &policy).await;
    let result = env.finish(result).await;
    result.and(unkept)
}

fn dynamic(env: &Env, kind: &str) -> Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    let plural = match kind {
        "ValidatingAdmissionPolicy" => "validatingadmissionpolicies",
        _ => "validatingadmissionpolicybindings",
    };
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::all_with(env.cluster.client(), &resource)
}

async fn create_dynamic(env: &Env, kind: &str, obj: Value) -> Result<()> {
    let obj: kube::api::DynamicObject = serde_json::from_value(obj)?;
    dynamic(env, kind)
        .create(&PostParams::default(), &obj)
        .await
        .with_context(|| format!("creating {kind}"))?;
    Ok(())
}

/// Denies deleting ReplicaSets in the test namespace, and waits until that is in force.
async fn keep_replicasets(env: &Env, policy: &str) -> Result<()> {
    create_dynamic(
        env,
        "ValidatingAdmissionPolicy",
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["DELETE"], "resources": ["replicasets"],
                }]},
                "validations": [{"expression": "false", "message": DENIED}],
            },
        }),
    )
    .await?;
    create_dynamic(
        env,
        "ValidatingAdmissionPolicyBinding",
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": env.name()},
                }},
            },
        }),
    )
    .await?;
    // Policies take effect asynchronously: probe with a dry-run delete until it is denied.
    env.create_rs(replicaset(
        "probe",
        0,
        &[("app", "probe")],
        &[("app", "probe")],
    ))
    .await?;
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    wait_for("the keep-ReplicaSets policy in force", WITHIN, || async {
        match env.replicasets().delete("probe", &dry_run).await {
            Err(kube::Error::Api(s)) if s.message.contains(DENIED) => Ok(Some(())),
            Err(e) => Err(e.into()),
            Ok(_) => Ok(None),
        }
    })
    .await
}

async fn remove_policy(env: &Env, policy: &str) -> Result<()> {
    for kind in [
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
    ] {
        match dynamic(env, kind)
            .delete(policy, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e).with_context(|| format!("deleting {kind} {policy}")),
        }
    }
    Ok(())
}

async fn terminating(env: &Env) -> Result<()> {
    let recorder = Recorder::new();
    let ctrl = start_recorded(env, env.config(), Duration::ZERO, Some(&recorder));
    let rs = env
        .create_rs(replicaset("web", 2, &[("app", "web")], &[("app", "web")]))
        .await?;
    let uid = uid_of(&rs);
    env.wait_active(&uid, 2).await?;
    env.wait_rs("web", "replicas=2", |rs| rs_status(rs).0 == 2)
        .await?;
    let ns = env.name().to_owned();
    let creates_before = recorder.matching(|c| c.is_pod_create(&ns)).len();

    Api::<Namespace>::all(env.cluster.client())
        .delete(&ns, &DeleteParams::background())
        .await
        .context("deleting the test namespace")?;
    // The namespace controller removes the (unbound) pods; the ReplicaSet stays.
    let rs = env
        .wait_rs(
            "web",
            "replicas=0 after the namespace controller removed the pods",
            |rs| rs_status(rs).0 == 0,
        )
        .await?;
    ensure(
        failure_condition(&rs).is_none(),
        format!("no ReplicaFailure condition: {:?}", failure_condition(&rs)),
    )?;
    // One sync per vanished pod or one for both: one or two attempts, all made before the
    // status write that reported replicas=0.
    let rejected: Vec<_> = recorder
        .matching(|c| c.is_pod_create(&ns))
        .into_iter()
        .skip(creates_before)
        .collect();
    ensure(
        (1..=2).contains(&rejected.len()),
        format!("one or two replacement creates, got {}", rejected.len()),
    )?;
    for call in &rejected {
        ensure(
            call.code == 403 && call.error_body.contains("NamespaceTerminating"),
            format!(
                "create rejected with cause NamespaceTerminating, got {}: {}",
                call.code, call.error_body
            ),
        )?;
    }
    let attempts = rejected.len();

    // Touch the ReplicaSet again and again: each update is a sync, and none may create.
    let mut i = 0;
    holds_for(
        "no further create while the creations are expected (5-minute TTL)",
        Duration::from_secs(6),
        || {
            i += 1;
            let patch = Patch::Merge(json!({"metadata": {"annotations": {"poke": i.to_string()}}}));
            let ns = ns.clone();
            let recorder = recorder.clone();
            async move {
                env.replicasets()
                    .patch("web", &PatchParams::default(), &patch)
                    .await?;
                let now = recorder.matching(|c| c.is_pod_create(&ns)).len();
                Ok(now - creates_before == attempts)
            }
        },
    )
    .await?;
    let rs = env.replicasets().get("web").await?;
    ensure(
        failure_condition(&rs).is_none() && rs_status(&rs).0 == 0,
        format!(
            "still replicas=0 and no ReplicaFailure: {:?} {:?}",
            rs_status(&rs),
            failure_condition(&rs)
        ),
    )?;
    ensure(
        rs.metadata.deletion_timestamp.is_none(),
        "the ReplicaSet itself is not being deleted (the controller would create nothing then)",
    )?;
    ctrl.stop().await
}
