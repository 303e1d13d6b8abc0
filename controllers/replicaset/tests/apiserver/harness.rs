//! What only the ReplicaSet suite needs on top of the testkit's harness: the RS and RC
//! controllers in-process (optionally with a lagging pod watch or a request recorder),
//! ReplicaSet/ReplicationController helpers on [`Env`], builders and status accessors.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition};
pub use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::Api;
pub use rkcm_testkit::harness::*;
use serde_json::{Value, json};

/// How long "never happens" is watched.
pub const HOLDS: Duration = Duration::from_secs(5);

/// The RS and RC controllers on informers of their own; stopped when dropped.
pub fn start_controllers(env: &Env, cfg: rkcm_replicaset::Config) -> Controllers {
    start_with_watch_lag(env, cfg, Duration::ZERO)
}

/// Like [`start_controllers`], but the controllers' pod informer sees every change `lag`
/// late (writes are not delayed).
pub fn start_with_watch_lag(env: &Env, cfg: rkcm_replicaset::Config, lag: Duration) -> Controllers {
    start_recorded(env, cfg, lag, None)
}

/// Like [`start_with_watch_lag`]; every request the controllers send themselves (not their
/// informers' lists and watches) goes to `recorder` too.
pub fn start_recorded(
    env: &Env,
    cfg: rkcm_replicaset::Config,
    lag: Duration,
    recorder: Option<&rkcm_testkit::recorder::Recorder>,
) -> Controllers {
    let client = env.cluster.client();
    let informer_client = if lag.is_zero() {
        client.clone()
    } else {
        crate::lag::lagging(client.clone(), lag)
    };
    let client = match recorder {
        Some(r) => r.wrap(client),
        None => client,
    };
    let rc_cfg = cfg.clone();
    Controllers::with_clients(client, informer_client, &[env.name()])
        .spawn("replicaset-controller", |ctx| {
            rkcm_replicaset::start_replicaset(ctx, cfg.clone())
        })
        .spawn("replicationcontroller-controller", |ctx| {
            rkcm_replicaset::start_replication_controller(ctx, rc_cfg.clone())
        })
        .run()
}

/// ReplicaSet and ReplicationController helpers on the test environment.
#[allow(async_fn_in_trait)]
pub trait RsEnv {
    /// Upstream defaults (of the server's minor).
    fn config(&self) -> rkcm_replicaset::Config;
    /// Both controllers with [`RsEnv::config`].
    fn start(&self) -> Controllers;
    fn rcs(&self) -> Api<ReplicationController>;
    async fn create_rc(&self, rc: Value) -> Result<ReplicationController>;
    /// Sets `spec.replicas` of ReplicaSet `name`.
    async fn scale(&self, name: &str, replicas: i32) -> Result<()>;
}

impl RsEnv for Env {
    fn config(&self) -> rkcm_replicaset::Config {
        rkcm_replicaset::Config {
            // The gate's default at the server's minor, as rkcm takes it.
            terminating_replicas: self.cluster.keeps_terminating_replicas(),
            ..rkcm_replicaset::Config::default()
        }
    }

    fn start(&self) -> Controllers {
        start_controllers(self, self.config())
    }

    fn rcs(&self) -> Api<ReplicationController> {
        self.api()
    }

    async fn create_rc(&self, rc: Value) -> Result<ReplicationController> {
        self.create(rc).await
    }

    async fn scale(&self, name: &str, replicas: i32) -> Result<()> {
        self.set_replicas::<ReplicaSet>(name, replicas)
            .await
            .map(drop)
    }
}

/// Fails unless `check` holds for the pods controlled by `uid` (terminating ones included)
/// during the whole of `period`, while ReplicaSet `name` gets a new annotation value at every
/// poll (each change is a sync).
pub async fn holds_while_poking(
    env: &Env,
    (name, uid): (&str, &str),
    what: &str,
    period: Duration,
    check: impl Fn(&[Pod]) -> bool,
) -> Result<()> {
    let polls = AtomicU64::new(0);
    rkcm_testkit::holds_for(what, period, || {
        let (env, polls, check) = (env, &polls, &check);
        async move {
            let poke = format!(
                "{}-{}",
                jiff::Timestamp::now().as_nanosecond(),
                polls.fetch_add(1, Ordering::SeqCst)
            );
            env.merge::<ReplicaSet>(name, json!({"metadata": {"annotations": {"poke": poke}}}))
                .await?;
            Ok(check(&env.owned(uid).await?))
        }
    })
    .await
}

/// Creates ReplicaSet `web` (selector and template `app=web`, the template with finalizer
/// [`HOLD`] if `hold`) and waits for its `replicas` active pods; returns its UID and them.
pub async fn web_with_pods(env: &Env, replicas: usize, hold: bool) -> Result<(String, Vec<Pod>)> {
    let mut body = replicaset(
        "web",
        i32::try_from(replicas)?,
        &[("app", "web")],
        &[("app", "web")],
    );
    if hold {
        body["spec"]["template"]["metadata"]["finalizers"] = json!([HOLD]);
    }
    let rs = env.create_rs(body).await?;
    let uid = uid_of(&rs);
    let pods = env.wait_active(&uid, replicas).await?;
    Ok((uid, pods))
}

/// A pod template: one container, never scheduled by kube-scheduler.
pub fn template(labels_: &[(&str, &str)]) -> Value {
    rkcm_testkit::harness::template(labels_, PAUSE)
}

/// A ReplicaSet selecting `selector` with a template labelled `template_labels`.
pub fn replicaset(
    name: &str,
    replicas: i32,
    selector: &[(&str, &str)],
    template_labels: &[(&str, &str)],
) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels(selector)},
            "template": template(template_labels),
        },
    })
}

/// `(replicas, fullyLabeledReplicas, readyReplicas, availableReplicas)`.
pub fn rs_status(rs: &ReplicaSet) -> (i32, i32, i32, i32) {
    let s = rs.status.clone().unwrap_or_default();
    (
        s.replicas,
        s.fully_labeled_replicas.unwrap_or(0),
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
    )
}

pub fn observed(rs: &ReplicaSet) -> bool {
    rs.status.as_ref().and_then(|s| s.observed_generation) == rs.metadata.generation
}

pub fn failure_condition(rs: &ReplicaSet) -> Option<ReplicaSetCondition> {
    rs.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some("ReplicaFailure"))
        .cloned()
}
