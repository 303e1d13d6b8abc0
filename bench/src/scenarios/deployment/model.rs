//! What the bench's watches saw: each Deployment, ReplicaSet and pod as last seen, the most each
//! ever had at once, and the ReplicaSets ever made per template version.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;

/// Label naming the Deployment a pod or ReplicaSet belongs to (part of each selector).
pub(super) const DEPLOY_LABEL: &str = "rkcm-bench/deployment";
/// Pod-template annotation the rolling update changes.
pub(super) const VERSION_ANN: &str = "rkcm-bench/version";
/// Template version at creation and after the rolling update.
pub(super) const V_CREATE: &str = "0";
pub(super) const V_ROLLOUT: &str = "1";
/// Reason of the Progressing condition of a complete Deployment (upstream's constant).
pub(super) const COMPLETE_REASON: &str = "NewReplicaSetAvailable";

/// What the bench needs of a Deployment, as last seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct DeploySeen {
    pub(super) uid: String,
    generation: i64,
    pub(super) observed_generation: i64,
    /// `rkcm-bench/version` of the pod template.
    version: Option<String>,
    replicas: i64,
    updated: i64,
    ready: i64,
    available: i64,
    /// Reason of the Progressing condition.
    progressing: Option<String>,
}

impl DeploySeen {
    fn of(d: &Deployment) -> Self {
        let st = d.status.as_ref();
        let n = |v: Option<i32>| v.map_or(0, i64::from);
        Self {
            uid: d.metadata.uid.clone().unwrap_or_default(),
            generation: d.metadata.generation.unwrap_or(0),
            observed_generation: st.and_then(|s| s.observed_generation).unwrap_or(0),
            version: d
                .spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(VERSION_ANN))
                .cloned(),
            replicas: n(st.and_then(|s| s.replicas)),
            updated: n(st.and_then(|s| s.updated_replicas)),
            ready: n(st.and_then(|s| s.ready_replicas)),
            available: n(st.and_then(|s| s.available_replicas)),
            progressing: st
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.type_.as_deref() == Some("Progressing"))
                })
                .and_then(|c| c.reason.clone()),
        }
    }
}

/// What the bench needs of a ReplicaSet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct RsSeen {
    pub(super) name: String,
    /// Controller owner's uid.
    pub(super) owner: Option<String>,
    /// `rkcm-bench/version` of its pod template.
    version: Option<String>,
    spec_replicas: i64,
    replicas: i64,
    ready: i64,
}

impl RsSeen {
    fn of(r: &ReplicaSet) -> Self {
        let st = r.status.as_ref();
        Self {
            name: r.name_any(),
            owner: controller_uid(r.owner_references()),
            version: r
                .spec
                .template
                .as_ref()
                .and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(VERSION_ANN))
                .cloned(),
            spec_replicas: r.spec.replicas.map_or(1, i64::from),
            replicas: st.map_or(0, |s| i64::from(s.replicas)),
            ready: st.and_then(|s| s.ready_replicas).map_or(0, i64::from),
        }
    }
}

/// What the bench needs of a pod (from its metadata).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct PodSeen {
    pub(super) owner: Option<String>,
    version: Option<String>,
    terminating: bool,
}

impl PodSeen {
    fn of(p: &PartialObjectMeta<Pod>) -> Self {
        Self {
            owner: controller_uid(p.owner_references()),
            version: p.annotations().get(VERSION_ANN).cloned(),
            terminating: p.metadata.deletion_timestamp.is_some(),
        }
    }
}

fn controller_uid(refs: &[OwnerReference]) -> Option<String> {
    refs.iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

/// The Deployment an object belongs to, by its label ("" when it has none).
fn deploy_of(labels: &BTreeMap<String, String>) -> String {
    labels.get(DEPLOY_LABEL).cloned().unwrap_or_default()
}

/// Pods of one Deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Tally {
    present: usize,
    terminating: usize,
    /// Non-terminating pods by template version ("?" for none).
    active: BTreeMap<String, usize>,
}

impl Tally {
    fn active_total(&self) -> usize {
        self.active.values().sum()
    }
}

/// Everything the watches have seen, keyed by Deployment name (the label).
#[derive(Default)]
pub(super) struct Model {
    pub(super) deploys: BTreeMap<String, DeploySeen>,
    /// Deployment → ReplicaSet uid → ReplicaSet.
    pub(super) rs: HashMap<String, BTreeMap<String, RsSeen>>,
    pub(super) rs_deploy: HashMap<String, String>,
    /// Deployment → template version → uid → name of every ReplicaSet ever seen.
    pub(super) rs_ever: BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>,
    /// Deployment → pod name → pod.
    pub(super) pods: HashMap<String, BTreeMap<String, PodSeen>>,
    pub(super) pod_deploy: HashMap<String, String>,
    tally: HashMap<String, Tally>,
    /// Deployment → the most non-terminating pods seen at once.
    pub(super) max_active: BTreeMap<String, usize>,
    /// Deployment → the most pods (terminating ones included) seen at once.
    pub(super) max_present: BTreeMap<String, usize>,
    /// Deployment → the largest sum of its ReplicaSets' `spec.replicas` seen.
    pub(super) max_rs_spec: BTreeMap<String, i64>,
    /// ReplicaSet uid → the largest `spec.replicas` it had.
    rs_spec_peak: HashMap<String, i64>,
    /// ReplicaSet uid → the most non-terminating pods it controlled at once.
    rs_pods_peak: HashMap<String, usize>,
    synced: [bool; 3],
}

/// One change a watch saw; `Reset` is a complete (re)list.
pub(super) enum Change<K> {
    Apply(K),
    Delete(K),
    Reset(Vec<K>),
}

impl Model {
    pub(super) fn deploy_change(&mut self, c: Change<Deployment>) {
        match c {
            Change::Reset(all) => {
                self.deploys = all
                    .iter()
                    .map(|d| (d.name_any(), DeploySeen::of(d)))
                    .collect();
                self.synced[0] = true;
            }
            Change::Apply(d) => {
                self.deploys.insert(d.name_any(), DeploySeen::of(&d));
            }
            Change::Delete(d) => {
                self.deploys.remove(&d.name_any());
            }
        }
    }

    pub(super) fn rs_change(&mut self, c: Change<ReplicaSet>) {
        match c {
            Change::Reset(all) => {
                self.rs.clear();
                self.rs_deploy.clear();
                for r in &all {
                    self.put_rs(r);
                }
                self.synced[1] = true;
            }
            Change::Apply(r) => self.put_rs(&r),
            Change::Delete(r) => {
                let uid = r.uid().unwrap_or_default();
                if let Some(d) = self.rs_deploy.remove(&uid)
                    && let Some(b) = self.rs.get_mut(&d)
                {
                    b.remove(&uid);
                }
            }
        }
    }

    fn put_rs(&mut self, r: &ReplicaSet) {
        let uid = r.uid().unwrap_or_default();
        let seen = RsSeen::of(r);
        let deploy = deploy_of(r.labels());
        if let Some(prev) = self.rs_deploy.insert(uid.clone(), deploy.clone())
            && prev != deploy
            && let Some(b) = self.rs.get_mut(&prev)
        {
            b.remove(&uid);
        }
        self.rs_ever
            .entry(deploy.clone())
            .or_default()
            .entry(seen.version.clone().unwrap_or_else(|| "?".into()))
            .or_default()
            .insert(uid.clone(), seen.name.clone());
        let peak = self.rs_spec_peak.entry(uid.clone()).or_default();
        *peak = (*peak).max(seen.spec_replicas);
        let bucket = self.rs.entry(deploy.clone()).or_default();
        bucket.insert(uid, seen);
        let sum = bucket.values().map(|r| r.spec_replicas).sum::<i64>();
        let max = self.max_rs_spec.entry(deploy).or_default();
        *max = (*max).max(sum);
    }

    pub(super) fn pod_change(&mut self, c: Change<PartialObjectMeta<Pod>>) {
        match c {
            Change::Reset(all) => {
                self.pods.clear();
                self.pod_deploy.clear();
                self.tally.clear();
                for p in &all {
                    let deploy = deploy_of(p.labels());
                    self.pod_deploy.insert(p.name_any(), deploy.clone());
                    self.pods
                        .entry(deploy)
                        .or_default()
                        .insert(p.name_any(), PodSeen::of(p));
                }
                let deploys: Vec<String> = self.pods.keys().cloned().collect();
                for d in deploys {
                    self.retally(&d);
                }
                self.synced[2] = true;
            }
            Change::Apply(p) => {
                let name = p.name_any();
                let deploy = deploy_of(p.labels());
                if let Some(prev) = self.pod_deploy.insert(name.clone(), deploy.clone())
                    && prev != deploy
                {
                    if let Some(b) = self.pods.get_mut(&prev) {
                        b.remove(&name);
                    }
                    self.retally(&prev);
                }
                self.pods
                    .entry(deploy.clone())
                    .or_default()
                    .insert(name, PodSeen::of(&p));
                self.retally(&deploy);
            }
            Change::Delete(p) => {
                let name = p.name_any();
                if let Some(d) = self.pod_deploy.remove(&name) {
                    if let Some(b) = self.pods.get_mut(&d) {
                        b.remove(&name);
                    }
                    self.retally(&d);
                }
            }
        }
    }

    /// Recounts one Deployment's pods and raises its maxima (and those of the ReplicaSets
    /// controlling them).
    fn retally(&mut self, deploy: &str) {
        let mut t = Tally::default();
        let mut by_owner: HashMap<&str, usize> = HashMap::new();
        for p in self.pods.get(deploy).into_iter().flat_map(|b| b.values()) {
            t.present += 1;
            if p.terminating {
                t.terminating += 1;
            } else {
                *t.active
                    .entry(p.version.clone().unwrap_or_else(|| "?".into()))
                    .or_default() += 1;
                if let Some(o) = &p.owner {
                    *by_owner.entry(o).or_default() += 1;
                }
            }
        }
        for (owner, n) in by_owner {
            let peak = self.rs_pods_peak.entry(owner.to_string()).or_default();
            *peak = (*peak).max(n);
        }
        let a = self.max_active.entry(deploy.to_string()).or_default();
        *a = (*a).max(t.active_total());
        let p = self.max_present.entry(deploy.to_string()).or_default();
        *p = (*p).max(t.present);
        self.tally.insert(deploy.to_string(), t);
    }

    pub(super) fn synced(&self) -> bool {
        self.synced.iter().all(|&s| s)
    }

    pub(super) fn pods_total(&self) -> (usize, usize) {
        self.tally
            .values()
            .fold((0, 0), |(p, t), x| (p + x.present, t + x.terminating))
    }

    /// Why Deployment `name` is not complete on template `version` with `want` replicas, or
    /// `None` when it is.
    pub(super) fn incomplete(&self, name: &str, version: &str, want: usize) -> Option<String> {
        let Some(d) = self.deploys.get(name) else {
            return Some("not seen".into());
        };
        let w = want as i64;
        if d.version.as_deref() != Some(version) {
            return Some(format!(
                "template version {:?}, not {version:?}",
                d.version.as_deref().unwrap_or("none")
            ));
        }
        if d.observed_generation == 0 || d.observed_generation != d.generation {
            return Some(format!(
                "observedGeneration {} of generation {}",
                d.observed_generation, d.generation
            ));
        }
        if [d.replicas, d.updated, d.ready, d.available] != [w; 4] {
            return Some(format!(
                "status replicas {} updated {} ready {} available {} (want {want})",
                d.replicas, d.updated, d.ready, d.available
            ));
        }
        if d.progressing.as_deref() != Some(COMPLETE_REASON) {
            return Some(format!(
                "Progressing reason {}",
                d.progressing.as_deref().unwrap_or("none")
            ));
        }
        let empty = BTreeMap::new();
        let rss = self.rs.get(name).unwrap_or(&empty);
        let new: Vec<&RsSeen> = rss
            .values()
            .filter(|r| r.version.as_deref() == Some(version))
            .collect();
        match new.as_slice() {
            [r] if r.spec_replicas == w && r.replicas == w && r.ready == w => {}
            [r] => {
                return Some(format!(
                    "new ReplicaSet {} at spec {} replicas {} ready {}",
                    r.name, r.spec_replicas, r.replicas, r.ready
                ));
            }
            [] => return Some("no ReplicaSet of its template".into()),
            many => return Some(format!("{} ReplicaSets of its template", many.len())),
        }
        if let Some(old) = rss.values().find(|r| {
            r.version.as_deref() != Some(version) && (r.spec_replicas, r.replicas) != (0, 0)
        }) {
            return Some(format!(
                "old ReplicaSet {} at spec {} replicas {}",
                old.name, old.spec_replicas, old.replicas
            ));
        }
        let t = self.tally.get(name).cloned().unwrap_or_default();
        let current = t.active.get(version).copied().unwrap_or(0);
        if t.present != want || current != want {
            return Some(format!(
                "{} pods ({} terminating, {current} of its template)",
                t.present, t.terminating
            ));
        }
        None
    }

    /// Deployments complete on `version`, and the first that is not with why.
    pub(super) fn progress(
        &self,
        names: &[String],
        version: &str,
        want: usize,
    ) -> (usize, Option<String>) {
        let mut done = 0;
        let mut first = None;
        for n in names {
            match self.incomplete(n, version, want) {
                None => done += 1,
                Some(why) => {
                    first.get_or_insert_with(|| format!("{n}: {why}"));
                }
            }
        }
        (done, first)
    }

    /// The Deployment with the most non-terminating pods at once, and that number.
    pub(super) fn worst_active(&self) -> (String, usize) {
        self.max_active
            .iter()
            .max_by_key(|&(_, &v)| v)
            .map_or((String::new(), 0), |(k, &v)| (k.clone(), v))
    }

    /// ReplicaSets that controlled more non-terminating pods at once than their largest
    /// `spec.replicas` (over-creation), as `name: pods > replicas`.
    pub(super) fn over_created(&self) -> Vec<String> {
        let names: HashMap<&str, &str> = self
            .rs_ever
            .values()
            .flat_map(|b| b.values())
            .flat_map(|m| m.iter())
            .map(|(uid, name)| (uid.as_str(), name.as_str()))
            .collect();
        let mut out: Vec<String> = self
            .rs_pods_peak
            .iter()
            .filter_map(|(uid, &pods)| {
                let spec = self.rs_spec_peak.get(uid).copied().unwrap_or(0);
                (pods as i64 > spec).then(|| {
                    let name = names.get(uid.as_str()).copied().unwrap_or(uid.as_str());
                    format!("{name}: {pods} pods > {spec} replicas")
                })
            })
            .collect();
        out.sort();
        out
    }

    pub(super) fn worst_rs_spec(&self) -> (String, i64) {
        self.max_rs_spec
            .iter()
            .max_by_key(|&(_, &v)| v)
            .map_or((String::new(), 0), |(k, &v)| (k.clone(), v))
    }
}
