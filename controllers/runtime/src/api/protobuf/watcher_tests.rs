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

/// Every LIST is a consistent read: no `resourceVersion=0` (a lagging watch cache may answer
/// it with a state a manager before this one already acted on), first list or relist; later
/// pages follow their continue token.
#[test]
fn lists_read_consistently() {
    let params = Params {
        path: "/api/v1/pods".into(),
        kind: "Pod",
        list_kind: "PodList",
        field_selector: Some("spec.nodeName=n".into()),
        shard_selector: None,
        page_size: 500,
        timeout: 290,
        streaming: false,
    };
    let cases = [
        (None, "limit=500&fieldSelector=spec.nodeName%3Dn"),
        (
            Some("a/b"),
            "limit=500&fieldSelector=spec.nodeName%3Dn&continue=a%2Fb",
        ),
    ];
    for (continue_, want) in cases {
        assert_eq!(
            list_query(&params, continue_),
            want,
            "continue {continue_:?}"
        );
    }
}

/// A streaming list is a consistent read too: its WATCH carries no resourceVersion; a
/// re-watch continues from the version the cache reached.
#[test]
fn streaming_lists_read_consistently() {
    let params = Params {
        path: "/api/v1/pods".into(),
        kind: "Pod",
        list_kind: "PodList",
        field_selector: None,
        shard_selector: None,
        page_size: 500,
        timeout: 290,
        streaming: true,
    };
    let cases = [
        (
            "",
            true,
            "watch=true&allowWatchBookmarks=true&timeoutSeconds=290&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        ),
        (
            "42",
            false,
            "watch=true&allowWatchBookmarks=true&timeoutSeconds=290&resourceVersion=42",
        ),
    ];
    for (rv, initial, want) in cases {
        assert_eq!(watch_query(&params, rv, initial), want, "rv {rv:?}");
    }
}

/// The JSON watch: one event per line (a line may arrive in pieces), each object's version
/// followed, a bookmark's version taken (and the end of a streaming list's initial events
/// seen), 410 told from other error statuses, an object without a version refused.
#[test]
fn json_watch_lines_decode_as_the_protobuf_ones() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let stream = concat!(
        r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#,
        "\n",
        r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}"#,
        "\n",
        r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"11"}}}"#,
        "\n",
        r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"15"}}}"#,
        "\n",
        r#"{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"16"}}}"#,
        "\n",
    )
    .as_bytes();
    let mut frames = Frames::lines();
    let (head, tail) = stream.split_at(30);
    frames.push(head);
    assert_eq!(frames.next_frame().expect("frame"), None, "half a line");
    frames.push(tail);
    let (mut rv, mut initial) = (String::new(), true);
    let mut seen = Vec::new();
    while let Some(frame) = frames.next_frame().expect("frame") {
        let got = from_json(json_event::<ConfigMap>, &frame, &mut rv, &mut initial);
        seen.push(match got {
            Ok(Some(Event::InitApply(_))) => format!("init-apply {rv}"),
            Ok(Some(Event::InitDone)) => format!("init-done {rv}"),
            Ok(Some(Event::Apply(_))) => format!("apply {rv}"),
            Ok(Some(Event::Delete(_))) => format!("delete {rv}"),
            Ok(None) => format!("bookmark {rv}"),
            _ => "other".into(),
        });
    }
    assert_eq!(
        seen,
        [
            "init-apply 7",
            "init-done 9",
            "apply 11",
            "bookmark 15",
            "delete 16"
        ]
    );

    let gone = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410}}"#;
    let other = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}}"#;
    let unversioned = br#"{"type":"ADDED","object":{"metadata":{"name":"b"}}}"#;
    let decode = |frame: &[u8]| {
        let (mut rv, mut initial) = ("5".to_owned(), false);
        match from_json(json_event::<ConfigMap>, frame, &mut rv, &mut initial) {
            Err(Stop::Gone(_)) => "gone",
            Err(Stop::Status(_)) => "status",
            Err(Stop::Broken(_)) => "broken",
            Ok(_) => "event",
        }
    };
    assert_eq!(
        [
            decode(gone),
            decode(other),
            decode(unversioned),
            decode(b"not json")
        ],
        ["gone", "status", "broken", "broken"]
    );
}

#[test]
fn json_lists_give_their_version_and_continue_token() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let page = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"tok"},"items":[{"metadata":{"name":"a","resourceVersion":"40"}}]}"#;
    let (meta, items) = json_list::<ConfigMap>(page).expect("list");
    assert_eq!(
        (meta.resource_version.as_str(), meta.continue_.as_deref()),
        ("42", Some("tok"))
    );
    assert_eq!(items.len(), 1);
    let last = br#"{"metadata":{"resourceVersion":"43","continue":""},"items":null}"#;
    let (meta, items) = json_list::<ConfigMap>(last).expect("list");
    assert_eq!(
        (meta.resource_version.as_str(), meta.continue_),
        ("43", None)
    );
    assert!(items.is_empty());
}
