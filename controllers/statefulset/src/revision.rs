//! ControllerRevisions of a StatefulSet: the stored patch, the choice of the current and
//! update revisions, applying a revision, and history truncation. Pure; the writes are the
//! runtime's [`rkcm_runtime::workload::history::History`].
//!
//! Mirrors `getPatch`, `newRevision`, `ApplyRevision` and `nextRevision` of upstream
//! `pkg/controller/statefulset/stateful_set_utils.go`, and `getStatefulSetRevisions` and
//! `truncateHistory` of `stateful_set_control.go`.
//!
//! `data.raw` is `{"spec":{"template":{…,"$patch":"replace"}}}` encoded as Go's
//! `encoding/json` encodes a generic map ([`rkcm_runtime::workload::history::go_json_bytes`]: sorted
//! keys, HTML-safe escaping), and the name is `<set>-<hash>` with upstream's FNV-1 hash over
//! those bytes and the collision count, so a set taken over from upstream keeps its revision.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::workload::history::{
    equal_revision, find_equal_revisions, new_controller_revision, next_revision,
};

use crate::identity::pod_revision;

/// The revision data upstream's `getPatch` stores for `set`: its pod template with
/// `"$patch": "replace"`, under `spec.template`.
pub fn patch_data(set: &StatefulSet) -> Result<serde_json::Value, String> {
    let template = Some(&set.spec).map(|s| &s.template);
    let mut t = serde_json::to_value(template.cloned().unwrap_or_default())
        .map_err(|e| format!("encoding the pod template: {e}"))?;
    let serde_json::Value::Object(map) = &mut t else {
        return Err("the pod template does not encode as an object".to_string());
    };
    map.insert(
        "$patch".to_string(),
        serde_json::Value::String("replace".to_string()),
    );
    Ok(serde_json::json!({ "spec": { "template": t } }))
}

/// The exact `data.raw` bytes upstream writes for `set`.
pub fn patch_bytes(set: &StatefulSet) -> Result<Vec<u8>, String> {
    patch_data(set).map(|v| rkcm_runtime::workload::history::go_json_bytes(&v))
}

/// `newRevision`: the proposed revision for `set` at number `revision`, named for
/// `collision_count`, with the template's labels plus the hash label and the set's
/// annotations.
pub fn new_revision(
    set: &StatefulSet,
    revision: i64,
    collision_count: i32,
) -> Result<ControllerRevision, String> {
    let data = patch_data(set)?;
    let labels = rkcm_runtime::workload::pod::template_labels(&set.spec.template);
    let mut cr = new_controller_revision(set, labels, data, revision, Some(collision_count))
        .map_err(|e| e.to_string())?;
    if let Some(a) = set.metadata.annotations.as_ref().filter(|a| !a.is_empty()) {
        cr.metadata.annotations = Some(a.clone());
    }
    Ok(cr)
}

/// The pod template a revision stores.
pub fn template_of(revision: &ControllerRevision) -> Result<PodTemplateSpec, String> {
    let mut t = revision
        .data
        .0
        .get("spec")
        .and_then(|s| s.get("template"))
        .cloned()
        .ok_or_else(|| "revision data has no spec.template".to_string())?;
    if let serde_json::Value::Object(map) = &mut t {
        map.remove("$patch");
    }
    serde_json::from_value(t).map_err(|e| format!("decoding the revision's pod template: {e}"))
}

/// `ApplyRevision`: `set` with the revision's template (the stored patch replaces the whole
/// template).
pub fn apply_revision(
    set: &StatefulSet,
    revision: &ControllerRevision,
) -> Result<StatefulSet, String> {
    let template = template_of(revision)?;
    let mut out = set.clone();
    out.spec.template = template;
    Ok(out)
}

/// Where the update revision comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateChoice {
    /// The newest revision already equals the set's template.
    Latest(Arc<ControllerRevision>),
    /// An older revision equals it: rollback, bump its `.revision` to the number given.
    Rollback(Arc<ControllerRevision>, i64),
    /// Nothing equals it: create this revision.
    Create(Box<ControllerRevision>),
}

/// The first half of `getStatefulSetRevisions` over revisions sorted by
/// [`rkcm_runtime::workload::history::sort_controller_revisions`]. `semantic`: gate
/// `StatefulSetSemanticRevisionComparison` (beta, on): when no revision's data equals the set's,
/// the newest revision still counts as the set's if it differs only by what the API server's
/// defaulting and encoding add ([`matches_latest`]).
pub fn choose_update(
    set: &StatefulSet,
    sorted: &[Arc<ControllerRevision>],
    collision_count: i32,
    semantic: bool,
) -> Result<UpdateChoice, String> {
    let proposed = new_revision(set, next_revision(sorted), collision_count)?;
    let equal = find_equal_revisions(sorted, &proposed);
    match (equal.last(), sorted.last()) {
        (Some(eq), Some(last)) if equal_revision(last, eq) => {
            Ok(UpdateChoice::Latest(last.clone()))
        }
        (Some(eq), _) => Ok(UpdateChoice::Rollback(
            eq.clone(),
            proposed.revision.unwrap_or(1),
        )),
        (None, Some(last)) if semantic && matches_latest(set, &proposed, last) => {
            Ok(UpdateChoice::Latest(last.clone()))
        }
        (None, _) => Ok(UpdateChoice::Create(Box::new(proposed))),
    }
}

/// `setMatchesLatestExistingRevision` (upstream `stateful_set_control.go`): whether restoring
/// `latest` onto `set` and defaulting the result as the API server would gives the revision
/// `proposed`. True for a revision stored by an earlier release (or another writer) that
/// lacks defaults added since, or carries fields its encoding wrote that the typed form drops
/// (`"creationTimestamp": null`): the set's template is unchanged, so no rollout. Upstream
/// remembers a positive answer per set generation and revision resourceVersion; rkcm
/// recomputes it (one decode and encode of a template per sync, only while the newest
/// revision's data differs from the set's).
pub fn matches_latest(
    set: &StatefulSet,
    proposed: &ControllerRevision,
    latest: &ControllerRevision,
) -> bool {
    let Ok(mut restored) = apply_revision(set, latest) else {
        return false;
    };
    crate::defaults::default_pod_template(&mut restored.spec.template);
    // The reconstruction's number and name do not matter: only the data is compared.
    new_revision(&restored, -1, 0).is_ok_and(|r| equal_revision(proposed, &r))
}

/// The current revision: the one named by `status.currentRevision`, else the update revision.
pub fn current_revision(
    set: &StatefulSet,
    sorted: &[Arc<ControllerRevision>],
    update: &Arc<ControllerRevision>,
) -> Arc<ControllerRevision> {
    let name = set
        .status
        .as_ref()
        .and_then(|s| s.current_revision.as_deref());
    name.and_then(|n| {
        sorted
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(n))
            .cloned()
    })
    .unwrap_or_else(|| update.clone())
}

/// `truncateHistory`: the non-live revisions to delete, oldest first, so that at most
/// `revisionHistoryLimit` remain. Live: current, update, and every claimed pod's revision.
/// A negative limit keeps everything.
pub fn revisions_to_delete(
    set: &StatefulSet,
    sorted: &[Arc<ControllerRevision>],
    pods: &[Arc<Pod>],
    current: Option<&str>,
    update: Option<&str>,
) -> Vec<Arc<ControllerRevision>> {
    let limit = Some(&set.spec)
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10);
    let Ok(limit) = usize::try_from(limit) else {
        return Vec::new();
    };
    let mut live: BTreeSet<&str> = pods.iter().map(|p| pod_revision(p)).collect();
    live.extend(current);
    live.extend(update);
    let history: Vec<&Arc<ControllerRevision>> = sorted
        .iter()
        .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    if history.len() <= limit {
        return Vec::new();
    }
    history[..history.len() - limit]
        .iter()
        .map(|r| (*r).clone())
        .collect()
}

#[cfg(test)]
#[path = "revision/tests.rs"]
mod tests;
