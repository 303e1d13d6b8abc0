//! The executor: performs a [`Plan`]'s actions (pod and claim writes with upstream's
//! events, in phases and slow-start batches) and the status and history writes the sync
//! asks for. It takes no decision of its own: what to write comes from
//! [`plan`](crate::plan) and [`claims`](crate::claims).
//!
//! Mirrors the writes and events of upstream `stateful_pod_control.go`, `runForAll` of
//! `stateful_set_control.go` and `stateful_set_status_updater.go`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{self as core, PersistentVolumeClaim};
use kube::Resource;
use kube::api::{Api, PostParams};
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::error::{error_message, is_namespace_terminating};
use rkcm_runtime::events::{EventType, object_reference};
use rkcm_runtime::keys::{key, key_of};
use rkcm_runtime::workload::podcontrol::delete_params;

use crate::claims::{self, ClaimWork, Claims, OwnerWork};
use crate::consts::{MAX_BATCH_SIZE, reasons};
use crate::error::Error;
use crate::identity::set_name;
use crate::plan::{self, Action, DeleteReason, Plan};
use crate::revision::{self};
use rkcm_runtime::workload::consistency::GroupResource;

use crate::reconcile::{CONFLICT_STEPS, Controller, Ctx, name_of};

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
    pub(crate) fn wrote<K: Resource<DynamicType = ()>>(&self, ctx: &Ctx<'_>, obj: &K) {
        self.wrote_version::<K>(ctx, obj.meta().resource_version.as_deref());
    }

    /// [`Self::wrote`] for a write of which only the identity was read back.
    pub(crate) fn wrote_version<K: Resource<DynamicType = ()>>(
        &self,
        ctx: &Ctx<'_>,
        rv: Option<&str>,
    ) {
        let uid = ctx.set.metadata.uid.as_deref().unwrap_or_default();
        self.consistency
            .wrote(ctx.key, uid, GroupResource::of::<K>(), rv);
    }

    /// `recordPodEvent`.
    fn pod_event(&self, ctx: &Ctx<'_>, verb: &str, pod: &str, err: Option<&str>) {
        let (type_, reason, message) = pod_event_text(verb, pod, set_name(ctx.set), err);
        self.recorder
            .event(&object_reference(ctx.set), type_, &reason, &message);
    }

    /// rkcm's `RecoveredStuckPod` Warning: the pod, its revision and the rule.
    fn recovery_event(&self, ctx: &Ctx<'_>, pod: &Pod, rule: crate::recovery::Rule) {
        let message = crate::recovery::event_message(
            &name_of(pod),
            crate::identity::pod_revision(pod),
            ctx.update_revision,
            rule,
            self.cfg.recover_stuck_after,
        );
        self.recorder.event(
            &object_reference(ctx.set),
            EventType::Warning,
            crate::recovery::EVENT_REASON,
            &message,
        );
    }

    /// `recordClaimEvent`.
    fn claim_event(&self, ctx: &Ctx<'_>, verb: &str, pod: &str, claim: &str, err: Option<&str>) {
        let (type_, reason, message) = claim_event_text(verb, pod, claim, set_name(ctx.set), err);
        self.recorder
            .event(&object_reference(ctx.set), type_, &reason, &message);
    }

    /// Runs the plan's phases; returns the first error and the number of update deletions.
    pub(crate) async fn execute(
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
        let mut params = delete_params(pod.metadata.uid.as_deref());
        // Mutant (sim only): skip the grace period, so the replacement of this identity is
        // created while the old pod's containers may still run.
        if rkcm_runtime::mutants::on("sts-early-replacement") {
            params.grace_period_seconds = Some(0);
        }
        // Mutant (sim only): a pod that is not ready (its node may be cut off) goes without a
        // grace period, so its replacement starts while its containers may still run there.
        let cut_off = !crate::identity::is_running_and_ready(pod);
        if cut_off && rkcm_runtime::mutants::on("sts-force-delete-cut-off") {
            params.grace_period_seconds = Some(0);
        }
        // Recovery judged the pod as the cache has it: only that version is deleted (a pod
        // that became Ready since is not).
        if let DeleteReason::Recover(_) = reason
            && let Some(p) = params.preconditions.as_mut()
        {
            p.resource_version
                .clone_from(&pod.metadata.resource_version);
        }
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
                if let DeleteReason::Recover(rule) = reason {
                    self.recovery_event(ctx, pod, rule);
                }
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                self.pod_event(ctx, "delete", &name, None);
                Ok(())
            }
            Err(e) => {
                // A recovery delete whose pod changed since the cache's copy (a crash-looping
                // pod's status moves often): judged again on the next sync, no failure event.
                let changed = matches!(&e, kube::Error::Api(s) if s.is_conflict());
                if !(changed && matches!(reason, DeleteReason::Recover(_))) {
                    self.pod_event(ctx, "delete", &name, Some(&error_message(&e)));
                }
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
        let owners = claims::owner_work(ctx.set, &Pod::from(&created), &claims);
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
            let r = claims::repair(update_set, &current, ctx.claims);
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
            let (body, repair) = claims::repair_whole(update_set, whole, ctx.claims);
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

    pub(crate) async fn truncate_history(
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
