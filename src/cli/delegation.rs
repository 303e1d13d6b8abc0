//! Delegated authentication and authorization of the serving endpoints: upstream's
//! `DelegatingAuthenticationOptions` and `DelegatingAuthorizationOptions`
//! (k8s.io/apiserver `pkg/server/options/authentication.go`, `authorization.go`) with the
//! names and defaults kube-controller-manager registers (`cmd/kube-controller-manager/app/
//! options/options.go`: both kubeconfigs optional, `/healthz,/readyz,/livez` always allowed).

use std::path::PathBuf;

use clap::{ArgAction, Args};

use super::duration::{GoDuration, parse_duration};
use super::generic::parse_go_bool;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Authentication flags")]
pub struct AuthenticationFlags {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create
    /// tokenreviews.authentication.k8s.io. Optional: when empty the in-cluster config is
    /// used, and without one bearer tokens are not accepted.
    #[arg(long, value_name = "string")]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// If false, the authentication-kubeconfig will be used to lookup missing authentication
    /// configuration from the cluster (the kube-system/extension-apiserver-authentication
    /// ConfigMap).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub authentication_skip_lookup: bool,

    /// The duration to cache responses from the webhook token authenticator.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "duration")]
    pub authentication_token_webhook_cache_ttl: GoDuration,

    /// If true, failures to look up missing authentication configuration from the cluster
    /// are not considered fatal. Note that this can result in authentication that treats
    /// all requests as anonymous.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub authentication_tolerate_lookup_failure: bool,

    /// If set, any request presenting a client certificate signed by one of the authorities
    /// in the client-ca-file is authenticated with an identity corresponding to the
    /// CommonName of the client certificate.
    #[arg(long, default_value = "", value_name = "string")]
    pub client_ca_file: String,

    /// Root certificate bundle to use to verify client certificates on incoming requests
    /// before trusting usernames in headers specified by --requestheader-username-headers.
    /// WARNING: generally do not depend on authorization being already done for incoming
    /// requests.
    #[arg(long, default_value = "", value_name = "string")]
    pub requestheader_client_ca_file: String,

    /// List of client certificate common names to allow to provide usernames in headers
    /// specified by --requestheader-username-headers. If empty, any client certificate
    /// validated by the authorities in --requestheader-client-ca-file is allowed.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, value_name = "strings")]
    pub requestheader_allowed_names: Vec<String>,

    /// List of request header prefixes to inspect. X-Remote-Extra- is suggested.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append,
          default_value = "x-remote-extra-", value_name = "strings")]
    pub requestheader_extra_headers_prefix: Vec<String>,

    /// List of request headers to inspect for groups. X-Remote-Group is suggested.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append,
          default_value = "x-remote-group", value_name = "strings")]
    pub requestheader_group_headers: Vec<String>,

    /// List of request headers to inspect for UIDs. X-Remote-Uid is suggested.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append, value_name = "strings")]
    pub requestheader_uid_headers: Vec<String>,

    /// List of request headers to inspect for usernames. X-Remote-User is common.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append,
          default_value = "x-remote-user", value_name = "strings")]
    pub requestheader_username_headers: Vec<String>,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Authorization flags")]
pub struct AuthorizationFlags {
    /// A list of HTTP paths to skip during authorization, i.e. these are authorized without
    /// contacting the 'core' kubernetes server. A trailing '*' matches every path with that
    /// prefix.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append,
          default_value = "/healthz,/readyz,/livez", value_name = "strings")]
    pub authorization_always_allow_paths: Vec<String>,

    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create
    /// subjectaccessreviews.authorization.k8s.io. Optional: when empty the in-cluster config
    /// is used, and without one every request outside the always-allowed paths (and the
    /// system:masters group) is forbidden.
    #[arg(long, value_name = "string")]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// The duration to cache 'authorized' responses from the webhook authorizer.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "duration")]
    pub authorization_webhook_cache_authorized_ttl: GoDuration,

    /// The duration to cache 'unauthorized' responses from the webhook authorizer.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "duration")]
    pub authorization_webhook_cache_unauthorized_ttl: GoDuration,
}

/// Go's TLS cipher suite names as `--tls-cipher-suites` accepts them (k8s.io/component-base
/// `cli/flag/ciphersuites_flag.go`), with the suite rkcm's TLS stack offers for each, if any.
/// TLS 1.3 suites are listed but, as in Go, not configurable: TLS 1.3 always offers all.
pub const CIPHER_SUITES: &[(&str, Option<rustls::CipherSuite>)] = {
    use rustls::CipherSuite as C;
    &[
        ("TLS_AES_128_GCM_SHA256", None),
        ("TLS_AES_256_GCM_SHA384", None),
        ("TLS_CHACHA20_POLY1305_SHA256", None),
        ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", None),
        (
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            Some(C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
        ),
        ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", None),
        (
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            Some(C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
            Some(C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            Some(C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
        ),
        ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", None),
        (
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            Some(C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
        ),
        ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", None),
        (
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            Some(C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
        ),
        (
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
            Some(C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
        ),
        (
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            Some(C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
        ),
        ("TLS_RSA_WITH_AES_128_CBC_SHA", None),
        ("TLS_RSA_WITH_AES_128_GCM_SHA256", None),
        ("TLS_RSA_WITH_AES_256_CBC_SHA", None),
        ("TLS_RSA_WITH_AES_256_GCM_SHA384", None),
        // Go's insecure list, still accepted by the flag.
        ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", None),
        ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", None),
        ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", None),
        ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", None),
        ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", None),
        ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", None),
        ("TLS_RSA_WITH_AES_128_CBC_SHA256", None),
        ("TLS_RSA_WITH_RC4_128_SHA", None),
    ]
};

/// The TLS 1.2 suites to offer for `--tls-cipher-suites`; `Err` names an unknown suite with
/// upstream's message. An empty result means "the defaults".
pub fn tls12_suites(names: &[String]) -> Result<Vec<rustls::CipherSuite>, String> {
    let mut out = Vec::new();
    for name in names.iter().filter(|n| !n.is_empty()) {
        match CIPHER_SUITES.iter().find(|(n, _)| n == name) {
            None => {
                return Err(format!(
                    "Cipher suite {name} not supported or doesn't exist"
                ));
            }
            Some((_, Some(suite))) if !out.contains(suite) => out.push(*suite),
            Some(_) => {}
        }
    }
    Ok(out)
}

/// `--tls-min-version`: whether TLS 1.2 is still offered. `Err` for names Go does not know.
pub fn allows_tls12(min_version: Option<&str>) -> Result<bool, String> {
    match min_version.unwrap_or("") {
        "" | "VersionTLS10" | "VersionTLS11" | "VersionTLS12" => Ok(true),
        "VersionTLS13" => Ok(false),
        other => Err(format!(
            "unknown tls version {other:?} for --tls-min-version"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cipher_suites() {
        assert_eq!(tls12_suites(&[]), Ok(vec![]));
        assert_eq!(
            tls12_suites(&[
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(),
                "TLS_RSA_WITH_AES_128_CBC_SHA".into(),
                "TLS_AES_128_GCM_SHA256".into(),
            ]),
            Ok(vec![
                rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            ])
        );
        assert_eq!(
            tls12_suites(&["TLS_NOPE".into()]),
            Err("Cipher suite TLS_NOPE not supported or doesn't exist".into())
        );
    }

    #[test]
    fn min_versions() {
        assert_eq!(allows_tls12(None), Ok(true));
        assert_eq!(allows_tls12(Some("VersionTLS10")), Ok(true));
        assert_eq!(allows_tls12(Some("VersionTLS13")), Ok(false));
        assert!(allows_tls12(Some("TLS1.3")).is_err());
    }
}
