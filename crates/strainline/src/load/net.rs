//! A byte stream to a target, whatever protocol it carries: the address and TLS settings
//! resolved from a URL before the run ([`Target`], [`Tls`]), TCP without Nagle and TLS
//! (rustls) over it ([`open_stream`], [`Stream`]), and the I/O failures sorted into the
//! kinds a reader can act on (refused, reset, timeout, TLS, local resources).

use crate::error::Category;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::header::HeaderValue;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::recorder::ErrorKind;

/// Where a protocol's connections go, resolved and checked before the run: the address,
/// the `Host` (an HTTP request's, TLS's server name), TLS, and HTTP's choices.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub host_header: HeaderValue,
    pub tls: Option<Tls>,
    pub http2: bool,
    /// HTTP/2 through hyper's client, which decodes whole heads: a scenario's (its cookie
    /// jar, extractions, checks and script read them). HTTP's lean HTTP/2 client
    /// decodes `:status` alone.
    pub whole_heads: bool,
}

/// TLS for one run's connections: the client configuration, the server's name, and
/// whether the run has said why a handshake failed (its first failure only).
#[derive(Clone)]
pub struct Tls {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
    failure_told: Arc<std::sync::atomic::AtomicBool>,
}

impl Tls {
    pub fn new(config: rustls::ClientConfig, name: ServerName<'static>) -> Tls {
        Tls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            name,
            failure_told: Arc::default(),
        }
    }
}

/// A byte stream to a server: plain TCP or TLS over TCP.
pub enum Stream {
    Tcp(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
}

impl Stream {
    pub async fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(b).await,
            Stream::Tls(s) => {
                s.write_all(b).await?;
                s.flush().await
            }
        }
    }

    pub async fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(b).await,
            Stream::Tls(s) => s.read(b).await,
        }
    }
}

/// The stream as tokio's traits, for the protocols that take any stream (WebSocket).
impl tokio::io::AsyncRead for Stream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Stream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => std::pin::Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

pub fn io_kind(e: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => ErrorKind::Refused,
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
            ErrorKind::Reset
        }
        K::TimedOut => ErrorKind::Timeout,
        K::AddrNotAvailable | K::OutOfMemory => ErrorKind::LocalResources,
        _ => match e.raw_os_error() {
            Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) => {
                ErrorKind::LocalResources
            }
            _ => ErrorKind::Connect,
        },
    }
}

/// A byte stream to `addr`: TCP (no Nagle), then TLS if asked; with the socket's
/// descriptor for the driver's watchdog.
pub async fn open_stream(
    addr: SocketAddr,
    tls: &Option<Tls>,
) -> Result<(Stream, std::os::fd::RawFd), ErrorKind> {
    use std::os::fd::AsRawFd;
    let tcp = TcpStream::connect(addr).await.map_err(|e| io_kind(&e))?;
    let _ = tcp.set_nodelay(true);
    let fd = tcp.as_raw_fd();
    let stream = match tls {
        Some(t) => {
            let tls =
                t.connector
                    .connect(t.name.clone(), tcp)
                    .await
                    .map_err(|e| match io_kind(&e) {
                        ErrorKind::Connect => {
                            tls_failed(t, addr, &e);
                            ErrorKind::Tls
                        }
                        k => k,
                    })?;
            Stream::Tls(Box::new(tls))
        }
        None => Stream::Tcp(tcp),
    };
    Ok((stream, fd))
}

/// Says why the first TLS handshake of the run failed (later ones are counted as `tls`):
/// the count alone does not tell a certificate not trusted from one for another name,
/// or a CA certificate served as a server's own.
fn tls_failed(tls: &Tls, addr: SocketAddr, e: &std::io::Error) {
    if !tls
        .failure_told
        .swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        let text = e.to_string();
        let why = crate::units::one_line(&text);
        tracing::warn!("TLS handshake with {addr} failed: {why}");
    }
}

/// A rustls client configuration: trusting `ca_pem` (the certificate a test server
/// printed), or anything at all with `insecure`.
pub fn tls_config(
    ca_pem: Option<&[u8]>,
    insecure: bool,
    http2: bool,
    client: Option<(&[u8], &[u8])>,
) -> crate::error::Result<rustls::ClientConfig> {
    let mut cfg = server_trust(ca_pem, insecure, client)?;
    cfg.alpn_protocols = if http2 {
        vec![b"h2".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(cfg)
}

/// The client's certificate chain and key, read from PEM (`--cert`, `--key`).
fn client_identity(
    (cert_pem, key_pem): (&[u8], &[u8]),
) -> crate::error::Result<(
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
)> {
    use rustls::pki_types::pem::PemObject;
    let der = |b: &[u8]| b.first() == Some(&0x30);
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .usage_with(|e| format!("--cert: not a PEM certificate file: {e:?}"))?;
    if certs.is_empty() {
        return Err(crate::Error::usage(if der(cert_pem) {
            "--cert: a DER certificate, not PEM: convert it (openssl x509 -inform der -in CERT -out cert.pem)"
        } else {
            "--cert: no certificate in the file (give the client's certificate, PEM: -----BEGIN CERTIFICATE-----)"
        }));
    }
    let encrypted = key_pem.windows(9).any(|w| w == b"ENCRYPTED");
    if encrypted {
        return Err(crate::Error::usage(
            "--key: the key is encrypted (a passphrase): strainline reads keys without one — decrypt a copy for the test (openssl pkey -in KEY -out plain.key)",
        ));
    }
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|_| {
            if der(key_pem) {
                "--key: a DER key, not PEM: convert it (openssl pkey -inform der -in KEY -out key.pem)".to_string()
            } else {
                "--key: no private key in the file: give the certificate's key, PEM (PKCS#8 -----BEGIN PRIVATE KEY-----, RSA or EC)".to_string()
            }
        })
        .usage()?;
    Ok((certs, key))
}

/// Whom the client trusts, and what it shows when the server asks (mutual TLS).
fn server_trust(
    ca_pem: Option<&[u8]>,
    insecure: bool,
    client: Option<(&[u8], &[u8])>,
) -> crate::error::Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .environment()?;
    let identity = client.map(client_identity).transpose()?;
    let with_identity =
        |b: rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>| {
            match identity {
                None => Ok(b.with_no_client_auth()),
                Some((certs, key)) => b.with_client_auth_cert(certs, key).usage_with(|e| match e {
                    rustls::Error::InconsistentKeys(_) => {
                        "--cert/--key: the key is not the certificate's (their public keys differ)"
                            .to_string()
                    }
                    e => format!("--cert/--key: {e}"),
                }),
            }
        };
    if insecure {
        with_identity(
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider))),
        )
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let pem = ca_pem.ok_or(
            "an https URL needs --cacert FILE (the server's certificate or CA, PEM) or --insecure",
        ).usage()?;
        for cert in rustls_pemfile_certs(pem)? {
            roots.add(cert).usage_with(|e| format!("--cacert: {e}"))?;
        }
        with_identity(builder.with_root_certificates(roots))
    }
}

/// The certificates in a PEM file.
fn rustls_pemfile_certs(
    pem: &[u8],
) -> crate::error::Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .usage_with(|e| format!("--cacert: not a PEM certificate file: {e:?}"))?;
    if certs.is_empty() {
        return Err(crate::Error::usage("--cacert: no certificate in the file"));
    }
    Ok(certs)
}

/// `--insecure`: accepts any certificate (signatures are still checked for form).
#[derive(Debug)]
struct AcceptAnything(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
