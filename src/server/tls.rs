//! The HTTPS side of the HTTP port: the serving certificate and a listener that hands axum
//! finished TLS streams.
//!
//! As controller-runtime's secure metrics server: a certificate and key from files
//! (`--http-tls-cert-file`, `--http-tls-key-file`: a mounted Secret, e.g. cert-manager's), or,
//! when none is given, a self-signed one generated at start (clients then skip verification or
//! pin nothing; the bearer token, not the certificate, is what grants access). A certificate
//! from files is read again when the files change (checked every [`RELOAD_EVERY`]), so a
//! renewal by cert-manager needs no restart, as controller-runtime's certwatcher.

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How often certificate files are checked for a renewal.
pub const RELOAD_EVERY: Duration = Duration::from_secs(60);
/// A client that has not finished its TLS handshake by then is dropped (a slow or silent client
/// never holds up the others: handshakes run in their own tasks).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the HTTPS certificate {path}: {source}")]
    Cert {
        path: PathBuf,
        source: rustls_pki_types::pem::Error,
    },
    #[error("the HTTPS certificate file {0} holds no certificate")]
    NoCert(PathBuf),
    #[error("cannot read the HTTPS private key {path}: {source}")]
    Key {
        path: PathBuf,
        source: rustls_pki_types::pem::Error,
    },
    #[error("the HTTPS private key {path} does not fit rustls: {source}")]
    Unusable {
        path: PathBuf,
        source: rustls::Error,
    },
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum CertSource {
    Files { cert: PathBuf, key: PathBuf },
    SelfSigned,
}

/// The certificate handed to every handshake; swapped in place when its files change.
#[derive(Debug)]
pub struct Certificate {
    current: RwLock<Arc<CertifiedKey>>,
    source: CertSource,
    loaded_at: RwLock<Option<SystemTime>>,
}

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.clone())
    }
}

impl Certificate {
    pub fn load(source: CertSource) -> Result<Arc<Certificate>, TlsError> {
        let (key, mtime) = match &source {
            CertSource::Files { cert, key } => (from_files(cert, key)?, modified(cert, key)),
            CertSource::SelfSigned => (self_signed()?, None),
        };
        Ok(Arc::new(Certificate {
            current: RwLock::new(Arc::new(key)),
            source,
            loaded_at: RwLock::new(mtime),
        }))
    }

    /// Reads the files again if they changed since the last load. A renewal caught half-written
    /// (key and certificate not matching yet) keeps the old certificate until the next check.
    pub fn reload_if_changed(&self) {
        let CertSource::Files { cert, key } = &self.source else {
            return;
        };
        let mtime = modified(cert, key);
        if mtime.is_none() || *self.loaded_at.read().unwrap_or_else(|e| e.into_inner()) == mtime {
            return;
        }
        match from_files(cert, key) {
            Ok(k) if k.keys_match().is_ok() => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(k);
                *self.loaded_at.write().unwrap_or_else(|e| e.into_inner()) = mtime;
                tracing::info!(cert = %cert.display(), "HTTPS certificate reloaded");
            }
            Ok(_) => {
                tracing::warn!(cert = %cert.display(), "HTTPS certificate and key do not match yet; keeping the previous one")
            }
            Err(e) => {
                tracing::warn!(error = %e, "HTTPS certificate not reloaded; keeping the previous one")
            }
        }
    }
}

/// The later modification time of the two files (None if either cannot be read).
fn modified(cert: &Path, key: &Path) -> Option<SystemTime> {
    let m = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    Some(m(cert)?.max(m(key)?))
}

fn from_files(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::Cert {
            path: cert.to_path_buf(),
            source,
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCert(cert.to_path_buf()));
    }
    let der = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Key {
        path: key.to_path_buf(),
        source,
    })?;
    certified(chain, der, key)
}

fn certified(
    chain: Vec<CertificateDer<'static>>,
    der: PrivateKeyDer<'static>,
    key: &Path,
) -> Result<CertifiedKey, TlsError> {
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    CertifiedKey::from_der(chain, der, &provider).map_err(|source| TlsError::Unusable {
        path: key.to_path_buf(),
        source,
    })
}

/// A self-signed certificate for `localhost` and the pod's names, as controller-runtime makes
/// when no certificate is given. Nobody can verify it against a CA: scrapers skip verification.
fn self_signed() -> Result<CertifiedKey, TlsError> {
    let mut names = vec!["localhost".to_string(), "sweeper".to_string()];
    if let Ok(host) = std::env::var("HOSTNAME") {
        names.push(host);
    }
    let rcgen::CertifiedKey { cert, signing_key } = rcgen::generate_simple_self_signed(names)?;
    let der = PrivateKeyDer::try_from(signing_key.serialize_der())
        .map_err(|e| rcgen::Error::PemError(e.to_string()))?;
    tracing::info!("no --http-tls-cert-file: serving HTTPS with a self-signed certificate");
    certified(vec![cert.der().clone()], der, Path::new("(generated)"))
}

/// The rustls configuration: HTTP/1.1 only (axum serves it; Prometheus and the CLI speak it).
pub fn acceptor(cert: Arc<Certificate>) -> TlsAcceptor {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("the aws-lc-rs provider supports the default TLS versions")
    .with_no_client_auth()
    .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// An axum listener whose connections are already through their TLS handshake. A task accepts
/// TCP connections and runs each handshake in a task of its own; failed handshakes are logged
/// at debug (a port scanner is not news) and dropped.
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // As axum's own listener: out of descriptors and the like pass.
                        tracing::warn!(error = %e, "HTTPS accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, sender) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(TlsListener { rx, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept task ended: nothing will come; shutdown ends the server.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// Checks the certificate files for a renewal every [`RELOAD_EVERY`] until `shutdown`.
pub async fn watch(cert: Arc<Certificate>, shutdown: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(RELOAD_EVERY);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => cert.reload_if_changed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificate_is_generated_when_none_is_given() {
        let cert = Certificate::load(CertSource::SelfSigned).unwrap();
        let key = cert.current.read().unwrap().clone();
        assert_eq!(key.cert.len(), 1);
        assert!(key.keys_match().is_ok());
    }

    #[test]
    fn certificate_files_are_read_and_reloaded_when_they_change() {
        let dir = std::env::temp_dir().join(format!("sweeper-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
        let write = |name: &str| {
            let k = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
            std::fs::write(&cert_path, k.cert.pem()).unwrap();
            std::fs::write(&key_path, k.signing_key.serialize_pem()).unwrap();
            k.cert.der().to_vec()
        };
        let first = write("a.example");
        let cert = Certificate::load(CertSource::Files {
            cert: cert_path.clone(),
            key: key_path.clone(),
        })
        .unwrap();
        let served = || cert.current.read().unwrap().cert[0].to_vec();
        assert_eq!(served(), first);
        cert.reload_if_changed();
        assert_eq!(served(), first, "unchanged files: nothing reloaded");
        // A later modification time, as a renewal written by the kubelet would have.
        std::thread::sleep(Duration::from_millis(20));
        let second = write("b.example");
        let later = SystemTime::now() + Duration::from_secs(2);
        for p in [&cert_path, &key_path] {
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(later)
                .unwrap();
        }
        cert.reload_if_changed();
        assert_eq!(served(), second, "renewed files are served");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_key_that_is_not_pem_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("sweeper-tls-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        let made = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        std::fs::write(&c, made.cert.pem()).unwrap();
        std::fs::write(&k, "not a key").unwrap();
        let err = Certificate::load(CertSource::Files { cert: c, key: k }).unwrap_err();
        assert!(err.to_string().contains("tls.key"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
