//! The rkcm binary's log in normal operation: a Deployment created, scaled and rolled out
//! by kubectl must not produce a single warning (failed syncs or anything else). Requeues that are part of
//! normal operation (a cache that has not caught up with the controller's own write, a
//! conflict on a write made from a cached copy) are logged at debug; WARN is for what an
//! operator should look at.

use anyhow::bail;
use rkcm_testkit::TestCluster;

use crate::rollout::{
    Kind, Kubectl, Manager, deployment_manifest, start_manager, wait_default_service_account,
    wait_settled,
};

/// The WARN lines of a text-format log (`<time>  WARN <target>: <message> ...`).
fn warnings(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(" WARN ")).collect()
}

#[test]
fn warnings_are_found_in_the_text_format() {
    let log = "2026-11-24T06:00:00.000000Z  INFO rkcm: starting rkcm\n\
               2026-11-24T06:00:01.000000Z  WARN rkcm_runtime::queue: sync failed, \
               requeuing with backoff queue=\"replicaset\"\n\
               2026-11-24T06:00:02.000000Z DEBUG rkcm_runtime::queue: sync deferred, \
               requeuing with backoff queue=\"replicaset\"\n\
               2026-11-24T06:00:03.000000Z  WARN rkcm_deployment::reconcile: scaling down old \
               replica sets stopped\n";
    assert_eq!(warnings(log).len(), 2);
}

#[tokio::test]
#[ignore = "needs apiserver: make test"]
async fn a_normal_rollout_logs_no_warning() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("rkcm-quiet").await?;
    wait_default_service_account(&ns).await?;
    let mut rkcm = start_manager(Kind::Rkcm, &cluster, ns.name()).await?;
    let k = Kubectl::new(&cluster, ns.name())?;
    let result = async {
        let manifest = deployment_manifest("hello", 3, "registry.example/hello:v1", {
            serde_json::json!({})
        });
        k.run(&["create", "-f", "-"], Some(&manifest.to_string()))
            .await?;
        wait_settled(&ns, "hello").await?;
        for replicas in [6, 2, 5] {
            k.ok(&[
                "scale",
                "deployment/hello",
                &format!("--replicas={replicas}"),
            ])
            .await?;
            wait_settled(&ns, "hello").await?;
        }
        k.ok(&[
            "set",
            "image",
            "deployment/hello",
            "app=registry.example/hello:v2",
        ])
        .await?;
        wait_settled(&ns, "hello").await?;
        rkcm.check_running()?;
        let log = rkcm.log_tail(usize::MAX);
        eprintln!(
            "deferred syncs logged at debug: {}",
            log.matches("sync deferred").count()
        );
        let warned = warnings(&log);
        if !warned.is_empty() {
            bail!("a normal rollout logged warnings:\n{}", warned.join("\n"));
        }
        Ok(())
    }
    .await;
    Manager::with_logs(result, &mut [&mut rkcm])
}
