//! The churned workload of one namespace (Deployments and ReplicaSets, and in the `-all`
//! variants a StatefulSet, a DaemonSet, an Indexed Job and a CronJob) and the watched namespace it
//! runs in.

use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rand::Rng;
use serde_json::{Value, json};

use super::outcome::Options;
use crate::cluster::{TestCluster, TestNamespace};
use crate::invariants::Config;
use crate::invariants::watch::{InvariantWatcher, Scope};
use crate::wait::wait_for;

/// A new namespace named after `prefix`, once its default ServiceAccount exists, and the
/// invariant watcher of it, started before anything is created in it.
pub(crate) async fn watched_namespace(
    cluster: &TestCluster,
    prefix: &str,
) -> Result<(TestNamespace, InvariantWatcher)> {
    let ns = cluster.namespace(prefix).await?;
    let sa = ns.api::<ServiceAccount>();
    wait_for(
        "the default ServiceAccount",
        Duration::from_secs(60),
        || async { Ok(sa.get_opt("default").await?.map(|_| ())) },
    )
    .await?;
    let watcher = InvariantWatcher::start(
        cluster.client(),
        Scope::Namespaces(vec![ns.name().to_owned()]),
        Config::default(),
    )
    .await?;
    Ok((ns, watcher))
}

pub(crate) fn kwok_template(app: &str, image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {
            "nodeSelector": {"type": "kwok"},
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": image}],
        },
    })
}

/// The churned workload of one namespace.
pub(crate) struct Workload<'a> {
    pub(crate) ns: &'a TestNamespace,
    pub(crate) opts: &'a Options,
    /// Also a StatefulSet, a DaemonSet, an Indexed Job and a CronJob (the `-all` variants).
    pub(crate) all: bool,
}

fn kwok_job_template(image: &str) -> Value {
    let mut t = kwok_template("job", image);
    t["spec"]["restartPolicy"] = json!("Never");
    t
}

impl Workload<'_> {
    /// Creates the workload, waits until it settled, then measures the undisturbed baseline:
    /// a rollout of every Deployment and a scale of every ReplicaSet, no fault, to settled
    /// (seconds).
    pub(crate) async fn baseline(&self, timeout: Duration) -> Result<f64> {
        self.create().await?;
        self.wait_settled(timeout).await?;
        let start = Instant::now();
        self.bump(0).await?;
        self.wait_settled(timeout).await?;
        Ok(start.elapsed().as_secs_f64())
    }

    fn deploy_name(i: usize) -> String {
        format!("d{i}")
    }

    fn rs_name(i: usize) -> String {
        format!("r{i}")
    }

    pub(crate) async fn create(&self) -> Result<()> {
        for i in 0..self.opts.deployments {
            self.create_deployment(&Self::deploy_name(i), self.opts.replicas)
                .await?;
        }
        for i in 0..self.opts.replicasets {
            self.create_replicaset(&Self::rs_name(i), self.opts.replicas)
                .await?;
        }
        if self.all {
            self.create_others().await?;
        }
        Ok(())
    }

    /// The StatefulSet `s0`, the DaemonSet `ds0` (one pod per kwok node), the Indexed Job
    /// `j0` (long: 10 000 completions, so it runs through the churn; a deleted pod counts as
    /// failed, hence the high backoff limit) and the CronJob `cj0` (every minute).
    async fn create_others(&self) -> Result<()> {
        use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
        use k8s_openapi::api::batch::v1::{CronJob, Job};
        let pp = PostParams::default();
        let sts: StatefulSet = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "s0"},
            "spec": {"replicas": 3, "serviceName": "s0",
                     "selector": {"matchLabels": {"app": "s0"}},
                     "template": kwok_template("s0", "registry.example/app:v0")},
        }))?;
        self.ns.api::<StatefulSet>().create(&pp, &sts).await?;
        let ds: DaemonSet = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "ds0"},
            "spec": {"selector": {"matchLabels": {"app": "ds0"}},
                     "template": kwok_template("ds0", "registry.example/app:v0")},
        }))?;
        self.ns.api::<DaemonSet>().create(&pp, &ds).await?;
        let job: Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j0"},
            "spec": {"completions": 10000, "parallelism": 3, "completionMode": "Indexed",
                     "backoffLimit": 100000,
                     "template": kwok_job_template("registry.example/job:v0")},
        }))?;
        self.ns.api::<Job>().create(&pp, &job).await?;
        let cj: CronJob = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "cj0"},
            "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Allow",
                     "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 3,
                     "jobTemplate": {"spec": {"backoffLimit": 100,
                         "template": kwok_job_template("registry.example/cron:v0")}}},
        }))?;
        self.ns.api::<CronJob>().create(&pp, &cj).await?;
        Ok(())
    }

    /// Rolls the StatefulSet and the DaemonSet to `image`.
    async fn roll_others(&self, image: &str) -> Result<()> {
        use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
        let body = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
        let pp = PatchParams::default();
        self.ns
            .api::<StatefulSet>()
            .patch("s0", &pp, &Patch::Strategic(body.clone()))
            .await?;
        self.ns
            .api::<DaemonSet>()
            .patch("ds0", &pp, &Patch::Strategic(body))
            .await?;
        Ok(())
    }

    /// The same change for the undisturbed baseline and after the last fault: every
    /// Deployment rolled to a new image, every ReplicaSet scaled by two.
    pub(crate) async fn bump(&self, round: u32) -> Result<()> {
        let pp = PatchParams::default();
        for i in 0..self.opts.deployments {
            let image = format!("registry.example/app:bump{round}");
            self.ns
                .api::<Deployment>()
                .patch(
                    &Self::deploy_name(i),
                    &pp,
                    &Patch::Strategic(json!({"spec": {"replicas": self.opts.replicas,
                        "template": {"spec": {"containers": [{"name": "app", "image": image}]}}}})),
                )
                .await?;
        }
        let replicas = self.opts.replicas + if round.is_multiple_of(2) { 2 } else { 0 };
        for i in 0..self.opts.replicasets {
            self.ns
                .api::<ReplicaSet>()
                .patch(
                    &Self::rs_name(i),
                    &pp,
                    &Patch::Merge(json!({"spec": {"replicas": replicas}})),
                )
                .await?;
        }
        if self.all {
            self.roll_others(&format!("registry.example/app:bump{round}"))
                .await?;
        }
        Ok(())
    }

    /// Why the namespace is not settled, or `None`.
    pub(crate) async fn unsettled(&self) -> Result<Option<String>> {
        for d in self
            .ns
            .api::<Deployment>()
            .list(&ListParams::default())
            .await?
        {
            if let Some(why) = crate::invariants::deployment_unsettled(&d) {
                return Ok(Some(why));
            }
        }
        for rs in self
            .ns
            .api::<ReplicaSet>()
            .list(&ListParams::default())
            .await?
        {
            let want = rs.spec.replicas.unwrap_or(1);
            let s = rs.status.clone().unwrap_or_default();
            if s.replicas != want || s.ready_replicas.unwrap_or(0) != want {
                return Ok(Some(format!(
                    "replicaset {:?}: want {want}, status {s:?}",
                    rs.metadata.name
                )));
            }
        }
        if self.all {
            use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
            for sts in self
                .ns
                .api::<StatefulSet>()
                .list(&ListParams::default())
                .await?
            {
                let want = sts.spec.replicas.unwrap_or(1);
                let s = sts.status.clone().unwrap_or_default();
                if s.observed_generation != sts.metadata.generation
                    || s.ready_replicas != Some(want)
                    || s.updated_replicas != Some(want)
                    || s.current_revision != s.update_revision
                {
                    return Ok(Some(format!(
                        "statefulset {:?}: want {want}, status {s:?}",
                        sts.metadata.name
                    )));
                }
            }
            for ds in self
                .ns
                .api::<DaemonSet>()
                .list(&ListParams::default())
                .await?
            {
                let s = ds.status.clone().unwrap_or_default();
                if s.observed_generation != ds.metadata.generation
                    || s.desired_number_scheduled == 0
                    || s.number_ready != s.desired_number_scheduled
                    || s.updated_number_scheduled != Some(s.desired_number_scheduled)
                    || s.number_available != Some(s.desired_number_scheduled)
                {
                    return Ok(Some(format!(
                        "daemonset {:?}: status {s:?}",
                        ds.metadata.name
                    )));
                }
            }
        }
        Ok(None)
    }

    pub(crate) async fn wait_settled(&self, timeout: Duration) -> Result<Duration> {
        let start = Instant::now();
        wait_for("the namespace to settle", timeout, || async {
            Ok(self.unsettled().await?.is_none().then_some(()))
        })
        .await?;
        Ok(start.elapsed())
    }

    /// Churns until `until`: pods deleted at the configured rate (gracefully), a spec change
    /// every 10 s. Returns (pod deletions, spec changes).
    pub(crate) async fn churn(&self, until: Instant) -> Result<(u64, u64)> {
        self.churn_with(until, false).await
    }

    /// [`Self::churn`]; with `ephemeral`, each spec change also creates a short-lived
    /// Deployment and ReplicaSet and deletes the previous round's, so objects keep coming
    /// and going (anything a manager keeps per object must go with them).
    pub(crate) async fn churn_with(&self, until: Instant, ephemeral: bool) -> Result<(u64, u64)> {
        let pods = self.ns.api::<Pod>();
        let (mut deleted, mut changes) = (0u64, 0u64);
        let mut last_change = Instant::now();
        let rate = self.opts.delete_rate.max(1);
        while Instant::now() < until {
            let round = Instant::now();
            let list = pods.list(&ListParams::default()).await;
            let live: Vec<String> = list
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                // Running pods only: a delete that reads a pod just before it is bound
                // removes it at once (not churn a user would make).
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .filter_map(|p| p.metadata.name)
                .collect();
            let victims: Vec<String> = {
                let mut rng = rand::rng();
                (0..rate.min(u32::try_from(live.len()).unwrap_or(0)))
                    .map(|_| live[rng.random_range(0..live.len())].clone())
                    .collect()
            };
            for v in victims {
                if pods.delete(&v, &DeleteParams::default()).await.is_ok() {
                    deleted += 1;
                }
                tokio::time::sleep(Duration::from_millis(1000 / u64::from(rate))).await;
            }
            if last_change.elapsed() >= Duration::from_secs(10) {
                last_change = Instant::now();
                changes += 1;
                let (d, r, n, flip) = {
                    let mut rng = rand::rng();
                    (
                        rng.random_range(0..self.opts.deployments.max(1)),
                        rng.random_range(0..self.opts.replicasets.max(1)),
                        rng.random_range(1..=self.opts.replicas * 2),
                        rng.random_bool(0.5),
                    )
                };
                let pp = PatchParams::default();
                let body = if flip {
                    json!({"spec": {"replicas": n}})
                } else {
                    json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": format!("registry.example/app:v{changes}")}]}}}})
                };
                if self.opts.deployments > 0 {
                    let _ = self
                        .ns
                        .api::<Deployment>()
                        .patch(&Self::deploy_name(d), &pp, &Patch::Strategic(body))
                        .await;
                }
                if self.opts.replicasets > 0 {
                    let _ = self
                        .ns
                        .api::<ReplicaSet>()
                        .patch(
                            &Self::rs_name(r),
                            &pp,
                            &Patch::Merge(json!({"spec": {"replicas": n}})),
                        )
                        .await;
                }
                if self.all && changes.is_multiple_of(3) {
                    let _ = self
                        .roll_others(&format!("registry.example/app:v{changes}"))
                        .await;
                }
                if ephemeral {
                    if changes > 1 {
                        self.delete_ephemeral(changes - 1).await;
                    }
                    // A failed create is churn lost, not a reason to stop the run.
                    let _ = self.create_ephemeral(changes).await;
                }
            }
            if round.elapsed() < Duration::from_millis(200) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        if ephemeral && changes > 0 {
            self.delete_ephemeral(changes).await;
        }
        Ok((deleted, changes))
    }

    fn ephemeral_names(round: u64) -> (String, String) {
        (format!("e{round}"), format!("er{round}"))
    }

    /// The Deployment `e<round>` and the ReplicaSet `er<round>`, two replicas each.
    async fn create_ephemeral(&self, round: u64) -> Result<()> {
        let (d, r) = Self::ephemeral_names(round);
        self.create_deployment(&d, 2).await?;
        self.create_replicaset(&r, 2).await
    }

    /// A Deployment `name` of `replicas` kwok pods labelled `app: <name>`.
    async fn create_deployment(&self, name: &str, replicas: i32) -> Result<()> {
        let d: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": kwok_template(name, "registry.example/app:v0")},
        }))?;
        self.ns
            .api::<Deployment>()
            .create(&PostParams::default(), &d)
            .await?;
        Ok(())
    }

    /// A ReplicaSet `name` of `replicas` kwok pods labelled `app: <name>`.
    async fn create_replicaset(&self, name: &str, replicas: i32) -> Result<()> {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": kwok_template(name, "registry.example/app:v0")},
        }))?;
        self.ns
            .api::<ReplicaSet>()
            .create(&PostParams::default(), &rs)
            .await?;
        Ok(())
    }

    /// Deletes `e<round>` and `er<round>` (background propagation: the plane's garbage
    /// collector removes their pods); a missing one is fine.
    async fn delete_ephemeral(&self, round: u64) {
        let (d, r) = Self::ephemeral_names(round);
        let dp = DeleteParams::background();
        let _ = self.ns.api::<Deployment>().delete(&d, &dp).await;
        let _ = self.ns.api::<ReplicaSet>().delete(&r, &dp).await;
    }
}
