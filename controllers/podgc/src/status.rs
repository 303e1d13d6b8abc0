//! PURE: the status PodGC writes on a pod before force-deleting it.
//!
//! A pod that is not yet terminal is moved to `Failed` first, so that owners (Jobs,
//! StatefulSets) and pod-failure policies see a terminal phase even though no kubelet will
//! ever report one; orphans also get a `DisruptionTarget` condition saying why. The write is
//! a server-side apply with field manager `PodGC`, so the body below holds only the fields
//! PodGC owns: `phase`, `observedGeneration` and, for orphans, the one condition. Conditions
//! are a map keyed by `type`, so other conditions are untouched.
//!
//! The body also carries `metadata.uid`: the API server rejects the write if the pod was
//! deleted and re-created under the same name since the cache saw it (the UID is immutable),
//! so a newer pod is never marked failed by mistake.
//!
//! Mirrors `markFailedAndDeletePodWithCondition` in upstream
//! `pkg/controller/podgc/gc_controller.go` and `UpdatePodCondition` in `pkg/api/v1/pod`.

use k8s_openapi::api::core::v1::{self as core, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rkcm_runtime::cache::cached::Pod;

use crate::consts;
use crate::plan::Reason;
use rkcm_runtime::workload::pod::{CONDITION_TRUE, PHASE_FAILED, is_terminal};

/// The `DisruptionTarget` condition for a pod on a deleted node, as of `now`, keeping the
/// transition time of an existing `DisruptionTarget=True` condition (its status does not
/// change, so neither does the time it last changed).
pub fn disruption_condition(pod: &Pod, now: jiff::Timestamp) -> PodCondition {
    let existing = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == consts::CONDITION_DISRUPTION_TARGET);
    let last_transition_time = match existing {
        Some(c) if c.status == CONDITION_TRUE => {
            c.last_transition_time.clone().unwrap_or(Time(now))
        }
        _ => Time(now),
    };
    PodCondition {
        type_: consts::CONDITION_DISRUPTION_TARGET.to_owned(),
        status: CONDITION_TRUE.to_owned(),
        reason: Some(consts::REASON_DELETION_BY_POD_GC.to_owned()),
        message: Some(consts::MESSAGE_NODE_NO_LONGER_EXISTS.to_owned()),
        last_transition_time: Some(last_transition_time),
        observed_generation: pod.metadata.generation,
        last_probe_time: None,
    }
}

/// The server-side-apply body that marks `pod` failed before its force delete, or `None` if
/// the pod is already `Succeeded` or `Failed`: a terminal status is never rewritten and
/// terminal pods never get the condition.
pub fn failed_status_apply(pod: &Pod, reason: Reason, now: jiff::Timestamp) -> Option<core::Pod> {
    if is_terminal(pod) {
        return None;
    }
    let conditions = reason
        .adds_disruption_condition()
        .then(|| vec![disruption_condition(pod, now)]);
    Some(core::Pod {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            // Mutant (sim only): the status write reaches whatever pod has the name.
            uid: pod
                .metadata
                .uid
                .clone()
                .filter(|_| !rkcm_runtime::mutants::on("podgc-no-uid-precondition")),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some(PHASE_FAILED.to_owned()),
            // PodObservedGenerationTracking is GA: every status writer stamps the generation
            // it acted on.
            observed_generation: pod.metadata.generation,
            conditions,
            ..Default::default()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::{on, pod, ts};

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).expect("valid timestamp")
    }

    #[test]
    fn orphan_gets_failed_phase_condition_and_uid_guard() {
        let mut p = on(pod("ns", "p", 0, "Running"), "ghost");
        p.metadata.generation = Some(3);
        let body =
            failed_status_apply(&p, Reason::Orphaned, now()).expect("non-terminal pod is patched");
        assert_eq!(body.metadata.name.as_deref(), Some("p"));
        assert_eq!(body.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(body.metadata.uid.as_deref(), Some("uid-ns-p"));
        assert!(body.spec.is_none());
        let status = body.status.expect("status");
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(status.observed_generation, Some(3));
        let conds = status.conditions.expect("condition");
        assert_eq!(conds.len(), 1);
        let c = &conds[0];
        assert_eq!(c.type_, "DisruptionTarget");
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("DeletionByPodGC"));
        assert_eq!(c.message.as_deref(), Some("PodGC: node no longer exists"));
        assert_eq!(c.last_transition_time, Some(Time(now())));
        assert_eq!(c.observed_generation, Some(3));
    }

    #[test]
    fn other_reasons_set_phase_without_condition() {
        for (reason, phase) in [
            (Reason::Unscheduled, "Pending"),
            (Reason::OutOfService, "Running"),
            (Reason::Terminated, "Unknown"),
        ] {
            let body =
                failed_status_apply(&pod("ns", "p", 0, phase), reason, now()).expect("patched");
            let status = body.status.expect("status");
            assert_eq!(status.phase.as_deref(), Some("Failed"), "{reason:?}");
            assert!(status.conditions.is_none(), "{reason:?}");
        }
        // An empty phase is not terminal: it is marked failed too.
        assert!(failed_status_apply(&pod("ns", "p", 0, ""), Reason::Terminated, now()).is_some());
    }

    #[test]
    fn terminal_pods_are_never_patched() {
        for phase in ["Succeeded", "Failed"] {
            for reason in [
                Reason::Terminated,
                Reason::OutOfService,
                Reason::Orphaned,
                Reason::Unscheduled,
            ] {
                assert!(
                    failed_status_apply(&pod("ns", "p", 0, phase), reason, now()).is_none(),
                    "{phase} {reason:?}"
                );
            }
        }
    }

    #[test]
    fn existing_true_condition_keeps_transition_time() {
        let mut p = pod("ns", "p", 0, "Running");
        p.status.get_or_insert_with(Default::default).conditions = Some(vec![
            rkcm_runtime::cache::cached::PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            },
            rkcm_runtime::cache::cached::PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("DeletionByTaintManager".into()),
                last_transition_time: Some(ts(5)),
                ..Default::default()
            },
        ]);
        let c = disruption_condition(&p, now());
        assert_eq!(c.last_transition_time, Some(ts(5)));
        assert_eq!(c.reason.as_deref(), Some("DeletionByPodGC"));

        // A status change (False -> True) is a transition: the time is now.
        let conds = p
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .expect("conditions");
        conds[1].status = "False".into();
        assert_eq!(
            disruption_condition(&p, now()).last_transition_time,
            Some(Time(now()))
        );
    }

    #[test]
    fn apply_body_serializes_only_owned_fields() {
        let p = on(pod("ns", "p", 0, "Running"), "ghost");
        let body = failed_status_apply(&p, Reason::Orphaned, now()).expect("patched");
        let v = serde_json::to_value(&body).expect("serializes");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "Pod");
        assert!(v.get("spec").is_none());
        let meta = v["metadata"].as_object().expect("metadata");
        let mut keys: Vec<&str> = meta.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["name", "namespace", "uid"]);
        let status = v["status"].as_object().expect("status");
        let mut keys: Vec<&str> = status.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["conditions", "observedGeneration", "phase"]);
        assert_eq!(
            v["status"]["conditions"][0]["lastTransitionTime"],
            "2027-01-15T08:00:00Z"
        );
    }
}
