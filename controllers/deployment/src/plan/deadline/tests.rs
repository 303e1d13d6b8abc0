//! Table tests of the opt-in rollback on progress deadline: who is asked, when it fires,
//! what it writes, and that it never fires twice for one bad revision nor on its own result.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::model::tests::{R, ago, dep25, now, owned};

const REV: &str = "deployment.kubernetes.io/revision";

fn rs(
    name: &'static str,
    image: &'static str,
    annotations: &'static [(&'static str, &'static str)],
) -> Rs {
    Arc::new(owned(R {
        name,
        image,
        replicas: 1,
        annotations,
        // Older than the deadline (600 s).
        age: 1000,
        ..R::default()
    }))
}

/// `web` at revision 2 (image `v2`, RS `web-bad`), 3 replicas, deadline 600 s, with the
/// Progressing condition `(status, reason, message)` and `observedGeneration` 1.
fn web(cond: (&str, &str, &str), annotations: &[(&str, &str)]) -> Deployment {
    let mut d = dep25(3);
    let mut map = BTreeMap::from([
        (REV.to_owned(), "2".to_owned()),
        ("kubernetes.io/change-cause".to_owned(), "v2".to_owned()),
    ]);
    for (k, v) in annotations {
        map.insert((*k).to_owned(), (*v).to_owned());
    }
    d.metadata.annotations = Some(map);
    d.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(4),
        updated_replicas: Some(1),
        available_replicas: Some(3),
        conditions: Some(vec![DeploymentCondition {
            type_: Some("Progressing".into()),
            status: Some(cond.0.into()),
            reason: Some(cond.1.into()),
            message: Some(cond.2.into()),
            last_update_time: Some(Time(ago(700))),
            last_transition_time: Some(Time(ago(700))),
        }]),
        ..DeploymentStatus::default()
    });
    d
}

const TIMED_OUT: (&str, &str, &str) = (
    "False",
    "ProgressDeadlineExceeded",
    "ReplicaSet \"web-bad\" has timed out progressing.",
);
const OPT_IN_TRUE: (&str, &str) = ("rkcm.io/deployment-rollback-on-progress-deadline", "true");

fn bad(rev: &'static str) -> Rs {
    match rev {
        "2" => rs(
            "web-bad",
            "v2",
            &[(REV, "2"), ("kubernetes.io/change-cause", "v2")],
        ),
        "4" => rs(
            "web-bad",
            "v2",
            &[(REV, "4"), ("kubernetes.io/change-cause", "v2")],
        ),
        _ => rs("web-bad", "v2", &[(REV, "3")]),
    }
}

fn good() -> Rs {
    serving(
        "web-good",
        "v1",
        &[(REV, "1"), ("kubernetes.io/change-cause", "v1")],
        3,
    )
}

/// [`rs`] with `available` pods available now.
fn serving(
    name: &'static str,
    image: &'static str,
    annotations: &'static [(&'static str, &'static str)],
    available: i32,
) -> Rs {
    Arc::new(owned(R {
        name,
        image,
        replicas: 1,
        status_replicas: available,
        available,
        ready: available,
        annotations,
        age: 1000,
    }))
}

fn older() -> Rs {
    serving("web-older", "v0", &[(REV, "0")], 1)
}

#[derive(Debug, PartialEq, Eq)]
enum K {
    Off,
    Paused,
    NotTimedOut,
    Already(i64),
    IsRollback(i64, i64),
    NoTarget(i64),
    TooEarly(i64, u64),
    Roll(i64, i64, String),
}

fn kind(d: &DeadlineRollback) -> K {
    match d {
        DeadlineRollback::Off => K::Off,
        DeadlineRollback::Paused => K::Paused,
        DeadlineRollback::NotTimedOut => K::NotTimedOut,
        DeadlineRollback::AlreadyRolledBack { revision } => K::Already(*revision),
        DeadlineRollback::IsRollback { revision, from } => K::IsRollback(*revision, *from),
        DeadlineRollback::NoTarget { revision } => K::NoTarget(*revision),
        DeadlineRollback::TooEarly { revision, after } => K::TooEarly(*revision, after.as_secs()),
        DeadlineRollback::Roll(r) => K::Roll(r.from, r.to, r.target.clone()),
    }
}

#[test]
fn enabled_by_annotation_or_flag() {
    let with = |v: Option<&str>| {
        let mut d = dep25(1);
        if let Some(v) = v {
            d.metadata.annotations = Some(BTreeMap::from([(OPT_IN.to_owned(), v.to_owned())]));
        }
        d
    };
    let table = [
        (None, false, false),
        (None, true, true),
        (Some("true"), false, true),
        (Some("false"), true, false),
        (Some("yes"), false, false),
        (Some("yes"), true, true),
    ];
    for (value, flag, want) in table {
        assert_eq!(enabled(&with(value), flag), want, "{value:?} flag {flag}");
    }
}

#[test]
#[allow(clippy::too_many_lines)] // one table: each rule of the remedy, side by side
fn fires_once_per_bad_revision_and_never_on_its_own_result() {
    let roll = |from, to, target: &str| K::Roll(from, to, target.to_owned());
    let paused = {
        let mut d = web(TIMED_OUT, &[OPT_IN_TRUE]);
        d.spec.paused = Some(true);
        d
    };
    let behind = {
        let mut d = web(TIMED_OUT, &[OPT_IN_TRUE]);
        d.metadata.generation = Some(2);
        d
    };
    let deleting = {
        let mut d = web(TIMED_OUT, &[OPT_IN_TRUE]);
        d.metadata.deletion_timestamp = Some(Time(now()));
        d
    };
    let stale_condition = web(
        (
            "False",
            "ProgressDeadlineExceeded",
            "ReplicaSet \"web-other\" has timed out progressing.",
        ),
        &[OPT_IN_TRUE],
    );
    let rolled_from = |v: &'static str| [OPT_IN_TRUE, (ROLLED_BACK_FROM, v)];
    let recreate = {
        let mut d = web(TIMED_OUT, &[OPT_IN_TRUE]);
        if let Some(strategy) = d.spec.strategy.as_mut() {
            strategy.type_ = Some("Recreate".into());
            strategy.rolling_update = None;
        }
        d
    };
    type Case = (&'static str, Deployment, Option<Rs>, Vec<Rs>, bool, K);
    let table: Vec<Case> = vec![
        (
            "opted in, timed out: back to the previous revision",
            web(TIMED_OUT, &[OPT_IN_TRUE]),
            Some(bad("2")),
            vec![good()],
            false,
            roll(2, 1, "web-good"),
        ),
        (
            "the flag alone",
            web(TIMED_OUT, &[]),
            Some(bad("2")),
            vec![good()],
            true,
            roll(2, 1, "web-good"),
        ),
        (
            "not asked: upstream's behaviour",
            web(TIMED_OUT, &[]),
            Some(bad("2")),
            vec![good()],
            false,
            K::Off,
        ),
        (
            "opted out despite the flag",
            web(
                TIMED_OUT,
                &[("rkcm.io/deployment-rollback-on-progress-deadline", "false")],
            ),
            Some(bad("2")),
            vec![good()],
            true,
            K::Off,
        ),
        (
            "paused by a person",
            paused,
            Some(bad("2")),
            vec![good()],
            false,
            K::Paused,
        ),
        (
            "still progressing",
            web(
                (
                    "True",
                    "ReplicaSetUpdated",
                    "ReplicaSet \"web-bad\" is progressing.",
                ),
                &[OPT_IN_TRUE],
            ),
            Some(bad("2")),
            vec![good()],
            false,
            K::NotTimedOut,
        ),
        (
            "status behind the spec",
            behind,
            Some(bad("2")),
            vec![good()],
            false,
            K::NotTimedOut,
        ),
        (
            "being deleted",
            deleting,
            Some(bad("2")),
            vec![good()],
            false,
            K::NotTimedOut,
        ),
        (
            "the condition is about an earlier ReplicaSet",
            stale_condition,
            Some(bad("2")),
            vec![good()],
            false,
            K::NotTimedOut,
        ),
        (
            "no new ReplicaSet",
            web(TIMED_OUT, &[OPT_IN_TRUE]),
            None,
            vec![good()],
            false,
            K::NotTimedOut,
        ),
        (
            "timed out before the new ReplicaSet had its deadline: wait for the rest",
            web(TIMED_OUT, &[OPT_IN_TRUE]),
            Some(Arc::new(owned(R {
                name: "web-bad",
                image: "v2",
                age: 100,
                annotations: &[(REV, "2")],
                ..R::default()
            }))),
            vec![good()],
            false,
            K::TooEarly(2, 501),
        ),
        (
            "nothing to return to",
            web(TIMED_OUT, &[OPT_IN_TRUE]),
            Some(bad("2")),
            vec![],
            false,
            K::NoTarget(2),
        ),
        (
            "rolled back from this revision already",
            web(TIMED_OUT, &rolled_from("2")),
            Some(bad("2")),
            vec![good()],
            false,
            K::Already(2),
        ),
        (
            "this revision is the rollback itself (the target's ReplicaSet reused): no loop",
            web(TIMED_OUT, &rolled_from("2")),
            Some(rs(
                "web-bad",
                "v2",
                &[
                    (REV, "3"),
                    ("deployment.kubernetes.io/revision-history", "1"),
                ],
            )),
            vec![good()],
            false,
            K::IsRollback(3, 2),
        ),
        (
            "that number on a ReplicaSet of its own: a person's template, set before the \
             rollback's revision was assigned, is a new rollout",
            web(TIMED_OUT, &rolled_from("2")),
            Some(bad("3")),
            vec![good()],
            false,
            roll(3, 1, "web-good"),
        ),
        (
            "a person's later rollout, even of the same template, may be rolled back once",
            web(TIMED_OUT, &rolled_from("2")),
            Some(bad("4")),
            vec![serving(
                "web-good",
                "v1",
                &[
                    (REV, "3"),
                    ("deployment.kubernetes.io/revision-history", "1"),
                ],
                3,
            )],
            false,
            roll(4, 3, "web-good"),
        ),
        (
            "the highest old revision wins",
            web(TIMED_OUT, &[OPT_IN_TRUE]),
            Some(bad("2")),
            vec![older(), good()],
            false,
            roll(2, 1, "web-good"),
        ),
        (
            "back to the last revision that worked: available pods beat a higher revision \
             a person rolled on from before it failed",
            web(TIMED_OUT, &[OPT_IN_TRUE]),
            Some(bad("4")),
            vec![
                serving("web-good", "v1", &[(REV, "1")], 2),
                rs("web-unfinished", "v3", &[(REV, "3")]),
                rs("web-older", "v0", &[(REV, "0")]),
            ],
            false,
            roll(4, 1, "web-good"),
        ),
        (
            "of those with available pods, the highest revision",
            web(TIMED_OUT, &[OPT_IN_TRUE]),
            Some(bad("4")),
            vec![
                serving("web-good", "v1", &[(REV, "1")], 1),
                serving("web-newer", "v3", &[(REV, "3")], 1),
            ],
            false,
            roll(4, 3, "web-newer"),
        ),
        (
            "never back to the revision rolled back from",
            web(TIMED_OUT, &rolled_from("1")),
            Some(bad("4")),
            vec![
                serving("web-older", "v0", &[(REV, "2")], 1),
                serving(
                    "web-good",
                    "v1",
                    &[
                        (REV, "3"),
                        ("deployment.kubernetes.io/revision-history", "1"),
                    ],
                    2,
                ),
            ],
            false,
            roll(4, 2, "web-older"),
        ),
        (
            "rolling update, no old revision with available pods: none known to work, left \
             as upstream leaves it",
            web(TIMED_OUT, &[OPT_IN_TRUE]),
            Some(bad("4")),
            vec![
                rs("web-good", "v1", &[(REV, "1")]),
                rs("web-unfinished", "v3", &[(REV, "3")]),
            ],
            false,
            K::NoTarget(4),
        ),
        (
            "Recreate scaled every old one down: the revision the rollout started from",
            recreate.clone(),
            Some(bad("4")),
            vec![
                rs("web-good", "v1", &[(REV, "1")]),
                rs("web-start", "v3", &[(REV, "3")]),
            ],
            false,
            roll(4, 3, "web-start"),
        ),
    ];
    for (name, d, new, old, flag, want) in table {
        let got = deadline_rollback(&d, new.as_ref(), &old, flag, now());
        assert_eq!(kind(&got), want, "{name}");
    }
}

#[test]
fn the_rollback_is_kubectl_rollout_undo_plus_the_record() {
    let d = web(
        TIMED_OUT,
        &[
            OPT_IN_TRUE,
            ("rkcm.io/other", "kept"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
        ],
    );
    let DeadlineRollback::Roll(r) = deadline_rollback(&d, Some(&bad("2")), &[good()], false, now())
    else {
        panic!("expected a rollback");
    };
    let out = &r.deployment;
    let image = out
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers[0].image.as_deref());
    assert_eq!(image, Some("v1"));
    let labels = rkcm_runtime::workload::pod::template_labels(&out.spec.template)
        .cloned()
        .unwrap_or_default();
    assert!(!labels.contains_key("pod-template-hash"), "no hash label");
    let annotations = out.metadata.annotations.clone().unwrap_or_default();
    let get = |k: &str| annotations.get(k).map(String::as_str);
    assert_eq!(
        get("kubernetes.io/change-cause"),
        Some("v1"),
        "the revision's"
    );
    assert_eq!(get(REV), Some("2"), "skipped ones are the Deployment's");
    assert_eq!(
        get("kubectl.kubernetes.io/last-applied-configuration"),
        Some("{}")
    );
    assert_eq!(get(OPT_IN), Some("true"), "the opt-in stays");
    assert_eq!(get("rkcm.io/other"), Some("kept"));
    assert_eq!(get(ROLLED_BACK_FROM), Some("2"), "the record");
    assert_eq!(
        out.metadata.resource_version, d.metadata.resource_version,
        "the cached copy's version: a change since makes the write conflict"
    );
    assert_eq!(
        (r.event.type_, r.event.reason, r.event.message.as_str()),
        (
            rkcm_runtime::events::EventType::Warning,
            "RolledBackOnProgressDeadline",
            "Rolled back deployment \"web\" from revision 2 to revision 1 (ReplicaSet \"web-good\"): \
             revision 2 made no progress for 600s (progressDeadlineSeconds)"
        )
    );
    let cond = r.status.condition("Progressing").expect("condition");
    assert_eq!(
        (
            cond.status.as_str(),
            cond.reason.as_str(),
            cond.message.as_str()
        ),
        (
            "False",
            "ProgressDeadlineExceeded",
            "ReplicaSet \"web-bad\" has timed out progressing. rkcm rolled back to revision 1 \
             (ReplicaSet \"web-good\") as rkcm.io/deployment-rollback-on-progress-deadline asks."
        )
    );
    // The message no longer names the bad ReplicaSet alone: the same revision is not
    // rolled back again even before the record is seen.
    let mut after = d.clone();
    after.status = Some(r.status.to_api());
    assert_eq!(
        kind(&deadline_rollback(
            &after,
            Some(&bad("2")),
            &[good()],
            false,
            now()
        )),
        K::NotTimedOut
    );
}
