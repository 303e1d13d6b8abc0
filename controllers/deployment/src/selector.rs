//! PURE: `metav1.LabelSelector` evaluation (`LabelSelectorAsSelector`) and its query-string
//! form for a live LIST.
//!
//! A selector with no requirement matches everything (upstream then refuses the Deployment
//! with `SelectingAll`); a malformed expression makes the whole selector invalid.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A valid, parsed label selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    reqs: Vec<Req>,
}

impl Selector {
    /// Parses an `apps/v1` selector; the error text says which expression is bad.
    pub fn parse(sel: &LabelSelector) -> Result<Self, String> {
        let mut reqs: Vec<Req> = sel
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Req::Eq(k.clone(), v.clone()))
            .collect();
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let key = e.key.clone();
            let req = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(format!(
                        "for '{}' operator, the values of key {key:?} must be non-empty",
                        e.operator
                    ));
                }
                "In" => Req::In(key, values),
                "NotIn" => Req::NotIn(key, values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(format!(
                        "values of key {key:?} must be empty for '{}' operator",
                        e.operator
                    ));
                }
                "Exists" => Req::Exists(key),
                "DoesNotExist" => Req::DoesNotExist(key),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// No requirement at all: matches every object.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let empty = BTreeMap::new();
        let labels = labels.unwrap_or(&empty);
        self.reqs.iter().all(|r| match r {
            Req::Eq(k, v) => labels.get(k) == Some(v),
            Req::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            // An absent key satisfies NotIn, as upstream.
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Req::Exists(k) => labels.contains_key(k),
            Req::DoesNotExist(k) => !labels.contains_key(k),
        })
    }

    /// The `labelSelector` query parameter that selects the same objects.
    pub fn to_query(&self) -> String {
        self.reqs
            .iter()
            .map(|r| match r {
                Req::Eq(k, v) => format!("{k}={v}"),
                Req::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Req::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
                Req::Exists(k) => k.clone(),
                Req::DoesNotExist(k) => format!("!{k}"),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).into()).collect()),
        }
    }

    #[test]
    fn evaluates_and_renders() {
        let sel = Selector::parse(&LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                expr("tier", "In", &["fe", "be"]),
                expr("zone", "NotIn", &["a"]),
                expr("canary", "DoesNotExist", &[]),
                expr("team", "Exists", &[]),
            ]),
        })
        .expect("valid");
        assert!(sel.matches(Some(&labels(&[
            ("app", "web"),
            ("tier", "fe"),
            ("team", "x")
        ]))));
        assert!(!sel.matches(Some(&labels(&[
            ("app", "web"),
            ("tier", "fe"),
            ("team", "x"),
            ("zone", "a")
        ]))));
        assert!(!sel.matches(Some(&labels(&[("app", "web"), ("tier", "fe")]))));
        assert!(!sel.matches(None));
        assert_eq!(
            sel.to_query(),
            "app=web,tier in (fe,be),zone notin (a),!canary,team"
        );
    }

    #[test]
    fn empty_and_invalid() {
        let empty = Selector::parse(&LabelSelector::default()).expect("valid");
        assert!(empty.is_empty() && empty.matches(None));
        let bad = |e| {
            Selector::parse(&LabelSelector {
                match_expressions: Some(vec![e]),
                ..LabelSelector::default()
            })
        };
        assert!(bad(expr("a", "Foo", &["x"])).is_err());
        assert!(bad(expr("a", "In", &[])).is_err());
        assert!(bad(expr("a", "Exists", &["x"])).is_err());
    }
}
