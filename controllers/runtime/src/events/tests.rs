use super::*;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::correlator::{Lru, aggregate_keys, s};
use super::recorder::make_event;
use super::writer::Writer;
use crate::clock::{Clock, FakeClock};
use k8s_openapi::api::core::v1::Pod;
use rkcm_testkit::fake_api::{FakeApi, Reply, Request};

fn t0() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_700_000_000).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

fn pod_ref() -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("web-0".into()),
        namespace: Some("ns".into()),
        uid: Some("u1".into()),
        resource_version: Some("7".into()),
        field_path: None,
    }
}

fn source() -> EventSource {
    EventSource {
        component: Some("replicaset-controller".into()),
        host: None,
    }
}

fn ev(clock: &FakeClock, reason: &str, message: &str) -> Event {
    make_event(
        &source(),
        &pod_ref(),
        EventType::Warning,
        reason,
        message,
        clock.wall(),
    )
}

/// Plays the writer: correlate, then feed back the "server" copy as a real write would.
fn write(c: &mut EventCorrelator, e: Event) -> Correlation {
    let d = c.correlate(e);
    match &d {
        Correlation::Create(e) | Correlation::Patch { event: e, .. } => {
            let mut server = e.clone();
            server.metadata.resource_version = Some("1".into());
            c.update_state(&server);
        }
        Correlation::Skip => {}
    }
    d
}

fn setup() -> (FakeClock, EventCorrelator) {
    let clock = FakeClock::new(t0());
    let c = EventCorrelator::new(Arc::new(clock.clone()));
    (clock, c)
}

#[test]
fn make_event_fills_core_v1_fields() {
    let clock = FakeClock::new(t0());
    let e = ev(&clock, "FailedCreate", "Error creating: boom");
    let nanos = t0().as_nanosecond();
    assert_eq!(
        e.metadata.name.as_deref(),
        Some(format!("web-0.{nanos:x}").as_str())
    );
    assert_eq!(e.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(e.count, Some(1));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(
        e.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("replicaset-controller")
    );
    assert_eq!(
        e.reporting_component.as_deref(),
        Some("replicaset-controller")
    );
    assert_eq!(e.first_timestamp, e.last_timestamp);
    assert_eq!(e.involved_object.resource_version.as_deref(), Some("7"));
}

#[test]
fn cluster_scoped_objects_get_events_in_default() {
    let mut r = pod_ref();
    r.namespace = None;
    let e = make_event(&source(), &r, EventType::Normal, "R", "m", t0());
    assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(e.involved_object.namespace, None);
}

#[test]
fn object_reference_has_kind_version_and_resource_version() {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("ns".into()),
            uid: Some("u".into()),
            resource_version: Some("42".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    };
    let r = object_reference(&pod);
    assert_eq!(r.kind.as_deref(), Some("Pod"));
    assert_eq!(r.api_version.as_deref(), Some("v1"));
    assert_eq!(r.resource_version.as_deref(), Some("42"));
    assert_eq!(r.uid.as_deref(), Some("u"));
}

#[test]
fn thirty_identical_events_in_a_burst_make_one_event_with_count_25() {
    let (clock, mut c) = setup();
    let mut creates = 0;
    let mut patches = 0;
    let mut skips = 0;
    let mut last_count = 0;
    let mut names = BTreeSet::new();
    for _ in 0..30 {
        match write(&mut c, ev(&clock, "FailedCreate", "Error creating: quota")) {
            Correlation::Create(e) => {
                creates += 1;
                last_count = e.count.unwrap_or(0);
                names.insert(e.metadata.name.clone());
            }
            Correlation::Patch { event, patch } => {
                patches += 1;
                last_count = event.count.unwrap_or(0);
                assert_eq!(patch["count"], serde_json::json!(last_count));
                assert_eq!(patch["message"], serde_json::json!("Error creating: quota"));
                assert!(patch.get("lastTimestamp").is_some());
                names.insert(event.metadata.name.clone());
            }
            Correlation::Skip => skips += 1,
        }
        clock.advance(Duration::from_millis(10));
    }
    assert_eq!((creates, patches, skips), (1, 24, 5));
    assert_eq!(last_count, 25);
    assert_eq!(names.len(), 1, "every write targets the same Event object");
}

#[test]
fn spam_filter_refills_one_token_per_five_minutes() {
    let (clock, mut c) = setup();
    for i in 0..25 {
        assert_ne!(
            write(&mut c, ev(&clock, "R", &format!("m{}", i % 3))),
            Correlation::Skip
        );
    }
    assert_eq!(write(&mut c, ev(&clock, "R", "m0")), Correlation::Skip);
    clock.advance(Duration::from_secs(299));
    assert_eq!(write(&mut c, ev(&clock, "R", "m0")), Correlation::Skip);
    clock.advance(Duration::from_secs(1));
    // Upstream keeps counting dropped repeats, so the next accepted patch jumps ahead.
    match write(&mut c, ev(&clock, "R", "m0")) {
        Correlation::Patch { event, .. } => assert_eq!(event.count, Some(12)),
        other => panic!("expected a patch, got {other:?}"),
    }
    assert_eq!(write(&mut c, ev(&clock, "R", "m0")), Correlation::Skip);
}

#[test]
fn spam_filter_is_per_object() {
    let (clock, mut c) = setup();
    for _ in 0..25 {
        write(&mut c, ev(&clock, "R", "m"));
    }
    assert_eq!(write(&mut c, ev(&clock, "R", "m")), Correlation::Skip);
    let mut other = ev(&clock, "R", "m");
    other.involved_object.name = Some("web-1".into());
    other.involved_object.uid = Some("u2".into());
    assert!(matches!(write(&mut c, other), Correlation::Create(_)));
}

#[test]
fn ten_similar_events_are_aggregated() {
    let (clock, mut c) = setup();
    for i in 1..=9 {
        match write(
            &mut c,
            ev(&clock, "FailedCreate", &format!("Error creating: {i}")),
        ) {
            Correlation::Create(e) => assert_eq!(
                e.message.as_deref(),
                Some(format!("Error creating: {i}").as_str())
            ),
            other => panic!("event {i}: expected create, got {other:?}"),
        }
        clock.advance(Duration::from_secs(1));
    }
    let aggregated_name = match write(&mut c, ev(&clock, "FailedCreate", "Error creating: 10")) {
        Correlation::Create(e) => {
            assert_eq!(
                e.message.as_deref(),
                Some("(combined from similar events): Error creating: 10")
            );
            assert_eq!(e.count, Some(1));
            e.metadata.name
        }
        other => panic!("expected aggregated create, got {other:?}"),
    };
    clock.advance(Duration::from_secs(1));
    match write(&mut c, ev(&clock, "FailedCreate", "Error creating: 11")) {
        Correlation::Patch { event, patch } => {
            assert_eq!(event.metadata.name, aggregated_name);
            assert_eq!(event.count, Some(2));
            assert_eq!(
                patch["message"],
                serde_json::json!("(combined from similar events): Error creating: 11")
            );
        }
        other => panic!("expected patch of the aggregate, got {other:?}"),
    }
}

#[test]
fn aggregation_window_expires_after_ten_minutes() {
    let (clock, mut c) = setup();
    for i in 1..=9 {
        write(&mut c, ev(&clock, "R", &format!("m{i}")));
    }
    clock.advance(Duration::from_secs(601));
    match write(&mut c, ev(&clock, "R", "m10")) {
        Correlation::Create(e) => assert_eq!(e.message.as_deref(), Some("m10")),
        other => panic!("expected a plain create, got {other:?}"),
    }
}

#[test]
fn different_reasons_are_not_aggregated_together() {
    let (clock, mut c) = setup();
    for i in 0..12 {
        let reason = if i % 2 == 0 { "A" } else { "B" };
        match write(&mut c, ev(&clock, reason, &format!("m{i}"))) {
            Correlation::Create(e) => assert!(!s(&e.message).starts_with("(combined")),
            other => panic!("expected create, got {other:?}"),
        }
    }
}

#[test]
fn lru_evicts_least_recently_used() {
    let mut l = Lru::new(2);
    l.add("a".into(), 1);
    l.add("b".into(), 2);
    assert_eq!(l.get_mut("a").copied(), Some(1));
    l.add("c".into(), 3);
    assert_eq!(l.len(), 2);
    assert!(l.get_mut("b").is_none());
    assert!(l.get_mut("a").is_some());
    assert!(l.get_mut("c").is_some());
}

/// An event about pod `name` (its own uid).
fn ev_about(clock: &FakeClock, name: &str, reason: &str, message: &str) -> Event {
    let mut object = pod_ref();
    object.name = Some(name.into());
    object.uid = Some(format!("uid-{name}"));
    make_event(
        &source(),
        &object,
        EventType::Normal,
        reason,
        message,
        clock.wall(),
    )
}

#[test]
fn objects_gone_quiet_leave_the_aggregation_and_spam_caches() {
    let (clock, mut c) = setup();
    for i in 0..50 {
        let name = format!("gone-{i}");
        write(&mut c, ev_about(&clock, &name, "Created", "created it"));
    }
    assert_eq!(
        (c.aggregates.len(), c.spam.len(), c.logs.len()),
        (50, 50, 50)
    );
    // Within the aggregation window nothing is dropped, even after a sweep.
    clock.advance(Duration::from_secs(120));
    write(&mut c, ev_about(&clock, "other", "Created", "created it"));
    assert_eq!((c.aggregates.len(), c.spam.len()), (51, 51));
    // Past the window and the bucket refill, the quiet objects' entries are gone; the
    // logger keeps its entries (bounded by its LRU, as upstream's).
    clock.advance(Duration::from_secs(500));
    write(&mut c, ev_about(&clock, "new", "Created", "created it"));
    assert_eq!((c.aggregates.len(), c.spam.len(), c.logs.len()), (2, 1, 52));
    // "other" had its record refreshed 500 s ago: still within the window.
    assert!(
        c.aggregates
            .get_mut(&aggregate_keys(&ev_about(&clock, "other", "Created", "x")).0)
            .is_some()
    );
}

#[test]
fn sweeping_keeps_every_bucket_that_still_limits() {
    let (clock, mut c) = setup();
    // 30 events in a burst: 25 pass, the spam filter drops 5; the bucket is empty.
    let passed = (0..30)
        .filter(|i| {
            let e = ev(&clock, "Unhealthy", &format!("probe failed {i}"));
            write(&mut c, e) != Correlation::Skip
        })
        .count();
    assert_eq!(passed, 25);
    // 601 s later two tokens have come back (one per 300 s): two events pass, the third
    // is dropped, exactly as if nothing had been swept.
    clock.advance(Duration::from_secs(601));
    let after: Vec<bool> = (0..3)
        .map(|i| write(&mut c, ev(&clock, "Unhealthy", &format!("later {i}"))) != Correlation::Skip)
        .collect();
    assert_eq!(after, vec![true, true, false]);
}

/// A writer whose requests go to `api`.
fn writer(api: &FakeApi) -> (Writer, FakeClock) {
    let clock = FakeClock::new(t0());
    let w = Writer {
        client: api.client(),
        correlator: EventCorrelator::new(Arc::new(clock.clone())),
        sleep: Duration::from_millis(1),
        sizes: Arc::default(),
    };
    (w, clock)
}

/// Echoes creates and patches like the apiserver, with a resourceVersion.
fn echo(req: &Request) -> Reply {
    let mut body = req.body.clone();
    if req.method == "PATCH" {
        body = serde_json::json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x", "namespace": "ns"}, "involvedObject": {}});
    }
    body["metadata"]["resourceVersion"] = serde_json::json!("5");
    Reply::json(if req.method == "POST" { 201 } else { 200 }, body)
}

#[tokio::test]
async fn writer_creates_then_patches_the_count() {
    let api = FakeApi::new();
    api.on_fn("*", "**", echo);
    let (mut w, clock) = writer(&api);
    for _ in 0..3 {
        w.record(ev(&clock, "FailedCreate", "Error creating: x"))
            .await;
        clock.advance(Duration::from_secs(1));
    }
    // One key in each cache, as reported to `tracked`.
    let mut sizes = Vec::new();
    w.sizes.report(&mut sizes);
    let entries: Vec<_> = sizes.iter().map(|s| (s.map, s.entries)).collect();
    assert_eq!(
        entries,
        vec![
            ("events_spam", 1),
            ("events_aggregates", 1),
            ("events_logs", 1)
        ]
    );
    let reqs = api.requests();
    let methods: Vec<_> = reqs.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, vec!["POST", "PATCH", "PATCH"]);
    assert_eq!(reqs[0].path, "/api/v1/namespaces/ns/events");
    assert_eq!(reqs[0].body["source"]["component"], "replicaset-controller");
    assert_eq!(reqs[0].body["count"], 1);
    let name = reqs[0].body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(reqs[1].path, format!("/api/v1/namespaces/ns/events/{name}"));
    assert_eq!(
        reqs[1].content_type,
        "application/strategic-merge-patch+json"
    );
    assert_eq!(reqs[2].body["count"], 3);
    assert_eq!(reqs[2].body["message"], "Error creating: x");
}

#[tokio::test]
async fn writer_recreates_when_the_patched_event_is_gone() {
    let api = FakeApi::new();
    api.on("PATCH", "**", Reply::not_found("events", "x"))
        .on_fn("*", "**", echo);
    let (mut w, clock) = writer(&api);
    w.record(ev(&clock, "R", "m")).await;
    w.record(ev(&clock, "R", "m")).await;
    let reqs = api.requests();
    let methods: Vec<_> = reqs.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, vec!["POST", "PATCH", "POST"]);
    assert_eq!(reqs[2].body["count"], 2);
    assert!(reqs[2].body["metadata"].get("resourceVersion").is_none());
}

#[tokio::test]
async fn writer_does_not_retry_status_errors() {
    let api = FakeApi::new();
    api.on("*", "**", Reply::forbidden("events is forbidden"));
    let (mut w, clock) = writer(&api);
    w.record(ev(&clock, "R", "m")).await;
    assert_eq!(api.count(), 1);
}

#[tokio::test]
async fn writer_retries_transport_failures() {
    let api = FakeApi::new();
    api.times(2, "*", "**", Reply::transport_error("connection refused"))
        .on(
            "*",
            "**",
            Reply::created(
                serde_json::json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"}, "involvedObject": {}}),
            ),
        );
    let (mut w, clock) = writer(&api);
    w.record(ev(&clock, "R", "m")).await;
    assert_eq!(api.count(), 3);
}

#[test]
fn fake_recorder_captures_events() {
    let (rec, events) = EventRecorder::fake("deployment-controller");
    rec.event(
        &pod_ref(),
        EventType::Normal,
        "ScalingReplicaSet",
        "Scaled up",
    );
    let got = events.take();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].reason, "ScalingReplicaSet");
    assert_eq!(got[0].type_, EventType::Normal);
    assert!(events.all().is_empty());
}
