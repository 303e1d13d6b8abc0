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

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::HeaderMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use rustls::DistinguishedName;
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use tokio::time::Instant;

use crate::cli::Cli;

pub const ANONYMOUS_USER: &str = "system:anonymous";
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// Upstream's `AlwaysAllowGroups` default: the API server's own superusers.
pub const PRIVILEGED_GROUP: &str = "system:masters";
const AUTH_CONFIGMAP_NAMESPACE: &str = "kube-system";
const AUTH_CONFIGMAP: &str = "extension-apiserver-authentication";
/// Upstream's delegated clients: high limits, since they bound how fast we can answer.
const DELEGATED_QPS: f32 = 200.0;
const DELEGATED_BURST: u32 = 400;
/// Upstream `ClientTimeout` of the delegated authentication and authorization clients.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Entries a review cache keeps before it drops expired ones (and, if still full, all).
const CACHE_CAPACITY: usize = 4096;

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
    fn with_authenticated_group(mut self) -> Self {
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

// ---------------------------------------------------------------------------------------------
// A small expiring cache
// ---------------------------------------------------------------------------------------------

/// Answers kept until their own deadline. Bounded: when full, expired entries go; if it is
/// still full, everything goes (a storm of distinct keys must not grow memory).
struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K, now: Instant) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(_, deadline)| *deadline > now)
            .map(|(v, _)| v.clone())
    }

    fn insert(&self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_CAPACITY {
            entries.retain(|_, (_, deadline)| *deadline > now);
            if entries.len() >= CACHE_CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (value, now + ttl));
    }
}

// ---------------------------------------------------------------------------------------------
// Certificates
// ---------------------------------------------------------------------------------------------

/// A CA bundle and the verifier of client certificates it signs.
#[derive(Clone)]
pub struct CaBundle {
    verifier: Arc<dyn ClientCertVerifier>,
    subjects: Vec<DistinguishedName>,
}

impl CaBundle {
    fn from_pem(what: &str, pem: &[u8]) -> Result<Self, AuthError> {
        let bad = |reason: String| AuthError::BadCa {
            what: what.to_owned(),
            reason,
        };
        let certs = rustls_pemfile::certs(&mut &pem[..])
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(e.to_string()))?;
        if certs.is_empty() {
            return Err(bad("no certificate found".to_owned()));
        }
        let mut roots = RootCertStore::empty();
        for cert in certs {
            roots.add(cert).map_err(|e| bad(e.to_string()))?;
        }
        let subjects = roots.subjects();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Self { verifier, subjects })
    }

    fn from_file(path: &Path) -> Result<Self, AuthError> {
        let pem = std::fs::read(path).map_err(|source| AuthError::ReadCa {
            path: path.to_owned(),
            source,
        })?;
        Self::from_pem(&path.display().to_string(), &pem)
    }

    /// Verifies a presented chain (leaf first) for client authentication.
    fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain
            .split_first()
            .ok_or_else(|| "no client certificate".to_owned())?;
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| format!("verifying certificate: {e}"))
    }
}

/// Common name and organizations of a certificate's subject.
pub fn subject_names(cert: &CertificateDer<'_>) -> Result<(String, Vec<String>), String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("parsing certificate: {e}"))?;
    let subject = parsed.subject();
    let cn = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .unwrap_or("")
        .to_owned();
    let orgs = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_owned)
        .collect();
    Ok((cn, orgs))
}

// ---------------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------------

/// Request-header authentication (`--requestheader-*`).
#[derive(Clone)]
pub struct RequestHeaderConfig {
    pub ca: CaBundle,
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name.trim())
        .iter()
        .filter_map(|v| v.to_str().ok())
}

/// Upstream `unescapeExtraKey`: extra keys travel percent-encoded in header names.
fn unescape_extra_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl RequestHeaderConfig {
    /// `Ok(None)`: not a request-header request (no certificate, or no user header).
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        chain: Option<&[CertificateDer<'static>]>,
    ) -> Result<Option<UserInfo>, String> {
        let Some(chain) = chain.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        self.ca.verify(chain)?;
        if !self.allowed_names.is_empty() {
            let (cn, _) = subject_names(&chain[0])?;
            if !self.allowed_names.contains(&cn) {
                return Err(format!(
                    "x509: subject with cn={cn} is not in the allowed list"
                ));
            }
        }
        let first = |names: &[String]| {
            names
                .iter()
                .find_map(|h| header_values(headers, h).find(|v| !v.is_empty()))
                .map(str::to_owned)
        };
        let Some(name) = first(&self.username_headers) else {
            return Ok(None);
        };
        let uid = first(&self.uid_headers).unwrap_or_default();
        let groups = self
            .group_headers
            .iter()
            .flat_map(|h| header_values(headers, h))
            .map(str::to_owned)
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            let lower = header.as_str().to_ascii_lowercase();
            for prefix in &self.extra_prefixes {
                let prefix = prefix.trim().to_ascii_lowercase();
                if let Some(key) = lower.strip_prefix(&prefix)
                    && let Ok(v) = value.to_str()
                {
                    extra
                        .entry(unescape_extra_key(key))
                        .or_default()
                        .push(v.to_owned());
                }
            }
        }
        Ok(Some(UserInfo {
            name,
            uid,
            groups,
            extra,
        }))
    }
}

/// The bearer token of `Authorization: Bearer <token>`, as upstream's `bearertoken` reads it.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let auth = headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let mut parts = auth.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Token authentication through the TokenReview API, with upstream's cache.
struct TokenReviewer {
    client: kube::Client,
    ttl: Duration,
    key: ring::hmac::Key,
    cache: TtlCache<Vec<u8>, Option<UserInfo>>,
}

impl TokenReviewer {
    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let key = ring::hmac::sign(&self.key, token.as_bytes())
            .as_ref()
            .to_vec();
        if let Some(cached) = self.cache.get(&key, Instant::now()) {
            return Ok(cached);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| "token review timed out".to_owned())?
                .map_err(|e| format!("token review: {e}"))?;
        let status = answer.status.unwrap_or_default();
        let user = if status.authenticated == Some(true) {
            let u = status.user.unwrap_or_default();
            Some(UserInfo {
                name: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default(),
            })
        } else {
            None
        };
        self.cache
            .insert(key, user.clone(), self.ttl, Instant::now());
        Ok(user)
    }
}

/// Upstream's delegating authenticator with anonymous requests enabled.
#[derive(Clone, Default)]
pub struct Authenticator {
    request_header: Option<RequestHeaderConfig>,
    client_ca: Option<CaBundle>,
    tokens: Option<Arc<TokenReviewer>>,
}

impl Authenticator {
    /// Subjects to hint in the TLS certificate request; `None` when client certificates are
    /// not used at all (then none is requested).
    pub fn client_cert_hints(&self) -> Option<Vec<DistinguishedName>> {
        if self.request_header.is_none() && self.client_ca.is_none() {
            return None;
        }
        let mut out = Vec::new();
        for ca in self
            .request_header
            .iter()
            .map(|r| &r.ca)
            .chain(&self.client_ca)
        {
            out.extend(ca.subjects.iter().cloned());
        }
        Some(out)
    }

    /// The user of a request, or `Err` (401) when a credential was presented and failed.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        chain: Option<&[CertificateDer<'static>]>,
    ) -> Result<UserInfo, String> {
        let mut errors = Vec::new();
        if let Some(rh) = &self.request_header {
            match rh.authenticate(headers, chain) {
                Ok(Some(user)) => return Ok(user.with_authenticated_group()),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if let Some(ca) = &self.client_ca
            && let Some(chain) = chain.filter(|c| !c.is_empty())
        {
            match ca.verify(chain).and_then(|()| subject_names(&chain[0])) {
                // Upstream's CommonNameUserConversion: no common name, no user.
                Ok((cn, _)) if cn.is_empty() => {}
                Ok((cn, orgs)) => {
                    return Ok(UserInfo {
                        name: cn,
                        groups: orgs,
                        ..UserInfo::default()
                    }
                    .with_authenticated_group());
                }
                Err(e) => errors.push(e),
            }
        }
        if let Some(tokens) = &self.tokens
            && let Some(token) = bearer_token(headers)
        {
            match tokens.authenticate(token).await {
                Ok(Some(user)) => return Ok(user.with_authenticated_group()),
                Ok(None) => errors.push("invalid bearer token".to_owned()),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(UserInfo::anonymous())
        } else {
            Err(errors.join(", "))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Authorization
// ---------------------------------------------------------------------------------------------

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
struct SarKey {
    user: UserInfo,
    verb: String,
    path: String,
}

struct SubjectAccessReviewer {
    client: kube::Client,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: TtlCache<SarKey, Decision>,
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
    groups: Vec<String>,
    paths: AllowPaths,
    reviewer: Option<Arc<SubjectAccessReviewer>>,
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
