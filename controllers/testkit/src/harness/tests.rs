use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::seen::lock;
use super::*;

#[tokio::test(start_paused = true)]
async fn waits_report_the_last_value_seen() {
    let n = Mutex::new(0);
    let err = wait_seen(
        "n to reach 100",
        Duration::from_secs(1),
        || async {
            let mut n = lock(&n);
            *n += 1;
            Ok(*n)
        },
        |n| *n >= 100,
        |n| format!("n={n}"),
    )
    .await
    .expect_err("times out");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("last seen: n=") && msg.contains("n to reach 100"),
        "{msg}"
    );

    let err = holds_seen(
        "n stays small",
        Duration::from_secs(10),
        || async {
            let mut n = lock(&n);
            *n += 1;
            Ok(*n)
        },
        |n| *n < 20,
        |n| format!("n={n}"),
    )
    .await
    .expect_err("breaks");
    assert!(format!("{err:#}").contains("last seen: n=20"), "{err:#}");
}

#[test]
fn merge_json_merges_objects_and_replaces_the_rest() {
    let mut base = json!({"a": {"b": 1, "c": [1]}, "d": "x"});
    merge_json(
        &mut base,
        &json!({"a": {"c": [2], "e": null}, "d": {"f": true}}),
    );
    assert_eq!(
        base,
        json!({"a": {"b": 1, "c": [2], "e": null}, "d": {"f": true}})
    );
    let c = job_condition(
        "Complete",
        "CompletionsReached",
        jiff::Timestamp::UNIX_EPOCH,
    );
    let c: k8s_openapi::api::batch::v1::JobCondition =
        serde_json::from_value(c).expect("a Job condition");
    assert_eq!((c.type_.as_str(), c.status.as_str()), ("Complete", "True"));
}

#[test]
fn accessors_read_pods() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "uid": "u", "resourceVersion": "42",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "X", "name": "a", "uid": "other"},
                {"apiVersion": "v1", "kind": "X", "name": "b", "uid": "ctl", "controller": true},
            ]},
        "spec": {"containers": [{"name": "c", "image": "img"}]},
        "status": ready_status(jiff::Timestamp::UNIX_EPOCH),
    }))
    .expect("pod");
    assert_eq!(controller_uid(&pod), Some("ctl"));
    assert!(is_ready(&pod) && is_active(&pod) && !is_terminal(&pod));
    assert_eq!(pod_image(&pod), "img");
    assert_eq!(rv(&pod).expect("rv"), 42);
    assert!(describe_pod(&pod).contains("phase=\"Running\" ready=true"));
    assert!(ensure_eq(1, 2, "x").is_err());
}
