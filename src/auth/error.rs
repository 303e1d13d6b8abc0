//! What can fail while the delegated authentication and authorization are set up.

use std::path::PathBuf;

pub(super) const AUTH_CONFIGMAP_NAMESPACE: &str = "kube-system";
pub(super) const AUTH_CONFIGMAP: &str = "extension-apiserver-authentication";

/// Why the delegated authentication/authorization could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("reading CA bundle {path}: {source}")]
    ReadCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("CA bundle {what}: {reason}")]
    BadCa { what: String, reason: String },
    #[error("building the {what} client: {reason}")]
    Client { what: &'static str, reason: String },
    #[error(
        "looking up configmap/{AUTH_CONFIGMAP} in {AUTH_CONFIGMAP_NAMESPACE} (set \
         --authentication-tolerate-lookup-failure to go on without it): {reason}"
    )]
    Lookup { reason: String },
    #[error("--authorization-always-allow-paths: only a trailing * is allowed in {0:?}")]
    BadPath(String),
}
