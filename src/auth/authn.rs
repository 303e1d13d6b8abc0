//! Authentication: client certificates against a CA bundle, the request-header authenticator,
//! and bearer tokens reviewed (and cached) by the `--authentication-kubeconfig` cluster.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use rustls::DistinguishedName;
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use tokio::time::Instant;

use super::error::AuthError;
use super::identity::UserInfo;
use super::review::{REVIEW_TIMEOUT, TtlCache};

/// A CA bundle and the verifier of client certificates it signs.
#[derive(Clone)]
pub struct CaBundle {
    verifier: Arc<dyn ClientCertVerifier>,
    subjects: Vec<DistinguishedName>,
}

impl CaBundle {
    pub(super) fn from_pem(what: &str, pem: &[u8]) -> Result<Self, AuthError> {
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

    pub(super) fn from_file(path: &Path) -> Result<Self, AuthError> {
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
pub(super) fn unescape_extra_key(key: &str) -> String {
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
pub(super) struct TokenReviewer {
    pub(super) client: kube::Client,
    pub(super) ttl: Duration,
    pub(super) key: ring::hmac::Key,
    pub(super) cache: TtlCache<Vec<u8>, Option<UserInfo>>,
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
    pub(super) request_header: Option<RequestHeaderConfig>,
    pub(super) client_ca: Option<CaBundle>,
    pub(super) tokens: Option<Arc<TokenReviewer>>,
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
