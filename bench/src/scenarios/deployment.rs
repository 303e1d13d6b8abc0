//! Deployment: N Deployments × R replicas created, then a rolling update of all (the issue's
//! "100 Deployments × 20 replicas created, then a rolling update of all").
//!
//! Setup: a fresh namespace with N Deployments (`d-000` ...) of R replicas each, pods on the
//! kwok nodes (`type: kwok`; Running and Ready as soon as they are bound, removed once
//! deleted), strategy RollingUpdate with upstream's defaults written out (maxSurge 25%,
//! maxUnavailable 25%; for R = 20: 5 and 5). The pod template carries the annotation
//! `rkcm-bench/version: "0"`. The manager then starts with `deployment-controller` and
//! `replicaset-controller`, and the bench times two phases:
//! 1. *create*: from the manager's start until every Deployment is complete: `status.replicas
//!    = updatedReplicas = readyReplicas = availableReplicas = R`, `observedGeneration =
//!    generation`, condition Progressing with reason `NewReplicaSetAvailable`; its one
//!    ReplicaSet at R (spec, status, ready); exactly R pods labelled for it, none terminating.
//! 2. *rolling update*: the bench patches every Deployment's pod template (`rkcm-bench/version`
//!    "0" → "1", a new pod-template-hash) and waits until each is complete again on the new
//!    template: the same status for the patched generation, the ReplicaSet of the new template
//!    at R, every other ReplicaSet at 0 (spec and status), exactly R pods, all of the new
//!    template, none terminating.
//!
//! The Deployments are created *before* the manager starts, so the create phase measures the
//! controllers (startup, informer sync, N rollouts from an initial list), not how fast the
//! bench can create N objects, and both managers start from exactly the same stored state. The
//! rolling update can only be started by the bench: its N patches (bounded concurrency,
//! well under a second) are inside the phase.
//!
//! Everything is observed with three watches of the run's namespace by the bench's own admin
//! client (Deployments, ReplicaSets, pod metadata), never by polling, so none of it counts as
//! the manager's requests (the audit log counts by client identity). Since a watch delivers
//! every change, the maxima below are over every state the apiserver stored, not samples.
//!
//! Correct (checked after the settle time, on fresh lists, the manager still running):
//! - no Deployment ever had ReplicaSets whose `spec.replicas` summed to more than
//!   R + maxSurge: the surge bound as upstream's controller keeps it (`NewRSNewReplicas`
//!   counts `spec.replicas`) and as upstream's e2e tests check it;
//! - no ReplicaSet ever controlled more non-terminating pods than the largest `spec.replicas`
//!   it had (no over-creation);
//! - exactly one ReplicaSet per template per Deployment was ever seen (one for the create, one
//!   new per rollout: no duplicate), each controlled by its Deployment;
//! - the end state is complete on the new template (the condition of phase 2), every pod
//!   controlled by a ReplicaSet of its Deployment, no pod of the old template or terminating.
//!
//! Observed and reported, not judged: the most non-terminating pods one Deployment had at
//! once. It briefly exceeds R + maxSurge with upstream too: the Deployment controller scales
//! the old ReplicaSet down and, in its next sync, the new one up, both by `spec.replicas`,
//! and the ReplicaSet controller may create the new pods before it has deleted the old
//! surplus. In the first full run (100 × 20) upstream reached 35 against 25, in 97 of the
//! 100 Deployments (rkcm: 35, in 89). Failing on it would fail the reference implementation.
//!
//! Cleanup deletes the Deployments, ReplicaSets and pods (no garbage collector runs on the
//! plane) and fails unless none is left.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::Stream;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::harness::{Env, Probe, Scenario, wait_model, wait_model_synced};
use crate::k8s;
use crate::results::Correctness;
use crate::scenarios::podgc::group;
use crate::scenarios::replicaset::kwok_pod_capacity;

mod args;
mod judge;
mod model;

pub use args::Args;
use judge::judge;
use model::{Change, DEPLOY_LABEL, Model, V_CREATE, V_ROLLOUT, VERSION_ANN};

/// Label of every object of the scenario (selector, pods).
const APP: &str = "rkcm-bench-deploy";

pub struct DeploymentRollout {
    pub args: Args,
}

pub struct State {
    ns: String,
    names: Vec<String>,
    model: Arc<Mutex<Model>>,
    changed: watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for State {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Applies every change of `stream` to the model and signals it.
fn follow<K, S>(
    stream: S,
    what: &'static str,
    model: Arc<Mutex<Model>>,
    tx: Arc<watch::Sender<u64>>,
    apply: fn(&mut Model, Change<K>),
) -> JoinHandle<()>
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        let mut pending = Vec::new();
        while let Some(ev) = k8s::next_event(&mut stream, what).await {
            let change = match ev {
                watcher::Event::Init => {
                    pending.clear();
                    continue;
                }
                watcher::Event::InitApply(o) => {
                    pending.push(o);
                    continue;
                }
                watcher::Event::InitDone => Change::Reset(std::mem::take(&mut pending)),
                watcher::Event::Apply(o) => Change::Apply(o),
                watcher::Event::Delete(o) => Change::Delete(o),
            };
            apply(
                &mut model
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
                change,
            );
            tx.send_modify(|n| *n += 1);
        }
    })
}

impl State {
    fn start(client: &Client, ns: &str, names: Vec<String>) -> Self {
        let model = Arc::new(Mutex::new(Model::default()));
        let (tx, changed) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let cfg = || watcher::Config::default().labels(&format!("app={APP}"));
        let tasks = vec![
            follow(
                watcher(Api::<Deployment>::namespaced(client.clone(), ns), cfg()).default_backoff(),
                "deployments",
                model.clone(),
                tx.clone(),
                Model::deploy_change,
            ),
            follow(
                watcher(Api::<ReplicaSet>::namespaced(client.clone(), ns), cfg()).default_backoff(),
                "replicasets",
                model.clone(),
                tx.clone(),
                Model::rs_change,
            ),
            // All pods of the namespace, not only labelled ones: a stray pod is noticed too.
            follow(
                watcher(
                    Api::<PartialObjectMeta<Pod>>::namespaced(client.clone(), ns),
                    watcher::Config::default(),
                )
                .default_backoff(),
                "pods",
                model.clone(),
                tx,
                Model::pod_change,
            ),
        ];
        Self {
            ns: ns.to_string(),
            names,
            model,
            changed,
            tasks,
        }
    }

    /// Waits until every Deployment is complete on `version`; marks `first` when the first
    /// one is. Returns the phase note.
    async fn wait_complete(
        &mut self,
        probe: &Probe,
        phase: &str,
        version: &str,
        want: usize,
        first: &str,
    ) -> anyhow::Result<String> {
        let names = self.names.clone();
        let total = names.len();
        let mut first_seen = false;
        let mut status_seen = false;
        wait_model(&self.model, &mut self.changed, probe, |m: &Model| {
            if !status_seen && m.deploys.values().any(|d| d.observed_generation > 0) {
                status_seen = true;
                if version == V_CREATE {
                    probe.mark("first Deployment status");
                }
            }
            let (done, why) = m.progress(&names, version, want);
            if done > 0 && !first_seen {
                first_seen = true;
                probe.mark(first);
            }
            let (pods, terminating) = m.pods_total();
            match why {
                None => {
                    let (wd, wa) = m.worst_active();
                    let (_, ws) = m.worst_rs_spec();
                    Ok(format!(
                        "{done}/{total} complete, {pods} pods; ReplicaSet replicas of one \
                         Deployment summed at most {ws}; at most {wa} non-terminating pods of \
                         one Deployment at once ({wd})"
                    ))
                }
                Some(why) => Err(format!(
                    "{phase}: {done}/{total} Deployments complete, {pods} pods \
                     ({terminating} terminating); first incomplete {why}"
                )),
            }
        })
        .await
    }
}

impl Scenario for DeploymentRollout {
    type State = State;

    fn id(&self) -> &'static str {
        "deployment-rollout"
    }

    fn title(&self) -> String {
        format!(
            "Deployment: {} × {} replicas created, then a rolling update of all",
            group(self.args.deployments),
            group(self.args.replicas)
        )
    }

    fn description(&self) -> String {
        let (n, r) = (group(self.args.deployments), group(self.args.replicas));
        let total = group(self.args.deployments * self.args.replicas);
        format!(
            "{n} Deployments of {r} replicas each, created in a fresh namespace before the \
             manager starts (so the bench's create speed is not measured; both managers \
             start from the same stored state), pods on the kwok nodes (Running and Ready as \
             soon as they are bound; removed once deleted), strategy RollingUpdate with \
             maxSurge 25% ({s}) and maxUnavailable 25% ({u}). The manager starts with \
             `deployment-controller` and `replicaset-controller`. **create** (manager start \
             to the condition): every Deployment reports `replicas`, `updatedReplicas`, \
             `readyReplicas` and `availableReplicas` = {r} with `observedGeneration` = \
             `generation` and Progressing reason `NewReplicaSetAvailable`, its ReplicaSet is \
             at {r} and it has exactly {r} pods ({total} in all). **rolling update** (from \
             the bench's first template patch — an annotation of the pod template, all \
             {n} Deployments patched with bounded concurrency — to the condition): the same \
             status for the new generation, the new ReplicaSet at {r} ready, the old one at \
             0, exactly {r} pods per Deployment, all of the new template, none terminating. \
             The bench observes with watches of its own (Deployments, ReplicaSets, pod \
             metadata), not counted as the manager's requests. Correct: no Deployment's \
             ReplicaSets ever summed to more than {limit} replicas (replicas + maxSurge: the \
             bound as upstream keeps it, on `spec.replicas`), no ReplicaSet ever had more \
             non-terminating pods than its largest `spec.replicas`, exactly one ReplicaSet \
             per template per Deployment (no duplicate), each controlled by its Deployment, \
             and after the settle time the end state is complete on the new template with no \
             pod of the old one; cleanup then fails unless nothing is left. Reported, not \
             judged: the most non-terminating pods one Deployment had at once, which briefly \
             exceeds {limit} with upstream too (the new ReplicaSet's pods can be created \
             before the ReplicaSet controller has deleted the old one's surplus).",
            s = self.args.max_surge(),
            u = self.args.max_unavailable(),
            limit = self.args.limit(),
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("deployments".into(), self.args.deployments.to_string()),
            ("replicas".into(), self.args.replicas.to_string()),
            ("max_surge".into(), self.args.max_surge().to_string()),
            (
                "max_unavailable".into(),
                self.args.max_unavailable().to_string(),
            ),
        ])
    }

    fn controllers(&self) -> Vec<&'static str> {
        vec!["deployment-controller", "replicaset-controller"]
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        let client = &env.client;
        anyhow::ensure!(
            self.args.deployments > 0 && self.args.replicas > 0,
            "--deployments and --replicas must be positive"
        );
        k8s::ensure_namespace(client, ns).await?;
        // A reused plane may still hold an earlier run's objects.
        remove(env, ns).await?;
        let capacity = kwok_pod_capacity(client).await?;
        let need = self.args.deployments * self.args.limit();
        anyhow::ensure!(
            capacity >= need,
            "the kwok nodes hold {capacity} pods, fewer than {need} ({} Deployments × \
             (replicas + maxSurge) {}; raise BENCH_NODES: 110 pods per node)",
            self.args.deployments,
            self.args.limit()
        );

        let names = self.args.names();
        let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
        let objects = names
            .iter()
            .map(|n| deployment(n, self.args.replicas))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let pp = PostParams::default();
        k8s::bounded(
            "deployments created",
            objects.len(),
            env.concurrency,
            (objects.len() / 4).max(1),
            objects.iter().map(|d| {
                let (api, pp) = (&api, &pp);
                async move {
                    let name = d.name_any();
                    k8s::retry(|| api.create(pp, d))
                        .await
                        .with_context(|| format!("creating Deployment {ns}/{name}"))?;
                    Ok(())
                }
            }),
        )
        .await?;

        let mut state = State::start(client, ns, names);
        let n = self.args.deployments;
        wait_model_synced(
            state.model.clone(),
            &mut state.changed,
            ns,
            move |m: &Model| m.synced() && m.deploys.len() >= n,
        )
        .await?;
        {
            let m = state
                .model
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            anyhow::ensure!(
                m.deploys.len() == n,
                "{ns} has {} Deployments, not {n}",
                m.deploys.len()
            );
            anyhow::ensure!(
                m.deploys.values().all(|d| d.observed_generation == 0) && m.rs_deploy.is_empty(),
                "a Deployment has a status or a ReplicaSet before the manager started \
                 (another deployment controller runs?)"
            );
            anyhow::ensure!(
                m.pod_deploy.is_empty(),
                "{ns} has {} pods at start",
                m.pod_deploy.len()
            );
        }
        Ok(state)
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        let (n, r) = (self.args.deployments, self.args.replicas);
        let size = format!("{} × {}", group(n), group(r));

        let create = probe.begin(&format!("create {size}"));
        let note = state
            .wait_complete(probe, "create", V_CREATE, r, "first Deployment complete")
            .await?;
        probe.end(create, note);

        let roll = probe.begin(&format!("rolling update {size}"));
        let api: Api<Deployment> = Api::namespaced(env.client.clone(), &state.ns);
        let patch =
            json!({"spec": {"template": {"metadata": {"annotations": {VERSION_ANN: V_ROLLOUT}}}}});
        let (pp, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let ns = state.ns.clone();
        let names = state.names.clone();
        k8s::bounded(
            "deployments patched",
            names.len(),
            env.concurrency,
            names.len(),
            names.iter().map(|name| {
                let (api, pp, patch, ns) = (&api, &pp, &patch, &ns);
                async move {
                    k8s::retry(|| api.patch(name, pp, patch))
                        .await
                        .with_context(|| {
                            format!("patching the pod template of Deployment {ns}/{name}")
                        })?;
                    Ok(())
                }
            }),
        )
        .await?;
        let note = state
            .wait_complete(
                probe,
                "rolling update",
                V_ROLLOUT,
                r,
                "first Deployment complete on the new template",
            )
            .await?;
        probe.end(roll, note);
        Ok(())
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let client = &env.client;
        let ns = &state.ns;
        let deploys = k8s::list_all::<Deployment>(client, ns, "Deployments").await?;
        let rss = k8s::list_all::<ReplicaSet>(client, ns, "ReplicaSets").await?;
        let pods = k8s::list_pod_meta(client, Some(ns))
            .await
            .with_context(|| format!("listing the pods of {ns}"))?;
        let mut now = Model::default();
        now.deploy_change(Change::Reset(deploys));
        now.rs_change(Change::Reset(rss));
        now.pod_change(Change::Reset(pods));
        let seen = state
            .model
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(judge(&self.args, &state.names, &seen, &now))
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        remove(env, ns).await
    }
}

/// One Deployment of the scenario.
fn deployment(name: &str, replicas: usize) -> anyhow::Result<Deployment> {
    let labels = json!({"app": APP, DEPLOY_LABEL: name});
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}
            },
            "template": k8s::kwok_template(&labels, json!({VERSION_ANN: V_CREATE}))
        }
    }))
    .with_context(|| format!("building Deployment {name}"))
}

/// Deletes every Deployment, ReplicaSet and pod of `ns` and fails unless none is left. No
/// garbage collector runs on the plane, so each kind is deleted directly (background
/// propagation: no finalizer waits for a collector), the manager stopped first.
async fn remove(env: &Env, ns: &str) -> anyhow::Result<()> {
    k8s::delete_workloads::<Deployment, ReplicaSet>(&env.client, ns, ("Deployments", "ReplicaSets"))
        .await
}

#[cfg(test)]
mod tests {
    use super::model::COMPLETE_REASON;
    use super::*;

    fn args(deployments: usize, replicas: usize) -> Args {
        Args {
            deployments,
            replicas,
        }
    }

    fn deploy(name: &str, version: &str, observed: i64, n: i32, reason: &str) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": format!("uid-{name}"), "generation": 2,
                         "labels": {"app": APP, DEPLOY_LABEL: name}},
            "spec": {
                "selector": {},
                "template": {"metadata": {"annotations": {VERSION_ANN: version}}}
            },
            "status": {"observedGeneration": observed, "replicas": n, "updatedReplicas": n,
                       "readyReplicas": n, "availableReplicas": n,
                       "conditions": [{"type": "Progressing", "status": "True", "reason": reason}]}
        }))
        .unwrap()
    }

    fn rs(deploy: &str, version: &str, uid: &str, spec: i32, n: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{deploy}-{uid}"), "uid": uid,
                         "labels": {"app": APP, DEPLOY_LABEL: deploy},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                            "name": deploy, "uid": format!("uid-{deploy}"), "controller": true}]},
            "spec": {"replicas": spec, "selector": {},
                     "template": {"metadata": {"annotations": {VERSION_ANN: version}}}},
            "status": {"replicas": n, "readyReplicas": n}
        }))
        .unwrap()
    }

    fn pod(
        deploy: &str,
        name: &str,
        version: &str,
        owner: &str,
        terminating: bool,
    ) -> PartialObjectMeta<Pod> {
        let mut meta = json!({
            "name": name, "labels": {"app": APP, DEPLOY_LABEL: deploy},
            "annotations": {VERSION_ANN: version},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "x", "uid": owner, "controller": true}]
        });
        if terminating {
            meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": meta
        }))
        .unwrap()
    }

    /// One Deployment `d-000` of 4 replicas, rolled: old RS `a` at 0, new RS `b` at 4.
    fn rolled() -> Model {
        let mut m = Model::default();
        m.deploy_change(Change::Reset(vec![deploy(
            "d-000",
            V_ROLLOUT,
            2,
            4,
            COMPLETE_REASON,
        )]));
        m.rs_change(Change::Reset(vec![
            rs("d-000", V_CREATE, "a", 0, 0),
            rs("d-000", V_ROLLOUT, "b", 4, 4),
        ]));
        m.pod_change(Change::Reset(
            (0..4)
                .map(|i| pod("d-000", &format!("p{i}"), V_ROLLOUT, "b", false))
                .collect(),
        ));
        m
    }

    #[test]
    fn surge_and_unavailable_from_percentages() {
        assert_eq!(
            (args(100, 20).max_surge(), args(100, 20).max_unavailable()),
            (5, 5)
        );
        assert_eq!(
            (args(10, 5).max_surge(), args(10, 5).max_unavailable()),
            (2, 1)
        );
        assert_eq!(args(100, 20).limit(), 25);
        assert_eq!(args(3, 1).names(), ["d-000", "d-001", "d-002"]);
        assert_eq!(args(1001, 1).names()[1000], "d-1000");
    }

    #[test]
    fn complete_only_when_everything_matches() {
        let mut m = rolled();
        assert_eq!(m.incomplete("d-000", V_ROLLOUT, 4), None);
        assert_eq!(
            m.incomplete("d-000", V_CREATE, 4).as_deref(),
            Some("template version \"1\", not \"0\"")
        );
        // A terminating pod of the old template is still there.
        m.pod_change(Change::Apply(pod("d-000", "old", V_CREATE, "a", true)));
        assert_eq!(
            m.incomplete("d-000", V_ROLLOUT, 4).as_deref(),
            Some("5 pods (1 terminating, 4 of its template)")
        );
        m.pod_change(Change::Delete(pod("d-000", "old", V_CREATE, "a", true)));
        assert_eq!(m.incomplete("d-000", V_ROLLOUT, 4), None);
        assert_eq!(m.max_present["d-000"], 5);
        assert_eq!(m.max_active["d-000"], 4);
        // The status of an older generation does not count.
        m.deploy_change(Change::Apply(deploy(
            "d-000",
            V_ROLLOUT,
            1,
            4,
            COMPLETE_REASON,
        )));
        assert_eq!(
            m.incomplete("d-000", V_ROLLOUT, 4).as_deref(),
            Some("observedGeneration 1 of generation 2")
        );
        m.deploy_change(Change::Apply(deploy(
            "d-000",
            V_ROLLOUT,
            2,
            4,
            "ReplicaSetUpdated",
        )));
        assert_eq!(
            m.incomplete("d-000", V_ROLLOUT, 4).as_deref(),
            Some("Progressing reason ReplicaSetUpdated")
        );
        m.deploy_change(Change::Apply(deploy(
            "d-000",
            V_ROLLOUT,
            2,
            4,
            COMPLETE_REASON,
        )));
        m.rs_change(Change::Apply(rs("d-000", V_CREATE, "a", 1, 1)));
        assert_eq!(
            m.incomplete("d-000", V_ROLLOUT, 4).as_deref(),
            Some("old ReplicaSet d-000-a at spec 1 replicas 1")
        );
        assert_eq!(m.max_rs_spec["d-000"], 5);
    }

    #[test]
    fn judges_a_clean_rollout_correct() {
        let m = rolled();
        let now = rolled();
        let c = judge(&args(1, 4), &["d-000".to_string()], &m, &now);
        assert!(c.ok, "{}", c.detail);
        assert_eq!(
            c.detail,
            "ReplicaSet replicas of one Deployment summed at most 4 (limit 5), no ReplicaSet \
             over its replicas; one ReplicaSet per template (2 in all, no duplicate); 4 pods, \
             all of the new template; observed: at most 4 non-terminating pods of one \
             Deployment at once (d-000), 4 counting terminating ones"
        );
    }

    #[test]
    fn judges_surge_and_duplicates_wrong() {
        let mut m = rolled();
        for i in 0..2 {
            m.pod_change(Change::Apply(pod(
                "d-000",
                &format!("x{i}"),
                V_CREATE,
                "a",
                false,
            )));
        }
        m.rs_change(Change::Apply(rs("d-000", V_ROLLOUT, "c", 2, 0)));
        m.rs_change(Change::Delete(rs("d-000", V_ROLLOUT, "c", 2, 0)));
        let c = judge(&args(1, 4), &["d-000".to_string()], &m, &rolled());
        assert!(!c.ok);
        assert_eq!(
            c.detail,
            "ReplicaSets of d-000 summed to 6 replicas (limit replicas + maxSurge = 5); \
             over-created: d-000-a: 2 pods > 0 replicas; duplicate ReplicaSets: d-000: 2 \
             ReplicaSets of template 1 (d-000-b, d-000-c); observed: at most 6 \
             non-terminating pods of one Deployment at once (d-000; 1 Deployments briefly \
             above replicas + maxSurge = 5), 6 counting terminating ones"
        );
    }

    #[test]
    fn judges_leftovers_wrong() {
        let mut now = rolled();
        now.pod_change(Change::Apply(pod("d-000", "old", V_CREATE, "a", true)));
        now.pod_change(Change::Apply(pod("other", "stray", V_CREATE, "zzz", false)));
        let c = judge(&args(1, 4), &["d-000".to_string()], &rolled(), &now);
        assert!(!c.ok);
        assert_eq!(
            c.detail,
            "1 Deployments not complete on the new template after the settle time: d-000: 5 \
             pods (1 terminating, 4 of its template); 1 pods of no Deployment of the \
             scenario; observed: at most 4 non-terminating pods of one Deployment at once \
             (d-000), 4 counting terminating ones"
        );
    }
}
