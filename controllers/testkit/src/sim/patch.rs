//! The patch types the controllers send, applied to JSON objects: JSON merge patch (RFC 7386),
//! strategic merge patch (the directives rkcm uses: list merge keys, `$patch: delete` and
//! `replace`, `$deleteFromPrimitiveList/...`; k8s.io/apimachinery
//! `pkg/util/strategicpatch/patch.go`) and server-side apply, read as a strategic merge of
//! the applied fields (no field ownership).

use serde_json::{Map, Value};

/// How a patch body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Strategic,
    Apply,
}

impl PatchKind {
    /// From the request's `Content-Type`; `None` for JSON patch and anything else.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let ct = ct.split(';').next().unwrap_or_default().trim();
        match ct {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }
}

/// The merge key of a list field in a strategic merge patch (the `patchMergeKey` tags of
/// k8s.io/api): elements with the same key are merged, new keys appended. `Some("")`: a
/// list of primitives merged as a set (`finalizers`). `None`: the list is replaced.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "ownerReferences" => Some("uid"),
        "conditions" => Some("type"),
        "containers" | "initContainers" | "ephemeralContainers" | "volumes" | "env" => Some("name"),
        "containerStatuses" | "initContainerStatuses" => Some("name"),
        "finalizers" => Some(""),
        _ => None,
    }
}

/// `target` with `patch` applied.
pub fn apply(kind: PatchKind, target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    match kind {
        PatchKind::Merge => merge(&mut out, patch),
        PatchKind::Strategic | PatchKind::Apply => strategic(&mut out, patch),
    }
    out
}

fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { return };
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn strategic(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = p.clone();
        replaced.remove("$patch");
        *target = Value::Object(replaced);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { return };
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(gone)) = (t.get_mut(field), v) {
                list.retain(|x| !gone.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            // $setElementOrder, $retainKeys: ordering and pruning hints.
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match (merge_key(k), v) {
            (Some(key), Value::Array(items)) => {
                let slot = t.entry(k.clone()).or_insert(Value::Array(Vec::new()));
                if !slot.is_array() {
                    *slot = Value::Array(Vec::new());
                }
                if let Value::Array(list) = slot {
                    merge_list(list, items, key);
                }
            }
            _ => strategic(t.entry(k.clone()).or_insert(Value::Null), v),
        }
    }
}

fn merge_list(list: &mut Vec<Value>, items: &[Value], key: &str) {
    for item in items {
        if key.is_empty() {
            if !list.contains(item) {
                list.push(item.clone());
            }
            continue;
        }
        let id = item.get(key).cloned().unwrap_or(Value::Null);
        let pos = list.iter().position(|x| x.get(key) == Some(&id));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                list.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic(&mut list[i], item),
            (None, false) => {
                let mut fresh = Value::Null;
                strategic(&mut fresh, item);
                list.push(fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_lists_by_key_and_applies_directives() {
        let pod = json!({"metadata": {
            "finalizers": ["a", "batch.kubernetes.io/job-tracking"],
            "ownerReferences": [{"uid": "u1", "name": "x"}, {"uid": "u2", "name": "y"}],
            "labels": {"k": "v"}}});
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["batch.kubernetes.io/job-tracking"],
            "ownerReferences": [{"$patch": "delete", "uid": "u1"}, {"uid": "u3", "name": "z"}],
            "labels": {"k": null, "n": "m"}}});
        let out = apply(PatchKind::Strategic, &pod, &patch);
        assert_eq!(out["metadata"]["finalizers"], json!(["a"]));
        assert_eq!(
            out["metadata"]["ownerReferences"],
            json!([{"uid": "u2", "name": "y"}, {"uid": "u3", "name": "z"}])
        );
        assert_eq!(out["metadata"]["labels"], json!({"n": "m"}));
    }

    #[test]
    fn merge_replaces_lists_and_deletes_nulls() {
        let obj = json!({"a": [1, 2], "b": {"c": 1, "d": 2}});
        let out = apply(PatchKind::Merge, &obj, &json!({"a": [3], "b": {"c": null}}));
        assert_eq!(out, json!({"a": [3], "b": {"d": 2}}));
    }
}
