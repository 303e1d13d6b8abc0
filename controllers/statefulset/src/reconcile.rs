//! The sync: caches -> adopt revisions and pods -> revisions -> [`plan`](crate::plan) ->
//! pod and claim writes -> status -> history truncation.
//!
//! Mirrors `sync`, `adoptOrphanRevisions` and `getPodsForStatefulSet` of upstream
//! `stateful_set.go`; `UpdateStatefulSet`, `performUpdate`, `getStatefulSetRevisions`,
//! `updateStatefulSetStatus` and `truncateHistory` of `stateful_set_control.go`; the writes
//! and events of `stateful_pod_control.go`; `stateful_set_status_updater.go`.

use rkcm_runtime::error::StatusError;
use rkcm_runtime::tracked::Size;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{self as core, PersistentVolumeClaim};
use kube::Resource;
use kube::api::{Api, PostParams};
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::cache::{INDEX_CONTROLLER_UID, INDEX_ORPHANS_BY_NAMESPACE, Informer};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::error::{error_message, is_namespace_terminating};
use rkcm_runtime::events::{EventRecorder, EventType, object_reference};
use rkcm_runtime::keys::{key, key_of};
use rkcm_runtime::queue::RetryPolicy;
use rkcm_runtime::queue::WorkQueue;
use rkcm_runtime::queue::pacing::StatusPacer;
use rkcm_runtime::workload::controller_ref::{ControllerRefManager, controller_of};
use rkcm_runtime::workload::expectations::UidTrackingExpectations;
use rkcm_runtime::workload::history::{
    History, owned_or_orphan_revisions, sort_controller_revisions,
};
use rkcm_runtime::workload::podcontrol::delete_params;

use crate::config::Config;
use crate::consts::{MAX_BATCH_SIZE, reasons};
use crate::error::Error;
use crate::identity::{is_member_of, set_name};
use crate::plan::{self, Action, ClaimWork, Claims, DeleteReason, OwnerWork, Plan, Snapshot};
use crate::revision::{self, UpdateChoice};
use crate::status;
use rkcm_runtime::workload::consistency::{GroupResource, StaleGuard};
use rkcm_runtime::workload::selector::Selector;

/// Conflict retries of pod and status updates (client-go `retry.DefaultRetry`: 5 steps).
const CONFLICT_STEPS: u32 = 5;

/// Everything the handlers and workers share.
pub(crate) struct Controller {
    pub(crate) client: kube::Client,
    pub(crate) sets: Informer<StatefulSet>,
    pub(crate) pods: Informer<Pod>,
    pub(crate) claims: Informer<PersistentVolumeClaim>,
    pub(crate) revisions: Informer<ControllerRevision>,
    pub(crate) history: History,
    pub(crate) recorder: EventRecorder,
    pub(crate) queue: WorkQueue<String>,
    pub(crate) expectations: UidTrackingExpectations,
    pub(crate) consistency: StaleGuard,
    pub(crate) clock: SharedClock,
    pub(crate) cfg: Config,
    /// Spaces out one set's status writes that only move counts ([`rkcm_runtime::queue::pacing`]).
    pub(crate) pacer: StatusPacer,
}

/// One sync's context for the writes.
struct Ctx<'a> {
    key: &'a str,
    set: &'a StatefulSet,
    claims: &'a Claims,
}

fn name_of<K: Resource>(o: &K) -> String {
    o.meta().name.clone().unwrap_or_default()
}

/// `utilerrors.NewAggregate(...).Error()`: one message as is, several as `[a, b]`.
fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn title(verb: &str) -> String {
    let mut c = verb.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// Type, reason and message of upstream's `recordPodEvent`: `Successful<Verb>` /
/// `Failed<Verb>`, the message with the verb in lower case.
pub(crate) fn pod_event_text(
    verb: &str,
    pod: &str,
    set: &str,
    err: Option<&str>,
) -> (EventType, String, String) {
    let (t, v) = (title(verb), verb.to_lowercase());
    match err {
        None => (
            EventType::Normal,
            format!("Successful{t}"),
            format!("{v} Pod {pod} in StatefulSet {set} successful"),
        ),
        Some(e) => (
            EventType::Warning,
            format!("Failed{t}"),
            format!("{v} Pod {pod} in StatefulSet {set} failed error: {e}"),
        ),
    }
}

/// Type, reason and message of upstream's `recordClaimEvent`.
pub(crate) fn claim_event_text(
    verb: &str,
    pod: &str,
    claim: &str,
    set: &str,
    err: Option<&str>,
) -> (EventType, String, String) {
    let (t, v) = (title(verb), verb.to_lowercase());
    match err {
        None => (
            EventType::Normal,
            format!("Successful{t}"),
            format!("{v} Claim {claim} Pod {pod} in StatefulSet {set} success"),
        ),
        Some(e) => (
            EventType::Warning,
            format!("Failed{t}"),
            format!("{v} Claim {claim} for Pod {pod} in StatefulSet {set} failed error: {e}"),
        ),
    }
}

impl Controller {
    /// The per-object maps, for `rkcm_runtime::tracked`.
    pub(crate) fn tracked_sizes(&self, out: &mut Vec<Size>) {
        out.push(Size::object("expectations", self.expectations.len()));
        out.push(Size::object("stale_guard", self.consistency.store().len()));
        out.push(Size::object("status_pacing", self.pacer.len()));
    }

    fn wrote<K: Resource<DynamicType = ()>>(&self, ctx: &Ctx<'_>, obj: &K) {
        self.wrote_version::<K>(ctx, obj.meta().resource_version.as_deref());
    }

    /// [`Self::wrote`] for a write of which only the identity was read back.
    fn wrote_version<K: Resource<DynamicType = ()>>(&self, ctx: &Ctx<'_>, rv: Option<&str>) {
        if self.cfg.stale_cache_guard {
            let uid = ctx.set.metadata.uid.as_deref().unwrap_or_default();
            self.consistency
                .wrote(ctx.key, uid, GroupResource::of::<K>(), rv);
        }
    }

    /// `recordPodEvent`.
    fn pod_event(&self, ctx: &Ctx<'_>, verb: &str, pod: &str, err: Option<&str>) {
        let (type_, reason, message) = pod_event_text(verb, pod, set_name(ctx.set), err);
        self.recorder
            .event(&object_reference(ctx.set), type_, &reason, &message);
    }

    /// `recordClaimEvent`.
    fn claim_event(&self, ctx: &Ctx<'_>, verb: &str, pod: &str, claim: &str, err: Option<&str>) {
        let (type_, reason, message) = claim_event_text(verb, pod, claim, set_name(ctx.set), err);
        self.recorder
            .event(&object_reference(ctx.set), type_, &reason, &message);
    }

    async fn sync_inner(&self, key: &str) -> Result<(), Error> {
        if self.cfg.stale_cache_guard
            && let Err(stale) = self
                .consistency
                .ensure_caught_up(key, &[&self.pods, &self.claims, &self.sets])
        {
            return Err(Error::StaleCache {
                key: key.to_string(),
                source: stale,
            });
        }
        let Some(set) = self.sets.store().get(key) else {
            tracing::debug!(
                controller = crate::config::NAME,
                key,
                "statefulset has been deleted"
            );
            self.expectations.delete_expectations(key);
            self.consistency.clear(key, None);
            self.pacer.forget(key);
            return Ok(());
        };
        if !self.expectations.satisfied_expectations(key) {
            tracing::debug!(
                controller = crate::config::NAME,
                key,
                "waiting for the cache to observe earlier creates and deletes"
            );
            // The awaited events normally requeue the set; this covers one that never comes.
            self.queue.add_after(
                key.to_string(),
                rkcm_runtime::workload::expectations::EXPECTATIONS_TIMEOUT,
            );
            return Ok(());
        }
        let spec_selector = Some(&set.spec)
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        let selector = match Selector::from_label_selector(&spec_selector) {
            Ok(s) => s,
            Err(error) => {
                tracing::warn!(controller = crate::config::NAME, key, %error, "statefulset has an invalid label selector");
                return Ok(());
            }
        };
        let namespace = set.metadata.namespace.clone().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let sets_api: Api<StatefulSet> = Api::namespaced(self.client.clone(), &namespace);

        // Revisions: adopt orphans first.
        let list_revisions = || {
            owned_or_orphan_revisions(
                &self.revisions.store().list_namespace(&namespace),
                &uid,
                |r| selector.matches(r.metadata.labels.as_ref()),
            )
        };
        let mut revisions = list_revisions();
        let orphans: Vec<_> = revisions
            .iter()
            .filter(|r| controller_of(&r.metadata).is_none())
            .cloned()
            .collect();
        if !orphans.is_empty() {
            let mut manager = ControllerRefManager::new(
                &*set,
                sets_api.clone(),
                Api::<ControllerRevision>::namespaced(self.client.clone(), &namespace),
            )
            .map_err(|source| Error::Claim {
                key: key.to_string(),
                what: "controller revisions",
                source,
            })?;
            let outcome = manager.claim(&orphans, |_| true).await;
            if let Some(source) = outcome.errors.into_iter().next() {
                return Err(Error::Claim {
                    key: key.to_string(),
                    what: "controller revisions",
                    source,
                });
            }
        }

        // Pods.
        let mut candidates = self.pods.store().by_index(INDEX_CONTROLLER_UID, &uid);
        candidates.extend(
            self.pods
                .store()
                .by_index(INDEX_ORPHANS_BY_NAMESPACE, &namespace),
        );
        let mut manager = ControllerRefManager::new(
            &*set,
            sets_api,
            Api::<Pod>::namespaced(self.client.clone(), &namespace),
        )
        .map_err(|source| Error::Claim {
            key: key.to_string(),
            what: "pods",
            source,
        })?;
        let outcome = manager
            .claim(&candidates, |p| {
                selector.matches(p.metadata.labels.as_ref()) && is_member_of(&set, p)
            })
            .await;
        let claims = self.claims_of(&namespace);
        let ctx = Ctx {
            key,
            set: &set,
            claims: &claims,
        };
        // Children already owned come back as the cached objects themselves; only adopted
        // ones are new objects (written by the adoption patch).
        let cached: std::collections::HashSet<usize> =
            candidates.iter().map(|c| Arc::as_ptr(c).addr()).collect();
        for p in &outcome.claimed {
            if !cached.contains(&Arc::as_ptr(p).addr())
                && controller_of(&p.metadata).is_some_and(|r| r.uid == uid)
            {
                self.wrote(&ctx, &**p);
            }
        }
        let pods = outcome.into_result().map_err(|source| Error::Claim {
            key: key.to_string(),
            what: "pods",
            source,
        })?;

        // Revisions of this sync.
        sort_controller_revisions(&mut revisions);
        let mut collision_count = set
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let choice = revision::choose_update(
            &set,
            &revisions,
            collision_count,
            self.cfg.semantic_revision_comparison,
        )
        .map_err(|message| Error::RevisionData {
            key: key.to_string(),
            message,
        })?;
        let update_revision: Arc<ControllerRevision> = match choice {
            UpdateChoice::Latest(r) => r,
            UpdateChoice::Rollback(r, number) => Arc::new(
                self.history
                    .update_controller_revision(&r, number)
                    .await
                    .map_err(|source| Error::Revision {
                        key: key.to_string(),
                        step: "updating",
                        source,
                    })?,
            ),
            UpdateChoice::Create(proposed) => Arc::new(
                self.history
                    .create_controller_revision(&*set, &proposed, &mut collision_count)
                    .await
                    .map_err(|source| Error::Revision {
                        key: key.to_string(),
                        step: "creating",
                        source,
                    })?,
            ),
        };
        let current_revision = revision::current_revision(&set, &revisions, &update_revision);
        let data_err = |message| Error::RevisionData {
            key: key.to_string(),
            message,
        };
        let current_set = revision::apply_revision(&set, &current_revision).map_err(data_err)?;
        let update_set = revision::apply_revision(&set, &update_revision).map_err(data_err)?;
        let current_name = name_of(&*current_revision);
        let update_name = name_of(&*update_revision);
        if let Some(message) = crate::plan::unknown_strategy_error(&set) {
            // Upstream `updateStatefulSet` with gate `StatefulSetRecreateStrategy` off: an
            // event and an error before anything is written; history is still truncated.
            self.recorder.event(
                &object_reference(&*set),
                EventType::Warning,
                reasons::UNKNOWN_STRATEGY,
                &message,
            );
            if let Err(e) = self
                .truncate_history(key, &set, &revisions, &pods, &current_name, &update_name)
                .await
            {
                tracing::debug!(controller = crate::NAME, key, error = %e, "truncating history failed");
            }
            return Err(Error::Spec {
                key: key.to_string(),
                message,
            });
        }
        let now = self.clock.wall();
        let snapshot = Snapshot {
            set: &set,
            current_set: &current_set,
            update_set: &update_set,
            current_revision: &current_name,
            update_revision: &update_name,
            collision_count,
            pods: &pods,
            claims: &claims,
            now,
            max_unavailable_gate: self.cfg.max_unavailable,
        };
        let plan = plan::plan(&snapshot);
        let (result, update_deletions) = self.execute(&ctx, &update_set, &plan).await;

        let mut st: StatefulSetStatus = plan.status.clone();
        st.current_replicas = Some(st.current_replicas.unwrap_or(0) - update_deletions);
        status::complete_rollout(&set, &mut st);
        let status_result = if let Some(message) = &plan.max_unavailable_error {
            // Upstream's status write reads maxUnavailable first and fails without writing.
            Err(Error::Spec {
                key: key.to_string(),
                message: message.clone(),
            })
        } else if !status::needs_write(&set, &st) {
            Ok(())
        } else if let Some(wait) = status::is_routine(&set, &st)
            .then(|| self.pacer.hold(key, self.clock.now()))
            .flatten()
        {
            // Counts written moments ago: the next write counts whatever else arrives
            // meanwhile.
            self.queue.add_after(key.to_string(), wait);
            Ok(())
        } else {
            let written = self.write_status(&ctx, st.clone()).await;
            if written.is_ok() {
                self.pacer.wrote(key, self.clock.now());
            }
            written
        };

        if plan.max_unavailable_error.is_none() {
            self.set_gauges(&set, &plan);
        }

        // History, even after a failed sync.
        let history_result = self
            .truncate_history(key, &set, &revisions, &pods, &current_name, &update_name)
            .await;

        if let Some(delay) = status::requeue_after(&set, pods.iter().map(|p| &**p), &st, now) {
            self.queue.add_after(key.to_string(), delay);
        }
        match (result, status_result) {
            (Err(e), Err(status_error)) => {
                tracing::debug!(controller = crate::config::NAME, key, %status_error, "status update failed after a failed sync");
                Err(e)
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
            _ => history_result,
        }
    }

    fn claims_of(&self, namespace: &str) -> Claims {
        self.claims
            .store()
            .list_namespace(namespace)
            .into_iter()
            .map(|c| (name_of(&*c), c))
            .collect()
    }

    fn set_gauges(&self, set: &StatefulSet, plan: &Plan) {
        let Some(max) = plan.max_unavailable else {
            return;
        };
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        let policy = Some(&set.spec)
            .and_then(|s| s.pod_management_policy.as_deref())
            .unwrap_or(crate::consts::policy::ORDERED_READY);
        crate::metrics::set_max_unavailable(namespace, set_name(set), policy, max);
        if let Some(u) = plan.unavailable {
            crate::metrics::set_unavailable_replicas(namespace, set_name(set), policy, u);
        }
    }

    /// Runs the plan's phases; returns the first error and the number of update deletions.
    async fn execute(
        &self,
        ctx: &Ctx<'_>,
        update_set: &StatefulSet,
        plan: &Plan,
    ) -> (Result<(), Error>, i32) {
        let planned_deletes: Vec<String> = plan
            .actions()
            .filter_map(|a| match a {
                Action::DeletePod { pod, .. } => Some(key_of(&**pod)),
                _ => None,
            })
            .collect();
        self.expectations
            .expect_deletions(ctx.key, planned_deletes.clone());
        let deleted = std::sync::Mutex::new(Vec::<String>::new());
        let update_deletions = std::sync::atomic::AtomicI32::new(0);
        let mut result = Ok(());
        'phases: for phase in &plan.phases {
            if !phase.burst {
                for unit in &phase.units {
                    if let Err(e) = self
                        .run_unit(ctx, update_set, unit, &deleted, &update_deletions)
                        .await
                    {
                        result = Err(e);
                        break 'phases;
                    }
                }
                continue;
            }
            let mut next = 0;
            let mut batch = 1usize;
            while next < phase.units.len() {
                let end = (next + batch).min(phase.units.len());
                let results = futures::future::join_all(
                    phase.units[next..end]
                        .iter()
                        .map(|u| self.run_unit(ctx, update_set, u, &deleted, &update_deletions)),
                )
                .await;
                if let Some(e) = results.into_iter().find_map(Result::err) {
                    result = Err(e);
                    break 'phases;
                }
                next = end;
                batch = (batch * 2).min(MAX_BATCH_SIZE);
            }
        }
        // Deletions that did not happen will never be observed.
        let done = deleted
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for k in planned_deletes.iter().filter(|k| !done.contains(k)) {
            self.expectations.deletion_observed(ctx.key, k);
        }
        (result, update_deletions.into_inner())
    }

    async fn run_unit(
        &self,
        ctx: &Ctx<'_>,
        update_set: &StatefulSet,
        unit: &plan::Unit,
        deleted: &std::sync::Mutex<Vec<String>>,
        update_deletions: &std::sync::atomic::AtomicI32,
    ) -> Result<(), Error> {
        for action in &unit.actions {
            match action {
                Action::DeletePod { pod, reason } => {
                    self.delete_pod(ctx, pod, *reason).await?;
                    deleted
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(key_of(&**pod));
                    if *reason == DeleteReason::Update {
                        update_deletions.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                Action::CreatePod { pod, claims } => self.create_pod(ctx, pod, claims).await?,
                Action::EnsureClaims {
                    pod,
                    claims,
                    owners,
                } => {
                    let pod_name = name_of(&**pod);
                    self.create_claims(ctx, &pod_name, claims).await?;
                    if let Err(e) = self.apply_owner_work(ctx, &pod_name, owners).await {
                        self.pod_event(ctx, "update", &pod_name, Some(&e.to_string()));
                        return Err(e);
                    }
                }
                Action::UpdatePod { pod } => self.update_pod(ctx, update_set, pod).await?,
                Action::FixClaimOwners { pod, owners } => {
                    self.apply_owner_work(ctx, &name_of(&**pod), owners).await?;
                }
            }
        }
        Ok(())
    }

    /// `DeleteStatefulPod`: graceful, with a UID precondition. NotFound counts as done.
    async fn delete_pod(
        &self,
        ctx: &Ctx<'_>,
        pod: &Pod,
        reason: DeleteReason,
    ) -> Result<(), Error> {
        let name = name_of(pod);
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        tracing::info!(controller = crate::config::NAME, statefulset = %ctx.key, pod = %name, reason = ?reason, "deleting pod");
        let params = delete_params(pod.metadata.uid.as_deref());
        match rkcm_runtime::api::write::delete::<Pod>(
            &self.client,
            Some(&namespace),
            &name,
            &params,
        )
        .await
        {
            Ok(_) => {
                self.pod_event(ctx, "delete", &name, None);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                self.pod_event(ctx, "delete", &name, None);
                Ok(())
            }
            Err(e) => {
                self.pod_event(ctx, "delete", &name, Some(&error_message(&e)));
                Err(Error::Pod {
                    key: ctx.key.to_string(),
                    step: "deleting",
                    pod: name,
                    source: e,
                })
            }
        }
    }

    /// `createPersistentVolumeClaims`; returns the claims created.
    async fn create_claims(
        &self,
        ctx: &Ctx<'_>,
        pod: &str,
        work: &ClaimWork,
    ) -> Result<Vec<PersistentVolumeClaim>, Error> {
        let mut errs = Vec::new();
        let mut terminating_ns = false;
        let mut created = Vec::new();
        for claim in &work.create {
            let name = name_of(claim);
            let namespace = claim.metadata.namespace.clone().unwrap_or_default();
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
            match api.create(&PostParams::default(), claim).await {
                Ok(c) => {
                    self.wrote(ctx, &c);
                    self.claim_event(ctx, "create", pod, &name, None);
                    created.push(c);
                }
                Err(e) => {
                    let already = matches!(&e, kube::Error::Api(s) if s.is_already_exists());
                    terminating_ns |= is_namespace_terminating(&e);
                    let msg = error_message(&e);
                    if !already {
                        self.claim_event(ctx, "create", pod, &name, Some(&msg));
                    }
                    errs.push(format!("failed to create PVC {name}: {msg}"));
                }
            }
        }
        errs.extend(
            work.terminating
                .iter()
                .map(|n| format!("pvc {n} is being deleted")),
        );
        if errs.is_empty() {
            Ok(created)
        } else {
            Err(Error::Claims {
                key: ctx.key.to_string(),
                step: "creating",
                pod: pod.to_string(),
                message: aggregate(&errs),
                namespace_terminating: terminating_ns,
            })
        }
    }

    /// `UpdatePodClaimForRetentionPolicy` executed.
    async fn apply_owner_work(
        &self,
        ctx: &Ctx<'_>,
        pod: &str,
        work: &OwnerWork,
    ) -> Result<(), Error> {
        for name in &work.conflicting {
            self.recorder.event(
                &object_reference(ctx.set),
                EventType::Warning,
                reasons::CONFLICTING_CONTROLLER,
                &format!("PersistentVolumeClaim {name} has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim"),
            );
        }
        for claim in &work.updates {
            let name = name_of(claim);
            let namespace = claim.metadata.namespace.clone().unwrap_or_default();
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
            match api.replace(&name, &PostParams::default(), claim).await {
                Ok(c) => self.wrote(ctx, &c),
                Err(e) => {
                    return Err(Error::Claims {
                        key: ctx.key.to_string(),
                        step: "updating owner references of",
                        pod: pod.to_string(),
                        message: format!(
                            "could not update claim {name} for delete policy ownerRefs: {}",
                            error_message(&e)
                        ),
                        namespace_terminating: is_namespace_terminating(&e),
                    });
                }
            }
        }
        Ok(())
    }

    /// `CreateStatefulPod`.
    async fn create_pod(
        &self,
        ctx: &Ctx<'_>,
        pod: &core::Pod,
        work: &ClaimWork,
    ) -> Result<(), Error> {
        let name = name_of(pod);
        let created_claims = match self.create_claims(ctx, &name, work).await {
            Ok(c) => c,
            Err(e) => {
                let msg = match &e {
                    Error::Claims { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                self.pod_event(ctx, "create", &name, Some(&msg));
                return Err(e);
            }
        };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        self.expectations.raise_expectations(ctx.key, 1, 0);
        // Sent in protobuf, as upstream does; only the identity of the answer is read: the pod
        // as sent, with the server's name, UID and resourceVersion, is all that follows needs.
        let result = rkcm_runtime::api::write::create(&self.client, Some(&namespace), pod).await;
        let created = match result {
            Ok(written) => {
                let mut created = pod.clone();
                let meta = &mut created.metadata;
                meta.uid = written.uid;
                meta.resource_version = written.resource_version;
                meta.creation_timestamp = written.creation_timestamp;
                if written.name.is_some() {
                    meta.name = written.name;
                }
                created
            }
            Err(e) => {
                self.expectations.lower_expectations(ctx.key, 1, 0);
                let already = matches!(&e, kube::Error::Api(s) if s.is_already_exists());
                if !already {
                    self.pod_event(ctx, "create", &name, Some(&error_message(&e)));
                }
                return Err(Error::Pod {
                    key: ctx.key.to_string(),
                    step: "creating",
                    pod: name,
                    source: e,
                });
            }
        };
        self.wrote(ctx, &created);
        // Claim owner references as far as possible now, including the claims just made.
        let mut claims: Claims = ctx.claims.clone();
        for c in created_claims {
            claims.insert(name_of(&c), Arc::new(c));
        }
        let owners = plan::owner_work(ctx.set, &Pod::from(&created), &claims);
        if let Err(e) = self.apply_owner_work(ctx, &name, &owners).await {
            self.pod_event(ctx, "update", &name, Some(&e.to_string()));
            return Err(e);
        }
        self.pod_event(ctx, "create", &name, None);
        Ok(())
    }

    /// `UpdateStatefulPod`: repairs on the freshest copy, retrying conflicts.
    async fn update_pod(
        &self,
        ctx: &Ctx<'_>,
        update_set: &StatefulSet,
        pod: &Arc<Pod>,
    ) -> Result<(), Error> {
        let name = name_of(&**pod);
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<core::Pod> = Api::namespaced(self.client.clone(), &namespace);
        let mut current: Pod = (**pod).clone();
        let mut delay = Duration::from_millis(10);
        for attempt in 1..=CONFLICT_STEPS {
            let r = plan::repair(update_set, &current, ctx.claims);
            if !r.claims.is_empty()
                && let Err(e) = self.create_claims(ctx, &name, &r.claims).await
            {
                self.pod_event(ctx, "update", &name, Some(&e.to_string()));
                return Err(e);
            }
            if let Err(e) = self.apply_owner_work(ctx, &name, &r.owners).await {
                self.pod_event(ctx, "update", &name, Some(&e.to_string()));
                return Err(e);
            }
            if !r.dirty {
                return Ok(());
            }
            // The pod cache keeps a projection of each pod (see `informers`): the update body
            // is the repair of the whole pod as the server has it, or the PUT would drop
            // every field the cache does not keep.
            let whole = match api.get(&name).await {
                Ok(whole) => whole,
                Err(e) => {
                    self.pod_event(ctx, "update", &name, Some(&error_message(&e)));
                    return Err(Error::Pod {
                        key: ctx.key.to_string(),
                        step: "reading",
                        pod: name,
                        source: e,
                    });
                }
            };
            let (body, repair) = plan::repair_whole(update_set, whole, ctx.claims);
            if !repair.dirty {
                return Ok(());
            }
            match api.replace(&name, &PostParams::default(), &body).await {
                Ok(updated) => {
                    self.wrote(ctx, &updated);
                    self.pod_event(ctx, "update", &name, None);
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.is_conflict() && attempt < CONFLICT_STEPS => {
                    tokio::time::sleep(delay).await;
                    delay *= 5;
                    if let Some(fresh) = self.pods.store().get(&key(Some(&namespace), &name)) {
                        current = (*fresh).clone();
                    }
                }
                Err(e) => {
                    self.pod_event(ctx, "update", &name, Some(&error_message(&e)));
                    return Err(Error::Pod {
                        key: ctx.key.to_string(),
                        step: "updating",
                        pod: name,
                        source: e,
                    });
                }
            }
        }
        Ok(())
    }

    /// `UpdateStatefulSetStatus`: PUT the whole status with the cached resourceVersion,
    /// retrying conflicts on a fresh cache copy.
    async fn write_status(&self, ctx: &Ctx<'_>, status: StatefulSetStatus) -> Result<(), Error> {
        let mut current = ctx.set.clone();
        // retry.DefaultBackoff, as the pod updates above: 10 ms, five times longer each try.
        let mut delay = Duration::from_millis(10);
        for attempt in 1..=CONFLICT_STEPS {
            current.status = Some(status.clone());
            // Only the new resourceVersion is read from the answer.
            match rkcm_runtime::api::write::replace_status(&self.client, &current).await {
                Ok(updated) => {
                    self.wrote_version::<StatefulSet>(ctx, updated.resource_version.as_deref());
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.is_conflict() && attempt < CONFLICT_STEPS => {
                    tracing::debug!(
                        controller = crate::config::NAME,
                        key = ctx.key,
                        "status update conflict, retrying on a fresh copy"
                    );
                    tokio::time::sleep(delay).await;
                    delay *= 5;
                    if let Some(fresh) = self.sets.store().get(ctx.key) {
                        current = (*fresh).clone();
                    }
                }
                Err(e) => {
                    return Err(Error::UpdateStatus(StatusError::new(
                        "statefulset",
                        ctx.key.to_string(),
                        e,
                    )));
                }
            }
        }
        Ok(())
    }

    async fn truncate_history(
        &self,
        key: &str,
        set: &StatefulSet,
        revisions: &[Arc<ControllerRevision>],
        pods: &[Arc<Pod>],
        current: &str,
        update: &str,
    ) -> Result<(), Error> {
        for r in revision::revisions_to_delete(set, revisions, pods, Some(current), Some(update)) {
            match self.history.delete_controller_revision(&r).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(source) => {
                    return Err(Error::Revision {
                        key: key.to_string(),
                        step: "deleting",
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}

impl Reconcile for Controller {
    type Error = Error;

    /// Upstream requeues failures for ever with backoff; a terminating namespace is dropped.
    fn retry_policy() -> RetryPolicy<Error> {
        RetryPolicy::default()
            .give_up_on(Error::is_namespace_terminating)
            .quiet_on(Error::is_expected_requeue)
    }

    /// One sync of the StatefulSet `key`.
    async fn sync(&self, key: String) -> Result<(), Error> {
        self.sync_inner(&key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_texts_are_upstreams() {
        assert_eq!(
            pod_event_text("create", "web-0", "web", None),
            (
                EventType::Normal,
                "SuccessfulCreate".to_string(),
                "create Pod web-0 in StatefulSet web successful".to_string()
            )
        );
        assert_eq!(
            pod_event_text("delete", "web-1", "web", Some("boom")),
            (
                EventType::Warning,
                "FailedDelete".to_string(),
                "delete Pod web-1 in StatefulSet web failed error: boom".to_string()
            )
        );
        assert_eq!(
            claim_event_text("create", "web-0", "data-web-0", "web", None).2,
            "create Claim data-web-0 Pod web-0 in StatefulSet web success"
        );
        assert_eq!(
            claim_event_text("create", "web-0", "data-web-0", "web", Some("x")),
            (
                EventType::Warning,
                "FailedCreate".to_string(),
                "create Claim data-web-0 for Pod web-0 in StatefulSet web failed error: x"
                    .to_string()
            )
        );
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
    }
}
