//! What only the StatefulSet suite needs on top of the testkit's harness: the controller
//! in-process (stopped and restarted by some scenarios), a StatefulSet body, status waits,
//! and pod waits by name.

#![allow(dead_code)]

use std::ops::Deref;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::apps::v1::ControllerRevision;
pub use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
pub use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::Api;
pub use rkcm_testkit::TestVolumes;
pub use rkcm_testkit::harness::{Env as Base, *};
use serde_json::{Value, json};

/// "Within T" for anything the controller and kwok should do promptly (rollouts of several
/// pods one by one: longer than the testkit's [`rkcm_testkit::harness::WITHIN`]).
pub const WITHIN: Duration = Duration::from_secs(60);
/// How long "never happens" is watched when the scenario names no period.
pub const HOLDS: Duration = Duration::from_secs(5);
pub const COMPONENT: &str = "statefulset-controller";

pub const V1: &str = "registry.k8s.io/pause:3.10";
pub const V2: &str = "registry.k8s.io/pause:3.9";
pub const V3: &str = "registry.k8s.io/pause:3.8";

pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The testkit's [`Base`] environment with the StatefulSet controller, running unless a
/// scenario stopped it.
pub struct Env<'a> {
    base: &'a Base,
    controller: Option<Controllers>,
}

impl Deref for Env<'_> {
    type Target = Base;
    fn deref(&self) -> &Base {
        self.base
    }
}

impl<'a> Env<'a> {
    /// `base` with the controller started.
    pub fn new(base: &'a Base) -> Self {
        let mut env = Self {
            base,
            controller: None,
        };
        env.start_controller();
        env
    }

    /// `base` with the controller started on a client whose requests `recorder` records (its
    /// informers read through the plain client). Not restarted by [`Env::start_controller`].
    pub fn recorded(base: &'a Base, recorder: &rkcm_testkit::recorder::Recorder) -> Self {
        let client = base.cluster.client();
        let controller =
            Controllers::with_clients(recorder.wrap(client.clone()), client, &[base.name()])
                .spawn("statefulset", |ctx| {
                    rkcm_statefulset::start(ctx, rkcm_statefulset::Config::default())
                })
                .run();
        Self {
            base,
            controller: Some(controller),
        }
    }

    pub fn start_controller(&mut self) {
        self.start_controller_with(rkcm_statefulset::Config::default());
    }

    /// Starts the controller with `cfg` unless it runs.
    pub fn start_controller_with(&mut self, cfg: rkcm_statefulset::Config) {
        if self.controller.is_none() {
            self.controller = Some(
                self.controllers()
                    .spawn("statefulset", move |ctx| {
                        rkcm_statefulset::start(ctx, cfg.clone())
                    })
                    .run(),
            );
        }
    }

    pub async fn stop_controller(&mut self) -> Result<()> {
        match self.controller.take() {
            Some(c) => c.stop().await,
            None => Ok(()),
        }
    }

    /// Ends a scenario: stops the controller (checking it ends cleanly) and returns the
    /// scenario's result, which wins over a failing stop.
    pub async fn finish(mut self, result: Result<()>) -> Result<()> {
        let stopped = self.stop_controller().await;
        result?;
        stopped
    }

    pub fn sets(&self) -> Api<StatefulSet> {
        self.api()
    }
    pub fn claims(&self) -> Api<PersistentVolumeClaim> {
        self.api()
    }

    pub async fn create_set(&self, body: Value) -> Result<StatefulSet> {
        self.create(body).await
    }

    pub async fn set(&self, name: &str) -> Result<StatefulSet> {
        self.get(name).await
    }

    pub async fn patch_set(&self, name: &str, patch: Value) -> Result<StatefulSet> {
        self.merge(name, patch).await
    }

    pub async fn scale(&self, name: &str, replicas: i32) -> Result<StatefulSet> {
        self.set_replicas(name, replicas).await
    }

    pub async fn set_image(&self, name: &str, image: &str) -> Result<StatefulSet> {
        self.patch_set(
            name,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}),
        )
        .await
    }

    pub async fn status(&self, name: &str) -> Result<StatefulSetStatus> {
        Ok(self.set(name).await?.status.unwrap_or_default())
    }

    /// Waits until the set's status satisfies `check`; on timeout the error shows the
    /// status last seen.
    pub async fn wait_status(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&StatefulSet, &StatefulSetStatus) -> bool,
    ) -> Result<StatefulSetStatus> {
        let set = self
            .wait_object(
                name,
                what,
                WITHIN,
                |s: &StatefulSet| check(s, &s.status.clone().unwrap_or_default()),
                describe_status,
            )
            .await?;
        Ok(set.status.unwrap_or_default())
    }

    /// Waits for the rollout to settle: all `replicas` pods ready and updated, current ==
    /// update revision, observed generation current.
    pub async fn wait_settled(&self, name: &str, replicas: i32) -> Result<StatefulSetStatus> {
        self.wait_status(name, &format!("{name} settled at {replicas}"), |s, st| {
            st.observed_generation == s.metadata.generation
                && st.replicas == replicas
                && st.ready_replicas.unwrap_or(0) == replicas
                && st.updated_replicas.unwrap_or(0) == replicas
                && st.current_replicas.unwrap_or(0) == replicas
                && st.current_revision == st.update_revision
        })
        .await
    }

    /// Pod `name`, `None` if it does not exist.
    pub async fn pod(&self, name: &str) -> Result<Option<Pod>> {
        self.get_opt(name).await
    }

    /// Names of the pods in the namespace, sorted.
    pub async fn pod_names(&self) -> Result<Vec<String>> {
        Ok(sorted_names(&self.list::<Pod>().await?))
    }

    /// UIDs of the pods in the namespace, in list order.
    pub async fn pod_uids(&self) -> Result<Vec<Option<String>>> {
        Ok(self
            .pods()
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .map(|p| p.metadata.uid)
            .collect())
    }

    /// Waits until exactly `names` exist and are Running and Ready.
    pub async fn wait_ready_pods(&self, names: &[&str]) -> Result<Vec<Pod>> {
        let want = sorted(names);
        wait_seen(
            &format!("exactly {want:?} running and ready"),
            WITHIN,
            || self.list::<Pod>(),
            |pods| {
                sorted_names(pods) == want
                    && pods
                        .iter()
                        .all(|p| phase(p) == "Running" && is_ready(p) && is_active(p))
            },
            |pods| format!("{:?}", pods.iter().map(describe_pod).collect::<Vec<_>>()),
        )
        .await
    }

    /// Waits until exactly `names` exist (any state).
    pub async fn wait_pod_names(&self, names: &[&str]) -> Result<()> {
        let want = sorted(names);
        wait_seen(
            &format!("exactly pods {want:?}"),
            WITHIN,
            || self.pod_names(),
            |got| *got == want,
            |got| format!("{got:?}"),
        )
        .await
        .map(drop)
    }

    /// Puts the [`HOLD`] finalizer on `pod` (released by the testkit's cleanup).
    pub async fn hold(&self, pod: &str) -> Result<()> {
        self.merge::<Pod>(pod, json!({"metadata": {"finalizers": [HOLD]}}))
            .await
            .map(drop)
    }

    /// Waits until the controller recorded an event on `set` with `reason` whose message
    /// contains `message`.
    pub async fn wait_event(&self, set: &str, reason: &str, message: &str) -> Result<()> {
        wait_seen(
            &format!("event {reason} {message:?}"),
            WITHIN,
            || self.events_by_reason("StatefulSet", set, COMPONENT, reason),
            |events| {
                events
                    .iter()
                    .any(|e| e.message.as_deref().is_some_and(|m| m.contains(message)))
            },
            |events| {
                format!(
                    "{:?}",
                    events.iter().map(describe_event).collect::<Vec<_>>()
                )
            },
        )
        .await
        .map(drop)
    }

    /// The namespace's revisions, by `.revision`.
    pub async fn revision_list(&self) -> Result<Vec<ControllerRevision>> {
        let mut r = self.list::<ControllerRevision>().await?;
        r.sort_by_key(|r| r.revision);
        Ok(r)
    }

    /// A watch-based history of the namespace's pods, from now on.
    pub async fn pod_history(&self) -> Result<History<Pod>> {
        History::start(self.pods()).await
    }

    pub async fn claim_history(&self) -> Result<History<PersistentVolumeClaim>> {
        History::start(self.claims()).await
    }
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
    v.sort();
    v
}

pub fn revision_of(p: &Pod) -> String {
    label(p, REVISION_LABEL).unwrap_or_default().to_owned()
}

/// StatefulSet `name` with `replicas`, selector/labels `app=<name>`, service `name`, one
/// container `c` with image [`V1`], terminationGracePeriodSeconds 1.
pub fn sts(name: &str, replicas: i32) -> Value {
    rkcm_testkit::builders::statefulset(name, replicas, "c", V1)
}

/// Merges `patch` into `base` (JSON merge-patch semantics for objects).
pub fn merge(mut base: Value, patch: Value) -> Value {
    merge_json(&mut base, &patch);
    base
}
