//! Writes: create, update and patch (optimistic concurrency, status subresource,
//! generation), delete (preconditions, graceful pod deletion, finalizers) and the
//! simulation's own edits, each wrapped in the faults a seed injects around a write.

use serde_json::{Value, json};

use super::faults::roll;
use super::resources::{ResourceInfo, default_on_create, key_of, meta_str, resource};
use super::store::{Caller, Deletion, Reply, World, not_found, rfc3339};
use crate::fake_api::status;
use crate::sim::patch::{self, PatchKind};

impl World {
    /// A write of a manager or of the simulation, with the faults a seed injects around it.
    pub fn write(
        &mut self,
        caller: &Caller,
        describe: &str,
        op: impl FnOnce(&mut World) -> Reply,
    ) -> Reply {
        if roll(&mut self.rng, caller.epoch, self.faults.server_error / 2.0) {
            self.note(format!("sim 500 to {} {describe}", caller.agent));
            return Reply::Json(
                500,
                status(500, "InternalError", "Internal error occurred: injected"),
            );
        }
        let crash = self.faults.roll_crash(&mut self.rng, caller.epoch);
        if crash == Some(false) {
            self.crash(caller, describe, "before");
            return Reply::Fail("connection reset by peer".into());
        }
        self.writer = caller.epoch;
        let reply = op(self);
        self.writer = 0;
        if let Reply::Json(code, body) = &reply {
            if *code >= 400 {
                if caller.epoch != 0 {
                    let at = self.now_ms();
                    self.failed_writes
                        .push((at, format!("{} {describe}", caller.agent)));
                }
                self.note(format!(
                    "{} {describe} -> {code} {}",
                    caller.agent,
                    body["reason"].as_str().unwrap_or_default()
                ));
            } else {
                self.mark_seen(caller.epoch, body);
            }
        }
        if crash == Some(true) {
            self.crash(caller, describe, "after");
            return Reply::Fail("connection reset by peer".into());
        }
        let create = describe.starts_with("POST");
        if (!create || self.faults.timeout_creates)
            && roll(&mut self.rng, caller.epoch, self.faults.server_error / 2.0)
        {
            self.note(format!("sim 504 after {} {describe}", caller.agent));
            return Reply::Json(
                504,
                status(
                    504,
                    "Timeout",
                    "Timeout: request did not complete within the allowed duration",
                ),
            );
        }
        reply
    }

    pub(super) fn crash(&mut self, caller: &Caller, describe: &str, when: &str) {
        self.crashes += 1;
        self.note(format!(
            "sim CRASH manager epoch {} {when} {} {describe}",
            caller.epoch, caller.agent
        ));
        self.kill(caller.epoch);
    }

    /// POST.
    pub fn create(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: &str,
        mut obj: Value,
    ) -> Reply {
        if r.plural == "pods" && roll(&mut self.rng, caller.epoch, self.faults.reject_create) {
            self.note(format!("sim 403 quota to {} create pod", caller.agent));
            return Reply::Json(
                403,
                status(
                    403,
                    "Forbidden",
                    "pods \"x\" is forbidden: exceeded quota: sim, requested: pods=1",
                ),
            );
        }
        if !obj.is_object() {
            return Reply::Json(400, status(400, "BadRequest", "body is not an object"));
        }
        let mut name = meta_str(&obj, "name").to_owned();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName").to_owned();
            if prefix.is_empty() {
                return Reply::Json(
                    422,
                    status(
                        422,
                        "Invalid",
                        &format!("{} is invalid: metadata.name: Required value", r.kind),
                    ),
                );
            }
            name = format!("{prefix}{}", self.random_suffix());
        }
        let key = key_of(if r.namespaced { ns } else { "" }, &name);
        if self.objects.contains_key(&(r.plural, key.clone())) {
            return Reply::Json(
                409,
                status(
                    409,
                    "AlreadyExists",
                    &format!("{} \"{name}\" already exists", r.plural),
                ),
            );
        }
        let uid = self.new_uid();
        let now = rfc3339(self.wall());
        {
            let m = &mut obj["metadata"];
            m["name"] = json!(name);
            if r.namespaced {
                m["namespace"] = json!(ns);
            }
            m["uid"] = json!(uid);
            m["creationTimestamp"] = json!(now);
            if let Some(map) = m.as_object_mut() {
                map.remove("deletionTimestamp");
                map.remove("deletionGracePeriodSeconds");
                map.remove("managedFields");
            }
            if r.generation {
                m["generation"] = json!(1);
            }
        }
        obj["kind"] = json!(r.kind);
        obj["apiVersion"] = json!(r.api_version());
        default_on_create(r, &mut obj, &uid);
        let obj = self.commit(r, key, "ADDED", obj, &caller.agent);
        Reply::Json(201, (*obj).clone())
    }

    /// PUT of the object (`status`: of its status subresource) or PATCH (`patch`).
    #[allow(clippy::too_many_arguments)] // one request's parts, as the server's router has them
    pub fn update(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: &str,
        name: &str,
        status_only: bool,
        body: Value,
        patch: Option<PatchKind>,
    ) -> Reply {
        let key = key_of(if r.namespaced { ns } else { "" }, name);
        let Some(current) = self.get(r.plural, &key) else {
            return not_found(r, name);
        };
        let wanted_rv = match patch {
            None => meta_str(&body, "resourceVersion").to_owned(),
            Some(_) => body["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        };
        // A concurrent writer (kubelet heartbeat, another client) gets there first.
        let mut current = current;
        if !wanted_rv.is_empty() && roll(&mut self.rng, caller.epoch, self.faults.conflict) {
            let touched = (*current).clone();
            self.note(format!(
                "sim concurrent write before {} on {key}",
                caller.agent
            ));
            let writer = std::mem::take(&mut self.writer);
            current = self.commit(r, key.clone(), "MODIFIED", touched, "sim-concurrent-writer");
            self.writer = writer;
        }
        if !wanted_rv.is_empty() && wanted_rv != meta_str(&current, "resourceVersion") {
            return conflict(r, name);
        }
        if let Some(refused) = foreign_uid(r, name, &body, &current, patch.is_some()) {
            return refused;
        }
        let proposed = match patch {
            Some(kind) => patch::apply(kind, &current, &body),
            None => body,
        };
        let mut next = if status_only {
            let mut next = (*current).clone();
            next["status"] = proposed["status"].clone();
            status_update_metadata(r, &mut next, &proposed);
            next
        } else {
            let mut next = proposed;
            if !next.is_object() {
                return Reply::Json(400, status(400, "BadRequest", "body is not an object"));
            }
            for field in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "resourceVersion",
            ] {
                next["metadata"][field] = current["metadata"][field].clone();
            }
            if let Some(m) = next["metadata"].as_object_mut() {
                m.retain(|_, v| !v.is_null());
                m.remove("managedFields");
            }
            next["kind"] = current["kind"].clone();
            next["apiVersion"] = current["apiVersion"].clone();
            if r.status {
                next["status"] = current["status"].clone();
            }
            if r.generation && next["spec"] != current["spec"] {
                let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
                next["metadata"]["generation"] = json!(g + 1);
            }
            if r.plural == "pods" {
                // spec.nodeName is set once (by binding), never by an update.
                next["spec"]["nodeName"] = current["spec"]["nodeName"].clone();
            }
            next
        };
        if let Some(m) = next.as_object_mut()
            && m.get("status").is_some_and(Value::is_null)
        {
            m.remove("status");
        }
        if next == *current {
            // A no-op write does not change the resourceVersion.
            return Reply::Json(200, (*current).clone());
        }
        let terminating = !current["metadata"]["deletionTimestamp"].is_null();
        let finalizers_left = next["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let pod_grace_over = r.plural != "pods"
            || current["metadata"]["deletionGracePeriodSeconds"].as_i64() == Some(0);
        if terminating && !finalizers_left && pod_grace_over {
            let obj = self.commit(r, key, "DELETED", next, &caller.agent);
            return Reply::Json(200, (*obj).clone());
        }
        let obj = self.commit(r, key, "MODIFIED", next, &caller.agent);
        Reply::Json(200, (*obj).clone())
    }

    /// DELETE with `options` (a `DeleteOptions` body, or `Null`).
    pub fn delete(
        &mut self,
        caller: &Caller,
        r: &'static ResourceInfo,
        ns: &str,
        name: &str,
        options: &Value,
    ) -> Reply {
        let key = key_of(if r.namespaced { ns } else { "" }, name);
        let Some(current) = self.get(r.plural, &key) else {
            return not_found(r, name);
        };
        let pre = &options["preconditions"];
        if let Some(uid) = pre["uid"].as_str()
            && uid != meta_str(&current, "uid")
        {
            return Reply::Json(
                409,
                status(
                    409,
                    "Conflict",
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(&current, "uid")
                    ),
                ),
            );
        }
        if let Some(rv) = pre["resourceVersion"].as_str()
            && rv != meta_str(&current, "resourceVersion")
        {
            return Reply::Json(
                409,
                status(
                    409,
                    "Conflict",
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        meta_str(&current, "resourceVersion")
                    ),
                ),
            );
        }
        let asked = options["gracePeriodSeconds"].as_i64();
        self.deletions.push(Deletion {
            at_ms: self.now_ms(),
            agent: caller.agent.clone(),
            epoch: caller.epoch,
            resource: r.plural,
            key: key.clone(),
            obj: current.clone(),
            grace: asked,
            uid_precondition: pre["uid"].is_string(),
            rv_precondition: pre["resourceVersion"].is_string(),
        });
        let has_finalizers = current["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let mut next = (*current).clone();
        let now = self.wall();
        if r.plural == "pods" {
            let phase = current["status"]["phase"].as_str().unwrap_or_default();
            let unbound = current["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .is_empty();
            let own = current["spec"]["terminationGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(30);
            let mut grace = asked.unwrap_or(own).max(0);
            if unbound || phase == "Succeeded" || phase == "Failed" {
                grace = 0;
            }
            let already = current["metadata"]["deletionGracePeriodSeconds"].as_i64();
            // A terminating pod's grace period can only be shortened.
            if let Some(g) = already
                && grace >= g
            {
                return Reply::Json(200, (*current).clone());
            }
            if grace == 0 && !has_finalizers {
                let obj = self.commit(r, key, "DELETED", next, &caller.agent);
                return Reply::Json(200, (*obj).clone());
            }
            let at = now
                .checked_add(jiff::SignedDuration::from_secs(grace))
                .unwrap_or(now);
            next["metadata"]["deletionTimestamp"] = json!(rfc3339(at));
            next["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            let obj = self.commit(r, key, "MODIFIED", next, &caller.agent);
            return Reply::Json(200, (*obj).clone());
        }
        if !has_finalizers {
            let obj = self.commit(r, key, "DELETED", next, &caller.agent);
            return Reply::Json(200, (*obj).clone());
        }
        if current["metadata"]["deletionTimestamp"].is_null() {
            next["metadata"]["deletionTimestamp"] = json!(rfc3339(now));
            next["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            let obj = self.commit(r, key, "MODIFIED", next, &caller.agent);
            return Reply::Json(200, (*obj).clone());
        }
        Reply::Json(200, (*current).clone())
    }

    /// Changes an object as the simulation (kubelet, scheduler, node lifecycle, workload)
    /// does, bypassing faults: `f` edits a copy; nothing is written when it returns false.
    pub fn edit(
        &mut self,
        agent: &str,
        plural: &str,
        key: &str,
        f: impl FnOnce(&mut Value) -> bool,
    ) -> bool {
        let Some(r) = resource(plural) else {
            return false;
        };
        let Some(current) = self.get(r.plural, key) else {
            return false;
        };
        let mut next = (*current).clone();
        if !f(&mut next) || next == *current {
            return false;
        }
        if r.generation && next["spec"] != current["spec"] {
            let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
            next["metadata"]["generation"] = json!(g + 1);
        }
        let terminating = !next["metadata"]["deletionTimestamp"].is_null();
        let finalizers_left = next["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let grace_over = r.plural != "pods"
            || next["metadata"]["deletionGracePeriodSeconds"].as_i64() == Some(0);
        let kind = if terminating && !finalizers_left && grace_over {
            "DELETED"
        } else {
            "MODIFIED"
        };
        self.commit(r, key.to_owned(), kind, next, agent);
        true
    }
}

/// 409 Conflict as the registry answers a stale resourceVersion.
/// A write whose body names a UID other than the object's: the UID is immutable, so a write
/// meant for an object that was deleted and re-created under the same name fails. An update
/// takes it as a precondition (409); a patch, server-side apply included, fails validation
/// (422, kubernetes/kubernetes#127625).
fn foreign_uid(
    r: &ResourceInfo,
    name: &str,
    body: &Value,
    current: &Value,
    is_patch: bool,
) -> Option<Reply> {
    let body_uid = body["metadata"]["uid"].as_str().unwrap_or_default();
    let current_uid = meta_str(current, "uid");
    if body_uid.is_empty() || body_uid == current_uid {
        return None;
    }
    Some(if is_patch {
        Reply::Json(
            422,
            status(
                422,
                "Invalid",
                &format!(
                    "{} \"{name}\" is invalid: metadata.uid: Invalid value: \"{body_uid}\": field is immutable",
                    r.kind
                ),
            ),
        )
    } else {
        Reply::Json(
            409,
            status(
                409,
                "Conflict",
                &format!(
                    "Precondition failed: UID in precondition: {body_uid}, UID in object meta: {current_uid}"
                ),
            ),
        )
    })
}

pub(super) fn conflict(r: &ResourceInfo, name: &str) -> Reply {
    Reply::Json(
        409,
        status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                r.plural
            ),
        ),
    )
}

/// The metadata a status update keeps from the body, as the real server's status strategies
/// do (`PrepareForUpdate` of each `...StatusStrategy` under `pkg/registry`): a pod's status
/// update resets all of it (`metav1.ResetObjectMetaForStatus`); the workload resources and
/// nodes reset only their spec, so annotations, finalizers and owner references written with
/// a status land, and labels too except on a Deployment (its status strategy resets them).
/// Upstream's Deployment controller records the revision annotation with a status update
/// (`getNewReplicaSet`), and so does rkcm's.
fn status_update_metadata(r: &ResourceInfo, next: &mut Value, proposed: &Value) {
    if r.plural == "pods" {
        return;
    }
    let mut fields = vec!["annotations", "finalizers", "ownerReferences"];
    if r.plural != "deployments" {
        fields.push("labels");
    }
    for field in fields {
        match proposed["metadata"].get(field) {
            Some(v) if !v.is_null() => next["metadata"][field] = v.clone(),
            _ => {
                if let Some(m) = next["metadata"].as_object_mut() {
                    m.remove(field);
                }
            }
        }
    }
}
