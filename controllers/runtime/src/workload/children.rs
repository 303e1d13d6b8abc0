//! From a change of a child (a pod, a ReplicaSet) to the owners whose sync it concerns: the
//! event handler skeleton upstream's workload controllers share (`addPod`, `updatePod`,
//! `deletePod` in `pkg/controller/replicaset/replica_set.go`, `statefulset/stateful_set.go`,
//! `daemon/daemon_controller.go`, `job/job_controller.go`; `addReplicaSet`, `updateReplicaSet`,
//! `deleteReplicaSet` in `deployment/deployment_controller.go`).
//!
//! [`on_child_change`] owns the shape: the child's namespace, a child first seen already
//! terminating counts as deleted, a controlled child wakes its resolved owner and an orphan
//! every owner whose selector matches it, an update of the same resourceVersion (a resync) is
//! nothing, a changed controller reference wakes the old owner too, and an orphan whose labels
//! or reference changed wakes the matching owners. A controller implements [`ChildHandler`]:
//! how it resolves a reference, which owners match, how it enqueues, and the hooks where the
//! controllers differ (expectations, terminating updates, delayed requeues, orphan tracking).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

use crate::cache::Change;
use crate::workload::controller_ref::controller_of;

/// A controller's side of [`on_child_change`] for children of type `C`.
pub trait ChildHandler<C: Resource> {
    /// The owner kind (ReplicaSet, StatefulSet, Deployment, ...).
    type Owner;

    /// Upstream `resolveControllerRef`: the cached owner `r` names in `namespace`, if its kind
    /// and UID agree.
    fn resolve(&self, namespace: &str, r: &OwnerReference) -> Option<Arc<Self::Owner>>;

    /// The owners in the child's namespace whose selector matches the orphan `child`.
    fn matching(&self, child: &C) -> Vec<Arc<Self::Owner>>;

    /// Queues a sync of `owner`.
    fn enqueue(&self, owner: &Self::Owner);

    /// The resolved owner of `child`'s controller reference, if any.
    fn owner_of(&self, namespace: &str, child: &C) -> Option<Arc<Self::Owner>> {
        self.resolve(namespace, controller_of(child.meta())?)
    }

    /// A controlled child was created (or first seen): by default its owner is enqueued; a
    /// controller with expectations lowers them first.
    fn created(&self, owner: &Self::Owner) {
        self.enqueue(owner);
    }

    /// `child` is gone (`final_state`: the object was deleted) or began terminating.
    fn deleted(&self, namespace: &str, child: &C, final_state: bool);

    /// A new version of `new` that is terminating (or any other update the controller wants
    /// to take over): true when handled, which ends the update's handling.
    fn terminating_updated(&self, _namespace: &str, _old: &C, _new: &C) -> bool {
        false
    }

    /// The owner the child's controller reference named before an update that changed it.
    fn released(&self, owner: &Self::Owner, _new: &C) {
        self.enqueue(owner);
    }

    /// The owner of a controlled child that was updated.
    fn controlled_updated(&self, owner: &Arc<Self::Owner>, _old: &C, _new: &C) {
        self.enqueue(owner);
    }

    /// An orphan was added or updated, before the matching owners are enqueued.
    fn orphan_seen(&self, _child: &C) {}

    /// A child was added or updated whose controller reference names no cached owner (the
    /// owner is gone, or the cache has not seen it yet). Upstream's Job controller sends such a
    /// pod that still holds its tracking finalizer to the orphan worker ("we might have missed
    /// an event").
    fn owner_missing(&self, _child: &C) {}
}

/// Handles one change of a child (see the module documentation).
pub fn on_child_change<C, H>(handler: &H, change: Change<C>)
where
    C: Resource,
    H: ChildHandler<C>,
{
    let namespace = change.object().meta().namespace.clone().unwrap_or_default();
    match change {
        Change::Added(child) => {
            if child.meta().deletion_timestamp.is_some() {
                // Seen for the first time already terminating (e.g. after a restart): it must
                // not count as a creation.
                handler.deleted(&namespace, &child, false);
                return;
            }
            if let Some(r) = controller_of(child.meta()) {
                match handler.resolve(&namespace, r) {
                    Some(owner) => handler.created(&owner),
                    None => handler.owner_missing(&child),
                }
                return;
            }
            // An orphan: every matching owner may want to adopt it.
            handler.orphan_seen(&child);
            for owner in handler.matching(&child) {
                handler.enqueue(&owner);
            }
        }
        Change::Updated { old, new } => on_child_updated(handler, &namespace, &old, &new),
        Change::Deleted { obj, .. } => handler.deleted(&namespace, &obj, true),
    }
}

fn on_child_updated<C, H>(handler: &H, namespace: &str, old: &C, new: &C)
where
    C: Resource,
    H: ChildHandler<C>,
{
    let (old_meta, new_meta) = (old.meta(), new.meta());
    // Periodic resyncs deliver the same version: nothing changed.
    if old_meta.resource_version == new_meta.resource_version {
        return;
    }
    if handler.terminating_updated(namespace, old, new) {
        return;
    }
    let (old_ref, new_ref) = (controller_of(old_meta), controller_of(new_meta));
    let ref_changed = old_ref != new_ref;
    if ref_changed && let Some(owner) = old_ref.and_then(|r| handler.resolve(namespace, r)) {
        handler.released(&owner, new);
    }
    if let Some(r) = new_ref {
        match handler.resolve(namespace, r) {
            Some(owner) => handler.controlled_updated(&owner, old, new),
            None => handler.owner_missing(new),
        }
        return;
    }
    handler.orphan_seen(new);
    if ref_changed || old_meta.labels != new_meta.labels {
        for owner in handler.matching(new) {
            handler.enqueue(&owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    /// Records what the skeleton asked for; owners are ReplicaSets named by their UID.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<String>>,
        matching: Vec<&'static str>,
        take_terminating: bool,
    }

    impl Recorder {
        fn log(&self, s: String) {
            self.calls.lock().expect("calls").push(s);
        }
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.calls.lock().expect("calls"))
        }
    }

    fn rs(uid: &str) -> Arc<ReplicaSet> {
        let mut rs = ReplicaSet::default();
        rs.metadata.uid = Some(uid.into());
        Arc::new(rs)
    }

    fn uid(owner: &ReplicaSet) -> String {
        owner.metadata.uid.clone().unwrap_or_default()
    }

    impl ChildHandler<Pod> for Recorder {
        type Owner = ReplicaSet;
        fn resolve(&self, namespace: &str, r: &OwnerReference) -> Option<Arc<ReplicaSet>> {
            assert_eq!(namespace, "ns");
            (r.uid != "unknown").then(|| rs(&r.uid))
        }
        fn matching(&self, _child: &Pod) -> Vec<Arc<ReplicaSet>> {
            self.matching.iter().map(|u| rs(u)).collect()
        }
        fn enqueue(&self, owner: &ReplicaSet) {
            self.log(format!("enqueue {}", uid(owner)));
        }
        fn created(&self, owner: &ReplicaSet) {
            self.log(format!("created {}", uid(owner)));
        }
        fn deleted(&self, _namespace: &str, child: &Pod, final_state: bool) {
            let name = child.metadata.name.clone().unwrap_or_default();
            self.log(format!("deleted {name} final={final_state}"));
        }
        fn terminating_updated(&self, _namespace: &str, _old: &Pod, new: &Pod) -> bool {
            self.take_terminating && new.metadata.deletion_timestamp.is_some()
        }
        fn orphan_seen(&self, child: &Pod) {
            let name = child.metadata.name.clone().unwrap_or_default();
            self.log(format!("orphan {name}"));
        }
        fn owner_missing(&self, child: &Pod) {
            let name = child.metadata.name.clone().unwrap_or_default();
            self.log(format!("owner missing {name}"));
        }
    }

    fn pod(rv: &str, owner: Option<&str>, app: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some("p".into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.resource_version = Some(rv.into());
        p.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
        p.metadata.owner_references = owner.map(|u| {
            vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "rs".into(),
                uid: u.into(),
                controller: Some(true),
                block_owner_deletion: None,
            }]
        });
        Arc::new(p)
    }

    fn terminating(p: Arc<Pod>) -> Arc<Pod> {
        let mut p = (*p).clone();
        p.metadata.deletion_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().expect("ts")));
        Arc::new(p)
    }

    fn updated(h: &Recorder, old: Arc<Pod>, new: Arc<Pod>) -> Vec<String> {
        on_child_change(h, Change::Updated { old, new });
        h.take()
    }

    #[test]
    fn additions_wake_the_controller_or_the_matching_owners() {
        let h = Recorder {
            matching: vec!["m1", "m2"],
            ..Recorder::default()
        };
        on_child_change(&h, Change::Added(pod("1", Some("a"), "web")));
        assert_eq!(h.take(), ["created a"]);
        on_child_change(&h, Change::Added(pod("1", Some("unknown"), "web")));
        assert_eq!(
            h.take(),
            ["owner missing p"],
            "an unresolved controller: no owner is woken, the handler hears of it"
        );
        on_child_change(&h, Change::Added(pod("1", None, "web")));
        assert_eq!(h.take(), ["orphan p", "enqueue m1", "enqueue m2"]);
        on_child_change(&h, Change::Added(terminating(pod("1", Some("a"), "web"))));
        assert_eq!(h.take(), ["deleted p final=false"]);
        on_child_change(
            &h,
            Change::Deleted {
                obj: pod("1", Some("a"), "web"),
                final_state_unknown: false,
            },
        );
        assert_eq!(h.take(), ["deleted p final=true"]);
    }

    #[test]
    fn updates_wake_old_and_new_owners_and_skip_resyncs() {
        let h = Recorder {
            matching: vec!["m"],
            ..Recorder::default()
        };
        let same = updated(&h, pod("1", Some("a"), "web"), pod("1", Some("b"), "db"));
        assert!(same.is_empty(), "same resourceVersion: a resync");
        assert_eq!(
            updated(&h, pod("1", Some("a"), "web"), pod("2", Some("a"), "web")),
            ["enqueue a"]
        );
        assert_eq!(
            updated(&h, pod("1", Some("a"), "web"), pod("2", Some("b"), "web")),
            ["enqueue a", "enqueue b"]
        );
        assert_eq!(
            updated(&h, pod("1", Some("a"), "web"), pod("2", None, "web")),
            ["enqueue a", "orphan p", "enqueue m"],
            "released: the old owner and the matching ones"
        );
        assert_eq!(
            updated(&h, pod("1", None, "web"), pod("2", None, "web")),
            ["orphan p"],
            "an orphan whose labels did not change wakes nobody"
        );
        assert_eq!(
            updated(&h, pod("1", None, "web"), pod("2", None, "db")),
            ["orphan p", "enqueue m"]
        );
        assert_eq!(
            updated(
                &h,
                pod("1", Some("unknown"), "web"),
                pod("2", Some("unknown"), "web")
            ),
            ["owner missing p"],
            "a controlled pod whose owner is not cached"
        );
    }

    #[test]
    fn a_terminating_update_can_be_taken_over() {
        let h = Recorder {
            take_terminating: true,
            ..Recorder::default()
        };
        let old = pod("1", Some("a"), "web");
        assert!(updated(&h, old.clone(), terminating(pod("2", Some("a"), "web"))).is_empty());
        assert_eq!(updated(&h, old, pod("2", Some("a"), "web")), ["enqueue a"]);
    }
}
