//! One HTTP request to a target that is starting or being prepared: the readiness probe
//! (`ready = "http(s)://…"`), a suite's set-up requests, a rounds test's quiesce hook,
//! `init`'s look at a server — and the OTLP push of live figures, which is the same
//! one request. HTTP/1.1 over hyper, `http://` and `https://`; the answer is the status
//! code, or nothing when there is none within the time given.
//!
//! An `https://` probe accepts any certificate: it asks whether the target strainline
//! started answers yet, on an address the suite names, and a test server's certificate
//! is self-signed more often than not (the load itself checks certificates as told:
//! `--cacert`, `--insecure`).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Uri;
use hyper_util::rt::TokioIo;

/// How long a probe may take, connection and answer together.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// `method url` with `body`; its status code, or `None` (no answer, not HTTP, a URL
/// that is neither http:// nor https://).
pub fn request(method: &str, url: &str, body: &str) -> Option<u16> {
    send(method, url, &[], body.as_bytes(), TIMEOUT)
}

/// [`request`] with headers of its own and a time limit.
pub fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Option<u16> {
    let uri: Uri = url.parse().ok()?;
    let tls = crate::load::proto::tls_if_http(uri.scheme_str()?)?;
    let method = hyper::Method::from_bytes(method.as_bytes()).ok()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let mut req = hyper::Request::builder().method(method);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = Bytes::copy_from_slice(body);
    rt.block_on(async {
        tokio::time::timeout(timeout, connect_and_send(req, uri, tls, body))
            .await
            .ok()?
    })
}

async fn connect_and_send(
    req: hyper::http::request::Builder,
    uri: Uri,
    tls: bool,
    body: Bytes,
) -> Option<u16> {
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host, port)).await.ok()?;
    let _ = tcp.set_nodelay(true);
    let authority = uri.authority()?.as_str().to_string();
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let req = req
        .uri(path)
        .header(hyper::header::HOST, authority)
        .body(Full::new(body))
        .ok()?;
    if tls {
        let cfg = crate::load::net::tls_config(None, true, false, None).ok()?;
        let name = rustls::pki_types::ServerName::try_from(host.to_string()).ok()?;
        let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
            .connect(name, tcp)
            .await
            .ok()?;
        exchange(TokioIo::new(stream), req).await
    } else {
        exchange(TokioIo::new(tcp), req).await
    }
}

/// One request on a fresh connection; the response's status.
async fn exchange<T>(io: T, req: hyper::Request<Full<Bytes>>) -> Option<u16>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.ok()?;
    let driver = tokio::spawn(conn);
    let status = sender.send_request(req).await.ok()?.status().as_u16();
    driver.abort();
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A server that answers one request with `status` and returns what it read.
    fn once(status: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/health?x=1", l.local_addr().unwrap());
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            write!(s, "HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        (url, t)
    }

    #[test]
    fn a_probe_sends_the_method_path_host_and_body_and_reads_the_status() {
        let (url, server) = once("503 Service Unavailable");
        assert_eq!(request("POST", &url, "seed=1"), Some(503));
        let seen = server.join().unwrap();
        assert!(seen.starts_with("POST /health?x=1 HTTP/1.1\r\n"), "{seen}");
        assert!(
            seen.to_ascii_lowercase().contains("\r\nhost: 127.0.0.1:"),
            "{seen}"
        );
        assert!(seen.ends_with("\r\n\r\nseed=1"), "{seen}");
    }

    #[test]
    fn nothing_listening_or_another_scheme_is_no_answer() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert_eq!(
            request("GET", &format!("http://127.0.0.1:{port}/"), ""),
            None
        );
        assert_eq!(request("GET", "ftp://127.0.0.1/", ""), None);
    }
}
