use super::*;

fn sample() -> Explanation {
    Explanation {
        object: ObjectRef {
            kind: "Deployment".into(),
            namespace: "ns".into(),
            name: "web".into(),
        },
        controller: "deployment-controller",
        state: State::Waiting,
        actions: vec![],
        waiting_on: vec![Waiting {
            reason: "NewPodsUnavailable",
            message: "1 of 3 new pods available".into(),
            objects: vec!["ReplicaSet/web-1".into()],
            since: Some("2026-11-28T10:00:00Z".into()),
        }],
        remedies: vec!["kubectl rollout undo deployment/web".into()],
    }
}

#[test]
fn json_has_the_documented_top_level_keys() {
    let v = serde_json::to_value(sample()).unwrap_or_default();
    let keys: Vec<&str> = v
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        [
            "actions",
            "controller",
            "object",
            "remedies",
            "state",
            "waitingOn"
        ]
    );
    assert_eq!(v["waitingOn"][0]["reason"], "NewPodsUnavailable");
    assert_eq!(v["waitingOn"][0]["since"], "2026-11-28T10:00:00Z");
    assert_eq!(v["state"], "waiting");
}

#[test]
fn text_lists_waits_objects_and_remedies() {
    assert_eq!(
        sample().render(),
        "deployment/web in ns (deployment-controller): waiting\n\
         Waiting on:\n  - NewPodsUnavailable: 1 of 3 new pods available (since 2026-11-28T10:00:00Z)\n\
         \x20     ReplicaSet/web-1\n\
         What you can do:\n  - kubectl rollout undo deployment/web\n"
    );
}
