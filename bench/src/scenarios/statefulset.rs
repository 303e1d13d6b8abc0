//! StatefulSet: a `Parallel` set scaled 0 → P, an `OrderedReady` set scaled 0 → O, then a
//! rolling update of the P (the issue's "`Parallel` 0→300, `OrderedReady` 0→100, and a rolling
//! update of the 300").
//!
//! Setup: a fresh namespace with two StatefulSets of 0 replicas, created before the manager
//! starts: `par` (`podManagementPolicy: Parallel`) and `ord` (`OrderedReady`), both
//! RollingUpdate with upstream's defaults (partition 0, maxUnavailable 1), pods on the kwok
//! nodes (`type: kwok`; Running and Ready as soon as they are bound, removed once deleted), no
//! volume claims (the bench plane runs no PersistentVolume binder). The pod template carries
//! the annotation `rkcm-bench/version: "0"`. The manager then starts with
//! `statefulset-controller`; once it has reported both sets (`observedGeneration` 1), the
//! bench times three phases, each started by its own patch:
//! 1. *Parallel 0 → P*: `par` scaled to P; until its status reports P replicas ready and
//!    available for its generation and the bench's watch sees exactly `par-0` … `par-{P-1}`,
//!    all Ready, none terminating.
//! 2. *OrderedReady 0 → O*: the same for `ord` and O.
//! 3. *rolling update of P*: `par`'s template annotation "0" → "1"; until its status reports
//!    P updated, ready and available replicas with `currentRevision = updateRevision` for the
//!    new generation, and every `par` pod seen carries that revision and is Ready.
//!
//! Everything is observed with two watches of the bench's own admin client (StatefulSets,
//! pods), never by polling, so none of it counts as the manager's requests. Since a watch
//! delivers every change in the order the apiserver made it, the checks below hold over every
//! state the apiserver stored, not over samples.
//!
//! Correct (judged after the settle time, with the manager still running):
//! - `OrderedReady`: when the watch first sees a pod `ord-k`, every `ord-j` with `j < k`
//!   exists, is Ready and is not terminating (upstream's ordering guarantee);
//! - at least P + P `par` pods were created (one per ordinal, then one replacement each) and
//!   O `ord` pods (plus one for each the plane deleted at once), every one controlled by its
//!   set;
//! - the end state on fresh lists: the phases' conditions, `par` on its second revision and
//!   `ord` on its first, with 2 and 1 ControllerRevisions.
//!
//! Reported, not judged: the most `par` pods missing, not Ready or terminating at once
//! during the rolling update (maxUnavailable is 1) and the pods created beyond one
//! replacement per ordinal. kwok finishes a graceful deletion by deleting the pod's *name*,
//! sometimes more than once, and a repeated delete hits the replacement a controller has
//! already created (a graceful delete, so the bench cannot tell it from the controller's).
//! Both managers show it in quick runs (the audit log has kwok's extra deletes), and it makes
//! both numbers exceed what the controller itself does.
//!
//! Cleanup deletes the sets, their ControllerRevisions and pods (no garbage collector runs on
//! the plane) and fails unless none is left.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::harness::{Env, Probe, Scenario, wait_model, wait_model_synced};
use crate::k8s;
use crate::results::{Correctness, Metric};
use crate::scenarios::podgc::group;
use crate::scenarios::replicaset::kwok_pod_capacity;

/// Label of every object of the scenario.
const APP: &str = "rkcm-bench-sts";
/// The two sets.
const PAR: &str = "par";
const ORD: &str = "ord";
/// Pod-template annotation the rolling update changes.
const VERSION_ANN: &str = "rkcm-bench/version";
/// The label carrying a pod's revision (upstream `apps.ControllerRevisionHashLabelKey`).
const REVISION_LABEL: &str = "controller-revision-hash";
/// The rolling update's maxUnavailable (upstream's default).
const MAX_UNAVAILABLE: usize = 1;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Replicas of the `Parallel` set (scaled 0 → N, then rolled).
    #[arg(long, default_value_t = 300)]
    pub parallel: usize,
    /// Replicas of the `OrderedReady` set (scaled 0 → N).
    #[arg(long, default_value_t = 100)]
    pub ordered: usize,
}

pub struct StatefulSetScale {
    pub args: Args,
}

/// One pod object (one UID) as the bench's watch saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodRec {
    pub name: String,
    pub set: String,
    /// The controller owner reference names a StatefulSet of this name.
    pub owned: bool,
    pub ready: bool,
    pub terminating: bool,
    pub revision: String,
}

impl PodRec {
    fn of(p: &Pod) -> Self {
        let name = p.name_any();
        let set = name
            .rsplit_once('-')
            .map(|(s, _)| s.to_string())
            .unwrap_or_default();
        let owned = p
            .owner_references()
            .iter()
            .any(|r| r.controller == Some(true) && r.kind == "StatefulSet" && r.name == set);
        let ready = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        Self {
            name,
            set,
            owned,
            ready,
            terminating: p.metadata.deletion_timestamp.is_some(),
            revision: p.labels().get(REVISION_LABEL).cloned().unwrap_or_default(),
        }
    }

    fn available(&self) -> bool {
        self.ready && !self.terminating
    }
}

fn ordinal(name: &str) -> Option<usize> {
    name.rsplit_once('-').and_then(|(_, o)| o.parse().ok())
}

/// What the watches saw.
#[derive(Default, Debug)]
pub struct Model {
    pods_synced: bool,
    sets_synced: bool,
    /// The pods present now, by name.
    pub live: HashMap<String, (String, PodRec)>,
    /// Every pod UID ever seen → its set.
    pub created: HashMap<String, String>,
    /// Pods not owned by their set, when first seen.
    pub stray: Vec<String>,
    /// `ord` pods that appeared before a lower ordinal was Ready.
    pub order_violations: Vec<String>,
    /// Pods that vanished without having been seen terminating: deleted at once by the
    /// plane, not by a controller (controllers delete gracefully). kwok does this: it
    /// finishes a graceful deletion by deleting the pod's *name*, which can hit the
    /// replacement a fast controller has already created.
    pub abrupt: Vec<String>,
    /// Names whose pod the plane deleted abruptly, until a new one is available again: not
    /// counted as unavailable (the manager did not cause it).
    lost: std::collections::HashSet<String>,
    /// While the rolling update runs: the most `par` pods unavailable at once because of
    /// the manager.
    pub rolling: bool,
    pub max_unavailable: usize,
    /// The unavailable pods when `max_unavailable` was reached.
    pub worst: String,
    pub sets: HashMap<String, StatefulSet>,
}

impl Model {
    fn pod_event(&mut self, ev: watcher::Event<Pod>) {
        match ev {
            watcher::Event::Init => {}
            watcher::Event::InitApply(p) | watcher::Event::Apply(p) => self.apply(&p),
            watcher::Event::InitDone => self.pods_synced = true,
            watcher::Event::Delete(p) => {
                let name = p.name_any();
                if let Some((_, last)) = self.live.remove(&name)
                    && !last.terminating
                {
                    self.abrupt.push(name.clone());
                    self.lost.insert(name);
                }
            }
        }
        self.track_unavailable();
    }

    fn apply(&mut self, p: &Pod) {
        let uid = p.uid().unwrap_or_default();
        let rec = PodRec::of(p);
        if !self.created.contains_key(&uid) {
            self.created.insert(uid.clone(), rec.set.clone());
            if !rec.owned {
                self.stray.push(rec.name.clone());
            }
            if rec.set == ORD
                && let Some(k) = ordinal(&rec.name)
            {
                let missing: Vec<String> = (0..k)
                    .map(|j| format!("{ORD}-{j}"))
                    .filter(|n| !self.live.get(n).is_some_and(|(_, r)| r.available()))
                    .collect();
                if !missing.is_empty() {
                    self.order_violations.push(format!(
                        "{} created while {} not Ready",
                        rec.name,
                        missing.join(", ")
                    ));
                }
            }
        }
        if rec.available() {
            self.lost.remove(&rec.name);
        }
        self.live.insert(rec.name.clone(), (uid, rec));
    }

    fn set_event(&mut self, ev: watcher::Event<StatefulSet>) {
        match ev {
            watcher::Event::Init => {}
            watcher::Event::InitApply(s) | watcher::Event::Apply(s) => {
                self.sets.insert(s.name_any(), s);
            }
            watcher::Event::InitDone => self.sets_synced = true,
            watcher::Event::Delete(s) => {
                self.sets.remove(&s.name_any());
            }
        }
    }

    fn track_unavailable(&mut self) {
        if !self.rolling {
            return;
        }
        let want = self
            .sets
            .get(PAR)
            .and_then(|s| s.spec.replicas)
            .unwrap_or(0);
        let want = usize::try_from(want).unwrap_or(0);
        let available = (0..want)
            .filter(|i| {
                let name = format!("{PAR}-{i}");
                self.lost.contains(&name)
                    || self.live.get(&name).is_some_and(|(_, r)| r.available())
            })
            .count();
        if want - available > self.max_unavailable {
            self.max_unavailable = want - available;
            self.worst = (0..want)
                .map(|i| format!("{PAR}-{i}"))
                .filter(|n| {
                    !self.lost.contains(n) && !self.live.get(n).is_some_and(|(_, r)| r.available())
                })
                .map(|n| match self.live.get(&n) {
                    Some((uid, r)) => format!(
                        "{n} (uid {uid}, ready {}, terminating {}, revision {})",
                        r.ready, r.terminating, r.revision
                    ),
                    None => format!("{n} (missing)"),
                })
                .collect::<Vec<_>>()
                .join(", ");
        }
    }

    /// The generation of set `name` as the bench's watch has seen it (0: not seen).
    pub fn generation(&self, name: &str) -> i64 {
        self.sets
            .get(name)
            .and_then(|s| s.metadata.generation)
            .unwrap_or(0)
    }

    /// Why set `name` is not done with `n` Ready pods (when `rolled`, all updated and on the
    /// update revision), or `None`.
    pub fn incomplete(&self, name: &str, n: usize, rolled: bool) -> Option<String> {
        let Some(s) = self.sets.get(name) else {
            return Some(format!("{name} not seen"));
        };
        let st = s.status.clone().unwrap_or_default();
        let n32 = i32::try_from(n).unwrap_or(i32::MAX);
        if st.observed_generation != s.metadata.generation {
            return Some(format!(
                "{name}: observedGeneration {:?} of {:?}",
                st.observed_generation, s.metadata.generation
            ));
        }
        if st.replicas != n32
            || st.ready_replicas != Some(n32)
            || st.available_replicas != Some(n32)
        {
            return Some(format!(
                "{name}: status replicas {} ready {:?} available {:?} of {n}",
                st.replicas, st.ready_replicas, st.available_replicas
            ));
        }
        if rolled && (st.updated_replicas != Some(n32) || st.current_revision != st.update_revision)
        {
            return Some(format!(
                "{name}: updated {:?}, current {:?}, update {:?}",
                st.updated_replicas, st.current_revision, st.update_revision
            ));
        }
        let update = st.update_revision.unwrap_or_default();
        let pods: Vec<&PodRec> = self
            .live
            .values()
            .map(|(_, r)| r)
            .filter(|r| r.set == name)
            .collect();
        if pods.len() != n {
            return Some(format!("{name}: {} pods, want {n}", pods.len()));
        }
        for i in 0..n {
            let pod = format!("{name}-{i}");
            match self.live.get(&pod) {
                Some((_, r)) if r.available() && (!rolled || r.revision == update) => {}
                Some((_, r)) => {
                    return Some(format!(
                        "{pod}: ready {} terminating {} revision {}",
                        r.ready, r.terminating, r.revision
                    ));
                }
                None => return Some(format!("{pod} missing")),
            }
        }
        None
    }

    fn created_of(&self, set: &str) -> usize {
        self.created.values().filter(|s| *s == set).count()
    }
}

pub struct State {
    ns: String,
    model: Arc<Mutex<Model>>,
    changed: watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
    metrics: Vec<Metric>,
}

impl Drop for State {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl State {
    fn start(client: &Client, ns: &str) -> Self {
        let model = Arc::new(Mutex::new(Model::default()));
        let (tx, changed) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let pods = {
            let (model, tx) = (model.clone(), tx.clone());
            let stream = watcher(
                Api::<Pod>::namespaced(client.clone(), ns),
                watcher::Config::default(),
            )
            .default_backoff();
            tokio::spawn(async move {
                futures::pin_mut!(stream);
                loop {
                    match stream.try_next().await {
                        Ok(Some(ev)) => {
                            lock(&model).pod_event(ev);
                            tx.send_modify(|n| *n += 1);
                        }
                        Ok(None) => break,
                        Err(e) => tracing::warn!(error = %e, "pod watch error (retrying)"),
                    }
                }
            })
        };
        let sets = {
            let stream = watcher(
                Api::<StatefulSet>::namespaced(client.clone(), ns),
                watcher::Config::default().labels(&format!("app={APP}")),
            )
            .default_backoff();
            let model = model.clone();
            tokio::spawn(async move {
                futures::pin_mut!(stream);
                loop {
                    match stream.try_next().await {
                        Ok(Some(ev)) => {
                            lock(&model).set_event(ev);
                            tx.send_modify(|n| *n += 1);
                        }
                        Ok(None) => break,
                        Err(e) => {
                            tracing::warn!(error = %e, "statefulset watch error (retrying)")
                        }
                    }
                }
            })
        };
        Self {
            ns: ns.to_string(),
            model,
            changed,
            tasks: vec![pods, sets],
            metrics: Vec::new(),
        }
    }

    /// Patches set `name`; returns the generation the patch produced.
    async fn patch(&self, env: &Env, name: &str, patch: serde_json::Value) -> anyhow::Result<i64> {
        let api: Api<StatefulSet> = Api::namespaced(env.client.clone(), &self.ns);
        let (pp, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let set = k8s::retry(|| api.patch(name, &pp, &patch))
            .await
            .with_context(|| format!("patching StatefulSet {}/{name}", self.ns))?;
        Ok(set.metadata.generation.unwrap_or(0))
    }

    /// One timed phase: the step's patch, then wait until its set is done.
    async fn phase(&mut self, env: &Env, probe: &Probe, step: Step) -> anyhow::Result<()> {
        let Step {
            title,
            set: name,
            n,
            patch,
            rolled,
        } = step;
        let title = title.as_str();
        let started = probe.begin(title);
        if rolled {
            lock(&self.model).rolling = true;
        }
        let generation = self.patch(env, name, patch).await?;
        let begun = Instant::now();
        // The bench's own watch may not have delivered the patched set yet: until it has, the
        // status it holds is the previous generation's, complete for the previous step.
        wait_model(&self.model, &mut self.changed, probe, |m: &Model| {
            match m.incomplete(name, n, rolled) {
                _ if m.generation(name) < generation => Err(format!(
                    "{title}: {name}: generation {generation} not seen yet"
                )),
                None => Ok(()),
                Some(why) => Err(format!("{title}: {why}")),
            }
        })
        .await?;
        let note = if rolled {
            let m = lock(&self.model);
            format!(
                "{} pods on the new revision; at most {} unavailable at once",
                group(n),
                m.max_unavailable
            )
        } else {
            format!(
                "{} pods Ready, {:.1} pods/s",
                group(n),
                n as f64 / begun.elapsed().as_secs_f64().max(1e-3)
            )
        };
        probe.end(started, note);
        Ok(())
    }
}

/// One timed phase of [`State::phase`]: `patch` on set `set`, done with `n` Ready pods (when
/// `rolled`, all on the update revision).
struct Step {
    title: String,
    set: &'static str,
    n: usize,
    patch: serde_json::Value,
    rolled: bool,
}

fn lock(m: &Arc<Mutex<Model>>) -> std::sync::MutexGuard<'_, Model> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Scenario for StatefulSetScale {
    type State = State;

    fn id(&self) -> &'static str {
        "statefulset-scale-roll"
    }

    fn title(&self) -> String {
        format!(
            "StatefulSet: `Parallel` 0 → {}, `OrderedReady` 0 → {}, rolling update of the {}",
            group(self.args.parallel),
            group(self.args.ordered),
            group(self.args.parallel)
        )
    }

    fn description(&self) -> String {
        let (p, o) = (group(self.args.parallel), group(self.args.ordered));
        format!(
            "Two StatefulSets of 0 replicas, created in a fresh namespace before the manager \
             starts: `par` (`podManagementPolicy: Parallel`) and `ord` (`OrderedReady`), \
             RollingUpdate with upstream's defaults (partition 0, maxUnavailable 1), pods on \
             the kwok nodes (Running and Ready as soon as they are bound; removed once \
             deleted), no volume claims. The manager starts with `statefulset-controller`; \
             once it has reported both sets the bench times three phases, each from its own \
             patch to its condition: **Parallel 0 → {p}** (`par` scaled; its status reports \
             {p} ready and available replicas for the new generation and the bench's watch \
             sees exactly `par-0` … `par-{last}`, all Ready, none terminating), **OrderedReady \
             0 → {o}** (the same for `ord`), **rolling update of {p}** (`par`'s pod-template \
             annotation changed; its status reports {p} updated, ready and available replicas \
             with `currentRevision` = `updateRevision`, and every `par` pod carries that \
             revision and is Ready). The bench observes with watches of its own (StatefulSets, \
             pods), not counted as the manager's requests. Correct: every `ord-k` appeared \
             only when all lower ordinals were Ready (OrderedReady), at least {p} + {p} `par` \
             pods and exactly {o} `ord` pods were created, each controlled by its set, and \
             after the settle time the end state holds on fresh lists with 2 and 1 \
             ControllerRevisions; cleanup then fails unless nothing is left. Reported, not \
             judged: the most `par` pods unavailable at once during the rolling update \
             (maxUnavailable {MAX_UNAVAILABLE}) and the extra pod creations: kwok finishes a \
             graceful deletion by deleting the pod's name, sometimes twice, and the repeated \
             delete hits the replacement a controller already created, for both managers.",
            last = self.args.parallel.saturating_sub(1),
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("parallel".into(), self.args.parallel.to_string()),
            ("ordered".into(), self.args.ordered.to_string()),
            ("max_unavailable".into(), MAX_UNAVAILABLE.to_string()),
        ])
    }

    fn controllers(&self) -> Vec<&'static str> {
        vec!["statefulset-controller"]
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        let client = &env.client;
        anyhow::ensure!(
            self.args.parallel > 0 && self.args.ordered > 0,
            "--parallel and --ordered must be positive"
        );
        k8s::ensure_namespace(client, ns).await?;
        // A reused plane may still hold an earlier run's objects.
        remove(env, ns).await?;
        let capacity = kwok_pod_capacity(client).await?;
        // The rolling update replaces pods one by one: no surge.
        let need = self.args.parallel + self.args.ordered;
        anyhow::ensure!(
            capacity >= need,
            "the kwok nodes hold {capacity} pods, fewer than {need}; raise BENCH_NODES: 110 \
             pods per node"
        );
        let api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
        let pp = PostParams::default();
        for (name, policy) in [(PAR, "Parallel"), (ORD, "OrderedReady")] {
            let s = statefulset(name, policy)?;
            k8s::retry(|| api.create(&pp, &s))
                .await
                .with_context(|| format!("creating StatefulSet {ns}/{name}"))?;
        }
        let mut state = State::start(client, ns);
        wait_model_synced(state.model.clone(), &mut state.changed, ns, |m: &Model| {
            m.pods_synced && m.sets_synced && m.sets.len() >= 2
        })
        .await?;
        {
            let m = lock(&state.model);
            // The apiserver gives a new set a zero status; a controller would have written
            // `observedGeneration`.
            anyhow::ensure!(
                m.sets.values().all(|s| s
                    .status
                    .as_ref()
                    .and_then(|st| st.observed_generation)
                    .is_none()),
                "a StatefulSet has a status before the manager started (another statefulset \
                 controller runs?)"
            );
            anyhow::ensure!(m.live.is_empty(), "{ns} has {} pods at start", m.live.len());
        }
        Ok(state)
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        let (p, o) = (self.args.parallel, self.args.ordered);
        wait_model(&state.model, &mut state.changed, probe, |m: &Model| {
            let seen = [PAR, ORD].iter().all(|n| {
                m.sets
                    .get(*n)
                    .and_then(|s| s.status.as_ref())
                    .and_then(|st| st.observed_generation)
                    .is_some()
            });
            if seen {
                Ok(())
            } else {
                Err("waiting for the manager to report both sets".to_string())
            }
        })
        .await?;
        probe.mark("both sets reported");
        state
            .phase(
                env,
                probe,
                Step {
                    title: format!("Parallel 0 → {}", group(p)),
                    set: PAR,
                    n: p,
                    patch: json!({"spec": {"replicas": p}}),
                    rolled: false,
                },
            )
            .await?;
        state
            .phase(
                env,
                probe,
                Step {
                    title: format!("OrderedReady 0 → {}", group(o)),
                    set: ORD,
                    n: o,
                    patch: json!({"spec": {"replicas": o}}),
                    rolled: false,
                },
            )
            .await?;
        state
            .phase(
                env,
                probe,
                Step {
                    title: format!("rolling update of {}", group(p)),
                    set: PAR,
                    n: p,
                    patch: json!({"spec": {"template": {"metadata": {"annotations": {VERSION_ANN: "1"}}}}}),
                    rolled: true,
                },
            )
            .await
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let client = &env.client;
        let ns = &state.ns;
        let sets = k8s::list_all::<StatefulSet>(client, ns, "StatefulSets").await?;
        let pods = k8s::list_all::<Pod>(client, ns, "pods").await?;
        let revs = k8s::list_all::<ControllerRevision>(client, ns, "ControllerRevisions").await?;
        let mut now = Model::default();
        for s in sets {
            now.set_event(watcher::Event::Apply(s));
        }
        for p in &pods {
            now.apply(p);
        }
        let mut revisions: BTreeMap<String, usize> = BTreeMap::new();
        for r in &revs {
            for o in r.owner_references() {
                *revisions.entry(o.name.clone()).or_default() += 1;
            }
        }
        let seen = lock(&state.model);
        let j = judge(&self.args, &seen, &now, &revisions);
        state.metrics = vec![
            Metric {
                name: "Rolling update: most `par` pods unavailable at once".into(),
                value: seen.max_unavailable as f64,
                unit: String::new(),
            },
            Metric {
                name: "Pods created".into(),
                value: seen.created.len() as f64,
                unit: String::new(),
            },
            Metric {
                name: "Pods the plane (kwok) deleted at once, by name".into(),
                value: seen.abrupt.len() as f64,
                unit: String::new(),
            },
        ];
        Ok(j)
    }

    fn metrics(&self, state: &State) -> Vec<Metric> {
        state.metrics.clone()
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        remove(env, ns).await
    }
}

/// The verdict: `seen` is what the watches saw over the run, `now` fresh lists after the
/// settle time, `revisions` the ControllerRevisions per owning set.
pub fn judge(
    args: &Args,
    seen: &Model,
    now: &Model,
    revisions: &BTreeMap<String, usize>,
) -> Correctness {
    let (p, o) = (args.parallel, args.ordered);
    let mut wrong = Vec::new();
    if !seen.order_violations.is_empty() {
        wrong.push(format!(
            "OrderedReady order broken {} times (first: {})",
            seen.order_violations.len(),
            seen.order_violations[0]
        ));
    }
    let (cp, co) = (seen.created_of(PAR), seen.created_of(ORD));
    // Each pod the plane deleted abruptly is replaced once more.
    let abrupt = |set: &str| {
        seen.abrupt
            .iter()
            .filter(|n| n.rsplit_once('-').is_some_and(|(s, _)| s == set))
            .count()
    };
    if cp < 2 * p || co != o + abrupt(ORD) {
        wrong.push(format!(
            "pods created: {} `par` (want at least {}), {} `ord` (want {})",
            group(cp),
            group(2 * p),
            group(co),
            group(o + abrupt(ORD))
        ));
    }
    let others = seen.created.len() - cp - co;
    if others > 0 || !seen.stray.is_empty() {
        wrong.push(format!(
            "{others} pods of neither set, {} not controlled by their set",
            seen.stray.len()
        ));
    }
    for (name, n, rolled) in [(PAR, p, true), (ORD, o, false)] {
        if let Some(why) = now.incomplete(name, n, rolled) {
            wrong.push(format!("end state: {why}"));
        }
    }
    let want_revs = BTreeMap::from([(ORD.to_string(), 1), (PAR.to_string(), 2)]);
    if *revisions != want_revs {
        wrong.push(format!(
            "ControllerRevisions per set {revisions:?}, want {want_revs:?}"
        ));
    }
    Correctness::unless(wrong, || {
        format!(
            "{} pods created ({} `par`, {} `ord`; {} deleted at once by the plane and \
                 replaced): `ord` in order, each after all lower ordinals were Ready; end \
                 state complete, 2 + 1 revisions; at most {} `par` pods unavailable at once \
                 during the rolling update (reported, not judged)",
            group(cp + co),
            group(cp),
            group(co),
            seen.abrupt.len(),
            seen.max_unavailable
        )
    })
}

/// One StatefulSet of the scenario, 0 replicas.
fn statefulset(name: &str, policy: &str) -> anyhow::Result<StatefulSet> {
    let labels = json!({"app": APP, "rkcm-bench/set": name});
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 0,
            "serviceName": name,
            "podManagementPolicy": policy,
            "selector": {"matchLabels": labels},
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"partition": 0, "maxUnavailable": 1}
            },
            "template": k8s::kwok_template(&labels, json!({VERSION_ANN: "0"}))
        }
    }))
    .with_context(|| format!("building StatefulSet {name}"))
}

/// Deletes every StatefulSet, ControllerRevision and pod of `ns` and fails unless none is
/// left. No garbage collector runs on the plane, so each kind is deleted directly (sets
/// first, the manager stopped already).
async fn remove(env: &Env, ns: &str) -> anyhow::Result<()> {
    k8s::delete_workloads::<StatefulSet, ControllerRevision>(
        &env.client,
        ns,
        ("StatefulSets", "ControllerRevisions"),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str, ready: bool, revision: &str) -> Pod {
        let set = name.rsplit_once('-').map(|(s, _)| s).unwrap_or_default();
        serde_json::from_value(json!({
            "metadata": {
                "name": name, "uid": uid,
                "labels": {REVISION_LABEL: revision},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                    "name": set, "uid": "s", "controller": true}]
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]
            }
        }))
        .unwrap_or_default()
    }

    fn set(name: &str, n: i32, rev: &str, updated: i32) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "generation": 2},
            "spec": {"replicas": n, "selector": {}, "serviceName": name, "template": {}},
            "status": {"observedGeneration": 2, "replicas": n, "readyReplicas": n,
                "availableReplicas": n, "updatedReplicas": updated,
                "currentRevision": rev, "updateRevision": rev}
        }))
        .unwrap_or_default()
    }

    #[test]
    fn ordered_ready_order_is_checked_at_creation() {
        let mut m = Model::default();
        m.apply(&pod("ord-0", "a", false, "r1"));
        m.apply(&pod("ord-1", "b", false, "r1"));
        m.apply(&pod("ord-0", "a", true, "r1"));
        m.apply(&pod("ord-1", "b", true, "r1"));
        m.apply(&pod("ord-2", "c", false, "r1"));
        assert_eq!(
            m.order_violations,
            vec!["ord-1 created while ord-0 not Ready"]
        );
        // Parallel pods may come in any order.
        m.apply(&pod("par-5", "d", false, "r1"));
        assert_eq!(m.order_violations.len(), 1);
        assert_eq!((m.created_of(ORD), m.created_of(PAR)), (3, 1));
    }

    #[test]
    fn unavailable_pods_are_counted_while_rolling() {
        let mut m = Model::default();
        m.set_event(watcher::Event::Apply(set(PAR, 3, "r1", 3)));
        for (n, u) in [("par-0", "a"), ("par-1", "b"), ("par-2", "c")] {
            m.pod_event(watcher::Event::Apply(pod(n, u, true, "r1")));
        }
        m.rolling = true;
        let mut terminating = pod("par-2", "c", true, "r1");
        terminating.metadata.deletion_timestamp =
            serde_json::from_value(json!("2026-01-01T00:00:00Z")).ok();
        m.pod_event(watcher::Event::Apply(terminating.clone()));
        m.pod_event(watcher::Event::Delete(terminating));
        m.pod_event(watcher::Event::Apply(pod("par-2", "d", false, "r2")));
        assert_eq!(m.max_unavailable, 1);
        assert!(m.abrupt.is_empty());
        // The plane deletes par-0 at once: not the manager's unavailability.
        m.pod_event(watcher::Event::Delete(pod("par-0", "a", true, "r1")));
        assert_eq!(
            (m.max_unavailable, m.abrupt.clone()),
            (1, vec!["par-0".to_string()])
        );
        m.pod_event(watcher::Event::Apply(pod("par-1", "b", false, "r1")));
        assert_eq!(m.max_unavailable, 2);
    }

    #[test]
    fn judges_a_clean_run_and_churn() {
        let args = Args {
            parallel: 2,
            ordered: 1,
        };
        let mut seen = Model::default();
        for (n, u, r) in [
            ("par-0", "a", "r1"),
            ("par-1", "b", "r1"),
            ("ord-0", "c", "o1"),
            ("par-1", "d", "r2"),
            ("par-0", "e", "r2"),
        ] {
            seen.apply(&pod(n, u, true, r));
        }
        let mut now = Model::default();
        now.set_event(watcher::Event::Apply(set(PAR, 2, "r2", 2)));
        now.set_event(watcher::Event::Apply(set(ORD, 1, "o1", 1)));
        for (n, u, r) in [
            ("par-0", "e", "r2"),
            ("par-1", "d", "r2"),
            ("ord-0", "c", "o1"),
        ] {
            now.apply(&pod(n, u, true, r));
        }
        let revs = BTreeMap::from([(ORD.to_string(), 1), (PAR.to_string(), 2)]);
        let c = judge(&args, &seen, &now, &revs);
        assert!(c.ok, "{}", c.detail);
        // A pod not Ready at the end and a missing revision are wrong.
        seen.apply(&pod("par-0", "f", true, "r2"));
        now.apply(&pod("par-0", "f", false, "r2"));
        let revs = BTreeMap::from([(ORD.to_string(), 1), (PAR.to_string(), 1)]);
        let c = judge(&args, &seen, &now, &revs);
        assert!(!c.ok);

        assert!(c.detail.contains("par-0: ready false"), "{}", c.detail);
        assert!(
            c.detail.contains("ControllerRevisions per set"),
            "{}",
            c.detail
        );
    }
}
