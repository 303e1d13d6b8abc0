use super::*;
use crate::testutil::*;

fn set_ref(uid: &str, controller: bool) -> OwnerReference {
    owner("apps/v1", "StatefulSet", "web", uid, controller)
}

fn pod_ref(name: &str, uid: &str, controller: bool) -> OwnerReference {
    owner("v1", "Pod", name, uid, controller)
}

/// The owner UIDs a claim ends up with.
fn uids(c: &PersistentVolumeClaim) -> Vec<String> {
    c.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.clone())
        .collect()
}

#[test]
fn owner_refs_follow_the_policy_table() {
    // (whenDeleted, whenScaled, pod in range?) -> owner UIDs wanted.
    let cases: &[(&str, &str, bool, &[&str])] = &[
        ("Retain", "Retain", true, &[]),
        ("Retain", "Retain", false, &[]),
        ("Delete", "Retain", true, &[SET_UID]),
        ("Delete", "Retain", false, &[SET_UID]),
        ("Retain", "Delete", true, &[]),
        ("Retain", "Delete", false, &["pod-uid-2"]),
        ("Delete", "Delete", true, &[SET_UID]),
        ("Delete", "Delete", false, &["pod-uid-2"]),
    ];
    for (wd, ws, in_range, want) in cases {
        let s = with_policy(set(if *in_range { 3 } else { 2 }), wd, ws);
        let p = pod(&s, 2, "r", State::Ready(10));
        // From every starting point the update reaches the wanted refs, which are then
        // up to date.
        for start in [
            vec![],
            vec![set_ref(SET_UID, true)],
            vec![pod_ref("web-2", "pod-uid-2", true)],
            vec![set_ref(SET_UID, true), pod_ref("web-2", "pod-uid-2", true)],
            vec![set_ref(SET_UID, false)],
        ] {
            let mut c = claim("data-web-2", start.clone());
            update_claim_owner_refs(&mut c, &s, &p);
            assert_eq!(
                uids(&c),
                *want,
                "{wd}/{ws} in range {in_range} from {start:?}"
            );
            assert!(is_claim_owner_up_to_date(&c, &s, &p));
            let all_controllers = c
                .metadata
                .owner_references
                .iter()
                .flatten()
                .all(|r| r.controller == Some(true) && r.block_owner_deletion == Some(true));
            assert!(all_controllers);
        }
    }
}

#[test]
fn non_controller_refs_of_ours_need_an_update() {
    let s = with_policy(set(3), "Delete", "Retain");
    let p = pod(&s, 0, "r", State::Ready(1));
    assert!(!is_claim_owner_up_to_date(
        &claim("c", vec![set_ref(SET_UID, false)]),
        &s,
        &p
    ));
    assert!(is_claim_owner_up_to_date(
        &claim("c", vec![set_ref(SET_UID, true)]),
        &s,
        &p
    ));
}

#[test]
fn stale_refs_leave_the_claim_alone() {
    let s = with_policy(set(3), "Delete", "Delete");
    let p = pod(&s, 0, "r", State::Ready(1));
    let old_set = claim("c", vec![set_ref("old-set-uid", true)]);
    assert!(is_claim_owner_up_to_date(&old_set, &s, &p));
    let old_pod = claim("c", vec![pod_ref("web-0", "old-pod", true)]);
    assert!(is_claim_owner_up_to_date(&old_pod, &s, &p));
    assert!(claim_is_stale_for_pod(&old_pod, &p));
    // A pod not yet created has no UID: any ref to its name is stale.
    let placeholder = Pod::from(crate::identity::new_pod(&s, 0));
    assert!(claim_is_stale_for_pod(&old_pod, &placeholder));
    assert!(!claim_is_stale_for_pod(&claim("c", vec![]), &placeholder));
    assert!(!claim_is_stale_for_pod(
        &claim("c", vec![pod_ref("web-0", "pod-uid-0", true)]),
        &p
    ));
}

#[test]
fn a_foreign_controller_makes_us_step_back() {
    let s = with_policy(set(3), "Delete", "Retain");
    let p = pod(&s, 0, "r", State::Ready(1));
    let foreign = owner("example.com/v1", "Thing", "t", "t-uid", true);
    // Only the foreign controller: nothing to do.
    let c = claim("c", vec![foreign.clone()]);
    assert!(has_unexpected_controller(&c, &s, &p));
    assert!(is_claim_owner_up_to_date(&c, &s, &p));
    // Ours next to it: strip ours, add nothing.
    let mut c = claim("c", vec![foreign.clone(), set_ref(SET_UID, true)]);
    assert!(!is_claim_owner_up_to_date(&c, &s, &p));
    update_claim_owner_refs(&mut c, &s, &p);
    assert_eq!(uids(&c), vec!["t-uid"]);
    // Retain/Retain never sees a conflict.
    let r = set(3);
    assert!(!has_unexpected_controller(
        &claim("c", vec![foreign]),
        &r,
        &p
    ));
}
