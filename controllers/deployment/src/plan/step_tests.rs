//! Table tests of one sync's decisions: the path (`syncDeployment`), the revision bookkeeping
//! (`getAllReplicaSetsAndSyncRevision`, `getNewReplicaSet`), the rolling and Recreate steps,
//! scale writes, rollback (`rollback.go`), status and the deadline re-check (`progress.go`).
//! Mirrors upstream `TestSyncDeploymentCreatesReplicaSet`,
//! `TestSyncDeploymentDontDoAnythingDuringDeletion`, `TestRequeueStuckDeployment`, the
//! rollback cases of `deployment_controller_test.go` and `TestScale`'s event checks.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::cached::PodStatus;

use super::*;
use crate::model::tests::{R, ago, dep25, new_rs_created, now, owned, recreate, template};

fn annotated(mut d: Deployment, pairs: &[(&str, &str)]) -> Deployment {
    let map = d.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in pairs {
        map.insert((*k).to_owned(), (*v).to_owned());
    }
    d
}

fn no_deadline(mut d: Deployment) -> Deployment {
    d.spec.progress_deadline_seconds = None;
    d
}

fn progressing(d: &Deployment) -> Option<(String, String, String)> {
    Status::of(d)
        .condition("Progressing")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn revision_of(d: &Deployment) -> Option<&str> {
    model::annotation(&d.metadata, "deployment.kubernetes.io/revision")
}

fn with_progressing(mut d: Deployment, reason: &str, updated: jiff::Timestamp) -> Deployment {
    let mut status = d.status.take().unwrap_or_default();
    status.conditions = Some(vec![DeploymentCondition {
        type_: Some("Progressing".into()),
        status: Some("True".into()),
        reason: Some(reason.into()),
        message: Some("m".into()),
        last_update_time: Some(Time(updated)),
        last_transition_time: Some(Time(updated)),
    }]);
    d.status = Some(status);
    d
}

// ---- route -----------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
enum R2 {
    SelectingAll { writes: bool },
    StatusOnly,
    Paused { writes: Option<&'static str> },
    Rollback { writes: Option<&'static str> },
    Rollout { writes: Option<&'static str> },
}

fn route_kind(r: &Route) -> R2 {
    let reason = |s: &Option<Status>| -> Option<&'static str> {
        s.as_ref().map(
            |s| match s.condition("Progressing").map(|c| c.reason.as_str()) {
                Some("DeploymentPaused") => "DeploymentPaused",
                Some("DeploymentResumed") => "DeploymentResumed",
                _ => "other",
            },
        )
    };
    match r {
        Route::SelectingAll { status, .. } => R2::SelectingAll {
            writes: status.is_some(),
        },
        Route::StatusOnly => R2::StatusOnly,
        Route::Paused { paused_status } => R2::Paused {
            writes: reason(paused_status),
        },
        Route::Rollback { paused_status } => R2::Rollback {
            writes: reason(paused_status),
        },
        Route::Rollout { paused_status } => R2::Rollout {
            writes: reason(paused_status),
        },
    }
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn route_follows_sync_deployment_order() {
    let base = dep25(3);
    let deleting = {
        let mut d = base.clone();
        d.metadata.deletion_timestamp = Some(Time(ago(5)));
        d
    };
    let paused = {
        let mut d = base.clone();
        d.spec.paused = Some(true);
        d
    };
    let rollback = annotated(base.clone(), &[("deprecated.deployment.rollback.to", "1")]);
    let paused_rollback = annotated(
        paused.clone(),
        &[("deprecated.deployment.rollback.to", "1")],
    );
    let deleting_paused = {
        let mut d = paused.clone();
        d.metadata.deletion_timestamp = Some(Time(ago(5)));
        d
    };
    let was_paused = with_progressing(base.clone(), "DeploymentPaused", ago(30));
    let already_paused = with_progressing(paused.clone(), "DeploymentPaused", ago(30));
    let timed_out_paused = with_progressing(paused.clone(), "ProgressDeadlineExceeded", ago(30));
    let paused_no_deadline = no_deadline(paused.clone());
    let observed = {
        let mut d = base.clone();
        d.status = Some(DeploymentStatus {
            observed_generation: Some(1),
            ..DeploymentStatus::default()
        });
        d
    };
    let table: Vec<(&str, &Deployment, bool, R2)> = vec![
        (
            "empty selector, generation not observed",
            &base,
            true,
            R2::SelectingAll { writes: true },
        ),
        (
            "empty selector, generation observed",
            &observed,
            true,
            R2::SelectingAll { writes: false },
        ),
        (
            "empty selector wins over deletion",
            &deleting,
            true,
            R2::SelectingAll { writes: true },
        ),
        ("being deleted", &deleting, false, R2::StatusOnly),
        (
            "deletion wins over pause",
            &deleting_paused,
            false,
            R2::StatusOnly,
        ),
        (
            "paused: condition recorded",
            &paused,
            false,
            R2::Paused {
                writes: Some("DeploymentPaused"),
            },
        ),
        (
            "paused: already recorded",
            &already_paused,
            false,
            R2::Paused { writes: None },
        ),
        (
            "paused: a timeout is never overwritten",
            &timed_out_paused,
            false,
            R2::Paused { writes: None },
        ),
        (
            "paused wins over rollback",
            &paused_rollback,
            false,
            R2::Paused {
                writes: Some("DeploymentPaused"),
            },
        ),
        (
            "no deadline: no pause condition",
            &paused_no_deadline,
            false,
            R2::Paused { writes: None },
        ),
        ("rollback", &rollback, false, R2::Rollback { writes: None }),
        (
            "resumed",
            &was_paused,
            false,
            R2::Rollout {
                writes: Some("DeploymentResumed"),
            },
        ),
        ("plain rollout", &base, false, R2::Rollout { writes: None }),
    ];
    for (name, d, selects_all, want) in table {
        assert_eq!(route_kind(&route(d, selects_all, now())), want, "{name}");
    }
    // The SelectingAll event and the status it writes.
    let Route::SelectingAll { event, status } = route(&base, true, now()) else {
        panic!("selecting all");
    };
    assert_eq!(
        (event.type_, event.reason, event.message.as_str()),
        (
            EventType::Warning,
            "SelectingAll",
            "This deployment is selecting all pods. A non-empty selector is required."
        )
    );
    assert_eq!(status.map(|s| s.observed_generation), Some(1));
}

#[test]
fn rollout_is_scaling_or_the_strategy() {
    let sized = |name, n, desired: &'static str| -> Rs {
        Arc::new(owned(R {
            name,
            replicas: n,
            annotations: if desired == "10" {
                &[("deployment.kubernetes.io/desired-replicas", "10")]
            } else {
                &[("deployment.kubernetes.io/desired-replicas", "5")]
            },
            ..R::default()
        }))
    };
    let mut unknown = dep25(10);
    if let Some(s) = unknown.spec.strategy.as_mut() {
        s.type_ = Some("BlueGreen".into());
    }
    type Case = (&'static str, Deployment, Vec<Rs>, Result<Rollout, String>);
    let table: Vec<Case> = vec![
        (
            "sized for 10",
            dep25(10),
            vec![sized("a", 4, "10")],
            Ok(Rollout::Rolling),
        ),
        (
            "sized for 5, wants 10",
            dep25(10),
            vec![sized("a", 4, "5")],
            Ok(Rollout::Scale),
        ),
        (
            "inactive RS sized for 5",
            dep25(10),
            vec![sized("a", 0, "5")],
            Ok(Rollout::Rolling),
        ),
        (
            "recreate",
            recreate(10),
            vec![sized("a", 4, "10")],
            Ok(Rollout::Recreate),
        ),
        (
            "recreate resized",
            recreate(10),
            vec![sized("a", 4, "5")],
            Ok(Rollout::Scale),
        ),
        (
            "unknown strategy",
            unknown,
            vec![],
            Err("unexpected deployment strategy type: BlueGreen".into()),
        ),
    ];
    for (name, d, old, want) in table {
        assert_eq!(rollout(&d, None, &old), want, "{name}");
    }
}

// ---- revision bookkeeping and the new ReplicaSet ---------------------------------------------

#[derive(Debug, PartialEq, Eq)]
enum Rev {
    Nothing,
    UpdateNewRs {
        revision: String,
        min_ready: i32,
    },
    Record {
        revision: Option<String>,
        progressing: Option<String>,
    },
    Create {
        name: String,
        revision: i64,
        replicas: i32,
    },
}

fn rev_kind(step: RevisionStep) -> Rev {
    match step {
        RevisionStep::Nothing => Rev::Nothing,
        RevisionStep::UpdateNewRs(rs) => Rev::UpdateNewRs {
            revision: model::annotation(&rs.metadata, "deployment.kubernetes.io/revision")
                .unwrap_or_default()
                .to_owned(),
            min_ready: rs.spec.min_ready_seconds.unwrap_or(-1),
        },
        RevisionStep::Record(d) => Rev::Record {
            revision: revision_of(&d).map(str::to_owned),
            progressing: progressing(&d).map(|(_, reason, _)| reason),
        },
        RevisionStep::Create(plan) => Rev::Create {
            name: plan.name.clone(),
            revision: plan.revision,
            replicas: model::replicas(&plan.replica_set),
        },
    }
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn sync_revision_makes_one_write_per_call() {
    let hash = compute_hash(&template("v2"), None);
    let old = || {
        Arc::new(owned(R {
            name: "old",
            replicas: 10,
            status_replicas: 10,
            available: 10,
            annotations: &[("deployment.kubernetes.io/revision", "3")],
            ..R::default()
        }))
    };
    let new_at = |revision: &'static str| {
        let mut rs = owned(R {
            name: "new",
            replicas: 3,
            image: "v2",
            annotations: if revision == "4" {
                &[("deployment.kubernetes.io/revision", "4")]
            } else {
                &[("deployment.kubernetes.io/revision", "2")]
            },
            ..R::default()
        });
        rs.spec.min_ready_seconds = Some(0);
        Arc::new(rs)
    };
    let at_rev4 = annotated(dep25(10), &[("deployment.kubernetes.io/revision", "4")]);
    let with_found = with_progressing(at_rev4.clone(), "FoundNewReplicaSet", ago(5));
    let with_message = |message: &str| {
        let mut d = with_progressing(at_rev4.clone(), "NewReplicaSetAvailable", ago(5));
        if let Some(c) = d
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            c.message = Some(message.to_owned());
        }
        d
    };
    let previous_rollout_done = with_message("ReplicaSet \"old\" has successfully progressed.");
    let this_rollout_done = with_message("ReplicaSet \"new\" has successfully progressed.");
    let mut min_ready = with_found.clone();
    min_ready.spec.min_ready_seconds = Some(7);
    type Case = (&'static str, Deployment, Option<Rs>, bool, Rev);
    let table: Vec<Case> = vec![
        (
            "no new RS, not creating",
            dep25(10),
            None,
            false,
            Rev::Nothing,
        ),
        (
            "no new RS: create at max(old)+1 within the surge",
            dep25(10),
            None,
            true,
            Rev::Create {
                name: format!("web-{hash}"),
                revision: 4,
                replicas: 3,
            },
        ),
        (
            "new RS behind the old revisions: its revision is raised first",
            dep25(10),
            Some(new_at("2")),
            false,
            Rev::UpdateNewRs {
                revision: "4".into(),
                min_ready: 0,
            },
        ),
        (
            "minReadySeconds follows the Deployment",
            min_ready,
            Some(new_at("4")),
            false,
            Rev::UpdateNewRs {
                revision: "4".into(),
                min_ready: 7,
            },
        ),
        (
            "then the Deployment's revision and FoundNewReplicaSet",
            dep25(10),
            Some(new_at("4")),
            false,
            Rev::Record {
                revision: Some("4".into()),
                progressing: Some("FoundNewReplicaSet".into()),
            },
        ),
        (
            "revision only, without a deadline",
            no_deadline(dep25(10)),
            Some(new_at("4")),
            true,
            Rev::Record {
                revision: Some("4".into()),
                progressing: None,
            },
        ),
        (
            "condition only",
            at_rev4,
            Some(new_at("4")),
            false,
            Rev::Record {
                revision: Some("4".into()),
                progressing: Some("FoundNewReplicaSet".into()),
            },
        ),
        (
            "the previous rollout's NewReplicaSetAvailable (the write of NewReplicaSetCreated \
             was lost): FoundNewReplicaSet, so the deadline can pass",
            previous_rollout_done,
            Some(new_at("4")),
            false,
            Rev::Record {
                revision: Some("4".into()),
                progressing: Some("FoundNewReplicaSet".into()),
            },
        ),
        (
            "this rollout's NewReplicaSetAvailable stays",
            this_rollout_done,
            Some(new_at("4")),
            false,
            Rev::Nothing,
        ),
        (
            "all current",
            with_found,
            Some(new_at("4")),
            true,
            Rev::Nothing,
        ),
    ];
    for (name, d, new, create, want) in table {
        let step = sync_revision(&d, new.as_ref(), &[old()], create, now()).expect("plan");
        assert_eq!(rev_kind(step), want, "{name}");
    }
}

#[test]
fn new_replica_set_name_follows_the_collision_count() {
    let mut d = dep25(3);
    let first = new_rs_to_create(&d, &[], 1).expect("plan");
    assert_eq!(first.hash, compute_hash(&template("v2"), None));
    assert_eq!(first.name, format!("web-{}", first.hash));
    assert_eq!(
        model::annotation(
            &first.replica_set.metadata,
            "deployment.kubernetes.io/revision"
        ),
        Some("1")
    );
    d.status = Some(DeploymentStatus {
        collision_count: Some(1),
        ..DeploymentStatus::default()
    });
    let second = new_rs_to_create(&d, &[], 1).expect("plan");
    assert_eq!(second.hash, compute_hash(&template("v2"), Some(1)));
    assert_ne!(second.name, first.name);
}

#[test]
fn a_taken_name_is_ours_only_with_our_controller_ref_and_template() {
    let d = dep25(3);
    let ours_same = owned(R {
        name: "x",
        image: "v2",
        ..R::default()
    });
    let ours_other = owned(R {
        name: "x",
        image: "other",
        ..R::default()
    });
    let mut foreign = ours_same.clone();
    if let Some(refs) = foreign.metadata.owner_references.as_mut() {
        refs[0].uid = "other-uid".into();
    }
    let mut not_controller = ours_same.clone();
    if let Some(refs) = not_controller.metadata.owner_references.as_mut() {
        refs[0].controller = Some(false);
    }
    let orphan = R {
        name: "x",
        image: "v2",
        ..R::default()
    }
    .rs();
    for (name, rs, want) in [
        ("ours, same template (slow cache)", ours_same, true),
        ("ours, another template", ours_other, false),
        ("another Deployment's", foreign, false),
        ("owner but not controller", not_controller, false),
        ("orphan", orphan, false),
    ] {
        assert_eq!(is_current_replica_set(&d, &rs), want, "{name}");
    }
}

#[test]
fn after_create_records_revision_condition_and_event() {
    let plan = |replicas| {
        let mut p = new_rs_to_create(&dep25(replicas), &[], 2).expect("plan");
        p.name = "web-h".into();
        p
    };
    type Case = (
        &'static str,
        Deployment,
        i32,
        bool,
        Option<&'static str>,
        Option<(&'static str, &'static str)>,
    );
    let created_msg = "Created new replica set \"web-h\"";
    let table: Vec<Case> = vec![
        (
            "created with a deadline",
            dep25(3),
            3,
            true,
            Some("Scaled up replica set web-h from 0 to 3"),
            Some(("NewReplicaSetCreated", created_msg)),
        ),
        (
            "created without a deadline",
            no_deadline(dep25(3)),
            3,
            true,
            Some("Scaled up replica set web-h from 0 to 3"),
            None,
        ),
        (
            "created at size 0: no event",
            dep25(0),
            0,
            true,
            None,
            Some(("NewReplicaSetCreated", created_msg)),
        ),
        (
            "found already there: revision only",
            dep25(3),
            3,
            false,
            None,
            None,
        ),
    ];
    for (name, d, replicas, created, event, condition) in table {
        let after = after_create(&d, &plan(replicas), created, now());
        assert_eq!(
            after
                .event
                .as_ref()
                .map(|e| (e.type_, e.reason, e.message.as_str())),
            event.map(|m| (EventType::Normal, "ScalingReplicaSet", m)),
            "{name}"
        );
        let record = after.record.expect("the revision changes");
        assert_eq!(revision_of(&record), Some("2"), "{name}");
        assert_eq!(
            progressing(&record),
            condition.map(|(r, m)| ("True".to_owned(), r.to_owned(), m.to_owned())),
            "{name}"
        );
    }
    // Nothing to record when the revision is current and nothing was created.
    let d = annotated(dep25(3), &[("deployment.kubernetes.io/revision", "2")]);
    assert_eq!(after_create(&d, &plan(3), false, now()).record, None);
}

#[test]
fn create_failure_sets_progressing_false_with_a_deadline() {
    let message = "Failed to create new replica set \"web-h\": replicasets.apps is forbidden: nope";
    for (name, d, condition) in [
        ("deadline", dep25(3), true),
        ("no deadline", no_deadline(dep25(3)), false),
    ] {
        let failed = create_failed(&d, "web-h", "replicasets.apps is forbidden: nope", now());
        assert_eq!(
            (
                failed.event.type_,
                failed.event.reason,
                failed.event.message.as_str()
            ),
            (EventType::Warning, "ReplicaSetCreateError", message),
            "{name}"
        );
        let cond = failed
            .status
            .as_ref()
            .and_then(|s| s.condition("Progressing"))
            .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()));
        assert_eq!(
            cond,
            condition.then_some(("False", "ReplicaSetCreateError", message)),
            "{name}"
        );
    }
}

#[test]
fn collision_raises_the_count() {
    for (count, want) in [
        (None, 1),
        (Some(0), 1),
        (Some(3), 4),
        (Some(i32::MAX), i32::MAX),
    ] {
        let mut d = dep25(3);
        d.status = Some(DeploymentStatus {
            collision_count: count,
            ..DeploymentStatus::default()
        });
        assert_eq!(collision(&d).collision_count, Some(want), "{count:?}");
    }
}

// ---- scale writes ----------------------------------------------------------------------------

#[test]
fn scale_writes_resize_and_annotate() {
    let rs = |replicas, desired: &'static str| {
        owned(R {
            name: "a",
            replicas,
            annotations: if desired == "10" {
                &[
                    ("deployment.kubernetes.io/desired-replicas", "10"),
                    ("deployment.kubernetes.io/max-replicas", "13"),
                ]
            } else {
                &[
                    ("deployment.kubernetes.io/desired-replicas", "5"),
                    ("deployment.kubernetes.io/max-replicas", "7"),
                ]
            },
            ..R::default()
        })
    };
    let d = dep25(10);
    // (from, annotated for, to, force) -> Some((to, event message)) or None
    type Case = (
        i32,
        &'static str,
        i32,
        bool,
        Option<(i32, Option<&'static str>)>,
    );
    let table: Vec<Case> = vec![
        (4, "10", 4, false, None),
        (4, "10", 4, true, None),
        (4, "5", 4, false, None),
        (4, "5", 4, true, Some((4, None))),
        (
            4,
            "10",
            6,
            false,
            Some((6, Some("Scaled up replica set a from 4 to 6"))),
        ),
        (
            4,
            "5",
            0,
            true,
            Some((0, Some("Scaled down replica set a from 4 to 0"))),
        ),
    ];
    for (from, desired, to, force, want) in table {
        let got = scale_write(&d, &rs(from, desired), to, force).map(|w| {
            let a = |k| model::annotation(&w.replica_set.metadata, k).map(str::to_owned);
            assert_eq!(
                a("deployment.kubernetes.io/desired-replicas").as_deref(),
                Some("10")
            );
            assert_eq!(
                a("deployment.kubernetes.io/max-replicas").as_deref(),
                Some("13")
            );
            (
                model::replicas(&w.replica_set),
                w.event.map(|e| {
                    assert_eq!(
                        (e.type_, e.reason),
                        (EventType::Normal, "ScalingReplicaSet")
                    );
                    e.message
                }),
            )
        });
        let want = want.map(|(n, m)| (n, m.map(str::to_owned)));
        assert_eq!(got, want, "{from} ({desired}) -> {to}, force {force}");
    }
}

// ---- rolling and Recreate steps --------------------------------------------------------------

fn empty_pods() -> HashMap<String, Vec<Arc<Pod>>> {
    HashMap::new()
}

fn complete(mut d: Deployment, n: i32) -> Deployment {
    d.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(n),
        updated_replicas: Some(n),
        available_replicas: Some(n),
        ..DeploymentStatus::default()
    });
    d
}

fn rs(
    name: &'static str,
    replicas: i32,
    status: i32,
    available: i32,
    image: &'static str,
    age: i64,
) -> Rs {
    Arc::new(owned(R {
        name,
        replicas,
        status_replicas: status,
        available,
        ready: available,
        image,
        age,
        ..R::default()
    }))
}

#[derive(Debug, PartialEq, Eq)]
enum Roll {
    ScaleNew(i32),
    ScaleDownOld {
        ops: Vec<(String, i32)>,
        invalid: bool,
        otherwise: Vec<String>,
    },
    Cleanup(Vec<String>),
}

fn roll_kind(step: RollingStep) -> Roll {
    let names = |v: &[Rs]| v.iter().map(|rs| model::rs_name(rs).to_owned()).collect();
    match step {
        RollingStep::ScaleNew(op) => Roll::ScaleNew(op.to),
        RollingStep::ScaleDownOld { step, otherwise } => Roll::ScaleDownOld {
            ops: step.ops.iter().map(|op| (op.name.clone(), op.to)).collect(),
            invalid: step.invalid.is_some(),
            otherwise: names(&otherwise),
        },
        RollingStep::Cleanup(c) => Roll::Cleanup(names(&c)),
    }
}

#[test]
fn rolling_step_takes_one_step() {
    let mut limit0 = complete(dep25(10), 10);
    limit0.spec.revision_history_limit = Some(0);
    type Case = (&'static str, Deployment, Vec<Rs>, Rs, Roll);
    let table: Vec<Case> = vec![
        (
            "mid-rollout: new 3 next to old 8 grows to 5",
            dep25(10),
            vec![rs("old", 8, 10, 10, "v1", 300)],
            rs("new", 3, 3, 0, "v2", 10),
            Roll::ScaleNew(5),
        ),
        (
            "a new RS above spec.replicas shrinks",
            dep25(10),
            vec![],
            rs("new", 12, 12, 12, "v2", 10),
            Roll::ScaleNew(10),
        ),
        (
            "at the surge ceiling: old ones shrink within availability",
            dep25(10),
            vec![rs("old", 10, 10, 10, "v1", 300)],
            rs("new", 3, 3, 3, "v2", 10),
            Roll::ScaleDownOld {
                ops: vec![("old".into(), 5)],
                invalid: false,
                otherwise: vec![],
            },
        ),
        (
            "unhealthy old replicas go first, as far as the budget allows",
            dep25(10),
            vec![rs("old", 10, 10, 0, "v1", 300)],
            rs("new", 3, 3, 0, "v2", 10),
            Roll::ScaleDownOld {
                ops: vec![("old".into(), 8)],
                invalid: false,
                otherwise: vec![],
            },
        ),
        (
            "nothing to scale, not complete: no cleanup",
            dep25(10),
            vec![rs("old", 0, 0, 0, "v1", 300)],
            rs("new", 10, 10, 10, "v2", 10),
            Roll::Cleanup(vec![]),
        ),
        (
            "nothing to scale, complete: cleanup beyond the limit",
            limit0.clone(),
            vec![rs("old", 0, 0, 0, "v1", 300)],
            rs("new", 10, 10, 10, "v2", 10),
            Roll::Cleanup(vec!["old".into()]),
        ),
        (
            "scale-downs that fail fall back to the cleanup",
            limit0,
            vec![rs("old", 0, 0, 0, "v1", 300), rs("mid", 3, 3, 3, "v1", 200)],
            rs("new", 10, 10, 10, "v2", 10),
            Roll::ScaleDownOld {
                ops: vec![("mid".into(), 0)],
                invalid: false,
                otherwise: vec!["old".into()],
            },
        ),
    ];
    let pods = empty_pods();
    for (name, d, old, new, want) in table {
        let snap = Snapshot {
            deployment: &d,
            new: Some(&new),
            old: &old,
            pods: &pods,
            pods_seen_at: None,
        };
        assert_eq!(
            roll_kind(rolling_step(&snap, &new).expect("plan")),
            want,
            "{name}"
        );
    }
}

fn pod(phase: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some(phase.into()),
            ..PodStatus::default()
        }),
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Rec {
    ScaleDownOld(Vec<(String, i32)>),
    Wait,
    CreateNew,
    ScaleNew(Option<i32>, Vec<String>),
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn recreate_step_scales_down_waits_then_creates() {
    let mut limit0 = complete(recreate(2), 2);
    limit0.spec.revision_history_limit = Some(0);
    let old_running = rs("old", 2, 2, 2, "v1", 300);
    let old_gone = rs("old", 0, 0, 0, "v1", 300);
    let old_reporting = rs("old", 0, 1, 0, "v1", 300);
    let new_small = rs("new", 1, 1, 1, "v2", 10);
    let new_full = rs("new", 2, 2, 2, "v2", 10);
    let running: HashMap<String, Vec<Arc<Pod>>> =
        HashMap::from([("old-uid".to_owned(), vec![pod("Running")])]);
    let finished: HashMap<String, Vec<Arc<Pod>>> =
        HashMap::from([("old-uid".to_owned(), vec![pod("Succeeded"), pod("Failed")])]);
    let new_pods: HashMap<String, Vec<Arc<Pod>>> =
        HashMap::from([("new-uid".to_owned(), vec![pod("Running")])]);
    let none = empty_pods();
    type Case<'a> = (
        &'static str,
        Deployment,
        Option<&'a Rs>,
        &'a Rs,
        &'a HashMap<String, Vec<Arc<Pod>>>,
        Rec,
    );
    let table: Vec<Case> = vec![
        (
            "old to 0 first",
            recreate(2),
            None,
            &old_running,
            &none,
            Rec::ScaleDownOld(vec![("old".into(), 0)]),
        ),
        (
            "old RS still reports pods",
            recreate(2),
            None,
            &old_reporting,
            &none,
            Rec::Wait,
        ),
        (
            "an old pod still runs",
            recreate(2),
            None,
            &old_gone,
            &running,
            Rec::Wait,
        ),
        (
            "terminal old pods do not count",
            recreate(2),
            None,
            &old_gone,
            &finished,
            Rec::CreateNew,
        ),
        (
            "the new RS's pods do not count",
            recreate(2),
            Some(&new_small),
            &old_gone,
            &new_pods,
            Rec::ScaleNew(Some(2), vec![]),
        ),
        (
            "new RS at size, not complete",
            recreate(2),
            Some(&new_full),
            &old_gone,
            &none,
            Rec::ScaleNew(None, vec![]),
        ),
        (
            "complete: cleanup",
            limit0,
            Some(&new_full),
            &old_gone,
            &none,
            Rec::ScaleNew(None, vec!["old".into()]),
        ),
    ];
    for (name, d, new, old, pods, want) in table {
        let old = vec![old.clone()];
        let snap = Snapshot {
            deployment: &d,
            new,
            old: &old,
            pods,
            pods_seen_at: None,
        };
        let got = match recreate_step(&snap) {
            RecreateStep::ScaleDownOld(ops) => {
                Rec::ScaleDownOld(ops.iter().map(|op| (op.name.clone(), op.to)).collect())
            }
            RecreateStep::WaitForOldPods => Rec::Wait,
            RecreateStep::CreateNew => Rec::CreateNew,
            RecreateStep::ScaleNew { op, cleanup } => Rec::ScaleNew(
                op.map(|op| op.to),
                cleanup
                    .iter()
                    .map(|rs| model::rs_name(rs).to_owned())
                    .collect(),
            ),
        };
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn paused_cleanup_only_while_paused_without_rollback() {
    let mut paused = dep25(2);
    paused.spec.paused = Some(true);
    paused.spec.revision_history_limit = Some(0);
    let mut running = paused.clone();
    running.spec.paused = Some(false);
    let rolling_back = annotated(
        paused.clone(),
        &[("deprecated.deployment.rollback.to", "1")],
    );
    let old = vec![rs("v1", 0, 0, 0, "v1", 300)];
    for (name, d, want) in [
        ("paused", paused, vec!["v1"]),
        ("not paused", running, vec![]),
        ("paused with a rollback request", rolling_back, vec![]),
    ] {
        let got = paused_cleanup(&d, &old);
        assert_eq!(
            got.iter().map(|rs| model::rs_name(rs)).collect::<Vec<_>>(),
            want,
            "{name}"
        );
    }
}

// ---- rollback --------------------------------------------------------------------------------

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one test of a sequence of cases, read top to bottom"
)]
fn rollback_restores_or_refuses_and_always_clears() {
    let v1 = Arc::new(owned(R {
        name: "v1",
        age: 300,
        annotations: &[
            ("deployment.kubernetes.io/revision", "1"),
            ("kubernetes.io/change-cause", "v1"),
        ],
        ..R::default()
    }));
    let v2 = Arc::new(owned(R {
        name: "v2",
        replicas: 1,
        image: "v2",
        age: 10,
        annotations: &[
            ("deployment.kubernetes.io/revision", "2"),
            ("kubernetes.io/change-cause", "v2"),
        ],
        ..R::default()
    }));
    let at = |to: &str| {
        annotated(
            dep25(1),
            &[
                ("deprecated.deployment.rollback.to", to),
                ("deployment.kubernetes.io/revision", "2"),
                ("kubernetes.io/change-cause", "v2"),
            ],
        )
    };
    type Case = (
        &'static str,
        Deployment,
        Vec<Rs>,
        bool,
        &'static str,
        &'static str,
        &'static str,
    );
    let table: Vec<Case> = vec![
        (
            "to revision 1",
            at("1"),
            vec![v1.clone(), v2.clone()],
            true,
            "DeploymentRollback",
            "Rolled back deployment \"web\" to revision 1",
            "v1",
        ),
        (
            "0 means the last revision before the current",
            at("0"),
            vec![v1.clone(), v2.clone()],
            true,
            "DeploymentRollback",
            "Rolled back deployment \"web\" to revision 1",
            "v1",
        ),
        (
            "0 without history",
            at("0"),
            vec![v2.clone()],
            false,
            "DeploymentRollbackRevisionNotFound",
            "Unable to find last revision.",
            "v2",
        ),
        (
            "unknown revision",
            at("9"),
            vec![v1.clone(), v2.clone()],
            false,
            "DeploymentRollbackRevisionNotFound",
            "Unable to find the revision to rollback to.",
            "v2",
        ),
        (
            "same template",
            at("2"),
            vec![v1, v2],
            false,
            "DeploymentRollbackTemplateUnchanged",
            "The rollback revision contains the same template as current deployment \"web\"",
            "v2",
        ),
    ];
    for (name, d, all, rolled_back, reason, message, image) in table {
        let plan = rollback(&d, &all);
        assert_eq!(plan.rolled_back, rolled_back, "{name}");
        let want_type = if rolled_back {
            EventType::Normal
        } else {
            EventType::Warning
        };
        assert_eq!(
            (
                plan.event.type_,
                plan.event.reason,
                plan.event.message.as_str()
            ),
            (want_type, reason, message),
            "{name}"
        );
        let out = &plan.deployment;
        assert_eq!(
            model::annotation(&out.metadata, "deprecated.deployment.rollback.to"),
            None,
            "{name}: the request is always cleared"
        );
        let container_image = out
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.containers[0].image.as_deref());
        assert_eq!(container_image, Some(image), "{name}");
        let labels = rkcm_runtime::workload::pod::template_labels(&out.spec.template)
            .cloned()
            .unwrap_or_default();
        assert!(
            !labels.contains_key("pod-template-hash"),
            "{name}: no hash label"
        );
        let cause = model::annotation(&out.metadata, "kubernetes.io/change-cause");
        assert_eq!(cause, Some(if rolled_back { "v1" } else { "v2" }), "{name}");
        assert_eq!(revision_of(out), Some("2"), "{name}: the revision is kept");
    }
}

// ---- status ----------------------------------------------------------------------------------

#[test]
fn status_step_writes_or_rechecks_the_deadline() {
    // A stalled rollout is re-checked when its deadline passes, without any event.
    let new = rs("web-abc", 1, 1, 0, "v2", 10);
    let all = vec![new.clone()];
    let stalled = |age_ms: i64, deadline: Option<i32>| {
        let mut d = annotated(dep25(1), &[("deployment.kubernetes.io/revision", "1")]);
        d.spec.progress_deadline_seconds = deadline;
        let mut st = status::calculate_status(&d, &all, Some(&new), true, now());
        let t = now()
            .checked_sub(jiff::SignedDuration::from_millis(age_ms))
            .expect("time");
        if deadline.is_some() {
            st.set_condition(new_rs_created(t));
        }
        d.status = Some(st.to_api());
        d
    };
    #[derive(Debug, PartialEq)]
    enum S {
        Unchanged,
        Write,
        Now,
        After(Duration),
    }
    let kind = |s: StatusStep| match s {
        StatusStep::Unchanged => S::Unchanged,
        StatusStep::Write(_) => S::Write,
        StatusStep::Recheck(ProgressCheck::Now) => S::Now,
        StatusStep::Recheck(ProgressCheck::After(d)) => S::After(d),
        StatusStep::Recheck(ProgressCheck::None) => panic!("a recheck is never None"),
    };
    let table: Vec<(&str, Deployment, bool, S)> = vec![
        (
            "deadline under a second away",
            stalled(9_500, Some(10)),
            true,
            S::Now,
        ),
        (
            "deadline 6 s away: then, plus a second",
            stalled(4_000, Some(10)),
            true,
            S::After(Duration::from_secs(7)),
        ),
        (
            "status sync only: no recheck",
            stalled(9_500, Some(10)),
            false,
            S::Unchanged,
        ),
        (
            "no deadline: nothing",
            stalled(9_500, None),
            true,
            S::Unchanged,
        ),
        ("nothing stored yet: write", dep25(1), true, S::Write),
        (
            "nothing stored yet, status only: write",
            dep25(1),
            false,
            S::Write,
        ),
    ];
    for (name, d, rollout, want) in table {
        assert_eq!(
            kind(status_step(&d, &all, Some(&new), true, rollout, now())),
            want,
            "{name}"
        );
    }
}
