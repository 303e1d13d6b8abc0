use super::*;
use crate::testutil::*;

#[test]
fn counts_follow_upstream() {
    let s = set(5);
    let pods = [
        pod(&s, 0, "cur", State::Ready(100)),
        pod(&s, 1, "upd", State::Ready(100)),
        pod(&s, 2, "upd", State::Ready(1)),
        terminating(pod(&s, 3, "cur", State::Ready(100))),
        pod(&s, 4, "upd", State::Pending),
        Pod::from(crate::identity::new_pod(&s, 5)),
    ];
    let c = count(pods.iter(), 10, "cur", "upd", now());
    assert_eq!(
        c,
        Counts {
            replicas: 5,
            ready: 4,
            available: 3,
            current: 1,
            updated: 3,
        }
    );
}

fn status_of(c: Counts, cur: &str, upd: &str) -> StatefulSetStatus {
    new_status(&set(3), cur, upd, 0, c)
}

#[test]
fn rollout_completes_when_all_replicas_are_updated_and_ready() {
    let done = Counts {
        replicas: 3,
        ready: 3,
        available: 3,
        current: 0,
        updated: 3,
    };
    let mut st = status_of(done, "a", "b");
    complete_rollout(&set(3), &mut st);
    assert_eq!(
        (st.current_revision.as_deref(), st.current_replicas),
        (Some("b"), Some(3))
    );

    let unready = Counts { ready: 2, ..done };
    let mut st = status_of(unready, "a", "b");
    complete_rollout(&set(3), &mut st);
    assert_eq!(st.current_revision.as_deref(), Some("a"));

    // During a scale-down (4 pods for 3 replicas) it waits.
    let extra = Counts {
        replicas: 4,
        updated: 3,
        ..done
    };
    let mut st = status_of(extra, "a", "b");
    complete_rollout(&set(3), &mut st);
    assert_eq!(st.current_revision.as_deref(), Some("a"));

    let mut on_delete = set(3);
    on_delete.spec.update_strategy = Some(k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy {
        type_: Some("OnDelete".into()),
        rolling_update: None,
    });
    let mut st = status_of(done, "a", "b");
    complete_rollout(&on_delete, &mut st);
    assert_eq!(st.current_revision.as_deref(), Some("b"));
}

#[test]
fn status_is_written_only_when_something_but_collision_count_changed() {
    let mut s = set(3);
    let c = Counts {
        replicas: 3,
        ready: 3,
        available: 3,
        current: 3,
        updated: 3,
    };
    let st = new_status(&s, "a", "a", 0, c);
    assert!(needs_write(&s, &st));
    s.status = Some(st.clone());
    assert!(!needs_write(&s, &st));
    let mut bumped = st.clone();
    bumped.collision_count = Some(1);
    assert!(!needs_write(&s, &bumped));
    let mut newer = st.clone();
    newer.observed_generation = Some(2);
    assert!(needs_write(&s, &newer));
    let mut avail = st.clone();
    avail.available_replicas = Some(2);
    assert!(needs_write(&s, &avail));
}

#[test]
fn only_writes_that_move_counts_alone_are_routine() {
    let mut s = set(3);
    let c = Counts {
        replicas: 3,
        ready: 2,
        available: 2,
        current: 3,
        updated: 3,
    };
    let first = new_status(&s, "a", "a", 0, c);
    assert!(!is_routine(&s, &first), "a set without status yet");
    s.status = Some(first.clone());
    let ready = new_status(
        &s,
        "a",
        "a",
        0,
        Counts {
            ready: 3,
            available: 3,
            ..c
        },
    );
    assert!(is_routine(&s, &ready), "one more pod ready");

    let rolled = new_status(&s, "a", "b", 0, c);
    let completed = new_status(&s, "b", "b", 0, c);
    let collided = new_status(&s, "a", "a", 1, c);
    let mut newer = ready.clone();
    newer.observed_generation = Some(2);
    for (what, st) in [
        ("new update revision", rolled),
        ("rollout complete", completed),
        ("collision count", collided),
        ("new generation", newer),
    ] {
        assert!(!is_routine(&s, &st), "{what}");
    }
}

#[test]
fn requeue_when_a_ready_pod_becomes_available() {
    let mut s = set(2);
    s.spec.min_ready_seconds = Some(10);
    let pods = [
        pod(&s, 0, "a", State::Ready(4)),
        pod(&s, 1, "a", State::Ready(100)),
    ];
    let c = count(pods.iter(), 10, "a", "a", now());
    let st = new_status(&s, "a", "a", 0, c);
    assert_eq!(
        requeue_after(&s, pods.iter(), &st, now()),
        Some(Duration::from_secs(6))
    );
    s.spec.min_ready_seconds = Some(0);
    assert_eq!(requeue_after(&s, pods.iter(), &st, now()), None);
}
