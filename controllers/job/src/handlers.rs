//! Informer changes -> queue keys: upstream `addPod`, `updatePod`, `deletePod`, `addJob`,
//! `updateJob` and `deleteJob` of `pkg/controller/job/job_controller.go`, with the
//! expectations and finalizer bookkeeping they do.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use rkcm_runtime::cache::Change;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::keys::key_of;
use rkcm_runtime::workload::children::{ChildHandler, on_child_change};
use rkcm_runtime::workload::controller_ref::controller_of;

use crate::consts::{SYNC_BATCH_PERIOD, metrics as m};
use crate::metrics;
use crate::plan::{deadline_changed, is_finished, managed_by_external, selector_of};
use crate::pods::labels_of;
use crate::pods::{has_tracking_finalizer, is_terminal, uid};

use crate::reconcile::Controller;

/// `job_controller_terminated_pods_tracking_finalizer_total`: terminal pods gaining or losing
/// the tracking finalizer, as the informer sees them.
fn record_finished_pod_with_tracking_finalizer(old: Option<&Pod>, new: Option<&Pod>) {
    let counted = |p: Option<&Pod>| p.is_some_and(|p| is_terminal(p) && has_tracking_finalizer(p));
    let (was, is) = (counted(old), counted(new));
    if was == is {
        return;
    }
    let label = if is { m::ADD } else { m::DELETE };
    metrics::inc(|x| &x.tracking_finalizer, &[label], 1);
}

impl ChildHandler<Pod> for Controller {
    type Owner = Job;

    /// `resolveControllerRef`: the cached Job the ref names, if kind and UID agree.
    fn resolve(&self, namespace: &str, r: &OwnerReference) -> Option<Arc<Job>> {
        if r.kind != "Job" {
            return None;
        }
        let job = self
            .jobs
            .get(&rkcm_runtime::keys::key(Some(namespace), &r.name))?;
        (job.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(job)
    }

    /// Jobs in the pod's namespace whose selector matches it.
    fn matching(&self, pod: &Pod) -> Vec<Arc<Job>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let labels = labels_of(pod);
        self.jobs
            .list_namespace(namespace)
            .into_iter()
            .filter(|j| selector_of(j).is_ok_and(|s| !s.is_empty() && s.matches(labels)))
            .collect()
    }

    fn enqueue(&self, job: &Job) {
        self.enqueue_batched(job);
    }

    fn created(&self, job: &Job) {
        self.expectations.creation_observed(&key_of(job));
        self.enqueue_batched(job);
    }

    fn deleted(&self, namespace: &str, pod: &Pod, final_delete: bool) {
        let has_finalizer = has_tracking_finalizer(pod);
        if controller_of(&pod.metadata).is_none() {
            if has_finalizer {
                self.enqueue_orphan(pod);
            }
            return;
        }
        let job = self.owner_of(namespace, pod);
        let Some(job) = job.filter(|j| !is_finished(j)) else {
            if has_finalizer {
                self.enqueue_orphan(pod);
            }
            return;
        };
        let key = key_of(&*job);
        // Counted once per pod: a terminating pod is seen again when its status or finalizer
        // changes and when it goes.
        self.expectations.deletion_observed(&key, &key_of(pod));
        if final_delete || !has_finalizer {
            self.finalizer_expectations.observed(&key, uid(pod));
        }
        self.enqueue_batched(&job);
    }

    fn terminating_updated(&self, namespace: &str, _old: &Pod, new: &Pod) -> bool {
        if new.metadata.deletion_timestamp.is_none() {
            return false;
        }
        self.deleted(namespace, new, false);
        true
    }

    /// Checked on the new pod only: during an ownership transfer the finalizer may be added
    /// and removed again within one collapsed update.
    fn released(&self, job: &Job, new: &Pod) {
        if !has_tracking_finalizer(new) {
            self.finalizer_expectations.observed(&key_of(job), uid(new));
        }
        self.enqueue_batched(job);
    }

    fn controlled_updated(&self, job: &Arc<Job>, _old: &Pod, new: &Pod) {
        self.released(job, new);
    }

    fn orphan_seen(&self, pod: &Pod) {
        if has_tracking_finalizer(pod) {
            self.enqueue_orphan(pod);
        }
    }

    /// `addPod`/`updatePod`: a pod whose Job is not cached (deleted before this pod's own
    /// event arrived, so `deleteJob` did not see the pod) still holding the finalizer.
    fn owner_missing(&self, pod: &Pod) {
        self.orphan_seen(pod);
    }
}

impl Controller {
    pub(crate) fn enqueue_batched(&self, job: &Job) {
        self.queue.add_after(key_of(job), SYNC_BATCH_PERIOD);
    }

    pub(crate) fn enqueue_orphan(&self, pod: &Pod) {
        self.orphan_queue.add(key_of(pod));
    }

    pub(crate) fn on_job_change(&self, change: Change<Job>) {
        match change {
            Change::Added(job) => {
                self.queue.add(key_of(&*job));
                if let Some(name) = managed_by_external(&job) {
                    metrics::inc(|x| &x.by_external, &[name], 1);
                }
            }
            Change::Updated { old, new } => {
                let key = key_of(&*new);
                if old.metadata.uid != new.metadata.uid {
                    self.forget(&key);
                }
                if old.metadata.generation == new.metadata.generation {
                    self.queue.add_after(key.clone(), SYNC_BATCH_PERIOD);
                } else {
                    self.queue.add(key.clone());
                }
                if is_finished(&new) {
                    self.cleanup_pod_finalizers(&new);
                }
                // A changed deadline on a started Job fires at its new time.
                if let Some(wait) = deadline_changed(&old, &new, self.clock.wall()) {
                    self.queue.add_after(key, wait.requeue_after());
                }
            }
            Change::Deleted { obj, .. } => {
                let key = key_of(&*obj);
                // A Job re-created under the same name must not inherit these.
                self.forget(&key);
                self.queue.add(key);
                self.cleanup_pod_finalizers(&obj);
            }
        }
    }

    pub(crate) fn forget(&self, key: &str) {
        self.consistency.clear(key, None);
        self.expectations.delete_expectations(key);
        self.finalizer_expectations.delete(key);
        self.backoff.remove(key);
    }

    /// Queues every pod of `job` that still holds the tracking finalizer for the orphan
    /// worker (the Job is gone or finished, so its sync will not remove them).
    fn cleanup_pod_finalizers(&self, job: &Job) {
        let Ok(selector) = selector_of(job) else {
            return;
        };
        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        let job_uid = job.metadata.uid.as_deref().unwrap_or_default();
        for pod in self.pods.list_namespace(namespace) {
            let controlled = controller_of(&pod.metadata).is_some_and(|r| r.uid == job_uid);
            if controlled && has_tracking_finalizer(&pod) && selector.matches(labels_of(&pod)) {
                self.enqueue_orphan(&pod);
            }
        }
    }

    /// The cached Job the pod's controller reference names, if kind and UID agree.
    pub(crate) fn resolve_pod(&self, namespace: &str, pod: &Pod) -> Option<Arc<Job>> {
        self.owner_of(namespace, pod)
    }

    /// `addPod`, `updatePod`, `deletePod`, each counting finished pods that still hold the
    /// tracking finalizer first.
    pub(crate) fn on_pod_change(&self, change: Change<Pod>) {
        match &change {
            Change::Added(pod) => record_finished_pod_with_tracking_finalizer(None, Some(pod)),
            Change::Updated { old, new } => {
                record_finished_pod_with_tracking_finalizer(Some(old), Some(new));
            }
            Change::Deleted { obj, .. } => {
                record_finished_pod_with_tracking_finalizer(Some(obj), None);
            }
        }
        on_child_change(self, change);
    }
}

#[cfg(test)]
mod handler_tests {
    use kube::runtime::watcher;
    use rkcm_runtime::cache::Informer;
    use rkcm_runtime::queue::RateLimiter;
    use serde_json::json;

    use super::*;
    use crate::backoff::BackoffStore;
    use crate::tracking::FinalizerExpectations;
    use rkcm_runtime::events::EventRecorder;
    use rkcm_runtime::queue::WorkQueue;
    use rkcm_runtime::workload::expectations::UidTrackingExpectations;
    use rkcm_runtime::workload::podcontrol::PodControl;

    fn pod(name: &str, rv: &str, deleting: bool) -> Arc<Pod> {
        let mut p: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "resourceVersion": rv,
                "labels": {"app": "j"},
                "finalizers": ["batch.kubernetes.io/job-tracking"],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                     "uid": "job-uid", "controller": true}],
            },
            "status": {"phase": "Running"},
        }))
        .expect("pod");
        if deleting {
            p.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
            );
        }
        Arc::new(p)
    }

    /// A pod the controller deleted is seen while it terminates (deletion timestamp, its
    /// status, its finalizer removed) and when it goes: one deletion, however often it is seen.
    #[tokio::test]
    async fn a_deleted_pod_counts_once_however_often_it_is_seen() {
        let fake = rkcm_testkit::fake_api::FakeApi::new();
        let client = fake.client();
        let jobs = Informer::<Job>::detached();
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid",
                         "resourceVersion": "1"},
            "spec": {"selector": {"matchLabels": {"app": "j"}},
                     "template": {"metadata": {"labels": {"app": "j"}},
                                  "spec": {"containers": []}}},
        }))
        .expect("job");
        jobs.feed(watcher::Event::Apply(job));
        let pods = Informer::<Pod>::detached();
        let (recorder, _) = EventRecorder::fake("job-controller");
        let clock = rkcm_runtime::clock::system();
        let c = Controller {
            client: client.clone(),
            jobs: jobs.store(),
            pods: pods.store(),
            expectations: UidTrackingExpectations::new(clock.clone()),
            finalizer_expectations: FinalizerExpectations::default(),
            backoff: BackoffStore::default(),
            consistency: crate::metrics::stale_guard(),
            pod_control: PodControl::new(client, recorder.clone()),
            recorder,
            queue: WorkQueue::new("test-job", RateLimiter::Default),
            orphan_queue: WorkQueue::new("test-job-orphans", RateLimiter::Default),
            clock,
            cfg: crate::config::Config::default(),
        };
        c.expectations
            .expect_deletions("ns/j", vec!["ns/a".into(), "ns/b".into()]);
        let (a1, a2, a3) = (
            pod("a", "1", false),
            pod("a", "2", true),
            pod("a", "3", true),
        );
        c.on_pod_change(Change::Updated {
            old: a1,
            new: a2.clone(),
        });
        c.on_pod_change(Change::Updated {
            old: a2,
            new: a3.clone(),
        });
        c.on_pod_change(Change::Deleted {
            obj: a3,
            final_state_unknown: false,
        });
        assert_eq!(c.expectations.get("ns/j"), Some((0, 1)));
        assert!(
            !c.expectations.satisfied_expectations("ns/j"),
            "b is not seen deleted yet"
        );
        let (b1, b2) = (pod("b", "1", false), pod("b", "2", true));
        c.on_pod_change(Change::Updated { old: b1, new: b2 });
        assert!(c.expectations.satisfied_expectations("ns/j"));
    }
}
