//! Pod writes on behalf of a controller, and slow-start batching (mirrors `RealPodControl`,
//! `GetPodFromTemplate` and `slowStartBatch` in upstream `pkg/controller/controller_utils.go`
//! and `pkg/controller/replicaset/replica_set.go`).
//!
//! Guarantees:
//! - A pod created from a template carries the template's labels, annotations, finalizers and
//!   spec (never its name), `generateName: <owner name>-` (the bare owner name when the dashed
//!   prefix would not be a valid name), and exactly one ownerReference: the owner's
//!   controllerRef with `controller: true, blockOwnerDeletion: true`.
//! - Templates without labels are refused before any API call ("unable to create pods, no
//!   labels"), as upstream does.
//! - Every create and delete emits the upstream event on the owner: `SuccessfulCreate`
//!   "Created pod: <name>", `FailedCreate` "Error creating: <err>" (not when the namespace is
//!   terminating), `SuccessfulDelete` "Deleted pod: <name>", `FailedDelete`
//!   "Error deleting: <err>" (not for NotFound, which callers treat as success).
//! - Deletes are always graceful: no grace period is ever sent, so the pod's own
//!   `terminationGracePeriodSeconds` applies. Force deletion belongs to PodGC alone.
//! - [`slow_start_batch`] runs at most 1, 2, 4, … calls concurrently per batch and stops after
//!   the first batch with a failure, so a controller whose creates all fail issues one doomed
//!   request per sync instead of hundreds.

use std::future::Future;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{DeleteParams, Patch, Preconditions};

use crate::api::write;
use crate::api::written::Written;
use crate::error::{Error, api_status, error_message, is_namespace_terminating};
use crate::events::{EventRecorder, EventType, object_reference};
use crate::workload::controller_ref::controller_owner_ref;

/// Upstream event reasons of pod writes (`pkg/controller/controller_utils.go`).
pub mod reasons {
    pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
    pub const FAILED_CREATE: &str = "FailedCreate";
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
    pub const FAILED_DELETE: &str = "FailedDelete";
}

/// Upstream message texts.
pub mod messages {
    pub const NO_LABELS: &str = "unable to create pods, no labels";
    pub const CREATED: &str = "Created pod: ";
    pub const ERROR_CREATING: &str = "Error creating: ";
    pub const DELETED: &str = "Deleted pod: ";
    pub const ERROR_DELETING: &str = "Error deleting: ";
}

/// First batch size of [`slow_start_batch`] (`SlowStartInitialBatchSize`).
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// The status cause the apiserver reports when a namespace is being deleted.
/// Longest valid object name (DNS-1123 subdomain).
const MAX_NAME_LEN: usize = 253;

/// How a pod is created beyond its template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodOptions {
    /// Replaces the default `<owner name>-` generateName (Job's indexed pods use their own).
    pub generate_name: Option<String>,
    /// Binds the pod to a node at creation.
    pub node_name: Option<String>,
}

fn owner_key<O: Resource>(owner: &O) -> String {
    crate::keys::key_of(owner)
}

/// True when `name` is a valid DNS-1123 subdomain (what upstream's `ValidatePodName` checks).
fn is_dns1123_subdomain(name: &str) -> bool {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return false;
    }
    name.split('.').all(|label| {
        let b = label.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
            }
            _ => false,
        }
    })
}

/// `<owner name>-`, or the owner name alone when the dashed prefix is not a valid generateName
/// (upstream `getPodsPrefix`: the prefix is validated with its trailing dash masked).
pub fn pod_name_prefix(owner_name: &str) -> String {
    let prefix = format!("{owner_name}-");
    // Upstream masks the trailing dash with an 'a' before validating a prefix.
    let masked = format!("{owner_name}a");
    if is_dns1123_subdomain(&masked) {
        prefix
    } else {
        owner_name.to_string()
    }
}

/// Builds the pod upstream's `GetPodFromTemplate` builds. Pure.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    owner_name: &str,
    controller_ref: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
    opts: &PodOptions,
) -> Pod {
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut spec = template.spec.clone().unwrap_or_default();
    if let Some(node) = &opts.node_name {
        spec.node_name = Some(node.clone());
    }
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(
                opts.generate_name
                    .clone()
                    .unwrap_or_else(|| pod_name_prefix(owner_name)),
            ),
            labels: tmeta.labels,
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: controller_ref.map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// Creates, deletes and patches pods for one controller, with upstream events.
#[derive(Clone)]
pub struct PodControl {
    client: kube::Client,
    recorder: EventRecorder,
}

impl std::fmt::Debug for PodControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodControl")
            .field("recorder", &self.recorder)
            .finish()
    }
}

impl PodControl {
    pub fn new(client: kube::Client, recorder: EventRecorder) -> Self {
        Self { client, recorder }
    }

    pub fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    /// Creates one pod from `template` in `namespace`, controlled by `owner`. Returns the
    /// created pod's identity (its generated name, UID and resourceVersion).
    pub async fn create_pod<O: Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &O,
        opts: &PodOptions,
    ) -> Result<Written, Error> {
        let owner_name = owner.meta().name.as_deref().unwrap_or_default();
        let controller_ref = controller_owner_ref(owner).ok_or_else(|| {
            Error::Other(format!(
                "owner {} has no name or uid; cannot build its controllerRef",
                owner_key(owner)
            ))
        })?;
        let pod = pod_from_template(template, owner_name, Some(controller_ref), opts);
        if pod.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
            return Err(Error::Other(messages::NO_LABELS.to_string()));
        }
        match write::create(&self.client, Some(namespace), &pod).await {
            Ok(created) => {
                let name = created.name.as_deref().unwrap_or_default();
                tracing::debug!(owner = %owner_key(owner), namespace, pod = name, "controller created pod");
                self.recorder.event(
                    &object_reference(owner),
                    EventType::Normal,
                    reasons::SUCCESSFUL_CREATE,
                    &format!("{}{name}", messages::CREATED),
                );
                Ok(created)
            }
            Err(e) => {
                // A terminating namespace refuses every create; an event there is pure noise.
                if !is_namespace_terminating(&e) {
                    self.recorder.event(
                        &object_reference(owner),
                        EventType::Warning,
                        reasons::FAILED_CREATE,
                        &format!("{}{}", messages::ERROR_CREATING, error_message(&e)),
                    );
                }
                Err(Error::ForOwner {
                    verb: "create",
                    kind: "Pod",
                    owner: owner_key(owner),
                    source: e,
                })
            }
        }
    }

    /// Requests graceful deletion of a pod of `owner`, with a UID precondition when `uid` is
    /// given (so a re-created pod of the same name is never deleted by mistake). NotFound is
    /// returned without an event; callers count it as a success.
    pub async fn delete_pod<O: Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        owner: &O,
    ) -> Result<(), Error> {
        tracing::debug!(owner = %owner_key(owner), namespace, pod = name, "deleting pod");
        let params = delete_params(uid);
        let key = crate::keys::key(Some(namespace), name);
        match write::delete::<Pod>(&self.client, Some(namespace), name, &params).await {
            Ok(_) => {
                self.recorder.event(
                    &object_reference(owner),
                    EventType::Normal,
                    reasons::SUCCESSFUL_DELETE,
                    &format!("{}{name}", messages::DELETED),
                );
                Ok(())
            }
            Err(e) if api_status(&e).is_some_and(|s| s.is_not_found()) => {
                tracing::debug!(pod = %key, "pod has already been deleted");
                Err(Error::api("delete", "Pod", key, e))
            }
            Err(e) => {
                self.recorder.event(
                    &object_reference(owner),
                    EventType::Warning,
                    reasons::FAILED_DELETE,
                    &format!("{}{}", messages::ERROR_DELETING, error_message(&e)),
                );
                Err(Error::api("delete", "Pod", key, e))
            }
        }
    }

    /// Strategic-merge-patches a pod; returns the patched pod's identity.
    pub async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Written, Error> {
        write::patch::<Pod, _>(
            &self.client,
            Some(namespace),
            name,
            &Patch::Strategic(patch),
        )
        .await
        .map_err(|e| Error::api("patch", "Pod", crate::keys::key(Some(namespace), name), e))
    }
}

/// Graceful delete options: never a grace period (the pod's own applies), optionally a UID
/// precondition.
pub fn delete_params(uid: Option<&str>) -> DeleteParams {
    DeleteParams {
        preconditions: uid.map(|u| Preconditions {
            uid: Some(u.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

/// Calls `f(i)` for `i` in `0..count` in batches of `initial_batch_size`, then doubling
/// (1, 2, 4, …), each batch concurrently. Stops after the first batch in which any call
/// failed. Returns the number of successful calls and the first error of the failing batch;
/// `count - successes - failures_in_last_batch` items were never attempted (the caller lowers
/// its expectations for every item not successfully created).
pub async fn slow_start_batch<F, Fut, E>(
    count: usize,
    initial_batch_size: usize,
    mut f: F,
) -> (usize, Option<E>)
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut remaining = count;
    let mut successes = 0;
    let mut next = 0;
    let mut batch = remaining.min(initial_batch_size.max(1));
    while batch > 0 {
        let calls: Vec<Fut> = (next..next + batch).map(&mut f).collect();
        next += batch;
        let results = futures::future::join_all(calls).await;
        let mut first_err = None;
        for r in results {
            match r {
                Ok(()) => successes += 1,
                Err(e) => {
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
        if first_err.is_some() {
            return (successes, first_err);
        }
        remaining -= batch;
        batch = (2 * batch).min(remaining);
    }
    (successes, None)
}

/// A scripted API server for unit tests of the controls: records each request and answers
/// with what the handler returns.
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use parking_lot::Mutex;
    use rkcm_testkit::fake_api::{FakeApi, Reply, Request};

    fn rs(name: &str) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some("rs-uid".into()),
                ..ObjectMeta::default()
            },
            ..ReplicaSet::default()
        }
    }

    fn template() -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                name: Some("ignored".into()),
                labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                annotations: Some(BTreeMap::from([("a".to_string(), "b".to_string())])),
                finalizers: Some(vec!["example.com/f".into()]),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("nginx".into()),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
        }
    }

    #[test]
    fn pod_from_template_copies_metadata_and_sets_controller_ref() {
        let owner = rs("web");
        let pod = pod_from_template(
            &template(),
            "web",
            controller_owner_ref(&owner),
            &PodOptions::default(),
        );
        assert_eq!(pod.metadata.name, None);
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-"));
        assert_eq!(
            pod.metadata.labels,
            template().metadata.and_then(|m| m.labels)
        );
        assert_eq!(
            pod.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("a"))
                .map(String::as_str),
            Some("b")
        );
        assert_eq!(
            pod.metadata.finalizers,
            Some(vec!["example.com/f".to_string()])
        );
        let refs = pod.metadata.owner_references.unwrap_or_default();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].api_version, "apps/v1");
        assert_eq!(refs[0].kind, "ReplicaSet");
        assert_eq!(refs[0].name, "web");
        assert_eq!(refs[0].uid, "rs-uid");
        assert_eq!(refs[0].controller, Some(true));
        assert_eq!(refs[0].block_owner_deletion, Some(true));
        assert_eq!(pod.spec.and_then(|s| s.node_name), None);
    }

    #[test]
    fn pod_from_template_applies_options() {
        let opts = PodOptions {
            generate_name: Some("job-3-".into()),
            node_name: Some("node-a".into()),
        };
        let pod = pod_from_template(&template(), "job", None, &opts);
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("job-3-"));
        assert_eq!(pod.metadata.owner_references, None);
        assert_eq!(
            pod.spec.and_then(|s| s.node_name).as_deref(),
            Some("node-a")
        );
    }

    #[test]
    fn prefix_drops_the_dash_only_when_the_name_is_too_long() {
        assert_eq!(pod_name_prefix("web"), "web-");
        let long = "a".repeat(252);
        assert_eq!(pod_name_prefix(&long), format!("{long}-"));
        let longest = "a".repeat(253);
        assert_eq!(pod_name_prefix(&longest), longest);
        assert_eq!(pod_name_prefix("a.b"), "a.b-");
    }

    #[test]
    fn delete_params_are_graceful_with_uid_precondition() {
        let p = delete_params(Some("u1"));
        assert_eq!(p.grace_period_seconds, None);
        assert_eq!(p.preconditions.and_then(|p| p.uid).as_deref(), Some("u1"));
        assert_eq!(delete_params(None).preconditions, None);
    }

    #[tokio::test]
    async fn slow_start_stops_after_the_first_failing_batch() {
        // Item 5 (index 4) fails: batches [0], [1,2], [3,4,5,6]; 1 + 2 + 3 successes and
        // items 7..9 never attempted.
        let called: Arc<Mutex<Vec<usize>>> = Arc::default();
        let c = called.clone();
        let (ok, err) = slow_start_batch(10, SLOW_START_INITIAL_BATCH_SIZE, move |i| {
            c.lock().push(i);
            async move { if i == 4 { Err(i) } else { Ok(()) } }
        })
        .await;
        assert_eq!((ok, err), (6, Some(4)));
        assert_eq!(called.lock().clone(), vec![0, 1, 2, 3, 4, 5, 6]);
    }

    #[tokio::test]
    async fn slow_start_batches_double() {
        let sizes: Arc<Mutex<Vec<usize>>> = Arc::default();
        let started = Arc::new(AtomicUsize::new(0));
        let s2 = sizes.clone();
        let st = started.clone();
        let (ok, err) = slow_start_batch(10, 1, move |i| {
            let s2 = s2.clone();
            let st = st.clone();
            async move {
                st.fetch_add(1, Ordering::SeqCst);
                // The first call of each batch records how many calls were created with it.
                let _ = i;
                tokio::task::yield_now().await;
                s2.lock().push(st.load(Ordering::SeqCst));
                Ok::<(), ()>(())
            }
        })
        .await;
        assert_eq!((ok, err), (10, None));
        let mut seen: Vec<usize> = sizes.lock().clone();
        seen.dedup();
        // Cumulative starts after each batch: 1, 1+2, 1+2+4, 1+2+4+3.
        assert_eq!(seen, vec![1, 3, 7, 10]);
        assert_eq!(started.load(Ordering::SeqCst), 10);
    }

    #[tokio::test]
    async fn slow_start_first_item_failure_makes_one_call() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let (ok, err) = slow_start_batch(500, 1, move |_| {
            let c = c.clone();
            async move {
                c.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>("quota")
            }
        })
        .await;
        assert_eq!((ok, err), (0, Some("quota")));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn slow_start_zero_items() {
        let (ok, err) = slow_start_batch(0, 1, |_| async { Err::<(), _>(()) }).await;
        assert_eq!((ok, err), (0, None));
    }

    fn created_pod(req: &Request) -> Reply {
        let mut pod = req.body.clone();
        pod["metadata"]["name"] = serde_json::json!("web-abcde");
        pod["metadata"]["uid"] = serde_json::json!("pod-uid");
        Reply::created(pod)
    }

    /// A fake API answering every request with `reply`.
    fn answering(reply: Reply) -> FakeApi {
        let api = FakeApi::new();
        api.on("*", "**", reply);
        api
    }

    /// A fake API that creates pods as `created_pod` does.
    fn creating() -> FakeApi {
        let api = FakeApi::new();
        api.on_fn("*", "**", created_pod);
        api
    }

    #[tokio::test]
    async fn create_pod_posts_template_and_records_event() {
        let api = creating();
        let client = api.client();
        let (rec, events) = EventRecorder::fake("replicaset-controller");
        let pc = PodControl::new(client, rec);
        let pod = pc
            .create_pod("ns", &template(), &rs("web"), &PodOptions::default())
            .await;
        assert_eq!(pod.ok().and_then(|p| p.name).as_deref(), Some("web-abcde"));
        let reqs = api.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].method, "POST");
        assert_eq!(reqs[0].path, "/api/v1/namespaces/ns/pods");
        assert_eq!(
            reqs[0].content_type, "application/vnd.kubernetes.protobuf",
            "the pod is sent in protobuf (the fake reads it back as JSON)"
        );
        assert_eq!(reqs[0].body["metadata"]["generateName"], "web-");
        assert_eq!(
            reqs[0].body["metadata"]["ownerReferences"][0]["controller"],
            true
        );
        assert_eq!(
            reqs[0].body["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
            true
        );
        let ev = events.take();
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].type_, ev[0].reason.as_str()),
            (EventType::Normal, "SuccessfulCreate")
        );
        assert_eq!(ev[0].message, "Created pod: web-abcde");
        assert_eq!(ev[0].object.kind.as_deref(), Some("ReplicaSet"));
    }

    #[tokio::test]
    async fn create_pod_failure_records_warning_and_names_owner() {
        let msg = "pods \"web-\" is forbidden: exceeded quota: q";
        let client = answering(Reply::forbidden(msg)).client();
        let (rec, events) = EventRecorder::fake("replicaset-controller");
        let pc = PodControl::new(client, rec);
        let err = pc
            .create_pod("ns", &template(), &rs("web"), &PodOptions::default())
            .await
            .err();
        let err = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("create Pod for ns/web: "), "{err}");
        let ev = events.take();
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].type_, ev[0].reason.as_str()),
            (EventType::Warning, "FailedCreate")
        );
        assert_eq!(ev[0].message, format!("Error creating: {msg}"));
    }

    #[tokio::test]
    async fn create_pod_in_terminating_namespace_is_silent() {
        let client = answering(Reply::namespace_terminating("ns")).client();
        let (rec, events) = EventRecorder::fake("replicaset-controller");
        let pc = PodControl::new(client, rec);
        let err = pc
            .create_pod("ns", &template(), &rs("web"), &PodOptions::default())
            .await
            .err();
        let ns_terminating = match &err {
            Some(Error::ForOwner { source, .. }) => is_namespace_terminating(source),
            _ => false,
        };
        assert!(ns_terminating, "{err:?}");
        assert!(events.take().is_empty());
    }

    #[tokio::test]
    async fn create_pod_without_labels_is_refused_before_the_api() {
        let api = creating();
        let client = api.client();
        let (rec, events) = EventRecorder::fake("replicaset-controller");
        let pc = PodControl::new(client, rec);
        let mut t = template();
        if let Some(m) = t.metadata.as_mut() {
            m.labels = None;
        }
        let err = pc
            .create_pod("ns", &t, &rs("web"), &PodOptions::default())
            .await
            .err();
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("unable to create pods, no labels")
        );
        assert!(api.requests().is_empty());
        assert!(events.take().is_empty());
    }

    #[tokio::test]
    async fn delete_pod_is_graceful_with_uid_precondition() {
        let api = answering(Reply::ok(
            serde_json::json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web-1"}}),
        ));
        let client = api.client();
        let (rec, events) = EventRecorder::fake("replicaset-controller");
        let pc = PodControl::new(client, rec);
        pc.delete_pod("ns", "web-1", Some("u1"), &rs("web"))
            .await
            .ok();
        let reqs = api.requests();
        assert_eq!(reqs[0].method, "DELETE");
        assert_eq!(reqs[0].path, "/api/v1/namespaces/ns/pods/web-1");
        assert_eq!(reqs[0].body["preconditions"]["uid"], "u1");
        assert!(reqs[0].body.get("gracePeriodSeconds").is_none());
        let ev = events.take();
        assert_eq!(ev[0].reason, "SuccessfulDelete");
        assert_eq!(ev[0].message, "Deleted pod: web-1");
    }

    #[tokio::test]
    async fn delete_pod_not_found_is_returned_without_event() {
        let client = answering(Reply::not_found("pods", "web-1")).client();
        let (rec, events) = EventRecorder::fake("replicaset-controller");
        let pc = PodControl::new(client, rec);
        let err = pc.delete_pod("ns", "web-1", None, &rs("web")).await.err();
        assert!(err.is_some_and(|e| e.is_not_found()));
        assert!(events.take().is_empty());
    }

    #[tokio::test]
    async fn delete_pod_failure_records_warning() {
        let msg = "Precondition failed: UID in precondition: u1, UID in object meta: u2";
        let client = answering(Reply::uid_precondition_failed("u1", "u2")).client();
        let (rec, events) = EventRecorder::fake("replicaset-controller");
        let pc = PodControl::new(client, rec);
        let err = pc
            .delete_pod("ns", "web-1", Some("u1"), &rs("web"))
            .await
            .err();
        assert!(err.is_some_and(|e| e.is_conflict()));
        let ev = events.take();
        assert_eq!(
            (ev[0].type_, ev[0].reason.as_str()),
            (EventType::Warning, "FailedDelete")
        );
        assert_eq!(ev[0].message, format!("Error deleting: {msg}"));
    }

    #[tokio::test]
    async fn patch_pod_sends_strategic_merge_patch() {
        let api = answering(Reply::ok(
            serde_json::json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}}),
        ));
        let client = api.client();
        let (rec, _) = EventRecorder::fake("x");
        let pc = PodControl::new(client, rec);
        let patch = serde_json::json!({"metadata": {"labels": {"a": "b"}}});
        assert!(pc.patch_pod("ns", "p", &patch).await.is_ok());
        let reqs = api.requests();
        assert_eq!(reqs[0].method, "PATCH");
        assert_eq!(
            reqs[0].content_type,
            "application/strategic-merge-patch+json"
        );
        assert_eq!(reqs[0].body, patch);
    }
}
