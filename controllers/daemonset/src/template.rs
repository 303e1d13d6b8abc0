//! The pods a DaemonSet creates and how its pods are read back. Pure.
//!
//! Mirrors upstream `pkg/controller/daemon/util/daemonset_util.go`
//! (`AddOrUpdateDaemonPodTolerations`, `CreatePodTemplate`,
//! `ReplaceDaemonSetPodNodeNameNodeAffinity`, `GetTargetNodeName`, `GetTemplateGeneration`,
//! `IsPodUpdated`, `SurgeCount`, `UnavailableCount`, `AllowsSurge`),
//! `AddOrUpdateTolerationInPodSpec` of `k8s.io/component-helpers/scheduling/corev1` and
//! `GetScaledValueFromIntOrPercent` of apimachinery `util/intstr`.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
    PodTemplateSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rkcm_runtime::cache::cached::Pod;

use crate::consts::{OBJECT_NAME_FIELD, labels, ops, strategy, taints};

fn exists_toleration(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.to_owned()),
        operator: Some(ops::EXISTS.to_owned()),
        effect: Some(effect.to_owned()),
        ..Toleration::default()
    }
}

/// The tolerations every daemon pod gets, in upstream's order; `network-unavailable` only
/// for host-network pods.
pub fn default_tolerations(host_network: bool) -> Vec<Toleration> {
    let mut list = vec![
        exists_toleration(taints::NOT_READY, taints::NO_EXECUTE),
        exists_toleration(taints::UNREACHABLE, taints::NO_EXECUTE),
        exists_toleration(taints::DISK_PRESSURE, taints::NO_SCHEDULE),
        exists_toleration(taints::MEMORY_PRESSURE, taints::NO_SCHEDULE),
        exists_toleration(taints::PID_PRESSURE, taints::NO_SCHEDULE),
        exists_toleration(taints::UNSCHEDULABLE, taints::NO_SCHEDULE),
    ];
    if host_network {
        list.push(exists_toleration(
            taints::NETWORK_UNAVAILABLE,
            taints::NO_SCHEDULE,
        ));
    }
    list
}

fn s(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or_default()
}

/// `Toleration.MatchToleration`: same key, operator, value and effect.
fn same_toleration(a: &Toleration, b: &Toleration) -> bool {
    s(&a.key) == s(&b.key)
        && s(&a.operator) == s(&b.operator)
        && s(&a.value) == s(&b.value)
        && s(&a.effect) == s(&b.effect)
}

/// `AddOrUpdateTolerationInPodSpec`: an identical toleration is left alone, a matching but
/// different one (say, with `tolerationSeconds`) is replaced in place, otherwise appended.
pub fn add_or_update_toleration(spec: &mut PodSpec, toleration: &Toleration) {
    let list = spec.tolerations.get_or_insert_with(Vec::new);
    let identical = |t: &Toleration| {
        same_toleration(t, toleration) && t.toleration_seconds == toleration.toleration_seconds
    };
    if list.iter().any(identical) {
        return;
    }
    let mut updated = false;
    for existing in list.iter_mut() {
        if same_toleration(existing, toleration) {
            *existing = toleration.clone();
            updated = true;
        }
    }
    if !updated {
        list.push(toleration.clone());
    }
}

/// `AddOrUpdateDaemonPodTolerations`.
pub fn add_or_update_daemon_pod_tolerations(spec: &mut PodSpec) {
    for t in default_tolerations(spec.host_network == Some(true)) {
        add_or_update_toleration(spec, &t);
    }
}

/// `GetTemplateGeneration`: the `deprecated.daemonset.template.generation` annotation; an
/// absent or unparsable value is `None` (upstream ignores the parse error).
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(labels::DEPRECATED_TEMPLATE_GENERATION)?
        .parse()
        .ok()
}

/// `CreatePodTemplate`: the template with the default tolerations and the
/// `pod-template-generation` (when known) and `controller-revision-hash` labels.
pub fn create_pod_template(
    template: &PodTemplateSpec,
    generation: Option<i64>,
    hash: &str,
) -> PodTemplateSpec {
    let mut t = template.clone();
    let spec = t.spec.get_or_insert_with(PodSpec::default);
    add_or_update_daemon_pod_tolerations(spec);
    let meta = t.metadata.get_or_insert_with(ObjectMeta::default);
    let l = meta.labels.get_or_insert_with(Default::default);
    if let Some(g) = generation {
        l.insert(labels::POD_TEMPLATE_GENERATION.to_owned(), g.to_string());
    }
    if !hash.is_empty() {
        l.insert(labels::CONTROLLER_REVISION_HASH.to_owned(), hash.to_owned());
    }
    t
}

fn node_name_term(node: &str) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: OBJECT_NAME_FIELD.to_owned(),
            operator: ops::IN.to_owned(),
            values: Some(vec![node.to_owned()]),
        }]),
        ..NodeSelectorTerm::default()
    }
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes exactly one
/// term, `matchFields metadata.name In [node]`; preferred terms and pod (anti-)affinity stay.
pub fn replace_node_name_affinity(affinity: Option<Affinity>, node: &str) -> Affinity {
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    match &mut node_affinity.required_during_scheduling_ignored_during_execution {
        Some(required) => required.node_selector_terms = vec![node_name_term(node)],
        None => {
            node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
                node_selector_terms: vec![node_name_term(node)],
            })
        }
    }
    affinity
}

/// `GetTargetNodeName`: `spec.nodeName`, else the single value of the first
/// `matchFields metadata.name In [...]` requirement of the required node affinity. `None`
/// when neither gives one node.
pub fn target_node_name(pod: &Pod) -> Option<&str> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_deref()
        && !n.is_empty()
    {
        return Some(n);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    for term in terms {
        for r in term.match_fields.as_deref().unwrap_or_default() {
            if r.key == OBJECT_NAME_FIELD && r.operator == ops::IN {
                return match r.values.as_deref().unwrap_or_default() {
                    [v] => Some(v.as_str()),
                    _ => None,
                };
            }
        }
    }
    None
}

fn pod_label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// [`template_generation`] as the `pod-template-generation` label spells it: computed once
/// per sync for [`is_pod_updated`].
pub fn template_generation_label(ds: &DaemonSet) -> Option<String> {
    template_generation(ds).map(|g| g.to_string())
}

/// `IsPodUpdated`: the pod carries the current hash, or the current template generation
/// (`generation`: from [`template_generation_label`]).
pub fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<&str>) -> bool {
    let hash_matches =
        !hash.is_empty() && pod_label(pod, labels::CONTROLLER_REVISION_HASH) == Some(hash);
    hash_matches
        || generation.is_some_and(|g| pod_label(pod, labels::POD_TEMPLATE_GENERATION) == Some(g))
}

/// The `controller-revision-hash` label of a pod (empty when absent).
pub fn pod_hash(pod: &Pod) -> &str {
    pod_label(pod, labels::CONTROLLER_REVISION_HASH).unwrap_or_default()
}

/// An `IntOrString` that is neither an integer nor `<int>%`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for IntOrString: {0}")]
pub struct IntOrPercentError(pub String);

/// `GetScaledValueFromIntOrPercent`: an integer as is; a percentage of `total`, rounded up
/// or down.
pub fn scaled_value(
    v: Option<&IntOrString>,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    match v {
        None => Err(IntOrPercentError("nil value for IntOrString".into())),
        Some(IntOrString::Int(i)) => Ok(*i),
        Some(IntOrString::String(s)) => {
            let pct: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| {
                    IntOrPercentError(format!("invalid type: string is not a percentage: {s:?}"))
                })?;
            let product = pct * i64::from(total);
            let scaled = if round_up {
                // ceil(pct * total / 100) for the signs the API allows.
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            Ok(i32::try_from(scaled).unwrap_or(i32::MAX))
        }
    }
}

fn rolling_update_params(
    ds: &DaemonSet,
) -> Option<&k8s_openapi::api::apps::v1::RollingUpdateDaemonSet> {
    let s = ds.spec.update_strategy.as_ref()?;
    if s.type_.as_deref() != Some(strategy::ROLLING_UPDATE) {
        return None;
    }
    s.rolling_update.as_ref()
}

/// `SurgeCount`: `maxSurge` scaled against `number_to_schedule` (rounded up); 0 when the
/// strategy is not RollingUpdate or `maxSurge` is unset.
pub fn surge_count(ds: &DaemonSet, number_to_schedule: i32) -> Result<i32, IntOrPercentError> {
    match rolling_update_params(ds).and_then(|r| r.max_surge.as_ref()) {
        None => Ok(0),
        v => scaled_value(v, number_to_schedule, true),
    }
}

/// `UnavailableCount`: `maxUnavailable` scaled against `number_to_schedule` (rounded up); 0
/// when the strategy is not RollingUpdate; an error when `maxUnavailable` is unset.
pub fn unavailable_count(
    ds: &DaemonSet,
    number_to_schedule: i32,
) -> Result<i32, IntOrPercentError> {
    match rolling_update_params(ds) {
        None => Ok(0),
        Some(r) => scaled_value(r.max_unavailable.as_ref(), number_to_schedule, true),
    }
}

/// `AllowsSurge`: a RollingUpdate whose `maxSurge` is non-zero for one node.
pub fn allows_surge(ds: &DaemonSet) -> bool {
    surge_count(ds, 1).is_ok_and(|n| n != 0)
}

/// The update strategy type (`RollingUpdate` when unset, the API default).
pub fn strategy_type(ds: &DaemonSet) -> &str {
    ds.spec
        .update_strategy
        .as_ref()
        .and_then(|u| u.type_.as_deref())
        .unwrap_or(strategy::ROLLING_UPDATE)
}

/// `spec.minReadySeconds` (0 when unset).
pub fn min_ready_seconds(ds: &DaemonSet) -> i32 {
    ds.spec.min_ready_seconds.unwrap_or(0)
}

#[cfg(test)]
mod tests;
