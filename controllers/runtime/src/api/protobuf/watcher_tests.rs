use super::*;
use crate::cache::cached;

fn frames_of(stream: &[u8]) -> Vec<Vec<u8>> {
    let mut f = Frames::default();
    f.push(stream);
    std::iter::from_fn(|| f.next_frame().expect("frame")).collect()
}

fn decode_pod(raw: &[u8]) -> std::result::Result<cached::Pod, DecodeError> {
    super::super::pod(raw)
}

/// A length-delimited field (tag < 16, length < 128).
fn field(tag: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![tag << 3 | 2, u8::try_from(bytes.len()).expect("short")];
    out.extend_from_slice(bytes);
    out
}

#[test]
fn events_follow_the_watch_and_its_resource_versions() {
    let frames = frames_of(fixture!("watch.pb"));
    let (mut rv, mut initial) = (String::new(), false);
    let mut kinds = Vec::new();
    for frame in &frames {
        match event("Pod", decode_pod, frame, &mut rv, &mut initial) {
            Ok(Some(Event::Apply(p))) => kinds.push(format!(
                "apply {}",
                p.metadata.resource_version.unwrap_or_default()
            )),
            Ok(Some(Event::Delete(_))) => kinds.push("delete".into()),
            Ok(None) => kinds.push(format!("bookmark at {rv}")),
            _ => kinds.push("other".into()),
        }
    }
    assert_eq!(kinds.len(), 4);
    assert!(
        kinds[0].starts_with("apply ") && kinds[1].starts_with("apply "),
        "{kinds:?}"
    );
    assert_eq!(kinds[2], "delete");
    assert!(
        kinds[3].starts_with("bookmark at ") && !rv.is_empty(),
        "{kinds:?}"
    );

    // During a streaming list's initial events, objects are initial ones; a bookmark without
    // the end annotation does not end them.
    let (mut rv, mut initial) = (String::new(), true);
    assert!(matches!(
        event("Pod", decode_pod, &frames[0], &mut rv, &mut initial),
        Ok(Some(Event::InitApply(_)))
    ));
    assert!(matches!(
        event("Pod", decode_pod, &frames[3], &mut rv, &mut initial),
        Ok(None)
    ));
    assert!(initial);
    // A watch of nodes refuses pods.
    let mut rv = String::new();
    assert!(matches!(
        event("Node", decode_pod, &frames[0], &mut rv, &mut false),
        Err(Stop::Broken(_))
    ));
}

#[test]
fn an_error_event_stops_the_watch_and_410_asks_for_a_relist() {
    let status_404 = fixture!("status-404.pb");
    let error_frame = [field(1, b"ERROR"), field(2, &field(1, status_404))].concat();
    let mut rv = "7".to_string();
    match event("Pod", decode_pod, &error_frame, &mut rv, &mut false) {
        Err(Stop::Status(st)) => assert_eq!(st.code, 404),
        _ => panic!("a 404 status stops the watch, to be resumed"),
    }
    assert_eq!(rv, "7", "unchanged");
    assert_eq!(
        error_status(404, status_404).reason,
        "NotFound",
        "a protobuf error body"
    );
    let json =
        br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410}"#;
    assert!(is_gone(&error_status(410, json)), "a JSON error body");
    let text = error_status(410, b"ok");
    assert_eq!(
        (text.code, is_gone(&text)),
        (410, true),
        "neither: the HTTP code"
    );
}

#[test]
fn query_values_are_escaped() {
    assert_eq!(encode("metadata.namespace=a-b"), "metadata.namespace%3Da-b");
    assert_eq!(encode("x/y z"), "x%2Fy%20z");
}
