//! HTTP/1.1 and HTTP/2 as a protocol of the registry: `http://` and `https://` URLs
//! (`--http2` for HTTP/2). The workload's request — method, path, headers, body — is its
//! [`Template`], prepared once as bytes ([`http::prepare`]) and shared by every worker; a
//! scenario's steps send their own, and over HTTP/2 go through hyper's client, which
//! decodes whole heads (cookies, extractions, checks). A status of 400 or more is a
//! failure. Its client is [`client`]: strainline's lean HTTP/1.1 ([`h1`]) and HTTP/2
//! ([`h2`]), or hyper's HTTP/2 for a scenario's whole heads. Its URL's resolution
//! ([`resolve`]: the address, the `Host`, TLS set up) also serves the protocols that
//! reach a server by host and port (gRPC, MQTT, [`super::endpoint`]); [`uri`] is what a
//! request target may hold and where a redirect goes.

use std::net::ToSocketAddrs;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use hyper::header::HeaderValue;
use hyper::{Method, Uri};

use super::{Ask, Connection, Fut, Protocol, Target};
use crate::load::client::Reply;
use crate::load::flow::{Keep, Kept};
use crate::load::recorder::ErrorKind;
use crate::load::request::{Body, Outgoing, Rendered, Template};
use crate::load::spec::{BodySpec, ClientOptions};

mod client;
mod h1;
mod h2;
mod uri;

use client as http;

pub struct Http;

impl Protocol for Http {
    fn name(&self) -> &'static str {
        "HTTP"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["http", "https"]
    }

    fn tls_schemes(&self) -> &'static [&'static str] {
        &["https"]
    }

    fn default_method(&self, has_body: bool) -> &'static str {
        if has_body {
            "POST"
        } else {
            "GET"
        }
    }

    fn plan(&'static self, ask: &Ask<'_>) -> crate::error::Result<Arc<dyn Target>> {
        let (mut target, uri) = resolve(ask.url, ask.options)?;
        // A scenario over HTTP/2 reads whole heads (its cookies, extractions, checks).
        target.whole_heads = target.http2 && ask.scenario;
        let template = template(&uri, ask.method, ask.headers, ask.body)?;
        // The requests' bytes, made once and shared by every worker (a 64 MiB body was
        // copied per worker and per pool entry: 1.6 GB at 8 MiB).
        let prepared = http::prepare(&template, &target);
        Ok(Arc::new(Planned(Arc::new(Sends {
            target,
            template,
            prepared,
        }))))
    }

    fn label(&self, code: u16) -> String {
        code.to_string()
    }

    fn keeps_bodies(&self) -> bool {
        true
    }

    fn reply_heads(&self) -> bool {
        true
    }

    fn status_range(&self) -> Option<(u16, u16)> {
        Some((100, 999))
    }
}

/// A URL that cannot be sent to, with the fix in the message.
fn bad(msg: impl std::fmt::Display) -> crate::Error {
    crate::Error::usage(msg.to_string())
}

/// Where HTTP requests go: the URL resolved once, TLS set up.
pub(in crate::load::proto) fn resolve(
    url: &str,
    client: &ClientOptions,
) -> crate::error::Result<(crate::load::net::Target, Uri)> {
    let uri: Uri = url.parse().map_err(|e| {
        bad(format!(
            "URL '{url}': {e} (expected e.g. http://127.0.0.1:8080/path)"
        ))
    })?;
    let scheme = uri.scheme_str().unwrap_or("");
    if !["http", "https"].contains(&scheme) {
        return Err(crate::load::spec::unknown_scheme(url));
    }
    let host = uri.host().ok_or_else(|| {
        bad(format!(
            "URL '{url}' has no host (e.g. http://127.0.0.1:8080/path)"
        ))
    })?;
    let tls = scheme == "https";
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let addr = (bare_host, port)
        .to_socket_addrs()
        .map_err(|e| bad(format!("URL '{url}': cannot resolve '{host}': {e}")).because(e))?
        .next()
        .ok_or_else(|| bad(format!("URL '{url}': '{host}' has no address")))?;
    let authority = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_default();
    if !tls && client.client_cert.is_some() {
        return Err(bad(format!(
            "URL '{url}': a client certificate (--cert/--key, a suite's cert/key) is shown over TLS; this URL is plain: use its TLS scheme (https://, wss://, grpcs://, mqtts://, rediss://) or leave the certificate out"
        )));
    }
    let tls = if tls {
        let cfg = crate::load::net::tls_config(
            client.cacert_pem.as_deref(),
            client.insecure,
            client.http2,
            client
                .client_cert
                .as_ref()
                .map(|(c, k)| (c.as_slice(), k.0.as_bytes())),
        )
        .map_err(bad)?;
        let name = rustls::pki_types::ServerName::try_from(bare_host.to_string()).map_err(|e| {
            bad(format!(
                "URL '{url}': '{host}' is not a valid TLS server name: {e}"
            ))
        })?;
        Some(crate::load::net::Tls::new(cfg, name))
    } else {
        None
    };
    let target = crate::load::net::Target {
        addr,
        host_header: HeaderValue::from_str(&authority)
            .map_err(|e| bad(format!("URL host: {e}")).because(e))?,
        tls,
        http2: client.http2,
        whole_heads: false,
    };
    Ok((target, uri))
}

/// The request every unit sends (the path from the URL).
pub fn template(
    uri: &Uri,
    method: &str,
    headers: &[(String, String)],
    body: &BodySpec,
) -> crate::error::Result<Template> {
    let bad = |m: String| crate::Error::usage(m);
    let method = Method::from_bytes(method.to_uppercase().as_bytes()).map_err(|_| {
        bad(format!(
            "method '{method}' is not an HTTP method (e.g. GET, POST)"
        ))
    })?;
    let parsed = crate::load::request::headers(headers)?;
    let path = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .parse()
        .map_err(|e| bad(format!("URL path: {e}")).because(e))?;
    Ok(Template {
        method,
        path,
        headers: parsed,
        body: Body::of(body),
    })
}

/// Where requests go and the workload's request, checked and prepared before the run,
/// shared by every connection.
struct Sends {
    target: crate::load::net::Target,
    template: Template,
    /// The template's requests as HTTP/1.1's bytes or HTTP/2's header blocks.
    prepared: Vec<Bytes>,
}

struct Planned(Arc<Sends>);

impl Target for Planned {
    fn protocol(&self) -> &'static dyn Protocol {
        &Http
    }

    fn describe(&self) -> String {
        format!(
            "HTTP/{}{}",
            if self.0.target.http2 { "2" } else { "1.1" },
            if self.0.target.tls.is_some() {
                " over TLS"
            } else {
                ""
            }
        )
    }

    fn handshakes(&self) -> bool {
        self.0.target.tls.is_some()
    }

    fn fit(&self, step: &mut Rendered) -> Result<(), super::Unfit> {
        if step
            .headers
            .iter()
            .any(|(k, _)| crate::load::request::frames_body(k))
        {
            // Only a script can add one (a step's are refused by `check`).
            return Err(super::Unfit {
                field: "headers",
                bad: None,
            });
        }
        uri::fit_path(&mut step.path).map_err(|_| super::Unfit {
            field: "path",
            bad: Some(uri::forbidden),
        })
    }

    fn origin(&self) -> (String, bool) {
        (
            self.0
                .target
                .host_header
                .to_str()
                .unwrap_or_default()
                .to_string(),
            self.0.target.tls.is_some(),
        )
    }

    fn redirect(&self, location: &str, path: &str) -> Option<String> {
        let (authority, secure) = self.origin();
        uri::within(location, path, &authority, secure)
    }

    fn connect(&self) -> Fut<'_, Result<Box<dyn Connection>, ErrorKind>> {
        Box::pin(async move {
            let conn = http::connect(&self.0.target).await?;
            Ok(Box::new(Conn {
                conn,
                to: self.0.clone(),
            }) as Box<dyn Connection>)
        })
    }
}

/// One HTTP connection and the plan it sends.
struct Conn {
    conn: http::Conn,
    to: Arc<Sends>,
}

impl Connection for Conn {
    fn fd(&self) -> RawFd {
        self.conn.fd
    }

    fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    fn share(&self) -> Option<Box<dyn Connection>> {
        let conn = self.conn.share()?;
        Some(Box::new(Conn {
            conn,
            to: self.to.clone(),
        }))
    }

    fn send<'a>(
        &'a mut self,
        step: Option<&'a Rendered>,
        seq: u64,
        _intended: Instant,
    ) -> Fut<'a, Result<Reply, ErrorKind>> {
        Box::pin(async move {
            let to = &*self.to;
            let (out, mut kept) = match step {
                None => (Outgoing::Workload(seq), None),
                Some(r) => (
                    Outgoing::Rendered(r),
                    (r.keep != Keep::Nothing).then(|| Box::new(Kept::new(r.keep))),
                ),
            };
            let done = http::send(
                &mut self.conn,
                &to.target,
                (&to.template, &to.prepared),
                out,
                &mut kept,
            )
            .await?;
            let mut reply = reply(done);
            reply.kept = kept;
            Ok(reply)
        })
    }

    fn poll_unit(
        &mut self,
        cx: &mut Context<'_>,
        first: bool,
        seq: u64,
        _intended: Instant,
    ) -> Option<Poll<Result<Reply, ErrorKind>>> {
        let to = &*self.to;
        let polled =
            http::poll_workload(&mut self.conn, cx, first, (&to.template, &to.prepared), seq)?;
        Some(polled.map(|r| r.map(reply)))
    }

    fn goodbye(self: Box<Self>) -> Fut<'static, ()> {
        Box::pin(async {})
    }
}

/// A response's status, body bytes and late tail as a unit's reply: a failure from 400.
fn reply((status, bytes, late_tail): (u16, u64, bool)) -> Reply {
    let mut reply = Reply::new(status, status < 400);
    reply.bytes = bytes;
    reply.late_tail = late_tail;
    reply
}

#[cfg(test)]
mod tests {
    use super::super::unit_size;
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn the_workload_s_request_is_its_template() {
        let uri: Uri = "http://127.0.0.1:9/x?y=1".parse().unwrap();
        let body = BodySpec::Bytes(b"hi".to_vec());
        let t = template(&uri, "post", &[("X-A".into(), "b".into())], &body).unwrap();
        assert_eq!(t.method, Method::POST);
        assert_eq!(t.path, "/x?y=1");
        assert_eq!(t.headers[0].0.as_str(), "x-a");
        let e = template(&uri, "G T", &[], &body).err().unwrap().to_string();
        assert!(e.contains("not an HTTP method"), "{e}");
    }

    #[test]
    fn a_large_random_body_is_shared_not_copied_64_times() {
        let uri: Uri = "http://127.0.0.1:9/".parse().unwrap();
        for (len, distinct) in [(100, 64), (8 << 20, 2), (64 << 20, 1)] {
            let body = BodySpec::Random { len, seed: 1 };
            let pool = match template(&uri, "POST", &[], &body).unwrap().body {
                Body::Random(p) => (p.len(), p.iter().map(|b| b.len()).sum::<usize>()),
                _ => panic!("a random body"),
            };
            assert_eq!(pool, (distinct, distinct * len), "{len}");
        }
    }

    /// Serves `n` keep-alive responses of 2 bytes on a thread of its own (its
    /// allocations are not the client's thread's), one per request read.
    fn serve_ok(n: usize) -> u16 {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut b = [0u8; 4096];
            for _ in 0..n {
                if s.read(&mut b).unwrap_or(0) == 0 {
                    return;
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        });
        port
    }

    /// The workload's unit on `conn`, polled in place as the driver polls it.
    async fn unit(conn: &mut dyn Connection, seq: u64) -> Result<Reply, ErrorKind> {
        let mut first = true;
        std::future::poll_fn(|cx| {
            let p = conn.poll_unit(cx, first, seq, Instant::now());
            first = false;
            p.expect("HTTP/1.1 polls its unit in place")
        })
        .await
    }

    fn connected(port: u16) -> impl std::future::Future<Output = Box<dyn Connection>> {
        let target = Http
            .plan(&Ask {
                url: &format!("http://127.0.0.1:{port}/x"),
                method: "GET",
                headers: &[],
                body: &BodySpec::Bytes(Vec::new()),
                options: &ClientOptions::default(),
                replay: false,
                scenario: false,
                open: false,
            })
            .unwrap();
        async move { target.connect().await.unwrap() }
    }

    /// Known truth: after the first few (the connection's buffers, the runtime's
    /// registrations), 200 units of HTTP/1.1 work make not one allocation on the
    /// driver's thread; each reply is the server's.
    #[test]
    fn a_unit_of_http1_work_allocates_nothing() {
        unit_size::run(async {
            let mut conn = connected(serve_ok(220)).await;
            for seq in 0..20 {
                assert_eq!(unit(&mut *conn, seq).await.unwrap().status, 200);
            }
            let before = super::super::counted::allocations();
            for seq in 20..220 {
                let r = unit(&mut *conn, seq).await.unwrap();
                assert_eq!((r.status, r.ok, r.bytes), (200, true, 2));
            }
            let made = super::super::counted::allocations() - before;
            assert_eq!(made, 0, "allocations in 200 units");
            assert!(!conn.is_closed());
        });
    }

    /// A unit dropped before its response came leaves its connection closed (the
    /// response, when it comes, is not the next unit's).
    #[test]
    fn a_unit_dropped_unfinished_closes_its_connection() {
        unit_size::run(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            tokio::task::spawn_local(async move {
                let (s, _) = listener.accept().await.unwrap();
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                drop(s);
            });
            let mut conn = connected(port).await;
            assert!(!conn.is_closed());
            let cut =
                tokio::time::timeout(std::time::Duration::from_millis(50), unit(&mut *conn, 0))
                    .await;
            assert!(cut.is_err(), "no response came");
            assert!(conn.is_closed());
        });
    }

    /// HTTP's request future is allocated and moved per request where it is sent
    /// (HTTP/2's requests, a scenario's steps; the workload's HTTP/1.1 units are polled
    /// in place): 416 bytes since hyper's branch is boxed apart (856 before: −1% to −4%
    /// requests per CPU-second on nginx's 1 KiB file, docs/performance.md).
    const FAST: usize = 512;

    #[test]
    fn a_request_s_future_stays_small() {
        unit_size::run(async {
            let port = unit_size::serving(|mut s| async move {
                let mut b = [0u8; 1024];
                let _ = s.read(&mut b).await;
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
            })
            .await;
            let size = unit_size::of(&Http, &format!("http://127.0.0.1:{port}/"), b"x").await;
            assert!(size <= FAST, "HTTP/1.1: {size} bytes");
        });
        // HTTP/2 (prior knowledge): the server's SETTINGS, then its ACK of the client's.
        unit_size::run(async {
            let port = unit_size::serving(|mut s| async move {
                let mut b = [0u8; 1024];
                let _ = s.read(&mut b).await;
                let _ = s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await;
                let _ = s.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]).await;
                let _ = s.read(&mut b).await;
            })
            .await;
            let options = crate::load::spec::ClientOptions {
                http2: true,
                ..Default::default()
            };
            let url = format!("http://127.0.0.1:{port}/");
            let size = unit_size::of_with(&Http, &url, b"x", &options).await;
            assert!(size <= FAST, "HTTP/2: {size} bytes");
        });
    }
}
