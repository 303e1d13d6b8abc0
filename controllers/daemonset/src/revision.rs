//! ControllerRevisions of a DaemonSet: their data, name and labels, which one is current,
//! and which old ones history cleanup removes. Pure.
//!
//! Mirrors `getPatch`, `Match`, `snapshot`, `constructHistory`, `dedupCurHistories` and
//! `cleanupHistory` of upstream `pkg/controller/daemon/update.go`.
//!
//! - `data.raw` is `{"spec":{"template":{…,"$patch":"replace"}}}` exactly as upstream's Go
//!   `encoding/json` writes it (sorted keys, HTML-safe escaping, Go's always-present fields),
//!   so a revision upstream created is recognised as current by byte equality and a takeover
//!   creates no revision and restarts no pod. Revisions are created with a request body
//!   encoded the same way, so the apiserver stores exactly those bytes.
//! - The name is `<ds name>-<hash>` with no truncation, the hash that of
//!   [`rkcm_runtime::workload::history::compute_hash`] over the template and `status.collisionCount`
//!   (upstream hashes a Go-specific dump no other implementation can reproduce; pods take the
//!   hash from the matched revision's label, so the value itself is never compared).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use rkcm_runtime::cache::cached::Pod;
use rkcm_runtime::workload::controller_ref::controller_owner_ref;
use rkcm_runtime::workload::history::{compute_hash, go_json_bytes};
use serde_json::{Value, json};

use crate::consts::labels;

/// Go's encoding of the template as part of the DaemonSet: fields Go always writes even when
/// empty are added where the API object may lack them (the template's `metadata`, `spec`,
/// and each container's `resources`).
fn go_template_value(ds: &DaemonSet) -> Value {
    let mut v = serde_json::to_value(&ds.spec.template).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut v {
        map.entry("metadata").or_insert_with(|| json!({}));
        let spec = map.entry("spec").or_insert_with(|| json!({}));
        if let Value::Object(spec) = spec {
            // `containers` has no omitempty: Go writes null for none.
            spec.entry("containers").or_insert(Value::Null);
            for list in ["initContainers", "containers", "ephemeralContainers"] {
                if let Some(Value::Array(cs)) = spec.get_mut(list) {
                    for c in cs {
                        if let Value::Object(c) = c {
                            c.entry("resources").or_insert_with(|| json!({}));
                        }
                    }
                }
            }
        }
    }
    v
}

/// Upstream `getPatch` as a JSON value: `{"spec":{"template":{…,"$patch":"replace"}}}`.
pub fn patch_value(ds: &DaemonSet) -> Value {
    let mut template = go_template_value(ds);
    if let Value::Object(map) = &mut template {
        map.insert("$patch".into(), json!("replace"));
    }
    json!({ "spec": { "template": template } })
}

/// Upstream `getPatch` bytes: what `data.raw` of the DaemonSet's current revision holds.
pub fn patch_bytes(ds: &DaemonSet) -> Vec<u8> {
    go_json_bytes(&patch_value(ds))
}

/// Upstream `Match`: the revision's data is byte-identical to [`patch_bytes`]. `patch` is
/// `patch_bytes(ds)`, computed once per sync.
pub fn matches(patch: &[u8], revision: &ControllerRevision) -> bool {
    go_json_bytes(&revision.data.0) == patch
}

/// The revision hash and name for the DaemonSet's template and collision count.
pub fn hash_and_name(ds: &DaemonSet) -> (String, String) {
    let template = &ds.spec.template;
    let collision = ds.status.as_ref().and_then(|s| s.collision_count);
    let hash = compute_hash(template, collision);
    let name = format!("{}-{hash}", ds.metadata.name.as_deref().unwrap_or_default());
    (hash, name)
}

/// Upstream `snapshot`'s object: labels = template labels + `controller-revision-hash`,
/// annotations = the DaemonSet's, its controllerRef, the patch as data, `revision`. `None`
/// when the DaemonSet has no name or UID.
pub fn new_revision(ds: &DaemonSet, revision: i64) -> Option<ControllerRevision> {
    let (hash, name) = hash_and_name(ds);
    let mut l = rkcm_runtime::workload::pod::template_labels(&ds.spec.template)
        .cloned()
        .unwrap_or_default();
    l.insert(labels::CONTROLLER_REVISION_HASH.to_owned(), hash);
    Some(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: ds.metadata.namespace.clone(),
            labels: Some(l),
            annotations: ds.metadata.annotations.clone(),
            owner_references: Some(vec![controller_owner_ref(ds)?]),
            ..ObjectMeta::default()
        },
        data: RawExtension(patch_value(ds)),
        revision: Some(revision),
    })
}

/// The create request body for `revision`, Go-encoded so that the apiserver keeps
/// `data.raw` byte-identical to upstream's
/// ([`rkcm_runtime::workload::history::revision_request_body`]).
pub fn create_body(revision: &ControllerRevision) -> Vec<u8> {
    rkcm_runtime::workload::history::revision_request_body(revision)
}

/// The `.revision` of a revision (0 when unset).
pub fn number(r: &ControllerRevision) -> i64 {
    r.revision.unwrap_or(0)
}

/// Upstream `maxRevision`: the highest `.revision`, 0 for none.
pub fn max_revision<R: AsRef<ControllerRevision>>(revisions: &[R]) -> i64 {
    revisions
        .iter()
        .map(|r| number(r.as_ref()))
        .max()
        .unwrap_or(0)
        .max(0)
}

/// The `controller-revision-hash` label of a revision (empty when absent).
pub fn revision_hash(r: &ControllerRevision) -> &str {
    r.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::CONTROLLER_REVISION_HASH))
        .map(String::as_str)
        .unwrap_or_default()
}

/// The revisions of one DaemonSet split as `constructHistory` splits them.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Revisions whose data equals the live template, in input order.
    pub current: Vec<Arc<ControllerRevision>>,
    /// All others, in input order.
    pub old: Vec<Arc<ControllerRevision>>,
}

/// Splits claimed revisions into current and old by [`matches`].
pub fn split_history(ds: &DaemonSet, revisions: &[Arc<ControllerRevision>]) -> History {
    let patch = patch_bytes(ds);
    let mut h = History::default();
    for r in revisions {
        if matches(&patch, r) {
            h.current.push(r.clone());
        } else {
            h.old.push(r.clone());
        }
    }
    h
}

/// `dedupCurHistories`' keeper: the current revision with the highest `.revision` (the last
/// such in input order on ties).
pub fn keeper(current: &[Arc<ControllerRevision>]) -> Option<Arc<ControllerRevision>> {
    let mut keep: Option<&Arc<ControllerRevision>> = None;
    let mut max = 0;
    for r in current {
        if number(r) >= max {
            max = number(r);
            keep = Some(r);
        }
    }
    keep.or(current.first()).cloned()
}

/// `cleanupHistory`: the old revisions to delete, oldest `.revision` first, until at most
/// `limit` old revisions remain, never one whose hash a pod still carries. `pods` are all
/// claimed pods, terminal and deleting ones included.
pub fn history_to_delete(
    old: &[Arc<ControllerRevision>],
    pods: &[Arc<Pod>],
    limit: i32,
) -> Vec<Arc<ControllerRevision>> {
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    let Some(mut to_kill) = old.len().checked_sub(limit).filter(|n| *n > 0) else {
        return Vec::new();
    };
    let live: HashSet<&str> = pods
        .iter()
        .filter_map(|p| {
            p.metadata
                .labels
                .as_ref()?
                .get(labels::CONTROLLER_REVISION_HASH)
        })
        .filter(|h| !h.is_empty())
        .map(String::as_str)
        .collect();
    let mut sorted: Vec<&Arc<ControllerRevision>> = old.iter().collect();
    // Upstream sorts by `.revision` only (sort.Sort, not stable); ties keep input order here.
    sorted.sort_by_key(|r| number(r));
    let mut out = Vec::new();
    for r in sorted {
        if to_kill == 0 {
            break;
        }
        if live.contains(revision_hash(r)) {
            continue;
        }
        out.push(r.clone());
        to_kill -= 1;
    }
    out
}

#[cfg(test)]
mod tests;
