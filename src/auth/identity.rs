//! Who made a request (upstream `user.Info` and its well-known groups) and what an authorizer
//! answers.

use std::collections::BTreeMap;

pub const ANONYMOUS_USER: &str = "system:anonymous";
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// Upstream's `AlwaysAllowGroups` default: the API server's own superusers.
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// Who made a request (upstream `user.Info`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn anonymous() -> Self {
        Self {
            name: ANONYMOUS_USER.to_owned(),
            groups: vec![UNAUTHENTICATED_GROUP.to_owned()],
            ..Self::default()
        }
    }

    /// Upstream `AuthenticatedGroupAdder`.
    pub(super) fn with_authenticated_group(mut self) -> Self {
        if !self
            .groups
            .iter()
            .any(|g| g == AUTHENTICATED_GROUP || g == UNAUTHENTICATED_GROUP)
        {
            self.groups.push(AUTHENTICATED_GROUP.to_owned());
        }
        self
    }
}

/// An authorizer's answer (upstream `authorizer.Decision` plus its reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(String),
    NoOpinion(String),
}
