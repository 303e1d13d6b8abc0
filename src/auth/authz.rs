//! Authorization: `--authorization-always-allow-paths`, `system:masters`, and the cached
//! SubjectAccessReviews of the `--authorization-kubeconfig` cluster.

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use super::error::AuthError;
use super::identity::Decision;
use super::identity::UserInfo;
use super::review::{REVIEW_TIMEOUT, TtlCache};

/// `--authorization-always-allow-paths` (upstream `pkg/authorization/path`).
#[derive(Clone, Debug, Default)]
pub struct AllowPaths {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl AllowPaths {
    pub fn new(paths: &[String]) -> Result<Self, AuthError> {
        let mut out = Self::default();
        for p in paths {
            let p = p.trim_start_matches('/');
            if p.is_empty() {
                out.exact.push(String::new());
                continue;
            }
            if p[..p.len() - 1].contains('*') {
                return Err(AuthError::BadPath(p.to_owned()));
            }
            match p.strip_suffix('*') {
                Some(prefix) => out.prefixes.push(prefix.to_owned()),
                None => out.exact.push(p.to_owned()),
            }
        }
        Ok(out)
    }

    pub fn allows(&self, path: &str) -> bool {
        let path = path.trim_start_matches('/');
        self.exact.iter().any(|p| p == path) || self.prefixes.iter().any(|p| path.starts_with(p))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct SarKey {
    user: UserInfo,
    verb: String,
    path: String,
}

pub(super) struct SubjectAccessReviewer {
    pub(super) client: kube::Client,
    pub(super) allowed_ttl: Duration,
    pub(super) denied_ttl: Duration,
    pub(super) cache: TtlCache<SarKey, Decision>,
}

impl SubjectAccessReviewer {
    async fn review(&self, user: &UserInfo, verb: &str, path: &str) -> Decision {
        let key = SarKey {
            user: user.clone(),
            verb: verb.to_owned(),
            path: path.to_owned(),
        };
        if let Some(d) = self.cache.get(&key, Instant::now()) {
            return d;
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review)).await;
        let status = match answer {
            Ok(Ok(r)) => r.status.unwrap_or_default(),
            // Errors are not cached: the next request asks again.
            Ok(Err(e)) => {
                tracing::warn!(error = %e, path, "subject access review failed");
                return Decision::NoOpinion(format!("error contacting the API server: {e}"));
            }
            Err(_) => {
                tracing::warn!(path, "subject access review timed out");
                return Decision::NoOpinion("subject access review timed out".to_owned());
            }
        };
        let reason = status.reason.unwrap_or_default();
        let (decision, ttl) = if status.allowed {
            (Decision::Allow, self.allowed_ttl)
        } else if status.denied == Some(true) {
            (Decision::Deny(reason), self.denied_ttl)
        } else {
            (Decision::NoOpinion(reason), self.denied_ttl)
        };
        self.cache
            .insert(key, decision.clone(), ttl, Instant::now());
        decision
    }
}

/// Upstream's delegating authorizer: privileged groups, always-allowed paths, then a
/// SubjectAccessReview.
#[derive(Clone, Default)]
pub struct Authorizer {
    pub(super) groups: Vec<String>,
    pub(super) paths: AllowPaths,
    pub(super) reviewer: Option<Arc<SubjectAccessReviewer>>,
}

impl Authorizer {
    /// Decides a non-resource request `verb path` by `user`.
    pub async fn authorize(&self, user: &UserInfo, verb: &str, path: &str) -> Decision {
        if user.groups.iter().any(|g| self.groups.contains(g)) {
            return Decision::Allow;
        }
        if self.paths.allows(path) {
            return Decision::Allow;
        }
        match &self.reviewer {
            Some(r) => r.review(user, verb, path).await,
            None => Decision::NoOpinion(String::new()),
        }
    }
}
