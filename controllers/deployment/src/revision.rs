//! PURE: revision numbers, `revision-history`, annotation copying and the rollback
//! annotation (upstream `pkg/controller/deployment/sync.go`, `rollback.go` and
//! `util/deployment_util.go`).
//!
//! Mirrors `Revision`, `MaxRevision`, `LastRevision`, `SetNewReplicaSetAnnotations`,
//! `copyDeploymentAnnotationsToReplicaSet`, `skipCopyAnnotation`, `SetDeploymentRevision`,
//! `SetDeploymentAnnotationsTo` of `deployment_util.go` and `getRollbackTo` of `rollback.go`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::consts::annotations;
use crate::model::{self, Rs};
use crate::replicas;

/// Not copied between a Deployment and its ReplicaSets.
pub fn skip_copy(key: &str) -> bool {
    annotations::SKIP_COPY.contains(&key)
}

/// `Revision`: 0 without the annotation, an error when it is not an int64.
pub fn revision(rs: &ReplicaSet) -> Result<i64, std::num::ParseIntError> {
    match model::annotation(&rs.metadata, annotations::REVISION) {
        None => Ok(0),
        Some(v) => v.parse(),
    }
}

/// `MaxRevision`: the highest parsable revision, 0 if none.
pub fn max_revision(rss: &[Rs]) -> i64 {
    rss.iter()
        .filter_map(|rs| revision(rs).ok())
        .fold(0, i64::max)
}

/// `LastRevision`: the second highest parsable revision (the one before the current), 0 if
/// none.
pub fn last_revision(rss: &[Rs]) -> i64 {
    let (mut max, mut second) = (0_i64, 0_i64);
    for v in rss.iter().filter_map(|rs| revision(rs).ok()) {
        if v >= max {
            second = max;
            max = v;
        } else if v > second {
            second = v;
        }
    }
    second
}

/// Copies every Deployment annotation not on the skip list that the ReplicaSet lacks or has
/// with another value. Annotations removed from the Deployment stay on the ReplicaSet.
fn copy_deployment_annotations(d: &Deployment, rs: &mut ObjectMeta) -> bool {
    let target = rs.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy(k) || target.get(k) == Some(v) {
            continue;
        }
        target.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// Appends `old` to a comma-separated history, dropping the oldest entries so the result
/// fits `limit` characters; `None` when even `old` alone does not fit.
pub fn append_history(history: &str, old: &str, limit: usize) -> Option<String> {
    if history.is_empty() || history.starts_with(',') {
        // Upstream checks only whether the first entry is empty.
        return Some(old.to_owned());
    }
    let entries: Vec<&str> = history.split(',').collect();
    let mut total = history.len() + old.len() + 1;
    let mut start = 0;
    while total > limit && start < entries.len() {
        total -= entries[start].len() + 1;
        start += 1;
    }
    if total > limit {
        return None;
    }
    let mut kept: Vec<&str> = entries[start..].to_vec();
    kept.push(old);
    Some(kept.join(","))
}

/// `SetNewReplicaSetAnnotations`: copy the Deployment's annotations, raise the revision to
/// `new_revision` if it is lower (recording the previous one in `revision-history`), and for
/// a ReplicaSet about to be created (`exists == false`) set the replica annotations. True if
/// anything changed; false (and the revision untouched) when the current revision is not a
/// number.
pub fn set_new_rs_annotations(
    d: &Deployment,
    rs: &mut ObjectMeta,
    new_revision: i64,
    exists: bool,
    history_limit: usize,
) -> bool {
    let mut changed = copy_deployment_annotations(d, rs);
    let target = rs.annotations.get_or_insert_with(BTreeMap::new);
    let old_revision = target.get(annotations::REVISION).cloned();
    let old_value = match old_revision.as_deref() {
        None | Some("") => 0,
        Some(v) => match v.parse::<i64>() {
            Ok(n) => n,
            Err(error) => {
                tracing::info!(revision = v, %error, "replica set revision is not an integer; not updating it");
                return false;
            }
        },
    };
    if old_value < new_revision {
        target.insert(annotations::REVISION.to_owned(), new_revision.to_string());
        changed = true;
        // A ReplicaSet that had a revision and gets a newer one is being rolled back to: keep
        // what it served before.
        if let Some(old) = old_revision {
            let history = target
                .get(annotations::REVISION_HISTORY)
                .cloned()
                .unwrap_or_default();
            match append_history(&history, &old, history_limit) {
                Some(h) => {
                    target.insert(annotations::REVISION_HISTORY.to_owned(), h);
                }
                None => tracing::warn!(
                    limit = history_limit,
                    "not appending revision: revision history length limit reached"
                ),
            }
        }
    }
    if !exists {
        let desired = model::desired(d);
        if replicas::set_replicas_annotations(rs, desired, desired + replicas::max_surge(d)) {
            changed = true;
        }
    }
    changed
}

/// `SetDeploymentRevision`: true if the Deployment's revision annotation changed.
pub fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let annotations = d.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if annotations.get(annotations::REVISION).map(String::as_str) == Some(revision) {
        return false;
    }
    // Upstream compares against the empty string for a missing annotation.
    if revision.is_empty() && !annotations.contains_key(annotations::REVISION) {
        return false;
    }
    annotations.insert(annotations::REVISION.to_owned(), revision.to_owned());
    true
}

/// `getRollbackTo`: the requested revision, when the annotation is a non-empty int64.
pub fn rollback_to(d: &Deployment) -> Option<i64> {
    model::annotation(&d.metadata, annotations::ROLLBACK_TO)
        .filter(|v| !v.is_empty())
        .and_then(|v| v.parse().ok())
}

/// `setRollbackTo(d, nil)`.
pub fn clear_rollback_to(d: &mut Deployment) {
    if let Some(a) = d.metadata.annotations.as_mut() {
        a.remove(annotations::ROLLBACK_TO);
    }
}

/// `SetDeploymentAnnotationsTo`: keep the Deployment's skipped annotations, replace all the
/// others with the ReplicaSet's non-skipped ones.
pub fn set_deployment_annotations_to(d: &mut Deployment, rs: &ReplicaSet) {
    let mut out: BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| skip_copy(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in rs.metadata.annotations.iter().flatten() {
        if !skip_copy(k) {
            out.insert(k.clone(), v.clone());
        }
    }
    d.metadata.annotations = Some(out);
}

#[cfg(test)]
mod tests;
