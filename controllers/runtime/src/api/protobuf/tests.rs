//! The fixtures are one API server's answers (kube-apiserver v1.37, the local plane) to the
//! same requests in both encodings: `application/json` and `application/vnd.kubernetes.protobuf`.
//! Every protobuf decode is compared with the JSON decoder's result for the same object.

use super::*;
use crate::cache::projection::{Projectable, pod as pod_fields};

fn json<K: serde::de::DeserializeOwned>(bytes: &[u8]) -> K {
    serde_json::from_slice(bytes).expect("fixture JSON decodes")
}

/// Both decodes of a pod, projected as a cache keeping everything would.
fn projected(mut p: cached::Pod) -> cached::Pod {
    p.project(pod_fields::ALL);
    p
}

#[test]
fn a_pod_with_every_read_field_decodes_as_its_json_does() {
    let env = envelope(fixture!("pod-rich.pb")).expect("envelope");
    assert_eq!((env.api_version.as_str(), env.kind.as_str()), ("v1", "Pod"));
    let from_pb = pod(env.raw).expect("pod");
    let from_json: cached::Pod = json(fixture!("pod-rich.json"));
    assert_eq!(projected(from_pb.clone()), projected(from_json.clone()));

    // The fixture exercises what it is meant to: spot checks of the decoded values.
    let m = &from_pb.metadata;
    assert_eq!(m.name.as_deref(), Some("rich"));
    assert_eq!(m.generate_name, None, "empty in protobuf, absent in JSON");
    assert!(m.deletion_timestamp.is_some());
    assert_eq!(
        m.deletion_grace_period_seconds,
        Some(0),
        "a pointer: zero is kept"
    );
    assert_eq!(
        m.finalizers.as_deref(),
        Some(&["example.com/hold".to_string()][..])
    );
    assert_eq!(
        m.annotations
            .as_ref()
            .and_then(|a| a.get("empty"))
            .map(String::as_str),
        Some(""),
        "an empty annotation value stays"
    );
    let owners = m.owner_references.as_deref().unwrap_or_default();
    assert_eq!(owners.len(), 2);
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(owners[1].controller, None);
    let spec = from_pb.spec.as_ref().expect("spec");
    assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    assert_eq!(
        spec.init_containers
            .as_ref()
            .map(|c| c[1].restart_policy.as_deref()),
        Some(Some("Always"))
    );
    let claims: Vec<_> = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| (c.claim_name.as_str(), c.read_only))
        .collect();
    assert_eq!(claims, [("data-web-0", None), ("shared", Some(true))]);
    let status = from_pb.status.as_ref().expect("status");
    let terminated = status
        .container_statuses
        .as_ref()
        .expect("container statuses")[0]
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    assert_eq!(terminated.exit_code, 137);
    assert!(terminated.finished_at.is_some());
    let ready = &status.conditions.as_ref().expect("conditions")[0];
    assert_eq!(ready.type_, "Ready");
    assert!(ready.last_transition_time.is_some());
    assert_eq!(
        (ready.reason.as_deref(), ready.message.as_deref()),
        (Some("PodFailed"), Some("m"))
    );

    // Decoded lists carry no spare capacity (they stay as long as the pod is cached).
    let conditions = status.conditions.as_ref().expect("conditions");
    let containers = &from_pb.spec.as_ref().expect("spec").containers;
    assert_eq!(
        [
            (conditions.len(), conditions.capacity()),
            (containers.len(), containers.capacity())
        ],
        [(2, 2), (containers.len(), containers.len())]
    );
    assert!(!containers.is_empty());
}

#[test]
fn the_pod_affinity_projection_keeps_node_affinity_only() {
    let env = envelope(fixture!("pod-rich.pb")).expect("envelope");
    let from_json: cached::Pod = json(fixture!("pod-rich.json"));
    let whole = from_json
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .expect("affinity in the JSON");
    assert!(
        whole.pod_anti_affinity.is_some(),
        "the fixture has a pod anti-affinity"
    );
    let kept = projected(pod(env.raw).expect("pod"));
    let affinity = kept
        .spec
        .and_then(|s| s.affinity)
        .expect("node affinity kept");
    assert_eq!(affinity.pod_anti_affinity, None);
    assert_eq!(affinity.node_affinity, whole.node_affinity);
}

#[test]
fn nodes_decode_as_their_json_does() {
    for (pb, js) in [
        (fixture!("node-tainted.pb"), fixture!("node-tainted.json")),
        (
            fixture!("node-kwok-node-0.pb"),
            fixture!("node-kwok-node-0.json"),
        ),
    ] {
        let env = envelope(pb).expect("envelope");
        assert_eq!(env.kind, "Node");
        let from_pb = node(env.raw).expect("node");
        let from_json: cached::Node = json(js);
        assert_eq!(from_pb, from_json);
        assert_eq!(
            from_pb.metadata.annotations, None,
            "a node's annotations are not kept"
        );
    }
    let wire: serde_json::Value = json(fixture!("node-kwok-node-0.json"));
    assert!(
        wire["metadata"]["annotations"].is_object(),
        "the fixture has annotations to drop"
    );
    let tainted = node(envelope(fixture!("node-tainted.pb")).expect("envelope").raw).expect("node");
    let spec = tainted.spec.expect("spec");
    assert_eq!(spec.unschedulable, Some(true));
    assert_eq!(spec.taints.as_ref().map(Vec::len), Some(2));
}

#[test]
fn a_list_decodes_as_its_json_does() {
    let (meta, items) = list(fixture!("list2.pb"), "PodList", pod).expect("list");
    let from_json: serde_json::Value = json(fixture!("list2.json"));
    assert_eq!(
        meta.resource_version,
        from_json["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
    );
    assert_eq!(
        meta.continue_.as_deref(),
        from_json["metadata"]["continue"].as_str()
    );
    let want: Vec<cached::Pod> = serde_json::from_value(from_json["items"].clone()).expect("items");
    assert_eq!(items.len(), 2);
    assert_eq!(
        items.into_iter().map(projected).collect::<Vec<_>>(),
        want.into_iter().map(projected).collect::<Vec<_>>()
    );
    assert!(
        list(fixture!("list2.pb"), "NodeList", node).is_err(),
        "the wrong kind of list is refused"
    );
}

#[test]
fn a_watch_stream_decodes_as_its_json_does() {
    let stream = fixture!("watch.pb");
    // Fed in awkward pieces, as a body arrives.
    let mut frames = Frames::default();
    let mut events = Vec::new();
    for chunk in stream.chunks(333) {
        frames.push(chunk);
        while let Some(frame) = frames.next_frame().expect("frame") {
            let (type_, object) = watch_event(&frame).expect("event");
            let env = envelope(object).expect("envelope");
            assert_eq!(env.kind, "Pod");
            events.push((type_, pod(env.raw).expect("pod")));
        }
    }
    assert_eq!(frames.pending(), 0, "nothing left over");
    let text = std::str::from_utf8(fixture!("watch.json")).expect("utf-8");
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["MODIFIED", "MODIFIED", "DELETED", "BOOKMARK"]);
    // A bookmark carries a resourceVersion only (its JSON is not a valid pod: `containers`
    // is null); compared by that.
    let (_, bookmark) = events.pop().expect("bookmark");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("event line"))
        .collect();
    assert_eq!(
        bookmark.metadata.resource_version.as_deref(),
        lines[3]["object"]["metadata"]["resourceVersion"].as_str()
    );
    let want: Vec<(String, cached::Pod)> = lines[..3]
        .iter()
        .map(|v| {
            let type_ = v["type"].as_str().unwrap_or_default().to_string();
            let object = serde_json::from_value(v["object"].clone()).expect("object");
            (type_, object)
        })
        .collect();
    assert_eq!(
        events
            .into_iter()
            .map(|(t, p)| (t, projected(p)))
            .collect::<Vec<_>>(),
        want.into_iter()
            .map(|(t, p)| (t, projected(p)))
            .collect::<Vec<_>>()
    );
}

#[test]
fn an_error_status_decodes() {
    let env = envelope(fixture!("status-404.pb")).expect("envelope");
    assert_eq!(env.kind, "Status");
    let st = status(env.raw).expect("status");
    assert_eq!(st.code, 404);
    assert_eq!(st.reason, "NotFound");
    assert!(st.message.contains("missing"), "{}", st.message);
    assert!(st.is_failure());
}

#[test]
fn an_error_status_keeps_the_details_its_json_has() {
    let env = envelope(fixture!("status-invalid.pb")).expect("envelope");
    let from_pb = status(env.raw).expect("status");
    let mut from_json: kube::core::Status = json(fixture!("status-invalid.json"));
    // An error's list metadata is empty and not read.
    from_json.metadata = None;
    let details = from_pb.details.as_ref().expect("details decoded");
    assert_eq!(details.causes.len(), 1);
    assert_eq!(details.causes[0].field, "metadata.name");
    assert_eq!(from_pb, from_json);
    // The error path of a write reads the same from either encoding.
    let mut from_json = error_status(422, fixture!("status-invalid.json"));
    from_json.metadata = None;
    assert_eq!(error_status(422, fixture!("status-invalid.pb")), from_json);
}

#[test]
fn a_write_answer_yields_the_identity_its_json_has() {
    let from_pb = identity(fixture!("pod-rich.pb")).expect("identity");
    let pod: k8s_openapi::api::core::v1::Pod = json(fixture!("pod-rich.json"));
    let m = pod.metadata;
    assert_eq!(from_pb.name.as_deref(), Some("rich"));
    assert_eq!(
        (
            from_pb.name,
            from_pb.namespace,
            from_pb.uid,
            from_pb.resource_version,
            from_pb.creation_timestamp
        ),
        (
            m.name,
            m.namespace,
            m.uid,
            m.resource_version,
            m.creation_timestamp
        )
    );
    let node = identity(fixture!("node-tainted.pb")).expect("identity of a node");
    assert!(node.name.is_some() && node.namespace.is_none() && node.uid.is_some());
    assert!(identity(&fixture!("pod-rich.pb")[1..]).is_err(), "no magic");
}

#[test]
fn damaged_input_is_an_error_not_a_panic() {
    let whole = fixture!("pod-rich.pb");
    assert!(envelope(&whole[1..]).is_err(), "no magic");
    let env = envelope(whole).expect("envelope");
    // Every truncation of the message either fails or decodes a prefix; none panics.
    let mut failed = 0;
    for cut in 0..env.raw.len() {
        if pod(&env.raw[..cut]).is_err() {
            failed += 1;
        }
    }
    assert!(failed > 0);
    // A length running past the end.
    assert!(pod(&[0x0a, 0x7f, 0x01]).is_err());
    // A varint that never ends.
    let mut endless = vec![0x38];
    endless.extend([0xff; 11]);
    assert!(pod(&endless).is_err());
    // An unsupported wire type (3, start group).
    assert!(pod(&[0x0b]).is_err());
    // Not UTF-8 where a string is expected (metadata.name).
    assert!(pod(&[0x0a, 0x03, 0x0a, 0x01, 0xff]).is_err());
}

#[test]
fn frames_wait_for_a_whole_frame_and_refuse_absurd_lengths() {
    let mut f = Frames::default();
    f.push(&[0, 0, 0, 3, b'a']);
    assert_eq!(f.next_frame(), Ok(None));
    f.push(b"bc");
    assert_eq!(f.next_frame(), Ok(Some(b"abc".to_vec())));
    assert_eq!(f.next_frame(), Ok(None));
    f.push(&[0xff, 0xff, 0xff, 0xff]);
    assert!(f.next_frame().is_err());
}
