use k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, Time};

use super::*;
use crate::testutil::{
    State as P, arcs, claim, owner, pod, revision, set, template, terminating, with_claim_template,
    with_policy,
};

/// `web` at template `image`, its status naming `current` as the current revision.
fn at(replicas: i32, image: &str, current: &str) -> StatefulSet {
    let mut s = set(replicas);
    s.spec.template = template(image);
    if let Some(st) = s.status.as_mut() {
        st.current_revision = Some(current.into());
    }
    s
}

/// Revisions `web-<image>` numbered in order, each from `web` at that image.
fn revisions(images: &[&str]) -> Vec<Arc<ControllerRevision>> {
    images
        .iter()
        .zip(1..)
        .map(|(image, n)| Arc::new(revision(&format!("web-{image}"), n, &at(1, image, ""))))
        .collect()
}

fn run(s: &StatefulSet, revs: &[&str], pods: Vec<Pod>) -> Explanation {
    run_cfg(s, revs, pods, &Claims::new(), &Config::default())
}

fn run_cfg(
    s: &StatefulSet,
    revs: &[&str],
    pods: Vec<Pod>,
    claims: &Claims,
    cfg: &Config,
) -> Explanation {
    explain(
        s,
        &revisions(revs),
        &arcs(pods),
        claims,
        &[],
        cfg,
        crate::testutil::now(),
    )
}

fn reasons_of(e: &Explanation) -> Vec<&'static str> {
    e.waiting_on.iter().map(|w| w.reason).collect()
}

fn ready(s: &StatefulSet, ord: i32, rev: &str) -> Pod {
    pod(s, ord, rev, P::Ready(600))
}

fn with_strategy(mut s: StatefulSet, type_: &str, partition: Option<i32>) -> StatefulSet {
    s.spec.update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some(type_.into()),
        rolling_update: partition.map(|p| {
            k8s_openapi::api::apps::v1::RollingUpdateStatefulSetStrategy {
                partition: Some(p),
                max_unavailable: None,
            }
        }),
    });
    s
}

const NOW: &str = "2023-11-14T22:13:20Z";

#[test]
fn a_set_with_every_pod_ready_at_its_revision_is_settled() {
    let s = at(3, "v1", "web-v1");
    let e = run(
        &s,
        &["v1"],
        (0..3).map(|o| ready(&s, o, "web-v1")).collect(),
    );
    assert_eq!(e.state, State::Settled, "{e:?}");
    assert!(e.actions.is_empty() && e.waiting_on.is_empty() && e.remedies.is_empty());
    assert_eq!(e.controller, "statefulset-controller");
    assert_eq!(
        (e.object.kind.as_str(), e.object.name.as_str()),
        ("StatefulSet", "web")
    );
}

#[test]
fn a_missing_pod_is_created_and_a_changed_template_gets_a_revision() {
    let s = at(3, "v1", "web-v1");
    let e = run(&s, &["v1"], vec![ready(&s, 0, "web-v1")]);
    assert_eq!(e.state, State::Acting);
    assert_eq!(e.actions, ["create pod web-1 at revision web-v1"]);
    let e = run(&s, &[], vec![]);
    assert_eq!(e.state, State::Acting);
    assert_eq!(e.actions.len(), 2, "{:?}", e.actions);
    assert!(
        e.actions[0].starts_with("create ControllerRevision/web-")
            && e.actions[0].ends_with("(revision 1) for the changed template"),
        "{:?}",
        e.actions
    );
}

#[test]
fn ordered_ready_names_the_pod_it_waits_on_with_its_revision_and_since() {
    let s = at(3, "v1", "web-v1");
    let e = run(
        &s,
        &["v1"],
        vec![ready(&s, 0, "web-v1"), pod(&s, 1, "web-v1", P::Unready)],
    );
    assert_eq!(e.state, State::Waiting);
    assert_eq!(reasons_of(&e), ["PodNotReady"]);
    let w = &e.waiting_on[0];
    assert_eq!(
        w.message,
        "OrderedReady: pod web-1 (revision web-v1) is Running and not Ready; 1 higher \
         ordinal(s) wait for it"
    );
    assert_eq!(w.objects, ["Pod/web-1"]);
    assert_eq!(w.since.as_deref(), Some(NOW));
    assert_eq!(e.remedies, ["see why: kubectl describe pod -n ns web-1"]);
}

#[test]
fn an_old_revision_pod_that_never_gets_ready_is_the_stuck_rollout_with_its_delete_remedy() {
    // v2 was broken: web-2 got it and never became Ready. The template is fixed (v3), but
    // OrderedReady waits on web-2 before the update phase that would replace it.
    let s = at(3, "v3", "web-v1");
    let pods = vec![
        ready(&s, 0, "web-v1"),
        ready(&s, 1, "web-v1"),
        pod(&s, 2, "web-v2", P::Unready),
    ];
    let e = run(&s, &["v1", "v2", "v3"], pods);
    assert_eq!(e.state, State::Stalled, "{e:?}");
    assert!(e.actions.is_empty(), "{:?}", e.actions);
    assert_eq!(reasons_of(&e), ["OldRevisionPodNotReady"]);
    let w = &e.waiting_on[0];
    assert!(
        w.message.starts_with(
            "pod web-2 is of the old revision web-v2 and Running and not Ready; OrderedReady \
             waits for it before anything else, so the rolling update to revision web-v3 never \
             replaces it"
        ),
        "{}",
        w.message
    );
    assert_eq!(w.objects, ["Pod/web-2"]);
    assert!(
        e.remedies[0].ends_with(
            "then delete the pod so it is recreated at revision web-v3: kubectl delete pod -n \
             ns web-2"
        ),
        "{:?}",
        e.remedies
    );
    // The same pod at the update revision is an ordinary wait.
    let pods = vec![
        ready(&s, 0, "web-v1"),
        ready(&s, 1, "web-v1"),
        pod(&s, 2, "web-v3", P::Unready),
    ];
    assert_eq!(
        reasons_of(&run(&s, &["v1", "v2", "v3"], pods)),
        ["PodNotReady"]
    );
}

#[test]
fn a_partition_holds_the_pods_below_it_and_says_how_to_lower_it() {
    let s = with_strategy(at(3, "v2", "web-v1"), "RollingUpdate", Some(2));
    let pods = vec![
        ready(&s, 0, "web-v1"),
        ready(&s, 1, "web-v1"),
        ready(&s, 2, "web-v2"),
    ];
    let e = run(&s, &["v1", "v2"], pods);
    assert_eq!(e.state, State::Stalled, "{e:?}");
    assert_eq!(reasons_of(&e), ["Partition"]);
    assert_eq!(
        e.waiting_on[0].message,
        "partition 2: 2 pod(s) (web-0, web-1) stay at their old revision while revision web-v2 \
         rolls out above the partition"
    );
    assert_eq!(e.waiting_on[0].objects, ["Pod/web-0", "Pod/web-1"]);
    assert!(
        e.remedies[0].contains(r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#)
    );
    // Above the partition the update still acts: acting, and the partition is still named.
    let pods = vec![
        ready(&s, 0, "web-v1"),
        ready(&s, 1, "web-v1"),
        ready(&s, 2, "web-v1"),
    ];
    let e = run(&s, &["v1", "v2"], pods);
    assert_eq!(e.state, State::Acting);
    assert_eq!(
        e.actions,
        ["delete pod web-2 (revision web-v1) to recreate it at revision web-v2"]
    );
    assert_eq!(reasons_of(&e), ["Partition"]);
}

#[test]
fn on_delete_holds_old_pods_until_deleted() {
    let s = with_strategy(at(2, "v2", "web-v1"), "OnDelete", None);
    let e = run(
        &s,
        &["v1", "v2"],
        vec![ready(&s, 0, "web-v1"), ready(&s, 1, "web-v1")],
    );
    assert_eq!(e.state, State::Stalled);
    assert_eq!(reasons_of(&e), ["OnDelete"]);
    assert_eq!(
        e.remedies,
        ["delete each pod to update it: kubectl delete pod -n ns web-0"]
    );
}

#[test]
fn the_max_unavailable_budget_names_the_unavailable_pods() {
    let s = crate::testutil::parallel(at(3, "v2", "web-v1"));
    let pods = vec![
        ready(&s, 0, "web-v1"),
        ready(&s, 1, "web-v1"),
        pod(&s, 2, "web-v2", P::Unready),
    ];
    let e = run(&s, &["v1", "v2"], pods.clone());
    assert_eq!(e.state, State::Waiting, "{e:?}");
    assert_eq!(reasons_of(&e), ["MaxUnavailable"]);
    assert_eq!(
        e.waiting_on[0].message,
        "1 of 3 pods unavailable, maxUnavailable 1: no further old pod is replaced until one \
         becomes available"
    );
    assert_eq!(e.waiting_on[0].objects, ["Pod/web-2"]);
    // Without gate MaxUnavailableStatefulSet: one pod at a time, waiting on web-2.
    let cfg = Config {
        max_unavailable: false,
        ..Config::default()
    };
    let e = run_cfg(&s, &["v1", "v2"], pods, &Claims::new(), &cfg);
    assert_eq!(reasons_of(&e), ["UpdatedPodNotAvailable"]);
    assert!(
        e.waiting_on[0]
            .message
            .starts_with("RollingUpdate: pod web-2 (revision web-v2) is Running and not Ready"),
        "{}",
        e.waiting_on[0].message
    );
    assert_eq!(e.waiting_on[0].since.as_deref(), Some(NOW));
}

#[test]
fn the_rarer_blocks_have_their_codes() {
    let s = at(3, "v1", "web-v1");
    let failed = terminating(pod(&s, 0, "web-v1", P::Failed));
    let e = run(&s, &["v1"], vec![failed]);
    assert_eq!(reasons_of(&e), ["FailedPodTerminating"]);
    assert_eq!(e.state, State::Waiting);
    let e = run(&s, &["v1"], vec![pod(&s, 0, "web-v1", P::Failed)]);
    assert_eq!(e.state, State::Acting);
    assert!(reasons_of(&e).is_empty());

    let scaled = at(2, "v1", "web-v1");
    let pods = vec![
        ready(&scaled, 0, "web-v1"),
        ready(&scaled, 1, "web-v1"),
        terminating(ready(&scaled, 2, "web-v1")),
    ];
    let e = run(&scaled, &["v1"], pods);
    assert_eq!(reasons_of(&e), ["ScaleDownBlocked"]);
    assert_eq!(
        e.waiting_on[0].message,
        "scale down to 2 waits for pod web-2 to terminate"
    );

    let claimed = with_claim_template(
        with_policy(at(1, "v1", "web-v1"), "Retain", "Delete"),
        "data",
    );
    let stale = claim(
        "data-web-0",
        vec![owner("v1", "Pod", "web-0", "bogus", true)],
    );
    let claims: Claims = [("data-web-0".to_owned(), Arc::new(stale))].into();
    let e = run_cfg(&claimed, &[], vec![], &claims, &Config::default());
    assert!(reasons_of(&e).contains(&"StaleClaim"), "{e:?}");
    let w = e.waiting_on.iter().find(|w| w.reason == "StaleClaim");
    assert_eq!(
        w.map(|w| w.objects.clone()),
        Some(vec!["PersistentVolumeClaim/data-web-0".to_owned()])
    );

    let mut going = at(1, "v1", "web-v1");
    going.metadata.deletion_timestamp = Some(Time(crate::testutil::now()));
    assert_eq!(reasons_of(&run(&going, &["v1"], vec![])), ["Deleting"]);
}

#[test]
fn what_the_set_itself_gets_wrong_stalls_it() {
    let mut bad = at(1, "v1", "web-v1");
    bad.spec.selector.match_labels = None;
    bad.spec.selector.match_expressions = Some(vec![LabelSelectorRequirement {
        key: "app".into(),
        operator: "Near".into(),
        values: None,
    }]);
    let e = run(&bad, &["v1"], vec![]);
    assert_eq!(
        (e.state, reasons_of(&e)),
        (State::Stalled, vec!["InvalidSelector"])
    );

    let recreate = with_strategy(at(1, "v1", "web-v1"), "Recreate", None);
    let e = run(&recreate, &["v1"], vec![]);
    assert_eq!(
        (e.state, reasons_of(&e)),
        (State::Stalled, vec!["InvalidStrategy"])
    );
    assert!(e.actions.is_empty());

    let mut unreadable = revision("web-v0", 1, &at(1, "v0", ""));
    unreadable.data =
        k8s_openapi::apimachinery::pkg::runtime::RawExtension(serde_json::json!({"nothing": true}));
    let s = at(1, "v1", "web-v0");
    let e = explain(
        &s,
        &[Arc::new(unreadable)],
        &[],
        &Claims::new(),
        &[],
        &Config::default(),
        crate::testutil::now(),
    );
    assert_eq!(e.state, State::Stalled);
    assert_eq!(reasons_of(&e), ["RevisionUnreadable"]);
}

#[test]
fn the_stuck_rollout_says_whether_recovery_is_on_and_acts_when_it_is() {
    let s = at(3, "v3", "web-v1");
    let pods = || {
        vec![
            ready(&s, 0, "web-v1"),
            ready(&s, 1, "web-v1"),
            pod(&s, 2, "web-v2", P::Unready),
        ]
    };
    let e = run(&s, &["v1", "v2", "v3"], pods());
    assert!(
        e.waiting_on[0]
            .message
            .ends_with("stuck-rollout recovery is off (rkcm.io/statefulset-recover-stuck-rollout)"),
        "{}",
        e.waiting_on[0].message
    );
    assert!(
        e.remedies
            .iter()
            .any(|r| r.contains("kubectl annotate statefulset -n ns web"))
    );

    // Opted in: the abandoned revision's pod is this sync's one action.
    let mut on = s.clone();
    on.metadata.annotations = Some(crate::testutil::labels(&[(recovery::ANNOTATION, "true")]));
    let e = run(&on, &["v1", "v2", "v3"], pods());
    assert_eq!(e.state, State::Acting, "{e:?}");
    assert_eq!(
        e.actions,
        [
            "delete stuck pod web-2 (revision web-v2, not Ready) to recreate it at revision web-v3: \
          rkcm's stuck-rollout recovery, rule AbandonedRevision"
        ]
    );

    // A current-revision pod failing readiness: due in the rest of the stated time.
    let pods = vec![
        ready(&on, 0, "web-v1"),
        ready(&on, 1, "web-v1"),
        pod(&on, 2, "web-v1", P::Unready),
    ];
    let cfg = Config {
        recover_stuck_after: std::time::Duration::from_secs(60),
        ..Config::default()
    };
    let e = run_cfg(&on, &["v1", "v2", "v3"], pods, &Claims::new(), &cfg);
    assert_eq!(e.state, State::Waiting, "{e:?}");
    assert_eq!(reasons_of(&e), ["StuckPodRecoveryPending"]);
    assert!(
        e.waiting_on[0].message.ends_with(
            "rule ReadinessFailing holds, and the pod is deleted in 60s unless it becomes Ready"
        ),
        "{}",
        e.waiting_on[0].message
    );
}

#[test]
fn a_pod_of_the_update_revision_is_named_and_recovery_says_it_does_not_apply() {
    let mut s = at(2, "v2", "web-v1");
    s.metadata.annotations = Some(crate::testutil::labels(&[(recovery::ANNOTATION, "true")]));
    let pods = vec![ready(&s, 0, "web-v1"), pod(&s, 1, "web-v2", P::Unready)];
    let e = run(&s, &["v1", "v2"], pods);
    assert_eq!(reasons_of(&e), ["PodNotReady"]);
    assert!(
        e.waiting_on[0].message.ends_with(
            "stuck-rollout recovery is on (rkcm.io/statefulset-recover-stuck-rollout) but does \
             not replace it: the pod is of the update revision: that revision itself does not \
             become Ready"
        ),
        "{}",
        e.waiting_on[0].message
    );
    assert!(e.actions.is_empty());
}
