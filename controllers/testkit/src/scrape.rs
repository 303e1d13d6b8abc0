//! Reading a manager's HTTPS endpoints (`/metrics`, `/healthz`) from tests and the fault
//! suite: one HTTP/1.1 GET over TLS to `127.0.0.1:<port>`, with a verifier that accepts the
//! self-signed serving certificate rkcm (and kube-controller-manager) make for themselves, and
//! the parser of the `rkcm_tracked_entries` gauge.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

/// Accepts any server certificate (rkcm's default one is self-signed) but still checks the
/// handshake signatures.
#[derive(Debug)]
pub struct AcceptAnyCert(Arc<rustls::crypto::CryptoProvider>);

impl AcceptAnyCert {
    pub fn new() -> Self {
        Self(Arc::new(rustls::crypto::ring::default_provider()))
    }
}

impl Default for AcceptAnyCert {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS client trusting the servers `verifier` accepts, without a client certificate.
pub fn client_config(
    verifier: Arc<dyn ServerCertVerifier>,
) -> anyhow::Result<rustls::ClientConfig> {
    Ok(client_builder(verifier)?.with_no_client_auth())
}

/// A TLS client trusting the servers `verifier` accepts, presenting `cert` (key `key`).
pub fn cert_client_config(
    verifier: Arc<dyn ServerCertVerifier>,
    cert: &CertificateDer<'static>,
    key: &PrivateKeyDer<'static>,
) -> anyhow::Result<rustls::ClientConfig> {
    Ok(client_builder(verifier)?.with_client_auth_cert(vec![cert.clone()], key.clone_key())?)
}

/// A TLS client on the ring provider and the default protocol versions, trusting the
/// servers `verifier` accepts; the client certificate is still to choose.
fn client_builder(
    verifier: Arc<dyn ServerCertVerifier>,
) -> anyhow::Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>> {
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .dangerous()
    .with_custom_certificate_verifier(verifier))
}

/// One HTTP/1.1 GET over TLS to `127.0.0.1:port` (SNI `localhost`), `Connection: close`.
pub async fn https_get(
    port: u16,
    path: &str,
    verifier: Arc<dyn ServerCertVerifier>,
) -> anyhow::Result<HttpResponse> {
    https_get_with(port, path, client_config(verifier)?).await
}

pub async fn https_get_with(
    port: u16,
    path: &str,
    config: rustls::ClientConfig,
) -> anyhow::Result<HttpResponse> {
    https_request(port, path, &[], config).await
}

/// One HTTP/1.1 GET with extra `headers` (`Name: value` lines) over TLS with `config`, to
/// `127.0.0.1:port`.
pub async fn https_request(
    port: u16,
    path: &str,
    headers: &[String],
    config: rustls::ClientConfig,
) -> anyhow::Result<HttpResponse> {
    https_request_to("127.0.0.1", port, path, headers, config).await
}

/// [`https_request`] to `host:port` (an IP address, e.g. a pod's).
pub async fn https_request_to(
    host: &str,
    port: u16,
    path: &str,
    headers: &[String],
    config: rustls::ClientConfig,
) -> anyhow::Result<HttpResponse> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect((host, port)).await?;
        let mut tls = connector
            .connect(ServerName::try_from("localhost")?.to_owned(), tcp)
            .await?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\n{extra}Connection: close\r\n\r\n"
        );
        tls.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        match tls.read_to_end(&mut raw).await {
            Ok(_) => {}
            // A peer that closes without close_notify still delivered the whole response.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
            Err(e) => return Err(e.into()),
        }
        anyhow::Ok(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .context("HTTPS request timed out")??;
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> anyhow::Result<HttpResponse> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").context("no end of headers")?;
    let mut lines = head.lines();
    let status_line = lines.next().context("empty response")?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let mut content_type = String::new();
    let mut chunked = false;
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-type" {
                content_type = v.to_owned();
            }
            if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Ok(HttpResponse {
        status,
        content_type,
        body,
    })
}

fn dechunk(mut s: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").context("bad chunk header")?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(rest.get(..size).context("short chunk")?);
        s = rest.get(size + 2..).context("short chunk trailer")?;
    }
}

/// A port nobody listens on right now (the OS picks it; tiny race until a manager binds it).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `/metrics` of the process serving on `127.0.0.1:port`, without credentials (the process
/// must allow the path: `--authorization-always-allow-paths`).
pub async fn metrics(port: u16) -> anyhow::Result<String> {
    let r = https_get(port, "/metrics", Arc::new(AcceptAnyCert::new())).await?;
    if r.status != 200 {
        anyhow::bail!("/metrics answered {}: {}", r.status, r.body);
    }
    Ok(r.body)
}

/// `(controller, map, bound)` of one `rkcm_tracked_entries` series.
pub type TrackedSeries = (String, String, String);

/// The `rkcm_tracked_entries` samples of a `/metrics` text.
pub fn tracked_entries(metrics: &str) -> BTreeMap<TrackedSeries, f64> {
    let mut out = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("rkcm_tracked_entries{") else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        let mut get = BTreeMap::new();
        for pair in labels.split(',') {
            if let Some((k, v)) = pair.split_once('=') {
                get.insert(k, v.trim_matches('"'));
            }
        }
        let label = |k: &str| get.get(k).copied().unwrap_or_default().to_owned();
        if let Ok(v) = value.trim().parse() {
            out.insert((label("controller"), label("map"), label("bound")), v);
        }
    }
    out
}

/// The sum of the entries of `bound` (`object`, `time` or `capacity`).
pub fn tracked_total(samples: &BTreeMap<TrackedSeries, f64>, bound: &str) -> f64 {
    samples
        .iter()
        .filter(|((_, _, b), _)| b == bound)
        .map(|(_, v)| v)
        .sum()
}

/// The series of `bound` with a non-zero value, as `controller/map=value`.
pub fn tracked_nonzero(samples: &BTreeMap<TrackedSeries, f64>, bound: &str) -> Vec<String> {
    samples
        .iter()
        .filter(|((_, _, b), v)| b == bound && **v != 0.0)
        .map(|((c, m, _), v)| format!("{c}/{m}={v}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracked_series_are_read_from_the_metrics_text() {
        let text = "# TYPE rkcm_tracked_entries gauge\n\
                    rkcm_tracked_entries{bound=\"object\",controller=\"job-controller\",map=\"expectations\"} 3\n\
                    rkcm_tracked_entries{bound=\"capacity\",controller=\"job-controller\",map=\"events_logs\"} 40\n\
                    rkcm_tracked_entries{bound=\"time\",controller=\"job\",map=\"queue_waiting\"} 0\n\
                    workqueue_depth{name=\"job\"} 4\n";
        let samples = tracked_entries(text);
        assert_eq!(samples.len(), 3);
        assert_eq!(
            tracked_nonzero(&samples, "object"),
            vec!["job-controller/expectations=3"]
        );
        assert!(tracked_nonzero(&samples, "time").is_empty());
        assert_eq!(tracked_total(&samples, "capacity"), 40.0);
    }

    #[test]
    fn parses_plain_and_chunked_responses() -> anyhow::Result<()> {
        let r = parse_response(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n\r\n[-]x failed\n",
        )?;
        assert_eq!(
            (r.status, r.content_type.as_str(), r.body.as_str()),
            (500, "text/plain", "[-]x failed\n")
        );
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )?;
        assert_eq!(r.body, "abcde");
        Ok(())
    }
}
