//! Label selectors as upstream evaluates them (`metav1.LabelSelectorAsSelector`,
//! `labels.SelectorFromSet`). Pure.
//!
//! An `apps/v1` selector with neither `matchLabels` nor `matchExpressions` matches everything
//! (the API server forbids it for ReplicaSets, but a selector is never trusted to be valid);
//! a malformed expression (unknown operator, `In`/`NotIn` without values, `Exists`/
//! `DoesNotExist` with values) makes the whole selector invalid, and upstream then skips the
//! object without retrying.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::consts::selector as op;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            // Upstream: NotIn matches when the key is absent.
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed, valid selector. `Default` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// Why a selector cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("{0:?} is not a valid label selector operator")]
    UnknownOperator(String),
    #[error("for '{operator}' operator, the values of key {key:?} must be non-empty")]
    MissingValues { key: String, operator: String },
    #[error("values of key {key:?} must be empty for '{operator}' operator")]
    UnexpectedValues { key: String, operator: String },
}

impl Selector {
    /// From an `apps/v1` selector.
    pub fn from_label_selector(sel: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements: Vec<Requirement> = sel
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
            .collect();
        for expr in sel.match_expressions.iter().flatten() {
            let values = expr.values.clone().unwrap_or_default();
            let key = expr.key.clone();
            let operator = expr.operator.as_str();
            let need_values = |values: Vec<String>| {
                if values.is_empty() {
                    Err(SelectorError::MissingValues {
                        key: key.clone(),
                        operator: operator.to_owned(),
                    })
                } else {
                    Ok(values)
                }
            };
            let no_values = || {
                if values.is_empty() {
                    Ok(())
                } else {
                    Err(SelectorError::UnexpectedValues {
                        key: key.clone(),
                        operator: operator.to_owned(),
                    })
                }
            };
            let req = match operator {
                op::IN => Requirement::In(key.clone(), need_values(values.clone())?),
                op::NOT_IN => Requirement::NotIn(key.clone(), need_values(values.clone())?),
                op::EXISTS => {
                    no_values()?;
                    Requirement::Exists(key.clone())
                }
                op::DOES_NOT_EXIST => {
                    no_values()?;
                    Requirement::DoesNotExist(key.clone())
                }
                other => return Err(SelectorError::UnknownOperator(other.to_owned())),
            };
            requirements.push(req);
        }
        Ok(Self { requirements })
    }

    /// From a `core/v1` ReplicationController selector map (`labels.SelectorFromSet`).
    pub fn from_map(map: &BTreeMap<String, String>) -> Self {
        Self {
            requirements: map
                .iter()
                .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
                .collect(),
        }
    }

    /// True when the selector has no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let empty = BTreeMap::new();
        let labels = labels.unwrap_or(&empty);
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn expr(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn match_labels_and_expressions() {
        let sel = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                expr("tier", "In", &["fe", "be"]),
                expr("canary", "DoesNotExist", &[]),
                expr("zone", "NotIn", &["a"]),
            ]),
        })
        .expect("valid");
        assert!(sel.matches(Some(&labels(&[("app", "web"), ("tier", "fe")]))));
        assert!(sel.matches(Some(&labels(&[
            ("app", "web"),
            ("tier", "be"),
            ("zone", "b")
        ]))));
        assert!(!sel.matches(Some(&labels(&[
            ("app", "web"),
            ("tier", "fe"),
            ("zone", "a")
        ]))));
        assert!(!sel.matches(Some(&labels(&[("app", "web"), ("tier", "x")]))));
        assert!(!sel.matches(Some(&labels(&[
            ("app", "web"),
            ("tier", "fe"),
            ("canary", "")
        ]))));
        assert!(!sel.matches(Some(&labels(&[("app", "db"), ("tier", "fe")]))));
        assert!(!sel.matches(None));
    }

    #[test]
    fn empty_selector_matches_everything() {
        let sel = Selector::from_label_selector(&LabelSelector::default()).expect("valid");
        assert!(sel.is_empty());
        assert!(sel.matches(None));
        assert!(Selector::from_map(&BTreeMap::new()).matches(Some(&labels(&[("a", "b")]))));
    }

    #[test]
    fn invalid_expressions_are_errors() {
        let bad = |e| {
            Selector::from_label_selector(&LabelSelector {
                match_expressions: Some(vec![e]),
                ..LabelSelector::default()
            })
        };
        assert!(matches!(
            bad(expr("a", "Foo", &["x"])),
            Err(SelectorError::UnknownOperator(_))
        ));
        assert!(matches!(
            bad(expr("a", "In", &[])),
            Err(SelectorError::MissingValues { .. })
        ));
        assert!(matches!(
            bad(expr("a", "Exists", &["x"])),
            Err(SelectorError::UnexpectedValues { .. })
        ));
        assert!(bad(expr("a", "Exists", &[])).is_ok());
    }

    #[test]
    fn map_selector() {
        let sel = Selector::from_map(&labels(&[("app", "rc")]));
        assert!(sel.matches(Some(&labels(&[("app", "rc"), ("x", "y")]))));
        assert!(!sel.matches(Some(&labels(&[("app", "rc2")]))));
    }
}
