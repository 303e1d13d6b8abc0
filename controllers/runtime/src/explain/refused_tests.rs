use super::*;
use crate::explain::ObjectRef;

const QUOTA: &str = "Error creating: pods \"pi-x7k2q\" is forbidden: exceeded quota: none, requested: pods=1, used: pods=0, limited: pods=0";

fn at(s: &str) -> jiff::Timestamp {
    s.parse().expect("timestamp")
}

fn event(type_: &str, message: &str, count: i32, first: &str, last: &str) -> Event {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "e", "namespace": "ns"},
        "involvedObject": {"kind": "Job", "name": "pi", "namespace": "ns"},
        "type": type_, "reason": "FailedCreate", "message": message, "count": count,
        "firstTimestamp": first, "lastTimestamp": last,
    }))
    .expect("event")
}

fn acting() -> Explanation {
    Explanation {
        object: ObjectRef {
            kind: "Job".into(),
            namespace: "ns".into(),
            name: "pi".into(),
        },
        controller: "job-controller",
        state: State::Acting,
        actions: vec!["create 1 pod(s)".into()],
        waiting_on: vec![],
        remedies: vec![],
    }
}

#[test]
fn classifies_the_servers_refusals() {
    for (message, want) in [
        (QUOTA, Some(Refusal::Quota)),
        (
            "pods \"a\" is forbidden: failed quota: q: must specify limits.cpu for: app",
            Some(Refusal::Quota),
        ),
        (
            "pods is forbidden: User \"system:serviceaccount:kube-system:rkcm\" cannot create resource \"pods\" in API group \"\" in the namespace \"ns\"",
            Some(Refusal::Forbidden),
        ),
        (
            "pods \"a\" is forbidden: ValidatingAdmissionPolicy 'deny' with binding 'deny' denied request: failed expression: false",
            Some(Refusal::Admission),
        ),
        (
            "admission webhook \"deny.example.com\" denied the request: no",
            Some(Refusal::Admission),
        ),
        (
            "pods \"a\" is forbidden: violates PodSecurity \"restricted:latest\": privileged",
            Some(Refusal::Admission),
        ),
        (
            "Operation cannot be fulfilled on jobs.batch \"pi\": the object has been modified; please apply your changes to the latest version and try again",
            Some(Refusal::Conflict),
        ),
        (
            "Pod \"a\" is invalid: spec.containers[0].image: Required value",
            Some(Refusal::Invalid),
        ),
        ("Created pod: pi-x7k2q", None),
        ("0/3 nodes are available: insufficient cpu", None),
    ] {
        assert_eq!(classify(message), want, "{message}");
    }
}

#[test]
fn reads_recent_warning_events_and_gathers_them_by_kind() {
    let now = at("2026-12-05T12:00:00Z");
    let events = [
        event(
            "Warning",
            QUOTA,
            3,
            "2026-12-05T11:50:00Z",
            "2026-12-05T11:58:00Z",
        ),
        event(
            "Warning",
            "Error creating: pods \"pi-b\" is forbidden: exceeded quota: none",
            2,
            "2026-12-05T11:55:00Z",
            "2026-12-05T11:59:00Z",
        ),
        // Too old, not a warning, not a refusal.
        event(
            "Warning",
            QUOTA,
            9,
            "2026-12-05T10:00:00Z",
            "2026-12-05T11:30:00Z",
        ),
        event(
            "Normal",
            "Created pod: pi-c",
            1,
            "2026-12-05T11:59:00Z",
            "2026-12-05T11:59:00Z",
        ),
        event(
            "Warning",
            "something else",
            1,
            "2026-12-05T11:59:00Z",
            "2026-12-05T11:59:00Z",
        ),
        // A single conflict is the ordinary retry.
        event(
            "Warning",
            "the object has been modified",
            1,
            "2026-12-05T11:59:00Z",
            "2026-12-05T11:59:00Z",
        ),
    ];
    let got = from_events(&events, now);
    assert_eq!(
        got,
        vec![Refused {
            refusal: Refusal::Quota,
            message: "Error creating: pods \"pi-b\" is forbidden: exceeded quota: none".into(),
            count: 5,
            since: Some(at("2026-12-05T11:50:00Z")),
            last: Some(at("2026-12-05T11:59:00Z")),
        }]
    );
}

#[test]
fn reads_the_last_decisions_noted_refusals_and_its_error() {
    let d = Decided {
        controller: "job-controller".into(),
        key: "ns/pi".into(),
        at: "2026-12-05T12:00:00Z".into(),
        outcome: Outcome::Failed {
            error: format!("creating pods of Job ns/pi: {QUOTA}"),
        },
        actions: vec!["POST /api/v1/namespaces/ns/pods: 403".into()],
        waiting: vec![
            format!("QuotaExceeded: {QUOTA}"),
            "PodFailureBackoff: sync again in 10s".into(),
        ],
    };
    let got = from_decision(&d);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].refusal, got[0].message.as_str()),
        (Refusal::Quota, QUOTA)
    );
    let conflict = Decided {
        outcome: Outcome::Failed {
            error: "updating status: the object has been modified".into(),
        },
        waiting: vec![],
        ..d
    };
    assert_eq!(
        from_decision(&conflict)
            .iter()
            .map(|r| r.refusal)
            .collect::<Vec<_>>(),
        [Refusal::Conflict]
    );
    let synced = Decided {
        outcome: Outcome::Synced,
        ..conflict
    };
    assert_eq!(from_decision(&synced), vec![]);
}

#[test]
fn a_refused_create_is_a_stalled_wait_with_the_message_and_a_remedy() {
    let now = at("2026-12-05T12:00:00Z");
    let events = [event(
        "Warning",
        QUOTA,
        4,
        "2026-12-05T11:50:00Z",
        "2026-12-05T11:58:00Z",
    )];
    let mut e = acting();
    apply(&mut e, from_events(&events, now));
    assert_eq!(e.state, State::Stalled);
    assert_eq!(
        e.actions,
        ["create 1 pod(s)"],
        "the create is still what it would do"
    );
    assert_eq!(
        e.waiting_on,
        vec![Waiting {
            reason: "QuotaExceeded",
            message: format!("the API server refused 4 writes of the controller: {QUOTA}"),
            objects: vec![],
            since: Some("2026-12-05T11:50:00Z".into()),
        }]
    );
    assert!(
        e.remedies[0].starts_with("raise the namespace's ResourceQuota")
            && e.remedies[0].contains("kubectl -n ns describe resourcequota"),
        "{:?}",
        e.remedies
    );
    // Text form: the reason, the server's message, the remedy.
    let text = e.render();
    assert!(
        text.starts_with("job/pi in ns (job-controller): stalled"),
        "{text}"
    );
    assert!(
        text.contains("QuotaExceeded: the API server refused 4 writes"),
        "{text}"
    );
}

#[test]
fn a_conflict_waits_and_a_settled_object_ignores_old_refusals() {
    let conflict = Refused {
        refusal: Refusal::Conflict,
        message: "the object has been modified".into(),
        count: 3,
        since: None,
        last: None,
    };
    let mut e = acting();
    apply(&mut e, vec![conflict.clone()]);
    assert_eq!(
        (e.state, e.waiting_on[0].reason),
        (State::Waiting, "WriteConflict")
    );
    assert!(
        e.remedies[0].contains("--show-managed-fields"),
        "{:?}",
        e.remedies
    );

    let mut settled = acting();
    settled.state = State::Settled;
    settled.actions.clear();
    apply(&mut settled, vec![conflict]);
    assert_eq!(
        (settled.state, settled.waiting_on.len()),
        (State::Settled, 0)
    );
}

#[test]
fn a_refusal_the_status_already_reports_is_not_repeated() {
    let mut e = acting();
    e.state = State::Stalled;
    e.waiting_on.push(Waiting::new(
        "PodCreateFailed",
        "the API server refused the last pod create".into(),
        vec![],
    ));
    e.remedies.push("fix it".into());
    let quota = Refused {
        refusal: Refusal::Quota,
        message: QUOTA.into(),
        count: 1,
        since: None,
        last: None,
    };
    apply(&mut e, vec![quota]);
    assert_eq!(e.waiting_on.len(), 1);
    assert_eq!(e.remedies, ["fix it"]);
}

#[test]
fn a_refused_write_in_the_error_is_a_wait() {
    let mut n = Note::default();
    let error = "creating pods of Job ns/pi: pods \"pi-x\" is forbidden: exceeded quota: none";
    note_refusal(&mut n, error);
    note_refusal(&mut n, error);
    note_refusal(&mut n, "the server is unavailable");
    assert_eq!(n.waiting, [format!("QuotaExceeded: {error}")]);
}
