//! The pod encoder. Expected bytes are written out by hand from the field numbers of upstream's
//! `generated.proto` (k8s.io/api core/v1, k8s.io/apimachinery), not produced by the encoder.

use super::encode::{EncodeError, pod, pod_json};
use serde_json::{Value, json};

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn encoded(v: &Value) -> Vec<u8> {
    match pod(v) {
        Ok(b) => b,
        Err(e) => panic!("encoding failed: {e}"),
    }
}

#[test]
fn a_small_pod_is_written_byte_for_byte() {
    let v = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "a"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let mut want = b"k8s\0".to_vec();
    // runtime.Unknown: typeMeta (1) = {apiVersion (1) "v1", kind (2) "Pod"}.
    want.extend([
        0x0a, 0x09, 0x0a, 0x02, b'v', b'1', 0x12, 0x03, b'P', b'o', b'd',
    ]);
    // raw (2): Pod {metadata (1) {name (1) "a"}, spec (2) {containers (2) {image (2), name (1)}}},
    // fields in the order of the JSON object's keys (serde_json keeps them sorted).
    want.extend([0x12, 0x0f]);
    want.extend([0x0a, 0x03, 0x0a, 0x01, b'a']);
    want.extend([0x12, 0x08, 0x12, 0x06, 0x12, 0x01, b'i', 0x0a, 0x01, b'c']);
    assert_eq!(encoded(&v), want);
}

#[test]
fn special_encodings_follow_upstreams_messages() {
    let v = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {
            "priority": -5,
            "automountServiceAccountToken": false,
            "volumes": [{"name": "v", "emptyDir": {}}],
            "containers": [{"name": "c",
                "resources": {"limits": {"cpu": "500m"}},
                "livenessProbe": {"httpGet": {"port": 8080}},
                "readinessProbe": {"tcpSocket": {"port": "http"}}}]}});
    let b = encoded(&v);
    // labels (ObjectMeta 11): entry {key (1) "app", value (2) "web"}.
    assert!(contains(
        &b,
        &[
            0x5a, 0x0a, 0x0a, 0x03, b'a', b'p', b'p', 0x12, 0x03, b'w', b'e', b'b'
        ]
    ));
    // priority (PodSpec 25, int32): -5 as a ten-byte varint.
    assert!(contains(
        &b,
        &[
            0xc8, 0x01, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
        ]
    ));
    // automountServiceAccountToken (PodSpec 21): false is written, not dropped.
    assert!(contains(&b, &[0xa8, 0x01, 0x00]));
    // volumes (PodSpec 1): Volume {name (1), volumeSource (2) {emptyDir (2) {}}}.
    assert!(contains(
        &b,
        &[0x0a, 0x07, 0x0a, 0x01, b'v', 0x12, 0x02, 0x12, 0x00]
    ));
    // resources (Container 8) {limits (1) {key "cpu", value Quantity {string (1) "500m"}}}.
    assert!(contains(
        &b,
        &[
            0x42, 0x0f, 0x0a, 0x0d, 0x0a, 0x03, b'c', b'p', b'u', 0x12, 0x06, 0x0a, 0x04, b'5',
            b'0', b'0', b'm'
        ]
    ));
    // livenessProbe (Container 10) {handler (1) {httpGet (2) {port (2) IntOrString {type (1)
    // 0, intVal (2) 8080}}}}.
    assert!(contains(
        &b,
        &[
            0x52, 0x0b, 0x0a, 0x09, 0x12, 0x07, 0x12, 0x05, 0x08, 0x00, 0x10, 0x90, 0x3f
        ]
    ));
    // readinessProbe (Container 11) {handler {tcpSocket (3) {port (1) {type 1, strVal (3)
    // "http"}}}}.
    assert!(contains(
        &b,
        &[
            0x5a, 0x0e, 0x0a, 0x0c, 0x1a, 0x0a, 0x0a, 0x08, 0x08, 0x01, 0x1a, 0x04, b'h', b't',
            b't', b'p'
        ]
    ));
}

#[test]
fn what_the_table_does_not_know_is_refused_with_its_path() {
    let cases = [
        (
            json!({"spec": {"containers": [{"name": "c", "bogus": 1}]}}),
            "pod.spec.containers[0].bogus",
        ),
        (json!({"status": {"phase": "Pending"}}), "pod.status"),
        (
            json!({"metadata": {"creationTimestamp": "2026-11-28T00:00:00Z"}}),
            "pod.metadata.creationTimestamp",
        ),
        (json!({"metadata": {"name": 5}}), "pod.metadata.name"),
        (
            json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 1.5}]}]}}),
            "pod.spec.containers[0].ports[0].containerPort",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "Pod"}),
            "apiVersion",
        ),
    ];
    for (v, path) in cases {
        match pod(&v) {
            Err(EncodeError { path: p, .. }) => assert_eq!(p, path, "{v}"),
            Ok(_) => panic!("encoded {v}"),
        }
    }
}

/// The testkit's rich pod, with a finalizer and an owner reference added.
fn rich_pod() -> Value {
    let mut v = rkcm_testkit::builders::rich_pod();
    assert!(v.is_object(), "the testkit's rich pod parses");
    v["metadata"]["finalizers"] = json!(["batch.kubernetes.io/job-tracking"]);
    v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": "web", "uid": "u-1", "controller": true, "blockOwnerDeletion": true}]);
    v
}

#[test]
fn a_rich_pod_reads_back_as_the_json_it_was_written_from() {
    let v = rich_pod();
    let back = pod_json(&encoded(&v)).expect("reads back");
    assert_eq!(back, v);
}

#[test]
fn the_pod_decoder_of_the_caches_reads_what_the_encoder_wrote() {
    // An independent reader: the hand-written decoder of the cached pod fields.
    let v = rich_pod();
    let b = encoded(&v);
    let env = super::envelope(&b).expect("envelope");
    let from_pb = super::pod(env.raw).expect("decodes");
    let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(v).expect("typed pod");
    let mut from_json = crate::cache::cached::Pod::from(typed);
    // The cache's decoder reads node affinity only; pod (anti-)affinity is skipped unread.
    if let Some(a) = from_json.spec.as_mut().and_then(|s| s.affinity.as_mut()) {
        a.pod_anti_affinity = None;
    }
    assert_eq!(from_pb, from_json);
}

#[test]
fn every_message_lists_its_fields_sorted_for_lookup() {
    for m in super::pod_schema::MESSAGES {
        assert!(
            m.fields.windows(2).all(|w| w[0].json < w[1].json),
            "{} is not sorted",
            m.name
        );
    }
}
