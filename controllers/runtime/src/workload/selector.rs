//! PURE: label selectors as upstream evaluates them.
//!
//! Mirrors `LabelSelectorAsSelector` of
//! `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`, `SelectorFromSet` and the
//! requirement matching and rendering of `staging/src/k8s.io/apimachinery/pkg/labels/selector.go`.
//!
//! Which constructor gives which selector:
//! - [`Selector::from_label_selector`] of a selector with neither `matchLabels` nor
//!   `matchExpressions` matches **everything** ([`Selector::is_empty`] is true); controllers
//!   that refuse such owners (Deployment's `SelectingAll`) test `is_empty` themselves.
//! - [`Selector::from_optional`] of `None` (an absent selector, upstream's `nil`) and
//!   [`Selector::nothing`] match **nothing**; `is_empty` is false for them, as upstream's
//!   `nothingSelector`.
//! - [`Selector::from_map`] (`core/v1` ReplicationController selectors, `SelectorFromSet`): an
//!   empty map matches everything.
//!
//! A malformed expression (unknown operator, `In`/`NotIn` without values, `Exists`/
//! `DoesNotExist` with values) makes the whole selector invalid ([`SelectorError`]); upstream
//! then skips the object without retrying.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Label selector operators (`metav1.LabelSelectorOperator`).
pub mod op {
    pub const IN: &str = "In";
    pub const NOT_IN: &str = "NotIn";
    pub const EXISTS: &str = "Exists";
    pub const DOES_NOT_EXIST: &str = "DoesNotExist";
}

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

    fn render(&self) -> String {
        match self {
            Requirement::Equals(k, v) => format!("{k}={v}"),
            Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            Requirement::Exists(k) => k.clone(),
            Requirement::DoesNotExist(k) => format!("!{k}"),
        }
    }
}

/// A parsed, valid selector. `Default` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
    /// Upstream's `nothingSelector`: matches no object at all.
    nothing: bool,
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
    /// The selector that matches no object (upstream `labels.Nothing()`).
    pub fn nothing() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// From an optional `metav1.LabelSelector`: `None` (upstream `nil`) matches nothing.
    pub fn from_optional(sel: Option<&LabelSelector>) -> Result<Self, SelectorError> {
        sel.map_or_else(|| Ok(Self::nothing()), Self::from_label_selector)
    }

    /// From a `metav1.LabelSelector` (`LabelSelectorAsSelector`): without any requirement it
    /// matches everything.
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
            let missing = || SelectorError::MissingValues {
                key: key.clone(),
                operator: operator.to_owned(),
            };
            let unexpected = || SelectorError::UnexpectedValues {
                key: key.clone(),
                operator: operator.to_owned(),
            };
            let req = match operator {
                op::IN | op::NOT_IN if values.is_empty() => return Err(missing()),
                op::IN => Requirement::In(key.clone(), values),
                op::NOT_IN => Requirement::NotIn(key.clone(), values),
                op::EXISTS | op::DOES_NOT_EXIST if !values.is_empty() => {
                    return Err(unexpected());
                }
                op::EXISTS => Requirement::Exists(key.clone()),
                op::DOES_NOT_EXIST => Requirement::DoesNotExist(key.clone()),
                other => return Err(SelectorError::UnknownOperator(other.to_owned())),
            };
            requirements.push(req);
        }
        Ok(Self {
            requirements,
            nothing: false,
        })
    }

    /// From a `core/v1` selector map (`labels.SelectorFromSet`): an empty map matches
    /// everything.
    pub fn from_map(map: &BTreeMap<String, String>) -> Self {
        Self {
            requirements: map
                .iter()
                .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
                .collect(),
            nothing: false,
        }
    }

    /// True when the selector has no requirement and matches everything (upstream
    /// `Selector.Empty()`); false for [`Selector::nothing`].
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// Whether an object with these labels is selected (`None`: no labels).
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        if self.nothing {
            return false;
        }
        let empty = BTreeMap::new();
        let labels = labels.unwrap_or(&empty);
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The `labelSelector` query parameter of a LIST that selects the same objects, in
    /// declaration order (`matchLabels` first). Empty for a selector that matches everything
    /// and, as upstream's `nothingSelector.String()`, for [`Selector::nothing`]: never LIST
    /// with the query of a selector that matches nothing.
    pub fn to_query(&self) -> String {
        self.requirements
            .iter()
            .map(Requirement::render)
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
        assert!(!sel.is_empty());
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
    fn empty_selects_everything_nil_selects_nothing() {
        let all = Selector::from_label_selector(&LabelSelector::default()).expect("valid");
        assert!(all.is_empty());
        assert!(all.matches(None));
        assert!(all.matches(Some(&labels(&[("a", "b")]))));
        assert_eq!(all.to_query(), "");
        assert_eq!(all, Selector::default());
        assert!(Selector::from_map(&BTreeMap::new()).matches(Some(&labels(&[("a", "b")]))));

        let none = Selector::from_optional(None).expect("valid");
        assert_eq!(none, Selector::nothing());
        assert!(!none.is_empty());
        assert!(!none.matches(None));
        assert!(!none.matches(Some(&labels(&[("a", "b")]))));
        let some = Selector::from_optional(Some(&LabelSelector::default())).expect("valid");
        assert!(some.is_empty());
    }

    #[test]
    fn invalid_expressions_are_errors() {
        let bad = |e| {
            Selector::from_label_selector(&LabelSelector {
                match_expressions: Some(vec![e]),
                ..LabelSelector::default()
            })
        };
        assert_eq!(
            bad(expr("a", "Foo", &["x"])),
            Err(SelectorError::UnknownOperator("Foo".into()))
        );
        assert_eq!(
            bad(expr("a", "In", &[])),
            Err(SelectorError::MissingValues {
                key: "a".into(),
                operator: "In".into()
            })
        );
        assert!(matches!(
            bad(expr("a", "NotIn", &[])),
            Err(SelectorError::MissingValues { .. })
        ));
        assert!(matches!(
            bad(expr("a", "Exists", &["x"])),
            Err(SelectorError::UnexpectedValues { .. })
        ));
        assert!(matches!(
            bad(expr("a", "DoesNotExist", &["x"])),
            Err(SelectorError::UnexpectedValues { .. })
        ));
        assert!(bad(expr("a", "Exists", &[])).is_ok());
        assert_eq!(
            bad(expr("a", "In", &[])).map_err(|e| e.to_string()),
            Err("for 'In' operator, the values of key \"a\" must be non-empty".into())
        );
    }

    #[test]
    fn map_selector() {
        let sel = Selector::from_map(&labels(&[("app", "rc")]));
        assert!(sel.matches(Some(&labels(&[("app", "rc"), ("x", "y")]))));
        assert!(!sel.matches(Some(&labels(&[("app", "rc2")]))));
        assert!(!sel.matches(None));
        assert_eq!(sel.to_query(), "app=rc");
    }

    #[test]
    fn query_renders_every_operator() {
        let sel = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                expr("tier", "In", &["fe", "be"]),
                expr("zone", "NotIn", &["a"]),
                expr("canary", "DoesNotExist", &[]),
                expr("team", "Exists", &[]),
            ]),
        })
        .expect("valid");
        assert_eq!(
            sel.to_query(),
            "app=web,tier in (fe,be),zone notin (a),!canary,team"
        );
    }
}
