//! PURE: reading Deployments and ReplicaSets with upstream's defaults, the orders upstream
//! sorts ReplicaSets in, template equality ignoring `pod-template-hash`, and the new/old split.
//!
//! Mirrors `EqualIgnoreHash`, `FindNewReplicaSet`, `FindOldReplicaSets`,
//! `GetReplicaCountForReplicaSets` and friends of `deployment_util.go`, and
//! `ReplicaSetsByCreationTimestamp`, `ReplicaSetsBySizeOlder/Newer`, `FilterActiveReplicaSets`
//! of `controller_utils.go`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::consts::{self, POD_TEMPLATE_HASH_LABEL, strategy};

/// A shared, immutable ReplicaSet as the cache (or an API response) holds it.
pub type Rs = Arc<ReplicaSet>;

// ---- Deployment accessors ------------------------------------------------------------------

fn dspec(d: &Deployment) -> Option<&DeploymentSpec> {
    Some(&d.spec)
}

/// `spec.replicas` (API default 1).
pub fn desired(d: &Deployment) -> i32 {
    dspec(d).and_then(|s| s.replicas).unwrap_or(1)
}

/// `spec.strategy.type` (API default `RollingUpdate`).
pub fn strategy_type(d: &Deployment) -> &str {
    dspec(d)
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .unwrap_or(strategy::ROLLING_UPDATE)
}

pub fn is_rolling(d: &Deployment) -> bool {
    strategy_type(d) == strategy::ROLLING_UPDATE
}

pub fn is_paused(d: &Deployment) -> bool {
    dspec(d).and_then(|s| s.paused).unwrap_or(false)
}

pub fn min_ready_seconds(d: &Deployment) -> i32 {
    dspec(d).and_then(|s| s.min_ready_seconds).unwrap_or(0)
}

/// `progressDeadlineSeconds`, when a deadline is in force (`HasProgressDeadline`).
pub fn progress_deadline(d: &Deployment) -> Option<i32> {
    dspec(d)
        .and_then(|s| s.progress_deadline_seconds)
        .filter(|s| *s != consts::UNSET_INT32)
}

/// `revisionHistoryLimit`, when a limit is in force (`HasRevisionHistoryLimit`).
pub fn revision_history_limit(d: &Deployment) -> Option<i32> {
    dspec(d)
        .and_then(|s| s.revision_history_limit)
        .filter(|s| *s != consts::UNSET_INT32)
}

pub fn template(d: &Deployment) -> Option<&PodTemplateSpec> {
    dspec(d).map(|s| &s.template)
}

pub fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

pub fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

// ---- ReplicaSet accessors ------------------------------------------------------------------

/// `spec.replicas` (API default 1).
pub fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

pub fn status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map_or(0, |s| s.replicas)
}

pub fn ready_replicas(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

pub fn available_replicas(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

pub fn observed_generation(rs: &ReplicaSet) -> i64 {
    rs.status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .unwrap_or(0)
}

pub fn rs_name(rs: &ReplicaSet) -> &str {
    name_of(&rs.metadata)
}

pub fn uid(rs: &ReplicaSet) -> &str {
    rs.metadata.uid.as_deref().unwrap_or_default()
}

fn created(rs: &ReplicaSet) -> Option<jiff::Timestamp> {
    rs.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// `FilterActiveReplicaSets`: `spec.replicas > 0`.
pub fn active(rss: &[Rs]) -> Vec<Rs> {
    rss.iter().filter(|rs| replicas(rs) > 0).cloned().collect()
}

/// Σ `spec.replicas` (`GetReplicaCountForReplicaSets`).
pub fn sum_spec<'a>(rss: impl IntoIterator<Item = &'a Rs>) -> i32 {
    rss.into_iter().map(|rs| replicas(rs)).sum()
}

/// Σ `status.replicas` (`GetActualReplicaCountForReplicaSets`).
pub fn sum_status<'a>(rss: impl IntoIterator<Item = &'a Rs>) -> i32 {
    rss.into_iter().map(|rs| status_replicas(rs)).sum()
}

pub fn sum_ready<'a>(rss: impl IntoIterator<Item = &'a Rs>) -> i32 {
    rss.into_iter().map(|rs| ready_replicas(rs)).sum()
}

pub fn sum_available<'a>(rss: impl IntoIterator<Item = &'a Rs>) -> i32 {
    rss.into_iter().map(|rs| available_replicas(rs)).sum()
}

/// `GetTerminatingReplicaCountForReplicaSets`: ReplicaSets not yet synced by their controller
/// (observedGeneration 0, no field) are skipped; any synced one without the field makes the
/// total unknown.
pub fn sum_terminating<'a>(rss: impl IntoIterator<Item = &'a Rs>) -> Option<i32> {
    let mut total = 0;
    for rs in rss {
        let terminating = rs.status.as_ref().and_then(|s| s.terminating_replicas);
        match terminating {
            None if observed_generation(rs) == 0 => continue,
            None => return None,
            Some(n) => total += n,
        }
    }
    Some(total)
}

// ---- orders --------------------------------------------------------------------------------

/// `ReplicaSetsByCreationTimestamp`: older first, then by name.
pub fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    created(a)
        .cmp(&created(b))
        .then_with(|| rs_name(a).cmp(rs_name(b)))
}

pub fn sort_by_creation(rss: &mut [Rs]) {
    rss.sort_by(|a, b| by_creation(a, b));
}

/// `ReplicaSetsBySizeNewer`: larger first; equal sizes newer first.
pub fn by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    replicas(b)
        .cmp(&replicas(a))
        .then_with(|| by_creation(b, a))
}

/// `ReplicaSetsBySizeOlder`: larger first; equal sizes older first.
pub fn by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    replicas(b)
        .cmp(&replicas(a))
        .then_with(|| by_creation(a, b))
}

// ---- template equality and the new/old split -----------------------------------------------

/// A template as a JSON value with the hash label removed and the absent-vs-empty distinction
/// erased (see [`equal_ignore_hash`]).
fn comparable(template: &PodTemplateSpec) -> serde_json::Value {
    let mut t = template.clone();
    if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    let value = serde_json::to_value(&t).unwrap_or(serde_json::Value::Null);
    normalize(value).unwrap_or(serde_json::Value::Null)
}

/// Drops nulls, empty lists and empty objects from object fields, recursively. `None` when
/// the value itself is one of those.
fn normalize(v: serde_json::Value) -> Option<serde_json::Value> {
    use serde_json::Value;
    match v {
        Value::Null => None,
        Value::Array(items) if items.is_empty() => None,
        Value::Array(items) => Some(Value::Array(
            items
                .into_iter()
                .map(|i| normalize(i).unwrap_or(Value::Null))
                .collect(),
        )),
        Value::Object(map) => {
            let map: serde_json::Map<String, Value> = map
                .into_iter()
                .filter_map(|(k, v)| normalize(v).map(|v| (k, v)))
                .collect();
            (!map.is_empty()).then_some(Value::Object(map))
        }
        other => Some(other),
    }
}

/// `EqualIgnoreHash`: the templates are semantically equal once `pod-template-hash` is
/// removed from both label sets.
///
/// Upstream compares with `apiequality.Semantic.DeepEqual`, whose forked reflection treats a
/// nil and an empty map or slice as equal. Comparing canonical JSON with nulls, empty lists
/// and empty objects dropped gives the same answer for maps and slices; it also equates an
/// absent pointer-to-struct with an empty one (`securityContext: {}` vs none), which upstream
/// would call different. Quantities are compared as the canonical strings the API server
/// serialises for both templates.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    identical_ignore_hash(a, b) || comparable(a) == comparable(b)
}

/// Field-by-field equality once `pod-template-hash` is removed: identical templates serialise
/// identically, so this implies [`equal_ignore_hash`] and spares the JSON round trip in the
/// common case (a ReplicaSet's template is the Deployment's plus the hash label).
fn identical_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    if a.spec != b.spec {
        return false;
    }
    match (&a.metadata, &b.metadata) {
        (None, None) => true,
        (Some(ma), Some(mb)) => {
            fn without_hash(m: &ObjectMeta) -> Option<Vec<(&String, &String)>> {
                m.labels.as_ref().map(|labels| {
                    labels
                        .iter()
                        .filter(|(k, _)| k.as_str() != POD_TEMPLATE_HASH_LABEL)
                        .collect()
                })
            }
            let rest = |m: &ObjectMeta| ObjectMeta {
                labels: None,
                ..m.clone()
            };
            without_hash(ma) == without_hash(mb) && rest(ma) == rest(mb)
        }
        _ => false,
    }
}

/// [`matches_template`] for many ReplicaSets of one Deployment: the Deployment's comparable
/// form is computed at most once.
struct TemplateMatcher<'a> {
    template: &'a PodTemplateSpec,
    comparable: std::cell::OnceCell<serde_json::Value>,
}

impl<'a> TemplateMatcher<'a> {
    fn new(d: &'a Deployment, empty: &'a PodTemplateSpec) -> Self {
        Self {
            template: template(d).unwrap_or(empty),
            comparable: std::cell::OnceCell::new(),
        }
    }

    fn matches(&self, rs: &ReplicaSet) -> bool {
        let empty = PodTemplateSpec::default();
        let other = rs_template(rs).unwrap_or(&empty);
        identical_ignore_hash(self.template, other)
            || *self.comparable.get_or_init(|| comparable(self.template)) == comparable(other)
    }
}

fn rs_template(rs: &ReplicaSet) -> Option<&PodTemplateSpec> {
    rs.spec.template.as_ref()
}

/// True when the ReplicaSet runs the Deployment's current template.
pub fn matches_template(d: &Deployment, rs: &ReplicaSet) -> bool {
    let empty = PodTemplateSpec::default();
    equal_ignore_hash(
        template(d).unwrap_or(&empty),
        rs_template(rs).unwrap_or(&empty),
    )
}

/// `FindNewReplicaSet`: the oldest ReplicaSet whose template equals the Deployment's.
pub fn find_new(d: &Deployment, rss: &[Rs]) -> Option<Rs> {
    let mut sorted = rss.to_vec();
    sort_by_creation(&mut sorted);
    let empty = PodTemplateSpec::default();
    let matcher = TemplateMatcher::new(d, &empty);
    sorted.into_iter().find(|rs| matcher.matches(rs))
}

/// The new ReplicaSet (if any) and every other one, oldest first (`FindOldReplicaSets`, all
/// of them; upstream's list is left sorted by `FindNewReplicaSet`).
pub fn split(d: &Deployment, rss: &[Rs]) -> (Option<Rs>, Vec<Rs>) {
    let mut sorted = rss.to_vec();
    sort_by_creation(&mut sorted);
    let empty = PodTemplateSpec::default();
    let matcher = TemplateMatcher::new(d, &empty);
    let new = sorted.iter().find(|rs| matcher.matches(rs)).cloned();
    let new_uid = new.as_ref().map(|rs| uid(rs).to_owned());
    sorted.retain(|rs| new_uid.as_deref() != Some(uid(rs)));
    (new, sorted)
}

/// `labelsutil.CloneAndRemoveLabel` on template labels, for rollback.
pub fn template_without_hash(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut t = template.clone();
    if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    t
}

/// The template labels plus `pod-template-hash=<hash>`.
pub fn labels_with_hash(
    labels: Option<&BTreeMap<String, String>>,
    hash: &str,
) -> BTreeMap<String, String> {
    let mut out = labels.cloned().unwrap_or_default();
    out.insert(POD_TEMPLATE_HASH_LABEL.to_owned(), hash.to_owned());
    out
}

#[cfg(test)]
pub(crate) mod tests;
