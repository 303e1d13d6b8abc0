//! [`TlsFront`]: a TLS terminator on a loopback port in front of a plain-HTTP endpoint (a
//! [`crate::ScopedProxy`]), serving a certificate from a CA the test made ([`TestCa`]), which
//! the test can switch to one from another CA ([`TlsFront::rotate`]) as an API server's
//! certificate changes when the cluster's CA rotates. The shared plane's own CA is never
//! touched. Bytes pass through unchanged after the handshake.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use parking_lot::Mutex;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

/// A private CA issuing serving and client certificates.
pub struct TestCa {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    /// A new self-signed CA named `cn`.
    pub fn new(cn: &str) -> anyhow::Result<Self> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Self {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        })
    }

    /// The CA certificate (PEM), what a client's `certificate-authority` file holds.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// Writes the CA certificate (PEM) to `path`.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        std::fs::write(path, &self.pem).with_context(|| format!("writing {}", path.display()))
    }

    /// A client certificate and key for `cn` (group `org`, if given), signed by this CA.
    pub fn client(
        &self,
        cn: &str,
        org: Option<&str>,
    ) -> anyhow::Result<(CertificateDer<'static>, PrivateKeyDer<'static>)> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        if let Some(o) = org {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, o);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((
            cert.der().clone(),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        ))
    }

    /// A serving certificate for `127.0.0.1` and `localhost`, signed by this CA.
    fn serving(&self) -> anyhow::Result<Arc<CertifiedKey>> {
        let mut params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "rkcm-test-front");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let key = rcgen::KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signer = rustls::crypto::ring::sign::any_supported_type(&der)
            .context("loading the serving key")?;
        Ok(Arc::new(CertifiedKey::new(
            vec![CertificateDer::from(cert.der().to_vec())],
            signer,
        )))
    }
}

/// The certificate in use, switched by [`TlsFront::rotate`].
#[derive(Debug)]
struct Current(Mutex<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.lock().clone())
    }
}

/// A TLS terminator forwarding to a plain-HTTP upstream; stopped when dropped.
pub struct TlsFront {
    addr: SocketAddr,
    current: Arc<Current>,
    /// Cancelled on rotation: ends every connection made with the old certificate.
    generation: Arc<Mutex<CancellationToken>>,
    stop: CancellationToken,
}

impl TlsFront {
    /// Serves on a loopback port with a certificate from `ca`, forwarding to `upstream`
    /// (`http://host:port`).
    pub async fn start(upstream: &str, ca: &TestCa) -> anyhow::Result<Self> {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .with_context(|| format!("upstream {upstream:?} is not http://host:port"))?;
        let current = Arc::new(Current(Mutex::new(ca.serving()?)));
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(current.clone());
        // No session resumption: a resumed session skips the certificate check, and a server
        // whose certificate changed (restarted) has no sessions to resume either.
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the TLS front's port")?;
        let addr = listener.local_addr()?;
        let generation = Arc::new(Mutex::new(CancellationToken::new()));
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(
            listener,
            acceptor,
            upstream,
            generation.clone(),
            stop.clone(),
        ));
        Ok(Self {
            addr,
            current,
            generation,
            stop,
        })
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Serves a certificate from `ca` from now on and closes every open connection, so
    /// clients must handshake (and verify) again.
    pub fn rotate(&self, ca: &TestCa) -> anyhow::Result<()> {
        *self.current.0.lock() = ca.serving()?;
        let old = std::mem::take(&mut *self.generation.lock());
        old.cancel();
        Ok(())
    }

    /// Writes a kubeconfig for this front whose CA is read from `ca_file`, in `namespace`
    /// and without credentials (the proxy behind adds its own).
    pub fn write_kubeconfig(
        &self,
        path: &Path,
        ca_file: &Path,
        namespace: &str,
    ) -> anyhow::Result<()> {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: front\n  cluster: {{server: \
             \"{}\", certificate-authority: \"{}\"}}\nusers:\n- name: front\n  user: {{}}\n\
             contexts:\n- name: front\n  context: {{cluster: front, user: front, namespace: \
             \"{namespace}\"}}\ncurrent-context: front\n",
            self.url(),
            ca_file.display()
        );
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.stop.cancel();
        self.generation.lock().cancel();
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    upstream: SocketAddr,
    generation: Arc<Mutex<CancellationToken>>,
    stop: CancellationToken,
) {
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::debug!(%error, "TLS front: accept failed");
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let ended = generation.lock().clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = ended.cancelled() => {}
                result = forward(stream, acceptor, upstream) => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "TLS front: connection ended");
                    }
                }
            }
        });
    }
}

async fn forward(
    stream: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    upstream: SocketAddr,
) -> anyhow::Result<()> {
    let mut tls = acceptor.accept(stream).await.context("TLS handshake")?;
    let mut plain = tokio::net::TcpStream::connect(upstream)
        .await
        .context("connecting upstream")?;
    tokio::io::copy_bidirectional(&mut tls, &mut plain).await?;
    Ok(())
}
