//! `DeploymentScaleDownBelowMinAvailable`: the Deployment controller's own scale-downs of a
//! rolling update never take the available pods below `replicas - maxUnavailable`
//! (`reconcileOldReplicaSets` of `pkg/controller/deployment/rolling.go`). Faults that kill
//! or un-ready pods are not the controller's: a pod counts as available while it was
//! available at any time within [`LAG_MS`] (the controller decides on ReplicaSet statuses
//! that trail the pods by watch delays, status writes and restarts), and a scale-down is
//! judged only by the available pods it removes, with the ReplicaSet controller deleting
//! not-available pods first (`getPodsToDelete`). The same lag holds the other way: a pod
//! available again for less than [`LAG_MS`] (a node back from an outage) may still be
//! unavailable in its ReplicaSet's status, and upstream's `cleanupUnhealthyReplicas` scales
//! such a ReplicaSet down as unhealthy; removing it is not counted against the controller.

use std::collections::{BTreeMap, BTreeSet};

use rkcm_testkit::sim::server::{Change, World};
use serde_json::Value;

use crate::scenario::{controller_of, is_ready, is_terminal, is_terminating, n, s};

/// How long a pod that was available may still count as available, and how long after a
/// change of a Deployment's `replicas` its scale-downs are proportional scaling, not the
/// rolling update's: more than a watch delay (10 s) plus a stale list (10 s) plus a restart.
pub const LAG_MS: u64 = 30_000;

/// Available as the checker sees it: ready, neither terminal nor terminating (the scenarios'
/// Deployments have `minReadySeconds: 0`).
fn is_available(p: &Value) -> bool {
    is_ready(p) && !is_terminal(p) && !is_terminating(p)
}

/// An `IntOrString` of a rolling update resolved against `replicas` (percentages round up
/// for the surge, down for unavailability, as upstream's `ResolveFenceposts`).
fn resolve(v: &Value, replicas: i64, up: bool, default_pct: i64) -> i64 {
    let pct = match v {
        Value::Number(x) => return x.as_i64().unwrap_or(0),
        Value::String(t) => t.trim_end_matches('%').parse().unwrap_or(default_pct),
        _ => default_pct,
    };
    if up {
        (replicas * pct + 99) / 100
    } else {
        replicas * pct / 100
    }
}

/// `replicas - maxUnavailable` of a rolling Deployment (`MaxUnavailable` of
/// `pkg/controller/deployment/util/deployment_util.go`: 1 when both fenceposts resolve to 0,
/// never more than `replicas`).
pub fn min_available(d: &Value) -> i64 {
    let replicas = n(d, &["spec", "replicas"]);
    let ru = &d["spec"]["strategy"]["rollingUpdate"];
    let surge = resolve(&ru["maxSurge"], replicas, true, 25);
    let mut unavailable = resolve(&ru["maxUnavailable"], replicas, false, 25);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    replicas - unavailable.min(replicas)
}

/// What the check keeps between steps.
#[derive(Default)]
pub struct Availability {
    /// Pod UID to (its ReplicaSet's UID, when it was last seen available).
    seen: BTreeMap<String, (String, u64)>,
    /// Deployment key to when its `replicas` last changed.
    scaled: BTreeMap<String, u64>,
    /// The pods available at the end of the step before, by UID.
    before: BTreeSet<String>,
    /// Pod UID to when its current stretch of availability began.
    since: BTreeMap<String, u64>,
}

/// One broken promise: the object and the detail.
pub type Finding = (u64, String, String);

impl Availability {
    /// Feeds one step's changes and state; the scale-downs that broke the promise.
    pub fn step(&mut self, world: &World, changes: &[Change]) -> Vec<Finding> {
        let now = world.now_ms();
        for c in changes {
            let replicas = |v: &Value| v["spec"]["replicas"].clone();
            if c.resource == "deployments"
                && c.prev
                    .as_deref()
                    .is_none_or(|p| replicas(p) != replicas(&c.obj))
            {
                self.scaled.insert(c.key.clone(), c.at_ms);
            }
        }
        let before = std::mem::take(&mut self.before);
        for pod in world.list("pods") {
            if is_available(&pod)
                && let Some((_, _, rs_uid)) = controller_of(&pod)
            {
                let uid = s(&pod, &["metadata", "uid"]).to_owned();
                self.seen.insert(uid.clone(), (rs_uid, now));
                self.since.entry(uid.clone()).or_insert(now);
                self.before.insert(uid);
            }
        }
        let available_now = &self.before;
        self.since.retain(|uid, _| available_now.contains(uid));
        let mut out = Vec::new();
        for c in changes {
            if c.resource != "replicasets"
                || c.kind != "MODIFIED"
                || c.agent != "deployment-controller"
            {
                continue;
            }
            let Some(prev) = &c.prev else { continue };
            let (from, to) = (
                n(prev, &["spec", "replicas"]),
                n(&c.obj, &["spec", "replicas"]),
            );
            if to < from
                && let Some(f) = self.judge(world, &c.obj, to, now, &before)
            {
                out.push((c.at_ms, c.key.clone(), f));
            }
        }
        self.seen.retain(|_, (_, at)| *at + LAG_MS >= now);
        out
    }

    /// A scale-down of `rs` to `to` replicas, on the state as it is now: its pods that were
    /// available both at the step before and now (`before`: the UIDs available then) are
    /// the ones the ReplicaSet controller deletes last.
    fn judge(
        &self,
        world: &World,
        rs: &Value,
        to: i64,
        now: u64,
        before: &BTreeSet<String>,
    ) -> Option<String> {
        let (kind, name, _) = controller_of(rs)?;
        let d = world.get(
            "deployments",
            &format!("{}/{name}", s(rs, &["metadata", "namespace"])),
        )?;
        if kind != "Deployment"
            || is_terminating(&d)
            || s(&d, &["spec", "strategy", "type"]) != "RollingUpdate"
            || self
                .scaled
                .get(&crate::scenario::key(&d))
                .is_some_and(|at| at + LAG_MS >= now)
        {
            return None;
        }
        let d_uid = s(&d, &["metadata", "uid"]);
        let sets: BTreeSet<String> = world
            .list("replicasets")
            .iter()
            .filter(|r| controller_of(r).is_some_and(|(_, _, uid)| uid == d_uid))
            .map(|r| s(r, &["metadata", "uid"]).to_owned())
            .collect();
        let available = self
            .seen
            .values()
            .filter(|(rs, _)| sets.contains(rs))
            .count();
        let rs_uid = s(rs, &["metadata", "uid"]);
        let active: Vec<_> = world
            .list("pods")
            .into_iter()
            .filter(|p| controller_of(p).is_some_and(|(_, _, uid)| uid == rs_uid))
            .filter(|p| !is_terminal(p) && !is_terminating(p))
            .collect();
        let settled = |uid: &str| {
            before.contains(uid) && self.since.get(uid).is_some_and(|t| t + LAG_MS <= now)
        };
        let unavailable = active
            .iter()
            .filter(|p| !is_available(p) || !settled(s(p, &["metadata", "uid"])))
            .count();
        let deleted = usize::try_from((i64::try_from(active.len()).ok()? - to).max(0)).ok()?;
        let removed = deleted.saturating_sub(unavailable);
        let after = i64::try_from(available.saturating_sub(removed)).ok()?;
        let min = min_available(&d);
        (removed > 0 && after < min).then(|| {
            format!(
                "deployment-controller scaled {} down to {to}: {} of its {} active pods go, {removed} of them available; {available} available pods of the Deployment (within {} s) leave {after}, below replicas - maxUnavailable = {min}",
                s(rs, &["metadata", "name"]),
                deleted,
                active.len(),
                LAG_MS / 1000
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(replicas: i64, surge: Value, unavailable: Value) -> Value {
        json!({"spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}})
    }

    #[test]
    fn min_available_table() {
        let cases = [
            (d(3, json!(1), json!(0)), 3),
            (d(3, json!(0), json!(1)), 2),
            (d(2, json!("25%"), json!("25%")), 2),
            (d(4, json!("25%"), json!("25%")), 3),
            (d(3, json!(0), json!(0)), 2),
            (d(2, json!(0), json!(5)), 0),
            (d(0, json!(1), json!(1)), 0),
        ];
        for (dep, want) in cases {
            assert_eq!(min_available(&dep), want, "{dep}");
        }
    }
}
