//! Another controller-manager at work on this process's objects.
//!
//! Two managers running one controller fight (duplicate ReplicaSets, pods created twice and
//! deleted again), and neither knows of the other. The API server records who wrote what:
//! every write leaves a `managedFields` entry named after the writer's User-Agent, so upstream
//! kube-controller-manager's writes carry the field manager `kube-controller-manager` (rkcm's
//! carry `rkcm`). When an informer applies an object whose `managedFields` show such a write,
//! made after this process started the controller that owns that write, the write is handed to
//! the process (a channel [`install`] returns), which counts it and records an event.
//!
//! Which controller a write belongs to follows from the object's kind, the subresource written
//! and the controller owner's kind ([`writer_controller`]): a ReplicaSet's status is the
//! ReplicaSet controller's, a ReplicaSet's spec under a Deployment the Deployment controller's.
//! Pods are not inspected (their cache decodes them without `managedFields`), so PodGC, which
//! writes only pods, is not covered; every other controller writes its own object's status on
//! each change and is.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError, RwLock};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use prometheus::{IntCounterVec, Opts};
use tokio::sync::mpsc;

use crate::events::{EventRecorder, EventType};
use crate::metrics::{get_or_register, register};

/// The field manager of upstream kube-controller-manager's writes (its User-Agent's program).
pub const OTHER_MANAGER: &str = "kube-controller-manager";
/// The reason of the Warning event recorded on an object another manager wrote.
pub const REASON: &str = "OtherControllerManager";
/// At most this many objects are remembered as reported; past it the memory starts over
/// (an object may then be reported once more).
const REMEMBERED: usize = 10_000;

/// The controller (canonical `--controllers` name) whose write to `subresource` (`""` for the
/// object itself) of an object of `kind`, controlled by an owner of `owner_kind`, this is;
/// `None` for writes no workload controller makes (a scale by the autoscaler, the garbage
/// collector's owner references, a person's edit).
pub fn writer_controller(
    kind: &str,
    subresource: &str,
    owner_kind: Option<&str>,
) -> Option<&'static str> {
    match (kind, subresource, owner_kind) {
        ("ReplicaSet", "status", _) => Some("replicaset-controller"),
        ("ReplicaSet", "", Some("Deployment")) | ("Deployment", "status", _) => {
            Some("deployment-controller")
        }
        ("ReplicationController", "status", _) => Some("replicationcontroller-controller"),
        ("StatefulSet", "status", _) | ("ControllerRevision", "", Some("StatefulSet")) => {
            Some("statefulset-controller")
        }
        ("DaemonSet", "status", _) | ("ControllerRevision", "", Some("DaemonSet")) => {
            Some("daemonset-controller")
        }
        ("Job", "status", _) => Some("job-controller"),
        ("Job", "", Some("CronJob")) | ("CronJob", "status", _) => Some("cronjob-controller"),
        _ => None,
    }
}

/// One write by another manager to an object of a controller this process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignWrite {
    pub controller: &'static str,
    pub manager: String,
    /// `""` for the object itself.
    pub subresource: String,
    pub time: Timestamp,
}

impl ForeignWrite {
    /// The event's message.
    pub fn message(&self, kind: &str) -> String {
        let what = if self.subresource.is_empty() {
            format!("this {kind}")
        } else {
            format!("the {} of this {kind}", self.subresource)
        };
        format!(
            "{} wrote {what} at {} while rkcm runs the {}: two controller-managers must not run \
             one controller (switch it off in one of them)",
            self.manager, self.time, self.controller
        )
    }
}

/// PURE: the writes recorded in `meta`'s `managedFields` that [`OTHER_MANAGER`] made to an
/// object of `kind` for a controller this process runs, after that controller started
/// (`started(controller)`, `None` when it does not run here). An entry without a time, or
/// from the second the controller started or before, is not counted: the other manager may
/// have written it just before it handed the controller over.
pub fn foreign_writes(
    kind: &str,
    meta: &ObjectMeta,
    started: impl Fn(&str) -> Option<Timestamp>,
) -> Vec<ForeignWrite> {
    let owner_kind = meta
        .owner_references
        .as_ref()
        .and_then(|refs| refs.iter().find(|r| r.controller == Some(true)))
        .map(|r| r.kind.as_str());
    let Some(entries) = meta.managed_fields.as_ref() else {
        return Vec::new();
    };
    entries
        .iter()
        .filter(|e| e.manager.as_deref() == Some(OTHER_MANAGER))
        .filter(|e| e.operation.as_deref() == Some("Update"))
        .filter_map(|e| {
            let subresource = e.subresource.clone().unwrap_or_default();
            let controller = writer_controller(kind, &subresource, owner_kind)?;
            let time = e.time.as_ref()?.0;
            let since = started(controller)?;
            (time.as_second() > since.as_second()).then(|| ForeignWrite {
                controller,
                manager: OTHER_MANAGER.to_owned(),
                subresource,
                time,
            })
        })
        .collect()
}

/// A foreign write found by an informer, with the object it was found on.
#[derive(Debug, Clone)]
pub struct Found {
    pub object: ObjectReference,
    pub write: ForeignWrite,
}

struct Watch {
    started: RwLock<HashMap<&'static str, Timestamp>>,
    /// The newest write reported per object UID, so one write is reported once.
    reported: Mutex<HashMap<String, Timestamp>>,
    tx: mpsc::UnboundedSender<Found>,
}

static WATCH: OnceLock<Watch> = OnceLock::new();

/// Turns the watch on for this process: from now on informers hand every foreign write they
/// see to the returned receiver. `None` if it was installed before.
pub fn install() -> Option<mpsc::UnboundedReceiver<Found>> {
    let (tx, rx) = mpsc::unbounded_channel();
    let watch = Watch {
        started: RwLock::new(HashMap::new()),
        reported: Mutex::new(HashMap::new()),
        tx,
    };
    WATCH.set(watch).ok().map(|()| rx)
}

/// Records that this process started `controller` at `at`: another manager's writes for it
/// from then on are reported.
pub fn controller_started(controller: &'static str, at: Timestamp) {
    if let Some(watch) = WATCH.get() {
        watch
            .started
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(controller, at);
    }
}

/// Called by the informers for each object they apply, before `managedFields` are dropped.
/// Cheap when nothing is installed or the object has no entry of another manager.
pub(crate) fn observe<K: Resource<DynamicType = ()>>(obj: &K) {
    let Some(watch) = WATCH.get() else {
        return;
    };
    let meta = obj.meta();
    let other = meta.managed_fields.as_ref().is_some_and(|m| {
        m.iter()
            .any(|e| e.manager.as_deref() == Some(OTHER_MANAGER))
    });
    if !other {
        return;
    }
    let kind = K::kind(&());
    let writes = {
        let started = watch.started.read().unwrap_or_else(PoisonError::into_inner);
        foreign_writes(&kind, meta, |c| started.get(c).copied())
    };
    let Some(newest) = writes.iter().map(|w| w.time).max() else {
        return;
    };
    let uid = meta.uid.clone().unwrap_or_default();
    {
        let mut reported = watch
            .reported
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if reported.get(&uid).is_some_and(|seen| *seen >= newest) {
            return;
        }
        if reported.len() >= REMEMBERED {
            reported.clear();
        }
        reported.insert(uid, newest);
    }
    let object = crate::events::object_reference(obj);
    for write in writes.into_iter().filter(|w| w.time == newest) {
        // A closed receiver means the process is shutting down.
        let _ = watch.tx.send(Found {
            object: object.clone(),
            write,
        });
    }
}

/// `rkcm_other_manager_writes_total{controller,manager}`.
fn writes_counter() -> Option<&'static IntCounterVec> {
    static COUNTER: OnceLock<Option<IntCounterVec>> = OnceLock::new();
    get_or_register(&COUNTER, "handover", || {
        IntCounterVec::new(
            Opts::new(
                "rkcm_other_manager_writes_total",
                "Writes by another controller-manager to objects of a controller rkcm runs, \
                 made after rkcm started that controller.",
            ),
            &["controller", "manager"],
        )
        .map(register)
    })
}

/// Reports each write `found` brings until its sender is gone: counted in
/// `rkcm_other_manager_writes_total{controller,manager}`, logged as a warning and recorded as
/// a Warning event [`REASON`] on the object.
pub async fn report(mut found: mpsc::UnboundedReceiver<Found>, events: EventRecorder) {
    let counter = writes_counter();
    // Registered with no series before the first write, so the name is there to alert on.
    while let Some(Found { object, write }) = found.recv().await {
        if let Some(c) = counter {
            c.with_label_values(&[write.controller, &write.manager])
                .inc();
        }
        let kind = object.kind.clone().unwrap_or_default();
        let message = write.message(&kind);
        tracing::warn!(
            controller = write.controller,
            manager = %write.manager,
            kind = %kind,
            namespace = object.namespace.as_deref().unwrap_or_default(),
            name = object.name.as_deref().unwrap_or_default(),
            subresource = %write.subresource,
            time = %write.time,
            "another controller-manager wrote an object of a controller rkcm runs"
        );
        events.event(&object, EventType::Warning, REASON, &message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        ManagedFieldsEntry, OwnerReference, Time,
    };

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn entry(manager: &str, op: &str, sub: Option<&str>, time: Option<&str>) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(op.into()),
            subresource: sub.map(Into::into),
            time: time.map(|t| Time(at(t))),
            ..Default::default()
        }
    }

    fn meta(owner: Option<&str>, entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        ObjectMeta {
            owner_references: owner.map(|kind| {
                vec![OwnerReference {
                    kind: kind.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            managed_fields: Some(entries),
            ..Default::default()
        }
    }

    const START: &str = "2026-12-05T16:00:00Z";

    fn running(controller: &str) -> Option<Timestamp> {
        [
            "replicaset-controller",
            "deployment-controller",
            "cronjob-controller",
        ]
        .contains(&controller)
        .then(|| at(START))
    }

    #[test]
    fn writer_controllers_by_kind_subresource_and_owner() {
        let cases: &[(&str, &str, Option<&str>, Option<&str>)] = &[
            (
                "ReplicaSet",
                "status",
                Some("Deployment"),
                Some("replicaset-controller"),
            ),
            (
                "ReplicaSet",
                "",
                Some("Deployment"),
                Some("deployment-controller"),
            ),
            ("ReplicaSet", "", None, None),
            ("ReplicaSet", "scale", None, None),
            ("Deployment", "status", None, Some("deployment-controller")),
            ("Deployment", "scale", None, None),
            ("Deployment", "", None, None),
            (
                "ReplicationController",
                "status",
                None,
                Some("replicationcontroller-controller"),
            ),
            (
                "StatefulSet",
                "status",
                None,
                Some("statefulset-controller"),
            ),
            (
                "ControllerRevision",
                "",
                Some("StatefulSet"),
                Some("statefulset-controller"),
            ),
            (
                "ControllerRevision",
                "",
                Some("DaemonSet"),
                Some("daemonset-controller"),
            ),
            ("DaemonSet", "status", None, Some("daemonset-controller")),
            ("Job", "status", Some("CronJob"), Some("job-controller")),
            ("Job", "", Some("CronJob"), Some("cronjob-controller")),
            ("Job", "", None, None),
            ("CronJob", "status", None, Some("cronjob-controller")),
            ("Pod", "", Some("ReplicaSet"), None),
        ];
        for (kind, sub, owner, want) in cases {
            assert_eq!(
                writer_controller(kind, sub, *owner),
                *want,
                "{kind} {sub:?} owned by {owner:?}"
            );
        }
    }

    #[test]
    fn only_the_other_managers_updates_after_the_controller_started_count() {
        let later = "2026-12-05T16:00:07Z";
        let m = meta(
            Some("Deployment"),
            vec![
                entry("rkcm", "Update", Some("status"), Some(later)),
                entry(OTHER_MANAGER, "Update", Some("status"), Some(later)),
                entry(OTHER_MANAGER, "Update", None, Some(START)),
                entry(OTHER_MANAGER, "Apply", None, Some(later)),
                entry(OTHER_MANAGER, "Update", Some("scale"), Some(later)),
                entry("kubectl", "Update", None, Some(later)),
            ],
        );
        assert_eq!(
            foreign_writes("ReplicaSet", &m, running),
            vec![ForeignWrite {
                controller: "replicaset-controller",
                manager: OTHER_MANAGER.into(),
                subresource: "status".into(),
                time: at(later),
            }],
            "rkcm's own, the same second as the start, an apply, a scale and a person's edit \
             are not another manager's controller at work"
        );
    }

    #[test]
    fn a_controller_this_process_does_not_run_is_not_reported() {
        let m = meta(
            None,
            vec![entry(
                OTHER_MANAGER,
                "Update",
                Some("status"),
                Some("2026-12-05T17:00:00Z"),
            )],
        );
        assert_eq!(foreign_writes("StatefulSet", &m, running), Vec::new());
        assert_eq!(foreign_writes("CronJob", &m, running).len(), 1);
        let no_time = meta(
            None,
            vec![entry(OTHER_MANAGER, "Update", Some("status"), None)],
        );
        assert_eq!(foreign_writes("CronJob", &no_time, running), Vec::new());
    }

    #[tokio::test]
    async fn report_counts_and_records_a_warning_on_the_object() {
        let (events, fake) = EventRecorder::fake("rkcm");
        let (tx, rx) = mpsc::unbounded_channel();
        let object = ObjectReference {
            kind: Some("Deployment".into()),
            name: Some("web".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        };
        let write = ForeignWrite {
            controller: "report-test-controller",
            manager: OTHER_MANAGER.into(),
            subresource: "status".into(),
            time: at("2026-12-05T16:00:07Z"),
        };
        for _ in 0..2 {
            tx.send(Found {
                object: object.clone(),
                write: write.clone(),
            })
            .unwrap();
        }
        drop(tx);
        report(rx, events).await;
        let counted = writes_counter()
            .unwrap()
            .with_label_values(&["report-test-controller", OTHER_MANAGER])
            .get();
        assert_eq!(counted, 2);
        let recorded = fake.take();
        assert_eq!(recorded.len(), 2);
        assert_eq!(recorded[0].object, object);
        assert_eq!(recorded[0].type_, EventType::Warning);
        assert_eq!(recorded[0].reason, REASON);
        assert_eq!(recorded[0].message, write.message("Deployment"));
    }

    #[test]
    fn the_message_names_manager_subresource_and_controller() {
        let w = ForeignWrite {
            controller: "replicaset-controller",
            manager: OTHER_MANAGER.into(),
            subresource: "status".into(),
            time: at("2026-12-05T16:00:07Z"),
        };
        assert_eq!(
            w.message("ReplicaSet"),
            "kube-controller-manager wrote the status of this ReplicaSet at \
             2026-12-05T16:00:07Z while rkcm runs the replicaset-controller: two \
             controller-managers must not run one controller (switch it off in one of them)"
        );
        let spec = ForeignWrite {
            subresource: String::new(),
            ..w
        };
        assert!(
            spec.message("ReplicaSet")
                .contains(" wrote this ReplicaSet at ")
        );
    }
}
