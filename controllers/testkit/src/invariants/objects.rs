//! What the checks read from one object: keys, controllers, pod phases, a Deployment's surge
//! bound and settledness, a Job's counts and completed indexes.

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub(super) fn key_of(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    match &m.namespace {
        Some(ns) => format!("{ns}/{}", m.name.as_deref().unwrap_or_default()),
        None => m.name.clone().unwrap_or_default(),
    }
}

pub(super) fn controller_of(
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<(&str, &str, &str)> {
    m.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| (r.kind.as_str(), r.name.as_str(), r.uid.as_str()))
}

pub(super) fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

pub(super) fn terminal(p: &Pod) -> bool {
    matches!(phase(p), "Succeeded" | "Failed")
}

/// Live as the ReplicaSet controller counts: not terminal, not terminating.
pub fn is_live(p: &Pod) -> bool {
    !terminal(p) && p.metadata.deletion_timestamp.is_none()
}

pub(super) fn node_of(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// Why a Deployment has not finished rolling out (observed its generation with every
/// replica updated and available), or `None` when it has.
pub fn deployment_unsettled(d: &Deployment) -> Option<String> {
    let want = d.spec.replicas.unwrap_or(1);
    let s = d.status.clone().unwrap_or_default();
    let settled = s.observed_generation == d.metadata.generation
        && s.updated_replicas == Some(want)
        && s.replicas == Some(want)
        && s.available_replicas == Some(want);
    (!settled).then(|| {
        format!(
            "deployment {}: want {want}, status {s:?}",
            d.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// `maxSurge` of a Deployment as a pod count: 0 for Recreate; percentages round up
/// (`pkg/controller/deployment/util/deployment_util.go`, `ResolveFenceposts`).
pub fn max_surge(d: &Deployment) -> i64 {
    let spec = &d.spec;
    let replicas = i64::from(spec.replicas.unwrap_or(1));
    let strategy = spec.strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate") {
        return 0;
    }
    let surge = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_surge.clone())
        .unwrap_or(IntOrString::String("25%".into()));
    match surge {
        IntOrString::Int(n) => i64::from(n),
        IntOrString::String(s) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(25);
            (replicas * pct + 99) / 100
        }
    }
}

/// The indexes of an interval string such as `0-3,5,7-9`; `None` when malformed.
pub fn parse_indexes(s: &str) -> Option<BTreeSet<i64>> {
    let mut out = BTreeSet::new();
    for item in s.split(',').filter(|i| !i.is_empty()) {
        let (a, b) = item.split_once('-').unwrap_or((item, item));
        let (a, b): (i64, i64) = (a.parse().ok()?, b.parse().ok()?);
        if a > b || b - a > 1_000_000 {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

pub(super) fn job_finished(j: &Job) -> bool {
    j.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

pub(super) fn job_counts(j: &Job) -> (i32, i32) {
    j.status
        .as_ref()
        .map(|s| (s.succeeded.unwrap_or(0), s.failed.unwrap_or(0)))
        .unwrap_or((0, 0))
}

pub(super) fn is_indexed(j: &Job) -> bool {
    j.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

pub(super) fn completed_indexes(j: &Job) -> Option<&str> {
    j.status
        .as_ref()
        .and_then(|s| s.completed_indexes.as_deref())
}

/// The largest value of a history that was current at some instant in `[from, to]`.
pub(super) fn max_within(hist: &[(Timestamp, i64)], from: Timestamp, to: Timestamp) -> Option<i64> {
    let current_at_from = hist.iter().rev().find(|(t, _)| *t <= from).map(|(_, v)| *v);
    hist.iter()
        .filter(|(t, _)| *t > from && *t <= to)
        .map(|(_, v)| *v)
        .chain(current_at_from)
        .max()
}
