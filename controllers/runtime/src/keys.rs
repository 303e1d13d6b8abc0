//! Object keys as upstream queues use them: `namespace/name`, or `name` when cluster-scoped.

use kube::Resource;

/// The cache and queue key of an object.
pub fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// Builds a key from its parts.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// Splits a key into `(namespace, name)`; the namespace is `None` for cluster-scoped keys.
pub fn split_key(key: &str) -> (Option<&str>, &str) {
    match key.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, key),
    }
}

/// The UID of the object's controller owner reference, if any.
pub fn controller_uid<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta()
        .owner_references
        .as_deref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_round_trips() {
        assert_eq!(split_key("ns/a"), (Some("ns"), "a"));
        assert_eq!(split_key("node-1"), (None, "node-1"));
        assert_eq!(key(Some("ns"), "a"), "ns/a");
        assert_eq!(key(None, "a"), "a");
    }
}
