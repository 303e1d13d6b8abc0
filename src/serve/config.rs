//! What the caller asks for ([`ServeConfig`]) and what can fail while serving starts.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// Errors of [`start`](super::start): each names the step and the file or address involved.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("reading TLS file {path}: {source}")]
    ReadTls {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no certificate found in {path}")]
    NoCertificate { path: PathBuf },
    #[error("no private key found in {path}")]
    NoPrivateKey { path: PathBuf },
    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    IncompleteTlsPair,
    #[error("generating self-signed serving certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    #[error("building TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("{0}")]
    TlsFlags(String),
    #[error("listening on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Where and how to serve. `secure_port == 0` disables serving entirely.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub bind_address: IpAddr,
    pub secure_port: u16,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    /// `--cert-dir`: where the self-signed pair is kept; empty keeps it in memory.
    pub cert_dir: String,
    /// `--tls-min-version`.
    pub tls_min_version: Option<String>,
    /// `--tls-cipher-suites` (Go names).
    pub tls_cipher_suites: Vec<String>,
    /// The body of `/configz` (JSON).
    pub configz: String,
    /// `/flagz` and `/statusz`, each present when its gate is on.
    pub zpages: super::Zpages,
}
