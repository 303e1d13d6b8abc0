use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{self as core, ContainerStatus, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rkcm_runtime::cache::cached::Pod;

use super::*;
use crate::claims::Claims;
use crate::plan::{Action, DeleteReason, Plan, Snapshot, Waiting, plan};
use crate::testutil::{State, arcs, labels, now, parallel, pod, set, terminating, whole_pod};

/// A good revision, a broken one, and a newer one.
const A: &str = "web-a";
const B: &str = "web-b";
const C: &str = "web-c";
const AFTER: Duration = Duration::from_secs(60);

fn ago(secs: i64) -> Time {
    Time(now() - jiff::SignedDuration::from_secs(secs))
}

fn opted(mut s: StatefulSet, value: &str) -> StatefulSet {
    s.metadata.annotations = Some(labels(&[(ANNOTATION, value)]));
    s
}

/// Pod `ord` of `s` at `rev`, Running, not Ready since `secs` ago, bound to node `n1`, then
/// `edit`ed.
fn stuck(
    s: &StatefulSet,
    ord: i32,
    rev: &str,
    secs: i64,
    edit: impl FnOnce(&mut core::Pod),
) -> Pod {
    let mut p = whole_pod(s, ord, rev, State::Unready);
    if let Some(spec) = p.spec.as_mut() {
        spec.node_name = Some("n1".into());
    }
    if let Some(c) = p
        .status
        .as_mut()
        .and_then(|st| st.conditions.as_mut())
        .and_then(|cs| cs.first_mut())
    {
        c.last_transition_time = Some(ago(secs));
    }
    edit(&mut p);
    Pod::from(p)
}

fn restarts(n: i32) -> impl FnOnce(&mut core::Pod) {
    move |p| {
        if let Some(st) = p.status.as_mut() {
            st.container_statuses = Some(vec![ContainerStatus {
                name: "nginx".into(),
                restart_count: n,
                ..ContainerStatus::default()
            }]);
        }
    }
}

/// Pending, never scheduled: `PodScheduled=False` `Unschedulable` since `secs` ago.
fn unschedulable(secs: i64) -> impl FnOnce(&mut core::Pod) {
    move |p| {
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = None;
        }
        if let Some(st) = p.status.as_mut() {
            st.phase = Some("Pending".into());
            st.conditions = Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                last_transition_time: Some(ago(secs)),
                ..PodCondition::default()
            }]);
        }
    }
}

fn pending(p: &mut core::Pod) {
    if let Some(st) = p.status.as_mut() {
        st.phase = Some("Pending".into());
    }
}

struct World {
    set: StatefulSet,
    pods: Vec<Pod>,
    current: &'static str,
    update: &'static str,
    default_on: bool,
    nodes: Nodes,
}

fn world(set: StatefulSet, pods: Vec<Pod>, current: &'static str, update: &'static str) -> World {
    World {
        set,
        pods,
        current,
        update,
        default_on: false,
        nodes: Nodes::from([("n1".to_owned(), true)]),
    }
}

impl World {
    fn run<T>(&self, f: impl FnOnce(&Snapshot<'_>, &[std::sync::Arc<Pod>]) -> T) -> T {
        let pods = arcs(self.pods.clone());
        let claims = Claims::new();
        let s = Snapshot {
            set: &self.set,
            current_set: &self.set,
            update_set: &self.set,
            current_revision: self.current,
            update_revision: self.update,
            collision_count: 0,
            pods: &pods,
            claims: &claims,
            now: now(),
            max_unavailable_gate: true,
            recovery: Recovery {
                default_on: self.default_on,
                after: AFTER,
                nodes: &self.nodes,
            },
        };
        f(&s, &pods)
    }

    /// The judgement of the pod at `ord`.
    fn judge(&self, ord: i32) -> Judgement {
        self.run(|s, pods| {
            let pod = pods
                .iter()
                .find(|p| crate::identity::ordinal(p) == Some(ord))
                .expect("the pod is in the world");
            judge(&s.recovery_context(), pod)
        })
    }

    fn plan(&self) -> Plan {
        self.run(|s, _| plan(s))
    }
}

fn ready(s: &StatefulSet, ord: i32, rev: &str) -> Pod {
    pod(s, ord, rev, State::Ready(600))
}

/// web-0 and web-1 Ready at `A`, web-2 (the pod judged) given.
fn three(s: &StatefulSet, web2: Pod) -> Vec<Pod> {
    vec![ready(s, 0, A), ready(s, 1, A), web2]
}

#[test]
#[allow(clippy::too_many_lines, reason = "one table of cases")]
fn judge_follows_the_rule() {
    let on = opted(set(3), "true");
    let broken = |s: &StatefulSet, rev: &str| stuck(s, 2, rev, 0, |_| {});
    let mut partitioned = on.clone();
    if let Some(r) = partitioned
        .spec
        .update_strategy
        .as_mut()
        .and_then(|u| u.rolling_update.as_mut())
    {
        r.partition = Some(3);
    }
    let mut on_delete = on.clone();
    if let Some(u) = on_delete.spec.update_strategy.as_mut() {
        u.type_ = Some("OnDelete".into());
        u.rolling_update = None;
    }
    let mut default_on = world(set(3), three(&set(3), broken(&set(3), B)), A, A);
    default_on.default_on = true;
    let mut opted_out = world(
        opted(set(3), "false"),
        three(&set(3), broken(&set(3), B)),
        A,
        A,
    );
    opted_out.default_on = true;
    let mut node_down = world(on.clone(), three(&on, broken(&on, B)), A, A);
    node_down.nodes = Nodes::from([("n1".to_owned(), false)]);
    let mut node_unknown = world(on.clone(), three(&on, broken(&on, B)), A, A);
    node_unknown.nodes = Nodes::new();
    let no = |w: &World| matches!(w.judge(2), Judgement::No(_));
    let node_wait = Some(Judgement::NodeNotReady {
        recheck: NODE_RECHECK,
    });
    let cases: Vec<(&str, World, Option<Judgement>)> = vec![
        (
            "off: no annotation, manager default off",
            world(set(3), three(&set(3), broken(&set(3), B)), A, A),
            Some(Judgement::Off),
        ),
        (
            "off: annotation false beats the manager's default",
            opted_out,
            Some(Judgement::Off),
        ),
        (
            "an unknown annotation value is the default (off)",
            world(
                opted(set(3), "yes"),
                three(&set(3), broken(&set(3), B)),
                A,
                A,
            ),
            Some(Judgement::Off),
        ),
        (
            "rollback: of neither revision, at once",
            world(on.clone(), three(&on, broken(&on, B)), A, A),
            Some(Judgement::Due(Rule::AbandonedRevision)),
        ),
        (
            "superseded by a newer template: at once",
            world(on.clone(), three(&on, broken(&on, B)), A, C),
            Some(Judgement::Due(Rule::AbandonedRevision)),
        ),
        (
            "the manager's default turns it on",
            default_on,
            Some(Judgement::Due(Rule::AbandonedRevision)),
        ),
        (
            "abandoned and unschedulable: at once",
            world(
                on.clone(),
                three(&on, stuck(&on, 2, B, 0, unschedulable(1))),
                A,
                A,
            ),
            Some(Judgement::Due(Rule::AbandonedRevision)),
        ),
        (
            "never a Ready pod",
            world(
                on.clone(),
                three(&on, pod(&on, 2, B, State::Ready(0))),
                A,
                A,
            ),
            None,
        ),
        (
            "never a terminating pod",
            world(on.clone(), three(&on, terminating(broken(&on, B))), A, A),
            None,
        ),
        (
            "forward stuck: of the update revision, recreating does not help",
            world(on.clone(), three(&on, broken(&on, B)), A, B),
            None,
        ),
        (
            "below the partition",
            world(
                partitioned.clone(),
                three(&partitioned, broken(&partitioned, B)),
                A,
                A,
            ),
            None,
        ),
        (
            "never Parallel",
            world(parallel(on.clone()), three(&on, broken(&on, B)), A, A),
            None,
        ),
        (
            "never OnDelete",
            world(
                on_delete.clone(),
                three(&on_delete, broken(&on_delete, B)),
                A,
                A,
            ),
            None,
        ),
        (
            "never on a node that is not Ready",
            node_down,
            node_wait.clone(),
        ),
        (
            "never on a node the cache does not know",
            node_unknown,
            node_wait,
        ),
        (
            "current revision, failing readiness for 10 s of 60",
            world(on.clone(), three(&on, stuck(&on, 2, A, 10, |_| {})), A, C),
            Some(Judgement::Later {
                rule: Rule::ReadinessFailing,
                after: Duration::from_secs(50),
            }),
        ),
        (
            "current revision, failing readiness for 60 s",
            world(on.clone(), three(&on, stuck(&on, 2, A, 60, |_| {})), A, C),
            Some(Judgement::Due(Rule::ReadinessFailing)),
        ),
        (
            "current revision, crash-looping for 120 s",
            world(
                on.clone(),
                three(&on, stuck(&on, 2, A, 120, restarts(4))),
                A,
                C,
            ),
            Some(Judgement::Due(Rule::CrashLooping)),
        ),
        (
            "current revision, crash-looping for 5 s",
            world(
                on.clone(),
                three(&on, stuck(&on, 2, A, 5, restarts(1))),
                A,
                C,
            ),
            Some(Judgement::Later {
                rule: Rule::CrashLooping,
                after: Duration::from_secs(55),
            }),
        ),
        (
            "current revision, unschedulable for 90 s",
            world(
                on.clone(),
                three(&on, stuck(&on, 2, A, 0, unschedulable(90))),
                A,
                C,
            ),
            Some(Judgement::Due(Rule::Unschedulable)),
        ),
        (
            "current revision, scheduled and Pending (no rule: image pull, volumes)",
            world(on.clone(), three(&on, stuck(&on, 2, A, 600, pending)), A, C),
            None,
        ),
    ];
    for (name, w, want) in cases {
        match want {
            Some(want) => assert_eq!(w.judge(2), want, "{name}"),
            None => assert!(no(&w), "{name}: {:?}", w.judge(2)),
        }
    }
}

fn deletes(p: &Plan) -> Vec<String> {
    p.actions()
        .map(|a| match a {
            Action::DeletePod { pod, reason } => format!(
                "delete {} {reason:?}",
                pod.metadata.name.as_deref().unwrap_or_default()
            ),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn the_rollback_replaces_the_stuck_pod_at_once_as_the_syncs_one_action() {
    let on = opted(set(3), "true");
    let w = world(on.clone(), three(&on, stuck(&on, 2, B, 0, |_| {})), A, A);
    let p = w.plan();
    assert_eq!(deletes(&p), vec!["delete web-2 Recover(AbandonedRevision)"]);
    assert_eq!(
        p.waiting,
        vec![Waiting::Recovering {
            ordinal: 2,
            rule: Rule::AbandonedRevision
        }]
    );
    // Not opted in: stuck, exactly as upstream.
    let off = world(
        set(3),
        three(&set(3), stuck(&set(3), 2, B, 0, |_| {})),
        A,
        A,
    );
    let p = off.plan();
    assert!(deletes(&p).is_empty());
    assert_eq!(p.waiting, vec![Waiting::NotReady { ordinal: 2 }]);
}

#[test]
fn only_the_lowest_blocking_pod_goes_never_two_at_once() {
    let on = opted(set(3), "true");
    let pods = vec![
        ready(&on, 0, A),
        stuck(&on, 1, B, 0, |_| {}),
        stuck(&on, 2, B, 0, |_| {}),
    ];
    let p = world(on.clone(), pods, A, A).plan();
    assert_eq!(deletes(&p), vec!["delete web-1 Recover(AbandonedRevision)"]);
    // Next sync: web-1 terminating holds everything, web-2 included.
    let pods = vec![
        ready(&on, 0, A),
        terminating(stuck(&on, 1, B, 0, |_| {})),
        stuck(&on, 2, B, 0, |_| {}),
    ];
    let p = world(on.clone(), pods, A, A).plan();
    assert!(deletes(&p).is_empty(), "{:?}", deletes(&p));
    // A lower pod stuck while a higher one recovered earlier is still terminating (its node
    // went down): it waits until that one is gone (the simulator's seed 48).
    let pods = vec![
        stuck(&on, 0, B, 0, |_| {}),
        ready(&on, 1, A),
        terminating(stuck(&on, 2, B, 0, |_| {})),
    ];
    let w = world(on, pods, A, A);
    assert!(matches!(w.judge(0), Judgement::No(_)), "{:?}", w.judge(0));
    assert!(deletes(&w.plan()).is_empty());
}

#[test]
fn a_ready_pod_within_min_ready_seconds_is_never_recovered() {
    let mut on = opted(set(3), "true");
    on.spec.min_ready_seconds = Some(30);
    let w = world(
        on.clone(),
        three(&on, pod(&on, 2, B, State::Ready(5))),
        A,
        A,
    );
    let p = w.plan();
    assert!(deletes(&p).is_empty(), "{:?}", deletes(&p));
    assert_eq!(p.waiting, vec![Waiting::NotReady { ordinal: 2 }]);
}

#[test]
fn a_rule_not_yet_due_waits_and_says_when() {
    let on = opted(set(3), "true");
    let w = world(
        on.clone(),
        three(&on, stuck(&on, 2, A, 20, restarts(2))),
        A,
        C,
    );
    let p = w.plan();
    assert!(deletes(&p).is_empty());
    assert_eq!(
        p.waiting,
        vec![
            Waiting::RecoveryDue {
                ordinal: 2,
                rule: Rule::CrashLooping,
                after: Duration::from_secs(40)
            },
            Waiting::NotReady { ordinal: 2 }
        ]
    );
}

#[test]
fn the_recovery_delete_replaces_the_pending_pods_claim_work() {
    let on = crate::testutil::with_claim_template(opted(set(1), "true"), "data");
    let w = world(on.clone(), vec![stuck(&on, 0, B, 0, pending)], A, A);
    let p = w.plan();
    assert_eq!(deletes(&p), vec!["delete web-0 Recover(AbandonedRevision)"]);
    assert!(p.actions().all(|a| matches!(
        a,
        Action::DeletePod {
            reason: DeleteReason::Recover(_),
            ..
        }
    )));
}

#[test]
fn node_reachability() {
    let node = |ready: &str, taint: Option<&str>| Node {
        spec: Some(rkcm_runtime::cache::cached::NodeSpec {
            taints: taint.map(|k| {
                vec![core::Taint {
                    key: k.into(),
                    effect: "NoExecute".into(),
                    ..core::Taint::default()
                }]
            }),
            unschedulable: None,
        }),
        status: Some(rkcm_runtime::cache::cached::NodeStatus {
            conditions: Some(vec![rkcm_runtime::cache::cached::NodeCondition {
                type_: "Ready".into(),
                status: ready.into(),
            }]),
        }),
        ..Node::default()
    };
    assert!(node_reachable(&node("True", None)));
    assert!(node_reachable(&node("True", Some("example.com/other"))));
    assert!(!node_reachable(&node("Unknown", None)));
    assert!(!node_reachable(&node("False", None)));
    assert!(!node_reachable(&node(
        "True",
        Some("node.kubernetes.io/unreachable")
    )));
    assert!(!node_reachable(&Node::default()));
}

#[test]
fn the_event_names_the_pod_and_the_rule() {
    assert_eq!(
        event_message("web-2", B, A, Rule::AbandonedRevision, AFTER),
        "deleted stuck pod web-2 (revision web-b, not Ready, blocking the ordered rolling \
         update) so that it is recreated at revision web-a: rule AbandonedRevision (its \
         revision is neither the current nor the update revision); annotation \
         rkcm.io/statefulset-recover-stuck-rollout"
    );
    assert!(
        event_message("web-0", A, C, Rule::CrashLooping, AFTER)
            .contains("rule CrashLooping (crash-looping, not Ready for 60s or more)")
    );
}

#[test]
fn a_pod_on_a_node_that_is_not_ready_is_judged_again_later() {
    let on = opted(set(3), "true");
    let mut w = world(on.clone(), three(&on, stuck(&on, 2, B, 0, |_| {})), A, A);
    w.nodes = Nodes::from([("n1".to_owned(), false)]);
    let p = w.plan();
    assert!(deletes(&p).is_empty());
    assert_eq!(
        p.waiting,
        vec![
            Waiting::RecoveryNodeNotReady {
                ordinal: 2,
                recheck: NODE_RECHECK
            },
            Waiting::NotReady { ordinal: 2 }
        ]
    );
}
