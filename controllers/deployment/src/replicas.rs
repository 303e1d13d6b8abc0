//! PURE: replica arithmetic (upstream `pkg/controller/deployment/util/deployment_util.go`).
//!
//! Mirrors `ResolveFenceposts`, `MaxSurge`, `MaxUnavailable`, `NewRSNewReplicas`,
//! `FindActiveOrLatest`, `IsSaturated`, `GetReplicaSetProportion`, `getReplicaSetFraction`,
//! `ReplicasAnnotationsNeedUpdate`, `SetReplicasAnnotations` of `deployment_util.go` and
//! `intstr.GetScaledValueFromIntOrPercent`.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::consts::{annotations, strategy};
use crate::model::{self, Rs};

/// The apps/v1 default of `maxSurge` and `maxUnavailable`; the API server always fills them
/// in, so this only matters for objects that bypassed defaulting.
fn default_fencepost() -> IntOrString {
    IntOrString::String("25%".to_owned())
}

/// `GetScaledValueFromIntOrPercent`: an int as is; `"N%"` of `total`, rounded up or down;
/// any other string is an error.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .to_owned(),
                );
            };
            let percent: i64 = number
                .parse()
                .map_err(|e| format!("invalid value for IntOrString: invalid value {s:?}: {e}"))?;
            let scaled = percent * i64::from(total);
            let value = if round_up {
                -((-scaled).div_euclid(100))
            } else {
                scaled.div_euclid(100)
            };
            i32::try_from(value).map_err(|e| format!("invalid value for IntOrString: {e}"))
        }
    }
}

fn fenceposts(d: &Deployment) -> (IntOrString, IntOrString) {
    let ru = d
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    (
        ru.and_then(|r| r.max_surge.clone())
            .unwrap_or_else(default_fencepost),
        ru.and_then(|r| r.max_unavailable.clone())
            .unwrap_or_else(default_fencepost),
    )
}

/// `ResolveFenceposts`: surge rounds up, unavailable rounds down; both zero makes
/// unavailable 1 (a rollout must be able to make progress).
pub fn resolve_fenceposts(
    max_surge: &IntOrString,
    max_unavailable: &IntOrString,
    desired: i32,
) -> Result<(i32, i32), String> {
    let surge = scaled_value(max_surge, desired, true)?;
    let unavailable = scaled_value(max_unavailable, desired, false)?;
    if surge == 0 && unavailable == 0 {
        return Ok((0, 1));
    }
    Ok((surge, unavailable))
}

/// `MaxSurge`: 0 for Recreate and for unparsable values.
pub fn max_surge(d: &Deployment) -> i32 {
    if !model::is_rolling(d) {
        return 0;
    }
    let (surge, unavailable) = fenceposts(d);
    resolve_fenceposts(&surge, &unavailable, model::desired(d)).map_or(0, |(s, _)| s)
}

/// `MaxUnavailable`: 0 for Recreate, for zero replicas and for unparsable values; never
/// more than the desired replicas.
pub fn max_unavailable(d: &Deployment) -> i32 {
    let desired = model::desired(d);
    if !model::is_rolling(d) || desired == 0 {
        return 0;
    }
    let (surge, unavailable) = fenceposts(d);
    resolve_fenceposts(&surge, &unavailable, desired).map_or(0, |(_, u)| u.min(desired))
}

/// `NewRSNewReplicas`: the size the new ReplicaSet may grow to now. `all` includes the new
/// ReplicaSet at its current size `new_current`.
pub fn new_rs_new_replicas(d: &Deployment, all: &[Rs], new_current: i32) -> Result<i32, String> {
    let desired = model::desired(d);
    match model::strategy_type(d) {
        strategy::ROLLING_UPDATE => {
            let surge = scaled_value(&fenceposts(d).0, desired, true)?;
            let current = model::sum_spec(all);
            let max_total = desired + surge;
            if current >= max_total {
                return Ok(new_current);
            }
            let scale_up = (max_total - current).min(desired - new_current);
            Ok(new_current + scale_up)
        }
        strategy::RECREATE => Ok(desired),
        other => Err(format!("deployment type {other} isn't supported")),
    }
}

/// `FindActiveOrLatest`: the only active ReplicaSet; the new (or else the newest old) one if
/// none is active; `None` with two or more active.
pub fn find_active_or_latest(new: Option<&Rs>, old: &[Rs]) -> Option<Rs> {
    if new.is_none() && old.is_empty() {
        return None;
    }
    let mut sorted = old.to_vec();
    sorted.sort_by(|a, b| model::by_creation(b, a));
    let mut all = sorted.clone();
    all.extend(new.cloned());
    let active = model::active(&all);
    match active.len() {
        0 => new.cloned().or_else(|| sorted.first().cloned()),
        1 => active.into_iter().next(),
        _ => None,
    }
}

/// Go `strconv.ParseUint(s, 10, 32)` limited to int32: digits only, no sign.
fn parse_non_negative_i32(s: &str) -> Option<i32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u32>().ok().and_then(|v| i32::try_from(v).ok())
}

/// `deployment.kubernetes.io/desired-replicas`, when present and a valid int32 ≥ 0.
pub fn desired_annotation(rs: &ReplicaSet) -> Option<i32> {
    model::annotation(&rs.metadata, annotations::DESIRED_REPLICAS).and_then(parse_non_negative_i32)
}

/// `deployment.kubernetes.io/max-replicas`, when present and a valid int32 ≥ 0.
pub fn max_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    model::annotation(&rs.metadata, annotations::MAX_REPLICAS).and_then(parse_non_negative_i32)
}

/// `IsSaturated`: the ReplicaSet is at full size, was sized for it, and all of it is available.
pub fn is_saturated(d: &Deployment, rs: Option<&Rs>) -> bool {
    let Some(rs) = rs else {
        return false;
    };
    // Upstream parses with Atoi here (a sign is accepted).
    let Some(annotated) = model::annotation(&rs.metadata, annotations::DESIRED_REPLICAS)
        .and_then(|s| s.parse::<i64>().ok())
    else {
        return false;
    };
    let desired = model::desired(d);
    model::replicas(rs) == desired
        && annotated == i64::from(desired)
        && model::available_replicas(rs) == desired
}

/// `ReplicasAnnotationsNeedUpdate`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    model::annotation(&rs.metadata, annotations::DESIRED_REPLICAS)
        != Some(desired.to_string().as_str())
        || model::annotation(&rs.metadata, annotations::MAX_REPLICAS)
            != Some(max.to_string().as_str())
}

/// `SetReplicasAnnotations`; true if anything changed.
pub fn set_replicas_annotations(meta: &mut ObjectMeta, desired: i32, max: i32) -> bool {
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    let mut changed = false;
    for (key, value) in [
        (annotations::DESIRED_REPLICAS, desired.to_string()),
        (annotations::MAX_REPLICAS, max.to_string()),
    ] {
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.to_owned(), value);
            changed = true;
        }
    }
    changed
}

/// Go `integer.RoundToInt32`: half away from zero.
fn round_half_away(x: f64) -> i32 {
    // Truncating casts are Go's int32(float64) conversion for in-range values.
    if x < 0.0 {
        (x - 0.5) as i32
    } else {
        (x + 0.5) as i32
    }
}

/// `getReplicaSetFraction`: how much `rs` should change when the Deployment goes from the
/// size recorded in its max-replicas annotation to `D + maxSurge` now.
pub fn replica_set_fraction(
    rs: &ReplicaSet,
    d: &Deployment,
    deployment_status_replicas: i32,
) -> i32 {
    let desired = model::desired(d);
    let current = model::replicas(rs);
    if desired == 0 {
        return -current;
    }
    let max_now = desired + max_surge(d);
    let before = match max_replicas_annotation(rs) {
        Some(n) if n != 0 => n,
        // Only the creation of a ReplicaSet by an older controller lacks the annotation; the
        // Deployment's observed size is the best base then.
        _ => deployment_status_replicas,
    };
    if before == 0 {
        return 0;
    }
    let new_size = (f64::from(current) * f64::from(max_now)) / f64::from(before);
    round_half_away(new_size) - current
}

/// `GetReplicaSetProportion`: the share of `to_add` this ReplicaSet takes, given `added` so
/// far, never overshooting what is left.
pub fn replica_set_proportion(
    rs: &ReplicaSet,
    d: &Deployment,
    deployment_status_replicas: i32,
    to_add: i32,
    added: i32,
) -> i32 {
    if model::replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = replica_set_fraction(rs, d, deployment_status_replicas);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

#[cfg(test)]
mod tests;
