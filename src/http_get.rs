//! A minimal HTTP/1.0 GET for the CLI subcommands that ask the running service (`sweeper status`,
//! `sweeper graph`): plain http, or https with a bearer token, on the service's own port only; no
//! client crate needed for that.

use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

#[derive(Debug, thiserror::Error)]
pub enum GetError {
    #[error("{0}: only http://host:port and https://host:port URLs are supported")]
    BadUrl(String),
    #[error("cannot reach {url}: {source} (is `sweeper run` serving there? see --server)")]
    Io { url: String, source: std::io::Error },
    #[error("{url}: malformed HTTP response")]
    Malformed { url: String },
    #[error(
        "{url}: cannot verify the service's certificate: give --certificate-authority (the CA of \
         --http-tls-cert-file), or --insecure-skip-tls-verify for its self-signed one"
    )]
    NoTrust { url: String },
    #[error("cannot read {path}: {source}")]
    File {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: no PEM certificate in it")]
    BadCa { path: std::path::PathBuf },
}

/// How the CLI reaches the service's port: the token it sends and how it trusts the certificate.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Credentials {
    /// Bearer token for the service's /status, /metrics and /graph (e.g. `kubectl create token`
    /// of a service account bound to the sweeper-metrics-reader ClusterRole).
    #[arg(long, env = "SWEEPER_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// A file holding the bearer token (e.g. a pod's service-account token).
    #[arg(
        long,
        env = "SWEEPER_TOKEN_FILE",
        conflicts_with = "token",
        global = true
    )]
    pub token_file: Option<std::path::PathBuf>,
    /// PEM CA bundle that signed the service's certificate (https only).
    #[arg(long, env = "SWEEPER_CERTIFICATE_AUTHORITY", global = true)]
    pub certificate_authority: Option<std::path::PathBuf>,
    /// Do not verify the service's certificate (its default one is self-signed). The token is
    /// still sent: use it only over a tunnel you trust, such as `kubectl port-forward`.
    #[arg(long, env = "SWEEPER_INSECURE_SKIP_TLS_VERIFY", global = true)]
    pub insecure_skip_tls_verify: bool,
}

impl Credentials {
    fn token(&self) -> Result<Option<String>, GetError> {
        match (&self.token, &self.token_file) {
            (Some(t), _) => Ok(Some(t.trim().to_string())),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map(|t| Some(t.trim().to_string()))
                .map_err(|source| GetError::File {
                    path: path.clone(),
                    source,
                }),
            (None, None) => Ok(None),
        }
    }
}

/// Percent-encodes a query value.
pub fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GETs `url` with nothing but the URL (plain http, or https that cannot verify): the probes,
/// and tests against `--http-insecure`.
pub async fn get(url: &str) -> Result<(u16, String), GetError> {
    get_with(url, &Credentials::default()).await
}

/// GETs `url` as `access` says, returning the status code and body.
pub async fn get_with(url: &str, access: &Credentials) -> Result<(u16, String), GetError> {
    let (tls, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (None, Some(rest)) => (true, rest),
        _ => return Err(GetError::BadUrl(url.to_string())),
    };
    let (host, path) = match rest.split_once('/') {
        Some((h, p)) => (h, format!("/{p}")),
        None => (rest, "/".to_string()),
    };
    let io = |source| GetError::Io {
        url: url.to_string(),
        source,
    };
    let mut request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n");
    if let Some(token) = access.token()? {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    request.push_str("\r\n");
    let tcp = tokio::net::TcpStream::connect(host).await.map_err(io)?;
    let buf = if tls {
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(url, access)?));
        let name = server_name(host).ok_or_else(|| GetError::BadUrl(url.to_string()))?;
        let stream = connector.connect(name, tcp).await.map_err(io)?;
        exchange(stream, &request).await.map_err(io)?
    } else {
        exchange(tcp, &request).await.map_err(io)?
    };
    let text = String::from_utf8_lossy(&buf);
    let malformed = || GetError::Malformed {
        url: url.to_string(),
    };
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(malformed)?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(malformed)?;
    Ok((status, body.to_string()))
}

/// Sends `request` and reads the answer until the server closes. A TLS peer that closes without
/// its close_notify after a whole answer is not an error here: HTTP/1.0 ends at the close.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    request: &str,
) -> std::io::Result<Vec<u8>> {
    s.write_all(request.as_bytes()).await?;
    s.flush().await?;
    let mut buf = Vec::new();
    match s.read_to_end(&mut buf).await {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !buf.is_empty() => Ok(buf),
        r => r.map(|_| buf),
    }
}

fn server_name(host: &str) -> Option<rustls::pki_types::ServerName<'static>> {
    let name = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(name.to_string()).ok()
}

fn client_config(url: &str, access: &Credentials) -> Result<rustls::ClientConfig, GetError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("the aws-lc-rs provider supports the default TLS versions");
    if let Some(path) = &access.certificate_authority {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|_| GetError::BadCa { path: path.clone() })?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(GetError::BadCa { path: path.clone() });
        }
        return Ok(builder.with_root_certificates(roots).with_no_client_auth());
    }
    if !access.insecure_skip_tls_verify {
        return Err(GetError::NoTrust {
            url: url.to_string(),
        });
    }
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(SkipVerify(provider)))
        .with_no_client_auth())
}

/// `--insecure-skip-tls-verify`: any certificate, but the handshake's signatures still checked
/// (so the session is at least with the holder of the certificate's key).
#[derive(Debug)]
struct SkipVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for SkipVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
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
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_reserved_characters() {
        assert_eq!(
            super::encode("apps/v1/Deployment"),
            "apps%2Fv1%2FDeployment"
        );
        assert_eq!(super::encode("a-b.c"), "a-b.c");
    }

    #[test]
    fn server_names_drop_the_port() {
        let n = |h: &str| super::server_name(h).map(|n| n.to_str().into_owned());
        assert_eq!(n("127.0.0.1:8080").as_deref(), Some("127.0.0.1"));
        assert_eq!(
            n("sweeper.sweeper-system.svc:8080").as_deref(),
            Some("sweeper.sweeper-system.svc")
        );
        assert_eq!(n("[::1]:8080").as_deref(), Some("::1"));
    }
}
