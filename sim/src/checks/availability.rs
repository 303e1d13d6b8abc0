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
        // Every version a pod had on the server counts, not only the one left at the end
        // of the step: a pod that turned ready and failed within one step was available to
        // a controller whose watch delivered the version between (and its ReplicaSet's
        // status may count it).
        for c in changes {
            if c.resource == "pods"
                && is_available(&c.obj)
                && let Some((_, _, rs_uid)) = controller_of(&c.obj)
            {
                let uid = s(&c.obj, &["metadata", "uid"]).to_owned();
                self.seen.insert(uid, (rs_uid, c.at_ms));
            }
        }
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

    /// A Deployment of 3 (surge 1, unavailable 0) with 3 settled available pods in its old
    /// ReplicaSet and one pod of its new ReplicaSet that turns ready and fails within one
    /// step (`ready_between`) or never turns ready; then the Deployment controller scales
    /// the old ReplicaSet down to 2. The findings of that step.
    async fn scale_down_after_new_pod(ready_between: bool) -> Vec<Finding> {
        use rkcm_testkit::sim::server::{Caller, resource};
        let mut world = World::new(1, jiff::Timestamp::UNIX_EPOCH);
        let user = Caller::sim("user");
        let create = |world: &mut World, plural: &str, obj: Value| -> String {
            let r = resource(plural).expect("a simulated resource");
            let _ = world.create(&user, r, "a", obj.clone());
            let key = format!("a/{}", s(&obj, &["metadata", "name"]));
            let stored = world.get(r.plural, &key).expect("created");
            s(&stored, &["metadata", "uid"]).to_owned()
        };
        let owner = |kind: &str, name: &str, uid: &str| {
            json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
                "controller": true}])
        };
        let d_uid = create(
            &mut world,
            "deployments",
            json!({"metadata": {"name": "web", "namespace": "a"},
                "spec": {"replicas": 3, "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}),
        );
        let rs = |world: &mut World, name: &str, replicas: i64| {
            create(
                world,
                "replicasets",
                json!({"metadata": {"name": name, "namespace": "a",
                    "ownerReferences": owner("Deployment", "web", &d_uid)},
                    "spec": {"replicas": replicas}}),
            )
        };
        let old = rs(&mut world, "web-old", 3);
        let new = rs(&mut world, "web-new", 1);
        // Created, then given a running status by the kubelet (a create sets its own).
        let pod = |world: &mut World, name: &str, rs: &str, rs_uid: &str, ready: bool| {
            create(
                world,
                "pods",
                json!({"metadata": {"name": name, "namespace": "a",
                    "ownerReferences": owner("ReplicaSet", rs, rs_uid)},
                    "spec": {"nodeName": "n"}}),
            );
            world.edit("kubelet", "pods", &format!("a/{name}"), |p| {
                p["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready",
                    "status": if ready { "True" } else { "False" }}]});
                true
            });
        };
        for i in 0..3 {
            pod(&mut world, &format!("old-{i}"), "web-old", &old, true);
        }
        pod(&mut world, "new-0", "web-new", &new, false);
        let mut check = Availability::default();
        let changes = world.drain_changes();
        check.step(&world, &changes);
        tokio::time::advance(std::time::Duration::from_millis(LAG_MS + 1_000)).await;
        let changes = world.drain_changes();
        check.step(&world, &changes);
        if ready_between {
            world.edit("kubelet", "pods", "a/new-0", |p| {
                p["status"]["conditions"][0]["status"] = json!("True");
                true
            });
        }
        world.edit("kubelet", "pods", "a/new-0", |p| {
            p["status"]["phase"] = json!("Failed");
            p["status"]["conditions"][0]["status"] = json!("False");
            true
        });
        world.edit("deployment-controller", "replicasets", "a/web-old", |r| {
            r["spec"]["replicas"] = json!(2);
            true
        });
        let changes = world.drain_changes();
        check.step(&world, &changes)
    }

    /// The pod that was ready only between two writes of one step counts as available (a
    /// ReplicaSet status may have counted it); a pod never ready does not, and the same
    /// scale-down is then below `replicas - maxUnavailable`.
    #[tokio::test(start_paused = true)]
    async fn a_pod_ready_only_within_a_step_counts_as_available() {
        let found = scale_down_after_new_pod(true).await;
        assert!(found.is_empty(), "{found:?}");
        let found = scale_down_after_new_pod(false).await;
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].2.contains("leave 2"), "{found:?}");
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
