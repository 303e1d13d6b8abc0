//! Label and field selectors as they come in a list or watch query (`labelSelector`,
//! `fieldSelector`): k8s.io/apimachinery `pkg/labels/selector.go` and `pkg/fields`, for the
//! operators controllers and kube's watcher send (`=`, `==`, `!=`, `in`, `notin`, exists,
//! `!` not exists; fields `=` and `!=`).

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector(Vec<Req>);

fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .collect()
}

fn set(s: &str) -> Vec<String> {
    s.trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect()
}

impl Selector {
    pub fn parse(s: &str) -> Self {
        let mut reqs = Vec::new();
        for term in split_top(s) {
            if let Some((k, v)) = term.split_once("!=") {
                reqs.push(Req::Ne(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = term.split_once("==") {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = term.split_once('=') {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = term.split_once(" notin ") {
                reqs.push(Req::NotIn(k.trim().into(), set(v)));
            } else if let Some((k, v)) = term.split_once(" in ") {
                reqs.push(Req::In(k.trim().into(), set(v)));
            } else if let Some(k) = term.strip_prefix('!') {
                reqs.push(Req::NotExists(k.trim().into()));
            } else {
                reqs.push(Req::Exists(term.into()));
            }
        }
        Self(reqs)
    }

    /// Whether `get(key)` (a label, or a field path) satisfies every requirement.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k).as_deref() == Some(v.as_str()),
            Req::Ne(k, v) => get(k).as_deref() != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.contains(&x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(&x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }

    /// Whether `obj`'s labels match.
    pub fn matches_labels(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        self.matches(|k| labels.get(k).and_then(Value::as_str).map(str::to_owned))
    }

    /// Whether `obj`'s fields match (`metadata.name`, `metadata.namespace`, `spec.nodeName`,
    /// `status.phase`...: any dotted path to a string).
    pub fn matches_fields(&self, obj: &Value) -> bool {
        self.matches(|path| {
            let v = path.split('.').fold(obj, |v, seg| &v[seg]);
            // An absent string field compares as "" (fields.Set of upstream).
            Some(v.as_str().unwrap_or_default().to_owned())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_match_labels_and_fields() {
        let obj = json!({"metadata": {"name": "a", "labels": {"app": "web", "tier": "x"}},
            "spec": {"nodeName": "n1"}});
        assert!(Selector::parse("app=web,tier in (x,y),!gone").matches_labels(&obj));
        assert!(!Selector::parse("app!=web").matches_labels(&obj));
        assert!(Selector::parse("spec.nodeName=n1,metadata.name=a").matches_fields(&obj));
        assert!(Selector::parse("spec.nodeName!=").matches_fields(&obj));
        assert!(Selector::parse("").matches_labels(&obj));
    }
}
