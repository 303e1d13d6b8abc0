//! The stale-cache guard: a sync of an owner waits until the informer caches reflect every
//! write the controller made for that owner (children created or adopted, its own status), so
//! no decision is taken on a cache that does not yet show the controller's own last step.
//!
//! Mirrors upstream `pkg/controller/util/consistency/consistency.go` (the consistency store
//! behind the `StaleControllerConsistency*` gates; the ReplicaSet controller's gate
//! `StaleControllerConsistencyReplicaSet` is beta and on since v1.36). Generic over the owner
//! kind: records are keyed by the owner's `namespace/name` and UID and by the group-resource
//! written, so a StatefulSet, DaemonSet or Job controller keeps one store of its own.
//! Expectations already prevent duplicate creates and deletes; the guard removes the rest of
//! the churn a lagging cache causes (repeated adoption patches, status writes computed from an
//! outdated child list).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::informer::compare_resource_versions;

/// An API group and resource, as metric labels name them (`""`/`pods`, `apps`/`replicasets`).
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
    /// Upstream's `schema.GroupResource.String()`: `resource.group`, or `resource` for core.
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

/// What the controller wrote for one owner (identified by UID, so a re-created owner of the
/// same name starts clean): the newest resourceVersion per group-resource.
#[derive(Debug)]
struct Record {
    owner_uid: String,
    versions: BTreeMap<GroupResource, String>,
}

/// Written resourceVersions per owner key (`namespace/name`).
#[derive(Debug, Default)]
pub struct ConsistencyStore {
    records: Mutex<HashMap<String, Record>>,
}

impl ConsistencyStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        // The map is consistent after every statement; a panic elsewhere cannot tear it.
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that the controller wrote `resource` at `rv` on behalf of `owner`. Keeps the
    /// newest version per resource; an incomparable one replaces the record's (upstream).
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

    /// Forgets `owner`: only the record of `owner_uid` when given, any record otherwise.
    pub fn clear(&self, owner: &str, owner_uid: Option<&str>) {
        let mut records = self.records();
        if records
            .get(owner)
            .is_some_and(|r| owner_uid.is_none_or(|uid| uid == r.owner_uid))
        {
            records.remove(owner);
        }
    }

    /// `Ok` when every cache has seen what was written for `owner` (and then forgets the
    /// record); the first lagging resource otherwise. `observed` gives a cache's last synced
    /// resourceVersion; a resource without one, or a pair of versions that cannot be
    /// compared, does not hold the sync up (upstream fails open).
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

    /// Owners with writes the caches have not yet been seen to reflect.
    pub fn len(&self) -> usize {
        self.records().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;

    fn pods() -> GroupResource {
        GroupResource::of::<Pod>()
    }
    fn replicasets() -> GroupResource {
        GroupResource::of::<ReplicaSet>()
    }

    /// Caches at fixed versions.
    fn caches(
        pods_rv: Option<&str>,
        rs_rv: Option<&str>,
    ) -> impl Fn(&GroupResource) -> Option<String> {
        let (p, r) = (pods_rv.map(str::to_owned), rs_rv.map(str::to_owned));
        move |gr| {
            if *gr == pods() {
                p.clone()
            } else if *gr == replicasets() {
                r.clone()
            } else {
                None
            }
        }
    }

    #[test]
    fn group_resources_print_as_upstream() {
        assert_eq!(pods().to_string(), "pods");
        assert_eq!(replicasets().to_string(), "replicasets.apps");
        assert_eq!(
            (pods().group.as_str(), pods().resource.as_str()),
            ("", "pods")
        );
        assert_eq!(replicasets().group, "apps");
    }

    #[test]
    fn no_record_is_ready() {
        let store = ConsistencyStore::new();
        assert_eq!(store.ensure_ready("ns/web", caches(None, None)), Ok(()));
    }

    #[test]
    fn waits_until_every_cache_caught_up_then_forgets() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/web", "u1", pods(), "105");
        store.wrote_at("ns/web", "u1", pods(), "103");
        store.wrote_at("ns/web", "u1", replicasets(), "110");

        let err = store.ensure_ready("ns/web", caches(Some("104"), Some("200")));
        assert_eq!(
            err,
            Err(Stale {
                resource: pods(),
                written: "105".into(),
                observed: "104".into()
            }),
            "the newest pod write counts, not the last recorded"
        );
        assert_eq!(
            err.map_err(|e| e.to_string()),
            Err(
                "read version: 104 is not as new as written version: 105 for group resource pods"
                    .into()
            )
        );
        let err = store.ensure_ready("ns/web", caches(Some("105"), Some("109")));
        assert_eq!(err.map_err(|e| e.resource), Err(replicasets()));
        assert_eq!(store.len(), 1, "kept while stale");

        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("105"), Some("110"))),
            Ok(())
        );
        assert_eq!(store.len(), 0, "dropped once caught up");
        // Nothing left to wait for, even if a cache were to go back.
        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("1"), Some("1"))),
            Ok(())
        );
    }

    #[test]
    fn unknown_or_incomparable_versions_do_not_block() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/web", "u1", pods(), "105");
        assert_eq!(store.ensure_ready("ns/web", caches(None, None)), Ok(()));

        store.wrote_at("ns/web", "u1", pods(), "105");
        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("opaque"), None)),
            Ok(())
        );

        store.wrote_at("ns/web", "u1", pods(), "opaque");
        assert_eq!(
            store.ensure_ready("ns/web", caches(Some("1"), None)),
            Ok(())
        );

        store.wrote_at("ns/web", "u1", pods(), "");
        assert_eq!(store.len(), 0, "an empty version is not recorded");
    }

    #[test]
    fn owners_are_separate_and_a_new_uid_starts_clean() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/a", "ua", pods(), "50");
        store.wrote_at("ns/b", "ub", pods(), "10");
        assert_eq!(store.ensure_ready("ns/b", caches(Some("20"), None)), Ok(()));
        assert!(
            store
                .ensure_ready("ns/a", caches(Some("20"), None))
                .is_err()
        );

        // Re-created under the same name: the old object's writes no longer matter.
        store.wrote_at("ns/a", "ua2", replicasets(), "30");
        assert_eq!(
            store.ensure_ready("ns/a", caches(Some("20"), Some("30"))),
            Ok(())
        );
    }

    #[test]
    fn clear_respects_the_uid() {
        let store = ConsistencyStore::new();
        store.wrote_at("ns/a", "ua", pods(), "50");
        store.clear("ns/a", Some("other"));
        assert_eq!(
            store.len(),
            1,
            "a delete of another object of that name keeps it"
        );
        store.clear("ns/a", Some("ua"));
        assert_eq!(store.len(), 0);
        store.wrote_at("ns/a", "ua", pods(), "50");
        store.clear("ns/a", None);
        assert_eq!(store.len(), 0);
    }
}
