//! The TLS side of serving: the configured or self-signed certificate pair, client certificates
//! requested (not required) for the authenticator, and the TLS version and suites the flags allow.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use super::config::{ServeConfig, ServeError};

/// Upstream's name of the self-signed pair in `--cert-dir`.
const SELF_SIGNED_PAIR: &str = "kube-controller-manager";

fn read(path: &Path) -> Result<Vec<u8>, ServeError> {
    std::fs::read(path).map_err(|source| ServeError::ReadTls {
        path: path.to_owned(),
        source,
    })
}

fn parse_pair(
    cert_path: &Path,
    cert_pem: &[u8],
    key_path: &Path,
    key_pem: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ServeError> {
    let certs = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ServeError::ReadTls {
            path: cert_path.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(ServeError::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let key = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|source| ServeError::ReadTls {
            path: key_path.to_owned(),
            source,
        })?
        .ok_or_else(|| ServeError::NoPrivateKey {
            path: key_path.to_owned(),
        })?;
    Ok((certs, key))
}

/// The certificate chain and key: from the PEM files, from `--cert-dir` (generated there
/// when missing, as upstream's `MaybeDefaultWithSelfSignedCerts`), or a fresh in-memory
/// self-signed pair.
pub(super) fn load_identity(
    cfg: &ServeConfig,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ServeError> {
    match (&cfg.tls_cert_file, &cfg.tls_private_key_file) {
        (Some(cert_path), Some(key_path)) => {
            parse_pair(cert_path, &read(cert_path)?, key_path, &read(key_path)?)
        }
        (None, None) if !cfg.cert_dir.is_empty() => {
            let dir = Path::new(&cfg.cert_dir);
            let cert_path = dir.join(format!("{SELF_SIGNED_PAIR}.crt"));
            let key_path = dir.join(format!("{SELF_SIGNED_PAIR}.key"));
            if cert_path.exists() && key_path.exists() {
                return parse_pair(&cert_path, &read(&cert_path)?, &key_path, &read(&key_path)?);
            }
            let (cert_pem, key_pem) = self_signed_pem()?;
            let write = |path: &Path, data: &str| {
                std::fs::create_dir_all(dir)
                    .and_then(|()| std::fs::write(path, data))
                    .map_err(|source| ServeError::ReadTls {
                        path: path.to_owned(),
                        source,
                    })
            };
            write(&cert_path, &cert_pem)?;
            write(&key_path, &key_pem)?;
            tracing::info!(cert = %cert_path.display(), "generated self-signed serving certificate");
            parse_pair(
                &cert_path,
                cert_pem.as_bytes(),
                &key_path,
                key_pem.as_bytes(),
            )
        }
        (None, None) => {
            let (cert_pem, key_pem) = self_signed_pem()?;
            parse_pair(
                Path::new("self-signed"),
                cert_pem.as_bytes(),
                Path::new("self-signed"),
                key_pem.as_bytes(),
            )
        }
        _ => Err(ServeError::IncompleteTlsPair),
    }
}

/// A self-signed serving pair as PEM (certificate, key).
fn self_signed_pem() -> Result<(String, String), ServeError> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    // A hostname that is not a valid DNS name would make rcgen reject the whole request;
    // the certificate is self-signed and unverifiable anyway, so just leave it out.
    if !host.is_empty()
        && host != "localhost"
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        names.push(host);
    }
    let mut params = rcgen::CertificateParams::new(names)?;
    // Upstream names the self-signed pair `localhost@<unix seconds>`.
    let now = jiff::Timestamp::now().as_second();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("localhost@{now}"));
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Requests a client certificate without requiring or judging it (Go's
/// `tls.RequestClientCert`): the authenticator verifies it against the right CA per request.
/// Handshake signatures are still checked, so a client cannot present a certificate whose
/// key it does not hold.
#[derive(Debug)]
struct RequestClientCert {
    hints: Vec<rustls::DistinguishedName>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::server::danger::ClientCertVerifier for RequestClientCert {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &self.hints
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

pub(super) fn tls_acceptor(
    cfg: &ServeConfig,
    client_cert_hints: Option<Vec<rustls::DistinguishedName>>,
) -> Result<TlsAcceptor, ServeError> {
    let (certs, key) = load_identity(cfg)?;
    // An explicit provider: the process-wide default may be unset (or ambiguous if another
    // crate enables a second provider).
    let mut provider = rustls::crypto::ring::default_provider();
    let tls12 =
        crate::cli::allows_tls12(cfg.tls_min_version.as_deref()).map_err(ServeError::TlsFlags)?;
    let wanted = crate::cli::tls12_suites(&cfg.tls_cipher_suites).map_err(ServeError::TlsFlags)?;
    if !cfg.tls_cipher_suites.is_empty() {
        if wanted.is_empty() && tls12 {
            return Err(ServeError::TlsFlags(
                "--tls-cipher-suites names no TLS 1.2 suite this server implements".to_owned(),
            ));
        }
        provider.cipher_suites.retain(|s| match s {
            rustls::SupportedCipherSuite::Tls13(_) => true,
            rustls::SupportedCipherSuite::Tls12(_) => wanted.contains(&s.suite()),
        });
    }
    let provider = Arc::new(provider);
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13]
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)?;
    let builder = match client_cert_hints {
        Some(hints) => {
            builder.with_client_cert_verifier(Arc::new(RequestClientCert { hints, provider }))
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
