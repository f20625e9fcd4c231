//! The HTTP client side of the load engine: a target resolved once, connections over
//! TCP or TLS (rustls) speaking HTTP/1.1 keep-alive or HTTP/2 (hyper), and failures
//! sorted into kinds a reader can act on (refused, reset, timeout, TLS, local
//! resources). Requests are built from a template; random payloads come from a pool
//! generated once, so the generator spends its CPU on sending, not on random numbers.

use crate::error::Category;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH};
use hyper::{Method, Request, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::recorder::ErrorKind;
use super::request::{Body, Outgoing, Template};

/// Where requests go, resolved and checked before the run.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub host_header: HeaderValue,
    pub tls: Option<Tls>,
    pub http2: bool,
    /// HTTP/2 through hyper's client, which decodes whole heads: a scenario's (its cookie
    /// jar, extractions, checks and script read them). The fast path ([`super::h2`])
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

/// `template`'s requests as prepared before the run: HTTP/1.1's bytes on the wire, or
/// HTTP/2's header blocks (the body is sent from the template); one per distinct
/// body (a random body pool gives several).
pub fn prepare(template: &Template, target: &Target) -> Vec<Bytes> {
    let bodies: Vec<Bytes> = match &template.body {
        Body::Empty => vec![Bytes::new()],
        Body::Fixed(b) => vec![b.clone()],
        Body::Random(pool) => pool.as_ref().clone(),
    };
    let path = template.path.to_string();
    bodies
        .into_iter()
        .map(|body| {
            if target.http2 {
                return Bytes::from(h2_block(
                    &template.method,
                    &path,
                    target,
                    &template.headers,
                    &body,
                ));
            }
            let mut w = Vec::with_capacity(256 + body.len());
            write_h1(
                &template.method,
                &path,
                target,
                &template.headers,
                &body,
                &mut w,
            );
            Bytes::from(w)
        })
        .collect()
}

fn sends_length(method: &Method, body: &[u8]) -> bool {
    !body.is_empty() || matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

/// Writes an HTTP/1.1 request.
fn write_h1(
    method: &Method,
    path: &str,
    target: &Target,
    headers: &[(HeaderName, HeaderValue)],
    body: &[u8],
    w: &mut Vec<u8>,
) {
    w.extend_from_slice(method.as_str().as_bytes());
    w.push(b' ');
    w.extend_from_slice(path.as_bytes());
    w.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    w.extend_from_slice(target.host_header.as_bytes());
    w.extend_from_slice(b"\r\n");
    let length = sends_length(method, body);
    for (k, v) in headers {
        if length && *k == CONTENT_LENGTH {
            continue;
        }
        w.extend_from_slice(k.as_str().as_bytes());
        w.extend_from_slice(b": ");
        w.extend_from_slice(v.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    if length {
        w.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    w.extend_from_slice(b"\r\n");
    w.extend_from_slice(body);
}

/// An HTTP/2 request's header block (see [`super::h2::encode`]).
fn h2_block(
    method: &Method,
    path: &str,
    target: &Target,
    headers: &[(HeaderName, HeaderValue)],
    body: &[u8],
) -> Vec<u8> {
    let length = sends_length(method, body).then_some(body.len());
    let https = target.tls.is_some();
    super::h2::encode(
        method.as_str(),
        https,
        target.host_header.as_bytes(),
        path,
        headers,
        length,
    )
}

/// Builds a hyper request (HTTP/2 wants the full URI: it carries :scheme and :authority).
/// `path` on `target` as an absolute URI (what hyper's HTTP/2 client sends).
pub fn absolute(target: &Target, path: &str) -> Uri {
    let scheme = if target.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let authority = target.host_header.to_str().unwrap_or("localhost");
    format!("{scheme}://{authority}{path}")
        .parse::<Uri>()
        .unwrap_or_default()
}

/// A request as hyper wants it, to `uri` (see [`absolute`]).
pub(super) fn hyper_request(
    method: &Method,
    uri: Uri,
    headers: &[(HeaderName, HeaderValue)],
    body: Bytes,
) -> Request<Full<Bytes>> {
    let length = sends_length(method, &body);
    let len = body.len();
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri;
    let h = req.headers_mut();
    if length {
        h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
    for (k, v) in headers {
        h.insert(k.clone(), v.clone());
    }
    req
}

/// One open connection, and its socket's descriptor so that the driver's watchdog can
/// cut a request that overran its timeout (`shutdown(2)`), whatever protocol runs on it.
pub struct Conn {
    kind: Kind,
    pub fd: std::os::fd::RawFd,
}

enum Kind {
    /// HTTP/1.1: strainline's own lean client.
    H1(super::h1::H1),
    /// HTTP/2: strainline's own lean client, a handle per stream loop.
    H2(super::h2::H2),
    /// HTTP/2 through hyper, for gRPC (trailers and messages).
    Hyper(http2::SendRequest<Full<Bytes>>),
}

impl Conn {
    /// Another handle on this HTTP/2 connection (hyper multiplexes their requests as
    /// streams); `None` for HTTP/1.1.
    pub fn share(&self) -> Option<Conn> {
        match &self.kind {
            Kind::H2(s) => Some(Conn {
                kind: Kind::H2(s.clone()),
                fd: self.fd,
            }),
            Kind::Hyper(s) => Some(Conn {
                kind: Kind::Hyper(s.clone()),
                fd: self.fd,
            }),
            Kind::H1(_) => None,
        }
    }

    pub fn is_closed(&self) -> bool {
        match &self.kind {
            Kind::H1(h) => !h.reusable,
            Kind::H2(s) => s.is_closed(),
            Kind::Hyper(s) => s.is_closed(),
        }
    }
}

pub(super) fn io_kind(e: &std::io::Error) -> ErrorKind {
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
pub(super) async fn open_stream(
    addr: SocketAddr,
    tls: &Option<Tls>,
) -> Result<(super::h1::Stream, std::os::fd::RawFd), ErrorKind> {
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
            super::h1::Stream::Tls(Box::new(tls))
        }
        None => super::h1::Stream::Tcp(tcp),
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

/// Opens a connection (TCP, then TLS if asked, then the HTTP/2 handshake if asked).
pub async fn connect(t: &Target) -> Result<Conn, ErrorKind> {
    if t.http2 && t.whole_heads {
        return connect_hyper(t).await;
    }
    let (stream, fd) = open_stream(t.addr, &t.tls).await?;
    let kind = if t.http2 {
        Kind::H2(super::h2::H2::handshake(stream).await?)
    } else {
        Kind::H1(super::h1::H1::new(stream))
    };
    Ok(Conn { kind, fd })
}

/// Opens an HTTP/2 connection through hyper's client (gRPC's: trailers, messages).
pub async fn connect_hyper(t: &Target) -> Result<Conn, ErrorKind> {
    let (stream, fd) = open_stream(t.addr, &t.tls).await?;
    let send = match stream {
        super::h1::Stream::Tcp(s) => h2_handshake(TokioIo::new(s)).await?,
        super::h1::Stream::Tls(s) => h2_handshake(TokioIo::new(s)).await?,
    };
    Ok(Conn {
        kind: Kind::Hyper(send),
        fd,
    })
}

async fn h2_handshake<I>(io: TokioIo<I>) -> Result<http2::SendRequest<Full<Bytes>>, ErrorKind>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = http2::handshake(TokioExecutor::new(), io)
        .await
        .map_err(|e| hyper_kind(&e))?;
    tokio::spawn(conn);
    Ok(send)
}

fn hyper_kind(e: &hyper::Error) -> ErrorKind {
    if e.is_timeout() {
        return ErrorKind::Timeout;
    }
    if e.is_parse() || e.is_parse_status() || e.is_user() {
        return ErrorKind::Protocol;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io_kind(io);
        }
        src = s.source();
    }
    ErrorKind::Reset
}

/// Sends a request and reads the whole response. Returns its status, its body size and
/// whether its body came late after its head (HTTP/1.1: [`super::recorder::LATE_TAIL`]).
/// `keep` gets its head and body (HTTP/1.1; a flow over HTTP/2 is refused by its plan).
/// `workload`: the workload's request and its prepared forms ([`prepare`]).
pub async fn send(
    conn: &mut Conn,
    target: &Target,
    (t, prepared): (&Template, &[Bytes]),
    out: Outgoing<'_>,
    keep: Option<&mut super::flow::Kept>,
) -> Result<(u16, u64, bool), ErrorKind> {
    match &mut conn.kind {
        Kind::H1(h) => match out {
            Outgoing::Workload(seq) => {
                let req = &prepared[(seq % prepared.len() as u64) as usize];
                h.exchange(req, t.method == Method::HEAD, keep).await
            }
            Outgoing::Rendered(r) => {
                let mut w = Vec::with_capacity(256 + r.body.len());
                write_h1(&r.method, &r.path, target, &r.headers, &r.body, &mut w);
                h.exchange(&w, r.method == Method::HEAD, keep).await
            }
        },
        Kind::H2(h) => {
            let (status, bytes) = match out {
                Outgoing::Workload(seq) => {
                    let block = &prepared[(seq % prepared.len() as u64) as usize];
                    h.exchange(block, t.body.pick(seq)).await?
                }
                Outgoing::Rendered(r) => {
                    let block = h2_block(&r.method, &r.path, target, &r.headers, &r.body);
                    h.exchange(&block, r.body.clone()).await?
                }
            };
            Ok((status, bytes, false))
        }
        Kind::Hyper(_) => {
            let req = match out {
                Outgoing::Workload(seq) => hyper_request(
                    &t.method,
                    absolute(target, t.path.path_and_query().map_or("/", |p| p.as_str())),
                    &t.headers,
                    t.body.pick(seq),
                ),
                Outgoing::Rendered(r) => hyper_request(
                    &r.method,
                    absolute(target, &r.path),
                    &r.headers,
                    r.body.clone(),
                ),
            };
            let mut bytes = 0u64;
            let mut keep = keep;
            let r = send_h2(conn, req, |d| {
                bytes += d.len() as u64;
                if let Some(k) = keep.as_deref_mut() {
                    k.take_body(d);
                }
            })
            .await?;
            if let Some(k) = keep {
                for (name, value) in &r.headers {
                    k.take_header(name.as_str(), value.as_bytes());
                }
            }
            Ok((r.status, bytes, false))
        }
    }
}

/// What an HTTP/2 response brought: its status and headers, its body's data frames
/// (each handed to `data` as it comes), and its trailers.
pub struct H2Response {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub trailers: Option<hyper::HeaderMap>,
}

/// Sends `req` on an HTTP/2 connection and reads the whole response, data frames to
/// `data`, trailers kept (gRPC's status is there). Not for HTTP/1.1 connections.
pub async fn send_h2(
    conn: &mut Conn,
    req: Request<Full<Bytes>>,
    mut data: impl FnMut(&Bytes),
) -> Result<H2Response, ErrorKind> {
    let Kind::Hyper(s) = &mut conn.kind else {
        return Err(ErrorKind::Protocol);
    };
    s.ready().await.map_err(|e| hyper_kind(&e))?;
    let resp = s.send_request(req).await.map_err(|e| hyper_kind(&e))?;
    let status = resp.status().as_u16();
    let (parts, mut body) = resp.into_parts();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| hyper_kind(&e))?;
        match frame.into_data() {
            Ok(d) => data(&d),
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(t);
                }
            }
        }
    }
    Ok(H2Response {
        status,
        headers: parts.headers,
        trailers,
    })
}

/// A rustls client configuration: trusting `ca_pem` (the certificate a test server
/// printed), or anything at all with `insecure`.
pub fn tls_config(
    ca_pem: Option<&[u8]>,
    insecure: bool,
    http2: bool,
) -> crate::error::Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())
        .environment()?;
    let mut cfg = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let pem = ca_pem.ok_or(
            "an https URL needs --cacert FILE (the server's certificate or CA, PEM) or --insecure",
        ).usage()?;
        for cert in rustls_pemfile_certs(pem)? {
            roots
                .add(cert)
                .map_err(|e| format!("--cacert: {e}"))
                .usage()?;
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    cfg.alpn_protocols = if http2 {
        vec![b"h2".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(cfg)
}

/// The certificates in a PEM file.
fn rustls_pemfile_certs(
    pem: &[u8],
) -> crate::error::Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--cacert: not a PEM certificate file: {e:?}"))
        .usage()?;
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
