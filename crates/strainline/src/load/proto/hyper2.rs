//! HTTP/2 through hyper's client, for what reads whole responses: gRPC's calls (their
//! trailers and messages) and an HTTP scenario's requests over HTTP/2 (whole heads for its
//! cookies, extractions and checks). The lean client of the load's fast path is
//! HTTP's own (`http/client.rs`).

use std::os::fd::RawFd;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH};
use hyper::{Method, Request, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::load::net::{io_kind, open_stream, Stream, Target};
use crate::load::recorder::ErrorKind;

/// An HTTP/2 connection through hyper's client, and its socket's descriptor (for the
/// driver's watchdog).
pub struct Conn {
    send: http2::SendRequest<Full<Bytes>>,
    pub fd: RawFd,
}

impl Conn {
    /// Opens one to `t`: TCP, TLS if asked, the HTTP/2 handshake.
    pub async fn connect(t: &Target) -> Result<Conn, ErrorKind> {
        let (stream, fd) = open_stream(t.addr, &t.tls).await?;
        let send = match stream {
            Stream::Tcp(s) => h2_handshake(TokioIo::new(s)).await?,
            Stream::Tls(s) => h2_handshake(TokioIo::new(s)).await?,
        };
        Ok(Conn { send, fd })
    }

    /// Another handle on it: hyper multiplexes their requests as streams.
    pub fn share(&self) -> Conn {
        Conn {
            send: self.send.clone(),
            fd: self.fd,
        }
    }

    pub fn is_closed(&self) -> bool {
        self.send.is_closed()
    }

    /// Sends `req` and reads the whole response, data frames to `data`, trailers kept
    /// (gRPC's status is there).
    pub async fn send(
        &mut self,
        req: Request<Full<Bytes>>,
        mut data: impl FnMut(&Bytes),
    ) -> Result<Response, ErrorKind> {
        let s = &mut self.send;
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
        Ok(Response {
            status,
            headers: parts.headers,
            trailers,
        })
    }
}

/// What an HTTP/2 response brought: its status and headers (its body's data frames went
/// to [`Conn::send`]'s `data` as they came), and its trailers.
pub struct Response {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub trailers: Option<hyper::HeaderMap>,
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
pub fn request(
    method: &Method,
    uri: Uri,
    headers: &[(HeaderName, HeaderValue)],
    body: Bytes,
) -> Request<Full<Bytes>> {
    let length = crate::load::request::sends_length(method, &body);
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
