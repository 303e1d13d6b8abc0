//! Stand-ins for workload helpers that are moving into `rkcm-runtime` (label selectors, pod
//! readiness and availability, the stale-cache guard). Same names and semantics as the
//! runtime's, so switching is a change of `use` lines; delete this file then.
//!
//! Mirrors `metav1.LabelSelectorAsSelector`, `podutil.IsPodReady`/`IsPodAvailable` and
//! `pkg/controller/util/consistency/consistency.go`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use rkcm_runtime::informer::compare_resource_versions;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; an empty one matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    pub fn from_label_selector(sel: &LabelSelector) -> Result<Self, String> {
        let mut requirements: Vec<Requirement> = sel
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
            .collect();
        for expr in sel.match_expressions.iter().flatten() {
            let values = expr.values.clone().unwrap_or_default();
            let key = expr.key.clone();
            let req = match expr.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(format!(
                        "for '{}' operator, the values of key {key:?} must be non-empty",
                        expr.operator
                    ));
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(format!(
                        "values of key {key:?} must be empty for '{}' operator",
                        expr.operator
                    ));
                }
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            requirements.push(req);
        }
        Ok(Self { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let empty = BTreeMap::new();
        let labels = labels.unwrap_or(&empty);
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// The pod's `Ready` condition is `True` (`podutil.IsPodReady`).
pub fn is_pod_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// When the pod last became ready, if it is ready and the time is known.
pub fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    if !is_pod_ready(pod) {
        return None;
    }
    ready_condition(pod)?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// `podutil.IsPodAvailable`: ready, and ready for more than `min_ready_seconds` before `now`
/// (immediately with 0; never with a missing transition time otherwise).
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    if !is_pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    ready_since(pod).is_some_and(|since| {
        since
            .checked_add(jiff::SignedDuration::from_secs(i64::from(
                min_ready_seconds,
            )))
            .is_ok_and(|t| t < now)
    })
}

/// An API group and resource, as metric labels name them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        Self {
            group: K::group(&()).into_owned(),
            resource: K::plural(&()).into_owned(),
        }
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// A sync that must wait: the cache of `resource` has not yet seen the controller's write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "read version: {observed} is not as new as written version: {written} for group resource {resource}"
)]
pub struct Stale {
    pub resource: GroupResource,
    pub written: String,
    pub observed: String,
}

#[derive(Debug)]
struct Record {
    owner_uid: String,
    versions: BTreeMap<GroupResource, String>,
}

/// Written resourceVersions per owner key.
#[derive(Debug, Default)]
pub struct ConsistencyStore {
    records: Mutex<HashMap<String, Record>>,
}

impl ConsistencyStore {
    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn wrote_at(&self, owner: &str, owner_uid: &str, resource: GroupResource, rv: &str) {
        if rv.is_empty() {
            return;
        }
        let mut records = self.records();
        let record = records.entry(owner.to_owned()).or_insert_with(|| Record {
            owner_uid: owner_uid.to_owned(),
            versions: BTreeMap::new(),
        });
        if record.owner_uid != owner_uid {
            *record = Record {
                owner_uid: owner_uid.to_owned(),
                versions: BTreeMap::new(),
            };
        }
        let keep = record.versions.get(&resource).is_some_and(|known| {
            compare_resource_versions(known, rv).is_some_and(std::cmp::Ordering::is_ge)
        });
        if !keep {
            record.versions.insert(resource, rv.to_owned());
        }
    }

    pub fn clear(&self, owner: &str, owner_uid: Option<&str>) {
        let mut records = self.records();
        if records
            .get(owner)
            .is_some_and(|r| owner_uid.is_none_or(|uid| uid == r.owner_uid))
        {
            records.remove(owner);
        }
    }

    pub fn ensure_ready(
        &self,
        owner: &str,
        observed: impl Fn(&GroupResource) -> Option<String>,
    ) -> Result<(), Stale> {
        let mut records = self.records();
        let Some(record) = records.get(owner) else {
            return Ok(());
        };
        for (resource, written) in &record.versions {
            let Some(seen) = observed(resource).filter(|s| !s.is_empty()) else {
                continue;
            };
            if compare_resource_versions(written, &seen) == Some(std::cmp::Ordering::Greater) {
                return Err(Stale {
                    resource: resource.clone(),
                    written: written.clone(),
                    observed: seen,
                });
            }
        }
        records.remove(owner);
        Ok(())
    }
}
