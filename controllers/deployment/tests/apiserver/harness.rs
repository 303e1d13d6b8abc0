//! What only the Deployment suite needs on top of the testkit's harness: the Deployment and
//! ReplicaSet controllers in-process, Deployment and ReplicaSet helpers on [`Env`] (waits
//! that show the objects as last seen), the controller's events, builders, status accessors,
//! and the ReplicaSet arithmetic over watch histories.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, ReplicaSet};
use k8s_openapi::api::core::v1::Event;
use kube::api::Api;
pub use rkcm_testkit::harness::*;
use serde_json::{Value, json};

/// How long "stays so" / "never happens" is watched when the scenario names no period.
pub const HOLDS: Duration = Duration::from_secs(5);
/// The event source of the controller under test.
pub const COMPONENT: &str = "deployment-controller";

/// Template versions differ by image only (nothing pulls them: no kubelet).
pub const V1: &str = "registry.k8s.io/pause:3.10";
pub const V2: &str = "registry.k8s.io/pause:3.9";
pub const V3: &str = "registry.k8s.io/pause:3.8";

pub const HASH: &str = "pod-template-hash";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX: &str = "deployment.kubernetes.io/max-replicas";
pub const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Deployment and ReplicaSet helpers on the test environment.
#[allow(async_fn_in_trait)]
pub trait DeployEnv {
    /// Both controllers with upstream defaults, limited to this test's namespace.
    fn start(&self) -> Controllers;
    /// Like [`DeployEnv::start`] with the `DeploymentReplicaSetTerminatingReplicas` gate set
    /// to `terminating_replicas` in both controllers.
    fn start_gated(&self, terminating_replicas: bool) -> Controllers;
    fn deployments(&self) -> Api<Deployment>;
    async fn create_deployment(&self, body: Value) -> Result<Deployment>;
    async fn deployment(&self, name: &str) -> Result<Deployment>;
    /// JSON merge patch on the Deployment's main endpoint.
    async fn patch_deployment(&self, name: &str, patch: Value) -> Result<Deployment>;
    /// Strategic merge patch on the Deployment's main endpoint.
    async fn patch_strategic(&self, name: &str, patch: Value) -> Result<Deployment>;
    /// Changes the template's image (a new template, so a rollout).
    async fn set_image(&self, name: &str, image: &str) -> Result<Deployment>;
    async fn scale(&self, name: &str, replicas: i32) -> Result<Deployment>;
    async fn set_paused(&self, name: &str, paused: bool) -> Result<Deployment>;
    async fn annotate(&self, name: &str, key: &str, value: Option<&str>) -> Result<Deployment>;
    /// Waits up to [`WITHIN`] for Deployment `name` to satisfy `check`.
    async fn wait_deployment(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Deployment) -> bool,
    ) -> Result<Deployment>;
    /// Waits up to `timeout`; on timeout the error shows the Deployment as last seen.
    async fn wait_deployment_for(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Deployment) -> bool,
    ) -> Result<Deployment>;
    /// Waits until `name` has rolled out completely: observed, every replica updated and
    /// available, `Progressing` reason `NewReplicaSetAvailable`.
    async fn wait_complete(&self, name: &str) -> Result<Deployment>;
    /// Waits until `name` has rolled out completely at `revision`.
    async fn wait_complete_at(&self, name: &str, revision: &str) -> Result<Deployment>;
    /// Fails unless Deployment `name` satisfies `check` for the whole of `period`.
    async fn deployment_holds(
        &self,
        name: &str,
        what: &str,
        period: Duration,
        check: impl Fn(&Deployment) -> bool,
    ) -> Result<()>;
    async fn patch_rs(&self, name: &str, patch: Value) -> Result<ReplicaSet>;
    /// ReplicaSets of the namespace whose controller is `owner_uid`, oldest first (same
    /// second: by name).
    async fn rss_of(&self, owner_uid: &str) -> Result<Vec<ReplicaSet>>;
    /// Every ReplicaSet of the namespace, oldest first (same second: by name).
    async fn all_rss(&self) -> Result<Vec<ReplicaSet>>;
    /// Waits up to [`WITHIN`] until the ReplicaSets controlled by `owner_uid` (oldest
    /// first) satisfy `check`.
    async fn wait_rss(
        &self,
        owner_uid: &str,
        what: &str,
        check: impl Fn(&[ReplicaSet]) -> bool,
    ) -> Result<Vec<ReplicaSet>>;
    async fn wait_rss_for(
        &self,
        owner_uid: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&[ReplicaSet]) -> bool,
    ) -> Result<Vec<ReplicaSet>>;
    /// Fails unless the ReplicaSets controlled by `owner_uid` satisfy `check` for the whole
    /// of `period`; the error shows what broke it.
    async fn rss_hold(
        &self,
        owner_uid: &str,
        what: &str,
        period: Duration,
        check: impl Fn(&[ReplicaSet]) -> bool,
    ) -> Result<()>;
    /// Core/v1 events the Deployment controller recorded about Deployment `name`.
    async fn events_of(&self, name: &str) -> Result<Vec<Event>>;
    /// Messages of the `ScalingReplicaSet` events about `name`, sorted.
    async fn scaling_messages(&self, name: &str) -> Result<Vec<String>>;
    /// Waits until the `ScalingReplicaSet` events about `name` are exactly `expected`
    /// (any order, each once).
    async fn wait_scaling_events(&self, name: &str, expected: &[String]) -> Result<()>;
    /// Waits for an event about Deployment `name` with exactly this type, reason and
    /// message.
    async fn wait_event(
        &self,
        name: &str,
        type_: &str,
        reason: &str,
        message: &str,
    ) -> Result<Event>;
}

impl DeployEnv for Env {
    fn start(&self) -> Controllers {
        // The gate's default at the server's minor, as rkcm takes it (off for v1.34).
        self.start_gated(self.cluster.keeps_terminating_replicas())
    }

    fn start_gated(&self, terminating_replicas: bool) -> Controllers {
        let deployment = rkcm_deployment::Config {
            terminating_replicas,
            ..rkcm_deployment::Config::default()
        };
        let replicaset = rkcm_replicaset::Config {
            terminating_replicas,
            ..rkcm_replicaset::Config::default()
        };
        self.controllers()
            .spawn(rkcm_deployment::NAME, |ctx| {
                rkcm_deployment::start(ctx, deployment.clone())
            })
            .spawn("replicaset-controller", |ctx| {
                rkcm_replicaset::start_replicaset(ctx, replicaset.clone())
            })
            .run()
    }

    fn deployments(&self) -> Api<Deployment> {
        self.api()
    }

    async fn create_deployment(&self, body: Value) -> Result<Deployment> {
        self.create(body).await
    }

    async fn deployment(&self, name: &str) -> Result<Deployment> {
        self.get(name).await
    }

    async fn patch_deployment(&self, name: &str, patch: Value) -> Result<Deployment> {
        self.merge(name, patch).await
    }

    async fn patch_strategic(&self, name: &str, patch: Value) -> Result<Deployment> {
        self.strategic(name, patch).await
    }

    async fn set_image(&self, name: &str, image: &str) -> Result<Deployment> {
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": image}
        ]}}}});
        self.strategic(name, patch)
            .await
            .with_context(|| format!("setting image of Deployment {name} to {image}"))
    }

    async fn scale(&self, name: &str, replicas: i32) -> Result<Deployment> {
        self.set_replicas(name, replicas).await
    }

    async fn set_paused(&self, name: &str, paused: bool) -> Result<Deployment> {
        self.merge(name, json!({"spec": {"paused": paused}})).await
    }

    async fn annotate(&self, name: &str, key: &str, value: Option<&str>) -> Result<Deployment> {
        self.merge(name, json!({"metadata": {"annotations": {key: value}}}))
            .await
    }

    async fn wait_deployment(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Deployment) -> bool,
    ) -> Result<Deployment> {
        self.wait_deployment_for(name, what, WITHIN, check).await
    }

    async fn wait_deployment_for(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Deployment) -> bool,
    ) -> Result<Deployment> {
        self.wait_object(name, what, timeout, check, describe_deployment)
            .await
    }

    async fn wait_complete(&self, name: &str) -> Result<Deployment> {
        self.wait_deployment(name, "rollout complete", complete)
            .await
    }

    async fn wait_complete_at(&self, name: &str, revision: &str) -> Result<Deployment> {
        self.wait_deployment(
            name,
            &format!("rollout of revision {revision} complete"),
            |d| complete(d) && ann(d, REVISION) == Some(revision),
        )
        .await
    }

    async fn deployment_holds(
        &self,
        name: &str,
        what: &str,
        period: Duration,
        check: impl Fn(&Deployment) -> bool,
    ) -> Result<()> {
        self.object_holds(name, what, period, check, describe_deployment)
            .await
    }

    async fn patch_rs(&self, name: &str, patch: Value) -> Result<ReplicaSet> {
        self.merge(name, patch).await
    }

    async fn rss_of(&self, owner_uid: &str) -> Result<Vec<ReplicaSet>> {
        let mut rss = self.all_rss().await?;
        rss.retain(|rs| controller_uid(rs) == Some(owner_uid));
        Ok(rss)
    }

    async fn all_rss(&self) -> Result<Vec<ReplicaSet>> {
        let mut rss = self.list::<ReplicaSet>().await?;
        sort_by_age(&mut rss);
        Ok(rss)
    }

    async fn wait_rss(
        &self,
        owner_uid: &str,
        what: &str,
        check: impl Fn(&[ReplicaSet]) -> bool,
    ) -> Result<Vec<ReplicaSet>> {
        self.wait_rss_for(owner_uid, what, WITHIN, check).await
    }

    async fn wait_rss_for(
        &self,
        owner_uid: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&[ReplicaSet]) -> bool,
    ) -> Result<Vec<ReplicaSet>> {
        let what = format!("ReplicaSets of {owner_uid} in {}: {what}", self.name());
        wait_seen(
            &what,
            timeout,
            || self.rss_of(owner_uid),
            |rss| check(rss),
            |rss| describe_rss(rss),
        )
        .await
    }

    async fn rss_hold(
        &self,
        owner_uid: &str,
        what: &str,
        period: Duration,
        check: impl Fn(&[ReplicaSet]) -> bool,
    ) -> Result<()> {
        holds_seen(
            what,
            period,
            || self.rss_of(owner_uid),
            |rss| check(rss),
            |rss| describe_rss(rss),
        )
        .await
    }

    async fn events_of(&self, name: &str) -> Result<Vec<Event>> {
        self.events_about("Deployment", name, COMPONENT).await
    }

    async fn scaling_messages(&self, name: &str) -> Result<Vec<String>> {
        let mut msgs: Vec<String> = self
            .events_by_reason("Deployment", name, COMPONENT, "ScalingReplicaSet")
            .await?
            .into_iter()
            .filter(|e| e.type_.as_deref() == Some("Normal"))
            .filter_map(|e| e.message)
            .collect();
        msgs.sort();
        Ok(msgs)
    }

    async fn wait_scaling_events(&self, name: &str, expected: &[String]) -> Result<()> {
        let mut want = expected.to_vec();
        want.sort();
        wait_seen(
            &format!("ScalingReplicaSet events of {name} to be exactly {want:?}"),
            WITHIN,
            || self.scaling_messages(name),
            |got| *got == want,
            |got| format!("{got:?}"),
        )
        .await
        .map(drop)
    }

    async fn wait_event(
        &self,
        name: &str,
        type_: &str,
        reason: &str,
        message: &str,
    ) -> Result<Event> {
        self.wait_event_about(("Deployment", name, COMPONENT), type_, reason, message)
            .await
    }
}

/// Creates `d`, makes its V1 pods ready and waits for the rollout to complete; returns the
/// Deployment and its one ReplicaSet.
pub async fn settled_v1(env: &Env, body: Value) -> Result<(Deployment, ReplicaSet)> {
    let name = body["metadata"]["name"]
        .as_str()
        .context("body has no name")?
        .to_owned();
    let n = body["spec"]["replicas"].as_i64().context("no replicas")?;
    let d = env.create_deployment(body).await?;
    let rss = env
        .wait_rss(&uid_of(&d), "one V1 RS", |rss| rss.len() == 1)
        .await?;
    env.make_ready(&uid_of(&rss[0]), usize::try_from(n)?)
        .await?;
    let d = env.wait_complete(&name).await?;
    Ok((d, rss[0].clone()))
}

// ---- Builders ----------------------------------------------------------------------------

/// Deployment `name` with `replicas`, selector and template labels `app=<name>`, image
/// [`V1`], API defaults for everything else (RollingUpdate 25%/25%, history 10, deadline
/// 600 s).
pub fn deployment(name: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template(&[("app", name)], V1),
        },
    })
}

/// `strategy: RollingUpdate` with these `maxSurge` / `maxUnavailable` (ints or "N%").
pub fn rolling(d: &mut Value, max_surge: Value, max_unavailable: Value) {
    d["spec"]["strategy"] = json!({
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable},
    });
}

/// `strategy: Recreate`.
pub fn recreate(d: &mut Value) {
    d["spec"]["strategy"] = json!({"type": "Recreate"});
}

// ---- Accessors ---------------------------------------------------------------------------

/// `names`, sorted.
pub fn sorted(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    names.sort();
    names
}

pub fn annotations<K: kube::Resource>(obj: &K) -> BTreeMap<String, String> {
    obj.meta().annotations.clone().unwrap_or_default()
}

fn sort_by_age(rss: &mut [ReplicaSet]) {
    rss.sort_by(|a, b| {
        (&a.metadata.creation_timestamp, &a.metadata.name)
            .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
    });
}

pub fn rs_observed(rs: &ReplicaSet) -> bool {
    rs.status.as_ref().and_then(|s| s.observed_generation) == rs.metadata.generation
}

/// The one ReplicaSet of `rss` whose template runs `image`.
pub fn with_image<'a>(rss: &'a [ReplicaSet], image: &str) -> Option<&'a ReplicaSet> {
    let mut it = rss.iter().filter(|rs| image_of(rs) == image);
    let first = it.next();
    if it.next().is_some() {
        return None;
    }
    first
}

/// `spec.replicas` of the one ReplicaSet running `image`, if there is exactly one.
pub fn size_of(rss: &[ReplicaSet], image: &str) -> Option<i32> {
    with_image(rss, image).map(spec_replicas)
}

/// True if the ReplicaSet running `image` has `spec.replicas == n` and that many pods.
pub fn settled(rss: &[ReplicaSet], image: &str, n: i32) -> bool {
    with_image(rss, image).is_some_and(|rs| spec_replicas(rs) == n && rs_counts(rs).0 == n)
}

pub fn condition(d: &Deployment, type_: &str) -> Option<DeploymentCondition> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(type_))
        .cloned()
}

/// True if the condition `type_` has this status and reason.
pub fn has_condition(d: &Deployment, type_: &str, status: &str, reason: &str) -> bool {
    condition(d, type_)
        .is_some_and(|c| c.status.as_deref() == Some(status) && c.reason.as_deref() == Some(reason))
}

/// `Available` False as the controller writes it while too few replicas are available.
pub fn available_false() -> Option<(String, String, String)> {
    triple(
        "False",
        "MinimumReplicasUnavailable",
        "Deployment does not have minimum availability.",
    )
}

/// `Available` True as the controller writes it.
pub fn available_true() -> Option<(String, String, String)> {
    triple(
        "True",
        "MinimumReplicasAvailable",
        "Deployment has minimum availability.",
    )
}

/// `Progressing` True once ReplicaSet `rs_name` is complete.
pub fn progressed(rs_name: &str) -> Option<(String, String, String)> {
    triple(
        "True",
        "NewReplicaSetAvailable",
        &format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
    )
}

/// Fails unless `d`'s `Progressing` condition says ReplicaSet `rs_name` is complete.
pub fn ensure_progressed(d: &Deployment, rs_name: &str) -> Result<()> {
    ensure_eq(
        cond_triple(d, "Progressing"),
        progressed(rs_name),
        "Progressing",
    )
}

/// The `ScalingReplicaSet` messages of the first rolling step of a 10-replica Deployment
/// with the API's default 25%/25% (scenario 3): old 0→10, new 0→3, old 10→8, new 3→5.
pub fn first_steps(old_name: &str, new_name: &str) -> Vec<String> {
    vec![
        format!("Scaled up replica set {old_name} from 0 to 10"),
        format!("Scaled up replica set {new_name} from 0 to 3"),
        format!("Scaled down replica set {old_name} from 10 to 8"),
        format!("Scaled up replica set {new_name} from 3 to 5"),
    ]
}

/// Sets image [`V2`] on Deployment `web` (10 replicas settled at [`V1`]) and waits for the
/// first rolling step: old 8 / new 5, each with its pods.
pub async fn first_step(env: &Env, d_uid: &str) -> Result<Vec<ReplicaSet>> {
    env.set_image("web", V2).await?;
    env.wait_rss(d_uid, "old 8 / new 5 with their pods", |rss| {
        rss.len() == 2 && settled(rss, V1, 8) && settled(rss, V2, 5)
    })
    .await
}

/// Waits for revision 2 of 2-replica Deployment `web` to be complete: old ([`V1`]) at 0,
/// new ([`V2`]) at 2, each with its pods; returns the ReplicaSets.
pub async fn rolled_to_v2(env: &Env, d_uid: &str) -> Result<Vec<ReplicaSet>> {
    env.wait_complete_at("web", "2").await?;
    env.wait_rss(d_uid, "old 0 / new 2", |rss| {
        rss.len() == 2 && settled(rss, V1, 0) && settled(rss, V2, 2)
    })
    .await
}

/// Fails unless `rs` has exactly one owner reference: the controller reference to
/// Deployment `web` with UID `d_uid`, blocking owner deletion.
pub fn ensure_controlled_by_web(rs: &ReplicaSet, d_uid: &str) -> Result<()> {
    let refs = rs.metadata.owner_references.clone().unwrap_or_default();
    ensure_eq(refs.len(), 1, "owner references")?;
    let r = &refs[0];
    ensure_eq(
        (
            r.api_version.as_str(),
            r.kind.as_str(),
            r.name.as_str(),
            r.uid.as_str(),
            r.controller,
            r.block_owner_deletion,
        ),
        (
            "apps/v1",
            "Deployment",
            "web",
            d_uid,
            Some(true),
            Some(true),
        ),
        "controller reference",
    )
}

/// `(status, reason, message)` of a condition, for exact comparisons.
pub fn cond_triple(d: &Deployment, type_: &str) -> Option<(String, String, String)> {
    condition(d, type_).map(|c| {
        (
            c.status.unwrap_or_default(),
            c.reason.unwrap_or_default(),
            c.message.unwrap_or_default(),
        )
    })
}

pub fn triple(status: &str, reason: &str, message: &str) -> Option<(String, String, String)> {
    Some((status.to_owned(), reason.to_owned(), message.to_owned()))
}

/// `[replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas]`
/// (absent counts are 0, as the API omits zeros).
pub fn counts(d: &Deployment) -> [i32; 5] {
    let s = d.status.clone().unwrap_or_default();
    [
        s.replicas.unwrap_or(0),
        s.updated_replicas.unwrap_or(0),
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
        s.unavailable_replicas.unwrap_or(0),
    ]
}

pub fn observed(d: &Deployment) -> bool {
    d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
}

pub fn desired(d: &Deployment) -> i32 {
    d.spec.replicas.unwrap_or(1)
}

/// Rolled out: observed, every replica updated and available, and `Progressing` says so.
pub fn complete(d: &Deployment) -> bool {
    let [replicas, updated, _, available, _] = counts(d);
    let want = desired(d);
    observed(d)
        && replicas == want
        && updated == want
        && available == want
        && has_condition(d, "Progressing", "True", "NewReplicaSetAvailable")
}

/// The Deployment's pod template as the API server stored it.
pub fn template_of(d: &Deployment) -> Result<Value> {
    Ok(serde_json::to_value(&d.spec.template)?)
}

/// The ReplicaSet's pod template without the `pod-template-hash` label.
pub fn template_without_hash(rs: &ReplicaSet) -> Result<Value> {
    let mut t = serde_json::to_value(
        rs.spec
            .template
            .as_ref()
            .context("ReplicaSet has no template")?,
    )?;
    if let Some(labels) = t["metadata"]["labels"].as_object_mut() {
        labels.remove(HASH);
    }
    Ok(t)
}

/// One line about a Deployment for failure messages.
pub fn describe_deployment(d: &Deployment) -> String {
    let s = d.status.clone().unwrap_or_default();
    let conds: Vec<String> = s
        .conditions
        .iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={}/{}({:?}; updated {}, transition {})",
                c.type_.as_deref().unwrap_or_default(),
                c.status.as_deref().unwrap_or_default(),
                c.reason.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default(),
                c.last_update_time
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
                c.last_transition_time
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
            )
        })
        .collect();
    format!(
        "spec.replicas={} paused={} generation={:?} observed={:?} \
         [replicas,updated,ready,available,unavailable]={:?} terminating={:?} \
         collisionCount={:?} revision={:?} deleting={} conditions={conds:?}",
        desired(d),
        d.spec.paused.unwrap_or(false),
        d.metadata.generation,
        s.observed_generation,
        counts(d),
        s.terminating_replicas,
        s.collision_count,
        ann(d, REVISION),
        d.metadata.deletion_timestamp.is_some(),
    )
}

// ---- ReplicaSet arithmetic over watch histories -------------------------------------------

/// What the Deployment suite reads from a [`History`] of ReplicaSets.
pub trait RsHistory {
    /// `spec.replicas` of ReplicaSet `name` over time, repeats dropped.
    fn sizes(&self, name: &str) -> Result<Vec<i32>>;
    /// The largest Σ `spec.replicas` over the ReplicaSets controlled by `owner_uid` at any
    /// point of the history.
    fn max_total(&self, owner_uid: &str) -> Result<i32>;
}

impl RsHistory for History<ReplicaSet> {
    fn sizes(&self, name: &str) -> Result<Vec<i32>> {
        let mut out: Vec<i32> = Vec::new();
        for s in self.versions(name)? {
            if let Seen::Applied(rs) = s {
                let n = spec_replicas(&rs);
                if out.last() != Some(&n) {
                    out.push(n);
                }
            }
        }
        Ok(out)
    }

    fn max_total(&self, owner_uid: &str) -> Result<i32> {
        let mut now: BTreeMap<String, i32> = BTreeMap::new();
        let mut max = 0;
        for s in self.seen()? {
            match s {
                Seen::Applied(rs) if controller_uid(&rs) == Some(owner_uid) => {
                    now.insert(name_of(&rs), spec_replicas(&rs));
                }
                Seen::Applied(rs) | Seen::Deleted(rs) => {
                    now.remove(&name_of(&rs));
                }
            }
            max = max.max(now.values().sum());
        }
        Ok(max)
    }
}
