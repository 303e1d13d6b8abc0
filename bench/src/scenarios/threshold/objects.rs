//! The threshold plane's objects as the controllers would have made them: every child owned
//! by its controller (controller owner reference, the labels and names the controller gives),
//! every status what the controller would compute for a converged cluster. Pure: built from
//! the stored parent (the API server's defaulted copy), table-tested without a plane.
//!
//! What each manager compares, and so what must be exact:
//! - a Deployment finds its ReplicaSet by template equality (the `pod-template-hash` label
//!   aside), and rewrites the ReplicaSet's revision, desired- and max-replicas annotations
//!   when they differ;
//! - a StatefulSet and a DaemonSet find their ControllerRevision by the bytes of its data
//!   (upstream's `getPatch`, built here by the rkcm controllers' own functions, which mirror
//!   it byte for byte), and a pod is current when its `controller-revision-hash` names it;
//! - a Job's pods carry its controller-uid labels (set by the API server on the Job's
//!   template), running ones the tracking finalizer.

use anyhow::Context;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use rkcm_runtime::workload::history::{SAFE_ALPHABET, compute_hash};
use serde_json::{Value, json};

/// Label of every object, pod and node of the run (value: the run's name).
pub const RUN_LABEL: &str = "rkcm-bench/threshold";
/// The Job controller's tracking finalizer.
pub const JOB_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The claim template of every StatefulSet.
pub const CLAIM: &str = "data";

/// A name suffix of 5 characters of the API server's alphabet for index `i` (distinct for
/// every index below 27^5).
pub fn suffix(mut i: usize) -> String {
    let n = SAFE_ALPHABET.len();
    let mut out = [0u8; 5];
    for c in out.iter_mut().rev() {
        *c = SAFE_ALPHABET[i % n];
        i /= n;
    }
    out.iter().map(|&b| char::from(b)).collect()
}

/// The controller owner reference of `obj` (of `api_version`/`kind`).
pub fn owner_ref<K: kube::Resource<DynamicType = ()>>(obj: &K) -> anyhow::Result<Value> {
    let meta = obj.meta();
    let name = meta.name.as_deref().context("the owner has no name")?;
    let uid = meta
        .uid
        .as_deref()
        .with_context(|| format!("owner {name} has no uid"))?;
    Ok(json!({
        "apiVersion": K::api_version(&()), "kind": K::kind(&()),
        "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true
    }))
}

fn to_value<T: serde::Serialize>(t: &T, what: &str) -> anyhow::Result<Value> {
    serde_json::to_value(t).with_context(|| format!("encoding {what}"))
}

/// A pod of `template` (a pod template as JSON) named `name`, owned by `owner`, bound to
/// `node`, with `labels` added to the template's.
pub fn pod_of(
    template: &Value,
    name: &str,
    owner: &Value,
    node: &str,
    labels: &[(&str, &str)],
) -> anyhow::Result<Value> {
    let mut meta = template
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if !meta.is_object() {
        meta = json!({});
    }
    if let Some(m) = meta.as_object_mut() {
        m.remove("creationTimestamp");
    }
    meta["name"] = json!(name);
    meta["ownerReferences"] = json!([owner]);
    for (k, v) in labels {
        meta["labels"][*k] = json!(v);
    }
    let mut spec = template
        .get("spec")
        .cloned()
        .with_context(|| format!("the template of pod {name} has no spec"))?;
    spec["nodeName"] = json!(node);
    Ok(json!({"metadata": meta, "spec": spec}))
}

/// The containers' names and images of a pod spec (JSON).
fn containers(pod: &Value) -> Vec<(String, String)> {
    pod["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or_default().to_string(),
                        c["image"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A running, ready pod's status (what kwok writes), as of `now`.
pub fn running_status(pod: &Value, now: &str) -> Value {
    let cond = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
    let statuses: Vec<Value> = containers(pod)
        .into_iter()
        .map(|(name, image)| {
            json!({"name": name, "image": image, "ready": true, "started": true,
                   "restartCount": 0, "state": {"running": {"startedAt": now}}})
        })
        .collect();
    json!({"status": {
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"),
                       cond("ContainersReady"), cond("PodScheduled")],
        "containerStatuses": statuses,
        "startTime": now
    }})
}

/// A pod's status once its containers exited 0 (what kwok writes for a Job's pod).
pub fn succeeded_status(pod: &Value, now: &str) -> Value {
    let cond = |t: &str, s: &str| {
        let mut c = json!({"type": t, "status": s, "lastTransitionTime": now});
        if s == "False" {
            c["reason"] = json!("PodCompleted");
        }
        c
    };
    let statuses: Vec<Value> = containers(pod)
        .into_iter()
        .map(|(name, image)| {
            json!({"name": name, "image": image, "ready": false, "started": false,
                   "restartCount": 0, "state": {"terminated": {
                       "exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}})
        })
        .collect();
    json!({"status": {
        "phase": "Succeeded",
        "conditions": [cond("PodReadyToStartContainers", "False"), cond("Initialized", "True"),
                       cond("Ready", "False"), cond("ContainersReady", "False"),
                       cond("PodScheduled", "True")],
        "containerStatuses": statuses,
        "startTime": now
    }})
}

/// `maxSurge` of a Deployment's rolling update at `replicas`: the percentage rounded up.
fn max_surge(d: &Deployment, replicas: i32) -> i32 {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let surge = d
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_surge.clone())
        .unwrap_or(IntOrString::String("25%".into()));
    match surge {
        IntOrString::Int(n) => n,
        IntOrString::String(p) => {
            let pct: i64 = p.trim_end_matches('%').parse().unwrap_or(25);
            ((i64::from(replicas) * pct + 99) / 100) as i32
        }
    }
}

/// The Deployment's one ReplicaSet (revision 1) as the Deployment controller creates it,
/// with its `pod-template-hash`.
pub fn replica_set(d: &Deployment) -> anyhow::Result<(String, Value)> {
    let name = d.name_any();
    let spec = &d.spec;
    let replicas = spec.replicas.unwrap_or(1);
    let hash = compute_hash(&spec.template, None);
    let rs_name = format!("{name}-{hash}");
    let mut template = to_value(&spec.template, "the pod template")?;
    template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    let mut selector = to_value(&spec.selector, "the selector")?;
    selector["matchLabels"]["pod-template-hash"] = json!(hash);
    let mut labels = template["metadata"]["labels"].clone();
    labels[RUN_LABEL] = d.labels().get(RUN_LABEL).map_or(json!(""), |v| json!(v));
    let rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": rs_name, "labels": labels, "ownerReferences": [owner_ref(d)?],
            "annotations": {
                "deployment.kubernetes.io/revision": "1",
                "deployment.kubernetes.io/desired-replicas": replicas.to_string(),
                "deployment.kubernetes.io/max-replicas": (replicas + max_surge(d, replicas)).to_string()
            }
        },
        "spec": {"replicas": replicas, "selector": selector, "template": template}
    });
    Ok((hash, rs))
}

/// The status of a ReplicaSet whose `replicas` pods all run and are ready.
pub fn replica_set_status(rs: &ReplicaSet) -> Value {
    let n = rs.spec.replicas.unwrap_or(1);
    json!({"status": {
        "replicas": n, "fullyLabeledReplicas": n, "readyReplicas": n, "availableReplicas": n,
        "terminatingReplicas": 0, "observedGeneration": rs.metadata.generation.unwrap_or(1)
    }})
}

/// The status of a Deployment complete on its ReplicaSet `rs_name`, as of `now`.
pub fn deployment_status(d: &Deployment, rs_name: &str, now: &str) -> Value {
    let n = d.spec.replicas.unwrap_or(1);
    json!({"status": {
        "observedGeneration": d.metadata.generation.unwrap_or(1),
        "replicas": n, "updatedReplicas": n, "readyReplicas": n, "availableReplicas": n,
        "terminatingReplicas": 0,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability.",
             "lastUpdateTime": now, "lastTransitionTime": now},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
             "message": format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
             "lastUpdateTime": now, "lastTransitionTime": now}
        ]
    }})
}

/// The StatefulSet's first revision, as its controller creates it.
pub fn stateful_set_revision(s: &StatefulSet) -> anyhow::Result<ControllerRevision> {
    let collision = s
        .status
        .as_ref()
        .and_then(|st| st.collision_count)
        .unwrap_or(0);
    rkcm_statefulset::revision::new_revision(s, 1, collision)
        .map_err(|e| anyhow::anyhow!("revision of statefulset {}: {e}", s.name_any()))
}

/// Pod `ordinal` of StatefulSet `s` at revision `revision`, bound to `node`, with its claim.
pub fn stateful_set_pod(
    s: &StatefulSet,
    revision: &str,
    ordinal: usize,
    node: &str,
) -> anyhow::Result<Value> {
    let set = s.name_any();
    let name = format!("{set}-{ordinal}");
    let template = to_value(&s.spec.template, "the pod template")?;
    let index = ordinal.to_string();
    let mut pod = pod_of(
        &template,
        &name,
        &owner_ref(s)?,
        node,
        &[
            ("controller-revision-hash", revision),
            ("statefulset.kubernetes.io/pod-name", &name),
            ("apps.kubernetes.io/pod-index", &index),
        ],
    )?;
    pod["spec"]["hostname"] = json!(name);
    pod["spec"]["subdomain"] = json!(s.spec.service_name.clone().unwrap_or_default());
    let claim = format!("{CLAIM}-{name}");
    let volume = json!({"name": CLAIM, "persistentVolumeClaim": {"claimName": claim}});
    match pod["spec"]["volumes"].as_array_mut() {
        Some(v) => v.push(volume),
        None => pod["spec"]["volumes"] = json!([volume]),
    }
    Ok(pod)
}

/// The claim of pod `pod` of StatefulSet `s` (no owner: the default retention keeps it).
pub fn stateful_set_claim(s: &StatefulSet, pod: &str) -> anyhow::Result<Value> {
    let set = s.name_any();
    let tpl = s
        .spec
        .volume_claim_templates
        .as_ref()
        .and_then(|t| t.iter().find(|t| t.metadata.name.as_deref() == Some(CLAIM)))
        .with_context(|| format!("statefulset {set} has no claim template {CLAIM}"))?;
    let mut labels = to_value(&tpl.metadata.labels, "claim labels")?;
    if !labels.is_object() {
        labels = json!({});
    }
    if let Some(m) = s.spec.selector.match_labels.as_ref() {
        for (k, v) in m {
            labels[k] = json!(v);
        }
    }
    Ok(json!({
        "metadata": {"name": format!("{CLAIM}-{pod}"), "labels": labels},
        "spec": to_value(&tpl.spec, "claim spec")?
    }))
}

/// The status of a StatefulSet whose pods all run at `revision`.
pub fn stateful_set_status(s: &StatefulSet, revision: &str) -> Value {
    let n = s.spec.replicas.unwrap_or(1);
    json!({"status": {
        "observedGeneration": s.metadata.generation.unwrap_or(1),
        "replicas": n, "readyReplicas": n, "currentReplicas": n, "updatedReplicas": n,
        "availableReplicas": n, "currentRevision": revision, "updateRevision": revision,
        "collisionCount": 0
    }})
}

/// The DaemonSet's first revision (its hash, its object) as the DaemonSet controller makes it.
pub fn daemon_set_revision(ds: &DaemonSet) -> anyhow::Result<(String, ControllerRevision)> {
    let rev = rkcm_daemonset::revision::new_revision(ds, 1)
        .with_context(|| format!("daemonset {} has no name or uid", ds.name_any()))?;
    let hash = rkcm_daemonset::revision::hash_and_name(ds).0;
    Ok((hash, rev))
}

/// The daemon pod of `ds` on `node` at revision `hash`, with the node affinity and the
/// tolerations the DaemonSet controller adds.
pub fn daemon_pod(ds: &DaemonSet, hash: &str, name: &str, node: &str) -> anyhow::Result<Value> {
    let spec = &ds.spec;
    let template = to_value(&spec.template, "the pod template")?;
    let generation = ds.metadata.generation.unwrap_or(1).to_string();
    let mut pod = pod_of(
        &template,
        name,
        &owner_ref(ds)?,
        node,
        &[
            ("controller-revision-hash", hash),
            ("pod-template-generation", &generation),
        ],
    )?;
    pod["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
    let tol = |key: &str, effect: &str| json!({"key": key, "operator": "Exists", "effect": effect});
    pod["spec"]["tolerations"] = json!([
        tol("node.kubernetes.io/not-ready", "NoExecute"),
        tol("node.kubernetes.io/unreachable", "NoExecute"),
        tol("node.kubernetes.io/disk-pressure", "NoSchedule"),
        tol("node.kubernetes.io/memory-pressure", "NoSchedule"),
        tol("node.kubernetes.io/pid-pressure", "NoSchedule"),
        tol("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]);
    Ok(pod)
}

/// The status of a DaemonSet running one ready pod on each of `nodes` nodes.
pub fn daemon_set_status(ds: &DaemonSet, nodes: usize) -> Value {
    json!({"status": {
        "observedGeneration": ds.metadata.generation.unwrap_or(1),
        "currentNumberScheduled": nodes, "desiredNumberScheduled": nodes,
        "numberReady": nodes, "numberAvailable": nodes, "updatedNumberScheduled": nodes,
        "numberMisscheduled": 0
    }})
}

/// Pod `i` of Job `job` (labels from its stored template: the controller-uid the API server
/// set), running with the tracking finalizer or finished without it.
pub fn job_pod(job: &Job, i: usize, node: &str, running: bool) -> anyhow::Result<Value> {
    let name = job.name_any();
    let spec = job
        .spec
        .as_ref()
        .with_context(|| format!("job {name} has no spec"))?;
    let template = to_value(&spec.template, "the pod template")?;
    let mut pod = pod_of(
        &template,
        &format!("{name}-{}", suffix(i)),
        &owner_ref(job)?,
        node,
        &[],
    )?;
    if running {
        pod["metadata"]["finalizers"] = json!([JOB_FINALIZER]);
    }
    Ok(pod)
}

/// The status of a Job whose `n` pods all run (`running`) or all succeeded, as of `now`.
pub fn job_status(job: &Job, running: bool, now: &str) -> Value {
    let n = job.spec.as_ref().and_then(|s| s.completions).unwrap_or(1);
    if running {
        json!({"status": {
            "startTime": now, "active": n, "ready": n, "terminating": 0,
            "uncountedTerminatedPods": {}
        }})
    } else {
        let cond = |t: &str, reason: &str, message: &str| {
            json!({"type": t, "status": "True", "reason": reason, "message": message,
                   "lastProbeTime": now, "lastTransitionTime": now})
        };
        json!({"status": {
            "startTime": now, "completionTime": now, "succeeded": n, "ready": 0,
            "terminating": 0, "uncountedTerminatedPods": {},
            "conditions": [
                cond("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
                cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
            ]
        }})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored<K: serde::de::DeserializeOwned>(v: Value) -> K {
        serde_json::from_value(v).unwrap()
    }

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "x"}},
               "spec": {"containers": [{"name": "main", "image": "pause"}]}})
    }

    fn meta(name: &str) -> Value {
        json!({"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "generation": 1,
               "labels": {RUN_LABEL: "r"}})
    }

    #[test]
    fn suffixes_are_distinct_five_safe_characters() {
        let all: std::collections::BTreeSet<String> = (0..2000).map(suffix).collect();
        assert_eq!(all.len(), 2000);
        assert!(all.iter().all(|s| s.len() == 5));
        assert_eq!(suffix(0), "bbbbb");
    }

    #[test]
    fn replica_set_is_owned_by_its_deployment_and_labelled_with_the_hash() {
        let d: Deployment = stored(json!({"metadata": meta("deploy-a"), "spec": {
            "replicas": 10, "selector": {"matchLabels": {"app": "x"}}, "template": template()}}));
        let (hash, rs) = replica_set(&d).unwrap();
        assert_eq!(rs["metadata"]["name"], format!("deploy-a-{hash}"));
        let own = &rs["metadata"]["ownerReferences"][0];
        assert_eq!(
            (own["kind"].as_str(), own["uid"].as_str()),
            (Some("Deployment"), Some("uid-deploy-a"))
        );
        assert_eq!(own["controller"], true);
        assert_eq!(
            rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
            hash
        );
        assert_eq!(
            rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"],
            hash
        );
        assert_eq!(rs["spec"]["template"]["metadata"]["labels"]["app"], "x");
        let ann = &rs["metadata"]["annotations"];
        assert_eq!(ann["deployment.kubernetes.io/desired-replicas"], "10");
        assert_eq!(ann["deployment.kubernetes.io/max-replicas"], "13"); // 25% of 10, up
        let _: ReplicaSet = stored(rs);
    }

    #[test]
    fn pods_carry_their_owner_labels_and_node() {
        let rs: ReplicaSet = stored(json!({"metadata": meta("deploy-a-h"), "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": template()}}));
        let p = pod_of(
            &template(),
            "deploy-a-h-bbbbb",
            &owner_ref(&rs).unwrap(),
            "n1",
            &[("pod-template-hash", "h")],
        )
        .unwrap();
        assert_eq!(p["spec"]["nodeName"], "n1");
        assert_eq!(p["metadata"]["labels"]["pod-template-hash"], "h");
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
        let _: k8s_openapi::api::core::v1::Pod = stored(p.clone());
        assert_eq!(
            running_status(&p, "2026-01-01T00:00:00Z")["status"]["containerStatuses"][0]["name"],
            "main"
        );
    }

    #[test]
    fn stateful_set_pods_name_their_revision_ordinal_and_claim() {
        let s: StatefulSet = stored(json!({"metadata": meta("sts-a"), "spec": {
            "replicas": 2, "serviceName": "sts-a", "selector": {"matchLabels": {"app": "x"}},
            "template": template(),
            "volumeClaimTemplates": [{"metadata": {"name": CLAIM}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}));
        let rev = stateful_set_revision(&s).unwrap();
        let rev_name = rev.metadata.name.clone().unwrap();
        assert!(rev_name.starts_with("sts-a-"));
        assert_eq!(rev.revision, Some(1));
        assert_eq!(
            rev.metadata.owner_references.as_ref().unwrap()[0].uid,
            "uid-sts-a"
        );
        let p = stateful_set_pod(&s, &rev_name, 1, "n").unwrap();
        assert_eq!(p["metadata"]["name"], "sts-a-1");
        assert_eq!(
            p["metadata"]["labels"]["controller-revision-hash"],
            rev_name
        );
        assert_eq!(p["metadata"]["labels"]["apps.kubernetes.io/pod-index"], "1");
        assert_eq!(p["spec"]["hostname"], "sts-a-1");
        assert_eq!(
            p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "data-sts-a-1"
        );
        let c = stateful_set_claim(&s, "sts-a-1").unwrap();
        assert_eq!(c["metadata"]["name"], "data-sts-a-1");
        assert_eq!(c["metadata"]["labels"]["app"], "x");
    }

    #[test]
    fn daemon_pods_are_pinned_to_their_node_at_the_revision() {
        let ds: DaemonSet = stored(json!({"metadata": meta("ds-0"), "spec": {
            "selector": {"matchLabels": {"app": "x"}}, "template": template()}}));
        let (hash, rev) = daemon_set_revision(&ds).unwrap();
        assert_eq!(
            rev.metadata.name.as_deref(),
            Some(format!("ds-0-{hash}").as_str())
        );
        assert_eq!(
            rev.metadata.labels.as_ref().unwrap()["controller-revision-hash"],
            hash
        );
        assert_eq!(rev.data.0["spec"]["template"]["$patch"], "replace");
        assert_eq!(
            rev.metadata.owner_references.as_ref().unwrap()[0].uid,
            "uid-ds-0"
        );
        let p = daemon_pod(&ds, &hash, "ds-0-bbbbb", "n7").unwrap();
        assert_eq!(p["metadata"]["labels"]["pod-template-generation"], "1");
        assert_eq!(
            p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
            "n7"
        );
    }

    #[test]
    fn running_job_pods_keep_the_tracking_finalizer_finished_ones_do_not() {
        let mut t = template();
        t["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = json!("uid-job-a");
        let job: Job =
            stored(json!({"metadata": meta("job-a"), "spec": {"completions": 3, "template": t}}));
        let run = job_pod(&job, 0, "s0", true).unwrap();
        assert_eq!(run["metadata"]["finalizers"][0], JOB_FINALIZER);
        assert_eq!(
            run["metadata"]["labels"]["batch.kubernetes.io/controller-uid"],
            "uid-job-a"
        );
        assert_eq!(run["metadata"]["ownerReferences"][0]["kind"], "Job");
        let done = job_pod(&job, 1, "n0", false).unwrap();
        assert!(done["metadata"].get("finalizers").is_none());
        assert_eq!(job_status(&job, false, "t")["status"]["succeeded"], 3);
        assert_eq!(job_status(&job, true, "t")["status"]["active"], 3);
    }
}
