//! Delegated authentication and authorization of the serving endpoints, as upstream's
//! controller-manager serves them (k8s.io/controller-manager `app/serve.go`
//! `BuildHandlerChain`; k8s.io/apiserver `pkg/server/options/authentication.go`,
//! `authorization.go`, `pkg/authentication/request/*`, `plugin/pkg/authorizer/webhook`).
//!
//! Authentication, in upstream's order (the first authenticator that recognises the request
//! wins; one that fails is remembered and the next is tried):
//! 1. request header (`--requestheader-*`): a client certificate verified against
//!    `--requestheader-client-ca-file` whose common name is allowed vouches for the user in
//!    `X-Remote-User`/`-Group`/`-Extra-*` (or the configured headers);
//! 2. client certificate verified against `--client-ca-file`: user = common name, groups =
//!    organizations;
//! 3. bearer token, reviewed with a TokenReview by the `--authentication-kubeconfig` cluster
//!    (in-cluster config when empty; no token authentication without either). Answers are
//!    cached for `--authentication-token-webhook-cache-ttl` (authenticated and not alike),
//!    keyed by an HMAC of the token, never the token itself; API errors are not cached.
//!
//! If every authenticator that recognised the request failed, the request gets 401; a
//! request nothing recognised is `system:anonymous` (group `system:unauthenticated`).
//! Authenticated users also get the group `system:authenticated`.
//!
//! Authorization: members of `system:masters` are allowed without asking; paths in
//! `--authorization-always-allow-paths` (exact, or prefix with a trailing `*`) are allowed for
//! anyone; everything else is a SubjectAccessReview (non-resource `path` and the lower-cased
//! HTTP method as verb) by the `--authorization-kubeconfig` cluster, cached for
//! `--authorization-webhook-cache-authorized-ttl` / `-unauthorized-ttl`. No answer means 403.
//!
//! With `--authentication-skip-lookup=false`, a client CA or request-header CA not given by
//! flag is read from the `kube-system/extension-apiserver-authentication` ConfigMap (failing
//! start unless `--authentication-tolerate-lookup-failure`). Deviation: CA files and that
//! ConfigMap are read once at start, not watched for changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::cli::Cli;

mod authn;
mod authz;
mod error;
mod identity;
mod review;

use authn::TokenReviewer;
pub use authn::{Authenticator, CaBundle, RequestHeaderConfig};
use authz::SubjectAccessReviewer;
pub use authz::{AllowPaths, Authorizer};
pub use error::AuthError;
use error::{AUTH_CONFIGMAP, AUTH_CONFIGMAP_NAMESPACE};
pub use identity::{Decision, PRIVILEGED_GROUP};
use review::TtlCache;

/// Upstream's delegated clients: high limits, since they bound how fast we can answer.
const DELEGATED_QPS: f32 = 200.0;
const DELEGATED_BURST: u32 = 400;

// ---------------------------------------------------------------------------------------------
// Setup from flags
// ---------------------------------------------------------------------------------------------

/// Both halves, shared by every connection.
#[derive(Clone, Default)]
pub struct Delegation {
    pub authn: Authenticator,
    pub authz: Authorizer,
}

/// A client for `kubeconfig`, or the in-cluster one when empty; `None` (with a warning) when
/// neither exists, as upstream's optional remote kubeconfig does.
async fn delegated_client(
    kubeconfig: Option<&PathBuf>,
    what: &'static str,
) -> Result<Option<kube::Client>, AuthError> {
    let config = match kubeconfig.filter(|p| !p.as_os_str().is_empty()) {
        Some(path) => {
            rkcm_runtime::api::client::build_config(&rkcm_runtime::api::client::ClientOptions {
                kubeconfig: Some(path.clone()),
                ..rkcm_runtime::api::client::ClientOptions::default()
            })
            .await
            .map_err(|e| AuthError::Client {
                what,
                reason: e.to_string(),
            })?
        }
        None => match kube::Config::incluster() {
            Ok(c) => c,
            Err(err) => {
                tracing::info!(%err, client = what, "no kubeconfig given and no in-cluster config");
                return Ok(None);
            }
        },
    };
    let opts = rkcm_runtime::api::client::ClientOptions {
        qps: DELEGATED_QPS,
        burst: DELEGATED_BURST,
        ..rkcm_runtime::api::client::ClientOptions::default()
    };
    rkcm_runtime::api::client::make_client(&config, &opts, what)
        .map(Some)
        .map_err(|e| AuthError::Client {
            what,
            reason: e.to_string(),
        })
}

fn json_list(data: &BTreeMap<String, String>, key: &str) -> Vec<String> {
    data.get(key)
        .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok())
        .unwrap_or_default()
}

impl Delegation {
    /// Builds authentication and authorization from the flags (reads CA files, builds the
    /// review clients, looks up missing CAs in the cluster).
    pub async fn from_flags(cli: &Cli) -> Result<Self, AuthError> {
        let a = &cli.authentication;
        let z = &cli.authorization;

        let authn_client = delegated_client(
            a.authentication_kubeconfig.as_ref(),
            "delegated-authentication",
        )
        .await?;
        let mut client_ca = match a.client_ca_file.as_str() {
            "" => None,
            f => Some(CaBundle::from_file(Path::new(f))?),
        };
        let mut request_header = match a.requestheader_client_ca_file.as_str() {
            "" => None,
            f => Some(RequestHeaderConfig {
                ca: CaBundle::from_file(Path::new(f))?,
                allowed_names: a.requestheader_allowed_names.clone(),
                username_headers: a.requestheader_username_headers.clone(),
                uid_headers: a.requestheader_uid_headers.clone(),
                group_headers: a.requestheader_group_headers.clone(),
                extra_prefixes: a.requestheader_extra_headers_prefix.clone(),
            }),
        };

        if !a.authentication_skip_lookup && (client_ca.is_none() || request_header.is_none()) {
            match lookup(authn_client.as_ref(), &mut client_ca, &mut request_header).await {
                Ok(()) => {}
                Err(e) if a.authentication_tolerate_lookup_failure => {
                    tracing::warn!(
                        error = %e,
                        "error looking up in-cluster authentication configuration; continuing \
                         without it (requests may be treated as anonymous)"
                    );
                }
                Err(e) => return Err(e),
            }
        }

        let tokens = authn_client.map(|client| {
            let rng = ring::rand::SystemRandom::new();
            let key = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
                .unwrap_or_else(|_| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"rkcm"));
            Arc::new(TokenReviewer {
                client,
                ttl: a.authentication_token_webhook_cache_ttl.to_std(),
                key,
                cache: TtlCache::new(),
            })
        });
        if tokens.is_none() {
            tracing::warn!(
                "no authentication-kubeconfig provided, so token authentication is off: bearer \
                 tokens are not reviewed"
            );
        }

        let authz_client = delegated_client(
            z.authorization_kubeconfig.as_ref(),
            "delegated-authorization",
        )
        .await?;
        if authz_client.is_none() {
            tracing::warn!(
                "no authorization-kubeconfig provided, so SubjectAccessReview of authorization \
                 tokens won't work"
            );
        }
        let reviewer = authz_client.map(|client| {
            Arc::new(SubjectAccessReviewer {
                client,
                allowed_ttl: z.authorization_webhook_cache_authorized_ttl.to_std(),
                denied_ttl: z.authorization_webhook_cache_unauthorized_ttl.to_std(),
                cache: TtlCache::new(),
            })
        });
        Ok(Self {
            authn: Authenticator {
                request_header,
                client_ca,
                tokens,
            },
            authz: Authorizer {
                groups: vec![PRIVILEGED_GROUP.to_owned()],
                paths: AllowPaths::new(&z.authorization_always_allow_paths)?,
                reviewer,
            },
        })
    }
}

/// Upstream `lookupMissingConfigInCluster`: fills what the flags left out from the
/// `extension-apiserver-authentication` ConfigMap. A missing ConfigMap is not an error.
async fn lookup(
    client: Option<&kube::Client>,
    client_ca: &mut Option<CaBundle>,
    request_header: &mut Option<RequestHeaderConfig>,
) -> Result<(), AuthError> {
    let Some(client) = client else {
        if client_ca.is_none() {
            tracing::warn!(
                "no authentication-kubeconfig provided to look up client-ca-file in the cluster, \
                 so client certificate authentication won't work"
            );
        }
        if request_header.is_none() {
            tracing::warn!(
                "no authentication-kubeconfig provided to look up requestheader-client-ca-file \
                 in the cluster, so request-header authentication won't work"
            );
        }
        return Ok(());
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), AUTH_CONFIGMAP_NAMESPACE);
    let cm = match api.get_opt(AUTH_CONFIGMAP).await {
        Ok(Some(cm)) => cm,
        Ok(None) => return Ok(()),
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::warn!(
                "unable to get configmap/{AUTH_CONFIGMAP} in {AUTH_CONFIGMAP_NAMESPACE}; usually \
                 fixed by binding the role extension-apiserver-authentication-reader in \
                 kube-system to this identity"
            );
            return Err(AuthError::Lookup {
                reason: e.to_string(),
            });
        }
        Err(e) => {
            return Err(AuthError::Lookup {
                reason: e.to_string(),
            });
        }
    };
    let data = cm.data.unwrap_or_default();
    if client_ca.is_none()
        && let Some(pem) = data.get("client-ca-file").filter(|p| !p.is_empty())
    {
        *client_ca = Some(CaBundle::from_pem(
            "client-ca-file of the authentication configmap",
            pem.as_bytes(),
        )?);
    }
    if request_header.is_none()
        && let Some(pem) = data
            .get("requestheader-client-ca-file")
            .filter(|p| !p.is_empty())
    {
        *request_header = Some(RequestHeaderConfig {
            ca: CaBundle::from_pem(
                "requestheader-client-ca-file of the authentication configmap",
                pem.as_bytes(),
            )?,
            allowed_names: json_list(&data, "requestheader-allowed-names"),
            username_headers: json_list(&data, "requestheader-username-headers"),
            uid_headers: json_list(&data, "requestheader-uid-headers"),
            group_headers: json_list(&data, "requestheader-group-headers"),
            extra_prefixes: json_list(&data, "requestheader-extra-headers-prefix"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderMap;
    use rustls::pki_types::CertificateDer;
    use tokio::time::Instant;

    use super::authn::{bearer_token, unescape_extra_key};
    use super::identity::{AUTHENTICATED_GROUP, UserInfo};
    use super::*;

    struct Pki {
        ca_pem: String,
        issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    }

    impl Pki {
        fn new(cn: &str) -> Self {
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
            let key = rcgen::KeyPair::generate().expect("key");
            let ca = params.self_signed(&key).expect("ca");
            Self {
                ca_pem: ca.pem(),
                issuer: rcgen::Issuer::new(params, key),
            }
        }
        fn bundle(&self) -> CaBundle {
            CaBundle::from_pem("test", self.ca_pem.as_bytes()).expect("bundle")
        }
        fn client(&self, cn: &str, orgs: &[&str]) -> Vec<CertificateDer<'static>> {
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
            for o in orgs {
                params
                    .distinguished_name
                    .push(rcgen::DnType::OrganizationName, *o);
            }
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
            let key = rcgen::KeyPair::generate().expect("key");
            let cert = params.signed_by(&key, &self.issuer).expect("signed");
            vec![cert.der().clone()]
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                http::HeaderValue::from_str(v).expect("value"),
            );
        }
        h
    }

    #[tokio::test]
    async fn client_certificates_name_the_user() {
        let pki = Pki::new("client-ca");
        let other = Pki::new("other-ca");
        let authn = Authenticator {
            client_ca: Some(pki.bundle()),
            ..Authenticator::default()
        };
        let user = authn
            .authenticate(&HeaderMap::new(), Some(&pki.client("alice", &["team-a"])))
            .await
            .expect("authenticated");
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["team-a", AUTHENTICATED_GROUP]);

        // Signed by another CA: 401, never anonymous.
        let err = authn
            .authenticate(&HeaderMap::new(), Some(&other.client("mallory", &[])))
            .await
            .expect_err("unknown authority");
        assert!(err.contains("verifying certificate"), "{err}");

        // Nothing presented: anonymous.
        assert_eq!(
            authn.authenticate(&HeaderMap::new(), None).await,
            Ok(UserInfo::anonymous())
        );
    }

    #[tokio::test]
    async fn request_header_needs_an_allowed_proxy_certificate() {
        let front = Pki::new("front-proxy-ca");
        let clients = Pki::new("client-ca");
        let authn = Authenticator {
            request_header: Some(RequestHeaderConfig {
                ca: front.bundle(),
                allowed_names: vec!["front-proxy-client".into()],
                username_headers: vec!["x-remote-user".into()],
                uid_headers: vec![],
                group_headers: vec!["x-remote-group".into()],
                extra_prefixes: vec!["x-remote-extra-".into()],
            }),
            client_ca: Some(clients.bundle()),
            tokens: None,
        };
        let h = headers(&[
            ("x-remote-user", "bob"),
            ("x-remote-group", "g1"),
            ("x-remote-group", "g2"),
            ("x-remote-extra-scopes%2fa", "s"),
        ]);
        let user = authn
            .authenticate(&h, Some(&front.client("front-proxy-client", &[])))
            .await
            .expect("proxy");
        assert_eq!(user.name, "bob");
        assert_eq!(user.groups, ["g1", "g2", AUTHENTICATED_GROUP]);
        assert_eq!(
            user.extra.get("scopes/a").map(Vec::as_slice),
            Some(&["s".to_owned()][..])
        );

        // A proxy certificate with a name not allowed: 401.
        assert!(
            authn
                .authenticate(&h, Some(&front.client("someone-else", &[])))
                .await
                .is_err()
        );
        // A client certificate (not a proxy's) with the headers: the headers are ignored,
        // the certificate's own name counts.
        let user = authn
            .authenticate(&h, Some(&clients.client("carol", &[])))
            .await
            .expect("client cert");
        assert_eq!(user.name, "carol");
    }

    #[test]
    fn bearer_tokens_as_upstream_reads_them() {
        let t = |v: &str| {
            let h = headers(&[("authorization", v)]);
            bearer_token(&h).map(str::to_owned)
        };
        assert_eq!(t("Bearer abc"), Some("abc".into()));
        assert_eq!(t("bearer abc extra"), Some("abc".into()));
        assert_eq!(t("Basic abc"), None);
        assert_eq!(t("Bearer  abc"), None, "empty token before a second space");
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn always_allow_paths() {
        let p = AllowPaths::new(&["/healthz".into(), "/readyz".into(), "/debug/*".into()])
            .expect("paths");
        assert!(p.allows("/healthz"));
        assert!(!p.allows("/healthz/leaderElection"), "exact unless starred");
        assert!(p.allows("/debug/pprof/heap"));
        assert!(!p.allows("/metrics"));
        assert!(AllowPaths::new(&["/a*b".into()]).is_err());
        let root = AllowPaths::new(&["/".into()]).expect("root");
        assert!(root.allows("/") && !root.allows("/x"));
    }

    #[tokio::test]
    async fn privileged_group_and_paths_need_no_review() {
        let z = Authorizer {
            groups: vec![PRIVILEGED_GROUP.into()],
            paths: AllowPaths::new(&["/healthz".into()]).expect("paths"),
            reviewer: None,
        };
        let admin = UserInfo {
            name: "admin".into(),
            groups: vec![PRIVILEGED_GROUP.into()],
            ..UserInfo::default()
        };
        assert_eq!(
            z.authorize(&admin, "get", "/metrics").await,
            Decision::Allow
        );
        assert_eq!(
            z.authorize(&UserInfo::anonymous(), "get", "/healthz").await,
            Decision::Allow
        );
        assert_eq!(
            z.authorize(&UserInfo::anonymous(), "get", "/metrics").await,
            Decision::NoOpinion(String::new())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cache_entries_expire() {
        let c: TtlCache<u8, u8> = TtlCache::new();
        c.insert(1, 10, Duration::from_secs(10), Instant::now());
        c.insert(2, 20, Duration::ZERO, Instant::now());
        assert_eq!(c.get(&1, Instant::now()), Some(10));
        assert_eq!(c.get(&2, Instant::now()), None, "a zero TTL caches nothing");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(c.get(&1, Instant::now()), None);
    }

    #[test]
    fn extra_keys_are_unescaped() {
        assert_eq!(unescape_extra_key("a%2fb"), "a/b");
        assert_eq!(unescape_extra_key("plain"), "plain");
        assert_eq!(unescape_extra_key("bad%zz"), "bad%zz");
        assert_eq!(unescape_extra_key("end%2"), "end%2");
    }
}
